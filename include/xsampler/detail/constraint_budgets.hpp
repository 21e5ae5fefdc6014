// xsampler/detail/constraint_budgets.hpp — a budget's mask: tokens after which a completion still fits. (xsampler, BSD-3-Clause)
//
// walk_costs: per position, the tokens' costs to finish (token_costs),
// cached like masks; budgeted: the mask cut to the tokens whose cost
// fits the tokens left (by cost classes, the few near the bound checked
// through the real chart: fits_after, or one exact walk: walk_exact);
// fewest: the tokens that spell a text.
#ifndef XSAMPLER_DETAIL_CONSTRAINT_BUDGETS_HPP
#define XSAMPLER_DETAIL_CONSTRAINT_BUDGETS_HPP

#include <algorithm>
#include <array>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "constraint_state.hpp"
#include "constraint_walk.hpp"
#include "constraint_masks.hpp"

namespace xsampler
{
    /// The first level's costs: the same walk, each allowed token's ways
    /// back to the kernel (budget_class).
    inline compiled_grammar::position_costs constraint::walk_costs() const
    {
        const vocabulary_index& ix = m_g->index();
        const detail::token_costs& tc = m_g->token_costs();
        const grammar_automaton& a = *m_matcher.shared_rules();
        matcher local = local_chart();
        compiled_grammar::position_costs out;
        // (group, state, delta) -> class; groups and states below 2^32, a delta below 2^63
        std::map<std::tuple<std::uint32_t, std::uint32_t, std::int64_t>, std::size_t> class_of;
        struct way
        {
            std::uint32_t group, state;
            std::int64_t delta;
            std::uint64_t local;
        };
        std::vector<way> ways;
        // out_of(rule, o): the ways from finishing `rule` begun at local set o up to
        // a kernel group's level, memoised by (rule, o, the set's generation)
        struct key_hash
        {
            std::size_t operator()(const std::array<std::uint32_t, 3>& k) const noexcept
            {
                return std::size_t((std::uint64_t(k[0]) * 0x9E3779B97F4A7C15ull) ^ (std::uint64_t(k[1]) << 32 | k[2]));
            }
        };
        std::unordered_map<std::array<std::uint32_t, 3>, std::vector<way>, key_hash> memo;
        std::unordered_map<std::array<std::uint32_t, 3>, char, key_hash> busy;
        const std::vector<std::uint32_t>* generation = nullptr;
        const auto add_way = [](std::vector<way>& into, const way& w) {
            for (way& x : into)
            {
                if (x.group == w.group && x.state == w.state && x.delta == w.delta)
                {
                    x.local = std::min(x.local, w.local);
                    return;
                }
            }
            if (into.size() < 256)  // fewer ways: a dearer bound, never a wrong one
            {
                into.push_back(w);
            }
        };
        std::function<std::vector<way>(std::uint32_t, std::uint32_t)> out_of;
        std::size_t cycles = 0;  // an entry computed while a cycle was cut is not memoised (it may lack ways)
        // the ways of item t (at the level above a finished rule, or in the set itself)
        const auto ways_of = [&](const earley_item& t, std::vector<way>& into, std::uint64_t acc) {
            if (matcher::is_context(t.origin))
            {
                const std::uint32_t g = matcher::context - t.origin;
                add_way(into, {g, t.state, std::int64_t(t.count) - std::int64_t(m_kernel[m_rep[g]].count), acc});
                return;
            }
            const std::uint64_t here = detail::automaton::saturated_add(acc, tc.rest(t.state, t.count));
            for (const way& w : out_of(a.states[t.state].rule, t.origin))
            {
                add_way(into, {w.group, w.state, w.delta, detail::automaton::saturated_add(w.local, here)});
            }
        };
        out_of = [&](std::uint32_t rule, std::uint32_t o) -> std::vector<way> {
            const std::array<std::uint32_t, 3> k{rule, o, (*generation)[o]};
            const auto found = memo.find(k);
            if (found != memo.end())
            {
                return found->second;
            }
            if (busy.count(k) != 0)
            {
                ++cycles;
                return {};  // a cycle (left recursion): only dearer ways
            }
            const std::size_t cycles_before = cycles;
            busy.emplace(k, 1);
            std::vector<way> into;
            for (const earley_item* y = local.set_begin(o); y != local.set_end(o); ++y)
            {
                if (!local.can_read(*y))
                {
                    continue;
                }
                const auto& ys = a.states[y->state];
                for (std::uint32_t e = ys.edges_begin; e < ys.edges_end; ++e)
                {
                    earley_item t{a.edges[e].target, y->origin, y->count};
                    if (a.edges[e].rule == rule && local.advanced(t))
                    {
                        ways_of(t, into, 0);
                    }
                }
            }
            busy.erase(k);
            if (cycles == cycles_before || busy.empty())
            {
                memo.emplace(k, into);  // complete: no way was cut below it (or all cuts were its own)
            }
            return into;
        };
        std::size_t last_class = ~std::size_t(0);
        std::tuple<std::uint32_t, std::uint32_t, std::int64_t> last_key;
        const auto put = [&](token_id t, bool popped) {  // t by each of `ways`
            if (popped)
            {
                out.check.push_back(t);
            }
            for (const way& w : ways)
            {
                const auto key = std::make_tuple(w.group, w.state, w.delta);
                if (last_class == ~std::size_t(0) || key != last_key)
                {
                    auto it = class_of.find(key);
                    if (it == class_of.end())
                    {
                        it = class_of.emplace(key, out.classes.size()).first;
                        out.classes.push_back({w.group, w.state, w.delta, {}});
                    }
                    last_class = it->second;
                    last_key = key;
                }
                out.classes[last_class].tokens.push_back({w.local, t});
            }
        };
        std::uint32_t ways_set = no_set;  // the set `ways` are of
        // a chart set's ways by its content: its items, each origin below it by the
        // generation of the set there, one begun here as set_classes::here (no group's)
        // (siblings such as "1", "2", "12" end in equal sets)
        struct content_hash
        {
            std::size_t operator()(const std::vector<std::uint32_t>& k) const noexcept
            {
                std::uint64_t h = k.size();
                for (const std::uint32_t x : k)
                {
                    h = (h ^ x) * 0x9E3779B97F4A7C15ull;
                }
                return std::size_t(h ^ (h >> 29));
            }
        };
        std::unordered_map<std::vector<std::uint32_t>, std::vector<way>, content_hash> ways_by_content;
        std::vector<std::uint32_t> content;
        earley_item last_plain{no_set, no_set, no_set};  // the plain item `ways` are of, and its origin's generation
        std::uint32_t last_plain_at = 0;
        const auto on_node = [&](std::uint32_t i, bool popped, const earley_item* first, const earley_item* last,
                                 const std::vector<std::uint32_t>& gen, std::uint32_t set) {
            generation = &gen;
            if (set == no_set || set != ways_set)
            {
                const auto compute = [&] {
                    ways.clear();
                    for (const earley_item* x = first; x != last; ++x)
                    {
                        ways_of(*x, ways, 0);
                    }
                };
                if (set == no_set)
                {
                    // one plain item: its ways are the last node's when it is the same item over
                    // the same set (a string's text: every node after the first)
                    const earley_item& x = *first;
                    const std::uint32_t at = matcher::is_context(x.origin) ? 0 : gen[x.origin];
                    if (!(last_plain == x && last_plain_at == at))
                    {
                        compute();
                        last_plain = x;
                        last_plain_at = at;
                    }
                }
                else
                {
                    last_plain = {no_set, no_set, no_set};
                    const auto here = std::uint32_t(local.position());  // (the items are the chart's top)
                    content.clear();
                    for (const earley_item* x = first; x != last; ++x)
                    {
                        const bool below = !matcher::is_context(x->origin) && x->origin != here;
                        content.insert(content.end(), {x->state, x->count,
                                                       x->origin == here ? set_classes::here : x->origin,
                                                       below ? gen[x->origin] : 0});
                    }
                    const auto found = ways_by_content.find(content);
                    if (found != ways_by_content.end())
                    {
                        ways = found->second;
                    }
                    else
                    {
                        compute();
                        ways_by_content.emplace(content, ways);
                    }
                }
                ways_set = set;
            }
            ix.for_each_token(i, [&](token_id t) { put(t, popped); });
        };
        region_view v;
        if (!as_region(local, v))
        {
            walk_local(local, on_node);
        }
        else
        {
            // the tokens inside: the item after each is x in the state it ends
            // in (counted: with the iterations it ended; a frame's tail's ways
            // are x's own once it may end); the ways of each (state, count) once
            const region_walk& w = *v.walked;
            const std::vector<std::uint32_t> at_start(1, 0);  // the local set 0's generation
            generation = &at_start;
            // (state, iterations ended, popped) -> its classes and local costs, found once
            const std::size_t span = std::size_t(w.most) + 1;
            std::vector<std::int32_t> slot(v.state_of.size() * span * 2, -1);
            std::vector<std::vector<std::pair<std::size_t, std::uint64_t>>> found;
            for (std::size_t k = 0; k < w.last.size(); ++k)
            {
                const auto t = token_id(k);
                if (!v.reads(t))
                {
                    continue;
                }
                bool popped = false;
                const earley_item y = v.after(t, popped);
                const std::size_t ended = v.frame || v.counted ? w.need[k] - std::size_t(w.last[k] != 0) : 0;
                std::int32_t& at = slot[(std::size_t(w.last[k]) * span + ended) * 2 + std::size_t(popped)];
                if (at < 0)
                {
                    ways.clear();
                    ways_of(y, ways, 0);
                    std::vector<std::pair<std::size_t, std::uint64_t>> classes;
                    for (const way& wy : ways)
                    {
                        const auto key = std::make_tuple(wy.group, wy.state, wy.delta);
                        auto it = class_of.find(key);
                        if (it == class_of.end())
                        {
                            it = class_of.emplace(key, out.classes.size()).first;
                            out.classes.push_back({wy.group, wy.state, wy.delta, {}});
                        }
                        classes.emplace_back(it->second, wy.local);
                    }
                    at = std::int32_t(found.size());
                    found.push_back(std::move(classes));
                }
                if (popped)
                {
                    out.check.push_back(t);
                }
                for (const auto& [c, cost] : found[std::size_t(at)])
                {
                    out.classes[c].tokens.push_back({cost, t});
                }
            }
            last_class = ~std::size_t(0);  // (put's memo: classes were added)
            walk_local(local, on_node, &v.resumes);
        }
        // by local cost (a token in several ways of one class: its cheapest first, the rest harmless)
        for (auto& c : out.classes)
        {
            sort_by_cost(c.tokens);
        }
        return out;
    }

