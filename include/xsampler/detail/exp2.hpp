// xsampler/detail/exp2.hpp — the weights: the library's own exp2. (xsampler, BSD-3-Clause)
//
// The weights w_i of the logits: the library's own exp2, one fixed sequence
// of IEEE operations for scalars and SIMD vectors alike.
//
// Contract (T the row's type, float or double)
// - m   = the row's largest logit (exact);
//   s   = the temperature scale (the product of 1/T over the temperature
//         stages so far), rounded to T and clamped to T's largest value;
//   s2  = s * log2(e), rounded to T;
//   w_i = weight(x_i, m, s2) = 2^((x_i - m) * s2), in T, by exp2_nonpos: the
//         same bits in scalar and SIMD code, with every compiler, libm and
//         optimisation level; 0 when the exponent is <= -126 (float) or
//         -1022 (double), and for masked tokens (-inf).
// - The exponent (x - m) * s is exponent(x, m, s): where x - m overflows (a
//   row spanning more than T's largest value, say float logits -3e38 and
//   3e38) it is (x/2 - m/2) * (2s) instead, the same product with the
//   difference rounded in a wider exponent range. It stays monotone in x, and
//   at a tiny scale (a temperature above ~1e36 on a float row) such a token
//   keeps the weight it truly has instead of 0.
//   Z and p_i = w_i / Z: detail/blocked_sum.hpp.
// - The weights are as precise as the row: a float row's logits carry
//   relative errors of 6e-8 already. exp2_nonpos is within 2 ulp of 2^t.
// - Bit-for-bit results need IEEE arithmetic without contraction into fused
//   multiply-adds: the xsampler CMake target adds -ffp-contract=off for GCC
//   and Clang. (x86-64's default flags never contract; -march=native may.)
#ifndef XSAMPLER_DETAIL_EXP2_HPP
#define XSAMPLER_DETAIL_EXP2_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "simd.hpp"

namespace xsampler
{
    namespace detail
    {
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
            return permute8(exp_constants<float>::table, j);
        }

        /// 2^t for limit < t <= 0, as a fixed sequence of IEEE operations:
        /// r = t rounded (by adding the constant `magic`), f = t - r (exact),
        /// 2^f by a polynomial in Horner form, times 2^r. For float, r is a
        /// multiple of 1/8, r = k + j/8, and 2^r = 2^(j/8) from a table with k
        /// added to its exponent bits; for double, r = k, and the polynomial
        /// covers [-1/2, 1/2]. Relative error within 2 ulp. V is T or
        /// xsimd::batch<T>; the lanes of a batch get exactly the scalar results.
        template <class T, class V>
        XSAMPLER_ALWAYS_INLINE V exp2_core(V t) noexcept
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
        XSAMPLER_ALWAYS_INLINE xsimd::batch<T, A> exp2_nonpos(xsimd::batch<T, A> t) noexcept
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

        /// (x - m) * s for x <= m (m finite, s >= 0): where x - m overflows
        /// (x finite), (x/2 - m/2) * (2s); both halvings are exact, as both
        /// values are then that large. Monotone in x.
        template <class T>
        T exponent(T x, T m, T s) noexcept
        {
            const T d = x - m;
            constexpr T inf = std::numeric_limits<T>::infinity();
            return d != -inf || x == -inf ? d * s : (x * T(0.5) - m * T(0.5)) * (s + s);
        }
        template <class T, class A>
        xsimd::batch<T, A> exponent(xsimd::batch<T, A> x, xsimd::batch<T, A> m, xsimd::batch<T, A> s) noexcept
        {
            using V = xsimd::batch<T, A>;
            const V d = x - m;
            const V inf(std::numeric_limits<T>::infinity());
            const V half(T(0.5));
            return xsimd::select((d == -inf) & (x != -inf), (x * half - m * half) * (s + s), d * s);
        }
        /// Whether x - m can overflow for some finite x <= m.
        template <class T>
        bool may_overflow(T m) noexcept
        {
            return -std::numeric_limits<T>::max() - m == -std::numeric_limits<T>::infinity();
        }

        /// The contract's weight of logit x at max m and base-2 scale s2.
        template <class T>
        T weight(T x, T m, T s2) noexcept
        {
            return exp2_nonpos(exponent(x, m, s2));
        }
    }
}

#endif
