// xsampler/speculative.hpp — speculative decoding: a draft's tokens verified against the target. (xsampler, BSD-3-Clause)
//
// A draft model proposes k tokens x_1 .. x_k, drawn from its distributions
// q_1 .. q_k; the target model, run once on the prefix and the draft, gives
// k + 1 rows. Verification keeps a prefix of the draft and adds one token of
// the target's own, so a call emits 1 to k + 1 tokens. The target's
// distribution p_i at position i is its final distribution: the target
// chain (a sampler or a chain, chain.hpp) run on row i with the history of
// the prefix and x_1 .. x_(i-1), every stage included (processors,
// constraints, filters), what sample() would draw from there.
//
// verify_draft(target, rows, history, [draft_probs,] options, out, rng)
//   rows     [k + 1, V]: row i the target's logits after the prefix and
//            x_1 .. x_i (row 0 after the prefix alone).
//   history  what the target was run on: the prefix (prompt and generated
//            tokens, the prompt's length marked) followed by the k draft
//            tokens, which are the last k of history.generated(). Position
//            i sees the history without its last k - i tokens, so nothing is
//            appended and nothing rolled back: a rejected tail is never in a
//            history, and constraints and penalties see only what was kept.
//   draft_probs  [k, V]: row i is q_(i+1), the distribution x_(i+1) was
//            drawn from (entries in [0, 1], each row summing to 1 within
//            1e-3, the drafted token's entry positive). Without it the
//            draft is deterministic, q_i one-hot on x_i (an n-gram or
//            prompt-lookup drafter, a greedy draft model).
//   Rules (options.rule):
//   standard  the rule of speculative sampling (Leviathan et al. 2023,
//             Chen et al. 2023; vLLM's, FlashInfer's and transformers'):
//             position i accepts x_i iff u < p_i(x_i) / q_i(x_i), u =
//             uniform01(rng) (so with probability min(1, p/q)), the ratio
//             in double with p_i(x) = w_x / Z as distribution_of reports
//             it; a token p_i does not keep is rejected. The first
//             rejection emits a token drawn from the residual, r(y) ∝
//             max(0, p_i(y) - q_i(y)) over the tokens p_i keeps (in weight
//             units, w_y - q_i(y) Z, in double; drawn as draw() walks, in id
//             order); a residual that rounds to nothing (p_i <= q_i
//             everywhere: the rejection had probability 0 in exact
//             arithmetic) falls back to p_i. When all k are accepted, the
//             bonus token is drawn from p_(k+1) as sample() draws. The
//             emitted tokens are distributed as sampling them one by one
//             from the target would give.
//   greedy    the target's token at position i is the most probable token
//             of p_i (ties: the lowest id); x_i is accepted while it equals
//             it; the first mismatch emits the target's token, and when all
//             are accepted so is the most probable token of p_(k+1). With a
//             target whose temperature is 0 this is the standard rule
//             without its uniforms. draft_probs are not read.
//   typical   typical acceptance (Medusa, Cai et al. 2024; vLLM's
//             TypicalAcceptanceSampler): x_i is accepted iff p_i(x_i) >=
//             min(options.typical_threshold, options.typical_alpha ·
//             e^(-H(p_i))), H the entropy in nats, decided exactly as
//             eta decides its threshold (filters/levels.hpp); the first
//             rejection emits the most probable token of p_i; when all are
//             accepted, the bonus token is drawn from p_(k+1) as sample()
//             draws. Not distribution-preserving (it trades exactness for
//             acceptance): what it emits is what this contract defines.
//             draft_probs are not read.
// Randomness, in order: each position's random filters (xtc) draw their
// uniforms while its row is filtered; the standard rule then draws one
// uniform01 for the position's test, and at the first rejection one for the
// residual draw; when every draft token is accepted, the bonus position's
// filter and its draw (one uniform01, standard and typical). So with a
// target of no random filter, the standard rule draws (positions tested) +
// 1 uniforms, greedy none, typical one when all are accepted.
// An accepted draft token in options.eos ends the call there: the positions
// after it do not run and no bonus is drawn (the sequence is over; a
// drafter stops at eos too). A token emitted instead of a draft token is
// last whatever it is.
// out: the emitted tokens, {id, logprob} with logprob = ln p_i(id), what
// sample() reports for that token at that position. Returns the number of
// draft tokens accepted: out.size() - 1, or out.size() when an accepted
// eos ended the call. Stages that learn from the draw
// (mirostat) observe each emitted token in order, as a draw of it.
// Errors (invalid_parameter, "verify_draft: ..."), checked before any
// position runs: rows not 2-D or with no row, draft_probs not [k, V], an
// entry outside [0, 1] or NaN, a row whose sum is not 1 within 1e-3, a
// drafted token of draft probability 0, k more than the generated tokens,
// a draft token outside [0, V), typical parameters outside (0, 1]. A row
// the target cannot sample: invalid_logits("verify_draft: position i:
// ..."); the positions before it were decided, their tokens observed, and
// rng moved past their uniforms. Allocates nothing once `out` has room for
// k + 1 tokens, but for a draft_probs row that is not contiguous (copied).
#ifndef XSAMPLER_SPECULATIVE_HPP
#define XSAMPLER_SPECULATIVE_HPP

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include <xtensor/xview.hpp>

