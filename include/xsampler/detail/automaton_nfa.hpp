// xsampler/detail/automaton_nfa.hpp — each automaton rule's body as an NFA over byte sets and rule symbols. (xsampler, BSD-3-Clause)
//
// automaton_builder's rules (rule_of: one per grammar rule kept; counted_of:
// a large bounded repetition as a counted rule; units_rule_of: a counted
// lexeme's rule) and their NFAs (build_nfa, emit: sequence, choice,
// repetition, inlined rules, lexemes as their DFA's arcs). Byte sets are
// interned (set_index) for the byte classes of automaton_dfa.hpp.
#ifndef XSAMPLER_DETAIL_AUTOMATON_NFA_HPP
#define XSAMPLER_DETAIL_AUTOMATON_NFA_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "automaton_builder.hpp"

namespace xsampler
{
    namespace detail
    {
        /// The automaton rule of grammar rule r (queued if new).
        inline std::uint32_t automaton_builder::rule_of(rule_id r)
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
        inline std::uint32_t automaton_builder::counted_of(expr_id e, std::size_t min, std::size_t max, rule_id source)
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
        inline std::uint32_t automaton_builder::units_rule_of(std::uint32_t l, rule_id source)
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

        inline std::int32_t automaton_builder::set_index(const xsampler::byte_set& s)
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

        inline std::uint64_t automaton_builder::hash(const xsampler::byte_set& s)
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

        inline std::uint32_t automaton_builder::add_state(nfa& n, rule_id source)
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

        inline void automaton_builder::build_nfa(std::size_t i)
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
        inline std::uint32_t automaton_builder::emit(nfa& n, expr_id e, std::uint32_t in, rule_id source, std::vector<rule_id>& inlining)
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

        inline const std::vector<automaton_builder::lexeme_arc>& automaton_builder::arcs_of(std::uint32_t lexeme)
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
        inline std::uint32_t automaton_builder::emit_lexeme(nfa& n, std::uint32_t l, std::uint32_t in, rule_id source)
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

        inline std::uint32_t automaton_builder::star(nfa& n, expr_id item, std::uint32_t in, rule_id source, std::vector<rule_id>& inlining)
        {
            const std::uint32_t loop = add_state(n, source);
            n.out[in].push_back({loop, -1, -1});
            const std::uint32_t end = emit(n, item, loop, source, inlining);
            n.out[end].push_back({loop, -1, -1});
            return loop;
        }
    }
}

#endif
