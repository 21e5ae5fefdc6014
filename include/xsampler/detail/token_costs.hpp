// xsampler/detail/token_costs.hpp — what finishing each automaton state costs in a vocabulary's tokens. (xsampler, BSD-3-Clause)
//
// token_costs(automaton, index).rest(state, count): the tokens that spell
// the rest of the state's rule along its canonical path, for budgets
// (constraint.hpp). The canonical path of a state is a shortest way to an
// accepting state of its DFA (rules at their shortest texts; ties: the
// smallest byte, then the first rule edge), so the canonical paths of a DFA
// form a tree. It is spelt in segments:
//   - a run of bytes (the path up to the next rule edge, or the end) in the
//     fewest tokens that spell it,
//   - each rule edge on it as that rule's own cost from its start,
//   - a counted rule whose iteration's canonical path is bytes alone (a
//     string's char, a digit) as one run over all the iterations still
//     needed: one table per rule, fewest(last L bytes of y^n), by a reverse
//     pass over the periodic text y^min (at most 2^20 bytes; beyond, or when
//     an iteration holds a rule edge, each iteration is a segment of its own).
//     An iteration of one byte repeats the byte the vocabulary spells in the
//     longest tokens (GPT-2: "----...", 64 bytes a token), not the smallest.
// Consistency, which budgets need: the first token w of a segment's fewest
// spelling leads (through the matcher) to a state whose cost is one less,
// because its canonical path is the rest of the old one (a tree), its
// segments the old ones' tails. So "a completion fits in n tokens" at one
// step means some token leads to a state where one fits in n - 1.
// Needs every single byte to be a token (then every run can be spelt).
#ifndef XSAMPLER_DETAIL_TOKEN_COSTS_HPP
#define XSAMPLER_DETAIL_TOKEN_COSTS_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "../vocabulary.hpp"
#include "automaton.hpp"

namespace xsampler
{
    namespace detail
    {
        class token_costs
        {
        public:
            static constexpr std::uint64_t infinite = automaton::infinite;
            static constexpr std::size_t max_periodic = std::size_t(1) << 20;

            token_costs(const automaton& a, const vocabulary_index& ix) : m_a(a), m_ix(ix)
            {
                if (!ix.all_bytes())
                {
                    throw invalid_parameter("token_costs: a budget needs every single byte to be a token");
                }
                const std::size_t n = a.states.size();
                canonical();
                runs();
                m_F.assign(n, unknown);
                m_mark.assign(n, 0);
                periodic();
                for (std::uint32_t s = 0; s < n; ++s)
                {
                    finish(s);
                }
                m_mark.clear();
            }

            /// The tokens that spell the rest of state s's rule with `count` iterations done.
            std::uint64_t rest(std::uint32_t s, std::uint32_t count) const
            {
                const auto& st = m_a.states[s];
                const auto& r = m_a.rules[st.rule];
                if (!r.counted)
                {
                    return m_F[s];
                }
                const std::size_t need = r.min > count ? r.min - count : 0;  // counting the current one
                const auto& p = m_periodic[st.rule];
                if (s == r.start)
                {
                    if (!p.g.empty())
                    {
                        return p.g[need * p.y.size()];
                    }
                    return automaton::saturated_mul(m_F[s], need);
                }
                const std::size_t after = need > 0 ? need - 1 : 0;  // once this iteration is done
                if (!p.g.empty())
                {
                    if (m_phase[s] >= 0)
                    {
                        return p.g[(after + 1) * p.y.size() - std::size_t(m_phase[s])];
                    }
                    if (m_pure[s])
                    {
                        return off_path(s, p, after);
                    }
                    return automaton::saturated_add(m_F[s], p.g[after * p.y.size()]);
                }
                return automaton::saturated_add(m_F[s], automaton::saturated_mul(m_F[r.start], after));
            }

        private:
            static constexpr std::uint64_t unknown = infinite - 1;

            struct table
            {
                std::string y;               // the canonical iteration
                std::vector<std::uint32_t> g;  // g[L]: fewest tokens of the last L bytes of y^min
            };

            /// The canonical next symbol of each state: -1 stop, 0..255 a byte,
            /// 256 + e a rule edge e.
            void canonical()
            {
                const automaton& a = m_a;
                const std::size_t n = a.states.size();
                std::vector<int> rep(a.classes, 256);  // each class's smallest byte
                for (int b = 255; b >= 0; --b)
                {
                    rep[a.byte_class[std::size_t(b)]] = b;
                }
                m_canon.assign(n, -1);
                for (std::uint32_t s = 0; s < n; ++s)
                {
                    const auto& st = a.states[s];
                    if (st.accepting)
                    {
                        continue;
                    }
                    int best = 256;
                    for (std::uint32_t c = 0; c < a.classes; ++c)
                    {
                        const std::int32_t t = a.table[std::size_t(s) * a.classes + c];
                        if (t >= 0 && a.states[std::size_t(t)].dist + 1 == st.dist && rep[c] < best)
                        {
                            best = rep[c];
                        }
                    }
                    if (best < 256)
                    {
                        m_canon[s] = best;
                        continue;
                    }
                    // a rule edge: one that reads something first, if any does
                    std::int64_t pick = -1;
                    for (int pass = 0; pass < 2 && pick < 0; ++pass)
                    {
                        for (std::uint32_t e = st.edges_begin; e < st.edges_end; ++e)
                        {
                            const auto& ed = a.edges[e];
                            const std::uint64_t m = a.rules[ed.rule].minlen;
                            if ((pass == 0) == (m == 0))
                            {
                                continue;
                            }
                            if (automaton::saturated_add(m, a.states[ed.target].dist) == st.dist)
                            {
                                pick = e;
                                break;
                            }
                        }
                    }
                    m_canon[s] = pick < 0 ? -1 : int(256 + pick);
                }
            }

