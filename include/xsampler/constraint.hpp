// xsampler/constraint.hpp — structure as a guarantee: a token mask per step. (xsampler, BSD-3-Clause)
//
// A constraint is a processor (stage.hpp) that keeps only the tokens whose
// bytes continue the text into one its language can still complete: any
// JSON value (json_constraint), a JSON-schema subset (json_schema.hpp), a
// regular expression (regex_constraint). Put it first in a chain or in the
// sampler's order ("custom" slot); generate() then only ever draws text that
// can be completed, and eos exactly when the text is complete.
//
// vocabulary_index(vocab)
//   The vocabulary's tokens as a byte trie, built once (about 30 ms for
//   GPT-2's 50,257) and shared by every constraint over it. A vocabulary in
//   which a token id has no bytes must mark it special (vocabulary.hpp).
// The contract, for a constraint c over the text t read so far:
//   mask()        the allowed next tokens: a token whose bytes take t to a
//                 text that can still be completed (every byte of it read
//                 through the grammar's machine, grammar.hpp), and the eos
//                 ids of the vocabulary exactly when t is complete. Masks are
//                 cached per machine state (a state's counts beyond what one
//                 token can change are one key): a warm step costs a hash
//                 look-up; a cold one walks the trie once. Copies of a
//                 constraint share the masks (behind a mutex: copies may run
//                 on other threads); one constraint serves one sequence.
//   advance(id)   reads the token; one the mask would not allow (a byte that
//                 breaks the text, eos before the text is complete, a special
//                 token that is not eos, anything after eos): invalid_parameter
//                 naming the token and the text, and c is as it was.
//   rollback(k)   forgets the last k tokens read (a rejected speculative
//                 draft); k > tokens(): invalid_parameter.
//   complete()    t is a text of the language (eos is allowed now).
//   can_complete() some completion of t fits the budget (always true without one).
//   shortest_completion()  the tokens a completion takes from here, eos
//                 included: the fewest tokens of this vocabulary that spell
//                 the grammar's canonical completion (grammar.hpp), plus one.
// As a processor, apply(candidates, history) first brings the state to the
// history's generated tokens (advancing by the new ones, rolling back to the
// common prefix if the history was rewound: a rollback is just a shorter
// history), then keeps the mask's tokens (candidates::keep_in: one read of
// its words). A row with fewer tokens than the vocabulary: invalid_parameter;
// a longer row (padding) keeps none of its extra tokens.
//
// Budget-aware completion (set_budget(max_tokens), generate's max_tokens):
// with n tokens left, a token is allowed only if the text it leads to can be
// completed, eos included, in the n - 1 tokens after it; counted along the
// canonical completion, which the vocabulary can always spell one byte at a
// time, so the invariant "a completion fits" holds at every step once it
// holds at the start. Then generation ends with eos, complete and valid, on
// any budget >= shortest_completion() from the start; a smaller budget is
// invalid_parameter from set_budget, before anything is generated. Strings
// and numbers end early when the budget says so.
#ifndef XSAMPLER_CONSTRAINT_HPP
#define XSAMPLER_CONSTRAINT_HPP

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "candidates.hpp"
#include "grammar.hpp"
#include "regex.hpp"
#include "vocabulary.hpp"

