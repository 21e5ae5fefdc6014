// xsampler/dfa_operations.hpp — new byte_dfas from others: products, finite languages, code-point counts, enclosing. (xsampler, BSD-3-Clause)
//
// dfa_intersection / dfa_union / dfa_difference: products (more than
// max_states pairs before minimisation: invalid_parameter); dfa_of_texts
// and back (dfa_texts, when finite and few); dfa_code_points: texts of min
// to max code points; dfa_code_point_units: each state's unit flag for
// grammar::counted_lexeme; dfa_enclosed: open + text + close (a JSON
// string's quotes). Every result is minimal with every state live
// (byte_dfa.hpp).
#ifndef XSAMPLER_DFA_OPERATIONS_HPP
#define XSAMPLER_DFA_OPERATIONS_HPP

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "types.hpp"
#include "byte_dfa.hpp"

namespace xsampler
{
    /// The texts both DFAs accept (size() == 0 when none); a product of
    /// more than max_states states before minimisation is invalid_parameter.
    byte_dfa dfa_intersection(const byte_dfa& a, const byte_dfa& b, std::size_t max_states = 10000);
    /// The texts `a` accepts and `b` does not (size() == 0 when none; max_states as above).
    byte_dfa dfa_difference(const byte_dfa& a, const byte_dfa& b, std::size_t max_states = 10000);
    /// The texts a or b accepts (their product's pairs, a dead side a state
    /// of its own): more than max_states pairs is invalid_parameter.
    byte_dfa dfa_union(const byte_dfa& a, const byte_dfa& b, std::size_t max_states = 10000);
    /// Exactly these byte strings.
    byte_dfa dfa_of_texts(const std::vector<std::string>& texts);
    /// And back: a finite language's texts in byte order where at most `limit`
    /// (nullopt: more, or infinitely many).
    std::optional<std::vector<std::string>> dfa_texts(const byte_dfa& d, std::size_t limit);
    /// d's texts with none of a JSON string's forbidden bytes (", \\,
    /// 0x00-0x1f), as dfa_code_points reads them, with each state's unit
    /// flag for grammar::counted_lexeme: whether the byte it reads begins a
    /// code point (is no UTF-8 continuation byte). A state that reads both
    /// kinds (d is not UTF-8 by code points) is invalid_parameter.
    std::pair<byte_dfa, std::vector<std::uint8_t>> dfa_code_point_units(const byte_dfa& d);

    /// The texts open + t + close for each text t `d` accepts (a JSON
    /// string's quotes around its content: one lexeme, whose text loops are
    /// not accepting states); `d` reading `close` anywhere is invalid_parameter.
    byte_dfa dfa_enclosed(const byte_dfa& d, unsigned char open, unsigned char close);

