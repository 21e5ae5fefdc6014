// xsampler/regex.hpp — a regular expression compiled to a DFA over bytes. (xsampler, BSD-3-Clause)
//
// compile_regex(pattern, options) -> byte_dfa: the automaton a regex
// constraint walks each token's bytes through. The DFA reads UTF-8 bytes;
// every text it accepts is valid UTF-8 matching the pattern.
//
// byte_dfa
//   States are 0 .. size()-1, start() == 0. Every state is live: an
//   accepting state can be reached from it. next(s, b) is the state after
//   byte b, or byte_dfa::dead (-1) when no accepted text continues that way;
//   a dense table of 256 int32 per state. distance(s): the bytes on a
//   shortest path from s to an accepting state (0 when s accepts).
//   completion_byte(s), for a state that does not accept: the smallest byte b
//   with distance(next(s, b)) == distance(s) - 1, so that following it ends in
//   an accepting state after exactly distance(s) bytes. The DFA is minimal
//   (Hopcroft), so equal languages give DFAs of equal size. byte_classes():
//   the bytes no state tells apart, as classes (numbered by their smallest
//   byte); minimisation and products work over these classes, not 256 bytes.
//   from_table / from_classes build the minimal DFA of a table of states.
//   dfa_intersection / dfa_difference: products; dfa_code_points(d, min, max):
//   d's texts of min to max code points, counted only while it matters.
//
// Syntax (ECMAScript's, a subset; the pattern is UTF-8, a character is one
// code point):
//   literals        any character except the specials . \ [ ] ( ) { } * + ? | ^ $
//                   (a lone ] or } is literal, as in ECMAScript's Annex B)
//   escapes         \. \\ \/ \- \[ \] \( \) \{ \} \* \+ \? \| \^ \$ (any ASCII
//                   punctuation), \n \t \r \f \v \0 \cX \xHH \uHHHH (a
//                   surrogate pair \uD83D\uDE00 is one code point; a lone
//                   surrogate is an error)
//   classes         \d [0-9], \w [A-Za-z0-9_], \s (ECMAScript's white space
//                   and line terminators: \t \n \v \f \r space U+00A0
//                   U+1680 U+2000-U+200A U+2028 U+2029 U+202F U+205F U+3000
//                   U+FEFF), \D \W \S their complements; . any character but
//                   the line terminators \n \r U+2028 U+2029 (ECMAScript)
//   brackets        [a-z0-9_], [^...]; ranges over code points (é-ü, any
//                   plane); escapes inside, \b there is backspace; - is
//                   literal first or last; [] matches nothing, [^] anything
//   groups          ( ) and (?: ) (no captures are reported: only the
//                   language matters)
//   alternation     |
//   quantifiers     * + ? {n} {n,} {n,m}, n and m at most 1000; a lazy
//                   *? +? ?? {n,m}? is accepted and means the same language
//   anchors         ^ at the text's start alone, $ at its end alone (no
//                   multiline), anywhere in the pattern: (^a|b)c, x($|/);
//                   \b between a word character [A-Za-z0-9_] and another
//                   (the text's start and end are none), \B elsewhere;
//                   next to a character past ASCII (a word character in
//                   Python's re) reading both holds neither, either both
//   Complements (. [^...] \D \W \S) match the UTF-8 encoding of any code
//   point outside them: <= U+10FFFF, not a surrogate, shortest form.
// Not supported (invalid_parameter naming the construct and its byte
// offset: "regex: lookahead (?= is not supported, at offset 3"):
//   backreferences \1 \k<name>, lookahead (?= (?!, lookbehind (?<= (?<!,
//   named groups (?<name> (?P<name>, inline flags (?i), \B inside a
//   bracket, Unicode properties \p{..} \P{..}, possessive quantifiers *+, other
//   letter escapes (\a \e \z ...), a { that does not begin a quantifier
//   (write \{).
// Malformed (invalid_parameter with the offset): unbalanced parentheses, an
//   unclosed [, a range whose ends are reversed (z-a) or a class escape, a
//   quantifier with nothing to repeat or after another, {n,m} with m < n, a
//   count over 1000, invalid UTF-8 in the pattern.
//
// regex_options
//   search = false: the whole text must match (anchored at both ends).
//   search = true: JSON Schema's `pattern`: the pattern may match anywhere
//     in the text, i.e. any text may precede a top-level alternative that
//     does not start with ^ and follow one that does not end with $.
//   reading: how \d \w \s \D \W \S and '.' read. ecmascript (the default):
//     as above. both: a subset of what ECMAScript and Python's re (which
//     python-jsonschema uses: Unicode digits, letters and white space, '.'
//     all but \n) both match: \d [0-9], \w [A-Za-z0-9_], \s the white space
//     both list, \D \W outside [0-9] / [A-Za-z0-9_] and ASCII, \S outside
//     either's white space, '.' ECMAScript's. either: a superset of what
//     either matches (\d [0-9] and every non-ASCII character, \D anything
//     but [0-9], '.' anything but \n, ...): its complement is what neither
//     matches (JSON Schema's pattern under not). A negated bracket [^...]
//     reads its escapes the other way.
//   forbidden[b]: bytes no accepted text contains (for a JSON string's
//     content: '"', '\\' and 0x00-0x1f). A pattern that can then match
//     nothing (or matches nothing at all, like []): invalid_parameter.
//   max_states: the largest DFA subset construction may build, before
//     minimisation (more: invalid_parameter naming the limit).
//   max_nfa_nodes: the largest NFA the pattern may expand to ({n,m} copies
//     its operand; more: invalid_parameter).
//   max_work: the NFA nodes subset construction may visit in all (10^8 by
//     default, about a second; more: invalid_parameter). A bounded repeat
//     after an unanchored start, like .*a{0,1000}, builds a large DFA before
//     minimisation shrinks it, and each of its states is a large NFA set.
// Cost: O(NFA nodes + DFA states x (256 + NFA nodes)) to build, then
// O(classes x states x log states) to minimise; 1 KiB of table per state.
#ifndef XSAMPLER_REGEX_HPP
#define XSAMPLER_REGEX_HPP

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "types.hpp"
#include "detail/utf8.hpp"

