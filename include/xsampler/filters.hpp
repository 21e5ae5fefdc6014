// xsampler/filters.hpp — temperature (plain and dynamic), top_k, top_p, min_p, epsilon, eta. (xsampler, BSD-3-Clause)
//
// The filters: stages that reshape or truncate the distribution (stage.hpp
// says what a stage is; typical and top_n_sigma are in entropy_filters.hpp).
// Each is a small value type, validated when constructed (invalid_parameter naming the stage, the parameter, the range
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
// min_keep (the truncating filters' optional second argument)
//   Never fewer than min_keep tokens of the rank are kept (llama.cpp's
//   min_keep, transformers' min_tokens_to_keep): if the filter's own set is
//   shorter, the top min_keep are kept instead. Default 1; 0 counts as 1 (a
//   filter never empties the set).
// top_k{K[, min_keep][, ties]}
//   Keeps the K tokens of highest rank, by selection — on a whole row a SIMD
//   pass with a rising threshold and std::nth_element on the few survivors
//   (detail::select_top), on a list std::nth_element: O(V), never a full
//   sort. K == 0 disables it; K >= the number of candidates keeps all; ties
//   at the cut go to the lower ids (top_k_ties::lowest_id, the default, as
//   llama.cpp). top_k_ties::keep_all (transformers) keeps every token whose
//   logit is >= the K-th best, so more than K when others tie with the K-th
//   (a selection for the K-th logit, then one threshold pass; never fused
//   into the row's validation pass). K < 0: error. With K > 0 it keeps
//   max(K, min_keep) (llama.cpp's rule).
// Exact decisions (top_p, min_p, epsilon, eta)
//   Every keep/drop decision is the one exact (real) arithmetic makes on the
//   row's own values: d_i = (x_i - m)·S with x_i the current logits as stored
//   (float or double), m their max, S the temperature scale (a double);
//   weights W_i = e^{d_i}, Z = sum W_i, p_i = W_i / Z; P, M, e, h the given
//   doubles. The fast float path decides wherever its proven error bound
//   does; the rest is re-decided in double, then double-double
//   (detail/exact.hpp, docs/semantics.md "Exact decisions").
// top_p{P[, min_keep]}, P in (0, 1]
//   With p_i the current probabilities (temperature so far included), keeps
//   the shortest prefix of the rank whose mass reaches P, *inclusive* of the
//   token that crosses P — so a confident step keeps its top token, never an
//   empty set. Precisely: the least n with C_n >= P·Z, C_n the exact mass of
//   the first n ranked tokens; no slack. {.1, .2, .3, .4} at P = 0.7 keeps
//   {.4, .3}: their exact mass is 0.70000000198 from float logits log(p) and
//   0.69999999999999996811 from double ones, both >= the double 0.7. The
//   kept tokens are renormalised by the draw. P == 1 keeps
//   all. A tie group may be split: the lower ids are kept. llama.cpp
//   accumulates in float and compares cum >= p; Hugging Face drops tokens
//   whose cumulative mass in ascending order is <= 1 - p, in float32. Both
//   agree with this in exact arithmetic.
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
//   disables it. One pass for Z, one for the entropy, one compare pass.
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
    namespace detail
    {
        /// min_keep as the filters take it: 0 counts as 1.
        inline std::size_t min_keep_of(std::size_t min_keep) noexcept { return min_keep == 0 ? 1 : min_keep; }
    }
}

namespace xsampler
{
    class temperature
    {
    public:
        static constexpr const char* name = "temperature";
        static constexpr bool keeps_rank_prefix = true;
        static constexpr bool kept_with_mirostat = true;  // llama.cpp: temp_ext, then mirostat

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

        explicit top_k(std::int64_t k, std::size_t min_keep = 1, top_k_ties ties = top_k_ties::lowest_id)
            : m_k(k), m_min_keep(detail::min_keep_of(min_keep)), m_ties(ties)
        {
            if (k < 0)
            {
                throw invalid_parameter("top_k: k must be >= 0 (0 disables it), got " + std::to_string(k));
            }
        }
        top_k(std::int64_t k, top_k_ties ties) : top_k(k, 1, ties) {}
        std::int64_t value() const noexcept { return m_k; }
        std::size_t min_keep() const noexcept { return m_min_keep; }
        top_k_ties ties() const noexcept { return m_ties; }
        /// The k the chain may select in the row's pass (stage.hpp): what
        /// apply keeps; 0 under keep_all, whose ties may lie outside the
        /// selection's list.
        std::size_t fused_top_k() const noexcept { return m_ties == top_k_ties::lowest_id ? kept() : 0; }

        template <class T>
        void apply(candidates<T>& c) const
        {
            const std::size_t kept = this->kept();
            if (m_ties == top_k_ties::lowest_id)
            {
                c.keep_top(kept);
                return;
            }
            if (kept == 0 || kept >= c.size())
            {
                return;
            }
            c.keep_logit_at_least(c.kth_logit(kept));
        }

    private:
        std::size_t kept() const noexcept
        {
            const auto k = std::size_t(std::min<std::uint64_t>(std::uint64_t(m_k), ~std::size_t(0)));
            return k == 0 ? 0 : std::max(k, m_min_keep);
        }

        std::int64_t m_k;
        std::size_t m_min_keep;
        top_k_ties m_ties;
    };

    class top_p
    {
    public:
        static constexpr const char* name = "top_p";
        static constexpr bool keeps_rank_prefix = true;

        explicit top_p(double p, std::size_t min_keep = 1) : m_p(p), m_min_keep(detail::min_keep_of(min_keep))
        {
            if (!(p > 0.0 && p <= 1.0))
            {
                throw invalid_parameter("top_p: p must be in (0, 1], got " + detail::format_value(p));
            }
        }
        double value() const noexcept { return m_p; }
        std::size_t min_keep() const noexcept { return m_min_keep; }

        template <class T>
        void apply(candidates<T>& c) const
        {
            if (m_p != 1.0)
            {
                c.keep_mass(m_p, m_min_keep);
            }
        }

    private:
        double m_p;
        std::size_t m_min_keep;
    };

    namespace detail
    {
        /// A threshold filter: one parameter, validated once (0 disables
        /// it), and min_keep; Derived::keep(c, value, min_keep) is its verb.
        template <class Derived>
        class threshold_stage
        {
        public:
            static constexpr bool keeps_rank_prefix = true;

            double value() const noexcept { return m_v; }
            std::size_t min_keep() const noexcept { return m_min_keep; }

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
            c.keep_ratio_at_least(m, min_keep);
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
            c.keep_probability_at_least(e, min_keep);
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
            c.keep_eta(h, min_keep);
        }
    };
}

#endif
