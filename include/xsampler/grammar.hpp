// xsampler/grammar.hpp — a context-free grammar over bytes: the IR every constraint is built from. (xsampler, BSD-3-Clause)
//
// A grammar is a set of named rules (nonterminals), each with one body, and
// a root rule; its language is the texts (byte strings) the root derives.
// A body is an expression over
//   bytes(s)             the byte string s (bytes("") is the empty text)
//   byte_set(set)        one byte of a set of bytes
//   code_points(ranges)  one code point of a set, UTF-8 encoded (shortest
//                        form, no surrogates); negated: any code point not
//                        in the ranges
//   lexeme(dfa)          a text a byte_dfa accepts (regex.hpp): a regular
//                        expression as one terminal
//   counted_lexeme(dfa, units, min, max)  a text the DFA accepts that holds
//                        min to max units (code points, digits): units[s]
//                        says whether a byte read in state s begins one. The
//                        matcher counts them as it reads, so the DFA is not
//                        multiplied by the lengths (a pattern with maxLength)
//   ref(rule)            a text of a rule: another one or itself, directly
//                        or through others (recursion, left recursion too)
//   sequence{a, b, ...}  a text of a, then of b, ...
//   choice{a, b, ...}    a text of any of them (ambiguity is fine)
//   repeat(e, min, max)  min to max texts of e in a row (max = unbounded:
//                        no limit); optional(e), star(e), plus(e)
// and one mark that is not context-free:
//   distinct(array, item)  rule `array` is a JSON array and the texts of
//                        `item` it reads (its items: `item` is used nowhere
//                        else) are pairwise different JSON values, as
//                        validators compare them (uniqueItems); the matcher
//                        checks it where an item ends (distinct_closed: also
//                        while a closed object item is written)
//   distinct_keys(object, key)  rule `object` is a JSON object whose
//                        members' keys read by rule `key` differ from each
//                        other and from its other keys (minProperties)
// Front ends build grammars (gbnf.hpp, json_schema.hpp, json_grammar and
// regex_grammar in constraint.hpp); the matcher (matcher.hpp) and the
// constraint (constraint.hpp) know only this IR, never which front end built
// it. Expressions are values in the grammar, referred to by index; one may be
// used in several places.
//
// compile(grammar) (matcher.hpp) checks, each an invalid_parameter naming the rule:
//   - a rule referred to but never defined ("grammar: rule 'term' is used
//     (in 'expr') but never defined"); no root;
//   - a rule the root reaches that derives no finite text (every
//     alternative needs itself): "rule 'a' derives no text";
//   - an unbounded repetition of an expression that can match the empty
//     text (an infinitely ambiguous empty loop): "rule 'x': a repetition
//     without bound of an expression that can match the empty text";
//   - a rule that derives itself without consuming text (a ::= b, b ::= a,
//     other items empty): "rule 'a' derives itself without reading a byte";
//   - the limits of grammar_limits (rules, expressions, automaton states,
//     a bounded repetition that cannot be enforced within them).
// Alternatives that derive no text, and rules the root does not reach, are
// dropped silently.
#ifndef XSAMPLER_GRAMMAR_HPP
#define XSAMPLER_GRAMMAR_HPP

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "regex.hpp"
#include "types.hpp"

