// xsampler/grammar.hpp — the byte-level machine behind the constraints. (xsampler, BSD-3-Clause)
//
// A grammar is a tree of nodes compiled once (json_schema.hpp, constraint.hpp)
// and a machine that reads bytes through it: a pushdown automaton whose stack
// holds the open objects and arrays, and whose top holds the scalar being
// read (a string, a number, a literal from a finite set, a regex). It is the
// part of a constraint that knows the language; constraint.hpp walks the
// vocabulary through it.
//
// The language of each node:
//   any      any JSON value (objects with any keys, arrays of any values);
//   object   '{' members '}': only the listed properties, each at most once,
//            in any order, the required ones before '}' (properties listed),
//            or any keys with values of one node (no properties listed; no
//            keys at all with additionalProperties false);
//   array    '[' items ']' with min_items <= count <= max_items;
//   string   a JSON string whose length in code points (an escape is one,
//            a surrogate pair one) lies in [min_length, max_length], or whose
//            content matches a pattern (regex.hpp, search semantics; then its
//            characters are unescaped and at most max_length counts too);
//   number   -?(0|[1-9][0-9]{0,14})(\.[0-9]{1,15})?([eE][+-]?[0-9]{1,2})?
//            (integer: without the fraction and the exponent): bounded so that
//            every number fits a double, every integer an int64, and no number
//            runs on without end;
//   literals a finite set of exact byte strings (true/false, null, enum,
//            const: the values' compact JSON text);
//   union    one of several nodes whose first bytes differ (a type list);
//   regex    the whole text matches a regular expression (no JSON).
// Whitespace: up to `whitespace` bytes of ' ', '\n', '\r', '\t' in each gap
// JSON allows between tokens inside objects and arrays; none before or after
// the top-level value. Objects and arrays nest at most max_depth deep.
//
// The machine: step(state, byte) -> false if no text of the language starts
// with the bytes read so far and this byte (the state is then unspecified);
// every state it reaches is live: the text can still be completed.
// accepting(state): the bytes read are a text of the language.
// completion(state): one completion, built the same way at every step (the
// first missing required property, the shortest key left, "0", "true"...):
// stepping its first byte gives a state whose completion is the rest of it,
// so it is a path the machine can follow byte by byte (budgets rely on this).
#ifndef XSAMPLER_GRAMMAR_HPP
#define XSAMPLER_GRAMMAR_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "regex.hpp"
#include "types.hpp"

namespace xsampler
{
    namespace detail
    {
        /// A set of byte strings as a trie: keys of an object, enum values, true/false.
        class literal_trie
        {
        public:
            struct node
            {
                std::vector<std::pair<unsigned char, std::uint32_t>> next;  // sorted by byte
                std::int32_t leaf = -1;                                     // the index of the string ending here
                std::uint64_t under = 0;  // leaves below (and at) this node, bit i for string i < 64
                std::uint32_t shortest = 0;  // bytes left to the shortest leaf below (ties: the lowest index)
                std::int32_t shortest_leaf = -1;
            };

            literal_trie() : m_nodes(1) {}
            /// The longest string a trie takes (its nodes are finished recursively).
            static constexpr std::size_t max_length = 4096;

            explicit literal_trie(const std::vector<std::string>& strings) : m_nodes(1)
            {
                for (std::size_t i = 0; i < strings.size(); ++i)
                {
                    if (strings[i].size() > max_length)
                    {
                        throw invalid_parameter("grammar: a value or key of " + std::to_string(strings[i].size()) +
                                                " bytes, longer than " + std::to_string(max_length));
                    }
                    std::uint32_t at = 0;
                    for (const char ch : strings[i])
                    {
                        const auto b = static_cast<unsigned char>(ch);
                        const std::int64_t n = child(at, b);
                        if (n >= 0)
                        {
                            at = std::uint32_t(n);
                            continue;
                        }
                        m_nodes.emplace_back();
                        auto& kids = m_nodes[at].next;
                        kids.insert(std::upper_bound(kids.begin(), kids.end(), std::make_pair(b, std::uint32_t(0)),
                                                     [](const auto& x, const auto& y) { return x.first < y.first; }),
                                    {b, std::uint32_t(m_nodes.size() - 1)});
                        at = std::uint32_t(m_nodes.size() - 1);
                    }
                    if (m_nodes[at].leaf < 0)
                    {
                        m_nodes[at].leaf = std::int32_t(i);
                    }
                }
                m_strings = strings;
                finish(0, 0);
            }

            /// The child of node `at` by byte b, or -1.
            std::int64_t child(std::uint32_t at, unsigned char b) const noexcept
            {
                for (const auto& k : m_nodes[at].next)
                {
                    if (k.first == b)
                    {
                        return k.second;
                    }
                }
                return -1;
            }
            const node& at(std::uint32_t i) const noexcept { return m_nodes[i]; }
            const std::vector<std::string>& strings() const noexcept { return m_strings; }
            /// The bytes after node `at` (at depth `depth`) to string `leaf` below it.
            std::string_view rest(std::int32_t leaf, std::size_t depth) const
            {
                return std::string_view(m_strings[std::size_t(leaf)]).substr(depth);
            }
            std::vector<unsigned char> first_bytes() const
            {
                std::vector<unsigned char> out;
                for (const auto& k : m_nodes[0].next)
                {
                    out.push_back(k.first);
                }
                return out;
            }

