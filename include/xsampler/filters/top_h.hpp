// xsampler/filters/top_h.hpp — top-H: a rank prefix whose entropy share is bounded, exactly. (xsampler, BSD-3-Clause)
//
// A filter (stage.hpp): a small value type with `apply(candidates<T>&)`;
// min_keep as filters.hpp states it.
//
// top_h{H[, min_keep]}, H in [0, 1] (0 disables it)
//   Top-H decoding (transformers' TopHLogitsWarper). Among the n = min(100,
//   kept) best-ranked tokens, with q_i their probabilities renormalised over
//   those n (temperature so far included) and E = -sum q_i ln q_i their
//   entropy, keeps the longest prefix of the rank whose cumulative
//   -q_i ln q_i is <= H·E (inclusive), and always the best token; at least
//   min_keep of the rank. Renormalised by the draw. H == 1 keeps all n (the
//   whole prefix's sum is E itself). [.4, .3, .2, .1] at 0.7 keeps .4 and .3;
//   [.97, .01, .01, .01] at 0.3 keeps .97 alone; four tied tokens at 0.5 keep
//   two (their sum is exactly half of E).
//   Exact: each comparison is the one real arithmetic makes on q_i = W_i /
//   sum_{j<n} W_j with W_j = e^{(x_j - m)·S}: computed in double (scaled so
//   that nothing overflows or underflows, detail::entropy_prefix) with a
//   proven bound on every term, re-decided in double-double where the bound
//   cannot separate the two sides, their difference summed exactly from
//   those terms with the errors of tied tokens cancelling as their exact
//   terms do: an exact tie (the four tied tokens) is decided, equal, kept.
//   What even that cannot separate (sides within about 2^-80 relative that
//   no tie explains, or a gap (x_1 - x_2)·S beyond double's range) is taken
//   as equal, kept, and counted in detail::counters().residual.
//   transformers compares in float32 (its tied cases fall either way) and
//   rejects H outside (0, 1]; it has no min_keep. A masked token is never
//   among the n (transformers counts -inf logits among its top 100 with
//   probability 0).
#ifndef XSAMPLER_FILTERS_TOP_H_HPP
#define XSAMPLER_FILTERS_TOP_H_HPP

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "../candidates.hpp"
#include "../detail/exact.hpp"
#include "../detail/expansion.hpp"
#include "../stage.hpp"

namespace xsampler
{
    namespace detail
    {
        /// top_h's selection over a candidates set, with its scratch.
        ///
        /// With the n best-ranked tokens x_1 >= ... >= x_n (n >= 2), the
        /// gaps G = (x_1 - x_2)·S and g_i = (x_2 - x_i)·S, v_i = e^-g_i for i
        /// >= 2 (v_2 = 1), rho = sum v_i, R = e^-G rho, lambda = ln Z =
        /// log1p(R), phi = lambda / R, a = 1 / (1 + G) and b = G a: the
        /// entropy terms times Z e^G a (> 0: no comparison changes) are
        ///   t_1 = rho phi a,  t_i = v_i (b + (lambda + g_i) a)  (i >= 2).
        /// None overflows (v g <= 1/e; a, b <= 1), and t_2 >= 0.15, so no
        /// comparison past the first token depends on a term below double's
        /// range (computing q_i = W_i / Z directly would: at G = 800 every
        /// q_i but the first is 0 in double, and lambda too; at G = 1e300
        /// the terms overflow).
        template <class T>
        class entropy_prefix
        {
        public:
            static constexpr std::size_t top_n = 100;

            void keep(candidates<T>& c, double h, std::size_t min_keep)
            {
                c.top_items(top_n, m_top);  // rank order
                const std::size_t n = m_top.size();
                const std::size_t k = h >= 1.0 || n <= 1 ? n : kept_count(c.exact_scale(), h);
                if (k < min_keep)
                {
                    c.keep_top(min_keep);
                    return;
                }
                if (k == n && n < top_n)
                {
                    return;  // every kept token
                }
                m_top.resize(k);
                c.keep_subset(m_top, "top_h");
            }

