// xsampler/detail/json_canonical.hpp — a JSON value's text as a key that equal values share. (xsampler, BSD-3-Clause)
//
// canonical(text, i, out): reads the JSON value at text[i..] (no whitespace
// before it) and appends to `out` a key that two values get alike exactly
// when validators may call them equal (uniqueItems):
//   strings    by their code points (escapes decoded)
//   numbers    by their double (1 = 1.0 = 1e0, -0 = 0; two decimals that
//              round to one double alike, as a validator that reads doubles
//              has them)
//   true/false as the numbers 1 and 0 (equal for some validators: a key that
//              calls them equal is a subset either way)
//   objects    by their members in any order (a key written twice: the last)
//   arrays     by their items in order
// Returns the index past the value, or npos where the text is no JSON value
// or nests deeper than max_depth. Keys are self-delimiting, so the keys of
// a value's parts written one after another are the value's key:
// skip_key(key, i) passes over one, members_of(key) reads an object's
// members (name, value key) back.
#ifndef XSAMPLER_DETAIL_JSON_CANONICAL_HPP
#define XSAMPLER_DETAIL_JSON_CANONICAL_HPP

#include <cstdint>
#include <cstring>
#include <locale>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../types.hpp"
#include "utf8.hpp"

namespace xsampler::detail::json_canonical
{
    constexpr std::size_t npos = ~std::size_t(0);
    constexpr std::size_t max_depth = 1000;

