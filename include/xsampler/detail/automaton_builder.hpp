// xsampler/detail/automaton_builder.hpp — the compile of a grammar to an automaton: its passes, limits and state. (xsampler, BSD-3-Clause)
//
// automaton_builder(grammar, limits).build() runs the passes in order: the
// IR's checks and measures (automaton_checks.hpp), each rule's NFA
// (automaton_nfa.hpp), byte classes, determinisation and minimisation
// (automaton_dfa.hpp), then distances, follow sets and the distinct marks'
// bytes (automaton_ends.hpp). This file holds the class, its limits
// (tick: wall time, work: steps) and the state the passes share; the
// passes are defined in those files, which detail/automaton.hpp includes.
#ifndef XSAMPLER_DETAIL_AUTOMATON_BUILDER_HPP
#define XSAMPLER_DETAIL_AUTOMATON_BUILDER_HPP

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "automaton_type.hpp"

namespace xsampler
{
    namespace detail
    {
        class automaton_builder
        {
        public:
            using rule_id = grammar::rule_id;
            using expr_id = grammar::expr_id;
            using op = grammar::op;
            static constexpr std::uint64_t inf = automaton::infinite;
            static constexpr std::size_t max_inline = 64;

            automaton_builder(const grammar& g, const grammar_limits& limits)
                : m_g(g), m_limits(limits), m_start(std::chrono::steady_clock::now())
            {
            }

            std::shared_ptr<const automaton> build()
            {
                if (m_g.rules() > m_limits.max_rules)
                {
                    fail("grammar: " + std::to_string(m_g.rules()) + " rules, more than the limit " +
                         std::to_string(m_limits.max_rules));
                }
                if (m_g.size() > m_limits.max_expressions)
                {
                    fail("grammar: " + std::to_string(m_g.size()) + " expressions, more than the limit " +
                         std::to_string(m_limits.max_expressions));
                }
                if (!m_g.has_root())
                {
                    fail("grammar: no root rule");
                }
                owners();
                distinct_uses();
                lengths();
                reachable();
                checks();
                recursion();
                inlining();
                auto a = std::make_shared<automaton>();
                m_out = a.get();
                for (rule_id r = 0; r < m_g.rules(); ++r)
                {
                    a->source_names.push_back(m_g.name(r));
                }
                m_arule.assign(m_g.rules(), -1);
                a->root = rule_of(m_g.root());
                for (std::size_t i = 0; i < m_pending.size(); ++i)  // grows as rules are found
                {
                    build_nfa(i);
                    tick();
                }
                classes();
                for (std::size_t i = 0; i < m_pending.size(); ++i)
                {
                    determinise(i);
                    tick();
                }
                distances();
                for (const auto& e : a->edges)
                {
                    a->root_read = a->root_read || e.rule == a->root;
                }
                follows();
                distinct_lasts();
                return a;
            }

        private:
            [[noreturn]] static void fail(const std::string& what) { throw invalid_parameter(what); }
            std::string rule_name(rule_id r) const { return "'" + m_g.name(r) + "'"; }

            void tick()
            {
                const double s =
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
                if (s > m_limits.max_seconds)
                {
                    fail("grammar: compiling took longer than the limit of " + std::to_string(m_limits.max_seconds) +
                         " s");
                }
            }
            void work(std::size_t n)
            {
                m_work += n;
                if (m_work > m_limits.max_work)
                {
                    fail("grammar: compiling needs more than " + std::to_string(m_limits.max_work) +
                         " steps (grammar_limits::max_work)");
                }
            }

            // --- analysis of the IR ---

            void owners();

            void distinct_uses();

            void lengths();
            std::uint64_t shortest(const grammar::expr& x) const;
            bool productive(expr_id e) const { return m_expr_min[e] != inf; }
            bool nullable(expr_id e) const { return m_expr_min[e] == 0; }

            void reachable();
            template <class F>
            void for_each_ref(expr_id e, std::vector<std::uint32_t>& seen, std::uint32_t stamp, F&& f) const;

            void checks();
            const std::vector<rule_id>& unit_refs(expr_id e, std::vector<std::vector<rule_id>>& memo,
                                                  std::vector<std::uint8_t>& done) const;

            void recursion();

            void inlining();
            std::uint64_t size_of(expr_id e);
            bool unrolled(const grammar::expr& x, std::uint64_t one) const;

