// xsampler/filters/top_n_sigma.hpp — top_n_sigma, its threshold decided exactly. (xsampler, BSD-3-Clause)
//
// A filter (stage.hpp) that reads the spread of the kept set's logits before
// it cuts: validated when constructed (invalid_parameter naming the stage,
// the parameter, the range and the value); min_keep as filters.hpp states it.
//
// top_n_sigma{N, min_keep = 1} (llama.cpp)
//   Keeps the tokens whose logit x satisfies x >= M - N·sigma, M the best
//   logit and sigma the population standard deviation of the finite logits
//   of the current set (masked tokens excluded). N <= 0 disables it. A
//   prefix of the rank that always holds the argmax; if it would keep fewer
//   than min_keep tokens, the min_keep best-ranked are kept instead. It is
//   invariant to temperature: every logit, M and sigma scale alike, so it
//   reads the logits as they are (the deferred scale plays no part).
//   The decision is the one exact arithmetic makes on the row's own values:
//   keep iff count^2 (M - x)^2 <= N^2 (count·sum x^2 - (sum x)^2). sigma is
//   first estimated in one SIMD pass (logit minus M, and its square, summed
//   in T within 64-token blocks, the blocks in double) with a proven bound on
//   its error; a token is kept or dropped on that estimate only when the
//   bound settles it, and the rare token within the bound of the threshold
//   is re-decided with exact sums (detail/expansion.hpp). Guaranteed exact
//   for every float row and for double rows whose finite nonzero logits lie
//   within [2^-300, 2^300] in magnitude, for N in [2^-64, 2^64]; outside
//   those ranges such a token is decided in double. llama.cpp computes the
//   mean and the deviation in float and keeps x >= max - N·std in float.
#ifndef XSAMPLER_FILTERS_TOP_N_SIGMA_HPP
#define XSAMPLER_FILTERS_TOP_N_SIGMA_HPP

#include <bitset>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>

#include "../candidates.hpp"
#include "../detail/expansion.hpp"
#include "../stage.hpp"
#include "top_k.hpp"

namespace xsampler
{
    class top_n_sigma
    {
    public:
        static constexpr const char* name = "top_n_sigma";
        static constexpr bool keeps_rank_prefix = true;

        explicit top_n_sigma(double n, std::size_t min_keep = 1)
            : m_n(n), m_min_keep(detail::min_keep_of(min_keep))
        {
            if (!std::isfinite(n))
            {
                throw invalid_parameter("top_n_sigma: n must be finite (<= 0 disables it), got " +
                                        detail::format_value(n));
            }
        }
        double value() const noexcept { return m_n; }
        std::size_t min_keep() const noexcept { return m_min_keep; }
        /// The stage in words, as sampler::describe_stages gives it.
        std::string describe() const
        {
            return detail::with_min_keep(std::string(name) + " " + detail::format_value(m_n), m_min_keep);
        }

        template <class T>
        void apply(candidates<T>& c) const
        {
            if (m_n <= 0.0)
            {
                return;
            }
            decision<T> d(c, m_n);
            if (d.count <= 1)
            {
                return;
            }
            if (m_min_keep > 1)
            {
                if (m_min_keep >= d.count)
                {
                    return;
                }
                if (!d.keeps(detail::kth_logit(c, m_min_keep)))
                {
                    c.keep_top(m_min_keep);
                    return;
                }
            }
            if (!c.dense())
            {
                // The exact sums, if a token needs them, are read from this
                // list before it changes.
                for (const auto& item : c.items())
                {
                    if (item.logit >= d.x_drop && item.logit < d.x_keep)
                    {
                        d.exact_sums();
                        break;
                    }
                }
            }
            c.keep_logit_at_least(d.x_drop);
            bool band = false;
            for (const auto& item : c.items())
            {
                band = band || item.logit < d.x_keep;
            }
            if (band)
            {
                c.retain_if([&](token_id, T x) { return x >= d.x_keep || d.keeps(x); }, name);
            }
        }

    private:
        /// The threshold of one call: x >= x_keep keeps (proven), x < x_drop
        /// drops (proven), and keeps(x) decides exactly in between.
        template <class T>
        struct decision
        {
            candidates<T>& c;
            double n;
            std::size_t count = 0;
            T m;
            T x_keep;
            T x_drop;
            bool dense;  // the set as it was: the row's unmasked tokens
            bool exact_ready = false;
            bool exact_valid = true;  // every logit within the expansions' range
            detail::expansion s1;     // sum x
            detail::expansion s2;     // sum x^2

