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
// - The SIMD driver of detail/reduce.hpp (full blocks) and blocked_sum
//   (weights given one by one in id order; a skipped id counts as 0) give
//   the same bits. Either can record each block of positive sum
//   (block_record), for draws that walk blocks before tokens.
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

            // (Forced inline: a sparse set's sum calls it per token.)
            XSAMPLER_ALWAYS_INLINE void add(std::size_t id, T w) noexcept
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
            XSAMPLER_ALWAYS_INLINE void flush()
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
    }
}

#endif
