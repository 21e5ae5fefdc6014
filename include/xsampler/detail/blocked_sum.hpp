// xsampler/detail/blocked_sum.hpp — Z, summed in one fixed order. (xsampler, BSD-3-Clause)
//
// Z, the sum of the weights, in the one fixed order that a SIMD loop computes
// and scalar code repeats: so vectorised and scalar code give the same Z.
//
// Contract (T the row's type, float or double)
// - Z = the sum of the w_i (detail/exp2.hpp) in this order: ids are cut into
//   blocks of 64; in a block, lane j (ids = j mod 8) is summed in T in id
//   order, the eight lane sums are converted to double and added as
//   ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)), and the block sums are added in
//   double in block order.
// - p_i = w_i / Z,   log p_i = log(w_i / Z)   (in double).
// - dense_total (SIMD over the full blocks of a row) and blocked_sum (weights
//   given one by one in id order; a skipped id counts as 0) give the same
//   bits. Either can record each block of positive sum (block_record), for
//   draws that walk blocks before tokens.
#ifndef XSAMPLER_DETAIL_BLOCKED_SUM_HPP
#define XSAMPLER_DETAIL_BLOCKED_SUM_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "exp2.hpp"
#include "simd.hpp"

namespace xsampler
{
    namespace detail
    {
        constexpr std::size_t block_size = 64;
        constexpr std::size_t lanes = 8;

        /// One block's share of Z.
        struct block_total
        {
            std::size_t block;
            double sum;
        };

        /// The blocks of positive sum a blocked sum records, in block order:
        /// `data` has room for one entry per block of the row (n / 64 + 1).
        struct block_record
        {
            block_total* data;
            std::size_t size = 0;
            const block_total& operator[](std::size_t i) const noexcept { return data[i]; }
        };

        /// A block's sum from its eight lane sums, in double:
        /// ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)) — the order in which two
        /// 4-lane halves fold.
        template <class T>
        double combine_lanes(const T (&l)[lanes]) noexcept
        {
            const double d[lanes] = {l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7]};
            return ((d[0] + d[4]) + (d[2] + d[6])) + ((d[1] + d[5]) + (d[3] + d[7]));
        }

        /// The same from lane sums held in vectors (lanes / width of them).
        template <class T, class A, std::size_t G>
        double combine_lanes(const xsimd::batch<T, A> (&acc)[G]) noexcept
        {
#if XSIMD_WITH_AVX
            if constexpr (std::is_base_of<xsimd::avx, A>::value)
            {
                return fold_lanes(acc);
            }
#endif
            alignas(64) T l[lanes];
            for (std::size_t g = 0; g < G; ++g)
            {
                acc[g].store_aligned(l + g * xsimd::batch<T, A>::size);
            }
            return combine_lanes(l);
        }

        /// Accumulates weights given in increasing id order into the blocked
        /// sum of the contract (lanes in T, blocks in double); ids that are
        /// skipped count as weight 0. With a `record`, every block of positive
        /// sum is appended to it.
        template <class T>
        class blocked_sum
        {
        public:
            explicit blocked_sum(block_record* record = nullptr) noexcept : m_record(record) {}

            void add(std::size_t id, T w) noexcept
            {
                const std::size_t b = id / block_size;
                if (b != m_block)
                {
                    flush();
                    m_block = b;
                }
                m_lane[id % lanes] += w;
                m_last = w;
                ++m_pending;
            }

            /// Adds block b's sum, combined elsewhere in the same order (b
            /// above every block added before).
            void add_block(std::size_t b, double s)
            {
                flush();
                m_block = b;
                push(s);
            }

            double total()
            {
                flush();
                return m_total;
            }

        private:
            void flush()
            {
                if (m_pending != 0)
                {
                    // One weight and seven zero lanes: the combination is the weight.
                    push(m_pending == 1 ? double(m_last) : combine_lanes(m_lane));
                    std::fill(std::begin(m_lane), std::end(m_lane), T(0));
                    m_pending = 0;
                }
            }

