// xsampler — token samplers for language-model inference. BSD-3-Clause.
//
// Rows of logits: access, validation, and the numerics every stage shares,
// with the SIMD kernels (xsimd) that compute them.
//
// Contract
// - A logits row is any 1-D xtensor expression of float or double: an
//   xt::xtensor<T, 1>, a row view of an xt::xtensor<T, 2>, or xt::adapt over
//   an engine's buffer. A contiguous row is read in place; any other
//   expression is evaluated once into a buffer the caller owns.
// - -inf marks a masked token: probability 0, never drawn. NaN or +inf at any
//   index, an empty row, a row that is not 1-D, and a row where every token is
//   masked throw invalid_logits naming the index or the reason.
// - Probabilities are computed the same way everywhere in the library, so
//   every function agrees bit for bit with every other. With T the row's type
//   (float or double):
//     m   = the largest logit (exact);
//     s   = the temperature scale (the product of 1/T over the temperature
//           stages so far), rounded to T and clamped to T's largest value;
//     d_i = (x_i - m) * s, in T;
//     w_i = exp_nonpos(d_i), in T: the library's own exp (below), a fixed
//           sequence of IEEE operations that gives the same bits in scalar
//           and SIMD code, with every compiler, libm and optimisation level;
//           0 when d_i <= -87.3 (float) or -708 (double), and for masked tokens;
//     Z   = the sum of the w_i (converted to double) in a fixed order: ids are
//           cut into blocks of 64; in a block, lane j (ids = j mod 8) is
//           summed in id order, the eight lane sums are added as
//           ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)), and the block sums are added
//           in block order;
//     p_i = w_i / Z,   log p_i = d_i - log(Z)   (in double).
//   The weights are as precise as the row: a float row's logits carry
//   relative errors of 6e-8 already. The blocked order is what a SIMD loop
//   computes, so vectorised and scalar code give the same Z.
// - Bit-for-bit results need IEEE arithmetic without contraction into fused
//   multiply-adds: the xsampler CMake target adds -ffp-contract=off for GCC
//   and Clang. (x86-64's default flags never contract; -march=native may.)
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

#include <xsimd/xsimd.hpp>
#include <xtensor/xexpression.hpp>
#include <xtensor/xutils.hpp>

#include "types.hpp"

namespace xsampler
{
    namespace detail
    {
        template <class T>
        using batch = xsimd::batch<T>;

        // --- exp_nonpos: one sequence of operations for scalars and batches ---

        template <class T>
        struct exp_constants;

        template <>
        struct exp_constants<float>
        {
            using bits = std::uint32_t;
            static constexpr float limit = -87.3f;  // below: 0 (2^k would leave the normal range)
            static constexpr float log2e = 1.44269504088896341f;
            static constexpr float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
            static constexpr float ln2_hi = 0.693359375f;
            static constexpr float ln2_lo = -2.12194440e-4f;
            static constexpr int mantissa = 23;
            static constexpr bits bias = 127;
            // Taylor coefficients of exp(r), highest degree first (degree 7).
            static constexpr float poly[] = {1.0f / 5040.0f, 1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f,
                                             1.0f / 6.0f, 0.5f, 1.0f, 1.0f};
        };

        template <>
        struct exp_constants<double>
        {
            using bits = std::uint64_t;
            static constexpr double limit = -708.0;
            static constexpr double log2e = 1.4426950408889634;
            static constexpr double magic = 6755399441055744.0;  // 1.5 * 2^52
            static constexpr double ln2_hi = 6.93147180369123816490e-01;
            static constexpr double ln2_lo = 1.90821492927058770002e-10;
            static constexpr int mantissa = 52;
            static constexpr bits bias = 1023;
            static constexpr double poly[] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0,
                                              1.0 / 3628800.0,    1.0 / 362880.0,    1.0 / 40320.0,
                                              1.0 / 5040.0,       1.0 / 720.0,       1.0 / 120.0,
                                              1.0 / 24.0,         1.0 / 6.0,         0.5,
                                              1.0,                1.0};
        };

