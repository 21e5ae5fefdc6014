// xsampler/detail/top_select.hpp — the k best-ranked tokens of a row, by a rising threshold. (xsampler, BSD-3-Clause)
//
// Top-k by selection, never a sort: one pass in id order keeps tau, the k-th
// best logit so far; a vector group whose max does not exceed tau is skipped
// whole; the buffer is cut back to k by nth_element when it fills (cap 2k,
// at least 128). candidates' keep_top and fused load, top_items, and the
// log-prob alternatives use it.
#ifndef XSAMPLER_DETAIL_TOP_SELECT_HPP
#define XSAMPLER_DETAIL_TOP_SELECT_HPP

#include <algorithm>
#include <cstddef>
#include <limits>
#include <vector>

#include "../types.hpp"
#include "simd.hpp"

namespace xsampler
{
    namespace detail
    {
        /// The k best-ranked unmasked tokens of a row given in runs of
        /// increasing ids, unordered, into `out` (all of them if fewer). One
        /// pass in id order keeps a threshold tau, the k-th best logit so
        /// far: a later token enters only if its logit exceeds tau (an equal
        /// logit has a higher id, so it ranks below), and a vector group whose
        /// max does not exceed tau is skipped whole. The buffer is cut back to
        /// k by nth_element when it reaches its cap.
        template <class T>
        class top_selector
        {
        public:
            top_selector(std::size_t k, std::vector<scored<T>>& out)
                : m_k(k), m_cap(std::max<std::size_t>(2 * std::min<std::size_t>(k, max_k), 128)), m_out(out)
            {
                m_out.clear();
            }

            /// Logits x[0, n) of tokens first, first + 1, ...
            template <class S, class Watch = no_watch>
            void feed(const S* x, std::size_t n, std::size_t first, Watch&& watch = Watch{})
            {
                using B = batch<T>;
                if (m_k == 0)
                {
                    return;
                }
                const auto take = [&](std::size_t i) {
                    const T xi = x[i];
                    if (xi > m_tau)  // tau may rise inside a group: asked again
                    {
                        m_out.push_back({xi, token_id(first + i)});
                        if (m_out.size() == m_cap)
                        {
                            shrink();
                        }
                    }
                };
                for_each_passing(
                    x, n, [&](const B& v) { return v > B(m_tau); }, [&](T v) { return v > m_tau; }, take, watch);
            }

            void finish()
            {
                if (m_out.size() > m_k)
                {
                    shrink();
                }
            }

            /// Before finish: every token not in the output ranks after all
            /// of it; -inf while it holds every unmasked token fed.
            T threshold() const noexcept { return m_tau; }

        private:
            // k is at most a row's length (token_id's range), so 2k cannot wrap.
            static constexpr std::size_t max_k = std::size_t(std::numeric_limits<token_id>::max());

            void shrink()
            {
                std::nth_element(m_out.begin(), m_out.begin() + std::ptrdiff_t(m_k - 1), m_out.end(), ranks_before<T>);
                m_out.resize(m_k);
                m_tau = m_out[m_k - 1].logit;
            }

            std::size_t m_k;
            std::size_t m_cap;
            std::vector<scored<T>>& m_out;
            T m_tau = -std::numeric_limits<T>::infinity();
        };

        /// A list of scored tokens for float rows and one for double rows: a
        /// stage's scratch, grown once and reused.
        struct scored_lists
        {
            std::vector<scored<float>> f;
            std::vector<scored<double>> d;
            std::vector<scored<float>>& get(float) noexcept { return f; }
            std::vector<scored<double>>& get(double) noexcept { return d; }
        };

        /// select_top over one contiguous row.
        template <class S, class T = logit_of<S>, class Watch = no_watch>
        void select_top(const S* x, std::size_t n, std::size_t k, std::vector<scored<T>>& out, Watch&& watch = Watch{})
        {
            top_selector<T> select(k, out);
            select.feed(x, n, 0, watch);
            select.finish();
        }
    }
}

#endif
