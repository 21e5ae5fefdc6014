// xsampler — token samplers for language-model inference. BSD-3-Clause.
//
// The stages that reshape or truncate the distribution. Each is a small value
// type, validated when constructed (invalid_parameter naming the stage, the
// parameter, the range and the value), with `apply(candidates<T>&)`. Each
// keeps a prefix of the rank (logit desc, id asc) — candidates.hpp.
//
// temperature{T}
//   T > 0: the logits are divided by T (deferred into the exp: no pass over
//   the row). T == 0: greedy, the limit of T -> 0: only the argmax is kept
//   (ties: the lowest id), special-cased, never a division by zero. T < 0, NaN
//   or inf: error. Temperature never changes which tokens a top-k keeps, and
//   changes a later top-p or min-p set (it moves the mass).
// top_k{K}
//   Keeps the K tokens of highest rank, by selection (std::nth_element, O(V)),
//   never a full sort. K == 0 disables it; K >= the number of candidates keeps
//   all; ties at the cut go to the lower ids. K < 0: error.
// top_p{P}, P in (0, 1]
//   With p_i the current probabilities (temperature so far included), keeps
//   the shortest prefix of the rank whose mass reaches P, *inclusive* of the
//   token that crosses P — so a confident step keeps its top token, never an
//   empty set. Precisely: with w_i and Z as in row.hpp, and c_n the running
//   sum of the first n weights in rank order (double, sequential), n is the
//   least with c_n >= (P - 1e-12) * Z (all of them if rounding leaves every
//   c_n below). The 1e-12 of slack makes a mass that equals P up to rounding
//   count as reaching it: {.1, .2, .3, .4} at P = 0.7 keeps {.4, .3}, though
//   0.7 has no exact binary form. The kept tokens are renormalised by the
//   draw. P == 1 keeps all. A tie group may be split: the lower ids are kept.
//   llama.cpp accumulates in float and compares cum >= p; Hugging Face drops
//   tokens whose cumulative mass in ascending order is <= 1 - p. Both agree
//   with this in exact arithmetic up to the token exactly at P.
// min_p{M}, M in [0, 1]
//   Keeps the tokens whose probability is >= M times the top probability,
//   decided in logit space: keep iff (x_i - x_max) * s >= ln M (no exp).
//   M == 0 disables it; M == 1 keeps the tokens tied with the max.
#ifndef XSAMPLER_FILTERS_HPP
#define XSAMPLER_FILTERS_HPP

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "candidates.hpp"

namespace xsampler
{
    class temperature
    {
    public:
        explicit temperature(double t) : m_t(t)
        {
            if (!(t >= 0.0 && t <= std::numeric_limits<double>::max()))
            {
                throw invalid_parameter("temperature: T must be finite and >= 0, got " + detail::format_value(t));
            }
        }
        double value() const noexcept { return m_t; }

        template <class T>
        void apply(candidates<T>& c) const
        {
            if (m_t == 0.0)
            {
                c.keep_argmax();
            }
            else
            {
                c.divide_scale(m_t);
            }
        }

    private:
        double m_t;
    };

    class top_k
    {
    public:
        explicit top_k(std::int64_t k) : m_k(k)
        {
            if (k < 0)
            {
                throw invalid_parameter("top_k: k must be >= 0 (0 disables it), got " + std::to_string(k));
            }
        }
        std::int64_t value() const noexcept { return m_k; }

        template <class T>
        void apply(candidates<T>& c) const
        {
            const auto k = std::uint64_t(m_k);
            if (k == 0 || k >= (c.dense() ? c.vocab() : c.size()))
            {
                return;  // a dense set with fewer than k unmasked tokens is kept whole below
            }
            auto& items = c.items();
            if (c.dense())
            {
                detail::select_top(c.row(), c.vocab(), std::size_t(k), items);
            }
            else
            {
                std::nth_element(items.begin(), items.begin() + std::ptrdiff_t(k - 1), items.end(), ranks_before<T>);
                items.resize(std::size_t(k));
            }
            c.become_sparse(false, false);
        }

    private:
        std::int64_t m_k;
    };

    class top_p
    {
    public:
        explicit top_p(double p) : m_p(p)
        {
            if (!(p > 0.0 && p <= 1.0))
            {
                throw invalid_parameter("top_p: p must be in (0, 1], got " + detail::format_value(p));
            }
        }
        double value() const noexcept { return m_p; }

