// xsampler/detail/constraint_regions.hpp — a kernel's loop read as a byte region of the trie. (xsampler, BSD-3-Clause)
//
// as_region: where the kernel is one item in a loop of its rule (a
// string's text, a number's digits, a counted body), its states as a
// byte_region that vocabulary_index::walk_region walks once per shape and
// caches; the tokens that leave it are resumed by the trie walk
// (region_view::resumes). region_of, number_region, frame_of, counted_body:
// the region of each kind of loop; counted_kernel, counted_roots: a counted
// rule's kernel.
#ifndef XSAMPLER_DETAIL_CONSTRAINT_REGIONS_HPP
#define XSAMPLER_DETAIL_CONSTRAINT_REGIONS_HPP

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "constraint_state.hpp"

namespace xsampler
{
    inline bool constraint::as_region(const matcher& local, region_view& v) const
    {
        byte_region region;
        const grammar_automaton& a = local.rules();
        if (local.items() == 1 && region_of(a, local.begin()->state, region, v.state_of))
        {
            v.x = *local.begin();
        }
        else if (counted_kernel(local, v.x, v.leaves))
        {
            v.counted = true;
            if (!counted_body(a, a.states[v.x.state].rule, v.leaves, region, v.state_of))
            {
                return false;
            }
        }
        else if (!frame_of(local, region, v.state_of, v.x))
        {
            return false;
        }
        v.frame = !v.counted && !matcher::is_context(v.x.origin);
        if (v.frame || v.counted)
        {
            const auto& r = a.rules[a.states[v.x.state].rule];
            v.min = r.min;
            v.most = r.max == grammar::unbounded ? ~std::size_t(0) : r.max;
            v.left = v.most == ~std::size_t(0) ? v.most : v.most - v.x.count;
            if (v.counted && v.x.count < v.min)
            {
                // the items waiting for x's rule are not in the set yet: what may
                // follow the rule anywhere, when no iteration begins with it
                const auto& follow = a.follow[a.states[v.x.state].rule];
                bool apart = true;
                for (unsigned b = 0; b < 256 && apart; ++b)
                {
                    apart = !follow[b] || a.next(r.start, static_cast<unsigned char>(b)) < 0;
                }
                for (unsigned b = 0; b < 256; ++b)
                {
                    v.leaves[b] = !apart || follow[b];
                }
            }
        }
        v.walked = m_g->index().walk_region(region);
        for (const auto& e : v.walked->exits)
        {
            if (v.counted)
            {
                if (e.ends == 0)  // the other kernel items read it (later it is a stop: counted_roots)
                {
                    v.resumes.push_back({e.node, v.x, true});
                }
            }
            else if (!v.frame)
            {
                v.resumes.push_back({e.node, earley_item{v.state_of[e.from], v.x.origin, v.x.count}, false});
            }
            else if ((e.ends == 0 || e.ends >= v.min) && e.ends <= v.most)
            {
                v.resumes.push_back({e.node, v.x, true});
            }
        }
        return true;
    }

    /// Whether the set is x, a counted rule's kernel item at an iteration's
    /// start that may read on (a string with maxLength read some way), and
    /// kernel items that read bytes only (the item after the string, when
    /// it may end here), whose bytes `leaves` gets: they read at the first
    /// byte only.
    inline bool constraint::counted_kernel(const matcher& local, earley_item& x, std::array<bool, 256>& leaves)
    {
        const grammar_automaton& a = local.rules();
        const earley_item* found = nullptr;
        for (const earley_item* it = local.begin(); it != local.end(); ++it)
        {
            const auto& r = a.rules[a.states[it->state].rule];
            if (!matcher::is_context(it->origin))
            {
                return false;
            }
            if (r.counted && it->state == r.start && matcher::can_read(a, *it))
            {
                if (found != nullptr)
                {
                    return false;
                }
                found = it;
            }
            else if (!in_region(a, it->state))
            {
                return false;  // it predicts, or ends
            }
            else
            {
                a.add_bytes(it->state, leaves);
            }
        }
        if (found == nullptr)
        {
            return false;
        }
        x = *found;
        return true;
    }

