// xsampler/filters/levels.hpp — min_p, epsilon, eta: the level filters. (xsampler, BSD-3-Clause)
//
// A filter (stage.hpp): a small value type, validated when constructed
// (invalid_parameter naming the stage, the parameter, the range and the
// value), with `apply(candidates<T>&)`; min_keep as filters.hpp states it.
//
// Their decisions are exact, as top_p's (filters/top_p.hpp states how).
//
// min_p{M[, min_keep]}, M in [0, 1]
//   Keeps the tokens whose probability is >= M times the top probability,
//   decided in logit space: keep iff (x_i - m)·S >= ln M, exactly (no exp on
//   the fast path). M == 0 disables it; M == 1 keeps the tokens tied with
//   the max.
// epsilon{E[, min_keep]}, E in [0, 1)
//   Keeps the tokens with p_i >= E (transformers' EpsilonLogitsWarper).
//   E == 0 disables it (transformers rejects it). One pass for Z, one SIMD
//   compare pass.
// eta{H[, min_keep]}, H in [0, 1)
//   Keeps the tokens with p_i >= min(H, sqrt(H)·e^{-Ent}), Ent the entropy in
//   nats of the current distribution (transformers' EtaLogitsWarper). H == 0
//   disables it. One pass for Z and the entropy (tier 1: Z, A and sum w d^2
//   together), one compare pass.
#ifndef XSAMPLER_FILTERS_LEVELS_HPP
#define XSAMPLER_FILTERS_LEVELS_HPP

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "../candidates.hpp"
#include "../stage.hpp"

namespace xsampler
{
    namespace detail
    {
        // A threshold on d = (x - m) S (keep iff d >= L), as a tier knows L.
        struct level
        {
            dd value;
            double error;  // |value - L| <= error
        };

        // The sums of exact_totals at one tier: Z (> 0) and, with_a, A (<= 0).
        template <class T>
        void exact_sums(candidates<T>& c, int tier, bool with_a, dd& z, double& ez, dd& a, double& ea)
        {
            const double ud = detail::unit<double>();
            const T m = c.max_logit();
            const double md = double(m);
            const double S = c.exact_scale();
            const double dn = double(c.dense() ? c.vocab() : c.items().size());  // at least the kept count
            if (tier == 1 && !with_a)
            {
                z = {c.total_weight(), 0.0};
                ez = detail::z_error<T>(z.hi, std::size_t(dn));
                return;
            }
            if (tier == 1 && c.dense())
            {
                // Z, A = sum w d and sum w d^2 in one pass (detail::moments_kernel,
                // squares): Z's own bits; w d and w d^2 in T, lanes of 8 terms
                // in T, the rest in double.
                detail::blocked_sum<T> sums[3];
                c.reduce(detail::moments_kernel<T, detail::third_sum::squares>(m, c.scale(), c.scale2()), sums);
                const double zh = sums[0].total();
                const double sa = sums[1].total();
                const double sb = sums[2].total();
                z = {zh, 0.0};
                ez = detail::z_error<T>(zh, std::size_t(dn));
                a = {sa, 0.0};
                // Terms within (3|t| + 12) u of W D (the products in T too);
                // lanes of at most 8 terms in T (64 in the bound); the rest in
                // double.
                const double u = detail::unit<T>();
                ea = 1.1 * u * (3.0 * detail::log2e * sb + 12.0 * std::abs(sa)) + 1.1 * 64.0 * u * std::abs(sa) +
                     1.1 * (dn + 64.0) * ud * std::abs(sa) + dn * 1024.0 * detail::flush_error<T>();
                return;
            }
            if (tier == 1 || tier == 2)
            {
                // Tier 1: the weights in T with the terms w d and w d^2 in
                // double; tier 2: all of it in double. Sums in double-double.
                const double u = tier == 1 ? detail::unit<T>() : ud;
                const T s = c.scale();
                const double s2d = c.scale2_double();
                detail::dd_sum zs, as;
                double b = 0.0;
                c.for_each_by_id([&](token_id id, T x) {
                    double w, d;
                    if (tier == 1)
                    {
                        w = double(c.weight(id, x));
                        d = double(detail::exponent(x, m, s));
                    }
                    else
                    {
                        w = detail::exp2_nonpos(detail::exponent(double(x), md, s2d));
                        d = detail::exponent(double(x), md, S);
                    }
                    zs.add(w);
                    if (w > 0.0)
                    {
                        as.add(-(w * d));
                        b += w * d * d;
                    }
                });
                z = zs.s;
                const double zh = z.hi;
                const double flush = tier == 1 ? detail::flush_error<T>() : detail::flush_error<double>();
                ez = 1.06 * ((3.0 * std::log2(dn + 1.0) + 8.0) * u + 2.0 * dn * ud * ud + 2.0 * ud) * zh + dn * flush;
                a = detail::neg(as.s);
                // Each term w d within (3|t| + 9) u of W D, t = d log2 e; a
                // flushed token's W |D| is below 1024 times its flush bound.
                ea = 1.1 * u * (3.0 * detail::log2e * b + 9.0 * std::abs(a.hi)) +
                     (2.0 * dn * ud * ud + 2.0 * ud) * std::abs(a.hi) + dn * 1024.0 * flush;
                return;
            }
            // Tier 3: double-double throughout.
            detail::dd_sum zs, as;
            c.for_each_by_id([&](token_id, T x) {
                const detail::dd d = detail::exponent_dd(double(x), md, S);
                const detail::dd w = detail::exp_dd(d);
                zs.add(w);
                if (with_a && w.hi > 0.0)
                {
                    as.add(detail::neg(detail::mul(w, d)));
                }
            });
            z = zs.s;
            const double rel = 1.1 * detail::exp_dd_error + (dn + 4.0) * std::ldexp(1.0, -103);
            ez = rel * 1.01 * z.hi + dn * detail::exp_dd_tiny;
            a = detail::neg(as.s);
            ea = rel * std::abs(a.hi) + dn * 1100.0 * detail::exp_dd_tiny;
        }


