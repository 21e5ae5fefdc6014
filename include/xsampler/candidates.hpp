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
// - The set is dense (every unmasked token of the row, no ids stored: the
//   state before any filter truncates) or sparse (an explicit list of
//   (logit, id), after top-k, top-p, min-p or temperature 0).
// - The temperature is deferred: a scale s (the product of 1/T over the
//   temperature stages run so far) that later stages and the draw fold into
//   the exp, so temperature is never a pass over the row.
// - A candidates object is a reusable workspace: its buffers grow to the
//   vocabulary size once and are reused after, with no allocation per token.
#ifndef XSAMPLER_CANDIDATES_HPP
#define XSAMPLER_CANDIDATES_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
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

    namespace detail
    {
        /// The k best-ranked unmasked tokens of a row, unordered, into `out`
        /// (all of them if fewer). One pass in id order keeps a threshold tau,
        /// the k-th best logit so far: a later token enters only if its logit
        /// exceeds tau (an equal logit has a higher id, so it ranks below), and
        /// a vector block whose max does not exceed tau is skipped whole. The
        /// buffer is cut back to k by nth_element when it reaches its cap.
        template <class T, class Watch = no_watch>
        void select_top(const T* x, std::size_t n, std::size_t k, std::vector<scored<T>>& out, Watch&& watch = Watch{})
        {
            using B = batch<T>;
            out.clear();
            if (k == 0)
            {
                return;
            }
            const std::size_t cap = std::max<std::size_t>(2 * k, 128);
            T tau = -std::numeric_limits<T>::infinity();
            const auto shrink = [&] {
                std::nth_element(out.begin(), out.begin() + std::ptrdiff_t(k - 1), out.end(), ranks_before<T>);
                out.resize(k);
                tau = out[k - 1].logit;
            };
            const auto take = [&](std::size_t i) {
                if (x[i] > tau)
                {
                    out.push_back({x[i], token_id(i)});
                    if (out.size() == cap)
                    {
                        shrink();
                    }
                }
            };
            // tau may rise inside a group: take() checks again.
            for_each_passing(
                x, n, [&](const B& v) { return v > B(tau); }, [&](T v) { return v > tau; }, take, watch);
            if (out.size() > k)
            {
                shrink();
            }
        }
    }

    template <class T>
    class candidates
    {
    public:
        static_assert(std::is_same<T, float>::value || std::is_same<T, double>::value,
                      "xsampler: logits must be float or double");

        /// Start from the whole row: validates it (one pass) and keeps every
        /// unmasked token at scale 1. With top_k_first = k > 0, the caller's
        /// first truncating stage is top_k{k}: the same pass also selects the
        /// k best tokens, and the set starts as that top-k (the stage then
        /// finds nothing left to do).
        template <class E>
        void load(const xt::xexpression<E>& logits, std::size_t top_k_first = 0)
        {
            m_row = detail::contiguous_row(logits, m_scratch);
            detail::check_row_size(m_row.size);
            if (top_k_first > 0 && top_k_first < m_row.size && load_top_k(top_k_first))
            {
                return;
            }
            const auto stats = detail::scan_row(m_row);
            reset(stats.max, stats.argmax);
            m_items.clear();
        }

        std::size_t vocab() const noexcept { return m_row.size; }
        const T* row() const noexcept { return m_row.data; }
        T max_logit() const noexcept { return m_max; }
        token_id argmax() const noexcept { return m_argmax; }
        /// Number of kept tokens (always >= 1); counted on first use for a
        /// dense set (a pass over the row).
        std::size_t size() noexcept
        {
            if (m_size == unknown)
            {
                m_size = std::size_t(std::count_if(m_row.data, m_row.data + m_row.size, [](T x) {
                    return x != -std::numeric_limits<T>::infinity();
                }));
            }
            return m_size;
        }
        /// Dense: every unmasked token of the row is kept, no ids stored.
        bool dense() const noexcept { return m_dense; }

        /// The scale s in T (the contract of detail/exp2.hpp).
        T scale() const noexcept
        {
            return T(std::min(m_scale, double(std::numeric_limits<T>::max())));
        }
        /// s2 = s log2(e) in T: weights are 2^((x - m) s2).
        T scale2() const noexcept
        {
            return T(std::min(m_scale * detail::log2e, double(std::numeric_limits<T>::max())));
        }
        /// d = (x - m) * s in T (natural-log units); 0 for the argmax, <= 0 always.
        T log_weight(T logit) const noexcept { return (logit - m_max) * scale(); }
        /// The contract's weight w = 2^((x - m) s2); 1 for the argmax.
        T weight(T logit) const noexcept { return detail::weight(logit, m_max, scale2()); }
        /// The same, read from the weights a dense pass kept while they are
        /// current (the same bits: the kernels compute what weight() does).
        T weight(token_id id, T logit) const noexcept
        {
            return m_weights_current ? m_weights[std::size_t(id)] : weight(logit);
        }

        /// Divide the logits by t > 0 (deferred).
        void divide_scale(double t) noexcept
        {
            m_scale = std::min(m_scale / t, std::numeric_limits<double>::max());
            m_weights_current = false;
        }

        /// Keep only the argmax (temperature 0).
        void keep_argmax()
        {
            m_items.assign(1, scored<T>{m_max, m_argmax});
            become_sparse(true, true);
        }

        /// Sparse sets: the kept tokens, which a filter may reorder or shrink
        /// (then it calls become_sparse to say what order they are in). A
        /// filter on a dense set fills them and calls become_sparse too.
        std::vector<scored<T>>& items() noexcept { return m_items; }
        const std::vector<scored<T>>& items() const noexcept { return m_items; }
        /// Sparse sets: whether items() is in rank order.
        bool rank_sorted() const noexcept { return m_rank_sorted; }
        void become_sparse(bool rank_sorted, bool id_sorted) noexcept
        {
            m_dense = false;
            m_bits_valid = false;
            m_size = m_items.size();
            m_rank_sorted = rank_sorted;
            m_id_sorted = id_sorted;
        }

        /// Calls f(id, logit) for every kept token in increasing id order. A
        /// short sparse list is sorted by id; a long one is walked through a
        /// bitmap of its ids (O(n + V/64), no sort).
        template <class F>
        void for_each_by_id(F&& f)
        {
            if (m_dense)
            {
                for_each_unmasked(0, m_row.size, f);
                return;
            }
            if (use_bitmap())
            {
                for (std::size_t b = 0; b < m_bits.size(); ++b)
                {
                    for_each_kept_in_word(b, f);
                }
                return;
            }
            for (const auto& item : m_items)
            {
                f(item.id, item.logit);
            }
        }

        /// Calls f(id, logit) for every kept token of block `b` (ids
        /// [64b, 64b + 64)) in increasing id order.
        template <class F>
        void for_each_in_block(std::size_t b, F&& f)
        {
            const std::size_t lo = b * detail::block_size;
            if (m_dense)
            {
                for_each_unmasked(lo, std::min(lo + detail::block_size, m_row.size), f);
                return;
            }
            if (use_bitmap())
            {
                for_each_kept_in_word(b, f);
                return;
            }
            auto it = std::lower_bound(m_items.begin(), m_items.end(), lo,
                                       [](const scored<T>& s, std::size_t id) { return std::size_t(s.id) < id; });
            for (; it != m_items.end() && std::size_t(it->id) < lo + detail::block_size; ++it)
            {
                f(it->id, it->logit);
            }
        }

        /// Z over the kept set at the current scale, in the contract's order.
        double total_weight() { return sum_weights(nullptr); }

        /// Z, also keeping each block's positive share (block_totals()).
        double total_weight_by_block()
        {
            detail::block_record record{m_blocks.data()};
            const double z = sum_weights(&record);
            m_block_count = record.size;
            return z;
        }
        detail::block_record block_totals() noexcept { return {m_blocks.data(), m_block_count}; }

        /// Dense sets: Z, also storing every token's weight (weights()).
        double total_weight_keeping_weights()
        {
            m_weights.resize(m_row.size);
            m_weights_current = true;
            return detail::dense_total(m_row.data, m_row.size, m_max, scale2(), nullptr, m_weights.data());
        }
        /// The weights stored by total_weight_keeping_weights, by id.
        const std::vector<T>& weights() const noexcept { return m_weights; }
        /// Scratch for filters that bucket the row (top-p); reused across calls.
        std::vector<double>& bucket_mass() noexcept { return m_bucket_mass; }
        /// Scratch for vocab() ids plus `slack` (branch-free gathers write past
        /// their count); grows once.
        token_id* id_buffer(std::size_t slack) { return grown(m_ids, m_row.size + slack); }
        /// Scratch for vocab() small keys (top-p's buckets); grows once.
        std::uint16_t* key_buffer() { return grown(m_keys, m_row.size); }
        /// Scratch for vocab() (logit, id) pairs; grows once.
        scored<T>* item_buffer() { return grown(m_spare, m_row.size); }
    private:
        // v with at least n elements (it only ever grows), as a pointer.
        template <class U>
        static U* grown(std::vector<U>& v, std::size_t n)
        {
            if (v.size() < n)
            {
                v.resize(n);
            }
            return v.data();
        }

        /// Validation and selection in one pass (see load); false if the row
        /// is invalid, to be reported by scan_row.
        bool load_top_k(std::size_t k)
        {
            detail::row_watch<T> watch;
            detail::select_top(m_row.data, m_row.size, k, m_items, watch);
            if (!watch.valid())
            {
                return false;
            }
            // The argmax ranks first among the k best (ties: the lowest id).
            const auto best = *std::min_element(m_items.begin(), m_items.end(), ranks_before<T>);
            reset(best.logit, best.id);
            become_sparse(false, false);
            return true;
        }

        /// The state of a freshly validated row, at scale 1 (dense; the items
        /// are the caller's to set).
        void reset(T max, token_id argmax)
        {
            m_items.reserve(m_row.size);  // grow once to the vocabulary: no allocation per token
            m_weights.reserve(m_row.size);
            m_bits.reserve(m_row.size / 64 + 1);
            grown(m_blocks, m_row.size / detail::block_size + 1);
            m_max = max;
            m_argmax = argmax;
            m_size = unknown;
            m_scale = 1.0;
            m_weights_current = false;
            m_dense = true;
            m_rank_sorted = false;
            m_id_sorted = false;
        }

        static_assert(detail::block_size == 64, "one bitmap word per block");

        template <class F>
        void for_each_unmasked(std::size_t lo, std::size_t hi, F& f) const
        {
            for (std::size_t i = lo; i < hi; ++i)
            {
                if (m_row.data[i] != -std::numeric_limits<T>::infinity())
                {
                    f(token_id(i), m_row.data[i]);
                }
            }
        }

        template <class F>
        void for_each_kept_in_word(std::size_t word, F& f) const
        {
            detail::for_each_bit(m_bits[word], word * 64, [&](std::size_t id) { f(token_id(id), m_row.data[id]); });
        }

        // Sparse sets: orders the ids for a walk — a sort for a short list,
        // else a bitmap of the ids (built once per change of the list).
        // Returns whether the bitmap is the way.
        bool use_bitmap()
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
                m_bits.assign(m_row.size / 64 + 1, 0);
                for (const auto& item : m_items)
                {
                    m_bits[std::size_t(item.id) / 64] |= std::uint64_t(1) << (std::size_t(item.id) % 64);
                }
                m_bits_valid = true;
            }
            return true;
        }

        double sum_weights(detail::block_record* record)
        {
            if (m_dense)
            {
                return detail::dense_total(m_row.data, m_row.size, m_max, scale2(), record);
            }
            detail::blocked_sum<T> sum(record);
            for_each_by_id([&](token_id id, T logit) { sum.add(std::size_t(id), weight(id, logit)); });
            return sum.total();
        }

        static constexpr std::size_t unknown = ~std::size_t(0);

        detail::row_ref<T> m_row{nullptr, 0};
        std::vector<T> m_scratch;
        std::vector<scored<T>> m_items;
        std::vector<detail::block_total> m_blocks;  // one per block of the row
        std::size_t m_block_count = 0;  // blocks recorded by total_weight_by_block
        std::vector<T> m_weights;
        bool m_weights_current = false;  // m_weights hold the weights at the current scale
        std::vector<double> m_bucket_mass;
        std::vector<token_id> m_ids;
        std::vector<scored<T>> m_spare;
        std::vector<std::uint16_t> m_keys;
        std::vector<std::uint64_t> m_bits;
        bool m_bits_valid = false;
        T m_max = 0;
        token_id m_argmax = 0;
        std::size_t m_size = 0;
        double m_scale = 1.0;
        bool m_dense = true;
        bool m_rank_sorted = false;
        bool m_id_sorted = false;
    };
}

#endif