#include "chain.hpp"
#include "filters/levels.hpp"

namespace xsampler
{
    /// How verify_draft decides (see the contract above).
    enum class verify_rule
    {
        standard,
        greedy,
        typical
    };

    struct verify_options
    {
        verify_rule rule = verify_rule::standard;
        double typical_threshold = 0.09;  ///< typical: in (0, 1] (Medusa's posterior_threshold)
        double typical_alpha = 0.3;       ///< typical: in (0, 1] (Medusa's posterior_alpha, sqrt of 0.09)
        std::vector<token_id> eos;        ///< an accepted one ends the call: no later position, no bonus
    };

    namespace detail
    {
        inline constexpr const char* verify_who = "verify_draft";

        /// The draft's probabilities: one row per draft token, or one-hot on it.
        struct draft_row
        {
            const double* q64 = nullptr;
            const float* q32 = nullptr;
            token_id drafted = 0;

            double operator()(token_id y) const noexcept
            {
                return q64 != nullptr ? q64[y] : q32 != nullptr ? double(q32[y]) : double(y == drafted);
            }
        };

        /// Token x's logit when the set keeps it (its block walked).
        template <class T>
        bool kept_logit(candidates<T>& c, token_id x, T& logit)
        {
            bool found = false;
            c.for_each_in_block(std::size_t(x) / 64, [&](token_id id, T l) {
                if (id == x)
                {
                    found = true;
                    logit = l;
                }
            });
            return found;
        }

        template <class T>
        sampled_token most_probable(candidates<T>& c)
        {
            const token_id id = c.argmax();
            return {id, std::log(double(c.weight(id, c.max_logit())) / c.total_weight())};
        }

        /// A token drawn from r(y) = max(0, w_y - q(y) Z) over the kept set
        /// (one uniform01); p itself when r rounds to nothing.
        template <class T, class URBG>
        sampled_token draw_residual(candidates<T>& c, const draft_row& q, URBG& rng)
        {
            const double u = uniform01(rng);
            const double z = c.total_weight();
            double total = 0.0;
            c.for_each_by_id([&](token_id id, T logit) {
                total += std::max(0.0, double(c.weight(id, logit)) - q(id) * z);
            });
            const bool fallback = !(total > 0.0);
            const double target = u * (fallback ? z : total);
            double run = 0.0;
            sampled_token chosen{-1, 0.0};
            T chosen_logit = 0;
            bool crossed = false;
            c.for_each_by_id([&](token_id id, T logit) {
                const double w = double(c.weight(id, logit));
                const double r = fallback ? w : std::max(0.0, w - q(id) * z);
                if (crossed || !(r > 0.0))
                {
                    return;
                }
                chosen.id = id;  // the last positive one, should rounding leave the target at the end
                chosen_logit = logit;
                run += r;
                crossed = run > target;
            });
            chosen.logprob = std::log(double(c.weight(chosen.id, chosen_logit)) / z);
            return chosen;
        }