        private:
            // The number of leading tokens of m_top whose cumulative term
            // stays <= h times the total (at least 1), 0 < h < 1: in double
            // with a bound on every term, else in double-double.
            std::size_t kept_count(double S, double h)
            {
                constexpr double u = unit<double>();
                constexpr double tiny = 1e-300;  // absolute, per term: what underflow may cost
                const std::size_t n = m_top.size();
                const double x2 = double(m_top[1].logit);
                const double big_g = gap(x2, double(m_top[0].logit), S);
                m_terms.resize(n);
                m_g.resize(n);
                double rho = 0.0, g_max = 0.0;
                for (std::size_t i = 1; i < n; ++i)
                {
                    m_g[i] = gap(double(m_top[i].logit), x2, S);
                    m_terms[i] = exp_nonpos(-m_g[i]);  // v_i, for now
                    rho += m_terms[i];
                    g_max = m_terms[i] > 0.0 ? std::max(g_max, m_g[i]) : g_max;
                }
                // R; log1p(R) / R: 1 - R/2 below 2^-30 (within R^2/3), else
                // log_dd of 1 + R held exactly (within 2^-86 absolutely, no
                // trust in libm: below 0.2u of log1p(R) >= 2^-30).
                const double r = exp_nonpos(-big_g) * rho;
                const dd y = two_sum(1.0, r);
                const double phi = r < 0x1p-30 ? 1.0 - r / 2.0 : value(log_dd(y)) / r;
                const double lambda = r * phi;
                const double a = 1.0 / (1.0 + big_g);  // 0 where G is inf
                const double b = big_g < 1.0 ? big_g * a : 1.0 - a;
                m_terms[0] = rho * phi * a;
                for (std::size_t i = 1; i < n; ++i)
                {
                    const double v = m_terms[i];
                    m_terms[i] = v > 0.0 ? v * (b + (lambda + m_g[i]) * a) : 0.0;
                }
                // Each term within eps of its exact value, relatively, plus
                // `tiny` where something underflowed: the gaps within 2.01u
                // relative (a difference and a product); v_i = exp_nonpos
                // within 3.6u g_i + 4u (the gap's error, the product by log2 e
                // rounded, exp2_nonpos's 2 ulp); rho within that plus its sum's
                // (n - 2)u; R within 3.6u G + 6u more (where R is in double's
                // range; below, lambda a is under `tiny`); phi and lambda within
                // R's error plus a few roundings (their sensitivity to R is at
                // most 1); a and b within 6u; then a few roundings each.
                const double eps = 1.1 * (3.7 * u * (2.0 * g_max + std::min(big_g, 750.0)) + (double(n) + 30.0) * u);
                double total = 0.0;
                for (std::size_t i = 0; i < n; ++i)
                {
                    total += m_terms[i];
                }
                // Non-negative terms: a running sum of j + 1 of them adds at
                // most j u of itself.
                const double total_err = 1.01 * (eps + double(n) * u) * total + double(n) * tiny;
                const double tau = h * total;
                const double tau_err = h * total_err + u * tau;
                double cum = m_terms[0];
                for (std::size_t j = 1; j < n; ++j)
                {
                    cum += m_terms[j];
                    const double cum_err = 1.01 * (eps + double(j) * u) * cum + double(j + 1) * tiny;
                    if (cum - cum_err > tau + tau_err)
                    {
                        return j;  // surely over from here on
                    }
                    if (!(cum + cum_err <= tau - tau_err))
                    {
                        ++counters().tier3;
                        return kept_in_dd(S, h, j);
                    }
                }
                return n;
            }