    namespace detail::regex
    {
        /// The product of two DFAs, breadth first from their starts: a pair
        /// accepts when both do (intersection), when a does and b does not
        /// (difference; b's dead is then a state of its own that never
        /// accepts), or when either does (`either`: union; a's dead too).
        inline byte_dfa product(const byte_dfa& a, const byte_dfa& b, bool difference, std::size_t max_states,
                                bool either = false)
        {
            if (either && (a.size() == 0 || b.size() == 0))
            {
                return a.size() == 0 ? b : a;
            }
            if (a.size() == 0 || (b.size() == 0 && !difference))
            {
                return byte_dfa{};
            }
            const std::int64_t nb = std::int64_t(b.size()) + 1;  // b's dead as nb - 1
            const std::int64_t a_dead = std::int64_t(a.size());  // a's dead (either)
            const auto pair_of = [&](std::int32_t x, std::int32_t y) {
                return (x == byte_dfa::dead ? a_dead : std::int64_t(x)) * nb + (y == byte_dfa::dead ? nb - 1 : y);
            };
            std::unordered_map<std::int64_t, std::int32_t> index;
            std::vector<std::int64_t> pairs;
            std::vector<std::int32_t> table;
            std::vector<bool> accepting;
            const auto intern = [&](std::int64_t p) {
                const auto it = index.find(p);
                if (it != index.end())
                {
                    return it->second;
                }
                if (pairs.size() >= max_states)
                {
                    throw invalid_parameter("regex: the product of two automata has more than " +
                                            std::to_string(max_states) + " states");
                }
                const std::int32_t id = std::int32_t(pairs.size());
                index.emplace(p, id);
                pairs.push_back(p);
                return id;
            };
            // the bytes neither DFA tells apart read as one: a class is a pair of classes
            const auto [of_a, classes_a] = a.byte_classes();
            const auto [of_b, classes_b] = b.size() == 0 ? std::make_pair(std::array<std::uint16_t, 256>{}, std::size_t(1))
                                                         : b.byte_classes();
            std::array<std::uint16_t, 256> class_of{};
            std::vector<unsigned char> first;  // each class's smallest byte
            {
                std::vector<std::int32_t> joint(classes_a * classes_b, -1);
                for (unsigned c = 0; c < 256; ++c)
                {
                    std::int32_t& j = joint[std::size_t(of_a[c]) * classes_b + of_b[c]];
                    if (j < 0)
                    {
                        j = std::int32_t(first.size());
                        first.push_back(static_cast<unsigned char>(c));
                    }
                    class_of[c] = std::uint16_t(j);
                }
            }
            const std::size_t k = first.size();
            intern(pair_of(a.start(), b.size() == 0 ? byte_dfa::dead : b.start()));
            for (std::size_t d = 0; d < pairs.size(); ++d)
            {
                const std::int64_t xx = pairs[d] / nb;
                const std::int32_t x = xx == a_dead ? byte_dfa::dead : std::int32_t(xx);
                const std::int64_t yy = pairs[d] % nb;
                const std::int32_t y = yy == nb - 1 ? byte_dfa::dead : std::int32_t(yy);
                const bool a_accepts = x != byte_dfa::dead && a.accepting(x);
                const bool b_accepts = y != byte_dfa::dead && b.accepting(y);
                accepting.push_back(either ? a_accepts || b_accepts : a_accepts && (difference ? !b_accepts : b_accepts));
                table.resize((d + 1) * k, byte_dfa::dead);
                for (std::size_t c = 0; c < k; ++c)
                {
                    const std::int32_t tx = x == byte_dfa::dead ? byte_dfa::dead : a.next(x, first[c]);
                    const std::int32_t ty = y == byte_dfa::dead ? byte_dfa::dead : b.next(y, first[c]);
                    if (either ? tx == byte_dfa::dead && ty == byte_dfa::dead : tx == byte_dfa::dead || (ty == byte_dfa::dead && !difference))
                    {
                        continue;
                    }
                    table[d * k + c] = intern(pair_of(tx, ty));
                }
            }
            return byte_dfa::from_classes(std::move(table), accepting, class_of, k);
        }
    }

    inline byte_dfa dfa_intersection(const byte_dfa& a, const byte_dfa& b, std::size_t max_states)
    {
        return detail::regex::product(a, b, false, max_states);
    }
    inline byte_dfa dfa_union(const byte_dfa& a, const byte_dfa& b, std::size_t max_states)
    {
        return detail::regex::product(a, b, false, max_states, true);
    }
    inline byte_dfa dfa_difference(const byte_dfa& a, const byte_dfa& b, std::size_t max_states)
    {
        return detail::regex::product(a, b, true, max_states);
    }

