// xsampler/detail/compiled_grammar.hpp — a grammar compiled for a vocabulary, and the masks it has computed. (xsampler, BSD-3-Clause)
//
// compiled_grammar (constraint.hpp states the contract): the automaton, the
// vocabulary's index, and the caches every request over them shares: masks
// by position and by context, costs, units walks, each behind one mutex and
// held as shared_ptrs (a step keeps its entry alive while another thread
// clears the cache), at most max_cached entries each; the per-state tables
// the trie walks read (looping states, class runs) and the distinct marks'
// tokens. prime() is defined in constraint.hpp (it walks through a
// constraint).
#ifndef XSAMPLER_DETAIL_COMPILED_GRAMMAR_HPP
#define XSAMPLER_DETAIL_COMPILED_GRAMMAR_HPP

#include <algorithm>
#include <atomic>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../matcher.hpp"
#include "../vocabulary.hpp"
#include "token_costs.hpp"

namespace xsampler
{
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
}

#endif