namespace xsampler
{
    /// A set of bytes: bit b of word b / 64.
    class byte_set
    {
    public:
        byte_set() = default;
        /// The bytes lo..hi (inclusive).
        static byte_set range(unsigned char lo, unsigned char hi)
        {
            byte_set s;
            for (unsigned b = lo; b <= hi; ++b)
            {
                s.insert(static_cast<unsigned char>(b));
            }
            return s;
        }
        static byte_set of(std::string_view bytes)
        {
            byte_set s;
            for (const char c : bytes)
            {
                s.insert(static_cast<unsigned char>(c));
            }
            return s;
        }
        void insert(unsigned char b) noexcept { m_bits[b >> 6] |= std::uint64_t(1) << (b & 63); }
        bool contains(unsigned char b) const noexcept { return (m_bits[b >> 6] >> (b & 63) & 1) != 0; }
        bool empty() const noexcept { return (m_bits[0] | m_bits[1] | m_bits[2] | m_bits[3]) == 0; }
        byte_set complement() const noexcept
        {
            byte_set s;
            for (int w = 0; w < 4; ++w)
            {
                s.m_bits[std::size_t(w)] = ~m_bits[std::size_t(w)];
            }
            return s;
        }
        byte_set& operator|=(const byte_set& o) noexcept
        {
            for (int w = 0; w < 4; ++w)
            {
                m_bits[std::size_t(w)] |= o.m_bits[std::size_t(w)];
            }
            return *this;
        }
        bool operator==(const byte_set& o) const noexcept { return m_bits == o.m_bits; }
        /// The smallest byte in the set (the set must not be empty).
        unsigned char first() const noexcept
        {
            for (unsigned b = 0; b < 256; ++b)
            {
                if (contains(static_cast<unsigned char>(b)))
                {
                    return static_cast<unsigned char>(b);
                }
            }
            return 0;
        }

    private:
        std::array<std::uint64_t, 4> m_bits{};
    };

    namespace detail
    {
        /// The ends of a counted lexeme (grammar::counted_lexeme): over a DFA
        /// whose states say whether the byte they read begins a unit, the
        /// fewest bytes from state s, with c units read, to an accepting state
        /// with min to max units in all (none: no such end). Counts are kept
        /// up to max, or with no max up to min (a count past min is min: only
        /// reaching it matters). Layer by layer from the highest count: a
        /// unit-reading state looks one layer up, the others are shortest
        /// paths within the layer (unit steps, varied starts).
        class unit_ends
        {
        public:
            static constexpr std::uint32_t none = ~std::uint32_t(0);
            /// Entries (states x counts) past which a counted lexeme is an error.
            static constexpr std::size_t max_entries = std::size_t(1) << 22;