namespace xsampler
{
    /// The vocabulary's non-special tokens as a byte trie in preorder.
    class vocabulary_index
    {
    public:
        explicit vocabulary_index(std::shared_ptr<const vocabulary> vocab) : m_vocab(std::move(vocab))
        {
            if (!m_vocab)
            {
                throw invalid_parameter("vocabulary_index: no vocabulary");
            }
            const vocabulary& v = *m_vocab;
            std::vector<token_id> order;
            order.reserve(v.size());
            for (std::size_t id = 0; id < v.size(); ++id)
            {
                if (!v.special(token_id(id)))
                {
                    order.push_back(token_id(id));
                }
            }
            std::sort(order.begin(), order.end(),
                      [&](token_id a, token_id b) { return v.bytes(a) < v.bytes(b) || (v.bytes(a) == v.bytes(b) && a < b); });
            std::vector<std::uint32_t> path;  // the open nodes, by depth - 1
            std::string prev;
            for (const token_id id : order)
            {
                const std::string& b = v.bytes(id);
                std::size_t common = 0;
                while (common < b.size() && common < prev.size() && common < path.size() && b[common] == prev[common])
                {
                    ++common;
                }
                while (path.size() > common)
                {
                    m_end[path.back()] = std::uint32_t(m_byte.size());
                    path.pop_back();
                }
                for (std::size_t d = common; d < b.size(); ++d)
                {
                    path.push_back(std::uint32_t(m_byte.size()));
                    m_byte.push_back(static_cast<unsigned char>(b[d]));
                    m_depth.push_back(std::uint16_t(std::min<std::size_t>(d + 1, 65535)));
                    m_end.push_back(0);
                    m_first.push_back(std::uint32_t(m_ids.size()));
                    m_count.push_back(0);
                }
                if (b.size() > 65535)
                {
                    throw invalid_parameter("vocabulary_index: token " + std::to_string(id) + " is longer than 65535 bytes");
                }
                const std::uint32_t at = path.back();
                if (m_count[at] == 0)
                {
                    m_first[at] = std::uint32_t(m_ids.size());
                }
                m_ids.push_back(id);
                ++m_count[at];
                m_longest = std::max(m_longest, b.size());
                prev = b;
            }
            while (!path.empty())
            {
                m_end[path.back()] = std::uint32_t(m_byte.size());
                path.pop_back();
            }
            m_root.fill(-1);
            for (std::uint32_t i = 0; i < m_byte.size(); i = m_end[i])
            {
                m_root[m_byte[i]] = std::int32_t(i);
            }
            m_all_bytes = std::all_of(m_root.begin(), m_root.end(), [&](std::int32_t r) { return r >= 0 && m_count[std::size_t(r)] > 0; });
        }

        const vocabulary& vocab() const noexcept { return *m_vocab; }
        std::size_t nodes() const noexcept { return m_byte.size(); }
        /// The longest token, in bytes.
        std::size_t longest() const noexcept { return m_longest; }
        /// Whether every single byte is a token (then any text can be spelt).
        bool all_bytes() const noexcept { return m_all_bytes; }

        /// Walks the trie from `s` through machine m: for each token whose
        /// bytes m accepts, f(id, state after it). Subtrees m rejects are
        /// skipped whole. `stack` is scratch (one state per depth).
        template <class Machine, class State, class F>
        void walk(const Machine& m, const State& s, std::vector<State>& stack, F&& f) const
        {
            if (stack.size() < m_longest + 1)
            {
                stack.resize(m_longest + 1);
            }
            stack[0] = s;
            const std::uint32_t n = std::uint32_t(m_byte.size());
            for (std::uint32_t i = 0; i < n;)
            {
                const std::size_t d = m_depth[i];
                State& cur = stack[d];
                cur = stack[d - 1];
                if (!m.step(cur, m_byte[i]))
                {
                    i = m_end[i];
                    continue;
                }
                for (std::uint32_t k = 0; k < m_count[i]; ++k)
                {
                    f(m_ids[m_first[i] + k], static_cast<const State&>(cur));
                }
                ++i;
            }
        }

        /// The fewest tokens that spell `text` (each a substring of it), or
        /// ~0 if none do.
        std::size_t fewest_tokens(std::string_view text, std::vector<std::size_t>& best) const
        {
            const std::size_t none = ~std::size_t(0);
            best.assign(text.size() + 1, none);
            best[0] = 0;
            for (std::size_t i = 0; i < text.size(); ++i)
            {
                if (best[i] == none)
                {
                    continue;
                }
                std::int32_t at = m_root[static_cast<unsigned char>(text[i])];
                std::size_t j = i + 1;
                while (at >= 0)
                {
                    if (m_count[std::size_t(at)] > 0)
                    {
                        best[j] = std::min(best[j], best[i] + 1);
                    }
                    if (j == text.size())
                    {
                        break;
                    }
                    at = child(std::uint32_t(at), static_cast<unsigned char>(text[j]));
                    ++j;
                }
            }
            return best[text.size()];
        }

