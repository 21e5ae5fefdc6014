// xsampler/filters.hpp — temperature (plain and dynamic), top_k, top_p, min_p. (xsampler, BSD-3-Clause)
//
// The filters: stages that reshape or truncate the distribution (stage.hpp
// says what a stage is; typical and top_n_sigma are in entropy_filters.hpp). Each is a small value type, validated when
// constructed (invalid_parameter naming the stage, the parameter, the range
// and the value), with `apply(candidates<T>&)`, written with the verbs of
// candidates.hpp. Each keeps a prefix of the rank (logit desc, id asc).
//
// temperature{T}
//   T > 0: the logits are divided by T (deferred into the exp: no pass over
//   the row). T == 0: greedy, the limit of T -> 0: only the argmax is kept
//   (ties: the lowest id), special-cased, never a division by zero. T < 0, NaN
//   or inf: error. Temperature never changes which tokens a top-k keeps, and
//   changes a later top-p or min-p set (it moves the mass).
// temperature{T, range, exponent}  (llama.cpp's dynamic temperature)
//   range == 0 is temperature{T}. range > 0: with n the number of kept
//   tokens and H the entropy of the current distribution in nats (the
//   temperature so far included), h = H / ln n clamped to [0, 1],
//   min = max(0, T - range), max = T + range, the logits are divided by
//   T_dyn = min + (max - min) h^exponent (0^0 = 1: exponent 0 gives max);
//   T_dyn == 0 (min == 0 and h == 0: one token holds all the weight) is
//   greedy. One kept token: nothing to do. T may be 0 here (llama.cpp's
//   temp_ext is dynamic at any T). range, exponent < 0, NaN or inf: error.
//   It reads the set (one exp pass for H, in double, before the draw's own
//   at the new scale), so it is not rescales_only: a top_k after it is not
//   fused before it. llama.cpp counts in n the tokens a -inf mask left in
//   its array, computes H in float and applies temperature to a single
//   candidate set as a no-op, as here.
// top_k{K[, ties]}
//   Keeps the K tokens of highest rank, by selection — on a whole row a SIMD
//   pass with a rising threshold and std::nth_element on the few survivors
//   (detail::select_top), on a list std::nth_element: O(V), never a full
//   sort. K == 0 disables it; K >= the number of candidates keeps all; ties
//   at the cut go to the lower ids (top_k_ties::lowest_id, the default, as
//   llama.cpp). top_k_ties::keep_all (transformers) keeps every token whose
//   logit is >= the K-th best, so more than K when others tie with the K-th
//   (a selection for the K-th logit, then one threshold pass; never fused
//   into the row's validation pass). K < 0: error.
// top_p{P}, P in (0, 1]
//   With p_i the current probabilities (temperature so far included), keeps
//   the shortest prefix of the rank whose mass reaches P, *inclusive* of the
//   token that crosses P — so a confident step keeps its top token, never an
//   empty set. Precisely: with w_i and Z as in detail/exp2.hpp and
//   detail/blocked_sum.hpp, and c_n the mass of the first n ranked tokens
//   (in double), n is the least with c_n >= (P - 1e-12) * Z (all of them if
//   rounding leaves every c_n below).
//   The 1e-12 of slack makes a mass that equals P up to rounding count as
//   reaching it: {.1, .2, .3, .4} at P = 0.7 keeps {.4, .3}, though 0.7 has no
//   exact binary form. On a list, c_n is a running sum in rank order; on a
//   whole row, bucket masses plus a running sum in the crossing bucket
//   (candidates::keep_mass), equal to it but for rounding that can only decide
//   within ~1e-15 Z of the target. The kept tokens are renormalised by the
//   draw. P == 1 keeps all. A tie group may be split: the lower ids are kept.
//   llama.cpp accumulates in float and compares cum >= p; Hugging Face drops
//   tokens whose cumulative mass in ascending order is <= 1 - p. Both agree
//   with this in exact arithmetic up to the token exactly at P.
// min_p{M}, M in [0, 1]
//   Keeps the tokens whose probability is >= M times the top probability,
//   decided in logit space: keep iff (x_i - x_max) * s >= ln M (no exp).
//   M == 0 disables it; M == 1 keeps the tokens tied with the max.
#ifndef XSAMPLER_FILTERS_HPP
#define XSAMPLER_FILTERS_HPP

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "candidates.hpp"

namespace xsampler
{
    class temperature
    {
    public:
        static constexpr const char* name = "temperature";
        static constexpr bool keeps_rank_prefix = true;