            /// succ[s]: the states s reads a byte into (each once).
            unit_ends(const std::vector<std::vector<std::uint32_t>>& succ, std::vector<std::uint8_t> unit,
                      const std::vector<std::uint8_t>& accepting, std::uint32_t start, std::size_t min, std::size_t max)
                : m_unit(std::move(unit)), m_states(succ.size()), m_min(min), m_max(max)
            {
                const std::size_t layers = (max == ~std::size_t(0) ? min : max) + 1;
                if (layers == 0 || m_states * layers > max_entries || layers > max_entries)
                {
                    throw invalid_parameter("grammar: a counted lexeme of " + std::to_string(m_states) + " states counted up to " +
                                            std::to_string(layers - 1) + " units needs more than " +
                                            std::to_string(max_entries) + " entries");
                }
                m_bytes.assign(m_states * layers, none);
                std::vector<std::vector<std::uint32_t>> back(m_states), back_plain(m_states);
                for (std::uint32_t s = 0; s < m_states; ++s)
                {
                    for (const std::uint32_t t : succ[s])
                    {
                        back[t].push_back(s);
                        if (!m_unit[s])
                        {
                            back_plain[t].push_back(s);
                        }
                    }
                }
                std::vector<std::pair<std::uint32_t, std::uint32_t>> seeds;  // (bytes, state)
                std::vector<std::uint32_t> queue;
                for (std::size_t c = layers; c-- > 0;)
                {
                    std::uint32_t* val = m_bytes.data() + c * m_states;
                    const bool top = max == ~std::size_t(0) && c == min;  // every byte stays in the layer
                    const std::uint32_t* up = c + 1 < layers ? val + m_states : nullptr;
                    seeds.clear();
                    for (std::uint32_t s = 0; s < m_states; ++s)
                    {
                        std::uint32_t v = accepting[s] && c >= min ? 0 : none;
                        if (m_unit[s] && !top && up != nullptr)
                        {
                            for (const std::uint32_t t : succ[s])
                            {
                                if (up[t] != none)
                                {
                                    v = std::min(v, up[t] + 1);
                                }
                            }
                        }
                        val[s] = v;
                        if (v != none)
                        {
                            seeds.push_back({v, s});
                        }
                    }
                    std::sort(seeds.begin(), seeds.end());
                    const auto& into = top ? back : back_plain;
                    queue.clear();
                    std::size_t next_seed = 0, head = 0;
                    while (next_seed < seeds.size() || head < queue.size())
                    {
                        std::uint32_t t;
                        if (head < queue.size() && (next_seed == seeds.size() || val[queue[head]] <= seeds[next_seed].first))
                        {
                            t = queue[head++];
                        }
                        else
                        {
                            const auto [v, s] = seeds[next_seed++];
                            if (v != val[s])
                            {
                                continue;
                            }
                            t = s;
                        }
                        for (const std::uint32_t f : into[t])
                        {
                            if (val[t] + 1 < val[f])
                            {
                                val[f] = val[t] + 1;
                                queue.push_back(f);
                            }
                        }
                    }
                }
                m_shortest = start < m_states ? bytes(start, 0) : none;  // (a DFA without states accepts nothing)
            }
            /// The fewest bytes from state s with `count` units read (none: no end).
            std::uint32_t bytes(std::uint32_t s, std::uint32_t count) const noexcept
            {
                return m_bytes[std::size_t(count) * m_states + s];
            }
            /// The count after a byte read in state s (none: past max).
            std::uint32_t after(std::uint32_t s, std::uint32_t count) const noexcept
            {
                if (!m_unit[s])
                {
                    return count;
                }
                if (m_max == ~std::size_t(0))
                {
                    return std::uint32_t(std::min<std::size_t>(std::size_t(count) + 1, m_min));
                }
                return std::size_t(count) + 1 > m_max ? none : count + 1;
            }
            /// The count after n more units (none: past max).
            std::uint32_t plus(std::uint32_t count, std::size_t n) const noexcept
            {
                const std::size_t c = std::size_t(count) + n;
                if (m_max == ~std::size_t(0))
                {
                    return std::uint32_t(std::min(c, m_min));
                }
                return c > m_max ? none : std::uint32_t(c);
            }
            /// Whether state s, count read, may go on to an end.
            bool live(std::uint32_t s, std::uint32_t count) const noexcept { return count != none && bytes(s, count) != none; }
            /// Whether the text read so far ends here: an accepting state, count in range.
            bool ends(std::uint32_t s, std::uint32_t count) const noexcept { return bytes(s, count) == 0; }
            bool unit(std::uint32_t s) const noexcept { return m_unit[s] != 0; }
            std::uint32_t shortest() const noexcept { return m_shortest; }
            std::size_t min() const noexcept { return m_min; }
            std::size_t max() const noexcept { return m_max; }

        private:
            std::vector<std::uint8_t> m_unit;
            std::size_t m_states, m_min, m_max;
            std::vector<std::uint32_t> m_bytes;  // count x states
            std::uint32_t m_shortest = none;
        };
    }

    class grammar
    {
    public:
        using rule_id = std::uint32_t;
        using expr_id = std::uint32_t;
        static constexpr std::size_t unbounded = ~std::size_t(0);
        /// Code points as closed ranges [first, second].
        using code_point_ranges = std::vector<std::pair<std::uint32_t, std::uint32_t>>;

        enum class op : std::uint8_t
        {
            bytes,     // text
            byte_set,  // set
            lexeme,    // index: into lexemes()
            rule,      // index: a rule id
            sequence,  // items
            choice,    // items
            repeat     // items[0], min, max
        };
        struct expr
        {
            op kind = op::bytes;
            std::string text;
            xsampler::byte_set set;
            std::uint32_t index = 0;
            std::vector<expr_id> items;
            std::size_t min = 0, max = 0;
        };

        // --- rules ---