        private:
            void finish(std::uint32_t at, std::uint32_t depth)
            {
                node& n = m_nodes[at];
                n.shortest = ~std::uint32_t(0);
                if (n.leaf >= 0)
                {
                    n.shortest = 0;
                    n.shortest_leaf = n.leaf;
                    if (n.leaf < 64)
                    {
                        n.under |= std::uint64_t(1) << n.leaf;
                    }
                }
                for (const auto& k : n.next)
                {
                    finish(k.second, depth + 1);
                    const node& c = m_nodes[k.second];
                    m_nodes[at].under |= c.under;
                    const std::uint32_t s = c.shortest + 1;
                    node& self = m_nodes[at];
                    if (s < self.shortest || (s == self.shortest && c.shortest_leaf < self.shortest_leaf))
                    {
                        self.shortest = s;
                        self.shortest_leaf = c.shortest_leaf;
                    }
                }
            }

            std::vector<node> m_nodes;
            std::vector<std::string> m_strings;
        };

    }

    /// The compiled language: nodes (see the top of this file) and the
    /// tables they share.
    struct grammar
    {
        enum class kind : std::uint8_t
        {
            any,
            object,
            array,
            string,
            number,
            integer,
            literals,
            one_of,
            regex
        };
        struct property
        {
            std::string name;  // the key's JSON text, quotes included
            std::uint32_t value = 0;
            bool required = false;
        };
        struct node
        {
            kind what = kind::any;
            // object
            std::vector<property> properties;
            std::uint32_t keys = 0;             // the literal trie of the property keys
            std::int64_t additional = -1;       // free keys' value node (-1: no free keys)
            // array
            std::uint32_t items = 0;
            std::size_t min_items = 0, max_items = ~std::size_t(0);
            // string
            std::size_t min_length = 0, max_length = ~std::size_t(0);
            std::int64_t pattern = -1;  // index into dfas
            // literals
            std::uint32_t trie = 0;
            // one_of
            std::vector<std::uint32_t> options;
            // regex (the whole text)
            std::uint32_t dfa = 0;
            // computed by finish(): the canonical shortest value
            std::string shortest;
            std::vector<bool> starts;  // first bytes (256)
        };

        /// The longest shortest value a grammar may have: every completion
        /// is built from these, and a budget spells one per step.
        static constexpr std::size_t max_shortest = 65536;

        std::vector<node> nodes;
        std::vector<detail::literal_trie> tries;
        std::vector<byte_dfa> dfas;
        std::vector<std::vector<std::string>> dfa_completions;  // per DFA, per state (finish; empty if too big)
        std::uint32_t root = 0;
        std::size_t whitespace = 2;
        std::size_t max_depth = 32;

        std::uint32_t add(node n)
        {
            nodes.push_back(std::move(n));
            return std::uint32_t(nodes.size() - 1);
        }
        std::uint32_t add_trie(const std::vector<std::string>& strings)
        {
            tries.emplace_back(strings);
            return std::uint32_t(tries.size() - 1);
        }

        /// The node of any JSON value, built once (its object, array and
        /// literal nodes refer back to it).
        std::uint32_t any_value()
        {
            if (m_any >= 0)
            {
                return std::uint32_t(m_any);
            }
            node a;
            a.what = kind::any;
            m_any = add(a);
            node obj;
            obj.what = kind::object;
            obj.additional = m_any;
            obj.keys = add_trie({});
            node arr;
            arr.what = kind::array;
            arr.items = std::uint32_t(m_any);
            node str;
            str.what = kind::string;
            node num;
            num.what = kind::number;
            node lit;
            lit.what = kind::literals;
            lit.trie = add_trie({"true", "false", "null"});
            std::vector<std::uint32_t> options{add(obj), add(arr), add(str), add(num), add(lit)};
            nodes[std::size_t(m_any)].options = std::move(options);
            return std::uint32_t(m_any);
        }

        /// Computes each node's shortest value and first bytes; checks that
        /// one_of's options start differently. Call once all nodes are added.
        void finish()
        {
            if (whitespace > 255)
            {
                throw invalid_parameter("grammar: whitespace must be <= 255, got " + std::to_string(whitespace));
            }
            // Each DFA state's canonical completion, kept when they are small.
            dfa_completions.assign(dfas.size(), {});
            for (std::size_t d = 0; d < dfas.size(); ++d)
            {
                std::size_t total = 0;
                for (std::size_t q = 0; q < dfas[d].size(); ++q)
                {
                    total += dfas[d].distance(std::int32_t(q));
                }
                if (total <= (std::size_t(1) << 20))
                {
                    for (std::size_t q = 0; q < dfas[d].size(); ++q)
                    {
                        dfa_completions[d].push_back(dfa_completion(dfas[d], std::int32_t(q)));
                    }
                }
            }
            for (auto& n : nodes)
            {
                if (n.properties.size() > 64)
                {
                    throw invalid_parameter("grammar: an object with " + std::to_string(n.properties.size()) +
                                            " properties, more than 64");
                }
                n.shortest.clear();
                n.starts.assign(256, false);
            }
            std::vector<int> mark(nodes.size(), 0);
            for (std::uint32_t i = 0; i < nodes.size(); ++i)
            {
                shortest_of(i, mark);
            }
        }

