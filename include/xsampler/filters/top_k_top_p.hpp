// xsampler/filters/top_k_top_p.hpp — FlashInfer's joint top-k/top-p: both cuts on one distribution. (xsampler, BSD-3-Clause)
//
// A filter (stage.hpp): a small value type with `apply(candidates<T>&)`;
// min_keep as filters.hpp states it.
//
// top_k_top_p{K, P[, min_keep][, ties]}  (K >= 0, 0 disables its cut; P in (0, 1], 1 disables its cut)
//   FlashInfer's filter_apply_order="joint": top_k's mask and top_p's mask
//   are both taken on the current distribution (temperature so far
//   included) and intersected. top_k then top_p, as two stages, takes top_p
//   on the K survivors renormalised, so it keeps fewer: {.4, .3, .2, .1} at
//   K 2, P 0.5 keeps {.4, .3} here (.4 alone is below half of the whole
//   row) but {.4} in sequence (.4/.7 reaches half of the two).
//   Both cuts are prefixes of one rank (logit descending, ties to the lower
//   ids: top_k's lowest_id rule and top_p's split tie group), so the
//   intersection is the shorter prefix: top_p's exact inclusive nucleus on
//   the whole set, then the best K of it: the two stages in the order
//   top_p, top_k decide the same. With top_k_ties::keep_all, the
//   tokens tied with the K-th that the nucleus holds are kept too. Each
//   parameter is validated, and named in the error, as top_k's and top_p's.
//   Cost: top_p's on the whole set (a fused top-k pass cannot run first,
//   since the nucleus needs every token's mass).
#ifndef XSAMPLER_FILTERS_TOP_K_TOP_P_HPP
#define XSAMPLER_FILTERS_TOP_K_TOP_P_HPP

#include <cstddef>
#include <cstdint>

#include "../candidates.hpp"
#include "../stage.hpp"
#include "top_k.hpp"
#include "top_p.hpp"

namespace xsampler
{
    class top_k_top_p
    {
    public:
        static constexpr const char* name = "top_k_top_p";
        static constexpr bool keeps_rank_prefix = true;

        top_k_top_p(std::int64_t k, double p, std::size_t min_keep = 1, top_k_ties ties = top_k_ties::lowest_id)
            : m_k(k, min_keep, ties), m_p(p, min_keep)
        {
        }
        const xsampler::top_k& k_cut() const noexcept { return m_k; }
        const xsampler::top_p& p_cut() const noexcept { return m_p; }
        /// The stage in words, as sampler::describe_stages gives it.
        std::string describe() const
        {
            return detail::with_min_keep(std::string(name) + " " + std::to_string(m_k.value()) + ", " +
                                             detail::format_value(m_p.value()) +
                                             (m_k.ties() == top_k_ties::keep_all ? " (ties kept)" : ""),
                                         m_p.min_keep());
        }

        template <class T>
        void apply(candidates<T>& c) const
        {
            m_p.apply(c);
            m_k.apply(c);
        }

    private:
        xsampler::top_k m_k;
        xsampler::top_p m_p;
    };
}

#endif
