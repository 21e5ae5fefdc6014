// xsampler/json_grammar.hpp — JSON as a grammar (grammar.hpp): values, strings, numbers, objects, arrays. (xsampler, BSD-3-Clause)
//
// json_grammar(options): any JSON value. json_builder: the pieces, for the
// schema compiler (json_schema.hpp). The texts:
//   string   '"' char* '"', char an unescaped code point (U+0020 and up but
//            '"' and '\'; UTF-8 validated byte by byte) or an escape \" \\ \/
//            \b \f \n \r \t \uXXXX (a high surrogate escape must be followed
//            by a low one; a lone low one is refused); string(min, max)
//            counts chars (an escape is one, a surrogate pair one)
//   number   -?(0|[1-9][0-9]{0,14})(\.[0-9]{1,15})?([eE][+-]?[0-9]{1,2})?,
//            integer without the fraction and the exponent: every number
//            fits a double, every integer an int64, none runs on forever
//   object   '{' members '}' in the order given, each optional unless
//            required, with or without other members (keys of a given
//            expression) among them; or any keys (strings) with values of
//            one kind
//   array    '[' items ']', min..max of them
// Whitespace: up to options.whitespace bytes of ' ', '\n', '\r', '\t' in
// each gap JSON allows between tokens inside objects and arrays; none before
// or after the top-level value. Nesting is not bounded (the grammar is
// recursive; max_tokens bounds a generation).
#ifndef XSAMPLER_JSON_GRAMMAR_HPP
#define XSAMPLER_JSON_GRAMMAR_HPP

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "grammar.hpp"

namespace xsampler
{
    /// Options of the JSON constraints.
    struct json_options
    {
        std::size_t whitespace = 2;  ///< whitespace bytes allowed in each gap between JSON tokens
        std::size_t max_depth = 64;  ///< schemas: objects and arrays nested at most this deep in the schema (a compile's recursion)
        bool strict = false;         ///< schemas: a keyword no draft defines is an error (else ignored)
        bool additional_properties = true;  ///< schemas: keys beside the listed ones where additionalProperties allows them, as JSON Schema has it (false: only the listed keys, as XGrammar's strict mode)
    };

    namespace detail
    {
        class json_builder
        {
        public:
            using expr_id = grammar::expr_id;
            using rule_id = grammar::rule_id;

            /// One member of an object: its key's JSON text (quotes included) and value.
            struct member
            {
                std::string key;
                expr_id value;
                bool required = false;
                std::vector<std::pair<unsigned, expr_id>> some = {};  ///< its value where it is a member of these kinds (a mask: object's `kinds`)
            };

            json_builder(grammar& g, const json_options& o) : m_g(g), m_o(o)
            {
                if (o.whitespace > 255)
                {
                    throw invalid_parameter("json: whitespace must be <= 255, got " + std::to_string(o.whitespace));
                }
            }

            grammar& g() noexcept { return m_g; }

            /// A gap: up to options.whitespace bytes of whitespace.
            expr_id ws()
            {
                if (m_ws == grammar::none)
                {
                    m_ws = m_g.repeat(m_g.byte_class(byte_set::of(" \t\n\r")), 0, m_o.whitespace);
                }
                return m_ws;
            }

            /// Any JSON value (one rule, "value").
            rule_id any_value()
            {
                if (m_any != grammar::none)
                {
                    return m_any;
                }
                m_any = m_g.fresh_rule("value");
                const expr_id v = m_g.ref(m_any);
                const expr_id key = string(0, grammar::unbounded);
                const expr_id obj = free_object(key, v);
                const expr_id arr = array(v, 0, grammar::unbounded);
                m_g.define(m_any, m_g.choice({obj, arr, key, number(), literal("true"), literal("false"),
                                              literal("null")}));
                return m_any;
            }