    private:
        const std::string& shortest_of(std::uint32_t i, std::vector<int>& mark)
        {
            if (mark[i] == 2)
            {
                return nodes[i].shortest;
            }
            if (mark[i] == 1)
            {
                throw invalid_parameter("grammar: a value requires itself (a cycle of required values)");
            }
            mark[i] = 1;
            std::string s;
            std::vector<bool> starts(256, false);
            auto& n = nodes[i];
            switch (n.what)
            {
            case kind::object:
            {
                s = "{";
                bool first = true;
                for (const auto& p : n.properties)
                {
                    if (p.required)
                    {
                        s += (first ? "" : ",") + p.name + ":" + shortest_of(p.value, mark);
                        first = false;
                    }
                }
                s += "}";
                starts['{'] = true;
                break;
            }
            case kind::array:
            {
                s = "[";
                if (n.min_items > 0)
                {
                    const std::string item = shortest_of(n.items, mark);
                    if (n.min_items > max_shortest / (item.size() + 1))
                    {
                        too_long();
                    }
                    for (std::size_t k = 0; k < n.min_items; ++k)
                    {
                        s += (k == 0 ? "" : ",") + item;
                    }
                }
                s += "]";
                starts['['] = true;
                break;
            }
            case kind::string:
                if (n.pattern >= 0)
                {
                    s = "\"" + dfa_completion(dfas[std::size_t(n.pattern)], dfas[std::size_t(n.pattern)].start()) + "\"";
                }
                else
                {
                    if (n.min_length > max_shortest)
                    {
                        too_long();
                    }
                    s = "\"" + std::string(n.min_length, 'a') + "\"";
                }
                starts['"'] = true;
                break;
            case kind::number:
            case kind::integer:
                s = "0";
                starts['-'] = true;
                for (int d = '0'; d <= '9'; ++d)
                {
                    starts[std::size_t(d)] = true;
                }
                break;
            case kind::literals:
            {
                const auto& t = tries[n.trie];
                if (t.at(0).shortest_leaf < 0)
                {
                    throw invalid_parameter("grammar: an empty set of values");
                }
                s = t.strings()[std::size_t(t.at(0).shortest_leaf)];
                for (const unsigned char b : t.first_bytes())
                {
                    starts[b] = true;
                }
                break;
            }
            case kind::any:
            case kind::one_of:
            {
                bool have = false;
                for (const std::uint32_t o : n.options)
                {
                    const std::string& os = shortest_of(o, mark);
                    for (std::size_t b = 0; b < 256; ++b)
                    {
                        if (nodes[o].starts[b])
                        {
                            if (starts[b])
                            {
                                throw invalid_parameter("grammar: the options of a union start with the same byte '" +
                                                        std::string(1, char(b)) + "'");
                            }
                            starts[b] = true;
                        }
                    }
                    if (!have || os.size() < s.size())
                    {
                        s = os;
                        have = true;
                    }
                }
                if (!have)
                {
                    throw invalid_parameter("grammar: a union without options");
                }
                break;
            }
            case kind::regex:
                s = dfa_completion(dfas[n.dfa], dfas[n.dfa].start());
                break;
            }
            if (s.size() > max_shortest)
            {
                too_long();
            }
            nodes[i].shortest = std::move(s);
            nodes[i].starts = std::move(starts);
            mark[i] = 2;
            return nodes[i].shortest;
        }

        [[noreturn]] static void too_long()
        {
            throw invalid_parameter("grammar: the shortest value is longer than " + std::to_string(max_shortest) +
                                    " bytes (minLength, minItems)");
        }

    public:
        /// The DFA's canonical completion from state s (its completion bytes).
        static std::string dfa_completion(const byte_dfa& d, std::int32_t s)
        {
            std::string out;
            while (!d.accepting(s))
            {
                const unsigned char b = d.completion_byte(s);
                out += char(b);
                s = d.next(s, b);
            }
            return out;
        }

    private:
        std::int64_t m_any = -1;
    };

    namespace detail
    {
        /// The state of the machine: the open containers and the scalar being read.
        struct grammar_state
        {
            enum class phase : std::uint8_t
            {
                open,       // after '{' or '['
                key,        // reading a key
                colon,      // after a key, before ':'
                value,      // after ':' or ',' (array): a value must come
                in_value,   // a value is being read (a scalar or a nested container)
                after,      // after a value: ',' or the close
                comma       // object: after ',', a key must come
            };
            struct frame
            {
                std::uint32_t node = 0;
                phase at = phase::open;
                std::int32_t property = -1;  // the key read (after key), -1 for a free key
                std::uint64_t used = 0;      // properties given
                std::uint32_t count = 0;     // array: items done
            };
            enum class scalar : std::uint8_t
            {
                none,
                string,
                number,
                literal,
                dfa
            };