        /// Probability mass by which the kept prefix may fall short of P.
        static constexpr double mass_slack = 1e-12;

        template <class T>
        void apply(candidates<T>& c) const
        {
            if (m_p == 1.0 || (!c.dense() && c.size() == 1))
            {
                return;
            }
            const double target = (m_p - mass_slack) * c.total_weight();
            auto& items = c.items();
            double cum = 0.0;
            if (c.dense())
            {
                // Rank a window of the best W (selection, O(V)), sort only
                // those, and stop as soon as the running mass reaches the
                // target; a window too small for the nucleus is grown 8x.
                for (std::size_t window = 256;; window *= 8)
                {
                    detail::select_top(c.row(), c.vocab(), window, items);
                    std::sort(items.begin(), items.end(), ranks_before<T>);
                    cum = 0.0;
                    if (keep_prefix(c, 0, items.size(), target, cum) || items.size() < window)
                    {
                        break;  // found, or the window held every token
                    }
                }
                c.become_sparse(true, items.size() <= 1);
                return;
            }
            if (!c.rank_sorted())
            {
                std::sort(items.begin(), items.end(), ranks_before<T>);
            }
            keep_prefix(c, 0, items.size(), target, cum);
            c.become_sparse(true, items.size() <= 1);
        }

    private:
        // Adds the weights of ranked items [from, to) to `cum`; at the first
        // that brings it to the target, cuts the list after it and returns true.
        template <class T>
        static bool keep_prefix(candidates<T>& c, std::size_t from, std::size_t to, double target, double& cum)
        {
            auto& items = c.items();
            for (std::size_t i = from; i < to; ++i)
            {
                cum += double(c.weight(items[i].logit));
                if (cum >= target)
                {
                    items.resize(i + 1);
                    return true;
                }
            }
            return false;
        }

        double m_p;
    };

    class min_p
    {
    public:
        explicit min_p(double m) : m_m(m), m_log_m(std::log(m))
        {
            if (!(m >= 0.0 && m <= 1.0))
            {
                throw invalid_parameter("min_p: m must be in [0, 1], got " + detail::format_value(m));
            }
        }
        double value() const noexcept { return m_m; }

        template <class T>
        void apply(candidates<T>& c) const
        {
            if (m_m == 0.0)
            {
                return;
            }
            // keep iff double(d) >= ln M, tested as d >= the least T not below ln M.
            T threshold = T(m_log_m);
            if (double(threshold) < m_log_m)
            {
                threshold = std::nextafter(threshold, std::numeric_limits<T>::infinity());
            }
            const auto keep = [&](T logit) { return c.log_weight(logit) >= threshold; };
            auto& items = c.items();
            if (!c.dense())
            {
                items.erase(std::remove_if(items.begin(), items.end(), [&](const scored<T>& s) { return !keep(s.logit); }),
                            items.end());
                c.become_sparse(c.rank_sorted(), false);
                return;
            }
            // One pass in id order; a vector block whose max fails is skipped
            // whole (keep is monotone in the logit).
            using B = detail::batch<T>;
            constexpr std::size_t group = 4 * B::size;
            const T* x = c.row();
            const std::size_t n = c.vocab();
            const B vm(c.max_logit());
            const B vs(c.scale());
            const B vt(threshold);
            items.clear();
            const auto scan = [&](std::size_t lo, std::size_t hi) {
                for (std::size_t i = lo; i < hi; ++i)
                {
                    if (keep(x[i]))
                    {
                        items.push_back({x[i], token_id(i)});
                    }
                }
            };
            const std::size_t vec_end = n - n % group;
            for (std::size_t i = 0; i < vec_end; i += group)
            {
                const B m = xsimd::max(xsimd::max(B::load_unaligned(x + i), B::load_unaligned(x + i + B::size)),
                                       xsimd::max(B::load_unaligned(x + i + 2 * B::size),
                                                  B::load_unaligned(x + i + 3 * B::size)));
                if (xsimd::any((m - vm) * vs >= vt))
                {
                    scan(i, i + group);
                }
            }
            scan(vec_end, n);
            c.become_sparse(false, true);
        }

    private:
        double m_m;
        double m_log_m;
    };
}

#endif
