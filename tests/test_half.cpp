// fp16 and bf16 rows (half.hpp): the conversions, exact over every bit
// pattern; the widening loads of every path (F16C, integer lanes, one lane at
// a time) against the scalar statement; and every stage, draw, error and
// softmax on a 16-bit row against the float row of the same values, bit for
// bit. (The portability test checks the F16C path against the baseline's:
// tests/golden_draws.cpp prints 16-bit rows' draws and a digest of every
// widened pattern.)
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <xtensor/xadapt.hpp>
#include <xtensor/xview.hpp>

#include "helpers.hpp"

using namespace xsampler;

namespace
{
    std::uint32_t bits(float x)
    {
        std::uint32_t b;
        std::memcpy(&b, &x, 4);
        return b;
    }

    /// binary16 by its definition, in double: (-1)^s 2^(e - 15) (1 + m/1024),
    /// or 2^-14 m/1024 for e = 0.
    double f16_by_definition(std::uint16_t h)
    {
        const int e = (h >> 10) & 31;
        const int m = h & 1023;
        const double sign = (h & 0x8000) != 0 ? -1.0 : 1.0;
        if (e == 31)
        {
            return m == 0 ? sign * test_helpers::inf : std::nan("");
        }
        return sign * (e == 0 ? std::ldexp(double(m), -24) : std::ldexp(1.0 + double(m) / 1024.0, e - 15));
    }

    template <class H>
    H narrow(float x)
    {
        return H(x);
    }

    /// A row of H and the float row of the same values.
    template <class H>
    struct rows
    {
        xt::xtensor<H, 1> half;
        xt::xtensor<float, 1> wide;
    };
    template <class H>
    rows<H> rows_of(const xt::xtensor<float, 1>& source)
    {
        rows<H> r{xt::xtensor<H, 1>::from_shape({source.size()}), xt::xtensor<float, 1>::from_shape({source.size()})};
        for (std::size_t i = 0; i < source.size(); ++i)
        {
            r.half(i) = narrow<H>(source(i));
            r.wide(i) = float(r.half(i));
        }
        return r;
    }

    /// Every stage the sampler names, one configuration each (some two).
    std::vector<std::pair<std::string, std::function<void(sampling_params&)>>> configurations()
    {
        return {
            {"plain", [](sampling_params&) {}},
            {"greedy", [](sampling_params& p) { p.temperature = 0.0; }},
            {"temperature", [](sampling_params& p) { p.temperature = 0.7; }},
            {"llama default", [](sampling_params& p) {
                 p.temperature = 0.8;
                 p.top_k = 40;
                 p.top_p = 0.95;
                 p.min_p = 0.05;
             }},
            {"top_k ties", [](sampling_params& p) {
                 p.top_k = 25;
                 p.top_k_keep_ties = true;
             }},
            {"top_p", [](sampling_params& p) {
                 p.temperature = 1.5;
                 p.top_p = 0.6;
             }},
            {"min_p", [](sampling_params& p) { p.min_p = 0.02; }},
            {"typical", [](sampling_params& p) { p.typical_p = 0.8; }},
            {"epsilon", [](sampling_params& p) { p.epsilon = 3e-5; }},
            {"eta", [](sampling_params& p) { p.eta = 1e-3; }},
            {"top_n_sigma", [](sampling_params& p) { p.top_n_sigma = 1.5; }},
            {"dynatemp", [](sampling_params& p) {
                 p.temperature = 0.9;
                 p.dynatemp_range = 0.5;
             }},
            {"xtc", [](sampling_params& p) {
                 p.xtc_probability = 0.7;
                 p.xtc_threshold = 0.002;
             }},
            {"mirostat", [](sampling_params& p) { p.mirostat = 1; }},
            {"mirostat v2", [](sampling_params& p) { p.mirostat = 2; }},
            {"p_less", [](sampling_params& p) { p.p_less = true; }},
            {"top_h", [](sampling_params& p) { p.top_h = 0.4; }},
            {"top_k_top_p joint", [](sampling_params& p) {
                 p.top_k = 50;
                 p.top_p = 0.9;
                 p.top_k_top_p_joint = true;
             }},
            {"penalties", [](sampling_params& p) {
                 p.repeat_penalty = 1.3;
                 p.presence_penalty = 0.5;
                 p.frequency_penalty = 0.3;
             }},
            {"dry", [](sampling_params& p) { p.dry_multiplier = 0.8; }},
            {"bias and bans", [](sampling_params& p) {
                 p.logit_bias = {{3, 2.5}, {700, -test_helpers::inf}, {1000, 40.0}};
                 p.banned_token_ids = {5, 6, 7};
                 p.top_k = 30;
             }},
            {"allowed tokens (a deferred mask)", [](sampling_params& p) {
                 for (token_id t = 0; t < 1037; t += 3)
                 {
                     p.allowed_token_ids.push_back(t);
                 }
                 p.top_p = 0.9;
             }},
            {"no_repeat_ngram and bad_words", [](sampling_params& p) {
                 p.no_repeat_ngram_size = 2;
                 p.bad_words = {{4, 9}, {11}};
             }},
        };
    }

