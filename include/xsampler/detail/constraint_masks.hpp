// xsampler/detail/constraint_masks.hpp — a step's mask: position masks, context tokens, distinct re-reads. (xsampler, BSD-3-Clause)
//
// positions_of_kernel: a position set's entry as the union of its single
// items' entries, or walked (walk_positions: the trie through a local
// chart, regions first); prime_items: the single items' entries walked
// ahead when the grammar is compiled; walk_context: the tokens that finish
// a kernel rule, read through the real chart; inside a distinct array,
// the mask's tokens that may end an item read again (without_repeats,
// without_dead_ends).
#ifndef XSAMPLER_DETAIL_CONSTRAINT_MASKS_HPP
#define XSAMPLER_DETAIL_CONSTRAINT_MASKS_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "simd.hpp"
#include "constraint_state.hpp"
#include "constraint_walk.hpp"

namespace xsampler
{
    /// Whether the text may be inside an array of a grammar::distinct
    /// mark (or begin one now): up the chart from the current set's
    /// items, through rules such an array reads, an item of the array's
    /// own rule (each set and rule looked at once; past max_looked, yes).
    inline bool constraint::in_distinct_array() const
    {
        const compiled_grammar& g = *m_g;
        const auto& a = *m_matcher.shared_rules();
        std::vector<std::pair<std::uint32_t, std::uint32_t>> todo, seen;  // (set, rule)
        const auto k = std::uint32_t(m_matcher.position());
        for (const earley_item* x = m_matcher.begin(); x != m_matcher.end(); ++x)
        {
            const std::uint32_t r = a.states[x->state].rule;
            if (g.in_distinct(r))
            {
                todo.emplace_back(x->origin, r);
            }
        }
        while (!todo.empty())
        {
            const auto [set, rule] = todo.back();
            todo.pop_back();
            if (a.rules[rule].distinct_array)
            {
                return true;
            }
            if (matcher::is_context(set) || set >= k ||
                std::find(seen.begin(), seen.end(), std::make_pair(set, rule)) != seen.end())
            {
                continue;
            }
            if (seen.size() == max_looked)
            {
                return true;
            }
            seen.emplace_back(set, rule);
            // the items of set `set` that wait for `rule`: their rules, begun at their origins
            for (const earley_item* z = m_matcher.set_begin(set); z != m_matcher.set_end(set); ++z)
            {
                const auto& zs = a.states[z->state];
                for (std::uint32_t e = zs.edges_begin; e < zs.edges_end; ++e)
                {
                    if (a.edges[e].rule == rule && g.in_distinct(zs.rule))
                    {
                        todo.emplace_back(z->origin, zs.rule);
                        break;
                    }
                }
            }
        }
        return false;
    }

    /// The mask less the tokens that end a distinct item equal to an
    /// earlier one of its array: the cached masks are the grammar's
    /// without the marks (their walks do not check them); the tokens of
    /// `suspects` (compiled_grammar::distinct_tokens inside an array,
    /// distinct_opening_tokens outside) read again through the real
    /// chart, which checks.
    inline const token_set& constraint::without_repeats(const token_set& in, const std::vector<token_id>& suspects)
    {
        std::vector<std::uint64_t> words = in.words();
        const vocabulary& v = vocab();
        const std::size_t before = m_matcher.position();
        rewind undo{m_matcher, before};
        bool dropped = false;
        for (const token_id t : suspects)
        {
            if (!in.contains(t))
            {
                continue;
            }
            const std::string& b = v.bytes(t);
            const bool reads = m_matcher.feed(b) == b.size();
            m_matcher.pop(m_matcher.position() - before);
            if (!reads)
            {
                words[std::size_t(t) / 64] &= ~(std::uint64_t(1) << (std::size_t(t) % 64));
                dropped = true;
            }
        }
        if (!dropped)
        {
            return in;
        }
        m_scratch = token_set(std::move(words));
        return m_scratch;
    }

    /// The mask less the tokens after which a distinct item can only
    /// become an earlier item of its array (the matcher's check B):
    /// where it may (matcher::distinct_rests), the tokens that keep a
    /// string item on an earlier one's path (a prefix of its rest, spelt
    /// raw) or hold a backslash are read again through the real chart;
    /// every token where an escape is begun; in a closed object, every
    /// token with a quote or a backslash. (Tokens that end an item:
    /// without_repeats.)
    inline const token_set& constraint::without_dead_ends(const token_set& in)
    {
        if (!m_matcher.distinct_rests(m_rests, m_unfinished, m_quoted))
        {
            return in;
        }
        std::vector<token_id> suspects;
        if (m_unfinished)
        {
            const auto& words = in.words();
            for (std::size_t w = 0; w < words.size(); ++w)
            {
                detail::for_each_bit(words[w], w * 64, [&](std::size_t t) { suspects.push_back(token_id(t)); });
            }
        }
        else
        {
            suspects = m_g->escape_tokens();
            if (m_quoted)
            {
                suspects.insert(suspects.end(), m_g->quote_tokens().begin(), m_g->quote_tokens().end());
            }
            const vocabulary_index& index = m_g->index();
            for (const std::string& r : m_rests)
            {
                std::uint32_t node = vocabulary_index::none;
                for (const char c : r)
                {
                    const std::int32_t next = index.child(node, static_cast<unsigned char>(c));
                    if (next < 0)
                    {
                        break;
                    }
                    node = std::uint32_t(next);
                    index.for_each_token(node, [&](token_id t) { suspects.push_back(t); });
                }
            }
            std::sort(suspects.begin(), suspects.end());
            suspects.erase(std::unique(suspects.begin(), suspects.end()), suspects.end());
        }
        return without_repeats(in, suspects);
    }