    /// Sorts (cost, token) pairs by cost, stably: a counting sort when the
    /// costs span fewer than 4,096 values (they count tokens), else a merge sort.
    template <class Cost>
    inline void constraint::sort_by_cost(std::vector<std::pair<Cost, token_id>>& v)
    {
        const auto by_cost = [](const auto& x, const auto& y) { return x.first < y.first; };
        if (std::is_sorted(v.begin(), v.end(), by_cost))
        {
            return;
        }
        const auto [lo, hi] = std::minmax_element(v.begin(), v.end(), by_cost);
        const auto above = [least = std::uint64_t(lo->first)](Cost c) { return std::size_t(std::uint64_t(c) - least); };
        if (std::uint64_t(hi->first) - std::uint64_t(lo->first) >= 4096)
        {
            std::stable_sort(v.begin(), v.end(), by_cost);
            return;
        }
        std::vector<std::size_t> at(above(hi->first) + 2, 0);
        for (const auto& e : v)
        {
            ++at[above(e.first) + 1];
        }
        std::partial_sum(at.begin(), at.end(), at.begin());
        std::vector<std::pair<Cost, token_id>> sorted(v.size());
        for (const auto& e : v)
        {
            sorted[at[above(e.first)]++] = e;
        }
        v = std::move(sorted);
    }

