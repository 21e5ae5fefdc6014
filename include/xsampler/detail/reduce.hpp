// xsampler/detail/reduce.hpp — the one blocked reduction over a row: K sums in Z's order. (xsampler, BSD-3-Clause)
//
// Every sum over a row's weights (Z, the entropy's sum w t, the exact
// filters' sums, top-p's mass below a level) is one kernel run by one
// driver, so every sum has the order of detail/blocked_sum.hpp's contract and
// the same bits on every instruction set.
//
// Contract
// - A kernel gives K terms per token (K = channels, 1 to 3). reduce_run sums
//   channel c into sums[c] in the contract's order: full 64-id blocks in
//   SIMD, lane j of a block (ids = j mod 8) summed in T, the eight lane sums
//   folded by combine_lanes into one double per block; the tail token by token
//   through blocked_sum::add, which gives the same bits.
// - Mask words (word b for block b of the run): a token whose bit is 0 gives
//   +0 in every channel, as a token masked in the row does: the kernel's
//   terms at x = -inf (and weight 0) must be +0 in every channel.
// - With `store`, channel 0's term is also written by token (the weights).
// - A kernel: channels; tiers (1 to 3) and plan(block, kept), the tier for a
//   full block (kept: its mask word; block: the row's own pointer, const T*
//   or for a 16-bit row const f16* / const bf16*, so plan is a template over
//   it, reading with load_logits); terms<tier>(x[, w], t) on SIMD
//   vectors and terms(x, w, t) on one token given its weight w (and
//   terms(x, t), computing it, unless it reads weights), the same values;
//   with reads_weights, w is the token's stored weight (0 where masked); with
//   counts, the driver also counts the kept tokens that are not -inf (tier
//   0 must mean that every kept token is finite).
#ifndef XSAMPLER_DETAIL_REDUCE_HPP
#define XSAMPLER_DETAIL_REDUCE_HPP

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "blocked_sum.hpp"

namespace xsampler
{
    namespace detail
    {
        // The terms of the vector at x + j, masked lanes +0, channel 0
        // stored to out + j.
        template <int tier, bool store, bool masked, class Kernel, class S, class T, std::size_t K>
        XSAMPLER_ALWAYS_INLINE void vector_terms(const Kernel& k, const S* x, const T* w, std::uint64_t kept,
                                                 std::size_t j, batch<T> (&v)[K], T* out) noexcept
        {
            using B = batch<T>;
            if constexpr (Kernel::reads_weights)
            {
                k.template terms<tier>(load_logits<T>(x + j), B::load_unaligned(w + j), v);
            }
            else
            {
                k.template terms<tier>(load_logits<T>(x + j), v);
            }
            if (masked)
            {
                const auto on = lanes_of<T, kernel_arch>(std::uint32_t(kept >> j));
                for (std::size_t c = 0; c < K; ++c)
                {
                    v[c] = xsimd::select(on, v[c], B(T(0)));
                }
            }
            if (store)
            {
                v[0].store_unaligned(out + j);
            }
        }

        // A full block's lane sums: lane set g's first vector starts them.
        // (Not forced inline: the compiler's choice keeps fewer vectors live.)
        template <int tier, bool store, bool masked, class Kernel, class S, class T, std::size_t K, std::size_t G>
        void block_terms(const Kernel& k, const S* x, const T* w, std::uint64_t kept,
                                                batch<T> (&acc)[K][G], T* out) noexcept
        {
            using B = batch<T>;
            for (std::size_t g = 0; g < G; ++g)
            {
                B v[K];
                vector_terms<tier, store, masked>(k, x, w, kept, g * B::size, v, out);
                for (std::size_t c = 0; c < K; ++c)
                {
                    acc[c][g] = v[c];
                }
            }
            for (std::size_t t = lanes; t < block_size; t += lanes)
            {
                for (std::size_t g = 0; g < G; ++g)
                {
                    B v[K];
                    vector_terms<tier, store, masked>(k, x, w, kept, t + g * B::size, v, out);
                    for (std::size_t c = 0; c < K; ++c)
                    {
                        acc[c][g] = acc[c][g] + v[c];
                    }
                }
            }
        }

        // block_terms at the block's tier (a run-time choice among the kernel's).
        template <bool store, bool masked, class Kernel, class S, class T, std::size_t K, std::size_t G>
        XSAMPLER_ALWAYS_INLINE void tier_terms(int tier, const Kernel& k, const S* x, const T* w, std::uint64_t kept,
                                               batch<T> (&acc)[K][G], T* out) noexcept
        {
            if (tier == 0)
            {
                block_terms<0, store, masked>(k, x, w, kept, acc, out);
            }
            else if constexpr (Kernel::tiers > 1)
            {
                if (Kernel::tiers == 2 || tier == 1)
                {
                    block_terms<1, store, masked>(k, x, w, kept, acc, out);
                }
                else
                {
                    block_terms<Kernel::tiers - 1, store, masked>(k, x, w, kept, acc, out);
                }
            }
        }