    /// Walks the positions of single items ahead (compiled_grammar's
    /// prime): each state an item may be in as a kernel's (a byte's or a
    /// rule's target, the root's start) in a rule that counts nothing,
    /// and each counted rule's start after one iteration short of its
    /// minimum; breadth first from the root's start, at most `most` of them.
    inline void constraint::prime_items(std::size_t most) const
    {
        const auto& a = *m_matcher.shared_rules();
        std::vector<std::uint8_t> target(a.states.size(), 0), seen(a.states.size(), 0);
        std::vector<std::uint32_t> order{a.rules[a.root].start};
        target[order[0]] = seen[order[0]] = 1;
        const auto visit = [&](std::uint32_t t, bool kernel) {
            target[t] = std::uint8_t(target[t] | std::uint8_t(kernel));
            if (!seen[t])
            {
                seen[t] = 1;
                order.push_back(t);
            }
        };
        for (std::size_t k = 0; k < order.size(); ++k)
        {
            const std::uint32_t s = order[k];
            for (std::uint32_t c = 0; c < a.classes; ++c)
            {
                const std::int32_t t = a.table[std::size_t(s) * a.classes + c];
                if (t >= 0)
                {
                    visit(std::uint32_t(t), true);
                }
            }
            for (std::uint32_t e = a.states[s].edges_begin; e < a.states[s].edges_end; ++e)
            {
                visit(a.rules[a.edges[e].rule].start, false);
                visit(a.edges[e].target, true);
            }
        }
        std::size_t primed = 0;
        for (std::size_t k = 0; k < order.size() && primed < most; ++k)
        {
            const std::uint32_t s = order[k];
            const auto& r = a.rules[a.states[s].rule];
            earley_item x{s, matcher::context, 0};
            if (r.counted)
            {
                // one iteration read, short of the minimum (so the item is a
                // kernel alone): its walk is the body's region, which every
                // later count of every such rule over the vocabulary shares
                if (s != r.start || r.min < 2 || r.max < 2)
                {
                    continue;
                }
                x.count = 1;
            }
            else if (!target[s])
            {
                continue;
            }
            std::string key;
            put_item(key, x);
            m_g->positions(key, [&] { return walk_positions({x}); });
            ++primed;
        }
    }

    /// The first level's entry for the kernel. Its items read apart: a
    /// token is read without finishing a kernel rule exactly when one
    /// item reads it so, and where every item dies, the subtree is the
    /// context's if one item's rule finished above it. So the entry of
    /// several items is the union of each one's alone (allowed, and the
    /// subtrees, one inside another walked with it), each cached as a
    /// position of its own (and walked ahead at compile time: prime).
    /// Not where an item is a counted rule's: its filter of the subtrees
    /// (counted_roots) reads the kernel's other items.
    inline compiled_grammar::position_masks constraint::positions_of_kernel() const
    {
        const std::vector<earley_item> reps = kernel_reps();
        const auto& a = *m_matcher.shared_rules();
        const bool apart = reps.size() > 1 && std::none_of(reps.begin(), reps.end(), [&](const earley_item& x) {
            return a.rules[a.states[x.state].rule].counted;
        });
        if (!apart)
        {
            return walk_positions(reps);
        }
        const vocabulary_index& ix = m_g->index();
        compiled_grammar::position_masks out;
        std::vector<std::uint64_t> words((vocab().size() + 63) / 64, 0);
        std::vector<std::uint32_t> roots;
        for (const earley_item& x : reps)
        {
            std::string k;
            put_item(k, x);
            const auto one = m_g->positions(k, [&] { return walk_positions({x}); });
            const auto& w = one->allowed.words();
            for (std::size_t i = 0; i < words.size(); ++i)
            {
                words[i] |= w[i];
            }
            roots.insert(roots.end(), one->roots.begin(), one->roots.end());
        }
        std::sort(roots.begin(), roots.end());
        for (const std::uint32_t r : roots)  // a root inside another's subtree is walked with it
        {
            if (out.roots.empty() || r >= ix.end(out.roots.back()))
            {
                out.roots.push_back(r);
            }
        }
        out.allowed = token_set(std::move(words));
        return out;
    }

