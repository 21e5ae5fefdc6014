// xsampler/constraint.hpp — structure as a guarantee: a token mask per step. (xsampler, BSD-3-Clause)
//
// A constraint is a processor (stage.hpp) that keeps only the tokens whose
// bytes continue the text into one its grammar (grammar.hpp) can still
// complete. Put it first in a chain or in the sampler's order ("custom"
// slot); generate() then only ever draws text that can be completed, and
// eos exactly when the text is complete.
//
// vocabulary_index(vocab)
//   The vocabulary's tokens as a byte trie, built once (about 30 ms for
//   GPT-2's 50,257) and shared by every grammar over it. A vocabulary in
//   which a token id has no bytes must mark it special (vocabulary.hpp).
// compiled_grammar(index, grammar[, name, limits])
//   The grammar compiled (matcher.hpp) for the vocabulary, and the masks it
//   has computed: immutable to its users and thread-safe, so every request
//   with the same grammar shares one (a second request starts warm). Masks
//   are cached in two levels:
//   - by position: the kernel of the current Earley set (its items' DFA
//     states, counts clamped to what one token can change) decides most
//     tokens alone: those whose bytes the kernel reads without finishing
//     one of its rules (allowed), or that die before any of them could
//     finish (not allowed). One walk of the vocabulary's trie per distinct
//     position set, shared by every context it appears in;
//   - by context: the few tokens that finish a kernel rule with bytes left
//     (a string's closing quote and a comma after it) are walked through the
//     real chart, and what they allow is cached by the position set and the
//     items the rules return to (the chart's stack, counts clamped).
//   A set of several items (none a counted rule's) is the union of its
//   items' entries alone, and the compile walks ahead the entry of each item
//   alone that a kernel may hold (at most grammar_limits::primed_items,
//   1,024 unless set; breadth first from the root's start): a first request
//   composes most of its positions from them (a few microseconds) instead of
//   walking the trie.
//   Each cache keeps at most max_cached entries (then starts afresh; entries
//   in use stay alive through their holders).
//   A grammar with distinct marks (grammar::distinct: uniqueItems over
//   strings and objects) is cached without them; inside such an array the
//   mask's tokens with a byte that may end an item are read again through
//   the real chart, which checks them (tens to hundreds of tokens a step).
//   A budget over such a grammar is invalid_parameter (its costs do not
//   know the marks).
// constraint(compiled) — one request's state: the text read so far.
//   mask()        the allowed next tokens: a token whose bytes take the text
//                 to one the grammar can still complete, and the eos ids of
//                 the vocabulary exactly when the text is complete
//   advance(id)   reads the token; one the mask would not allow (a byte that
//                 breaks the text, eos before the text is complete, a special
//                 token that is not eos, anything after eos, under a budget a
//                 token after which no completion fits): invalid_parameter
//                 naming the token and the text, and the constraint is as it was
//   rollback(k)   forgets the last k tokens read (a rejected speculative
//                 draft); k > tokens(): invalid_parameter
//   complete()    the text is a text of the language (eos is allowed now)
//   can_complete() some completion fits the budget (always true without one)
//   completion()  the shortest completion, least in byte order (a path;
//                 past distinct items that repeat, a short one: matcher.hpp)
//   shortest_completion()  the tokens a completion takes from here, eos
//                 included: the fewest tokens of this vocabulary that spell
//                 the completion, plus one
//   fork()        a copy that diverges from here (n samples, beams); copies
//                 share the compiled grammar and its masks
// As a processor, apply(candidates, history) first brings the state to the
// history's generated tokens (advancing by the new ones, rolling back to the
// common prefix if the history was rewound: a rollback is just a shorter
// history), then keeps the mask's tokens (candidates::keep_in). A row with
// fewer tokens than the vocabulary: invalid_parameter; a longer row
// (padding) keeps none of its extra tokens.
//
// Budget-aware completion (set_budget(max_tokens), generate's max_tokens):
// with n tokens left, a token is allowed only if the text it leads to can be
// completed, eos included, in the n - 1 tokens after it, counted along the
// completion; since every single byte is a token, the completion can always
// be followed, so the invariant "a completion fits" holds at every step
// once it holds at the start. Then generation ends with eos, complete and
// valid, on any budget >= shortest_completion() from the start; a smaller
// budget is invalid_parameter from set_budget, before anything is generated.
#ifndef XSAMPLER_CONSTRAINT_HPP
#define XSAMPLER_CONSTRAINT_HPP

#include <algorithm>
#include <array>
#include <atomic>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "detail/simd.hpp"
#include "candidates.hpp"
#include "grammar.hpp"
#include "json_grammar.hpp"
#include "detail/token_costs.hpp"
#include "matcher.hpp"
#include "regex.hpp"
#include "vocabulary.hpp"
#include "detail/compiled_grammar.hpp"
#include "detail/constraint_state.hpp"
#include "detail/constraint_keys.hpp"
#include "detail/constraint_masks.hpp"
#include "detail/constraint_walk.hpp"
#include "detail/constraint_regions.hpp"
#include "detail/constraint_budgets.hpp"

namespace xsampler
{
    /// The grammar of a text the regular expression matches whole (regex.hpp's syntax).
    inline grammar regex_grammar(std::string_view pattern, const regex_options& options = {})
    {
        grammar g;
        const auto root = g.rule("regex");
        g.define(root, g.lexeme(compile_regex(pattern, options)));
        g.set_root(root);
        return g;
    }

    /// A constraint over a grammar compiled for the index's vocabulary (a
    /// new compiled_grammar: keep it, or the constraint, to share its masks).
    inline constraint grammar_constraint(std::shared_ptr<const vocabulary_index> index, const grammar& g,
                                         std::string name = "grammar", const grammar_limits& limits = {})
    {
        return constraint(std::make_shared<const compiled_grammar>(std::move(index), g, std::move(name), limits));
    }

    inline void compiled_grammar::prime(std::size_t most)
    {
        if (most == 0)
        {
            return;
        }
        // a constraint over this grammar that does not own it (it lives only here)
        const constraint c(std::shared_ptr<const compiled_grammar>(std::shared_ptr<const compiled_grammar>(), this));
        c.prime_items(most);
    }

    /// Any JSON value (json_grammar.hpp).
    inline constraint json_constraint(std::shared_ptr<const vocabulary_index> index, const json_options& options = {})
    {
        return grammar_constraint(std::move(index), json_grammar(options), "json");
    }

    /// A text the regular expression matches whole (regex.hpp's syntax).
    inline constraint regex_constraint(std::shared_ptr<const vocabulary_index> index, std::string_view pattern,
                                       const regex_options& options = {})
    {
        return grammar_constraint(std::move(index), regex_grammar(pattern, options), "regex");
    }
}

#endif
