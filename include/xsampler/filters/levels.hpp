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
//   disables it. One pass for Z, one for the entropy, one compare pass.
#ifndef XSAMPLER_FILTERS_LEVELS_HPP
#define XSAMPLER_FILTERS_LEVELS_HPP

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "../candidates.hpp"
#include "../stage.hpp"

namespace xsampler
{
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