        // The kept tokens of a block of 64 whose logit is not -inf.
        template <class S>
        std::size_t finite_in(const S* block, std::uint64_t kept) noexcept
        {
            using T = logit_of<S>;
            using B = batch<T>;
            const B ninf(-std::numeric_limits<T>::infinity());
            std::uint64_t bits = 0;
            for (std::size_t i = 0; i < block_size; i += B::size)
            {
                bits |= std::uint64_t(mask_bits(load_logits<T>(block + i) != ninf)) << i;
            }
            return std::size_t(__builtin_popcountll(bits & kept));
        }

        template <bool store, class Kernel, class S, class T>
        std::size_t reduce_blocks(const Kernel& k, const S* x, std::size_t n, std::size_t first,
                                  blocked_sum<T> (&sums)[Kernel::channels], const std::uint64_t* keep, const T* w,
                                  T* out)
        {
            std::size_t count = 0;
            constexpr std::size_t K = Kernel::channels;
            constexpr std::size_t G = lanes / batch<T>::size;
            static_assert(lanes % batch<T>::size == 0, "xsampler: unsupported SIMD width");
            const std::size_t full = n / block_size;
            for (std::size_t b = 0; b < full; ++b)
            {
                const std::size_t o = b * block_size;
                const std::uint64_t kept = keep == nullptr ? ~std::uint64_t(0) : keep[b];
                batch<T> acc[K][G];
                const T* wb = Kernel::reads_weights ? w + o : nullptr;
                T* ob = store ? out + o : nullptr;
                const int tier = k.plan(x + o, kept);
                if constexpr (Kernel::counts)
                {
                    // Tier 0: every kept weight is positive, so every kept logit finite.
                    count += tier == 0 ? std::size_t(__builtin_popcountll(kept)) : finite_in(x + o, kept);
                }
                if (kept == ~std::uint64_t(0))
                {
                    tier_terms<store, false>(tier, k, x + o, wb, kept, acc, ob);
                }
                else
                {
                    tier_terms<store, true>(tier, k, x + o, wb, kept, acc, ob);
                }
                for (std::size_t c = 0; c < K; ++c)
                {
                    sums[c].add_block(first / block_size + b, combine_lanes(acc[c]));
                }
            }
            for (std::size_t i = full * block_size; i < n; ++i)
            {
                const bool masked = keep != nullptr && (keep[i / block_size] >> (i % block_size) & 1) == 0;
                const T xi = masked ? -std::numeric_limits<T>::infinity() : T(x[i]);
                T v[K];
                if constexpr (Kernel::reads_weights)
                {
                    k.terms(xi, masked ? T(0) : w[i], v);
                }
                else
                {
                    k.terms(xi, v);
                }
                for (std::size_t c = 0; c < K; ++c)
                {
                    sums[c].add(first + i, v[c]);
                }
                if (store)
                {
                    out[i] = v[0];
                }
                count += !masked && xi != -std::numeric_limits<T>::infinity();
            }
            return Kernel::counts ? count : 0;
        }

        /// Adds a kernel's terms over logits x[0, n) of tokens first,
        /// first + 1, ... (first a multiple of 64, above every token added
        /// before) to sums, in the contract's order. keep: mask words or
        /// null; w: the stored weights of the same tokens (reads_weights);
        /// out: where channel 0's terms go, or null. Returns the number of
        /// kept tokens whose logit is not -inf when the kernel counts (else 0).
        template <class Kernel, class S, class T>
        std::size_t reduce_run(const Kernel& k, const S* x, std::size_t n, std::size_t first,
                        blocked_sum<T> (&sums)[Kernel::channels], const std::uint64_t* keep = nullptr,
                        const std::common_type_t<T>* w = nullptr, std::common_type_t<T>* out = nullptr)
        {
            return out != nullptr ? reduce_blocks<true>(k, x, n, first, sums, keep, w, out)
                                  : reduce_blocks<false>(k, x, n, first, sums, keep, w, out);
        }

        /// One token of a list (ids increasing across calls) with its weight
        /// w (stored or computed: the same bits): its terms, added as the tail
        /// of reduce_run adds them; 1 if x is not -inf, else 0.
        template <class Kernel, class T>
        std::size_t reduce_one(const Kernel& k, std::size_t id, T x, T w, blocked_sum<T> (&sums)[Kernel::channels])
        {
            T v[Kernel::channels];
            k.terms(x, w, v);
            for (std::size_t c = 0; c < Kernel::channels; ++c)
            {
                sums[c].add(id, v[c]);
            }
            return std::size_t(x != -std::numeric_limits<T>::infinity());
        }

        /// The lane-wise least logit of a block of 64, over the lanes whose
        /// bit in `keep` is 1 (+inf where none is).
        template <class S, class T = logit_of<S>>
        batch<T> block_low(const S* block, std::uint64_t keep) noexcept
        {
            using B = batch<T>;
            if (keep == ~std::uint64_t(0))
            {
                B low = load_logits<T>(block);
                for (std::size_t i = B::size; i < block_size; i += B::size)
                {
                    low = xsimd::min(low, load_logits<T>(block + i));
                }
                return low;
            }
            const B none(std::numeric_limits<T>::infinity());
            B low = none;
            for (std::size_t i = 0; i < block_size; i += B::size)
            {
                low = xsimd::min(low, xsimd::select(lanes_of<T, kernel_arch>(std::uint32_t(keep >> i)),
                                                    load_logits<T>(block + i), none));
            }
            return low;
        }

