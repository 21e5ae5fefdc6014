// xsampler/detail/regex_classes.hpp — sets of code points, the class escapes' readings, and their UTF-8 byte ranges. (xsampler, BSD-3-Clause)
//
// regex_reading (regex_options::reading, regex.hpp): how \d \w \s and '.'
// read: ECMAScript's, within both ECMAScript's and Python's re, or within
// either's. detail::regex::cp_set: a set of code points as sorted, disjoint,
// non-adjacent ranges (normalized, complement, without_surrogates); the
// class escapes' sets in each reading (class_set); utf8_sequences: the
// UTF-8 encodings of a range as products of byte ranges, what an NFA
// (regex_nfa.hpp) and grammar.hpp's code-point classes read.
#ifndef XSAMPLER_DETAIL_REGEX_CLASSES_HPP
#define XSAMPLER_DETAIL_REGEX_CLASSES_HPP

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "utf8.hpp"

namespace xsampler
{
    /// How class escapes and '.' read (regex_options::reading).
    enum class regex_reading
    {
        ecmascript,  // ECMAScript's classes (the syntax's)
        both,        // a subset of what both ECMAScript and Python's re match
        either,      // a superset of what either matches
    };

    namespace detail::regex
    {
        using code_point = std::uint32_t;
        using detail::max_code_point;
        using detail::utf8_append;
        using detail::utf8_encode;
        using detail::utf8_length;

        /// A set of code points: sorted, disjoint, non-adjacent closed ranges.
        using cp_set = std::vector<std::pair<code_point, code_point>>;

        inline cp_set normalized(cp_set s)
        {
            std::sort(s.begin(), s.end());
            cp_set out;
            for (const auto& r : s)
            {
                if (!out.empty() && r.first <= out.back().second + 1)
                {
                    out.back().second = std::max(out.back().second, r.second);
                }
                else
                {
                    out.push_back(r);
                }
            }
            return out;
        }

        /// Code points outside `s` (s normalised), in [0, U+10FFFF].
        inline cp_set complement(const cp_set& s)
        {
            cp_set out;
            code_point from = 0;
            for (const auto& r : s)
            {
                if (r.first > from)
                {
                    out.emplace_back(from, r.first - 1);
                }
                from = r.second + 1;
            }
            if (from <= max_code_point)
            {
                out.emplace_back(from, max_code_point);
            }
            return out;
        }

        /// `s` without the surrogates D800-DFFF, which UTF-8 cannot encode.
        inline cp_set without_surrogates(const cp_set& s)
        {
            cp_set out;
            for (const auto& r : s)
            {
                if (r.second < 0xD800 || r.first > 0xDFFF)
                {
                    out.push_back(r);
                    continue;
                }
                if (r.first < 0xD800)
                {
                    out.emplace_back(r.first, 0xD7FF);
                }
                if (r.second > 0xDFFF)
                {
                    out.emplace_back(0xE000, r.second);
                }
            }
            return out;
        }

        inline cp_set digit_set() { return {{'0', '9'}}; }
        inline cp_set word_set() { return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; }
        inline cp_set space_set()
        {
            return {{0x09, 0x0D},     {0x20, 0x20},     {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
                    {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
        }
        inline cp_set dot_set() { return complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}); }
        /// Python's re (str patterns): \s is str.isspace(), . all but \n; \d and \w
        /// are Unicode's digits and alphanumerics, within their ASCII ones and
        /// every non-ASCII character (py_over).
        inline cp_set py_space_set()
        {
            return {{0x09, 0x0D},     {0x1C, 0x20},     {0x85, 0x85},     {0xA0, 0xA0},     {0x1680, 0x1680},
                    {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}};
        }
        inline cp_set py_over(cp_set s)
        {
            s.emplace_back(0x80, max_code_point);
            return normalized(std::move(s));
        }
        inline cp_set either_set(cp_set a, const cp_set& b)
        {
            a.insert(a.end(), b.begin(), b.end());
            return normalized(std::move(a));
        }
        inline cp_set both_sets(const cp_set& a, const cp_set& b) { return complement(either_set(complement(a), complement(b))); }

        /// A complement's reading: within both readings is outside what either reads.
        inline regex_reading flipped(regex_reading r)
        {
            return r == regex_reading::both ? regex_reading::either : r == regex_reading::either ? regex_reading::both : r;
        }

        /// A class escape's characters (d D w W s S, or '.') in a reading:
        /// ECMAScript's, within both ECMAScript's and Python's, or within
        /// either's (a negation flips the last two: within both of \D is
        /// outside either's \d).
        inline cp_set class_set(char c, regex_reading r)
        {
            const bool negated = c == 'D' || c == 'W' || c == 'S';
            r = negated ? flipped(r) : r;
            cp_set ecma, python;
            switch (c)
            {
            case 'd': case 'D': ecma = digit_set(); python = py_over(digit_set()); break;
            case 'w': case 'W': ecma = word_set(); python = py_over(word_set()); break;
            case 's': case 'S': ecma = space_set(); python = py_space_set(); break;
            default: return r == regex_reading::either ? complement({{'\n', '\n'}}) : dot_set();  // (ECMAScript's within Python's)
            }
            const cp_set out = r == regex_reading::ecmascript ? ecma : r == regex_reading::both ? both_sets(ecma, python)
                                                                                                : either_set(ecma, python);
            return negated ? complement(out) : out;
        }
        inline cp_set any_set() { return {{0, max_code_point}}; }

        /// One UTF-8 byte range per byte of an encoding: the product of the
        /// ranges is a set of encodings.
        using byte_seq = std::vector<std::pair<unsigned char, unsigned char>>;

        /// The encodings of [lo, hi] (no surrogates) as byte sequences: split
        /// where the encoding's length changes, then until every trailing
        /// 6-bit group spans its whole range wherever the leading part varies.
        inline void utf8_sequences(code_point lo, code_point hi, std::vector<byte_seq>& out)
        {
            for (const code_point m : {code_point(0x7F), code_point(0x7FF), code_point(0xFFFF)})
            {
                if (lo <= m && hi > m)
                {
                    utf8_sequences(lo, m, out);
                    utf8_sequences(m + 1, hi, out);
                    return;
                }
            }
            const int n = utf8_length(lo);
            for (int i = 1; i < n; ++i)
            {
                const code_point m = (code_point(1) << (6 * i)) - 1;
                if ((lo & ~m) != (hi & ~m))
                {
                    if ((lo & m) != 0)
                    {
                        utf8_sequences(lo, lo | m, out);
                        utf8_sequences((lo | m) + 1, hi, out);
                        return;
                    }
                    if ((hi & m) != m)
                    {
                        utf8_sequences(lo, (hi & ~m) - 1, out);
                        utf8_sequences(hi & ~m, hi, out);
                        return;
                    }
                }
            }
            unsigned char a[4];
            unsigned char b[4];
            utf8_encode(lo, a);
            utf8_encode(hi, b);
            byte_seq seq;
            for (int i = 0; i < n; ++i)
            {
                seq.emplace_back(a[i], b[i]);
            }
            out.push_back(std::move(seq));
        }
    }
}

#endif