    /// The roots a counted kernel item x leaves to the context, in
    /// preorder: where a byte dies after an iteration ended with the
    /// minimum met (before x's maximum), and the nodes that end the
    /// maximum's iteration and have children (x may only end there: what
    /// follows is the context's; walking from the node itself reads its
    /// own tokens again, which x allows anyway). Once x ends, what reads
    /// on are the items waiting for its rule, moved past it, and they
    /// read only bytes in `leaves`, none of them one an iteration begins
    /// with: with x's minimum met, they are the kernel's other items
    /// (counted_body checks them); below it, what may follow the rule
    /// anywhere (automaton::follow), when none begins an iteration (else
    /// every byte). So the context can go on only where x ends right
    /// before such a byte (after an earlier end, the next byte is one x
    /// read, which they cannot): only the roots whose byte, or a child's,
    /// is in `leaves` are left (near a string's maximum, the nodes of its
    /// last character with a quote below, not the thousands of others).
    inline std::vector<std::uint32_t> constraint::counted_roots(const vocabulary_index& ix, const region_view& v)
    {
        const region_walk& w = *v.walked;
        std::vector<std::uint32_t> stops, full;
        for (const auto* list : {&w.stops, &w.exits})  // (an exit after an iteration: a stop for x alone)
        {
            for (const auto& e : *list)
            {
                if (e.ends > 0 && e.ends < v.left && v.x.count + e.ends >= v.min && v.leaves[ix.byte(e.node)])
                {
                    stops.push_back(e.node);
                }
            }
        }
        std::sort(stops.begin(), stops.end());
        if (v.left + 1 < w.at_begin.size())
        {
            for (std::uint32_t k = w.at_begin[v.left]; k < w.at_begin[v.left + 1]; ++k)
            {
                const std::uint32_t n = w.at_start[k];
                bool goes_on = false;
                for (std::uint32_t c = n + 1; c < ix.end(n) && !goes_on; c = ix.end(c))
                {
                    goes_on = v.leaves[ix.byte(c)];
                }
                if (goes_on)
                {
                    full.push_back(n);
                }
            }
        }
        std::vector<std::uint32_t> roots(stops.size() + full.size());
        std::merge(stops.begin(), stops.end(), full.begin(), full.end(), roots.begin());
        return roots;
    }

    /// Whether an item in state s stays the one plain item of its set
    /// whatever its origin and count: no rule to predict, nothing to
    /// complete (or only the text: the root's end when no rule reads
    /// it), not a counted rule's or a counted lexeme's.
    inline bool constraint::in_region(const grammar_automaton& a, std::uint32_t s) noexcept
    {
        const auto& st = a.states[s];
        return st.edges_begin == st.edges_end && (!st.accepting || a.ends_text_only(s)) && !a.rules[st.rule].counted &&
               !a.rules[st.rule].units;
    }

