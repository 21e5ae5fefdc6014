// xsampler/softmax.hpp — softmax, log_softmax, logsumexp, entropy. (xsampler, BSD-3-Clause)
//
// The softmax and its relatives over one row of logits, in double, computed
// exactly as the samplers compute them (detail/exp2.hpp and
// detail/blocked_sum.hpp state the numerics): the probabilities softmax()
// returns are those a chain with no filter draws from.
// Masked (-inf) tokens get probability 0 and log-probability -inf; invalid
// rows throw invalid_logits.
#ifndef XSAMPLER_SOFTMAX_HPP
#define XSAMPLER_SOFTMAX_HPP

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "candidates.hpp"

namespace xsampler
{
    namespace detail
    {
        /// The softmax's quantities on a loaded set, from the row as loaded
        /// (before any edit) at scale 1: what generate reports beside the draw.
        template <class T>
        struct raw_softmax
        {
            const T* x;
            std::size_t n;
            T m;
            double z;
            double log_z;

            /// Row x[0, n) (validated) and its max m.
            raw_softmax(const T* row, std::size_t size, T max)
                : x(row), n(size), m(max), z(dense_total(x, n, m, T(log2e), nullptr)), log_z(std::log(z))
            {
            }
            /// The row a set loaded, as loaded.
            explicit raw_softmax(const candidates<T>& c) : raw_softmax(c.loaded_row(), c.vocab(), c.loaded_max()) {}

            /// p_i (0 for a masked token): the weight at scale 1 over Z.
            double prob(std::size_t i) const noexcept { return double(weight(x[i], m, T(log2e))) / z; }

            /// log p_i = (x_i - m) - log Z (-inf for a masked token); where
            /// x_i - m overflows T, the difference in double.
            double logprob(std::size_t i) const noexcept
            {
                const T d = x[i] - m;
                return (std::isinf(d) && x[i] != -std::numeric_limits<T>::infinity() ? double(x[i]) - double(m) : double(d)) -
                       log_z;
            }

            /// -sum p_i log p_i = log Z - sum_i w_i d_i / Z, d_i = x_i - m: the
            /// sum in Z's order (detail::moments_kernel at scale 1, as typical
            /// sums it), so the same bits on every instruction set.
            double entropy() const noexcept
            {
                blocked_sum<T> sums[2];
                reduce_run(moments_kernel<T, third_sum::none>(m, T(1), T(log2e)), x, n, 0, sums);
                return log_z - sums[1].total() / z;
            }

            /// The k most probable tokens (rank: logit desc, id asc) with their
            /// log-probabilities, into `out`; `best` is scratch.
            void top(std::size_t k, std::vector<scored<T>>& best, std::vector<sampled_token>& out) const
            {
                select_top(x, n, k, best);
                std::sort(best.begin(), best.end(), ranks_before<T>);
                out.clear();
                for (const auto& s : best)
                {
                    out.push_back({s.id, logprob(std::size_t(s.id))});
                }
            }
        };
    }

    namespace detail
    {
        /// f(raw_softmax) over the row behind `logits`: validated in one
        /// pass, read in place when contiguous; no candidates set is built.
        template <class E, class F>
        auto with_raw_softmax(const xt::xexpression<E>& logits, F&& f)
        {
            using T = logit_type<E>;
            std::vector<T> scratch;
            const row_ref<T> row = contiguous_row(logits, scratch);
            return f(raw_softmax<T>(row.data, row.size, scan_row(row).max));
        }
    }

    /// log(sum_i exp(x_i)) over the row, in double.
    template <class E>
    double logsumexp(const xt::xexpression<E>& logits)
    {
        return detail::with_raw_softmax(logits, [](const auto& raw) { return double(raw.m) + raw.log_z; });
    }

    /// log p_i for every token (-inf for masked tokens), computed as
    /// (x_i - m) - log Z, so it stays accurate where p_i underflows.
    template <class E>
    xt::xtensor<double, 1> log_softmax(const xt::xexpression<E>& logits)
    {
        return detail::with_raw_softmax(logits, [](const auto& raw) {
            xt::xtensor<double, 1> out = xt::empty<double>({raw.n});
            for (std::size_t i = 0; i < raw.n; ++i)
            {
                out(i) = raw.logprob(i);
            }
            return out;
        });
    }

    /// p_i for every token (0 for masked tokens), summing to 1 up to
    /// rounding: bit for bit the probabilities of a chain with no filter.
    template <class E>
    xt::xtensor<double, 1> softmax(const xt::xexpression<E>& logits)
    {
        return detail::with_raw_softmax(logits, [](const auto& raw) {
            xt::xtensor<double, 1> out = xt::empty<double>({raw.n});
            for (std::size_t i = 0; i < raw.n; ++i)
            {
                out(i) = raw.prob(i);
            }
            return out;
        });
    }

    /// Shannon entropy of the softmax, in nats: -sum p_i log p_i.
    template <class E>
    double entropy(const xt::xexpression<E>& logits)
    {
        return detail::with_raw_softmax(logits, [](const auto& raw) { return raw.entropy(); });
    }
}

#endif
