// xsampler/random.hpp — portable randomness: bits to floats, philox4x32. (xsampler, BSD-3-Clause)
//
// Portable randomness.
//
// Contract
// - Every random operation takes the engine by reference as its last
//   parameter, `URBG& rng`; there is no hidden or global engine. Any
//   UniformRandomBitGenerator works.
// - The library turns bits into numbers itself (never through
//   std::uniform_real_distribution or std::discrete_distribution, whose
//   outputs differ between standard libraries), so the same engine, seed and
//   input give the same result with every compiler, standard library and
//   optimisation level.
// - Bits per call are counted from the engine's range, not from the width of
//   result_type: an engine whose range is 2^b values gives b bits a call
//   (std::mt19937: 32, std::mt19937_64: 64). An engine whose range is not a
//   power of two gives floor(log2(range)) bits a call, by rejection of the
//   values above the largest power of two (so it may take more calls).
// - uniform01(rng) is a double in [0, 1) with 53 random bits: it takes
//   ceil(53 / b) calls of a b-bit engine (one for a 64-bit engine, two for a
//   32-bit one), first call the most significant bits. Changing this count
//   changes every seeded output, so it is part of the API.
// - normal01(rng) is a standard normal double by Box-Muller: exactly two
//   uniform01(rng) draws, the first for the radius, the second for the angle;
//   normal(sigma, rng) is N(0, sigma^2) from the same two draws.
// - philox4x32 is a counter-based engine (Random123's Philox4x32-10): output
//   number n of stream s under seed k is a pure function of (k, s, n), so
//   each row of a batch or each request can own an independent, reproducible
//   stream, and advance(n) skips ahead in O(1).
#ifndef XSAMPLER_RANDOM_HPP
#define XSAMPLER_RANDOM_HPP

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

namespace xsampler
{
    namespace detail
    {
        // Bits one call of URBG gives, counted from its range.
        template <class URBG>
        constexpr unsigned engine_bits() noexcept
        {
            using u = std::uint64_t;
            const u span = u(URBG::max()) - u(URBG::min());  // range - 1
            if (span == std::numeric_limits<u>::max())
            {
                return 64;
            }
            unsigned bits = 0;
            while (bits < 63 && (u(1) << (bits + 1)) - 1 <= span)
            {
                ++bits;
            }
            return bits;  // largest b with 2^b - 1 <= span
        }

        /// Whether G is a uniform random bit generator (result_type, min(),
        /// max(), g()): what tells an engine from a stage in an argument list.
        template <class G, class = void>
        struct is_urbg : std::false_type
        {
        };
        template <class G>
        struct is_urbg<G, std::void_t<typename G::result_type, decltype(G::min()), decltype(G::max()),
                                      decltype(std::declval<G&>()())>>
            : std::is_unsigned<typename G::result_type>
        {
        };

        // One call's worth of uniform bits: b = engine_bits<URBG>() of them.
        template <class URBG>
        std::uint64_t engine_chunk(URBG& rng)
        {
            constexpr unsigned b = engine_bits<URBG>();
            static_assert(b >= 1, "xsampler: the engine's range must hold at least 2 values");
            using u = std::uint64_t;
            constexpr u span = u(URBG::max()) - u(URBG::min());
            constexpr u mask = b == 64 ? ~u(0) : (u(1) << b) - 1;
            for (;;)
            {
                const u x = u(rng()) - u(URBG::min());
                if (span == mask || x <= mask)
                {
                    return x;
                }
            }
        }
    }

    /// The next `nbits` (1..64) uniform bits of `rng`, most significant first,
    /// drawn ceil(nbits / b) calls at a time; the last call's low bits are
    /// dropped.
    template <class URBG>
    std::uint64_t random_bits(unsigned nbits, URBG& rng)
    {
        constexpr unsigned b = detail::engine_bits<URBG>();
        std::uint64_t acc = 0;
        for (unsigned need = nbits; need > 0;)
        {
            const unsigned take = need < b ? need : b;
            const std::uint64_t chunk = detail::engine_chunk(rng) >> (b - take);
            acc = take == 64 ? chunk : (acc << take) | chunk;
            need -= take;
        }
        return acc;
    }

    /// A double in [0, 1): k * 2^-53 for k uniform in [0, 2^53).
    template <class URBG>
    double uniform01(URBG& rng)
    {
        return double(random_bits(53, rng)) * 0x1p-53;
    }

