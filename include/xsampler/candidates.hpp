// xsampler — token samplers for language-model inference. BSD-3-Clause.
//
// The working set a chain of stages passes along.
//
// Contract
// - Tokens are ranked by (logit descending, id ascending). A temperature
//   T > 0 does not change this rank, and in exact arithmetic it is the rank
//   by (probability descending, id ascending): ties are equal logits, and
//   they always break toward the lower id.
// - Every filter keeps a prefix of that rank (top-k, top-p, min-p, and
//   temperature 0, which keeps the argmax), so the kept set is always a
//   prefix and always holds the argmax.
// - The set is dense (every unmasked token whose logit is >= a cut, no ids
//   stored: the state after min-p or no filter at all) or sparse (an explicit
//   list of (logit, id), after top-k, top-p or temperature 0).
// - The temperature is deferred: a scale s (the product of 1/T over the
//   temperature stages run so far) that later stages and the draw fold into
//   the exp, so temperature is never a pass over the row.
// - A candidates object is a reusable workspace: its buffers grow to the
//   vocabulary size once and are reused after, with no allocation per token.
#ifndef XSAMPLER_CANDIDATES_HPP
#define XSAMPLER_CANDIDATES_HPP

#include <algorithm>
#include <cstddef>
#include <limits>
#include <vector>

#include "row.hpp"

namespace xsampler
{
    /// A token with its logit.
    template <class T>
    struct scored
    {
        T logit;
        token_id id;
    };

    /// The rank of the contract: higher logit first, then lower id.
    template <class T>
    bool ranks_before(const scored<T>& a, const scored<T>& b) noexcept
    {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    }

    template <class T>
    class candidates
    {
    public:
        static_assert(std::is_same<T, float>::value || std::is_same<T, double>::value,
                      "xsampler: logits must be float or double");

        /// Start from the whole row: validates it (one pass) and keeps every
        /// unmasked token at scale 1.
        template <class E>
        void load(const xt::xexpression<E>& logits)
        {
            m_row = detail::contiguous_row(logits, m_scratch);
            const auto stats = detail::scan_row(m_row);
            m_items.reserve(m_row.size);  // grow once to the vocabulary: no allocation per token
            m_blocks.reserve(m_row.size / detail::block_size + 1);
            m_max = stats.max;
            m_argmax = stats.argmax;
            m_size = stats.unmasked;
            m_scale = 1.0;
            m_dense = true;
            m_cut = std::numeric_limits<T>::lowest();
            m_items.clear();
            m_sorted = false;
        }

        std::size_t vocab() const noexcept { return m_row.size; }
        const T* row() const noexcept { return m_row.data; }
        T max_logit() const noexcept { return m_max; }
        token_id argmax() const noexcept { return m_argmax; }
        /// Number of kept tokens (always >= 1).
        std::size_t size() const noexcept { return m_size; }
        double scale() const noexcept { return m_scale; }
        bool dense() const noexcept { return m_dense; }
        /// Dense sets: the smallest kept logit bound.
        T cut() const noexcept { return m_cut; }

        /// The scaled log-weight (x - m) * s; 0 for the argmax, <= 0 always.
        double log_weight(T logit) const noexcept { return (double(logit) - double(m_max)) * m_scale; }
        double weight(T logit) const noexcept { return detail::exp_nonpos(log_weight(logit)); }

        /// Divide the logits by t > 0 (deferred). A scale that overflows is
        /// clamped to the largest double: every non-max token then has weight 0.
        void divide_scale(double t) noexcept
        {
            m_scale = std::min(m_scale / t, std::numeric_limits<double>::max());
        }

        /// Keep only the argmax (temperature 0).
        void keep_argmax()
        {
            m_items.assign(1, scored<T>{m_max, m_argmax});
            m_dense = false;
            m_sorted = true;
            m_size = 1;
        }

