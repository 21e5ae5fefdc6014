// xsampler/detail/automaton_dfa.hpp — each rule's NFA determinised and minimised over byte classes. (xsampler, BSD-3-Clause)
//
// automaton_builder's byte classes (bytes no byte set tells apart, shared by
// the whole grammar), subset construction per rule (closure, determinise),
// and minimisation (Hopcroft's, byte_dfa.hpp's) into the automaton's states;
// a counted rule's repetition checked (check_counted) and a counted
// lexeme's ends by units (count_units).
#ifndef XSAMPLER_DETAIL_AUTOMATON_DFA_HPP
#define XSAMPLER_DETAIL_AUTOMATON_DFA_HPP

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "automaton_builder.hpp"

namespace xsampler
{
    namespace detail
    {
        /// The byte classes: the coarsest partition of the bytes that every set respects.
        inline void automaton_builder::classes()
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

        /// The epsilon closure of `set`, its states that matter (an arc that
        /// reads, or the accept state), sorted.
        inline void automaton_builder::closure(const nfa& n, std::vector<std::uint32_t>& set, std::vector<std::uint32_t>& mark, std::uint32_t stamp)
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

        inline void automaton_builder::determinise(std::size_t i)
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
        inline void automaton_builder::minimise_and_add(std::size_t i, const std::vector<std::int32_t>& table, const std::vector<std::vector<std::pair<std::uint32_t, std::uint32_t>>>& rule_arcs, const std::vector<std::uint8_t>& accepting, const std::vector<std::vector<std::uint32_t>>& sets, const nfa& n)
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
        inline void automaton_builder::count_units(std::size_t i, std::uint32_t base, std::uint32_t count)
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
        inline void automaton_builder::check_counted(std::size_t i, std::uint32_t base, std::uint32_t count)
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
    }
}

#endif