            std::vector<frame> frames;
            // the top level
            bool started = false;
            bool done = false;
            std::uint8_t spaces = 0;  // whitespace bytes in the current gap
            // the scalar
            scalar reading = scalar::none;
            bool is_key = false;
            std::uint32_t node = 0;     // the scalar's node
            std::uint32_t trie_at = 0;  // literal: the trie node
            std::uint32_t depth = 0;    // literal: bytes read
            std::int32_t dfa_at = 0;    // dfa, pattern strings: the state
            // string
            std::uint8_t escape = 0;   // 0 none; 1 after '\'; 2..5 reading \u hex digit 1..4
            std::uint8_t utf8_need = 0;
            std::uint8_t utf8_lo = 0x80, utf8_hi = 0xBF;  // the next continuation byte's range
            std::uint16_t hex = 0;
            bool want_low = false;  // a high surrogate escape was read: \uDC00-\uDFFF must follow
            std::uint32_t chars = 0;
            // number
            std::uint8_t num_phase = 0;  // 0 after '-', 1 int "0", 2 int digits, 3 after '.', 4 frac, 5 after e, 6 after sign, 7 exp
            std::uint8_t digits = 0;
        };

        /// Counts what a completion would append.
        struct length_sink
        {
            std::size_t n = 0;
            length_sink& operator+=(char) noexcept
            {
                ++n;
                return *this;
            }
            length_sink& operator+=(std::string_view s) noexcept
            {
                n += s.size();
                return *this;
            }
        };

        /// Reads bytes through a grammar; see the top of this file.
        class grammar_machine
        {
        public:
            using state = grammar_state;
            using phase = grammar_state::phase;
            using scalar = grammar_state::scalar;
            using kind = grammar::kind;

            explicit grammar_machine(std::shared_ptr<const grammar> g) : m_g(std::move(g)) {}
            const grammar& rules() const noexcept { return *m_g; }

            state start() const
            {
                state s;
                if (m_g->nodes[m_g->root].what == kind::regex)
                {
                    s.started = true;
                    s.reading = scalar::dfa;
                    s.node = m_g->root;
                    s.dfa_at = m_g->dfas[m_g->nodes[m_g->root].dfa].start();
                }
                return s;
            }

            bool accepting(const state& s) const noexcept
            {
                if (s.done)
                {
                    return true;
                }
                return s.frames.empty() && s.started && scalar_accepting(s);
            }

            bool step(state& s, unsigned char b) const
            {
                if (s.reading != scalar::none)
                {
                    const int r = step_scalar(s, b);
                    if (r >= 0)
                    {
                        return r == 1;
                    }
                    // r < 0: the scalar ended before b (accepting, b does not continue it)
                    end_scalar(s);
                }
                return step_structure(s, b);
            }

            /// Appends the canonical completion of s to `out` (a std::string
            /// or a length_sink).
            template <class Sink>
            void completion(const state& s, Sink& out) const
            {
                const grammar& g = *m_g;
                if (s.done)
                {
                    return;
                }
                if (!s.started)
                {
                    out += g.nodes[g.root].shortest;
                    return;
                }
                if (s.reading != scalar::none)
                {
                    scalar_rest(s, out);
                }
                for (std::size_t i = s.frames.size(); i-- > 0;)
                {
                    const bool top = i + 1 == s.frames.size();
                    frame_rest(s.frames[i], top ? s : state(), out);
                }
            }

        private:
            static bool space(unsigned char b) noexcept { return b == ' ' || b == '\n' || b == '\r' || b == '\t'; }

            // --- scalars ---

            bool scalar_accepting(const state& s) const noexcept
            {
                const grammar& g = *m_g;
                switch (s.reading)
                {
                case scalar::none: return true;
                case scalar::string: return false;  // ends at its closing quote
                case scalar::number: return s.num_phase == 1 || s.num_phase == 2 || s.num_phase == 4 || s.num_phase == 7;
                case scalar::literal:
                {
                    const auto& t = g.tries[literal_trie_of(s)];
                    return t.at(s.trie_at).leaf >= 0 && (!s.is_key || key_free(s, t.at(s.trie_at).leaf));
                }
                case scalar::dfa:
                {
                    // a pattern string ends at its closing quote; a whole-text regex
                    // whenever its DFA accepts
                    const auto& n = g.nodes[s.node];
                    return n.what == kind::regex && g.dfas[n.dfa].accepting(s.dfa_at);
                }
                }
                return false;
            }

            std::uint32_t literal_trie_of(const state& s) const noexcept
            {
                const auto& n = m_g->nodes[s.node];
                return s.is_key ? n.keys : n.trie;
            }
            /// Whether key `leaf` of the object on top is not given yet.
            bool key_free(const state& s, std::int32_t leaf) const noexcept
            {
                return leaf >= 64 || (s.frames.back().used >> leaf & 1) == 0;
            }
            std::uint64_t unused_mask(const state& s) const noexcept { return ~s.frames.back().used; }

