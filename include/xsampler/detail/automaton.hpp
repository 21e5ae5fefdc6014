// xsampler/detail/automaton.hpp — a grammar (grammar.hpp) compiled to one DFA per rule. (xsampler, BSD-3-Clause)
//
// build_automaton(grammar, limits) checks the grammar (grammar.hpp lists the
// errors) and compiles it for the matcher (matcher.hpp):
//   - Each rule the root reaches becomes one minimal DFA over bytes and rule
//     symbols (its body's regular structure determinised: choices, optional
//     parts and repetitions cost nothing at run time). Bytes are read through
//     byte classes shared by the whole grammar.
//   - A rule that is not recursive and whose body is small and loop-free, or
//     that is used once, is inlined where it is used (a class like
//     digit ::= [0-9], a bounded whitespace rule), so that the matcher does
//     not predict it (at most 16 states: a rule used in many places stays
//     one rule); the others stay rules, whose positions are shared by
//     every place that uses them (and their masks with them).
//   - A bounded repetition e{m,n} is unrolled when its copies are small;
//     otherwise it becomes a counted rule: its body is e's DFA and the
//     matcher's item counts the iterations done (a JSON string with
//     maxLength 65535 is one rule of about ten states). An item that ends
//     an iteration starts the next one with the count plus one, and goes
//     on in the body too if the body can; then what it can read next must
//     differ from what an iteration begins with (an array item's trailing
//     whitespace, then ','), so that the text says how many were read:
//     ([0-9]+){2,400} would not, and is an error unless unrolled.
//   - A counted lexeme (grammar::counted_lexeme) is a rule of its own whose
//     DFA is the lexeme's; its item's count is the units read, and
//     rule_info::units says, by state and count, how far the nearest end
//     with the count in range is (none: the item dies). A pattern with
//     maxLength 500 is its own states, not 500 copies of them.
// Every state of every DFA can reach an accepting state (through productive
// rules only), so an Earley item in a state is always live.
#ifndef XSAMPLER_DETAIL_AUTOMATON_HPP
#define XSAMPLER_DETAIL_AUTOMATON_HPP