    /// The budget's whole mask by one walk of the trie through the real
    /// chart (a set that is one plain item steps by table look-up): each
    /// token whose completion after it fits in `target` tokens.
    inline std::vector<std::uint64_t> constraint::walk_exact(std::uint64_t target) const
    {
        const vocabulary_index& ix = m_g->index();
        const detail::token_costs& tc = m_g->token_costs();
        matcher m = m_matcher;
        m.check_distinct(false);
        std::vector<std::uint64_t> words((vocab().size() + 63) / 64, 0);
        cheapest cost{tc};
        walk_local(
            m,
            [&](std::uint32_t i, bool, const earley_item* first, const earley_item* last,
                const std::vector<std::uint32_t>&, std::uint32_t set) {
                if (cost(first, last, set, m) <= target)
                {
                    ix.mark_tokens(i, words.data());
                }
            },
            nullptr,
            [&](const earley_item* first, const earley_item* last, std::uint32_t set) {
                return cost(first, last, set, m) <= target ? words.data() : nullptr;
            });
        return words;
    }

    /// The budgeted mask by walk_exact, eos added when the text is complete.
    inline const token_set& constraint::exact(std::uint64_t target, bool done)
    {
        auto words = walk_exact(target);
        if (done)
        {
            for (const token_id e : vocab().eos())
            {
                words[std::size_t(e) / 64] |= std::uint64_t(1) << (e % 64);
            }
        }
        m_budgeted = token_set(std::move(words));
        return m_budgeted;
    }