    /// The first level: the trie walked from the kernel's items `reps`
    /// alone. When the position is one item in a wide region (region_of),
    /// its tokens inside come from the index's walk of the region (shared
    /// by every grammar over the vocabulary) and only the subtrees where
    /// the region is left are walked here.
    inline compiled_grammar::position_masks constraint::walk_positions(const std::vector<earley_item>& reps) const
    {
        const vocabulary_index& ix = m_g->index();
        compiled_grammar::position_masks out;
        std::vector<std::uint64_t> words((vocab().size() + 63) / 64, 0);
        const grammar_automaton& a = *m_matcher.shared_rules();
        if (reps.size() == 1 && m_g->units_apart(a.states[reps[0].state].rule))
        {
            // inside a counted lexeme: its walk from the state, filtered by the count
            const earley_item& x = reps[0];
            const auto& r = a.rules[a.states[x.state].rule];
            const detail::unit_ends& u = *r.units;
            const auto w = m_g->walk_units(x.state);
            for (const auto& e : w->inside)
            {
                const std::uint32_t c = u.plus(x.count, e.units);
                if (c != detail::unit_ends::none && u.bytes(e.state - r.start, c) != detail::unit_ends::none)
                {
                    ix.mark_tokens(e.node, words.data());
                }
            }
            for (const auto& e : w->stops)
            {
                const std::uint32_t c = u.plus(x.count, e.units);
                if (c != detail::unit_ends::none && u.ends(e.state - r.start, c))
                {
                    out.roots.push_back(e.node);
                }
            }
            out.allowed = token_set(std::move(words));
            return out;
        }
        matcher local = local_chart(reps);
        const auto add = [&](std::uint32_t i, bool, const earley_item*, const earley_item*,
                             const std::vector<std::uint32_t>&, std::uint32_t) {
            ix.mark_tokens(i, words.data());
        };
        const auto into_words = [&](const earley_item*, const earley_item*, std::uint32_t) { return words.data(); };
        region_view v;
        if (as_region(local, v))
        {
            const region_walk& w = *v.walked;
            if (!(v.frame || v.counted) || v.left >= w.most)
            {
                words = w.inside;
            }
            else
            {
                for (std::size_t t = 0; t < w.need.size(); ++t)
                {
                    words[t / 64] |= std::uint64_t(w.need[t] <= v.left) << (t % 64);
                }
            }
            out.roots = walk_local(local, add, &v.resumes, into_words);
            if (v.counted)
            {
                const auto more = counted_roots(ix, v);  // subtrees apart from the resumed ones: all in preorder
                out.roots.insert(out.roots.end(), more.begin(), more.end());
                std::sort(out.roots.begin(), out.roots.end());
            }
        }
        else
        {
            out.roots = walk_local(local, add, nullptr, into_words);
        }
        out.allowed = token_set(std::move(words));
        return out;
    }

    /// The second level: the context's subtrees walked through the real chart
    /// (the tokens as ids, and as a bitset too when many).
    inline compiled_grammar::context_tokens constraint::walk_context(const compiled_grammar::position_masks& p) const
    {
        return walk_context(p, no_tokens{});
    }

    /// The same, with on_token(t, items, set, chart) for each allowed
    /// token: the items after t, whose origins are the chart's sets, and
    /// the set they are (walk_local).
    template <class OnToken>
    inline compiled_grammar::context_tokens constraint::walk_context(const compiled_grammar::position_masks& p, OnToken&& on_token) const
    {
        const vocabulary_index& ix = m_g->index();
        matcher m = m_matcher;
        m.check_distinct(false);  // (cached by positions: the grammar without the marks)
        std::vector<resume> starts;
        starts.reserve(p.roots.size());
        for (const std::uint32_t root : p.roots)
        {
            starts.push_back({root, earley_item{}, true});
        }
        std::vector<std::uint64_t> words((vocab().size() + 63) / 64, 0);
        const auto mark = [&](std::uint32_t i, bool, const earley_item* first, const earley_item* last,
                              const std::vector<std::uint32_t>&, std::uint32_t set) {
            ix.mark_tokens(i, words.data());
            if constexpr (!std::is_same<std::decay_t<OnToken>, no_tokens>::value)
            {
                ix.for_each_token(i, [&](token_id t) { on_token(t, first, last, set, m); });
            }
        };
        if constexpr (std::is_same<std::decay_t<OnToken>, no_tokens>::value)
        {
            walk_local(m, mark, &starts, [&](const earley_item*, const earley_item*, std::uint32_t) { return words.data(); });
        }
        else
        {
            walk_local(m, mark, &starts);
        }
        compiled_grammar::context_tokens out;
        for (const std::uint64_t w : words)
        {
            out.size += std::size_t(__builtin_popcountll(w));
        }
        out.words = std::move(words);
        if (out.size <= out.many)
        {
            out.ids = out.list();
            out.words.clear();
        }
        return out;
    }
}

#endif
