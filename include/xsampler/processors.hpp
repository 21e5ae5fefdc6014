// xsampler/processors.hpp — stages that see the history: min_tokens. (xsampler, BSD-3-Clause)
//
// The processors: stages that see the history (stage.hpp) and edit a few
// logits or mask tokens before the filters run. Each costs what it touches,
// never a pass over the row, and never writes the caller's row.
//
// min_tokens{n, eos}
//   While fewer than n tokens have been generated (history.generated(): the
//   tokens after the prompt), every eos id is masked, so the sequence cannot
//   end before n tokens. n == 0 or an empty eos list: no effect. Costs
//   O(|eos|) per step while active, nothing after. An eos id that is negative
//   or not below the row's vocabulary: invalid_parameter naming it, thrown
//   at construction (negative) or at the first step that sees the row. When
//   the eos ids were the only unmasked tokens: invalid_logits
//   "min_tokens: every token is masked". vLLM's min_tokens, transformers'
//   MinNewTokensLengthLogitsProcessor; llama.cpp has no such knob.
#ifndef XSAMPLER_PROCESSORS_HPP
#define XSAMPLER_PROCESSORS_HPP

#include <cstddef>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "stage.hpp"

namespace xsampler
{
    class min_tokens
    {
    public:
        static constexpr const char* name = "min_tokens";

        min_tokens(std::size_t n, std::vector<token_id> eos) : m_n(n), m_eos(std::move(eos))
        {
            for (const token_id e : m_eos)
            {
                if (e < 0)
                {
                    throw invalid_parameter("min_tokens: eos id " + std::to_string(e) + " is negative");
                }
            }
        }
        std::size_t value() const noexcept { return m_n; }
        const std::vector<token_id>& eos() const noexcept { return m_eos; }

        /// Whether the step after this history masks the eos ids.
        bool active(const token_history& history) const noexcept { return history.generated().size() < m_n; }

        template <class T>
        void apply(candidates<T>& c, const token_history& history) const
        {
            if (!active(history))
            {
                return;
            }
            for (const token_id e : m_eos)
            {
                if (std::size_t(e) >= c.vocab())
                {
                    throw invalid_parameter("min_tokens: eos id " + std::to_string(e) +
                                            " is outside the vocabulary of " + std::to_string(c.vocab()));
                }
            }
            for (const token_id e : m_eos)
            {
                c.mask(e);
            }
        }

    private:
        std::size_t m_n;
        std::vector<token_id> m_eos;
    };
}

#endif
