// xsampler/byte_dfa.hpp — a minimal DFA over bytes whose states are all live. (xsampler, BSD-3-Clause)
//
// byte_dfa: states 0 .. size()-1, start() == 0, every state live (an
// accepting state can be reached from it). next(s, b) is the state after
// byte b, or byte_dfa::dead (-1); a dense table of 256 int32 per state.
// distance(s): the bytes on a shortest path to an accepting state (0 when s
// accepts); completion_byte(s) the smallest byte one step closer. Minimal
// (Hopcroft's partition refinement, detail::regex::hopcroft, which
// detail/automaton_dfa.hpp uses too), so equal languages give DFAs of equal
// size. from_table / from_classes build the minimal DFA of a table of
// states (over 256 bytes, or over byte classes); byte_classes(): the bytes
// no state tells apart, as classes numbered by their smallest byte
// (minimisation and products work over these, not 256 bytes). Operations
// on DFAs: dfa_operations.hpp; a regular expression to a byte_dfa: regex.hpp.
#ifndef XSAMPLER_BYTE_DFA_HPP
#define XSAMPLER_BYTE_DFA_HPP

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "types.hpp"

namespace xsampler
{
    class byte_dfa
    {
    public:
        static constexpr std::int32_t dead = -1;

        std::int32_t start() const noexcept { return 0; }
        std::int32_t next(std::int32_t state, unsigned char byte) const noexcept
        {
            return m_next[std::size_t(state) * 256 + byte];
        }
        bool accepting(std::int32_t state) const noexcept { return m_distance[std::size_t(state)] == 0; }
        std::size_t size() const noexcept { return m_distance.size(); }
        std::size_t distance(std::int32_t state) const noexcept { return m_distance[std::size_t(state)]; }
        /// The smallest byte one step closer to an accepting state; an
        /// accepting state (or one outside the DFA): invalid_parameter.
        unsigned char completion_byte(std::int32_t state) const
        {
            if (state < 0 || std::size_t(state) >= size() || accepting(state))
            {
                throw invalid_parameter("byte_dfa::completion_byte: state " + std::to_string(state) +
                                        (state < 0 || std::size_t(state) >= size() ? " is not a state of the DFA"
                                                                                   : " is accepting"));
            }
            for (unsigned b = 0; b < 256; ++b)
            {
                const std::int32_t t = next(state, static_cast<unsigned char>(b));
                if (t != dead && m_distance[std::size_t(t)] + 1 == m_distance[std::size_t(state)])
                {
                    return static_cast<unsigned char>(b);
                }
            }
            return 0;  // unreachable: a live non-accepting state has a successor one step closer
        }
        /// The state after the bytes from `state`, or dead.
        std::int32_t walk(std::int32_t state, std::string_view bytes) const noexcept
        {
            for (const char c : bytes)
            {
                if (state == dead)
                {
                    break;
                }
                state = next(state, static_cast<unsigned char>(c));
            }
            return state;
        }
        /// Whether the DFA accepts the whole text (none when it accepts nothing:
        /// no state 0 to start from).
        bool matches(std::string_view text) const noexcept
        {
            if (size() == 0)
            {
                return false;
            }
            const std::int32_t s = walk(start(), text);
            return s != dead && accepting(s);
        }

        /// The minimal DFA of a table of n states (n x 256 targets, dead
        /// for none; state 0 the start) with their accepting flags: states
        /// that reach no accepting one dropped, the rest minimised and
        /// numbered breadth first; size() == 0 when it accepts nothing.
        static byte_dfa from_table(std::vector<std::int32_t> table, const std::vector<bool>& accepting);
        /// The same over byte classes: a table of n x classes targets, where
        /// byte b reads column class_of[b] (< classes). Minimisation then
        /// costs the classes, not 256, per state.
        static byte_dfa from_classes(std::vector<std::int32_t> table, const std::vector<bool>& accepting,
                                     const std::array<std::uint16_t, 256>& class_of, std::size_t classes);
        /// The bytes no state tells apart, as classes numbered by their
        /// smallest byte: class_of and the number of classes.
        std::pair<std::array<std::uint16_t, 256>, std::size_t> byte_classes() const;

    private:
        std::vector<std::int32_t> m_next;         // size() x 256
        std::vector<std::uint32_t> m_distance;    // size()
    };

