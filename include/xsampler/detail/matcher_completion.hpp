// xsampler/detail/matcher_completion.hpp — the ways to finish the matcher's text: the shortest completion and its costs. (xsampler, BSD-3-Clause)
//
// matcher's shortest() and completion() (a path: the least byte that brings
// shortest() one closer; past a distinct item that would repeat, the search
// of search_completion), after_kernel() (the bytes that may come first once
// a kernel rule ends: budgets), and cost() / cheapest() under any cost model
// (byte_costs, or token_costs' rest(state, count)), cached by set.
#ifndef XSAMPLER_DETAIL_MATCHER_COMPLETION_HPP
#define XSAMPLER_DETAIL_MATCHER_COMPLETION_HPP

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "matcher_chart.hpp"

namespace xsampler
{
    inline std::uint64_t matcher::shortest()
    {
        std::uint64_t best = grammar_automaton::infinite;
        const std::size_t k = position();
        for (std::uint32_t i = m_sets[k]; i < m_items.size(); ++i)
        {
            best = std::min(best, cost(m_items[i]));
        }
        return best;
    }

    inline std::string matcher::completion()
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

    inline bool matcher::search_completion(std::uint64_t bound, std::string& out, std::size_t& budget, std::uint32_t item)
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

    inline std::array<bool, 256> matcher::after_kernel()
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

    /// after_kernel()'s set for `rule` begun at set o, on top: its items
    /// and closure, and the bytes they read into `out`.
    inline void matcher::read_after(std::uint32_t rule, std::uint32_t o, std::array<bool, 256>& out)
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

    template <class Model>
    inline std::uint64_t matcher::cost(const earley_item& x, const Model& model)
    {
        return cost(x, m_tokens, model);
    }

    template <class Model>
    inline std::uint64_t matcher::cheapest(const Model& model)
    {
        std::uint64_t best = grammar_automaton::infinite;
        for (std::uint32_t i = m_sets.back(); i < m_items.size(); ++i)
        {
            best = std::min(best, cost(m_items[i], m_tokens, model));
        }
        return best;
    }

    /// Of the bytes that continue the text, the least one that leaves
    /// shortest() least (-1: none), and that least; the scan stops at a
    /// byte that leaves it one below `left` (none does better).
    inline std::pair<int, std::uint64_t> matcher::closest(std::uint64_t left)
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

    template <class Model>
    inline std::uint64_t matcher::cost(const earley_item& x, cost_cache& cache, const Model& model)
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
    inline std::uint64_t matcher::way_out(std::uint32_t rule, std::uint32_t o, cost_cache& cache, const Model& model)
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

    inline std::uint64_t matcher::lookup(std::uint32_t rule, const set_costs& c) noexcept
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
    inline void matcher::compute_costs(std::uint32_t o, cost_cache& cache, const Model& model)
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
}

#endif