            std::uint32_t next_on_run(std::uint32_t s) const
            {
                return std::uint32_t(m_a.next(s, static_cast<unsigned char>(m_canon[s])));
            }

            /// m_run[s]: the fewest tokens of s's run (0 if it is empty);
            /// m_end[s]: the state the run ends in. States by increasing
            /// distance: a run's next state is one closer.
            void runs()
            {
                const automaton& a = m_a;
                const std::size_t n = a.states.size();
                std::vector<std::uint32_t> order(n);
                for (std::uint32_t s = 0; s < n; ++s)
                {
                    order[s] = s;
                }
                std::sort(order.begin(), order.end(),
                          [&](std::uint32_t x, std::uint32_t y) { return a.states[x].dist < a.states[y].dist; });
                m_run.assign(n, 0);
                m_end.assign(n, 0);
                for (const std::uint32_t s : order)
                {
                    if (m_canon[s] < 0 || m_canon[s] >= 256)
                    {
                        m_end[s] = s;
                        continue;
                    }
                    m_end[s] = m_end[next_on_run(s)];
                    std::uint64_t best = infinite;
                    std::uint32_t at = vocabulary_index::none;
                    std::uint32_t t = s;
                    for (std::size_t len = 0; len < m_ix.longest() && m_canon[t] >= 0 && m_canon[t] < 256; ++len)
                    {
                        const std::int32_t c = m_ix.child(at, static_cast<unsigned char>(m_canon[t]));
                        if (c < 0)
                        {
                            break;
                        }
                        at = std::uint32_t(c);
                        t = next_on_run(t);
                        if (m_ix.has_token(at))
                        {
                            best = std::min(best, 1 + m_run[t]);
                        }
                    }
                    m_run[s] = best;
                }
            }

            /// Counted rules whose iteration is bytes alone: the periodic table,
            /// the phase of the states on the iteration's canonical path, and
            /// which states reach the iteration's end by bytes.
            void periodic()
            {
                const automaton& a = m_a;
                m_periodic.assign(a.rules.size(), {});
                m_phase.assign(a.states.size(), -1);
                m_pure.assign(a.states.size(), 0);
                for (std::uint32_t s = 0; s < a.states.size(); ++s)
                {
                    m_pure[s] = a.states[m_end[s]].accepting;
                }
                for (std::uint32_t r = 0; r < a.rules.size(); ++r)
                {
                    const auto& info = a.rules[r];
                    if (!info.counted || !a.states[m_end[info.start]].accepting || info.start == m_end[info.start] ||
                        info.min == 0)
                    {
                        continue;
                    }
                    table& t = m_periodic[r];
                    std::vector<std::uint32_t> path;  // the states after each byte of y
                    const int one = single_byte(info.start);
                    if (one >= 0)
                    {
                        t.y = std::string(1, char(one));
                        path.push_back(std::uint32_t(a.next(info.start, static_cast<unsigned char>(one))));
                    }
                    else
                    {
                        for (std::uint32_t s = info.start; m_canon[s] >= 0 && m_canon[s] < 256; s = next_on_run(s))
                        {
                            t.y += char(m_canon[s]);
                            path.push_back(next_on_run(s));
                        }
                    }
                    if (info.min > max_periodic / t.y.size())
                    {
                        t = table();  // too long: each iteration a segment
                        continue;
                    }
                    for (std::size_t i = 0; i < path.size(); ++i)
                    {
                        m_phase[path[i]] = std::int32_t(i + 1);
                    }
                    fill(t, info.min * t.y.size());
                }
            }
            /// An iteration of one byte: of the bytes that end it at once, the one
            /// whose repetition the vocabulary spells in the longest token
            /// (then the smallest); -1 if none ends it in one byte.
            int single_byte(std::uint32_t start) const
            {
                int best = -1;
                std::size_t best_len = 0;
                for (int b = 0; b < 256; ++b)
                {
                    const std::int32_t t = m_a.next(start, static_cast<unsigned char>(b));
                    if (t < 0 || !m_a.states[std::size_t(t)].accepting)
                    {
                        continue;
                    }
                    std::size_t len = 0;
                    for (std::uint32_t at = vocabulary_index::none; len < m_ix.longest(); ++len)
                    {
                        const std::int32_t c = m_ix.child(at, static_cast<unsigned char>(b));
                        if (c < 0)
                        {
                            break;
                        }
                        at = std::uint32_t(c);
                    }
                    if (len > best_len)
                    {
                        best = b;
                        best_len = len;
                    }
                }
                return best;
            }