            void push(double s)
            {
                m_total += s;
                if (m_record != nullptr)
                {
                    m_record->data[m_record->size] = {m_block, s};  // kept if positive
                    m_record->size += s > 0.0;
                }
            }

            T m_lane[lanes] = {};
            T m_last = 0;
            std::size_t m_pending = 0;  // weights added to the block since the last flush
            double m_total = 0.0;
            std::size_t m_block = 0;
            block_record* m_record;
        };

        /// The weights of one block of 64 logits at (m, s2), summed into its
        /// lane vectors (and stored to w_out when `store`). With above_limit,
        /// the caller knows no exponent is at or below exp2's limit; without
        /// `wide`, that no x - m overflows (exp2.hpp's exponent).
        /// With `keep` (not all ones), a lane whose bit is 0 weighs 0, as a
        /// masked logit does (a mask not yet written to the row: the weights
        /// are the masked row's; above_limit is then the kept lanes').
        template <bool above_limit, bool wide, bool store, class T, std::size_t G>
        void block_weights(const T* block, batch<T> vm, batch<T> vs, batch<T> (&acc)[G], T* w_out,
                           std::uint64_t keep = ~std::uint64_t(0)) noexcept
        {
            using B = batch<T>;
            for (std::size_t t = 0; t < block_size; t += lanes)
            {
                for (std::size_t g = 0; g < G; ++g)
                {
                    const B x = B::load_unaligned(block + t + g * B::size);
                    const B e = wide ? exponent(x, vm, vs) : (x - vm) * vs;
                    B w = above_limit ? exp2_core<T>(e) : exp2_nonpos(e);
                    if (keep != ~std::uint64_t(0))
                    {
                        w = xsimd::select(lanes_of<T, kernel_arch>(std::uint32_t(keep >> (t + g * B::size))), w, B(T(0)));
                    }
                    acc[g] = t == 0 ? w : acc[g] + w;
                    if (store)
                    {
                        w.store_unaligned(w_out + t + g * B::size);
                    }
                }
            }
        }

        /// The lane-wise least logit of a block of 64.
        template <class T>
        batch<T> block_low(const T* block) noexcept
        {
            using B = batch<T>;
            B low = B::load_unaligned(block);
            for (std::size_t i = B::size; i < block_size; i += B::size)
            {
                low = xsimd::min(low, B::load_unaligned(block + i));
            }
            return low;
        }
        /// The same over the lanes whose bit in `keep` is 1 (+inf where none is).
        template <class T>
        batch<T> block_low(const T* block, std::uint64_t keep) noexcept
        {
            using B = batch<T>;
            const B none(std::numeric_limits<T>::infinity());
            B low = none;
            for (std::size_t i = 0; i < block_size; i += B::size)
            {
                low = xsimd::min(low, xsimd::select(lanes_of<T, kernel_arch>(std::uint32_t(keep >> i)),
                                                    B::load_unaligned(block + i), none));
            }
            return low;
        }

        /// Adds the weights of logits x[0, n) at (m, s2), tokens first,
        /// first + 1, ... (first a multiple of 64, above every token added
        /// before), to a blocked sum: SIMD over full blocks, scalar over the
        /// tail, the same bits either way. A block whose smallest logit has
        /// its exponent above exp2's limit (no masked token, no weight below
        /// 2^-126) skips the limit's test. With `w_out`, every weight is also
        /// stored there (n of them).
        ///
        /// With `keep` (a bitset over tokens first, first + 1, ...: word k is
        /// block k of x), a token whose bit is 0 weighs 0, as if masked in x.
        template <class T>
        void dense_sum(const T* x, std::size_t n, std::size_t first, T m, T s2, blocked_sum<T>& sum, T* w_out,
                       const std::uint64_t* keep = nullptr)
        {
            if (w_out != nullptr)
            {
                dense_sum<true>(x, n, first, m, s2, sum, w_out, keep);
            }
            else
            {
                dense_sum<false>(x, n, first, m, s2, sum, w_out, keep);
            }
        }

