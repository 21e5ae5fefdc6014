// xsampler — token samplers for language-model inference. BSD-3-Clause.
//
// Rows of logits: access, validation, and the numerics every stage shares.
//
// Contract
// - A logits row is any 1-D xtensor expression of float or double: an
//   xt::xtensor<T, 1>, a row view of an xt::xtensor<T, 2>, or xt::adapt over
//   an engine's buffer. A contiguous row is read in place; any other
//   expression is evaluated once into a buffer the caller owns.
// - -inf marks a masked token: probability 0, never drawn. NaN or +inf at any
//   index, an empty row, a row that is not 1-D, and a row where every token is
//   masked throw invalid_logits naming the index or the reason.
// - Probabilities are computed in double, the same way everywhere in the
//   library, so every function agrees bit for bit with every other:
//     m   = the largest logit (exact);
//     w_i = exp_nonpos((x_i - m) * s) for an unmasked token, where s = 1/T is
//           the temperature's scale and exp_nonpos is the library's own exp
//           (below: a fixed sequence of IEEE operations, so it gives the same
//           bits with every compiler, libm and optimisation level; weights
//           below 2^-1022 are flushed to 0);
//     Z   = sum of w_i in a fixed order: ids are cut into blocks of 64; in a
//           block, lane j (ids = j mod 8) is summed in id order, the eight lane
//           sums are added as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)), and the
//           block sums are added in block order;
//     p_i = w_i / Z,   log p_i = (x_i - m) * s - log(Z).
//   The blocked order is what a SIMD loop computes; it is specified so that a
//   vectorised and a scalar implementation give the same Z.
// - Bit-for-bit results need IEEE arithmetic without contraction into fused
//   multiply-adds: the xsampler CMake target adds -ffp-contract=off for GCC
//   and Clang. (x86-64's default flags never contract; -march=native does.)
#ifndef XSAMPLER_ROW_HPP
#define XSAMPLER_ROW_HPP

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <xtensor/xexpression.hpp>
#include <xtensor/xutils.hpp>

#include "types.hpp"

namespace xsampler
{
    namespace detail
    {
        /// exp(x) for x <= 0 (or -inf), to about 1 ulp; 0 below -708.39
        /// (where exp(x) < 2^-1022). Cody-Waite reduction x = k ln2 + r,
        /// |r| <= ln2/2, then the degree-13 Taylor polynomial of exp(r) in
        /// Horner form, then an exact scaling by 2^k.
        inline double exp_nonpos(double x) noexcept
        {
            if (!(x > -708.39641853226408))
            {
                return 0.0;
            }
            const double k = std::floor(x * 1.4426950408889634 + 0.5);
            const double r = (x - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10;
            double p = 1.0 / 6227020800.0;  // 1/13!
            p = 1.0 / 479001600.0 + r * p;
            p = 1.0 / 39916800.0 + r * p;
            p = 1.0 / 3628800.0 + r * p;
            p = 1.0 / 362880.0 + r * p;
            p = 1.0 / 40320.0 + r * p;
            p = 1.0 / 5040.0 + r * p;
            p = 1.0 / 720.0 + r * p;
            p = 1.0 / 120.0 + r * p;
            p = 1.0 / 24.0 + r * p;
            p = 1.0 / 6.0 + r * p;
            p = 0.5 + r * p;
            p = 1.0 + r * p;
            p = 1.0 + r * p;
            const std::uint64_t bits = std::uint64_t(std::int64_t(k) + 1023) << 52;
            double two_k;
            std::memcpy(&two_k, &bits, sizeof two_k);
            return p * two_k;
        }

        constexpr std::size_t block_size = 64;
        constexpr std::size_t lanes = 8;

        /// One block's share of Z.
        struct block_total
        {
            std::size_t block;
            double sum;
        };

        /// Accumulates weights given in increasing id order into the blocked
        /// sum of the contract; ids that are skipped count as weight 0. With a
        /// `record` vector, every block's sum is appended to it in order.
        class blocked_sum
        {
        public:
            explicit blocked_sum(std::vector<block_total>* record = nullptr) noexcept : m_record(record) {}

            void add(std::size_t id, double w) noexcept
            {
                const std::size_t b = id / block_size;
                if (b != m_block)
                {
                    flush();
                    m_block = b;
                }
                m_lane[id % lanes] += w;
            }

            double total()
            {
                flush();
                return m_total;
            }

        private:
            void flush()
            {
                const double s = ((m_lane[0] + m_lane[1]) + (m_lane[2] + m_lane[3])) +
                                 ((m_lane[4] + m_lane[5]) + (m_lane[6] + m_lane[7]));
                m_total += s;
                if (m_record != nullptr && s > 0.0)
                {
                    m_record->push_back({m_block, s});
                }
                std::fill(std::begin(m_lane), std::end(m_lane), 0.0);
            }

            double m_lane[lanes] = {};
            double m_total = 0.0;
            std::size_t m_block = 0;
            std::vector<block_total>* m_record;
        };

        /// A contiguous row of logits: either the caller's memory or a copy.
        template <class T>
        struct row_ref
        {
            const T* data;
            std::size_t size;
        };

        template <class E>
        using logit_type = std::decay_t<typename E::value_type>;

        /// The row behind `expr`, read in place when its elements are
        /// contiguous, else evaluated once into `scratch`.
        template <class E, class T = logit_type<E>>
        row_ref<T> contiguous_row(const xt::xexpression<E>& expr, std::vector<T>& scratch)
        {
            static_assert(std::is_same<T, float>::value || std::is_same<T, double>::value,
                          "xsampler: logits must be float or double");
            const E& e = expr.derived_cast();
            if (e.dimension() != 1)
            {
                throw invalid_logits("logits: expected a 1-D row, got " + std::to_string(e.dimension()) +
                                     "-D");
            }
            const std::size_t n = e.size();
            if constexpr (xt::has_data_interface<E>::value)
            {
                if (n <= 1 || e.strides()[0] == 1)
                {
                    return {e.data() + e.data_offset(), n};
                }
            }
            scratch.resize(n);
            std::copy(e.begin(), e.end(), scratch.begin());
            return {scratch.data(), n};
        }

        template <class T>
        struct row_stats
        {
            T max;
            token_id argmax;
            std::size_t unmasked;
        };

        /// One pass: validates the row and finds its max (ties: lowest id).
        template <class T>
        row_stats<T> scan_row(row_ref<T> row)
        {
            if (row.size == 0)
            {
                throw invalid_logits("logits: the row is empty");
            }
            if (row.size > std::size_t(std::numeric_limits<token_id>::max()))
            {
                throw invalid_logits("logits: a row of " + std::to_string(row.size) +
                                     " tokens is longer than token_id can index");
            }
            constexpr T inf = std::numeric_limits<T>::infinity();
            T best = -inf;
            std::size_t arg = 0;
            std::size_t unmasked = 0;
            for (std::size_t i = 0; i < row.size; ++i)
            {
                const T x = row.data[i];
                if (!(x < inf))
                {
                    throw invalid_logits(std::string("logits: ") + (x != x ? "NaN" : "+inf") +
                                         " at index " + std::to_string(i));
                }
                unmasked += x != -inf;
                if (x > best)
                {
                    best = x;
                    arg = i;
                }
            }
            if (unmasked == 0)
            {
                throw invalid_logits("logits: every token is masked (-inf)");
            }
            return {best, token_id(arg), unmasked};
        }
    }
}

#endif
