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
//   A set of several items (none a counted rule's) is the union of its
//   items' entries alone, and the compile walks ahead the entry of each item
//   alone that a kernel may hold (at most grammar_limits::primed_items,
//   1,024 unless set; breadth first from the root's start): a first request
//   composes most of its positions from them (a few microseconds) instead of
//   walking the trie.
//   Each cache keeps at most max_cached entries (then starts afresh; entries
//   in use stay alive through their holders).
//   A grammar with distinct marks (grammar::distinct: uniqueItems over
//   strings and objects) is cached without them; inside such an array the
//   mask's tokens with a byte that may end an item are read again through
//   the real chart, which checks them (tens to hundreds of tokens a step).
//   A budget over such a grammar is invalid_parameter (its costs do not
//   know the marks).
// constraint(compiled) — one request's state: the text read so far.
//   mask()        the allowed next tokens: a token whose bytes take the text
//                 to one the grammar can still complete, and the eos ids of
//                 the vocabulary exactly when the text is complete
//   advance(id)   reads the token; one the mask would not allow (a byte that
//                 breaks the text, eos before the text is complete, a special
//                 token that is not eos, anything after eos, under a budget a
//                 token after which no completion fits): invalid_parameter
//                 naming the token and the text, and the constraint is as it was
//   rollback(k)   forgets the last k tokens read (a rejected speculative
//                 draft); k > tokens(): invalid_parameter
//   complete()    the text is a text of the language (eos is allowed now)
//   can_complete() some completion fits the budget (always true without one)
//   completion()  the shortest completion, least in byte order (a path;
//                 past distinct items that repeat, a short one: matcher.hpp)
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
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "detail/simd.hpp"
#include "candidates.hpp"
#include "grammar.hpp"
#include "json_grammar.hpp"
#include "detail/token_costs.hpp"
#include "matcher.hpp"
#include "regex.hpp"
#include "vocabulary.hpp"

