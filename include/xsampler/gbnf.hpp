// xsampler/gbnf.hpp — llama.cpp's GBNF grammar format read into the grammar IR (grammar.hpp). (xsampler, BSD-3-Clause)
//
// parse_gbnf(text, options) -> grammar: the rules of a GBNF text, rooted at
// the rule named options.root ("root"). It only reads the text: compile the
// result with compile_grammar (matcher.hpp), which checks what needs the
// whole grammar (rules that derive no text, empty loops, limits).
//
// The format, as llama.cpp's grammars/README.md and its parser
// (src/llama-grammar.cpp) define it:
//   rule        name ::= alternatives, ended by a newline or the end of the
//               text; a name is [a-zA-Z0-9-]+ (a digit or a dash may lead)
//   alternatives  sequence | sequence ... (a sequence may be empty: the
//               empty text); a newline may follow '|' and continue the rule
//   items       "literal"   its code points, UTF-8 encoded ("é" is C3 A9)
//               [a-z0-9_]   one code point of a set of characters and
//                           ranges; [^...] one code point outside them;
//                           '-' is literal first or last ([-a] [a-])
//               .           any one code point
//               name        a text of that rule (defined before or after)
//               ( ... )     a group of alternatives
//   repetition  after an item: * + ? {m} {m,} {m,n} (spaces allowed inside
//               the braces); it applies to the whole item (a literal, a
//               class, a group) and may be stacked ("a"+? is ("a"+)?)
//   escapes     in literals and classes: \xHH \uHHHH \UHHHHHHHH (a code
//               point: \xE9 is U+00E9, two UTF-8 bytes, not the byte E9),
//               \t \n \r \\ \" \[ \] \- ; any other character stands for
//               itself, raw UTF-8 included (a literal may hold a raw newline)
//   spaces      ' ' and '\t' between items; '#' starts a comment that runs
//               to the end of the line; newlines are allowed between rules,
//               after '::=', after '|', and anywhere inside parentheses
//   root        the rule named options.root must be defined; a rule
//               defined twice keeps its last definition (as in llama.cpp)
// Errors: invalid_parameter naming the problem and where it is, as
// line:column (1-based; a column counts code points; \n, \r\n and \r end a
// line): "gbnf: expected '::=' after the rule name 'root' at 3:7".
// Syntax errors, a rule used but never defined ("gbnf: rule 'numero' is used
// at 4:17 but never defined"), a missing root rule, and the limits: a text
// over options.max_size bytes, expressions nested deeper than
// options.max_depth (parentheses and stacked repetitions: the parser and
// the compiler recurse on them), a repetition minimum over options.max_count,
// and newer llama.cpp's expansion limit: a repetition whose count (its
// maximum, or its minimum when it has none, or 1), times the rules llama.cpp
// would write for its item, reaches max_count ("a"{2000}, ([^x]*{0,99}){0,99}:
// a group counts 1, plus each rule name first seen inside it, plus n - m
// rules for each {m,n} and 1 for each other repetition in it; counts multiply
// along the items repeated). Nested repetitions of that kind also make the
// matcher's charts large, so the limit is kept.
//
// Where this parser decides differently from llama.cpp (the reason: never
// accept a text outside the grammar the user wrote, never fail unclearly):
//   - A maximum above max_count (2000, llama.cpp's MAX_REPETITION_THRESHOLD)
//     is kept: x{0,5000} allows at most 5000 x. Newer llama.cpp reads it as
//     x{0,} (options.large_max_unbounded = true does the same; older
//     versions had no limits at all).
//   - {m,n} with n < m is an error (older llama.cpp reads it as {m}, newer
//     ones generate rules until memory runs out).
//   - An empty class [] or [^] is an error (llama.cpp reads either as the
//     empty text); a reversed range [z-a] is an error (llama.cpp: a range
//     that matches nothing, so [^z-a] would match anything).
//   - Code points past U+10FFFF are errors, as are surrogates (U+D800 to
//     U+DFFF) in literals; in classes surrogates are never matched. Texts
//     are matched as well-formed UTF-8 only: . and [^...] never match a
//     surrogate, an overlong form or a value past U+10FFFF, which llama.cpp's
//     decoder lets through.
//   - The grammar text must be valid UTF-8 in its literals and classes, and
//     hold no NUL byte (llama.cpp reads a C string: a NUL ends it early).
//     "\x00" matches the byte 0 (llama.cpp's matcher stops at a NUL).
//   - Token references <[id]>, <token> and !<...> (newer llama.cpp) are
//     refused: this grammar is over bytes, which have no token ids.
//   - Left recursion (a ::= a "x" | "x") is accepted: the matcher is Earley's
//     algorithm. llama.cpp refuses it. An unbounded repetition of something
//     that can match the empty text ((x*)*, "a"?*) is refused, by
//     compile_grammar; llama.cpp accepts it.
//   - A rule used but never defined is an error even where the root cannot
//     reach it, as in llama.cpp; so is a grammar without the root rule. With
//     another options.root, no rule named "root" is needed (llama.cpp
//     wants one whatever its root).
#ifndef XSAMPLER_GBNF_HPP
#define XSAMPLER_GBNF_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grammar.hpp"
#include "types.hpp"
#include "detail/utf8.hpp"