    namespace detail::regex
    {
        /// Hopcroft's partition refinement over a complete DFA of n states
        /// (table n x symbols, entries in [0, n)); returns each state's block,
        /// the blocks of equivalent states. Also minimises the grammar's rule
        /// DFAs (detail/automaton.hpp: byte classes and rule symbols).
        inline std::vector<std::int32_t> hopcroft(const std::vector<std::int32_t>& table, std::size_t n,
                                                  const std::vector<bool>& accept, std::size_t symbols = 256)
        {
            // inverse transitions per byte, CSR: inv_start[c * (n + 1) + q] ..
            std::vector<std::uint32_t> inv_start(symbols * (n + 1), 0);
            std::vector<std::int32_t> inv(symbols * n);
            for (std::size_t p = 0; p < n; ++p)
            {
                for (std::size_t c = 0; c < symbols; ++c)
                {
                    ++inv_start[c * (n + 1) + std::size_t(table[p * symbols + c]) + 1];
                }
            }
            for (std::size_t c = 0; c < symbols; ++c)
            {
                std::uint32_t* s = &inv_start[c * (n + 1)];
                for (std::size_t q = 0; q < n; ++q)
                {
                    s[q + 1] += s[q];
                }
            }
            {
                std::vector<std::uint32_t> fill(inv_start);
                for (std::size_t p = 0; p < n; ++p)
                {
                    for (std::size_t c = 0; c < symbols; ++c)
                    {
                        const std::size_t q = std::size_t(table[p * symbols + c]);
                        inv[c * n + fill[c * (n + 1) + q]++] = std::int32_t(p);
                    }
                }
            }
            // blocks: elems[first[b] .. first[b] + count[b])
            std::vector<std::int32_t> elems(n), where(n), block(n);
            std::vector<std::uint32_t> first, count, marked;
            std::size_t k = 0;
            for (int pass = 0; pass < 2; ++pass)
            {
                const std::size_t from = k;
                for (std::size_t q = 0; q < n; ++q)
                {
                    if (accept[q] == (pass == 0))
                    {
                        elems[k] = std::int32_t(q);
                        where[q] = std::int32_t(k);
                        block[q] = std::int32_t(first.size());
                        ++k;
                    }
                }
                if (k > from)
                {
                    first.push_back(std::uint32_t(from));
                    count.push_back(std::uint32_t(k - from));
                    marked.push_back(0);
                }
            }
            std::vector<std::pair<std::uint32_t, std::uint32_t>> work;  // (block, byte)
            std::vector<std::uint8_t> in_work(first.size() * symbols, 0);  // by block, then byte
            auto push = [&](std::uint32_t b, std::uint32_t c) {
                if (!in_work[b * symbols + c])
                {
                    in_work[b * symbols + c] = 1;
                    work.emplace_back(b, c);
                }
            };
            // (of the first two blocks the smaller one splits as both would)
            const std::uint32_t least = first.size() == 2 && count[1] < count[0] ? 1 : 0;
            for (std::uint32_t c = 0; c < symbols && !first.empty(); ++c)
            {
                push(least, c);
            }
            std::vector<std::int32_t> splitter, touched;
            while (!work.empty())
            {
                const auto [b, c] = work.back();
                work.pop_back();
                in_work[b * symbols + c] = 0;
                splitter.assign(elems.begin() + first[b], elems.begin() + first[b] + count[b]);
                touched.clear();
                for (const std::int32_t q : splitter)
                {
                    const std::uint32_t* s = &inv_start[c * (n + 1) + std::size_t(q)];
                    for (std::uint32_t i = s[0]; i < s[1]; ++i)
                    {
                        const std::int32_t p = inv[c * n + i];
                        const std::uint32_t y = std::uint32_t(block[std::size_t(p)]);
                        // move p to the marked front of its block
                        const std::uint32_t pos = std::uint32_t(where[std::size_t(p)]);
                        const std::uint32_t front = first[y] + marked[y];
                        if (pos < front)
                        {
                            continue;  // already marked
                        }
                        if (marked[y] == 0)
                        {
                            touched.push_back(std::int32_t(y));
                        }
                        std::swap(elems[pos], elems[front]);
                        where[std::size_t(elems[pos])] = std::int32_t(pos);
                        where[std::size_t(elems[front])] = std::int32_t(front);
                        ++marked[y];
                    }
                }
                for (const std::int32_t yi : touched)
                {
                    const std::uint32_t y = std::uint32_t(yi);
                    const std::uint32_t m = marked[y];
                    marked[y] = 0;
                    if (m == count[y])
                    {
                        continue;
                    }
                    // split: the marked front stays y, the rest becomes z
                    const std::uint32_t z = std::uint32_t(first.size());
                    first.push_back(first[y] + m);
                    count.push_back(count[y] - m);
                    marked.push_back(0);
                    count[y] = m;
                    for (std::uint32_t i = first[z]; i < first[z] + count[z]; ++i)
                    {
                        block[std::size_t(elems[i])] = std::int32_t(z);
                    }
                    in_work.resize(in_work.size() + symbols, 0);
                    for (std::uint32_t cc = 0; cc < symbols; ++cc)
                    {
                        if (in_work[y * symbols + cc])
                        {
                            push(z, cc);
                        }
                        else
                        {
                            push(count[y] <= count[z] ? y : z, cc);
                        }
                    }
                }
            }
            return block;
        }
    }