            /// One char of a string's content (see the top of this file).
            expr_id character()
            {
                if (m_char != grammar::none)
                {
                    return m_char;
                }
                grammar& g = m_g;
                const expr_id plain = g.code_points({{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x10FFFF}});
                const expr_id hex = g.byte_class(hex_digits());
                const auto cls = [&](const char* bytes) { return g.byte_class(byte_set::of(bytes)); };
                const expr_id hex2 = g.sequence({hex, hex});
                const expr_id bmp = g.choice({g.sequence({cls("0123456789abcABC"), hex, hex2}),
                                              g.sequence({cls("eEfF"), hex, hex2}),
                                              g.sequence({cls("dD"), cls("01234567"), hex2})});
                const expr_id high = g.sequence({cls("dD"), cls("89abAB"), hex2});
                const expr_id low = g.sequence({cls("dD"), cls("cdefCDEF"), hex2});
                const expr_id u = g.choice({bmp, g.sequence({high, g.bytes("\\u"), low})});
                const expr_id escape =
                    g.sequence({g.bytes("\\"), g.choice({cls("\"\\/bfnrt"), g.sequence({g.bytes("u"), u})})});
                m_char = g.choice({plain, escape});
                return m_char;
            }

            /// A string of min..max chars (a rule per pair of bounds, shared).
            expr_id string(std::size_t min, std::size_t max)
            {
                for (const auto& [key, r] : m_strings)
                {
                    if (key.first == min && key.second == max)
                    {
                        return m_g.ref(r);
                    }
                }
                const rule_id r = m_g.fresh_rule(min == 0 && max == grammar::unbounded ? "string" : "string-bounded");
                m_g.define(r, m_g.sequence({m_g.bytes("\""), m_g.repeat(character(), min, max), m_g.bytes("\"")}));
                m_strings.push_back({{min, max}, r});
                return m_g.ref(r);
            }
            /// A string whose content (unescaped bytes, no '"') the DFA accepts.
            expr_id pattern_string(byte_dfa content)
            {
                return m_g.lexeme(dfa_enclosed(content, '"', '"'));  // one lexeme: the text's loop is no end
            }

            expr_id number()
            {
                if (m_number == grammar::none)
                {
                    const rule_id r = m_g.fresh_rule("number");
                    grammar& g = m_g;
                    const expr_id digit = g.byte_class(byte_set::range('0', '9'));
                    const expr_id fraction = g.sequence({g.bytes("."), g.repeat(digit, 1, 15)});
                    const expr_id exponent = g.sequence({g.byte_class(byte_set::of("eE")),
                                                         g.optional(g.byte_class(byte_set::of("+-"))),
                                                         g.repeat(digit, 1, 2)});
                    g.define(r, g.sequence({integer_text(), g.optional(fraction), g.optional(exponent)}));
                    m_number = g.ref(r);
                }
                return m_number;
            }
            expr_id integer()
            {
                if (m_integer == grammar::none)
                {
                    const rule_id r = m_g.fresh_rule("integer");
                    m_g.define(r, integer_text());
                    m_integer = m_g.ref(r);
                }
                return m_integer;
            }
            expr_id literal(const std::string& text) { return m_g.bytes(text); }

            /// '[' items ']' with min..max items.
            expr_id array(expr_id item, std::size_t min, std::size_t max)
            {
                grammar& g = m_g;
                const expr_id one = g.sequence({item, ws()});
                if (max == 0)
                {
                    return g.sequence({g.bytes("["), ws(), g.bytes("]")});
                }
                const expr_id more = g.repeat(g.sequence({g.bytes(","), ws(), one}), min > 0 ? min - 1 : 0,
                                              max == grammar::unbounded ? max : max - 1);
                const expr_id items = g.sequence({one, more});
                return g.sequence({g.bytes("["), ws(), min > 0 ? items : g.optional(items), g.bytes("]")});
            }