namespace xsampler
{
    /// Options of parse_gbnf.
    struct gbnf_options
    {
        std::string root = "root";                    ///< the rule the texts are of
        std::size_t max_size = std::size_t(1) << 20;  ///< bytes of grammar text (1 MiB)
        std::size_t max_depth = 256;                  ///< nesting of parentheses and stacked repetitions
        std::size_t max_count = 2000;                 ///< the largest m of {m}, {m,}, {m,n} (llama.cpp's limit)
        bool large_max_unbounded = false;             ///< llama.cpp's rule: an n of {m,n} above max_count means {m,}
    };

    namespace detail
    {
        class gbnf_parser
        {
        public:
            using expr_id = grammar::expr_id;
            using rule_id = grammar::rule_id;

            gbnf_parser(std::string_view text, const gbnf_options& o) : m_t(text), m_o(o) {}

            grammar parse()
            {
                if (m_t.size() > m_o.max_size)
                {
                    throw invalid_parameter("gbnf: the grammar is " + std::to_string(m_t.size()) +
                                            " bytes, more than the limit of " + std::to_string(m_o.max_size) +
                                            " (gbnf_options::max_size)");
                }
                const std::size_t nul = m_t.find('\0');
                if (nul != std::string_view::npos)
                {
                    fail("a NUL byte", nul);
                }
                space(true);
                while (!at_end())
                {
                    rule();
                }
                for (const auto& [r, at] : m_first_use)
                {
                    if (!m_g.defined(r))
                    {
                        fail("rule '" + m_g.name(r) + "' is used", at, " but never defined");
                    }
                }
                const rule_id root = m_g.find(m_o.root);
                if (root == grammar::none || !m_g.defined(root))
                {
                    throw invalid_parameter("gbnf: the grammar defines no rule '" + m_o.root +
                                            "' (the root rule)");
                }
                m_g.set_root(root);
                return std::move(m_g);
            }

        private:
            std::string_view m_t;
            const gbnf_options& m_o;
            std::size_t m_i = 0;
            grammar m_g;
            std::string m_rule;                          // the rule being read (messages)
            std::map<rule_id, std::size_t> m_first_use;  // where each rule is first referred to
            std::map<std::pair<bool, grammar::code_point_ranges>, expr_id> m_classes;  // shared class expressions
            expr_id m_any = grammar::none;
            std::uint64_t m_generated = 0;  // the rules llama.cpp would have generated so far

            /// llama.cpp's symbol count: rule names seen, and the rules it generates.
            std::uint64_t symbols() const noexcept { return m_g.rules() + m_generated; }

            // --- positions and errors ---

            bool at_end() const noexcept { return m_i >= m_t.size(); }
            char cur() const noexcept { return m_t[m_i]; }
            bool is(char c) const noexcept { return m_i < m_t.size() && m_t[m_i] == c; }
            static bool word_char(char c) noexcept
            {
                return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
            }
            static bool digit(char c) noexcept { return c >= '0' && c <= '9'; }