    namespace detail::regex
    {
        /// The classes of bytes whose columns agree in a table of n states
        /// over 256 bytes, numbered by their smallest byte.
        inline std::pair<std::array<std::uint16_t, 256>, std::size_t> column_classes(const std::int32_t* table,
                                                                                     std::size_t n)
        {
            std::array<std::uint64_t, 256> hash{};
            for (std::size_t s = 0; s < n; ++s)
            {
                for (unsigned b = 0; b < 256; ++b)
                {
                    hash[b] = hash[b] * 0x9E3779B97F4A7C15ull + std::uint64_t(std::uint32_t(table[s * 256 + b]) + 1);
                }
            }
            const auto same = [&](unsigned a, unsigned b) {
                for (std::size_t s = 0; s < n; ++s)
                {
                    if (table[s * 256 + a] != table[s * 256 + b])
                    {
                        return false;
                    }
                }
                return true;
            };
            std::array<std::uint16_t, 256> class_of{};
            std::vector<unsigned> first;  // each class's smallest byte
            for (unsigned b = 0; b < 256; ++b)
            {
                std::size_t c = 0;
                while (c < first.size() && !(hash[first[c]] == hash[b] && same(first[c], b)))
                {
                    ++c;
                }
                if (c == first.size())
                {
                    first.push_back(b);
                }
                class_of[b] = std::uint16_t(c);
            }
            return {class_of, first.size()};
        }
    }

    namespace detail::regex
    {
        /// Classes for a table built over some bytes alone: each listed byte
        /// its own class (in byte order), every other byte one more, last.
        inline std::pair<std::array<std::uint16_t, 256>, std::size_t> listed_classes(const std::array<bool, 256>& listed)
        {
            std::array<std::uint16_t, 256> class_of{};
            std::size_t k = 0;
            for (unsigned b = 0; b < 256; ++b)
            {
                class_of[b] = listed[b] ? std::uint16_t(k++) : std::uint16_t(0);
            }
            for (unsigned b = 0; b < 256; ++b)
            {
                class_of[b] = listed[b] ? class_of[b] : std::uint16_t(k);
            }
            return {class_of, k + 1};
        }
    }

    inline std::pair<std::array<std::uint16_t, 256>, std::size_t> byte_dfa::byte_classes() const
    {
        return detail::regex::column_classes(m_next.data(), size());
    }

    inline byte_dfa byte_dfa::from_table(std::vector<std::int32_t> table, const std::vector<bool>& accepting)
    {
        const std::size_t n = accepting.size();
        const auto [class_of, classes] = detail::regex::column_classes(table.data(), n);
        std::vector<std::int32_t> columns(n * classes);
        for (std::size_t s = 0; s < n; ++s)
        {
            for (unsigned b = 0; b < 256; ++b)
            {
                columns[s * classes + class_of[b]] = table[s * 256 + b];
            }
        }
        table.clear();
        table.shrink_to_fit();
        return from_classes(std::move(columns), accepting, class_of, classes);
    }

