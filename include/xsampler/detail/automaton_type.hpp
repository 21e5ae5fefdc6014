// xsampler/detail/automaton_type.hpp — a compiled grammar as the matcher reads it: one DFA per rule. (xsampler, BSD-3-Clause)
//
// grammar_limits: what compiling may cost. detail::automaton (matcher.hpp's
// grammar_automaton): states over byte classes and rule edges, per state its
// distance to an end of its DFA, per rule its start, shortest text, counted
// bounds and distinct marks; follow (the bytes after a rule ends) and the
// distinct marks' first and last bytes. Built only by build_automaton
// (detail/automaton.hpp); immutable once built. mark_reaching: the nodes
// that reach a marked one (the builder's liveness, the constraint's
// distinct rules).
#ifndef XSAMPLER_DETAIL_AUTOMATON_TYPE_HPP
#define XSAMPLER_DETAIL_AUTOMATON_TYPE_HPP

#include <algorithm>
#include <array>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../grammar.hpp"

namespace xsampler
{
    /// What compiling a grammar may cost before it is an error naming the limit.
    struct grammar_limits
    {
        std::size_t max_rules = 100000;          ///< rules in the grammar
        std::size_t max_expressions = 1000000;   ///< expressions in the grammar
        std::size_t max_states = 1000000;        ///< DFA states of all rules together
        std::size_t max_nfa_states = 2000000;    ///< automaton states while compiling one rule
        std::size_t max_work = 200000000;        ///< steps of subset construction and minimisation in all
        std::size_t unroll = 256;                ///< a bounded repetition whose copies take more states is counted
        double max_seconds = 2.0;                ///< wall time
        /// single items whose masks compiled_grammar walks ahead when it is
        /// built (constraint.hpp; 0: none, every position walked on first use)
        std::size_t primed_items = 1024;
    };

    namespace detail
    {
        /// Marks (1) every node from which a marked one can be reached, back[n]
        /// listing the nodes with an edge into n; `marks` holds the seeds.
        inline void mark_reaching(const std::vector<std::vector<std::uint32_t>>& back, std::vector<std::uint8_t>& marks)
        {
            std::vector<std::uint32_t> todo;
            for (std::size_t n = 0; n < marks.size(); ++n)
            {
                if (marks[n])
                {
                    todo.push_back(std::uint32_t(n));
                }
            }
            while (!todo.empty())
            {
                const std::uint32_t n = todo.back();
                todo.pop_back();
                for (const std::uint32_t f : back[n])
                {
                    if (!marks[f])
                    {
                        marks[f] = 1;
                        todo.push_back(f);
                    }
                }
            }
        }

        class automaton
        {
        public:
            struct state
            {
                std::uint32_t rule = 0;         // the automaton rule it belongs to
                std::uint32_t edges_begin = 0;  // its rule edges: edges[begin, end)
                std::uint32_t edges_end = 0;
                std::uint32_t source = 0;       // the grammar rule it was written in (messages)
                std::uint64_t dist = 0;         // bytes to an accepting state of its DFA (rules at their shortest)
                bool accepting = false;
                bool reads = false;             // it has a way on (a byte or a rule)
                bool unit = false;              // a counted lexeme's: the byte it reads begins a unit
            };
            struct edge
            {
                std::uint32_t rule;    // the rule read
                std::uint32_t target;  // the state after it
            };
            struct rule_info
            {
                std::string name;
                std::uint32_t start = 0;
                std::uint64_t minlen = 0;  // bytes of its shortest text
                bool nullable = false;
                bool counted = false;      // body{min,max}: start is the body's start
                std::size_t min = 0, max = 0;
                std::uint64_t body_minlen = 0;  // counted: one iteration's shortest text
                bool distinct_array = false;    // grammar::distinct's array: its items pairwise different
                bool distinct_item = false;     // grammar::distinct's item
                bool distinct_closed = false;   // an item of grammar::distinct_closed
                /// A counted lexeme's rule (grammar::counted_lexeme): its ends by
                /// state (less the rule's start) and units read; the item's count
                /// is the units read. nullptr for other rules.
                std::shared_ptr<const unit_ends> units;
            };

