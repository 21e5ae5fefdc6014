// xsampler/row.hpp — rows of logits: access and validation. (xsampler, BSD-3-Clause)
//
// Rows of logits: access and validation. The numerics every stage shares are
// in the detail headers this one includes: detail/simd.hpp (the SIMD lane
// helpers), detail/exp2.hpp (the weights w_i) and detail/blocked_sum.hpp (Z,
// and p_i = w_i / Z).
//
// Contract
// - A logits row is any 1-D xtensor expression of float, double, f16 or
//   bf16 (half.hpp): an xt::xtensor<T, 1>, a row view of an xt::xtensor<T,
//   2>, or xt::adapt over an engine's buffer. A contiguous row is read in
//   place; any other expression is evaluated once (in its own type) into a
//   buffer the caller owns. A row of f16 or bf16 is sampled in float, as the
//   float row of the same values (its lanes widened as they are loaded).
// - -inf marks a masked token: probability 0, never drawn. NaN or +inf at any
//   index, an empty row, a row that is not 1-D, a row longer than token_id
//   can index, and a row where every token is masked throw invalid_logits
//   naming the index or the reason.
// - Probabilities are computed the same way everywhere in the library, so
//   every function agrees bit for bit with every other: w_i = 2^((x_i - m) *
//   s2) by the library's own exp2, Z summed in a fixed blocked order, built
//   with -ffp-contract=off (the CMake target adds it).
// - scan_row validates a row in one SIMD pass and gives its max and the first
//   index of the max (ties: the lowest id).
#ifndef XSAMPLER_ROW_HPP
#define XSAMPLER_ROW_HPP

#include <algorithm>
#include <cstddef>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <xsimd/xsimd.hpp>
#include <xtensor/xexpression.hpp>
#include <xtensor/xutils.hpp>

#include "types.hpp"
#include "detail/simd.hpp"
#include "detail/exp2.hpp"
#include "detail/blocked_sum.hpp"

namespace xsampler
{
    namespace detail
    {
        /// A contiguous row of logits: either the caller's memory or a copy.
        template <class T>
        struct row_ref
        {
            const T* data;
            std::size_t size;
        };

        /// The type a row's elements are stored in, and the one it is sampled in.
        template <class E>
        using stored_type = std::decay_t<typename E::value_type>;
        template <class E>
        using logit_type = logit_of<stored_type<E>>;

        /// A loaded row of logits sampled in T: a row of T, or for T = float
        /// a row of f16 or bf16. visit(f) calls f with the typed pointer.
        template <class T>
        struct stored_row
        {
            enum class kind : unsigned char
            {
                logit,
                f16,
                bf16
            };
            const void* data = nullptr;
            std::size_t size = 0;
            kind stored = kind::logit;

            stored_row() = default;
            stored_row(row_ref<T> r) noexcept : data(r.data), size(r.size) {}
            template <class H, std::enable_if_t<is_half<H>::value && std::is_same<T, float>::value, int> = 0>
            stored_row(row_ref<H> r) noexcept
                : data(r.data), size(r.size), stored(std::is_same<H, xsampler::f16>::value ? kind::f16 : kind::bf16)
            {
            }

            /// f(x) with x the row's typed pointer (const T*, const f16* or const bf16*).
            template <class F>
            decltype(auto) visit(F&& f) const
            {
                if constexpr (std::is_same<T, float>::value)
                {
                    if (stored != kind::logit)  // (a float row's test: one compare)
                    {
                        return stored == kind::f16 ? f(static_cast<const xsampler::f16*>(data))
                                                   : f(static_cast<const xsampler::bf16*>(data));
                    }
                }
                return f(static_cast<const T*>(data));
            }
            /// Whether the row is stored in T itself.
            bool native() const noexcept { return stored == kind::logit; }
            /// Logit i, widened.
            T operator[](std::size_t i) const noexcept
            {
                return visit([i](const auto* x) { return T(x[i]); });
            }
        };

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

        /// The row behind `expr`, read in place when its elements are
        /// contiguous, else evaluated once into `scratch`; its size is
        /// checked first (check_row_size), so a lazy row too long to index is
        /// refused before it is evaluated.
        template <class E, class T = stored_type<E>>
        row_ref<T> contiguous_row(const xt::xexpression<E>& expr, std::vector<T>& scratch)
        {
            static_assert(std::is_same<T, float>::value || std::is_same<T, double>::value || is_half<T>::value,
                          "xsampler: logits must be float, double, f16 or bf16");
            const E& e = expr.derived_cast();
            if (e.dimension() != 1)
            {
                throw invalid_logits("logits: expected a 1-D row, got " + std::to_string(e.dimension()) +
                                     "-D");
            }
            const std::size_t n = e.size();
            check_row_size(n);  // before a lazy row is evaluated
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
        template <class S, class T = logit_of<S>>
        row_stats<T> scan_row(row_ref<S> row)
        {
            check_row_size(row.size);
            using B = batch<T>;
            constexpr std::size_t width = B::size;
            constexpr T inf = std::numeric_limits<T>::infinity();
            const S* x = row.data;
            const std::size_t n = row.size;
            const std::size_t vec_end = n - n % (2 * width);
            B mx0(-inf), mx1(-inf);
            auto nan = mx0 != mx0;  // a NaN seen (+inf shows in the max)
            for (std::size_t i = 0; i < vec_end; i += 2 * width)
            {
                const B a = load_logits<T>(x + i);
                const B b = load_logits<T>(x + i + width);
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
                const T xi = x[i];
                any_nan = any_nan || xi != xi;
                best = std::max(best, xi);
            }
            if (any_nan || best == inf)
            {
                for (std::size_t i = 0; i < n; ++i)
                {
                    const T xi = x[i];
                    if (!(xi < inf))
                    {
                        throw invalid_logits(std::string("logits: ") + (xi != xi ? "NaN" : "+inf") +
                                             " at index " + std::to_string(i));
                    }
                }
            }
            if (best == -inf)
            {
                throw invalid_logits("logits: every token is masked (-inf)");
            }
            return {best, token_id(first_index_of(x, n, best))};
        }
        /// scan_row over a stored row.
        template <class T>
        row_stats<T> scan_row(const stored_row<T>& row)
        {
            return row.visit([&](const auto* x) { return scan_row(row_ref<std::decay_t<decltype(*x)>>{x, row.size}); });
        }
    }
}

#endif
