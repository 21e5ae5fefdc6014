// xsampler/constraint.hpp — structure as a guarantee: a token mask per step. (xsampler, BSD-3-Clause)
//
// A constraint is a processor (stage.hpp) that keeps only the tokens whose
// bytes continue the text into one its grammar (grammar.hpp) can still
// complete. Put it first in a chain or in the sampler's order ("custom"
// slot); generate() then only ever draws text that can be completed, and
// eos exactly when the text is complete.
//
// vocabulary_index(vocab)
//   The vocabulary's tokens as a byte trie, built once (about 30 ms for
//   GPT-2's 50,257) and shared by every grammar over it. A vocabulary in
//   which a token id has no bytes must mark it special (vocabulary.hpp).
// compiled_grammar(index, grammar[, name, limits])
//   The grammar compiled (matcher.hpp) for the vocabulary, and the masks it
//   has computed: immutable to its users and thread-safe, so every request
//   with the same grammar shares one (a second request starts warm). Masks
//   are cached in two levels:
//   - by position: the kernel of the current Earley set (its items' DFA
//     states, counts clamped to what one token can change) decides most
//     tokens alone: those whose bytes the kernel reads without finishing
//     one of its rules (allowed), or that die before any of them could
//     finish (not allowed). One walk of the vocabulary's trie per distinct
//     position set, shared by every context it appears in;
//   - by context: the few tokens that finish a kernel rule with bytes left
//     (a string's closing quote and a comma after it) are walked through the
//     real chart, and what they allow is cached by the position set and the
//     items the rules return to (the chart's stack, counts clamped).
//   Each cache keeps at most max_cached entries (then starts afresh; entries
//   in use stay alive through their holders).
// constraint(compiled) — one request's state: the text read so far.
//   mask()        the allowed next tokens: a token whose bytes take the text
//                 to one the grammar can still complete, and the eos ids of
//                 the vocabulary exactly when the text is complete
//   advance(id)   reads the token; one the mask would not allow (a byte that
//                 breaks the text, eos before the text is complete, a special
//                 token that is not eos, anything after eos): invalid_parameter
//                 naming the token and the text, and the constraint is as it was
//   rollback(k)   forgets the last k tokens read (a rejected speculative
//                 draft); k > tokens(): invalid_parameter
//   complete()    the text is a text of the language (eos is allowed now)
//   can_complete() some completion fits the budget (always true without one)
//   completion()  the shortest completion, least in byte order (a path)
//   shortest_completion()  the tokens a completion takes from here, eos
//                 included: the fewest tokens of this vocabulary that spell
//                 the completion, plus one
//   fork()        a copy that diverges from here (n samples, beams); copies
//                 share the compiled grammar and its masks
// As a processor, apply(candidates, history) first brings the state to the
// history's generated tokens (advancing by the new ones, rolling back to the
// common prefix if the history was rewound: a rollback is just a shorter
// history), then keeps the mask's tokens (candidates::keep_in). A row with
// fewer tokens than the vocabulary: invalid_parameter; a longer row
// (padding) keeps none of its extra tokens.
//
// Budget-aware completion (set_budget(max_tokens), generate's max_tokens):
// with n tokens left, a token is allowed only if the text it leads to can be
// completed, eos included, in the n - 1 tokens after it, counted along the
// completion; since every single byte is a token, the completion can always
// be followed, so the invariant "a completion fits" holds at every step
// once it holds at the start. Then generation ends with eos, complete and
// valid, on any budget >= shortest_completion() from the start; a smaller
// budget is invalid_parameter from set_budget, before anything is generated.
#ifndef XSAMPLER_CONSTRAINT_HPP
#define XSAMPLER_CONSTRAINT_HPP