            /// '[' min..max items, each of another slot ']' (uniqueItems over
            /// finite values: a slot is the texts of equal values): in any order
            /// (a rule per set of slots used) for up to max_any_order slots,
            /// else in the slots' order (a rule per next slot and count, where
            /// the count still matters);
            /// grammar::none when no array fits.
            expr_id distinct_array(const std::vector<expr_id>& slots, std::size_t min, std::size_t max)
            {
                grammar& g = m_g;
                const std::size_t m = slots.size();
                max = std::min(max, m);
                const bool any_order = m <= max_any_order;
                std::vector<expr_id> texts;  // each slot and a gap
                for (const expr_id slot : slots)
                {
                    texts.push_back(g.sequence({slot, ws()}));
                }
                // a state: the slots used (any order) or the first slot still allowed (in order), and the count,
                // up to what still matters: max where it is below the slots' number (else the slots bound it),
                // else min, and whether an item was written (a comma before the next)
                const std::size_t cap = std::max<std::size_t>(max < m ? max : min, 1);
                using state = std::pair<std::uint64_t, std::size_t>;
                const auto moves = [&](const state& st) {
                    std::vector<std::pair<expr_id, state>> out;
                    for (std::size_t j = any_order ? 0 : std::size_t(st.first); j < m && st.second < max; ++j)
                    {
                        const std::uint64_t bit = std::uint64_t(1) << j;
                        if (!any_order || (st.first & bit) == 0)
                        {
                            out.push_back({texts[j], state{any_order ? st.first | bit : j + 1, std::min(st.second + 1, cap)}});
                        }
                    }
                    return out;
                };
                const auto done = [&](const state& st) { return st.second >= min; };
                const expr_id comma = g.sequence({g.bytes(","), ws()});
                state_rules<state> rules(g, "distinct-items", moves, done,
                                         [&](const state& st) { return st.second == 0 ? g.empty() : comma; });
                if (!rules.can_end({0, 0}))
                {
                    return grammar::none;
                }
                return g.sequence({g.bytes("["), ws(), rules.from({0, 0}), g.bytes("]")});
            }
            static constexpr std::size_t max_any_order = 10;

            /// Whether an end can follow a state (one where done() holds, along
            /// moves(): pairs of a text and the state after it), memoised; the
            /// moves only go forward, and a move to the state itself adds no way.
            template <class State>
            struct ends_memo
            {
                std::map<State, bool> known;
                template <class Moves, class Done>
                bool operator()(const State& st, const Moves& moves, const Done& done)
                {
                    if (const auto it = known.find(st); it != known.end())
                    {
                        return it->second;
                    }
                    bool yes = done(st);
                    for (const auto& [text, to] : moves(st))
                    {
                        yes = yes || ((to < st || st < to) && (*this)(to, moves, done));
                    }
                    return known[st] = yes;
                }
            };

            /// The texts from a state on, as rules (one per state reached, named
            /// `name`): from st, each move (its text, the state after it) that an
            /// end can follow, after before(st), then the texts from where it
            /// goes; the empty text where done(st). The arrays' items and the
            /// objects' members in any order.
            template <class State>
            class state_rules
            {
            public:
                using moves_of = std::function<std::vector<std::pair<expr_id, State>>(const State&)>;
                state_rules(grammar& g, const char* name, moves_of moves, std::function<bool(const State&)> done,
                            std::function<expr_id(const State&)> before)
                    : m_g(g), m_name(name), m_moves(std::move(moves)), m_done(std::move(done)), m_before(std::move(before))
                {
                }
                bool can_end(const State& st) { return m_ends(st, m_moves, m_done); }
                /// st's rule (made on first use).
                expr_id from(const State& st)
                {
                    if (const auto it = m_rules.find(st); it != m_rules.end())
                    {
                        return m_g.ref(it->second);
                    }
                    const rule_id r = m_g.fresh_rule(m_name);
                    m_rules.emplace(st, r);
                    std::vector<expr_id> go;
                    const expr_id before = m_before(st);
                    for (const auto& [text, to] : m_moves(st))
                    {
                        if (can_end(to))
                        {
                            go.push_back(m_g.sequence({before, text, from(to)}));
                        }
                    }
                    if (m_done(st))
                    {
                        go.push_back(m_g.empty());
                    }
                    m_g.define(r, m_g.choice(std::move(go)));
                    return m_g.ref(r);
                }