            /// 1: b continues the scalar; 0: dead; -1: the scalar is complete
            /// and b does not continue it (the caller ends it and reads b in
            /// the structure).
            int step_scalar(state& s, unsigned char b) const
            {
                const grammar& g = *m_g;
                switch (s.reading)
                {
                case scalar::none: return -1;
                case scalar::string: return step_string(s, b) ? 1 : 0;
                case scalar::number: return step_number(s, b);
                case scalar::literal:
                {
                    const auto& t = g.tries[literal_trie_of(s)];
                    const std::int64_t n = t.child(s.trie_at, b);
                    if (n >= 0 && (!s.is_key || (t.at(std::uint32_t(n)).under & unused_mask(s)) != 0))
                    {
                        s.trie_at = std::uint32_t(n);
                        ++s.depth;
                        if (t.at(s.trie_at).next.empty())  // nothing can follow: ends now
                        {
                            end_scalar(s);
                        }
                        return 1;
                    }
                    return scalar_accepting(s) ? -1 : 0;
                }
                case scalar::dfa:
                {
                    const auto& n = g.nodes[s.node];
                    if (n.what == kind::string)  // a pattern string's content
                    {
                        const auto& d = g.dfas[std::size_t(n.pattern)];
                        if (b == '"')
                        {
                            if (!d.accepting(s.dfa_at) || s.chars < n.min_length)
                            {
                                return 0;
                            }
                            end_scalar(s);
                            return 1;
                        }
                        const std::int32_t to = d.next(s.dfa_at, b);
                        if (to == byte_dfa::dead)
                        {
                            return 0;
                        }
                        if ((b & 0xC0) != 0x80)
                        {
                            if (s.chars >= n.max_length)
                            {
                                return 0;
                            }
                            ++s.chars;
                        }
                        s.dfa_at = to;
                        return 1;
                    }
                    const auto& d = g.dfas[n.dfa];  // the whole text
                    const std::int32_t to = d.next(s.dfa_at, b);
                    if (to == byte_dfa::dead)
                    {
                        return 0;
                    }
                    s.dfa_at = to;
                    return 1;
                }
                }
                return 0;
            }

            bool step_string(state& s, unsigned char b) const
            {
                const auto& n = m_g->nodes[s.node];
                const bool limited = !s.is_key;
                if (s.utf8_need > 0)
                {
                    if (b < s.utf8_lo || b > s.utf8_hi)
                    {
                        return false;
                    }
                    --s.utf8_need;
                    s.utf8_lo = 0x80;
                    s.utf8_hi = 0xBF;
                    return true;
                }
                if (s.escape == 1)
                {
                    if (s.want_low && b != 'u')
                    {
                        return false;
                    }
                    switch (b)
                    {
                    case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
                        s.escape = 0;
                        return count_char(s, n, limited);
                    case 'u':
                        s.escape = 2;
                        s.hex = 0;
                        return true;
                    default: return false;
                    }
                }
                if (s.escape >= 2)
                {
                    int v = -1;
                    if (b >= '0' && b <= '9') v = b - '0';
                    else if (b >= 'a' && b <= 'f') v = b - 'a' + 10;
                    else if (b >= 'A' && b <= 'F') v = b - 'A' + 10;
                    if (v < 0)
                    {
                        return false;
                    }
                    const int digit = s.escape - 2;  // 0..3
                    s.hex = std::uint16_t(s.hex << 4 | v);
                    if (digit == 1)  // the first two digits decide surrogates (a high one waits for its pair)
                    {
                        const bool low = s.hex >= 0xDC && s.hex <= 0xDF;
                        if (s.want_low ? !low : low)
                        {
                            return false;
                        }
                    }
                    else if (digit == 0 && s.want_low && v != 0xD)
                    {
                        return false;
                    }
                    if (digit < 3)
                    {
                        ++s.escape;
                        return true;
                    }
                    s.escape = 0;
                    if (s.hex >= 0xD800 && s.hex <= 0xDBFF)
                    {
                        s.want_low = true;  // counts with its pair
                        return true;
                    }
                    s.want_low = false;
                    return count_char(s, n, limited);
                }
                if (s.want_low)
                {
                    if (b != '\\')
                    {
                        return false;
                    }
                    s.escape = 1;
                    return true;
                }
                if (b == '"')
                {
                    if (limited && s.chars < n.min_length)
                    {
                        return false;
                    }
                    end_scalar(s);
                    return true;
                }
                if (b == '\\')
                {
                    if (limited && s.chars >= n.max_length)
                    {
                        return false;
                    }
                    s.escape = 1;
                    return true;
                }
                if (b < 0x20)
                {
                    return false;
                }
                if (b < 0x80)
                {
                    return count_char(s, n, limited);
                }
                // a UTF-8 lead byte
                if (b >= 0xC2 && b <= 0xDF) { s.utf8_need = 1; }
                else if (b == 0xE0) { s.utf8_need = 2; s.utf8_lo = 0xA0; }
                else if (b >= 0xE1 && b <= 0xEF) { s.utf8_need = 2; if (b == 0xED) s.utf8_hi = 0x9F; }
                else if (b == 0xF0) { s.utf8_need = 3; s.utf8_lo = 0x90; }
                else if (b >= 0xF1 && b <= 0xF3) { s.utf8_need = 3; }
                else if (b == 0xF4) { s.utf8_need = 3; s.utf8_hi = 0x8F; }
                else { return false; }
                return count_char(s, n, limited);
            }
            static bool count_char(state& s, const grammar::node& n, bool limited) noexcept
            {
                if (limited)
                {
                    if (s.chars >= n.max_length)
                    {
                        return false;
                    }
                }
                ++s.chars;
                return true;
            }