            /// Byte offset `at` as line:column (a column counts code points).
            std::string where(std::size_t at) const
            {
                std::size_t line = 1, col = 1;
                for (std::size_t i = 0; i < at && i < m_t.size(); ++i)
                {
                    const auto b = static_cast<unsigned char>(m_t[i]);
                    if (b == '\n' || (b == '\r' && (i + 1 >= m_t.size() || m_t[i + 1] != '\n')))
                    {
                        ++line;
                        col = 1;
                    }
                    else if (b != '\r' && (b & 0xC0) != 0x80)
                    {
                        ++col;
                    }
                }
                return std::to_string(line) + ":" + std::to_string(col);
            }
            [[noreturn]] void fail(const std::string& what, std::size_t at, const std::string& after = "") const
            {
                throw invalid_parameter("gbnf: " + what + " at " + where(at) + after);
            }
            /// What is at m_i, for "found ..." in messages.
            std::string found() const
            {
                if (at_end())
                {
                    return "the end of the text";
                }
                const auto b = static_cast<unsigned char>(cur());
                if (b == '\n' || b == '\r')
                {
                    return "a newline";
                }
                if (b >= 0x20 && b < 0x7F)
                {
                    return std::string("'") + char(b) + "'";
                }
                std::uint32_t v = 0;
                if (const std::size_t len = detail::utf8_decode(m_t, m_i, v); len > 1)
                {
                    return "'" + std::string(m_t.substr(m_i, len)) + "'";  // a well-formed character as itself
                }
                static const char* hex = "0123456789ABCDEF";
                return std::string("byte 0x") + hex[b >> 4] + hex[b & 15];
            }
            std::string in_rule() const { return m_rule.empty() ? std::string() : " (in rule '" + m_rule + "')"; }

            // --- lexical ---

            /// Spaces, tabs and comments; newlines too where newline_ok.
            void space(bool newline_ok)
            {
                while (!at_end())
                {
                    const char c = cur();
                    if (c == ' ' || c == '\t' || (newline_ok && (c == '\r' || c == '\n')))
                    {
                        ++m_i;
                    }
                    else if (c == '#')
                    {
                        while (!at_end() && cur() != '\r' && cur() != '\n')
                        {
                            ++m_i;
                        }
                    }
                    else
                    {
                        break;
                    }
                }
            }
            std::string name()
            {
                const std::size_t from = m_i;
                while (!at_end() && word_char(cur()))
                {
                    ++m_i;
                }
                return std::string(m_t.substr(from, m_i - from));
            }
            /// A repetition count: digits, at most 2^32 - 1 (the matcher counts in 32 bits).
            std::size_t count()
            {
                const std::size_t from = m_i;
                std::uint64_t n = 0;
                bool big = false;
                while (!at_end() && digit(cur()))
                {
                    n = n * 10 + std::uint64_t(cur() - '0');
                    big = big || n > 0xFFFFFFFFull;
                    if (big)
                    {
                        n = 0xFFFFFFFFull + 1;
                    }
                    ++m_i;
                }
                if (big)
                {
                    fail("the repetition count " + std::string(m_t.substr(from, m_i - from)) +
                             " is too large (at most 4294967295)",
                         from);
                }
                return std::size_t(n);
            }
            unsigned hex_value(char c) const noexcept
            {
                if (c >= '0' && c <= '9')
                {
                    return unsigned(c - '0');
                }
                if (c >= 'a' && c <= 'f')
                {
                    return unsigned(c - 'a' + 10);
                }
                if (c >= 'A' && c <= 'F')
                {
                    return unsigned(c - 'A' + 10);
                }
                return 16;
            }
            /// One character of a literal or class: an escape or one UTF-8
            /// code point. in_literal: a surrogate is an error.
            std::uint32_t character(bool in_literal)
            {
                const std::size_t at = m_i;
                if (cur() == '\\')
                {
                    if (m_i + 1 >= m_t.size())
                    {
                        fail("an escape '\\' at the end of the text", at);
                    }
                    const char e = m_t[m_i + 1];
                    m_i += 2;
                    int digits = 0;
                    switch (e)
                    {
                    case 'x': digits = 2; break;
                    case 'u': digits = 4; break;
                    case 'U': digits = 8; break;
                    case 't': return '\t';
                    case 'r': return '\r';
                    case 'n': return '\n';
                    case '\\':
                    case '"':
                    case '[':
                    case ']':
                    case '-': return std::uint32_t(static_cast<unsigned char>(e));
                    default:
                    {
                        m_i = at + 1;
                        const auto b = static_cast<unsigned char>(e);
                        fail("unknown escape " +
                                 (b >= 0x20 && b < 0x7F ? std::string("'\\") + e + "'" : "'\\' before " + found()) +
                                 " (known: \\x \\u \\U \\t \\n \\r \\\\ \\\" \\[ \\] \\-)",
                             at);
                    }
                    }
                    std::uint64_t v = 0;
                    for (int k = 0; k < digits; ++k)
                    {
                        const unsigned h = at_end() ? 16 : hex_value(cur());
                        if (h == 16)
                        {
                            fail(std::string("\\") + e + " needs " + std::to_string(digits) + " hex digits", at);
                        }
                        v = v * 16 + h;
                        ++m_i;
                    }
                    if (v > 0x10FFFF)
                    {
                        fail("the code point " + std::string(m_t.substr(at, m_i - at)) + " is past U+10FFFF", at);
                    }
                    if (in_literal && v >= 0xD800 && v <= 0xDFFF)
                    {
                        fail("the code point " + std::string(m_t.substr(at, m_i - at)) +
                                 " is a surrogate, which no UTF-8 text holds",
                             at);
                    }
                    return std::uint32_t(v);
                }
                return utf8_char();
            }
            /// The well-formed UTF-8 code point at m_i, read.
            std::uint32_t utf8_char()
            {
                std::uint32_t v = 0;
                const std::size_t len = detail::utf8_decode(m_t, m_i, v);
                if (len == 0)
                {
                    fail("invalid UTF-8", m_i);
                }
                m_i += len;
                return v;
            }
            // --- syntax ---

