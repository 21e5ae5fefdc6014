// xsampler/detail/constraint_keys.hpp — the keys of a constraint's two mask caches. (xsampler, BSD-3-Clause)
//
// position_key: the current set's kernel (its items' DFA states, counts
// clamped to what one token can change), sorted and grouped into
// representatives (kernel_reps); context_key: the position key and the
// items the kernel's rules return to, up the chart (counts clamped).
// local_chart: a matcher started from the representatives alone.
#ifndef XSAMPLER_DETAIL_CONSTRAINT_KEYS_HPP
#define XSAMPLER_DETAIL_CONSTRAINT_KEYS_HPP

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "constraint_state.hpp"

namespace xsampler
{
    /// A count as the first level's key holds it: what one token can
    /// still change (min and max minus the count, clamped).
    inline std::uint32_t constraint::clamped(std::size_t bound, std::uint32_t count) const noexcept
    {
        const std::size_t cap = m_g->index().longest() + 2;
        if (bound == grammar::unbounded)
        {
            return std::uint32_t(cap);
        }
        return std::uint32_t(std::min(bound > count ? bound - count : 0, cap));
    }

    inline void constraint::put_item(std::string& key, const earley_item& x) const
    {
        const auto& a = *m_matcher.shared_rules();
        const auto& r = a.rules[a.states[x.state].rule];
        std::array<std::uint32_t, 3> v{x.state, 0, 0};
        if (r.counted)
        {
            v[1] = clamped(r.min, x.count);
            v[2] = clamped(r.max, x.count);
        }
        else if (r.units)
        {
            v[1] = x.count;  // (whether a state may end depends on its count exactly: a pattern's parity)
        }
        key.append(reinterpret_cast<const char*>(v.data()), sizeof v);
    }

    /// The first level's key: the kernel's items without their origins,
    /// sorted and without repeats (each distinct one a group; m_group[i]
    /// is kernel item i's, m_rep[g] the first item of group g).
    inline void constraint::position_key(std::string& key)
    {
        m_kernel.clear();
        m_matcher.for_each_kernel([&](const earley_item& x) { m_kernel.push_back(x); });
        std::vector<std::string>& parts = m_parts;
        parts.clear();
        for (const auto& x : m_kernel)
        {
            std::string p;
            put_item(p, x);
            parts.push_back(std::move(p));
        }
        std::vector<std::string> sorted = parts;
        std::sort(sorted.begin(), sorted.end());
        sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
        if (sorted.size() >= matcher::max_groups)
        {
            throw invalid_parameter(name() + ": " + std::to_string(sorted.size()) +
                                    " distinct items at one position, more than the " +
                                    std::to_string(matcher::max_groups - 1) +
                                    " a mask can track (a grammar this ambiguous is beyond the matcher)");
        }
        m_group.assign(m_kernel.size(), 0);
        m_rep.assign(sorted.size(), ~std::uint32_t(0));
        for (std::size_t i = 0; i < m_kernel.size(); ++i)
        {
            const auto g = std::uint32_t(std::lower_bound(sorted.begin(), sorted.end(), parts[i]) - sorted.begin());
            m_group[i] = g;
            if (m_rep[g] == ~std::uint32_t(0))
            {
                m_rep[g] = std::uint32_t(i);
            }
        }
        key.clear();
        for (const auto& p : sorted)
        {
            key += p;
        }
    }

    /// The second level's key: the chart's stack above the kernel, as a
    /// graph. Its nodes are (set, rule) pairs, numbered as they are found,
    /// breadth first from the kernel; a node's record lists the items of
    /// that set waiting for that rule (their state after it, counts
    /// clamped) and the node each returns to (or the text's end, or the
    /// context). Then equal keys mean equal labelled graphs, so equal
    /// futures. Also notes whether every count in it is done with its
    /// minimum (m_ctx_count_free: budgets may cache relative costs).
    inline void constraint::context_key(std::string& key)
    {
        const auto& a = *m_matcher.shared_rules();
        const auto put32 = [](std::string& out, std::uint32_t v) {
            out.append(reinterpret_cast<const char*>(&v), sizeof v);
        };
        std::unordered_map<std::uint64_t, std::uint32_t> ids;  // (set, rule) -> node number
        std::vector<std::uint64_t> nodes;
        const auto node_of = [&](std::uint32_t set, std::uint32_t rule) -> std::uint32_t {
            const std::uint64_t k = std::uint64_t(set) << 32 | rule;
            const auto it = ids.find(k);
            if (it != ids.end())
            {
                return it->second;
            }
            const auto n = std::uint32_t(nodes.size());
            ids.emplace(k, n);
            nodes.push_back(k);
            return n;
        };
        bool count_free = true;
        const auto note = [&](const earley_item& x) {
            const auto& r = a.rules[a.states[x.state].rule];
            count_free = count_free && !((r.counted || r.units) && x.count < r.min);
        };
        constexpr std::uint32_t none = ~std::uint32_t(0);
        std::vector<std::string> lines;
        for (const auto& x : m_kernel)
        {
            note(x);
            std::string line;
            put_item(line, x);
            put32(line, matcher::is_context(x.origin) ? none : node_of(x.origin, a.states[x.state].rule));
            lines.push_back(std::move(line));
        }
        std::sort(lines.begin(), lines.end());
        lines.erase(std::unique(lines.begin(), lines.end()), lines.end());
        std::string records;
        for (std::size_t n = 0; n < nodes.size(); ++n)  // grows as parents are found
        {
            const auto set = std::uint32_t(nodes[n] >> 32), rule = std::uint32_t(nodes[n]);
            std::string entries;
            std::uint32_t count = 0;
            for (const earley_item* y = m_matcher.set_begin(set); y != m_matcher.set_end(set); ++y)
            {
                if (!m_matcher.can_read(*y))
                {
                    continue;
                }
                const auto& ys = a.states[y->state];
                for (std::uint32_t e = ys.edges_begin; e < ys.edges_end; ++e)
                {
                    if (a.edges[e].rule != rule)
                    {
                        continue;
                    }
                    const earley_item t{a.edges[e].target, y->origin, y->count};
                    note(t);
                    put_item(entries, t);
                    put32(entries, matcher::is_context(y->origin) ? none : node_of(y->origin, ys.rule));
                    ++count;
                }
            }
            records += char(set == 0 && rule == a.root);  // the text may end here
            put32(records, count);
            records += entries;
        }
        m_ctx_count_free = count_free;
        std::string out;
        put32(out, std::uint32_t(key.size()));
        out += key;
        put32(out, std::uint32_t(lines.size()));
        for (const auto& l : lines)
        {
            out += l;
        }
        put32(out, std::uint32_t(nodes.size()));
        out += records;
        key = std::move(out);
    }

    /// The kernel's items, one per group.
    inline std::vector<earley_item> constraint::kernel_reps() const
    {
        std::vector<earley_item> reps;
        for (const std::uint32_t i : m_rep)
        {
            reps.push_back(m_kernel[i]);
        }
        return reps;
    }

    inline matcher constraint::local_chart(const std::vector<earley_item>& reps) const
    {
        std::vector<std::uint32_t> groups(reps.size());
        std::iota(groups.begin(), groups.end(), 0u);
        matcher m(m_matcher.shared_rules(), reps, groups);
        m.check_distinct(false);  // (its walks repeat() and are cached by positions: the grammar without the marks)
        return m;
    }
}

#endif
