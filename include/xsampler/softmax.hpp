// xsampler/softmax.hpp — softmax, log_softmax, logsumexp, entropy. (xsampler, BSD-3-Clause)
//
// The softmax and its relatives over one row of logits, in double, computed
// exactly as the samplers compute them (detail/exp2.hpp and
// detail/blocked_sum.hpp state the numerics): the probabilities softmax()
// returns are those a chain with no filter draws from.
// Masked (-inf) tokens get probability 0 and log-probability -inf; invalid
// rows throw invalid_logits.
//
// prompt_logprobs(rows, prompt, top_n): vLLM's prompt_logprobs (OpenAI's
// echo with logprobs): entry i is prompt[i] with its log-probability under
// the raw softmax of rows[i - 1] (the prefill's row before it) and that
// row's top_n tokens; entry 0 has none (NaN, no list: nothing scores the
// first token). rows is [P - 1 or P, vocab]: a last row, which predicts the
// first generated token, is not read. Errors: rows not 2-D or a bad row
// (invalid_logits, "prompt_logprobs: row 3: logits: NaN at index 1"), a
// row count that is neither, a prompt id outside the vocabulary
// (invalid_parameter naming its position).
#ifndef XSAMPLER_SOFTMAX_HPP
#define XSAMPLER_SOFTMAX_HPP

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <xtensor/xtensor.hpp>
#include <xtensor/xview.hpp>

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
            stored_row<T> x;
            std::size_t n;
            T m;
            double z;
            double log_z;

            /// Row x[0, n) (validated) and its max m.
            raw_softmax(const stored_row<T>& row, T max)
                : x(row), n(row.size), m(max),
                  z(x.visit([&](const auto* r) { return dense_total(r, n, m, T(log2e), nullptr); })), log_z(std::log(z))
            {
            }
            /// The row a set loaded, as loaded.
            explicit raw_softmax(const candidates<T>& c) : raw_softmax(c.loaded_row(), c.loaded_max()) {}

            /// p_i (0 for a masked token): the weight at scale 1 over Z.
            double prob(std::size_t i) const noexcept { return double(weight(x[i], m, T(log2e))) / z; }

            /// log p_i = (x_i - m) - log Z (-inf for a masked token); where
            /// x_i - m overflows T, the difference in double.
            double logprob(std::size_t i) const noexcept
            {
                const T xi = x[i];
                const T d = xi - m;
                return (std::isinf(d) && xi != -std::numeric_limits<T>::infinity() ? double(xi) - double(m) : double(d)) -
                       log_z;
            }

            /// -sum p_i log p_i = log Z - sum_i w_i d_i / Z, d_i = x_i - m: the
            /// sum in Z's order (detail::moments_kernel at scale 1, as typical
            /// sums it), so the same bits on every instruction set.
            double entropy() const noexcept
            {
                blocked_sum<T> sums[2];
                x.visit([&](const auto* r) { reduce_run(moments_kernel<T, third_sum::none>(m, T(1), T(log2e)), r, n, 0, sums); });
                return log_z - sums[1].total() / z;
            }

            /// The k most probable tokens (rank: logit desc, id asc) with their
            /// log-probabilities, into `out`; `best` is scratch.
            void top(std::size_t k, std::vector<scored<T>>& best, std::vector<sampled_token>& out) const
            {
                x.visit([&](const auto* r) { select_top(r, n, k, best); });
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
            std::vector<stored_type<E>> scratch;
            const stored_row<T> row = contiguous_row(logits, scratch);
            return f(raw_softmax<T>(row, scan_row(row).max));
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

    /// One prompt token, its log-probability under the row before it (NaN
    /// for the first) and that row's most probable tokens.
    struct prompt_logprob
    {
        token_id id = -1;
        double logprob = std::numeric_limits<double>::quiet_NaN();
        std::vector<sampled_token> top;  ///< rank order: logit desc, id asc
    };

    /// Each prompt token scored by the prefill's row before it (see the top
    /// of this header).
    template <class E>
    std::vector<prompt_logprob> prompt_logprobs(const xt::xexpression<E>& rows, token_span prompt, std::size_t top_n = 0)
    {
        const E& e = rows.derived_cast();
        const std::string who = "prompt_logprobs: ";
        if (e.dimension() != 2)
        {
            throw invalid_logits(who + "logits must be 2-D [prompt, vocab], got " + std::to_string(e.dimension()) + "-D");
        }
        const std::size_t n = prompt.size(), given = e.shape()[0], vocab = e.shape()[1];
        if (!(given + 1 == n || given == n))
        {
            throw invalid_parameter(who + std::to_string(given) + " rows for a prompt of " + std::to_string(n) +
                                    " tokens (give " + (n == 0 ? std::string("0") : std::to_string(n - 1) + " or " + std::to_string(n)) +
                                    ")");
        }
        for (std::size_t i = 0; i < n; ++i)
        {
            if (prompt[i] < 0 || std::size_t(prompt[i]) >= vocab)
            {
                throw invalid_parameter(who + "prompt token " + std::to_string(i) + " (id " + std::to_string(prompt[i]) +
                                        ") is outside the vocabulary of " + std::to_string(vocab));
            }
        }
        std::vector<prompt_logprob> out(n);
        detail::scored_lists best;
        for (std::size_t i = 0; i < n; ++i)
        {
            out[i].id = prompt[i];
            if (i == 0)
            {
                continue;
            }
            try
            {
                detail::with_raw_softmax(xt::view(e, i - 1, xt::all()), [&](const auto& raw) {
                    using T = std::decay_t<decltype(raw.m)>;
                    out[i].logprob = raw.logprob(std::size_t(prompt[i]));
                    if (top_n > 0)
                    {
                        raw.top(std::min(top_n, vocab), best.get(T()), out[i].top);
                    }
                    return 0;
                });
            }
            catch (const invalid_logits& err)
            {
                throw invalid_logits(who + "row " + std::to_string(i - 1) + ": " + err.what());
            }
        }
        return out;
    }

    /// Shannon entropy of the softmax, in nats: -sum p_i log p_i.
    template <class E>
    double entropy(const xt::xexpression<E>& logits)
    {
        return detail::with_raw_softmax(logits, [](const auto& raw) { return raw.entropy(); });
    }
}

#endif
