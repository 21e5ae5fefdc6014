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
//
// sample_n(model, prompt, sampler, options, n[, best_of[, seed]])
//   n samples of one prompt (OpenAI's and vLLM's n): sample i is
//   generate(model, prompt, copy of sampler, options, philox4x32(seed, i)),
//   so each is reproducible from (seed, i) alone and independent of the
//   others; seed defaults to the sampler's params().seed (0 for a chain), so
//   sample 0 is what the sampler's own engine draws, and sample i what a
//   sequence with that seed and stream i draws. Each sample starts from a
//   copy of `sampler` as given (its learnt state, a constraint forked).
//   best_of (0: n; else >= n) runs best_of samples and keeps the n with the
//   highest cumulative log-probability under the model's raw softmax (the
//   sum of model_logprobs, computed whether asked or not; ties: the lower
//   index), best first (OpenAI's best_of; vLLM V0 summed the processed
//   log-probabilities instead); with best_of == n the samples come in index
//   order. n == 0 or best_of < n: invalid_parameter.
#ifndef XSAMPLER_GENERATE_HPP
#define XSAMPLER_GENERATE_HPP

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
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

    /// n samples of one prompt, from streams philox4x32(seed, i); best_of
    /// ranks by raw cumulative log-probability (see the top of this header).
    template <class Model, class Sampler>
    std::vector<generation> sample_n(Model&& model, const std::vector<token_id>& prompt, const Sampler& sampler,
                                     const generate_options& options, std::size_t n, std::size_t best_of = 0,
                                     std::optional<std::uint64_t> seed = std::nullopt)
    {
        if (n == 0)
        {
            throw invalid_parameter("sample_n: n must be >= 1, got 0");
        }
        best_of = best_of == 0 ? n : best_of;
        if (best_of < n)
        {
            throw invalid_parameter("sample_n: best_of " + std::to_string(best_of) + " is less than n " +
                                    std::to_string(n));
        }
        const std::uint64_t key = seed ? *seed : detail::seed_of(sampler, 0);
        generate_options o = options;
        o.model_logprobs = o.model_logprobs || best_of > n;
        std::vector<generation> samples;
        samples.reserve(best_of);
        for (std::size_t i = 0; i < best_of; ++i)
        {
            Sampler copy = sampler;
            philox4x32 rng(key, i);
            samples.push_back(generate(model, prompt, copy, o, rng));
        }
        if (best_of == n)
        {
            return samples;
        }
        std::vector<double> score(best_of);
        for (std::size_t i = 0; i < best_of; ++i)
        {
            score[i] = std::accumulate(samples[i].model_logprobs.begin(), samples[i].model_logprobs.end(), 0.0);
        }
        std::vector<std::size_t> rank(best_of);
        std::iota(rank.begin(), rank.end(), std::size_t(0));
        std::stable_sort(rank.begin(), rank.end(), [&](std::size_t a, std::size_t b) { return score[a] > score[b]; });
        std::vector<generation> best;
        best.reserve(n);
        for (std::size_t j = 0; j < n; ++j)
        {
            best.push_back(std::move(samples[rank[j]]));
            if (!options.model_logprobs)
            {
                best.back().model_logprobs.clear();
            }
        }
        return best;
    }
}

#endif