    /// The region around `start`, of states in_region (plain, reached by
    /// bytes through such states): start with its loop (a string's text,
    /// its escapes and multi-byte characters), then every loop one byte
    /// from start or from a loop taken (a string of at least one character
    /// after its opening quote: the first, then the loop of the others; a
    /// pattern's text after the ':' of `.+:.+`), not what a state on no
    /// loop leads to (the bytes after a closing quote: they would tie the
    /// text's shape to what surrounds it), numbered breadth first
    /// (state_of: the automaton's state of each); a byte to any other live
    /// state leaves it. Only when it is wide enough for walking the whole
    /// trie to be what a walk costs: at least 64 bytes stay in it from the
    /// start (free text, not a keyword); at most 4,096 states are looked at.
    inline bool constraint::region_of(const grammar_automaton& a, std::uint32_t start, byte_region& region, std::vector<std::uint32_t>& state_of)
    {
        constexpr std::size_t wide = 64;
        const auto staying = [&](std::int32_t t) { return t >= 0 && in_region(a, std::uint32_t(t)); };
        if (!in_region(a, start))
        {
            return false;
        }
        std::size_t from_start = 0;
        for (unsigned b = 0; b < 256; ++b)
        {
            from_start += std::size_t(staying(a.next(start, static_cast<unsigned char>(b))));
        }
        if (from_start < wide)
        {
            return false;
        }
        // the staying states reachable from start (by byte class)
        constexpr std::size_t most = 4096;
        constexpr std::uint32_t none = ~std::uint32_t(0);
        std::vector<std::uint32_t> seen{start};
        std::unordered_map<std::uint32_t, std::uint32_t> index{{start, 0}};
        std::vector<std::vector<std::uint32_t>> ahead(1);
        for (std::size_t k = 0; k < seen.size(); ++k)
        {
            for (std::uint32_t c = 0; c < a.classes; ++c)
            {
                const std::int32_t t = a.table[std::size_t(seen[k]) * a.classes + c];
                if (!staying(t))
                {
                    continue;
                }
                const auto [it, added] = index.emplace(std::uint32_t(t), std::uint32_t(seen.size()));
                if (added)
                {
                    if (seen.size() == most)
                    {
                        return false;
                    }
                    seen.push_back(std::uint32_t(t));
                    ahead.emplace_back();
                }
                ahead[k].push_back(it->second);
            }
        }
        // their loops (strongly connected components, Tarjan's, without recursion)
        const std::size_t n = seen.size();
        std::vector<std::uint32_t> number(n, none), low(n, 0), comp(n, none), open;
        std::vector<std::pair<std::uint32_t, std::size_t>> calls{{0, 0}};  // (state, next edge)
        std::uint32_t numbered = 0, comps = 0;
        number[0] = low[0] = numbered++;
        open.push_back(0);
        while (!calls.empty())
        {
            const std::uint32_t u = calls.back().first;
            const std::size_t e = calls.back().second++;
            if (e < ahead[u].size())
            {
                const std::uint32_t w = ahead[u][e];
                if (number[w] == none)
                {
                    number[w] = low[w] = numbered++;
                    open.push_back(w);
                    calls.push_back({w, 0});
                }
                else if (comp[w] == none)
                {
                    low[u] = std::min(low[u], number[w]);
                }
                continue;
            }
            calls.pop_back();
            if (low[u] == number[u])
            {
                std::uint32_t w = none;
                do
                {
                    w = open.back();
                    open.pop_back();
                    comp[w] = comps;
                } while (w != u);
                ++comps;
            }
            if (!calls.empty())
            {
                low[calls.back().first] = std::min(low[calls.back().first], low[u]);
            }
        }
        std::vector<std::uint8_t> loops(comps, 0);  // a loop: two states or more, or one reading itself
        std::vector<std::vector<std::uint32_t>> members(comps);
        for (std::size_t k = 0; k < n; ++k)
        {
            members[comp[k]].push_back(std::uint32_t(k));
            loops[comp[k]] = std::uint8_t(loops[comp[k]] | (members[comp[k]].size() > 1) |
                                          (std::find(ahead[k].begin(), ahead[k].end(), std::uint32_t(k)) != ahead[k].end()));
        }
        // start (with its loop), then every loop one byte from one taken: a text's
        // loop and a pattern's next one, not what follows a closing quote
        std::vector<std::uint8_t> in(n, 0), taken(comps, 0);
        std::vector<std::uint32_t> todo;
        const auto take = [&](std::uint32_t c) {
            taken[c] = 1;
            for (const std::uint32_t k : members[c])
            {
                in[k] = 1;
                todo.push_back(k);
            }
        };
        take(comp[0]);
        while (!todo.empty())
        {
            const std::uint32_t u = todo.back();
            todo.pop_back();
            for (const std::uint32_t w : ahead[u])
            {
                if (!taken[comp[w]] && loops[comp[w]] && (loops[comp[u]] || u == 0))
                {
                    take(comp[w]);
                }
            }
        }
        return number_region(a, start, region, state_of, [&](std::size_t, std::uint32_t, unsigned, std::int32_t t) {
            if (t < 0)
            {
                return byte_region::dead;
            }
            return staying(t) && in[index.at(std::uint32_t(t))] ? keep : byte_region::exit;
        });
    }

    template <class To>
    inline bool constraint::number_region(const grammar_automaton& a, std::uint32_t start, byte_region& region, std::vector<std::uint32_t>& state_of, To&& to)
    {
        constexpr std::size_t most = 4096;
        std::unordered_map<std::uint32_t, std::int32_t> number{{start, 0}};
        state_of.assign(1, start);
        for (std::size_t k = 0; k < state_of.size(); ++k)
        {
            const std::uint32_t s = state_of[k];
            std::int32_t prev = 0, last_t = -1, last_go = 0;  // (a run of bytes to one state: one look-up)
            for (unsigned b = 0; b < 256; ++b)
            {
                const std::int32_t t = a.next(s, static_cast<unsigned char>(b));
                std::int32_t go = to(k, s, b, t);
                if (go == fail)
                {
                    return false;
                }
                if (go == keep && t == last_t)
                {
                    go = last_go;
                }
                else if (go == keep)
                {
                    last_t = t;
                    const auto [it, added] = number.emplace(std::uint32_t(t), std::int32_t(state_of.size()));
                    if (added)
                    {
                        if (state_of.size() == most)
                        {
                            return false;
                        }
                        state_of.push_back(std::uint32_t(t));
                    }
                    go = last_go = it->second;
                }
                if (b > 0 && go != prev)
                {
                    region.runs.push_back({static_cast<unsigned char>(b - 1), prev});
                }
                prev = go;
            }
            region.runs.push_back({255, prev});
            region.begin.push_back(std::uint32_t(region.runs.size()));
        }
        return true;
    }

