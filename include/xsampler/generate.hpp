// xsampler/generate.hpp — the decode loop and its stop reason. (xsampler, BSD-3-Clause)
//
// The decode loop: pick a token, append it, run the model again — and say
// why it stopped.
//
// generate(model, prompt, sampler, options, rng)
//   model:   a callable, model(token_span prefix) -> a 1-D logits row (any
//            xtensor expression of float or double) for the next token after
//            the prefix (prompt plus everything generated so far). A row that
//            is not 1-D, empty, or invalid: invalid_logits naming the step,
//            "generate: step 3: logits: expected a 1-D row, got 2-D".
//   sampler: a chain (chain.hpp) or a sampler (sampler.hpp), called through
//            filter(row, history, rng[, min_tokens]) with the history
//            (prompt plus generated, the prompt's length marked), then its
//            draw(c, rng), so its random filters (xtc) and the stages that
//            learn from the draw (mirostat) work as in sample().
//   Stops, checked after each token in this order:
//     eos           the token is one of options.eos (the eos token is kept
//                   in `tokens`);
//     stop_sequence the generated tokens end with one of
//                   options.stop_sequences (which may complete across
//                   several steps; the sequence is kept in `tokens`), or
//                   the generated text (options.vocab decodes it) contains
//                   one of options.stop_strings, which may be split across
//                   tokens or end inside one; `stop_at` is the byte offset in
//                   the generated text where the stop string starts (the
//                   text before it is what an OpenAI-style API returns);
//                   stop strings without a vocabulary, or an empty one:
//                   invalid_parameter;
//     max_tokens    options.max_tokens tokens were generated without either:
//                   the output is truncated — check for it.
//   min_tokens: until that many tokens have been generated the min_tokens
//   processor (processors.hpp) masks the eos tokens before the sampler's
//   stages, and stop sequences are not checked, so the first min_tokens
//   tokens never end the loop. ignore_eos (llama.cpp's --ignore-eos): the
//   eos ids are masked at every step, so only a stop sequence or max_tokens
//   ends the loop (vLLM's ignore_eos instead lets eos be drawn and go on;
//   a masked eos keeps the text free of it). An eos that was the only
//   possible token: "min_tokens: every token is masked".
//   Each step validates the row once and computes the sampler's own Z once;
//   per token it reports the log-probability under the distribution it was
//   drawn from (filtered and renormalised). Opt-in diagnostics, each read
//   from the row the sampler loaded (no copy): options.model_logprobs, the
//   token's log-probability under the model's raw softmax (no temperature,
//   no filter, no eos mask: one more exp-sum pass); options.entropy, the raw
//   softmax's entropy in nats (two more passes); options.top_logprobs = n,
//   the n most probable tokens of the raw softmax with their
//   log-probabilities, like OpenAI's top_logprobs (rank: logit desc, id asc;
//   a selection pass). Each step draws exactly what the sampler's sample()
//   draws (one uniform01 per token, and one per random filter). After the first step, no allocation per token
//   (outputs are reserved for up to 4096 tokens; top_logprobs allocates its
//   own lists), as long as the model's row does not allocate.
#ifndef XSAMPLER_GENERATE_HPP
#define XSAMPLER_GENERATE_HPP

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "processors.hpp"
#include "vocabulary.hpp"
#include "sampler.hpp"
#include "softmax.hpp"

namespace xsampler
{
    enum class stop_reason
    {
        eos,
        stop_sequence,
        max_tokens
    };

    inline const char* to_string(stop_reason r) noexcept
    {
        switch (r)
        {
        case stop_reason::eos: return "eos";
        case stop_reason::stop_sequence: return "stop_sequence";
        case stop_reason::max_tokens: return "max_tokens";
        }
        return "?";
    }

    struct generate_options
    {
        std::size_t max_tokens = 256;
        std::size_t min_tokens = 0;
        std::vector<token_id> eos;
        bool ignore_eos = false;  ///< llama.cpp's --ignore-eos: the eos ids are masked at every step
        std::vector<std::vector<token_id>> stop_sequences;
        std::vector<std::string> stop_strings;  ///< text that ends the loop (needs vocab)
        const vocabulary* vocab = nullptr;      ///< decodes the tokens for stop_strings
        bool model_logprobs = false;   ///< report each token's raw-softmax log-probability
        bool entropy = false;          ///< report the raw softmax's entropy at each step
        std::size_t top_logprobs = 0;  ///< report the n most probable tokens at each step
    };

    struct generation
    {
        std::vector<token_id> tokens;                        ///< without the prompt; with the eos / stop sequence
        std::vector<double> logprobs;                        ///< under the distribution each was drawn from
        std::vector<double> model_logprobs;                  ///< under the model's raw softmax, when asked for
        std::vector<double> entropies;                       ///< of the raw softmax at each step, nats, when asked for
        std::vector<std::vector<sampled_token>> top_logprobs;  ///< per step, when asked for
        stop_reason reason = stop_reason::max_tokens;
        std::size_t stop_at = std::string::npos;  ///< where a matched stop string starts in the generated text
    };

