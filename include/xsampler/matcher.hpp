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

namespace xsampler
{
    using grammar_automaton = detail::automaton;

    /// The grammar checked and compiled (see the top of this file).
    inline std::shared_ptr<const grammar_automaton> compile_grammar(const grammar& g, const grammar_limits& limits = {})
    {
        return detail::build_automaton(g, limits);
    }

    /// An Earley item.
    struct earley_item
    {
        std::uint32_t state;
        std::uint32_t origin;  // the set the rule began in (context: outside the chart)
        std::uint32_t count;   // a counted rule's iterations done (0 otherwise)
        bool operator==(const earley_item& o) const noexcept
        {
            return state == o.state && origin == o.origin && count == o.count;
        }
    };

    class matcher
    {
    public:
        /// Origins of items whose rule began outside the chart (a chart
        /// started from items of another one: masks computed by positions):
        /// context - g for the kernel's group g.
        static constexpr std::uint32_t context = ~std::uint32_t(0);
        static constexpr std::uint32_t max_groups = 65536;
        static constexpr bool is_context(std::uint32_t origin) noexcept { return origin > context - max_groups; }

        explicit matcher(std::shared_ptr<const grammar_automaton> a) : m_a(checked(std::move(a))) { reset(); }
        /// A chart started from these items (start_from), never holding the root's set.
        matcher(std::shared_ptr<const grammar_automaton> a, const std::vector<earley_item>& kernel,
                const std::vector<std::uint32_t>& group)
            : m_a(checked(std::move(a)))
        {
            start_from(kernel, group);
        }

        /// Back to the empty text.
        void reset()
        {
            m_items.clear();
            forget_hash();
            m_sets.assign(1, 0);
            m_popped.assign(1, 0);
            m_bytes.ready = m_tokens.ready = 0;
            m_text.clear();
            m_seen.clear();
            m_content = {};
            m_climbs.clear();
            add({m_a->rules[m_a->root].start, 0, 0});
            closure();
        }
        /// A chart whose only set holds these items, item i with origin
        /// context - group[i] (and what they predict): the positions alone,
        /// without what they return to. A context item that completes is a
        /// "pop" (popped()), but for the root's when no rule reads it (its
        /// end only ends the text).
        void start_from(const std::vector<earley_item>& kernel, const std::vector<std::uint32_t>& group)
        {
            m_items.clear();
            forget_hash();
            m_sets.assign(1, 0);
            m_popped.assign(1, 0);
            m_bytes.ready = m_tokens.ready = 0;
            m_text.clear();
            m_seen.clear();
            m_content = {};
            m_climbs.clear();
            for (std::size_t i = 0; i < kernel.size(); ++i)
            {
                earley_item x = kernel[i];
                x.origin = context - std::min(group[i], max_groups - 1);
                add(x);
            }
            closure();
        }

        const grammar_automaton& rules() const noexcept { return *m_a; }
        std::shared_ptr<const grammar_automaton> shared_rules() const noexcept { return m_a; }

        /// Whether grammar::distinct marks are checked (see the top of this file).
        void check_distinct(bool on) noexcept { m_check = on; }
        bool checks_distinct() const noexcept { return m_check; }
        /// Where check B (see new_value_left) may refuse what follows: every
        /// item of the current set is inside a distinct item checked while
        /// written, and each may still become an earlier item of its array.
        /// Then true, with `rests` holding the earlier string items' bytes
        /// past its content so far (a byte off all of them, or past one,
        /// leaves every later byte free), `unfinished` set where an escape
        /// is begun (any byte may count), and `quoted` where an item is a
        /// closed object (only the quote that ends its last member's string
        /// may leave nothing but an earlier item). False otherwise, or with
        /// the check off.
        bool distinct_rests(std::vector<std::string>& rests, bool& unfinished, bool& quoted)
        {
            rests.clear();
            unfinished = quoted = false;
            std::vector<open_item> open;
            bool gap = false;
            return m_check && m_a->has_distinct() && inside_items(open) && all_risky(open, &rests, unfinished, &quoted, &gap);
        }
        /// The bytes read, one per position (a repeat() reads a 0 byte: walks
        /// that repeat() have the check off).
        const std::string& text() const noexcept { return m_text; }

        /// Reads one byte; false (and nothing changed) if no item can. If it
        /// throws (std::bad_alloc), the set it was building counts as read:
        /// pop() back to the position before undoes it.
        bool step(unsigned char b)
        {
            const grammar_automaton& a = *m_a;
            const std::uint32_t from = m_sets.back();
            const auto to = std::uint32_t(m_items.size());
            m_sets.push_back(to);
            m_popped.push_back(0);
            m_text.push_back(char(b));
            for (std::uint32_t i = from; i < to; ++i)
            {
                const earley_item x = m_items[i];
                if (!can_read(x))
                {
                    continue;
                }
                const std::int32_t t = a.next(x.state, b);
                std::uint32_t count = x.count;
                if (t >= 0 && a.counts(x.state, std::uint32_t(t), count))
                {
                    add({std::uint32_t(t), x.origin, count});
                }
            }
            if (m_items.size() == to)
            {
                m_sets.pop_back();
                m_popped.pop_back();
                m_text.pop_back();
                return false;
            }
            m_dropped = false;
            closure();
            if (m_dropped && !live())  // (the parses that go on read an item equal to an earlier one)
            {
                pop(1);
                return false;
            }
            if (m_check && !m_searching && m_a->has_distinct() && !new_value_left())
            {
                pop(1);
                return false;
            }
            return true;
        }
        /// Reads a byte the caller knows leaves the set as it is (a walk that
        /// saw it once, inside a name or a number): a new set of the current
        /// one's items, those begun in it now begun in the new one. Then
        /// whatever follows is what follows the current set.
        void repeat()
        {
            const auto k = std::uint32_t(position());
            const std::uint32_t from = m_sets.back(), to = std::uint32_t(m_items.size());
            m_sets.push_back(to);
            m_popped.push_back(m_popped.back());
            m_text.push_back('\0');
            for (std::uint32_t i = from; i < to; ++i)
            {
                earley_item x = m_items[i];
                x.origin = x.origin == k ? k + 1 : x.origin;
                m_items.push_back(x);
            }
        }
        std::size_t feed(std::string_view bytes)
        {
            std::size_t n = 0;
            for (const char c : bytes)
            {
                if (!step(static_cast<unsigned char>(c)))
                {
                    break;
                }
                ++n;
            }
            return n;
        }
        void pop(std::size_t n = 1)
        {
            if (n > position())
            {
                throw invalid_parameter("matcher::pop: " + std::to_string(n) + " bytes, only " +
                                        std::to_string(position()) + " read");
            }
            if (n == 0)
            {
                return;
            }
            const std::size_t sets = m_sets.size() - n;
            m_items.resize(m_sets[sets]);
            forget_hash();
            m_sets.resize(sets);
            m_popped.resize(sets);
            m_bytes.ready = std::min(m_bytes.ready, sets);
            m_tokens.ready = std::min(m_tokens.ready, sets);
            m_text.resize(std::min(m_text.size(), position()));
            if (!m_seen.empty())
            {
                forget_seen_after(position());
            }
            m_content.back_to(std::uint32_t(position()));
            if (m_climbs.size() > position() + 1)
            {
                m_climbs.resize(position() + 1);
            }
        }
        /// Bytes read.
        std::size_t position() const noexcept { return m_sets.size() - 1; }

