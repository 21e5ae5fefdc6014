// xsampler/detail/simd.hpp — SIMD lane helpers; every intrinsic. (xsampler, BSD-3-Clause)
//
// SIMD lane helpers (xsimd) for the kernels of the other headers: the vector
// type, lane masks as bits, the walk over the logits that pass a test, and the
// few operations that need an instruction xsimd does not name. Every raw
// intrinsic of the library (_mm256_*, _mm_*) is in this header, but for
// half.hpp's one scalar F16C conversion (_cvtsh_ss).
//
// Contract
// - batch<T> is xsimd's vector of T for kernel_arch: the build's default
//   architecture, but AVX2 where AVX-512 is on, so that a vector never holds
//   more than the 8 lanes of the blocked sum (detail/blocked_sum.hpp).
// - Lane i of a mask is bit i; walks over bits and over passing logits go in
//   increasing index order.
// - Each helper with an intrinsic path has a portable path that gives the
//   same bits (unordered, permute8), or is AVX only and says so (fold_lanes,
//   which adds in the order its comment states). The other helpers move,
//   compare and select lanes and never round.
#ifndef XSAMPLER_DETAIL_SIMD_HPP
#define XSAMPLER_DETAIL_SIMD_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include <xsimd/xsimd.hpp>

#include "../half.hpp"
#include "../types.hpp"

// A kernel's rare tier (a fallback in more precision) kept out of line, so
// that the compiler's inlining budget does not fold it into the hot search
// that calls it (top-p's double tier had been: docs/performance.md,
// 2026-12-06).
#if defined(__GNUC__) || defined(__clang__)
#define XSAMPLER_NOINLINE __attribute__((noinline))
#elif defined(_MSC_VER)
#define XSAMPLER_NOINLINE __declspec(noinline)
#else
#define XSAMPLER_NOINLINE
#endif

// A reduction's per-block code (detail/reduce.hpp), inlined into its driver
// so that the lane sums stay in registers.
#if defined(__GNUC__) || defined(__clang__)
#define XSAMPLER_ALWAYS_INLINE inline __attribute__((always_inline))
#elif defined(_MSC_VER)
#define XSAMPLER_ALWAYS_INLINE __forceinline
#else
#define XSAMPLER_ALWAYS_INLINE inline
#endif

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

        // --- loads: a row of T as it is, a row of f16 or bf16 widened in registers ---
        //
        // The same bits on every path (half.hpp's widen_f16 and widen_bf16 are
        // the scalar statement): F16C's vcvtph2ps where the build has it
        // (subnormals exact, NaN quieted), else integer lanes doing
        // widen_f16's steps, else one lane at a time.

#if XSIMD_WITH_SSE2
        // Four binary16 values, widened (widen_f16's steps on integer lanes).
        inline __m128 widen4_f16(const void* p) noexcept
        {
            const __m128i h = _mm_unpacklo_epi16(_mm_loadl_epi64(static_cast<const __m128i*>(p)), _mm_setzero_si128());
            const __m128i em = _mm_and_si128(h, _mm_set1_epi32(0x7fff));
            const __m128i sign = _mm_slli_epi32(_mm_xor_si128(h, em), 16);
            const __m128i normal = _mm_add_epi32(_mm_slli_epi32(em, 13), _mm_set1_epi32((127 - 15) << 23));
            const __m128i quiet = _mm_and_si128(_mm_cmpgt_epi32(em, _mm_set1_epi32(0x7c00)), _mm_set1_epi32(0x00400000));
            const __m128i special = _mm_or_si128(
                _mm_or_si128(_mm_slli_epi32(_mm_and_si128(em, _mm_set1_epi32(0x3ff)), 13), _mm_set1_epi32(0x7f800000)),
                quiet);
            const __m128i sub = _mm_castps_si128(_mm_mul_ps(_mm_cvtepi32_ps(em), _mm_set1_ps(0x1p-24f)));
            const __m128i is_special = _mm_cmpgt_epi32(em, _mm_set1_epi32(0x7bff));
            const __m128i is_sub = _mm_cmplt_epi32(em, _mm_set1_epi32(0x0400));
            __m128i r = _mm_or_si128(_mm_and_si128(is_special, special), _mm_andnot_si128(is_special, normal));
            r = _mm_or_si128(_mm_and_si128(is_sub, sub), _mm_andnot_si128(is_sub, r));
            return _mm_castsi128_ps(_mm_or_si128(r, sign));
        }
        // Four bfloat16 values, widened: each the upper half of a float.
        inline __m128 widen4_bf16(const void* p) noexcept
        {
            return _mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), _mm_loadl_epi64(static_cast<const __m128i*>(p))));
        }