    template <class H>
    void check_every_stage(const rows<H>& r)
    {
        const std::vector<token_id> history = {1, 4, 9, 4, 9, 11, 4, 9, 2, 4};
        for (const auto& [name, set] : configurations())
        {
            INFO(name << ", V " << r.wide.size());
            sampling_params p;
            p.seed = 77;
            set(p);
            sampler s16(p);
            sampler s32(p);
            const token_history h(history, 3);
            philox4x32 g16(5), g32(5);  // (XTC draws one)
            const distribution a = s16.final_distribution(r.half, h, g16);
            const distribution b = s32.final_distribution(r.wide, h, g32);
            REQUIRE(a.ids == b.ids);
            REQUIRE(a.probs == b.probs);
            for (int i = 0; i < 24; ++i)
            {
                const sampled_token x = s16.sample(r.half, h);
                const sampled_token y = s32.sample(r.wide, h);
                REQUIRE(x.id == y.id);
                REQUIRE(x.logprob == y.logprob);
            }
        }
    }
}

TEST_CASE("f16 widens exactly: every bit pattern, by its definition", "[half]")
{
    for (std::uint32_t b = 0; b < 65536; ++b)
    {
        const auto h = std::uint16_t(b);
        const float x = f16::from_bits(h);
        const double want = f16_by_definition(h);
        INFO("bits " << b);
        if (std::isnan(want))
        {
            REQUIRE(std::isnan(x));
            REQUIRE((bits(x) & 0x00400000u) != 0);  // quiet, as F16C makes it
            continue;
        }
        REQUIRE(double(x) == want);
        REQUIRE(std::signbit(x) == ((h & 0x8000) != 0));
        // Narrowing a value that is an f16 gives its bits back.
        REQUIRE(f16(x).bits == h);
    }
}

TEST_CASE("bf16 widens exactly: every bit pattern is a float's upper half", "[half]")
{
    for (std::uint32_t b = 0; b < 65536; ++b)
    {
        const float x = bf16::from_bits(std::uint16_t(b));
        REQUIRE(bits(x) == b << 16);
        if (!std::isnan(x))
        {
            REQUIRE(bf16(x).bits == b);
        }
    }
}

TEST_CASE("narrowing rounds to nearest, ties to even", "[half]")
{
    // f16 near 1: a step of 2^-10.
    CHECK(float(f16(1.0f + 0x1p-11f)) == 1.0f);                     // tie, to even (1.0)
    CHECK(float(f16(1.0f + 3 * 0x1p-11f)) == 1.0f + 0x1p-9f);      // tie, to even (up)
    CHECK(float(f16(1.0f + 0x1p-11f + 0x1p-20f)) == 1.0f + 0x1p-10f);  // above the tie
    // Subnormals: a step of 2^-24.
    CHECK(float(f16(0x1p-25f)) == 0.0f);          // tie, to even (0)
    CHECK(float(f16(3 * 0x1p-25f)) == 0x1p-23f);  // tie, to even (2 · 2^-24)
    CHECK(float(f16(0x1p-24f)) == 0x1p-24f);
    CHECK(f16(-0.0f).bits == 0x8000);
    CHECK(float(f16(0x1p-14f - 0x1p-26f)) == 0x1p-14f);  // rounds up into the normals
    // The top of the range: 65504, and the tie above it goes to inf.
    CHECK(float(f16(65519.0f)) == 65504.0f);
    CHECK(std::isinf(float(f16(65520.0f))));
    CHECK(f16(-1e30f).bits == 0xfc00);
    CHECK(std::isnan(float(f16(std::nanf("")))));
    // bf16: a step of 2^-7 near 1.
    CHECK(float(bf16(1.0f + 0x1p-8f)) == 1.0f);
    CHECK(float(bf16(1.0f + 3 * 0x1p-8f)) == 1.0f + 0x1p-6f);
    CHECK(std::isfinite(float(bf16(3.0e38f))));
    CHECK(std::isinf(float(bf16(3.4e38f))));  // rounds past the largest bf16
    CHECK(std::isnan(float(bf16(std::nanf("")))));
}

