// xsampler/detail/constraint_walk.hpp — the vocabulary's trie walked through a local chart. (xsampler, BSD-3-Clause)
//
// constraint::walk_local: depth first over the trie, a byte a step of the
// chart; a set of one plain item (plain, plain_step) is a table look-up;
// a byte that leads a set to its own class (set_classes: a name's next
// letter) is not stepped; a run of a looping state's bytes is read by its
// tokens (vocabulary_index::mark_run). Returns the subtrees that die after
// a kernel rule finished (the context's to walk).
#ifndef XSAMPLER_DETAIL_CONSTRAINT_WALK_HPP
#define XSAMPLER_DETAIL_CONSTRAINT_WALK_HPP

#include <algorithm>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "constraint_state.hpp"

namespace xsampler
{
    /// Whether the set {x} is x alone once closed: no rule edge to
    /// predict, and nothing to complete (inside a string, a name) or
    /// what completes is a kernel item, whose end only pops (a string
    /// of maxLength that may end here).
    inline bool constraint::plain(const grammar_automaton& a, const earley_item& x) noexcept
    {
        const auto& st = a.states[x.state];
        if (st.edges_begin != st.edges_end)
        {
            return false;
        }
        // a kernel item that may only end (its iterations all done) is not:
        // the fast path holds readable items, so stepping one never asks
        return matcher::is_context(x.origin) ? matcher::can_read(a, x) : !matcher::completes(a, x);
    }

    /// The one item after x reads b, when the set it makes is that item
    /// alone and plain (then true, and y is it); false otherwise (dead,
    /// or a set the chart must close).
    inline bool constraint::plain_step(const grammar_automaton& a, const earley_item& x, unsigned char b, earley_item& y, bool& dead) noexcept
    {
        const std::int32_t t = a.next(x.state, b);
        dead = t < 0;
        if (dead)
        {
            return false;
        }
        y = {std::uint32_t(t), x.origin, x.count};
        if (!a.counts(x.state, y.state, y.count))
        {
            dead = true;
            return false;
        }
        const auto& st = a.states[y.state];
        const auto& r = a.rules[st.rule];
        if (r.counted && st.accepting)
        {
            if (st.reads)
            {
                return false;  // two items: the iteration goes on, the next begins
            }
            if (r.max != grammar::unbounded && y.count >= r.max)
            {
                dead = true;
                return false;
            }
            y.state = r.start;
            y.count = r.max == grammar::unbounded ? std::min<std::uint32_t>(y.count + 1, std::uint32_t(r.min))
                                                  : y.count + 1;
        }
        return plain(a, y);
    }

    /// Classes of the chart's sets a walk meets, by what decides their
    /// future: their items, with origin `here` for those begun in the set
    /// itself, and the set that the latest other origin names (its
    /// generation: the chart below it is then the same too). Two sets of a
    /// class read every text alike. A class is made where a byte leads a
    /// set to a set equal to it (a name's next letter, a number's next
    /// digit); a set met later with its key joins it (the same name begun
    /// by another letter). Per class and byte the walk notes where the byte
    /// leads (dead, the class again, another), and reads a byte that leads
    /// back without a step.
    struct constraint::set_classes
    {
        static constexpr std::uint32_t here = matcher::context - matcher::max_groups;
        static constexpr std::int32_t none = -1;
        static constexpr std::uint8_t unknown = 0, dead = 1, same = 2, other = 3;  // what a byte leads to
        /// A set's key: a hash of its items (in any order) and its `below`.
        struct key
        {
            std::uint64_t hash;
            std::uint32_t below;
            std::uint32_t size;
            bool operator==(const key& o) const noexcept
            {
                return hash == o.hash && below == o.below && size == o.size;
            }
        };
        struct entry
        {
            key k;
            std::int32_t chain;  // the next class of the same hash
            std::vector<earley_item> items;  // sorted, origin `here` for the set's own
            std::array<std::uint8_t, 256> next{};
            std::int32_t runs = unresolved;  // compiled_grammar::runs read through it, or none
        };
        static constexpr std::int32_t unresolved = -2;
        std::vector<entry> classes;
        std::unordered_map<std::uint64_t, std::int32_t> by_hash;
        std::vector<earley_item> scratch;
        const std::vector<std::uint8_t>* looping = nullptr;  // compiled_grammar::looping()
        static constexpr std::size_t max_classes = 1 << 12;