    namespace detail
    {
        inline bool ends_with(const std::vector<token_id>& tokens, const std::vector<token_id>& tail)
        {
            return tail.size() <= tokens.size() && std::equal(tail.begin(), tail.end(), tokens.end() - std::ptrdiff_t(tail.size()));
        }

    }

    template <class Model, class Sampler, class URBG>
    generation generate(Model&& model, const std::vector<token_id>& prompt, Sampler& sampler,
                        const generate_options& options, URBG& rng)
    {
        for (const auto& seq : options.stop_sequences)
        {
            if (seq.empty())
            {
                throw invalid_parameter("generate: a stop sequence is empty");
            }
        }
        std::size_t longest_stop = 0;
        for (const auto& text : options.stop_strings)
        {
            if (text.empty())
            {
                throw invalid_parameter("generate: a stop string is empty");
            }
            longest_stop = std::max(longest_stop, text.size());
        }
        if (longest_stop > 0 && options.vocab == nullptr)
        {
            throw invalid_parameter("generate: stop strings need a vocabulary (options.vocab)");
        }
        std::string text;  // the generated text, when stop strings are checked
        const min_tokens suppress(options.ignore_eos ? std::numeric_limits<std::size_t>::max() : options.min_tokens,
                                  options.eos);
        generation out;
        const std::size_t reserved = detail::tokens_to_reserve(options.max_tokens);
        out.tokens.reserve(reserved);
        out.logprobs.reserve(reserved);
        out.model_logprobs.reserve(options.model_logprobs ? reserved : 0);
        out.entropies.reserve(options.entropy ? reserved : 0);
        out.top_logprobs.reserve(options.top_logprobs > 0 ? reserved : 0);
        std::vector<token_id> history;
        history.reserve(prompt.size() + reserved);
        history.insert(history.end(), prompt.begin(), prompt.end());
        detail::scored_lists best;  // the top-n diagnostic's scratch
        for (std::size_t step = 0; step < options.max_tokens; ++step)
        {
            const token_history seen(token_span(history), prompt.size());
            auto&& produced = model(seen.tokens());
            const bool may_stop = seen.generated().size() >= options.min_tokens;
            try
            {
                auto& c = suppress.active(seen) ? sampler.filter(produced, seen, rng, suppress)
                                                : sampler.filter(produced, seen, rng);
                using T = typename std::decay_t<decltype(c)>::value_type;
                const sampled_token t = sampler.draw(c, rng);
                if (options.model_logprobs || options.entropy || options.top_logprobs > 0)
                {
                    const detail::raw_softmax<T> raw(c);
                    if (options.model_logprobs)
                    {
                        out.model_logprobs.push_back(raw.logprob(std::size_t(t.id)));
                    }
                    if (options.entropy)
                    {
                        out.entropies.push_back(raw.entropy());
                    }
                    if (options.top_logprobs > 0)
                    {
                        out.top_logprobs.emplace_back();
                        raw.top(std::min(options.top_logprobs, c.vocab()), best.get(T()), out.top_logprobs.back());
                    }
                }
                out.tokens.push_back(t.id);
                out.logprobs.push_back(t.logprob);
                history.push_back(t.id);
                if (longest_stop > 0)
                {
                    if (std::size_t(t.id) >= options.vocab->size())
                    {
                        throw invalid_parameter("generate: token " + std::to_string(t.id) +
                                                " is outside the stop strings' vocabulary of " +
                                                std::to_string(options.vocab->size()));
                    }
                    text += options.vocab->bytes(t.id);
                }
            }
            catch (const invalid_logits& e)
            {
                throw invalid_logits("generate: step " + std::to_string(step) + ": " + e.what());
            }
            if (!may_stop)
            {
                continue;
            }
            if (std::find(options.eos.begin(), options.eos.end(), out.tokens.back()) != options.eos.end())
            {
                out.reason = stop_reason::eos;
                return out;
            }
            for (const auto& seq : options.stop_sequences)
            {
                if (detail::ends_with(out.tokens, seq))
                {
                    out.reason = stop_reason::stop_sequence;
                    return out;
                }
            }
            if (longest_stop > 0)
            {
                // Only a match that ends in the new token's bytes is new: each stop
                // string is searched from its length - 1 bytes before them. The
                // earliest match wins.
                const std::size_t added = options.vocab->bytes(out.tokens.back()).size();
                for (const auto& stop : options.stop_strings)
                {
                    const std::size_t at = text.find(stop, text.size() - std::min(text.size(), added + stop.size() - 1));
                    if (at != std::string::npos)
                    {
                        out.stop_at = std::min(out.stop_at, at);
                    }
                }
                if (out.stop_at != std::string::npos)
                {
                    out.reason = stop_reason::stop_sequence;
                    return out;
                }
            }
        }
        out.reason = stop_reason::max_tokens;
        return out;
    }
}

#endif
