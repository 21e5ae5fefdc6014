// xsampler/matcher.hpp — an Earley recogniser over a compiled grammar, byte by byte. (xsampler, BSD-3-Clause)
//
// compile_grammar(grammar[, limits]) -> shared_ptr<const grammar_automaton>:
//   the grammar checked and compiled (detail/automaton.hpp: one minimal DFA
//   per rule over bytes and rule symbols); immutable, shared by every matcher.
//
// matcher(automaton): the text read so far, as an Earley chart (one set of
// items per byte; an item is a rule's DFA state, the byte where the rule
// began, and for a counted rule the iterations done). Any context-free
// grammar: left recursion, ambiguity and rules that match the empty text
// are what Earley's algorithm handles (nullable rules by Aycock and
// Horspool's rule: predicting one also moves past it).
//   step(b)      reads byte b: true if some text of the language starts with
//                the bytes read and b; false otherwise, and nothing changes
//   feed(bytes)  reads bytes until one fails: how many were read
//   repeat()     reads a byte known to leave the set as it is (a walk's
//                shortcut: the set's items again, its own ones renumbered)
//   pop(n)       forgets the last n bytes read (n <= position())
//   complete()   the bytes read are a text of the language
//   shortest()   the length of the shortest completion (0 when complete)
//   completion() the shortest completion, the least in byte order among
//                the shortest: a path (reading its first byte leaves the
//                rest as the completion), since it is defined by the
//                language alone (with distinct marks: past an item that
//                would repeat, a search for the shortest way past its end)
//   check_distinct(on)  whether grammar::distinct marks are checked (on by
//                default; a chart started from items has them off): where
//                an item of a marked array ends (or a key of a marked
//                object: its earlier items are the object's members' keys),
//                the parses that would read it past an equal earlier item
//                of that array are dropped (json_canonical's equality: the
//                earlier items are decoded from the bytes read, once each;
//                the array found up the chart, through the rules between
//                it and the item); and where every item of
//                the set is inside a string item whose content so far
//                begins an earlier item, an integer item of more than 5
//                digits (or 0), or a distinct_closed object item whose
//                members so far agree with an earlier item's, a byte after
//                which no completion of it is new is refused (a search byte
//                by byte, check B; other object items always have a new
//                completion: unchecked).
//                Off, the language is the
//                grammar's without the marks, a superset: walks that cache
//                what they find by positions alone (masks) need that.
//                shortest() stays the superset's, a lower bound.
//   rules_here() the grammar rules the text is in now (messages)
//   after_kernel() the bytes that may come first once a rule the text is in
//                ends, whenever it ends (budgets: which tokens may read on)
// Every state the matcher reaches is live: all rules are productive and
// every DFA state can end, so a non-empty set is a prefix of the language
// (with distinct marks: string items, in arrays that take no more items
// than the item has strings, integers of at most 15 digits, and closed
// objects of endless strings, as json_schema.hpp builds them; other items
// with endless completions from every prefix).
// A matcher is a value: copying it forks it (n samples, beams).
// Cost: O(items) per byte on grammars whose sets stay small (JSON, most
// GBNF grammars: a few items); Earley's O(n^3) at worst.
#ifndef XSAMPLER_MATCHER_HPP
#define XSAMPLER_MATCHER_HPP

#include <algorithm>
#include <array>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "detail/automaton.hpp"
#include "detail/json_canonical.hpp"
#include "grammar.hpp"
#include "detail/matcher_chart.hpp"
#include "detail/matcher_completion.hpp"
#include "detail/matcher_distinct.hpp"

namespace xsampler
{
    /// The grammar checked and compiled (see the top of this file).
    inline std::shared_ptr<const grammar_automaton> compile_grammar(const grammar& g, const grammar_limits& limits = {})
    {
        return detail::build_automaton(g, limits);
    }
}

#endif
