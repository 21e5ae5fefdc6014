// xsampler — token samplers for language-model inference. BSD-3-Clause.
//
// The decode loop: pick a token, append it, run the model again — and say
// why it stopped.
//
// generate(model, prompt, sampler, options, rng)
//   model:   a callable, model(token_span prefix) -> a 1-D logits row (any
//            xtensor expression of float or double) for the next token after
//            the prefix (prompt plus everything generated so far).
//   sampler: a chain or a sampler (chain.hpp); called with the prefix as the
//            history.
//   Stops, checked after each token in this order:
//     eos           the token is one of options.eos (the eos token is kept
//                   in `tokens`);
//     stop_sequence the generated tokens end with one of
//                   options.stop_sequences (which may complete across
//                   several steps; the sequence is kept in `tokens`);
//     max_tokens    options.max_tokens tokens were generated without either:
//                   the output is truncated — check for it.
//   min_tokens: until that many tokens have been generated the eos tokens are
//   masked (-inf) before sampling and stop sequences are not checked, so the
//   first min_tokens tokens never end the loop.
//   Returns, per generated token: its log-probability under the distribution
//   it was drawn from (filtered and renormalised), under the model's raw
//   softmax (no temperature, no filter, no eos mask), the entropy of the raw
//   softmax (nats), and with options.top_logprobs = n the n most probable
//   tokens of the raw softmax with their log-probabilities (like OpenAI's
//   top_logprobs; ties to the lower id). Each step draws exactly what the
//   sampler draws (one uniform01 per token).
#ifndef XSAMPLER_GENERATE_HPP
#define XSAMPLER_GENERATE_HPP

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "chain.hpp"
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
        std::vector<std::vector<token_id>> stop_sequences;
        std::size_t top_logprobs = 0;
    };

    struct token_logprob
    {
        token_id id;
        double logprob;
    };

    struct generation
    {
        std::vector<token_id> tokens;                        ///< without the prompt; with the eos / stop sequence
        std::vector<double> logprobs;                        ///< under the distribution each was drawn from
        std::vector<double> model_logprobs;                  ///< under the model's raw softmax
        std::vector<double> entropies;                       ///< of the raw softmax at each step, nats
        std::vector<std::vector<token_logprob>> top_logprobs;  ///< per step, when asked for
        stop_reason reason = stop_reason::max_tokens;
    };

    namespace detail
    {
        inline bool ends_with(const std::vector<token_id>& tokens, const std::vector<token_id>& tail)
        {
            return tail.size() <= tokens.size() && std::equal(tail.begin(), tail.end(), tokens.end() - std::ptrdiff_t(tail.size()));
        }

        /// The n best of a row of log-probabilities, by (value desc, id asc).
        inline std::vector<token_logprob> top_n(const xt::xtensor<double, 1>& logprobs, std::size_t n)
        {
            std::vector<scored<double>> best;
            select_top(logprobs.data(), logprobs.size(), n, best);
            std::sort(best.begin(), best.end(), ranks_before<double>);
            std::vector<token_logprob> out;
            for (const auto& s : best)
            {
                out.push_back({s.id, s.logit});
            }
            return out;
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
        generation out;
        std::vector<token_id> history = prompt;
        for (std::size_t step = 0; step < options.max_tokens; ++step)
        {
            auto&& produced = model(token_span(history));
            using T = detail::logit_type<std::decay_t<decltype(produced)>>;
            xt::xtensor<T, 1> row = produced;
            const auto raw = log_softmax(row);  // validates the row
            out.entropies.push_back(entropy(row));
            if (options.top_logprobs > 0)
            {
                out.top_logprobs.push_back(detail::top_n(raw, options.top_logprobs));
            }
            const bool may_stop = out.tokens.size() >= options.min_tokens;
            if (!may_stop)
            {
                for (const token_id e : options.eos)
                {
                    if (e >= 0 && std::size_t(e) < row.size())
                    {
                        row(std::size_t(e)) = -std::numeric_limits<T>::infinity();
                    }
                }
            }
            const sampled_token t = sampler.sample(row, token_span(history), rng);
            out.tokens.push_back(t.id);
            out.logprobs.push_back(t.logprob);
            out.model_logprobs.push_back(raw(std::size_t(t.id)));
            history.push_back(t.id);
            if (!may_stop)
            {
                continue;
            }
            if (std::find(options.eos.begin(), options.eos.end(), t.id) != options.eos.end())
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
        }
        out.reason = stop_reason::max_tokens;
        return out;
    }
}

#endif