        bool complete() const noexcept
        {
            const std::uint32_t root = m_a->root;
            for (std::uint32_t i = m_sets.back(); i < m_items.size(); ++i)
            {
                const earley_item& x = m_items[i];
                if (x.origin == 0 && m_a->states[x.state].rule == root && completes(x))
                {
                    return true;
                }
            }
            return false;
        }
        /// Whether a `context` item (start_from()) completed in the current set.
        bool popped() const noexcept { return m_popped.back() != 0; }

        /// The current set's items.
        const earley_item* begin() const noexcept { return m_items.data() + m_sets.back(); }
        const earley_item* end() const noexcept { return m_items.data() + m_items.size(); }
        std::size_t items() const noexcept { return m_items.size() - m_sets.back(); }
        /// Items of set k (k <= position()).
        const earley_item* set_begin(std::size_t k) const noexcept { return m_items.data() + m_sets[k]; }
        const earley_item* set_end(std::size_t k) const noexcept
        {
            return m_items.data() + (k + 1 < m_sets.size() ? m_sets[k + 1] : m_items.size());
        }

        /// The current set's kernel: its items that began before this byte
        /// (at the start, the root's first item). With the automaton's
        /// positions alone they determine the set.
        template <class F>
        void for_each_kernel(F&& f) const
        {
            const std::size_t k = position();
            for (const earley_item* x = begin(); x != end(); ++x)
            {
                if (x->origin < k || is_context(x->origin) || (k == 0 && x == begin()))
                {
                    f(*x);
                }
            }
        }

        /// Whether item x completes its rule here.
        bool completes(const earley_item& x) const noexcept { return completes(*m_a, x); }
        static bool completes(const grammar_automaton& a, const earley_item& x) noexcept
        {
            const auto& st = a.states[x.state];
            const auto& r = a.rules[st.rule];
            if (r.units)
            {
                return r.units->ends(x.state - r.start, x.count);
            }
            if (!r.counted)
            {
                return st.accepting;
            }
            return x.state == r.start && x.count >= r.min;
        }
        /// Whether item x, begun outside the chart (start_from()), ends here
        /// and what follows is the context's: a "pop" (not the root's end
        /// when no rule reads the root: that only ends the text).
        static bool pops(const grammar_automaton& a, const earley_item& x) noexcept
        {
            return is_context(x.origin) && completes(a, x) && !a.ends_text_only(x.state);
        }
        /// Whether item x may read further (a counted rule at its start with
        /// max iterations done may not).
        bool can_read(const earley_item& x) const noexcept { return can_read(*m_a, x); }
        static bool can_read(const grammar_automaton& a, const earley_item& x) noexcept
        {
            const auto& st = a.states[x.state];
            const auto& r = a.rules[st.rule];
            return !r.counted || x.state != r.start || r.max == grammar::unbounded || x.count < r.max;
        }

        /// The length of the shortest completion (the cost of the cheapest item's way out).
        std::uint64_t shortest()
        {
            std::uint64_t best = grammar_automaton::infinite;
            const std::size_t k = position();
            for (std::uint32_t i = m_sets[k]; i < m_items.size(); ++i)
            {
                best = std::min(best, cost(m_items[i]));
            }
            return best;
        }
        /// The shortest completion, least in byte order among the shortest:
        /// from each set the least byte that brings shortest() one closer.
        /// Where a distinct item would repeat an earlier one no byte does
        /// (the item's end is refused, and shortest(), the grammar's, is
        /// then only a lower bound): from there a search by iterative
        /// deepening, bytes in order, a way whose length plus shortest()
        /// exceeds the bound cut off: from there the shortest way on, least
        /// in byte order (`["",` completes with `" "]`; an object item that
        /// would repeat one goes on with another member), of the bytes that
        /// leave the same set the first few (search_completion). A text no byte continues, or none found
        /// within max_completion_search steps (a distinct mark over items
        /// that run out of values), is invalid_parameter.
        std::string completion()
        {
            const std::size_t start = position();
            std::string out;
            try
            {
                const std::uint64_t first = shortest();
                for (std::uint64_t left = first; left != grammar_automaton::infinite && !complete();)
                {
                    if (out.size() >= first + max_completion_detour)
                    {
                        throw invalid_parameter("matcher::completion: none within " + std::to_string(out.size()) +
                                                " bytes (distinct items with no new value left)");
                    }
                    const auto [best, least] = closest(left);
                    if (best < 0)
                    {
                        throw invalid_parameter("matcher::completion: no byte continues the text (distinct items with "
                                                "no new value left)");
                    }
                    if (least + 1 != left)
                    {
                        // a detour: the shortest way past the end of the innermost item open here
                        std::vector<open_item> open;
                        inside_items(open);
                        std::uint32_t item = none_open;
                        for (const open_item& i : open)
                        {
                            item = item == none_open ? i.origin : std::max(item, i.origin);
                        }
                        std::size_t budget = max_completion_search;
                        std::string rest;
                        for (std::uint64_t bound = left; !search_completion(bound, rest, budget, item); ++bound)
                        {
                            if (budget == 0)
                            {
                                throw invalid_parameter("matcher::completion: none within " +
                                                        std::to_string(max_completion_search) +
                                                        " steps of search (distinct items with no new value left)");
                            }
                        }
                        for (const char c : rest)
                        {
                            step(static_cast<unsigned char>(c));
                        }
                        out += rest;
                        left = shortest();
                        continue;
                    }
                    step(static_cast<unsigned char>(best));
                    out += char(best);
                    left = least;
                }
            }
            catch (...)
            {
                pop(position() - start);
                throw;
            }
            pop(position() - start);
            return out;
        }
        static constexpr std::size_t max_completion_search = std::size_t(1) << 20;
        static constexpr std::uint64_t max_completion_detour = 1 << 20;
        static constexpr std::uint32_t none_open = ~std::uint32_t(0);