            void rule()
            {
                const std::size_t at = m_i;
                if (!word_char(cur()))
                {
                    const bool bar = cur() == '|';
                    fail("expected a rule name, found " + found(), at,
                         bar ? " (a rule continues on the next line only after a '|' that ends a line, or "
                               "inside parentheses)"
                             : "");
                }
                const std::string n = name();
                space(false);
                if (m_t.substr(m_i, 3) != "::=")
                {
                    fail("expected '::=' after the rule name '" + n + "', found " + found(), m_i);
                }
                m_i += 3;
                space(true);
                m_rule = n;
                const rule_id r = m_g.rule(n);
                std::size_t height = 0;
                const expr_id body = alternatives(false, 0, height);
                if (is('\r'))
                {
                    ++m_i;
                    if (is('\n'))
                    {
                        ++m_i;
                    }
                }
                else if (is('\n'))
                {
                    ++m_i;
                }
                else if (!at_end())
                {
                    fail("expected a newline or the end of the text after rule '" + n + "', found " + found(), m_i);
                }
                m_g.define(r, body);
                m_rule.clear();
                space(true);
            }

            /// Alternatives up to what ends them (a newline outside
            /// parentheses, ')', or a character that starts no item).
            /// depth: the parentheses around them; height: see sequence().
            expr_id alternatives(bool nested, std::size_t depth, std::size_t& height)
            {
                std::vector<expr_id> alts;
                alts.push_back(sequence(nested, depth, height));
                while (is('|'))
                {
                    ++m_i;
                    space(true);
                    alts.push_back(sequence(nested, depth, height));
                }
                return alts.size() == 1 ? alts[0] : m_g.choice(std::move(alts));
            }