        /// The rule called `name`, declared now if it is new.
        rule_id rule(std::string_view name)
        {
            const auto it = m_by_name.find(std::string(name));
            if (it != m_by_name.end())
            {
                return it->second;
            }
            m_names.emplace_back(name);
            m_bodies.push_back(none);
            m_by_name.emplace(std::string(name), rule_id(m_names.size() - 1));
            return rule_id(m_names.size() - 1);
        }
        /// A new rule whose name starts with `hint` and no other rule has.
        rule_id fresh_rule(std::string_view hint)
        {
            std::string name(hint);
            for (std::size_t n = m_names.size(); m_by_name.count(name) != 0; ++n)
            {
                name = std::string(hint) + "-" + std::to_string(n);
            }
            return rule(name);
        }
        /// Sets the body of rule r (a second definition replaces the first).
        void define(rule_id r, expr_id body)
        {
            check_rule(r, "define");
            check_expr(body, "define");
            m_bodies[r] = body;
        }
        bool defined(rule_id r) const { return r < m_bodies.size() && m_bodies[r] != none; }
        /// Marks rule `array`, a JSON array whose items are texts of rule
        /// `item`, as one whose items are pairwise different JSON values:
        /// strings by their code points (escapes decoded), numbers by value
        /// (1 = 1.0), objects by their members in any order, true = 1 and
        /// false = 0 (a subset under either reading). `item` must be read in
        /// `array`'s own body and nowhere else (compile() checks). Where the
        /// items are JSON strings the matcher also refuses a byte after which
        /// an item can only repeat an earlier one, so the array must not
        /// need more items than the item has strings; other items should
        /// have endless completions from every prefix: otherwise a text may
        /// be left that no byte continues (the matcher's step then refuses
        /// every byte; completion() is invalid_parameter). Neither rule is inlined.
        void distinct(rule_id array, rule_id item)
        {
            check_rule(array, "distinct");
            check_rule(item, "distinct");
            m_distinct.emplace_back(array, item);
        }
        /// distinct(array, item) where the items are JSON objects that may
        /// run out of new completions (every name written, none may follow):
        /// the matcher refuses a byte after which an item can only repeat an
        /// earlier one, as for strings. Every member's value must be a string
        /// with endless completions from every prefix (so only the quote
        /// that ends the last one may leave nothing new), and a name must not
        /// be written twice.
        void distinct_closed(rule_id array, rule_id item)
        {
            distinct(array, item);
            m_closed.push_back(item);
        }
        /// Rule `object` is a JSON object and the texts of `key` it reads
        /// (JSON strings: its members' keys, read through the rules of its
        /// members and nowhere outside the object) differ from each other
        /// and from its other keys, decoded (minProperties counts them).
        /// Checked as distinct() items are, the object's members' keys its
        /// earlier items; the key's content should have endless completions
        /// from every prefix (a finite set may run out where the object
        /// needs another member).
        void distinct_keys(rule_id object, rule_id key)
        {
            distinct(object, key);
            m_keys.push_back(key);
        }
        /// The keys of distinct_keys() marks.
        const std::vector<rule_id>& key_items() const noexcept { return m_keys; }
        /// The distinct() marks: (array, item) pairs.
        const std::vector<std::pair<rule_id, rule_id>>& distincts() const noexcept { return m_distinct; }
        /// The items of distinct_closed() marks.
        const std::vector<rule_id>& closed_items() const noexcept { return m_closed; }
        void set_root(rule_id r)
        {
            check_rule(r, "set_root");
            m_root = r;
        }
        bool has_root() const noexcept { return m_root != none; }
        rule_id root() const noexcept { return m_root; }
        std::size_t rules() const noexcept { return m_names.size(); }
        const std::string& name(rule_id r) const { return m_names.at(r); }
        /// The body of rule r (r must be defined).
        expr_id body(rule_id r) const { return m_bodies.at(r); }
        /// The rule called `name`, or none.
        rule_id find(std::string_view name) const
        {
            const auto it = m_by_name.find(std::string(name));
            return it == m_by_name.end() ? none : it->second;
        }
        static constexpr std::uint32_t none = ~std::uint32_t(0);

        // --- expressions ---

