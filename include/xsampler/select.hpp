// xsampler/select.hpp — the draw, greedy, and the final distribution. (xsampler, BSD-3-Clause)
//
// The terminal step: choose one token.
//
// greedy(logits)
//   The argmax of the row; ties go to the lowest id. Validates the row like
//   every other function (NaN, +inf, empty, all masked: invalid_logits).
//   Consumes no randomness.
// draw(candidates, rng)
//   A categorical draw from the kept set, renormalised: token i with
//   probability w_i / Z (row.hpp). It consumes exactly one uniform01(rng) per
//   call, always — even when one candidate is left — so a sequence's position
//   in the stream never depends on the parameters. The inverse CDF walks the
//   blocks of the contract's sum in id order: u in [0, 1), target = u * Z;
//   the first block whose running total exceeds the target, then the first id
//   in it whose running total (from the block's start) exceeds the target. If
//   rounding leaves the target at or past the end, the last kept id with a
//   positive weight in that block (or overall) is taken. A token of weight 0
//   is never drawn. Returns the id and its log-probability under the
//   distribution drawn from: log(w / Z), the log of what distribution_of
//   reports for it.
// sample_distinct(candidates, k, rng, out)
//   Up to k distinct tokens of the kept set, in the order k draws without
//   replacement would give them (Plackett-Luce: the first with probability
//   w_i / Z, the next w_j / (Z - w_i), ...), by the Gumbel-top-k trick: each
//   kept token of positive weight gets E_i = -log(1 - U_i), an Exp(1) draw,
//   and the k smallest E_i / w_i (ties: the lower id) are taken in that
//   order (an exponential race: the smallest is token i with probability
//   w_i / Z, and by memorylessness the rest is a fresh race). U_i is the
//   uniform01 of id i among V = vocab() drawn in id order (with philox4x32,
//   output position + i; only the kept tokens' are computed), so every call
//   consumes exactly V uniforms whatever the parameters. Fewer kept tokens
//   of positive weight than k: all of them. out[j] = {id, log(w / Z)}, as
//   draw reports; returns the count. k = 0 or k > V: invalid_parameter.
//   k = 1 is an exact sample, but not the token draw() takes from the same
//   engine (another use of the uniforms). `out` is the only storage: once it
//   has grown to the kept count nothing is allocated.
// distribution_of(candidates)
//   The kept tokens and their probabilities w_i / Z, sorted by probability
//   descending, then id ascending.
#ifndef XSAMPLER_SELECT_HPP
#define XSAMPLER_SELECT_HPP

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "candidates.hpp"
#include "random.hpp"

namespace xsampler
{
    /// The argmax of a row of logits (ties: lowest id).
    template <class E>
    token_id greedy(const xt::xexpression<E>& logits)
    {
        std::vector<detail::stored_type<E>> scratch;
        return detail::scan_row(detail::contiguous_row(logits, scratch)).argmax;
    }

    /// Draws one token from the kept set of `c` (see the contract above).
    template <class T, class URBG>
    sampled_token draw(candidates<T>& c, URBG& rng)
    {
        const double u = uniform01(rng);
        const double z = c.total_weight_by_block();
        const double target = u * z;
        const auto blocks = c.block_totals();  // only blocks of positive weight
        double before = 0.0;
        std::size_t hit = blocks.size - 1;
        bool past_end = true;  // rounding: u * Z >= Z; then the last positive token
        for (std::size_t b = 0; b < blocks.size; ++b)
        {
            if (before + blocks[b].sum > target)
            {
                hit = b;
                past_end = false;
                break;
            }
            before += blocks[b].sum;
        }
        sampled_token chosen{-1, 0.0};
        T chosen_logit = 0;
        double run = before;
        bool crossed = false;
        c.for_each_in_block(blocks[hit].block, [&](token_id id, T logit) {
            const double w = c.weight(id, logit);
            if (crossed || !(w > 0.0))
            {
                return;
            }
            chosen.id = id;
            chosen_logit = logit;
            run += w;
            crossed = !past_end && run > target;
        });
        chosen.logprob = std::log(double(c.weight(chosen_logit)) / z);
        return chosen;
    }

    namespace detail
    {
        inline void check_distinct_k(std::size_t k, std::size_t vocab)
        {
            if (k == 0 || k > vocab)
            {
                throw invalid_parameter("sample_distinct: k must be in [1, " + std::to_string(vocab) + "], got " +
                                        std::to_string(k));
            }
        }

        // Skips n uniform01 draws.
        inline void skip_uniforms(philox4x32& rng, std::uint64_t n) noexcept { rng.advance(n); }
        template <class URBG>
        void skip_uniforms(URBG& rng, std::uint64_t n)
        {
            for (; n > 0; --n)
            {
                uniform01(rng);
            }
        }
    }

    /// Up to k distinct tokens of `c`, without replacement (see the contract above).
    template <class T, class URBG>
    std::size_t sample_distinct(candidates<T>& c, std::size_t k, URBG& rng, std::vector<sampled_token>& out)
    {
        const std::size_t vocab = c.vocab();
        detail::check_distinct_k(k, vocab);
        const double z = c.total_weight();
        out.clear();
        std::size_t next = 0;  // the id whose uniform comes next
        c.for_each_by_id([&](token_id id, T logit) {
            const double w = c.weight(id, logit);
            if (!(w > 0.0))
            {
                return;
            }
            detail::skip_uniforms(rng, std::size_t(id) - next);
            const double e = -std::log1p(-uniform01(rng));
            next = std::size_t(id) + 1;
            out.push_back({id, e / w});  // the race time, for now
        });
        detail::skip_uniforms(rng, vocab - next);
        const std::size_t n = std::min(k, out.size());
        std::partial_sort(out.begin(), out.begin() + std::ptrdiff_t(n), out.end(),
                          [](const sampled_token& a, const sampled_token& b) {
                              return a.logprob < b.logprob || (a.logprob == b.logprob && a.id < b.id);
                          });
        out.resize(n);
        for (auto& t : out)
        {
            t.logprob = std::log(double(c.weight(t.id, c.logit(t.id))) / z);
        }
        return n;
    }

    /// The kept tokens of `c` with their probabilities, most probable first.
    template <class T>
    distribution distribution_of(candidates<T>& c)
    {
        const double z = c.total_weight();
        std::vector<std::pair<double, token_id>> kept;
        kept.reserve(c.dense() ? c.vocab() : c.size());  // no counting pass for a dense set
        c.for_each_by_id([&](token_id id, T logit) { kept.emplace_back(c.weight(id, logit) / z, id); });
        std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) {
            return a.first > b.first || (a.first == b.first && a.second < b.second);
        });
        distribution d;
        d.ids.reserve(kept.size());
        d.probs.reserve(kept.size());
        for (const auto& k : kept)
        {
            d.ids.push_back(k.second);
            d.probs.push_back(k.first);
        }
        return d;
    }
}

#endif