        // Z and A = sum of W_j d_j over the kept set at tiers 1 to 3, each
        // computed once when first asked, with their error bounds; the
        // thresholds of keep_probability_at_least and keep_eta from them.
        template <class T>
        struct exact_totals
        {
            bool have[4] = {};
            bool have_a[4] = {};
            detail::dd z[4];
            detail::dd a[4];
            double ez[4] = {};
            double ea[4] = {};

            // Z at a tier, computed by a caller's own pass (p_less's).
            void prime(int tier, double z_value, double z_error_bound)
            {
                if (!have[tier])
                {
                    z[tier] = {z_value, 0.0};
                    ez[tier] = z_error_bound;
                    have[tier] = true;
                }
            }

            void compute(candidates<T>& c, int tier, bool with_a)
            {
                if (have[tier] && (have_a[tier] || !with_a))
                {
                    return;
                }
                exact_sums(c, tier, with_a, z[tier], ez[tier], a[tier], ea[tier]);
                have[tier] = true;
                have_a[tier] = have_a[tier] || with_a;
            }

            // add + ln Z
            level log_z_plus(candidates<T>& c, int tier, detail::dd add, double e)
            {
                compute(c, tier, false);
                const double zh = z[tier].hi;
                const detail::dd lz = detail::log_dd(z[tier]);
                const double err = e + 1.01 * ez[tier] / (zh - ez[tier]) + detail::log_error(lz.hi) +
                                   std::ldexp(1.0, -100) * (std::abs(add.hi) + std::abs(lz.hi));
                return {detail::add(add, lz), err};
            }

            // add + A / Z
            level mean_log_weight_plus(candidates<T>& c, int tier, detail::dd add, double e)
            {
                compute(c, tier, true);
                const double zh = z[tier].hi;
                detail::dd q = detail::div(a[tier], zh);
                q = detail::sub(q, detail::mul(q, z[tier].lo / zh));
                const double err = e + 1.01 * (ea[tier] + std::abs(q.hi) * ez[tier]) / (zh - ez[tier]) +
                                   std::ldexp(1.0, -100) * (std::abs(add.hi) + std::abs(q.hi));
                return {detail::add(add, q), err};
            }
        };