        template <bool store, class T>
        void dense_sum(const T* x, std::size_t n, std::size_t first, T m, T s2, blocked_sum<T>& sum, T* w_out,
                       const std::uint64_t* keep)
        {
            using B = batch<T>;
            constexpr std::size_t width = B::size;
            static_assert(lanes % width == 0, "xsampler: unsupported SIMD width");
            constexpr std::size_t groups = lanes / width;  // vectors per lane set
            const B vm(m);
            const B vs(s2);
            const B limit(exp_constants<T>::limit);
            const bool wide = may_overflow(m);
            const std::size_t full = n / block_size;
            for (std::size_t b = 0; b < full; ++b)
            {
                const T* block = x + b * block_size;
                const std::uint64_t kept = keep == nullptr ? ~std::uint64_t(0) : keep[b];
                B acc[groups];
                T* const block_out = store ? w_out + b * block_size : nullptr;
                // Rounding is monotone: x >= low gives (x - m) * s2 >= (low - m) * s2
                // (an overflowing low - m fails the test: -inf, or NaN at s2 = 0).
                // With keep, low is the kept lanes' (the others weigh 0 either way:
                // exp2_nonpos is exp2_core above the limit).
                const B low = kept == ~std::uint64_t(0) ? block_low(block) : block_low(block, kept);
                if (xsimd::all((low - vm) * vs > limit))
                {
                    block_weights<true, false, store>(block, vm, vs, acc, block_out, kept);
                }
                else if (!wide)
                {
                    block_weights<false, false, store>(block, vm, vs, acc, block_out, kept);
                }
                else
                {
                    block_weights<false, true, store>(block, vm, vs, acc, block_out, kept);
                }
                sum.add_block(first / block_size + b, combine_lanes(acc));
            }
            for (std::size_t i = full * block_size; i < n; ++i)
            {
                const bool out = keep != nullptr && (keep[i / block_size] >> (i % block_size) & 1) == 0;
                const T w = weight(out ? -std::numeric_limits<T>::infinity() : x[i], m, s2);
                sum.add(first + i, w);
                if (store)
                {
                    w_out[i] = w;
                }
            }
        }