        /// completion()'s search: whether some way on (`out`) is read with
        /// the checks on that ends the distinct item begun at `item` (or
        /// completes the text), within `bound` bytes with shortest() after
        /// it; the least such, in byte order, appended to out. Of the bytes that
        /// leave the same set of items (the grammar's future alike: only the
        /// marks' checks may tell them apart) the first max_tried_alike are
        /// tried, one whitespace byte among them.
        static constexpr unsigned max_tried_alike = 4;
        bool search_completion(std::uint64_t bound, std::string& out, std::size_t& budget, std::uint32_t item)
        {
            const std::uint64_t rest = shortest();
            if (rest == grammar_automaton::infinite || out.size() + rest > bound)
            {
                return false;
            }
            if (complete() || (item != none_open && ends_here(item)))
            {
                return true;  // (within the bound: an item ended past it is found at a later one)
            }
            // bytes that leave the same set differ in the text alone: of each such class a few are tried
            // (those of an item that would repeat, one whitespace byte)
            struct tried
            {
                std::vector<earley_item> set;
                unsigned bytes, spaces;
            };
            std::vector<tried> classes;
            for (unsigned b = 0; b < 256 && budget != 0; ++b)
            {
                const auto c = static_cast<unsigned char>(b);
                if (!readable(c))
                {
                    continue;
                }
                --budget;
                if (!step(c))
                {
                    continue;
                }
                const bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r';
                auto it = std::find_if(classes.begin(), classes.end(), [&](const tried& t) {
                    return t.set.size() == items() && std::equal(t.set.begin(), t.set.end(), begin());
                });
                if (it == classes.end())
                {
                    classes.push_back({std::vector<earley_item>(begin(), end()), 0, 0});
                    it = classes.end() - 1;
                }
                if (it->bytes == max_tried_alike || (space && it->spaces != 0))
                {
                    pop();
                    continue;
                }
                ++it->bytes;
                it->spaces += space ? 1 : 0;
                out += char(c);
                const bool found = search_completion(bound, out, budget, item);
                pop();
                if (found)
                {
                    return true;
                }
                out.pop_back();
            }
            return false;
        }

        /// The bytes that may come first once the rule of one of the current
        /// set's kernel items has ended, whenever it ends: those the items
        /// waiting for it at its origin read once moved past it (with what
        /// they predict, and what ends with them). Bytes a text may hold after
        /// such an end, so a token none of whose later bytes is here cannot go
        /// on past one.
        std::array<bool, 256> after_kernel()
        {
            const grammar_automaton& a = *m_a;
            std::array<bool, 256> out{};
            struct unchecked  // (the sets made here read no byte: nothing to check against)
            {
                matcher& m;
                bool was;
                ~unchecked() { m.m_check = was; }
            } guard{*this, m_check};
            m_check = false;
            std::vector<earley_item> kernel;
            for_each_kernel([&](const earley_item& x) { kernel.push_back(x); });
            std::vector<std::pair<std::uint32_t, std::uint32_t>> seen;  // (rule, origin)
            for (const earley_item& x : kernel)
            {
                const std::uint32_t rule = a.states[x.state].rule;
                if (is_context(x.origin) ||
                    std::find(seen.begin(), seen.end(), std::make_pair(rule, x.origin)) != seen.end())
                {
                    continue;
                }
                seen.emplace_back(rule, x.origin);
                // a set as the one the rule's end would make (its position one on)
                const std::size_t before = position();
                try
                {
                    m_sets.push_back(std::uint32_t(m_items.size()));
                    m_popped.push_back(0);
                    read_after(rule, x.origin, out);
                }
                catch (...)
                {
                    pop(position() - before);  // (out of memory: the text as it was)
                    throw;
                }
                pop(1);
            }
            return out;
        }

    private:
        static std::shared_ptr<const grammar_automaton> checked(std::shared_ptr<const grammar_automaton> a)
        {
            if (!a)
            {
                throw invalid_parameter("matcher: no grammar");
            }
            return a;
        }
        /// after_kernel()'s set for `rule` begun at set o, on top: its items
        /// and closure, and the bytes they read into `out`.
        void read_after(std::uint32_t rule, std::uint32_t o, std::array<bool, 256>& out)
        {
            const grammar_automaton& a = *m_a;
            moved_past(rule, o);
            closure();
            for (const earley_item* y = begin(); y != end(); ++y)
            {
                if (can_read(*y))
                {
                    a.add_bytes(y->state, out);
                }
            }
        }

    public:
        /// The grammar rules of the current set's kernel items (innermost
        /// first), for messages.
        std::vector<std::string> rules_here() const
        {
            std::vector<std::string> out;
            for_each_kernel([&](const earley_item& x) {
                const std::string& n = m_a->source_names[m_a->states[x.state].source];
                if (std::find(out.begin(), out.end(), n) == out.end())
                {
                    out.push_back(n);
                }
            });
            return out;
        }

        /// An item's cost to finish the text: the rest of its rule, then the
        /// cheapest way out of the rule it returns to (a `context` origin
        /// costs nothing more: the cost to pop). In bytes.
        std::uint64_t cost(const earley_item& x) { return cost(x, m_bytes, byte_costs{m_a.get()}); }

        /// The same in a cost model's units: model.rest(state, count) is
        /// what finishing a state's rule costs (token_costs: in tokens).
        /// One model per matcher: its costs are cached by set.
        template <class Model>
        std::uint64_t cost(const earley_item& x, const Model& model)
        {
            return cost(x, m_tokens, model);
        }
        /// The cheapest item's cost in a model's units.
        template <class Model>
        std::uint64_t cheapest(const Model& model)
        {
            std::uint64_t best = grammar_automaton::infinite;
            for (std::uint32_t i = m_sets.back(); i < m_items.size(); ++i)
            {
                best = std::min(best, cost(m_items[i], m_tokens, model));
            }
            return best;
        }

        /// The item that reading a rule edge's target leaves: a counted rule's
        /// item at the end of an iteration is the next one's start (or none:
        /// max iterations done).
        bool advanced(earley_item& t) const noexcept
        {
            const auto& ts = m_a->states[t.state];
            const auto& tr = m_a->rules[ts.rule];
            if (tr.counted && ts.accepting)
            {
                if (tr.max != grammar::unbounded && t.count >= tr.max)
                {
                    return false;
                }
                t.state = tr.start;
                t.count = tr.max == grammar::unbounded ? std::min<std::uint32_t>(t.count + 1, std::uint32_t(tr.min))
                                                       : t.count + 1;
            }
            return true;
        }