            int step_number(state& s, unsigned char b) const
            {
                const bool integer = m_g->nodes[s.node].what == kind::integer;
                const bool digit = b >= '0' && b <= '9';
                switch (s.num_phase)
                {
                case 0:  // after '-'
                    if (!digit) return 0;
                    s.num_phase = b == '0' ? 1 : 2;
                    s.digits = 1;
                    return 1;
                case 1:  // "0"
                case 2:  // integer digits
                    if (digit)
                    {
                        if (s.num_phase == 1 || s.digits >= 15) return 0;
                        ++s.digits;
                        return 1;
                    }
                    if (!integer && b == '.') { s.num_phase = 3; s.digits = 0; return 1; }
                    if (!integer && (b == 'e' || b == 'E')) { s.num_phase = 5; s.digits = 0; return 1; }
                    return -1;
                case 3:  // after '.'
                    if (!digit) return 0;
                    s.num_phase = 4;
                    s.digits = 1;
                    return 1;
                case 4:
                    if (digit)
                    {
                        if (s.digits >= 15) return 0;
                        ++s.digits;
                        return 1;
                    }
                    if (b == 'e' || b == 'E') { s.num_phase = 5; s.digits = 0; return 1; }
                    return -1;
                case 5:  // after 'e'
                    if (b == '+' || b == '-') { s.num_phase = 6; return 1; }
                    if (!digit) return 0;
                    s.num_phase = 7;
                    s.digits = 1;
                    return 1;
                case 6:
                    if (!digit) return 0;
                    s.num_phase = 7;
                    s.digits = 1;
                    return 1;
                case 7:
                    if (digit)
                    {
                        if (s.digits >= 2) return 0;
                        ++s.digits;
                        return 1;
                    }
                    return -1;
                }
                return 0;
            }

            /// The scalar on top is complete: the structure takes over.
            void end_scalar(state& s) const
            {
                const bool key = s.is_key;
                const std::int32_t leaf =
                    key && s.reading == scalar::literal ? m_g->tries[literal_trie_of(s)].at(s.trie_at).leaf : -1;
                s.reading = scalar::none;
                s.is_key = false;
                s.trie_at = s.depth = 0;
                s.dfa_at = 0;
                s.escape = s.utf8_need = 0;
                s.utf8_lo = 0x80;
                s.utf8_hi = 0xBF;
                s.hex = 0;
                s.want_low = false;
                s.chars = 0;
                s.num_phase = s.digits = 0;
                s.node = 0;
                if (key)
                {
                    auto& f = s.frames.back();
                    f.at = phase::colon;
                    f.property = leaf;
                    if (leaf >= 0)
                    {
                        f.used |= std::uint64_t(1) << leaf;
                    }
                    return;
                }
                value_done(s);
            }

            void value_done(state& s) const
            {
                if (s.frames.empty())
                {
                    s.done = true;
                    return;
                }
                auto& f = s.frames.back();
                f.at = phase::after;
                if (m_g->nodes[f.node].what == kind::array)
                {
                    ++f.count;
                }
            }

            // --- structure ---

            bool step_structure(state& s, unsigned char b) const
            {
                const grammar& g = *m_g;
                if (s.done)
                {
                    return false;
                }
                if (s.frames.empty())
                {
                    if (s.started)
                    {
                        return false;  // a top-level scalar that ended: nothing may follow
                    }
                    s.started = true;
                    return start_value(s, g.root, b);
                }
                auto& f = s.frames.back();
                const auto& n = g.nodes[f.node];
                const bool object = n.what == kind::object;
                if (space(b))
                {
                    if (f.at == phase::key || f.at == phase::in_value || s.spaces >= g.whitespace)
                    {
                        return false;
                    }
                    ++s.spaces;
                    return true;
                }
                s.spaces = 0;
                switch (f.at)
                {
                case phase::open:
                    if (object)
                    {
                        if (b == '}')
                        {
                            return close_object(s);
                        }
                        return b == '"' && start_key(s);
                    }
                    if (b == ']')
                    {
                        return n.min_items == 0 && close_array(s);
                    }
                    if (n.max_items == 0)
                    {
                        return false;
                    }
                    f.at = phase::in_value;
                    return start_value(s, n.items, b);
                case phase::colon:
                    if (b != ':')
                    {
                        return false;
                    }
                    f.at = phase::value;
                    return true;
                case phase::value:
                {
                    const std::uint32_t v = object ? value_node(f, n) : n.items;
                    f.at = phase::in_value;
                    return start_value(s, v, b);
                }
                case phase::after:
                    if (b == ',')
                    {
                        if (object)
                        {
                            if (!key_left(f, n))
                            {
                                return false;
                            }
                            f.at = phase::comma;
                            return true;
                        }
                        if (f.count >= n.max_items)
                        {
                            return false;
                        }
                        f.at = phase::value;
                        return true;
                    }
                    if (object)
                    {
                        return b == '}' && close_object(s);
                    }
                    return b == ']' && f.count >= n.min_items && close_array(s);
                case phase::comma:
                    return b == '"' && start_key(s);
                case phase::key:
                case phase::in_value:
                    return false;
                }
                return false;
            }

            std::uint32_t value_node(const state::frame& f, const grammar::node& n) const noexcept
            {
                return f.property >= 0 ? n.properties[std::size_t(f.property)].value : std::uint32_t(n.additional);
            }
            /// Whether another key may come: a property not given, or free keys.
            static bool key_left(const state::frame& f, const grammar::node& n) noexcept
            {
                if (n.additional >= 0 && n.properties.empty())
                {
                    return true;
                }
                for (std::size_t i = 0; i < n.properties.size(); ++i)
                {
                    if (i >= 64 || (f.used >> i & 1) == 0)
                    {
                        return true;
                    }
                }
                return false;
            }

