// xsampler/filters/temperature.hpp — temperature, plain and dynamic. (xsampler, BSD-3-Clause)
//
// A filter (stage.hpp): a small value type, validated when constructed
// (invalid_parameter naming the stage, the parameter, the range and the
// value), with `apply(candidates<T>&)`.
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
#ifndef XSAMPLER_FILTERS_TEMPERATURE_HPP
#define XSAMPLER_FILTERS_TEMPERATURE_HPP

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "../candidates.hpp"
#include "../stage.hpp"

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
        /// The stage in words, as sampler::describe_stages gives it.
        std::string describe() const
        {
            const std::string t = std::string(name) + " " + detail::format_value(m_t);
            return m_range > 0.0 ? t + ", dynamic: range " + detail::format_value(m_range) + ", exponent " +
                                       detail::format_value(m_exponent)
                                 : t + (m_t == 0.0 ? " (greedy)" : "");
        }
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
}

#endif
