// xsampler/beam_search.hpp — beam search: the N best sentences with their probabilities. (xsampler, BSD-3-Clause)
//
// Beam search: the N best sentences, each with its probability.
//
// beam_search(model, prompt, options)
//   model: a callable, model(prefixes) -> a [beams, vocab] logits tensor,
//   where prefixes is a const std::vector<std::vector<token_id>>& of the live
//   beams' full sequences (prompt plus generated). It is called once per step
//   with every live beam as one batch.
//   Each step scores every (beam, token) by the beam's log-probability plus
//   the token's raw log-softmax (no temperature, no filter; bit for bit
//   log_softmax(row)), and takes the top 2B of the flattened [beams x vocab]
//   scores by selection (never a full sort), ranked by (score desc, beam asc,
//   token asc): ties go to lower ids.
//   In rank order, a candidate ending in an eos token becomes a finished
//   hypothesis if it ranks among the first B; the others extend the beams
//   until B are live.
//   Score = logprob / length^alpha (0 when logprob is 0; alpha =
//   options.length_penalty; length in
//   generated tokens, eos included; alpha = 0 ranks by raw log-probability).
//   Early stopping: once n_best hypotheses have finished, stop when no live
//   beam can beat the worst of the n_best (its log-probability can only fall;
//   the bound takes the most favourable length up to max_tokens).
//   Beams alive at max_tokens are returned too, marked unfinished.
//   Returns the n_best hypotheses, best score first (ties: lexicographically
//   smaller token sequence first), each with its tokens (without the
//   prompt), its log-probability under the model (probability =
//   exp(logprob)), its score, and whether it ended with eos.
//   Memory: each step validates and reads every beam's row once, in place (a
//   row that is not contiguous is copied into one reused buffer). Once the
//   live count has reached its peak, a step allocates nothing, as long as
//   the model's output does not: the beams live in two pools of hypotheses
//   swapped each step and the prefixes in vectors reassigned in place, each
//   reserved for up to min(max_tokens, 4096) generated tokens when its slot
//   is first used (longer sequences grow amortised). Slots are created as
//   the live count first reaches them, never beam_width of them up front:
//   the count is bounded by the model's [beams, vocab] output. A hypothesis
//   that finishes allocates its own copy then.
//   Errors (invalid_parameter): beam_width or n_best of 0, n_best >
//   beam_width, beam_width > max_beam_width (token_id's max / 2, so that 2B
//   cannot wrap), max_tokens 0, a non-finite length penalty — all checked
//   before anything is allocated. Errors (invalid_logits): a model output of
//   the wrong shape, beams x vocab beyond token_id's range, or an invalid
//   row, naming the step (from 0, as generate counts) and the beam:
//   "beam_search: step 3, beam 1: logits: NaN at index 2".
#ifndef XSAMPLER_BEAM_SEARCH_HPP
#define XSAMPLER_BEAM_SEARCH_HPP

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
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

    namespace detail
    {
        /// The reusable state of one beam search: two pools of hypotheses
        /// (the live beams and the next step's) and the prefixes handed to
        /// the model. Slots are created as the live count first
        /// reaches them, each token vector reserved once; after that a step
        /// reuses every buffer (vectors are assigned, never rebuilt).
        struct beam_state
        {
            std::vector<hypothesis> live;  // the first n_live are the beams
            std::vector<hypothesis> next;
            std::size_t n_live = 0;
            std::vector<std::vector<token_id>> prefixes;  // exactly n_live
            std::vector<std::vector<token_id>> spare;     // prefixes not in use, capacity kept
            std::size_t reserved = 0;                     // tokens reserved per hypothesis
            std::size_t prefix_reserved = 0;              // tokens reserved per prefix

            /// Slot i of a pool (i <= pool.size()), created on first use.
            hypothesis& slot(std::vector<hypothesis>& pool, std::size_t i)
            {
                if (i == pool.size())
                {
                    pool.emplace_back();
                    pool.back().tokens.reserve(reserved);
                }
                return pool[i];
            }

            /// prefixes[b] = prompt + live[b].tokens for the n_live beams:
            /// surplus prefixes go to the spare pool and come back from it,
            /// so no inner vector is destroyed.
            void fill_prefixes(const std::vector<token_id>& prompt)
            {
                while (prefixes.size() > n_live)
                {
                    spare.push_back(std::move(prefixes.back()));
                    prefixes.pop_back();
                }
                while (prefixes.size() < n_live)
                {
                    if (spare.empty())
                    {
                        prefixes.emplace_back();
                        prefixes.back().reserve(prefix_reserved);
                        spare.reserve(prefixes.size());  // room for all of them to be spare
                    }
                    else
                    {
                        prefixes.push_back(std::move(spare.back()));
                        spare.pop_back();
                    }
                }
                for (std::size_t b = 0; b < n_live; ++b)
                {
                    auto& p = prefixes[b];
                    p.assign(prompt.begin(), prompt.end());
                    p.insert(p.end(), live[b].tokens.begin(), live[b].tokens.end());
                }
            }
        };
    }

    /// The widest beam accepted: 2 x beam_width candidates are selected per
    /// step, and that count must stay within token_id's range.
    constexpr std::size_t max_beam_width = std::size_t(std::numeric_limits<token_id>::max()) / 2;

    template <class Model>
    std::vector<hypothesis> beam_search(Model&& model, const std::vector<token_id>& prompt,
                                        const beam_options& options)
    {
        const std::size_t width = options.beam_width;
        if (width > max_beam_width)
        {
            throw invalid_parameter("beam_search: beam_width must be at most " + std::to_string(max_beam_width) +
                                    ", got " + std::to_string(width));
        }
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
        // A certain sentence (logprob 0) scores 0 whatever length^alpha
        // rounds to: 0 / 0 would be NaN when it underflows (alpha <~ -1075).
        const auto score_of = [&](double logprob, std::size_t length) {
            return alpha == 0.0 || logprob == 0.0 ? logprob : logprob / std::pow(double(length), alpha);
        };
        const auto is_eos = [&](token_id t) {
            return std::find(options.eos.begin(), options.eos.end(), t) != options.eos.end();
        };

        using prefixes_type = std::vector<std::vector<token_id>>;
        using logits_type = std::decay_t<std::invoke_result_t<Model&, const prefixes_type&>>;
        using T = detail::logit_type<logits_type>;

        detail::beam_state state;
        state.reserved = detail::tokens_to_reserve(options.max_tokens);
        state.prefix_reserved = prompt.size() + state.reserved;
        state.slot(state.live, 0);  // the empty hypothesis
        state.n_live = 1;
        auto& live = state.live;
        auto& next = state.next;
        std::vector<hypothesis> finished;
        candidates<T> c;  // validates each beam's row and reads it in place
        std::vector<double> flat;
        std::vector<scored<double>> best;
        std::vector<double> scores;
        bool stopped_early = false;
        for (std::size_t step = 0; step < options.max_tokens && state.n_live > 0; ++step)
        {
            const std::size_t n_live = state.n_live;
            state.fill_prefixes(prompt);
            const prefixes_type& prefixes = state.prefixes;
            auto&& logits = model(prefixes);
            const auto& shape = logits.shape();
            if (logits.dimension() != 2 || shape[0] != n_live)
            {
                throw invalid_logits("beam_search: step " + std::to_string(step) +
                                     ": the model returned a tensor of the wrong shape for " +
                                     std::to_string(n_live) + " beams");
            }
            const std::size_t vocab = shape[1];
            if (vocab > std::size_t(std::numeric_limits<token_id>::max()) / n_live)
            {
                throw invalid_logits("beam_search: beams x vocabulary exceeds the id range");
            }
            flat.resize(n_live * vocab);
            for (std::size_t b = 0; b < n_live; ++b)
            {
                try
                {
                    c.load(xt::view(logits, b, xt::all()));
                }
                catch (const invalid_logits& e)
                {
                    throw invalid_logits("beam_search: step " + std::to_string(step) + ", beam " + std::to_string(b) +
                                         ": " + e.what());
                }
                // log_softmax(row)(v), bit for bit, without building it.
                const detail::raw_softmax<T> raw(c);
                const double base = live[b].logprob;
                double* out = flat.data() + b * vocab;
                for (std::size_t v = 0; v < vocab; ++v)
                {
                    out[v] = base + raw.logprob(v);
                }
            }
            detail::select_top(flat.data(), flat.size(), 2 * width, best);
            std::sort(best.begin(), best.end(), ranks_before<double>);

            std::size_t n_next = 0;
            for (std::size_t rank = 0; rank < best.size() && n_next < width; ++rank)
            {
                const std::size_t b = std::size_t(best[rank].id) / vocab;
                const auto token = token_id(std::size_t(best[rank].id) % vocab);
                const auto& from = live[b].tokens;
                if (is_eos(token))
                {
                    if (rank < width)
                    {
                        hypothesis h;
                        h.tokens.reserve(from.size() + 1);
                        h.tokens.assign(from.begin(), from.end());
                        h.tokens.push_back(token);
                        h.logprob = best[rank].logit;
                        h.score = score_of(h.logprob, h.tokens.size());
                        h.finished = true;
                        finished.push_back(std::move(h));
                    }
                    continue;
                }
                hypothesis& h = state.slot(next, n_next++);
                h.tokens.assign(from.begin(), from.end());
                h.tokens.push_back(token);
                h.logprob = best[rank].logit;
                h.score = 0.0;
                h.finished = false;
            }
            std::swap(live, next);
            state.n_live = n_next;

            if (options.early_stopping && finished.size() >= options.n_best && n_next > 0)
            {
                scores.clear();
                for (const auto& h : finished)
                {
                    scores.push_back(h.score);
                }
                std::nth_element(scores.begin(), scores.begin() + std::ptrdiff_t(options.n_best - 1), scores.end(),
                                 std::greater<double>());
                const double worst_kept = scores[options.n_best - 1];
                double bound = -std::numeric_limits<double>::infinity();
                for (std::size_t i = 0; i < n_next; ++i)
                {
                    const hypothesis& h = live[i];
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
            for (std::size_t i = 0; i < state.n_live; ++i)
            {
                hypothesis& h = live[i];
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