            private:
                grammar& m_g;
                const char* m_name;
                moves_of m_moves;
                std::function<bool(const State&)> m_done;
                std::function<expr_id(const State&)> m_before;
                ends_memo<State> m_ends;
                std::map<State, rule_id> m_rules;
            };

            /// A bound on how many items satisfy a contains: lo..hi.
            struct count_bound
            {
                std::size_t lo, hi;
            };
            /// '[' min..max items ']', each one of `items` (the contains it
            /// satisfies, as a mask, and its text), where for each contains j
            /// the items that satisfy it number counts[j].lo..counts[j].hi. A
            /// state per count of items and of each contains' items (each
            /// capped where its bounds stop mattering); grammar::none when no
            /// array fits.
            expr_id array_counting(const std::vector<std::pair<unsigned, expr_id>>& items, std::size_t min, std::size_t max,
                                   const std::vector<count_bound>& counts)
            {
                grammar& g = m_g;
                const auto cap = [](std::size_t lo, std::size_t hi) { return hi == grammar::unbounded ? std::max<std::size_t>(lo, 1) : hi; };
                const std::size_t items_cap = cap(min, max);
                std::size_t states = items_cap + 1;
                for (const auto& c : counts)
                {
                    states *= cap(c.lo, c.hi) + 1;
                    if (states > max_array_states)
                    {
                        throw invalid_parameter("json: contains with these item counts needs more than " +
                                                std::to_string(max_array_states) + " states");
                    }
                }
                std::vector<expr_id> texts;  // each item and a gap
                for (const auto& item : items)
                {
                    texts.push_back(g.sequence({item.second, ws()}));
                }
                using state = std::vector<std::size_t>;  // the items, then each contains' count
                // the item and the state it goes to from st
                const auto moves = [&](const state& st) {
                    std::vector<std::pair<expr_id, state>> out;
                    if (max != grammar::unbounded && st[0] >= max)
                    {
                        return out;
                    }
                    for (std::size_t it = 0; it < items.size(); ++it)
                    {
                        const unsigned mask = items[it].first;
                        state to = st;
                        to[0] = std::min(st[0] + 1, items_cap);
                        bool fits = true;
                        for (std::size_t j = 0; j < counts.size(); ++j)
                        {
                            if (mask & (1u << j))
                            {
                                fits = fits && (counts[j].hi == grammar::unbounded || st[j + 1] < counts[j].hi);
                                to[j + 1] = std::min(st[j + 1] + 1, cap(counts[j].lo, counts[j].hi));
                            }
                        }
                        if (fits)
                        {
                            out.push_back({texts[it], std::move(to)});
                        }
                    }
                    return out;
                };
                const auto done = [&](const state& st) {
                    bool yes = st[0] >= min;
                    for (std::size_t j = 0; j < counts.size(); ++j)
                    {
                        yes = yes && st[j + 1] >= counts[j].lo;
                    }
                    return yes;
                };
                const expr_id comma = g.sequence({g.bytes(","), ws()});
                state_rules<state> rules(g, "contains-items", moves, done, [&](const state& st) { return st[0] == 0 ? g.empty() : comma; });
                const state start(counts.size() + 1, 0);
                if (!rules.can_end(start))
                {
                    return grammar::none;  // no array fits
                }
                return g.sequence({g.bytes("["), ws(), rules.from(start), g.bytes("]")});
            }
            static constexpr std::size_t max_array_states = 20000;

            /// A member: the key's text, ':' and the value's, with gaps around them.
            expr_id member_text(expr_id key, expr_id value)
            {
                return m_g.sequence({key, ws(), m_g.bytes(":"), ws(), value, ws()});
            }