    /// The tokens of `tokens` after which the completion fits in `target`
    /// tokens (fit(t) for each), read through the real chart in byte order,
    /// each from the bytes it shares with the one before. Returns how many fit.
    template <class Fit>
    inline std::size_t constraint::fits_after(std::vector<token_id> tokens, std::uint64_t target, Fit&& fit) const
    {
        const vocabulary& v = vocab();
        const vocabulary_index& ix = m_g->index();
        std::sort(tokens.begin(), tokens.end(), [&](token_id x, token_id y) { return ix.node_of(x) < ix.node_of(y); });
        const rewind undo{m_matcher, m_matcher.position()};
        const std::string* before = nullptr;
        std::size_t read = 0, fitting = 0;  // the matcher has read `read` bytes of *before
        for (const token_id t : tokens)
        {
            const std::string& b = v.bytes(t);
            std::size_t common = 0;
            while (common < read && common < b.size() && (*before)[common] == b[common])
            {
                ++common;
            }
            m_matcher.pop(read - common);
            read = common;
            while (read < b.size() && m_matcher.step(static_cast<unsigned char>(b[read])))
            {
                ++read;
            }
            before = &b;
            if (read == b.size() && m_matcher.cheapest(m_g->token_costs()) <= target)
            {
                fit(t);
                ++fitting;
            }
        }
        return fitting;
    }