namespace xsampler
{
    namespace detail
    {
        /// A text for a message: at most 200 bytes, its end (tail) or start, "..." for the rest.
        inline std::string shortened(const std::string& s, bool tail = false)
        {
            if (s.size() <= 200)
            {
                return s;
            }
            return tail ? "..." + s.substr(s.size() - 200) : s.substr(0, 200) + "...";
        }
    }

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
            // trie nodes the walks read through the chart: by a step, and as a
            // set of the parent's class again (set_classes: no step); and by a
            // table look-up (one plain item)
            std::size_t nodes_stepped = 0, nodes_repeated = 0, nodes_plain = 0;
            // runs of a class read by their tokens (walk_local's on_run)
            std::size_t runs_by_tokens = 0;
        };
        /// The tokens a set of positions decides alone.
        struct position_masks
        {
            token_set allowed;                 // read without finishing a kernel rule
            std::vector<std::uint32_t> roots;  // trie subtrees decided by the context (preorder)
        };
        /// What a set of positions' tokens cost under a budget: the tokens it
        /// decides alone, grouped by the kernel group they leave and the item
        /// (state, count change) they leave it in, each with the cost of the
        /// sub-rules it opened (a token costs local + rest(state, count +
        /// delta) + the group's way out); sorted by that local cost.
        struct budget_class
        {
            std::uint32_t group, state;
            std::int64_t delta;
            std::vector<std::pair<std::uint64_t, token_id>> tokens;
        };
        /// A context's tokens (the second level's) with the cost of finishing
        /// after each, less the state's own: sorted.
        struct context_costs
        {
            std::vector<std::pair<std::int64_t, token_id>> tokens;
        };
        struct position_costs
        {
            std::vector<budget_class> classes;
            std::vector<token_id> check;  // allowed tokens that also finish a kernel rule: a real check if cut
        };
        static constexpr std::size_t max_cached = 4096;
        /// The longest shortest text a grammar may have.
        static constexpr std::size_t max_shortest = 65536;

        /// `primed`: the single items whose masks are walked ahead (grammar_limits::primed_items).
        compiled_grammar(std::shared_ptr<const vocabulary_index> index, std::shared_ptr<const grammar_automaton> rules,
                         std::string name, std::size_t primed = grammar_limits{}.primed_items)
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
            const grammar_automaton& a = *m_rules;
            m_looping.assign(a.states.size(), 0);
            m_run_of.assign(a.states.size(), -1);
            for (std::uint32_t s = 0; s < a.states.size(); ++s)
            {
                const auto& r = a.rules[a.states[s].rule];
                if (r.units)
                {
                    continue;  // a counted lexeme's byte changes its count: no run leads the set to itself
                }
                bool loops = r.counted && r.max == grammar::unbounded && s == r.start;  // (its count stops at min)
                for (std::uint32_t c = 0; c < a.classes && !loops; ++c)
                {
                    loops = a.table[std::size_t(s) * a.classes + c] == std::int32_t(s);
                }
                m_looping[s] = std::uint8_t(loops);
                std::bitset<256> self;  // the bytes that lead s to itself
                for (unsigned b = 0; b < 256; ++b)
                {
                    self[b] = a.next(s, static_cast<unsigned char>(b)) == std::int32_t(s);
                }
                if (self.none())
                {
                    continue;
                }
                std::size_t at = 0;
                while (at < m_runs.size() && m_runs[at].first != self)
                {
                    ++at;
                }
                if (at == m_runs.size())
                {
                    auto runs = m_index->runs_of(self);
                    if (!runs)
                    {
                        continue;
                    }
                    m_runs.emplace_back(self, std::move(runs));
                }
                m_run_of[s] = std::int32_t(at);
            }
            if (a.has_distinct())
            {
                distinct_setup();
            }
            units_setup();
            prime(primed);  // (a first request then composes most of its positions from these)
        }
        compiled_grammar(std::shared_ptr<const vocabulary_index> index, const grammar& g, std::string name,
                         const grammar_limits& limits = {})
            : compiled_grammar(std::move(index), compile_grammar(g, limits), std::move(name), limits.primed_items)
        {
        }

        const std::string& name() const noexcept { return m_name; }
        const vocabulary_index& index() const noexcept { return *m_index; }
        const vocabulary& vocab() const noexcept { return m_index->vocab(); }
        std::shared_ptr<const grammar_automaton> rules() const noexcept { return m_rules; }

        counters stats() const
        {
            const std::lock_guard<std::mutex> hold(m_lock);
            counters out = m_counters;
            out.nodes_stepped = m_stepped.load(std::memory_order_relaxed);
            out.nodes_repeated = m_repeated.load(std::memory_order_relaxed);
            out.nodes_plain = m_plain.load(std::memory_order_relaxed);
            out.runs_by_tokens = m_runs_read.load(std::memory_order_relaxed);
            return out;
        }
        /// Adds a walk's nodes to stats().
        void note_walk(std::size_t stepped, std::size_t repeated, std::size_t plain, std::size_t runs) const noexcept
        {
            m_runs_read.fetch_add(runs, std::memory_order_relaxed);
            m_plain.fetch_add(plain, std::memory_order_relaxed);
            m_stepped.fetch_add(stepped, std::memory_order_relaxed);
            m_repeated.fetch_add(repeated, std::memory_order_relaxed);
        }
        /// By automaton state: whether an item in it may be itself again after
        /// a byte (a byte leads the state to itself; a counted rule's start
        /// whose count stops at its minimum). The walks look for a set read
        /// again (set_classes) only among sets with such an item (a byte that
        /// swaps two items' states is missed: a step more, never a wrong mask).
        const std::vector<std::uint8_t>& looping() const noexcept { return m_looping; }
        /// By automaton state: the index of the trie read through the bytes
        /// that lead the state to itself (vocabulary_index::runs_of), or -1
        /// where it has none or they are few; runs(r) gives it and its bytes.
        std::int32_t run_of(std::uint32_t s) const noexcept { return m_run_of[s]; }
        const std::pair<std::bitset<256>, std::shared_ptr<const class_runs>>& runs(std::int32_t r) const noexcept
        {
            return m_runs[std::size_t(r)];
        }
        /// With grammar::distinct marks: the tokens with a byte that may end a
        /// distinct item (automaton::distinct_last), in id order: the only
        /// ones that can read past an equal earlier item (none without marks).
        const std::vector<token_id>& distinct_tokens() const noexcept { return m_distinct_tokens; }
        /// Of those, the ones with a byte that may begin a distinct array too
        /// (automaton::distinct_first): outside such an array, the only ones
        /// that can begin one and end an item in it.
        const std::vector<token_id>& distinct_opening_tokens() const noexcept { return m_distinct_opening; }
        /// With marks: the tokens with a backslash (one may write any char of a string item).
        const std::vector<token_id>& escape_tokens() const noexcept { return m_escape_tokens; }
        /// With grammar::distinct_closed marks: the tokens with a quote or a
        /// backslash (one may end a member's string, the last one needed).
        const std::vector<token_id>& quote_tokens() const noexcept { return m_quote_tokens; }
        /// By automaton rule: whether a distinct array reads it, directly or
        /// through others (a set with no item of these is no array's: its
        /// tokens end no distinct item).
        bool in_distinct(std::uint32_t rule) const noexcept { return !m_in_distinct.empty() && m_in_distinct[rule] != 0; }

        /// A counted lexeme's walk of the trie from one of its states: the
        /// nodes of tokens whose bytes all stay in its DFA, with the state
        /// they end in and the units they read; and the nodes below the first
        /// level whose byte dies after an accepting state (where the rule may
        /// end and its context read the byte), with that state and the units
        /// before it, in preorder. Independent of the count, so one walk
        /// serves every count.
        struct units_walk
        {
            struct node
            {
                std::uint32_t node, state, units;
            };
            std::vector<node> inside, stops;
        };
        /// Whether a counted lexeme's masks may come from its units_walk: no
        /// byte that may follow its rule is one its DFA reads at an accepting
        /// state (so the rule ends only where the DFA dies).
        bool units_apart(std::uint32_t rule) const noexcept { return rule < m_units_apart.size() && m_units_apart[rule] != 0; }
        /// The units_walk from state s (cached; at most 64 kept, then afresh).
        std::shared_ptr<const units_walk> walk_units(std::uint32_t s) const
        {
            std::size_t hits = 0, walks = 0;
            auto make = [&] {
                const grammar_automaton& a = *m_rules;
                const vocabulary_index& ix = *m_index;
                units_walk w;
                std::vector<std::uint32_t> at(ix.longest() + 1, s), units(ix.longest() + 1, 0);
                for (std::uint32_t i = 0; i < ix.nodes();)
                {
                    const std::size_t d = ix.depth(i);
                    const std::uint32_t from = at[d - 1];
                    const std::int32_t t = a.next(from, ix.byte(i));
                    if (t < 0)
                    {
                        // (where the item itself may end, before any byte, the context's own walk reads on)
                        if (d > 1 && a.states[from].accepting)
                        {
                            w.stops.push_back({i, from, units[d - 1]});
                        }
                        i = ix.end(i);
                        continue;
                    }
                    at[d] = std::uint32_t(t);
                    units[d] = units[d - 1] + std::uint32_t(a.states[from].unit);
                    if (ix.has_token(i))
                    {
                        w.inside.push_back({i, std::uint32_t(t), units[d]});
                    }
                    ++i;
                }
                return w;
            };
            return find_or_make(m_unit_walks, std::to_string(s), make, hits, walks, 64);
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
        /// The second level's entry: the context-dependent tokens allowed (ids;
        /// many of them also as words of a bitset, to be or-ed in).
        struct context_tokens
        {
            std::size_t size = 0;
            std::vector<token_id> ids;         // when few (at most `many`)
            std::vector<std::uint64_t> words;  // when more
            token_set joined;                  // with words: these and the position's own, the mask
            static constexpr std::size_t many = 256;
            /// The tokens in id order (from the bitset when many).
            std::vector<token_id> list() const
            {
                if (words.empty())
                {
                    return ids;
                }
                std::vector<token_id> out(size);
                for (std::size_t w = 0, k = 0; w < words.size(); ++w)
                {
                    for (std::uint64_t bits = words[w]; bits != 0; bits &= bits - 1)
                    {
                        out[k++] = token_id(w * 64 + std::size_t(__builtin_ctzll(bits)));
                    }
                }
                return out;
            }
        };
        template <class Make>
        std::shared_ptr<const context_tokens> contexts(const std::string& key, Make&& make) const
        {
            return find_or_make(m_contexts, key, make, m_counters.context_hits, m_counters.context_walks);
        }
        /// The first level's costs under a budget.
        template <class Make>
        std::shared_ptr<const position_costs> costs(const std::string& key, Make&& make) const
        {
            std::size_t hits = 0, walks = 0;
            return find_or_make(m_costs, key, make, hits, walks);
        }
        /// The second level's costs under a budget.
        template <class Make>
        std::shared_ptr<const context_costs> context_cost(const std::string& key, Make&& make) const
        {
            std::size_t hits = 0, walks = 0;
            return find_or_make(m_context_costs, key, make, hits, walks);
        }
        /// The token cost of each state (detail/token_costs.hpp), built on first use.
        const detail::token_costs& token_costs() const
        {
            std::call_once(m_costs_once, [&] { m_token_costs = std::make_unique<detail::token_costs>(*m_rules, *m_index); });
            return *m_token_costs;
        }

    private:
        void prime(std::size_t most);
        void distinct_setup()
        {
            const grammar_automaton& a = *m_rules;
            const vocabulary& v = m_index->vocab();
            const bool closed = std::any_of(a.rules.begin(), a.rules.end(), [](const auto& r) { return r.distinct_closed; });
            for (std::size_t t = 0; t < v.size(); ++t)
            {
                const std::string& b = v.bytes(token_id(t));
                const auto any = [&](const std::bitset<256>& bytes) {
                    return std::any_of(b.begin(), b.end(), [&](char c) { return bytes[static_cast<unsigned char>(c)]; });
                };
                if (!v.special(token_id(t)) && b.find('\\') != std::string::npos)
                {
                    m_escape_tokens.push_back(token_id(t));
                }
                if (closed && !v.special(token_id(t)) && b.find_first_of("\"\\") != std::string::npos)
                {
                    m_quote_tokens.push_back(token_id(t));
                }
                if (!v.special(token_id(t)) && any(a.distinct_last))
                {
                    m_distinct_tokens.push_back(token_id(t));
                    if (any(a.distinct_first))
                    {
                        m_distinct_opening.push_back(token_id(t));
                    }
                }
            }
            std::vector<std::vector<std::uint32_t>> reads(a.rules.size());  // rule -> the rules its states read
            for (const auto& st : a.states)
            {
                for (std::uint32_t e = st.edges_begin; e < st.edges_end; ++e)
                {
                    reads[st.rule].push_back(a.edges[e].rule);
                }
            }
            m_in_distinct.assign(a.rules.size(), 0);
            for (std::uint32_t r = 0; r < a.rules.size(); ++r)
            {
                m_in_distinct[r] = std::uint8_t(a.rules[r].distinct_array);
            }
            detail::mark_reaching(reads, m_in_distinct);  // (reads as the edges back: the rules the arrays reach)
        }
        template <class T, class Make>
        std::shared_ptr<const T> find_or_make(std::unordered_map<std::string, std::shared_ptr<const T>>& map,
                                              const std::string& key, Make& make, std::size_t& hits,
                                              std::size_t& walks, std::size_t limit = max_cached) const
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
            if (map.size() >= limit)
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
        mutable std::unordered_map<std::string, std::shared_ptr<const context_tokens>> m_contexts;
        mutable std::unordered_map<std::string, std::shared_ptr<const position_costs>> m_costs;
        mutable std::unordered_map<std::string, std::shared_ptr<const context_costs>> m_context_costs;
        mutable counters m_counters;
        mutable std::atomic<std::size_t> m_stepped{0}, m_repeated{0}, m_plain{0}, m_runs_read{0};
        std::vector<std::uint8_t> m_looping;
        std::vector<std::int32_t> m_run_of;  // by state: its index in m_runs, or -1
        std::vector<std::pair<std::bitset<256>, std::shared_ptr<const class_runs>>> m_runs;
        mutable std::once_flag m_costs_once;
        mutable std::unique_ptr<detail::token_costs> m_token_costs;
        std::vector<token_id> m_distinct_tokens, m_distinct_opening, m_escape_tokens, m_quote_tokens;
        std::vector<std::uint8_t> m_in_distinct;
        std::vector<std::uint8_t> m_units_apart;  // by rule: units_apart()
        mutable std::unordered_map<std::string, std::shared_ptr<const units_walk>> m_unit_walks;

        void units_setup()
        {
            const grammar_automaton& a = *m_rules;
            if (!a.has_units())
            {
                return;
            }
            m_units_apart.assign(a.rules.size(), 0);
            std::vector<std::bitset<256>> at_ends(a.rules.size());  // by rule: the bytes its accepting states read
            for (std::uint32_t s = 0; s < a.states.size(); ++s)
            {
                if (a.states[s].accepting && a.rules[a.states[s].rule].units)
                {
                    for (unsigned b = 0; b < 256; ++b)
                    {
                        at_ends[a.states[s].rule][b] = at_ends[a.states[s].rule][b] || a.next(s, static_cast<unsigned char>(b)) >= 0;
                    }
                }
            }
            for (std::uint32_t r = 0; r < a.rules.size(); ++r)
            {
                m_units_apart[r] = std::uint8_t(a.rules[r].units && (a.follow[r] & at_ends[r]).none());
            }
        }
    };

    class constraint
    {
        friend class compiled_grammar;

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
        /// Tokens to complete from here, eos included (0 after eos): the
        /// completion spelt segment by segment (detail/token_costs.hpp), the
        /// count budgets keep; without byte fallback, or over counted lexemes
        /// (which refuse budgets), the fewest tokens that spell completion().
        std::size_t shortest_completion() const
        {
            if (m_ended)
            {
                return 0;
            }
            if (!m_g->index().all_bytes() || m_g->rules()->has_units())
            {
                return fewest(completion()) + 1;  // (token_costs knows no counted lexeme)
            }
            return std::size_t(m_matcher.cheapest(m_g->token_costs())) + 1;
        }

        /// Budget-aware completion: at most max_tokens tokens in all, eos
        /// included, counted from the empty text (0: no budget). Fails if
        /// the shortest completion from the text read so far does not fit.
        void set_budget(std::size_t max_tokens)
        {
            if (max_tokens != 0)
            {
                if (m_g->rules()->has_distinct())
                {
                    // the costs the budget keeps are the grammar's without the marks: a cheapest completion may repeat an item
                    throw invalid_parameter(name() + ": a budget over a grammar with distinct items (uniqueItems over "
                                                     "strings, integers or objects; minProperties over keys a schema does not list) is not supported");
                }
                if (m_g->rules()->has_units())
                {
                    // the token costs are by state; a counted lexeme's depend on its count too
                    throw invalid_parameter(name() + ": a budget over a grammar with counted lexemes (a pattern with "
                                                     "minLength/maxLength, or integers' digits, past the product limit) is not supported");
                }
                if (!m_g->index().all_bytes())
                {
                    // the budget's checks follow the completion byte by byte where they must
                    throw invalid_parameter(name() + ": a budget needs every single byte to be a token of the "
                                                     "vocabulary (byte fallback); this one lacks some");
                }
                // from the text read so far (all of it, at the start)
                const std::size_t need = m_ended ? 0 : std::size_t(m_matcher.cheapest(m_g->token_costs())) + 1;
                if (need + m_ids.size() > max_tokens)
                {
                    throw invalid_parameter(name() + ": no completion fits in " + std::to_string(max_tokens) +
                                            " tokens: the shortest takes " + std::to_string(need) +
                                            (m_ids.empty() ? std::string() : " after the " + std::to_string(m_ids.size()) + " read") +
                                            " (eos included), \"" + detail::shortened(m_matcher.completion()) + "\"");
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
            const auto found = m_g->positions(m_key, [&] { return positions_of_kernel(); });
            const bool done = m_matcher.complete();
            m_current = found;
            const token_set* out = &found->allowed;
            if (!found->roots.empty())
            {
                m_ctx_key = m_key;
                context_key(m_ctx_key);
                m_extras = m_g->contexts(m_ctx_key, [&] {
                    compiled_grammar::context_tokens c = walk_context(*found);
                    if (!c.words.empty())  // many: the mask itself kept, not or-ed at every step
                    {
                        std::vector<std::uint64_t> words = found->allowed.words();
                        for (std::size_t w = 0; w < words.size(); ++w)
                        {
                            words[w] |= c.words[w];
                        }
                        c.joined = token_set(std::move(words));
                    }
                    return c;
                });
                if (!m_extras->words.empty())
                {
                    out = &m_extras->joined;
                }
                else if (!m_extras->ids.empty() || done)
                {
                    m_scratch = found->allowed;
                    for (const token_id t : m_extras->ids)
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
                    m_scratch = *out;
                    out = &m_scratch;
                }
                for (const token_id e : vocab().eos())
                {
                    m_scratch.insert(e);
                }
            }
            if (!m_g->distinct_tokens().empty())
            {
                out = &without_repeats(*out, in_distinct_array() ? m_g->distinct_tokens() : m_g->distinct_opening_tokens());
                out = &without_dead_ends(*out);
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
                                            ") before the text is complete: \"" + detail::shortened(text(), true) + "\"");
                }
                m_starts.push_back(m_matcher.position());
                m_ids.push_back(id);
                m_ended = true;
                return;
            }
            m_starts.reserve(m_starts.size() + 1);
            m_ids.reserve(m_ids.size() + 1);
            const std::size_t before = m_matcher.position();
            rewind undo{m_matcher, before};
            const std::string& b = v.bytes(id);
            if (m_matcher.feed(b) != b.size())
            {
                throw invalid_parameter(name() + ": token " + std::to_string(id) + " (\"" + detail::shortened(b) +
                                        "\") does not continue the text \"" + detail::shortened(text(), true) + "\"");
            }
            // under a budget, as the mask: a completion and eos must fit in the tokens after it
            if (m_budget != 0 && (left() < 2 || m_matcher.cheapest(m_g->token_costs()) > left() - 2))
            {
                throw invalid_parameter(name() + ": token " + std::to_string(id) + " (\"" + detail::shortened(b) +
                                        "\") leaves no completion within the budget (" + std::to_string(left()) +
                                        " tokens left, eos included)");
            }
            undo.keep();
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

        /// Whether the text may be inside an array of a grammar::distinct
        /// mark (or begin one now): up the chart from the current set's
        /// items, through rules such an array reads, an item of the array's
        /// own rule (each set and rule looked at once; past max_looked, yes).
        bool in_distinct_array() const
        {
            const compiled_grammar& g = *m_g;
            const auto& a = *m_matcher.shared_rules();
            std::vector<std::pair<std::uint32_t, std::uint32_t>> todo, seen;  // (set, rule)
            const auto k = std::uint32_t(m_matcher.position());
            for (const earley_item* x = m_matcher.begin(); x != m_matcher.end(); ++x)
            {
                const std::uint32_t r = a.states[x->state].rule;
                if (g.in_distinct(r))
                {
                    todo.emplace_back(x->origin, r);
                }
            }
            while (!todo.empty())
            {
                const auto [set, rule] = todo.back();
                todo.pop_back();
                if (a.rules[rule].distinct_array)
                {
                    return true;
                }
                if (matcher::is_context(set) || set >= k ||
                    std::find(seen.begin(), seen.end(), std::make_pair(set, rule)) != seen.end())
                {
                    continue;
                }
                if (seen.size() == max_looked)
                {
                    return true;
                }
                seen.emplace_back(set, rule);
                // the items of set `set` that wait for `rule`: their rules, begun at their origins
                for (const earley_item* z = m_matcher.set_begin(set); z != m_matcher.set_end(set); ++z)
                {
                    const auto& zs = a.states[z->state];
                    for (std::uint32_t e = zs.edges_begin; e < zs.edges_end; ++e)
                    {
                        if (a.edges[e].rule == rule && g.in_distinct(zs.rule))
                        {
                            todo.emplace_back(z->origin, zs.rule);
                            break;
                        }
                    }
                }
            }
            return false;
        }
        static constexpr std::size_t max_looked = 256;
        /// The mask less the tokens that end a distinct item equal to an
        /// earlier one of its array: the cached masks are the grammar's
        /// without the marks (their walks do not check them); the tokens of
        /// `suspects` (compiled_grammar::distinct_tokens inside an array,
        /// distinct_opening_tokens outside) read again through the real
        /// chart, which checks.
        const token_set& without_repeats(const token_set& in, const std::vector<token_id>& suspects)
        {
            std::vector<std::uint64_t> words = in.words();
            const vocabulary& v = vocab();
            const std::size_t before = m_matcher.position();
            rewind undo{m_matcher, before};
            bool dropped = false;
            for (const token_id t : suspects)
            {
                if (!in.contains(t))
                {
                    continue;
                }
                const std::string& b = v.bytes(t);
                const bool reads = m_matcher.feed(b) == b.size();
                m_matcher.pop(m_matcher.position() - before);
                if (!reads)
                {
                    words[std::size_t(t) / 64] &= ~(std::uint64_t(1) << (std::size_t(t) % 64));
                    dropped = true;
                }
            }
            if (!dropped)
            {
                return in;
            }
            m_scratch = token_set(std::move(words));
            return m_scratch;
        }

        /// The mask less the tokens after which a distinct item can only
        /// become an earlier item of its array (the matcher's check B):
        /// where it may (matcher::distinct_rests), the tokens that keep a
        /// string item on an earlier one's path (a prefix of its rest, spelt
        /// raw) or hold a backslash are read again through the real chart;
        /// every token where an escape is begun; in a closed object, every
        /// token with a quote or a backslash. (Tokens that end an item:
        /// without_repeats.)
        const token_set& without_dead_ends(const token_set& in)
        {
            if (!m_matcher.distinct_rests(m_rests, m_unfinished, m_quoted))
            {
                return in;
            }
            std::vector<token_id> suspects;
            if (m_unfinished)
            {
                const auto& words = in.words();
                for (std::size_t w = 0; w < words.size(); ++w)
                {
                    detail::for_each_bit(words[w], w * 64, [&](std::size_t t) { suspects.push_back(token_id(t)); });
                }
            }
            else
            {
                suspects = m_g->escape_tokens();
                if (m_quoted)
                {
                    suspects.insert(suspects.end(), m_g->quote_tokens().begin(), m_g->quote_tokens().end());
                }
                const vocabulary_index& index = m_g->index();
                for (const std::string& r : m_rests)
                {
                    std::uint32_t node = vocabulary_index::none;
                    for (const char c : r)
                    {
                        const std::int32_t next = index.child(node, static_cast<unsigned char>(c));
                        if (next < 0)
                        {
                            break;
                        }
                        node = std::uint32_t(next);
                        index.for_each_token(node, [&](token_id t) { suspects.push_back(t); });
                    }
                }
                std::sort(suspects.begin(), suspects.end());
                suspects.erase(std::unique(suspects.begin(), suspects.end()), suspects.end());
            }
            return without_repeats(in, suspects);
        }

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
            else if (r.units)
            {
                v[1] = x.count;  // (whether a state may end depends on its count exactly: a pattern's parity)
            }
            key.append(reinterpret_cast<const char*>(v.data()), sizeof v);
        }

        /// The first level's key: the kernel's items without their origins,
        /// sorted and without repeats (each distinct one a group; m_group[i]
        /// is kernel item i's, m_rep[g] the first item of group g).
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
            std::vector<std::string> sorted = parts;
            std::sort(sorted.begin(), sorted.end());
            sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
            if (sorted.size() >= matcher::max_groups)
            {
                throw invalid_parameter(name() + ": " + std::to_string(sorted.size()) +
                                        " distinct items at one position, more than the " +
                                        std::to_string(matcher::max_groups - 1) +
                                        " a mask can track (a grammar this ambiguous is beyond the matcher)");
            }
            m_group.assign(m_kernel.size(), 0);
            m_rep.assign(sorted.size(), ~std::uint32_t(0));
            for (std::size_t i = 0; i < m_kernel.size(); ++i)
            {
                const auto g = std::uint32_t(std::lower_bound(sorted.begin(), sorted.end(), parts[i]) - sorted.begin());
                m_group[i] = g;
                if (m_rep[g] == ~std::uint32_t(0))
                {
                    m_rep[g] = std::uint32_t(i);
                }
            }
            key.clear();
            for (const auto& p : sorted)
            {
                key += p;
            }
        }

        /// The second level's key: the chart's stack above the kernel, as a
        /// graph. Its nodes are (set, rule) pairs, numbered as they are found,
        /// breadth first from the kernel; a node's record lists the items of
        /// that set waiting for that rule (their state after it, counts
        /// clamped) and the node each returns to (or the text's end, or the
        /// context). Then equal keys mean equal labelled graphs, so equal
        /// futures. Also notes whether every count in it is done with its
        /// minimum (m_ctx_count_free: budgets may cache relative costs).
        void context_key(std::string& key)
        {
            const auto& a = *m_matcher.shared_rules();
            const auto put32 = [](std::string& out, std::uint32_t v) {
                out.append(reinterpret_cast<const char*>(&v), sizeof v);
            };
            std::unordered_map<std::uint64_t, std::uint32_t> ids;  // (set, rule) -> node number
            std::vector<std::uint64_t> nodes;
            const auto node_of = [&](std::uint32_t set, std::uint32_t rule) -> std::uint32_t {
                const std::uint64_t k = std::uint64_t(set) << 32 | rule;
                const auto it = ids.find(k);
                if (it != ids.end())
                {
                    return it->second;
                }
                const auto n = std::uint32_t(nodes.size());
                ids.emplace(k, n);
                nodes.push_back(k);
                return n;
            };
            bool count_free = true;
            const auto note = [&](const earley_item& x) {
                const auto& r = a.rules[a.states[x.state].rule];
                count_free = count_free && !((r.counted || r.units) && x.count < r.min);
            };
            constexpr std::uint32_t none = ~std::uint32_t(0);
            std::vector<std::string> lines;
            for (const auto& x : m_kernel)
            {
                note(x);
                std::string line;
                put_item(line, x);
                put32(line, matcher::is_context(x.origin) ? none : node_of(x.origin, a.states[x.state].rule));
                lines.push_back(std::move(line));
            }
            std::sort(lines.begin(), lines.end());
            lines.erase(std::unique(lines.begin(), lines.end()), lines.end());
            std::string records;
            for (std::size_t n = 0; n < nodes.size(); ++n)  // grows as parents are found
            {
                const auto set = std::uint32_t(nodes[n] >> 32), rule = std::uint32_t(nodes[n]);
                std::string entries;
                std::uint32_t count = 0;
                for (const earley_item* y = m_matcher.set_begin(set); y != m_matcher.set_end(set); ++y)
                {
                    if (!m_matcher.can_read(*y))
                    {
                        continue;
                    }
                    const auto& ys = a.states[y->state];
                    for (std::uint32_t e = ys.edges_begin; e < ys.edges_end; ++e)
                    {
                        if (a.edges[e].rule != rule)
                        {
                            continue;
                        }
                        const earley_item t{a.edges[e].target, y->origin, y->count};
                        note(t);
                        put_item(entries, t);
                        put32(entries, matcher::is_context(y->origin) ? none : node_of(y->origin, ys.rule));
                        ++count;
                    }
                }
                records += char(set == 0 && rule == a.root);  // the text may end here
                put32(records, count);
                records += entries;
            }
            m_ctx_count_free = count_free;
            std::string out;
            put32(out, std::uint32_t(key.size()));
            out += key;
            put32(out, std::uint32_t(lines.size()));
            for (const auto& l : lines)
            {
                out += l;
            }
            put32(out, std::uint32_t(nodes.size()));
            out += records;
            key = std::move(out);
        }

        /// The kernel's items, one per group.
        std::vector<earley_item> kernel_reps() const
        {
            std::vector<earley_item> reps;
            for (const std::uint32_t i : m_rep)
            {
                reps.push_back(m_kernel[i]);
            }
            return reps;
        }
        /// A matcher from the kernel's positions alone: one item per group.
        matcher local_chart() const { return local_chart(kernel_reps()); }
        matcher local_chart(const std::vector<earley_item>& reps) const
        {
            std::vector<std::uint32_t> groups(reps.size());
            std::iota(groups.begin(), groups.end(), 0u);
            matcher m(m_matcher.shared_rules(), reps, groups);
            m.check_distinct(false);  // (its walks repeat() and are cached by positions: the grammar without the marks)
            return m;
        }

        /// Whether the set {x} is x alone once closed: no rule edge to
        /// predict, and nothing to complete (inside a string, a name) or
        /// what completes is a kernel item, whose end only pops (a string
        /// of maxLength that may end here).
        static bool plain(const grammar_automaton& a, const earley_item& x) noexcept
        {
            const auto& st = a.states[x.state];
            if (st.edges_begin != st.edges_end)
            {
                return false;
            }
            // a kernel item that may only end (its iterations all done) is not:
            // the fast path holds readable items, so stepping one never asks
            return matcher::is_context(x.origin) ? matcher::can_read(a, x) : !matcher::completes(a, x);
        }
        /// The one item after x reads b, when the set it makes is that item
        /// alone and plain (then true, and y is it); false otherwise (dead,
        /// or a set the chart must close).
        static bool plain_step(const grammar_automaton& a, const earley_item& x, unsigned char b, earley_item& y,
                               bool& dead) noexcept
        {
            const std::int32_t t = a.next(x.state, b);
            dead = t < 0;
            if (dead)
            {
                return false;
            }
            y = {std::uint32_t(t), x.origin, x.count};
            if (!a.counts(x.state, y.state, y.count))
            {
                dead = true;
                return false;
            }
            const auto& st = a.states[y.state];
            const auto& r = a.rules[st.rule];
            if (r.counted && st.accepting)
            {
                if (st.reads)
                {
                    return false;  // two items: the iteration goes on, the next begins
                }
                if (r.max != grammar::unbounded && y.count >= r.max)
                {
                    dead = true;
                    return false;
                }
                y.state = r.start;
                y.count = r.max == grammar::unbounded ? std::min<std::uint32_t>(y.count + 1, std::uint32_t(r.min))
                                                      : y.count + 1;
            }
            return plain(a, y);
        }

        /// Classes of the chart's sets a walk meets, by what decides their
        /// future: their items, with origin `here` for those begun in the set
        /// itself, and the set that the latest other origin names (its
        /// generation: the chart below it is then the same too). Two sets of a
        /// class read every text alike. A class is made where a byte leads a
        /// set to a set equal to it (a name's next letter, a number's next
        /// digit); a set met later with its key joins it (the same name begun
        /// by another letter). Per class and byte the walk notes where the byte
        /// leads (dead, the class again, another), and reads a byte that leads
        /// back without a step.
        struct set_classes
        {
            static constexpr std::uint32_t here = matcher::context - matcher::max_groups;
            static constexpr std::int32_t none = -1;
            static constexpr std::uint8_t unknown = 0, dead = 1, same = 2, other = 3;  // what a byte leads to
            /// A set's key: a hash of its items (in any order) and its `below`.
            struct key
            {
                std::uint64_t hash;
                std::uint32_t below;
                std::uint32_t size;
                bool operator==(const key& o) const noexcept
                {
                    return hash == o.hash && below == o.below && size == o.size;
                }
            };
            struct entry
            {
                key k;
                std::int32_t chain;  // the next class of the same hash
                std::vector<earley_item> items;  // sorted, origin `here` for the set's own
                std::array<std::uint8_t, 256> next{};
                std::int32_t runs = unresolved;  // compiled_grammar::runs read through it, or none
            };
            static constexpr std::int32_t unresolved = -2;
            std::vector<entry> classes;
            std::unordered_map<std::uint64_t, std::int32_t> by_hash;
            std::vector<earley_item> scratch;
            const std::vector<std::uint8_t>* looping = nullptr;  // compiled_grammar::looping()
            static constexpr std::size_t max_classes = 1 << 12;

            /// Whether the chart's current set may be in a class: some item's
            /// state may be itself again (a class is made of a set and its child).
            bool may_loop(const matcher& m) const noexcept
            {
                for (const earley_item* x = m.begin(); x != m.end(); ++x)
                {
                    if ((*looping)[x->state] != 0)
                    {
                        return true;
                    }
                }
                return false;
            }

            static std::uint64_t mix(std::uint64_t h) noexcept
            {
                h ^= h >> 31;
                h *= 0x7FB5D329728EA185ull;
                h ^= h >> 27;
                h *= 0x81DADEF4BC2DD44Dull;
                return h ^ (h >> 33);
            }
            /// The key of the chart's current set, in a walk begun at position
            /// `base` (generation[k]: the set at depth k).
            static key key_of(const matcher& m, std::size_t base, const std::vector<std::uint32_t>& generation) noexcept
            {
                const auto self = std::uint32_t(m.position());
                std::uint32_t latest = 0;
                bool any = false;
                std::uint64_t sum = 0;
                for (const earley_item* x = m.begin(); x != m.end(); ++x)
                {
                    std::uint32_t origin = x->origin;
                    if (origin == self)
                    {
                        origin = here;
                    }
                    else if (!matcher::is_context(origin) && origin >= base)
                    {
                        latest = any ? std::max(latest, origin) : origin;
                        any = true;
                    }
                // (a sum of products: cheap, in any order; equal keys are then compared item by item)
                sum += std::uint64_t(x->state) * 0x9E3779B97F4A7C15ull + std::uint64_t(origin) * 0xC2B2AE3D27D4EB4Full +
                       std::uint64_t(x->count) * 0x165667B19E3779F9ull;
                }
                const std::uint32_t below = any ? generation[latest - base] : ~std::uint32_t(0);
                return {mix(sum ^ mix(below)), below, std::uint32_t(m.items())};
            }
            /// Set k's items, sorted, its own origin `here` (in scratch).
            const std::vector<earley_item>& canonical(const matcher& m, std::size_t k)
            {
                const auto self = std::uint32_t(k);
                scratch.assign(m.set_begin(k), m.set_end(k));
                for (earley_item& x : scratch)
                {
                    x.origin = x.origin == self ? here : x.origin;
                }
                std::sort(scratch.begin(), scratch.end(), [](const earley_item& p, const earley_item& q) {
                    return std::tie(p.state, p.origin, p.count) < std::tie(q.state, q.origin, q.count);
                });
                return scratch;
            }
            /// The class of the current set (key k), if there is one.
            std::int32_t find(const matcher& m, const key& k)
            {
                const auto found = by_hash.find(k.hash);
                if (found == by_hash.end())
                {
                    return none;
                }
                bool sorted = false;
                for (std::int32_t c = found->second; c != none; c = classes[std::size_t(c)].chain)
                {
                    const entry& e = classes[std::size_t(c)];
                    if (!(e.k == k))
                    {
                        continue;
                    }
                    if (!sorted)
                    {
                        canonical(m, m.position());
                        sorted = true;
                    }
                    if (e.items == scratch)
                    {
                        return c;
                    }
                }
                return none;
            }
            /// The class of the chart's current set (cls, its key k_cls), read by
            /// byte b from the set before it (of class k or none; `parent` its
            /// class, -2 where not computed, k_parent its key), in a walk begun
            /// at `base`: notes where b leads from class k, or makes a class
            /// where it leads a set to itself. Whether the set has a class.
            bool classify(const matcher& m, std::size_t base, const std::vector<std::uint32_t>& generation,
                          unsigned char b, std::int32_t k, std::int32_t& cls, key& k_cls, std::int32_t& parent,
                          const key& k_parent)
            {
                if (!may_loop(m))
                {
                    cls = none;
                    k_cls = {};  // (no set's: every set has items)
                    if (k >= 0)
                    {
                        classes[std::size_t(k)].next[b] = other;
                    }
                    return false;
                }
                k_cls = key_of(m, base, generation);
                cls = find(m, k_cls);
                std::int32_t c = none;
                if (k >= 0)
                {
                    classes[std::size_t(k)].next[b] = cls == k ? same : other;
                }
                else if (cls == none && parent >= none && k_cls == k_parent && again(m, m.position() - 1, k_cls, c))
                {
                    parent = cls = c;  // the set again: a class for both
                    classes[std::size_t(c)].next[b] = same;
                }
                return cls >= 0;
            }
            /// Whether the current set is set `parent` again (keys equal: then
            /// a class for both, in `c`; none past max_classes).
            bool again(const matcher& m, std::size_t parent, const key& k, std::int32_t& c)
            {
                canonical(m, parent);
                std::vector<earley_item> first = scratch;
                if (canonical(m, m.position()) != first || classes.size() >= max_classes)
                {
                    return false;
                }
                const auto found = by_hash.find(k.hash);
                classes.push_back({k, found == by_hash.end() ? none : found->second, scratch, {}});
                c = std::int32_t(classes.size() - 1);
                by_hash[k.hash] = c;
                return true;
            }
        };

        /// Walks the trie through `local`: on_token(node, popped before its
        /// last byte, items, generation, set) where it lives (generation[k]: a
        /// number for the chart's set at depth k, new each time it is built;
        /// set: the generation of the set the items are, or no_set); returns
        /// the subtrees where it dies after a kernel rule finished (decided by
        /// the context). While a set is one plain item, its children are a
        /// table look-up each and the chart is filled in only when the walk
        /// reaches something else. A byte that leads a set to its own class
        /// (set_classes: a name's next letter) is not stepped: the node is the
        /// set again ("virtual"), its items the chart's top, until a byte of
        /// another class makes the chart repeat() the set down to the node.
        ///
        /// With `starts`, only the subtrees below those nodes are walked (the
        /// walk resumed where a region left: walk_positions), each from the
        /// plain item given for the set before the node's byte, or (chart)
        /// from the chart stepped along the bytes above it.
        struct resume
        {
            std::uint32_t node;
            earley_item before;
            bool chart;
        };
        /// on_token's last argument: the generation of the chart's set that
        /// the items are (equal for every node that reads the same set), or
        /// this for a plain item outside the chart.
        static constexpr std::uint32_t no_set = ~std::uint32_t(0);
        /// With `on_run` (not no_runs), on_token only marks tokens, and a run
        /// of a class whose bytes hold a class_runs index (the bytes of a
        /// looping state's own, every one leading the set to itself) is read
        /// by its tokens: on_run(items, set) gives the bitset to mark them in
        /// (nullptr: none of them), then the nodes where a byte leaves the
        /// index's class are read one by one.
        struct no_runs
        {
        };
        template <class OnToken, class OnRun = no_runs>
        std::vector<std::uint32_t> walk_local(matcher& local, OnToken&& on_token,
                                              const std::vector<resume>* starts = nullptr, OnRun&& on_run = {}) const
        {
            const vocabulary_index& ix = m_g->index();
            const grammar_automaton& a = local.rules();
            std::vector<std::uint32_t> roots;
            const std::size_t depths = ix.longest() + 2;
            struct depth
            {
                std::uint8_t popped = 0;  // a kernel rule finished at depth 1..d
                std::uint8_t virt = 0;    // depth d > real is the chart's top set again (its class's)
                std::int32_t cls = -2;    // the class of the chart's set at depth d (-2: not computed)
                set_classes::key key{};   // its key, where cls is computed
            };
            std::vector<depth> at(depths);
            std::vector<earley_item> single(depths);      // depth d > real, not virtual: its one plain item
            std::string path(depths, '\0');                // the bytes read, by depth - 1
            std::size_t real = 0;                          // the chart holds depths 0..real
            std::vector<std::uint32_t> generation(depths, 0);  // of the chart's set at each depth
            std::uint32_t sets_made = 0;
            constexpr std::int32_t unclassified = -2;
            set_classes classes;
            classes.looping = &m_g->looping();
            const std::size_t base = local.position();
            std::size_t stepped = 0, repeated = 0, looked_up = 0;
            // steps since a set last found a class: past max_drought the walk stops
            // looking (a string's text counts its bytes: no set is one seen before)
            std::size_t drought = 0;
            constexpr std::size_t max_drought = 2048;
            // node i at depth d dies: the subtree after it is skipped, and is the
            // context's to walk if a kernel rule finished above it
            const auto dies = [&](std::uint32_t i, std::size_t d) {
                if (at[d - 1].popped)
                {
                    roots.push_back(i);
                }
                return ix.end(i);
            };
            std::size_t indexed = 0;
            // class k's class_runs, every byte of it resolved as leading back
            // (stepped from the chart's top, a set of class k), or nullptr
            const auto runs_of = [&](std::int32_t k) -> const class_runs* {
                if (classes.classes[std::size_t(k)].runs == set_classes::unresolved)
                {
                    classes.classes[std::size_t(k)].runs = set_classes::none;
                    for (std::size_t n = 0; n < classes.classes[std::size_t(k)].items.size(); ++n)
                    {
                        const std::int32_t r = m_g->run_of(classes.classes[std::size_t(k)].items[n].state);
                        if (r < 0)
                        {
                            continue;
                        }
                        const std::bitset<256>& bytes = m_g->runs(r).first;
                        bool all = true;
                        for (unsigned b = 0; b < 256 && all; ++b)
                        {
                            if (!bytes[b])
                            {
                                continue;
                            }
                            auto& next = classes.classes[std::size_t(k)].next;
                            if (next[b] == set_classes::unknown)
                            {
                                ++stepped;
                                if (!local.step(static_cast<unsigned char>(b)))
                                {
                                    next[b] = set_classes::dead;
                                }
                                else
                                {
                                    generation[real + 1] = ++sets_made;
                                    std::int32_t cls = unclassified, parent = k;
                                    set_classes::key key{};
                                    classes.classify(local, base, generation, static_cast<unsigned char>(b), k, cls, key,
                                                     parent, at[real].key);
                                    local.pop(1);
                                }
                            }
                            all = classes.classes[std::size_t(k)].next[b] == set_classes::same;
                        }
                        if (all)
                        {
                            classes.classes[std::size_t(k)].runs = r;
                            break;
                        }
                    }
                }
                const std::int32_t r = classes.classes[std::size_t(k)].runs;
                return r >= 0 ? m_g->runs(r).second.get() : nullptr;
            };
            const auto walk = [&](const auto& self, std::uint32_t first, std::uint32_t last) -> void {
            for (std::uint32_t i = first; i < last;)
            {
                const std::size_t d = ix.depth(i);
                const unsigned char b = ix.byte(i);
                path[d - 1] = char(b);
                if (real > d - 1)
                {
                    local.pop(real - (d - 1));
                    real = d - 1;
                }
                const earley_item* one = nullptr;
                if (d - 1 > real && !at[d - 1].virt)
                {
                    one = &single[d - 1];
                }
                else if (d - 1 == real && local.items() == 1 && plain(a, *local.begin()))
                {
                    one = local.begin();
                }
                if (one != nullptr)
                {
                    earley_item y{};
                    bool dead = false;
                    const bool easy = plain_step(a, *one, b, y, dead);
                    if (dead)
                    {
                        i = dies(i, d);
                        continue;
                    }
                    if (easy)
                    {
                        ++looked_up;
                        single[d] = y;
                        at[d].virt = 0;
                        at[d].popped = std::uint8_t(at[d - 1].popped | std::uint8_t(matcher::pops(a, y)));
                        on_token(i, at[d - 1].popped != 0, &single[d], &single[d] + 1, generation, no_set);
                        ++i;
                        continue;
                    }
                    for (std::size_t k = real + 1; k < d; ++k)  // fill in the chart up to the parent
                    {
                        local.step(static_cast<unsigned char>(path[k - 1]));
                        generation[k] = ++sets_made;
                        at[k].cls = unclassified;
                    }
                    real = d - 1;
                }
                // the parent's set: the chart's top, or (virtual) a set of its class
                if (at[real].cls == unclassified && drought < max_drought)
                {
                    at[real].cls = set_classes::none;
                    at[real].key = {};  // (no set's: every set has items)
                    if (classes.may_loop(local))
                    {
                        at[real].key = set_classes::key_of(local, base, generation);
                        at[real].cls = classes.find(local, at[real].key);
                    }
                }
                const std::int32_t k = at[real].cls >= 0 ? at[real].cls : set_classes::none;
                const std::uint8_t seen = k >= 0 ? classes.classes[std::size_t(k)].next[b] : set_classes::unknown;
                if (seen == set_classes::dead)
                {
                    i = dies(i, d);
                    continue;
                }
                if (seen == set_classes::same)
                {
                    // a run of the class: the nodes below the parent read as the set
                    // again while their bytes lead back (a name's letters), in a loop
                    // of their own; a byte that leads elsewhere hands its node back
                    // to this one, its ancestors in the run virtual
                    const std::uint8_t above = at[d - 1].popped;  // before a depth-d node's byte
                    const std::uint8_t below = std::uint8_t(above | std::uint8_t(local.popped()));  // deeper
                    const std::uint32_t set = generation[real];
                    const std::uint32_t stop = d == 1 ? last : std::min(last, ix.end(ix.parent(i)));
                    // ancestors of node e below depth d: the set again, for the walk
                    const auto hand_back = [&](std::uint32_t e) {
                        for (std::uint32_t u = ix.parent(e); u != vocabulary_index::none && ix.depth(u) >= d; u = ix.parent(u))
                        {
                            const std::size_t du = ix.depth(u);
                            at[du].virt = 1;
                            at[du].popped = below;
                            path[du - 1] = char(ix.byte(u));
                        }
                    };
                    if constexpr (!std::is_same<std::decay_t<OnRun>, no_runs>::value)
                    {
                        const class_runs* r = d < class_runs::deepest ? runs_of(k) : nullptr;
                        if (r != nullptr)
                        {
                            // the run's tokens at once; then where a byte leaves the
                            // index's class: dead, a byte of the class's all the same
                            // (its tokens, and a run below it), or the walk's, its
                            // subtree walked from the chart as the run found it
                            ++indexed;
                            std::uint64_t* words = on_run(local.begin(), local.end(), set);
                            const std::size_t real0 = real;
                            const auto run = [&](const auto& again, std::uint32_t from, std::uint32_t to, std::size_t depth) -> void {
                                if (words != nullptr)
                                {
                                    ix.mark_run(*r, from, to, depth, words);
                                }
                                for (std::uint32_t e = r->next_out[from]; e < to; e = r->next_out[ix.end(e)])
                                {
                                    const std::size_t de = ix.depth(e);
                                    const std::uint8_t leads = classes.classes[std::size_t(k)].next[ix.byte(e)];
                                    if (leads == set_classes::same && de < class_runs::deepest)  // (deeper: the walk, whose runs start above it)
                                    {
                                        if (words != nullptr)
                                        {
                                            ix.mark_tokens(e, words);
                                        }
                                        again(again, e + 1, ix.end(e), de + 1);
                                    }
                                    else if (leads == set_classes::dead)
                                    {
                                        if ((de == d ? above : below) != 0)
                                        {
                                            roots.push_back(e);
                                        }
                                    }
                                    else
                                    {
                                        if (real > real0)
                                        {
                                            local.pop(real - real0);
                                            real = real0;
                                        }
                                        hand_back(e);
                                        self(self, e, ix.end(e));
                                    }
                                }
                            };
                            run(run, i, stop, d);
                            i = stop;
                            continue;
                        }
                    }
                    const auto& next = classes.classes[std::size_t(k)].next;  // (taken here: runs_of may step and classify)
                    std::uint32_t j = i;
                    std::size_t run = 0;
                    while (j < stop)
                    {
                        const std::uint8_t to = next[ix.byte(j)];
                        const bool popped = (above == below ? above : ix.depth(j) == d ? above : below) != 0;
                        if (to == set_classes::same)
                        {
                            on_token(j, popped, local.begin(), local.end(), generation, set);
                            ++j;
                            ++run;
                        }
                        else if (to == set_classes::dead)
                        {
                            if (popped)
                            {
                                roots.push_back(j);
                            }
                            j = ix.end(j);
                        }
                        else
                        {
                            hand_back(j);
                            break;
                        }
                    }
                    repeated += run;
                    i = j;
                    continue;
                }
                for (std::size_t j = real + 1; j < d; ++j)  // a virtual parent: its sets in the chart
                {
                    local.repeat();
                    generation[j] = ++sets_made;
                    at[j].cls = k;
                    at[j].key = at[real].key;
                }
                real = d - 1;
                ++stepped;
                if (!local.step(b))
                {
                    if (k >= 0)
                    {
                        classes.classes[std::size_t(k)].next[b] = set_classes::dead;
                    }
                    i = dies(i, d);
                    continue;
                }
                real = d;
                generation[d] = ++sets_made;
                at[d].cls = unclassified;
                if (ix.end(i) > i + 1 && drought < max_drought)  // (a leaf's class would not be used)
                {
                    drought = classes.classify(local, base, generation, b, k, at[d].cls, at[d].key, at[d - 1].cls, at[d - 1].key) ? 0 : drought + 1;
                }
                at[d].popped = std::uint8_t(at[d - 1].popped | std::uint8_t(local.popped()));
                on_token(i, at[d - 1].popped != 0, local.begin(), local.end(), generation, generation[d]);
                ++i;
            }
            };
            if (starts == nullptr)
            {
                walk(walk, 0, std::uint32_t(ix.nodes()));
                m_g->note_walk(stepped, repeated, looked_up, indexed);
                return roots;
            }
            std::string want(depths, '\0');
            for (const resume& r : *starts)
            {
                const std::size_t d = ix.depth(r.node);
                std::uint32_t up = ix.parent(r.node);
                for (std::size_t k = d - 1; k >= 1; --k, up = ix.parent(up))
                {
                    want[k - 1] = char(ix.byte(up));
                }
                std::size_t keep = 0;  // the chart's sets on the node's way down stay (starts in preorder share them)
                while (keep < real && keep + 1 < d && path[keep] == want[keep])
                {
                    ++keep;
                }
                local.pop(real - keep);
                real = keep;
                std::copy(want.begin(), want.begin() + std::ptrdiff_t(d - 1), path.begin());
                bool live = true;
                if (r.chart)
                {
                    for (std::size_t k = real + 1; k < d && live; ++k)
                    {
                        live = local.step(static_cast<unsigned char>(path[k - 1]));
                        if (live)
                        {
                            real = k;
                            generation[k] = ++sets_made;
                            at[k].cls = unclassified;
                            at[k].popped = std::uint8_t(at[k - 1].popped | std::uint8_t(local.popped()));
                        }
                    }
                }
                else if (d > 1)
                {
                    single[d - 1] = r.before;  // (at depth 1, the set itself: `before` is its item)
                    at[d - 1].virt = 0;
                    at[d - 1].popped = 0;         // nothing ends inside a region (an earlier exit's may have)
                }
                if (live)  // (a chart that dies above the node: the region said it would not)
                {
                    walk(walk, r.node, ix.end(r.node));
                }
            }
            m_g->note_walk(stepped, repeated, looked_up, indexed);
            return roots;
        }

        /// Walks the positions of single items ahead (compiled_grammar's
        /// prime): each state an item may be in as a kernel's (a byte's or a
        /// rule's target, the root's start) in a rule that counts nothing,
        /// and each counted rule's start after one iteration short of its
        /// minimum; breadth first from the root's start, at most `most` of them.
        void prime_items(std::size_t most) const
        {
            const auto& a = *m_matcher.shared_rules();
            std::vector<std::uint8_t> target(a.states.size(), 0), seen(a.states.size(), 0);
            std::vector<std::uint32_t> order{a.rules[a.root].start};
            target[order[0]] = seen[order[0]] = 1;
            const auto visit = [&](std::uint32_t t, bool kernel) {
                target[t] = std::uint8_t(target[t] | std::uint8_t(kernel));
                if (!seen[t])
                {
                    seen[t] = 1;
                    order.push_back(t);
                }
            };
            for (std::size_t k = 0; k < order.size(); ++k)
            {
                const std::uint32_t s = order[k];
                for (std::uint32_t c = 0; c < a.classes; ++c)
                {
                    const std::int32_t t = a.table[std::size_t(s) * a.classes + c];
                    if (t >= 0)
                    {
                        visit(std::uint32_t(t), true);
                    }
                }
                for (std::uint32_t e = a.states[s].edges_begin; e < a.states[s].edges_end; ++e)
                {
                    visit(a.rules[a.edges[e].rule].start, false);
                    visit(a.edges[e].target, true);
                }
            }
            std::size_t primed = 0;
            for (std::size_t k = 0; k < order.size() && primed < most; ++k)
            {
                const std::uint32_t s = order[k];
                const auto& r = a.rules[a.states[s].rule];
                earley_item x{s, matcher::context, 0};
                if (r.counted)
                {
                    // one iteration read, short of the minimum (so the item is a
                    // kernel alone): its walk is the body's region, which every
                    // later count of every such rule over the vocabulary shares
                    if (s != r.start || r.min < 2 || r.max < 2)
                    {
                        continue;
                    }
                    x.count = 1;
                }
                else if (!target[s])
                {
                    continue;
                }
                std::string key;
                put_item(key, x);
                m_g->positions(key, [&] { return walk_positions({x}); });
                ++primed;
            }
        }
        /// The first level's entry for the kernel. Its items read apart: a
        /// token is read without finishing a kernel rule exactly when one
        /// item reads it so, and where every item dies, the subtree is the
        /// context's if one item's rule finished above it. So the entry of
        /// several items is the union of each one's alone (allowed, and the
        /// subtrees, one inside another walked with it), each cached as a
        /// position of its own (and walked ahead at compile time: prime).
        /// Not where an item is a counted rule's: its filter of the subtrees
        /// (counted_roots) reads the kernel's other items.
        compiled_grammar::position_masks positions_of_kernel() const
        {
            const std::vector<earley_item> reps = kernel_reps();
            const auto& a = *m_matcher.shared_rules();
            const bool apart = reps.size() > 1 && std::none_of(reps.begin(), reps.end(), [&](const earley_item& x) {
                return a.rules[a.states[x.state].rule].counted;
            });
            if (!apart)
            {
                return walk_positions(reps);
            }
            const vocabulary_index& ix = m_g->index();
            compiled_grammar::position_masks out;
            std::vector<std::uint64_t> words((vocab().size() + 63) / 64, 0);
            std::vector<std::uint32_t> roots;
            for (const earley_item& x : reps)
            {
                std::string k;
                put_item(k, x);
                const auto one = m_g->positions(k, [&] { return walk_positions({x}); });
                const auto& w = one->allowed.words();
                for (std::size_t i = 0; i < words.size(); ++i)
                {
                    words[i] |= w[i];
                }
                roots.insert(roots.end(), one->roots.begin(), one->roots.end());
            }
            std::sort(roots.begin(), roots.end());
            for (const std::uint32_t r : roots)  // a root inside another's subtree is walked with it
            {
                if (out.roots.empty() || r >= ix.end(out.roots.back()))
                {
                    out.roots.push_back(r);
                }
            }
            out.allowed = token_set(std::move(words));
            return out;
        }
        /// The first level: the trie walked from the kernel's items `reps`
        /// alone. When the position is one item in a wide region (region_of),
        /// its tokens inside come from the index's walk of the region (shared
        /// by every grammar over the vocabulary) and only the subtrees where
        /// the region is left are walked here.
        compiled_grammar::position_masks walk_positions(const std::vector<earley_item>& reps) const
        {
            const vocabulary_index& ix = m_g->index();
            compiled_grammar::position_masks out;
            std::vector<std::uint64_t> words((vocab().size() + 63) / 64, 0);
            const grammar_automaton& a = *m_matcher.shared_rules();
            if (reps.size() == 1 && m_g->units_apart(a.states[reps[0].state].rule))
            {
                // inside a counted lexeme: its walk from the state, filtered by the count
                const earley_item& x = reps[0];
                const auto& r = a.rules[a.states[x.state].rule];
                const detail::unit_ends& u = *r.units;
                const auto w = m_g->walk_units(x.state);
                for (const auto& e : w->inside)
                {
                    const std::uint32_t c = u.plus(x.count, e.units);
                    if (c != detail::unit_ends::none && u.bytes(e.state - r.start, c) != detail::unit_ends::none)
                    {
                        ix.mark_tokens(e.node, words.data());
                    }
                }
                for (const auto& e : w->stops)
                {
                    const std::uint32_t c = u.plus(x.count, e.units);
                    if (c != detail::unit_ends::none && u.ends(e.state - r.start, c))
                    {
                        out.roots.push_back(e.node);
                    }
                }
                out.allowed = token_set(std::move(words));
                return out;
            }
            matcher local = local_chart(reps);
            const auto add = [&](std::uint32_t i, bool, const earley_item*, const earley_item*,
                                 const std::vector<std::uint32_t>&, std::uint32_t) {
                ix.mark_tokens(i, words.data());
            };
            const auto into_words = [&](const earley_item*, const earley_item*, std::uint32_t) { return words.data(); };
            region_view v;
            if (as_region(local, v))
            {
                const region_walk& w = *v.walked;
                if (!(v.frame || v.counted) || v.left >= w.most)
                {
                    words = w.inside;
                }
                else
                {
                    for (std::size_t t = 0; t < w.need.size(); ++t)
                    {
                        words[t / 64] |= std::uint64_t(w.need[t] <= v.left) << (t % 64);
                    }
                }
                out.roots = walk_local(local, add, &v.resumes, into_words);
                if (v.counted)
                {
                    const auto more = counted_roots(ix, v);  // subtrees apart from the resumed ones: all in preorder
                    out.roots.insert(out.roots.end(), more.begin(), more.end());
                    std::sort(out.roots.begin(), out.roots.end());
                }
            }
            else
            {
                out.roots = walk_local(local, add, nullptr, into_words);
            }
            out.allowed = token_set(std::move(words));
            return out;
        }

        /// A position that is a region (region_of: one plain item x; frame_of:
        /// x a counted rule's item just begun, whose iterations may number
        /// min..most): the index's walk of it, its states, and where the walk
        /// resumes below its exits (through the chart for a frame, where the
        /// tail reads: an iteration's end with the minimum done, or the first
        /// byte, where kernel items in the tail's states read too).
        struct region_view
        {
            std::shared_ptr<const region_walk> walked;
            std::vector<std::uint32_t> state_of;
            earley_item x{};
            bool frame = false, counted = false;  // counted: x a counted kernel item at an iteration's start
            std::size_t min = 0, most = 0, left = 0;  // left: iterations x may still read
            std::array<bool, 256> leaves{};           // counted: the bytes that may follow x's rule (counted_roots)
            std::vector<resume> resumes;

            /// Whether inside token t is read from x (counted: at most `left` iterations).
            bool reads(token_id t) const noexcept
            {
                const auto k = std::size_t(t);
                return (walked->inside[k / 64] >> (k % 64) & 1) != 0 && (!(frame || counted) || walked->need[k] <= left);
            }
            /// The item after inside token t, and whether x could end before its
            /// last byte (a counted kernel item whose minimum was met: a pop).
            earley_item after(token_id t, bool& popped) const noexcept
            {
                const auto k = std::size_t(t);
                earley_item y{state_of[walked->last[k]], x.origin, x.count};
                popped = false;
                if (frame || counted)
                {
                    const std::size_t ended = walked->need[k] - std::size_t(walked->last[k] != 0);
                    const std::size_t count = std::size_t(x.count) + ended;
                    y.count = std::uint32_t(most == ~std::size_t(0) ? std::min(count, min) : count);
                    const std::size_t before = ended - std::size_t(walked->last[k] == 0);  // ended before its last byte
                    popped = counted && before > 0 && x.count + before >= min;
                }
                return y;
            }
        };
        bool as_region(const matcher& local, region_view& v) const
        {
            byte_region region;
            const grammar_automaton& a = local.rules();
            if (local.items() == 1 && region_of(a, local.begin()->state, region, v.state_of))
            {
                v.x = *local.begin();
            }
            else if (counted_kernel(local, v.x, v.leaves))
            {
                v.counted = true;
                if (!counted_body(a, a.states[v.x.state].rule, v.leaves, region, v.state_of))
                {
                    return false;
                }
            }
            else if (!frame_of(local, region, v.state_of, v.x))
            {
                return false;
            }
            v.frame = !v.counted && !matcher::is_context(v.x.origin);
            if (v.frame || v.counted)
            {
                const auto& r = a.rules[a.states[v.x.state].rule];
                v.min = r.min;
                v.most = r.max == grammar::unbounded ? ~std::size_t(0) : r.max;
                v.left = v.most == ~std::size_t(0) ? v.most : v.most - v.x.count;
                if (v.counted && v.x.count < v.min)
                {
                    // the items waiting for x's rule are not in the set yet: what may
                    // follow the rule anywhere, when no iteration begins with it
                    const auto& follow = a.follow[a.states[v.x.state].rule];
                    bool apart = true;
                    for (unsigned b = 0; b < 256 && apart; ++b)
                    {
                        apart = !follow[b] || a.next(r.start, static_cast<unsigned char>(b)) < 0;
                    }
                    for (unsigned b = 0; b < 256; ++b)
                    {
                        v.leaves[b] = !apart || follow[b];
                    }
                }
            }
            v.walked = m_g->index().walk_region(region);
            for (const auto& e : v.walked->exits)
            {
                if (v.counted)
                {
                    if (e.ends == 0)  // the other kernel items read it (later it is a stop: counted_roots)
                    {
                        v.resumes.push_back({e.node, v.x, true});
                    }
                }
                else if (!v.frame)
                {
                    v.resumes.push_back({e.node, earley_item{v.state_of[e.from], v.x.origin, v.x.count}, false});
                }
                else if ((e.ends == 0 || e.ends >= v.min) && e.ends <= v.most)
                {
                    v.resumes.push_back({e.node, v.x, true});
                }
            }
            return true;
        }

        /// Whether the set is x, a counted rule's kernel item at an iteration's
        /// start that may read on (a string with maxLength read some way), and
        /// kernel items that read bytes only (the item after the string, when
        /// it may end here), whose bytes `leaves` gets: they read at the first
        /// byte only.
        static bool counted_kernel(const matcher& local, earley_item& x, std::array<bool, 256>& leaves)
        {
            const grammar_automaton& a = local.rules();
            const earley_item* found = nullptr;
            for (const earley_item* it = local.begin(); it != local.end(); ++it)
            {
                const auto& r = a.rules[a.states[it->state].rule];
                if (!matcher::is_context(it->origin))
                {
                    return false;
                }
                if (r.counted && it->state == r.start && matcher::can_read(a, *it))
                {
                    if (found != nullptr)
                    {
                        return false;
                    }
                    found = it;
                }
                else if (!in_region(a, it->state))
                {
                    return false;  // it predicts, or ends
                }
                else
                {
                    a.add_bytes(it->state, leaves);
                }
            }
            if (found == nullptr)
            {
                return false;
            }
            x = *found;
            return true;
        }
        /// The roots a counted kernel item x leaves to the context, in
        /// preorder: where a byte dies after an iteration ended with the
        /// minimum met (before x's maximum), and the nodes that end the
        /// maximum's iteration and have children (x may only end there: what
        /// follows is the context's; walking from the node itself reads its
        /// own tokens again, which x allows anyway). Once x ends, what reads
        /// on are the items waiting for its rule, moved past it, and they
        /// read only bytes in `leaves`, none of them one an iteration begins
        /// with: with x's minimum met, they are the kernel's other items
        /// (counted_body checks them); below it, what may follow the rule
        /// anywhere (automaton::follow), when none begins an iteration (else
        /// every byte). So the context can go on only where x ends right
        /// before such a byte (after an earlier end, the next byte is one x
        /// read, which they cannot): only the roots whose byte, or a child's,
        /// is in `leaves` are left (near a string's maximum, the nodes of its
        /// last character with a quote below, not the thousands of others).
        static std::vector<std::uint32_t> counted_roots(const vocabulary_index& ix, const region_view& v)
        {
            const region_walk& w = *v.walked;
            std::vector<std::uint32_t> stops, full;
            for (const auto* list : {&w.stops, &w.exits})  // (an exit after an iteration: a stop for x alone)
            {
                for (const auto& e : *list)
                {
                    if (e.ends > 0 && e.ends < v.left && v.x.count + e.ends >= v.min && v.leaves[ix.byte(e.node)])
                    {
                        stops.push_back(e.node);
                    }
                }
            }
            std::sort(stops.begin(), stops.end());
            if (v.left + 1 < w.at_begin.size())
            {
                for (std::uint32_t k = w.at_begin[v.left]; k < w.at_begin[v.left + 1]; ++k)
                {
                    const std::uint32_t n = w.at_start[k];
                    bool goes_on = false;
                    for (std::uint32_t c = n + 1; c < ix.end(n) && !goes_on; c = ix.end(c))
                    {
                        goes_on = v.leaves[ix.byte(c)];
                    }
                    if (goes_on)
                    {
                        full.push_back(n);
                    }
                }
            }
            std::vector<std::uint32_t> roots(stops.size() + full.size());
            std::merge(stops.begin(), stops.end(), full.begin(), full.end(), roots.begin());
            return roots;
        }

        /// Whether an item in state s stays the one plain item of its set
        /// whatever its origin and count: no rule to predict, nothing to
        /// complete (or only the text: the root's end when no rule reads
        /// it), not a counted rule's or a counted lexeme's.
        static bool in_region(const grammar_automaton& a, std::uint32_t s) noexcept
        {
            const auto& st = a.states[s];
            return st.edges_begin == st.edges_end && (!st.accepting || a.ends_text_only(s)) && !a.rules[st.rule].counted &&
                   !a.rules[st.rule].units;
        }
        /// The region around `start`, of states in_region (plain, reached by
        /// bytes through such states): start with its loop (a string's text,
        /// its escapes and multi-byte characters), then every loop one byte
        /// from start or from a loop taken (a string of at least one character
        /// after its opening quote: the first, then the loop of the others; a
        /// pattern's text after the ':' of `.+:.+`), not what a state on no
        /// loop leads to (the bytes after a closing quote: they would tie the
        /// text's shape to what surrounds it), numbered breadth first
        /// (state_of: the automaton's state of each); a byte to any other live
        /// state leaves it. Only when it is wide enough for walking the whole
        /// trie to be what a walk costs: at least 64 bytes stay in it from the
        /// start (free text, not a keyword); at most 4,096 states are looked at.
        static bool region_of(const grammar_automaton& a, std::uint32_t start, byte_region& region,
                              std::vector<std::uint32_t>& state_of)
        {
            constexpr std::size_t wide = 64;
            const auto staying = [&](std::int32_t t) { return t >= 0 && in_region(a, std::uint32_t(t)); };
            if (!in_region(a, start))
            {
                return false;
            }
            std::size_t from_start = 0;
            for (unsigned b = 0; b < 256; ++b)
            {
                from_start += std::size_t(staying(a.next(start, static_cast<unsigned char>(b))));
            }
            if (from_start < wide)
            {
                return false;
            }
            // the staying states reachable from start (by byte class)
            constexpr std::size_t most = 4096;
            constexpr std::uint32_t none = ~std::uint32_t(0);
            std::vector<std::uint32_t> seen{start};
            std::unordered_map<std::uint32_t, std::uint32_t> index{{start, 0}};
            std::vector<std::vector<std::uint32_t>> ahead(1);
            for (std::size_t k = 0; k < seen.size(); ++k)
            {
                for (std::uint32_t c = 0; c < a.classes; ++c)
                {
                    const std::int32_t t = a.table[std::size_t(seen[k]) * a.classes + c];
                    if (!staying(t))
                    {
                        continue;
                    }
                    const auto [it, added] = index.emplace(std::uint32_t(t), std::uint32_t(seen.size()));
                    if (added)
                    {
                        if (seen.size() == most)
                        {
                            return false;
                        }
                        seen.push_back(std::uint32_t(t));
                        ahead.emplace_back();
                    }
                    ahead[k].push_back(it->second);
                }
            }
            // their loops (strongly connected components, Tarjan's, without recursion)
            const std::size_t n = seen.size();
            std::vector<std::uint32_t> number(n, none), low(n, 0), comp(n, none), open;
            std::vector<std::pair<std::uint32_t, std::size_t>> calls{{0, 0}};  // (state, next edge)
            std::uint32_t numbered = 0, comps = 0;
            number[0] = low[0] = numbered++;
            open.push_back(0);
            while (!calls.empty())
            {
                const std::uint32_t u = calls.back().first;
                const std::size_t e = calls.back().second++;
                if (e < ahead[u].size())
                {
                    const std::uint32_t w = ahead[u][e];
                    if (number[w] == none)
                    {
                        number[w] = low[w] = numbered++;
                        open.push_back(w);
                        calls.push_back({w, 0});
                    }
                    else if (comp[w] == none)
                    {
                        low[u] = std::min(low[u], number[w]);
                    }
                    continue;
                }
                calls.pop_back();
                if (low[u] == number[u])
                {
                    std::uint32_t w = none;
                    do
                    {
                        w = open.back();
                        open.pop_back();
                        comp[w] = comps;
                    } while (w != u);
                    ++comps;
                }
                if (!calls.empty())
                {
                    low[calls.back().first] = std::min(low[calls.back().first], low[u]);
                }
            }
            std::vector<std::uint8_t> loops(comps, 0);  // a loop: two states or more, or one reading itself
            std::vector<std::vector<std::uint32_t>> members(comps);
            for (std::size_t k = 0; k < n; ++k)
            {
                members[comp[k]].push_back(std::uint32_t(k));
                loops[comp[k]] = std::uint8_t(loops[comp[k]] | (members[comp[k]].size() > 1) |
                                              (std::find(ahead[k].begin(), ahead[k].end(), std::uint32_t(k)) != ahead[k].end()));
            }
            // start (with its loop), then every loop one byte from one taken: a text's
            // loop and a pattern's next one, not what follows a closing quote
            std::vector<std::uint8_t> in(n, 0), taken(comps, 0);
            std::vector<std::uint32_t> todo;
            const auto take = [&](std::uint32_t c) {
                taken[c] = 1;
                for (const std::uint32_t k : members[c])
                {
                    in[k] = 1;
                    todo.push_back(k);
                }
            };
            take(comp[0]);
            while (!todo.empty())
            {
                const std::uint32_t u = todo.back();
                todo.pop_back();
                for (const std::uint32_t w : ahead[u])
                {
                    if (!taken[comp[w]] && loops[comp[w]] && (loops[comp[u]] || u == 0))
                    {
                        take(comp[w]);
                    }
                }
            }
            return number_region(a, start, region, state_of, [&](std::size_t, std::uint32_t, unsigned, std::int32_t t) {
                if (t < 0)
                {
                    return byte_region::dead;
                }
                return staying(t) && in[index.at(std::uint32_t(t))] ? keep : byte_region::exit;
            });
        }

        /// Numbers a region's states breadth first from `start` (state_of)
        /// and writes their runs: state k's byte b (t the automaton's next
        /// state, or -1) goes where to(k, s, b, t) says: dead, exit, end,
        /// `keep` (t, a state of the region) or `fail` (not a region: false,
        /// as past 4,096 states).
        static constexpr std::int32_t keep = -10, fail = -11;
        template <class To>
        static bool number_region(const grammar_automaton& a, std::uint32_t start, byte_region& region,
                                  std::vector<std::uint32_t>& state_of, To&& to)
        {
            constexpr std::size_t most = 4096;
            std::unordered_map<std::uint32_t, std::int32_t> number{{start, 0}};
            state_of.assign(1, start);
            for (std::size_t k = 0; k < state_of.size(); ++k)
            {
                const std::uint32_t s = state_of[k];
                std::int32_t prev = 0, last_t = -1, last_go = 0;  // (a run of bytes to one state: one look-up)
                for (unsigned b = 0; b < 256; ++b)
                {
                    const std::int32_t t = a.next(s, static_cast<unsigned char>(b));
                    std::int32_t go = to(k, s, b, t);
                    if (go == fail)
                    {
                        return false;
                    }
                    if (go == keep && t == last_t)
                    {
                        go = last_go;
                    }
                    else if (go == keep)
                    {
                        last_t = t;
                        const auto [it, added] = number.emplace(std::uint32_t(t), std::int32_t(state_of.size()));
                        if (added)
                        {
                            if (state_of.size() == most)
                            {
                                return false;
                            }
                            state_of.push_back(std::uint32_t(t));
                        }
                        go = last_go = it->second;
                    }
                    if (b > 0 && go != prev)
                    {
                        region.runs.push_back({static_cast<unsigned char>(b - 1), prev});
                    }
                    prev = go;
                }
                region.runs.push_back({255, prev});
                region.begin.push_back(std::uint32_t(region.runs.size()));
            }
            return true;
        }

        /// A counted rule's frame: whether the set is x, an item of a counted
        /// rule begun here (at its start, count 0), items waiting for that
        /// rule and reading nothing else, and items that read bytes only (no
        /// rule, no end): the waiting items moved past x's rule (the tail,
        /// here when its minimum is 0) and kernel items in such states. Then
        /// every later set is x's successor and, at an iteration's end with
        /// the minimum done, the same tail: a string with maxLength after its
        /// opening quote. The region is x's body from its start (state 0,
        /// where iterations end); a byte that those items read leaves it
        /// there, and none may be a byte an iteration begins with. state_of as
        /// region_of's; only when at least 64 bytes begin an iteration.
        static bool frame_of(const matcher& local, byte_region& region, std::vector<std::uint32_t>& state_of, earley_item& x)
        {
            const grammar_automaton& a = local.rules();
            region = byte_region{};
            const earley_item* found = nullptr;
            for (const earley_item* it = local.begin(); it != local.end(); ++it)
            {
                if (!matcher::is_context(it->origin))
                {
                    const auto& r = a.rules[a.states[it->state].rule];
                    if (found != nullptr || !r.counted || it->state != r.start || it->count != 0)
                    {
                        return false;  // another rule predicted here, or not at its start
                    }
                    found = it;
                }
            }
            if (found == nullptr)
            {
                return false;
            }
            x = *found;
            const std::uint32_t rule = a.states[x.state].rule;
            const auto reads_bytes = [&](std::uint32_t s) {
                for (std::uint32_t c = 0; c < a.classes; ++c)
                {
                    if (a.table[std::size_t(s) * a.classes + c] >= 0)
                    {
                        return true;
                    }
                }
                return false;
            };
            // the others: waiting for x's rule (reading nothing else), or reading
            // bytes only (the tail, and kernel items in the tail's states: at this
            // set only); what they read leaves the body
            std::array<bool, 256> leaves{};
            const auto reader = [&](std::uint32_t s) {
                if (!in_region(a, s))
                {
                    return false;  // it would predict, or end
                }
                a.add_bytes(s, leaves);
                return true;
            };
            for (const earley_item* it = local.begin(); it != local.end(); ++it)
            {
                const auto& st = a.states[it->state];
                if (it == found)
                {
                    continue;
                }
                if (st.edges_begin == st.edges_end)
                {
                    if (!reader(it->state))
                    {
                        return false;
                    }
                    continue;
                }
                if (matcher::completes(a, *it) || a.rules[st.rule].counted || reads_bytes(it->state))
                {
                    return false;
                }
                for (std::uint32_t e = st.edges_begin; e < st.edges_end; ++e)
                {
                    if (a.edges[e].rule != rule || !reader(a.edges[e].target))
                    {
                        return false;  // it waits for another rule too, or its tail is not plain
                    }
                }
            }
            return counted_body(a, rule, leaves, region, state_of);
        }

        /// A counted rule's body as a region from its start (state 0, where
        /// iterations end); a byte in `leaves` leaves it from there (none may
        /// begin an iteration). Only when at least 64 bytes begin one.
        static bool counted_body(const grammar_automaton& a, std::uint32_t rule, const std::array<bool, 256>& leaves,
                                 byte_region& region, std::vector<std::uint32_t>& state_of)
        {
            constexpr std::size_t wide = 64;
            const auto& r = a.rules[rule];
            region = byte_region{};
            region.start = 0;
            std::size_t from_start = 0;
            const auto predicts = [&](std::uint32_t s) { return a.states[s].edges_begin != a.states[s].edges_end; };
            const bool body = number_region(a, r.start, region, state_of, [&](std::size_t k, std::uint32_t s, unsigned b, std::int32_t t) {
                if (b == 0 && predicts(s))
                {
                    return fail;  // the body predicts a rule
                }
                const bool tail_reads = k == 0 && leaves[b];
                if (t < 0)
                {
                    return tail_reads ? byte_region::exit : byte_region::dead;
                }
                const auto& ts = a.states[std::uint32_t(t)];
                if (tail_reads || std::uint32_t(t) == r.start || predicts(std::uint32_t(t)) || (ts.accepting && ts.reads))
                {
                    return fail;  // the text would not say which: the chart decides
                }
                from_start += std::size_t(k == 0);
                return ts.accepting ? byte_region::end : keep;
            });
            return body && from_start >= wide;
        }

        /// The first level's costs: the same walk, each allowed token's ways
        /// back to the kernel (budget_class).
        compiled_grammar::position_costs walk_costs() const
        {
            const vocabulary_index& ix = m_g->index();
            const detail::token_costs& tc = m_g->token_costs();
            const grammar_automaton& a = *m_matcher.shared_rules();
            matcher local = local_chart();
            compiled_grammar::position_costs out;
            // (group, state, delta) -> class; groups and states below 2^32, a delta below 2^63
            std::map<std::tuple<std::uint32_t, std::uint32_t, std::int64_t>, std::size_t> class_of;
            struct way
            {
                std::uint32_t group, state;
                std::int64_t delta;
                std::uint64_t local;
            };
            std::vector<way> ways;
            // out_of(rule, o): the ways from finishing `rule` begun at local set o up to
            // a kernel group's level, memoised by (rule, o, the set's generation)
            struct key_hash
            {
                std::size_t operator()(const std::array<std::uint32_t, 3>& k) const noexcept
                {
                    return std::size_t((std::uint64_t(k[0]) * 0x9E3779B97F4A7C15ull) ^ (std::uint64_t(k[1]) << 32 | k[2]));
                }
            };
            std::unordered_map<std::array<std::uint32_t, 3>, std::vector<way>, key_hash> memo;
            std::unordered_map<std::array<std::uint32_t, 3>, char, key_hash> busy;
            const std::vector<std::uint32_t>* generation = nullptr;
            const auto add_way = [](std::vector<way>& into, const way& w) {
                for (way& x : into)
                {
                    if (x.group == w.group && x.state == w.state && x.delta == w.delta)
                    {
                        x.local = std::min(x.local, w.local);
                        return;
                    }
                }
                if (into.size() < 256)  // fewer ways: a dearer bound, never a wrong one
                {
                    into.push_back(w);
                }
            };
            std::function<std::vector<way>(std::uint32_t, std::uint32_t)> out_of;
            std::size_t cycles = 0;  // an entry computed while a cycle was cut is not memoised (it may lack ways)
            // the ways of item t (at the level above a finished rule, or in the set itself)
            const auto ways_of = [&](const earley_item& t, std::vector<way>& into, std::uint64_t acc) {
                if (matcher::is_context(t.origin))
                {
                    const std::uint32_t g = matcher::context - t.origin;
                    add_way(into, {g, t.state, std::int64_t(t.count) - std::int64_t(m_kernel[m_rep[g]].count), acc});
                    return;
                }
                const std::uint64_t here = detail::automaton::saturated_add(acc, tc.rest(t.state, t.count));
                for (const way& w : out_of(a.states[t.state].rule, t.origin))
                {
                    add_way(into, {w.group, w.state, w.delta, detail::automaton::saturated_add(w.local, here)});
                }
            };
            out_of = [&](std::uint32_t rule, std::uint32_t o) -> std::vector<way> {
                const std::array<std::uint32_t, 3> k{rule, o, (*generation)[o]};
                const auto found = memo.find(k);
                if (found != memo.end())
                {
                    return found->second;
                }
                if (busy.count(k) != 0)
                {
                    ++cycles;
                    return {};  // a cycle (left recursion): only dearer ways
                }
                const std::size_t cycles_before = cycles;
                busy.emplace(k, 1);
                std::vector<way> into;
                for (const earley_item* y = local.set_begin(o); y != local.set_end(o); ++y)
                {
                    if (!local.can_read(*y))
                    {
                        continue;
                    }
                    const auto& ys = a.states[y->state];
                    for (std::uint32_t e = ys.edges_begin; e < ys.edges_end; ++e)
                    {
                        earley_item t{a.edges[e].target, y->origin, y->count};
                        if (a.edges[e].rule == rule && local.advanced(t))
                        {
                            ways_of(t, into, 0);
                        }
                    }
                }
                busy.erase(k);
                if (cycles == cycles_before || busy.empty())
                {
                    memo.emplace(k, into);  // complete: no way was cut below it (or all cuts were its own)
                }
                return into;
            };
            std::size_t last_class = ~std::size_t(0);
            std::tuple<std::uint32_t, std::uint32_t, std::int64_t> last_key;
            const auto put = [&](token_id t, bool popped) {  // t by each of `ways`
                if (popped)
                {
                    out.check.push_back(t);
                }
                for (const way& w : ways)
                {
                    const auto key = std::make_tuple(w.group, w.state, w.delta);
                    if (last_class == ~std::size_t(0) || key != last_key)
                    {
                        auto it = class_of.find(key);
                        if (it == class_of.end())
                        {
                            it = class_of.emplace(key, out.classes.size()).first;
                            out.classes.push_back({w.group, w.state, w.delta, {}});
                        }
                        last_class = it->second;
                        last_key = key;
                    }
                    out.classes[last_class].tokens.push_back({w.local, t});
                }
            };
            std::uint32_t ways_set = no_set;  // the set `ways` are of
            // a chart set's ways by its content: its items, each origin below it by the
            // generation of the set there, one begun here as set_classes::here (no group's)
            // (siblings such as "1", "2", "12" end in equal sets)
            struct content_hash
            {
                std::size_t operator()(const std::vector<std::uint32_t>& k) const noexcept
                {
                    std::uint64_t h = k.size();
                    for (const std::uint32_t x : k)
                    {
                        h = (h ^ x) * 0x9E3779B97F4A7C15ull;
                    }
                    return std::size_t(h ^ (h >> 29));
                }
            };
            std::unordered_map<std::vector<std::uint32_t>, std::vector<way>, content_hash> ways_by_content;
            std::vector<std::uint32_t> content;
            earley_item last_plain{no_set, no_set, no_set};  // the plain item `ways` are of, and its origin's generation
            std::uint32_t last_plain_at = 0;
            const auto on_node = [&](std::uint32_t i, bool popped, const earley_item* first, const earley_item* last,
                                     const std::vector<std::uint32_t>& gen, std::uint32_t set) {
                generation = &gen;
                if (set == no_set || set != ways_set)
                {
                    const auto compute = [&] {
                        ways.clear();
                        for (const earley_item* x = first; x != last; ++x)
                        {
                            ways_of(*x, ways, 0);
                        }
                    };
                    if (set == no_set)
                    {
                        // one plain item: its ways are the last node's when it is the same item over
                        // the same set (a string's text: every node after the first)
                        const earley_item& x = *first;
                        const std::uint32_t at = matcher::is_context(x.origin) ? 0 : gen[x.origin];
                        if (!(last_plain == x && last_plain_at == at))
                        {
                            compute();
                            last_plain = x;
                            last_plain_at = at;
                        }
                    }
                    else
                    {
                        last_plain = {no_set, no_set, no_set};
                        const auto here = std::uint32_t(local.position());  // (the items are the chart's top)
                        content.clear();
                        for (const earley_item* x = first; x != last; ++x)
                        {
                            const bool below = !matcher::is_context(x->origin) && x->origin != here;
                            content.insert(content.end(), {x->state, x->count,
                                                           x->origin == here ? set_classes::here : x->origin,
                                                           below ? gen[x->origin] : 0});
                        }
                        const auto found = ways_by_content.find(content);
                        if (found != ways_by_content.end())
                        {
                            ways = found->second;
                        }
                        else
                        {
                            compute();
                            ways_by_content.emplace(content, ways);
                        }
                    }
                    ways_set = set;
                }
                ix.for_each_token(i, [&](token_id t) { put(t, popped); });
            };
            region_view v;
            if (!as_region(local, v))
            {
                walk_local(local, on_node);
            }
            else
            {
                // the tokens inside: the item after each is x in the state it ends
                // in (counted: with the iterations it ended; a frame's tail's ways
                // are x's own once it may end); the ways of each (state, count) once
                const region_walk& w = *v.walked;
                const std::vector<std::uint32_t> at_start(1, 0);  // the local set 0's generation
                generation = &at_start;
                // (state, iterations ended, popped) -> its classes and local costs, found once
                const std::size_t span = std::size_t(w.most) + 1;
                std::vector<std::int32_t> slot(v.state_of.size() * span * 2, -1);
                std::vector<std::vector<std::pair<std::size_t, std::uint64_t>>> found;
                for (std::size_t k = 0; k < w.last.size(); ++k)
                {
                    const auto t = token_id(k);
                    if (!v.reads(t))
                    {
                        continue;
                    }
                    bool popped = false;
                    const earley_item y = v.after(t, popped);
                    const std::size_t ended = v.frame || v.counted ? w.need[k] - std::size_t(w.last[k] != 0) : 0;
                    std::int32_t& at = slot[(std::size_t(w.last[k]) * span + ended) * 2 + std::size_t(popped)];
                    if (at < 0)
                    {
                        ways.clear();
                        ways_of(y, ways, 0);
                        std::vector<std::pair<std::size_t, std::uint64_t>> classes;
                        for (const way& wy : ways)
                        {
                            const auto key = std::make_tuple(wy.group, wy.state, wy.delta);
                            auto it = class_of.find(key);
                            if (it == class_of.end())
                            {
                                it = class_of.emplace(key, out.classes.size()).first;
                                out.classes.push_back({wy.group, wy.state, wy.delta, {}});
                            }
                            classes.emplace_back(it->second, wy.local);
                        }
                        at = std::int32_t(found.size());
                        found.push_back(std::move(classes));
                    }
                    if (popped)
                    {
                        out.check.push_back(t);
                    }
                    for (const auto& [c, cost] : found[std::size_t(at)])
                    {
                        out.classes[c].tokens.push_back({cost, t});
                    }
                }
                last_class = ~std::size_t(0);  // (put's memo: classes were added)
                walk_local(local, on_node, &v.resumes);
            }
            // by local cost (a token in several ways of one class: its cheapest first, the rest harmless)
            for (auto& c : out.classes)
            {
                sort_by_cost(c.tokens);
            }
            return out;
        }

        /// Sorts (cost, token) pairs by cost, stably: a counting sort when the
        /// costs span fewer than 4,096 values (they count tokens), else a merge sort.
        template <class Cost>
        static void sort_by_cost(std::vector<std::pair<Cost, token_id>>& v)
        {
            const auto by_cost = [](const auto& x, const auto& y) { return x.first < y.first; };
            if (std::is_sorted(v.begin(), v.end(), by_cost))
            {
                return;
            }
            const auto [lo, hi] = std::minmax_element(v.begin(), v.end(), by_cost);
            const auto above = [least = std::uint64_t(lo->first)](Cost c) { return std::size_t(std::uint64_t(c) - least); };
            if (std::uint64_t(hi->first) - std::uint64_t(lo->first) >= 4096)
            {
                std::stable_sort(v.begin(), v.end(), by_cost);
                return;
            }
            std::vector<std::size_t> at(above(hi->first) + 2, 0);
            for (const auto& e : v)
            {
                ++at[above(e.first) + 1];
            }
            std::partial_sum(at.begin(), at.end(), at.begin());
            std::vector<std::pair<Cost, token_id>> sorted(v.size());
            for (const auto& e : v)
            {
                sorted[at[above(e.first)]++] = e;
            }
            v = std::move(sorted);
        }

        /// walk_context's on_token when only the tokens are wanted.
        struct no_tokens
        {
        };
        /// The second level: the context's subtrees walked through the real chart
        /// (the tokens as ids, and as a bitset too when many).
        compiled_grammar::context_tokens walk_context(const compiled_grammar::position_masks& p) const
        {
            return walk_context(p, no_tokens{});
        }
        /// The same, with on_token(t, items, set, chart) for each allowed
        /// token: the items after t, whose origins are the chart's sets, and
        /// the set they are (walk_local).
        template <class OnToken>
        compiled_grammar::context_tokens walk_context(const compiled_grammar::position_masks& p, OnToken&& on_token) const
        {
            const vocabulary_index& ix = m_g->index();
            matcher m = m_matcher;
            m.check_distinct(false);  // (cached by positions: the grammar without the marks)
            std::vector<resume> starts;
            starts.reserve(p.roots.size());
            for (const std::uint32_t root : p.roots)
            {
                starts.push_back({root, earley_item{}, true});
            }
            std::vector<std::uint64_t> words((vocab().size() + 63) / 64, 0);
            const auto mark = [&](std::uint32_t i, bool, const earley_item* first, const earley_item* last,
                                  const std::vector<std::uint32_t>&, std::uint32_t set) {
                ix.mark_tokens(i, words.data());
                if constexpr (!std::is_same<std::decay_t<OnToken>, no_tokens>::value)
                {
                    ix.for_each_token(i, [&](token_id t) { on_token(t, first, last, set, m); });
                }
            };
            if constexpr (std::is_same<std::decay_t<OnToken>, no_tokens>::value)
            {
                walk_local(m, mark, &starts, [&](const earley_item*, const earley_item*, std::uint32_t) { return words.data(); });
            }
            else
            {
                walk_local(m, mark, &starts);
            }
            compiled_grammar::context_tokens out;
            for (const std::uint64_t w : words)
            {
                out.size += std::size_t(__builtin_popcountll(w));
            }
            out.words = std::move(words);
            if (out.size <= out.many)
            {
                out.ids = out.list();
                out.words.clear();
            }
            return out;
        }

        /// The least cost in tokens of finishing after one of a set's items
        /// (walk_local's on_token arguments), kept for the set last asked: a
        /// walk reads one set at many nodes (no_set: a plain item, computed).
        struct cheapest
        {
            const detail::token_costs& tc;
            std::uint32_t set = no_set;
            std::uint64_t best = detail::automaton::infinite;
            std::uint64_t operator()(const earley_item* first, const earley_item* last, std::uint32_t of, matcher& m)
            {
                if (of == no_set || of != set)
                {
                    best = detail::automaton::infinite;
                    for (const earley_item* x = first; x != last; ++x)
                    {
                        best = std::min(best, m.cost(*x, tc));
                    }
                    set = of;
                }
                return best;
            }
        };

        /// The budget's whole mask by one walk of the trie through the real
        /// chart (a set that is one plain item steps by table look-up): each
        /// token whose completion after it fits in `target` tokens.
        std::vector<std::uint64_t> walk_exact(std::uint64_t target) const
        {
            const vocabulary_index& ix = m_g->index();
            const detail::token_costs& tc = m_g->token_costs();
            matcher m = m_matcher;
            m.check_distinct(false);
            std::vector<std::uint64_t> words((vocab().size() + 63) / 64, 0);
            cheapest cost{tc};
            walk_local(
                m,
                [&](std::uint32_t i, bool, const earley_item* first, const earley_item* last,
                    const std::vector<std::uint32_t>&, std::uint32_t set) {
                    if (cost(first, last, set, m) <= target)
                    {
                        ix.mark_tokens(i, words.data());
                    }
                },
                nullptr,
                [&](const earley_item* first, const earley_item* last, std::uint32_t set) {
                    return cost(first, last, set, m) <= target ? words.data() : nullptr;
                });
            return words;
        }

        /// The budgeted mask by walk_exact, eos added when the text is complete.
        const token_set& exact(std::uint64_t target, bool done)
        {
            auto words = walk_exact(target);
            if (done)
            {
                for (const token_id e : vocab().eos())
                {
                    words[std::size_t(e) / 64] |= std::uint64_t(1) << (e % 64);
                }
            }
            m_budgeted = token_set(std::move(words));
            return m_budgeted;
        }
        /// Tokens a budgeted step reads through the chart as they are: the
        /// context's rather than walking their subtrees for costs the context
        /// keeps; the popping ones without first looking for a later byte the
        /// context may read.
        static constexpr std::size_t max_checks = 64;
        /// Whether a budgeted step reads n tokens through the chart one by one
        /// (max_checks, or up to 1/32 of the vocabulary) rather than walking
        /// the whole trie through it.
        bool few_checks(std::size_t n) const noexcept { return n <= max_checks || n * 32 <= vocab().size(); }

        /// The tokens of `tokens` after which the completion fits in `target`
        /// tokens (fit(t) for each), read through the real chart in byte order,
        /// each from the bytes it shares with the one before. Returns how many fit.
        template <class Fit>
        std::size_t fits_after(std::vector<token_id> tokens, std::uint64_t target, Fit&& fit) const
        {
            const vocabulary& v = vocab();
            const vocabulary_index& ix = m_g->index();
            std::sort(tokens.begin(), tokens.end(), [&](token_id x, token_id y) { return ix.node_of(x) < ix.node_of(y); });
            const rewind undo{m_matcher, m_matcher.position()};
            const std::string* before = nullptr;
            std::size_t read = 0, fitting = 0;  // the matcher has read `read` bytes of *before
            for (const token_id t : tokens)
            {
                const std::string& b = v.bytes(t);
                std::size_t common = 0;
                while (common < read && common < b.size() && (*before)[common] == b[common])
                {
                    ++common;
                }
                m_matcher.pop(read - common);
                read = common;
                while (read < b.size() && m_matcher.step(static_cast<unsigned char>(b[read])))
                {
                    ++read;
                }
                before = &b;
                if (read == b.size() && m_matcher.cheapest(m_g->token_costs()) <= target)
                {
                    fit(t);
                    ++fitting;
                }
            }
            return fitting;
        }

        /// The mask restricted to the tokens after which a completion, eos
        /// included, fits the budget left: each class's tokens whose local
        /// cost fits (a prefix), the context's and the popping ones checked
        /// through the chart. `allowed` itself when none is cut.
        const token_set& budgeted(const token_set& allowed)
        {
            const std::size_t n = left();
            const vocabulary& v = vocab();
            const bool done = m_matcher.complete();
            if (n < 2)
            {
                std::vector<std::uint64_t> words(allowed.words().size(), 0);
                if (done)
                {
                    for (const token_id e : v.eos())
                    {
                        words[std::size_t(e) / 64] |= std::uint64_t(1) << (e % 64);
                    }
                }
                m_budgeted = token_set(std::move(words));
                return m_budgeted;
            }
            const std::uint64_t target = n - 2;
            const detail::token_costs& tc = m_g->token_costs();
            const auto costs = m_g->costs(m_key, [&] { return walk_costs(); });
            // each kernel item's way out, and each class's cost but for its tokens' local part
            std::vector<std::uint64_t> out(m_kernel.size());
            for (std::size_t i = 0; i < m_kernel.size(); ++i)
            {
                const earley_item& x = m_kernel[i];
                out[i] = m_matcher.cost(x, tc) - tc.rest(x.state, x.count);
            }
            std::vector<std::size_t> keep(costs->classes.size());
            bool cut = false;
            for (std::size_t c = 0; c < costs->classes.size(); ++c)
            {
                const auto& k = costs->classes[c];
                std::uint64_t best = detail::automaton::infinite;
                for (std::size_t i = 0; i < m_kernel.size(); ++i)
                {
                    if (m_group[i] != k.group)
                    {
                        continue;
                    }
                    const std::int64_t count = std::int64_t(m_kernel[i].count) + k.delta;
                    best = std::min(best, detail::automaton::saturated_add(
                                              tc.rest(k.state, std::uint32_t(std::max<std::int64_t>(count, 0))), out[i]));
                }
                if (best > target)
                {
                    keep[c] = 0;
                }
                else
                {
                    const std::uint64_t limit = target - best;
                    keep[c] = std::size_t(
                        std::upper_bound(k.tokens.begin(), k.tokens.end(), limit,
                                         [](std::uint64_t l, const std::pair<std::uint64_t, token_id>& x) { return l < x.first; }) -
                        k.tokens.begin());
                }
                cut = cut || keep[c] < k.tokens.size();
            }
            // the context's tokens: their costs relative to the state's, cached by the
            // context when they are count-free; else each read through the chart, or
            // (many) their subtrees walked through it again
            std::vector<token_id> extras;
            if (m_extras && !m_current->roots.empty() && m_extras->size != 0)
            {
                const std::uint64_t here = m_matcher.cheapest(tc);
                const auto costs_of_context = [&] {
                    compiled_grammar::context_costs cc;
                    cheapest cost{tc};
                    walk_context(*m_current, [&](token_id t, const earley_item* first, const earley_item* last,
                                                 std::uint32_t set, matcher& m) {
                        cc.tokens.push_back({std::int64_t(cost(first, last, set, m)) - std::int64_t(here), t});
                    });
                    sort_by_cost(cc.tokens);
                    return cc;
                };
                std::shared_ptr<const compiled_grammar::context_costs> known;
                if (m_ctx_count_free)
                {
                    known = m_g->context_cost(m_ctx_key, costs_of_context);
                }
                else if (m_extras->size > max_checks)
                {
                    known = std::make_shared<const compiled_grammar::context_costs>(costs_of_context());
                }
                if (known && known->tokens.empty())
                {
                    known.reset();  // nothing to read: the ids decide alone
                }
                if (known && std::int64_t(here) + known->tokens.back().first <= std::int64_t(target))
                {
                    if (!cut)
                    {
                        return allowed;  // every class whole, every context token fits
                    }
                    extras = m_extras->list();
                }
                else if (known)
                {
                    for (const auto& [delta, t] : known->tokens)
                    {
                        if (std::int64_t(here) + delta > std::int64_t(target))
                        {
                            cut = true;
                            break;
                        }
                        extras.push_back(t);
                    }
                }
                else
                {
                    // (at most max_checks, unless the walk found none)
                    cut = fits_after(m_extras->list(), target, [&](token_id t) { extras.push_back(t); }) < m_extras->size || cut;
                }
            }
            if (!cut)
            {
                return allowed;
            }
            std::vector<std::uint64_t> words(allowed.words().size(), 0);
            const auto set = [&](token_id t) { words[std::size_t(t) / 64] |= std::uint64_t(1) << (t % 64); };
            for (std::size_t c = 0; c < costs->classes.size(); ++c)
            {
                for (std::size_t j = 0; j < keep[c]; ++j)
                {
                    set(costs->classes[c].tokens[j].second);
                }
            }
            std::vector<token_id> recheck;
            recheck.reserve(costs->check.size());
            for (const token_id t : costs->check)
            {
                if ((words[std::size_t(t) / 64] >> (t % 64) & 1) == 0)
                {
                    recheck.push_back(t);
                }
            }
            if (recheck.size() > max_checks)
            {
                // a token goes on past a kernel rule's end only with a later byte the
                // context may read then: the others' class costs are theirs (a long
                // string's text: what ends it is its quote, which no token inside holds)
                const std::array<bool, 256> after = m_matcher.after_kernel();
                std::bitset<256> bytes;
                for (unsigned b = 0; b < 256; ++b)
                {
                    bytes[b] = after[b];
                }
                const auto later = m_g->index().later_bytes(bytes);
                recheck.erase(std::remove_if(recheck.begin(), recheck.end(),
                                             [&](token_id t) { return ((*later)[std::size_t(t) / 64] >> (t % 64) & 1) == 0; }),
                              recheck.end());
            }
            if (!few_checks(recheck.size()))
            {
                return exact(target, done);  // many: one walk through the chart beats one read each
            }
            fits_after(std::move(recheck), target, set);
            for (const token_id t : extras)
            {
                set(t);
            }
            if (done)
            {
                for (const token_id e : v.eos())
                {
                    set(e);
                }
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
                throw invalid_parameter(name() + ": the vocabulary cannot spell the completion \"" + detail::shortened(text) +
                                    "\"");
            }
            return n;
        }

        std::shared_ptr<const compiled_grammar> m_g;
        mutable matcher m_matcher;
        /// Back to a position when the scope ends (however it ends), unless kept.
        struct rewind
        {
            matcher& m;
            std::size_t to;
            bool kept = false;
            void keep() noexcept { kept = true; }
            ~rewind()
            {
                if (!kept)
                {
                    m.pop(m.position() - to);
                }
            }
        };
        std::vector<std::size_t> m_starts;  // the matcher's position before each token read
        std::vector<token_id> m_ids;
        bool m_ended = false;
        std::size_t m_budget = 0;
        std::shared_ptr<const compiled_grammar::position_masks> m_current;  // alive while a step uses it
        std::shared_ptr<const compiled_grammar::context_tokens> m_extras;
        token_set m_scratch, m_budgeted;
        std::vector<std::string> m_rests;  // without_dead_ends' scratch
        bool m_unfinished = false, m_quoted = false;
        std::string m_key, m_ctx_key;
        std::vector<earley_item> m_kernel;
        std::vector<std::uint32_t> m_group, m_rep;
        bool m_ctx_count_free = false;  // context_key's: every count in the key has met its minimum
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

    inline void compiled_grammar::prime(std::size_t most)
    {
        if (most == 0)
        {
            return;
        }
        // a constraint over this grammar that does not own it (it lives only here)
        const constraint c(std::shared_ptr<const compiled_grammar>(std::shared_ptr<const compiled_grammar>(), this));
        c.prime_items(most);
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