            /// '{' any keys (key: the key's expression) with values `value` '}'.
            expr_id free_object(expr_id key, expr_id value)
            {
                grammar& g = m_g;
                const expr_id one = member_text(key, value);
                const expr_id members = g.sequence({one, g.star(g.sequence({g.bytes(","), ws(), one}))});
                return g.sequence({g.bytes("{"), ws(), g.optional(members), g.bytes("}")});
            }

            /// '{' the members in any order '}': each required one once (a rule
            /// per set of them written, while those sets with the count number
            /// at most max_object_states, and those of all objects of the
            /// grammar max_grammar_object_states; beyond, in their order), the
            /// optional ones and `others` (pairs of a key's expression and its
            /// value's) any number of times, before, between and after them (a
            /// key written twice: validators keep the last, which its schema
            /// accepted like the first). Each required member is a rule, and
            /// one rule holds the optional ones and the others (one trie of
            /// their keys): the rules of the sets refer to them, small, and
            /// the masks of a member are the same from every set. At least
            /// `min` members (0 or 1: a key written twice is one key) and at
            /// most `max`, each written one counted. grammar::none when no
            /// object fits.
            expr_id object_any_order(const std::vector<member>& members, const std::vector<std::pair<expr_id, expr_id>>& others,
                                     std::size_t min = 0, std::size_t max = grammar::unbounded)
            {
                grammar& g = m_g;
                if (min > 1)
                {
                    throw invalid_parameter("json: object_any_order counts members toward a minimum of 1 at most");
                }
                const auto rule_of = [&](const char* name, expr_id body) {
                    const rule_id r = g.fresh_rule(name);
                    g.define(r, body);
                    return g.ref(r);
                };
                std::vector<expr_id> required, anywhere;
                for (const member& m : members)
                {
                    if (m.value == grammar::none)
                    {
                        if (m.required)
                        {
                            return grammar::none;
                        }
                        continue;
                    }
                    if (m.required)
                    {
                        required.push_back(rule_of("member", member_text(g.bytes(m.key), m.value)));
                    }
                    else
                    {
                        anywhere.push_back(member_text(g.bytes(m.key), m.value));
                    }
                }
                for (const auto& [key, value] : others)
                {
                    anywhere.push_back(member_text(key, value));
                }
                const std::size_t r = required.size();
                if (max != grammar::unbounded && r > max)
                {
                    return grammar::none;
                }
                const expr_id member = anywhere.empty() ? grammar::none : rule_of("object-member", g.choice(std::move(anywhere)));
                const std::size_t counts = max == grammar::unbounded ? 1 : max + 1;
                const std::size_t sets = r < 64 ? (std::size_t(1) << r) * counts : grammar::unbounded;
                const bool any_order = sets <= max_object_states && sets <= m_object_states_left;
                m_object_states_left -= any_order ? sets : 0;
                // a state: the required ones written (a set, or how many in order), and members written
                // (toward max; 0 if unbounded)
                using state = std::pair<std::uint64_t, std::size_t>;
                const std::uint64_t full = any_order ? (std::uint64_t(1) << r) - 1 : r;
                const auto done = [&](const state& st) { return st.first == full; };
                const auto moves = [&](const state& st) {
                    std::vector<std::pair<expr_id, state>> out;
                    if (max != grammar::unbounded && st.second >= max)
                    {
                        return out;
                    }
                    const std::size_t all = max == grammar::unbounded ? 0 : st.second + 1;
                    if (member != grammar::none)
                    {
                        out.push_back({member, state{st.first, all}});
                    }
                    for (std::size_t j = 0; j < r; ++j)
                    {
                        const std::uint64_t bit = std::uint64_t(1) << j;
                        if (any_order ? (st.first & bit) == 0 : st.first == j)
                        {
                            out.push_back({required[j], state{any_order ? st.first | bit : j + 1, all}});
                        }
                    }
                    return out;
                };
                // the members after one: each after a comma
                const expr_id comma = g.sequence({g.bytes(","), ws()});
                state_rules<state> rules(g, "members", moves, done, [&](const state&) { return comma; });
                std::vector<expr_id> first;
                for (const auto& [what, to] : moves({0, 0}))
                {
                    if (rules.can_end(to))
                    {
                        first.push_back(g.sequence({what, rules.from(to)}));
                    }
                }
                if (min == 0 && done({0, 0}))
                {
                    first.push_back(g.empty());  // the empty object
                }
                if (first.empty())
                {
                    return grammar::none;
                }
                return g.sequence({g.bytes("{"), ws(), g.choice(std::move(first)), g.bytes("}")});
            }
            /// Sets of required members written, with the count, an object may
            /// have (any order), and all objects of the grammar together.
            static constexpr std::size_t max_object_states = 64, max_grammar_object_states = 1024;