    private:
        /// Of the bytes that continue the text, the least one that leaves
        /// shortest() least (-1: none), and that least; the scan stops at a
        /// byte that leaves it one below `left` (none does better).
        std::pair<int, std::uint64_t> closest(std::uint64_t left)
        {
            int best = -1;
            std::uint64_t least = grammar_automaton::infinite;
            for (unsigned b = 0; b < 256; ++b)
            {
                const auto c = static_cast<unsigned char>(b);
                if (!readable(c) || !step(c))
                {
                    continue;
                }
                const std::uint64_t rest = shortest();
                pop();
                if (rest < least)
                {
                    best = int(b);
                    least = rest;
                }
                if (rest + 1 == left)
                {
                    break;
                }
            }
            return {best, least};
        }
        bool readable(unsigned char b) const noexcept
        {
            for (const earley_item* x = begin(); x != end(); ++x)
            {
                if (can_read(*x) && m_a->next(x->state, b) >= 0)
                {
                    return true;
                }
            }
            return false;
        }

        /// Adds x to the current set unless it is there; a counted rule's
        /// item at the end of an iteration becomes the next iteration's start.
        void add(earley_item x)
        {
            const grammar_automaton& a = *m_a;
            const auto& st = a.states[x.state];
            const auto& r = a.rules[st.rule];
            if (r.counted && st.accepting && st.reads)
            {
                insert(x);  // the iteration may go on
            }
            if (advanced(x))
            {
                insert(x);
            }
        }
        /// Adds x to the current set unless it is there: a scan while the set
        /// is small, a hash of its items once it is large (a wide grammar's
        /// set holds thousands).
        void insert(const earley_item& x)
        {
            const std::size_t begin = m_sets.back(), n = m_items.size() - begin;
            if (n < hashed_from)
            {
                for (std::size_t i = begin; i < m_items.size(); ++i)
                {
                    if (m_items[i] == x)
                    {
                        return;
                    }
                }
                m_items.push_back(x);
                return;
            }
            if (m_hashed_begin != begin)
            {
                m_hashed.clear();
                m_hashed_begin = begin;
                m_hashed_n = 0;
            }
            for (; m_hashed_n < n; ++m_hashed_n)
            {
                m_hashed.insert(m_items[begin + m_hashed_n]);
            }
            if (m_hashed.find(x) != m_hashed.end())
            {
                return;
            }
            m_items.push_back(x);
            try
            {
                m_hashed.insert(x);
                ++m_hashed_n;
            }
            catch (...)
            {
                m_items.pop_back();  // the set as the hash knows it
                throw;
            }
        }
        /// After the items shrink: the hash indexes a set that may be gone.
        void forget_hash() noexcept { m_hashed_begin = ~std::size_t(0); }

        /// Predictions and completions until the current set is closed.
        void closure()
        {
            const grammar_automaton& a = *m_a;
            const auto k = std::uint32_t(position());
            for (std::uint32_t i = m_sets.back(); i < m_items.size(); ++i)
            {
                const earley_item x = m_items[i];
                const auto& st = a.states[x.state];
                if (can_read(x))
                {
                    for (std::uint32_t e = st.edges_begin; e < st.edges_end; ++e)
                    {
                        const auto& ed = a.edges[e];
                        const auto& r = a.rules[ed.rule];
                        add({r.start, k, 0});
                        if (r.nullable)
                        {
                            add({ed.target, x.origin, x.count});
                        }
                    }
                }
                if (!completes(x) || x.origin == k)
                {
                    continue;  // a rule that began here and ends here is nullable: done by prediction
                }
                if (is_context(x.origin))
                {
                    m_popped.back() = std::uint8_t(m_popped.back() | std::uint8_t(pops(a, x)));
                    continue;
                }
                moved_past(st.rule, x.origin);
            }
        }
        /// Adds to the current set the items of set o (before it) waiting for
        /// `rule`, moved past it: the rule begun at o has ended here. A
        /// distinct item (checked) moves no item of an array with an equal
        /// earlier item.
        void moved_past(std::uint32_t rule, std::uint32_t o)
        {
            const grammar_automaton& a = *m_a;
            const bool check = m_check && a.rules[rule].distinct_item;
            std::string item;  // its key, once a waiting item needs it
            const std::uint32_t from = m_sets[o], to = m_sets[o + 1];
            for (std::uint32_t j = from; j < to; ++j)
            {
                const earley_item y = m_items[j];
                if (!can_read(y))
                {
                    continue;
                }
                const auto& ys = a.states[y.state];
                for (std::uint32_t e = ys.edges_begin; e < ys.edges_end; ++e)
                {
                    if (a.edges[e].rule != rule)
                    {
                        continue;
                    }
                    if (check && repeated(y, o, item))
                    {
                        m_dropped = true;
                        continue;
                    }
                    add({a.edges[e].target, y.origin, y.count});
                }
            }
        }

        /// Whether the item that began at o and ends here equals an earlier
        /// item of the array y reads it in (`item`: its key, made on first use).
        bool repeated(const earley_item& y, std::uint32_t o, std::string& item)
        {
            if (item.empty())
            {
                const std::string_view t(m_text);
                const std::size_t end = detail::json_canonical::canonical(t.substr(0, position()), o, item);
                if (end != position())
                {
                    return true;  // (no JSON value: unreachable for a grammar as distinct() asks)
                }
            }
            bool found = false;
            arrays_of(y, [&](std::uint32_t start) { found = found || seen_in(start, o, item); });
            return found;
        }
        /// f(start) for the start of each array or object (a distinct mark's)
        /// whose item item y waits for: y's own rule's, or up the chart
        /// through the rules that read it (an array's body repeated, an
        /// object's members) to the first marked one. A chain of rules each
        /// read by one (set, rule) alone (an object's members, one rule each)
        /// is followed with its starts remembered per set (m_climbs, kept
        /// while the set is); where several read one, each (set, rule) is
        /// looked at once.
        template <class F>
        void arrays_of(const earley_item& y, F&& f)
        {
            const grammar_automaton& a = *m_a;
            using at_rule = std::pair<std::uint32_t, std::uint32_t>;  // (set, rule)
            std::vector<at_rule> chain, parents;
            std::vector<std::uint32_t> starts;
            const auto parents_of = [&](const at_rule& at, std::vector<at_rule>& out) {
                out.clear();
                for (const earley_item* z = set_begin(at.first); z != set_end(at.first); ++z)
                {
                    const auto& zs = a.states[z->state];
                    for (std::uint32_t e = zs.edges_begin; can_read(*z) && e < zs.edges_end; ++e)
                    {
                        if (a.edges[e].rule == at.second)
                        {
                            if (std::find(out.begin(), out.end(), at_rule{z->origin, zs.rule}) == out.end())
                            {
                                out.emplace_back(z->origin, zs.rule);
                            }
                            break;
                        }
                    }
                }
            };
            at_rule at{y.origin, a.states[y.state].rule};
            bool known = false;
            while (!known)
            {
                if (is_context(at.first))
                {
                    known = true;  // (begun before the chart: unchecked)
                }
                else if (a.rules[at.second].distinct_array)
                {
                    starts.push_back(at.first);
                    known = true;
                }
                else if (const std::vector<std::uint32_t>* memo = climbed(at))
                {
                    starts = *memo;
                    known = true;
                }
                else if (std::find(chain.begin(), chain.end(), at) != chain.end())
                {
                    break;  // (a loop within a set: looked at as a whole below)
                }
                else
                {
                    chain.push_back(at);
                    parents_of(at, parents);
                    known = parents.empty();
                    if (parents.size() != 1)
                    {
                        break;
                    }
                    at = parents.front();
                }
            }
            if (!known)  // (every rule up from the chain's last one, each (set, rule) once)
            {
                std::vector<at_rule> todo = parents, seen = chain, up;
                while (!todo.empty())
                {
                    const at_rule t = todo.back();
                    todo.pop_back();
                    if (is_context(t.first) || std::find(seen.begin(), seen.end(), t) != seen.end())
                    {
                        continue;
                    }
                    seen.push_back(t);
                    if (a.rules[t.second].distinct_array)
                    {
                        if (std::find(starts.begin(), starts.end(), t.first) == starts.end())
                        {
                            starts.push_back(t.first);
                        }
                        continue;
                    }
                    parents_of(t, up);
                    todo.insert(todo.end(), up.begin(), up.end());
                }
            }
            for (const at_rule& c : chain)
            {
                if (m_climbs.size() <= c.first)
                {
                    m_climbs.resize(std::size_t(c.first) + 1);
                }
                m_climbs[c.first].push_back({c.second, starts});
            }
            for (const std::uint32_t start : starts)
            {
                f(start);
            }
        }
        /// arrays_of()'s starts remembered from (set, rule), or null.
        const std::vector<std::uint32_t>* climbed(const std::pair<std::uint32_t, std::uint32_t>& at) const
        {
            if (at.first >= m_climbs.size())
            {
                return nullptr;
            }
            for (const auto& [rule, starts] : m_climbs[at.first])
            {
                if (rule == at.second)
                {
                    return &starts;
                }
            }
            return nullptr;
        }
        static constexpr unsigned max_array_depth = 8;

