// xsampler/detail/exact.hpp — exact keep/drop decisions: error bounds and double-double. (xsampler, BSD-3-Clause)
//
// What the filters need to make every keep/drop decision the one exact (real)
// arithmetic makes on the row's own values: bounds on the error of the
// weights and sums the fast paths compute, and a second and third precision
// to re-decide where a bound cannot.
//
// Contract
// - The exact values: d_i = (x_i - m) * S, x_i and m the row's values (float
//   or double, read exactly), S the scale as the candidates hold it (a
//   double: the product of the 1/T, each step rounded to double); the
//   weights W_i = e^{d_i}; Z = sum of the W_i; p_i = W_i / Z.
// - Tier 1 (the fast path, in T): t = exponent(x, m, s2) and w = 2^t by
//   exp2_nonpos (detail/exp2.hpp). t is (d_i log2 e)(1 + delta) with |delta|
//   <= 3u + 2u_d (the roundings of s to T, of s log2 e, of x - m and of the
//   product; u = 2^-24 for float, 2^-53 for double), and exp2_nonpos is within
//   2 ulp (4u relative), so |w - W| <= (3|t| + 5) u W (weight_error), or W <=
//   2^(limit + 1) where w is flushed to 0 (flush_error).
// - Sums: sum_i W_i |log2 W_i| = Z (H - log2 Z) <= Z log2 n (H the entropy in
//   bits, at most log2 n; Z >= 1 as the max weight is 1), so a Z computed from
//   tier-1 weights is within (3 log2 n + 5) u Z of the exact one, plus its
//   summation error (z_error); a prefix of the rank has |t| <= |t_n| for every
//   member, so its mass is within (3 |t_n| + 5) u of its exact mass. Where a
//   caller knows a smaller bound a on sum W |t| (top-p's buckets; a set R's
//   entropy: sum_R W |t| <= R log2(n / R)), z_error_given and
//   prefix_error_given use it instead.
// - Tier 2: the same in double (the library's double exp2; u = 2^-53), sums in
//   double-double (error <= 2u_d + 2 n u_d^2 relative).
// - Tier 3: double-double: d_i exact up to 2^-104 |d_i| (two_sum, fma), e^d by
//   range reduction and a Taylor series, within 2^-90 relative (exp_dd) or
//   2^-1020 absolute (below double's range); sums within n 2^-103 relative.
// - A decision is taken at the first tier whose bounds separate the two
//   sides; `counters()` counts how often tiers 2 and 3 ran, and how often
//   even tier 3 could not separate them (the residual: exact values closer
//   than about 2^-85 relative, decided by tier 3's computed values).
// - All of this needs IEEE double with round-to-nearest, std::fma correctly
//   rounded (C++ requires it), and no contraction (the CMake target adds
//   -ffp-contract=off).
#ifndef XSAMPLER_DETAIL_EXACT_HPP
#define XSAMPLER_DETAIL_EXACT_HPP

#include <cmath>
#include <cstddef>
#include <limits>

#include "exp2.hpp"

namespace xsampler
{
    namespace detail
    {
        /// How often the exact decisions needed more than the fast path, per
        /// thread (for tests and benchmarks; nothing reads them).
        struct exact_counters
        {
            std::size_t tier2 = 0;     ///< re-decisions in double
            std::size_t tier3 = 0;     ///< re-decisions in double-double
            std::size_t residual = 0;  ///< tier 3 could not separate either
        };
        inline exact_counters& counters() noexcept
        {
            static thread_local exact_counters c;
            return c;
        }

        /// The unit roundoff of T.
        template <class T>
        constexpr double unit() noexcept
        {
            return double(std::numeric_limits<T>::epsilon()) / 2;
        }

        /// Bound on |w - W| / W for a tier-1 weight of exponent t (base 2),
        /// computed in T (see the top of this file); 5% slack covers the
        /// second-order terms.
        template <class T>
        double weight_error(double t) noexcept
        {
            return 1.05 * (3.0 * std::abs(t) + 5.0) * unit<T>();
        }
        /// Bound on the weight of a token that tier 1 flushed to 0.
        template <class T>
        constexpr double flush_error() noexcept
        {
            return std::ldexp(1.0, int(exp_constants<T>::limit) + 1);
        }

        /// Bound on |z - Z| for a Z of n tokens computed from tier-1 weights
        /// in T, summed in the blocked order (lanes in T, the rest in double),
        /// or by any order of double additions (at most n + 5000 of them).
        template <class T>
        double z_error(double z, std::size_t n) noexcept
        {
            const double rel = 1.05 * ((3.0 * std::log2(double(n) + 1.0) + 12.0) * unit<T>() +
                                       (double(n) + 5000.0) * unit<double>());
            return rel * 1.01 * z + double(n) * flush_error<T>();
        }
        /// Bound on |c - C| for the mass c of a rank prefix whose last token
        /// has exponent t, of a row of n tokens, computed as above.
        template <class T>
        double prefix_error(double c, double t, std::size_t n) noexcept
        {
            return 1.05 * (weight_error<T>(t) + 8.0 * unit<T>() + (double(n) + 5000.0) * unit<double>()) * c +
                   double(n) * flush_error<T>();
        }

