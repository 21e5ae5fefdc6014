// xsampler/detail/automaton.hpp — a grammar (grammar.hpp) compiled to one DFA per rule. (xsampler, BSD-3-Clause)
//
// build_automaton(grammar, limits) checks the grammar (grammar.hpp lists the
// errors) and compiles it for the matcher (matcher.hpp):
//   - Each rule the root reaches becomes one minimal DFA over bytes and rule
//     symbols (its body's regular structure determinised: choices, optional
//     parts and repetitions cost nothing at run time). Bytes are read through
//     byte classes shared by the whole grammar.
//   - A rule that is not recursive and whose body is small and loop-free, or
//     that is used once, is inlined where it is used (a class like
//     digit ::= [0-9], a bounded whitespace rule), so that the matcher does
//     not predict it (at most 16 states: a rule used in many places stays
//     one rule); the others stay rules, whose positions are shared by
//     every place that uses them (and their masks with them).
//   - A bounded repetition e{m,n} is unrolled when its copies are small;
//     otherwise it becomes a counted rule: its body is e's DFA and the
//     matcher's item counts the iterations done (a JSON string with
//     maxLength 65535 is one rule of about ten states). An item that ends
//     an iteration starts the next one with the count plus one, and goes
//     on in the body too if the body can; then what it can read next must
//     differ from what an iteration begins with (an array item's trailing
//     whitespace, then ','), so that the text says how many were read:
//     ([0-9]+){2,400} would not, and is an error unless unrolled.
//   - A counted lexeme (grammar::counted_lexeme) is a rule of its own whose
//     DFA is the lexeme's; its item's count is the units read, and
//     rule_info::units says, by state and count, how far the nearest end
//     with the count in range is (none: the item dies). A pattern with
//     maxLength 500 is its own states, not 500 copies of them.
// Every state of every DFA can reach an accepting state (through productive
// rules only), so an Earley item in a state is always live.
#ifndef XSAMPLER_DETAIL_AUTOMATON_HPP
#define XSAMPLER_DETAIL_AUTOMATON_HPP

#include <algorithm>
#include <array>
#include <bitset>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../grammar.hpp"
#include "automaton_type.hpp"
#include "automaton_builder.hpp"
#include "automaton_checks.hpp"
#include "automaton_nfa.hpp"
#include "automaton_dfa.hpp"
#include "automaton_ends.hpp"

namespace xsampler
{
    namespace detail
    {
        inline std::shared_ptr<const automaton> build_automaton(const grammar& g, const grammar_limits& limits = {})
        {
            return automaton_builder(g, limits).build();
        }
    }
}

#endif