        /// Whether the chart's current set may be in a class: some item's
        /// state may be itself again (a class is made of a set and its child).
        bool may_loop(const matcher& m) const noexcept
        {
            for (const earley_item* x = m.begin(); x != m.end(); ++x)
            {
                if ((*looping)[x->state] != 0)
                {
                    return true;
                }
            }
            return false;
        }

        static std::uint64_t mix(std::uint64_t h) noexcept
        {
            h ^= h >> 31;
            h *= 0x7FB5D329728EA185ull;
            h ^= h >> 27;
            h *= 0x81DADEF4BC2DD44Dull;
            return h ^ (h >> 33);
        }
        /// The key of the chart's current set, in a walk begun at position
        /// `base` (generation[k]: the set at depth k).
        static key key_of(const matcher& m, std::size_t base, const std::vector<std::uint32_t>& generation) noexcept
        {
            const auto self = std::uint32_t(m.position());
            std::uint32_t latest = 0;
            bool any = false;
            std::uint64_t sum = 0;
            for (const earley_item* x = m.begin(); x != m.end(); ++x)
            {
                std::uint32_t origin = x->origin;
                if (origin == self)
                {
                    origin = here;
                }
                else if (!matcher::is_context(origin) && origin >= base)
                {
                    latest = any ? std::max(latest, origin) : origin;
                    any = true;
                }
            // (a sum of products: cheap, in any order; equal keys are then compared item by item)
            sum += std::uint64_t(x->state) * 0x9E3779B97F4A7C15ull + std::uint64_t(origin) * 0xC2B2AE3D27D4EB4Full +
                   std::uint64_t(x->count) * 0x165667B19E3779F9ull;
            }
            const std::uint32_t below = any ? generation[latest - base] : ~std::uint32_t(0);
            return {mix(sum ^ mix(below)), below, std::uint32_t(m.items())};
        }
        /// Set k's items, sorted, its own origin `here` (in scratch).
        const std::vector<earley_item>& canonical(const matcher& m, std::size_t k)
        {
            const auto self = std::uint32_t(k);
            scratch.assign(m.set_begin(k), m.set_end(k));
            for (earley_item& x : scratch)
            {
                x.origin = x.origin == self ? here : x.origin;
            }
            std::sort(scratch.begin(), scratch.end(), [](const earley_item& p, const earley_item& q) {
                return std::tie(p.state, p.origin, p.count) < std::tie(q.state, q.origin, q.count);
            });
            return scratch;
        }
        /// The class of the current set (key k), if there is one.
        std::int32_t find(const matcher& m, const key& k)
        {
            const auto found = by_hash.find(k.hash);
            if (found == by_hash.end())
            {
                return none;
            }
            bool sorted = false;
            for (std::int32_t c = found->second; c != none; c = classes[std::size_t(c)].chain)
            {
                const entry& e = classes[std::size_t(c)];
                if (!(e.k == k))
                {
                    continue;
                }
                if (!sorted)
                {
                    canonical(m, m.position());
                    sorted = true;
                }
                if (e.items == scratch)
                {
                    return c;
                }
            }
            return none;
        }
        /// The class of the chart's current set (cls, its key k_cls), read by
        /// byte b from the set before it (of class k or none; `parent` its
        /// class, -2 where not computed, k_parent its key), in a walk begun
        /// at `base`: notes where b leads from class k, or makes a class
        /// where it leads a set to itself. Whether the set has a class.
        bool classify(const matcher& m, std::size_t base, const std::vector<std::uint32_t>& generation,
                      unsigned char b, std::int32_t k, std::int32_t& cls, key& k_cls, std::int32_t& parent,
                      const key& k_parent)
        {
            if (!may_loop(m))
            {
                cls = none;
                k_cls = {};  // (no set's: every set has items)
                if (k >= 0)
                {
                    classes[std::size_t(k)].next[b] = other;
                }
                return false;
            }
            k_cls = key_of(m, base, generation);
            cls = find(m, k_cls);
            std::int32_t c = none;
            if (k >= 0)
            {
                classes[std::size_t(k)].next[b] = cls == k ? same : other;
            }
            else if (cls == none && parent >= none && k_cls == k_parent && again(m, m.position() - 1, k_cls, c))
            {
                parent = cls = c;  // the set again: a class for both
                classes[std::size_t(c)].next[b] = same;
            }
            return cls >= 0;
        }
        /// Whether the current set is set `parent` again (keys equal: then
        /// a class for both, in `c`; none past max_classes).
        bool again(const matcher& m, std::size_t parent, const key& k, std::int32_t& c)
        {
            canonical(m, parent);
            std::vector<earley_item> first = scratch;
            if (canonical(m, m.position()) != first || classes.size() >= max_classes)
            {
                return false;
            }
            const auto found = by_hash.find(k.hash);
            classes.push_back({k, found == by_hash.end() ? none : found->second, scratch, {}});
            c = std::int32_t(classes.size() - 1);
            by_hash[k.hash] = c;
            return true;
        }
    };