        // The level of p_i >= e: d_i >= ln e + ln Z (Z from `sums`, summed
        // again at the tier asked). e outside (0, 1]: invalid_parameter
        // naming `who`.
        template <class T>
        auto probability_level(candidates<T>& c, exact_totals<T>& sums, double e, const char* who)
        {
            if (!(e > 0.0 && e <= 1.0))
            {
                throw invalid_parameter(std::string(who) + ": e must be in (0, 1], got " + detail::format_value(e));
            }
            const detail::dd log_e = detail::log_dd(e);
            return [&c, &sums, log_e](int tier) {
                return sums.log_z_plus(c, tier, log_e, detail::log_error(log_e.hi));
            };
        }

        // The exact test d >= L on a logit x, L given by level_at(tier) for
        // tiers 1 to 3, each asked only when the one before cannot decide:
        // sure_keep and sure_drop are tier 1's (both monotone in x), refine
        // asks tiers 2 and 3.
        template <class T, class Level>
        class level_test
        {
        public:
            level_test(candidates<T>& c, Level& level_at)
                : m_level_at(level_at), m(c.max_logit()), s(c.scale()), S(c.exact_scale()), l1(level_at(1)),
                  lc(detail::value(l1.value)), el(l1.error + 2.0 * ud * std::abs(lc)), fast(std::isnormal(s) && c.scale2_double() < double(std::numeric_limits<T>::max()))
            {
            }
            bool sure_keep(T x) const
            {
                return fast && double(detail::exponent(x, m, s)) * (1.0 + kappa) - tiny >= lc + el;
            }
            bool sure_drop(T x) const
            {
                return !fast ? x == -inf : double(detail::exponent(x, m, s)) * (1.0 - kappa) + tiny < lc - el;
            }
            bool refine(T x)
            {
                auto& count = detail::counters();
                if (!have2)
                {
                    ++count.tier2;
                    l2 = m_level_at(2);
                    have2 = true;
                }
                const double d2 = detail::exponent(double(x), double(m), S);
                const double lc2 = detail::value(l2.value);
                const double dev = 3.3 * ud * (std::abs(d2) + std::abs(lc2)) + l2.error +
                                   4.0 * std::numeric_limits<double>::denorm_min();
                if (d2 - lc2 > dev || d2 - lc2 < -dev)
                {
                    return d2 > lc2;
                }
                if (!have3)
                {
                    ++count.tier3;
                    l3 = m_level_at(3);
                    have3 = true;
                }
                const detail::dd d3 = detail::exponent_dd(double(x), double(m), S);
                const double diff = detail::sub(d3, l3.value).hi;
                const double bound = std::ldexp(1.0, -102) * (std::abs(d3.hi) + std::abs(l3.value.hi)) + l3.error +
                                     4.0 * std::numeric_limits<double>::denorm_min();
                if (!(diff > bound || diff < -bound))
                {
                    ++count.residual;
                }
                return diff >= 0.0;
            }
            bool operator()(T x) { return sure_keep(x) || (!sure_drop(x) && refine(x)); }

        private:
            static constexpr T inf = std::numeric_limits<T>::infinity();
            static constexpr double ud = detail::unit<double>();
            // d in T is within kappa |d| (+ tiny) of the exact d: the roundings
            // of s to T, of x - m and of the product (3u), and of this test.
            static constexpr double kappa = 3.2 * detail::unit<T>() + 4.0 * ud;
            static constexpr double tiny = 4.0 * double(std::numeric_limits<T>::denorm_min());
            Level& m_level_at;
            T m;
            T s;
            double S;
            level l1;
            double lc;
            double el;
            bool fast;  // a scale that underflows T or that T cannot hold (clamped): every token to tier 2
            bool have2 = false;
            bool have3 = false;
            level l2{};
            level l3{};
        };