#endif

        template <class H>
        XSAMPLER_ALWAYS_INLINE batch<float> widen_lanes(const H* x) noexcept
        {
            using B = batch<float>;
#if XSIMD_WITH_AVX
            if constexpr (B::size == 8)
            {
#if defined(__F16C__)
                if constexpr (std::is_same<H, f16>::value)
                {
                    return B(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x))));
                }
#endif
#if XSIMD_WITH_AVX2
                if constexpr (std::is_same<H, bf16>::value)
                {
                    return B(_mm256_castsi256_ps(
                        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x))), 16)));
                }
#endif
                const auto half = [&](std::size_t at) {
                    return std::is_same<H, f16>::value ? widen4_f16(x + at) : widen4_bf16(x + at);
                };
                return B(_mm256_insertf128_ps(_mm256_castps128_ps256(half(0)), half(4), 1));
            }
#endif
#if XSIMD_WITH_SSE2
            if constexpr (B::size == 4)
            {
                return B(std::is_same<H, f16>::value ? widen4_f16(x) : widen4_bf16(x));
            }
#endif
            alignas(64) float lane[B::size];
            for (std::size_t i = 0; i < B::size; ++i)
            {
                lane[i] = float(x[i]);
            }
            return B::load_aligned(lane);
        }

        /// The vector of logits at x: loaded as it is for a row of T, widened
        /// in registers for a row of f16 or bf16 (T float).
        template <class T, class S>
        XSAMPLER_ALWAYS_INLINE batch<T> load_logits(const S* x) noexcept
        {
            if constexpr (std::is_same<S, T>::value)
            {
                return batch<T>::load_unaligned(x);
            }
            else
            {
                static_assert(std::is_same<T, float>::value && is_half<S>::value, "xsampler: logits of T or of f16/bf16");
                return widen_lanes(x);
            }
        }

        /// Calls f(wide, at, len) for consecutive chunks [at, at + len) of the
        /// f16 or bf16 logits x[0, n), each widened into a float buffer as
        /// load_logits widens it (len: 1,024 but for the last chunk): a user
        /// stage's float runs (candidates::for_each_run) and edited_row's
        /// copies of a 16-bit row.
        template <class S, class F>
        void for_each_widened(const S* x, std::size_t n, F&& f)
        {
            using B = batch<float>;
            constexpr std::size_t chunk = 1024;
            alignas(64) float wide[chunk];
            for (std::size_t at = 0; at < n; at += chunk)
            {
                const std::size_t len = std::min(chunk, n - at);
                std::size_t i = 0;
                for (; i + B::size <= len; i += B::size)
                {
                    widen_lanes(x + at + i).store_aligned(wide + i);
                }
                for (; i < len; ++i)
                {
                    wide[i] = float(x[at + i]);
                }
                f(static_cast<const float*>(wide), at, len);
            }
        }

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

        /// The lanes of the low bits of `bits` (lane i is bit i): a broadcast,
        /// an and and a compare on AVX2, a store and a load elsewhere.
        template <class T, class A>
        xsimd::batch_bool<T, A> lanes_of(std::uint32_t bits) noexcept
        {
#if XSIMD_WITH_AVX2
            if constexpr (std::is_base_of<xsimd::avx2, A>::value)
            {
                if constexpr (std::is_same<T, float>::value)
                {
                    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
                    return _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(int(bits)), bit), bit));
                }
                else
                {
                    const __m256i bit = _mm256_setr_epi64x(1, 2, 4, 8);
                    return _mm256_castsi256_pd(
                        _mm256_cmpeq_epi64(_mm256_and_si256(_mm256_set1_epi64x(std::int64_t(bits)), bit), bit));
                }
            }