namespace xsampler
{
    /// How class escapes and '.' read (regex_options::reading).
    enum class regex_reading
    {
        ecmascript,  // ECMAScript's classes (the syntax's)
        both,        // a subset of what both ECMAScript and Python's re match
        either,      // a superset of what either matches
    };

    struct regex_options
    {
        bool search = false;
        regex_reading reading = regex_reading::ecmascript;
        std::array<bool, 256> forbidden{};
        std::size_t max_states = 10000;
        std::size_t max_nfa_nodes = 100000;
        std::size_t max_work = 100000000;
    };

    class byte_dfa;
    byte_dfa compile_regex(std::string_view pattern, const regex_options& options = {});

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
        using code_point = std::uint32_t;
        using detail::max_code_point;
        using detail::utf8_append;
        using detail::utf8_encode;
        using detail::utf8_length;
        constexpr int max_count = 1000;
        constexpr int max_depth = 256;

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

        /// Thompson's NFA over bytes: a byte node moves on [lo, hi] to out; an
        /// epsilon node to out and out2 (-1: none); the accept node ends a match.
        struct nfa_node
        {
            enum kind_t : unsigned char
            {
                byte,
                eps,
                accept,
                begin,  // an epsilon to out at the text's start alone
                end,    // one to out at its end alone
                word,   // one to out between a word character and another (\b)
                inside  // one to out elsewhere (\B)
            } kind;
            unsigned char lo = 0, hi = 0;
            std::int32_t out = -1, out2 = -1;
        };

        class nfa_builder
        {
        public:
            nfa_builder(const std::vector<ast_node>& ast, std::size_t limit) : m_ast(ast), m_limit(limit) {}
            std::vector<nfa_node> nodes;
            bool anchored = false;  // a ^ or $ within the pattern (not the top level's)
            bool bounded = false;   // a \b or \B

            int node(nfa_node n)
            {
                if (nodes.size() >= m_limit)
                {
                    too_big();
                }
                nodes.push_back(n);
                return int(nodes.size()) - 1;
            }
            int eps(int out, int out2) { return node({nfa_node::eps, 0, 0, out, out2}); }