            /// g[L] for L up to `length`.
            void fill(table& t, std::size_t length) const
            {
                const std::size_t k = t.y.size();
                // lens[phase]: the lengths of the tokens that start at that phase of y^inf
                std::vector<std::vector<std::uint16_t>> lens(k);
                for (std::size_t phase = 0; phase < k; ++phase)
                {
                    std::uint32_t at = vocabulary_index::none;
                    for (std::size_t len = 1; len <= m_ix.longest(); ++len)
                    {
                        const std::int32_t c = m_ix.child(at, static_cast<unsigned char>(t.y[(phase + len - 1) % k]));
                        if (c < 0)
                        {
                            break;
                        }
                        at = std::uint32_t(c);
                        if (m_ix.has_token(at))
                        {
                            lens[phase].push_back(std::uint16_t(len));
                        }
                    }
                }
                t.g.assign(length + 1, 0);
                for (std::size_t L = 1; L <= length; ++L)
                {
                    const std::size_t phase = (k - L % k) % k;
                    std::uint32_t best = ~std::uint32_t(0);
                    for (const std::uint16_t len : lens[phase])
                    {
                        if (len <= L)
                        {
                            best = std::min(best, 1 + t.g[L - len]);
                        }
                    }
                    t.g[L] = best;
                }
            }

            /// fewest(run(s) + y^after) for a state off the iteration's canonical
            /// path whose run still ends the iteration.
            std::uint64_t off_path(std::uint32_t s, const table& p, std::size_t after) const
            {
                std::string w;
                for (std::uint32_t t = s; m_canon[t] >= 0 && m_canon[t] < 256; t = next_on_run(t))
                {
                    w += char(m_canon[t]);
                }
                const std::size_t k = p.y.size();
                const std::size_t tail = after * k;
                std::vector<std::uint64_t> best(w.size() + 1, infinite);
                best[w.size()] = p.g[tail];
                for (std::size_t i = w.size(); i-- > 0;)
                {
                    std::uint32_t at = vocabulary_index::none;
                    for (std::size_t len = 1; len <= m_ix.longest(); ++len)
                    {
                        const std::size_t pos = i + len - 1;  // in w + y^inf
                        if (pos >= w.size() && pos - w.size() >= tail)
                        {
                            break;
                        }
                        const char b = pos < w.size() ? w[pos] : p.y[(pos - w.size()) % k];
                        const std::int32_t c = m_ix.child(at, static_cast<unsigned char>(b));
                        if (c < 0)
                        {
                            break;
                        }
                        at = std::uint32_t(c);
                        if (!m_ix.has_token(at))
                        {
                            continue;
                        }
                        const std::size_t to = i + len;
                        best[i] = std::min(best[i], 1 + (to <= w.size() ? best[to] : p.g[tail - (to - w.size())]));
                    }
                }
                return best[0];
            }

            /// F(s): finishing s's DFA (a counted rule: its current iteration)
            /// along the canonical path; rule edges at their own cost from
            /// their start. Memoised; an explicit stack.
            void finish(std::uint32_t s0)
            {
                if (m_F[s0] != unknown)
                {
                    return;
                }
                std::vector<std::uint32_t> stack{s0};
                while (!stack.empty())
                {
                    const std::uint32_t s = stack.back();
                    const std::uint32_t q = m_end[s];
                    std::uint64_t after = 0;
                    if (m_canon[q] >= 256)
                    {
                        const auto& ed = m_a.edges[std::size_t(m_canon[q] - 256)];
                        const std::uint32_t start = m_a.rules[ed.rule].start;
                        const bool ready = m_F[ed.target] != unknown && m_F[start] != unknown;
                        if (!ready)
                        {
                            if (m_mark[s])
                            {
                                throw invalid_parameter("token_costs: canonical paths in a cycle (a bug)");
                            }
                            m_mark[s] = 1;
                            if (m_F[ed.target] == unknown)
                            {
                                stack.push_back(ed.target);
                            }
                            if (m_F[start] == unknown)
                            {
                                stack.push_back(start);
                            }
                            continue;
                        }
                        after = automaton::saturated_add(rest(start, 0), m_F[ed.target]);
                    }
                    m_F[s] = std::min(automaton::saturated_add(m_run[s], after), unknown - 1);
                    stack.pop_back();
                }
            }

            const automaton& m_a;
            const vocabulary_index& m_ix;
            std::vector<int> m_canon;
            std::vector<std::uint64_t> m_run, m_F;
            std::vector<std::uint32_t> m_end;
            std::vector<table> m_periodic;
            std::vector<std::int32_t> m_phase;
            std::vector<std::uint8_t> m_pure, m_mark;
        };
    }
}

#endif