            bool start_key(state& s) const
            {
                auto& f = s.frames.back();
                const auto& n = m_g->nodes[f.node];
                if (!key_left(f, n))
                {
                    return false;
                }
                f.at = phase::key;
                s.is_key = true;
                s.node = f.node;
                if (n.properties.empty())  // a free key: any string
                {
                    s.reading = scalar::string;
                    return true;
                }
                s.reading = scalar::literal;
                const auto& t = m_g->tries[n.keys];
                const std::int64_t c = t.child(0, '"');
                if (c < 0)
                {
                    return false;
                }
                s.trie_at = std::uint32_t(c);
                s.depth = 1;
                return true;
            }

            bool close_object(state& s) const
            {
                auto& f = s.frames.back();
                const auto& n = m_g->nodes[f.node];
                for (std::size_t i = 0; i < n.properties.size() && i < 64; ++i)
                {
                    if (n.properties[i].required && (f.used >> i & 1) == 0)
                    {
                        return false;
                    }
                }
                s.frames.pop_back();
                value_done(s);
                return true;
            }
            bool close_array(state& s) const
            {
                s.frames.pop_back();
                value_done(s);
                return true;
            }

            /// Starts a value of node v with its first byte b.
            bool start_value(state& s, std::uint32_t v, unsigned char b) const
            {
                const grammar& g = *m_g;
                const auto* n = &g.nodes[v];
                while (n->what == kind::any || n->what == kind::one_of)
                {
                    bool found = false;
                    for (const std::uint32_t o : n->options)
                    {
                        if (g.nodes[o].starts[b])
                        {
                            v = o;
                            n = &g.nodes[o];
                            found = true;
                            break;
                        }
                    }
                    if (!found)
                    {
                        return false;
                    }
                }
                if (!n->starts[b])
                {
                    return false;
                }
                switch (n->what)
                {
                case kind::object:
                case kind::array:
                    if (s.frames.size() >= g.max_depth)
                    {
                        return false;
                    }
                    s.frames.push_back({v, phase::open, -1, 0, 0});
                    return true;
                case kind::string:
                    s.node = v;
                    if (n->pattern >= 0)
                    {
                        s.reading = scalar::dfa;
                        s.dfa_at = g.dfas[std::size_t(n->pattern)].start();
                    }
                    else
                    {
                        s.reading = scalar::string;
                    }
                    return true;
                case kind::number:
                case kind::integer:
                    s.node = v;
                    s.reading = scalar::number;
                    if (b == '-')
                    {
                        s.num_phase = 0;
                        return true;
                    }
                    s.num_phase = b == '0' ? 1 : 2;
                    s.digits = 1;
                    return true;
                case kind::literals:
                    s.node = v;
                    s.reading = scalar::literal;
                    s.trie_at = 0;
                    s.depth = 0;
                    return step_scalar(s, b) == 1;
                default:
                    return false;
                }
            }

            // --- completions ---

            template <class Sink>
            void scalar_rest(const state& s, Sink& out) const
            {
                const grammar& g = *m_g;
                switch (s.reading)
                {
                case scalar::none: return;
                case scalar::string:
                {
                    const auto& n = g.nodes[s.node];
                    if (s.utf8_need > 0)
                    {
                        out += char(s.utf8_lo);
                        for (int k = 1; k < s.utf8_need; ++k)
                        {
                            out += char(0x80);
                        }
                    }
                    std::uint32_t chars = s.chars;
                    if (s.escape == 1)
                    {
                        out += s.want_low ? "uDC00" : "n";
                        ++chars;
                    }
                    else if (s.escape >= 2)
                    {
                        const int read = s.escape - 2;  // hex digits read
                        if (s.want_low)
                        {
                            out += std::string_view("DC00").substr(std::size_t(read));
                        }
                        else
                        {
                            out += std::string_view("0000").substr(std::size_t(read));
                            const unsigned top = read >= 2 ? unsigned(s.hex) >> 4 * (read - 2) : 0;
                            if (top >= 0xD8 && top <= 0xDB)
                            {
                                out += "\\uDC00";  // a high surrogate's pair
                            }
                        }
                        ++chars;
                    }
                    else if (s.want_low)
                    {
                        out += "\\uDC00";
                        ++chars;
                    }
                    if (!s.is_key)
                    {
                        for (std::size_t k = chars; k < n.min_length; ++k)
                        {
                            out += 'a';
                        }
                    }
                    out += '"';
                    if (s.is_key)
                    {
                        key_end_rest(s.frames.back(), -1, out);
                    }
                    return;
                }
                case scalar::number:
                    if (!scalar_accepting(s))
                    {
                        out += '0';
                    }
                    return;
                case scalar::literal:
                {
                    const auto& t = g.tries[literal_trie_of(s)];
                    const std::int32_t leaf = s.is_key ? canonical_key(s.frames.back(), s.trie_at) : t.at(s.trie_at).shortest_leaf;
                    out += t.rest(leaf, s.depth);
                    if (s.is_key)
                    {
                        key_end_rest(s.frames.back(), leaf, out);
                    }
                    return;
                }
                case scalar::dfa:
                {
                    const auto& n = g.nodes[s.node];
                    dfa_rest(n.what == kind::string ? std::size_t(n.pattern) : std::size_t(n.dfa), s.dfa_at, out);
                    if (n.what == kind::string)
                    {
                        out += '"';
                    }
                    return;
                }
                }
            }