    /// The texts of d of min to max code points (a byte that is no UTF-8
    /// continuation byte begins one; max = SIZE_MAX: no maximum), none with
    /// a JSON string's forbidden bytes (", \\, 0x00-0x1f): d's product with
    /// a count of code points, dropped once it is settled (at least min,
    /// and the longest way on from the state, in code points, keeps it
    /// within max), so a bounded pattern far from max costs no copies.
    /// More than max_states pairs: invalid_parameter.
    inline byte_dfa dfa_code_points(const byte_dfa& d, std::size_t min, std::size_t max, std::size_t max_states)
    {
        const std::size_t n = d.size();
        if (n == 0)
        {
            return byte_dfa{};
        }
        const std::uint64_t endless = ~std::uint64_t(0);
        const auto begins = [](unsigned b) { return (b & 0xC0u) != 0x80u ? 1u : 0u; };
        const auto readable = [](unsigned b) { return b >= 0x20 && b != '"' && b != '\\'; };
        // the longest way on from each state (endless past a cycle), depth first
        std::vector<std::uint64_t> longest(n, 0);
        {
            std::vector<std::uint8_t> color(n, 0);  // 1 on the path, 2 done
            std::vector<std::pair<std::int32_t, unsigned>> path{{d.start(), 0u}};
            color[std::size_t(d.start())] = 1;
            while (!path.empty())
            {
                auto& [s, b] = path.back();
                if (b == 256)
                {
                    color[std::size_t(s)] = 2;
                    const std::int32_t done = s;
                    path.pop_back();
                    if (!path.empty())
                    {
                        const auto& [p, pb] = path.back();
                        const std::uint64_t l = longest[std::size_t(done)];
                        const std::uint64_t via = l == endless ? endless : l + begins(pb - 1);
                        longest[std::size_t(p)] = std::max(longest[std::size_t(p)], via);
                    }
                    continue;
                }
                const unsigned byte = b++;
                const std::int32_t t = readable(byte) ? d.next(s, static_cast<unsigned char>(byte)) : byte_dfa::dead;
                if (t == byte_dfa::dead)
                {
                    continue;
                }
                if (color[std::size_t(t)] == 1)
                {
                    longest[std::size_t(s)] = endless;  // a cycle
                }
                else if (color[std::size_t(t)] == 2)
                {
                    const std::uint64_t l = longest[std::size_t(t)];
                    longest[std::size_t(s)] = std::max(longest[std::size_t(s)], l == endless ? endless : l + begins(byte));
                }
                else
                {
                    color[std::size_t(t)] = 1;
                    path.push_back({t, 0u});
                }
            }
        }
        const std::size_t unbounded = ~std::size_t(0);
        const std::uint64_t settled = std::uint64_t(max == unbounded ? min : max) + 1;  // the count's value once settled
        const auto canonical = [&](std::int32_t s, std::uint64_t c) {
            if (c >= min &&
                (max == unbounded || (longest[std::size_t(s)] != endless && c + longest[std::size_t(s)] <= max)))
            {
                return settled;
            }
            return c;
        };
        std::unordered_map<std::uint64_t, std::int32_t> index;
        std::vector<std::pair<std::int32_t, std::uint64_t>> pairs;
        std::vector<std::int32_t> table;
        std::vector<bool> accepting;
        const auto intern = [&](std::int32_t s, std::uint64_t c) {
            const std::uint64_t key = std::uint64_t(s) * (settled + 1) + c;
            const auto it = index.find(key);
            if (it != index.end())
            {
                return it->second;
            }
            if (pairs.size() >= max_states)
            {
                throw invalid_parameter("regex: the product of two automata has more than " + std::to_string(max_states) +
                                        " states");
            }
            const auto id = std::int32_t(pairs.size());
            index.emplace(key, id);
            pairs.push_back({s, c});
            return id;
        };
        intern(d.start(), canonical(d.start(), 0));
        for (std::size_t i = 0; i < pairs.size(); ++i)
        {
            const auto [s, c] = pairs[i];
            accepting.push_back(d.accepting(s) && (c == settled || (c >= min && c <= max)));
            table.resize((i + 1) * 256, byte_dfa::dead);
            for (unsigned b = 0; b < 256; ++b)
            {
                const std::int32_t t = readable(b) ? d.next(s, static_cast<unsigned char>(b)) : byte_dfa::dead;
                const std::uint64_t next = c == settled ? settled : c + begins(b);  // (a count <= max: never settled's)
                if (t == byte_dfa::dead || (c != settled && next > max))
                {
                    continue;
                }
                table[i * 256 + b] = intern(t, canonical(t, next));
            }
        }
        return byte_dfa::from_table(std::move(table), accepting);
    }

    inline byte_dfa dfa_of_texts(const std::vector<std::string>& texts)
    {
        // a trie over the bytes the texts hold
        std::array<bool, 256> used{};
        for (const auto& t : texts)
        {
            for (const char c : t)
            {
                used[static_cast<unsigned char>(c)] = true;
            }
        }
        const auto [class_of, k] = detail::regex::listed_classes(used);
        std::vector<std::int32_t> table(k, byte_dfa::dead);
        std::vector<bool> accepting(1, false);
        for (const auto& t : texts)
        {
            std::int32_t s = 0;
            for (const char c : t)
            {
                const std::size_t at = std::size_t(s) * k + class_of[static_cast<unsigned char>(c)];
                if (table[at] == byte_dfa::dead)
                {
                    table[at] = std::int32_t(accepting.size());
                    accepting.push_back(false);
                    table.resize(accepting.size() * k, byte_dfa::dead);
                }
                s = table[at];
            }
            accepting[std::size_t(s)] = true;
        }
        return byte_dfa::from_classes(std::move(table), accepting, class_of, k);
    }

