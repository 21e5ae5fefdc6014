// xsampler/detail/matcher_chart.hpp — the matcher's Earley chart: items, sets, a byte read, rollback. (xsampler, BSD-3-Clause)
//
// earley_item and class matcher (matcher.hpp states the contract): the chart
// as one vector of items and the start of each set, reset() / start_from(),
// step(b) (scan, then closure: prediction, completion with Aycock and
// Horspool's nullable rule, a counted rule's next iteration), repeat(),
// feed(), pop(n), complete(), the current set's kernel. The members that
// finish the text (completion, after_kernel, costs) are defined in
// matcher_completion.hpp, grammar::distinct's checks in matcher_distinct.hpp;
// include matcher.hpp, which includes all three.
#ifndef XSAMPLER_DETAIL_MATCHER_CHART_HPP
#define XSAMPLER_DETAIL_MATCHER_CHART_HPP

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "automaton_type.hpp"
#include "../grammar.hpp"

namespace xsampler
{
    using grammar_automaton = detail::automaton;

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
        bool distinct_rests(std::vector<std::string>& rests, bool& unfinished, bool& quoted);
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
        std::uint64_t shortest();
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
        std::string completion();
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
        bool search_completion(std::uint64_t bound, std::string& out, std::size_t& budget, std::uint32_t item);

        /// The bytes that may come first once the rule of one of the current
        /// set's kernel items has ended, whenever it ends: those the items
        /// waiting for it at its origin read once moved past it (with what
        /// they predict, and what ends with them). Bytes a text may hold after
        /// such an end, so a token none of whose later bytes is here cannot go
        /// on past one.
        std::array<bool, 256> after_kernel();

    private:
        static std::shared_ptr<const grammar_automaton> checked(std::shared_ptr<const grammar_automaton> a)
        {
            if (!a)
            {
                throw invalid_parameter("matcher: no grammar");
            }
            return a;
        }
        void read_after(std::uint32_t rule, std::uint32_t o, std::array<bool, 256>& out);

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
        std::uint64_t cost(const earley_item& x, const Model& model);
        /// The cheapest item's cost in a model's units.
        template <class Model>
        std::uint64_t cheapest(const Model& model);

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
        std::pair<int, std::uint64_t> closest(std::uint64_t left);
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

        bool repeated(const earley_item& y, std::uint32_t o, std::string& item);
        template <class F>
        void arrays_of(const earley_item& y, F&& f);
        const std::vector<std::uint32_t>* climbed(const std::pair<std::uint32_t, std::uint32_t>& at) const;
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
        array_items& items_before(std::uint32_t start, std::uint32_t o);
        bool seen_in(std::uint32_t start, std::uint32_t o, const std::string& item);

        /// An item of a distinct mark the text is inside: where it began, and its array's start.
        struct open_item
        {
            std::uint32_t origin, start;
            bool closed;  // a closed object's item (grammar::distinct_closed)
        };
        bool new_value_left();
        static constexpr std::size_t max_search = 1 << 16;
        static bool is_ws(unsigned char c) noexcept { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
        bool new_value_here();
        bool ends_here(std::uint32_t o);
        bool inside_items(std::vector<open_item>& open);
        bool inside(const earley_item& x, std::uint32_t k, unsigned depth, std::vector<open_item>& open,
                    std::vector<std::pair<std::uint32_t, std::uint32_t>>& inside_rules);
        bool all_risky(const std::vector<open_item>& open, std::vector<std::string>* rests, bool& unfinished, bool* quoted,
                       bool* in_gap);
        bool decoded_to(std::uint32_t origin, std::uint32_t k);
        bool object_may_repeat(std::string_view text, const array_items& s, std::uint32_t origin, bool& gap);
        void forget_seen_after(std::size_t k);
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
        std::uint64_t cost(const earley_item& x, cost_cache& cache, const Model& model);

        template <class Model>
        std::uint64_t way_out(std::uint32_t rule, std::uint32_t o, cost_cache& cache, const Model& model);
        static std::uint64_t lookup(std::uint32_t rule, const set_costs& c) noexcept;
        template <class Model>
        void compute_costs(std::uint32_t o, cost_cache& cache, const Model& model);

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
