// xsampler/detail/pending_top_k.hpp — a fused top-k's pending state, owned by candidates. (xsampler, BSD-3-Clause)
//
// Fused top-k (candidates::load(row, k)): the validation pass also selects L,
// the selector's list left untrimmed (at least the top k + margin of the raw
// row; every token outside it ranks after all of it; margin = |L| - k, the
// slack the selection leaves at no cost, or unbounded when L holds every
// unmasked token), and a keep_top(k) is pending. While it is, set_logit and
// mask patch the row as on a dense set and update L (an edited token outside
// L joins it), reads of logits, the max and the argmax are exact, and
// divide_scale, keep_argmax and keep_top(j <= k) run on L (keep_top drops the
// masked items, then selects), and so does a keep_in when that is exact
// (keep_in below). Exact: a token neither in L nor edited ranks
// below every member of L that no edit lowered, so while at most `margin`
// members of L were lowered, the edited row's top k lies in the list. One
// more lowering edit, or any other verb or reader of the kept set (size,
// for_each_by_id, total_weight, items, ...), first "unfuses": the set becomes
// the dense set of the edited row, exactly as if the row had been loaded
// unfused and then edited.
//
// This class keeps the bookkeeping of that state; the list L itself stays the
// candidates' item list (passed in by reference: its order is observable), and
// the patched row, the max and the set's own flags stay candidates'.
#ifndef XSAMPLER_DETAIL_PENDING_TOP_K_HPP
#define XSAMPLER_DETAIL_PENDING_TOP_K_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "../row.hpp"
#include "../types.hpp"
#include "top_select.hpp"

namespace xsampler
{
    namespace detail
    {
        template <class T>
        class pending_top_k
        {
        public:
            /// Whether a keep_top(k) is pending, and its k.
            bool active() const noexcept { return m_k != 0; }
            std::size_t k() const noexcept { return m_k; }
            /// A keep_in applied to L only (the step's mask), or null.
            const token_set* mask() const noexcept { return m_mask; }
            /// Whether a pending keep_in left token i out of the set.
            bool masks_out(std::size_t i) const noexcept { return m_mask != nullptr && !m_mask->contains(token_id(i)); }

            /// Validation and the selection of the top k + margin in one
            /// pass over the row, into `items` (L, untrimmed); k is then
            /// pending. False if the row is invalid (nothing pending).
            bool select(const stored_row<T>& row, std::size_t k, std::size_t margin, std::vector<scored<T>>& items)
            {
                row_watch<T> watch;
                top_selector<T> select(margin < row.size - k ? k + margin : row.size, items);
                row.visit([&](const auto* x) { select.feed(x, row.size, 0, watch); });  // not finished: keep_top trims
                if (!watch.valid())
                {
                    return false;
                }
                // The selector's list is not trimmed: every token outside it ranks
                // after all of it, so it survives as many lowering edits as it
                // holds tokens beyond k (at least `margin`), and any number when
                // it holds every unmasked token (the threshold never rose).
                m_k = k;
                m_listed = items.size();
                m_margin = select.threshold() == -std::numeric_limits<T>::infinity()
                               ? std::numeric_limits<std::size_t>::max()
                               : std::max(margin, m_listed - std::min(m_listed, k));
                return true;
            }

            /// Whether token i is in L (an edited token that joined it
            /// included); the list must be indexed (index()).
            bool listed(std::size_t i) const noexcept { return (m_listed_bits[i / 64] >> (i % 64) & 1) != 0; }

            /// Token i (not masked out) went from old to x, the row already
            /// patched: the list follows the edit. True when more members of
            /// L were lowered than the margin: the caller must unfuse.
            bool edited(std::size_t i, T old, T x, std::vector<scored<T>>& items, std::size_t vocab)
            {
                index(items, vocab);
                if (listed(i))
                {
                    const std::size_t at = m_listed_at[i];
                    items[at].logit = x;  // a masked item stays, dropped by keep_top
                    m_lowered += at < m_listed && x < old;
                }
                else if (x > old && (m_mask == nullptr || m_mask->contains(token_id(i))))
                {
                    // Outside L, raised (and not masked by a pending keep_in): it may
                    // have risen into the top k (one lowered stays below every
                    // unlowered member of L).
                    m_listed_bits[i / 64] |= std::uint64_t(1) << (i % 64);
                    m_listed_at[i] = std::uint32_t(items.size());
                    items.push_back({x, token_id(i)});
                }
                return m_lowered > m_margin;  // the top k may now lie outside the list
            }