        expr_id bytes(std::string_view text)
        {
            expr e;
            e.kind = op::bytes;
            e.text = std::string(text);
            return add(std::move(e));
        }
        expr_id empty() { return bytes(""); }
        expr_id byte_class(const xsampler::byte_set& set)
        {
            expr e;
            e.kind = op::byte_set;
            e.set = set;
            return add(std::move(e));
        }
        /// One UTF-8-encoded code point in `ranges` (negated: not in them);
        /// surrogates (U+D800-U+DFFF) never match. A set that matches
        /// nothing is a choice of no alternatives (it derives no text).
        expr_id code_points(const code_point_ranges& ranges, bool negated = false)
        {
            namespace rx = detail::regex;
            rx::cp_set s;
            for (const auto& r : ranges)
            {
                if (r.first > r.second || r.second > rx::max_code_point)
                {
                    throw invalid_parameter("grammar: a code point range " + std::to_string(r.first) + "-" +
                                            std::to_string(r.second) + " is reversed or past U+10FFFF");
                }
                s.emplace_back(r.first, r.second);
            }
            s = rx::normalized(std::move(s));
            if (negated)
            {
                s = rx::complement(s);
            }
            s = rx::without_surrogates(s);
            std::vector<rx::byte_seq> seqs;
            for (const auto& r : s)
            {
                rx::utf8_sequences(r.first, r.second, seqs);
            }
            std::vector<expr_id> alts;
            for (const auto& seq : seqs)
            {
                std::vector<expr_id> parts;
                for (const auto& br : seq)
                {
                    parts.push_back(byte_class(xsampler::byte_set::range(br.first, br.second)));
                }
                alts.push_back(parts.size() == 1 ? parts[0] : sequence(std::move(parts)));
            }
            return alts.size() == 1 ? alts[0] : choice(std::move(alts));
        }
        /// Any one code point (UTF-8).
        expr_id any_code_point() { return code_points({}, true); }
        /// A text the DFA accepts (one that accepts none is invalid_parameter).
        expr_id lexeme(byte_dfa dfa)
        {
            if (dfa.size() == 0)
            {
                throw invalid_parameter("grammar: a lexeme whose automaton accepts no text");
            }
            m_lexemes.push_back(std::make_shared<const byte_dfa>(std::move(dfa)));
            expr e;
            e.kind = op::lexeme;
            e.index = std::uint32_t(m_lexemes.size() - 1);
            return add(std::move(e));
        }
        /// A text the DFA accepts holding min to max units (max = unbounded:
        /// no maximum), units[s] saying whether the byte read in state s
        /// begins one (units.size() == dfa.size()). invalid_parameter: none
        /// such text, bounds reversed, or the count's table too large
        /// (detail::unit_ends::max_entries).
        expr_id counted_lexeme(byte_dfa dfa, std::vector<std::uint8_t> units, std::size_t min, std::size_t max)
        {
            if (units.size() != dfa.size())
            {
                throw invalid_parameter("grammar::counted_lexeme: " + std::to_string(units.size()) + " unit flags for " +
                                        std::to_string(dfa.size()) + " states");
            }
            if (max < min)
            {
                throw invalid_parameter("grammar::counted_lexeme: units {" + std::to_string(min) + "," + std::to_string(max) +
                                        "} whose maximum is below its minimum");
            }
            lexeme_units u;
            u.units = std::move(units);
            u.min = min;
            u.max = max;
            u.shortest = ends_of(dfa, u).shortest();
            if (u.shortest == detail::unit_ends::none)
            {
                throw invalid_parameter("grammar::counted_lexeme: the automaton accepts no text of " + std::to_string(min) +
                                        " to " + (max == unbounded ? std::string("any number of") : std::to_string(max)) +
                                        " units");
            }
            const expr_id e = lexeme(std::move(dfa));
            m_units.resize(m_lexemes.size());
            m_units.back() = std::make_shared<const lexeme_units>(std::move(u));
            return e;
        }
        /// A counted lexeme's units and bounds (a plain lexeme: nullptr).
        struct lexeme_units
        {
            std::vector<std::uint8_t> units;
            std::size_t min = 0, max = 0;
            std::uint32_t shortest = 0;  // bytes of its shortest text
        };
        const lexeme_units* units_of(std::uint32_t lexeme) const noexcept
        {
            return lexeme < m_units.size() ? m_units[lexeme].get() : nullptr;
        }
        /// The ends table of a DFA counted as u says (the automaton's states may be any DFA's).
        static detail::unit_ends ends_of(const byte_dfa& d, const lexeme_units& u)
        {
            std::vector<std::vector<std::uint32_t>> succ(d.size());
            std::vector<std::uint8_t> accepting(d.size());
            for (std::size_t s = 0; s < d.size(); ++s)
            {
                accepting[s] = d.accepting(std::int32_t(s));
                for (unsigned b = 0; b < 256; ++b)
                {
                    const std::int32_t t = d.next(std::int32_t(s), static_cast<unsigned char>(b));
                    if (t != byte_dfa::dead)
                    {
                        succ[s].push_back(std::uint32_t(t));
                    }
                }
                std::sort(succ[s].begin(), succ[s].end());
                succ[s].erase(std::unique(succ[s].begin(), succ[s].end()), succ[s].end());
            }
            return detail::unit_ends(succ, u.units, accepting, std::uint32_t(d.start()), u.min, u.max);
        }
        expr_id ref(rule_id r)
        {
            check_rule(r, "ref");
            expr e;
            e.kind = op::rule;
            e.index = r;
            return add(std::move(e));
        }
        expr_id sequence(std::vector<expr_id> items)
        {
            if (items.size() == 1)
            {
                return items[0];
            }
            return group(op::sequence, std::move(items));
        }
        /// A choice of no alternatives derives no text.
        expr_id choice(std::vector<expr_id> items)
        {
            if (items.size() == 1)
            {
                return items[0];
            }
            return group(op::choice, std::move(items));
        }
        expr_id repeat(expr_id e, std::size_t min, std::size_t max)
        {
            check_expr(e, "repeat");
            if (max < min)
            {
                throw invalid_parameter("grammar: a repetition {" + std::to_string(min) + "," + std::to_string(max) +
                                        "} whose maximum is below its minimum");
            }
            expr x;
            x.kind = op::repeat;
            x.items = {e};
            x.min = min;
            x.max = max;
            return add(std::move(x));
        }
        expr_id optional(expr_id e) { return repeat(e, 0, 1); }
        expr_id star(expr_id e) { return repeat(e, 0, unbounded); }
        expr_id plus(expr_id e) { return repeat(e, 1, unbounded); }

