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
//   empty set. Precisely: with w_i and Z as in detail/exp2.hpp and
//   detail/blocked_sum.hpp, and c_n the mass of the first n ranked tokens
//   (in double), n is the least with c_n >= (P - 1e-12) * Z (all of them if
//   rounding leaves every c_n below).
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
        // tokens, without sorting the row. Everything is decided on
        // t = (x - m) s2, the weight's exponent, which is monotone in the
        // logit (each rounding is), so every set below is a prefix of the
        // rank — whether or not the rounded exp2 is monotone:
        //  1. one SIMD pass computes Z and keeps every weight;
        //  2. tail bound: tokens lighter than (Z - target) / V hold less than
        //     Z - target together, so the nucleus is among G, the tokens with
        //     t >= t_low for t_low = log2 of that bound (tried first at 8x
        //     the bound; any G whose mass reaches the target holds the
        //     nucleus, so the bound only decides the speed);
        //  3. G is gathered and bucketed by floor(4 (t - t_low))
        //     (4 buckets an octave of weight); the bucket masses locate the
        //     bucket where the running mass crosses the target;
        //  4. only that bucket is sorted by rank and walked token by token.
        // Masses are summed in double: per bucket, G's tokens in id order
        // into four partial sums (token i into sum i mod 4) added as
        // (s0 + s1) + (s2 + s3); then bucket by bucket; then token by token in
        // the crossing bucket. That differs from one running sum in rank
        // order only in rounding, which can decide only when a prefix's mass
        // is within ~1e-15 Z of the target.
        template <class T>
        void dense_nucleus(candidates<T>& c) const
        {
            const double z = c.total_weight_keeping_weights();
            const double target = (m_p - mass_slack) * z;
            const T limit = detail::exp_constants<T>::limit;
            const T t_floor = T(std::log2((z - target) / double(c.vocab())));
            // The last try, G = every token of positive weight, reaches the
            // target but for rounding.
            for (const T t_low : {T(t_floor + T(3)), t_floor, limit})
            {
                if (t_low <= T(0) && nucleus_above(c, std::max(t_low, limit), target))
                {
                    return;
                }
            }
            // Rounding left the mass of G short of the target: keep every token.
            const T* x = c.row();
            auto& items = c.items();
            items.clear();
            for (std::size_t j = 0; j < c.vocab(); ++j)
            {
                if (x[j] != -std::numeric_limits<T>::infinity())
                {
                    items.push_back({x[j], token_id(j)});
                }
            }
            c.become_sparse(false, true);
        }

        // The least logit x with (x - m) s2 >= t_low, for limit <= t_low <= 0:
        // bisection over the floating-point numbers in [-inf, m] (t(m) = 0).
        template <class T>
        static T least_logit_reaching(T m, T s2, T t_low) noexcept
        {
            using bits = typename detail::exp_constants<T>::bits;
            constexpr bits sign = bits(1) << (8 * sizeof(bits) - 1);
            // The bits of a float, reordered so that integer order is numeric order.
            const auto order = [](T v) { const bits b = detail::to_bits(v); return b & sign ? bits(~b) : bits(b | sign); };
            const auto value = [](bits o) { return detail::from_bits<T>(o & sign ? bits(o & ~sign) : bits(~o)); };
            bits lo = order(-std::numeric_limits<T>::infinity());  // t = -inf < t_low
            bits hi = order(m);
            while (hi - lo > 1)
            {
                const bits mid = lo + (hi - lo) / 2;
                ((value(mid) - m) * s2 >= t_low ? hi : lo) = mid;
            }
            return value(hi);
        }

        // The nucleus among G = the tokens with t >= t_low, if the mass of G
        // reaches the target. The kept tokens end in id order.
        template <class T>
        bool nucleus_above(candidates<T>& c, T t_low, double target) const
        {
            const T* x = c.row();
            const std::size_t n = c.vocab();
            const T m = c.max_logit();
            const T s2 = c.scale2();
            const auto key = [&](T logit) { return std::size_t(int(((logit - m) * s2 - t_low) * T(4))); };

            // Gather G's ids, a vector at a time, branch-free.
            using B = detail::batch<T>;
            const T x_low = least_logit_reaching(m, s2, t_low);
            token_id* ids = c.id_buffer(B::size);
            std::size_t count = 0;
            const std::size_t vec_end = n - n % B::size;
            for (std::size_t i = 0; i < vec_end; i += B::size)
            {
                count += detail::compress_bits<B::size>(detail::mask_bits(B::load_unaligned(x + i) >= B(x_low)), i,
                                                        ids + count);
            }
            for (std::size_t j = vec_end; j < n; ++j)
            {
                ids[count] = token_id(j);
                count += x[j] >= x_low;
            }

            // The bucket masses, each bucket's as four partial sums, so that a
            // run of one bucket is not one chain of additions through memory.
            const T* w = c.weights().data();
            auto& mass = c.bucket_mass();
            const std::size_t buckets = key(m) + 1;
            mass.reserve(4 * (std::size_t(-limit_key<T>()) + 1));
            mass.assign(4 * buckets, 0.0);
            std::uint16_t* keys = c.key_buffer();  // at most 4 * 1022 + 1 buckets
            for (std::size_t i = 0; i < count; ++i)
            {
                keys[i] = std::uint16_t(key(x[ids[i]]));
                mass[4 * keys[i] + i % 4] += double(w[ids[i]]);
            }
            for (std::size_t b = 0; b < buckets; ++b)
            {
                mass[b] = (mass[4 * b] + mass[4 * b + 1]) + (mass[4 * b + 2] + mass[4 * b + 3]);
            }
            mass.resize(buckets);

            double cum = 0.0;
            for (std::size_t b = buckets; b-- > 0;)
            {
                if (mass[b] == 0.0 || cum + mass[b] < target)
                {
                    cum += mass[b];
                    continue;
                }
                // The crossing bucket: everything heavier, in id order, from
                // the front of `out`; this bucket's tokens from the back (each
                // token is written at both ends, and counted at one or none:
                // the two ends never pass each other). G itself is left as it
                // is: if rounding makes the walk fall short, the next bucket
                // is split the same way.
                scored<T>* out = c.item_buffer();
                std::size_t heavier = 0;
                std::size_t here = 0;
                for (std::size_t i = 0; i < count; ++i)
                {
                    const scored<T> s{x[ids[i]], ids[i]};
                    const std::size_t k = keys[i];
                    out[heavier] = s;
                    out[count - 1 - here] = s;
                    heavier += k > b;
                    here += k == b;
                }
                scored<T>* const border = out + (count - here);
                std::sort(border, out + count, [](const scored<T>& l, const scored<T>& r) { return ranks_before(l, r); });
                for (std::size_t i = 0; i < here; ++i)
                {
                    cum += double(w[border[i].id]);
                    if (cum >= target)
                    {
                        // The kept tokens, in id order.
                        const auto by_id = [](const scored<T>& l, const scored<T>& r) { return l.id < r.id; };
                        std::sort(border, border + i + 1, by_id);
                        auto& items = c.items();
                        items.resize(heavier + i + 1);
                        std::merge(out, out + heavier, border, border + i + 1, items.begin(), by_id);
                        c.become_sparse(false, true);
                        return true;
                    }
                }
            }
            return false;
        }

        // key(m) at t_low = limit: the most buckets there can be.
        template <class T>
        static constexpr int limit_key() noexcept
        {
            return int(detail::exp_constants<T>::limit) * 4;
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