        /// Dense sets: keep the tokens whose logit is >= cut (cut > the old cut).
        void raise_cut(T cut, std::size_t kept) noexcept
        {
            m_cut = cut;
            m_size = kept;
        }

        /// Turn a dense set into a sparse one (ids ascending). O(V), no
        /// allocation once the buffer has grown.
        void materialise()
        {
            if (!m_dense)
            {
                return;
            }
            m_items.resize(m_size);
            std::size_t n = 0;
            for (std::size_t i = 0; i < m_row.size; ++i)
            {
                if (m_row.data[i] >= m_cut)
                {
                    m_items[n++] = scored<T>{m_row.data[i], token_id(i)};
                }
            }
            m_dense = false;
            m_sorted = false;
        }

        /// Sparse sets: the kept tokens, which a filter may reorder or shrink
        /// (then it calls set_items_changed).
        std::vector<scored<T>>& items() noexcept { return m_items; }
        const std::vector<scored<T>>& items() const noexcept { return m_items; }
        /// Sparse sets: whether items() is in rank order.
        bool sorted() const noexcept { return m_sorted; }
        void set_items_changed(bool sorted) noexcept
        {
            m_size = m_items.size();
            m_sorted = sorted;
        }

        /// Calls f(id, logit) for every kept token in increasing id order
        /// (sorting a sparse set by id first).
        template <class F>
        void for_each_by_id(F&& f)
        {
            if (m_dense)
            {
                for (std::size_t i = 0; i < m_row.size; ++i)
                {
                    if (m_row.data[i] >= m_cut)
                    {
                        f(token_id(i), m_row.data[i]);
                    }
                }
                return;
            }
            std::sort(m_items.begin(), m_items.end(),
                      [](const scored<T>& a, const scored<T>& b) { return a.id < b.id; });
            m_sorted = false;
            for (const auto& item : m_items)
            {
                f(item.id, item.logit);
            }
        }

        /// Calls f(id, logit) for every kept token of block `b` (ids
        /// [64b, 64b + 64)) in increasing id order. Sparse sets must be in id
        /// order (as for_each_by_id leaves them).
        template <class F>
        void for_each_in_block(std::size_t b, F&& f) const
        {
            const std::size_t lo = b * detail::block_size;
            const std::size_t hi = std::min(lo + detail::block_size, m_row.size);
            if (m_dense)
            {
                for (std::size_t i = lo; i < hi; ++i)
                {
                    if (m_row.data[i] >= m_cut)
                    {
                        f(token_id(i), m_row.data[i]);
                    }
                }
                return;
            }
            auto it = std::lower_bound(m_items.begin(), m_items.end(), lo,
                                       [](const scored<T>& s, std::size_t id) { return std::size_t(s.id) < id; });
            for (; it != m_items.end() && std::size_t(it->id) < hi; ++it)
            {
                f(it->id, it->logit);
            }
        }

        /// Z over the kept set at the current scale, in the contract's order.
        double total_weight() { return sum_weights(nullptr); }

        /// Z, also keeping each block's positive share (block_totals()).
        double total_weight_by_block()
        {
            m_blocks.clear();
            return sum_weights(&m_blocks);
        }
        const std::vector<detail::block_total>& block_totals() const noexcept { return m_blocks; }

    private:
        double sum_weights(std::vector<detail::block_total>* record)
        {
            detail::blocked_sum sum(record);
            for_each_by_id([&](token_id id, T logit) { sum.add(std::size_t(id), weight(logit)); });
            return sum.total();
        }

        detail::row_ref<T> m_row{nullptr, 0};
        std::vector<detail::block_total> m_blocks;
        std::vector<T> m_scratch;
        std::vector<scored<T>> m_items;
        T m_max = 0;
        token_id m_argmax = 0;
        std::size_t m_size = 0;
        double m_scale = 1.0;
        T m_cut = std::numeric_limits<T>::lowest();
        bool m_dense = true;
        bool m_sorted = false;
    };
}

#endif