        /// z_error where sum W |t| (exact weights, t base 2) over the row is
        /// known to be at most a, rather than Z log2 n.
        template <class T>
        double z_error_given(double z, double a, std::size_t n) noexcept
        {
            return 1.1 * (3.0 * a * unit<T>() + (12.0 * unit<T>() + (double(n) + 5000.0) * unit<double>()) * 1.01 * z) +
                   double(n) * flush_error<T>();
        }
        /// prefix_error where sum W |t| over the prefix is known to be at
        /// most a, rather than |t| c.
        template <class T>
        double prefix_error_given(double c, double a, std::size_t n) noexcept
        {
            return 1.1 * (1.05 * (3.0 * a + 5.0 * c) * unit<T>() + (8.0 * unit<T>() + (double(n) + 5000.0) * unit<double>()) * c) +
                   double(n) * flush_error<T>();
        }

        // --- double-double: hi + lo, |lo| <= ulp(hi) / 2 ---

        struct dd
        {
            double hi = 0.0;
            double lo = 0.0;
        };

        inline dd two_sum(double a, double b) noexcept
        {
            const double s = a + b;
            const double bb = s - a;
            return {s, (a - (s - bb)) + (b - bb)};
        }
        inline dd quick_two_sum(double a, double b) noexcept  // |a| >= |b|
        {
            const double s = a + b;
            return {s, b - (s - a)};
        }
        inline dd two_prod(double a, double b) noexcept
        {
            const double p = a * b;
            return {p, std::fma(a, b, -p)};
        }
        inline dd add(dd a, dd b) noexcept
        {
            dd s = two_sum(a.hi, b.hi);
            const dd t = two_sum(a.lo, b.lo);
            s.lo += t.hi;
            s = quick_two_sum(s.hi, s.lo);
            s.lo += t.lo;
            return quick_two_sum(s.hi, s.lo);
        }
        inline dd neg(dd a) noexcept { return {-a.hi, -a.lo}; }
        inline dd sub(dd a, dd b) noexcept { return add(a, neg(b)); }
        inline dd mul(dd a, dd b) noexcept
        {
            dd p = two_prod(a.hi, b.hi);
            p.lo += a.hi * b.lo + a.lo * b.hi;
            return quick_two_sum(p.hi, p.lo);
        }
        inline dd mul(dd a, double b) noexcept
        {
            dd p = two_prod(a.hi, b);
            p.lo += a.lo * b;
            return quick_two_sum(p.hi, p.lo);
        }
        /// a / b for a small integer b: the quotient's remainder is exact by fma.
        inline dd div(dd a, double b) noexcept
        {
            const double q1 = a.hi / b;
            const double r = std::fma(-q1, b, a.hi) + a.lo;
            return quick_two_sum(q1, r / b);
        }
        /// 1 / y for a normal y > 0 in double-double (one correction step: within 2^-104).
        inline dd recip_dd(dd y) noexcept
        {
            const double q = 1.0 / y.hi;
            const dd r = sub(dd{1.0, 0.0}, mul(y, q));
            return quick_two_sum(q, r.hi * q);
        }
        inline double value(dd a) noexcept { return a.hi + a.lo; }

        /// A running sum of non-negative terms in double-double.
        struct dd_sum
        {
            dd s;
            void add(double x) noexcept
            {
                const dd t = two_sum(s.hi, x);
                s = quick_two_sum(t.hi, t.lo + s.lo);
            }
            void add(dd x) noexcept { s = detail::add(s, x); }
        };

        /// ln 2 to 160 bits: hi + mid + lo.
        constexpr double ln2_hi = 6.93147180559945286227e-01;
        constexpr double ln2_mid = 2.31904681384629955842e-17;
        constexpr double ln2_lo = 5.70770843841621207671e-34;

        /// d = (x - m) * s as double-double, x <= m, m finite, s > 0: within
        /// 2^-104 |d| (x - m exact by two_sum, or as (x/2 - m/2) * 2s where it
        /// overflows; the product by fma). -inf for a masked x, and where the
        /// product overflows.
        inline dd exponent_dd(double x, double m, double s) noexcept
        {
            constexpr double inf = std::numeric_limits<double>::infinity();
            if (x == -inf)
            {
                return {-inf, 0.0};
            }
            dd diff = two_sum(x, -m);
            double scale = s;
            if (!(diff.hi > -inf))
            {
                diff = two_sum(x * 0.5, -(m * 0.5));
                scale = s * 2.0;
            }
            dd p = two_prod(diff.hi, scale);
            if (!(p.hi > -inf))
            {
                return {-inf, 0.0};  // the product overflows (its low part would be NaN)
            }
            p.lo += diff.lo * scale;
            return quick_two_sum(p.hi, p.lo);
        }