    /// A draw from N(0, sigma^2) by Box-Muller, from exactly two uniform01(rng)
    /// draws: u1 first, then u2, giving
    ///   sigma * sqrt(-2 log(1 - u1)) * cos(2 pi u2)
    /// evaluated left to right, so (sigma * radius) is rounded before the
    /// cosine multiplies it. 1 - u1 is in (0, 1], so the log is finite. The
    /// second value of the pair (the sine) is not used. Changing the draws,
    /// their order or the order of the products changes every row made with
    /// it (the tests' random rows, make_logits, the benchmarks' rows).
    template <class URBG>
    double normal(double sigma, URBG& rng)
    {
        const double radius = std::sqrt(-2.0 * std::log(1.0 - uniform01(rng)));
        return sigma * radius * std::cos(6.283185307179586 * uniform01(rng));
    }

    /// A standard normal draw: normal(1.0, rng), two uniform01(rng) draws.
    /// Note that sigma * normal01(rng) rounds differently from
    /// normal(sigma, rng) (the product is grouped the other way).
    template <class URBG>
    double normal01(URBG& rng)
    {
        return normal(1.0, rng);
    }

    /// Philox4x32-10 (Salmon et al., SC'11), as a 64-bit engine.
    ///
    /// State: a 64-bit key (the seed), a 64-bit stream id and a 64-bit output
    /// position n. Output n is made from the Philox4x32-10 block of counter
    /// (n/2 low, n/2 high, stream low, stream high) under key (seed low, seed
    /// high): with block words w0..w3, even n gives w0 | w1 << 32 and odd n
    /// gives w2 | w3 << 32. Equal (seed, stream, position) give equal outputs.
    class philox4x32
    {
    public:
        using result_type = std::uint64_t;
        using block_type = std::array<std::uint32_t, 4>;

        static constexpr result_type min() noexcept { return 0; }
        static constexpr result_type max() noexcept { return ~result_type(0); }

        explicit philox4x32(std::uint64_t seed = 0, std::uint64_t stream = 0) noexcept
            : m_seed(seed), m_stream(stream)
        {
        }

        result_type operator()() noexcept
        {
            if ((m_position & 1) == 0 || !m_cached)
            {
                m_block = block(counter_for(m_position >> 1), key());
                m_cached = true;
            }
            const unsigned half = unsigned(m_position & 1) * 2;
            ++m_position;
            return std::uint64_t(m_block[half]) | std::uint64_t(m_block[half + 1]) << 32;
        }

        /// Skip n outputs in O(1).
        void advance(std::uint64_t n) noexcept
        {
            m_position += n;
            m_cached = false;
        }
        void discard(unsigned long long n) noexcept { advance(n); }

        std::uint64_t seed() const noexcept { return m_seed; }
        std::uint64_t stream() const noexcept { return m_stream; }
        /// How many outputs have been drawn (or skipped) so far.
        std::uint64_t position() const noexcept { return m_position; }

        friend bool operator==(const philox4x32& a, const philox4x32& b) noexcept
        {
            return a.m_seed == b.m_seed && a.m_stream == b.m_stream && a.m_position == b.m_position;
        }
        friend bool operator!=(const philox4x32& a, const philox4x32& b) noexcept { return !(a == b); }

        /// The Philox4x32-10 bijection itself: counter and key in, four words out.
        static block_type block(block_type ctr, std::array<std::uint32_t, 2> key) noexcept
        {
            constexpr std::uint64_t m0 = 0xD2511F53u;
            constexpr std::uint64_t m1 = 0xCD9E8D57u;
            constexpr std::uint32_t w0 = 0x9E3779B9u;
            constexpr std::uint32_t w1 = 0xBB67AE85u;
            for (int round = 0; round < 10; ++round)
            {
                const std::uint64_t p0 = m0 * ctr[0];
                const std::uint64_t p1 = m1 * ctr[2];
                ctr = {std::uint32_t(p1 >> 32) ^ ctr[1] ^ key[0], std::uint32_t(p1),
                       std::uint32_t(p0 >> 32) ^ ctr[3] ^ key[1], std::uint32_t(p0)};
                key[0] += w0;
                key[1] += w1;
            }
            return ctr;
        }

    private:
        block_type counter_for(std::uint64_t n) const noexcept
        {
            return {std::uint32_t(n), std::uint32_t(n >> 32), std::uint32_t(m_stream), std::uint32_t(m_stream >> 32)};
        }
        std::array<std::uint32_t, 2> key() const noexcept
        {
            return {std::uint32_t(m_seed), std::uint32_t(m_seed >> 32)};
        }

        std::uint64_t m_seed;
        std::uint64_t m_stream;
        std::uint64_t m_position = 0;
        block_type m_block{};
        bool m_cached = false;
    };
}

#endif