        /// The items of the array begun at `start` before position o, by key
        /// (once each); of an object, its members' keys (ends: the keys').
        struct array_items
        {
            std::uint32_t start = 0;
            std::vector<std::pair<std::uint32_t, std::string>> items;  // (end, key), in order
            std::unordered_multiset<std::string> keys;
            std::vector<std::pair<std::string, std::uint32_t>> strings;  // the string items' contents and ends, sorted
            std::uint32_t next = 0;  // (an object's: the end of its last key's value, once read)
        };
        /// The items of the array begun at `start` read up to o (those
        /// before o; the cache may hold later ones, read by a text since popped).
        array_items& items_before(std::uint32_t start, std::uint32_t o)
        {
            auto it = std::find_if(m_seen.begin(), m_seen.end(), [&](const array_items& s) { return s.start == start; });
            if (it == m_seen.end())
            {
                m_seen.emplace_back();
                m_seen.back().start = start;
                it = m_seen.end() - 1;
            }
            array_items& s = *it;
            const std::string_view t = std::string_view(m_text).substr(0, o);
            namespace jc = detail::json_canonical;
            const bool object = t[start] == '{';  // (an object's items: its members' keys)
            while (true)  // read the items after the last one read, up to o
            {
                std::size_t i = s.items.empty() ? start : s.items.back().first;
                if (object && !s.items.empty())  // (past the last key's value, skipped once)
                {
                    if (s.next <= i)
                    {
                        i = jc::skip_ws(t, i);
                        i = i < t.size() && t[i] == ':' ? jc::skip_value(t, jc::skip_ws(t, i + 1)) : jc::npos;
                        if (i == jc::npos)
                        {
                            break;
                        }
                        s.next = std::uint32_t(i);
                    }
                    i = s.next;
                }
                i = jc::skip_ws(t, i);
                if (i >= t.size() || t[i] != (s.items.empty() ? t[start] : ','))
                {
                    break;
                }
                i = jc::skip_ws(t, i + 1);
                if (i >= t.size())
                {
                    break;
                }
                std::string key;
                const std::size_t end = jc::canonical(t, i, key);
                if (end == jc::npos)
                {
                    break;  // (unreachable: see repeated())
                }
                s.keys.insert(key);
                if (key[0] == 's')
                {
                    std::pair<std::string, std::uint32_t> str{key.substr(key.find(':') + 1), std::uint32_t(end)};
                    s.strings.insert(std::upper_bound(s.strings.begin(), s.strings.end(), str), std::move(str));
                }
                s.items.emplace_back(std::uint32_t(end), std::move(key));
            }
            return s;
        }
        /// Whether the array begun at `start` has an item before o with key `item`.
        bool seen_in(std::uint32_t start, std::uint32_t o, const std::string& item)
        {
            const array_items& s = items_before(start, o);
            if (!s.items.empty() && s.items.back().first > o)  // (items read past o, by a text popped since)
            {
                return std::any_of(s.items.begin(), s.items.end(),
                                   [&](const auto& x) { return x.first <= o && x.second == item; });
            }
            return s.keys.count(item) != 0;
        }