        /// Z over a whole row at (m, s2): dense_sum from token 0.
        template <class T>
        double dense_total(const T* x, std::size_t n, T m, T s2, block_record* record, T* w_out = nullptr)
        {
            blocked_sum<T> sum(record);
            dense_sum(x, n, 0, m, s2, sum, w_out);
            return sum.total();
        }
    }

    namespace detail
    {
        /// One pass over logits x[0, n) of tokens first, first + 1, ... (first
        /// a multiple of 64): adds each weight w_i (detail/exp2.hpp, at m and
        /// s2) to `z` and w_i t_i, t_i = exponent(x_i, m, s) (0 where w_i is
        /// 0), to `wt`, both in the blocked order of detail/blocked_sum.hpp
        /// (so `z` gets the bits dense_sum gives), and counts the unmasked
        /// logits. SIMD over full blocks, scalar over the tail: the same bits.
        template <class T>
        void dense_moments(const T* x, std::size_t n, std::size_t first, T m, T s, T s2, blocked_sum<T>& z,
                           blocked_sum<T>& wt, std::size_t& count)
        {
            using B = batch<T>;
            constexpr std::size_t width = B::size;
            constexpr std::size_t groups = lanes / width;
            const B vm(m);
            const B vs(s);
            const B vs2(s2);
            const B zero(T(0));
            const B ninf(-std::numeric_limits<T>::infinity());
            const bool wide = may_overflow(m);
            const std::size_t full = n / block_size;
            const B limit(exp_constants<T>::limit);
            for (std::size_t b = 0; b < full; ++b)
            {
                const T* block = x + b * block_size;
                const B low = block_low(block);
                B acc_w[groups];
                B acc_wt[groups];
                // As dense_sum: a block whose least exponent is above exp2's
                // limit has no masked token and no zero weight (same bits).
                if (!wide && xsimd::all((low - vm) * vs2 > limit))
                {
                    for (std::size_t t = 0; t < block_size; t += lanes)
                    {
                        for (std::size_t g = 0; g < groups; ++g)
                        {
                            const B d = B::load_unaligned(block + t + g * width) - vm;
                            const B w = exp2_core<T>(d * vs2);
                            const B wtv = w * (d * vs);
                            acc_w[g] = t == 0 ? w : acc_w[g] + w;
                            acc_wt[g] = t == 0 ? wtv : acc_wt[g] + wtv;
                        }
                    }
                    count += block_size;
                }
                else
                {
                    B unmasked = zero;
                    for (std::size_t t = 0; t < block_size; t += lanes)
                    {
                        for (std::size_t g = 0; g < groups; ++g)
                        {
                            const B v = B::load_unaligned(block + t + g * width);
                            const B w = exp2_nonpos(wide ? exponent(v, vm, vs2) : (v - vm) * vs2);
                            const B wtv =
                                xsimd::select(w > zero, w * (wide ? exponent(v, vm, vs) : (v - vm) * vs), zero);
                            acc_w[g] = t == 0 ? w : acc_w[g] + w;
                            acc_wt[g] = t == 0 ? wtv : acc_wt[g] + wtv;
                            unmasked = unmasked + xsimd::select(v != ninf, B(T(1)), zero);
                        }
                    }
                    count += std::size_t(xsimd::hadd(unmasked));  // at most 64: exact in T
                }
                z.add_block(first / block_size + b, combine_lanes(acc_w));
                wt.add_block(first / block_size + b, combine_lanes(acc_wt));
            }
            for (std::size_t i = full * block_size; i < n; ++i)
            {
                const T w = weight(x[i], m, s2);
                z.add(first + i, w);
                wt.add(first + i, w > T(0) ? w * exponent(x[i], m, s) : T(0));
                count += x[i] != -std::numeric_limits<T>::infinity();
            }
        }

        /// Two sums over pairs of rows (x, w), 64 values at a time: vec(x,
        /// w, acc_a, acc_b) adds a block's SIMD vectors into two
        /// accumulators in T whose lanes then go into one double a lane (so
        /// each lane sums at most 64 terms in T, and no chain of additions
        /// runs through one double); one(x, w) takes the values past the
        /// last full block, adding into the caller's sums itself. total()
        /// adds the lanes into sa and sb.
        template <class T>
        class lane_sums
        {
        public:
            template <class Vec, class One>
            void add(const T* x, const T* w, std::size_t n, Vec& vec, One& one)
            {
                std::size_t i = 0;
                for (; i + 64 <= n; i += 64)
                {
                    B acc_a(T(0)), acc_b(T(0));
                    for (std::size_t j = i; j < i + 64; j += B::size)
                    {
                        vec(B::load_unaligned(x + j), B::load_unaligned(w + j), acc_a, acc_b);
                    }
                    alignas(64) T la[B::size], lb[B::size];
                    acc_a.store_aligned(la);
                    acc_b.store_aligned(lb);
                    for (std::size_t k = 0; k < B::size; ++k)
                    {
                        m_a[k] += double(la[k]);
                        m_b[k] += double(lb[k]);
                    }
                }
                for (; i < n; ++i)
                {
                    one(x[i], w[i]);
                }
            }
            void total(double& sa, double& sb) const noexcept
            {
                for (std::size_t k = 0; k < B::size; ++k)
                {
                    sa += m_a[k];
                    sb += m_b[k];
                }
            }

        private:
            using B = batch<T>;
            alignas(64) double m_a[B::size] = {};
            alignas(64) double m_b[B::size] = {};
        };
    }
}

#endif
