// xsampler/beam_search.hpp — beam search: the N best sentences with their probabilities. (xsampler, BSD-3-Clause)
//
// Beam search: the N best sentences, each with its probability.
//
// beam_search(model, prompt, options)
//   model: a callable, model(prefixes) -> a [beams, vocab] logits tensor,
//   where prefixes is a std::vector<std::vector<token_id>> of the live beams'
//   full sequences (prompt plus generated). It is called once per step with
//   every live beam as one batch.
//   Each step scores every (beam, token) by the beam's log-probability plus
//   the token's raw log-softmax (no temperature, no filter), and takes the top
//   2B of the flattened [beams x vocab] scores by selection (never a full
//   sort), ranked by (score desc, beam asc, token asc): ties go to lower ids.
//   In rank order, a candidate ending in an eos token becomes a finished
//   hypothesis if it ranks among the first B; the others extend the beams
//   until B are live.
//   Score = logprob / length^alpha (alpha = options.length_penalty; length in
//   generated tokens, eos included; alpha = 0 ranks by raw log-probability).
//   Early stopping: once n_best hypotheses have finished, stop when no live
//   beam can beat the worst of the n_best (its log-probability can only fall;
//   the bound takes the most favourable length up to max_tokens).
//   Beams alive at max_tokens are returned too, marked unfinished.
//   Returns the n_best hypotheses, best score first (ties: lexicographically
//   smaller token sequence first), each with its tokens (without the
//   prompt), its log-probability under the model (probability =
//   exp(logprob)), its score, and whether it ended with eos.
//   Errors: beam_width or n_best of 0, n_best > beam_width, max_tokens 0, a
//   non-finite length penalty, a model output of the wrong shape.
#ifndef XSAMPLER_BEAM_SEARCH_HPP
#define XSAMPLER_BEAM_SEARCH_HPP

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <xtensor/xview.hpp>

#include "softmax.hpp"

namespace xsampler
{
    struct beam_options
    {
        std::size_t beam_width = 4;
        std::size_t max_tokens = 32;
        std::vector<token_id> eos;
        double length_penalty = 1.0;
        std::size_t n_best = 1;
        bool early_stopping = true;
    };

    struct hypothesis
    {
        std::vector<token_id> tokens;
        double logprob = 0.0;
        double score = 0.0;
        bool finished = false;
    };

    template <class Model>
    std::vector<hypothesis> beam_search(Model&& model, const std::vector<token_id>& prompt,
                                        const beam_options& options)
    {
        const std::size_t width = options.beam_width;
        if (width == 0 || options.n_best == 0 || options.n_best > width)
        {
            throw invalid_parameter("beam_search: need 1 <= n_best <= beam_width, got n_best " +
                                    std::to_string(options.n_best) + ", beam_width " + std::to_string(width));
        }
        if (options.max_tokens == 0)
        {
            throw invalid_parameter("beam_search: max_tokens must be >= 1, got 0");
        }
        const double alpha = options.length_penalty;
        if (!std::isfinite(alpha))
        {
            throw invalid_parameter("beam_search: length_penalty must be finite, got " + detail::format_value(alpha));
        }
        const auto score_of = [&](double logprob, std::size_t length) {
            return alpha == 0.0 ? logprob : logprob / std::pow(double(length), alpha);
        };
        const auto is_eos = [&](token_id t) {
            return std::find(options.eos.begin(), options.eos.end(), t) != options.eos.end();
        };

        std::vector<hypothesis> live = {hypothesis{}};
        std::vector<hypothesis> finished;
        std::vector<std::vector<token_id>> prefixes;
        std::vector<double> flat;
        std::vector<scored<double>> best;
        bool stopped_early = false;
        for (std::size_t step = 1; step <= options.max_tokens && !live.empty(); ++step)
        {
            prefixes.clear();
            for (const auto& h : live)
            {
                prefixes.push_back(prompt);
                prefixes.back().insert(prefixes.back().end(), h.tokens.begin(), h.tokens.end());
            }
            auto&& logits = model(prefixes);
            const auto& shape = logits.shape();
            if (logits.dimension() != 2 || shape[0] != live.size())
            {
                throw invalid_logits("beam_search: the model returned a tensor of the wrong shape for " +
                                     std::to_string(live.size()) + " beams");
            }
            const std::size_t vocab = shape[1];
            if (live.size() * vocab > std::size_t(std::numeric_limits<token_id>::max()))
            {
                throw invalid_logits("beam_search: beams x vocabulary exceeds the id range");
            }
            flat.resize(live.size() * vocab);
            for (std::size_t b = 0; b < live.size(); ++b)
            {
                const auto lsm = log_softmax(xt::view(logits, b, xt::all()));
                for (std::size_t v = 0; v < vocab; ++v)
                {
                    flat[b * vocab + v] = live[b].logprob + lsm(v);
                }
            }
            detail::select_top(flat.data(), flat.size(), 2 * width, best);
            std::sort(best.begin(), best.end(), ranks_before<double>);

            std::vector<hypothesis> next;
            for (std::size_t rank = 0; rank < best.size() && next.size() < width; ++rank)
            {
                const std::size_t b = std::size_t(best[rank].id) / vocab;
                const auto token = token_id(std::size_t(best[rank].id) % vocab);
                hypothesis h{live[b].tokens, best[rank].logit, 0.0, false};
                h.tokens.push_back(token);
                if (is_eos(token))
                {
                    if (rank < width)
                    {
                        h.score = score_of(h.logprob, h.tokens.size());
                        h.finished = true;
                        finished.push_back(std::move(h));
                    }
                    continue;
                }
                next.push_back(std::move(h));
            }
            live = std::move(next);

            if (options.early_stopping && finished.size() >= options.n_best && !live.empty())
            {
                std::vector<double> scores;
                for (const auto& h : finished)
                {
                    scores.push_back(h.score);
                }
                std::nth_element(scores.begin(), scores.begin() + std::ptrdiff_t(options.n_best - 1), scores.end(),
                                 std::greater<double>());
                const double worst_kept = scores[options.n_best - 1];
                double bound = -std::numeric_limits<double>::infinity();
                for (const auto& h : live)
                {
                    // The best score this beam could still reach: its
                    // log-probability can only fall; pick the kindest length.
                    const std::size_t shortest = h.tokens.size() + 1;
                    const std::size_t kindest = (h.logprob < 0.0) == (alpha > 0.0) ? options.max_tokens : shortest;
                    bound = std::max(bound, score_of(h.logprob, std::max(kindest, shortest)));
                }
                if (bound <= worst_kept)
                {
                    stopped_early = true;
                    break;
                }
            }
        }
        std::vector<hypothesis> all = std::move(finished);
        if (!stopped_early)
        {
            for (auto& h : live)
            {
                h.score = score_of(h.logprob, h.tokens.size());
                all.push_back(std::move(h));
            }
        }
        std::sort(all.begin(), all.end(), [](const hypothesis& a, const hypothesis& b) {
            return a.score > b.score || (a.score == b.score && a.tokens < b.tokens);
        });
        if (all.size() > options.n_best)
        {
            all.resize(options.n_best);
        }
        return all;
    }
}

#endif