    inline std::size_t skip_ws(std::string_view t, std::size_t i) noexcept
    {
        while (i < t.size() && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r'))
        {
            ++i;
        }
        return i;
    }

    /// The end of the JSON value at t[i] (well formed, as a grammar read
    /// it), past any depth: strings skipped by their quotes, arrays and
    /// objects by their brackets, a scalar up to a byte that ends it; npos
    /// where the text ends first (a scalar then may still read on).
    inline std::size_t skip_value(std::string_view t, std::size_t i) noexcept
    {
        std::size_t depth = 0;
        bool in_string = false, escaped = false;
        for (; i < t.size(); ++i)
        {
            const char c = t[i];
            if (in_string)
            {
                if (escaped)
                {
                    escaped = false;
                }
                else if (c == '\\')
                {
                    escaped = true;
                }
                else if (c == '"')
                {
                    in_string = false;
                    if (depth == 0)
                    {
                        return i + 1;
                    }
                }
                continue;
            }
            if (c == '"')
            {
                in_string = true;
                escaped = false;
            }
            else if (c == '[' || c == '{')
            {
                ++depth;
            }
            else if (c == ']' || c == '}')
            {
                if (depth == 0)
                {
                    return i;  // (a scalar's end)
                }
                if (--depth == 0)
                {
                    return i + 1;
                }
            }
            else if (depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r'))
            {
                return i;
            }
        }
        return npos;
    }

    /// Four hex digits at t[i..]: their value, or npos.
    inline std::size_t hex4(std::string_view t, std::size_t i) noexcept
    {
        if (i + 4 > t.size())
        {
            return npos;
        }
        std::size_t v = 0;
        for (std::size_t k = i; k < i + 4; ++k)
        {
            const char c = t[k];
            const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
            if (d < 0)
            {
                return npos;
            }
            v = v * 16 + std::size_t(d);
        }
        return v;
    }

    /// The chars of a string from t[i] (past its opening quote) decoded
    /// into `out`, up to its closing quote or the text's end: the index of
    /// that quote, or of where the text ends inside a char (an escape begun,
    /// or a \\u high surrogate a low one may still follow: not decoded;
    /// raw UTF-8 bytes are copied as they come, whole or not); npos for an
    /// invalid escape.
    inline std::size_t decode_chars(std::string_view t, std::size_t i, std::string& out)
    {
        while (i < t.size())
        {
            const char c = t[i];
            if (c == '"')
            {
                return i;
            }
            if (c != '\\')
            {
                out += c;
                ++i;
                continue;
            }
            if (i + 1 >= t.size())
            {
                return i;
            }
            const std::size_t begun = i;
            const char e = t[i + 1];
            i += 2;
            switch (e)
            {
            case '"': out += '"'; break;
            case '\\': out += '\\'; break;
            case '/': out += '/'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case 'u':
            {
                if (i + 4 > t.size())
                {
                    return begun;
                }
                std::size_t c1 = hex4(t, i);
                if (c1 == npos)
                {
                    return npos;
                }
                i += 4;
                if (c1 >= 0xD800 && c1 < 0xDC00)
                {
                    if (i + 6 > t.size() && std::string_view("\\u").substr(0, t.size() - i) == t.substr(i, 2))
                    {
                        return begun;  // (a low surrogate may follow)
                    }
                    if (t[i] == '\\' && t[i + 1] == 'u')
                    {
                        const std::size_t c2 = hex4(t, i + 2);
                        if (c2 != npos && c2 >= 0xDC00 && c2 < 0xE000)
                        {
                            c1 = 0x10000 + ((c1 - 0xD800) << 10) + (c2 - 0xDC00);
                            i += 6;
                        }
                    }
                }
                utf8_append(std::uint32_t(c1), out);  // (a lone surrogate as its 3 bytes: a key of its own)
                break;
            }
            default: return npos;
            }
        }
        return i;
    }
    /// The string at t[i] == '"': its content decoded into `out`; the index past it, or npos.
    inline std::size_t decode_string(std::string_view t, std::size_t i, std::string& out)
    {
        const std::size_t end = decode_chars(t, i + 1, out);
        return end < t.size() && t[end] == '"' ? end + 1 : npos;
    }

    /// A string's key: 's', its decoded length, ':', its bytes.
    inline void put_string(const std::string& decoded, std::string& out)
    {
        out += 's';
        out += std::to_string(decoded.size());
        out += ':';
        out += decoded;
    }
    /// A number's key: 'n' and its double's 16 hex digits (0 for -0).
    inline void put_number(double d, std::string& out)
    {
        if (d == 0)
        {
            d = 0;
        }
        std::uint64_t bits = 0;
        std::memcpy(&bits, &d, sizeof bits);
        static const char digits[] = "0123456789abcdef";
        out += 'n';
        for (int k = 60; k >= 0; k -= 4)
        {
            out += digits[(bits >> k) & 15];
        }
    }

    inline std::size_t value(std::string_view t, std::size_t i, std::string& out, std::size_t depth);

    /// The elements of the object or array opened at t[i - 1], up to its
    /// `close`: each(j) reads one at t[j] and returns the index past it (or
    /// npos); commas and whitespace between. The index past `close`, or npos.
    template <class Each>
    std::size_t elements(std::string_view t, std::size_t i, char close, Each&& each)
    {
        i = skip_ws(t, i);
        if (i < t.size() && t[i] == close)
        {
            return i + 1;
        }
        while (true)
        {
            i = each(i);
            if (i == npos)
            {
                return npos;
            }
            i = skip_ws(t, i);
            if (i < t.size() && t[i] == ',')
            {
                i = skip_ws(t, i + 1);
            }
            else
            {
                return i < t.size() && t[i] == close ? i + 1 : npos;
            }
        }
    }

    inline std::size_t canonical(std::string_view t, std::size_t i, std::string& out) { return value(t, i, out, 0); }

    inline std::size_t value(std::string_view t, std::size_t i, std::string& out, std::size_t depth)
    {
        if (i >= t.size() || depth > max_depth)
        {
            return npos;
        }
        const char c = t[i];
        if (c == '"')
        {
            std::string s;
            const std::size_t end = decode_string(t, i, s);
            if (end != npos)
            {
                put_string(s, out);
            }
            return end;
        }
        if (c == '{')
        {
            std::map<std::string, std::string> members;  // by decoded key: the last one's value
            i = elements(t, i + 1, '}', [&](std::size_t j) {
                std::string key, val;
                if (j >= t.size() || t[j] != '"' || (j = decode_string(t, j, key)) == npos)
                {
                    return npos;
                }
                j = skip_ws(t, j);
                if (j >= t.size() || t[j] != ':' || (j = value(t, skip_ws(t, j + 1), val, depth + 1)) == npos)
                {
                    return npos;
                }
                members[std::move(key)] = std::move(val);
                return j;
            });
            if (i == npos)
            {
                return npos;
            }
            out += 'o';
            out += std::to_string(members.size());
            out += ':';
            for (const auto& [k, v] : members)
            {
                put_string(k, out);
                out += v;
            }
            return i;
        }
        if (c == '[')
        {
            std::string items;
            std::size_t n = 0;
            i = elements(t, i + 1, ']', [&](std::size_t j) {
                ++n;
                return value(t, j, items, depth + 1);
            });
            if (i == npos)
            {
                return npos;
            }
            out += 'a';
            out += std::to_string(n);
            out += ':';
            out += items;
            return i;
        }
        for (const auto& [word, v] : {std::pair<std::string_view, int>{"true", 1}, {"false", 0}, {"null", -1}})
        {
            if (t.substr(i, word.size()) == word)
            {
                if (v < 0)
                {
                    out += 'z';
                }
                else
                {
                    put_number(v, out);
                }
                return i + word.size();
            }
        }
        // a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
        std::size_t j = i;
        const auto digits = [&] {
            const std::size_t from = j;
            while (j < t.size() && t[j] >= '0' && t[j] <= '9')
            {
                ++j;
            }
            return j > from;
        };
        if (j < t.size() && t[j] == '-')
        {
            ++j;
        }
        if (!digits())
        {
            return npos;
        }
        if (j < t.size() && t[j] == '.')
        {
            ++j;
            if (!digits())
            {
                return npos;
            }
        }
        if (j < t.size() && (t[j] == 'e' || t[j] == 'E'))
        {
            ++j;
            if (j < t.size() && (t[j] == '+' || t[j] == '-'))
            {
                ++j;
            }
            if (!digits())
            {
                return npos;
            }
        }
        std::istringstream in{std::string(t.substr(i, j - i))};
        in.imbue(std::locale::classic());
        double d = 0;
        in >> d;  // (out of range: the largest double or 0, a key shared by more numbers: a subset)
        put_number(d, out);
        return j;
    }

    /// The index past the key of one value that begins at key[i] (a key
    /// canonical() wrote), or npos.
    inline std::size_t skip_key(std::string_view key, std::size_t i, std::size_t depth = 0)
    {
        if (i >= key.size() || depth > max_depth)
        {
            return npos;
        }
        const char c = key[i];
        if (c == 'z')
        {
            return i + 1;
        }
        if (c == 'n')
        {
            return i + 17 <= key.size() ? i + 17 : npos;
        }
        const std::size_t colon = key.find(':', i);
        if ((c != 's' && c != 'o' && c != 'a') || colon == std::string_view::npos)
        {
            return npos;
        }
        const std::size_t n = std::size_t(std::stoull(std::string(key.substr(i + 1, colon - i - 1))));
        if (c == 's')
        {
            return colon + 1 + n <= key.size() ? colon + 1 + n : npos;
        }
        i = colon + 1;
        for (std::size_t k = 0; k < (c == 'o' ? 2 * n : n) && i != npos; ++k)
        {
            i = skip_key(key, i, depth + 1);  // (an object's: a name's key, then its value's)
        }
        return i;
    }

    /// An object's members from its key: (decoded name, the value's key),
    /// by name; false where the key is not an object's.
    inline bool members_of(std::string_view key, std::vector<std::pair<std::string_view, std::string_view>>& out)
    {
        out.clear();
        if (key.empty() || key[0] != 'o' || skip_key(key, 0) != key.size())
        {
            return false;
        }
        std::size_t i = key.find(':') + 1;
        while (i < key.size())
        {
            const std::size_t colon = key.find(':', i), name_end = skip_key(key, i);
            const std::size_t value_end = skip_key(key, name_end);
            out.emplace_back(key.substr(colon + 1, name_end - colon - 1), key.substr(name_end, value_end - name_end));
            i = value_end;
        }
        return true;
    }
}

#endif