#endif
            constexpr std::size_t width = xsimd::batch<T, A>::size;
            bool lane[width];
            for (std::size_t i = 0; i < width; ++i)
            {
                lane[i] = (bits >> i & 1) != 0;
            }
            return xsimd::batch_bool<T, A>::load_unaligned(lane);
        }

        /// table[idx & 7] in every lane: one register permute on AVX2
        /// (vpermps reads the low 3 bits of each index), a table read
        /// elsewhere.
        template <class A>
        xsimd::batch<float, A> permute8(const float (&table)[8], xsimd::batch<std::uint32_t, A> idx) noexcept
        {
#if XSIMD_WITH_AVX2
            if constexpr (std::is_base_of<xsimd::avx2, A>::value)
            {
                return _mm256_permutevar8x32_ps(_mm256_loadu_ps(table), idx);
            }
#endif
            constexpr std::size_t width = xsimd::batch<float, A>::size;
            alignas(64) std::uint32_t in[width];
            alignas(64) float out[width];
            idx.store_aligned(in);
            for (std::size_t i = 0; i < width; ++i)
            {
                out[i] = table[in[i] & 7];
            }
            return xsimd::batch<float, A>::load_aligned(out);
        }

#if XSIMD_WITH_AVX
        /// Eight lane sums l0..l7 in AVX registers (one vector of 8 floats,
        /// or two of 4 doubles: l0..l3, l4..l7), added in double as
        /// ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)): the two 4-lane halves
        /// added, then that vector's two halves, then its two lanes. AVX
        /// only; elsewhere callers fold through memory in the same order.
        template <class T, class A, std::size_t G>
        double fold_lanes(const xsimd::batch<T, A> (&acc)[G]) noexcept
        {
            static_assert(std::is_base_of<xsimd::avx, A>::value, "xsampler: fold_lanes needs AVX");
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
        template <class S, class Test, class TestOne, class F, class Watch = no_watch>
        void for_each_passing(const S* x, std::size_t n, Test&& passes, TestOne&& passes_one, F&& f,
                              Watch&& watch = Watch{})
        {
            using T = logit_of<S>;
            using B = batch<T>;
            constexpr std::size_t width = B::size;
            constexpr std::size_t group = 4 * width;
            const std::size_t vec_end = n - n % group;
            for (std::size_t i = 0; i < vec_end; i += group)
            {
                const B v[] = {load_logits<T>(x + i), load_logits<T>(x + i + width), load_logits<T>(x + i + 2 * width),
                               load_logits<T>(x + i + 3 * width)};
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
                const T xi = x[i];
                watch.one(xi);
                if (passes_one(xi))
                {
                    f(i);
                }
            }
        }

        /// The largest of x[0, n) (n >= 1; -inf if all are; no NaN expected).
        template <class S, class T = logit_of<S>>
        T max_of(const S* x, std::size_t n) noexcept
        {
            using B = batch<T>;
            const std::size_t vec_end = n - n % B::size;
            T best = -std::numeric_limits<T>::infinity();
            if (vec_end > 0)
            {
                B m = load_logits<T>(x);
                for (std::size_t i = B::size; i < vec_end; i += B::size)
                {
                    m = xsimd::max(m, load_logits<T>(x + i));
                }
                alignas(64) T lane[B::size];
                m.store_aligned(lane);
                best = *std::max_element(lane, lane + B::size);
            }
            for (std::size_t i = vec_end; i < n; ++i)
            {
                best = std::max(best, T(x[i]));
            }
            return best;
        }

        /// The first index of v in x[0, n) (v must be there: a max_of's
        /// result): four vectors a test, then one by one.
        template <class S, class T>
        std::size_t first_index_of(const S* x, std::size_t n, T v) noexcept
        {
            using B = batch<T>;
            constexpr std::size_t width = B::size;
            std::size_t i = 0;
            const B vv(v);
            for (; i + 4 * width <= n; i += 4 * width)
            {
                const S* p = x + i;
                if (xsimd::any((load_logits<T>(p) == vv) | (load_logits<T>(p + width) == vv) |
                               (load_logits<T>(p + 2 * width) == vv) | (load_logits<T>(p + 3 * width) == vv)))
                {
                    break;
                }
            }
            while (T(x[i]) != v)
            {
                ++i;
            }
            return i;
        }
    }
}

#endif
