// xsampler/detail/matcher_distinct.hpp — grammar::distinct marks checked by the matcher: checks A and B. (xsampler, BSD-3-Clause)
//
// Check A, where an item of a marked array ends: its text against the
// array's earlier items (json_canonical's equality; the array found up the
// chart by arrays_of, its items decoded once each, forgotten on pop). Check
// B, while an item is written: where every item of the set is inside a
// string, long integer or closed object that may still become an earlier
// item, a byte after which no completion is new is refused
// (new_value_left: a bounded search, check A on). distinct_rests() gives
// the constraint what check B may refuse (matcher.hpp's contract).
#ifndef XSAMPLER_DETAIL_MATCHER_DISTINCT_HPP
#define XSAMPLER_DETAIL_MATCHER_DISTINCT_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "json_canonical.hpp"
#include "matcher_chart.hpp"

namespace xsampler
{
    inline bool matcher::distinct_rests(std::vector<std::string>& rests, bool& unfinished, bool& quoted)
    {
        rests.clear();
        unfinished = quoted = false;
        std::vector<open_item> open;
        bool gap = false;
        return m_check && m_a->has_distinct() && inside_items(open) && all_risky(open, &rests, unfinished, &quoted, &gap);
    }

    /// Whether the item that began at o and ends here equals an earlier
    /// item of the array y reads it in (`item`: its key, made on first use).
    inline bool matcher::repeated(const earley_item& y, std::uint32_t o, std::string& item)
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
    inline void matcher::arrays_of(const earley_item& y, F&& f)
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
    inline const std::vector<std::uint32_t>* matcher::climbed(const std::pair<std::uint32_t, std::uint32_t>& at) const
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

    /// The items of the array begun at `start` read up to o (those
    /// before o; the cache may hold later ones, read by a text since popped).
    inline matcher::array_items& matcher::items_before(std::uint32_t start, std::uint32_t o)
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
    inline bool matcher::seen_in(std::uint32_t start, std::uint32_t o, const std::string& item)
    {
        const array_items& s = items_before(start, o);
        if (!s.items.empty() && s.items.back().first > o)  // (items read past o, by a text popped since)
        {
            return std::any_of(s.items.begin(), s.items.end(),
                               [&](const auto& x) { return x.first <= o && x.second == item; });
        }
        return s.keys.count(item) != 0;
    }

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
    inline bool matcher::new_value_left()
    {
        m_searching = true;
        struct off
        {
            bool& on;
            ~off() { on = false; }
        } restore{m_searching};
        return new_value_here();
    }

    /// The search, depth first without recursion (a text may be long):
    /// per byte read, the next byte to try at that depth.
    inline bool matcher::new_value_here()
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
    inline bool matcher::ends_here(std::uint32_t o)
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
    inline bool matcher::inside_items(std::vector<open_item>& open)
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
    inline bool matcher::inside(const earley_item& x, std::uint32_t k, unsigned depth, std::vector<open_item>& open, std::vector<std::pair<std::uint32_t, std::uint32_t>>& inside_rules)
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
    inline bool matcher::all_risky(const std::vector<open_item>& open, std::vector<std::string>* rests, bool& unfinished, bool* quoted, bool* in_gap)
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
    inline bool matcher::decoded_to(std::uint32_t origin, std::uint32_t k)
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
    inline bool matcher::object_may_repeat(std::string_view text, const array_items& s, std::uint32_t origin, bool& gap)
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
    inline void matcher::forget_seen_after(std::size_t k)
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
}

#endif
