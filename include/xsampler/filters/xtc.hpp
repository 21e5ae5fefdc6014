// xsampler/filters/xtc.hpp — XTC, "exclude top choices": a random filter. (xsampler, BSD-3-Clause)
//
// xtc{probability, threshold, min_keep = 1}
//   With the given probability, removes every token whose probability is
//   >= threshold except the least probable of them, so the step takes a
//   less obvious continuation while staying among the plausible ones
//   (llama.cpp's XTC). Precisely, with p_i the current probabilities
//   (temperature so far included) and A the tokens with p_i >= threshold
//   (a prefix of the rank, decided as exact arithmetic decides it, as for
//   epsilon): when u < probability, |A| >= 2 and at least min_keep tokens
//   would be left, the |A| - 1 best-ranked tokens are removed (ties: the
//   lower ids go first, as everywhere). Otherwise nothing changes.
//   u is one uniform01 drawn from the caller's engine for this call (a
//   random filter, stage.hpp): every call consumes exactly one, whether or
//   not it fires, so a sample through a chain with XTC consumes two
//   uniforms (XTC's, then the draw's) and a seed still fixes every token.
//   The run-time sampler leaves XTC out when its probability is 0 (then
//   a sample consumes one).
//   probability in [0, 1]; threshold in [0, 1] (above 0.5 at most one token
//   can reach it, so nothing is ever removed; 0 leaves only the least
//   probable token); min_keep 0 counts as 1, as for every filter. Not a rank prefix: greedy after it
//   returns the best token it left.
//   llama.cpp draws its coin from its own std::mt19937 (seeded apart from
//   the sampler's), fires when the coin is <= probability, and skips the
//   draw when threshold > 0.5 or fewer than 2 tokens are left; it decides
//   p_i >= threshold on float probabilities. Here u < probability fires
//   (so probability 0 never does and 1 always does), the uniform is always
//   consumed, and the decision is exact.
#ifndef XSAMPLER_FILTERS_XTC_HPP
#define XSAMPLER_FILTERS_XTC_HPP

#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "../candidates.hpp"
#include "../stage.hpp"
#include "levels.hpp"

namespace xsampler
{
    class xtc
    {
    public:
        static constexpr const char* name = "xtc";
        static constexpr bool keeps_rank_prefix = false;

        xtc(double probability, double threshold, std::size_t min_keep = 1)
            : m_probability(probability), m_threshold(threshold), m_min_keep(detail::min_keep_of(min_keep))
        {
            if (!(probability >= 0.0 && probability <= 1.0))
            {
                throw invalid_parameter("xtc: probability must be in [0, 1], got " + detail::format_value(probability));
            }
            if (!(threshold >= 0.0 && threshold <= 1.0))
            {
                throw invalid_parameter("xtc: threshold must be in [0, 1], got " + detail::format_value(threshold));
            }
        }
        double probability() const noexcept { return m_probability; }
        double threshold() const noexcept { return m_threshold; }
        std::size_t min_keep() const noexcept { return m_min_keep; }
        /// The stage in words, as sampler::describe_stages gives it.
        std::string describe() const
        {
            return detail::with_min_keep("xtc probability " + detail::format_value(m_probability) + ", threshold " +
                                             detail::format_value(m_threshold),
                                         m_min_keep);
        }

        template <class T>
        void apply(candidates<T>& c, double u)
        {
            if (!(u < m_probability) || m_threshold > 0.5)
            {
                return;
            }
            // At most 1/threshold tokens can reach the threshold: they are
            // among the best that many (every kept token when it is 0).
            const double most = m_threshold > 0.0 ? std::floor(1.0 / m_threshold) : double(c.vocab());
            auto& top = m_top.get(T());
            c.top_items(std::size_t(std::min(most, double(c.vocab()))), top);
            const std::size_t above = count_at_least(c, top);
            if (above < 2 || (m_min_keep > 1 && c.size() < above - 1 + m_min_keep))
            {
                return;
            }
            for (std::size_t i = 0; i + 1 < above; ++i)
            {
                c.mask(top[i].id);
            }
        }

    private:
        // The number of leading tokens of `top` (the best of the set, in
        // rank order) whose probability is >= the threshold, exactly.
        template <class T>
        std::size_t count_at_least(candidates<T>& c, const std::vector<scored<T>>& top) const
        {
            return m_threshold == 0.0 ? top.size() : detail::count_probability_at_least(c, m_threshold, top);
        }

        double m_probability;
        double m_threshold;
        std::size_t m_min_keep;
        detail::scored_lists m_top;  // scratch
    };
}

#endif