            /// A DFA's canonical completion from state `at`: its bytes, or for a
            /// length_sink its length (the DFA's distance).
            template <class Sink>
            void dfa_rest(std::size_t d, std::int32_t at, Sink& out) const
            {
                const grammar& g = *m_g;
                if constexpr (std::is_same<Sink, length_sink>::value)
                {
                    out.n += g.dfas[d].distance(at);
                }
                else if (!g.dfa_completions[d].empty())
                {
                    out += g.dfa_completions[d][std::size_t(at)];
                }
                else
                {
                    out += grammar::dfa_completion(g.dfas[d], at);
                }
            }

            /// After a key's closing quote: ':' and the property's shortest
            /// value (the frame's own rest follows, with the property given).
            template <class Sink>
            void key_end_rest(const state::frame& f, std::int32_t property, Sink& out) const
            {
                const auto& n = m_g->nodes[f.node];
                out += ':';
                out += m_g->nodes[property >= 0 ? n.properties[std::size_t(property)].value : std::uint32_t(n.additional)]
                           .shortest;
            }

            /// The canonical key below trie node `at`: the first required
            /// property not given, else the shortest key not given (ties: the
            /// first listed).
            std::int32_t canonical_key(const state::frame& f, std::uint32_t at) const
            {
                const auto& n = m_g->nodes[f.node];
                const auto& t = m_g->tries[n.keys];
                const std::uint64_t under = t.at(at).under;
                for (std::size_t i = 0; i < n.properties.size() && i < 64; ++i)
                {
                    if (n.properties[i].required && (f.used >> i & 1) == 0 && (under >> i & 1) != 0)
                    {
                        return std::int32_t(i);
                    }
                }
                std::int32_t best = -1;
                std::size_t best_len = ~std::size_t(0);
                for (std::size_t i = 0; i < n.properties.size() && i < 64; ++i)
                {
                    if ((f.used >> i & 1) == 0 && (under >> i & 1) != 0 && n.properties[i].name.size() < best_len)
                    {
                        best = std::int32_t(i);
                        best_len = n.properties[i].name.size();
                    }
                }
                return best;
            }

            /// The rest of one open container, its current value (if any) done.
            template <class Sink>
            void frame_rest(const state::frame& f, const state& s, Sink& out) const
            {
                const grammar& g = *m_g;
                const auto& n = g.nodes[f.node];
                if (n.what == kind::array)
                {
                    std::size_t count = f.count;
                    const std::string& item = g.nodes[n.items].shortest;
                    switch (f.at)
                    {
                    case phase::open:
                        for (std::size_t k = 0; k < n.min_items; ++k)
                        {
                            out += k == 0 ? "" : ",";
                            out += item;
                        }
                        break;
                    case phase::value:  // after ','
                        out += item;
                        for (std::size_t k = count + 1; k < n.min_items; ++k)
                        {
                            out += ',';
                            out += item;
                        }
                        break;
                    default:  // in_value (the item counts once done), after
                        if (f.at == phase::in_value)
                        {
                            ++count;
                        }
                        for (std::size_t k = count; k < n.min_items; ++k)
                        {
                            out += ',';
                            out += item;
                        }
                        break;
                    }
                    out += ']';
                    return;
                }
                // an object
                std::uint64_t used = f.used;
                bool need_comma = true;
                switch (f.at)
                {
                case phase::open:
                    need_comma = false;
                    break;
                case phase::key:  // the key's rest and value were written by scalar_rest
                    if (s.reading == scalar::literal)
                    {
                        used |= std::uint64_t(1) << canonical_key(f, s.trie_at);
                    }
                    break;
                case phase::colon:
                    out += ':';
                    out += g.nodes[value_node(f, n)].shortest;
                    break;
                case phase::value:
                    out += g.nodes[value_node(f, n)].shortest;
                    break;
                case phase::in_value:
                case phase::after:
                    break;
                case phase::comma:
                {
                    // a key must come: the first required one left, else the shortest left
                    state::frame probe = f;
                    probe.used = used;
                    if (n.properties.empty())
                    {
                        out += "\"\":";
                        out += g.nodes[std::size_t(n.additional)].shortest;
                    }
                    else
                    {
                        const std::int32_t k = canonical_key(probe, 0);
                        out += n.properties[std::size_t(k)].name;
                        out += ':';
                        out += g.nodes[n.properties[std::size_t(k)].value].shortest;
                        used |= std::uint64_t(1) << k;
                    }
                    break;
                }
                }
                for (std::size_t i = 0; i < n.properties.size() && i < 64; ++i)
                {
                    if (n.properties[i].required && (used >> i & 1) == 0)
                    {
                        if (need_comma)
                        {
                            out += ',';
                        }
                        need_comma = true;
                        out += n.properties[i].name;
                        out += ':';
                        out += g.nodes[n.properties[i].value].shortest;
                    }
                }
                out += '}';
            }

            std::shared_ptr<const grammar> m_g;
        };

    }
}

#endif