        template <class T>
        typename exp_constants<T>::bits to_bits(T x) noexcept
        {
            typename exp_constants<T>::bits b;
            std::memcpy(&b, &x, sizeof b);
            return b;
        }
        template <class T>
        T from_bits(typename exp_constants<T>::bits b) noexcept
        {
            T x;
            std::memcpy(&x, &b, sizeof x);
            return x;
        }
        template <class T, class A>
        auto to_bits(xsimd::batch<T, A> x) noexcept
        {
            return xsimd::bitwise_cast<xsimd::batch<typename exp_constants<T>::bits, A>>(x);
        }
        template <class T, class A, class U>
        xsimd::batch<T, A> from_bits(xsimd::batch<U, A> b) noexcept
        {
            return xsimd::bitwise_cast<xsimd::batch<T, A>>(b);
        }

        /// exp(x) for limit < x <= 0, within 2 ulp, as a fixed sequence of IEEE
        /// operations: x = k ln2 + r with k = round(x log2e) (by adding 1.5 *
        /// 2^mantissa), Cody-Waite r = (x - k ln2_hi) - k ln2_lo, the Taylor
        /// polynomial of exp(r) in Horner form, then times 2^k built from bits.
        /// V is T or xsimd::batch<T>; the lanes of a batch get exactly the
        /// scalar results.
        template <class T, class V>
        V exp_core(V x) noexcept
        {
            using c = exp_constants<T>;
            const V shifted = x * V(c::log2e) + V(c::magic);
            const V k = shifted - V(c::magic);
            const V r = (x - k * V(c::ln2_hi)) - k * V(c::ln2_lo);
            V p(c::poly[0]);
            for (std::size_t i = 1; i < sizeof(c::poly) / sizeof(c::poly[0]); ++i)
            {
                p = V(c::poly[i]) + r * p;
            }
            // The low bits of `shifted` hold k; 2^k = (k + bias) << mantissa.
            using K = decltype(to_bits(shifted));
            const K ki = to_bits(shifted) - K(to_bits(T(c::magic)));
            return p * from_bits<T>(K((ki + K(c::bias)) << c::mantissa));
        }

        /// exp(x) for x <= 0 or -inf; 0 at or below the limit.
        template <class T>
        T exp_nonpos(T x) noexcept
        {
            return x > exp_constants<T>::limit ? exp_core<T>(x) : T(0);
        }
        template <class T, class A>
        xsimd::batch<T, A> exp_nonpos(xsimd::batch<T, A> x) noexcept
        {
            using V = xsimd::batch<T, A>;
            const V lim(exp_constants<T>::limit);
            return xsimd::select(x > lim, exp_core<T>(xsimd::max(x, lim)), V(T(0)));
        }

        // --- the blocked sum ---

        constexpr std::size_t block_size = 64;
        constexpr std::size_t lanes = 8;

        /// One block's share of Z.
        struct block_total
        {
            std::size_t block;
            double sum;
        };

        inline double combine_lanes(const double (&l)[lanes]) noexcept
        {
            return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
        }

        /// Accumulates weights given in increasing id order into the blocked
        /// sum of the contract; ids that are skipped count as weight 0. With a
        /// `record` vector, every block of positive sum is appended to it.
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

            /// Adds a whole block's sum (computed elsewhere in the same order).
            void add_block(std::size_t b, double sum)
            {
                flush();
                m_block = b;
                push(sum);
            }

            double total()
            {
                flush();
                return m_total;
            }

        private:
            void flush()
            {
                push(combine_lanes(m_lane));
                std::fill(std::begin(m_lane), std::end(m_lane), 0.0);
            }

            void push(double s)
            {
                m_total += s;
                if (m_record != nullptr && s > 0.0)
                {
                    m_record->push_back({m_block, s});
                }
            }

