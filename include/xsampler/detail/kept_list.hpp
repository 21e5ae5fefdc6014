// xsampler/detail/kept_list.hpp — a sparse kept set's list of (logit, id), owned by candidates. (xsampler, BSD-3-Clause)
//
// Once a filter truncates, candidates hold the kept tokens as a list: in no
// particular order unless rank_sorted() (rank: logit descending, id
// ascending) or id_sorted() says so. The list's order is observable
// (candidates::items()), so every operation here says what it does to it.
// Walks in id order sort a short list (at most 512 tokens: it stays sorted by
// id) and read a long one through a bitmap of its ids (O(n + V/64), no sort),
// built once per change of the list.
#ifndef XSAMPLER_DETAIL_KEPT_LIST_HPP
#define XSAMPLER_DETAIL_KEPT_LIST_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "../types.hpp"
#include "edited_row.hpp"
#include "simd.hpp"

namespace xsampler
{
    namespace detail
    {
        template <class T>
        class kept_list
        {
        public:
            using list = std::vector<scored<T>>;

            /// The tokens; a caller that changes them calls changed() after.
            list& tokens() noexcept { return m_items; }
            const list& tokens() const noexcept { return m_items; }
            std::size_t size() const noexcept { return m_items.size(); }
            bool rank_sorted() const noexcept { return m_rank_sorted; }
            bool id_sorted() const noexcept { return m_id_sorted; }

            /// Room for a row of `vocab` tokens (grown once: no allocation per token).
            void reserve(std::size_t vocab)
            {
                m_items.reserve(vocab);
                m_bits.reserve(vocab / 64 + 1);
            }
            /// The tokens changed (by the caller, through tokens()); the
            /// order they are now known to be in.
            void changed(bool rank_sorted, bool id_sorted) noexcept
            {
                m_bits_valid = false;
                m_rank_sorted = rank_sorted;
                m_id_sorted = id_sorted;
            }
            void assign(const scored<T>* first, std::size_t n, bool rank_sorted, bool id_sorted)
            {
                m_items.assign(first, first + n);
                changed(rank_sorted, id_sorted);
            }

            /// The best-ranked token (ties: the lowest id); the list is not empty.
            scored<T> best() const { return *std::min_element(m_items.begin(), m_items.end(), ranks_before<T>); }
            /// Keeps the k best-ranked tokens (0 < k < size()), by
            /// std::nth_element: unordered after.
            void keep_best(std::size_t k)
            {
                std::nth_element(m_items.begin(), m_items.begin() + std::ptrdiff_t(k - 1), m_items.end(), ranks_before<T>);
                m_items.resize(k);
                changed(false, false);
            }
            /// The j best-ranked tokens (all if fewer) into out, unordered;
            /// the list unchanged.
            void best_into(std::size_t j, list& out) const
            {
                out.assign(m_items.begin(), m_items.end());
                if (j < out.size())
                {
                    std::nth_element(out.begin(), out.begin() + std::ptrdiff_t(j), out.end(), ranks_before<T>);
                    out.resize(j);
                }
            }

            /// Token id's logit becomes x if it is listed (x == -inf removes
            /// it; the rest keep their order); returns whether it was, with
            /// its old logit in `old`. O(size()).
            bool set(token_id id, T x, T& old)
            {
                const auto it = std::find_if(m_items.begin(), m_items.end(), [&](const scored<T>& s) { return s.id == id; });
                if (it == m_items.end())
                {
                    return false;
                }
                old = it->logit;
                if (x == -std::numeric_limits<T>::infinity())
                {
                    m_items.erase(it);
                }
                else
                {
                    it->logit = x;
                }
                changed(false, m_id_sorted);
                return true;
            }

            /// Calls f(id, logit) for every token in increasing id order, the
            /// logits read from `row` (which agrees with the list).
            template <class F>
            void for_each_by_id(const edited_row<T>& row, F& f)
            {
                if (use_bitmap(row.size()))
                {
                    for (std::size_t w = 0; w < m_bits.size(); ++w)
                    {
                        for_each_in_word(w, row, f);
                    }
                    return;
                }
                for (const auto& item : m_items)
                {
                    f(item.id, item.logit);
                }
            }
            /// The same for the tokens of block b (ids [64b, 64b + 64)).
            template <class F>
            void for_each_in_block(std::size_t b, const edited_row<T>& row, F& f)
            {
                static_assert(block_size == 64, "one bitmap word per block");
                if (use_bitmap(row.size()))
                {
                    for_each_in_word(b, row, f);
                    return;
                }
                const std::size_t lo = b * block_size;
                auto it = std::lower_bound(m_items.begin(), m_items.end(), lo,
                                           [](const scored<T>& s, std::size_t id) { return std::size_t(s.id) < id; });
                for (; it != m_items.end() && std::size_t(it->id) < lo + block_size; ++it)
                {
                    f(it->id, it->logit);
                }
            }

        private:
            template <class F>
            void for_each_in_word(std::size_t w, const edited_row<T>& row, F& f) const
            {
                for_each_bit(m_bits[w], w * 64, [&](std::size_t id) { f(token_id(id), row.logit(id)); });
            }

            // Orders the ids for a walk: a sort for a short list, else a
            // bitmap of the ids. Returns whether the bitmap is the way.
            bool use_bitmap(std::size_t vocab)
            {
                if (m_id_sorted)
                {
                    return false;
                }
                if (m_items.size() <= 512)
                {
                    std::sort(m_items.begin(), m_items.end(),
                              [](const scored<T>& a, const scored<T>& b) { return a.id < b.id; });
                    m_id_sorted = true;
                    m_rank_sorted = m_items.size() <= 1;
                    return false;
                }
                if (!m_bits_valid)
                {
                    m_bits.assign(vocab / 64 + 1, 0);
                    for (const auto& item : m_items)
                    {
                        m_bits[std::size_t(item.id) / 64] |= std::uint64_t(1) << (std::size_t(item.id) % 64);
                    }
                    m_bits_valid = true;
                }
                return true;
            }

            list m_items;
            std::vector<std::uint64_t> m_bits;  // the ids of a long list, while m_bits_valid
            bool m_bits_valid = false;
            bool m_rank_sorted = false;
            bool m_id_sorted = false;
        };
    }
}

#endif
