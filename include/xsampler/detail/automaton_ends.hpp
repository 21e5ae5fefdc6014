// xsampler/detail/automaton_ends.hpp — what the automaton knows about ends: distances, follow sets, distinct bytes. (xsampler, BSD-3-Clause)
//
// automaton_builder's last passes: each state's shortest way to an end of
// its DFA (distances), the bytes that may come first after each rule ends
// (follows), and the bytes that may end a distinct item or begin its array
// (distinct_lasts). All are supersets where exactness would cost a search.
#ifndef XSAMPLER_DETAIL_AUTOMATON_ENDS_HPP
#define XSAMPLER_DETAIL_AUTOMATON_ENDS_HPP

#include <algorithm>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <queue>
#include <utility>
#include <vector>

#include "automaton_builder.hpp"

namespace xsampler
{
    namespace detail
    {
        /// dist: the shortest way from each state to an accepting state of its
        /// DFA, rule edges at their shortest text (Dijkstra backwards, per rule).
        inline void automaton_builder::distances()
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
        inline void automaton_builder::follows()
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
        inline void automaton_builder::distinct_lasts()
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
    }
}

#endif
