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
//     w_i = 2^((x_i - m) * s2), in T, where s2 = s * log2(e) rounded to T:
//           the library's own exp2 (below), a fixed sequence of IEEE
//           operations that gives the same bits in scalar and SIMD code, with
//           every compiler, libm and optimisation level; 0 when the exponent
//           is <= -126 (float) or -1022 (double), and for masked tokens;
//     Z   = the sum of the w_i in a fixed order: ids are cut into blocks of
//           64; in a block, lane j (ids = j mod 8) is summed in T in id
//           order, the eight lane sums are converted to double and added as
//           ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)), and the block sums are added
//           in double in block order;
//     p_i = w_i / Z,   log p_i = log(w_i / Z)   (in double).
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
        // The kernels work on vectors of at most 8 floats (the 8 lanes of the
        // blocked sum); on wider machines (AVX-512) they use AVX2.
#if XSIMD_WITH_AVX512F
        using kernel_arch = xsimd::avx2;
#else
        using kernel_arch = xsimd::default_arch;
#endif
        template <class T>
        using batch = xsimd::batch<T, kernel_arch>;

        // The lanes of a comparison as bits (lane i -> bit i): one movemask
        // instruction on x86, a store and a loop elsewhere.
#if XSIMD_WITH_AVX
        inline std::uint32_t movemask(__m256 r) noexcept { return std::uint32_t(_mm256_movemask_ps(r)); }
        inline std::uint32_t movemask(__m256d r) noexcept { return std::uint32_t(_mm256_movemask_pd(r)); }
#endif
#if XSIMD_WITH_SSE2
        inline std::uint32_t movemask(__m128 r) noexcept { return std::uint32_t(_mm_movemask_ps(r)); }
        inline std::uint32_t movemask(__m128d r) noexcept { return std::uint32_t(_mm_movemask_pd(r)); }