        std::size_t size() const noexcept { return m_exprs.size(); }
        const expr& at(expr_id e) const { return m_exprs.at(e); }
        const byte_dfa& lexeme_dfa(std::uint32_t i) const { return *m_lexemes.at(i); }

    private:
        expr_id add(expr e)
        {
            m_exprs.push_back(std::move(e));
            return expr_id(m_exprs.size() - 1);
        }
        expr_id group(op kind, std::vector<expr_id> items)
        {
            for (const expr_id i : items)
            {
                check_expr(i, kind == op::sequence ? "sequence" : "choice");
            }
            expr e;
            e.kind = kind;
            e.items = std::move(items);
            return add(std::move(e));
        }
        void check_rule(rule_id r, const char* who) const
        {
            if (r >= m_names.size())
            {
                throw invalid_parameter(std::string("grammar::") + who + ": no rule " + std::to_string(r));
            }
        }
        void check_expr(expr_id e, const char* who) const
        {
            if (e >= m_exprs.size())
            {
                throw invalid_parameter(std::string("grammar::") + who + ": no expression " + std::to_string(e));
            }
        }

        std::vector<expr> m_exprs;
        std::vector<std::shared_ptr<const byte_dfa>> m_lexemes;
        std::vector<std::shared_ptr<const lexeme_units>> m_units;  // by lexeme (counted ones; may be shorter)
        std::vector<std::string> m_names;
        std::vector<expr_id> m_bodies;
        std::unordered_map<std::string, rule_id> m_by_name;
        std::vector<std::pair<rule_id, rule_id>> m_distinct;
        std::vector<rule_id> m_closed;  // distinct_closed()'s items
        std::vector<rule_id> m_keys;    // distinct_keys()'s keys
        rule_id m_root = none;
    };
}

#endif
