// xsampler/detail/automaton_checks.hpp — the grammar IR checked and measured before it is compiled. (xsampler, BSD-3-Clause)
//
// automaton_builder's first passes: each expression's owner rule (undefined
// references), distinct marks' uses, shortest lengths (unproductive rules),
// reachability from the root, the checks (empty loops, unit cycles),
// recursion, and which rules are inlined (size_of, unrolled). Errors are
// invalid_parameter naming the rule (grammar.hpp lists them).
#ifndef XSAMPLER_DETAIL_AUTOMATON_CHECKS_HPP
#define XSAMPLER_DETAIL_AUTOMATON_CHECKS_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "automaton_builder.hpp"

namespace xsampler
{
    namespace detail
    {
        /// owner[e]: the first rule whose body contains e; undefined references are errors.
        inline void automaton_builder::owners()
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
        inline void automaton_builder::distinct_uses()
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
        inline void automaton_builder::lengths()
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

        inline std::uint64_t automaton_builder::shortest(const grammar::expr& x) const
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

        inline void automaton_builder::reachable()
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
        inline void automaton_builder::for_each_ref(expr_id e, std::vector<std::uint32_t>& seen, std::uint32_t stamp, F&& f) const
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

        inline void automaton_builder::checks()
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
        inline const std::vector<automaton_builder::rule_id>& automaton_builder::unit_refs(expr_id e, std::vector<std::vector<rule_id>>& memo, std::vector<std::uint8_t>& done) const
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
        inline void automaton_builder::recursion()
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
        inline void automaton_builder::inlining()
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
        inline std::uint64_t automaton_builder::size_of(expr_id e)
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
        inline bool automaton_builder::unrolled(const grammar::expr& x, std::uint64_t one) const
        {
            const std::uint64_t copies = x.max == grammar::unbounded ? std::uint64_t(x.min) + 1 : x.max;
            return copies <= 4 || automaton::saturated_mul(one, copies) <= m_limits.unroll;
        }
    }
}

#endif
