// xsampler/detail/regex_parser.hpp — a pattern parsed to a tree, with the errors regex.hpp lists. (xsampler, BSD-3-Clause)
//
// detail::regex::parser(pattern, reading).parse(): the syntax at the top of
// regex.hpp as ast_nodes (children by index; a bracket or class escape is a
// cp_set), and the top-level alternatives with their anchors (for search).
// Errors: invalid_parameter naming the construct and its byte offset.
#ifndef XSAMPLER_DETAIL_REGEX_PARSER_HPP
#define XSAMPLER_DETAIL_REGEX_PARSER_HPP

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../types.hpp"
#include "utf8.hpp"
#include "regex_classes.hpp"

namespace xsampler
{
    namespace detail::regex
    {
        constexpr int max_count = 1000;
        constexpr int max_depth = 256;

        /// The parsed pattern: a tree of these, children by index.
        struct ast_node
        {
            enum kind_t
            {
                empty,
                set,
                concat,
                alt,
                repeat,
                begin,  // ^: at the text's start alone
                end,    // $: at its end alone
                word,   // \b: between a word character and another
                inside  // \B: not there
            } kind = empty;
            cp_set chars;            // set
            std::vector<int> kids;   // concat, alt; repeat: one
            int min = 0, max = 0;    // repeat; max -1: unbounded
        };

        inline std::string hex(unsigned v, int digits)
        {
            static const char* d = "0123456789ABCDEF";
            std::string s(std::size_t(digits), '0');
            for (int i = digits - 1; i >= 0; --i, v >>= 4)
            {
                s[std::size_t(i)] = d[v & 15];
            }
            return s;
        }

        class parser
        {
        public:
            parser(std::string_view p, regex_reading reading = regex_reading::ecmascript) : m_p(p), m_reading(reading) {}

            std::vector<ast_node> nodes;
            /// Top-level alternatives and whether each starts with ^ / ends with $.
            struct alternative
            {
                int node;
                bool begin_anchor;
                bool end_anchor;
            };
            std::vector<alternative> top;

            void parse()
            {
                for (;;)
                {
                    alternative a{-1, false, false};
                    if (peek('^'))
                    {
                        a.begin_anchor = true;
                        ++m_i;
                    }
                    a.node = parse_concat(0, &a.end_anchor);
                    top.push_back(a);
                    if (at_end())
                    {
                        return;
                    }
                    if (m_p[m_i] == ')')
                    {
                        fail("unbalanced parenthesis: ) has no (", m_i);
                    }
                    ++m_i;  // '|'
                }
            }

            [[noreturn]] void fail(const std::string& what, std::size_t at) const
            {
                throw invalid_parameter("regex: " + what + ", at offset " + std::to_string(at));
            }

        private:
            std::string_view m_p;
            regex_reading m_reading;
            std::size_t m_i = 0;

            bool at_end() const { return m_i >= m_p.size(); }
            bool peek(char c) const { return m_i < m_p.size() && m_p[m_i] == c; }
            unsigned char byte_at(std::size_t i) const { return static_cast<unsigned char>(m_p[i]); }

            int add(ast_node n)
            {
                nodes.push_back(std::move(n));
                return int(nodes.size()) - 1;
            }
            int add_set(cp_set s)
            {
                ast_node n;
                n.kind = ast_node::set;
                n.chars = without_surrogates(normalized(std::move(s)));
                return add(std::move(n));
            }

            int parse_alt(int depth)
            {
                std::vector<int> alts;
                for (;;)
                {
                    alts.push_back(parse_concat(depth, nullptr));
                    if (!peek('|'))
                    {
                        break;
                    }
                    ++m_i;
                }
                if (alts.size() == 1)
                {
                    return alts[0];
                }
                ast_node n;
                n.kind = ast_node::alt;
                n.kids = std::move(alts);
                return add(std::move(n));
            }