        /// Position i's decision on draft token x: accepted, or the token emitted instead.
        template <class T, class URBG>
        bool accepts(candidates<T>& c, const draft_row& q, const verify_options& o, sampled_token& t, URBG& rng)
        {
            const token_id x = q.drafted;
            if (o.rule == verify_rule::greedy)
            {
                t = most_probable(c);
                return t.id == x;
            }
            T logit = 0;
            const bool kept = kept_logit(c, x, logit);
            if (o.rule == verify_rule::typical)
            {
                bool pass = false;
                if (kept && c.weight(x, logit) > T(0))
                {
                    exact_totals<T> sums;
                    const dd log_a = log_dd(o.typical_threshold);
                    const dd log_b = log_dd(o.typical_alpha);
                    const double e = std::max(log_error(log_a.hi), log_error(log_b.hi));
                    auto level_at = entropy_level(c, sums, log_a, log_b, e);
                    level_test<T, decltype(level_at)> test(c, level_at);
                    pass = test(logit);
                }
                if (pass)
                {
                    t = {x, std::log(double(c.weight(x, logit)) / c.total_weight())};
                    return true;
                }
                t = most_probable(c);
                return false;
            }
            const double u = uniform01(rng);
            const double z = c.total_weight();
            const double w = kept ? double(c.weight(x, logit)) : 0.0;
            if (w > 0.0 && u < w / (q(x) * z))
            {
                t = {x, std::log(w / z)};
                return true;
            }
            t = draw_residual(c, q, rng);
            return false;
        }

        inline void check_verify_options(const verify_options& o)
        {
            if (o.rule != verify_rule::typical)
            {
                return;
            }
            if (!(o.typical_threshold > 0.0 && o.typical_threshold <= 1.0))
            {
                throw invalid_parameter(std::string(verify_who) + ": typical_threshold must be in (0, 1], got " +
                                        format_value(o.typical_threshold));
            }
            if (!(o.typical_alpha > 0.0 && o.typical_alpha <= 1.0))
            {
                throw invalid_parameter(std::string(verify_who) + ": typical_alpha must be in (0, 1], got " +
                                        format_value(o.typical_alpha));
            }
        }

        /// Checks one row of draft probabilities (see the contract).
        template <class Q>
        void check_draft_row(const Q* q, std::size_t n, std::size_t i, token_id drafted)
        {
            const std::string who = std::string(verify_who) + ": draft_probs row " + std::to_string(i);
            double sum = 0.0;
            for (std::size_t y = 0; y < n; ++y)
            {
                if (!(q[y] >= Q(0) && q[y] <= Q(1)))
                {
                    throw invalid_parameter(who + ": entry " + std::to_string(y) + " is " + format_value(double(q[y])) +
                                            ", not a probability");
                }
                sum += double(q[y]);
            }
            if (!(std::abs(sum - 1.0) <= 1e-3))
            {
                throw invalid_parameter(who + " sums to " + format_value(sum) + ", not 1");
            }
            if (!(q[drafted] > Q(0)))
            {
                throw invalid_parameter(who + ": the draft token " + std::to_string(drafted) +
                                        " has probability 0 (the draft cannot have drawn it)");
            }
        }