        // Keep the tokens with d >= L (level_test), or with x >= m when
        // `zero` (L = 0 exactly). At least min_keep of the rank.
        template <class T, class Level>
        void keep_at_level(candidates<T>& c, Level&& level_at, std::size_t min_keep, bool zero)
        {
            const T m = c.max_logit();
            if (zero)
            {
                c.keep_monotone(m, m, [](T) { return false; }, min_keep);
                return;
            }
            level_test<T, std::remove_reference_t<Level>> test(c, level_at);
            if (test.sure_drop(m))
            {
                c.keep_top(std::max<std::size_t>(min_keep, 1));
                return;
            }
            // Both sure tests are monotone in the logit: the tokens below
            // the least logit not surely dropped are dropped, those from the
            // least surely kept kept, and the few between refined.
            const T x_maybe = least_logit_where(m, [&](T x) { return !test.sure_drop(x); });
            const T x_sure = test.sure_keep(m) ? least_logit_where(m, [&](T x) { return test.sure_keep(x); })
                                               : std::numeric_limits<T>::infinity();
            c.keep_monotone(x_maybe, x_sure, [&](T x) { return test.refine(x); }, min_keep);
        }

        /// Keep the tokens with p_i >= r·p_max, i.e. (x - m)·S >= ln r, for
        /// 0 < r <= 1 (min_p), and at least min_keep. Exact (the top of this
        /// exact.hpp); r == 1 keeps the tokens tied with the max. One SIMD pass on
        /// a dense set, no exp.
        template <class T>
        void keep_ratio_at_least(candidates<T>& c, double r, std::size_t min_keep)
        {
            if (!(r > 0.0 && r <= 1.0))
            {
                throw invalid_parameter("keep_ratio_at_least: r must be in (0, 1], got " + detail::format_value(r));
            }
            const detail::dd log_r = r == 1.0 ? detail::dd{} : detail::log_dd(r);
            const double e = r == 1.0 ? 0.0 : detail::log_error(log_r.hi);
            keep_at_level(c, [&](int) { return level{log_r, e}; }, min_keep, r == 1.0);
        }

        /// Keep the tokens with p_i >= e (0 < e; epsilon), and at least
        /// min_keep. Exact: p_i = W_i / Z with Z re-summed in double, then
        /// double-double, only where the bounds cannot decide.
        template <class T>
        void keep_probability_at_least(candidates<T>& c, double e, std::size_t min_keep)
        {
            exact_totals<T> sums;
            keep_at_level(c, probability_level(c, sums, e, "keep_probability_at_least"), min_keep, false);
        }

        /// How many leading tokens of `ranked` (kept tokens in rank order, as
        /// top_items gives them) have p_i >= e (0 < e <= 1), decided exactly
        /// as keep_probability_at_least decides; the set is unchanged (xtc).
        template <class T>
        std::size_t count_probability_at_least(candidates<T>& c, double e, const std::vector<scored<T>>& ranked)
        {
            exact_totals<T> sums;
            auto level_at = probability_level(c, sums, e, "count_probability_at_least");
            level_test<T, decltype(level_at)> test(c, level_at);
            std::size_t n = 0;
            while (n < ranked.size() && test(ranked[n].logit))
            {
                ++n;
            }
            return n;
        }

        // The level of p_i >= min(a, b·e^-H), H the entropy (nats) of the
        // kept set's distribution, from the logs of a and b with their
        // error e: d_i >= min(ln a + ln Z, ln b + A / Z), A = sum of W_j d_j
        // (H = ln Z - A / Z); Z and A from `sums`, summed again at the tier
        // asked (eta; speculative.hpp's typical acceptance).
        template <class T>
        auto entropy_level(candidates<T>& c, exact_totals<T>& sums, detail::dd log_a, detail::dd log_b, double e)
        {
            return [&c, &sums, log_a, log_b, e](int tier) {
                // A first: its pass computes Z too.
                const level b = sums.mean_log_weight_plus(c, tier, log_b, e);
                const level a = sums.log_z_plus(c, tier, log_a, e);
                const bool a_first = detail::sub(a.value, b.value).hi < 0.0;
                return level{a_first ? a.value : b.value, std::max(a.error, b.error)};
            };
        }

