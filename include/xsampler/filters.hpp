// xsampler/filters.hpp — temperature, top_k, top_p, min_p, epsilon, eta. (xsampler, BSD-3-Clause)
//
// The filters: stages that reshape or truncate the distribution (stage.hpp
// says what a stage is). Each is a small value type, validated when
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
// min_keep (the truncating filters' optional second argument)
//   Never fewer than min_keep tokens of the rank are kept (llama.cpp's
//   min_keep, transformers' min_tokens_to_keep): if the filter's own set is
//   shorter, the top min_keep are kept instead. Default 1; 0 counts as 1 (a
//   filter never empties the set).
// top_k{K[, min_keep]}
//   Keeps the K tokens of highest rank, by selection — on a whole row a SIMD
//   pass with a rising threshold and std::nth_element on the few survivors
//   (detail::select_top), on a list std::nth_element: O(V), never a full
//   sort. K == 0 disables it; K >= the number of candidates keeps all; ties
//   at the cut go to the lower ids. K < 0: error. With K > 0 it keeps
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
        /// Only rescales (or keeps the argmax): a top-k after it may run first.
        static constexpr bool rescales_only = true;

        explicit temperature(double t) : m_t(t)
        {
            if (!(t >= 0.0 && t <= std::numeric_limits<double>::max()))
            {
                throw invalid_parameter("temperature: T must be finite and >= 0, got " + detail::format_value(t));
            }
        }
        double value() const noexcept { return m_t; }

        template <class T>
        void apply(candidates<T>& c) const
        {
            if (m_t == 0.0)
            {
                c.keep_argmax();
            }
            else
            {
                c.divide_scale(m_t);
            }
        }

    private:
        double m_t;
    };

    class top_k
    {
    public:
        static constexpr const char* name = "top_k";
        static constexpr bool keeps_rank_prefix = true;

        explicit top_k(std::int64_t k, std::size_t min_keep = 1) : m_k(k), m_min_keep(detail::min_keep_of(min_keep))
        {
            if (k < 0)
            {
                throw invalid_parameter("top_k: k must be >= 0 (0 disables it), got " + std::to_string(k));
            }
        }
        std::int64_t value() const noexcept { return m_k; }
        std::size_t min_keep() const noexcept { return m_min_keep; }

        template <class T>
        void apply(candidates<T>& c) const
        {
            const auto k = std::size_t(std::min<std::uint64_t>(std::uint64_t(m_k), ~std::size_t(0)));
            c.keep_top(k == 0 ? 0 : std::max(k, m_min_keep));
        }

    private:
        std::int64_t m_k;
        std::size_t m_min_keep;
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
