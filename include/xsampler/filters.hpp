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
//   Keeps the K tokens of highest rank, by selection — on a whole row a SIMD
//   pass with a rising threshold and std::nth_element on the few survivors
//   (detail::select_top), on a list std::nth_element: O(V), never a full
//   sort. K == 0 disables it; K >= the number of candidates keeps all; ties
//   at the cut go to the lower ids. K < 0: error.
// top_p{P}, P in (0, 1]
//   With p_i the current probabilities (temperature so far included), keeps
//   the shortest prefix of the rank whose mass reaches P, *inclusive* of the
//   token that crosses P — so a confident step keeps its top token, never an
//   empty set. Precisely: with w_i and Z as in row.hpp, and c_n the mass of
//   the first n ranked tokens (in double), n is the least with
//   c_n >= (P - 1e-12) * Z (all of them if rounding leaves every c_n below).
//   The 1e-12 of slack makes a mass that equals P up to rounding count as
//   reaching it: {.1, .2, .3, .4} at P = 0.7 keeps {.4, .3}, though 0.7 has no
//   exact binary form. On a list, c_n is a running sum in rank order; on a
//   whole row, bucket masses plus a running sum in the crossing bucket
//   (dense_nucleus, below), equal to it but for rounding that can only decide
//   within ~1e-15 Z of the target. The kept tokens are renormalised by the
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
            if (c.dense())
            {
                dense_nucleus(c);
                return;
            }
            // A short list: sort it and cut.
            const double target = (m_p - mass_slack) * c.total_weight();
            auto& items = c.items();
            if (!c.rank_sorted())
            {
                std::sort(items.begin(), items.end(), ranks_before<T>);
            }
            double cum = 0.0;
            keep_prefix(c, items.begin(), items.end(), target, cum);
            c.become_sparse(true, items.size() <= 1);
        }

    private:
        // Adds the weights of ranked items [from, to) to `cum`; at the first
        // that brings it to the target, cuts the list after it and returns true.
        template <class T, class It>
        static bool keep_prefix(candidates<T>& c, It from, It to, double target, double& cum)
        {
            for (It it = from; it != to; ++it)
            {
                cum += double(c.weight(it->id, it->logit));
                if (cum >= target)
                {
                    c.items().erase(it + 1, c.items().end());
                    return true;
                }
            }
            return false;
        }

        // The nucleus of a whole row in O(V + n log n) for a nucleus of n
        // tokens, without sorting the row:
        //  1. one SIMD pass computes Z and keeps every weight;
        //  2. tail bound: tokens lighter than (Z - target) / V hold less than
        //     Z - target together, so the nucleus is among the heavier ones (G);
        //  3. G is bucketed by the top bits of each weight's representation
        //     (monotone in the weight, so in the rank: 4 buckets an octave);
        //     the bucket masses locate the bucket where the running mass
        //     crosses the target;
        //  4. only that bucket is sorted by rank and walked token by token.
        // Masses are summed in double: per bucket in id order, then bucket by
        // bucket, then token by token in the crossing bucket. That differs from
        // one running sum in rank order only in rounding, which can decide
        // only when a prefix's mass is within ~1e-15 Z of the target.
        template <class T>
        void dense_nucleus(candidates<T>& c) const
        {
            const double z = c.total_weight_keeping_weights();
            const double target = (m_p - mass_slack) * z;
            const T* x = c.row();
            const std::size_t n = c.vocab();

            T floor_w = std::nextafter(T((z - target) / double(n)), T(0));
            floor_w = std::max(floor_w, std::numeric_limits<T>::min());
            // The tail bound is loose (it counts every lighter token at the
            // bound), so first try G above 8x the bound: usually still a rank
            // prefix holding the target, and several times smaller. Only speed
            // depends on the guess: a G whose mass falls short is retried at
            // the bound itself.
            for (const T lower : {T(floor_w * T(8)), floor_w})
            {
                if (nucleus_above(c, lower, target))
                {
                    return;
                }
            }
            // Rounding left the mass of G short of the target: keep every token.
            auto& items = c.items();
            items.clear();
            items.reserve(n);
            for (std::size_t j = 0; j < n; ++j)
            {
                if (x[j] != -std::numeric_limits<T>::infinity())
                {
                    items.push_back({x[j], token_id(j)});
                }
            }
            c.become_sparse(false, true);
        }

        // The nucleus among G = the tokens of weight >= lower (a prefix of
        // the rank), if the mass of G reaches the target.
        template <class T>
        bool nucleus_above(candidates<T>& c, T lower, double target) const
        {
            if (!(lower <= T(1)))
            {
                return false;  // no weight exceeds the argmax's 1
            }
            using bits = typename detail::exp_constants<T>::bits;
            constexpr int shift = detail::exp_constants<T>::mantissa - 2;
            const T* w = c.weights().data();
            const T* x = c.row();
            const std::size_t n = c.vocab();
            const bits low = detail::to_bits(lower) >> shift;
            const auto key = [&](const scored<T>& s) { return (detail::to_bits(w[s.id]) >> shift) - low; };

            // Gather G's ids, a vector at a time, branch-free.
            using B = detail::batch<T>;
            token_id* ids = c.id_buffer(B::size);
            std::size_t count = 0;
            const std::size_t vec_end = n - n % B::size;
            for (std::size_t i = 0; i < vec_end; i += B::size)
            {
                count += detail::compress_bits<B::size>(detail::mask_bits(B::load_unaligned(w + i) >= B(lower)), i,
                                                        ids + count);
            }
            for (std::size_t j = vec_end; j < n; ++j)
            {
                ids[count] = token_id(j);
                count += w[j] >= lower;
            }
            auto& items = c.items();
            items.resize(count);
            for (std::size_t k = 0; k < count; ++k)
            {
                items[k] = {x[ids[k]], ids[k]};
            }

            auto& mass = c.bucket_mass();
            mass.reserve(std::size_t((detail::to_bits(T(1)) >> shift) -
                                     (detail::to_bits(std::numeric_limits<T>::min()) >> shift) + 1));
            mass.assign(std::size_t((detail::to_bits(T(1)) >> shift) - low + 1), 0.0);
            for (const auto& s : items)
            {
                mass[key(s)] += double(w[s.id]);
            }
            double cum = 0.0;
            for (std::size_t b = mass.size(); b-- > 0;)
            {
                if (mass[b] == 0.0 || cum + mass[b] < target)
                {
                    cum += mass[b];
                    continue;
                }
                // The crossing bucket: everything heavier, then this bucket
                // in rank order until the target.
                const auto heavier = std::partition(items.begin(), items.end(), [&](const scored<T>& s) { return key(s) > b; });
                const auto here = std::partition(heavier, items.end(), [&](const scored<T>& s) { return key(s) == b; });
                std::sort(heavier, here, ranks_before<T>);
                if (keep_prefix(c, heavier, here, target, cum))
                {
                    c.become_sparse(false, items.size() <= 1);
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
            using B = detail::batch<T>;
            const T* x = c.row();
            const std::size_t n = c.vocab();
            const B vm(c.max_logit());
            const B vs(c.scale());
            const B vt(threshold);
            items.clear();
            detail::for_each_passing(
                x, n, [&](const B& v) { return (v - vm) * vs >= vt; }, keep,
                [&](std::size_t j) { items.push_back({x[j], token_id(j)}); });
            c.become_sparse(false, true);
        }

    private:
        double m_m;
        double m_log_m;
    };
}

#endif
