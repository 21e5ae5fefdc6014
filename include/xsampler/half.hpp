// xsampler/half.hpp — fp16 and bf16 logits: 16-bit storage types read as float. (xsampler, BSD-3-Clause)
//
// f16 (IEEE 754 binary16) and bf16 (bfloat16: a float's upper 16 bits) are
// storage types: an engine's 16-bit logits, held in an xtensor container or
// viewed in place with xt::adapt over a reinterpret_cast of its buffer
// (both are trivially copyable, two bytes, the bits and nothing else).
//
// Contract
// - A row of f16 or bf16 is sampled as the float row of the same values:
//   every stage, result and error is the float row's, bit for bit (its
//   logit type is float; tests/test_half.cpp checks each stage). The
//   kernels widen the 16-bit lanes in registers as they load them (F16C
//   where the build has it, integer lanes otherwise, the same bits: the
//   widening is exact), never into a whole converted copy of the row.
// - float(h) is exact: every f16 and bf16 value is a float. An f16 widens
//   by F16C's vcvtph2ps (_cvtsh_ss) where the build has F16C, else by
//   integer arithmetic (the same bits); a flush-to-zero or
//   denormals-are-zero mode changes neither (vcvtph2ps ignores DAZ, and
//   every f16 is a normal float or zero); an f16 NaN widens to a quiet
//   NaN, a bf16 NaN keeps its bits; ±inf to ±inf.
// - f16(x) and bf16(x) round a float to the nearest 16-bit value (ties to
//   even; past f16's range, ±inf; NaN stays NaN), in integer arithmetic
//   (no rounding mode or -ffast-math changes it): how a test or the tool
//   builds a row. from_bits(b) takes the stored bits as they are.
// - Both types may alias any memory (GCC's and Clang's may_alias), so
//   reading an engine's uint16_t buffer through a reinterpret_cast is
//   defined there.
#ifndef XSAMPLER_HALF_HPP
#define XSAMPLER_HALF_HPP

#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace xsampler
{
    namespace detail
    {
        inline float float_from_bits(std::uint32_t b) noexcept
        {
            float x;
            std::memcpy(&x, &b, sizeof x);
            return x;
        }
        inline std::uint32_t bits_of(float x) noexcept
        {
            std::uint32_t b;
            std::memcpy(&b, &x, sizeof b);
            return b;
        }

        /// binary16 bits to float, exactly: F16C where the build has it,
        /// else integer steps (detail/simd.hpp's SSE2 lanes do the same).
        inline float widen_f16(std::uint16_t h) noexcept
        {
#if defined(__F16C__)
            return _cvtsh_ss(h);
#else
            const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
            const std::uint32_t em = h & 0x7fffu;  // exponent and mantissa
            if (em < 0x0400u)
            {
                // Zero or subnormal: mantissa · 2^-24, exact in float (a normal one).
                return float_from_bits(bits_of(float(em) * 0x1p-24f) | sign);
            }
            if (em >= 0x7c00u)
            {
                // inf, or NaN made quiet.
                return float_from_bits(sign | 0x7f800000u | (em & 0x3ffu) << 13 | (em > 0x7c00u ? 0x00400000u : 0u));
            }
            return float_from_bits(sign | ((em << 13) + (std::uint32_t(127 - 15) << 23)));
#endif
        }

        /// float to binary16 bits, to nearest (ties to even).
        inline std::uint16_t narrow_f16(float x) noexcept
        {
            const std::uint32_t b = bits_of(x);
            const std::uint16_t sign = std::uint16_t((b >> 16) & 0x8000u);
            const std::uint32_t a = b & 0x7fffffffu;
            if (a > 0x7f800000u)
            {
                return std::uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN
            }
            if (a >= 0x477ff000u)
            {
                return std::uint16_t(sign | 0x7c00u);  // past 65504 rounded: inf
            }
            if (a < 0x38800000u)
            {
                // Below 2^-14: |x| = mant · 2^(e - 150) is q = mant · 2^(e - 126)
                // units of 2^-24, rounded to nearest even (q = 1024: the least normal).
                const std::uint32_t e = a >> 23;
                if (e < 102)
                {
                    return sign;  // below 2^-25: rounds to zero
                }
                const std::uint32_t mant = (a & 0x007fffffu) | 0x00800000u;
                const std::uint32_t shift = 126 - e;  // 14 to 24
                std::uint32_t q = mant >> shift;
                const std::uint32_t rest = mant & ((1u << shift) - 1);
                const std::uint32_t half = 1u << (shift - 1);
                q += rest > half || (rest == half && (q & 1u) != 0);
                return std::uint16_t(sign | q);
            }
            // Normal: drop 13 mantissa bits, rounding to nearest even (a carry may
            // step the exponent, as it should).
            const std::uint32_t rebased = a - (std::uint32_t(127 - 15) << 23);
            const std::uint32_t rounded = rebased + 0x0fffu + ((rebased >> 13) & 1u);
            return std::uint16_t(sign | (rounded >> 13));
        }

        /// bfloat16 bits to float: the upper half of its bits, exactly.
        inline float widen_bf16(std::uint16_t h) noexcept { return float_from_bits(std::uint32_t(h) << 16); }

        /// float to bfloat16 bits, to nearest (ties to even; NaN stays NaN).
        inline std::uint16_t narrow_bf16(float x) noexcept
        {
            const std::uint32_t b = bits_of(x);
            if ((b & 0x7fffffffu) > 0x7f800000u)
            {
                return std::uint16_t((b >> 16) | 0x0040u);
            }
            return std::uint16_t((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
        }
    }

#if defined(__GNUC__) || defined(__clang__)
#define XSAMPLER_MAY_ALIAS __attribute__((__may_alias__))
#else
#define XSAMPLER_MAY_ALIAS
#endif

    /// An IEEE 754 binary16 logit (storage only: it widens to float exactly).
    struct XSAMPLER_MAY_ALIAS f16
    {
        std::uint16_t bits = 0;

        f16() = default;
        /// x rounded to the nearest binary16 (ties to even).
        explicit f16(float x) noexcept : bits(detail::narrow_f16(x)) {}
        static f16 from_bits(std::uint16_t b) noexcept
        {
            f16 h;
            h.bits = b;
            return h;
        }
        operator float() const noexcept { return detail::widen_f16(bits); }
    };

    /// A bfloat16 logit (storage only: it widens to float exactly).
    struct XSAMPLER_MAY_ALIAS bf16
    {
        std::uint16_t bits = 0;

        bf16() = default;
        /// x rounded to the nearest bfloat16 (ties to even).
        explicit bf16(float x) noexcept : bits(detail::narrow_bf16(x)) {}
        static bf16 from_bits(std::uint16_t b) noexcept
        {
            bf16 h;
            h.bits = b;
            return h;
        }
        operator float() const noexcept { return detail::widen_bf16(bits); }
    };

    static_assert(sizeof(f16) == 2 && sizeof(bf16) == 2 && std::is_trivially_copyable<f16>::value &&
                      std::is_trivially_copyable<bf16>::value,
                  "xsampler: f16 and bf16 must be the 16 bits alone");

    namespace detail
    {
        template <class S>
        struct is_half : std::false_type
        {
        };
        template <>
        struct is_half<f16> : std::true_type
        {
        };
        template <>
        struct is_half<bf16> : std::true_type
        {
        };

        /// The type a row of S is sampled in: float for f16 and bf16, else S.
        template <class S>
        using logit_of = std::conditional_t<is_half<S>::value, float, S>;
    }
}

#endif