            // The start of `a` followed by `next` (built back to front).
            int build(int a, int next)
            {
                if (++m_steps > 4 * m_limit)
                {
                    too_big();
                }
                const ast_node& n = m_ast[std::size_t(a)];
                switch (n.kind)
                {
                case ast_node::empty: return next;
                case ast_node::begin: anchored = true; return node({nfa_node::begin, 0, 0, next, -1});
                case ast_node::end: anchored = true; return node({nfa_node::end, 0, 0, next, -1});
                case ast_node::word: bounded = true; return node({nfa_node::word, 0, 0, next, -1});
                case ast_node::inside: bounded = true; return node({nfa_node::inside, 0, 0, next, -1});
                case ast_node::set: return build_set(n.chars, next);
                case ast_node::concat:
                {
                    int cur = next;
                    for (auto it = n.kids.rbegin(); it != n.kids.rend(); ++it)
                    {
                        cur = build(*it, cur);
                    }
                    return cur;
                }
                case ast_node::alt:
                {
                    int cur = -1;
                    for (auto it = n.kids.rbegin(); it != n.kids.rend(); ++it)
                    {
                        const int s = build(*it, next);
                        cur = cur < 0 ? s : eps(s, cur);
                    }
                    return cur;
                }
                case ast_node::repeat:
                default:
                {
                    const int child = n.kids[0];
                    int cur = next;
                    if (n.max < 0)
                    {
                        cur = star(child, next);
                    }
                    else
                    {
                        for (int i = n.min; i < n.max; ++i)
                        {
                            const int body = build(child, cur);
                            cur = eps(body, next);
                        }
                    }
                    for (int i = 0; i < n.min; ++i)
                    {
                        cur = build(child, cur);
                    }
                    return cur;
                }
                }
            }

            int star(int child, int next)
            {
                const int s = eps(-1, next);
                const int body = build(child, s);
                nodes[std::size_t(s)].out = body;
                return s;
            }

            int build_set(const cp_set& chars, int next)
            {
                std::vector<byte_seq> seqs;
                for (const auto& r : chars)
                {
                    utf8_sequences(r.first, r.second, seqs);
                }
                if (seqs.empty())
                {
                    return eps(-1, -1);  // matches nothing
                }
                // Sequences that end alike share their tails (the continuation
                // bytes of most multi-byte ranges), so that subset construction
                // meets one NFA node where the encodings converge.
                std::map<std::tuple<unsigned char, unsigned char, int>, int> shared;
                int cur = -1;
                for (auto it = seqs.rbegin(); it != seqs.rend(); ++it)
                {
                    int s = next;
                    for (auto b = it->rbegin(); b != it->rend(); ++b)
                    {
                        const auto key = std::make_tuple(b->first, b->second, s);
                        const auto found = shared.find(key);
                        if (found != shared.end())
                        {
                            s = found->second;
                            continue;
                        }
                        const int made = node({nfa_node::byte, b->first, b->second, s, -1});
                        shared.emplace(key, made);
                        s = made;
                    }
                    cur = cur < 0 ? s : eps(s, cur);
                }
                return cur;
            }

        private:
            const std::vector<ast_node>& m_ast;
            std::size_t m_limit;
            std::size_t m_steps = 0;
            [[noreturn]] void too_big() const
            {
                throw invalid_parameter("regex: the pattern expands to more than " + std::to_string(m_limit) +
                                        " NFA nodes (max_nfa_nodes); reduce its repeat counts");
            }
        };

        struct vector_hash
        {
            std::size_t operator()(const std::vector<std::int32_t>& v) const noexcept
            {
                std::uint64_t h = 1469598103934665603ull;
                for (const std::int32_t x : v)
                {
                    h = (h ^ std::uint32_t(x)) * 1099511628211ull;
                }
                return std::size_t(h ^ (h >> 29));
            }
        };

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

