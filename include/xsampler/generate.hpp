// xsampler/generate.hpp — the decode loop and its stop reason. (xsampler, BSD-3-Clause)
//
// The decode loop: pick a token, append it, run the model again — and say
// why it stopped.
//
// generate(model, prompt, sampler, options, rng): a loop over a
// basic_sequence (sequence.hpp) that borrows the sampler.
//   model:   a callable, model(token_span prefix) -> a 1-D logits row (any
//            xtensor expression of float or double) for the next token after
//            the prefix (prompt plus everything generated so far). A row that
//            is not 1-D, empty, or invalid: invalid_logits naming the step,
//            "generate: step 3: logits: expected a 1-D row, got 2-D".
//   sampler: a chain (chain.hpp) or a sampler (sampler.hpp), called through
//            filter(row, history, rng, eos mask) with the history
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
//                   tokens or end inside one (the first to complete wins);
//                   `text` is cut where it starts and `stop_at` is that
//                   offset (the text is what an OpenAI-style API returns;
//                   invalid bytes are U+FFFD in it); stop strings without a
//                   vocabulary, or an empty one: invalid_parameter;
//     max_tokens    options.max_tokens tokens were generated without either:
//                   the output is truncated — check for it.
//   min_tokens: until that many tokens have been generated the eos tokens
//   are masked before the sampler's stages, and stop sequences are not
//   checked, so the first min_tokens tokens never end the loop. ignore_eos
//   (llama.cpp's --ignore-eos): the eos ids are masked at every step, so
//   only a stop sequence or max_tokens ends the loop (vLLM's ignore_eos instead lets eos be drawn and go on;
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

#include "sequence.hpp"

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
        std::size_t stop_at = std::string::npos;  ///< where a matched stop string starts in `text`
        std::string text;  ///< the generated text (with stop strings), cut before the one that matched
    };

    namespace detail
    {
        inline sequence_options sequence_options_of(const generate_options& o)
        {
            sequence_options s;
            s.max_tokens = o.max_tokens;
            s.min_tokens = std::min(o.min_tokens, o.max_tokens);
            s.eos = o.eos;
            s.eos_mode = o.ignore_eos ? eos_policy::mask : eos_policy::stop;
            s.stop_sequences = o.stop_sequences;
            s.stop_strings = o.stop_strings;
            s.vocab = o.stop_strings.empty() ? nullptr : o.vocab;  // the text only for stop strings
            s.raw_logprob = o.model_logprobs;
            s.entropy = o.entropy;
            s.top_logprobs = o.top_logprobs;
            return s;
        }

        inline stop_reason stop_reason_of(finish_reason r) noexcept
        {
            switch (r)
            {
            case finish_reason::eos: return stop_reason::eos;
            case finish_reason::length:
            case finish_reason::none:
            case finish_reason::cancelled: return stop_reason::max_tokens;
            default: return stop_reason::stop_sequence;
            }
        }
    }

    template <class Model, class Sampler, class URBG>
    generation generate(Model&& model, const std::vector<token_id>& prompt, Sampler& sampler,
                        const generate_options& options, URBG& rng)
    {
        basic_sequence<Sampler&> seq(sampler, prompt, detail::sequence_options_of(options), "generate");
        generation out;
        const std::size_t reserved = detail::tokens_to_reserve(options.max_tokens);
        out.tokens.reserve(reserved);
        out.logprobs.reserve(reserved);
        out.model_logprobs.reserve(options.model_logprobs ? reserved : 0);
        out.entropies.reserve(options.entropy ? reserved : 0);
        out.top_logprobs.reserve(options.top_logprobs > 0 ? reserved : 0);
        while (!seq.finished())
        {
            auto&& produced = model(seq.history().tokens());
            const step_result* r = nullptr;
            try
            {
                r = &seq.step(produced, rng);
            }
            catch (const invalid_logits& e)
            {
                throw invalid_logits(std::string("generate: ") + e.what());
            }
            out.tokens.push_back(r->id);
            out.logprobs.push_back(r->logprob);
            if (options.model_logprobs)
            {
                out.model_logprobs.push_back(r->raw_logprob);
            }
            if (options.entropy)
            {
                out.entropies.push_back(r->entropy);
            }
            if (options.top_logprobs > 0)
            {
                out.top_logprobs.emplace_back(r->top.begin(), r->top.end());
            }
        }
        out.reason = detail::stop_reason_of(seq.reason());
        out.stop_at = seq.stop_at();
        out.text = seq.text();
        return out;
    }
}

#endif
