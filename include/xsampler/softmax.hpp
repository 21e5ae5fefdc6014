// xsampler — token samplers for language-model inference. BSD-3-Clause.
//
// The softmax and its relatives over one row of logits, in double, computed
// exactly as the samplers compute them (detail/exp2.hpp and
// detail/blocked_sum.hpp state the numerics): the probabilities softmax()
// returns are those a chain with no filter draws from.
// Masked (-inf) tokens get probability 0 and log-probability -inf; invalid
// rows throw invalid_logits.
#ifndef XSAMPLER_SOFTMAX_HPP
#define XSAMPLER_SOFTMAX_HPP

#include <cmath>

#include <xtensor/xtensor.hpp>

#include "candidates.hpp"

namespace xsampler
{
    /// log(sum_i exp(x_i)) over the row, in double.
    template <class E>
    double logsumexp(const xt::xexpression<E>& logits)
    {
        candidates<detail::logit_type<E>> c;
        c.load(logits);
        return double(c.max_logit()) + std::log(c.total_weight());
    }

    /// log p_i for every token (-inf for masked tokens), computed as
    /// (x_i - m) - log Z, so it stays accurate where p_i underflows.
    template <class E>
    xt::xtensor<double, 1> log_softmax(const xt::xexpression<E>& logits)
    {
        candidates<detail::logit_type<E>> c;
        c.load(logits);
        const double log_z = std::log(c.total_weight());
        xt::xtensor<double, 1> out = xt::empty<double>({c.vocab()});
        for (std::size_t i = 0; i < c.vocab(); ++i)
        {
            out(i) = c.log_weight(c.row()[i]) - log_z;
        }
        return out;
    }

    /// p_i for every token (0 for masked tokens), summing to 1 up to rounding.
    template <class E>
    xt::xtensor<double, 1> softmax(const xt::xexpression<E>& logits)
    {
        candidates<detail::logit_type<E>> c;
        c.load(logits);
        const double z = c.total_weight();
        xt::xtensor<double, 1> out = xt::empty<double>({c.vocab()});
        for (std::size_t i = 0; i < c.vocab(); ++i)
        {
            out(i) = c.weight(c.row()[i]) / z;
        }
        return out;
    }

    /// Shannon entropy of the softmax, in nats: -sum p_i log p_i.
    template <class E>
    double entropy(const xt::xexpression<E>& logits)
    {
        candidates<detail::logit_type<E>> c;
        c.load(logits);
        const double z = c.total_weight();
        const double log_z = std::log(z);
        double h = 0.0;
        c.for_each_by_id([&](token_id, auto logit) {
            const double w = c.weight(logit);
            if (w > 0.0)
            {
                h -= (w / z) * (c.log_weight(logit) - log_z);
            }
        });
        return h;
    }
}

#endif