    /// Compiles `pattern` (syntax: the comment at the top) to a minimal DFA
    /// over bytes whose states are all live. Errors: invalid_parameter naming
    /// the construct and its byte offset, or the limit exceeded.
    inline byte_dfa compile_regex(std::string_view pattern, const regex_options& options)
    {
        using namespace detail::regex;
        parser p(pattern, options.reading);
        p.parse();

        // The root: each top-level alternative, with any text before it and
        // after it in search mode unless anchored there.
        int any = -1;
        auto any_text = [&]() {
            if (any < 0)
            {
                ast_node set;
                set.kind = ast_node::set;
                set.chars = without_surrogates(any_set());
                p.nodes.push_back(set);
                ast_node star;
                star.kind = ast_node::repeat;
                star.kids = {int(p.nodes.size()) - 1};
                star.min = 0;
                star.max = -1;
                p.nodes.push_back(star);
                any = int(p.nodes.size()) - 1;
            }
            return any;
        };
        ast_node root;
        root.kind = ast_node::alt;
        for (const auto& a : p.top)
        {
            ast_node seq;
            seq.kind = ast_node::concat;
            if (options.search && !a.begin_anchor)
            {
                seq.kids.push_back(any_text());
            }
            seq.kids.push_back(a.node);
            if (options.search && !a.end_anchor)
            {
                seq.kids.push_back(any_text());
            }
            p.nodes.push_back(std::move(seq));
            root.kids.push_back(int(p.nodes.size()) - 1);
        }
        p.nodes.push_back(std::move(root));

        nfa_builder nfa(p.nodes, std::max<std::size_t>(options.max_nfa_nodes, 1));
        const int accept = nfa.node({nfa_node::accept, 0, 0, -1, -1});
        const int nfa_start = nfa.build(int(p.nodes.size()) - 1, accept);
        const std::vector<nfa_node>& nodes = nfa.nodes;

        // Subset construction: a DFA state is the sorted set of byte, accept
        // and end nodes its epsilon closure reaches (a begin node passed at the
        // start alone; the start's set marked with nodes.size() where the
        // pattern has anchors within, so that no later set is taken for it).
        // Where the pattern has \b or \B, a set also ends with what the character before it is
        // (bounded_mark + one of these), and its assertions wait in it for the next byte.
        const std::int32_t at_start = std::int32_t(nodes.size()), bounded_mark = at_start + 1;
        enum : int
        {
            non_word,  // the text's end, or an ASCII character that is not a word character
            word,      // [A-Za-z0-9_]
            other,     // a character past ASCII: no word character in ECMAScript, maybe one in Python's re
            none       // (before alone) the text's start: as non_word
        };
        const auto word_class = [](unsigned b) {
            const bool w = (b >= '0' && b <= '9') || (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z') || b == '_';
            return b >= 0x80 ? other : w ? word : non_word;
        };
        // whether assertion k holds between a character of class `before` and one of class `after`
        // (past ASCII, where ECMAScript and Python's re may differ: never for reading both, always for
        // either; \B in the empty text, where Python's re (before 3.14) refuses it, never for both)
        const auto holds = [&](nfa_node::kind_t k, int before, int after, bool at_end = false) {
            if ((before == other || after == other) && options.reading != regex_reading::ecmascript)
            {
                return options.reading == regex_reading::either;
            }
            if (k == nfa_node::inside && before == none && at_end && options.reading == regex_reading::both)
            {
                return false;
            }
            return ((before == word) != (after == word)) == (k == nfa_node::word);
        };
        std::vector<std::uint32_t> mark(nodes.size(), 0);
        std::uint32_t generation = 0;
        std::vector<std::int32_t> stack;
        std::size_t work = 0;
        // (with `after` a class: the nodes that read a byte of it, past the assertions that hold before it)
        auto closure = [&](const std::vector<std::int32_t>& from, bool start = false, int before = none, int after = -1) {
            ++generation;
            work += from.size();
            std::vector<std::int32_t> out;
            stack.assign(from.begin(), from.end());
            while (!stack.empty())
            {
                const std::int32_t q = stack.back();
                stack.pop_back();
                if (q < 0 || mark[std::size_t(q)] == generation)
                {
                    continue;
                }
                mark[std::size_t(q)] = generation;
                if (++work > options.max_work)
                {
                    throw invalid_parameter("regex: the pattern needs more than " + std::to_string(options.max_work) +
                                            " steps of subset construction (max_work = " +
                                            std::to_string(options.max_work) + ")");
                }
                const nfa_node& n = nodes[std::size_t(q)];
                if (n.kind == nfa_node::eps)
                {
                    stack.push_back(n.out2);
                    stack.push_back(n.out);
                }
                else if (n.kind == nfa_node::begin)
                {
                    if (start)
                    {
                        stack.push_back(n.out);
                    }
                }
                else if (after >= 0 && (n.kind == nfa_node::word || n.kind == nfa_node::inside))
                {
                    if (holds(n.kind, before, after))
                    {
                        stack.push_back(n.out);
                    }
                }
                else
                {
                    out.push_back(q);
                }
            }
            if (after >= 0)
            {
                return out;
            }
            std::sort(out.begin(), out.end());
            if (start && nfa.anchored)
            {
                out.push_back(at_start);
            }
            if (nfa.bounded && !out.empty())
            {
                out.push_back(bounded_mark + before);
            }
            return out;
        };
        // Whether the text may end at end node q (or at an assertion that holds there): its epsilons
        // (and ends, assertions that hold at the end; begins at the start) reach accept.
        std::vector<signed char> ends_here(nodes.size() * 4, -1);  // (not at the start; by the character before)
        auto may_end = [&](std::int32_t q, bool start, int before) {
            const std::size_t memo = std::size_t(q) * 4 + std::size_t(before);
            if (!start && ends_here[memo] >= 0)
            {
                return ends_here[memo] == 1;
            }
            std::vector<std::int32_t> todo{nodes[std::size_t(q)].out};
            std::vector<bool> seen(nodes.size(), false);
            bool found = false;
            while (!todo.empty() && !found)
            {
                const std::int32_t x = todo.back();
                todo.pop_back();
                if (x < 0 || seen[std::size_t(x)])
                {
                    continue;
                }
                seen[std::size_t(x)] = true;
                const nfa_node& n = nodes[std::size_t(x)];
                found = n.kind == nfa_node::accept;
                if (n.kind == nfa_node::eps)
                {
                    todo.push_back(n.out2);
                }
                if (n.kind == nfa_node::eps || n.kind == nfa_node::end || (n.kind == nfa_node::begin && start) ||
                    ((n.kind == nfa_node::word || n.kind == nfa_node::inside) && holds(n.kind, before, non_word, true)))
                {
                    todo.push_back(n.out);
                }
            }
            if (!start)
            {
                ends_here[memo] = found ? 1 : 0;
            }
            return found;
        };
        std::vector<std::vector<std::int32_t>> sets;
        std::unordered_map<std::vector<std::int32_t>, std::int32_t, vector_hash> index;
        std::vector<std::int32_t> table;  // subset DFA, dead = -1
        std::vector<bool> accepts;
        auto intern = [&](std::vector<std::int32_t> s) -> std::int32_t {
            if (s.empty())
            {
                return byte_dfa::dead;
            }
            const auto found = index.find(s);
            if (found != index.end())
            {
                return found->second;
            }
            if (sets.size() >= options.max_states)
            {
                throw invalid_parameter("regex: the pattern needs more than " + std::to_string(options.max_states) +
                                        " DFA states (max_states = " + std::to_string(options.max_states) + ")");
            }
            const std::int32_t id = std::int32_t(sets.size());
            index.emplace(s, id);
            sets.push_back(std::move(s));
            return id;
        };
        intern(closure({nfa_start}, true));
        std::array<std::vector<std::int32_t>, 256> targets;
        for (std::size_t d = 0; d < sets.size(); ++d)
        {
            for (auto& t : targets)
            {
                t.clear();
            }
            bool acc = false;
            std::size_t held = sets[d].size();
            const int before = nfa.bounded ? sets[d][--held] - bounded_mark : none;
            const bool start = held > 0 && sets[d][held - 1] == at_start;
            held -= start ? 1 : 0;
            std::vector<std::int32_t> asserts;  // \b and \B, decided by the next byte
            const auto reads = [&](const nfa_node& n, int only) {
                for (unsigned b = n.lo; b <= n.hi; ++b)
                {
                    if (!options.forbidden[b] && (only < 0 || word_class(b) == only))
                    {
                        targets[b].push_back(n.out);
                    }
                }
            };
            for (std::size_t i = 0; i < held; ++i)
            {
                const std::int32_t q = sets[d][i];
                const nfa_node& n = nodes[std::size_t(q)];
                if (n.kind == nfa_node::accept || n.kind == nfa_node::end || n.kind == nfa_node::word ||
                    n.kind == nfa_node::inside)
                {
                    acc = acc || n.kind == nfa_node::accept ||
                          ((n.kind == nfa_node::end || holds(n.kind, before, non_word, true)) && may_end(q, start, before));
                    if (n.kind == nfa_node::word || n.kind == nfa_node::inside)
                    {
                        asserts.push_back(q);
                    }
                    continue;
                }
                reads(n, -1);
            }
            // past each assertion that holds before a byte of a class, what its epsilons reach reads that byte
            for (const int after : {non_word, word, other})
            {
                for (const std::int32_t q : asserts.empty() ? asserts : closure(asserts, start, before, after))
                {
                    if (nodes[std::size_t(q)].kind == nfa_node::byte)
                    {
                        reads(nodes[std::size_t(q)], after);
                    }
                }
            }
            accepts.push_back(acc);
            table.resize((d + 1) * 256);
            for (unsigned b = 0; b < 256; ++b)
            {
                std::vector<std::int32_t>& t = targets[b];
                if (!asserts.empty())
                {
                    std::sort(t.begin(), t.end());
                    t.erase(std::unique(t.begin(), t.end()), t.end());
                }
                const bool same = b > 0 && t == targets[b - 1] && (!nfa.bounded || word_class(b) == word_class(b - 1));
                table[d * 256 + b] = same ? table[d * 256 + b - 1] : intern(closure(t, false, word_class(b)));
            }
        }
        sets.clear();
        index.clear();
        byte_dfa dfa = byte_dfa::from_table(std::move(table), accepts);
        if (dfa.size() == 0)
        {
            bool any_forbidden = false;
            for (const bool f : options.forbidden)
            {
                any_forbidden = any_forbidden || f;
            }
            throw invalid_parameter(std::string("regex: the pattern matches no text") +
                                    (any_forbidden ? " without the forbidden bytes" : ""));
        }
        return dfa;
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