            /// A sequence of items; height: the largest nesting of its items
            /// (a group 1 + its inside, a repetition 1 + its item), kept up.
            expr_id sequence(bool nested, std::size_t depth, std::size_t& height)
            {
                std::vector<expr_id> items;
                std::vector<std::size_t> heights;
                bool last = false;  // an item a repetition may apply to is items.back()
                std::uint64_t expansion = 1;  // the rules llama.cpp would expand items.back() into
                const auto push = [&](expr_id e, std::size_t h) {
                    items.push_back(e);
                    heights.push_back(h);
                    last = true;
                    expansion = 1;
                };
                while (!at_end())
                {
                    const char c = cur();
                    const std::size_t at = m_i;
                    if (c == '"')
                    {
                        ++m_i;
                        std::string bytes;
                        for (;;)
                        {
                            if (at_end())
                            {
                                fail("unterminated string literal", at, in_rule());
                            }
                            if (cur() == '"')
                            {
                                break;
                            }
                            detail::utf8_append(character(true), bytes);
                        }
                        ++m_i;
                        space(nested);
                        if (bytes.empty())
                        {
                            last = false;  // "" is no item: llama.cpp refuses ""* too
                            expansion = 1;
                        }
                        else
                        {
                            push(m_g.bytes(bytes), 0);
                        }
                    }
                    else if (c == '[')
                    {
                        push(char_class(), 0);
                        space(nested);
                    }
                    else if (c == '<' || c == '!')
                    {
                        fail("token references (<[id]>, <token>, !<...>) are not supported: the grammar is over "
                             "bytes, which have no token ids,",
                             at);
                    }
                    else if (word_char(c))
                    {
                        const rule_id r = m_g.rule(name());
                        m_first_use.emplace(r, at);
                        push(m_g.ref(r), 0);
                        space(nested);
                    }
                    else if (c == '(')
                    {
                        if (depth + 1 > m_o.max_depth)
                        {
                            too_deep(at);
                        }
                        ++m_i;
                        space(true);
                        std::size_t inner = 0;
                        const std::uint64_t before = symbols();
                        ++m_generated;  // llama.cpp's rule for the group
                        const expr_id inside = alternatives(true, depth + 1, inner);
                        if (!is(')'))
                        {
                            fail("expected ')' to close the '(' at " + where(at) + ", found " + found(), m_i,
                                 in_rule());
                        }
                        ++m_i;
                        space(nested);
                        push(inside, inner + 1);
                        expansion = symbols() - before;
                    }
                    else if (c == '.')
                    {
                        ++m_i;
                        space(nested);
                        if (m_any == grammar::none)
                        {
                            m_any = m_g.any_code_point();
                        }
                        push(m_any, 0);
                    }
                    else if (c == '*' || c == '+' || c == '?')
                    {
                        ++m_i;
                        space(nested);
                        repeat(items, heights, last, expansion, at, c == '+' ? 1 : 0,
                               c == '?' ? 1 : grammar::unbounded, depth);
                    }
                    else if (c == '{')
                    {
                        ++m_i;
                        space(nested);
                        if (at_end() || !digit(cur()))
                        {
                            fail("expected a number after '{', found " + found(), m_i, in_rule());
                        }
                        const std::size_t min = count();
                        std::size_t max = min;
                        space(nested);
                        if (is(','))
                        {
                            ++m_i;
                            space(nested);
                            max = grammar::unbounded;
                            if (!at_end() && digit(cur()))
                            {
                                max = count();
                                space(nested);
                            }
                            if (!is('}'))
                            {
                                fail("expected '}' to close the '{' at " + where(at) + ", found " + found(), m_i,
                                     in_rule());
                            }
                        }
                        else if (!is('}'))
                        {
                            fail("expected ',' or '}' after the count, found " + found(), m_i, in_rule());
                        }
                        ++m_i;
                        space(nested);
                        if (min > m_o.max_count)
                        {
                            fail("the repetition minimum " + std::to_string(min) + " is over the limit of " +
                                     std::to_string(m_o.max_count) + " (gbnf_options::max_count)",
                                 at, in_rule());
                        }
                        if (max != grammar::unbounded && max < min)
                        {
                            fail("the repetition {" + std::to_string(min) + "," + std::to_string(max) +
                                     "} has its maximum below its minimum",
                                 at, in_rule());
                        }
                        if (max != grammar::unbounded && max > m_o.max_count && m_o.large_max_unbounded)
                        {
                            max = grammar::unbounded;
                        }
                        repeat(items, heights, last, expansion, at, min, max, depth);
                    }
                    else
                    {
                        break;
                    }
                }
                for (const std::size_t h : heights)
                {
                    height = std::max(height, h);
                }
                if (items.empty())
                {
                    return m_g.empty();
                }
                return m_g.sequence(std::move(items));
            }