TEMPLATE_TEST_CASE("narrowing rounds every midpoint to even and every neighbour of it to the nearer", "[half]", f16, bf16)
{
    // Between consecutive positive finite values a < b (their midpoint and
    // its float neighbours are floats: one bit more than 16-bit values hold).
    for (std::uint32_t k = 0; k + 1 < 0x7c00u + (std::is_same<TestType, bf16>::value ? 0x0380u : 0u); ++k)
    {
        const float a = TestType::from_bits(std::uint16_t(k));
        const float b = TestType::from_bits(std::uint16_t(k + 1));
        const float mid = a + (b - a) / 2;
        INFO("bits " << k);
        REQUIRE(TestType(mid).bits == ((k & 1) == 0 ? k : k + 1));
        REQUIRE(TestType(std::nextafter(mid, 0.0f)).bits == k);
        REQUIRE(TestType(std::nextafter(mid, std::numeric_limits<float>::infinity())).bits == k + 1);
        REQUIRE(TestType(-mid).bits == (0x8000u | ((k & 1) == 0 ? k : k + 1)));
    }
}

TEST_CASE("the widening loads give the scalar bits on every path", "[half]")
{
    using B = detail::batch<float>;
    std::vector<f16> h(65536 + B::size);
    std::vector<bf16> g(65536 + B::size);
    for (std::uint32_t b = 0; b < 65536; ++b)
    {
        h[b] = f16::from_bits(std::uint16_t(b));
        g[b] = bf16::from_bits(std::uint16_t(b));
    }
    alignas(64) float lane[B::size];
    for (std::size_t b = 0; b < 65536; b += B::size)
    {
        detail::load_logits<float>(h.data() + b).store_aligned(lane);
        for (std::size_t j = 0; j < B::size; ++j)
        {
            INFO("f16 bits " << b + j);
            REQUIRE(bits(lane[j]) == bits(float(h[b + j])));
        }
        detail::load_logits<float>(g.data() + b).store_aligned(lane);
        for (std::size_t j = 0; j < B::size; ++j)
        {
            INFO("bf16 bits " << b + j);
            REQUIRE(bits(lane[j]) == bits(float(g[b + j])));
        }
    }
#if XSIMD_WITH_SSE2
    // The integer lanes, also where the build uses F16C.
    for (std::size_t b = 0; b < 65536; b += 4)
    {
        _mm_storeu_ps(lane, detail::widen4_f16(h.data() + b));
        for (std::size_t j = 0; j < 4; ++j)
        {
            INFO("f16 bits " << b + j);
            REQUIRE(bits(lane[j]) == bits(float(h[b + j])));
        }
    }
#endif
}

TEMPLATE_TEST_CASE("every stage on a 16-bit row decides as on the float row of the same values", "[half]", f16, bf16)
{
    // A large row (full vectors, tiers, the fused top-k load), a small one
    // with a tail past the last vector, and one of many ties.
    check_every_stage(rows_of<TestType>(test_helpers::random_row<float>(50257, 5, 3.0, false, 0.02)));
    check_every_stage(rows_of<TestType>(test_helpers::random_row<float>(1037, 6, 2.0, false, 0.1)));
    check_every_stage(rows_of<TestType>(test_helpers::random_row<float>(1037, 7, 2.0, true)));
}

TEST_CASE("a bf16 row near float's range takes the overflow tier as the float row does", "[half]")
{
    auto source = test_helpers::random_row<float>(4099, 9, 1.0);
    for (std::size_t i = 0; i < source.size(); i += 5)
    {
        source(i) = (i % 2 == 0 ? 3.0e38f : -3.0e38f) * (float(i % 7 + 1) / 8.0f);
    }
    check_every_stage(rows_of<bf16>(source));
}