#include <algorithm>
#include <array>
#include <atomic>
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
#include "json_grammar.hpp"
#include "matcher.hpp"
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
                    if (v.bytes(token_id(id)).size() > 65535)
                    {
                        throw invalid_parameter("vocabulary_index: token " + std::to_string(id) +
                                                " is longer than 65535 bytes");
                    }
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
                    m_parent.push_back(path.empty() ? none : path.back());
                    path.push_back(std::uint32_t(m_byte.size()));
                    m_byte.push_back(static_cast<unsigned char>(b[d]));
                    m_depth.push_back(std::uint16_t(d + 1));
                    m_end.push_back(0);
                    m_first.push_back(std::uint32_t(m_ids.size()));
                    m_count.push_back(0);
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
        std::shared_ptr<const vocabulary> shared_vocab() const noexcept { return m_vocab; }
        std::size_t nodes() const noexcept { return m_byte.size(); }
        /// The longest token, in bytes.
        std::size_t longest() const noexcept { return m_longest; }
        /// Whether every single byte is a token (then any text can be spelt).
        bool all_bytes() const noexcept { return m_all_bytes; }

        // The trie, in preorder: node i reads byte(i) at depth(i) (1 for the
        // root's children), its subtree is [i, end(i)), and the tokens whose
        // bytes end there are ids [first(i), first(i) + count(i)).
        unsigned char byte(std::uint32_t i) const noexcept { return m_byte[i]; }
        std::size_t depth(std::uint32_t i) const noexcept { return m_depth[i]; }
        std::uint32_t end(std::uint32_t i) const noexcept { return m_end[i]; }
        std::uint32_t parent(std::uint32_t i) const noexcept { return m_parent[i]; }
        template <class F>
        void for_each_token(std::uint32_t i, F&& f) const
        {
            for (std::uint32_t k = 0; k < m_count[i]; ++k)
            {
                f(m_ids[m_first[i] + k]);
            }
        }
        static constexpr std::uint32_t none = ~std::uint32_t(0);

        /// The fewest tokens that spell `text` (each a substring of it), or
        /// ~0 if none do.
        std::size_t fewest_tokens(std::string_view text, std::vector<std::size_t>& best) const
        {
            const std::size_t unset = ~std::size_t(0);
            best.assign(text.size() + 1, unset);
            best[0] = 0;
            for (std::size_t i = 0; i < text.size(); ++i)
            {
                if (best[i] == unset)
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
        std::vector<unsigned char> m_byte;
        std::vector<std::uint16_t> m_depth;
        std::vector<std::uint32_t> m_end;
        std::vector<std::uint32_t> m_parent;
        std::vector<std::uint32_t> m_first;
        std::vector<std::uint32_t> m_count;
        std::vector<token_id> m_ids;
        std::array<std::int32_t, 256> m_root{};
        std::size_t m_longest = 0;
        bool m_all_bytes = false;
    };

    /// A grammar compiled for a vocabulary, with the masks computed so far
    /// (see the top of this file).
    class compiled_grammar
    {
    public:
        /// What its masks cost, for the benchmarks and tests (across all users).
        struct counters
        {
            std::size_t position_hits = 0, position_walks = 0;  // first level
            std::size_t context_hits = 0, context_walks = 0;    // second level
        };
        /// The tokens a set of positions decides alone.
        struct position_masks
        {
            token_set allowed;                 // read without finishing a kernel rule
            std::vector<std::uint32_t> roots;  // trie subtrees decided by the context (preorder)
        };
        static constexpr std::size_t max_cached = 4096;
        /// The longest shortest text a grammar may have.
        static constexpr std::size_t max_shortest = 65536;

        compiled_grammar(std::shared_ptr<const vocabulary_index> index, std::shared_ptr<const grammar_automaton> rules,
                         std::string name)
            : m_index(std::move(index)), m_rules(std::move(rules)), m_name(std::move(name))
        {
            if (!m_index)
            {
                throw invalid_parameter(m_name + ": no vocabulary");
            }
            if (!m_rules)
            {
                throw invalid_parameter(m_name + ": no grammar");
            }
            // completions and budgets spell the shortest text out
            if (m_rules->rules[m_rules->root].minlen > max_shortest)
            {
                throw invalid_parameter(m_name + ": the shortest value is longer than " + std::to_string(max_shortest) +
                                        " bytes (minLength, minItems)");
            }
        }
        compiled_grammar(std::shared_ptr<const vocabulary_index> index, const grammar& g, std::string name,
                         const grammar_limits& limits = {})
            : compiled_grammar(std::move(index), compile_grammar(g, limits), std::move(name))
        {
        }

        const std::string& name() const noexcept { return m_name; }
        const vocabulary_index& index() const noexcept { return *m_index; }
        const vocabulary& vocab() const noexcept { return m_index->vocab(); }
        std::shared_ptr<const grammar_automaton> rules() const noexcept { return m_rules; }

        counters stats() const
        {
            const std::lock_guard<std::mutex> hold(m_lock);
            return m_counters;
        }
        /// Entries in the two caches.
        std::pair<std::size_t, std::size_t> cached() const
        {
            const std::lock_guard<std::mutex> hold(m_lock);
            return {m_positions.size(), m_contexts.size()};
        }

        /// The first level's entry for `key`, computed by make() (outside
        /// the lock) if it is not cached.
        template <class Make>
        std::shared_ptr<const position_masks> positions(const std::string& key, Make&& make) const
        {
            return find_or_make(m_positions, key, make, m_counters.position_hits, m_counters.position_walks);
        }
        /// The second level's entry: the context-dependent tokens allowed.
        template <class Make>
        std::shared_ptr<const std::vector<token_id>> contexts(const std::string& key, Make&& make) const
        {
            return find_or_make(m_contexts, key, make, m_counters.context_hits, m_counters.context_walks);
        }

    private:
        template <class T, class Make>
        std::shared_ptr<const T> find_or_make(std::unordered_map<std::string, std::shared_ptr<const T>>& map,
                                              const std::string& key, Make& make, std::size_t& hits,
                                              std::size_t& walks) const
        {
            {
                const std::lock_guard<std::mutex> hold(m_lock);
                const auto it = map.find(key);
                if (it != map.end())
                {
                    ++hits;
                    return it->second;
                }
            }
            auto made = std::make_shared<const T>(make());  // outside the lock: other threads go on
            const std::lock_guard<std::mutex> hold(m_lock);
            ++walks;
            if (map.size() >= max_cached)
            {
                map.clear();
            }
            return map.emplace(key, std::move(made)).first->second;
        }

        std::shared_ptr<const vocabulary_index> m_index;
        std::shared_ptr<const grammar_automaton> m_rules;
        std::string m_name;
        mutable std::mutex m_lock;
        mutable std::unordered_map<std::string, std::shared_ptr<const position_masks>> m_positions;
        mutable std::unordered_map<std::string, std::shared_ptr<const std::vector<token_id>>> m_contexts;
        mutable counters m_counters;
    };

    class constraint
    {
    public:
        // Not restricts_set: keep_in keeps a fused top-k pending when that is
        // exact (candidates.hpp), so a chain's top_k after a constraint still
        // runs in the row's validation pass.

        explicit constraint(std::shared_ptr<const compiled_grammar> g) : m_g(std::move(g)), m_matcher(check(m_g))
        {
            reset();
        }

        const std::string& name() const noexcept { return m_g->name(); }
        const vocabulary& vocab() const noexcept { return m_g->vocab(); }
        const compiled_grammar& compiled() const noexcept { return *m_g; }
        std::shared_ptr<const compiled_grammar> shared_compiled() const noexcept { return m_g; }

        /// Back to the empty text (the budget stays).
        void reset()
        {
            m_matcher.reset();
            m_starts.clear();
            m_ids.clear();
            m_ended = false;
        }
        /// A copy that diverges from here.
        constraint fork() const { return *this; }

        /// The tokens read so far (eos included).
        std::size_t tokens() const noexcept { return m_ids.size(); }
        const std::vector<token_id>& read() const noexcept { return m_ids; }
        bool ended() const noexcept { return m_ended; }
        bool complete() const { return m_ended || m_matcher.complete(); }
        bool can_complete() const { return m_ended || m_budget == 0 || shortest_completion() <= left(); }

        /// The shortest completion's text from here (no eos), least in byte order.
        std::string completion() const { return m_ended ? std::string() : m_matcher.completion(); }
        /// Tokens to complete from here, eos included (0 after eos).
        std::size_t shortest_completion() const
        {
            if (m_ended)
            {
                return 0;
            }
            return fewest(completion()) + 1;
        }

        /// Budget-aware completion: at most max_tokens tokens in all, eos
        /// included, counted from the empty text (0: no budget). Fails if
        /// the shortest completion from the start does not fit.
        void set_budget(std::size_t max_tokens)
        {
            if (max_tokens != 0)
            {
                if (!m_g->index().all_bytes())
                {
                    // the budget's checks follow the completion byte by byte where they must
                    throw invalid_parameter(name() + ": a budget needs every single byte to be a token of the "
                                                     "vocabulary (byte fallback); this one lacks some");
                }
                matcher start(m_g->rules());
                const std::string c = start.completion();
                const std::size_t need = fewest(c) + 1;
                if (need > max_tokens)
                {
                    throw invalid_parameter(name() + ": no completion fits in " + std::to_string(max_tokens) +
                                            " tokens: the shortest takes " + std::to_string(need) +
                                            " (eos included), \"" + c + "\"");
                }
            }
            m_budget = max_tokens;
        }
        std::size_t budget() const noexcept { return m_budget; }

        /// The allowed next tokens (see the top of this file).
        const token_set& mask()
        {
            if (m_ended || (m_budget != 0 && left() == 0))
            {
                static const token_set none;
                return none;
            }
            position_key(m_key);
            const auto found = m_g->positions(m_key, [&] { return walk_positions(); });
            const bool done = m_matcher.complete();
            m_current = found;
            const token_set* out = &found->allowed;
            if (!found->roots.empty())
            {
                m_ctx_key = m_key;
                context_key(m_ctx_key);
                m_extras = m_g->contexts(m_ctx_key, [&] { return walk_context(*found); });
                if (!m_extras->empty() || done)
                {
                    m_scratch = found->allowed;
                    for (const token_id t : *m_extras)
                    {
                        m_scratch.insert(t);
                    }
                    out = &m_scratch;
                }
            }
            if (done)
            {
                if (out != &m_scratch)
                {
                    m_scratch = found->allowed;
                    out = &m_scratch;
                }
                for (const token_id e : vocab().eos())
                {
                    m_scratch.insert(e);
                }
            }
            if (m_budget != 0)
            {
                return budgeted(*out);
            }
            return *out;
        }

        /// Reads one token (see the top of this file).
        void advance(token_id id)
        {
            const vocabulary& v = vocab();
            if (id < 0 || std::size_t(id) >= v.size())
            {
                throw invalid_parameter(name() + ": token id " + std::to_string(id) + " is outside the vocabulary of " +
                                        std::to_string(v.size()));
            }
            if (m_ended)
            {
                throw invalid_parameter(name() + ": token " + std::to_string(id) + " after eos");
            }
            if (v.special(id))
            {
                if (std::find(v.eos().begin(), v.eos().end(), id) == v.eos().end())
                {
                    throw invalid_parameter(name() + ": token " + std::to_string(id) + " is special and not eos");
                }
                if (!m_matcher.complete())
                {
                    throw invalid_parameter(name() + ": eos (token " + std::to_string(id) +
                                            ") before the text is complete: \"" + text() + "\"");
                }
                m_starts.push_back(m_matcher.position());
                m_ids.push_back(id);
                m_ended = true;
                return;
            }
            const std::size_t before = m_matcher.position();
            const std::string& b = v.bytes(id);
            if (m_matcher.feed(b) != b.size())
            {
                m_matcher.pop(m_matcher.position() - before);
                throw invalid_parameter(name() + ": token " + std::to_string(id) + " (\"" + b +
                                        "\") does not continue the text \"" + text() + "\"");
            }
            m_starts.push_back(before);
            m_ids.push_back(id);
        }

        void rollback(std::size_t k)
        {
            if (k > m_ids.size())
            {
                throw invalid_parameter(name() + ": rollback of " + std::to_string(k) + " tokens, only " +
                                        std::to_string(m_ids.size()) + " read");
            }
            if (k == 0)
            {
                return;
            }
            const std::size_t to = m_starts[m_ids.size() - k];
            m_matcher.pop(m_matcher.position() - to);
            m_starts.resize(m_ids.size() - k);
            m_ids.resize(m_ids.size() - k);
            m_ended = false;
        }

        /// The text read so far.
        std::string text() const { return vocab().decode(m_ids); }

        /// The processor: sync with the history, then keep the mask's tokens.
        template <class T>
        void apply(candidates<T>& c, const token_history& history)
        {
            if (c.vocab() < vocab().size())
            {
                throw invalid_parameter(name() + ": the row has " + std::to_string(c.vocab()) +
                                        " tokens, fewer than the vocabulary's " + std::to_string(vocab().size()));
            }
            sync(history.generated());
            c.keep_in(mask(), name());
        }

    private:
        static std::shared_ptr<const grammar_automaton> check(const std::shared_ptr<const compiled_grammar>& g)
        {
            if (!g)
            {
                throw invalid_parameter("constraint: no compiled grammar");
            }
            return g->rules();
        }

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

        /// A count as the first level's key holds it: what one token can
        /// still change (min and max minus the count, clamped).
        std::uint32_t clamped(std::size_t bound, std::uint32_t count) const noexcept
        {
            const std::size_t cap = m_g->index().longest() + 2;
            if (bound == grammar::unbounded)
            {
                return std::uint32_t(cap);
            }
            return std::uint32_t(std::min(bound > count ? bound - count : 0, cap));
        }
        void put_item(std::string& key, const earley_item& x) const
        {
            const auto& a = *m_matcher.shared_rules();
            const auto& r = a.rules[a.states[x.state].rule];
            std::array<std::uint32_t, 3> v{x.state, 0, 0};
            if (r.counted)
            {
                v[1] = clamped(r.min, x.count);
                v[2] = clamped(r.max, x.count);
            }
            key.append(reinterpret_cast<const char*>(v.data()), sizeof v);
        }

        /// The first level's key: the kernel's items without their origins,
        /// sorted and without repeats.
        void position_key(std::string& key)
        {
            m_kernel.clear();
            m_matcher.for_each_kernel([&](const earley_item& x) { m_kernel.push_back(x); });
            std::vector<std::string>& parts = m_parts;
            parts.clear();
            for (const auto& x : m_kernel)
            {
                std::string p;
                put_item(p, x);
                parts.push_back(std::move(p));
            }
            std::sort(parts.begin(), parts.end());
            parts.erase(std::unique(parts.begin(), parts.end()), parts.end());
            key.clear();
            for (const auto& p : parts)
            {
                key += p;
            }
        }

        /// The second level's key: for each kernel item, the items its rule
        /// returns to, and theirs, up to the root (the chart's stack).
        void context_key(std::string& key)
        {
            const auto& a = *m_matcher.shared_rules();
            std::unordered_map<std::uint64_t, std::uint32_t> ids;  // (set, rule) -> record number
            std::string records;
            // an explicit stack: (set, rule) frames whose records are being built
            struct frame
            {
                std::uint32_t set, rule;
                std::vector<std::pair<std::string, std::uint64_t>> entries;  // (item, set<<32|rule) to finish
                std::size_t next = 0;
            };
            const auto record_of = [&](std::uint32_t set, std::uint32_t rule) -> std::uint32_t {
                const std::uint64_t top = std::uint64_t(set) << 32 | rule;
                const auto it = ids.find(top);
                if (it != ids.end())
                {
                    return it->second;
                }
                std::vector<frame> stack;
                stack.push_back({set, rule, {}, 0});
                const auto expand = [&](frame& f) {
                    for (const earley_item* y = m_matcher.set_begin(f.set); y != m_matcher.set_end(f.set); ++y)
                    {
                        if (!m_matcher.can_read(*y))
                        {
                            continue;
                        }
                        const auto& ys = a.states[y->state];
                        for (std::uint32_t e = ys.edges_begin; e < ys.edges_end; ++e)
                        {
                            if (a.edges[e].rule != f.rule)
                            {
                                continue;
                            }
                            std::string item;
                            put_item(item, {a.edges[e].target, y->origin, y->count});
                            f.entries.push_back({std::move(item), y->origin == matcher::context
                                                                      ? ~std::uint64_t(0)
                                                                      : std::uint64_t(y->origin) << 32 | ys.rule});
                        }
                    }
                };
                expand(stack.back());
                while (!stack.empty())
                {
                    frame& f = stack.back();
                    if (f.next < f.entries.size())
                    {
                        const std::uint64_t up = f.entries[f.next].second;
                        ++f.next;
                        if (up != ~std::uint64_t(0) && ids.find(up) == ids.end())
                        {
                            ids.emplace(up, ~std::uint32_t(0));  // on the stack: a cycle refers to it by this
                            stack.push_back({std::uint32_t(up >> 32), std::uint32_t(up), {}, 0});
                            expand(stack.back());
                        }
                        continue;
                    }
                    // all parents numbered: write the record
                    std::vector<std::string> lines;
                    for (const auto& [item, up] : f.entries)
                    {
                        std::uint32_t n = ~std::uint32_t(0);
                        if (up != ~std::uint64_t(0))
                        {
                            n = ids[up];
                        }
                        std::string line = item;
                        line.append(reinterpret_cast<const char*>(&n), sizeof n);
                        lines.push_back(std::move(line));
                    }
                    if (f.set == 0 && f.rule == a.root)
                    {
                        lines.push_back("end");
                    }
                    std::sort(lines.begin(), lines.end());
                    lines.erase(std::unique(lines.begin(), lines.end()), lines.end());
                    const auto number = std::uint32_t(ids.size());
                    records += "[";
                    for (const auto& l : lines)
                    {
                        records += l;
                        records += ";";
                    }
                    records += "]";
                    ids[std::uint64_t(f.set) << 32 | f.rule] = number;
                    stack.pop_back();
                }
                return ids[top];
            };
            std::vector<std::string> lines;
            for (const auto& x : m_kernel)
            {
                std::string line;
                put_item(line, x);
                const std::uint32_t n =
                    x.origin == matcher::context ? ~std::uint32_t(0) : record_of(x.origin, a.states[x.state].rule);
                line.append(reinterpret_cast<const char*>(&n), sizeof n);
                lines.push_back(std::move(line));
            }
            std::sort(lines.begin(), lines.end());
            lines.erase(std::unique(lines.begin(), lines.end()), lines.end());
            key += "|";
            for (const auto& l : lines)
            {
                key += l;
            }
            key += "|";
            key += records;
        }

        /// The first level: the trie walked from the kernel's positions alone.
        compiled_grammar::position_masks walk_positions() const
        {
            const vocabulary_index& ix = m_g->index();
            matcher local(m_matcher.shared_rules());
            local.start_from(m_kernel);
            compiled_grammar::position_masks out;
            std::vector<std::uint64_t> words((vocab().size() + 63) / 64, 0);
            std::vector<std::uint8_t> popped(ix.longest() + 2, 0);  // a kernel rule finished at depth 1..d
            const auto n = std::uint32_t(ix.nodes());
            for (std::uint32_t i = 0; i < n;)
            {
                const std::size_t d = ix.depth(i);
                local.pop(local.position() - (d - 1));
                if (!local.step(ix.byte(i)))
                {
                    if (popped[d - 1])
                    {
                        out.roots.push_back(i);
                    }
                    i = ix.end(i);
                    continue;
                }
                popped[d] = std::uint8_t(popped[d - 1] | std::uint8_t(local.popped()));
                ix.for_each_token(i, [&](token_id t) { words[std::size_t(t) / 64] |= std::uint64_t(1) << (t % 64); });
                ++i;
            }
            out.allowed = token_set(std::move(words));
            return out;
        }

        /// The second level: the context's subtrees walked through the real chart.
        std::vector<token_id> walk_context(const compiled_grammar::position_masks& p) const
        {
            const vocabulary_index& ix = m_g->index();
            matcher m = m_matcher;
            const std::size_t base = m.position();
            std::vector<token_id> out;
            std::vector<std::uint32_t> path;
            std::string prefix;  // the bytes read after base
            for (const std::uint32_t root : p.roots)
            {
                // the root's ancestors' bytes
                path.clear();
                for (std::uint32_t a = ix.parent(root); a != vocabulary_index::none; a = ix.parent(a))
                {
                    path.push_back(a);
                }
                std::string want;
                for (std::size_t k = path.size(); k-- > 0;)
                {
                    want += char(ix.byte(path[k]));
                }
                std::size_t common = 0;
                while (common < want.size() && common < prefix.size() && want[common] == prefix[common])
                {
                    ++common;
                }
                m.pop(m.position() - base - std::min(common, m.position() - base));
                prefix.resize(m.position() - base);
                bool live = true;
                for (std::size_t k = prefix.size(); k < want.size(); ++k)
                {
                    if (!m.step(static_cast<unsigned char>(want[k])))
                    {
                        live = false;
                        break;
                    }
                    prefix += want[k];
                }
                if (!live)
                {
                    continue;
                }
                // the subtree, from depth d = want.size() + 1
                const std::size_t top = m.position();
                for (std::uint32_t i = root; i < ix.end(root);)
                {
                    const std::size_t d = ix.depth(i) - want.size();  // 1 at the root
                    m.pop(m.position() - (top + d - 1));
                    if (!m.step(ix.byte(i)))
                    {
                        i = ix.end(i);
                        continue;
                    }
                    ix.for_each_token(i, [&](token_id t) { out.push_back(t); });
                    ++i;
                }
                m.pop(m.position() - top);
            }
            std::sort(out.begin(), out.end());
            return out;
        }

        /// The mask restricted to the tokens after which a completion fits
        /// the budget.
        const token_set& budgeted(const token_set& allowed)
        {
            const std::size_t n = left();
            const vocabulary& v = vocab();
            // fast: if the completion after any byte fits, every allowed token fits
            std::vector<std::uint64_t> words(allowed.words().size(), 0);
            bool changed = false;
            for (std::size_t w = 0; w < allowed.words().size(); ++w)
            {
                std::uint64_t bits = allowed.words()[w];
                while (bits != 0)
                {
                    const int b = __builtin_ctzll(bits);
                    bits &= bits - 1;
                    const auto t = token_id(w * 64 + std::size_t(b));
                    bool fits = true;
                    if (!v.special(t))
                    {
                        const std::size_t before = m_matcher.position();
                        m_matcher.feed(v.bytes(t));
                        fits = fewest(m_matcher.completion()) + 2 <= n;
                        m_matcher.pop(m_matcher.position() - before);
                    }
                    if (fits)
                    {
                        words[w] |= std::uint64_t(1) << b;
                    }
                    else
                    {
                        changed = true;
                    }
                }
            }
            if (!changed)
            {
                return allowed;
            }
            m_budgeted = token_set(std::move(words));
            return m_budgeted;
        }

        /// The fewest tokens that spell `text`; one the vocabulary cannot
        /// spell is invalid_parameter.
        std::size_t fewest(const std::string& text) const
        {
            std::vector<std::size_t> dp;
            const std::size_t n = m_g->index().fewest_tokens(text, dp);
            if (n == ~std::size_t(0))
            {
                throw invalid_parameter(name() + ": the vocabulary cannot spell the completion \"" + text + "\"");
            }
            return n;
        }

        std::shared_ptr<const compiled_grammar> m_g;
        mutable matcher m_matcher;
        std::vector<std::size_t> m_starts;  // the matcher's position before each token read
        std::vector<token_id> m_ids;
        bool m_ended = false;
        std::size_t m_budget = 0;
        std::shared_ptr<const compiled_grammar::position_masks> m_current;  // alive while a step uses it
        std::shared_ptr<const std::vector<token_id>> m_extras;
        token_set m_scratch, m_budgeted;
        std::string m_key, m_ctx_key;
        std::vector<earley_item> m_kernel;
        std::vector<std::string> m_parts;
    };

    /// The grammar of a text the regular expression matches whole (regex.hpp's syntax).
    inline grammar regex_grammar(std::string_view pattern, const regex_options& options = {})
    {
        grammar g;
        const auto root = g.rule("regex");
        g.define(root, g.lexeme(compile_regex(pattern, options)));
        g.set_root(root);
        return g;
    }

    /// A constraint over a grammar compiled for the index's vocabulary (a
    /// new compiled_grammar: keep it, or the constraint, to share its masks).
    inline constraint grammar_constraint(std::shared_ptr<const vocabulary_index> index, const grammar& g,
                                         std::string name = "grammar", const grammar_limits& limits = {})
    {
        return constraint(std::make_shared<const compiled_grammar>(std::move(index), g, std::move(name), limits));
    }

    /// Any JSON value (json_grammar.hpp).
    inline constraint json_constraint(std::shared_ptr<const vocabulary_index> index, const json_options& options = {})
    {
        return grammar_constraint(std::move(index), json_grammar(options), "json");
    }

    /// A text the regular expression matches whole (regex.hpp's syntax).
    inline constraint regex_constraint(std::shared_ptr<const vocabulary_index> index, std::string_view pattern,
                                       const regex_options& options = {})
    {
        return grammar_constraint(std::move(index), regex_grammar(pattern, options), "regex");
    }
}

#endif