            decision(candidates<T>& set, double n_sigma)
                : c(set), n(n_sigma), m(set.max_logit()), dense(set.dense())
            {
                constexpr double u = 0x1p-53;
                constexpr double ut = std::numeric_limits<T>::epsilon() / 2;
                double a = 0.0;  // sum (x - m), then sum (x - m)^2
                double b = 0.0;
                if (dense)
                {
                    c.for_each_stored_run([&](const auto* x, std::size_t, std::size_t len) { sums(x, len, a, b); });
                }
                else
                {
                    for (const auto& item : c.items())
                    {
                        const T d = item.logit - m;
                        a += double(d);
                        b += double(d * d);
                        ++count;
                    }
                }
                const double nn = double(count);
                // Each d = x - m and d^2 is rounded in T, then summed in T over
                // at most 64 terms of a lane and the lanes (at most 80
                // roundings in T), then in double over at most `count` terms:
                // relative bounds on sum |d| = -a and on b (every d <= 0).
                const double rel_a = 1.01 * (80.0 * ut + nn * u);
                const double rel_b = 1.01 * (83.0 * ut + nn * u);
                const double ea = rel_a * std::fabs(a) / (1.0 - rel_a);
                const double v = nn * b - a * a;  // count^2 sigma^2
                const double err = 1.1 * (nn * b * rel_b / (1.0 - rel_b) + 2.0 * std::fabs(a) * ea + ea * ea +
                                          4.0 * u * (nn * b + a * a));
                const T lowest = -std::numeric_limits<T>::max();
                if (!(std::isfinite(v) && std::isfinite(err)))
                {
                    // x - m overflowed T: every token is decided exactly.
                    x_keep = m;
                    x_drop = lowest;
                    return;
                }
                const double theta_lo = n * std::sqrt(std::max(0.0, v - err)) / nn * (1.0 - 8.0 * u);
                const double theta_hi = n * std::sqrt(v + err) / nn * (1.0 + 8.0 * u);
                // With e = fl(m - x) in double, the exact m - x lies within
                // e / (1 -+ u): below fl(e (1 + 4u)) and above fl(e (1 - 2u)).
                const double md = double(m);
                x_keep = least_where([&](T x) { return (md - double(x)) * (1.0 + 4.0 * u) <= theta_lo; });
                x_drop = least_where([&](T x) { return !((md - double(x)) * (1.0 - 2.0 * u) > theta_hi); });
            }

            template <class S>
            void sums(const S* x, std::size_t len, double& a, double& b)
            {
                using B = detail::batch<T>;
                const B vm(m);
                const B zero(T(0));
                const B ninf(-std::numeric_limits<T>::infinity());
                std::size_t i = 0;
                while (i + B::size <= len)
                {
                    const std::size_t end = std::min(len - len % B::size, i + detail::block_size);
                    B acc_a = zero;
                    B acc_b = zero;
                    for (; i < end; i += B::size)
                    {
                        const B v = detail::load_logits<T>(x + i);
                        const auto finite = v != ninf;
                        const B d = xsimd::select(finite, v - vm, zero);
                        acc_a = acc_a + d;
                        acc_b = acc_b + d * d;
                        count += std::bitset<32>(detail::mask_bits(finite)).count();
                    }
                    a += double(xsimd::hadd(acc_a));
                    b += double(xsimd::hadd(acc_b));
                }
                for (; i < len; ++i)
                {
                    const T xi = x[i];
                    if (xi != -std::numeric_limits<T>::infinity())
                    {
                        const T d = xi - m;
                        a += double(d);
                        b += double(d * d);
                        ++count;
                    }
                }
            }

            /// The least T in [-max, m] that passes a test monotone in x which
            /// m passes and -inf fails.
            template <class Test>
            T least_where(Test test) const
            {
                const T x = detail::least_logit_where(m, test);
                return std::max(x, -std::numeric_limits<T>::max());
            }

            /// The exact sums of x and x^2 over the finite logits of the set as
            /// it was (a dense set's: the row; a list's: before it changes).
            void exact_sums()
            {
                if (exact_ready)
                {
                    return;
                }
                exact_ready = true;
                const auto add = [&](T x) {
                    if (x == -std::numeric_limits<T>::infinity())
                    {
                        return;
                    }
                    const double v = double(x);
                    const double mag = std::fabs(v);
                    exact_valid = exact_valid && (mag == 0.0 || (mag >= 0x1p-300 && mag <= 0x1p300));
                    double p, e;
                    detail::two_product(v, v, p, e);
                    s1.add(v);
                    s2.add(e);
                    s2.add(p);
                };
                if (dense)
                {
                    c.for_each_stored_run([&](const auto* x, std::size_t, std::size_t len) {
                        for (std::size_t i = 0; i < len; ++i)
                        {
                            add(T(x[i]));
                        }
                    });
                }
                else
                {
                    for (const auto& item : c.items())
                    {
                        add(item.logit);
                    }
                }
            }

            /// Whether x passes: proven by the bound, or decided exactly.
            bool keeps(T x)
            {
                if (x >= x_keep)
                {
                    return true;
                }
                if (x < x_drop)
                {
                    return false;
                }
                exact_sums();
                const double nn = double(count);
                if (!exact_valid || !(n >= 0x1p-64 && n <= 0x1p64))
                {
                    // Outside the expansions' range: decided in double.
                    const double mean = s1.approx() / nn;
                    const double var = std::max(0.0, s2.approx() / nn - mean * mean);
                    return double(m) - double(x) <= n * std::sqrt(var);
                }
                // count^2 (m - x)^2 <= n^2 (count s2 - s1^2)
                detail::expansion rhs = s2.times(nn);
                rhs.add(s1.times(s1).negated());
                rhs = rhs.times(n).times(n);
                detail::expansion d{double(m)};
                d.add(-double(x));
                rhs.add(d.times(d).times(nn).times(nn).negated());
                return rhs.sign() >= 0;
            }
        };

        double m_n;
        std::size_t m_min_keep;
    };
}

#endif
