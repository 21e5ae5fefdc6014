// xsampler/detail/subset_check.hpp — checks a list a stage computed against the kept set (candidates::keep_subset). (xsampler, BSD-3-Clause)
//
// A stage with its own selection (top_p's nucleus, typical's interval, top_h)
// hands candidates the tokens to keep as a list; before the set takes it, each
// entry must be a token of the set, with the logit the set holds, listed once.
// On a dense set a list in increasing id order is checked in one pass (an
// unedited row read directly: this check is the cost of committing a nucleus
// of thousands); any other list through a bitmap over the vocabulary, left
// all clear after every call.
#ifndef XSAMPLER_DETAIL_SUBSET_CHECK_HPP
#define XSAMPLER_DETAIL_SUBSET_CHECK_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "../types.hpp"
#include "edited_row.hpp"
#include "scratch_store.hpp"

namespace xsampler
{
    namespace detail
    {
        template <class T>
        class subset_check
        {
        public:
            struct verdict
            {
                std::size_t bad;  // the first entry that fails, or the list's size
                bool by_id;       // dense set: the list is in increasing id order (when nothing failed)
                bool has_best;    // the list holds the token `best` (when nothing failed)
            };

            /// Checks `kept` against the set: the dense set of `row` (every
            /// token with a finite current logit) when items is null, else
            /// the tokens of *items (whose logits the row's agree with).
            verdict operator()(const std::vector<scored<T>>& kept, const edited_row<T>& row,
                               const std::vector<scored<T>>* items, token_id best)
            {
                const std::size_t n = row.size();
                const bool dense = items == nullptr;
                verdict v{kept.size(), dense, false};
                if (dense)
                {
                    const auto in_order = [&](auto&& current) {
                        token_id last = -1;
                        for (std::size_t j = 0; j < kept.size(); ++j)
                        {
                            const auto& t = kept[j];
                            if (!(t.id > last))
                            {
                                v.by_id = false;
                                return;
                            }
                            if (!(std::size_t(t.id) < n && t.logit == current(std::size_t(t.id)) && t.logit != -inf))
                            {
                                v.bad = j;
                                return;
                            }
                            last = t.id;
                        }
                    };
                    if (!row.edited())
                    {
                        row.loaded().visit([&](const auto* x) { in_order([x](std::size_t i) { return T(x[i]); }); });
                    }
                    else
                    {
                        in_order([&row](std::size_t i) { return row.logit(i); });
                    }
                    v.has_best = v.by_id && v.bad == kept.size() &&
                                 std::binary_search(kept.begin(), kept.end(), scored<T>{T(0), best},
                                                    [](const scored<T>& l, const scored<T>& r) { return l.id < r.id; });
                    if (v.by_id)
                    {
                        return v;
                    }
                }
                // Dense: the bits mark the tokens listed so far; sparse: the
                // set's tokens not yet listed.
                std::uint64_t* bits = grown(m_bits, n / 64 + 1);
                const auto flip = [&](std::size_t i) { bits[i / 64] ^= std::uint64_t(1) << (i % 64); };
                const auto has = [&](std::size_t i) { return (bits[i / 64] >> (i % 64) & 1) != 0; };
                const auto flip_items = [&] {
                    for (std::size_t j = 0; !dense && j < items->size(); ++j)
                    {
                        flip(std::size_t((*items)[j].id));
                    }
                };
                flip_items();
                for (std::size_t j = 0; j < kept.size(); ++j)
                {
                    const auto& t = kept[j];
                    const bool valid = t.id >= 0 && std::size_t(t.id) < n && t.logit == row.logit(std::size_t(t.id)) &&
                                       t.logit != -inf;
                    if (!valid || has(std::size_t(t.id)) == dense)
                    {
                        v.bad = j;
                        break;
                    }
                    flip(std::size_t(t.id));
                    v.has_best = v.has_best || t.id == best;
                }
                for (std::size_t j = 0; j < v.bad; ++j)  // the bits back to all clear
                {
                    flip(std::size_t(kept[j].id));
                }
                flip_items();
                return v;
            }

        private:
            static constexpr T inf = std::numeric_limits<T>::infinity();
            std::vector<std::uint64_t> m_bits;  // all clear between calls
        };
    }
}

#endif