    private:
        std::int32_t child(std::uint32_t at, unsigned char b) const noexcept
        {
            for (std::uint32_t c = at + 1; c < m_end[at]; c = m_end[c])
            {
                if (m_byte[c] == b)
                {
                    return std::int32_t(c);
                }
                if (m_byte[c] > b)
                {
                    break;
                }
            }
            return -1;
        }

        std::shared_ptr<const vocabulary> m_vocab;
        std::vector<unsigned char> m_byte;   // the node's byte
        std::vector<std::uint16_t> m_depth;  // 1 for the root's children
        std::vector<std::uint32_t> m_end;    // the index after the node's subtree
        std::vector<std::uint32_t> m_first;  // its tokens: m_ids[first, first + count)
        std::vector<std::uint32_t> m_count;
        std::vector<token_id> m_ids;
        std::array<std::int32_t, 256> m_root{};
        std::size_t m_longest = 0;
        bool m_all_bytes = false;
    };

    class constraint
    {
    public:
        // Not restricts_set: keep_in keeps a fused top-k pending when that is
        // exact (candidates.hpp), so a chain's top_k after a constraint still
        // runs in the row's validation pass.

        /// What a constraint's masks cost, for the benchmarks and tests.
        struct counters
        {
            std::size_t hits = 0;    // masks served from the cache
            std::size_t walks = 0;   // masks computed by walking the trie
            std::size_t tight = 0;   // of those, walks that checked the budget token by token
        };

        constraint(std::shared_ptr<const vocabulary_index> index, std::shared_ptr<const grammar> g, std::string name)
            : m_index(std::move(index)), m_machine(std::move(g)), m_name(std::move(name)),
              m_cache(std::make_shared<cache>())
        {
            if (!m_index)
            {
                throw invalid_parameter(m_name + ": no vocabulary");
            }
            reset();
        }

        const std::string& name() const noexcept { return m_name; }
        const vocabulary& vocab() const noexcept { return m_index->vocab(); }

        /// Back to the empty text (the budget stays).
        void reset()
        {
            m_entries.clear();
            m_entries.push_back({m_machine.start(), false});
            m_ids.clear();
        }

        /// The tokens read so far (eos included).
        std::size_t tokens() const noexcept { return m_ids.size(); }
        const std::vector<token_id>& read() const noexcept { return m_ids; }
        bool ended() const noexcept { return m_entries.back().ended; }
        bool complete() const { return ended() || m_machine.accepting(m_entries.back().s); }
        bool can_complete() const { return ended() || m_budget == 0 || shortest_completion() <= left(); }

        /// The canonical completion's text from here (no eos).
        std::string completion() const { return ended() ? std::string() : canonical(m_entries.back().s); }
        /// Tokens to complete from here, eos included (0 after eos).
        std::size_t shortest_completion() const
        {
            if (ended())
            {
                return 0;
            }
            return fewest(m_entries.back().s) + 1;
        }

        /// Budget-aware completion: at most max_tokens tokens in all, eos
        /// included, counted from the empty text (0: no budget). Fails if
        /// the shortest completion from the start does not fit.
        void set_budget(std::size_t max_tokens)
        {
            if (max_tokens != 0)
            {
                if (!m_index->all_bytes())
                {
                    // The budget's checks count a completion's bytes as an upper bound
                    // on its tokens: true only when every byte is a token.
                    throw invalid_parameter(m_name + ": a budget needs every single byte to be a token of the "
                                                     "vocabulary (byte fallback); this one lacks some");
                }
                const detail::grammar_state s = m_machine.start();
                const std::size_t need = fewest(s) + 1;
                if (need > max_tokens)
                {
                    throw invalid_parameter(m_name + ": no completion fits in " + std::to_string(max_tokens) +
                                            " tokens: the shortest takes " + std::to_string(need) +
                                            " (eos included), \"" + canonical(s) + "\"");
                }
            }
            m_budget = max_tokens;
        }
        std::size_t budget() const noexcept { return m_budget; }