            /// keep_in on the pending list: L becomes L ∩ allowed when the
            /// edited, masked row's top k still lies in it (L holds every
            /// unmasked token, or L ∩ allowed keeps k members that no edit
            /// lowered: every allowed token outside L ranks after those), in
            /// O(|L|); false (nothing changed) otherwise. `allowed` must
            /// outlive the pending state, unchanged (an unfuse applies it).
            bool keep_in(const token_set& allowed, std::vector<scored<T>>& items)
            {
                if (m_mask != nullptr)
                {
                    return false;  // one mask at a time: a second one unfuses
                }
                const bool every_token = m_margin == std::numeric_limits<std::size_t>::max();
                std::size_t in_list = 0, unmasked = 0;
                for (std::size_t j = 0; j < items.size(); ++j)
                {
                    const bool in = allowed.contains(items[j].id);
                    in_list += j < m_listed && in;
                    unmasked += in && items[j].logit != -std::numeric_limits<T>::infinity();
                }
                // None allowed and unmasked: the unfused path throws, the set as it was.
                if (in_list == 0 || unmasked == 0 || (!every_token && in_list < m_k + m_lowered))
                {
                    return false;
                }
                clear_index(items);  // positions change: indexed again at the next edit
                std::size_t kept = 0;
                for (std::size_t j = 0; j < items.size(); ++j)
                {
                    if (allowed.contains(items[j].id))
                    {
                        items[kept++] = items[j];
                    }
                }
                items.resize(kept);
                m_listed = in_list;
                if (!every_token)
                {
                    m_margin = in_list - m_k;
                }
                m_mask = &allowed;
                return true;
            }

            /// Ends the pending state (the list is left as it is). `items`
            /// must still be the list: the bits of its ids are cleared.
            void end(const std::vector<scored<T>>& items) noexcept
            {
                clear_index(items);
                m_k = 0;
                m_lowered = 0;
                m_mask = nullptr;
            }

            /// Indexes the list at its first edit: a bit per listed id and
            /// its position (buffers grown once to the vocabulary; the bits
            /// are all clear between pending states).
            void index(const std::vector<scored<T>>& items, std::size_t vocab)
            {
                if (m_indexed)
                {
                    return;
                }
                const std::size_t words = vocab / 64 + 1;
                if (m_listed_bits.size() < words)
                {
                    m_listed_bits.resize(words, 0);
                }
                if (m_listed_at.size() < vocab)
                {
                    m_listed_at.resize(vocab);
                }
                for (std::size_t j = 0; j < items.size(); ++j)
                {
                    const auto id = std::size_t(items[j].id);
                    m_listed_bits[id / 64] |= std::uint64_t(1) << (id % 64);
                    m_listed_at[id] = std::uint32_t(j);
                }
                m_indexed = true;
            }

        private:
            /// Clears the bits of the listed ids only.
            void clear_index(const std::vector<scored<T>>& items) noexcept
            {
                if (m_indexed)
                {
                    for (const auto& item : items)
                    {
                        m_listed_bits[std::size_t(item.id) / 64] = 0;
                    }
                    m_indexed = false;
                }
            }

            std::size_t m_k = 0;        // k, or 0 when none is pending
            std::size_t m_margin = 0;   // lowering edits of L it survives
            std::size_t m_listed = 0;   // L = items[0, m_listed); edited tokens follow
            std::size_t m_lowered = 0;  // edits that lowered a member of L
            bool m_indexed = false;     // m_listed_bits / m_listed_at hold the list
            const token_set* m_mask = nullptr;         // a keep_in applied to L only
            std::vector<std::uint64_t> m_listed_bits;  // per id: in the list (all clear otherwise)
            std::vector<std::uint32_t> m_listed_at;    // per listed id: its position in the list
        };
    }
}

#endif