            double m_lane[lanes] = {};
            double m_total = 0.0;
            std::size_t m_block = 0;
            std::vector<block_total>* m_record;
        };

        /// The contract's weight of logit x at max m and scale s.
        template <class T>
        T weight(T x, T m, T s) noexcept
        {
            return exp_nonpos((x - m) * s);
        }

        /// Z over a whole row at (m, s), SIMD over full blocks, scalar over
        /// the tail: the same bits either way.
        template <class T>
        double dense_total(const T* x, std::size_t n, T m, T s, std::vector<block_total>* record)
        {
            using B = batch<T>;
            using D = batch<double>;
            constexpr std::size_t width = B::size;
            constexpr std::size_t dwidth = D::size;
            static_assert(block_size % width == 0 && lanes % dwidth == 0, "xsampler: unsupported SIMD width");
            blocked_sum sum(record);
            const B vm(m);
            const B vs(s);
            alignas(64) T w[block_size];
            alignas(64) double lane[lanes];
            const std::size_t full = n / block_size;
            for (std::size_t b = 0; b < full; ++b)
            {
                const T* block = x + b * block_size;
                for (std::size_t i = 0; i < block_size; i += width)
                {
                    exp_nonpos((B::load_unaligned(block + i) - vm) * vs).store_aligned(w + i);
                }
                D acc[lanes / dwidth];
                for (auto& a : acc)
                {
                    a = D(0.0);
                }
                for (std::size_t t = 0; t < block_size; t += lanes)
                {
                    for (std::size_t a = 0; a < lanes / dwidth; ++a)
                    {
                        acc[a] += D::load_aligned(w + t + a * dwidth);
                    }
                }
                for (std::size_t a = 0; a < lanes / dwidth; ++a)
                {
                    acc[a].store_aligned(lane + a * dwidth);
                }
                sum.add_block(b, combine_lanes(lane));
            }
            for (std::size_t i = full * block_size; i < n; ++i)
            {
                sum.add(i, weight(x[i], m, s));
            }
            return sum.total();
        }

        // --- rows ---

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

        /// One pass: validates the row, finds its max and counts its unmasked
        /// tokens (SIMD); then finds the first index of the max (ties: lowest).
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
            using B = batch<T>;
            using I = xsimd::batch<typename exp_constants<T>::bits>;
            constexpr std::size_t width = B::size;
            constexpr T inf = std::numeric_limits<T>::infinity();
            const T* x = row.data;
            const std::size_t n = row.size;
            const std::size_t vec_end = n - n % (2 * width);
            B mx0(-inf), mx1(-inf);
            I masked(0);  // minus the count of -inf per lane (a true lane's bits are all ones)
            auto bad = B(T(0)) != B(T(0));
            for (std::size_t i = 0; i < vec_end; i += 2 * width)
            {
                const B a = B::load_unaligned(x + i);
                const B b = B::load_unaligned(x + i + width);
                mx0 = xsimd::max(mx0, a);
                mx1 = xsimd::max(mx1, b);
                bad = bad | !(a < B(inf)) | !(b < B(inf));
                masked += xsimd::bitwise_cast<I>(xsimd::select(a == B(-inf), B(from_bits<T>(~typename exp_constants<T>::bits(0))), B(T(0))));
                masked += xsimd::bitwise_cast<I>(xsimd::select(b == B(-inf), B(from_bits<T>(~typename exp_constants<T>::bits(0))), B(T(0))));
            }
            alignas(64) T lanes_max[width];
            xsimd::max(mx0, mx1).store_aligned(lanes_max);
            T best = *std::max_element(lanes_max, lanes_max + width);
            alignas(64) typename exp_constants<T>::bits lanes_masked[width];
            masked.store_aligned(lanes_masked);
            std::size_t masked_count = 0;
            for (const auto c : lanes_masked)
            {
                masked_count += std::size_t(typename exp_constants<T>::bits(0) - c);
            }
            bool any_bad = xsimd::any(bad);
            for (std::size_t i = vec_end; i < n; ++i)
            {
                any_bad = any_bad || !(x[i] < inf);
                masked_count += x[i] == -inf;
                best = std::max(best, x[i]);
            }
            if (any_bad)
            {
                for (std::size_t i = 0; i < n; ++i)
                {
                    if (!(x[i] < inf))
                    {
                        throw invalid_logits(std::string("logits: ") + (x[i] != x[i] ? "NaN" : "+inf") +
                                             " at index " + std::to_string(i));
                    }
                }
            }
            if (best == -inf)
            {
                throw invalid_logits("logits: every token is masked (-inf)");
            }
            std::size_t arg = 0;
            for (const B vbest(best); arg + width <= n && !xsimd::any(B::load_unaligned(x + arg) == vbest); arg += width)
            {
            }
            while (x[arg] != best)
            {
                ++arg;
            }
            return {best, token_id(arg), n - masked_count};
        }
    }
}

#endif