        template <class Chain, class E, class URBG, class QRow>
        std::size_t verify_rows(Chain& target, const xt::xexpression<E>& rows_expr, const token_history& history,
                                std::size_t q_rows, const std::size_t* q_cols, QRow&& q_row, const verify_options& o,
                                std::vector<sampled_token>& out, URBG& rng)
        {
            const std::string who = verify_who;
            const E& rows = rows_expr.derived_cast();
            if (rows.dimension() != 2 || rows.shape()[0] == 0)
            {
                throw invalid_parameter(who + ": target rows must be [k + 1, vocab] with k >= 0, got " +
                                        std::to_string(rows.dimension()) + "-D" +
                                        (rows.dimension() == 2 ? " with no row" : ""));
            }
            check_verify_options(o);
            const std::size_t k = rows.shape()[0] - 1;
            const std::size_t vocab = rows.shape()[1];
            if (k > history.generated().size())
            {
                throw invalid_parameter(who + ": " + std::to_string(k) + " draft tokens (" + std::to_string(k + 1) +
                                        " target rows) but the history has " +
                                        std::to_string(history.generated().size()) + " generated tokens");
            }
            const std::size_t first = history.size() - k;
            const token_span draft = history.tokens().subspan(first);
            check_ids(draft, vocab, verify_who, "draft token");
            if (q_cols != nullptr && (q_rows != k || *q_cols != vocab))
            {
                throw invalid_parameter(who + ": draft_probs must be [" + std::to_string(k) + ", " +
                                        std::to_string(vocab) + "] for " + std::to_string(k + 1) + " target rows, got [" +
                                        std::to_string(q_rows) + ", " + std::to_string(*q_cols) + "]");
            }
            const bool reads_q = q_cols != nullptr && o.rule == verify_rule::standard;
            for (std::size_t i = 0; reads_q && i < k; ++i)
            {
                q_row(i, [&](const auto* q) { check_draft_row(q, vocab, i, draft[i]); });
            }
            out.clear();
            for (std::size_t i = 0; i <= k; ++i)
            {
                const token_history h(history.tokens().subspan(0, first + i), history.prompt_length());
                try
                {
                    auto& c = target.filter(xt::view(rows, i, xt::all()), h, rng);
                    sampled_token t;
                    if (i == k)
                    {
                        t = o.rule == verify_rule::greedy ? most_probable(c) : xsampler::draw(c, rng);
                        target.observe(t);
                        out.push_back(t);
                        return k;
                    }
                    draft_row q;
                    q.drafted = draft[i];
                    bool accepted = false;
                    const auto decide = [&](const auto* row) {
                        using Q = std::decay_t<decltype(*row)>;
                        if constexpr (std::is_same<Q, double>::value)
                        {
                            q.q64 = row;
                        }
                        else if constexpr (std::is_same<Q, float>::value)
                        {
                            q.q32 = row;
                        }
                        accepted = accepts(c, q, o, t, rng);
                    };
                    if (reads_q)
                    {
                        q_row(i, decide);
                    }
                    else
                    {
                        decide(static_cast<const double*>(nullptr));
                    }
                    target.observe(t);
                    out.push_back(t);
                    if (!accepted || std::find(o.eos.begin(), o.eos.end(), t.id) != o.eos.end())
                    {
                        return i + accepted;
                    }
                }
                catch (const invalid_logits& e)
                {
                    throw invalid_logits(who + ": position " + std::to_string(i) + ": " + e.what());
                }
            }
            return k;
        }
    }

    /// Verifies a deterministic draft (q one-hot on each draft token): the
    /// last rows.shape[0] - 1 tokens of history (see the contract above).
    template <class Chain, class E, class URBG, std::enable_if_t<detail::is_urbg<URBG>::value, int> = 0>
    std::size_t verify_draft(Chain& target, const xt::xexpression<E>& rows, const token_history& history,
                             const verify_options& options, std::vector<sampled_token>& out, URBG& rng)
    {
        return detail::verify_rows(target, rows, history, 0, nullptr, [](std::size_t, auto&&) {}, options, out, rng);
    }

    /// Verifies a draft drawn from draft_probs ([k, V]; see the contract above).
    template <class Chain, class E, class Q, class URBG, std::enable_if_t<detail::is_urbg<URBG>::value, int> = 0>
    std::size_t verify_draft(Chain& target, const xt::xexpression<E>& rows, const token_history& history,
                             const xt::xexpression<Q>& draft_probs, const verify_options& options,
                             std::vector<sampled_token>& out, URBG& rng)
    {
        const Q& q = draft_probs.derived_cast();
        using V = std::decay_t<typename Q::value_type>;
        static_assert(std::is_same<V, float>::value || std::is_same<V, double>::value,
                      "xsampler: draft_probs must be float or double");
        if (q.dimension() != 2)
        {
            throw invalid_parameter(std::string(detail::verify_who) + ": draft_probs must be 2-D [k, vocab], got " +
                                    std::to_string(q.dimension()) + "-D");
        }
        std::vector<V> scratch;
        const auto q_row = [&](std::size_t i, auto&& f) {
            f(detail::contiguous_row(xt::view(q, i, xt::all()), scratch).data);
        };
        const std::size_t cols = q.shape()[1];
        return detail::verify_rows(target, rows, history, q.shape()[0], &cols, q_row, options, out, rng);
    }
}

#endif