        /// |(x - m)·S| for x <= m: 0 where x == m (whatever S), inf where the
        /// product overflows.
        inline double gap(double x, double m, double S) noexcept { return x == m ? 0.0 : -exponent(x, m, S); }
        inline dd gap_dd(double x, double m, double S) noexcept { return x == m ? dd{} : neg(exponent_dd(x, m, S)); }

        /// e^d for d <= 0 (or -inf) in double-double: d = k ln2 + r with k =
        /// round(d / ln 2) (r within 2^-100 |d|, by a three-part ln 2), e^r =
        /// (e^(r/256))^(2^8), e^(r/256) by its Taylor series to degree 11
        /// (truncation < 2^-120), times 2^k. Relative error within 2^-90;
        /// where the result is below 2^-1000, absolute error within 2^-1020.
        inline dd exp_dd(dd d) noexcept
        {
            if (!(d.hi > -1100.0))  // and d.hi < 709: no overflow
            {
                return {0.0, 0.0};  // e^d < 2^-1586: within the absolute bound
            }
            const double k = std::nearbyint(d.hi / ln2_hi);
            // r = d - k ln2, k an integer of at most 11 bits: k * ln2_hi is
            // exact to 106 bits by two_prod, and so on.
            dd r = sub(d, two_prod(k, ln2_hi));
            r = sub(r, two_prod(k, ln2_mid));
            r = sub(r, dd{k * ln2_lo, 0.0});
            // r / 256 (exact), then Taylor.
            r.hi = std::ldexp(r.hi, -8);
            r.lo = std::ldexp(r.lo, -8);
            dd sum{1.0, 0.0};
            dd term{1.0, 0.0};
            for (int i = 1; i <= 11; ++i)
            {
                term = div(mul(term, r), double(i));
                sum = add(sum, term);
            }
            for (int i = 0; i < 8; ++i)
            {
                sum = mul(sum, sum);
            }
            const int e = int(k);
            return {std::ldexp(sum.hi, e), std::ldexp(sum.lo, e)};
        }

        /// ln x for a finite x > 0 as double-double, within log_error(ln x):
        /// x = f 2^e (exact, e = 0 for x in [2^-900, 2^900]), ln f from
        /// std::log refined by two Newton steps y += f e^-y - 1 (each squares
        /// the error of any std::log within 1e-6: no trust in libm needed;
        /// what is left is exp_dd's relative error, absolute here), plus e ln 2.
        inline dd log_dd(double x) noexcept
        {
            int e = 0;
            const double f = x >= 0x1p-900 && x <= 0x1p900 ? x : std::frexp(x, &e);
            dd y{std::log(f), 0.0};
            for (int i = 0; i < 2; ++i)
            {
                y = add(y, sub(mul(exp_dd(neg(y)), f), dd{1.0, 0.0}));
            }
            const double k = double(e);
            return add(add(y, two_prod(k, ln2_hi)), add(two_prod(k, ln2_mid), dd{k * ln2_lo, 0.0}));
        }

        /// ln x for a double-double x > 0 (x.hi normal): ln x.hi + x.lo / x.hi,
        /// within log_error(ln x) + 2^-100 |ln x| (the dropped (lo/hi)^2 / 2
        /// <= 2^-107 and the sum's rounding).
        inline dd log_dd(dd x) noexcept { return add(log_dd(x.hi), dd{x.lo / x.hi, 0.0}); }

        /// The bound of log_dd: absolute 2^-86, plus 2^-100 |ln x| (e ln 2).
        inline double log_error(double log_x) noexcept
        {
            return 1.3e-26 + 7.9e-31 * std::abs(log_x);
        }

        /// The bound of exp_dd, relative.
        constexpr double exp_dd_error = 3.2311742677852644e-27;  // 2^-88
        /// Its absolute bound (the rounding of a subnormal result), added to the relative one.
        constexpr double exp_dd_tiny = 2e-323;                   // 4 times the least subnormal

        /// The least x <= m that passes `test`, a test monotone in x that m
        /// passes and -inf fails: bisection over the floating-point numbers
        /// in [-inf, m] (the threshold of a filter's exact level, as a logit).
        template <class T, class Test>
        T least_logit_where(T m, Test test) noexcept
        {
            using bits = typename exp_constants<T>::bits;
            constexpr bits sign = bits(1) << (8 * sizeof(bits) - 1);
            // The bits of a float, reordered so that integer order is numeric order.
            const auto order = [](T v) { const bits b = to_bits(v); return b & sign ? bits(~b) : bits(b | sign); };
            const auto value = [](bits o) { return from_bits<T>(o & sign ? bits(o & ~sign) : bits(~o)); };
            bits lo = order(-std::numeric_limits<T>::infinity());  // -inf fails
            bits hi = order(m);
            while (hi - lo > 1)
            {
                const bits mid = lo + (hi - lo) / 2;
                (test(value(mid)) ? hi : lo) = mid;
            }
            return value(hi);
        }
    }
}

#endif