        /// Keep the tokens with p_i >= min(h, sqrt(h)·e^-H), H the entropy
        /// (nats) of the kept set's distribution, 0 < h < 1 (eta), and at least
        /// min_keep. As keep_probability_at_least, with H bounded and
        /// re-summed the same way (entropy_level, b = sqrt(h)).
        template <class T>
        void keep_eta(candidates<T>& c, double h, std::size_t min_keep)
        {
            if (!(h > 0.0 && h < 1.0))
            {
                throw invalid_parameter("keep_eta: h must be in (0, 1), got " + detail::format_value(h));
            }
            const detail::dd log_h = detail::log_dd(h);
            exact_totals<T> sums;
            keep_at_level(c, entropy_level(c, sums, log_h, detail::dd{log_h.hi / 2, log_h.lo / 2}, detail::log_error(log_h.hi)),
                          min_keep, false);
        }


        /// A threshold filter: one parameter, validated once (0 disables
        /// it), and min_keep; Derived::keep(c, value, min_keep) is its verb.
        template <class Derived>
        class threshold_stage
        {
        public:
            static constexpr bool keeps_rank_prefix = true;

            double value() const noexcept { return m_v; }
            std::size_t min_keep() const noexcept { return m_min_keep; }
            /// The stage in words ("min_p 0.05"), as sampler::describe_stages gives it.
            std::string describe() const
            {
                return with_min_keep(std::string(Derived::name) + " " + format_value(m_v), m_min_keep);
            }

            template <class T>
            void apply(candidates<T>& c) const
            {
                if (m_v != 0.0)
                {
                    Derived::keep(c, m_v, m_min_keep);
                }
            }

        protected:
            /// Throws invalid_parameter(range + value) unless `valid`.
            threshold_stage(double v, std::size_t min_keep, bool valid, const char* range)
                : m_v(v), m_min_keep(min_keep_of(min_keep))
            {
                if (!valid)
                {
                    throw invalid_parameter(std::string(range) + ", got " + format_value(v));
                }
            }

        private:
            double m_v;
            std::size_t m_min_keep;
        };
    }

    class min_p : public detail::threshold_stage<min_p>
    {
    public:
        static constexpr const char* name = "min_p";

        explicit min_p(double m, std::size_t min_keep = 1)
            : threshold_stage(m, min_keep, m >= 0.0 && m <= 1.0, "min_p: m must be in [0, 1]")
        {
        }

        template <class T>
        static void keep(candidates<T>& c, double m, std::size_t min_keep)
        {
            detail::keep_ratio_at_least(c, m, min_keep);
        }
    };

    class epsilon : public detail::threshold_stage<epsilon>
    {
    public:
        static constexpr const char* name = "epsilon";

        explicit epsilon(double e, std::size_t min_keep = 1)
            : threshold_stage(e, min_keep, e >= 0.0 && e < 1.0, "epsilon: e must be in [0, 1) (0 disables it)")
        {
        }

        template <class T>
        static void keep(candidates<T>& c, double e, std::size_t min_keep)
        {
            detail::keep_probability_at_least(c, e, min_keep);
        }
    };

    class eta : public detail::threshold_stage<eta>
    {
    public:
        static constexpr const char* name = "eta";

        explicit eta(double h, std::size_t min_keep = 1)
            : threshold_stage(h, min_keep, h >= 0.0 && h < 1.0, "eta: h must be in [0, 1) (0 disables it)")
        {
        }

        template <class T>
        static void keep(candidates<T>& c, double h, std::size_t min_keep)
        {
            detail::keep_eta(c, h, min_keep);
        }
    };
}

#endif