        explicit temperature(double t) : temperature(t, 0.0, 1.0) {}
        /// llama.cpp's dynamic temperature (its temp_ext): with range > 0 the
        /// temperature comes from the entropy of the set (see the top of this
        /// file); range == 0 is the plain temperature{t}.
        temperature(double t, double range, double exponent) : m_t(t), m_range(range), m_exponent(exponent)
        {
            constexpr double big = std::numeric_limits<double>::max();
            if (!(t >= 0.0 && t <= big))
            {
                throw invalid_parameter("temperature: T must be finite and >= 0, got " + detail::format_value(t));
            }
            if (!(range >= 0.0 && range <= big && t + range <= big))
            {
                throw invalid_parameter("temperature: dynatemp_range must be finite and >= 0, got " +
                                        detail::format_value(range));
            }
            if (!(exponent >= 0.0 && exponent <= big))
            {
                throw invalid_parameter("temperature: dynatemp_exponent must be finite and >= 0, got " +
                                        detail::format_value(exponent));
            }
        }
        double value() const noexcept { return m_t; }
        double range() const noexcept { return m_range; }
        double exponent() const noexcept { return m_exponent; }
        /// Only rescales (or keeps the argmax) unless the range is positive:
        /// then it reads the set's entropy, and a top-k after it may not run
        /// first (stage.hpp).
        bool rescales_only() const noexcept { return m_range == 0.0; }

        template <class T>
        void apply(candidates<T>& c) const
        {
            const double t = m_range == 0.0 ? m_t : dynamic(c);
            if (t == 0.0)
            {
                c.keep_argmax();
            }
            else
            {
                c.divide_scale(t);
            }
        }

        /// The temperature the dynamic form divides by on this set (1 when
        /// one token is left: nothing to scale).
        template <class T>
        double dynamic(candidates<T>& c) const
        {
            const auto mo = c.log_weight_moments();  // one exp pass: Z, E[t] and the count
            if (mo.n <= 1)
            {
                return 1.0;
            }
            const double h = (std::log(mo.z) - mo.mean) / std::log(double(mo.n));
            const double lo = std::max(0.0, m_t - m_range);
            const double hi = m_t + m_range;
            return lo + (hi - lo) * std::pow(std::min(std::max(h, 0.0), 1.0), m_exponent);
        }

    private:
        double m_t;
        double m_range;
        double m_exponent;
    };

    /// top_k's rule for tokens tied with the k-th: lowest_id keeps exactly k
    /// (ties to the lower ids, as llama.cpp); keep_all keeps every token whose
    /// logit equals the k-th's too (transformers' TopKLogitsWarper).
    enum class top_k_ties
    {
        lowest_id,
        keep_all
    };

    class top_k
    {
    public:
        static constexpr const char* name = "top_k";
        static constexpr bool keeps_rank_prefix = true;

        explicit top_k(std::int64_t k, top_k_ties ties = top_k_ties::lowest_id) : m_k(k), m_ties(ties)
        {
            if (k < 0)
            {
                throw invalid_parameter("top_k: k must be >= 0 (0 disables it), got " + std::to_string(k));
            }
        }
        std::int64_t value() const noexcept { return m_k; }
        top_k_ties ties() const noexcept { return m_ties; }

        template <class T>
        void apply(candidates<T>& c) const
        {
            const auto k = std::size_t(std::min<std::uint64_t>(std::uint64_t(m_k), ~std::size_t(0)));
            if (m_ties == top_k_ties::lowest_id)
            {
                c.keep_top(k);
                return;
            }
            if (k == 0 || k >= c.size())
            {
                return;
            }
            c.keep_logit_at_least(c.kth_logit(k));
        }

    private:
        std::int64_t m_k;
        top_k_ties m_ties;
    };

    class top_p
    {
    public:
        static constexpr const char* name = "top_p";
        static constexpr bool keeps_rank_prefix = true;

        explicit top_p(double p) : m_p(p)
        {
            if (!(p > 0.0 && p <= 1.0))
            {
                throw invalid_parameter("top_p: p must be in (0, 1], got " + detail::format_value(p));
            }
        }
        double value() const noexcept { return m_p; }

        /// Probability mass by which the kept prefix may fall short of P.
        static constexpr double mass_slack = 1e-12;

        template <class T>
        void apply(candidates<T>& c) const
        {
            if (m_p != 1.0)
            {
                c.keep_mass(m_p - mass_slack);
            }
        }

    private:
        double m_p;
    };

    class min_p
    {
    public:
        static constexpr const char* name = "min_p";
        static constexpr bool keeps_rank_prefix = true;

        explicit min_p(double m) : m_m(m), m_log_m(std::log(m))
        {
            if (!(m >= 0.0 && m <= 1.0))
            {
                throw invalid_parameter("min_p: m must be in [0, 1], got " + detail::format_value(m));
            }
        }
        double value() const noexcept { return m_m; }

        template <class T>
        void apply(candidates<T>& c) const
        {
            if (m_m == 0.0)
            {
                return;
            }
            // keep iff double(d) >= ln M, tested as d >= the least T not below ln M.
            T threshold = T(m_log_m);
            if (double(threshold) < m_log_m)
            {
                threshold = std::nextafter(threshold, std::numeric_limits<T>::infinity());
            }
            c.keep_log_weight_at_least(threshold);
        }

    private:
        double m_m;
        double m_log_m;
    };
}

#endif