#endif
        template <class M>
        auto mask_bits(const M& m, int) noexcept -> decltype(movemask(std::declval<typename M::register_type>()))
        {
            return movemask(typename M::register_type(m));
        }
        template <class M>
        std::uint32_t mask_bits(const M& m, long) noexcept
        {
            bool lane[M::size];
            m.store_unaligned(lane);
            std::uint32_t bits = 0;
            for (std::size_t i = 0; i < M::size; ++i)
            {
                bits |= std::uint32_t(lane[i]) << i;
            }
            return bits;
        }
        template <class M>
        std::uint32_t mask_bits(const M& m) noexcept
        {
            return mask_bits(m, 0);
        }

        /// For each W-bit mask, the positions of its set bits, in order.
        template <std::size_t W>
        struct compress_table
        {
            std::uint8_t lane[std::size_t(1) << W][W];
            constexpr compress_table() : lane{}
            {
                for (std::size_t m = 0; m < (std::size_t(1) << W); ++m)
                {
                    std::size_t k = 0;
                    for (std::size_t i = 0; i < W; ++i)
                    {
                        if ((m >> i) & 1)
                        {
                            lane[m][k++] = std::uint8_t(i);
                        }
                    }
                }
            }
        };
        template <std::size_t W>
        constexpr compress_table<W> compress_lanes{};

        /// Writes base + i for the set bits i of a W-lane mask to out[0..),
        /// branch-free (always W entries written; out needs that much room),
        /// and returns how many bits were set.
        template <std::size_t W>
        std::size_t compress_bits(std::uint32_t bits, std::size_t base, token_id* out) noexcept
        {
            const auto& lane = compress_lanes<W>.lane[bits];
            for (std::size_t k = 0; k < W; ++k)
            {
                out[k] = token_id(base + lane[k]);
            }
            return std::size_t(__builtin_popcount(bits));
        }

        /// Calls f(base + i) for every set bit i of `bits`, lowest first.
        template <class F>
        void for_each_bit(std::uint64_t bits, std::size_t base, F&& f)
        {
            for (; bits != 0; bits &= bits - 1)
            {
                f(base + std::size_t(__builtin_ctzll(bits)));
            }
        }

        /// Watches nothing (the default of for_each_passing).
        struct no_watch
        {
            template <class... A>
            void group(const A&...) noexcept
            {
            }
            template <class V>
            void one(V) noexcept
            {
            }
        };

        /// Calls f(i), in increasing i, for the logits x[i] that pass a test
        /// monotone in the logit: passes(v) gives the lanes of a vector that
        /// pass, passes_one(x) the same for one value. Four vectors at a time;
        /// a group whose max fails is skipped whole. The test is asked afresh
        /// for every group, so it may tighten as the walk goes on. `watch`
        /// sees every logit: watch.group(max, v) for each group of four
        /// vectors v (max: their lane-wise max), watch.one(x) for the rest.
        template <class T, class Test, class TestOne, class F, class Watch = no_watch>
        void for_each_passing(const T* x, std::size_t n, Test&& passes, TestOne&& passes_one, F&& f,
                              Watch&& watch = Watch{})
        {
            using B = batch<T>;
            constexpr std::size_t width = B::size;
            constexpr std::size_t group = 4 * width;
            const std::size_t vec_end = n - n % group;
            for (std::size_t i = 0; i < vec_end; i += group)
            {
                const B v[] = {B::load_unaligned(x + i), B::load_unaligned(x + i + width),
                               B::load_unaligned(x + i + 2 * width), B::load_unaligned(x + i + 3 * width)};
                const B max = xsimd::max(xsimd::max(v[0], v[1]), xsimd::max(v[2], v[3]));
                watch.group(max, v);
                if (xsimd::any(passes(max)))
                {
                    for (std::size_t k = 0; k < 4; ++k)
                    {
                        for_each_bit(mask_bits(passes(v[k])), i + k * width, f);
                    }
                }
            }
            for (std::size_t i = vec_end; i < n; ++i)
            {
                watch.one(x[i]);
                if (passes_one(x[i]))
                {
                    f(i);
                }
            }
        }

        // --- exp2_nonpos: one sequence of operations for scalars and batches ---

        template <class T>
        struct exp_constants;

        template <>
        struct exp_constants<float>
        {
            using bits = std::uint32_t;
            static constexpr float limit = -126.0f;      // 2^t at or below: 0 (2^k stays normal above)
            static constexpr int mantissa = 23;
            static constexpr bits bias = 127;
            // Table-driven: t = k + j/8 + f with |f| <= 1/16, 2^t = 2^k * 2^(j/8) * 2^f.
            static constexpr int table_bits = 3;
            static constexpr float magic = 1572864.0f;  // 1.5 * 2^20: adding it rounds to a multiple of 1/8
            // 2^(j/8), rounded to float.
            static constexpr float table[] = {1.0f,         1.09050775f, 1.18920708f, 1.29683959f,
                                              1.41421354f, 1.54221082f, 1.68179286f, 1.83400810f};
            // 2^f = 1 + f q(f) on [-1/16, 1/16]: q the Chebyshev interpolant
            // of degree 2, lowest degree first (2^f within 4e-8 before rounding).
            static constexpr float poly[] = {0.69314718056f, 0.240254686394f, 0.0555080151116f};
        };

        template <>
        struct exp_constants<double>
        {
            using bits = std::uint64_t;
            static constexpr double limit = -1022.0;
            static constexpr double magic = 6755399441055744.0;  // 1.5 * 2^52
            static constexpr int mantissa = 52;
            static constexpr bits bias = 1023;
            // 2^f = exp(f ln2): Taylor coefficients ln2^n / n!, degree 13.
            static constexpr double poly[] = {1.0,
                                              6.931471805599453094e-01,
                                              2.402265069591007123e-01,
                                              5.550410866482157995e-02,
                                              9.618129107628477161e-03,
                                              1.333355814642844343e-03,
                                              1.540353039338160995e-04,
                                              1.525273380405984001e-05,
                                              1.321548679014430912e-06,
                                              1.017808600923969859e-07,
                                              7.054911620801123330e-09,
                                              4.445538271870811497e-10,
                                              2.567843599348820539e-11,
                                              1.369148885390412878e-12};
        };

        constexpr double log2e = 1.4426950408889634074;

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

        /// 2^(j/8) for j = the low 3 bits of each index: a register permute
        /// on AVX2, a table read elsewhere.
        inline float exp2_table(std::uint32_t j) noexcept
        {
            return exp_constants<float>::table[j & 7];
        }
        template <class A>
        xsimd::batch<float, A> exp2_table(xsimd::batch<std::uint32_t, A> j) noexcept
        {
#if XSIMD_WITH_AVX2
            if constexpr (std::is_base_of<xsimd::avx2, A>::value)
            {
                return _mm256_permutevar8x32_ps(_mm256_loadu_ps(exp_constants<float>::table), j);
            }
#endif
            constexpr std::size_t width = xsimd::batch<float, A>::size;
            alignas(64) std::uint32_t in[width];
            alignas(64) float out[width];
            j.store_aligned(in);
            for (std::size_t i = 0; i < width; ++i)
            {
                out[i] = exp2_table(in[i]);
            }
            return xsimd::batch<float, A>::load_aligned(out);
        }

        /// 2^t for limit < t <= 0, as a fixed sequence of IEEE operations:
        /// r = t rounded (by adding the constant `magic`), f = t - r (exact),
        /// 2^f by a polynomial in Horner form, times 2^r. For float, r is a
        /// multiple of 1/8, r = k + j/8, and 2^r = 2^(j/8) from a table with k
        /// added to its exponent bits; for double, r = k, and the polynomial
        /// covers [-1/2, 1/2]. Relative error within 2 ulp. V is T or
        /// xsimd::batch<T>; the lanes of a batch get exactly the scalar results.
        template <class T, class V>
        V exp2_core(V t) noexcept
        {
            using c = exp_constants<T>;
            const V shifted = t + V(c::magic);
            const V f = t - (shifted - V(c::magic));
            constexpr std::size_t count = sizeof(c::poly) / sizeof(c::poly[0]);
            V p(c::poly[count - 1]);
            for (std::size_t i = count - 1; i-- > 0;)
            {
                p = V(c::poly[i]) + f * p;
            }
            // The low bits of `shifted` hold r's numerator n (r = n / 2^table_bits).
            using K = decltype(to_bits(shifted));
            if constexpr (std::is_same<T, float>::value)
            {
                p = V(T(1)) + f * p;
                // n << (23 - 3) = (k << 23) + (j << 20), the magic's bits shifted out.
                const K n = to_bits(shifted);
                const K k = (n << (c::mantissa - c::table_bits)) & K(~((1u << c::mantissa) - 1u));
                return p * from_bits<T>(K(to_bits(exp2_table(n)) + k));
            }
            else
            {
                // 2^k = (k + bias) << mantissa.
                const K k = to_bits(shifted) - K(to_bits(T(c::magic)));
                return p * from_bits<T>(K((k + K(c::bias)) << c::mantissa));
            }
        }

        /// 2^t for t <= 0 or -inf; 0 at or below the limit (and for NaN).
        template <class T>
        T exp2_nonpos(T t) noexcept
        {
            return t > exp_constants<T>::limit ? exp2_core<T>(t) : T(0);
        }
        template <class T, class A>
        xsimd::batch<T, A> exp2_nonpos(xsimd::batch<T, A> t) noexcept
        {
            // Lanes at or below the limit compute garbage, then are zeroed.
            using V = xsimd::batch<T, A>;
            return xsimd::select(t > V(exp_constants<T>::limit), exp2_core<T>(t), V(T(0)));
        }

        /// exp(d) for d <= 0: 2^(d log2e), log2e rounded to T. Within a few ulp
        /// plus |d| ulp (the rounding of d log2e; a float logit of size |d|
        /// carries that much error already).
        template <class T>
        T exp_nonpos(T d) noexcept
        {
            return exp2_nonpos(d * T(log2e));
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
                __m256d half;  // (l0+l4, l1+l5, l2+l6, l3+l7)
                if constexpr (std::is_same<T, float>::value)
                {
                    const __m256 l = acc[0];
                    half = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(l)),
                                         _mm256_cvtps_pd(_mm256_extractf128_ps(l, 1)));
                }
                else
                {
                    half = _mm256_add_pd(acc[0], acc[1]);
                }
                const __m128d quarter = _mm_add_pd(_mm256_castpd256_pd128(half), _mm256_extractf128_pd(half, 1));
                return _mm_cvtsd_f64(quarter) + _mm_cvtsd_f64(_mm_unpackhi_pd(quarter, quarter));
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

        /// The contract's weight of logit x at max m and base-2 scale s2.
        template <class T>
        T weight(T x, T m, T s2) noexcept
        {
            return exp2_nonpos((x - m) * s2);
        }

        /// The weights of one block of 64 logits at (m, s2), summed into its
        /// lane vectors (and stored to w_out when `store`). With above_limit,
        /// the caller knows no exponent is at or below exp2's limit.
        template <bool above_limit, bool store, class T, std::size_t G>
        void block_weights(const T* block, batch<T> vm, batch<T> vs, batch<T> (&acc)[G], T* w_out) noexcept
        {
            using B = batch<T>;
            for (std::size_t t = 0; t < block_size; t += lanes)
            {
                for (std::size_t g = 0; g < G; ++g)
                {
                    const B e = (B::load_unaligned(block + t + g * B::size) - vm) * vs;
                    const B w = above_limit ? exp2_core<T>(e) : exp2_nonpos(e);
                    acc[g] = t == 0 ? w : acc[g] + w;
                    if (store)
                    {
                        w.store_unaligned(w_out + t + g * B::size);
                    }
                }
            }
        }

        /// Z over a whole row at (m, s2), SIMD over full blocks, scalar over
        /// the tail: the same bits either way. A block whose smallest logit
        /// has its exponent above exp2's limit (no masked token, no weight
        /// below 2^-126) skips the limit's test. With `w_out`, every weight is
        /// also stored there (n of them).
        template <class T>
        double dense_total(const T* x, std::size_t n, T m, T s2, block_record* record, T* w_out = nullptr)
        {
            return w_out != nullptr ? dense_total<true>(x, n, m, s2, record, w_out)
                                    : dense_total<false>(x, n, m, s2, record, w_out);
        }

        template <bool store, class T>
        double dense_total(const T* x, std::size_t n, T m, T s2, block_record* record, T* w_out)
        {
            using B = batch<T>;
            constexpr std::size_t width = B::size;
            static_assert(lanes % width == 0, "xsampler: unsupported SIMD width");
            constexpr std::size_t groups = lanes / width;  // vectors per lane set
            blocked_sum<T> sum(record);
            const B vm(m);
            const B vs(s2);
            const B limit(exp_constants<T>::limit);
            const std::size_t full = n / block_size;
            for (std::size_t b = 0; b < full; ++b)
            {
                const T* block = x + b * block_size;
                B low = B::load_unaligned(block);
                for (std::size_t i = width; i < block_size; i += width)
                {
                    low = xsimd::min(low, B::load_unaligned(block + i));
                }
                // Rounding is monotone: x >= low gives (x - m) * s2 >= (low - m) * s2.
                B acc[groups];
                T* const block_out = store ? w_out + b * block_size : nullptr;
                if (xsimd::all((low - vm) * vs > limit))
                {
                    block_weights<true, store>(block, vm, vs, acc, block_out);
                }
                else
                {
                    block_weights<false, store>(block, vm, vs, acc, block_out);
                }
                sum.add_block(b, combine_lanes(acc));
            }
            for (std::size_t i = full * block_size; i < n; ++i)
            {
                const T w = weight(x[i], m, s2);
                sum.add(i, w);
                if (store)
                {
                    w_out[i] = w;
                }
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

        /// The lanes where a or b is NaN: one comparison on x86.
        template <class T, class A>
        xsimd::batch_bool<T, A> unordered(const xsimd::batch<T, A>& a, const xsimd::batch<T, A>& b) noexcept
        {
#if XSIMD_WITH_AVX
            if constexpr (std::is_base_of<xsimd::avx, A>::value)
            {
                if constexpr (std::is_same<T, float>::value)
                {
                    return _mm256_cmp_ps(a, b, _CMP_UNORD_Q);
                }
                else
                {
                    return _mm256_cmp_pd(a, b, _CMP_UNORD_Q);
                }
            }
#endif
            return (a != a) | (b != b);
        }

        /// A for_each_passing watch that does scan_row's checks on the way:
        /// the row's max and whether a NaN was seen.
        template <class T>
        struct row_watch
        {
            using B = batch<T>;
            B max = B(-std::numeric_limits<T>::infinity());
            decltype(B() != B()) nan = max != max;
            T tail_max = -std::numeric_limits<T>::infinity();
            bool tail_nan = false;

            void group(const B& group_max, const B (&v)[4]) noexcept
            {
                max = xsimd::max(max, group_max);
                nan = nan | unordered(v[0], v[1]) | unordered(v[2], v[3]);
            }
            void one(T x) noexcept
            {
                tail_max = std::max(tail_max, x);
                tail_nan = tail_nan || x != x;
            }
            /// Whether the row is valid: no NaN, no +inf, not every token masked.
            bool valid() const noexcept
            {
                alignas(64) T lane[B::size];
                max.store_aligned(lane);
                const T best = std::max(*std::max_element(lane, lane + B::size), tail_max);
                return !xsimd::any(nan) && !tail_nan && best < std::numeric_limits<T>::infinity() &&
                       best > -std::numeric_limits<T>::infinity();
            }
        };

        template <class T>
        struct row_stats
        {
            T max;
            token_id argmax;
        };

        /// One pass (SIMD): validates the row and finds its max; then finds
        /// the first index of the max (ties: the lowest id).
        /// Throws unless a row of n tokens can be sampled: not empty, and
        /// every index a token_id.
        inline void check_row_size(std::size_t n)
        {
            if (n == 0)
            {
                throw invalid_logits("logits: the row is empty");
            }
            if (n > std::size_t(std::numeric_limits<token_id>::max()))
            {
                throw invalid_logits("logits: a row of " + std::to_string(n) + " tokens is longer than token_id can index");
            }
        }

        template <class T>
        row_stats<T> scan_row(row_ref<T> row)
        {
            check_row_size(row.size);
            using B = batch<T>;
            constexpr std::size_t width = B::size;
            constexpr T inf = std::numeric_limits<T>::infinity();
            const T* x = row.data;
            const std::size_t n = row.size;
            const std::size_t vec_end = n - n % (2 * width);
            B mx0(-inf), mx1(-inf);
            auto nan = mx0 != mx0;  // a NaN seen (+inf shows in the max)
            for (std::size_t i = 0; i < vec_end; i += 2 * width)
            {
                const B a = B::load_unaligned(x + i);
                const B b = B::load_unaligned(x + i + width);
                mx0 = xsimd::max(mx0, a);
                mx1 = xsimd::max(mx1, b);
                nan = nan | unordered(a, b);
            }
            alignas(64) T lane_max[width];
            xsimd::max(mx0, mx1).store_aligned(lane_max);
            T best = *std::max_element(lane_max, lane_max + width);
            bool any_nan = xsimd::any(nan);
            for (std::size_t i = vec_end; i < n; ++i)
            {
                any_nan = any_nan || x[i] != x[i];
                best = std::max(best, x[i]);
            }
            if (any_nan || best == inf)
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
            // The first index of the max: four vectors a test, then one by one.
            std::size_t arg = 0;
            const B vbest(best);
            for (; arg + 4 * width <= n; arg += 4 * width)
            {
                const T* v = x + arg;
                if (xsimd::any((B::load_unaligned(v) == vbest) | (B::load_unaligned(v + width) == vbest) |
                               (B::load_unaligned(v + 2 * width) == vbest) |
                               (B::load_unaligned(v + 3 * width) == vbest)))
                {
                    break;
                }
            }
            while (x[arg] != best)
            {
                ++arg;
            }
            return {best, token_id(arg)};
        }
    }
}

#endif