    // (every state is live: a text longer than the states went round a cycle)
    inline std::optional<std::vector<std::string>> dfa_texts(const byte_dfa& d, std::size_t limit)
    {
        std::vector<std::string> out;
        if (d.size() == 0)
        {
            return out;
        }
        std::vector<std::pair<std::int32_t, std::string>> todo{{d.start(), std::string()}};
        while (!todo.empty())
        {
            auto [state, text] = std::move(todo.back());
            todo.pop_back();
            if (text.size() > d.size())
            {
                return std::nullopt;  // a state met twice on the way: a cycle
            }
            if (d.accepting(state) && (out.push_back(text), out.size() > limit))
            {
                return std::nullopt;
            }
            for (int b = 255; b >= 0; --b)
            {
                const std::int32_t t = d.next(state, static_cast<unsigned char>(b));
                if (t != byte_dfa::dead)
                {
                    todo.push_back({t, text + static_cast<char>(b)});
                }
            }
        }
        return out;
    }

    inline std::pair<byte_dfa, std::vector<std::uint8_t>> dfa_code_point_units(const byte_dfa& d)
    {
        std::vector<std::int32_t> table(std::max<std::size_t>(d.size(), 1) * 256, byte_dfa::dead);
        std::vector<bool> accepting(std::max<std::size_t>(d.size(), 1), false);
        for (std::size_t s = 0; s < d.size(); ++s)
        {
            accepting[s] = d.accepting(std::int32_t(s));
            for (unsigned b = 0x20; b < 256; ++b)
            {
                if (b != '"' && b != '\\')
                {
                    table[s * 256 + b] = d.next(std::int32_t(s), static_cast<unsigned char>(b));
                }
            }
        }
        byte_dfa out = byte_dfa::from_table(std::move(table), accepting);
        std::vector<std::uint8_t> units(out.size(), 0);
        for (std::size_t s = 0; s < out.size(); ++s)
        {
            bool lead = false, continuation = false;
            for (unsigned b = 0; b < 256; ++b)
            {
                if (out.next(std::int32_t(s), static_cast<unsigned char>(b)) != byte_dfa::dead)
                {
                    ((b & 0xC0u) == 0x80u ? continuation : lead) = true;
                }
            }
            if (lead && continuation)
            {
                throw invalid_parameter("dfa_code_point_units: state " + std::to_string(s) +
                                        " reads both a code point's first byte and a continuation byte");
            }
            units[s] = std::uint8_t(lead);
        }
        return {std::move(out), std::move(units)};
    }

    inline byte_dfa dfa_enclosed(const byte_dfa& d, unsigned char open, unsigned char close)
    {
        // states: 0 the new start, 1 + k the DFA's state k, n + 1 the end after `close`
        const std::size_t n = d.size();
        std::vector<std::int32_t> table((n + 2) * 256, byte_dfa::dead);
        std::vector<bool> accepting(n + 2, false);
        accepting[n + 1] = true;
        if (n == 0)
        {
            return byte_dfa::from_table(std::move(table), accepting);
        }
        table[open] = 1;
        for (std::size_t k = 0; k < n; ++k)
        {
            for (unsigned b = 0; b < 256; ++b)
            {
                const std::int32_t t = d.next(std::int32_t(k), static_cast<unsigned char>(b));
                if (t != byte_dfa::dead && b == close)
                {
                    throw invalid_parameter("dfa_enclosed: the DFA reads the closing byte " + std::to_string(b));
                }
                table[(k + 1) * 256 + b] = t == byte_dfa::dead ? byte_dfa::dead : t + 1;
            }
            if (d.accepting(std::int32_t(k)))
            {
                table[(k + 1) * 256 + close] = std::int32_t(n + 1);
            }
        }
        return byte_dfa::from_table(std::move(table), accepting);
    }
}

#endif