    template <class OnToken, class OnRun>
    inline std::vector<std::uint32_t> constraint::walk_local(matcher& local, OnToken&& on_token, const std::vector<resume>* starts, OnRun&& on_run) const
    {
        const vocabulary_index& ix = m_g->index();
        const grammar_automaton& a = local.rules();
        std::vector<std::uint32_t> roots;
        const std::size_t depths = ix.longest() + 2;
        struct depth
        {
            std::uint8_t popped = 0;  // a kernel rule finished at depth 1..d
            std::uint8_t virt = 0;    // depth d > real is the chart's top set again (its class's)
            std::int32_t cls = -2;    // the class of the chart's set at depth d (-2: not computed)
            set_classes::key key{};   // its key, where cls is computed
        };
        std::vector<depth> at(depths);
        std::vector<earley_item> single(depths);      // depth d > real, not virtual: its one plain item
        std::string path(depths, '\0');                // the bytes read, by depth - 1
        std::size_t real = 0;                          // the chart holds depths 0..real
        std::vector<std::uint32_t> generation(depths, 0);  // of the chart's set at each depth
        std::uint32_t sets_made = 0;
        constexpr std::int32_t unclassified = -2;
        set_classes classes;
        classes.looping = &m_g->looping();
        const std::size_t base = local.position();
        std::size_t stepped = 0, repeated = 0, looked_up = 0;
        // steps since a set last found a class: past max_drought the walk stops
        // looking (a string's text counts its bytes: no set is one seen before)
        std::size_t drought = 0;
        constexpr std::size_t max_drought = 2048;
        // node i at depth d dies: the subtree after it is skipped, and is the
        // context's to walk if a kernel rule finished above it
        const auto dies = [&](std::uint32_t i, std::size_t d) {
            if (at[d - 1].popped)
            {
                roots.push_back(i);
            }
            return ix.end(i);
        };
        std::size_t indexed = 0;
        // class k's class_runs, every byte of it resolved as leading back
        // (stepped from the chart's top, a set of class k), or nullptr
        const auto runs_of = [&](std::int32_t k) -> const class_runs* {
            if (classes.classes[std::size_t(k)].runs == set_classes::unresolved)
            {
                classes.classes[std::size_t(k)].runs = set_classes::none;
                for (std::size_t n = 0; n < classes.classes[std::size_t(k)].items.size(); ++n)
                {
                    const std::int32_t r = m_g->run_of(classes.classes[std::size_t(k)].items[n].state);
                    if (r < 0)
                    {
                        continue;
                    }
                    const std::bitset<256>& bytes = m_g->runs(r).first;
                    bool all = true;
                    for (unsigned b = 0; b < 256 && all; ++b)
                    {
                        if (!bytes[b])
                        {
                            continue;
                        }
                        auto& next = classes.classes[std::size_t(k)].next;
                        if (next[b] == set_classes::unknown)
                        {
                            ++stepped;
                            if (!local.step(static_cast<unsigned char>(b)))
                            {
                                next[b] = set_classes::dead;
                            }
                            else
                            {
                                generation[real + 1] = ++sets_made;
                                std::int32_t cls = unclassified, parent = k;
                                set_classes::key key{};
                                classes.classify(local, base, generation, static_cast<unsigned char>(b), k, cls, key,
                                                 parent, at[real].key);
                                local.pop(1);
                            }
                        }
                        all = classes.classes[std::size_t(k)].next[b] == set_classes::same;
                    }
                    if (all)
                    {
                        classes.classes[std::size_t(k)].runs = r;
                        break;
                    }
                }
            }
            const std::int32_t r = classes.classes[std::size_t(k)].runs;
            return r >= 0 ? m_g->runs(r).second.get() : nullptr;
        };
        const auto walk = [&](const auto& self, std::uint32_t first, std::uint32_t last) -> void {
        for (std::uint32_t i = first; i < last;)
        {
            const std::size_t d = ix.depth(i);
            const unsigned char b = ix.byte(i);
            path[d - 1] = char(b);
            if (real > d - 1)
            {
                local.pop(real - (d - 1));
                real = d - 1;
            }
            const earley_item* one = nullptr;
            if (d - 1 > real && !at[d - 1].virt)
            {
                one = &single[d - 1];
            }
            else if (d - 1 == real && local.items() == 1 && plain(a, *local.begin()))
            {
                one = local.begin();
            }
            if (one != nullptr)
            {
                earley_item y{};
                bool dead = false;
                const bool easy = plain_step(a, *one, b, y, dead);
                if (dead)
                {
                    i = dies(i, d);
                    continue;
                }
                if (easy)
                {
                    ++looked_up;
                    single[d] = y;
                    at[d].virt = 0;
                    at[d].popped = std::uint8_t(at[d - 1].popped | std::uint8_t(matcher::pops(a, y)));
                    on_token(i, at[d - 1].popped != 0, &single[d], &single[d] + 1, generation, no_set);
                    ++i;
                    continue;
                }
                for (std::size_t k = real + 1; k < d; ++k)  // fill in the chart up to the parent
                {
                    local.step(static_cast<unsigned char>(path[k - 1]));
                    generation[k] = ++sets_made;
                    at[k].cls = unclassified;
                }
                real = d - 1;
            }
            // the parent's set: the chart's top, or (virtual) a set of its class
            if (at[real].cls == unclassified && drought < max_drought)
            {
                at[real].cls = set_classes::none;
                at[real].key = {};  // (no set's: every set has items)
                if (classes.may_loop(local))
                {
                    at[real].key = set_classes::key_of(local, base, generation);
                    at[real].cls = classes.find(local, at[real].key);
                }
            }
            const std::int32_t k = at[real].cls >= 0 ? at[real].cls : set_classes::none;
            const std::uint8_t seen = k >= 0 ? classes.classes[std::size_t(k)].next[b] : set_classes::unknown;
            if (seen == set_classes::dead)
            {
                i = dies(i, d);
                continue;
            }
            if (seen == set_classes::same)
            {
                // a run of the class: the nodes below the parent read as the set
                // again while their bytes lead back (a name's letters), in a loop
                // of their own; a byte that leads elsewhere hands its node back
                // to this one, its ancestors in the run virtual
                const std::uint8_t above = at[d - 1].popped;  // before a depth-d node's byte
                const std::uint8_t below = std::uint8_t(above | std::uint8_t(local.popped()));  // deeper
                const std::uint32_t set = generation[real];
                const std::uint32_t stop = d == 1 ? last : std::min(last, ix.end(ix.parent(i)));
                // ancestors of node e below depth d: the set again, for the walk
                const auto hand_back = [&](std::uint32_t e) {
                    for (std::uint32_t u = ix.parent(e); u != vocabulary_index::none && ix.depth(u) >= d; u = ix.parent(u))
                    {
                        const std::size_t du = ix.depth(u);
                        at[du].virt = 1;
                        at[du].popped = below;
                        path[du - 1] = char(ix.byte(u));
                    }
                };
                if constexpr (!std::is_same<std::decay_t<OnRun>, no_runs>::value)
                {
                    const class_runs* r = d < class_runs::deepest ? runs_of(k) : nullptr;
                    if (r != nullptr)
                    {
                        // the run's tokens at once; then where a byte leaves the
                        // index's class: dead, a byte of the class's all the same
                        // (its tokens, and a run below it), or the walk's, its
                        // subtree walked from the chart as the run found it
                        ++indexed;
                        std::uint64_t* words = on_run(local.begin(), local.end(), set);
                        const std::size_t real0 = real;
                        const auto run = [&](const auto& again, std::uint32_t from, std::uint32_t to, std::size_t depth) -> void {
                            if (words != nullptr)
                            {
                                ix.mark_run(*r, from, to, depth, words);
                            }
                            for (std::uint32_t e = r->next_out[from]; e < to; e = r->next_out[ix.end(e)])
                            {
                                const std::size_t de = ix.depth(e);
                                const std::uint8_t leads = classes.classes[std::size_t(k)].next[ix.byte(e)];
                                if (leads == set_classes::same && de < class_runs::deepest)  // (deeper: the walk, whose runs start above it)
                                {
                                    if (words != nullptr)
                                    {
                                        ix.mark_tokens(e, words);
                                    }
                                    again(again, e + 1, ix.end(e), de + 1);
                                }
                                else if (leads == set_classes::dead)
                                {
                                    if ((de == d ? above : below) != 0)
                                    {
                                        roots.push_back(e);
                                    }
                                }
                                else
                                {
                                    if (real > real0)
                                    {
                                        local.pop(real - real0);
                                        real = real0;
                                    }
                                    hand_back(e);
                                    self(self, e, ix.end(e));
                                }
                            }
                        };
                        run(run, i, stop, d);
                        i = stop;
                        continue;
                    }
                }
                const auto& next = classes.classes[std::size_t(k)].next;  // (taken here: runs_of may step and classify)
                std::uint32_t j = i;
                std::size_t run = 0;
                while (j < stop)
                {
                    const std::uint8_t to = next[ix.byte(j)];
                    const bool popped = (above == below ? above : ix.depth(j) == d ? above : below) != 0;
                    if (to == set_classes::same)
                    {
                        on_token(j, popped, local.begin(), local.end(), generation, set);
                        ++j;
                        ++run;
                    }
                    else if (to == set_classes::dead)
                    {
                        if (popped)
                        {
                            roots.push_back(j);
                        }
                        j = ix.end(j);
                    }
                    else
                    {
                        hand_back(j);
                        break;
                    }
                }
                repeated += run;
                i = j;
                continue;
            }
            for (std::size_t j = real + 1; j < d; ++j)  // a virtual parent: its sets in the chart
            {
                local.repeat();
                generation[j] = ++sets_made;
                at[j].cls = k;
                at[j].key = at[real].key;
            }
            real = d - 1;
            ++stepped;
            if (!local.step(b))
            {
                if (k >= 0)
                {
                    classes.classes[std::size_t(k)].next[b] = set_classes::dead;
                }
                i = dies(i, d);
                continue;
            }
            real = d;
            generation[d] = ++sets_made;
            at[d].cls = unclassified;
            if (ix.end(i) > i + 1 && drought < max_drought)  // (a leaf's class would not be used)
            {
                drought = classes.classify(local, base, generation, b, k, at[d].cls, at[d].key, at[d - 1].cls, at[d - 1].key) ? 0 : drought + 1;
            }
            at[d].popped = std::uint8_t(at[d - 1].popped | std::uint8_t(local.popped()));
            on_token(i, at[d - 1].popped != 0, local.begin(), local.end(), generation, generation[d]);
            ++i;
        }
        };
        if (starts == nullptr)
        {
            walk(walk, 0, std::uint32_t(ix.nodes()));
            m_g->note_walk(stepped, repeated, looked_up, indexed);
            return roots;
        }
        std::string want(depths, '\0');
        for (const resume& r : *starts)
        {
            const std::size_t d = ix.depth(r.node);
            std::uint32_t up = ix.parent(r.node);
            for (std::size_t k = d - 1; k >= 1; --k, up = ix.parent(up))
            {
                want[k - 1] = char(ix.byte(up));
            }
            std::size_t keep = 0;  // the chart's sets on the node's way down stay (starts in preorder share them)
            while (keep < real && keep + 1 < d && path[keep] == want[keep])
            {
                ++keep;
            }
            local.pop(real - keep);
            real = keep;
            std::copy(want.begin(), want.begin() + std::ptrdiff_t(d - 1), path.begin());
            bool live = true;
            if (r.chart)
            {
                for (std::size_t k = real + 1; k < d && live; ++k)
                {
                    live = local.step(static_cast<unsigned char>(path[k - 1]));
                    if (live)
                    {
                        real = k;
                        generation[k] = ++sets_made;
                        at[k].cls = unclassified;
                        at[k].popped = std::uint8_t(at[k - 1].popped | std::uint8_t(local.popped()));
                    }
                }
            }
            else if (d > 1)
            {
                single[d - 1] = r.before;  // (at depth 1, the set itself: `before` is its item)
                at[d - 1].virt = 0;
                at[d - 1].popped = 0;         // nothing ends inside a region (an earlier exit's may have)
            }
            if (live)  // (a chart that dies above the node: the region said it would not)
            {
                walk(walk, r.node, ix.end(r.node));
            }
        }
        m_g->note_walk(stepped, repeated, looked_up, indexed);
        return roots;
    }
}

#endif