    inline byte_dfa byte_dfa::from_classes(std::vector<std::int32_t> table, const std::vector<bool>& accepting,
                                           const std::array<std::uint16_t, 256>& class_of, std::size_t classes)
    {
        using namespace detail::regex;
        const std::size_t n = accepting.size();
        const std::size_t k = classes;
        const std::vector<bool>& accepts = accepting;

        // Live states: those that reach an accepting one (reverse BFS).
        std::vector<std::vector<std::int32_t>> reverse(n);
        for (std::size_t s = 0; s < n; ++s)
        {
            for (std::size_t c = 0; c < k; ++c)
            {
                const std::int32_t t = table[s * k + c];
                if (t >= 0 && (reverse[std::size_t(t)].empty() || reverse[std::size_t(t)].back() != std::int32_t(s)))
                {
                    reverse[std::size_t(t)].push_back(std::int32_t(s));
                }
            }
        }
        std::vector<bool> live(std::max<std::size_t>(n, 1), false);
        std::deque<std::int32_t> queue;
        for (std::size_t s = 0; s < n; ++s)
        {
            if (accepts[s])
            {
                live[s] = true;
                queue.push_back(std::int32_t(s));
            }
        }
        while (!queue.empty())
        {
            const std::int32_t t = queue.front();
            queue.pop_front();
            for (const std::int32_t s : reverse[std::size_t(t)])
            {
                if (!live[std::size_t(s)])
                {
                    live[std::size_t(s)] = true;
                    queue.push_back(s);
                }
            }
        }
        if (n == 0 || !live[0])
        {
            return byte_dfa{};
        }

        // Complete DFA over the live states plus a sink (index m) for dead.
        std::vector<std::int32_t> live_id(n, -1);
        std::size_t m = 0;
        for (std::size_t s = 0; s < n; ++s)
        {
            if (live[s])
            {
                live_id[s] = std::int32_t(m++);
            }
        }
        std::vector<std::int32_t> complete((m + 1) * k, std::int32_t(m));
        std::vector<bool> complete_accept(m + 1, false);
        for (std::size_t s = 0; s < n; ++s)
        {
            if (!live[s])
            {
                continue;
            }
            const std::size_t i = std::size_t(live_id[s]);
            complete_accept[i] = accepts[s];
            for (std::size_t c = 0; c < k; ++c)
            {
                const std::int32_t t = table[s * k + c];
                if (t >= 0 && live[std::size_t(t)])
                {
                    complete[i * k + c] = live_id[std::size_t(t)];
                }
            }
        }
        table.clear();
        table.shrink_to_fit();
        reverse.clear();
        const std::vector<std::int32_t> block = hopcroft(complete, m + 1, complete_accept, k);

        // Number the blocks breadth first from the start, bytes ascending; the
        // sink's block is dead (the sink is alone in it: every other state is live).
        const std::int32_t sink_block = block[m];
        std::vector<std::int32_t> number(m + 1, -1);
        std::vector<std::int32_t> representative;
        queue.clear();
        number[std::size_t(block[0])] = 0;
        representative.push_back(0);
        queue.push_back(0);
        byte_dfa dfa;
        while (!queue.empty())
        {
            const std::int32_t rep = queue.front();
            queue.pop_front();
            for (unsigned b = 0; b < 256; ++b)
            {
                const std::int32_t to = complete[std::size_t(rep) * k + class_of[b]];
                const std::int32_t bt = block[std::size_t(to)];
                if (bt != sink_block && number[std::size_t(bt)] < 0)
                {
                    number[std::size_t(bt)] = std::int32_t(representative.size());
                    representative.push_back(to);
                    queue.push_back(to);
                }
            }
        }
        const std::size_t size = representative.size();
        dfa.m_next.assign(size * 256, byte_dfa::dead);
        std::vector<std::vector<std::int32_t>> rev(size);
        for (std::size_t s = 0; s < size; ++s)
        {
            for (unsigned b = 0; b < 256; ++b)
            {
                const std::int32_t bt = block[std::size_t(complete[std::size_t(representative[s]) * k + class_of[b]])];
                if (bt != sink_block)
                {
                    const std::int32_t t = number[std::size_t(bt)];
                    dfa.m_next[s * 256 + b] = t;
                    if (rev[std::size_t(t)].empty() || rev[std::size_t(t)].back() != std::int32_t(s))
                    {
                        rev[std::size_t(t)].push_back(std::int32_t(s));
                    }
                }
            }
        }
        // Distances: reverse BFS from the accepting states.
        const std::uint32_t unset = ~std::uint32_t(0);
        dfa.m_distance.assign(size, unset);
        for (std::size_t s = 0; s < size; ++s)
        {
            if (complete_accept[std::size_t(representative[s])])
            {
                dfa.m_distance[s] = 0;
                queue.push_back(std::int32_t(s));
            }
        }
        while (!queue.empty())
        {
            const std::int32_t t = queue.front();
            queue.pop_front();
            for (const std::int32_t s : rev[std::size_t(t)])
            {
                if (dfa.m_distance[std::size_t(s)] == unset)
                {
                    dfa.m_distance[std::size_t(s)] = dfa.m_distance[std::size_t(t)] + 1;
                    queue.push_back(s);
                }
            }
        }
        return dfa;
    }
}

#endif
