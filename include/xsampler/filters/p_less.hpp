// xsampler/filters/p_less.hpp — p-less sampling: keep p_i >= sum p_j^2, exactly. (xsampler, BSD-3-Clause)
//
// A filter (stage.hpp): a small value type with `apply(candidates<T>&)`;
// min_keep as filters.hpp states it.
//
// p_less{[min_keep]} (no parameter: the distribution sets its own level)
//   With p_i the current probabilities (temperature so far included), keeps
//   the tokens with p_i >= sum_j p_j^2, the probability that two independent
//   draws agree. The best token always passes (sum p_j^2 <= p_max sum p_j =
//   p_max), so the set is never empty; a set of tied tokens keeps all of
//   them (p_i = sum p_j^2 = 1/n exactly); a confident step keeps few, a
//   flat one many. {0.10, 0.15, 0.20, 0.25, 0.30} has sum p^2 = 0.225 and
//   keeps {0.25, 0.30}, renormalised to {0.4545..., 0.5454...}.
//   Exact: with W_j = e^{d_j}, Z = sum W_j and B = sum W_j^2, p_i >= B / Z^2
//   iff d_i >= ln B - ln Z; the level is decided as min_p's, epsilon's and
//   eta's are (filters/levels.hpp: the float weights where their bound
//   decides, then double, then double-double), so two tokens of a two-token
//   set whose logits differ by 1e-7 keep one, and tied ones keep both.
//   llama.cpp's p-less (a pull request, tests/test-sampling.cpp test_p_less)
//   sums p^2 in float and keeps p_i >= sum p^2 - 1e-5: it keeps tokens up
//   to 1e-5 below the level, which this does not.
#ifndef XSAMPLER_FILTERS_P_LESS_HPP
#define XSAMPLER_FILTERS_P_LESS_HPP

#include <cmath>
#include <cstddef>

#include "../candidates.hpp"
#include "../stage.hpp"
#include "levels.hpp"

namespace xsampler
{
    namespace detail
    {
        /// Z's kernel (detail/reduce.hpp) with w^2 and w^2 |t| (t the
        /// weight's base-2 exponent) beside it: all three in T.
        template <class T>
        struct square_kernel : weight_terms<T>
        {
            using B = batch<T>;
            static constexpr std::size_t channels = 3;
            static constexpr bool reads_weights = false;
            static constexpr bool counts = false;
            using weight_terms<T>::weight_terms;

            template <int tier>
            XSAMPLER_ALWAYS_INLINE void terms(const B& x, B (&t)[3]) const noexcept
            {
                B e;
                t[0] = this->template weight<tier>(x, e);
                t[1] = t[0] * t[0];
                t[2] = xsimd::select(t[1] > B(T(0)), t[1] * xsimd::abs(e), B(T(0)));
            }
            void terms(T x, T (&t)[3]) const noexcept { terms(x, detail::weight(x, this->m, this->s2), t); }
            void terms(T x, T w, T (&t)[3]) const noexcept
            {
                const T e = exponent(x, this->m, this->s2);
                t[0] = w;
                t[1] = t[0] * t[0];
                t[2] = t[1] > T(0) ? t[1] * std::abs(e) : T(0);
            }
        };

        /// B = sum W_j^2 over the kept set at one tier (the weights of
        /// detail/exact.hpp's tiers, squared), with a bound eb on |b - B|;
        /// z is Z from the same pass at tier 1 (else 0).
        template <class T>
        void square_sum(candidates<T>& c, int tier, dd& b, double& eb, double& z)
        {
            const double ud = unit<double>();
            const T m = c.max_logit();
            const double md = double(m);
            const double dn = double(c.dense() ? c.vocab() : c.items().size());
            z = 0.0;
            if (tier == 1)
            {
                // w^2 and w^2 |t| (t the weight's base-2 exponent); each w is
                // within (3|t| + 5)u of W (weight_error), so w^2 within about
                // (6.3|t| + 11)u of W^2, plus the square's rounding. Z, sum w^2
                // and sum w^2 |t| in one pass (square_kernel).
                blocked_sum<T> sums[3];
                c.reduce(square_kernel<T>(m, c.scale2()), sums);
                z = sums[0].total();
                const double sa = sums[1].total();
                const double sb = sums[2].total();
                const double u = unit<T>();
                b = {sa, 0.0};
                // Terms within (6.7|t| + 13)u; lanes of at most 8 terms in T
                // (64 in the bound), the rest in double; a square that underflows T (w below
                // 2^-63 in float) or a flushed weight loses at most 2^-120.
                eb = 1.1 * u * (6.7 * sb + 13.0 * sa) + 1.1 * 64.0 * u * sa + 1.1 * (dn + 64.0) * ud * sa +
                     dn * (flush_error<T>() + std::ldexp(1.0, -120));
                return;
            }
            if (tier == 2)
            {
                const double s2d = c.scale2_double();
                dd_sum bs;
                double sb = 0.0;
                c.for_each_by_id([&](token_id, T x) {
                    const double t = exponent(double(x), md, s2d);
                    const double w = exp2_nonpos(t);
                    bs.add(w * w);
                    sb += w > 0.0 ? w * w * std::abs(t) : 0.0;
                });
                b = bs.s;
                eb = 1.1 * ud * (6.7 * sb + 13.0 * b.hi) + (2.0 * dn * ud * ud + 2.0 * ud) * b.hi +
                     dn * (flush_error<double>() + std::ldexp(1.0, -1000));
                return;
            }
            dd_sum bs;
            const double S = c.exact_scale();
            c.for_each_by_id([&](token_id, T x) {
                const dd w = exp_dd(exponent_dd(double(x), md, S));
                bs.add(mul(w, w));
            });
            b = bs.s;
            const double rel = 2.2 * exp_dd_error + (dn + 4.0) * std::ldexp(1.0, -103);
            eb = rel * 1.01 * b.hi + dn * exp_dd_tiny;
        }

        /// p-less: keeps the tokens with p_i >= sum p_j^2 (d_i >= ln B - ln
        /// Z), at least min_keep.
        template <class T>
        void keep_collision_level(candidates<T>& c, std::size_t min_keep)
        {
            exact_totals<T> sums;
            keep_at_level(
                c,
                [&](int tier) {
                    dd b;
                    double eb = 0.0, z = 0.0;
                    square_sum(c, tier, b, eb, z);
                    if (z > 0.0)
                    {
                        sums.prime(1, z, z_error<T>(z, c.vocab()));  // the same pass's Z
                    }
                    const dd log_b = log_dd(b);
                    const double e = 1.01 * eb / (b.hi - eb) + log_error(log_b.hi) + std::ldexp(1.0, -100) * std::abs(log_b.hi);
                    // ln Z - ln B, then its negation.
                    const level l = sums.log_z_plus(c, tier, neg(log_b), e);
                    return level{neg(l.value), l.error};
                },
                min_keep, false);
        }
    }

    class p_less
    {
    public:
        static constexpr const char* name = "p_less";
        static constexpr bool keeps_rank_prefix = true;

        explicit p_less(std::size_t min_keep = 1) : m_min_keep(detail::min_keep_of(min_keep)) {}
        std::size_t min_keep() const noexcept { return m_min_keep; }
        /// The stage in words, as sampler::describe_stages gives it.
        std::string describe() const { return detail::with_min_keep(name, m_min_keep); }

        template <class T>
        void apply(candidates<T>& c) const
        {
            detail::keep_collision_level(c, m_min_keep);
        }

    private:
        std::size_t m_min_keep;
    };
}

#endif