            // The same in double-double, deciding from token `from` on (the
            // ones before it are surely under).
            std::size_t kept_in_dd(double S, double h, std::size_t from)
            {
                const std::size_t n = m_top.size();
                const dd one{1.0, 0.0};
                const double x2 = double(m_top[1].logit);
                const dd big_g = gap_dd(x2, double(m_top[0].logit), S);
                m_g3.resize(n);
                m_v3.resize(n);
                dd_sum rho;
                for (std::size_t i = 1; i < n; ++i)
                {
                    m_g3[i] = gap_dd(double(m_top[i].logit), x2, S);
                    m_v3[i] = exp_dd(neg(m_g3[i]));
                    rho.add(m_v3[i]);
                }
                const dd r = mul(exp_dd(neg(big_g)), rho.s);
                // log1p(R) / R: below 2^-4 its series, 1 - R/2 + R^2/3 - ...
                // to R^26 (the rest below 2^-104); above, log_dd of 1 + R
                // (absolute error 2^-86, relative 2^-81.9 as ln(1 + R) >= 0.06).
                dd phi;
                if (r.hi < 0x1p-4)
                {
                    for (int k = 27; k >= 1; --k)
                    {
                        phi = sub(div(one, double(k)), mul(phi, r));
                    }
                }
                else
                {
                    const dd y = add(one, r);
                    phi = mul(log_dd(y), recip_dd(r));
                }
                const dd lambda = mul(phi, r);
                const bool infinite = !(big_g.hi < std::numeric_limits<double>::infinity());
                const dd a = infinite ? dd{} : recip_dd(add(one, big_g));
                const dd b = infinite ? one : big_g.hi < 1.0 ? mul(big_g, a) : sub(one, a);  // 1 - a: exact where a is subnormal
                m_terms3.resize(n);
                m_terms3[0] = mul(mul(rho.s, phi), a);
                for (std::size_t i = 1; i < n; ++i)
                {
                    m_terms3[i] = m_v3[i].hi > 0.0 ? mul(m_v3[i], add(b, mul(add(lambda, m_g3[i]), a))) : dd{};
                }
                // Each term is within 2^-80 of its exact value, relatively
                // (log_dd's error dominates), plus lost(i) where something
                // underflowed or overflowed. cum_j - h·total
                // is summed exactly from them (an expansion; its products by h
                // lose at most 2^-1074 each where they underflow), so only the
                // terms' errors remain. Tokens of equal logits have equal exact
                // terms; where their computed terms are equal too (a run), so
                // are their errors, and the bound counts each run once with its
                // net coefficient (its members so far minus h times all of
                // them). Where every run's coefficient is 0, the exact sides are
                // equal (four tied tokens at 0.5): kept.
                m_run.resize(n);  // one past the end of each token's run
                for (std::size_t i = n; i-- > 0;)
                {
                    const bool same = i + 1 < n && m_top[i].logit == m_top[i + 1].logit &&
                                      m_terms3[i].hi == m_terms3[i + 1].hi && m_terms3[i].lo == m_terms3[i + 1].lo;
                    m_run[i] = same ? m_run[i + 1] : i + 1;
                }
                expansion diff;
                for (const dd& t : m_terms3)
                {
                    for (const double part : {t.hi, t.lo})
                    {
                        double p, e;
                        two_product(part, -h, p, e);
                        diff.add(e);
                        diff.add(p);
                    }
                }
                const double products = double(4 * n) * std::numeric_limits<double>::denorm_min();
                for (std::size_t j = 0; j < n; ++j)
                {
                    diff.add(m_terms3[j].lo);
                    diff.add(m_terms3[j].hi);
                    if (j < from)
                    {
                        continue;
                    }
                    double runs = 0.0;
                    for (std::size_t i = 0; i < n; i = m_run[i])
                    {
                        const double size = double(m_run[i] - i);
                        const double in = j >= m_run[i] ? size : j >= i ? double(j + 1 - i) : 0.0;
                        runs += 1.01 * std::abs(in - h * size) * (0x1p-80 * m_terms3[i].hi + lost(i, infinite, a));
                    }
                    const double over = diff.approx();
                    if (over > runs + products)
                    {
                        return j;
                    }
                    if (runs > 0.0 && over >= -(runs + products))
                    {
                        ++counters().residual;  // too close to tell: taken as equal, kept
                    }
                }
                return n;
            }

            // What term i may have lost beyond its relative bound, absolutely:
            // t_1 where G overflowed (t_1 < rho / G < 1e-306) or a = 1 / (1 +
            // G) is subnormal (100 times its absolute 2^-1074); where v_i <
            // 2^-968 (exp_dd's low part is subnormal) 2^-1020 absolutely times
            // (b + (lambda + g_i) a) <= 1102 (exp_dd gives 0 beyond g_i =
            // 1100: then e^-g_i (1 + g_i) < 1e-475, nothing). lambda's own
            // error where e^-G is that small is relatively below 2^-90 in
            // every term it enters (lambda a v_i next to b v_i, b > 0.99).
            double lost(std::size_t i, bool infinite, dd a) const noexcept
            {
                if (i == 0)
                {
                    return infinite ? 1e-306 : a.hi < 0x1p-1020 ? 1e-320 : 0.0;
                }
                return m_v3[i].hi < 0x1p-968 && m_g3[i].hi <= 1100.0 ? 1e-304 : 0.0;
            }

            std::vector<scored<T>> m_top;
            std::vector<double> m_terms, m_g;
            std::vector<dd> m_g3, m_v3, m_terms3;
            std::vector<std::size_t> m_run;
        };
    }

    class top_h
    {
    public:
        static constexpr const char* name = "top_h";
        static constexpr bool keeps_rank_prefix = true;

        explicit top_h(double h, std::size_t min_keep = 1) : m_h(h), m_min_keep(detail::min_keep_of(min_keep))
        {
            if (!(h >= 0.0 && h <= 1.0))
            {
                throw invalid_parameter("top_h: h must be in [0, 1] (0 disables it), got " + detail::format_value(h));
            }
        }
        double value() const noexcept { return m_h; }
        std::size_t min_keep() const noexcept { return m_min_keep; }
        /// The stage in words, as sampler::describe_stages gives it.
        std::string describe() const
        {
            return detail::with_min_keep(std::string(name) + " " + detail::format_value(m_h), m_min_keep);
        }

        /// The selection and its buffers are the workspace's scratch.
        template <class T>
        void apply(candidates<T>& c) const
        {
            if (m_h != 0.0)
            {
                c.template scratch<detail::entropy_prefix<T>>().keep(c, m_h, m_min_keep);
            }
        }

    private:
        double m_h;
        std::size_t m_min_keep;
    };
}

#endif
