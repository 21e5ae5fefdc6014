// random.hpp: bits to floats, the philox4x32 engine, streams.
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include <xsampler/random.hpp>

#include "stats.hpp"

using xsampler::philox4x32;

TEST_CASE("philox4x32 block matches the Random123 known-answer vectors", "[random]")
{
    using block = philox4x32::block_type;
    CHECK(philox4x32::block({0, 0, 0, 0}, {0, 0}) == block{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
    CHECK(philox4x32::block({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}) ==
          block{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
    CHECK(philox4x32::block({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
          block{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

TEST_CASE("philox4x32 outputs are the documented words of the documented counters", "[random]")
{
    philox4x32 zero(0, 0);
    CHECK(zero() == 0xe169c58d6627e8d5ull);  // w0 | w1 << 32 of block (ctr 0, key 0)
    CHECK(zero() == 0x9b00dbd8bc57ac4cull);  // w2 | w3 << 32
    CHECK(zero.position() == 2);

    // Output n comes from the block of counter (n/2 low, n/2 high, stream low,
    // stream high) under key (seed low, seed high).
    const std::uint64_t seed = 0x299f31d0a4093822ull;
    const std::uint64_t stream = 0x0370734413198a2eull;
    const std::uint64_t n = 2 * 0x05a308d3243f6a88ull + 1;
    philox4x32 rng(seed, stream);
    rng.advance(n);
    const auto block = philox4x32::block({0x243f6a88, 0x05a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0});
    CHECK(rng() == (std::uint64_t(block[2]) | std::uint64_t(block[3]) << 32));
    CHECK(rng.position() == n + 1);
}

TEST_CASE("philox4x32 is a value type: advance, streams, equality", "[random]")
{
    philox4x32 a(7, 3);
    philox4x32 b(7, 3);
    CHECK(a == b);
    std::vector<std::uint64_t> first;
    for (int i = 0; i < 9; ++i)
    {
        first.push_back(a());
    }
    CHECK(a != b);
    b.advance(5);
    for (int i = 5; i < 9; ++i)
    {
        CHECK(b() == first[std::size_t(i)]);  // skipping lands mid-block too
    }
    CHECK(a == b);

    b.discard(1);
    const auto after = b();
    a.advance(1);
    CHECK(a() == after);

    philox4x32 other_stream(7, 4);
    philox4x32 other_seed(8, 3);
    philox4x32 same(7, 3);
    CHECK(other_stream() != same());
    CHECK(other_seed() != philox4x32(7, 3)());
    CHECK(philox4x32::min() == 0);
    CHECK(philox4x32::max() == ~std::uint64_t(0));
}

TEST_CASE("bits are counted from the engine's range, not its result_type", "[random]")
{
    STATIC_REQUIRE(xsampler::detail::engine_bits<std::mt19937>() == 32);  // result_type is 64 bits wide here
    STATIC_REQUIRE(xsampler::detail::engine_bits<std::mt19937_64>() == 64);
    STATIC_REQUIRE(xsampler::detail::engine_bits<philox4x32>() == 64);
    STATIC_REQUIRE(xsampler::detail::engine_bits<std::minstd_rand>() == 30);  // range [1, 2^31 - 2]
}

TEST_CASE("uniform01 takes 53 bits, most significant first", "[random]")
{
    SECTION("a 64-bit engine: one call, its top 53 bits")
    {
        std::mt19937_64 rng;  // default seed 5489: first output 14514284786278117030
        std::mt19937_64 ref;
        const double u = xsampler::uniform01(rng);
        CHECK(u == double(ref() >> 11) * 0x1p-53);
        CHECK(u == double(14514284786278117030ull >> 11) * 0x1p-53);
        ref.discard(0);
        CHECK(rng == ref);
    }
    SECTION("a 32-bit engine: two calls, the first the high bits")
    {
        std::mt19937 rng;  // default seed 5489: outputs 3499211612, 581869302, ...
        const double u = xsampler::uniform01(rng);
        const std::uint64_t bits = (std::uint64_t(3499211612u) << 21) | (581869302u >> 11);
        CHECK(u == double(bits) * 0x1p-53);
        std::mt19937 ref;
        ref.discard(2);
        CHECK(rng == ref);
    }
    SECTION("a 30-bit engine by rejection: two accepted calls")
    {
        std::minstd_rand rng(1);
        std::minstd_rand ref(1);
        std::vector<std::uint64_t> accepted;
        while (accepted.size() < 2)
        {
            const std::uint64_t x = ref() - 1;
            if (x < (1u << 30))
            {
                accepted.push_back(x);
            }
        }
        const double u = xsampler::uniform01(rng);
        CHECK(u == double((accepted[0] << 23) | (accepted[1] >> 7)) * 0x1p-53);
        CHECK(rng == ref);
    }
    SECTION("random_bits draws ceil(n / b) calls")
    {
        std::mt19937 rng(11);
        std::mt19937 ref(11);
        CHECK(xsampler::random_bits(32, rng) == ref());
        CHECK(xsampler::random_bits(7, rng) == (ref() >> 25));
        const std::uint64_t hi = ref();
        const std::uint64_t lo = ref();
        CHECK(xsampler::random_bits(64, rng) == (hi << 32 | lo));
    }
}

TEST_CASE("golden uniform01 values of philox4x32", "[random][golden]")
{
    // A change here changes every seeded output of the library.
    philox4x32 rng(42, 0);
    const double expected[] = {0x1.dfd524ee73abcp-2, 0x1.5d0acf5c4afd4p-2, 0x1.4ee9b3f7f36c8p-2,
                               0x1.d1381bee0e3d6p-2};
    for (const double e : expected)
    {
        CHECK(xsampler::uniform01(rng) == e);
    }
}

TEST_CASE("uniform01 is uniform: chi-square over 256 bins", "[random][statistical]")
{
    philox4x32 rng(2024, 1);
    constexpr std::size_t bins = 256;
    constexpr std::size_t n = 256 * 400;
    std::vector<double> observed(bins, 0.0);
    for (std::size_t i = 0; i < n; ++i)
    {
        const double u = xsampler::uniform01(rng);
        REQUIRE(u >= 0.0);
        REQUIRE(u < 1.0);
        observed[std::size_t(u * bins)] += 1.0;
    }
    const std::vector<double> expected(bins, double(n) / bins);
    CHECK(test_stats::chi_square(observed, expected) < test_stats::chi_square_bound(bins - 1));
}