            // --- automaton rules and their NFAs ---

            struct arc
            {
                std::uint32_t to;
                std::int32_t set;   // a byte set (index), or -1
                std::int32_t rule;  // an automaton rule, or -1; both -1: epsilon
            };
            struct nfa
            {
                std::vector<std::vector<arc>> out;
                std::vector<std::uint32_t> source;  // grammar rule of each state
                std::vector<std::uint8_t> unit;     // a counted lexeme's rule: its states that begin units
                std::uint32_t start = 0, accept = 0;
            };
            struct pending
            {
                expr_id body = 0;
                rule_id source = 0;      // grammar rule it comes from
                bool counted = false;
                std::size_t min = 0, max = 0;
                std::int64_t lexeme = -1;  // a counted lexeme's rule: the lexeme
                nfa n;
            };

            std::uint32_t rule_of(rule_id r);
            std::uint32_t counted_of(expr_id e, std::size_t min, std::size_t max, rule_id source);

            std::uint32_t units_rule_of(std::uint32_t l, rule_id source);

            std::int32_t set_index(const xsampler::byte_set& s);
            static std::uint64_t hash(const xsampler::byte_set& s);

            std::uint32_t add_state(nfa& n, rule_id source);

            void build_nfa(std::size_t i);

            std::uint32_t emit(nfa& n, expr_id e, std::uint32_t in, rule_id source, std::vector<rule_id>& inlining);
            /// A lexeme's DFA as arcs by byte set (set < 0: an accepting state's
            /// arc to the fragment's end), worked out once per lexeme however
            /// often rules read it.
            struct lexeme_arc
            {
                std::uint32_t from, to;
                std::int32_t set;
            };
            const std::vector<lexeme_arc>& arcs_of(std::uint32_t lexeme);

            std::uint32_t emit_lexeme(nfa& n, std::uint32_t l, std::uint32_t in, rule_id source);

            std::uint32_t star(nfa& n, expr_id item, std::uint32_t in, rule_id source, std::vector<rule_id>& inlining);

            void classes();

            struct vector_hash
            {
                std::size_t operator()(const std::vector<std::uint32_t>& v) const noexcept
                {
                    std::uint64_t h = 1469598103934665603ull;
                    for (const std::uint32_t x : v)
                    {
                        h = (h ^ x) * 1099511628211ull;
                    }
                    return std::size_t(h);
                }
            };

            void closure(const nfa& n, std::vector<std::uint32_t>& set, std::vector<std::uint32_t>& mark,
                         std::uint32_t stamp);

            void determinise(std::size_t i);

            void minimise_and_add(std::size_t i, const std::vector<std::int32_t>& table,
                                  const std::vector<std::vector<std::pair<std::uint32_t, std::uint32_t>>>& rule_arcs,
                                  const std::vector<std::uint8_t>& accepting,
                                  const std::vector<std::vector<std::uint32_t>>& sets, const nfa& n);

            void count_units(std::size_t i, std::uint32_t base, std::uint32_t count);

            void check_counted(std::size_t i, std::uint32_t base, std::uint32_t count);

            void distances();

            void follows();

            void distinct_lasts();

            const grammar& m_g;
            const grammar_limits& m_limits;
            std::chrono::steady_clock::time_point m_start;
            std::size_t m_work = 0;
            automaton* m_out = nullptr;
            std::vector<rule_id> m_owner;
            std::vector<std::uint64_t> m_rule_min, m_expr_min;
            std::vector<std::uint8_t> m_reach, m_recursive, m_inline, m_loop, m_sized;
            std::vector<std::uint32_t> m_uses;
            std::vector<std::uint64_t> m_size;
            std::vector<rule_id> m_order;
            std::vector<std::int32_t> m_arule;
            std::vector<pending> m_pending;
            std::map<std::tuple<expr_id, std::size_t, std::size_t>, std::uint32_t> m_counted;
            std::map<std::uint32_t, std::uint32_t> m_units_rules;  // counted lexeme -> its rule
            std::vector<xsampler::byte_set> m_sets;
            std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> m_set_by_hash;
            std::vector<std::vector<std::uint16_t>> m_set_classes;
            std::unordered_map<std::uint32_t, std::vector<lexeme_arc>> m_lexeme_arcs;  // arcs_of's
        };
    }
}

#endif