#include <algorithm>
#include <array>
#include <bitset>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>
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

            /// owner[e]: the first rule whose body contains e; undefined references are errors.
            void owners()
            {
                m_owner.assign(m_g.size(), grammar::none);
                std::vector<expr_id> todo;
                for (rule_id r = 0; r < m_g.rules(); ++r)
                {
                    if (!m_g.defined(r))
                    {
                        continue;
                    }
                    todo.push_back(m_g.body(r));
                    while (!todo.empty())
                    {
                        const expr_id e = todo.back();
                        todo.pop_back();
                        if (m_owner[e] != grammar::none)
                        {
                            continue;
                        }
                        m_owner[e] = r;
                        const auto& x = m_g.at(e);
                        if (x.kind == op::rule && !m_g.defined(x.index))
                        {
                            fail("grammar: rule " + rule_name(x.index) + " is used (in " + rule_name(r) +
                                 ") but never defined");
                        }
                        for (const expr_id i : x.items)
                        {
                            todo.push_back(i);
                        }
                    }
                }
                if (!m_g.defined(m_g.root()))
                {
                    fail("grammar: the root rule " + rule_name(m_g.root()) + " is never defined");
                }
            }

            /// A distinct() item is read by its array's own body alone (the
            /// matcher finds an item's array through the items waiting for it
            /// and the counted repetitions the body makes; a distinct_keys()
            /// key through its object's members' rules, unchecked here).
            void distinct_uses()
            {
                for (const auto& [array, item] : m_g.distincts())
                {
                    if (array == item || !m_g.defined(array) || !m_g.defined(item))
                    {
                        fail("grammar: distinct(" + rule_name(array) + ", " + rule_name(item) +
                             "): two different rules, both defined");
                    }
                    const auto& keys = m_g.key_items();
                    for (expr_id e = 0; std::find(keys.begin(), keys.end(), item) == keys.end() && e < m_g.size(); ++e)
                    {
                        const auto& x = m_g.at(e);
                        if (x.kind == op::rule && x.index == item && m_owner[e] != array)
                        {
                            fail("grammar: the distinct item " + rule_name(item) + " is read outside its array " +
                                 rule_name(array) + "'s own body (in " +
                                 (m_owner[e] == grammar::none ? std::string("no rule") : rule_name(m_owner[e])) + ")");
                        }
                    }
                }
            }

            /// The shortest text of every expression and rule (inf: none), by rounds in
            /// expression order (children are always older than their parents).
            void lengths()
            {
                m_rule_min.assign(m_g.rules(), inf);
                m_expr_min.assign(m_g.size(), inf);
                for (std::size_t round = 0;; ++round)
                {
                    bool changed = false;
                    for (expr_id e = 0; e < m_g.size(); ++e)
                    {
                        m_expr_min[e] = shortest(m_g.at(e));
                    }
                    for (rule_id r = 0; r < m_g.rules(); ++r)
                    {
                        if (m_g.defined(r) && m_expr_min[m_g.body(r)] < m_rule_min[r])
                        {
                            m_rule_min[r] = m_expr_min[m_g.body(r)];
                            changed = true;
                        }
                    }
                    work(m_g.size());
                    if (!changed)
                    {
                        break;
                    }
                    if (round % 64 == 63)
                    {
                        tick();
                    }
                }
            }
            std::uint64_t shortest(const grammar::expr& x) const
            {
                switch (x.kind)
                {
                case op::bytes: return x.text.size();
                case op::byte_set: return x.set.empty() ? inf : 1;
                case op::lexeme:
                    if (const auto* u = m_g.units_of(x.index))
                    {
                        return u->shortest;
                    }
                    return m_g.lexeme_dfa(x.index).distance(m_g.lexeme_dfa(x.index).start());
                case op::rule: return m_rule_min[x.index];
                case op::sequence:
                {
                    std::uint64_t n = 0;
                    for (const expr_id i : x.items)
                    {
                        n = automaton::saturated_add(n, m_expr_min[i]);
                    }
                    return n;
                }
                case op::choice:
                {
                    std::uint64_t n = inf;
                    for (const expr_id i : x.items)
                    {
                        n = std::min(n, m_expr_min[i]);
                    }
                    return n;
                }
                case op::repeat: return x.min == 0 ? 0 : automaton::saturated_mul(m_expr_min[x.items[0]], x.min);
                }
                return inf;
            }
            bool productive(expr_id e) const { return m_expr_min[e] != inf; }
            bool nullable(expr_id e) const { return m_expr_min[e] == 0; }

            void reachable()
            {
                m_reach.assign(m_g.rules(), 0);
                std::vector<rule_id> todo{m_g.root()};
                m_reach[m_g.root()] = 1;
                std::vector<std::uint32_t> seen(m_g.size(), 0);
                while (!todo.empty())
                {
                    const rule_id r = todo.back();
                    todo.pop_back();
                    for_each_ref(m_g.body(r), seen, 1, [&](rule_id s) {
                        if (!m_reach[s])
                        {
                            m_reach[s] = 1;
                            todo.push_back(s);
                        }
                    });
                }
            }
            /// f(rule) for each reference in e; an expression whose seen[] is
            /// already `stamp` is skipped (each is visited once per stamp).
            template <class F>
            void for_each_ref(expr_id e, std::vector<std::uint32_t>& seen, std::uint32_t stamp, F&& f) const
            {
                std::vector<expr_id> todo{e};
                while (!todo.empty())
                {
                    const expr_id x = todo.back();
                    todo.pop_back();
                    if (seen[x] == stamp)
                    {
                        continue;
                    }
                    seen[x] = stamp;
                    const auto& ex = m_g.at(x);
                    if (ex.kind == op::rule)
                    {
                        f(ex.index);
                    }
                    for (const expr_id i : ex.items)
                    {
                        todo.push_back(i);
                    }
                }
            }

            void checks()
            {
                for (rule_id r = 0; r < m_g.rules(); ++r)
                {
                    if (m_reach[r] && m_rule_min[r] == inf)
                    {
                        fail("grammar: rule " + rule_name(r) +
                             " derives no text (each of its alternatives needs a rule that never ends)");
                    }
                }
                for (expr_id e = 0; e < m_g.size(); ++e)
                {
                    const auto& x = m_g.at(e);
                    if (x.kind == op::repeat && x.max == grammar::unbounded && m_owner[e] != grammar::none &&
                        m_reach[m_owner[e]] && nullable(x.items[0]))
                    {
                        fail("grammar: rule " + rule_name(m_owner[e]) +
                             ": a repetition without bound of an expression that can match the empty text "
                             "(an infinitely ambiguous empty loop)");
                    }
                }
                // a ::= ... b ... with the rest empty, b ::= ... a ...: a derives a without a byte
                std::vector<std::vector<rule_id>> unit(m_g.rules());
                std::vector<std::vector<rule_id>> memo(m_g.size());
                std::vector<std::uint8_t> done(m_g.size(), 0);
                for (rule_id r = 0; r < m_g.rules(); ++r)
                {
                    if (m_reach[r])
                    {
                        unit[r] = unit_refs(m_g.body(r), memo, done);
                    }
                }
                std::vector<std::uint8_t> mark(m_g.rules(), 0);  // 1 on the path, 2 done
                for (rule_id r = 0; r < m_g.rules(); ++r)
                {
                    if (!m_reach[r] || mark[r] != 0)
                    {
                        continue;
                    }
                    std::vector<std::pair<rule_id, std::size_t>> path{{r, 0}};
                    mark[r] = 1;
                    while (!path.empty())
                    {
                        auto& [at, next] = path.back();
                        if (next == unit[at].size())
                        {
                            mark[at] = 2;
                            path.pop_back();
                            continue;
                        }
                        const rule_id s = unit[at][next++];
                        if (mark[s] == 1)
                        {
                            fail("grammar: rule " + rule_name(s) + " derives itself without reading a byte" +
                                 (s == at ? std::string() : " (through " + rule_name(at) + ")") +
                                 ": the grammar is infinitely ambiguous");
                        }
                        if (mark[s] == 0)
                        {
                            mark[s] = 1;
                            path.push_back({s, 0});
                        }
                    }
                }
            }
            /// The rules e can derive alone (everything else in it empty).
            const std::vector<rule_id>& unit_refs(expr_id e, std::vector<std::vector<rule_id>>& memo,
                                                  std::vector<std::uint8_t>& done) const
            {
                if (done[e])
                {
                    return memo[e];
                }
                std::vector<rule_id> out;
                const auto& x = m_g.at(e);
                if (productive(e))
                {
                    switch (x.kind)
                    {
                    case op::rule: out.push_back(x.index); break;
                    case op::sequence:
                    {
                        std::size_t non_null = 0;
                        for (const expr_id i : x.items)
                        {
                            non_null += !nullable(i);
                        }
                        for (const expr_id i : x.items)
                        {
                            if (non_null == 0 || (non_null == 1 && !nullable(i)))
                            {
                                const auto& u = unit_refs(i, memo, done);
                                out.insert(out.end(), u.begin(), u.end());
                            }
                        }
                        break;
                    }
                    case op::choice:
                        for (const expr_id i : x.items)
                        {
                            const auto& u = unit_refs(i, memo, done);
                            out.insert(out.end(), u.begin(), u.end());
                        }
                        break;
                    case op::repeat:
                        if (x.max >= 1 && (x.min <= 1 || nullable(x.items[0])))
                        {
                            out = unit_refs(x.items[0], memo, done);
                        }
                        break;
                    default: break;
                    }
                }
                std::sort(out.begin(), out.end());
                out.erase(std::unique(out.begin(), out.end()), out.end());
                memo[e] = std::move(out);
                done[e] = 1;
                return memo[e];
            }

            /// recursive[r]: r reaches itself through references (Tarjan's SCCs,
            /// iteratively); m_order lists rules so that a rule comes after the
            /// non-recursive rules it refers to.
            void recursion()
            {
                const std::size_t n = m_g.rules();
                std::vector<std::vector<rule_id>> refs(n);
                std::vector<std::uint32_t> seen(m_g.size(), 0);
                for (rule_id r = 0; r < n; ++r)
                {
                    if (m_reach[r])
                    {
                        for_each_ref(m_g.body(r), seen, r + 1, [&](rule_id s) { refs[r].push_back(s); });
                    }
                }
                m_recursive.assign(n, 0);
                std::vector<std::int64_t> index(n, -1), low(n, 0);
                std::vector<std::uint8_t> on(n, 0);
                std::vector<rule_id> stack;
                std::int64_t counter = 0;
                for (rule_id r0 = 0; r0 < n; ++r0)
                {
                    if (!m_reach[r0] || index[r0] >= 0)
                    {
                        continue;
                    }
                    std::vector<std::pair<rule_id, std::size_t>> call{{r0, 0}};
                    index[r0] = low[r0] = counter++;
                    stack.push_back(r0);
                    on[r0] = 1;
                    while (!call.empty())
                    {
                        auto& [v, i] = call.back();
                        if (i < refs[v].size())
                        {
                            const rule_id w = refs[v][i++];
                            if (w == v)
                            {
                                m_recursive[v] = 1;
                            }
                            if (index[w] < 0)
                            {
                                index[w] = low[w] = counter++;
                                stack.push_back(w);
                                on[w] = 1;
                                call.push_back({w, 0});
                            }
                            else if (on[w])
                            {
                                low[v] = std::min(low[v], index[w]);
                            }
                            continue;
                        }
                        const rule_id done_v = v;
                        call.pop_back();
                        if (!call.empty())
                        {
                            low[call.back().first] = std::min(low[call.back().first], low[done_v]);
                        }
                        if (low[done_v] == index[done_v])
                        {
                            std::vector<rule_id> scc;
                            rule_id w;
                            do
                            {
                                w = stack.back();
                                stack.pop_back();
                                on[w] = 0;
                                scc.push_back(w);
                            } while (w != done_v);
                            if (scc.size() > 1)
                            {
                                for (const rule_id x : scc)
                                {
                                    m_recursive[x] = 1;
                                }
                            }
                            m_order.insert(m_order.end(), scc.begin(), scc.end());
                        }
                    }
                }
            }

            /// Which rules are inlined where they are used, and each expression's
            /// size as automaton states (loop: it holds an unbounded or counted repetition).
            void inlining()
            {
                m_inline.assign(m_g.rules(), 0);
                m_uses.assign(m_g.rules(), 0);
                std::vector<std::uint32_t> parents(m_g.size(), 0);
                for (rule_id r = 0; r < m_g.rules(); ++r)
                {
                    if (m_g.defined(r))
                    {
                        ++parents[m_g.body(r)];
                    }
                }
                for (expr_id e = 0; e < m_g.size(); ++e)
                {
                    for (const expr_id i : m_g.at(e).items)
                    {
                        ++parents[i];
                    }
                }
                for (expr_id e = 0; e < m_g.size(); ++e)
                {
                    const auto& x = m_g.at(e);
                    if (x.kind == op::rule && m_owner[e] != grammar::none && m_reach[m_owner[e]])
                    {
                        m_uses[x.index] += parents[e];
                    }
                }
                m_size.assign(m_g.size(), 0);
                m_loop.assign(m_g.size(), 0);
                m_sized.assign(m_g.size(), 0);
                std::vector<std::uint8_t> marked(m_g.rules(), 0);  // distinct()'s rules stay rules: the matcher checks them
                for (const auto& [array, item] : m_g.distincts())
                {
                    marked[array] = marked[item] = 1;
                }
                // m_order: a rule after the non-recursive rules it refers to
                for (const rule_id r : m_order)
                {
                    if (r == m_g.root() || m_recursive[r])
                    {
                        continue;
                    }
                    const expr_id b = m_g.body(r);
                    size_of(b);
                    const bool small = !m_loop[b] && m_size[b] <= 16;
                    const bool once = m_uses[r] <= 1 && m_size[b] <= 4096;
                    m_inline[r] = (small || once) && !marked[r];
                }
            }
            /// Automaton states e takes (capped), with inlined rules expanded.
            std::uint64_t size_of(expr_id e)
            {
                if (m_sized[e])
                {
                    return m_size[e];
                }
                const auto& x = m_g.at(e);
                std::uint64_t n = 0;
                bool loop = false;
                switch (x.kind)
                {
                case op::bytes: n = std::max<std::size_t>(x.text.size(), 1); break;
                case op::byte_set: n = 1; break;
                case op::lexeme:
                    if (m_g.units_of(x.index) != nullptr)
                    {
                        loop = true;  // counted: one rule edge
                        n = 1;
                        break;
                    }
                    n = m_g.lexeme_dfa(x.index).size() + 1;
                    break;
                case op::rule:
                    if (m_inline[x.index])
                    {
                        n = size_of(m_g.body(x.index));
                        loop = m_loop[m_g.body(x.index)] != 0;
                    }
                    else
                    {
                        n = 1;
                    }
                    break;
                case op::sequence:
                case op::choice:
                    for (const expr_id i : x.items)
                    {
                        n = automaton::saturated_add(n, size_of(i));
                        loop = loop || m_loop[i];
                    }
                    n += 1;
                    break;
                case op::repeat:
                {
                    const std::uint64_t one = size_of(x.items[0]);
                    loop = m_loop[x.items[0]] != 0;
                    if (x.max == grammar::unbounded)
                    {
                        loop = true;
                        n = automaton::saturated_mul(one, std::uint64_t(x.min) + 1) + 1;
                    }
                    else if (unrolled(x, one))
                    {
                        n = automaton::saturated_mul(one, x.max) + 1;
                    }
                    else
                    {
                        loop = true;  // counted: one rule edge
                        n = 1;
                    }
                    break;
                }
                }
                m_size[e] = std::min<std::uint64_t>(n, automaton::cap);
                m_loop[e] = loop;
                m_sized[e] = 1;
                return m_size[e];
            }
            /// Whether repeat x (of items of `one` states) is unrolled rather than counted.
            bool unrolled(const grammar::expr& x, std::uint64_t one) const
            {
                const std::uint64_t copies = x.max == grammar::unbounded ? std::uint64_t(x.min) + 1 : x.max;
                return copies <= 4 || automaton::saturated_mul(one, copies) <= m_limits.unroll;
            }

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

            /// The automaton rule of grammar rule r (queued if new).
            std::uint32_t rule_of(rule_id r)
            {
                if (m_arule[r] < 0)
                {
                    m_arule[r] = std::int32_t(m_pending.size());
                    pending p;
                    p.body = m_g.body(r);
                    p.source = r;
                    m_pending.push_back(std::move(p));
                    automaton::rule_info info;
                    info.name = m_g.name(r);
                    info.minlen = m_rule_min[r];
                    info.nullable = m_rule_min[r] == 0;
                    for (const auto& [array, item] : m_g.distincts())
                    {
                        info.distinct_array = info.distinct_array || array == r;
                        info.distinct_item = info.distinct_item || item == r;
                    }
                    const auto& closed = m_g.closed_items();
                    info.distinct_closed = std::find(closed.begin(), closed.end(), r) != closed.end();
                    m_out->rules.push_back(std::move(info));
                }
                return std::uint32_t(m_arule[r]);
            }
            /// The counted rule of e{min,max} (queued if new).
            std::uint32_t counted_of(expr_id e, std::size_t min, std::size_t max, rule_id source)
            {
                const auto key = std::make_tuple(e, min, max);
                const auto it = m_counted.find(key);
                if (it != m_counted.end())
                {
                    return it->second;
                }
                const auto id = std::uint32_t(m_pending.size());
                pending p;
                p.body = e;
                p.source = source;
                p.counted = true;
                p.min = min;
                p.max = max;
                m_pending.push_back(std::move(p));
                automaton::rule_info info;
                info.name = m_g.name(source) + "{" + std::to_string(min) + "," +
                            (max == grammar::unbounded ? std::string() : std::to_string(max)) + "}";
                info.counted = true;
                info.max = max;
                if (nullable(e))
                {
                    min = 0;  // e{m,n} with e nullable is (e without the empty text){0,n}
                }
                info.min = min;
                info.body_minlen = m_expr_min[e];
                info.minlen = min == 0 ? 0 : automaton::saturated_mul(m_expr_min[e], min);
                info.nullable = info.minlen == 0;
                m_out->rules.push_back(std::move(info));
                m_counted.emplace(key, id);
                return id;
            }

            /// The rule of counted lexeme l (queued if new).
            std::uint32_t units_rule_of(std::uint32_t l, rule_id source)
            {
                const auto it = m_units_rules.find(l);
                if (it != m_units_rules.end())
                {
                    return it->second;
                }
                const auto* u = m_g.units_of(l);
                const auto id = std::uint32_t(m_pending.size());
                pending p;
                p.source = source;
                p.lexeme = l;
                m_pending.push_back(std::move(p));
                automaton::rule_info info;
                info.name = m_g.name(source) + "<" + std::to_string(u->min) + "," +
                            (u->max == grammar::unbounded ? std::string() : std::to_string(u->max)) + ">";
                info.min = u->min;
                info.max = u->max;
                info.minlen = u->shortest;
                info.nullable = u->shortest == 0;
                m_out->rules.push_back(std::move(info));
                m_units_rules.emplace(l, id);
                return id;
            }

            std::int32_t set_index(const xsampler::byte_set& s)
            {
                const std::uint64_t h = hash(s);
                auto& same = m_set_by_hash[h];
                for (const std::uint32_t i : same)
                {
                    if (m_sets[i] == s)
                    {
                        return std::int32_t(i);
                    }
                }
                m_sets.push_back(s);
                same.push_back(std::uint32_t(m_sets.size() - 1));
                return std::int32_t(m_sets.size() - 1);
            }
            static std::uint64_t hash(const xsampler::byte_set& s)
            {
                std::uint64_t h = 1469598103934665603ull;
                for (unsigned b = 0; b < 256; b += 64)
                {
                    std::uint64_t w = 0;
                    for (unsigned i = 0; i < 64; ++i)
                    {
                        w |= std::uint64_t(s.contains(static_cast<unsigned char>(b + i))) << i;
                    }
                    h = (h ^ w) * 1099511628211ull;
                }
                return h;
            }

            std::uint32_t add_state(nfa& n, rule_id source)
            {
                if (n.out.size() >= m_limits.max_nfa_states)
                {
                    fail("grammar: rule " + rule_name(source) + " needs more than " +
                         std::to_string(m_limits.max_nfa_states) + " automaton states (grammar_limits::max_nfa_states)");
                }
                n.out.emplace_back();
                n.source.push_back(source);
                return std::uint32_t(n.out.size() - 1);
            }

            void build_nfa(std::size_t i)
            {
                nfa n;
                const rule_id source = m_pending[i].source;
                n.start = add_state(n, source);
                std::vector<rule_id> inlining;
                std::uint32_t end = n.start;
                if (m_pending[i].lexeme >= 0)
                {
                    const auto l = std::uint32_t(m_pending[i].lexeme);
                    const std::uint32_t base = std::uint32_t(n.out.size());
                    end = emit_lexeme(n, l, n.start, source);
                    n.unit.assign(n.out.size(), 0);
                    const auto& units = m_g.units_of(l)->units;
                    for (std::size_t s = 0; s < units.size(); ++s)
                    {
                        n.unit[base + s] = units[s];
                    }
                }
                else
                {
                    const expr_id body = m_pending[i].body;
                    end = emit(n, body, n.start, source, inlining);  // a counted rule's nullable body: see determinise()
                }
                n.accept = end;
                work(n.out.size());
                m_pending[i].n = std::move(n);
            }

            /// Thompson's construction: the fragment of e from state `in`; returns
            /// its end. A fragment never has an arc into its entry, so fragments
            /// can share one.
            std::uint32_t emit(nfa& n, expr_id e, std::uint32_t in, rule_id source, std::vector<rule_id>& inlining)
            {
                const auto& x = m_g.at(e);
                switch (x.kind)
                {
                case op::bytes:
                {
                    std::uint32_t at = in;
                    for (const char c : x.text)
                    {
                        const std::uint32_t t = add_state(n, source);
                        xsampler::byte_set s;
                        s.insert(static_cast<unsigned char>(c));
                        n.out[at].push_back({t, set_index(s), -1});
                        at = t;
                    }
                    return at;
                }
                case op::byte_set:
                {
                    const std::uint32_t t = add_state(n, source);
                    n.out[in].push_back({t, set_index(x.set), -1});
                    return t;
                }
                case op::lexeme:
                {
                    if (m_g.units_of(x.index) != nullptr)
                    {
                        const std::uint32_t t = add_state(n, source);
                        n.out[in].push_back({t, -1, std::int32_t(units_rule_of(x.index, source))});
                        return t;
                    }
                    return emit_lexeme(n, x.index, in, source);
                }
                case op::rule:
                {
                    const rule_id r = x.index;
                    // inlined rules nest at most max_inline deep (emit recurses through them)
                    if (m_inline[r] && inlining.size() < max_inline &&
                        std::find(inlining.begin(), inlining.end(), r) == inlining.end())
                    {
                        inlining.push_back(r);
                        const std::uint32_t end = emit(n, m_g.body(r), in, r, inlining);
                        inlining.pop_back();
                        return end;
                    }
                    const std::uint32_t t = add_state(n, source);
                    n.out[in].push_back({t, -1, std::int32_t(rule_of(r))});
                    return t;
                }
                case op::sequence:
                {
                    std::uint32_t at = in;
                    for (const expr_id i : x.items)
                    {
                        at = emit(n, i, at, source, inlining);
                    }
                    return at;
                }
                case op::choice:
                {
                    const std::uint32_t end = add_state(n, source);
                    for (const expr_id i : x.items)
                    {
                        if (!productive(i))
                        {
                            continue;  // a dead alternative
                        }
                        const std::uint32_t a = emit(n, i, in, source, inlining);
                        n.out[a].push_back({end, -1, -1});
                    }
                    return end;
                }
                case op::repeat:
                {
                    const expr_id item = x.items[0];
                    if (x.max == 0 || !productive(item))
                    {
                        return in;  // only the empty text
                    }
                    const std::uint64_t one = size_of(item);
                    if (!unrolled(x, one))
                    {
                        if (x.max == grammar::unbounded)
                        {
                            // e{m,} = e{m,m} e*
                            const std::uint32_t t = add_state(n, source);
                            n.out[in].push_back({t, -1, std::int32_t(counted_of(item, x.min, x.min, source))});
                            return star(n, item, t, source, inlining);
                        }
                        const std::uint32_t t = add_state(n, source);
                        n.out[in].push_back({t, -1, std::int32_t(counted_of(item, x.min, x.max, source))});
                        return t;
                    }
                    std::uint32_t at = in;
                    for (std::size_t k = 0; k < x.min; ++k)
                    {
                        at = emit(n, item, at, source, inlining);
                    }
                    if (x.max == grammar::unbounded)
                    {
                        return star(n, item, at, source, inlining);
                    }
                    const std::uint32_t end = add_state(n, source);
                    for (std::size_t k = x.min; k < x.max; ++k)
                    {
                        n.out[at].push_back({end, -1, -1});
                        at = emit(n, item, at, source, inlining);
                    }
                    n.out[at].push_back({end, -1, -1});
                    return end;
                }
                }
                return in;
            }
            /// A lexeme's DFA as arcs by byte set (set < 0: an accepting state's
            /// arc to the fragment's end), worked out once per lexeme however
            /// often rules read it.
            struct lexeme_arc
            {
                std::uint32_t from, to;
                std::int32_t set;
            };
            const std::vector<lexeme_arc>& arcs_of(std::uint32_t lexeme)
            {
                auto it = m_lexeme_arcs.find(lexeme);
                if (it != m_lexeme_arcs.end())
                {
                    return it->second;
                }
                const byte_dfa& d = m_g.lexeme_dfa(lexeme);
                std::vector<lexeme_arc> arcs;
                for (std::size_t s = 0; s < d.size(); ++s)
                {
                    std::map<std::int32_t, xsampler::byte_set> by_target;
                    for (unsigned b = 0; b < 256; ++b)
                    {
                        const std::int32_t t = d.next(std::int32_t(s), static_cast<unsigned char>(b));
                        if (t != byte_dfa::dead)
                        {
                            by_target[t].insert(static_cast<unsigned char>(b));
                        }
                    }
                    for (const auto& [t, set] : by_target)
                    {
                        arcs.push_back({std::uint32_t(s), std::uint32_t(t), set_index(set)});
                    }
                    if (d.accepting(std::int32_t(s)))
                    {
                        arcs.push_back({std::uint32_t(s), 0, -1});
                    }
                }
                work(d.size() * 256);
                return m_lexeme_arcs.emplace(lexeme, std::move(arcs)).first->second;
            }

            /// Lexeme l's DFA as states of n from `in`; returns its end.
            std::uint32_t emit_lexeme(nfa& n, std::uint32_t l, std::uint32_t in, rule_id source)
            {
                const std::vector<lexeme_arc>& arcs = arcs_of(l);
                const std::size_t states = m_g.lexeme_dfa(l).size();
                const std::uint32_t base = std::uint32_t(n.out.size());
                for (std::size_t s = 0; s < states; ++s)
                {
                    add_state(n, source);
                }
                const std::uint32_t end = add_state(n, source);
                n.out[in].push_back({base + std::uint32_t(m_g.lexeme_dfa(l).start()), -1, -1});
                for (const lexeme_arc& a : arcs)
                {
                    n.out[base + a.from].push_back({a.set < 0 ? end : base + a.to, a.set, -1});
                }
                work(states + arcs.size());
                return end;
            }

            std::uint32_t star(nfa& n, expr_id item, std::uint32_t in, rule_id source, std::vector<rule_id>& inlining)
            {
                const std::uint32_t loop = add_state(n, source);
                n.out[in].push_back({loop, -1, -1});
                const std::uint32_t end = emit(n, item, loop, source, inlining);
                n.out[end].push_back({loop, -1, -1});
                return loop;
            }

            /// The byte classes: the coarsest partition of the bytes that every set respects.
            void classes()
            {
                std::array<std::uint16_t, 256> cls{};
                std::uint32_t count = 1;
                for (const auto& s : m_sets)
                {
                    std::map<std::pair<std::uint16_t, bool>, std::uint16_t> split;
                    std::array<std::uint16_t, 256> next{};
                    for (unsigned b = 0; b < 256; ++b)
                    {
                        const auto key = std::make_pair(cls[b], s.contains(static_cast<unsigned char>(b)));
                        const auto it = split.find(key);
                        if (it == split.end())
                        {
                            next[b] = std::uint16_t(split.size());
                            split.emplace(key, next[b]);
                        }
                        else
                        {
                            next[b] = it->second;
                        }
                    }
                    cls = next;
                    count = std::uint32_t(split.size());
                }
                m_out->byte_class = cls;
                m_out->classes = count;
                // each set as the list of its classes
                m_set_classes.assign(m_sets.size(), {});
                for (std::size_t i = 0; i < m_sets.size(); ++i)
                {
                    std::vector<std::uint8_t> in(count, 0);
                    for (unsigned b = 0; b < 256; ++b)
                    {
                        if (m_sets[i].contains(static_cast<unsigned char>(b)))
                        {
                            in[cls[b]] = 1;
                        }
                    }
                    for (std::uint32_t c = 0; c < count; ++c)
                    {
                        if (in[c])
                        {
                            m_set_classes[i].push_back(std::uint16_t(c));
                        }
                    }
                }
            }

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

            /// The epsilon closure of `set`, its states that matter (an arc that
            /// reads, or the accept state), sorted.
            void closure(const nfa& n, std::vector<std::uint32_t>& set, std::vector<std::uint32_t>& mark,
                         std::uint32_t stamp)
            {
                std::vector<std::uint32_t> todo = set;
                std::vector<std::uint32_t> out;
                for (const std::uint32_t s : set)
                {
                    mark[s] = stamp;
                }
                while (!todo.empty())
                {
                    const std::uint32_t s = todo.back();
                    todo.pop_back();
                    bool reads = s == n.accept;
                    for (const arc& a : n.out[s])
                    {
                        if (a.set < 0 && a.rule < 0)
                        {
                            if (mark[a.to] != stamp)
                            {
                                mark[a.to] = stamp;
                                todo.push_back(a.to);
                            }
                        }
                        else
                        {
                            reads = true;
                        }
                    }
                    if (reads)
                    {
                        out.push_back(s);
                    }
                }
                work(out.size() + set.size());
                std::sort(out.begin(), out.end());
                set = std::move(out);
            }

            void determinise(std::size_t i)
            {
                pending& p = m_pending[i];
                const nfa& n = p.n;
                const std::uint32_t classes = m_out->classes;
                std::vector<std::uint32_t> mark(n.out.size(), 0);
                std::uint32_t stamp = 0;
                std::unordered_map<std::vector<std::uint32_t>, std::uint32_t, vector_hash> ids;
                std::vector<std::vector<std::uint32_t>> sets;
                std::vector<std::int32_t> table;                            // dfa states x classes
                std::vector<std::vector<std::pair<std::uint32_t, std::uint32_t>>> rule_arcs;  // (rule, dfa target)
                std::vector<std::uint8_t> accepting;
                const auto intern = [&](std::vector<std::uint32_t> s) -> std::uint32_t {
                    closure(n, s, mark, ++stamp);
                    const auto it = ids.find(s);
                    if (it != ids.end())
                    {
                        return it->second;
                    }
                    if (m_out->states.size() + sets.size() >= m_limits.max_states)
                    {
                        fail("grammar: more than " + std::to_string(m_limits.max_states) +
                             " automaton states (grammar_limits::max_states), in rule " + rule_name(p.source));
                    }
                    const auto id = std::uint32_t(sets.size());
                    ids.emplace(s, id);
                    sets.push_back(std::move(s));
                    table.resize(sets.size() * classes, -1);
                    rule_arcs.emplace_back();
                    accepting.push_back(0);
                    return id;
                };
                intern({n.start});
                std::vector<std::vector<std::uint32_t>> bucket(classes);
                std::map<std::uint32_t, std::vector<std::uint32_t>> by_rule;
                for (std::uint32_t d = 0; d < sets.size(); ++d)
                {
                    for (auto& b : bucket)
                    {
                        b.clear();
                    }
                    by_rule.clear();
                    for (const std::uint32_t s : sets[d])
                    {
                        if (s == n.accept)
                        {
                            accepting[d] = 1;
                        }
                        for (const arc& a : n.out[s])
                        {
                            if (a.set >= 0)
                            {
                                for (const std::uint16_t c : m_set_classes[std::size_t(a.set)])
                                {
                                    bucket[c].push_back(a.to);
                                }
                                work(m_set_classes[std::size_t(a.set)].size());
                            }
                            else if (a.rule >= 0)
                            {
                                by_rule[std::uint32_t(a.rule)].push_back(a.to);
                            }
                        }
                    }
                    for (std::uint32_t c = 0; c < classes; ++c)
                    {
                        if (bucket[c].empty())
                        {
                            continue;
                        }
                        std::sort(bucket[c].begin(), bucket[c].end());
                        bucket[c].erase(std::unique(bucket[c].begin(), bucket[c].end()), bucket[c].end());
                        // the same targets as the class before: the same state
                        if (c > 0 && bucket[c] == bucket[c - 1])
                        {
                            table[std::size_t(d) * classes + c] = table[std::size_t(d) * classes + c - 1];
                            continue;
                        }
                        const std::uint32_t t = intern(bucket[c]);
                        table[std::size_t(d) * classes + c] = std::int32_t(t);
                    }
                    for (auto& [r, targets] : by_rule)
                    {
                        std::sort(targets.begin(), targets.end());
                        targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
                        const std::uint32_t t = intern(targets);
                        rule_arcs[d].push_back({r, t});
                    }
                    if (d % 256 == 255)
                    {
                        tick();
                    }
                }
                // a counted rule's start is where an iteration ends, so no arc may enter
                // it: in ("a"* "b"){0,300} the body's DFA loops on 'a' at its start, and
                // "a" would end an iteration
                bool entered = false;
                for (const std::int32_t t : table)
                {
                    entered = entered || t == 0;
                }
                for (const auto& arcs : rule_arcs)
                {
                    for (const auto& a : arcs)
                    {
                        entered = entered || a.second == 0;
                    }
                }
                if (p.counted && (accepting[0] || entered))
                {
                    // a nullable body (iterations must read something) or a start that arcs
                    // enter: a new start state like the old one but not accepting (the old
                    // one stays, reachable through the body's loops)
                    const auto id = std::uint32_t(sets.size());
                    sets.push_back({});
                    table.resize(sets.size() * classes, -1);
                    std::copy(table.begin(), table.begin() + classes, table.begin() + std::ptrdiff_t(id) * classes);
                    rule_arcs.push_back(rule_arcs[0]);
                    accepting.push_back(0);
                    // swap it to be state 0
                    for (std::uint32_t c = 0; c < classes; ++c)
                    {
                        std::swap(table[c], table[std::size_t(id) * classes + c]);
                    }
                    std::swap(rule_arcs[0], rule_arcs[id]);
                    std::swap(accepting[0], accepting[id]);
                    for (auto& t : table)
                    {
                        if (t == 0)
                        {
                            t = std::int32_t(id);
                        }
                        else if (t == std::int32_t(id))
                        {
                            t = 0;
                        }
                    }
                    for (auto& arcs : rule_arcs)
                    {
                        for (auto& a : arcs)
                        {
                            if (a.second == 0)
                            {
                                a.second = id;
                            }
                            else if (a.second == id)
                            {
                                a.second = 0;
                            }
                        }
                    }
                }
                minimise_and_add(i, table, rule_arcs, accepting, sets, n);
            }

            /// Moore's partition refinement, then the live states renumbered from the
            /// start and appended to the automaton.
            void minimise_and_add(std::size_t i, const std::vector<std::int32_t>& table,
                                  const std::vector<std::vector<std::pair<std::uint32_t, std::uint32_t>>>& rule_arcs,
                                  const std::vector<std::uint8_t>& accepting,
                                  const std::vector<std::vector<std::uint32_t>>& sets, const nfa& n)
            {
                const std::uint32_t classes = m_out->classes;
                const std::size_t m = accepting.size();
                // live: can reach an accepting state
                std::vector<std::vector<std::uint32_t>> back(m);
                for (std::size_t s = 0; s < m; ++s)
                {
                    for (std::uint32_t c = 0; c < classes; ++c)
                    {
                        const std::int32_t t = table[s * classes + c];
                        if (t >= 0)
                        {
                            back[std::size_t(t)].push_back(std::uint32_t(s));
                        }
                    }
                    for (const auto& a : rule_arcs[s])
                    {
                        back[a.second].push_back(std::uint32_t(s));
                    }
                }
                std::vector<std::uint8_t> live(accepting.begin(), accepting.end());
                mark_reaching(back, live);
                if (m_pending[i].counted)
                {
                    // a counted rule's start ends its iterations (the count completes it), so it stays even
                    // when the body without the empty text matches nothing: (""){300} is the empty text
                    live[0] = 1;
                }
                // Hopcroft (regex.hpp) over the live states and a dead sink; the
                // symbols: the byte classes, then this DFA's rule symbols
                std::map<std::uint32_t, std::uint32_t> symbol_of_rule;
                for (std::size_t q = 0; q < m; ++q)
                {
                    for (const auto& arc : rule_arcs[q])
                    {
                        symbol_of_rule.emplace(arc.first, 0);
                    }
                }
                std::uint32_t next_symbol = classes;
                for (auto& kv : symbol_of_rule)
                {
                    kv.second = next_symbol++;
                }
                // a counted rule's start merges with no other state (minimised, it could be
                // entered again): one more symbol, on which only it goes on (to itself)
                const bool counted = m_pending[i].counted;
                // a counted lexeme's states that begin units merge with no state that does
                // not: one more symbol, on which only they go on (to themselves)
                std::vector<std::uint8_t> unit(m, 0);
                const bool units = m_pending[i].lexeme >= 0;
                if (units)
                {
                    for (std::size_t q = 0; q < m; ++q)
                    {
                        for (const std::uint32_t x : sets[q])
                        {
                            unit[q] = std::uint8_t(unit[q] | n.unit[x]);
                        }
                    }
                }
                const std::size_t symbols = next_symbol + (counted || units ? 1 : 0);
                const auto sink = std::int32_t(m);
                std::vector<std::int32_t> dense((m + 1) * symbols, sink);
                std::vector<bool> final_states(m + 1, false);
                for (std::size_t q = 0; q < m; ++q)
                {
                    if (!live[q])
                    {
                        continue;
                    }
                    final_states[q] = accepting[q] != 0;
                    for (std::uint32_t c = 0; c < classes; ++c)
                    {
                        const std::int32_t t = table[q * classes + c];
                        if (t >= 0 && live[std::size_t(t)])
                        {
                            dense[q * symbols + c] = t;
                        }
                    }
                    for (const auto& arc : rule_arcs[q])
                    {
                        if (live[arc.second])
                        {
                            dense[q * symbols + symbol_of_rule[arc.first]] = std::int32_t(arc.second);
                        }
                    }
                }
                if (counted)
                {
                    dense[symbols - 1] = 0;
                }
                if (units)
                {
                    for (std::size_t q = 0; q < m; ++q)
                    {
                        if (live[q] && unit[q])
                        {
                            dense[q * symbols + symbols - 1] = std::int32_t(q);
                        }
                    }
                }
                work((m + 1) * symbols * 4);
                const std::vector<std::int32_t> hop = regex::hopcroft(dense, m + 1, final_states, symbols);
                // blocks numbered from 0 over the live states (dead ones: -1)
                std::vector<std::int64_t> block(m, -1);
                std::map<std::int32_t, std::int64_t> renumber;
                for (std::size_t q = 0; q < m; ++q)
                {
                    if (live[q])
                    {
                        block[q] = renumber.emplace(hop[q], std::int64_t(renumber.size())).first->second;
                    }
                }
                const std::size_t blocks = renumber.size();
                tick();
                // renumber the blocks from the start, breadth first
                std::vector<std::int64_t> number(blocks, -1);
                std::vector<std::size_t> rep(blocks, 0);
                for (std::size_t s = m; s-- > 0;)
                {
                    if (live[s])
                    {
                        rep[std::size_t(block[s])] = s;
                    }
                }
                std::vector<std::size_t> order;
                number[std::size_t(block[0])] = 0;
                order.push_back(rep[std::size_t(block[0])]);
                for (std::size_t k = 0; k < order.size(); ++k)
                {
                    const std::size_t s = order[k];
                    const auto visit = [&](std::size_t t) {
                        if (live[t] && number[std::size_t(block[t])] < 0)
                        {
                            number[std::size_t(block[t])] = std::int64_t(order.size());
                            order.push_back(rep[std::size_t(block[t])]);
                        }
                    };
                    for (std::uint32_t c = 0; c < classes; ++c)
                    {
                        const std::int32_t t = table[s * classes + c];
                        if (t >= 0)
                        {
                            visit(std::size_t(t));
                        }
                    }
                    for (const auto& a : rule_arcs[s])
                    {
                        visit(a.second);
                    }
                }
                automaton& out = *m_out;
                const auto base = std::uint32_t(out.states.size());
                const std::uint32_t rule = std::uint32_t(i);
                out.rules[rule].start = base;
                out.table.resize((std::size_t(base) + order.size()) * classes, -1);
                for (std::size_t k = 0; k < order.size(); ++k)
                {
                    const std::size_t s = order[k];
                    automaton::state st;
                    st.rule = rule;
                    st.accepting = accepting[s] != 0;
                    st.unit = unit[s] != 0;
                    st.source = sets[s].empty() ? m_pending[i].source : n.source[sets[s].front()];
                    st.edges_begin = std::uint32_t(out.edges.size());
                    for (std::uint32_t c = 0; c < classes; ++c)
                    {
                        const std::int32_t t = table[s * classes + c];
                        if (t >= 0 && live[std::size_t(t)])
                        {
                            out.table[(std::size_t(base) + k) * classes + c] =
                                std::int32_t(base + std::uint32_t(number[std::size_t(block[std::size_t(t)])]));
                        }
                    }
                    std::vector<std::pair<std::uint32_t, std::uint32_t>> arcs;
                    for (const auto& a : rule_arcs[s])
                    {
                        if (live[a.second])
                        {
                            arcs.push_back({a.first, base + std::uint32_t(number[std::size_t(block[a.second])])});
                        }
                    }
                    std::sort(arcs.begin(), arcs.end());
                    arcs.erase(std::unique(arcs.begin(), arcs.end()), arcs.end());
                    for (const auto& a : arcs)
                    {
                        out.edges.push_back({a.first, a.second});
                    }
                    st.edges_end = std::uint32_t(out.edges.size());
                    out.states.push_back(st);
                }
                if (m_pending[i].counted)
                {
                    check_counted(i, base, std::uint32_t(order.size()));
                }
                if (units)
                {
                    count_units(i, base, std::uint32_t(order.size()));
                }
                m_pending[i].n = nfa();  // free it
            }

            /// A counted lexeme's rule: its ends by state and count, from its own
            /// states (its DFA is the lexeme's, renumbered).
            void count_units(std::size_t i, std::uint32_t base, std::uint32_t count)
            {
                automaton& a = *m_out;
                std::vector<std::vector<std::uint32_t>> succ(count);
                std::vector<std::uint8_t> unit(count), accepting(count);
                for (std::uint32_t k = 0; k < count; ++k)
                {
                    const auto& st = a.states[base + k];
                    unit[k] = st.unit;
                    accepting[k] = st.accepting;
                    for (std::uint32_t c = 0; c < a.classes; ++c)
                    {
                        const std::int32_t t = a.table[std::size_t(base + k) * a.classes + c];
                        if (t >= 0)
                        {
                            succ[k].push_back(std::uint32_t(t) - base);
                        }
                    }
                    std::sort(succ[k].begin(), succ[k].end());
                    succ[k].erase(std::unique(succ[k].begin(), succ[k].end()), succ[k].end());
                }
                const auto* u = m_g.units_of(std::uint32_t(m_pending[i].lexeme));
                auto ends = std::make_shared<const unit_ends>(succ, std::move(unit), accepting, 0, u->min, u->max);
                work(std::size_t(count) * a.classes + std::size_t(count) * ((u->max == grammar::unbounded ? u->min : u->max) + 1));
                if (ends->shortest() != u->shortest)
                {
                    fail("grammar: rule " + rule_name(m_pending[i].source) + ": a counted lexeme's automaton differs from its DFA");
                }
                a.rules[i].units = std::move(ends);
            }

            /// A counted rule's iterations must be read off the text: where an
            /// iteration may end and go on, what it can read next must differ
            /// from what the next iteration begins with (a rule edge counts as
            /// anything). Else its items would hold every way to split the text.
            void check_counted(std::size_t i, std::uint32_t base, std::uint32_t count)
            {
                const automaton& a = *m_out;
                const auto reads = [&](std::uint32_t s, std::vector<std::uint8_t>& cls) {
                    for (std::uint32_t c = 0; c < a.classes; ++c)
                    {
                        cls[c] = cls[c] || a.table[std::size_t(s) * a.classes + c] >= 0;
                    }
                    return a.states[s].edges_begin != a.states[s].edges_end;
                };
                // an iteration that rules matching the empty text can end at once
                // would count any number of times at one byte
                {
                    std::vector<std::uint32_t> todo{base};
                    std::vector<std::uint8_t> seen(count, 0);
                    seen[0] = 1;
                    while (!todo.empty())
                    {
                        const std::uint32_t s = todo.back();
                        todo.pop_back();
                        if (a.states[s].accepting)
                        {
                            const auto& r = a.rules[i];
                            fail("grammar: rule " + rule_name(m_pending[i].source) + ": the repetition {" +
                                 std::to_string(r.min) + "," + std::to_string(r.max) +
                                 "} is too large to unroll (grammar_limits::unroll) and cannot be counted: its item "
                                 "can end without reading a byte (through a rule that matches the empty text)");
                        }
                        for (std::uint32_t e = a.states[s].edges_begin; e < a.states[s].edges_end; ++e)
                        {
                            const std::uint32_t t = a.edges[e].target;
                            if (a.rules[a.edges[e].rule].nullable && t >= base && t < base + count && !seen[t - base])
                            {
                                seen[t - base] = 1;
                                todo.push_back(t);
                            }
                        }
                    }
                }
                std::vector<std::uint8_t> first(a.classes, 0), next(a.classes, 0);
                const bool first_rule = reads(base, first);
                bool next_rule = false, ends_and_goes_on = false;
                std::vector<std::uint8_t> here(a.classes, 0);
                for (std::uint32_t s = base; s < base + count; ++s)
                {
                    if (!a.states[s].accepting)
                    {
                        continue;
                    }
                    std::fill(here.begin(), here.end(), 0);
                    const bool rule = reads(s, here);
                    if (rule || std::count(here.begin(), here.end(), 1) > 0)
                    {
                        ends_and_goes_on = true;
                        next_rule = next_rule || rule;
                        for (std::uint32_t c = 0; c < a.classes; ++c)
                        {
                            next[c] = next[c] || here[c];
                        }
                    }
                }
                if (!ends_and_goes_on)
                {
                    return;
                }
                bool overlap = (first_rule && (next_rule || std::count(next.begin(), next.end(), 1) > 0)) ||
                               (next_rule && std::count(first.begin(), first.end(), 1) > 0);
                for (std::uint32_t c = 0; c < a.classes && !overlap; ++c)
                {
                    overlap = first[c] && next[c];
                }
                if (overlap)
                {
                    const auto& r = a.rules[i];
                    fail("grammar: rule " + rule_name(m_pending[i].source) + ": the repetition {" + std::to_string(r.min) +
                         "," + (r.max == grammar::unbounded ? std::string() : std::to_string(r.max)) +
                         "} is too large to unroll (grammar_limits::unroll) and cannot be counted: its item can go "
                         "on with what the next one begins with, so the text does not say how many were read; make "
                         "the item end where it matches (a separator), or lower the bound");
                }
            }

            /// dist: the shortest way from each state to an accepting state of its
            /// DFA, rule edges at their shortest text (Dijkstra backwards, per rule).
            void distances()
            {
                automaton& a = *m_out;
                const std::size_t m = a.states.size();
                std::vector<std::vector<std::pair<std::uint32_t, std::uint64_t>>> back(m);
                for (std::uint32_t s = 0; s < m; ++s)
                {
                    for (std::uint32_t c = 0; c < a.classes; ++c)
                    {
                        const std::int32_t t = a.table[std::size_t(s) * a.classes + c];
                        if (t >= 0)
                        {
                            back[std::size_t(t)].push_back({s, 1});
                        }
                    }
                    for (std::uint32_t e = a.states[s].edges_begin; e < a.states[s].edges_end; ++e)
                    {
                        back[a.edges[e].target].push_back({s, a.rules[a.edges[e].rule].minlen});
                    }
                    bool reads = a.states[s].edges_begin != a.states[s].edges_end;
                    for (std::uint32_t c = 0; c < a.classes && !reads; ++c)
                    {
                        reads = a.table[std::size_t(s) * a.classes + c] >= 0;
                    }
                    a.states[s].reads = reads;
                    a.states[s].dist = inf;
                }
                using item = std::pair<std::uint64_t, std::uint32_t>;
                std::priority_queue<item, std::vector<item>, std::greater<item>> q;
                for (std::uint32_t s = 0; s < m; ++s)
                {
                    if (a.states[s].accepting)
                    {
                        a.states[s].dist = 0;
                        q.push({0, s});
                    }
                }
                while (!q.empty())
                {
                    const auto [d, s] = q.top();
                    q.pop();
                    if (d != a.states[s].dist)
                    {
                        continue;
                    }
                    for (const auto& [f, w] : back[s])
                    {
                        const std::uint64_t nd = automaton::saturated_add(d, w);
                        if (nd < a.states[f].dist)
                        {
                            a.states[f].dist = nd;
                            q.push({nd, f});
                        }
                    }
                }
                work(m * a.classes);
            }

            /// automaton::follow: the bytes each state may read first (through
            /// the rules it predicts, past nullable ones) and whether it may end
            /// its rule without a byte; then, for each rule edge, what its
            /// target reads first and, where the target may end, what follows
            /// its own rule. (A counted rule ends at its start, and an
            /// iteration's end begins the next one: both counted as may.)
            void follows()
            {
                automaton& a = *m_out;
                const std::size_t m = a.states.size();
                std::vector<std::bitset<256>> of_class(a.classes), first(m);
                for (unsigned b = 0; b < 256; ++b)
                {
                    of_class[a.byte_class[b]].set(b);
                }
                std::vector<std::uint8_t> ends(m, 0);
                for (std::uint32_t s = 0; s < m; ++s)
                {
                    for (std::uint32_t c = 0; c < a.classes; ++c)
                    {
                        if (a.table[std::size_t(s) * a.classes + c] >= 0)
                        {
                            first[s] |= of_class[c];
                        }
                    }
                    const auto& r = a.rules[a.states[s].rule];
                    ends[s] = std::uint8_t(a.states[s].accepting || (r.counted && s == r.start));
                }
                for (bool changed = true; changed;)
                {
                    changed = false;
                    for (std::size_t k = m; k-- > 0;)
                    {
                        const auto& st = a.states[k];
                        const auto& r = a.rules[st.rule];
                        std::bitset<256> f = first[k];
                        bool e = ends[k] != 0;
                        if (r.counted && st.accepting)
                        {
                            f |= first[r.start];
                        }
                        for (std::uint32_t j = st.edges_begin; j < st.edges_end; ++j)
                        {
                            const auto& sub = a.rules[a.edges[j].rule];
                            f |= first[sub.start];
                            if (sub.nullable)
                            {
                                f |= first[a.edges[j].target];
                                e = e || ends[a.edges[j].target] != 0;
                            }
                        }
                        if (f != first[k] || e != (ends[k] != 0))
                        {
                            first[k] = f;
                            ends[k] = std::uint8_t(e);
                            changed = true;
                        }
                    }
                    work(m + a.edges.size());
                }
                a.follow.assign(a.rules.size(), {});
                for (bool changed = true; changed;)
                {
                    changed = false;
                    for (std::uint32_t s = 0; s < m; ++s)
                    {
                        for (std::uint32_t j = a.states[s].edges_begin; j < a.states[s].edges_end; ++j)
                        {
                            const auto& ed = a.edges[j];
                            std::bitset<256> f = a.follow[ed.rule] | first[ed.target];
                            if (ends[ed.target])
                            {
                                f |= a.follow[a.states[s].rule];
                            }
                            if (f != a.follow[ed.rule])
                            {
                                a.follow[ed.rule] = f;
                                changed = true;
                            }
                        }
                    }
                    work(m + a.edges.size());
                }
            }

            /// automaton::distinct_last: the bytes that may end a text of a
            /// distinct() item (and distinct_first: those its array may begin with), as the bytes into an accepting state and what
            /// ends the rules read into one (every byte where a nullable rule
            /// leads there: a superset).
            void distinct_lasts()
            {
                automaton& a = *m_out;
                if (std::none_of(a.rules.begin(), a.rules.end(), [](const automaton::rule_info& r) { return r.distinct_item; }))
                {
                    return;
                }
                std::vector<std::bitset<256>> of_class(a.classes), last(a.rules.size());
                for (unsigned b = 0; b < 256; ++b)
                {
                    of_class[a.byte_class[b]].set(b);
                }
                for (bool changed = true; changed;)
                {
                    changed = false;
                    for (std::uint32_t s = 0; s < a.states.size(); ++s)
                    {
                        const auto& st = a.states[s];
                        std::bitset<256> f = last[st.rule];
                        for (std::uint32_t c = 0; c < a.classes; ++c)
                        {
                            const std::int32_t t = a.table[std::size_t(s) * a.classes + c];
                            if (t >= 0 && a.states[std::size_t(t)].accepting)
                            {
                                f |= of_class[c];
                            }
                        }
                        for (std::uint32_t j = st.edges_begin; j < st.edges_end; ++j)
                        {
                            const auto& ed = a.edges[j];
                            if (a.states[ed.target].accepting)
                            {
                                f |= a.rules[ed.rule].nullable ? std::bitset<256>().set() : last[ed.rule];
                            }
                        }
                        if (f != last[st.rule])
                        {
                            last[st.rule] = f;
                            changed = true;
                        }
                    }
                    work(a.states.size() * a.classes);
                }
                for (std::uint32_t r = 0; r < a.rules.size(); ++r)
                {
                    if (a.rules[r].distinct_item)
                    {
                        a.distinct_last |= last[r].any() ? last[r] : std::bitset<256>().set();
                    }
                    if (a.rules[r].distinct_array)
                    {
                        const auto& st = a.states[a.rules[r].start];
                        if (st.edges_begin != st.edges_end)
                        {
                            a.distinct_first.set();  // (a rule first: any byte)
                        }
                        for (unsigned b = 0; b < 256; ++b)
                        {
                            a.distinct_first[b] = a.distinct_first[b] || a.next(a.rules[r].start, static_cast<unsigned char>(b)) >= 0;
                        }
                    }
                }
            }

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

        inline std::shared_ptr<const automaton> build_automaton(const grammar& g, const grammar_limits& limits = {})
        {
            return automaton_builder(g, limits).build();
        }
    }
}

#endif