            /// '{' the members in this order, each optional unless required '}';
            /// with `others` (pairs of a key's expression and its value's), any
            /// number of other members before, between and after them; with
            /// min..max members in all (others count toward min only when it
            /// is 1, a key written twice being one key, or with distinct_keys). With kinds > 0, for each
            /// kind r at least one member of that kind: one of `some` (other
            /// members: the kinds they are, as a mask, a key and a value) or
            /// a member with one of its `some` values (an object that has a
            /// member of a kind: a not of additionalProperties,
            /// patternProperties or propertyNames; after such another member,
            /// no other one but one whose keys are apart from its own
            /// (apart(kinds, kinds), none without it): its key again would
            /// replace the value validators read). With distinct_keys, the
            /// keys of other members (each a JSON string whose content has
            /// endless completions from every prefix, none a listed key)
            /// differ from each other (grammar::distinct_keys): every member
            /// counts toward min, and any other member may follow one of a
            /// kind. grammar::none when no object fits.
            expr_id object(const std::vector<member>& members, const std::vector<std::pair<expr_id, expr_id>>& others = {},
                           std::size_t min = 0, std::size_t max = grammar::unbounded, std::size_t kinds = 0,
                           const std::vector<std::tuple<unsigned, expr_id, expr_id>>& some = {},
                           const std::function<bool(unsigned, unsigned)>& apart = {}, bool distinct_keys = false)
            {
                grammar& g = m_g;
                std::vector<rule_id> keys;  // (distinct_keys: a rule per other key, marked)
                const std::size_t n = members.size();
                const auto text_of = [&](const std::string& key, expr_id value) {
                    return value == grammar::none ? value
                                                  : member_text(g.bytes(key), value);
                };
                std::vector<expr_id> text(n);
                std::vector<std::vector<std::pair<unsigned, expr_id>>> special(n);  // (kinds, text)
                for (std::size_t i = 0; i < n; ++i)
                {
                    text[i] = text_of(members[i].key, members[i].value);
                    for (const auto& [mask, value] : members[i].some)
                    {
                        special[i].push_back({mask, text_of(members[i].key, value)});
                    }
                }
                const unsigned need = (1u << kinds) - 1;
                // one rule each, read from every gap: not a copy of the keys' automata in each
                const auto rule_of = [&](const std::vector<std::pair<expr_id, expr_id>>& pairs) {
                    if (pairs.empty())
                    {
                        return grammar::none;
                    }
                    std::vector<expr_id> any;
                    for (const auto& [key, value] : pairs)
                    {
                        if (distinct_keys)
                        {
                            keys.push_back(g.fresh_rule("key"));
                            g.define(keys.back(), key);
                        }
                        any.push_back(member_text(distinct_keys ? g.ref(keys.back()) : key, value));
                    }
                    const rule_id r = g.fresh_rule("other-member");
                    g.define(r, g.choice(std::move(any)));
                    return g.ref(r);
                };
                const expr_id other = rule_of(others);
                std::map<unsigned, std::vector<std::pair<expr_id, expr_id>>> by_kinds;
                for (const auto& [mask, key, value] : some)
                {
                    by_kinds[mask].push_back({key, value});
                }
                std::vector<std::pair<unsigned, expr_id>> other_some;  // (kinds, a rule of such members)
                for (const auto& [mask, pairs] : by_kinds)
                {
                    other_some.push_back({mask, rule_of(pairs)});
                }
                const bool any_other = other != grammar::none || !other_some.empty();
                const bool others_count = min <= 1 || distinct_keys;
                const expr_id comma = g.sequence({g.bytes(","), ws()});
                // the rest after something was written (written) or before the next listed member: at listed
                // member i, `counted` members toward min (at most min), `all` toward max (0 if unbounded),
                // the kinds written (seen)
                struct state
                {
                    bool written;
                    std::size_t i, counted, all;
                    unsigned seen = 0;
                    bool lead = false;  // nothing written yet: no comma before the next member
                    // the kinds of each other member of a kind written (sorted): after one, only other
                    // members of a kind whose keys are apart from its (its key again would replace the
                    // value validators read), no plain one
                    std::vector<unsigned> sealed = {};
                    bool operator<(const state& o) const
                    {
                        return std::tie(written, i, counted, all, seen, lead, sealed) <
                               std::tie(o.written, o.i, o.counted, o.all, o.seen, o.lead, o.sealed);
                    }
                };
                const auto add = [&](std::size_t c, std::size_t k, bool counts) {
                    return std::make_pair(counts ? std::min(c + 1, min) : c, max == grammar::unbounded ? 0 : k + 1);
                };
                const auto done = [&](const state& st) { return !st.written && st.i == n && st.counted >= min && st.seen == need; };
                // the states a state goes to, each with what it writes (an other member, a listed one, nothing)
                const auto moves = [&](const state& st) {
                    std::vector<std::pair<expr_id, state>> out;
                    const bool room = max == grammar::unbounded || st.all < max;
                    if (st.written)
                    {
                        const auto [c, k] = add(st.counted, st.all, others_count);
                        if (other != grammar::none && room && st.sealed.empty())
                        {
                            out.push_back({other, state{true, st.i, c, k, st.seen}});
                        }
                        for (const auto& [mask, what] : other_some)
                        {
                            const unsigned kinds_of = mask;  // (a structured binding: not captured, in C++17)
                            const bool after = std::all_of(st.sealed.begin(), st.sealed.end(),
                                                           [&](unsigned t) { return apart && apart(t, kinds_of); });
                            if (room && (mask & ~st.seen) != 0 && after)
                            {
                                std::vector<unsigned> sealed = st.sealed;
                                if (!distinct_keys)  // (distinct: no key again, nothing sealed)
                                {
                                    sealed.insert(std::upper_bound(sealed.begin(), sealed.end(), mask), mask);
                                }
                                out.push_back({what, state{true, st.i, c, k, st.seen | mask, false, std::move(sealed)}});
                            }
                        }
                        out.push_back({grammar::none, state{false, st.i, st.counted, st.all, st.seen, false, st.sealed}});
                    }
                    else if (st.i < n)
                    {
                        const auto [c, k] = add(st.counted, st.all, true);
                        if (text[st.i] != grammar::none && room)
                        {
                            out.push_back({text[st.i], state{true, st.i + 1, c, k, st.seen, false, st.sealed}});
                        }
                        for (const auto& [mask, what] : special[st.i])
                        {
                            if (room && (mask & ~st.seen) != 0)
                            {
                                out.push_back({what, state{true, st.i + 1, c, k, st.seen | mask, false, st.sealed}});
                            }
                        }
                        if (!members[st.i].required)
                        {
                            out.push_back({grammar::none, state{false, st.i + 1, st.counted, st.all, st.seen, st.lead, st.sealed}});
                        }
                    }
                    return out;
                };
                ends_memo<state> ends;
                const auto can_end = [&](const state& st) { return ends(st, moves, done); };
                std::map<state, rule_id> rules;
                const std::function<expr_id(state)> rest = [&](state st) -> expr_id {
                    st.written = st.written && any_other;  // (without others: the same rule)
                    if (!st.written && st.i == n)
                    {
                        return g.empty();  // (reached only where it may end: can_end)
                    }
                    const expr_id before = st.lead ? g.empty() : comma;
                    if (const auto it = rules.find(st); it != rules.end())
                    {
                        return g.ref(it->second);
                    }
                    const rule_id r = g.fresh_rule("members");
                    rules.emplace(st, r);
                    std::vector<expr_id> go;
                    for (const auto& [what, to] : moves(st))
                    {
                        if (can_end(to))
                        {
                            go.push_back(what == grammar::none ? rest(to) : g.sequence({before, what, rest(to)}));
                        }
                    }
                    g.define(r, g.choice(std::move(go)));
                    return g.ref(r);
                };
                // the first member: another, or a listed one up to the first required one (with others, as a
                // chain of rules: a choice of every listed one, each with its own rest, is a large automaton)
                std::vector<expr_id> first;
                if (any_other)
                {
                    state lead{false, 0, 0, 0, 0, true};
                    lead.written = true;  // (an other member first: without a comma)
                    for (const auto& [what, to] : moves(lead))
                    {
                        if (what != grammar::none && can_end(to))
                        {
                            first.push_back(g.sequence({what, rest(to)}));
                        }
                    }
                    if (can_end({false, 0, 0, 0, 0, true}))
                    {
                        first.push_back(rest({false, 0, 0, 0, 0, true}));
                    }
                }
                else
                {
                    for (std::size_t i = 0; i <= n; ++i)
                    {
                        if (i == n || !can_end({false, i, 0, 0, 0, true}))
                        {
                            if (i == n && done({false, n, 0, 0, 0, true}))
                            {
                                first.push_back(g.empty());  // (the empty object)
                            }
                            break;
                        }
                        for (const auto& [what, to] : moves({false, i, 0, 0, 0, true}))
                        {
                            if (what != grammar::none && can_end(to))
                            {
                                first.push_back(g.sequence({what, rest(to)}));
                            }
                        }
                        if (members[i].required)
                        {
                            break;
                        }
                    }
                }
                if (first.empty())
                {
                    return grammar::none;
                }
                const expr_id e = g.sequence({g.bytes("{"), ws(), g.choice(std::move(first)), g.bytes("}")});
                if (keys.empty())
                {
                    return e;
                }
                const rule_id r = g.fresh_rule("object");
                g.define(r, e);
                for (const rule_id k : keys)
                {
                    g.distinct_keys(r, k);
                }
                return g.ref(r);
            }

        private:
            static byte_set hex_digits()
            {
                byte_set s = byte_set::range('0', '9');
                s |= byte_set::range('a', 'f');
                s |= byte_set::range('A', 'F');
                return s;
            }
            expr_id integer_text()
            {
                grammar& g = m_g;
                const expr_id digits = g.choice(
                    {g.bytes("0"), g.sequence({g.byte_class(byte_set::range('1', '9')),
                                               g.repeat(g.byte_class(byte_set::range('0', '9')), 0, 14)})});
                return g.sequence({g.optional(g.bytes("-")), digits});
            }

            grammar& m_g;
            json_options m_o;
            expr_id m_ws = grammar::none, m_char = grammar::none, m_number = grammar::none,
                    m_integer = grammar::none;
            rule_id m_any = grammar::none;
            std::size_t m_object_states_left = max_grammar_object_states;
            std::vector<std::pair<std::pair<std::size_t, std::size_t>, rule_id>> m_strings;
        };
    }

    /// Any JSON value (see the top of this file).
    inline grammar json_grammar(const json_options& options = {})
    {
        grammar g;
        detail::json_builder b(g, options);
        g.set_root(b.any_value());
        return g;
    }
}

#endif