    /// A counted rule's frame: whether the set is x, an item of a counted
    /// rule begun here (at its start, count 0), items waiting for that
    /// rule and reading nothing else, and items that read bytes only (no
    /// rule, no end): the waiting items moved past x's rule (the tail,
    /// here when its minimum is 0) and kernel items in such states. Then
    /// every later set is x's successor and, at an iteration's end with
    /// the minimum done, the same tail: a string with maxLength after its
    /// opening quote. The region is x's body from its start (state 0,
    /// where iterations end); a byte that those items read leaves it
    /// there, and none may be a byte an iteration begins with. state_of as
    /// region_of's; only when at least 64 bytes begin an iteration.
    inline bool constraint::frame_of(const matcher& local, byte_region& region, std::vector<std::uint32_t>& state_of, earley_item& x)
    {
        const grammar_automaton& a = local.rules();
        region = byte_region{};
        const earley_item* found = nullptr;
        for (const earley_item* it = local.begin(); it != local.end(); ++it)
        {
            if (!matcher::is_context(it->origin))
            {
                const auto& r = a.rules[a.states[it->state].rule];
                if (found != nullptr || !r.counted || it->state != r.start || it->count != 0)
                {
                    return false;  // another rule predicted here, or not at its start
                }
                found = it;
            }
        }
        if (found == nullptr)
        {
            return false;
        }
        x = *found;
        const std::uint32_t rule = a.states[x.state].rule;
        const auto reads_bytes = [&](std::uint32_t s) {
            for (std::uint32_t c = 0; c < a.classes; ++c)
            {
                if (a.table[std::size_t(s) * a.classes + c] >= 0)
                {
                    return true;
                }
            }
            return false;
        };
        // the others: waiting for x's rule (reading nothing else), or reading
        // bytes only (the tail, and kernel items in the tail's states: at this
        // set only); what they read leaves the body
        std::array<bool, 256> leaves{};
        const auto reader = [&](std::uint32_t s) {
            if (!in_region(a, s))
            {
                return false;  // it would predict, or end
            }
            a.add_bytes(s, leaves);
            return true;
        };
        for (const earley_item* it = local.begin(); it != local.end(); ++it)
        {
            const auto& st = a.states[it->state];
            if (it == found)
            {
                continue;
            }
            if (st.edges_begin == st.edges_end)
            {
                if (!reader(it->state))
                {
                    return false;
                }
                continue;
            }
            if (matcher::completes(a, *it) || a.rules[st.rule].counted || reads_bytes(it->state))
            {
                return false;
            }
            for (std::uint32_t e = st.edges_begin; e < st.edges_end; ++e)
            {
                if (a.edges[e].rule != rule || !reader(a.edges[e].target))
                {
                    return false;  // it waits for another rule too, or its tail is not plain
                }
            }
        }
        return counted_body(a, rule, leaves, region, state_of);
    }

    /// A counted rule's body as a region from its start (state 0, where
    /// iterations end); a byte in `leaves` leaves it from there (none may
    /// begin an iteration). Only when at least 64 bytes begin one.
    inline bool constraint::counted_body(const grammar_automaton& a, std::uint32_t rule, const std::array<bool, 256>& leaves, byte_region& region, std::vector<std::uint32_t>& state_of)
    {
        constexpr std::size_t wide = 64;
        const auto& r = a.rules[rule];
        region = byte_region{};
        region.start = 0;
        std::size_t from_start = 0;
        const auto predicts = [&](std::uint32_t s) { return a.states[s].edges_begin != a.states[s].edges_end; };
        const bool body = number_region(a, r.start, region, state_of, [&](std::size_t k, std::uint32_t s, unsigned b, std::int32_t t) {
            if (b == 0 && predicts(s))
            {
                return fail;  // the body predicts a rule
            }
            const bool tail_reads = k == 0 && leaves[b];
            if (t < 0)
            {
                return tail_reads ? byte_region::exit : byte_region::dead;
            }
            const auto& ts = a.states[std::uint32_t(t)];
            if (tail_reads || std::uint32_t(t) == r.start || predicts(std::uint32_t(t)) || (ts.accepting && ts.reads))
            {
                return fail;  // the text would not say which: the chart decides
            }
            from_start += std::size_t(k == 0);
            return ts.accepting ? byte_region::end : keep;
        });
        return body && from_start >= wide;
    }
}

#endif
