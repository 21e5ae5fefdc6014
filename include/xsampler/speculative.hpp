// xsampler/speculative.hpp — speculative decoding: a draft's tokens verified against the target. (xsampler, BSD-3-Clause)
//
// A draft model proposes k tokens x_1 .. x_k, drawn from its distributions
// q_1 .. q_k; the target model, run once on the prefix and the draft, gives
// k + 1 rows. Verification keeps a prefix of the draft and adds one token of
// the target's own, so a call emits 1 to k + 1 tokens. Position i (from 0)
// decides x_(i+1) by the target's distribution p_i there, its final one: the
// target chain (a sampler or a chain, chain.hpp) run on row i with the
// history of the prefix and x_1 .. x_i, every stage included (processors,
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
//            drawn from (entries in [0, 1], each row summing to 1, the
//            drafted token's entry positive: that entry is checked first,
//            the others as the rule reads them — a residual reads the row
//            over the tokens p keeps; the sums are not checked, which would
//            read k V values, more than the verification). Without it the
//            draft is deterministic, q_i one-hot on x_i (an n-gram or
//            prompt-lookup drafter, a greedy draft model).
//   Rules (options.rule):
//   standard  the rule of speculative sampling (Leviathan et al. 2023,
//             Chen et al. 2023; vLLM's, FlashInfer's and transformers'):
//             position i accepts x = x_(i+1) iff u < p_i(x) / q_(i+1)(x), u =
//             uniform01(rng) (so with probability min(1, p/q)), the ratio
//             in double with p_i(x) = w_x / Z as distribution_of reports
//             it; a token p_i does not keep is rejected. The first
//             rejection emits a token drawn from the residual, r(y) ∝
//             max(0, p_i(y) - q(y)) over the tokens p_i keeps (in weight
//             units, w_y - q(y) Z, in double; drawn as draw() walks, in id
//             order); a residual that rounds to nothing (p_i <= q_i
//             everywhere: the rejection had probability 0 in exact
//             arithmetic) falls back to p_i. When all k are accepted, the
//             bonus token is drawn from p_k as sample() draws. The
//             emitted tokens are distributed as sampling them one by one
//             from the target would give.
//   greedy    the target's token at position i is the most probable token
//             of p_i (ties: the lowest id); x_(i+1) is accepted while it
//             equals it; the first mismatch emits the target's token, and
//             when all are accepted so is the most probable token of p_k. With a
//             target whose temperature is 0 this is the standard rule
//             without its uniforms. draft_probs are not read.
//   typical   typical acceptance (Medusa, Cai et al. 2024; vLLM's
//             TypicalAcceptanceSampler): x = x_(i+1) is accepted iff p_i(x) >=
//             min(options.typical_threshold, options.typical_alpha ·
//             e^(-H(p_i))), H the entropy in nats, decided exactly as
//             eta decides its threshold (filters/levels.hpp); the first
//             rejection emits the most probable token of p_i; when all are
//             accepted, the bonus token is drawn from p_k as sample()
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
// position runs: rows not 2-D or with no row, draft_probs not [k, V], a
// drafted token's entry outside (0, 1] or NaN, k more than the generated
// tokens, a draft token outside [0, V), typical parameters outside (0, 1].
// A row the target cannot sample, or an entry of draft_probs outside [0, 1]
// as a residual reads it: "verify_draft: position i: ..."
// (invalid_logits, invalid_parameter); the positions before it were
// decided, their tokens observed, and rng moved past their uniforms. Allocates nothing once `out` has room for
// k + 1 tokens, but for draft_probs that are not contiguous rows (copied).
//
// verify_tree(target, rows, history, tree, [draft_probs,] options, result, rng)
//   Several drafts at once as a tree (draft_tree: node j is token tokens[j]
//   after the path to node parents[j], an earlier node or -1 for the root,
//   the prefix; a node's children in index order are its branches).
//   rows [n + 1, V]: row 0 after the prefix, row j + 1 after the path to
//   node j. history: the prefix alone. draft_probs [n, V]: row j is the
//   distribution node j's token was drawn from, given its parent's path and
//   its earlier siblings (children drawn one after another, i.i.d. from the
//   same q, or without replacement, each from its own row). The walk starts
//   at the root:
//   standard  a node's children are tried in index order by recursive
//             rejection sampling: child j is accepted iff u < p'(x_j) /
//             q_j(x_j), p' the residual the children before it left
//             (p itself for the first: p' <- max(0, p' - q_j) normalised
//             after each rejection, in weight units, in double); the walk
//             goes on from an accepted child; when every child is rejected,
//             a token is drawn from the last residual; at a leaf, the bonus
//             from p as sample() draws. Without draft_probs each child is
//             one-hot (top-k branches: a rejected token leaves p'). The
//             emitted tokens are distributed as the target's.
//   greedy    the child whose token is p's most probable (the first such),
//             else p's most probable token ends the walk.
//   typical   the longest path of passing nodes (each passes the chain
//             rule's test at its parent's row), ties broken by the larger
//             sum of ln p along it, then by the lower node (Medusa's
//             choice); then the most probable token of the end node's row,
//             or the bonus drawn there if it is a leaf. The rows the walk
//             could reach (the root's, and each passing node's that is no
//             eos) are filtered once each, in node order, before any token is
//             observed, so a target that learns from draws (mirostat) reads
//             them all with the state the call began with; a leaf's row is
//             filtered for its bonus after.
//   A chain-shaped tree (node j's parent j - 1) gives verify_draft's tokens,
//   log-probs and uniforms, bit for bit (with typical, for a target that does
//   not learn from draws). result: the tokens emitted (the
//   path, then the target's token; none after an accepted eos), the
//   accepted nodes in path order; its buffers are reused, so nothing is
//   allocated once they have grown (the prefix is copied into one of them
//   per call). Errors as verify_draft's, "verify_tree:
//   ...", and: parents not as many as tokens, a parent that is not an
//   earlier node, rows not n + 1; a bad row: "verify_tree: row r: ...".
#ifndef XSAMPLER_SPECULATIVE_HPP
#define XSAMPLER_SPECULATIVE_HPP

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
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

    /// A draft tree: node j is token tokens[j] after the path to its parent
    /// parents[j] (an earlier node, or -1: the root, the prefix). A node's
    /// children, in index order, are the branches tried after it.
    struct draft_tree
    {
        std::vector<token_id> tokens;
        std::vector<std::ptrdiff_t> parents;
    };

    namespace detail
    {
        inline constexpr const char* verify_who = "verify_draft";

        /// The draft's probabilities of one node: its row of draft_probs, or
        /// one-hot on its token.
        struct draft_row
        {
            const double* q64 = nullptr;
            const float* q32 = nullptr;
            token_id drafted = 0;
            std::size_t index = 0;  // its row of draft_probs, for messages

            double operator()(token_id y) const noexcept
            {
                return q64 != nullptr ? q64[y] : q32 != nullptr ? double(q32[y]) : double(y == drafted);
            }
        };

        /// The buffers verify_tree reuses.
        struct tree_scratch
        {
            std::vector<token_id> history;             // the prefix and the path
            std::vector<std::ptrdiff_t> first, next;   // children lists (first: by parent + 1)
            std::vector<draft_row> rejected;           // a node's rejected children
            std::vector<double> sums;                  // and the residual's totals
            std::vector<std::size_t> length;           // typical: the longest passing path from a node
            std::vector<double> score;                 // and its sum of log p
            std::vector<double> logp;
            std::vector<std::ptrdiff_t> best;          // the child it continues with
            std::vector<sampled_token> most;           // the most probable token of each row read
            std::vector<char> filtered;                // which rows were read
            std::vector<token_id> path;                // a node's path, leaf first
        };

        /// "draft_probs row i: entry y is v, not a probability".
        [[noreturn]] inline void bad_draft_entry(std::size_t i, token_id y, double v)
        {
            throw invalid_parameter("draft_probs row " + std::to_string(i) + ": entry " + std::to_string(y) + " is " +
                                    format_value(v) + ", not a probability");
        }

        /// The rows of draft_probs as pointers (a copy when not contiguous), or none.
        template <class V>
        struct draft_rows
        {
            const V* data = nullptr;  // [n, vocab], row-major; null: one-hot
            std::size_t vocab = 0;

            draft_row row(std::size_t j, token_id drafted) const noexcept
            {
                draft_row q;
                q.drafted = drafted;
                q.index = j;
                if (data != nullptr)
                {
                    if constexpr (std::is_same<V, double>::value)
                    {
                        q.q64 = data + j * vocab;
                    }
                    else
                    {
                        q.q32 = data + j * vocab;
                    }
                }
                return q;
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

        /// The residual after j rejected children, in weight units: r_0 = w,
        /// r_i = max(0, r_(i-1) - q_i sums[i-1]), sums[i] = the total of r_i
        /// (sums[0] = Z).
        struct residual
        {
            const draft_row* rejected = nullptr;  // one per rejected child
            const double* sums = nullptr;
            std::size_t count = 0;

            double at(token_id y, double w) const noexcept
            {
                double r = w;
                for (std::size_t i = 0; i < count; ++i)
                {
                    r = std::max(0.0, r - rejected[i](y) * sums[i]);
                }
                return r;
            }
        };

        /// A token drawn from r (one uniform01) by the kept set in id order.
        template <class T, class URBG>
        sampled_token draw_residual(candidates<T>& c, const residual& r, double total, URBG& rng)
        {
            const double target = uniform01(rng) * total;
            const double z = c.total_weight();
            double run = 0.0;
            sampled_token chosen{-1, 0.0};
            T chosen_logit = 0;
            bool crossed = false;
            c.for_each_by_id([&](token_id id, T logit) {
                const double ri = r.at(id, double(c.weight(id, logit)));
                if (crossed || !(ri > 0.0))
                {
                    return;
                }
                chosen.id = id;  // the last positive one, should rounding leave the target at the end
                chosen_logit = logit;
                run += ri;
                crossed = run > target;
            });
            chosen.logprob = std::log(double(c.weight(chosen.id, chosen_logit)) / z);
            return chosen;
        }

        /// The residual's total over the kept set; the newest rejected row's
        /// entries are checked as they are read (in [0, 1]).
        template <class T>
        double residual_total(candidates<T>& c, const residual& r)
        {
            double total = 0.0;
            const draft_row& newest = r.rejected[r.count - 1];
            c.for_each_by_id([&](token_id id, T logit) {
                const double qv = newest(id);
                if (!(qv >= 0.0 && qv <= 1.0))
                {
                    bad_draft_entry(newest.index, id, qv);
                }
                total += r.at(id, double(c.weight(id, logit)));
            });
            return total;
        }

        /// Typical acceptance's test on the kept tokens of one set: p(x) >=
        /// min(a, b e^-H), exactly; the set's totals summed once, when first asked.
        template <class T>
        class typical_test
        {
        public:
            typical_test(const typical_test&) = delete;  // its level refers to its own sums
            typical_test& operator=(const typical_test&) = delete;
            typical_test(candidates<T>& c, const verify_options& o)
                : m_c(c),
                  m_log_a(log_dd(o.typical_threshold)),
                  m_log_b(log_dd(o.typical_alpha)),
                  m_level(entropy_level(c, m_sums, m_log_a, m_log_b,
                                        std::max(log_error(m_log_a.hi), log_error(m_log_b.hi))))
            {
            }
            bool operator()(token_id x)
            {
                T logit = 0;
                if (!kept_logit(m_c, x, logit) || !(m_c.weight(x, logit) > T(0)))
                {
                    return false;
                }
                if (!m_test)
                {
                    m_test.emplace(m_c, m_level);
                }
                return (*m_test)(logit);
            }

        private:
            using level_fn = decltype(entropy_level(std::declval<candidates<T>&>(), std::declval<exact_totals<T>&>(),
                                                    dd{}, dd{}, 0.0));
            candidates<T>& m_c;
            exact_totals<T> m_sums;
            dd m_log_a, m_log_b;
            level_fn m_level;
            std::optional<level_test<T, level_fn>> m_test;
        };

        /// Who an error names: "verify_draft", or a sequence's "sequence: step_draft"
        /// (built only when an error is thrown).
        struct who_name
        {
            const char* name;
            const std::string* prefix = nullptr;
            std::string str() const { return prefix != nullptr ? *prefix + ": " + name : std::string(name); }
        };

        inline void check_verify_options(const verify_options& o, const who_name& name)
        {
            if (o.rule != verify_rule::typical)
            {
                return;
            }
            const auto who = [&] { return name.str(); };
            if (o.rule != verify_rule::typical)
            {
                return;
            }
            if (!(o.typical_threshold > 0.0 && o.typical_threshold <= 1.0))
            {
                throw invalid_parameter(who() + ": typical_threshold must be in (0, 1], got " +
                                        format_value(o.typical_threshold));
            }
            if (!(o.typical_alpha > 0.0 && o.typical_alpha <= 1.0))
            {
                throw invalid_parameter(who() + ": typical_alpha must be in (0, 1], got " +
                                        format_value(o.typical_alpha));
            }
        }

        /// Checks the drafted token's entry of one row of draft probabilities:
        /// in (0, 1]. The rest of a row is checked as it is read (residual_total):
        /// summing every row would read k V values, more than the verification does.
        template <class Q>
        void check_draft_row(const Q* q, std::size_t i, token_id drafted, const who_name& who)
        {
            if (!(q[drafted] >= Q(0) && q[drafted] <= Q(1)))
            {
                throw invalid_parameter(who.str() + ": draft_probs row " + std::to_string(i) + ": entry " +
                                        std::to_string(drafted) + " is " + format_value(double(q[drafted])) +
                                        ", not a probability");
            }
            if (!(q[drafted] > Q(0)))
            {
                throw invalid_parameter(who.str() + ": draft_probs row " + std::to_string(i) + ": the draft token " +
                                        std::to_string(drafted) + " has probability 0 (the draft cannot have drawn it)");
            }
        }

        /// The checks common to both forms, before any position runs: rows
        /// [n + 1, V], draft tokens in [0, V), draft_probs [n, V] and each
        /// row a distribution (when the rule reads them). Returns V.
        template <class E, class V>
        std::size_t check_verify_input(const E& rows, token_span drafted, const draft_rows<V>& q, std::size_t q_rows,
                                       std::size_t q_cols, const verify_options& o, const who_name& who, const char* unit)
        {
            if (rows.dimension() != 2 || rows.shape()[0] == 0)
            {
                throw invalid_parameter(who.str() + ": target rows must be [" + unit + " + 1, vocab], got " +
                                        std::to_string(rows.dimension()) + "-D" +
                                        (rows.dimension() == 2 ? " with no row" : ""));
            }
            check_verify_options(o, who);
            const std::size_t vocab = rows.shape()[1];
            for (const token_id id : drafted)
            {
                if (id < 0 || std::size_t(id) >= vocab)
                {
                    throw invalid_parameter(who.str() + ": draft token " + std::to_string(id) +
                                            " is outside the vocabulary of " + std::to_string(vocab));
                }
            }
            if (q.data != nullptr && (q_rows != drafted.size() || q_cols != vocab))
            {
                throw invalid_parameter(who.str() + ": draft_probs must be [" + std::to_string(drafted.size()) + ", " +
                                        std::to_string(vocab) + "] for " + std::to_string(drafted.size() + 1) +
                                        " target rows, got [" + std::to_string(q_rows) + ", " + std::to_string(q_cols) +
                                        "]");
            }
            if (q.data != nullptr && o.rule == verify_rule::standard)
            {
                for (std::size_t i = 0; i < drafted.size(); ++i)
                {
                    check_draft_row(q.data + i * vocab, i, drafted[i], who);
                }
            }
            return vocab;
        }

        /// Draft probabilities as rows of pointers: in place when contiguous
        /// and row-major, else copied into `copy`.
        template <class Q, class V = std::decay_t<typename Q::value_type>>
        draft_rows<V> rows_of(const Q& q, std::vector<V>& copy, const who_name& who)
        {
            static_assert(std::is_same<V, float>::value || std::is_same<V, double>::value,
                          "xsampler: draft_probs must be float or double");
            if (q.dimension() != 2)
            {
                throw invalid_parameter(who.str() + ": draft_probs must be 2-D [k, vocab], got " +
                                        std::to_string(q.dimension()) + "-D");
            }
            static const V none[1] = {V(0)};  // a q of no row is still given
            draft_rows<V> r;
            r.vocab = q.shape()[1];
            if constexpr (xt::has_data_interface<Q>::value)
            {
                const bool row_major = (q.shape()[1] <= 1 || q.strides()[1] == 1) &&
                                       (q.shape()[0] <= 1 || q.strides()[0] == std::ptrdiff_t(q.shape()[1]));
                if (q.size() > 0 && row_major)
                {
                    r.data = q.data() + q.data_offset();
                    return r;
                }
            }
            copy.assign(q.begin(), q.end());
            r.data = copy.empty() ? none : copy.data();
            return r;
        }
    }

    /// What verify_tree emits: the tokens (the accepted path, then one of
    /// the target's, none after an accepted eos) and the accepted nodes in
    /// path order. Reused across calls, it allocates nothing once grown.
    struct tree_result
    {
        std::vector<sampled_token> tokens;
        std::vector<std::size_t> nodes;
        std::size_t accepted() const noexcept { return nodes.size(); }
        detail::tree_scratch scratch;  ///< buffers of the call, not part of the result
    };

    namespace detail
    {
        /// The walk down a draft (a chain, or a tree's children lists) for
        /// the standard and greedy rules, and typical on a chain. Path:
        ///   history()         the prefix and the accepted path
        ///   row()             the target row of the current node
        ///   first_child(), next(j)   children in order (-1: none)
        ///   token(j), q(j)    a child's token and draft row
        ///   accept(j, t, c)   moves to child j, t emitted (c: the set it was decided on)
        ///   end(t, c)         emits the last token
        ///   where(depth)      the position in an error message
        ///   sums              room for one total per child of a node (+1)
        /// Whether a token is one of options.eos.
        inline auto eos_of(const verify_options& o)
        {
            return [&o](token_id id) { return std::find(o.eos.begin(), o.eos.end(), id) != o.eos.end(); };
        }

        template <class Chain, class E, class Path, class Ends, class URBG>
        void walk_draft(Chain& target, const E& rows, Path& path, const verify_options& o, const Ends& is_eos,
                        draft_row* rejected, double* sums, URBG& rng)
        {
            for (std::size_t depth = 0;; ++depth)
            {
                try
                {
                    auto& c = target.filter(xt::view(rows, path.row(), xt::all()), path.history(), rng);
                    using T = typename std::decay_t<decltype(c)>::value_type;
                    std::ptrdiff_t child = path.first_child();
                    if (child < 0)
                    {
                        const sampled_token t = o.rule == verify_rule::greedy ? most_probable(c) : xsampler::draw(c, rng);
                        target.observe(t);
                        path.end(t, c);
                        return;
                    }
                    if (o.rule != verify_rule::standard)
                    {
                        const sampled_token best = most_probable(c);
                        std::optional<typical_test<T>> typical;
                        if (o.rule == verify_rule::typical)
                        {
                            typical.emplace(c, o);
                        }
                        for (; child >= 0; child = path.next(child))
                        {
                            const token_id x = path.token(child);
                            T logit = 0;
                            if (o.rule == verify_rule::greedy ? x == best.id : (*typical)(x))
                            {
                                kept_logit(c, x, logit);
                                const sampled_token t{x, std::log(double(c.weight(x, logit)) / c.total_weight())};
                                target.observe(t);
                                path.accept(child, t, c);
                                break;
                            }
                        }
                        if (child < 0)
                        {
                            target.observe(best);
                            path.end(best, c);
                            return;
                        }
                    }
                    else
                    {
                        const double z = c.total_weight();
                        residual r{rejected, sums, 0};
                        sums[0] = z;
                        for (; child >= 0; child = path.next(child))
                        {
                            const token_id x = path.token(child);
                            const draft_row q = path.q(child);
                            const double u = uniform01(rng);
                            T logit = 0;
                            const double w = kept_logit(c, x, logit) ? double(c.weight(x, logit)) : 0.0;
                            const double rx = r.at(x, w);
                            if (rx > 0.0 && u < rx / sums[r.count] / q(x))
                            {
                                const sampled_token t{x, std::log(w / z)};
                                target.observe(t);
                                path.accept(child, t, c);
                                break;
                            }
                            rejected[r.count] = q;
                            ++r.count;
                            sums[r.count] = residual_total(c, r);
                            if (!(sums[r.count] > 0.0))
                            {
                                r.count = 0;  // nothing left: the rejection had probability 0; back to p
                            }
                        }
                        if (child < 0)
                        {
                            const sampled_token t = draw_residual(c, r, sums[r.count], rng);
                            target.observe(t);
                            path.end(t, c);
                            return;
                        }
                    }
                    if (is_eos(path.last()))
                    {
                        return;
                    }
                }
                catch (const invalid_logits& e)
                {
                    throw invalid_logits(path.where(depth) + ": " + e.what());
                }
                catch (const invalid_parameter& e)
                {
                    throw invalid_parameter(path.where(depth) + ": " + e.what());
                }
            }
        }

        /// The chain form's path: node i is draft token i, the history a view.
        struct chain_path
        {
            token_history prefix;  // with the draft at its end
            token_span draft;
            const draft_row* q_rows = nullptr;
            std::vector<sampled_token>* out = nullptr;
            std::size_t at = 0;  // draft tokens accepted

            token_history history() const
            {
                return token_history(prefix.tokens().subspan(0, prefix.size() - draft.size() + at), prefix.prompt_length());
            }
            std::size_t row() const noexcept { return at; }
            std::ptrdiff_t first_child() const noexcept { return at < draft.size() ? std::ptrdiff_t(at) : -1; }
            std::ptrdiff_t next(std::ptrdiff_t) const noexcept { return -1; }
            token_id token(std::ptrdiff_t j) const noexcept { return draft[std::size_t(j)]; }
            draft_row q(std::ptrdiff_t j) const noexcept { return q_rows[std::size_t(j)]; }
            template <class C>
            void accept(std::ptrdiff_t, const sampled_token& t, C&)
            {
                out->push_back(t);
                ++at;
            }
            template <class C>
            void end(const sampled_token& t, C&)
            {
                out->push_back(t);
            }
            token_id last() const noexcept { return out->back().id; }
            std::string where(std::size_t depth) const { return std::string(verify_who) + ": position " + std::to_string(depth); }
        };

        template <class Chain, class E, class V, class URBG>
        std::size_t verify_chain(Chain& target, const xt::xexpression<E>& rows_expr, const token_history& history,
                                 const draft_rows<V>& q, std::size_t q_rows, std::size_t q_cols,
                                 const verify_options& o, std::vector<sampled_token>& out, URBG& rng)
        {
            const E& rows = rows_expr.derived_cast();
            const std::size_t k = rows.dimension() == 2 && rows.shape()[0] > 0 ? rows.shape()[0] - 1 : 0;
            if (k > history.generated().size())
            {
                check_verify_options(o, who_name{verify_who});
                throw invalid_parameter(std::string(verify_who) + ": " + std::to_string(k) + " draft tokens (" +
                                        std::to_string(k + 1) + " target rows) but the history has " +
                                        std::to_string(history.generated().size()) + " generated tokens");
            }
            const token_span draft = history.tokens().subspan(history.size() - k);
            check_verify_input(rows, draft, q, q_rows, q_cols, o, who_name{verify_who}, "k");
            out.clear();
            draft_row rejected[1];
            double sums[2];
            // The q of position i is made as the walk reaches it: no array of k.
            struct path_with_q : chain_path
            {
                const draft_rows<V>* qs;
                draft_row q(std::ptrdiff_t j) const noexcept
                {
                    return qs->row(std::size_t(j), draft[std::size_t(j)]);
                }
            } path;
            path.prefix = history;
            path.draft = draft;
            path.out = &out;
            path.qs = &q;
            walk_draft(target, rows, path, o, eos_of(o), rejected, sums, rng);
            return path.at;
        }
    }

    namespace detail
    {
        inline constexpr const char* tree_who = "verify_tree";

        /// The tree form's path: the history a buffer of the prefix and the path.
        template <class V>
        struct tree_path
        {
            const draft_tree* tree = nullptr;
            const draft_rows<V>* qs = nullptr;
            tree_result* result = nullptr;
            std::size_t prompt_length = 0;
            std::ptrdiff_t at = -1;  // the current node (-1: the root)

            token_history history() const
            {
                return token_history(token_span(result->scratch.history), prompt_length);
            }
            std::size_t row() const noexcept { return std::size_t(at + 1); }
            std::ptrdiff_t first_child() const noexcept { return result->scratch.first[std::size_t(at + 1)]; }
            std::ptrdiff_t next(std::ptrdiff_t j) const noexcept { return result->scratch.next[std::size_t(j)]; }
            token_id token(std::ptrdiff_t j) const noexcept { return tree->tokens[std::size_t(j)]; }
            draft_row q(std::ptrdiff_t j) const noexcept { return qs->row(std::size_t(j), token(j)); }
            template <class C>
            void accept(std::ptrdiff_t j, const sampled_token& t, C&)
            {
                result->tokens.push_back(t);
                result->nodes.push_back(std::size_t(j));
                result->scratch.history.push_back(t.id);
                at = j;
            }
            template <class C>
            void end(const sampled_token& t, C&)
            {
                result->tokens.push_back(t);
            }
            token_id last() const noexcept { return result->tokens.back().id; }
            std::string where(std::size_t) const { return std::string(tree_who) + ": row " + std::to_string(row()); }
        };

        /// Typical acceptance on a tree: every inner node's row read once (in
        /// node order) for which of its children pass; the longest passing
        /// path from the root (ties: the larger sum of ln p, then the lower
        /// node), then the last token from the end node's row.
        template <class Chain, class E, class V, class URBG>
        void typical_tree(Chain& target, const E& rows, const token_history& prefix, tree_path<V>& path,
                          const verify_options& o, URBG& rng)
        {
            auto& s = path.result->scratch;
            const draft_tree& tree = *path.tree;
            const std::size_t n = tree.tokens.size();
            const auto is_eos = [&](token_id id) { return std::find(o.eos.begin(), o.eos.end(), id) != o.eos.end(); };
            s.length.assign(n, 0);
            s.score.assign(n, 0.0);
            s.logp.assign(n, 0.0);
            s.best.assign(n + 1, -1);
            s.most.resize(n + 1);
            s.filtered.assign(n + 1, 0);
            // Which children pass, node by node (the root first): a node's row
            // is read only if the walk could reach it (the root, or a node that
            // passed and is no eos: its parent's row was read, it comes first).
            for (std::ptrdiff_t v = -1; v < std::ptrdiff_t(n); ++v)
            {
                const auto i = std::size_t(v + 1);
                if (s.first[i] < 0 || (v >= 0 && (s.length[std::size_t(v)] == 0 || is_eos(tree.tokens[std::size_t(v)]))))
                {
                    continue;
                }
                s.path.clear();
                for (std::ptrdiff_t u = v; u >= 0; u = tree.parents[std::size_t(u)])
                {
                    s.path.push_back(tree.tokens[std::size_t(u)]);
                }
                s.history.resize(prefix.size());
                s.history.insert(s.history.end(), s.path.rbegin(), s.path.rend());
                try
                {
                    auto& c = target.filter(xt::view(rows, i, xt::all()), path.history(), rng);
                    using T = typename std::decay_t<decltype(c)>::value_type;
                    const double z = c.total_weight();
                    typical_test<T> passes(c, o);
                    for (std::ptrdiff_t j = s.first[i]; j >= 0; j = s.next[std::size_t(j)])
                    {
                        const token_id x = tree.tokens[std::size_t(j)];
                        if (passes(x))
                        {
                            T logit = 0;
                            kept_logit(c, x, logit);
                            s.length[std::size_t(j)] = 1;
                            s.logp[std::size_t(j)] = std::log(double(c.weight(x, logit)) / z);
                        }
                    }
                    s.most[i] = most_probable(c);
                    s.filtered[i] = 1;
                }
                catch (const invalid_logits& e)
                {
                    throw invalid_logits(std::string(tree_who) + ": row " + std::to_string(i) + ": " + e.what());
                }
            }
            // The longest passing path below each node, leaves first (a child
            // comes after its parent); an eos ends its path.
            const auto better = [&](std::ptrdiff_t a, std::ptrdiff_t b) {  // is child a a better way on than b?
                if (b < 0)
                {
                    return true;
                }
                const auto ia = std::size_t(a), ib = std::size_t(b);
                return s.length[ia] > s.length[ib] || (s.length[ia] == s.length[ib] && s.score[ia] > s.score[ib]);
            };
            for (std::ptrdiff_t j = std::ptrdiff_t(n) - 1; j >= -1; --j)
            {
                const auto i = std::size_t(j + 1);
                if (j >= 0 && (s.length[std::size_t(j)] == 0 || is_eos(tree.tokens[std::size_t(j)])))
                {
                    s.score[std::size_t(j)] = s.logp[std::size_t(j)];
                    continue;
                }
                for (std::ptrdiff_t c = s.first[i]; c >= 0; c = s.next[std::size_t(c)])
                {
                    if (s.length[std::size_t(c)] > 0 && better(c, s.best[i]))
                    {
                        s.best[i] = c;
                    }
                }
                if (j >= 0)
                {
                    const std::ptrdiff_t b = s.best[i];
                    s.length[std::size_t(j)] = 1 + (b >= 0 ? s.length[std::size_t(b)] : 0);
                    s.score[std::size_t(j)] = s.logp[std::size_t(j)] + (b >= 0 ? s.score[std::size_t(b)] : 0.0);
                }
            }
            // The path, then the end node's token: the most probable of its
            // row (read above) when it has children, the bonus drawn at a leaf.
            s.history.resize(prefix.size());
            for (std::ptrdiff_t j = s.best[0]; j >= 0; j = s.best[std::size_t(j + 1)])
            {
                const sampled_token t{tree.tokens[std::size_t(j)], s.logp[std::size_t(j)]};
                target.observe(t);
                path.accept(j, t, s);
                if (is_eos(t.id))
                {
                    return;
                }
            }
            if (s.filtered[path.row()] != 0)
            {
                target.observe(s.most[path.row()]);
                path.end(s.most[path.row()], s);
                return;
            }
            try
            {
                auto& c = target.filter(xt::view(rows, path.row(), xt::all()), path.history(), rng);
                const sampled_token t = xsampler::draw(c, rng);
                target.observe(t);
                path.end(t, c);
            }
            catch (const invalid_logits& e)
            {
                throw invalid_logits(std::string(tree_who) + ": row " + std::to_string(path.row()) + ": " + e.what());
            }
        }

        template <class Chain, class E, class V, class URBG>
        void verify_tree_rows(Chain& target, const xt::xexpression<E>& rows_expr, const token_history& history,
                              const draft_tree& tree, const draft_rows<V>& q, std::size_t q_rows, std::size_t q_cols,
                              const verify_options& o, tree_result& result, URBG& rng)
        {
            const E& rows = rows_expr.derived_cast();
            const std::size_t n = tree.tokens.size();
            const std::string who = tree_who;
            if (tree.parents.size() != n)
            {
                throw invalid_parameter(who + ": the tree has " + std::to_string(n) + " tokens but " +
                                        std::to_string(tree.parents.size()) + " parents");
            }
            if (rows.dimension() == 2 && rows.shape()[0] != n + 1)
            {
                throw invalid_parameter(who + ": " + std::to_string(n) + " draft nodes need " + std::to_string(n + 1) +
                                        " target rows, got " + std::to_string(rows.shape()[0]));
            }
            auto& s = result.scratch;
            s.first.assign(n + 1, -1);
            s.next.assign(n, -1);
            std::vector<std::size_t>& children = s.length;  // counts, for the buffers' size
            children.assign(n + 1, 0);
            for (std::size_t j = 0; j < n; ++j)
            {
                const std::ptrdiff_t p = tree.parents[j];
                if (p < -1 || p >= std::ptrdiff_t(j))
                {
                    throw invalid_parameter(who + ": node " + std::to_string(j) + "'s parent " + std::to_string(p) +
                                            " is not an earlier node (or -1, the root)");
                }
                ++children[std::size_t(p + 1)];
            }
            for (std::size_t j = n; j-- > 0;)  // pushed at the front from the last: index order
            {
                const auto i = std::size_t(tree.parents[j] + 1);
                s.next[j] = s.first[i];
                s.first[i] = std::ptrdiff_t(j);
            }
            check_verify_input(rows, token_span(tree.tokens), q, q_rows, q_cols, o, who_name{tree_who}, "nodes");
            const std::size_t most = n == 0 ? 0 : *std::max_element(children.begin(), children.end());
            s.rejected.resize(most + 1);
            s.sums.resize(most + 2);
            result.tokens.clear();
            result.nodes.clear();
            s.history.assign(history.tokens().begin(), history.tokens().end());
            tree_path<V> path;
            path.tree = &tree;
            path.qs = &q;
            path.result = &result;
            path.prompt_length = history.prompt_length();
            if (o.rule == verify_rule::typical)
            {
                typical_tree(target, rows, history, path, o, rng);
                return;
            }
            walk_draft(target, rows, path, o, eos_of(o), s.rejected.data(), s.sums.data(), rng);
        }
    }

    /// Verifies a draft tree of deterministic nodes (q one-hot on each
    /// node's token): see the contract of verify_tree above.
    template <class Chain, class E, class URBG, std::enable_if_t<detail::is_urbg<URBG>::value, int> = 0>
    void verify_tree(Chain& target, const xt::xexpression<E>& rows, const token_history& history, const draft_tree& tree,
                     const verify_options& options, tree_result& result, URBG& rng)
    {
        detail::verify_tree_rows(target, rows, history, tree, detail::draft_rows<double>(), 0, 0, options, result, rng);
    }

    /// Verifies a draft tree whose node j was drawn from row j of draft_probs ([n, V]).
    template <class Chain, class E, class Q, class URBG, std::enable_if_t<detail::is_urbg<URBG>::value, int> = 0>
    void verify_tree(Chain& target, const xt::xexpression<E>& rows, const token_history& history, const draft_tree& tree,
                     const xt::xexpression<Q>& draft_probs, const verify_options& options, tree_result& result,
                     URBG& rng)
    {
        const Q& q = draft_probs.derived_cast();
        std::vector<std::decay_t<typename Q::value_type>> copy;
        const auto rows_q = detail::rows_of(q, copy, detail::who_name{detail::tree_who});
        detail::verify_tree_rows(target, rows, history, tree, rows_q, q.shape()[0], q.shape()[1], options, result, rng);
    }

    /// Verifies a deterministic draft (q one-hot on each draft token): the
    /// last rows.shape[0] - 1 tokens of history (see the contract above).
    template <class Chain, class E, class URBG, std::enable_if_t<detail::is_urbg<URBG>::value, int> = 0>
    std::size_t verify_draft(Chain& target, const xt::xexpression<E>& rows, const token_history& history,
                             const verify_options& options, std::vector<sampled_token>& out, URBG& rng)
    {
        return detail::verify_chain(target, rows, history, detail::draft_rows<double>(), 0, 0, options, out, rng);
    }

    /// Verifies a draft drawn from draft_probs ([k, V]; see the contract above).
    template <class Chain, class E, class Q, class URBG, std::enable_if_t<detail::is_urbg<URBG>::value, int> = 0>
    std::size_t verify_draft(Chain& target, const xt::xexpression<E>& rows, const token_history& history,
                             const xt::xexpression<Q>& draft_probs, const verify_options& options,
                             std::vector<sampled_token>& out, URBG& rng)
    {
        const Q& q = draft_probs.derived_cast();
        std::vector<std::decay_t<typename Q::value_type>> copy;
        const auto rows_q = detail::rows_of(q, copy, detail::who_name{detail::verify_who});
        return detail::verify_chain(target, rows, history, rows_q, q.shape()[0], q.shape()[1], options, out, rng);
    }
}

#endif
