// xsampler/filters/top_k.hpp — top_k, by selection, with either tie rule. (xsampler, BSD-3-Clause)
//
// A filter (stage.hpp): a small value type, validated when constructed
// (invalid_parameter naming the stage, the parameter, the range and the
// value), with `apply(candidates<T>&)`; min_keep as filters.hpp states it.
//
// top_k{K[, min_keep][, ties]}
//   Keeps the K tokens of highest rank, by selection — on a whole row a SIMD
//   pass with a rising threshold and std::nth_element on the few survivors
//   (detail::select_top), on a list std::nth_element: O(V), never a full
//   sort. K == 0 disables it; K >= the number of candidates keeps all; ties
//   at the cut go to the lower ids (top_k_ties::lowest_id, the default, as
//   llama.cpp). top_k_ties::keep_all (transformers) keeps every token whose
//   logit is >= the K-th best, so more than K when others tie with the K-th
//   (a selection for the K-th logit, then one threshold pass; never fused
//   into the row's validation pass). K < 0: error. With K > 0 it keeps
//   max(K, min_keep) (llama.cpp's rule).
#ifndef XSAMPLER_FILTERS_TOP_K_HPP
#define XSAMPLER_FILTERS_TOP_K_HPP

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "../candidates.hpp"
#include "../stage.hpp"

namespace xsampler
{
    namespace detail
    {
        template <class T>
        struct kth_scratch
        {
            std::vector<scored<T>> best;
        };
        /// The logit of the k-th best-ranked kept token, 1 <= k <= c.size()
        /// (top_items: one selection pass on a dense set).
        template <class T>
        T kth_logit(candidates<T>& c, std::size_t k)
        {
            auto& best = c.template scratch<kth_scratch<T>>().best;
            c.top_items(k, best);  // in rank order: the k-th is the last
            return best.back().logit;
        }
    }

    /// top_k's rule for tokens tied with the k-th: lowest_id keeps exactly k
    /// (ties to the lower ids, as llama.cpp); keep_all keeps every token whose
    /// logit equals the k-th's too (transformers' TopKLogitsWarper).
    enum class top_k_ties
    {
        lowest_id,
        keep_all
    };

    class top_k
    {
    public:
        static constexpr const char* name = "top_k";
        static constexpr bool keeps_rank_prefix = true;

        explicit top_k(std::int64_t k, std::size_t min_keep = 1, top_k_ties ties = top_k_ties::lowest_id)
            : m_k(k), m_min_keep(detail::min_keep_of(min_keep)), m_ties(ties)
        {
            if (k < 0)
            {
                throw invalid_parameter("top_k: k must be >= 0 (0 disables it), got " + std::to_string(k));
            }
        }
        top_k(std::int64_t k, top_k_ties ties) : top_k(k, 1, ties) {}
        std::int64_t value() const noexcept { return m_k; }
        std::size_t min_keep() const noexcept { return m_min_keep; }
        top_k_ties ties() const noexcept { return m_ties; }
        /// The stage in words, as sampler::describe_stages gives it.
        std::string describe() const
        {
            return detail::with_min_keep(
                std::string(name) + " " + std::to_string(m_k) + (m_ties == top_k_ties::keep_all ? ", ties kept" : ""),
                m_min_keep);
        }
        /// The k the chain may select in the row's pass (stage.hpp): what
        /// apply keeps; 0 under keep_all, whose ties may lie outside the
        /// selection's list.
        std::size_t fused_top_k() const noexcept { return m_ties == top_k_ties::lowest_id ? kept() : 0; }

        template <class T>
        void apply(candidates<T>& c) const
        {
            const std::size_t kept = this->kept();
            if (m_ties == top_k_ties::lowest_id)
            {
                c.keep_top(kept);
                return;
            }
            if (kept == 0 || kept >= c.size())
            {
                return;
            }
            c.keep_logit_at_least(detail::kth_logit(c, kept));
        }

    private:
        std::size_t kept() const noexcept
        {
            const auto k = std::size_t(std::min<std::uint64_t>(std::uint64_t(m_k), ~std::size_t(0)));
            return k == 0 ? 0 : std::max(k, m_min_keep);
        }

        std::int64_t m_k;
        std::size_t m_min_keep;
        top_k_ties m_ties;
    };
}

#endif