            // Terms up to '|', ')' or the end. At depth 0, end_anchor is set by a
            // final $.
            int parse_concat(int depth, bool* end_anchor)
            {
                std::vector<int> terms;
                while (!at_end() && !peek('|') && !peek(')'))
                {
                    if (peek('$'))
                    {
                        if (depth == 0 && (m_i + 1 == m_p.size() || m_p[m_i + 1] == '|'))
                        {
                            *end_anchor = true;
                            ++m_i;
                            break;
                        }
                        ++m_i;
                        ast_node n;
                        n.kind = ast_node::end;
                        terms.push_back(add(std::move(n)));
                        continue;
                    }
                    terms.push_back(parse_term(depth));
                }
                if (!at_end() && peek(')') && depth == 0)
                {
                    fail("unbalanced parenthesis: ) has no (", m_i);
                }
                if (terms.size() == 1)
                {
                    return terms[0];
                }
                ast_node n;
                n.kind = terms.empty() ? ast_node::empty : ast_node::concat;
                n.kids = std::move(terms);
                return add(std::move(n));
            }

            // A quantifier at m_i: true and its bounds, or false. `{` that does
            // not begin {n}, {n,} or {n,m}: an error (ECMAScript's Annex B reads it
            // as a literal; we ask for \{ to keep the two apart).
            bool parse_quantifier(int& lo, int& hi)
            {
                const std::size_t at = m_i;
                const char c = m_p[m_i];
                if (c == '*' || c == '+' || c == '?')
                {
                    ++m_i;
                    lo = c == '+' ? 1 : 0;
                    hi = c == '?' ? 1 : -1;
                    return true;
                }
                if (c != '{')
                {
                    return false;
                }
                ++m_i;
                lo = parse_count(at);
                if (lo < 0)
                {
                    fail("{ does not begin a quantifier {n}, {n,} or {n,m} (write \\{ for the character)", at);
                }
                hi = lo;
                if (peek(','))
                {
                    ++m_i;
                    hi = peek('}') ? -1 : parse_count(at);
                    if (hi < 0 && !peek('}'))
                    {
                        fail("{ does not begin a quantifier {n}, {n,} or {n,m} (write \\{ for the character)", at);
                    }
                }
                if (!peek('}'))
                {
                    fail("{ does not begin a quantifier {n}, {n,} or {n,m} (write \\{ for the character)", at);
                }
                ++m_i;
                if (hi >= 0 && hi < lo)
                {
                    fail("quantifier {" + std::to_string(lo) + "," + std::to_string(hi) + "} has max < min", at);
                }
                return true;
            }

            // Decimal digits at m_i (-1 if none), at most max_count.
            int parse_count(std::size_t at)
            {
                const std::size_t from = m_i;
                long v = 0;
                while (!at_end() && m_p[m_i] >= '0' && m_p[m_i] <= '9')
                {
                    v = std::min<long>(v * 10 + (m_p[m_i] - '0'), 1000000);
                    ++m_i;
                }
                if (m_i == from)
                {
                    return -1;
                }
                if (v > max_count)
                {
                    fail("repeat count " + std::string(m_p.substr(from, m_i - from)) + " exceeds " +
                             std::to_string(max_count),
                         at);
                }
                return int(v);
            }

            int parse_term(int depth)
            {
                const std::size_t atom_at = m_i;
                int atom = parse_atom(depth);
                int lo = 0, hi = 0;
                const std::size_t at = m_i;
                if (!at_end() && parse_quantifier(lo, hi))
                {
                    const auto k = nodes[std::size_t(atom)].kind;
                    if ((k == ast_node::word || k == ast_node::inside) && m_p[atom_at] == '\\')
                    {
                        // (ECMAScript and Python's re refuse it: write (?:\b)*)
                        fail("quantifier " + std::string(m_p.substr(at, m_i - at)) + " has nothing to repeat", at);
                    }
                    if (peek('?'))
                    {
                        ++m_i;  // lazy: the same language
                    }
                    else if (peek('+'))
                    {
                        fail("possessive quantifier " + std::string(m_p.substr(at, m_i + 1 - at)) +
                                 " is not supported",
                             at);
                    }
                    if (!at_end() && (peek('*') || peek('+') || peek('?') || peek('{')))
                    {
                        fail("quantifier " + std::string(1, m_p[m_i]) + " follows another quantifier", m_i);
                    }
                    ast_node n;
                    n.kind = ast_node::repeat;
                    n.kids = {atom};
                    n.min = lo;
                    n.max = hi;
                    atom = add(std::move(n));
                }
                return atom;
            }