            /// items.back() repeated min..max times (the operator at `at`).
            /// expansion: what llama.cpp would expand it into, as rules (see
            /// the top of this file), multiplied by the repetition's count.
            void repeat(std::vector<expr_id>& items, std::vector<std::size_t>& heights, bool last,
                        std::uint64_t& expansion, std::size_t at, std::size_t min, std::size_t max, std::size_t depth)
            {
                if (!last)
                {
                    fail(std::string("'") + m_t[at] + "' has no item before it to repeat", at, in_rule());
                }
                // llama.cpp's reading: a maximum over its limit is no maximum
                const bool no_max = max == grammar::unbounded || max > m_o.max_count;
                const std::uint64_t copies = !no_max && max > 0 ? max : min > 0 ? min : 1;
                if (expansion * copies >= m_o.max_count)
                {
                    const std::string op = m_t[at] != '{' ? std::string(1, m_t[at])
                                           : "{" + std::to_string(min) +
                                                 (max == min ? std::string()
                                                  : max == grammar::unbounded ? std::string(",")
                                                                              : "," + std::to_string(max)) +
                                                 "}";
                    fail("the repetition " + op + " of an item of " + std::to_string(expansion) +
                             (expansion == 1 ? " rule" : " rules") + " expands to " +
                             std::to_string(expansion * copies) + ", not under the limit of " +
                             std::to_string(m_o.max_count) +
                             " (llama.cpp's rule: nested repetitions multiply; gbnf_options::max_count)",
                         at, in_rule());
                }
                expansion *= copies;
                m_generated += no_max ? 1 : max - min;
                items.back() = m_g.repeat(items.back(), min, max);
                if (depth + ++heights.back() > m_o.max_depth)
                {
                    too_deep(at);
                }
            }
            [[noreturn]] void too_deep(std::size_t at) const
            {
                fail("expressions nested deeper than " + std::to_string(m_o.max_depth) +
                         " levels (parentheses and stacked repetitions; gbnf_options::max_depth)",
                     at, in_rule());
            }

            /// [...] or [^...] at m_i.
            expr_id char_class()
            {
                const std::size_t at = m_i;
                ++m_i;
                bool negated = false;
                if (is('^'))
                {
                    negated = true;
                    ++m_i;
                }
                grammar::code_point_ranges ranges;
                for (;;)
                {
                    if (at_end())
                    {
                        fail("unterminated character class", at, in_rule());
                    }
                    if (cur() == ']')
                    {
                        break;
                    }
                    const std::size_t lo_at = m_i;
                    const std::uint32_t lo = character(false);
                    std::uint32_t hi = lo;
                    if (is('-') && m_i + 1 < m_t.size() && m_t[m_i + 1] != ']')
                    {
                        ++m_i;
                        hi = character(false);
                        if (hi < lo)
                        {
                            fail("the range " + std::string(m_t.substr(lo_at, m_i - lo_at)) +
                                     " is reversed (its end is below its start)",
                                 lo_at, in_rule());
                        }
                    }
                    ranges.emplace_back(lo, hi);
                }
                ++m_i;
                if (ranges.empty())
                {
                    fail(std::string("an empty character class ") + (negated ? "[^]" : "[]"), at,
                         " (llama.cpp reads it as the empty text; write \"\" for that, . for any character)");
                }
                std::sort(ranges.begin(), ranges.end());
                auto key = std::make_pair(negated, ranges);
                const auto it = m_classes.find(key);
                if (it != m_classes.end())
                {
                    return it->second;
                }
                const expr_id e = m_g.code_points(ranges, negated);
                m_classes.emplace(std::move(key), e);
                return e;
            }
        };
    }

    /// The grammar of a GBNF text (llama.cpp's format; see the top of this file).
    inline grammar parse_gbnf(std::string_view text, const gbnf_options& options = {})
    {
        return detail::gbnf_parser(text, options).parse();
    }
}

#endif
