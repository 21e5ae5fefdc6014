// xsampler/regex.hpp — a regular expression compiled to a DFA over bytes. (xsampler, BSD-3-Clause)
//
// compile_regex(pattern, options) -> byte_dfa: the automaton a regex
// constraint walks each token's bytes through. The DFA reads UTF-8 bytes;
// every text it accepts is valid UTF-8 matching the pattern.
//
// The DFA itself (states, distance, completion_byte, byte classes, the
// minimal DFA of a table) is byte_dfa.hpp's; products and the other
// operations on DFAs are dfa_operations.hpp's. This file includes both.
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
#include "byte_dfa.hpp"
#include "dfa_operations.hpp"
#include "detail/regex_classes.hpp"
#include "detail/regex_parser.hpp"
#include "detail/regex_nfa.hpp"

namespace xsampler
{
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
}

#endif