            int parse_atom(int depth)
            {
                const std::size_t at = m_i;
                const char c = m_p[m_i];
                switch (c)
                {
                case '(': return parse_group(depth);
                case '[': return add_set(parse_class());
                case '.': ++m_i; return add_set(class_set('.', m_reading));
                case '*':
                case '+':
                case '?': fail(std::string("quantifier ") + c + " has nothing to repeat", at);
                case '{':
                {
                    int lo = 0, hi = 0;
                    parse_quantifier(lo, hi);  // fails unless it is one
                    fail("quantifier " + std::string(m_p.substr(at, m_i - at)) + " has nothing to repeat", at);
                }
                case '^':
                {
                    ++m_i;
                    ast_node n;
                    n.kind = ast_node::begin;
                    return add(std::move(n));
                }
                case '\\':
                {
                    if (m_i + 1 < m_p.size() && (m_p[m_i + 1] == 'b' || m_p[m_i + 1] == 'B'))
                    {
                        ast_node n;
                        n.kind = m_p[m_i + 1] == 'b' ? ast_node::word : ast_node::inside;
                        m_i += 2;
                        return add(std::move(n));
                    }
                    cp_set s;
                    parse_escape(false, s);
                    return add_set(std::move(s));
                }
                default:
                {
                    const code_point lit = decode_utf8();
                    return add_set({{lit, lit}});
                }
                }
            }

            code_point decode_utf8()
            {
                code_point c = 0;
                std::size_t bad = 0;
                const std::size_t n = detail::utf8_decode(m_p, m_i, c, &bad);
                if (n == 0)
                {
                    fail("invalid UTF-8 byte 0x" + hex(byte_at(bad), 2), bad);
                }
                m_i += n;
                return c;
            }

            int parse_group(int depth)
            {
                const std::size_t at = m_i;
                if (depth + 1 > max_depth)
                {
                    fail("groups nested deeper than " + std::to_string(max_depth), at);
                }
                ++m_i;
                if (peek('?'))
                {
                    const std::string_view rest = m_p.substr(m_i + 1);
                    auto starts = [&](std::string_view s) { return rest.substr(0, s.size()) == s; };
                    if (starts(":"))
                    {
                        m_i += 2;
                    }
                    else if (starts("="))
                    {
                        fail("lookahead (?= is not supported", at);
                    }
                    else if (starts("!"))
                    {
                        fail("negative lookahead (?! is not supported", at);
                    }
                    else if (starts("<="))
                    {
                        fail("lookbehind (?<= is not supported", at);
                    }
                    else if (starts("<!"))
                    {
                        fail("negative lookbehind (?<! is not supported", at);
                    }
                    else if (starts("<") || starts("P<"))
                    {
                        fail("named group (?<name> is not supported", at);
                    }
                    else
                    {
                        fail("inline flags or group modifiers (?" +
                                 std::string(rest.substr(0, std::min<std::size_t>(rest.size(), 1))) +
                                 " are not supported",
                             at);
                    }
                }
                const int inner = parse_alt(depth + 1);
                if (!peek(')'))
                {
                    fail("unbalanced parenthesis: ( is not closed", at);
                }
                ++m_i;
                return inner;
            }

            int hex_digit(std::size_t i) const
            {
                if (i >= m_p.size())
                {
                    return -1;
                }
                const char c = m_p[i];
                return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                                             : -1;
            }

            // n hex digits at m_i; consumed; failing names the escape at `at`.
            code_point parse_hex(int n, std::size_t at, const char* name)
            {
                code_point v = 0;
                for (int k = 0; k < n; ++k)
                {
                    const int d = hex_digit(m_i);
                    if (d < 0)
                    {
                        fail(std::string("escape ") + name + " needs " + std::to_string(n) + " hex digits", at);
                    }
                    v = v * 16 + code_point(d);
                    ++m_i;
                }
                return v;
            }