            std::array<std::uint16_t, 256> byte_class{};
            std::uint32_t classes = 1;
            std::vector<std::int32_t> table;  // states x classes: the next state, or -1
            std::vector<state> states;
            std::vector<edge> edges;
            std::vector<rule_info> rules;
            std::vector<std::string> source_names;  // grammar rule names, by grammar rule id
            std::uint32_t root = 0;
            bool root_read = false;  // some rule reads the root (else its end only ends the text)
            /// By rule: the bytes that may come first after it ends, in any text
            /// (a superset: the root's is empty).
            std::vector<std::bitset<256>> follow;
            /// The bytes that may end an item of a grammar::distinct mark (a
            /// superset; none without marks): a text none of whose bytes is here
            /// ends no item.
            std::bitset<256> distinct_last;
            /// The bytes that may begin a distinct() array (a superset).
            std::bitset<256> distinct_first;
            bool has_distinct() const noexcept { return distinct_last.any(); }

            /// Whether an item in state s ends no more than the text where it
            /// ends: the root's, when no rule reads the root.
            bool ends_text_only(std::uint32_t s) const noexcept { return !root_read && states[s].rule == root; }

            std::int32_t next(std::uint32_t s, unsigned char b) const noexcept
            {
                return table[std::size_t(s) * classes + byte_class[b]];
            }
            /// A counted lexeme's count after a byte read in state s into state t:
            /// false where no end is left (past max, or none from t). Other
            /// rules' counts stay.
            bool counts(std::uint32_t s, std::uint32_t t, std::uint32_t& count) const noexcept
            {
                const rule_info& r = rules[states[s].rule];
                if (!r.units)
                {
                    return true;
                }
                count = r.units->after(s - r.start, count);
                return r.units->live(t - r.start, count);
            }
            /// Whether some rule is a counted lexeme.
            bool has_units() const noexcept
            {
                return std::any_of(rules.begin(), rules.end(), [](const rule_info& r) { return r.units != nullptr; });
            }
            /// Adds the bytes state s reads to `bytes`.
            void add_bytes(std::uint32_t s, std::array<bool, 256>& bytes) const noexcept
            {
                for (unsigned b = 0; b < 256; ++b)
                {
                    bytes[b] = bytes[b] || next(s, static_cast<unsigned char>(b)) >= 0;
                }
            }
            /// For a counted rule's item: whether it may read more (its count is below max).
            /// The shortest text that completes rule r from state s with `count` iterations done.
            std::uint64_t rest(std::uint32_t s, std::size_t count) const noexcept
            {
                const state& st = states[s];
                const rule_info& r = rules[st.rule];
                if (r.units)
                {
                    const std::uint32_t b = r.units->bytes(s - r.start, std::uint32_t(count));
                    return b == unit_ends::none ? infinite : b;
                }
                if (!r.counted)
                {
                    return st.dist;
                }
                const std::size_t need = r.min > count ? r.min - count : 0;  // iterations still needed
                if (s == r.start)
                {
                    return saturated_mul(r.body_minlen, need);
                }
                // inside an iteration: finish it, then the ones still needed after it
                return saturated_add(st.dist, saturated_mul(r.body_minlen, need > 0 ? need - 1 : 0));
            }

            static constexpr std::uint64_t infinite = ~std::uint64_t(0);
            static constexpr std::uint64_t cap = std::uint64_t(1) << 62;
            static std::uint64_t saturated_add(std::uint64_t a, std::uint64_t b) noexcept
            {
                if (a == infinite || b == infinite)
                {
                    return infinite;
                }
                return std::min(a + b, cap);
            }
            static std::uint64_t saturated_mul(std::uint64_t a, std::uint64_t k) noexcept
            {
                if (k == 0)
                {
                    return 0;
                }
                if (a == infinite)
                {
                    return infinite;
                }
                return a > cap / k ? cap : std::min(a * k, cap);
            }
        };
    }
}

#endif