        /// The allowed next tokens (see the top of this file).
        const token_set& mask()
        {
            if (ended() || (m_budget != 0 && left() == 0))
            {
                static const token_set none;
                return none;
            }
            const detail::grammar_state& s = m_entries.back().s;
            std::string& key = m_key;
            key_of(s, key);
            std::shared_ptr<const cached_mask> found;
            {
                const std::lock_guard<std::mutex> hold(m_cache->lock);
                const auto it = m_cache->masks.find(key);
                if (it != m_cache->masks.end() && (m_budget == 0 || it->second->growth != unknown))
                {
                    found = it->second;
                }
            }
            if (found)
            {
                ++m_counters.hits;
            }
            else
            {
                ++m_counters.walks;  // outside the lock: copies on other threads go on
                found = std::make_shared<const cached_mask>(fill(s, 0, m_budget != 0));
                const std::lock_guard<std::mutex> hold(m_cache->lock);
                if (m_cache->masks.size() >= max_cached)
                {
                    m_cache->masks.clear();  // masks in use stay alive through their holders
                }
                m_cache->masks[key] = found;
            }
            m_current = std::move(found);
            if (m_budget != 0)
            {
                const std::size_t here = completion_length(s);
                if (here + m_current->growth + 2 > left())
                {
                    ++m_counters.walks;
                    ++m_counters.tight;
                    m_tight = fill(s, left(), false).set;
                    return m_tight;
                }
            }
            return m_current->set;
        }

        /// Reads one token (see the top of this file).
        void advance(token_id id)
        {
            const vocabulary& v = vocab();
            if (id < 0 || std::size_t(id) >= v.size())
            {
                throw invalid_parameter(m_name + ": token id " + std::to_string(id) + " is outside the vocabulary of " +
                                        std::to_string(v.size()));
            }
            if (ended())
            {
                throw invalid_parameter(m_name + ": token " + std::to_string(id) + " after eos");
            }
            entry next = m_entries.back();
            if (v.special(id))
            {
                if (std::find(v.eos().begin(), v.eos().end(), id) == v.eos().end())
                {
                    throw invalid_parameter(m_name + ": token " + std::to_string(id) + " is special and not eos");
                }
                if (!m_machine.accepting(next.s))
                {
                    throw invalid_parameter(m_name + ": eos (token " + std::to_string(id) +
                                            ") before the text is complete: \"" + text() + "\"");
                }
                next.ended = true;
            }
            else
            {
                for (const char ch : v.bytes(id))
                {
                    if (!m_machine.step(next.s, static_cast<unsigned char>(ch)))
                    {
                        throw invalid_parameter(m_name + ": token " + std::to_string(id) + " (\"" + v.bytes(id) +
                                                "\") does not continue the text \"" + text() + "\"");
                    }
                }
            }
            m_entries.push_back(std::move(next));
            m_ids.push_back(id);
        }

        void rollback(std::size_t k)
        {
            if (k > m_ids.size())
            {
                throw invalid_parameter(m_name + ": rollback of " + std::to_string(k) + " tokens, only " +
                                        std::to_string(m_ids.size()) + " read");
            }
            m_entries.resize(m_entries.size() - k);
            m_ids.resize(m_ids.size() - k);
        }

        /// The text read so far.
        std::string text() const { return vocab().decode(m_ids); }