            // An escape at m_i ('\\'). Sets `s` to its characters; returns true
            // when it is a class (\d \w \s and complements), false for one
            // character. in_class: inside [...], where \b is backspace and \-
            // is a hyphen.
            bool parse_escape(bool in_class, cp_set& s)
            {
                const std::size_t at = m_i;
                ++m_i;
                if (at_end())
                {
                    fail("the pattern ends with a lone \\", at);
                }
                const char c = m_p[m_i];
                auto one = [&](code_point v) {
                    s = {{v, v}};
                    return false;
                };
                switch (c)
                {
                case 'd':
                case 'D':
                case 'w':
                case 'W':
                case 's':
                case 'S': ++m_i; s = class_set(c, m_reading); return true;
                case 'n': ++m_i; return one('\n');
                case 't': ++m_i; return one('\t');
                case 'r': ++m_i; return one('\r');
                case 'f': ++m_i; return one('\f');
                case 'v': ++m_i; return one('\v');
                case '0':
                    ++m_i;
                    if (!at_end() && m_p[m_i] >= '0' && m_p[m_i] <= '9')
                    {
                        fail("octal escape \\0" + std::string(1, m_p[m_i]) + " is not supported", at);
                    }
                    return one(0);
                case 'c':
                {
                    ++m_i;
                    const char l = at_end() ? '\0' : m_p[m_i];
                    if (!((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z')))
                    {
                        fail("control escape \\c needs a letter", at);
                    }
                    ++m_i;
                    return one(code_point(l) % 32);
                }
                case 'x': ++m_i; return one(parse_hex(2, at, "\\x"));
                case 'u':
                {
                    ++m_i;
                    if (peek('{'))
                    {
                        fail("escape \\u{...} is not supported (write \\uHHHH or the character)", at);
                    }
                    code_point v = parse_hex(4, at, "\\u");
                    if (v >= 0xD800 && v <= 0xDBFF && m_i + 1 < m_p.size() && m_p[m_i] == '\\' &&
                        m_p[m_i + 1] == 'u')
                    {
                        const std::size_t save = m_i;
                        m_i += 2;
                        const code_point low = parse_hex(4, save, "\\u");
                        if (low >= 0xDC00 && low <= 0xDFFF)
                        {
                            return one(0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00));
                        }
                        m_i = save;
                    }
                    if (v >= 0xD800 && v <= 0xDFFF)
                    {
                        fail("\\u" + hex(v, 4) + " is a lone surrogate (UTF-8 cannot encode it)", at);
                    }
                    return one(v);
                }
                case 'b':
                    if (in_class)
                    {
                        ++m_i;
                        return one('\b');
                    }
                    [[fallthrough]];  // (outside a class: a word boundary, read before)
                case 'B': fail("unknown escape \\B inside a class", at);
                case 'k': fail("named backreference \\k is not supported", at);
                case 'p':
                case 'P': fail(std::string("Unicode property \\") + c + " is not supported", at);
                default: break;
                }
                if (c >= '1' && c <= '9')
                {
                    fail(std::string("backreference \\") + c + " is not supported", at);
                }
                if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_')
                {
                    fail(std::string("unknown escape \\") + c, at);
                }
                return one(decode_utf8());  // \. \\ \/ \- ... : the character itself
            }

            cp_set parse_class()
            {
                const std::size_t at = m_i;
                ++m_i;
                bool negated = false;
                const regex_reading outside = m_reading;
                if (peek('^'))
                {
                    negated = true;
                    ++m_i;
                    m_reading = flipped(m_reading);  // (within both: outside what either reads in it)
                }
                cp_set s;
                for (;;)
                {
                    if (at_end())
                    {
                        fail("bracket [ is not closed", at);
                    }
                    if (peek(']'))
                    {
                        ++m_i;
                        break;
                    }
                    const std::size_t lo_at = m_i;
                    cp_set lo;
                    const bool lo_class = class_atom(lo);
                    if (peek('-') && m_i + 1 < m_p.size() && m_p[m_i + 1] != ']')
                    {
                        ++m_i;
                        cp_set hi;
                        const bool hi_class = class_atom(hi);
                        if (lo_class || hi_class)
                        {
                            fail("bad range: a class escape cannot end a range", lo_at);
                        }
                        if (hi[0].first < lo[0].first)
                        {
                            fail("bad range " + std::string(m_p.substr(lo_at, m_i - lo_at)) + " (the end is below the start)",
                                 lo_at);
                        }
                        s.emplace_back(lo[0].first, hi[0].first);
                    }
                    else
                    {
                        s.insert(s.end(), lo.begin(), lo.end());
                    }
                }
                m_reading = outside;
                s = normalized(std::move(s));
                return negated ? complement(s) : s;
            }

            // One item of a bracket class: true for a class escape.
            bool class_atom(cp_set& s)
            {
                if (at_end())
                {
                    return false;  // the caller reports the unclosed [
                }
                if (peek('\\'))
                {
                    return parse_escape(true, s);
                }
                const code_point c = decode_utf8();
                s = {{c, c}};
                return false;
            }
        };
    }
}

#endif