TEMPLATE_TEST_CASE("softmax, log-probs and greedy on a 16-bit row equal the float row's", "[half]", f16, bf16)
{
    const auto r = rows_of<TestType>(test_helpers::random_row<float>(3001, 11, 3.0, false, 0.05));
    CHECK(greedy(r.half) == greedy(r.wide));
    CHECK(logsumexp(r.half) == logsumexp(r.wide));
    CHECK(entropy(r.half) == entropy(r.wide));
    const xt::xtensor<double, 1> p16 = softmax(r.half);
    const xt::xtensor<double, 1> p32 = softmax(r.wide);
    CHECK(p16 == p32);
    const xt::xtensor<double, 1> l16 = log_softmax(r.half);
    const xt::xtensor<double, 1> l32 = log_softmax(r.wide);
    CHECK(l16 == l32);

    // prompt_logprobs with top lists (the raw softmax over a stored row).
    xt::xtensor<TestType, 2> m16 = xt::xtensor<TestType, 2>::from_shape({4, 3001});
    xt::xtensor<float, 2> m32 = xt::xtensor<float, 2>::from_shape({4, 3001});
    for (std::size_t k = 0; k < 4; ++k)
    {
        const auto rk = rows_of<TestType>(test_helpers::random_row<float>(3001, 20 + k));
        xt::view(m16, k, xt::all()) = rk.half;
        xt::view(m32, k, xt::all()) = rk.wide;
    }
    const std::vector<token_id> prompt = {5, 17, 2999, 0};
    const auto a = prompt_logprobs(m16, prompt, 5);
    const auto b = prompt_logprobs(m32, prompt, 5);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 1; i < a.size(); ++i)
    {
        CHECK(a[i].logprob == b[i].logprob);
        REQUIRE(a[i].top.size() == b[i].top.size());
        for (std::size_t j = 0; j < a[i].top.size(); ++j)
        {
            CHECK(a[i].top[j].id == b[i].top[j].id);
            CHECK(a[i].top[j].logprob == b[i].top[j].logprob);
        }
    }

    // A strided row (a column) is evaluated once, in its own type.
    const auto c16 = xt::view(m16, xt::all(), 7);
    const auto c32 = xt::view(m32, xt::all(), 7);
    CHECK(greedy(c16) == greedy(c32));
    sampler s16(sampling_params{});
    sampler s32(sampling_params{});
    for (int i = 0; i < 8; ++i)
    {
        CHECK(s16.sample(c16, {}).id == s32.sample(c32, {}).id);
    }
}

TEST_CASE("an engine's 16-bit buffer is read in place through xt::adapt", "[half]")
{
    const auto r = rows_of<f16>(test_helpers::random_row<float>(2048, 12));
    std::vector<std::uint16_t> buffer(r.half.size());
    for (std::size_t i = 0; i < buffer.size(); ++i)
    {
        buffer[i] = r.half(i).bits;
    }
    const auto view = xt::adapt(reinterpret_cast<const f16*>(buffer.data()), buffer.size(), xt::no_ownership(),
                                std::vector<std::size_t>{buffer.size()});
    candidates<float> loaded;
    loaded.load(view);
    CHECK(loaded.loaded_row().data == static_cast<const void*>(buffer.data()));  // in place, no copy
    chain c{temperature{0.8}, top_k{40}, top_p{0.95}, min_p{0.05}};
    philox4x32 g1(3), g2(3);
    for (int i = 0; i < 16; ++i)
    {
        const auto x = c.sample(view, {}, g1);
        const auto y = c.sample(r.wide, {}, g2);
        REQUIRE(x.id == y.id);
        REQUIRE(x.logprob == y.logprob);
    }
}