        /// The processor: sync with the history, then keep the mask's tokens.
        template <class T>
        void apply(candidates<T>& c, const token_history& history)
        {
            if (c.vocab() < vocab().size())
            {
                throw invalid_parameter(m_name + ": the row has " + std::to_string(c.vocab()) +
                                        " tokens, fewer than the vocabulary's " + std::to_string(vocab().size()));
            }
            sync(history.generated());
            c.keep_in(mask(), m_name);
        }

        const counters& stats() const noexcept { return m_counters; }
        /// Masks kept, across the copies of this constraint.
        std::size_t cached() const
        {
            const std::lock_guard<std::mutex> hold(m_cache->lock);
            return m_cache->masks.size();
        }
        static constexpr std::size_t max_cached = 4096;

    private:
        struct entry
        {
            detail::grammar_state s;
            bool ended = false;
        };
        static constexpr std::size_t unknown = ~std::size_t(0);
        struct cached_mask
        {
            token_set set;
            std::size_t growth = unknown;  // max over allowed tokens of the completion's growth, in bytes
        };
        struct cache
        {
            std::mutex lock;
            std::unordered_map<std::string, std::shared_ptr<const cached_mask>> masks;
        };

        std::size_t left() const noexcept { return m_budget > m_ids.size() ? m_budget - m_ids.size() : 0; }

        void sync(span<const token_id> generated)
        {
            std::size_t common = 0;
            const std::size_t n = std::min(generated.size(), m_ids.size());
            while (common < n && generated[common] == m_ids[common])
            {
                ++common;
            }
            rollback(m_ids.size() - common);
            for (std::size_t i = common; i < generated.size(); ++i)
            {
                advance(generated[i]);
            }
        }

        std::size_t completion_length(const detail::grammar_state& s) const
        {
            detail::length_sink n;
            m_machine.completion(s, n);
            return n.n;
        }
        std::string canonical(const detail::grammar_state& s) const
        {
            std::string out;
            m_machine.completion(s, out);
            return out;
        }
        /// The fewest tokens that spell s's canonical completion; one the
        /// vocabulary cannot spell is invalid_parameter.
        std::size_t fewest(const detail::grammar_state& s) const
        {
            const std::size_t n = fewest_memo(s);
            if (n == unknown)
            {
                throw invalid_parameter(m_name + ": the vocabulary cannot spell the completion \"" + canonical(s) + "\"");
            }
            return n;
        }

        /// The fewest tokens that spell s's canonical completion, or ~0 if the
        /// vocabulary cannot; remembered by text (the tokens of a tight step
        /// mostly share a few completions).
        std::size_t fewest_memo(const detail::grammar_state& s) const
        {
            std::string& c = m_text;
            c.clear();
            m_machine.completion(s, c);
            const auto it = m_fewest.find(c);
            if (it != m_fewest.end())
            {
                return it->second;
            }
            if (m_fewest.size() >= 65536)
            {
                m_fewest.clear();
            }
            const std::size_t n = m_index->fewest_tokens(c, m_dp);
            m_fewest.emplace(c, n);
            return n;
        }

        /// Walks the trie: the allowed tokens (and eos if s is complete);
        /// with left > 0, only those after which a completion fits.
        /// With `growth`, also the largest growth of the completion over the
        /// allowed tokens (else it is left unknown).
        cached_mask fill(const detail::grammar_state& s, std::size_t left_now, bool growth_too) const
        {
            const vocabulary& v = vocab();
            std::vector<std::uint64_t> words((v.size() + 63) / 64, 0);
            const bool lengths = growth_too || left_now != 0;
            const std::size_t here = lengths ? completion_length(s) : 0;
            std::size_t growth = 0;
            m_index->walk(m_machine, s, m_stack, [&](token_id id, const detail::grammar_state& after) {
                const std::size_t len = lengths ? completion_length(after) : 0;
                if (left_now != 0 && len + 2 > left_now)
                {
                    const std::size_t u = fewest_memo(after);
                    if (u == unknown || u + 2 > left_now)
                    {
                        return;
                    }
                }
                words[std::size_t(id) / 64] |= std::uint64_t(1) << (std::size_t(id) % 64);
                growth = std::max(growth, len > here ? len - here : 0);
            });
            if (m_machine.accepting(s))
            {
                for (const token_id e : v.eos())
                {
                    words[std::size_t(e) / 64] |= std::uint64_t(1) << (std::size_t(e) % 64);
                }
            }
            return {token_set(std::move(words)), growth_too ? growth : unknown};
        }