        /// An item of a distinct mark the text is inside: where it began, and its array's start.
        struct open_item
        {
            std::uint32_t origin, start;
            bool closed;  // a closed object's item (grammar::distinct_closed)
        };
        /// Check B (string and integer items): false where every item of the
        /// current set is inside a distinct item that is a JSON string or
        /// integer and none of them can end as a value its array has not had
        /// yet, so every way on ends by repeating an earlier item. A string
        /// whose content so far begins no earlier item (decoded), or an
        /// integer of up to 5 digits, has a new completion, as any text the
        /// grammar reaches has one; otherwise a search byte by byte
        /// (check A on, B off) looks for such a point, or the item's end,
        /// trying the bytes in order, a quote and a backslash last (the
        /// first byte that reads mostly leaves every earlier item's path).
        /// Past max_search steps it gives up: false (a byte refused that
        /// might have gone on; never one that cannot).
        bool new_value_left()
        {
            m_searching = true;
            struct off
            {
                bool& on;
                ~off() { on = false; }
            } restore{m_searching};
            return new_value_here();
        }
        static constexpr std::size_t max_search = 1 << 16;
        static bool is_ws(unsigned char c) noexcept { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
        /// The search, depth first without recursion (a text may be long):
        /// per byte read, the next byte to try at that depth.
        bool new_value_here()
        {
            struct level
            {
                unsigned next;  // 0..255 without quote and backslash, then 256..511 those two
                bool gap;       // (between an object's tokens after a gap byte: no second one)
            };
            std::vector<level> path;
            // whether a new value is left from here; else a level to search from
            const auto open_here = [&] {
                bool unfinished = false, quoted = false, gap = false;
                m_open.clear();
                if (!inside_items(m_open) || !all_risky(m_open, nullptr, unfinished, &quoted, &gap))
                {
                    return true;
                }
                path.push_back({0, gap});
                return false;
            };
            std::size_t budget = max_search;
            if (open_here())
            {
                return true;
            }
            // (the bytes in order, a quote or a backslash last: most other bytes leave every earlier item's path)
            while (!path.empty())
            {
                level& l = path.back();
                bool stepped = false;
                while (!stepped && l.next < 512)
                {
                    const auto c = static_cast<unsigned char>(l.next % 256);
                    const bool second = l.next++ >= 256;
                    if ((c == '"' || c == '\\') != second || (l.gap && is_ws(c)) || !readable(c))
                    {
                        continue;
                    }
                    if (budget == 0)
                    {
                        pop(path.size() - 1);
                        return false;
                    }
                    --budget;
                    stepped = step(c);
                }
                if (!stepped)
                {
                    path.pop_back();
                    if (!path.empty())
                    {
                        pop(1);
                    }
                    continue;
                }
                if (open_here())
                {
                    pop(path.size());
                    return true;
                }
            }
            return false;
        }
        /// Whether a distinct item begun at o ends here and check A passes it
        /// (an integer's completion may be dropped while it reads on).
        bool ends_here(std::uint32_t o)
        {
            const grammar_automaton& a = *m_a;
            std::string item;  // (its key, made on first use)
            for (const earley_item* x = begin(); x != end(); ++x)
            {
                const std::uint32_t rule = a.states[x->state].rule;
                if (x->origin != o || !a.rules[rule].distinct_item || !completes(*x))
                {
                    continue;
                }
                for (const earley_item* y = set_begin(o); y != set_end(o); ++y)
                {
                    const auto& ys = a.states[y->state];
                    for (std::uint32_t e = ys.edges_begin; can_read(*y) && e < ys.edges_end; ++e)
                    {
                        if (a.edges[e].rule == rule && !repeated(*y, o, item))
                        {
                            return true;
                        }
                    }
                }
            }
            return false;
        }
        /// Whether every item of the current set is inside an item of a
        /// distinct mark begun before this byte (`open`: those items).
        bool inside_items(std::vector<open_item>& open)
        {
            const auto k = std::uint32_t(position());
            std::vector<std::pair<std::uint32_t, std::uint32_t>> inside_rules;  // (set, rule) known inside
            for (const earley_item* x = begin(); x != end(); ++x)
            {
                if (!inside(*x, k, 0, open, inside_rules))
                {
                    return false;
                }
            }
            return !open.empty();
        }
        /// Whether item x is inside an open distinct item: its
        /// rule is an item's, begun before position k, or every item that
        /// waits for its rule is inside one (up the chart, max_array_depth
        /// rules up at most).
        bool inside(const earley_item& x, std::uint32_t k, unsigned depth, std::vector<open_item>& open,
                    std::vector<std::pair<std::uint32_t, std::uint32_t>>& inside_rules)
        {
            const grammar_automaton& a = *m_a;
            const std::uint32_t rule = a.states[x.state].rule;
            if (is_context(x.origin) || depth == max_array_depth)
            {
                return false;
            }
            if (a.rules[rule].distinct_item)
            {
                if (x.origin >= k)
                {
                    return false;  // (not begun)
                }
                const bool known = std::any_of(open.begin(), open.end(), [&](const open_item& i) { return i.origin == x.origin; });
                for (const earley_item* y = set_begin(x.origin); !known && y != set_end(x.origin); ++y)
                {
                    const auto& ys = a.states[y->state];
                    for (std::uint32_t e = ys.edges_begin; can_read(*y) && e < ys.edges_end; ++e)
                    {
                        if (a.edges[e].rule == rule)
                        {
                            arrays_of(*y, [&](std::uint32_t start) { open.push_back({x.origin, start, a.rules[rule].distinct_closed}); });
                            break;
                        }
                    }
                }
                return true;
            }
            const std::pair<std::uint32_t, std::uint32_t> key{x.origin, rule};
            if (std::find(inside_rules.begin(), inside_rules.end(), key) != inside_rules.end())
            {
                return true;
            }
            bool waited = false;
            for (const earley_item* y = set_begin(x.origin); y != set_end(x.origin); ++y)
            {
                const auto& ys = a.states[y->state];
                for (std::uint32_t e = ys.edges_begin; can_read(*y) && e < ys.edges_end; ++e)
                {
                    if (a.edges[e].rule == rule)
                    {
                        if (!inside(*y, k, depth + 1, open, inside_rules))
                        {
                            return false;
                        }
                        waited = true;
                        break;
                    }
                }
            }
            if (waited)
            {
                inside_rules.push_back(key);
            }
            return waited;
        }
        /// Whether each open item (a string, an integer or a closed object
        /// begun) may still become an earlier item of its array: a string's
        /// content so far (decoded) begins one, or it ends inside an escape
        /// (`unfinished`); an integer has more than 5 digits, or is 0
        /// (json_schema's integers, of at most 15 digits: with fewer, more
        /// than 2^32 values complete it); a closed object's members so far
        /// agree with one's (object_may_repeat; `quoted` set, and `in_gap`
        /// where such an item ends in whitespace between tokens). `rests` gets
        /// the bytes of those earlier strings past that content. Other items
        /// are passed over (objects that always have a new completion:
        /// json_schema's renewing()); false where no item is checked.
        bool all_risky(const std::vector<open_item>& open, std::vector<std::string>* rests, bool& unfinished, bool* quoted,
                       bool* in_gap)
        {
            namespace jc = detail::json_canonical;
            const std::string_view t(m_text);
            const auto k = std::uint32_t(position());
            std::uint32_t decoded = ~std::uint32_t(0);
            bool pending = false, risky = true, checked = false;
            for (const open_item& i : open)
            {
                if (t[i.origin] == '{')
                {
                    if (i.closed)
                    {
                        checked = true;
                        bool gap = false;
                        const bool may = object_may_repeat(t.substr(i.origin, k - i.origin), items_before(i.start, i.origin), i.origin, gap);
                        risky = risky && may;
                        *quoted = *quoted || may;
                        *in_gap = *in_gap || (may && gap);
                    }
                    continue;
                }
                if (t[i.origin] == '-' || (t[i.origin] >= '0' && t[i.origin] <= '9'))
                {
                    const std::uint32_t sign = t[i.origin] == '-' ? 1 : 0;
                    const std::string_view digits = t.substr(i.origin + sign, k - i.origin - sign);
                    checked = true;
                    risky = risky && !digits.empty() && (digits.size() > 5 || digits[0] == '0');
                    continue;
                }
                if (t[i.origin] != '"')
                {
                    continue;
                }
                checked = true;
                if (i.origin != decoded)
                {
                    if (!decoded_to(i.origin, k))
                    {
                        return false;  // (unreachable: an item inside the chart is well formed, and unfinished)
                    }
                    decoded = i.origin;
                    pending = m_content.stop < k;
                    unfinished = unfinished || pending;
                }
                const std::string& content = m_content.decoded;
                bool begins = pending;
                const array_items& s = items_before(i.start, i.origin);
                // (the earlier strings that content begins: a run of the sorted ones)
                for (auto it = std::lower_bound(s.strings.begin(), s.strings.end(), std::make_pair(content, std::uint32_t(0)));
                     it != s.strings.end() && std::string_view(it->first).substr(0, content.size()) == content; ++it)
                {
                    if (it->second > i.origin)
                    {
                        continue;
                    }
                    begins = true;
                    if (rests == nullptr)
                    {
                        break;  // (risky: no rests asked for)
                    }
                    rests->emplace_back(std::string_view(it->first).substr(content.size()));
                }
                risky = risky && begins;
            }
            return checked && risky;
        }
        /// The content of the string item begun at `origin` decoded up to
        /// position k (m_content: its text, from where the last call left
        /// off, or from an earlier stop after a pop); false where it is not an
        /// unfinished string (an invalid escape, or its closing quote).
        bool decoded_to(std::uint32_t origin, std::uint32_t k)
        {
            namespace jc = detail::json_canonical;
            m_content.back_to(k);
            if (m_content.origin != origin)
            {
                m_content = {origin, origin + 1, {}, {}};
            }
            const std::size_t before = m_content.decoded.size();
            const std::size_t stop = jc::decode_chars(std::string_view(m_text).substr(0, k), m_content.stop, m_content.decoded);
            if (stop == jc::npos || (stop < k && m_text[stop] == '"'))
            {
                m_content = {};
                return false;
            }
            if (stop != m_content.stop)
            {
                m_content.marks.emplace_back(m_content.stop, before);
                m_content.stop = std::uint32_t(stop);
            }
            return true;
        }
        /// Whether the object begun in `text` (its bytes so far) may still
        /// become an earlier item of `s` (those ending by `origin`): one has
        /// every member it has completed, with the same value, and the
        /// member it writes (a name that begins one of its names; that name,
        /// or a string value it begins, as decoded; another value begun).
        /// True where a name is written twice (the last one counts). `gap`:
        /// whether the text ends in whitespace between its tokens.
        bool object_may_repeat(std::string_view text, const array_items& s, std::uint32_t origin, bool& gap)
        {
            namespace jc = detail::json_canonical;
            bool twice = false;
            std::vector<std::pair<std::string, std::string>> done;  // (name, value's key)
            std::string name, value;
            enum { between, in_name, after_name, in_string, in_other } at = between;
            std::size_t i = jc::skip_ws(text, 1);
            while (i < text.size())
            {
                if (text[i] == ',')
                {
                    i = jc::skip_ws(text, i + 1);
                    continue;
                }
                name.clear();
                const std::size_t name_end = text[i] == '"' ? jc::decode_chars(text, i + 1, name) : jc::npos;
                if (name_end == jc::npos || name_end >= text.size() || text[name_end] != '"')
                {
                    at = in_name;  // (or an escape begun in it: its decoded part)
                    break;
                }
                at = after_name;
                i = jc::skip_ws(text, name_end + 1);
                if (i < text.size() && text[i] == ':')
                {
                    i = jc::skip_ws(text, i + 1);
                }
                if (i >= text.size())
                {
                    break;
                }
                value.clear();
                if (text[i] == '"')
                {
                    std::string content;
                    const std::size_t end = jc::decode_chars(text, i + 1, content);
                    if (end == jc::npos || end >= text.size() || text[end] != '"')
                    {
                        at = end == jc::npos || end < text.size() ? in_other : in_string;  // (an escape begun: any)
                        value = std::move(content);
                        break;
                    }
                    jc::put_string(content, value);
                    i = end + 1;
                }
                else
                {
                    const std::size_t end = jc::canonical(text, i, value);
                    if (end == jc::npos || end >= text.size())
                    {
                        at = in_other;  // (a number may read on)
                        break;
                    }
                    i = end;
                }
                twice = twice || std::any_of(done.begin(), done.end(), [&](const auto& m) { return m.first == name; });
                done.emplace_back(std::move(name), std::move(value));
                at = between;
                i = jc::skip_ws(text, i);
            }
            gap = (at == between || at == after_name) && is_ws(static_cast<unsigned char>(text.back()));
            if (twice)
            {
                return true;
            }
            std::vector<std::pair<std::string_view, std::string_view>> members;
            const auto find = [&](std::string_view n) {
                const auto it = std::find_if(members.begin(), members.end(), [&](const auto& m) { return m.first == n; });
                return it == members.end() ? nullptr : &it->second;
            };
            for (const auto& [end, key] : s.items)
            {
                if (end > origin || !jc::members_of(key, members))
                {
                    continue;
                }
                const bool agree = std::all_of(done.begin(), done.end(), [&](const auto& m) {
                    const std::string_view* v = find(m.first);
                    return v != nullptr && *v == m.second;
                });
                if (!agree)
                {
                    continue;
                }
                const std::string_view* v = at == between || at == in_name ? nullptr : find(name);
                switch (at)
                {
                case between:
                    return true;
                case in_name:
                    if (std::any_of(members.begin(), members.end(), [&](const auto& m) { return m.first.substr(0, name.size()) == name; }))
                    {
                        return true;
                    }
                    break;
                case after_name:
                case in_other:
                    if (v != nullptr)
                    {
                        return true;
                    }
                    break;
                case in_string:
                    // (a string's key: 's', its length, ':', its bytes)
                    if (v != nullptr && !v->empty() && (*v)[0] == 's' &&
                        v->substr(v->find(':') + 1).substr(0, value.size()) == value)
                    {
                        return true;
                    }
                    break;
                }
            }
            return false;
        }
        /// After pop(): the items read that end past position k forgotten.
        void forget_seen_after(std::size_t k)
        {
            for (std::size_t i = m_seen.size(); i-- > 0;)
            {
                array_items& s = m_seen[i];
                if (s.start >= k)
                {
                    m_seen.erase(m_seen.begin() + std::ptrdiff_t(i));
                    continue;
                }
                bool popped = false;
                s.next = s.next > k ? 0 : s.next;
                while (!s.items.empty() && s.items.back().first > k)
                {
                    s.keys.erase(s.keys.find(s.items.back().second));
                    s.items.pop_back();
                    popped = true;
                }
                if (popped)
                {
                    s.strings.erase(std::remove_if(s.strings.begin(), s.strings.end(), [&](const auto& x) { return x.second > k; }),
                                    s.strings.end());
                }
            }
        }
        /// Whether the current set goes on: the text is complete, or some item
        /// reads a byte (or pops, begun outside the chart).
        bool live() const noexcept
        {
            const grammar_automaton& a = *m_a;
            if (complete() || popped())
            {
                return true;
            }
            for (const earley_item* x = begin(); x != end(); ++x)
            {
                if (!can_read(*x))
                {
                    continue;
                }
                for (std::uint32_t c = 0; c < a.classes; ++c)
                {
                    if (a.table[std::size_t(x->state) * a.classes + c] >= 0)
                    {
                        return true;
                    }
                }
            }
            return false;
        }

        struct byte_costs
        {
            const grammar_automaton* a;
            std::uint64_t rest(std::uint32_t state, std::uint32_t count) const noexcept { return a->rest(state, count); }
        };
        struct set_costs
        {
            std::vector<std::pair<std::uint32_t, std::uint64_t>> by_rule;
        };
        struct cost_cache
        {
            std::vector<set_costs> sets;  // way_out() by set, for sets [0, ready)
            std::size_t ready = 0;
        };

        template <class Model>
        std::uint64_t cost(const earley_item& x, cost_cache& cache, const Model& model)
        {
            const std::uint64_t here = model.rest(x.state, x.count);
            if (is_context(x.origin))
            {
                return here;
            }
            return grammar_automaton::saturated_add(here, way_out(m_a->states[x.state].rule, x.origin, cache, model));
        }

        /// The cheapest way out of `rule` begun at set o: what the items of
        /// set o waiting for it cost once it is read (0 for the root at 0).
        template <class Model>
        std::uint64_t way_out(std::uint32_t rule, std::uint32_t o, cost_cache& cache, const Model& model)
        {
            // sets in order: a set's costs need only those of the sets before it
            if (cache.sets.size() <= o)
            {
                cache.sets.resize(std::size_t(o) + 1);
            }
            while (cache.ready <= o)
            {
                compute_costs(std::uint32_t(cache.ready++), cache, model);
            }
            return lookup(rule, cache.sets[o]);
        }
        static std::uint64_t lookup(std::uint32_t rule, const set_costs& c) noexcept
        {
            for (const auto& [r, v] : c.by_rule)
            {
                if (r == rule)
                {
                    return v;
                }
            }
            return grammar_automaton::infinite;
        }
        template <class Model>
        void compute_costs(std::uint32_t o, cost_cache& cache, const Model& model)
        {
            const grammar_automaton& a = *m_a;
            auto& by_rule = cache.sets[o].by_rule;
            by_rule.clear();
            if (o == 0)
            {
                by_rule.push_back({a.root, 0});
            }
            const auto get = [&](std::uint32_t r) -> std::uint64_t& {
                for (auto& p : by_rule)
                {
                    if (p.first == r)
                    {
                        return p.second;
                    }
                }
                by_rule.push_back({r, grammar_automaton::infinite});
                return by_rule.back().second;
            };
            // relax until stable: items begun here wait on costs of this same set
            const std::uint32_t last = o + 1 < m_sets.size() ? m_sets[o + 1] : std::uint32_t(m_items.size());
            for (bool changed = true; changed;)
            {
                changed = false;
                for (std::uint32_t j = m_sets[o]; j < last; ++j)
                {
                    const earley_item y = m_items[j];
                    if (!can_read(y))
                    {
                        continue;
                    }
                    const auto& ys = a.states[y.state];
                    if (ys.edges_begin == ys.edges_end)
                    {
                        continue;
                    }
                    std::uint64_t out;  // y's own way out
                    if (is_context(y.origin))
                    {
                        out = 0;
                    }
                    else if (y.origin == o)
                    {
                        out = get(ys.rule);
                    }
                    else
                    {
                        out = lookup(ys.rule, cache.sets[y.origin]);  // an earlier set: done
                    }
                    if (out == grammar_automaton::infinite)
                    {
                        continue;
                    }
                    for (std::uint32_t e = ys.edges_begin; e < ys.edges_end; ++e)
                    {
                        earley_item t{a.edges[e].target, y.origin, y.count};
                        if (!advanced(t))
                        {
                            continue;
                        }
                        const std::uint64_t c = grammar_automaton::saturated_add(model.rest(t.state, t.count), out);
                        std::uint64_t& slot = get(a.edges[e].rule);
                        if (c < slot)
                        {
                            slot = c;
                            changed = true;
                        }
                    }
                }
            }
        }

        std::shared_ptr<const grammar_automaton> m_a;
        std::vector<earley_item> m_items;
        struct item_hash
        {
            std::size_t operator()(const earley_item& x) const noexcept
            {
                std::uint64_t h = (std::uint64_t(x.state) << 32 | x.origin) * 0x9E3779B97F4A7C15ull;
                return std::size_t((h ^ (h >> 29)) + x.count * 0xBF58476D1CE4E5B9ull);
            }
        };
        static constexpr std::size_t hashed_from = 256;
        std::unordered_set<earley_item, item_hash> m_hashed;  // the current set's items, once it is large
        std::size_t m_hashed_begin = ~std::size_t(0), m_hashed_n = 0;
        std::vector<std::uint32_t> m_sets;    // set k is m_items[m_sets[k], m_sets[k + 1])
        std::vector<std::uint8_t> m_popped;   // set k saw a context item complete
        cost_cache m_bytes, m_tokens;         // cost(): in bytes, and in the model's units
        std::string m_text;                   // the bytes read
        bool m_check = true;                  // check_distinct()
        bool m_dropped = false;               // a check dropped a parse in the set being closed
        bool m_searching = false;             // check B's search is stepping (B off)
        std::vector<open_item> m_open;        // new_value_here's scratch
        std::vector<array_items> m_seen;      // distinct arrays' earlier items, by the array's start
        // arrays_of()'s chains: by set, (rule, the starts of the arrays up from it)
        std::vector<std::vector<std::pair<std::uint32_t, std::vector<std::uint32_t>>>> m_climbs;
        struct decoded_content
        {
            std::uint32_t origin = ~std::uint32_t(0), stop = 0;  // (stop: where decoding goes on)
            std::string decoded;
            std::vector<std::pair<std::uint32_t, std::size_t>> marks;  // (an earlier stop, the decoded size there)
            /// Back to what was decoded by position k (after a pop).
            void back_to(std::uint32_t k)
            {
                while (stop > k && !marks.empty())
                {
                    stop = marks.back().first;
                    decoded.resize(marks.back().second);
                    marks.pop_back();
                }
                if (stop > k)
                {
                    *this = {};
                }
            }
        } m_content;                          // decoded_to()'s string item
    };
}

#endif