TEMPLATE_TEST_CASE("a 16-bit row's errors are the float row's", "[half][errors]", f16, bf16)
{
    auto r = rows_of<TestType>(test_helpers::random_row<float>(300, 13));
    sampler s(sampling_params{});
    r.half(17) = TestType(std::nanf(""));
    CHECK_THROWS_WITH(s.sample(r.half, {}), "logits: NaN at index 17");
    r.half(17) = TestType(std::numeric_limits<float>::infinity());
    CHECK_THROWS_WITH(s.sample(r.half, {}), "logits: +inf at index 17");
    for (auto& x : r.half)
    {
        x = TestType(-std::numeric_limits<float>::infinity());
    }
    CHECK_THROWS_WITH(s.sample(r.half, {}), "logits: every token is masked (-inf)");
    const xt::xtensor<TestType, 1> empty = xt::xtensor<TestType, 1>::from_shape({0});
    CHECK_THROWS_WITH(s.sample(empty, {}), "logits: the row is empty");
    // The sampler that threw stays usable.
    const auto good = rows_of<TestType>(test_helpers::random_row<float>(300, 14));
    sampler fresh(sampling_params{});
    CHECK(s.sample(good.half, {}).id == fresh.sample(good.wide, {}).id);
}

TEMPLATE_TEST_CASE("batches of 16-bit rows, and a user stage reading runs, see the float values", "[half]", f16, bf16)
{
    const std::size_t n = 6;
    const std::size_t vocab = 2500;  // more than one of for_each_run's 1,024-token pieces
    xt::xtensor<TestType, 2> m16 = xt::xtensor<TestType, 2>::from_shape({n, vocab});
    xt::xtensor<float, 2> m32 = xt::xtensor<float, 2>::from_shape({n, vocab});
    for (std::size_t k = 0; k < n; ++k)
    {
        const auto rk = rows_of<TestType>(test_helpers::random_row<float>(vocab, 40 + k));
        xt::view(m16, k, xt::all()) = rk.half;
        xt::view(m32, k, xt::all()) = rk.wide;
    }
    sampling_params p;
    p.top_p = 0.9;
    std::vector<sampler> a(n, sampler(p));
    std::vector<sampler> b(n, sampler(p));
    std::vector<workspace> pool(2);
    std::vector<sampled_token> x, y;
    sample_batch(m16, a, pool, x);
    sample_batch(m32, b, pool, y);
    REQUIRE(x.size() == n);
    for (std::size_t k = 0; k < n; ++k)
    {
        CHECK(x[k].id == y[k].id);
        CHECK(x[k].logprob == y[k].logprob);
    }

    // candidates::for_each_run hands a user's stage float logits.
    std::vector<float> seen16, seen32;
    workspace ws;
    const auto collect = [&](auto& c, std::vector<float>& into) {
        c.for_each_run([&](const float* v, std::size_t first, std::size_t len) {
            REQUIRE(first == into.size());
            into.insert(into.end(), v, v + len);
        });
    };
    {
        const xt::xtensor<TestType, 1> row = xt::view(m16, 2, xt::all());
        auto& c = ws.get<float>();
        c.load(row);
        c.set_logit(100, 1.5f);  // an edited block among stored runs
        collect(c, seen16);
    }
    {
        const xt::xtensor<float, 1> row = xt::view(m32, 2, xt::all());
        auto& c = ws.get<float>();
        c.load(row);
        c.set_logit(100, 1.5f);
        collect(c, seen32);
    }
    CHECK(seen16 == seen32);
    CHECK(seen16.size() == vocab);
}

TEMPLATE_TEST_CASE("a copied set reads its own copy of a strided 16-bit row", "[half]", f16, bf16)
{
    xt::xtensor<TestType, 2> m16 = xt::xtensor<TestType, 2>::from_shape({300, 3});
    xt::xtensor<float, 2> m32 = xt::xtensor<float, 2>::from_shape({300, 3});
    const auto source = test_helpers::random_row<float>(900, 15);
    for (std::size_t i = 0; i < 900; ++i)
    {
        m16(i / 3, i % 3) = TestType(source(i));
        m32(i / 3, i % 3) = m16(i / 3, i % 3);
    }
    candidates<float> original;
    original.load(xt::view(m16, xt::all(), 1));  // strided: evaluated into the set's buffer
    candidates<float> copy(original);
    candidates<float> assigned;
    assigned = original;
    original.load(xt::view(m16, xt::all(), 2));  // the original's buffer now holds another row
    for (std::size_t i = 0; i < 300; ++i)
    {
        REQUIRE(copy.logit(token_id(i)) == m32(i, 1));
        REQUIRE(assigned.logit(token_id(i)) == m32(i, 1));
        REQUIRE(original.logit(token_id(i)) == m32(i, 2));
    }
}