        /// The cache key of s: its fields, with the counts that one token
        /// cannot take past a limit clamped (they give the same mask).
        void key_of(const detail::grammar_state& s, std::string& key) const
        {
            const grammar& g = m_machine.rules();
            const std::size_t cap = m_index->longest() + 1;
            const auto clamp = [cap](std::size_t v) { return std::uint32_t(std::min(v, cap)); };
            const auto put = [&key](const auto& v) { key.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
            key.clear();
            for (const auto& f : s.frames)
            {
                const auto& n = g.nodes[f.node];
                put(f.node);
                put(f.at);
                put(f.property);
                put(f.used);
                if (n.what == grammar::kind::array)
                {
                    put(clamp(n.min_items > f.count ? n.min_items - f.count : 0));
                    put(clamp(n.max_items > f.count ? n.max_items - f.count : 0));
                }
            }
            put(std::uint8_t(s.started | s.done << 1 | s.is_key << 2 | s.want_low << 3));
            put(s.spaces);
            put(s.reading);
            put(s.node);
            put(s.trie_at);
            put(s.depth);
            put(s.dfa_at);
            put(s.escape);
            put(s.utf8_need);
            put(s.utf8_lo);
            put(s.utf8_hi);
            put(s.hex);
            put(s.num_phase);
            put(s.digits);
            const auto& n = g.nodes[s.node];
            put(clamp(n.min_length > s.chars ? n.min_length - s.chars : 0));
            put(clamp(n.max_length > s.chars ? n.max_length - s.chars : 0));
        }

        std::shared_ptr<const vocabulary_index> m_index;
        detail::grammar_machine m_machine;
        std::string m_name;
        std::shared_ptr<cache> m_cache;  // shared by copies
        std::vector<entry> m_entries;    // the state after each token read; [0] the start
        std::vector<token_id> m_ids;
        std::size_t m_budget = 0;
        std::shared_ptr<const cached_mask> m_current;  // the last mask() (alive while a step uses it)
        token_set m_tight;
        std::string m_key;
        counters m_counters;
        mutable std::vector<detail::grammar_state> m_stack;
        mutable std::vector<std::size_t> m_dp;
        mutable std::string m_text;
        mutable std::unordered_map<std::string, std::size_t> m_fewest;
    };

    /// Options of the JSON constraints.
    struct json_options
    {
        std::size_t whitespace = 2;  ///< whitespace bytes allowed in each gap between JSON tokens
        std::size_t max_depth = 32;  ///< objects and arrays nested at most this deep
    };

    /// Any JSON value.
    inline constraint json_constraint(std::shared_ptr<const vocabulary_index> index, const json_options& options = {})
    {
        auto g = std::make_shared<grammar>();
        g->whitespace = options.whitespace;
        g->max_depth = options.max_depth;
        g->root = g->any_value();
        g->finish();
        return constraint(std::move(index), std::move(g), "json");
    }

    /// A text the regular expression matches whole (regex.hpp's syntax).
    inline constraint regex_constraint(std::shared_ptr<const vocabulary_index> index, std::string_view pattern,
                                       const regex_options& options = {})
    {
        auto g = std::make_shared<grammar>();
        g->dfas.push_back(compile_regex(pattern, options));
        grammar::node n;
        n.what = grammar::kind::regex;
        n.dfa = 0;
        g->root = g->add(std::move(n));
        g->finish();
        return constraint(std::move(index), std::move(g), "regex");
    }
}

#endif