        /// The weights' part of a kernel: w_i = weight(x_i, m, s2) in three
        /// tiers. Tier 0: the block's least kept exponent is above exp2's
        /// limit (no masked token, no weight below 2^-126 in float), so no
        /// limit test (rounding is monotone: x >= low gives (x - m) s2 >=
        /// (low - m) s2; an overflowing low - m fails the test). Tier 1: the
        /// limit tested. Tier 2: x - m may overflow (exponent()).
        template <class T>
        struct weight_terms
        {
            using B = batch<T>;
            static constexpr int tiers = 3;
            T m, s2;
            B vm, vs2;
            bool wide;

            weight_terms(T max, T scale2) : m(max), s2(scale2), vm(max), vs2(scale2), wide(may_overflow(max)) {}

            template <class S>
            XSAMPLER_ALWAYS_INLINE int plan(const S* block, std::uint64_t kept) const noexcept
            {
                if (xsimd::all((block_low(block, kept) - vm) * vs2 > B(exp_constants<T>::limit)))
                {
                    return 0;
                }
                return wide ? 2 : 1;
            }
            // The weight of x, and its exponent in e.
            template <int tier>
            XSAMPLER_ALWAYS_INLINE B weight(const B& x, B& e) const noexcept
            {
                e = tier == 2 ? exponent(x, vm, vs2) : (x - vm) * vs2;
                return tier == 0 ? exp2_core<T>(e) : exp2_nonpos(e);
            }
        };

        /// Z: channel 0 is the weight.
        template <class T>
        struct weight_kernel : weight_terms<T>
        {
            using B = batch<T>;
            static constexpr std::size_t channels = 1;
            static constexpr bool reads_weights = false;
            static constexpr bool counts = false;
            using weight_terms<T>::weight_terms;

            template <int tier>
            XSAMPLER_ALWAYS_INLINE void terms(const B& x, B (&t)[1]) const noexcept
            {
                B e;
                t[0] = this->template weight<tier>(x, e);
            }
            void terms(T x, T (&t)[1]) const noexcept { t[0] = detail::weight(x, this->m, this->s2); }
            void terms(T, T w, T (&t)[1]) const noexcept { t[0] = w; }
        };

        /// What moments_kernel gives beside its two sums: nothing, the count of
        /// the tokens (reduce_run's result), or a third sum, of w t^2.
        enum class third_sum
        {
            none,
            count,
            squares
        };

        /// The entropy's sums at scale s: w, w t with t = exponent(x, m, s)
        /// (the log weight in nats; 0 where w is 0), and what `third` asks.
        template <class T, third_sum third = third_sum::count>
        struct moments_kernel : weight_terms<T>
        {
            using B = batch<T>;
            static constexpr std::size_t channels = third == third_sum::squares ? 3 : 2;
            static constexpr bool counts = third == third_sum::count;
            static constexpr bool reads_weights = false;
            T s;
            B vs;

            moments_kernel(T max, T scale, T scale2) : weight_terms<T>(max, scale2), s(scale), vs(scale) {}

            template <int tier>
            XSAMPLER_ALWAYS_INLINE void terms(const B& x, B (&t)[channels]) const noexcept
            {
                B e;
                const B w = this->template weight<tier>(x, e);
                const B zero(T(0));
                // Tier 0: every weight positive, no x - m overflows.
                const B d = tier == 0 ? (x - this->vm) * vs : tier == 2 ? exponent(x, this->vm, vs) : (x - this->vm) * vs;
                t[0] = w;
                t[1] = tier == 0 ? w * d : xsimd::select(w > zero, w * d, zero);
                if constexpr (third == third_sum::squares)
                {
                    t[2] = tier == 0 ? t[1] * d : xsimd::select(w > zero, t[1] * d, zero);
                }
            }
            void terms(T x, T (&t)[channels]) const noexcept { terms(x, detail::weight(x, this->m, this->s2), t); }
            void terms(T x, T w, T (&t)[channels]) const noexcept
            {
                const T d = exponent(x, this->m, s);
                t[0] = w;
                t[1] = w > T(0) ? w * d : T(0);
                if constexpr (third == third_sum::squares)
                {
                    t[2] = w > T(0) ? t[1] * d : T(0);
                }
            }
        };

        /// Z over a whole row at (m, s2), from token 0.
        template <class S, class T>
        double dense_total(const S* x, std::size_t n, T m, T s2, block_record* record, T* w_out = nullptr)
        {
            blocked_sum<T> sum[1]{blocked_sum<T>(record)};
            reduce_run(weight_kernel<T>(m, s2), x, n, 0, sum, nullptr, nullptr, w_out);
            return sum[0].total();
        }

        /// A set's moments: Z, E[t] = (sum w t) / Z, and the count of tokens.
        struct moments
        {
            double z;
            double mean;
            std::size_t n;
        };
    }
}

#endif