    /// The mask restricted to the tokens after which a completion, eos
    /// included, fits the budget left: each class's tokens whose local
    /// cost fits (a prefix), the context's and the popping ones checked
    /// through the chart. `allowed` itself when none is cut.
    inline const token_set& constraint::budgeted(const token_set& allowed)
    {
        const std::size_t n = left();
        const vocabulary& v = vocab();
        const bool done = m_matcher.complete();
        if (n < 2)
        {
            std::vector<std::uint64_t> words(allowed.words().size(), 0);
            if (done)
            {
                for (const token_id e : v.eos())
                {
                    words[std::size_t(e) / 64] |= std::uint64_t(1) << (e % 64);
                }
            }
            m_budgeted = token_set(std::move(words));
            return m_budgeted;
        }
        const std::uint64_t target = n - 2;
        const detail::token_costs& tc = m_g->token_costs();
        const auto costs = m_g->costs(m_key, [&] { return walk_costs(); });
        // each kernel item's way out, and each class's cost but for its tokens' local part
        std::vector<std::uint64_t> out(m_kernel.size());
        for (std::size_t i = 0; i < m_kernel.size(); ++i)
        {
            const earley_item& x = m_kernel[i];
            out[i] = m_matcher.cost(x, tc) - tc.rest(x.state, x.count);
        }
        std::vector<std::size_t> keep(costs->classes.size());
        bool cut = false;
        for (std::size_t c = 0; c < costs->classes.size(); ++c)
        {
            const auto& k = costs->classes[c];
            std::uint64_t best = detail::automaton::infinite;
            for (std::size_t i = 0; i < m_kernel.size(); ++i)
            {
                if (m_group[i] != k.group)
                {
                    continue;
                }
                const std::int64_t count = std::int64_t(m_kernel[i].count) + k.delta;
                best = std::min(best, detail::automaton::saturated_add(
                                          tc.rest(k.state, std::uint32_t(std::max<std::int64_t>(count, 0))), out[i]));
            }
            if (best > target)
            {
                keep[c] = 0;
            }
            else
            {
                const std::uint64_t limit = target - best;
                keep[c] = std::size_t(
                    std::upper_bound(k.tokens.begin(), k.tokens.end(), limit,
                                     [](std::uint64_t l, const std::pair<std::uint64_t, token_id>& x) { return l < x.first; }) -
                    k.tokens.begin());
            }
            cut = cut || keep[c] < k.tokens.size();
        }
        // the context's tokens: their costs relative to the state's, cached by the
        // context when they are count-free; else each read through the chart, or
        // (many) their subtrees walked through it again
        std::vector<token_id> extras;
        if (m_extras && !m_current->roots.empty() && m_extras->size != 0)
        {
            const std::uint64_t here = m_matcher.cheapest(tc);
            const auto costs_of_context = [&] {
                compiled_grammar::context_costs cc;
                cheapest cost{tc};
                walk_context(*m_current, [&](token_id t, const earley_item* first, const earley_item* last,
                                             std::uint32_t set, matcher& m) {
                    cc.tokens.push_back({std::int64_t(cost(first, last, set, m)) - std::int64_t(here), t});
                });
                sort_by_cost(cc.tokens);
                return cc;
            };
            std::shared_ptr<const compiled_grammar::context_costs> known;
            if (m_ctx_count_free)
            {
                known = m_g->context_cost(m_ctx_key, costs_of_context);
            }
            else if (m_extras->size > max_checks)
            {
                known = std::make_shared<const compiled_grammar::context_costs>(costs_of_context());
            }
            if (known && known->tokens.empty())
            {
                known.reset();  // nothing to read: the ids decide alone
            }
            if (known && std::int64_t(here) + known->tokens.back().first <= std::int64_t(target))
            {
                if (!cut)
                {
                    return allowed;  // every class whole, every context token fits
                }
                extras = m_extras->list();
            }
            else if (known)
            {
                for (const auto& [delta, t] : known->tokens)
                {
                    if (std::int64_t(here) + delta > std::int64_t(target))
                    {
                        cut = true;
                        break;
                    }
                    extras.push_back(t);
                }
            }
            else
            {
                // (at most max_checks, unless the walk found none)
                cut = fits_after(m_extras->list(), target, [&](token_id t) { extras.push_back(t); }) < m_extras->size || cut;
            }
        }
        if (!cut)
        {
            return allowed;
        }
        std::vector<std::uint64_t> words(allowed.words().size(), 0);
        const auto set = [&](token_id t) { words[std::size_t(t) / 64] |= std::uint64_t(1) << (t % 64); };
        for (std::size_t c = 0; c < costs->classes.size(); ++c)
        {
            for (std::size_t j = 0; j < keep[c]; ++j)
            {
                set(costs->classes[c].tokens[j].second);
            }
        }
        std::vector<token_id> recheck;
        recheck.reserve(costs->check.size());
        for (const token_id t : costs->check)
        {
            if ((words[std::size_t(t) / 64] >> (t % 64) & 1) == 0)
            {
                recheck.push_back(t);
            }
        }
        if (recheck.size() > max_checks)
        {
            // a token goes on past a kernel rule's end only with a later byte the
            // context may read then: the others' class costs are theirs (a long
            // string's text: what ends it is its quote, which no token inside holds)
            const std::array<bool, 256> after = m_matcher.after_kernel();
            std::bitset<256> bytes;
            for (unsigned b = 0; b < 256; ++b)
            {
                bytes[b] = after[b];
            }
            const auto later = m_g->index().later_bytes(bytes);
            recheck.erase(std::remove_if(recheck.begin(), recheck.end(),
                                         [&](token_id t) { return ((*later)[std::size_t(t) / 64] >> (t % 64) & 1) == 0; }),
                          recheck.end());
        }
        if (!few_checks(recheck.size()))
        {
            return exact(target, done);  // many: one walk through the chart beats one read each
        }
        fits_after(std::move(recheck), target, set);
        for (const token_id t : extras)
        {
            set(t);
        }
        if (done)
        {
            for (const token_id e : v.eos())
            {
                set(e);
            }
        }
        m_budgeted = token_set(std::move(words));
        return m_budgeted;
    }

    /// The fewest tokens that spell `text`; one the vocabulary cannot
    /// spell is invalid_parameter.
    inline std::size_t constraint::fewest(const std::string& text) const
    {
        std::vector<std::size_t> dp;
        const std::size_t n = m_g->index().fewest_tokens(text, dp);
        if (n == ~std::size_t(0))
        {
            throw invalid_parameter(name() + ": the vocabulary cannot spell the completion \"" + detail::shortened(text) +
                                "\"");
        }
        return n;
    }
}

#endif
