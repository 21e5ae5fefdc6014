// select.hpp and chain.hpp: the draw (exact inverse-CDF edges, statistics,
// golden draws, randomness consumed), static and run-time chains, every kind
// of row, and no allocation per token (in generate and beam_search too).
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <new>
#include <random>

#include <catch2/catch.hpp>
#include <xtensor/xadapt.hpp>
#include <xtensor/xview.hpp>

#include "helpers.hpp"
#include "stats.hpp"

using namespace xsampler;
using Catch::Matchers::Message;
using Catch::Matchers::WithinAbs;
using test_helpers::inf;
using test_helpers::row;

// Counts every global allocation, to prove the per-token path makes none.
// Every form of operator new and delete is replaced, all over malloc and free
// (the aligned forms over aligned_alloc), so that an allocation is counted
// whichever form made it, and is never freed by a form this file did not
// replace: a sanitizer's own operators (which the forms left out would be)
// pair allocations and deallocations and report a mix as a mismatch.
namespace
{
    std::atomic<std::size_t> allocations{0};

    void* counted_malloc(std::size_t n, std::size_t align) noexcept
    {
        ++allocations;
        n = n == 0 ? 1 : n;
        if (align == 0)
        {
            return std::malloc(n);
        }
        if (n > ~std::size_t(0) - align)
        {
            return nullptr;
        }
        return std::aligned_alloc(align, (n + align - 1) / align * align);  // a multiple of align
    }

    void* counted_new(std::size_t n, std::size_t align)
    {
        if (void* p = counted_malloc(n, align))
        {
            return p;
        }
        throw std::bad_alloc();
    }
}
void* operator new(std::size_t n) { return counted_new(n, 0); }
void* operator new[](std::size_t n) { return counted_new(n, 0); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted_malloc(n, 0); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted_malloc(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) { return counted_new(n, std::size_t(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted_new(n, std::size_t(a)); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept
{
    return counted_malloc(n, std::size_t(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept
{
    return counted_malloc(n, std::size_t(a));
}
// GCC pairs free() with the replaced new only by name; the pairing is right.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpragmas"
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace
{
    // An engine that returns one fixed value: pins u for exact tests.
    struct fixed_engine
    {
        using result_type = std::uint64_t;
        static constexpr result_type min() { return 0; }
        static constexpr result_type max() { return ~result_type(0); }
        result_type value;
        result_type operator()() { return value; }
    };
    // u = k * 2^-53 exactly.
    fixed_engine pinned(std::uint64_t k) { return {k << 11}; }

    template <class Chain, class T>
    void check_draws_follow(Chain& c, const xt::xtensor<T, 1>& logits, std::uint64_t seed)
    {
        const auto d = c.final_distribution(logits);
        std::map<token_id, std::size_t> index;
        for (std::size_t i = 0; i < d.ids.size(); ++i)
        {
            index[d.ids[i]] = i;
        }
        const std::size_t n = 60000;
        std::vector<double> observed(d.ids.size(), 0.0);
        philox4x32 rng(seed);
        for (std::size_t i = 0; i < n; ++i)
        {
            const auto t = c.sample(logits, {}, rng);
            REQUIRE(index.count(t.id) == 1);  // only kept tokens are ever drawn
            observed[index[t.id]] += 1.0;
        }
        // Pool the cells expected below 5 into one.
        std::vector<double> obs;
        std::vector<double> exp;
        double pooled_o = 0.0;
        double pooled_e = 0.0;
        for (std::size_t i = 0; i < d.ids.size(); ++i)
        {
            const double e = d.probs[i] * double(n);
            if (e >= 5.0)
            {
                obs.push_back(observed[i]);
                exp.push_back(e);
            }
            else
            {
                pooled_o += observed[i];
                pooled_e += e;
            }
        }
        obs.push_back(pooled_o);
        exp.push_back(pooled_e);
        const double x2 = test_stats::chi_square(obs, exp);
        INFO("chi-square " << x2 << " over " << obs.size() << " cells");
        CHECK(x2 < test_stats::chi_square_bound(obs.size() - 1));
    }
}

TEMPLATE_TEST_CASE("greedy is the argmax, ties to the lowest id", "[select]", float, double)
{
    CHECK(greedy(row<TestType>({0.0, 3.0, 1.0, 3.0})) == 1);
    CHECK(greedy(row<TestType>({-inf, -5.0, -inf})) == 1);
    CHECK(greedy(row<TestType>({7.0})) == 0);
}

TEMPLATE_TEST_CASE("the inverse CDF walks ids in order, at the exact edges of u", "[select]", float, double)
{
    chain c{};
    const auto flat = row<TestType>({-inf, 1.0, 1.0, -inf, 1.0, 1.0});  // kept: 1, 2, 4, 5; Z = 4
    auto zero = pinned(0);
    CHECK(c.sample(flat, {}, zero).id == 1);  // u = 0: the first kept id
    auto half = pinned(std::uint64_t(1) << 52);  // u = 0.5, target 2: running 1, 2, 3 -> id 4
    CHECK(c.sample(flat, {}, half).id == 4);
    auto just_below = pinned((std::uint64_t(1) << 52) - 1);
    CHECK(c.sample(flat, {}, just_below).id == 2);
    auto top = pinned((std::uint64_t(1) << 53) - 1);  // u = 1 - 2^-53: the last kept id
    CHECK(c.sample(flat, {}, top).id == 5);
    const auto t = c.sample(flat, {}, top);
    CHECK_THAT(t.logprob, WithinAbs(std::log(0.25), 1e-15));

    // Across blocks of 64 ids: token 0 and token 100 hold all the mass.
    xt::xtensor<TestType, 1> wide = xt::xtensor<TestType, 1>::from_shape({130});
    wide.fill(TestType(-inf));
    wide(0) = 0;
    wide(100) = 0;
    auto quarter = pinned(std::uint64_t(1) << 51);
    auto three_quarters = pinned(std::uint64_t(3) << 51);
    CHECK(c.sample(wide, {}, quarter).id == 0);
    CHECK(c.sample(wide, {}, three_quarters).id == 100);
    CHECK(c.sample(wide, {}, top).id == 100);

    // A token of weight 0 is never drawn, even at u = 0 or u -> 1.
    const auto underflow = row<TestType>({-2000.0, 0.0, -2000.0});
    CHECK(c.sample(underflow, {}, zero).id == 1);
    CHECK(c.sample(underflow, {}, top).id == 1);
}

TEMPLATE_TEST_CASE("each draw consumes exactly one uniform01", "[select][random]", float, double)
{
    const auto r = test_helpers::random_row<TestType>(300, 3);
    chain greedy_chain{temperature{0.0}};
    chain full{temperature{0.7}, top_k{20}, top_p{0.9}, min_p{0.01}};
    std::mt19937 a(1);
    std::mt19937 b(1);
    for (int i = 0; i < 5; ++i)
    {
        greedy_chain.sample(r, {}, a);  // one candidate left: still one uniform
        full.sample(r, {}, b);
    }
    std::mt19937 ref(1);
    ref.discard(10);  // 5 draws x 2 calls of a 32-bit engine
    CHECK(a == ref);
    CHECK(b == ref);
}

TEMPLATE_TEST_CASE("the log-probability is that of the final distribution", "[select]", float, double)
{
    const auto r = test_helpers::random_row<TestType>(2000, 11);
    chain c{temperature{0.9}, top_k{50}, top_p{0.9}};
    const auto probs = test_helpers::as_map(c.final_distribution(r));
    philox4x32 rng(5);
    for (int i = 0; i < 50; ++i)
    {
        const auto t = c.sample(r, {}, rng);
        REQUIRE(probs.count(t.id) == 1);
        CHECK(t.logprob == std::log(probs.at(t.id)));
    }
    chain g{temperature{0.0}};
    CHECK(g.sample(r, {}, rng).logprob == 0.0);
}

TEMPLATE_TEST_CASE("draws follow the final distribution (chi-square, 6 sigma)", "[select][statistical]", float,
                   double)
{
    SECTION("plain softmax over {.1, .2, .3, .4}")
    {
        chain c{};
        check_draws_follow(c, test_helpers::logits_of<TestType>({0.1, 0.2, 0.3, 0.4}), 1);
    }
    SECTION("top-p renormalised")
    {
        chain c{top_p{0.7}};
        check_draws_follow(c, test_helpers::logits_of<TestType>({0.1, 0.2, 0.3, 0.4}), 2);
    }
    SECTION("a 1000-token row through the full chain")
    {
        chain c{temperature{0.8}, top_k{40}, top_p{0.95}, min_p{0.05}};
        check_draws_follow(c, test_helpers::random_row<TestType>(1000, 4, 2.0), 3);
    }
    SECTION("a wide row with masks and ties, dense after min-p")
    {
        chain c{temperature{1.5}, min_p{0.01}};
        check_draws_follow(c, test_helpers::random_row<TestType>(5000, 6, 2.0, true, 0.3), 4);
    }
}

TEST_CASE("a wrong distribution fails the chi-square check", "[select][statistical]")
{
    // The check has power: draws at T = 1 judged against T = 1.15.
    const auto logits = test_helpers::logits_of<double>({0.1, 0.2, 0.3, 0.4});
    chain drawn{};
    chain claimed{temperature{1.15}};
    const auto d = claimed.final_distribution(logits);
    std::vector<double> observed(4, 0.0);
    std::vector<double> expected(4, 0.0);
    philox4x32 rng(77);
    const std::size_t n = 60000;
    for (std::size_t i = 0; i < n; ++i)
    {
        observed[std::size_t(drawn.sample(logits, {}, rng).id)] += 1.0;
    }
    for (std::size_t i = 0; i < 4; ++i)
    {
        expected[std::size_t(d.ids[i])] = d.probs[i] * double(n);
    }
    CHECK(test_stats::chi_square(observed, expected) > test_stats::chi_square_bound(3));
}

TEST_CASE("golden draws: a fixed engine and seed give fixed tokens", "[select][golden]")
{
    // A change in the bits-to-float conversion, the exp, the summation order
    // or the walk changes these. tests/golden_draws.txt holds more, checked
    // across compilers and standard libraries by the portability test.
    const auto f = test_helpers::random_row<float>(50257, 7);
    chain c{temperature{0.8}, top_k{40}, top_p{0.95}, min_p{0.05}};
    philox4x32 rng(42, 1);
    std::vector<token_id> got;
    for (int i = 0; i < 12; ++i)
    {
        got.push_back(c.sample(f, {}, rng).id);
    }
    CHECK(got == std::vector<token_id>{24711, 47188, 47188, 29893, 24711, 32590, 47188, 17145, 47188, 47188, 47188, 47188});
}

TEMPLATE_TEST_CASE("a tensor, a row view, an adapted buffer and a lazy expression sample alike", "[chain][rows]",
                   float, double)
{
    const std::size_t vocab = 700;
    const auto base = test_helpers::random_row<TestType>(vocab, 21, 2.0, false, 0.1);
    xt::xtensor<TestType, 2> batch = xt::zeros<TestType>({std::size_t(3), vocab});
    xt::view(batch, 1, xt::all()) = base;
    std::vector<TestType> buffer(base.begin(), base.end());
    const auto adapted = xt::adapt(buffer.data(), vocab, xt::no_ownership(), std::vector<std::size_t>{vocab});
    xt::xtensor<TestType, 2> columns = xt::zeros<TestType>({vocab, std::size_t(2)});
    xt::view(columns, xt::all(), 0) = base;  // a strided, non-contiguous row

    chain c{temperature{0.9}, top_k{100}, top_p{0.9}};
    const auto want = c.final_distribution(base);
    const auto check_same = [&](const auto& logits) {
        const auto got = c.final_distribution(logits);
        CHECK(got.ids == want.ids);
        CHECK(got.probs == want.probs);
        philox4x32 r1(8);
        philox4x32 r2(8);
        for (int i = 0; i < 20; ++i)
        {
            CHECK(c.sample(logits, {}, r1).id == c.sample(base, {}, r2).id);
        }
    };
    check_same(xt::view(batch, 1, xt::all()));
    check_same(xt::row(batch, 1));
    check_same(adapted);
    check_same(xt::view(columns, xt::all(), 0));
    check_same(base * TestType(1));  // an unevaluated expression
}

TEST_CASE("one chain serves float and double rows", "[chain]")
{
    chain c{top_k{2}};
    CHECK(c.final_distribution(row<float>({1.0, 2.0, 3.0})).ids == std::vector<token_id>{2, 1});
    CHECK(c.final_distribution(row<double>({3.0, 2.0, 1.0})).ids == std::vector<token_id>{0, 1});
}

TEMPLATE_TEST_CASE("the run-time sampler equals the static chain in any order", "[chain][sampler]", float, double)
{
    const auto r = test_helpers::random_row<TestType>(3000, 13);
    sampling_params p;
    p.temperature = 0.8;
    p.top_k = 40;
    p.top_p = 0.95;
    p.min_p = 0.05;
    p.seed = 17;
    SECTION("default order: temperature, top_k, top_p, min_p")
    {
        sampler s(p);
        chain c{temperature{0.8}, top_k{40}, top_p{0.95}, min_p{0.05}};
        CHECK(s.final_distribution(r).ids == c.final_distribution(r).ids);
        CHECK(s.final_distribution(r).probs == c.final_distribution(r).probs);
        philox4x32 rng(17, 0);
        for (int i = 0; i < 20; ++i)
        {
            CHECK(s.sample(r, {}).id == c.sample(r, {}, rng).id);  // own engine: philox(seed, 0)
        }
        CHECK(s.engine() == rng);
    }
    SECTION("llama.cpp's order")
    {
        p.order = parse_stage_order("top_k;top_p;min_p;temperature");
        sampler s(p);
        chain c{top_k{40}, top_p{0.95}, min_p{0.05}, temperature{0.8}};
        CHECK(s.final_distribution(r).probs == c.final_distribution(r).probs);
        CHECK(s.final_distribution(r).ids == c.final_distribution(r).ids);
    }
    SECTION("defaults draw from the plain softmax")
    {
        sampler s(sampling_params{});
        chain c{};
        CHECK(s.final_distribution(r).probs == c.final_distribution(r).probs);
    }
}

TEST_CASE("sampler parameters and orders are validated at construction", "[chain][sampler][errors]")
{
    sampling_params p;
    p.top_p = 0.0;
    CHECK_THROWS_MATCHES(sampler(p), invalid_parameter, Message("top_p: p must be in (0, 1], got 0"));
    p = sampling_params{};
    p.top_k = -2;
    CHECK_THROWS_AS(sampler(p), invalid_parameter);
    p = sampling_params{};
    p.temperature = 0.5;
    p.order = {"top_k"};
    CHECK_THROWS_MATCHES(sampler(p), invalid_parameter,
                         Message("samplers: temperature is set but not in the sampler order"));
    p.order = {"temperature", "top_k", "temperature"};
    CHECK_THROWS_MATCHES(sampler(p), invalid_parameter, Message("samplers: 'temperature' is listed twice"));
    p.order = {};
    p.temperature = 1.0;
    CHECK_NOTHROW(sampler(p));

    CHECK(parse_stage_order("top_k;top_p;min_p;temperature") ==
          std::vector<std::string>{"top_k", "top_p", "min_p", "temperature"});
    CHECK(parse_stage_order("min_p;").size() == 1);
    CHECK(parse_stage_order("").empty());
    p.order = parse_stage_order("top_k;tfs");
    CHECK_THROWS_MATCHES(sampler(p), invalid_parameter,
                         Message("samplers: unknown sampler 'tfs' (known: logit_bias, penalties, dry, no_repeat_ngram, bad_words, token_mask, "
                                 "temperature, top_k, top_n_sigma, typical, top_p, min_p)"));
    CHECK_THROWS_MATCHES(parse_stage_order("top_k;top_k"), invalid_parameter,
                         Message("samplers: 'top_k' is listed twice"));
}

TEMPLATE_TEST_CASE("no heap allocation per token once the workspace has grown", "[chain][allocation]", float, double)
{
    const auto r1 = test_helpers::random_row<TestType>(50257, 1);
    const auto r2 = test_helpers::random_row<TestType>(50257, 2, 3.0, true, 0.2);
    std::vector<TestType> buffer(r2.begin(), r2.end());
    const auto adapted = xt::adapt(buffer.data(), buffer.size(), xt::no_ownership(),
                                   std::vector<std::size_t>{buffer.size()});
    sampling_params p;
    p.temperature = 0.8;
    p.top_k = 40;
    p.top_p = 0.95;
    p.min_p = 0.05;
    sampler llama(p);
    chain top_p_only{temperature{1.2}, top_p{0.9}};  // the bucketed top-p over the full row
    chain min_p_only{min_p{0.05}};
    chain plain{};
    // A processor (eos ids masked: two edited blocks) before the filters.
    chain with_processor{min_tokens(1, {7, 50000}), temperature{0.8}, top_k{40}, top_p{0.95}};
    // Edits on the fused top-k's list: tokens raised from outside it join it;
    // lowering more of r1's best tokens than the margin falls back to dense.
    chain raised{test_helpers::set_logits{{{3, 50.0}, {11, -inf}, {20000, 9.0}, {3, 8.0}}}, top_k{40}, top_p{0.95}};
    test_helpers::set_logits lower_many;
    const auto ranked = test_helpers::reference(r1).kept;
    for (std::size_t i = 0; i < 100; ++i)
    {
        lower_many.edits.emplace_back(ranked[i].second, i % 3 == 0 ? -inf : -30.0);
    }
    chain fallback{lower_many, temperature{0.8}, top_k{40}, min_p{0.05}};
    sampling_params custom = p;
    custom.custom = {custom_stage("edits", test_helpers::set_logits{{{5, 12.0}, {6, -inf}}})};
    custom.order = parse_stage_order("edits;temperature;top_k;top_p;min_p");
    sampler with_custom(custom);
    philox4x32 rng(3);
    xt::xtensor<TestType, 2> batch = xt::empty<TestType>({std::size_t(2), r1.size()});
    xt::view(batch, 0, xt::all()) = r1;
    xt::view(batch, 1, xt::all()) = r2;
    std::vector<sampler> batch_samplers = {sampler(p), sampler(p)};
    std::vector<workspace> one_thread(1);
    std::vector<sampled_token> batch_out;
    const auto run_all = [&] {
        for (const auto* logits : {&r1, &r2})
        {
            llama.sample(*logits, {}, rng);
            top_p_only.sample(*logits, {}, rng);
            min_p_only.sample(*logits, {}, rng);
            plain.sample(*logits, {}, rng);
            with_processor.sample(*logits, {}, rng);
            raised.sample(*logits, {}, rng);
            fallback.sample(*logits, {}, rng);
            with_custom.sample(*logits, {}, rng);
        }
        top_p_only.sample(adapted, {}, rng);
        llama.sample(adapted, {});
        sample_batch(batch, batch_samplers, one_thread, batch_out);
    };
    run_all();  // the first calls grow the workspaces
    const std::size_t before = allocations.load();
    for (int i = 0; i < 5; ++i)
    {
        run_all();
    }
    CHECK(allocations.load() - before == 0);
}

TEMPLATE_TEST_CASE("dry makes no allocation per token once warm", "[processors][dry][allocation]", float, double)
{
    const auto r = test_helpers::random_row<TestType>(5000, 3);
    std::vector<token_id> history;
    history.reserve(1200);
    for (int i = 0; i < 1100; ++i)
    {
        history.push_back(token_id((i * 7) % 23 + (i % 50 == 0 ? 100 : 0)));
    }
    auto c = chain{dry(0.8, 1.75, 2, -1, {5}), top_k{40}};
    philox4x32 rng(1);
    c.sample(r, history, rng);  // the longest history first: the scratch grows to it
    const std::size_t before = allocations.load();
    for (std::size_t n = 1000; n < 1100; ++n)
    {
        c.sample(r, token_span(history.data(), n), rng);
    }
    CHECK(allocations.load() - before == 0);
}

TEMPLATE_TEST_CASE("generate makes no allocation per token", "[generate][allocation]", float, double)
{
    const auto table = test_helpers::random_matrix<TestType>(64, 64, 5);
    // A model that returns a row view (no allocation of its own).
    const auto model = [&](token_span prefix) { return xt::view(table, std::size_t(prefix[prefix.size() - 1]), xt::all()); };
    sampling_params p;
    p.temperature = 0.9;
    p.top_k = 20;
    p.top_p = 0.9;
    sampler s(p);
    generate_options o;
    o.eos = {0};
    o.model_logprobs = true;
    o.entropy = true;
    const auto allocations_for = [&](std::size_t tokens) {
        o.max_tokens = o.min_tokens = tokens;  // eos masked throughout: exactly `tokens` steps
        philox4x32 rng(2);
        const std::size_t before = allocations.load();
        const auto g = generate(model, {3}, s, o, rng);
        REQUIRE(g.tokens.size() == tokens);
        return allocations.load() - before;
    };
    allocations_for(4);  // grows the sampler's workspace
    CHECK(allocations_for(200) == allocations_for(2));
}

TEMPLATE_TEST_CASE("beam_search makes no allocation per step", "[beam][allocation]", float, double)
{
    constexpr std::size_t vocab = 64;
    constexpr std::size_t width = 4;
    auto table = test_helpers::random_matrix<TestType>(vocab, vocab, 11);
    xt::view(table, xt::all(), 0) = -std::numeric_limits<TestType>::infinity();  // eos is never reached
    // A model that fills one preallocated [width, vocab] buffer with the rows
    // of the beams' last tokens and returns it adapted: it allocates nothing
    // itself, which it counts.
    std::vector<TestType> buffer(width * vocab);
    std::size_t model_calls = 0;
    std::size_t model_allocations = 0;
    const auto model = [&](const std::vector<std::vector<token_id>>& prefixes) {
        const std::size_t before = allocations.load();
        ++model_calls;
        for (std::size_t b = 0; b < prefixes.size(); ++b)
        {
            const auto last = std::size_t(prefixes[b].back());
            std::copy_n(table.data() + last * vocab, vocab, buffer.data() + b * vocab);
        }
        auto out = xt::adapt(buffer.data(), prefixes.size() * vocab, xt::no_ownership(),
                             std::array<std::size_t, 2>{prefixes.size(), vocab});
        model_allocations += allocations.load() - before;
        return out;
    };
    beam_options o;
    o.beam_width = width;
    o.n_best = 2;
    o.eos = {0};
    o.early_stopping = false;
    const auto allocations_for = [&](std::size_t tokens) {
        o.max_tokens = tokens;
        model_calls = 0;
        const std::size_t before = allocations.load();
        const auto found = beam_search(model, {3}, o);
        const std::size_t made = allocations.load() - before;
        REQUIRE(found.size() == 2);
        CHECK(found[0].tokens.size() == tokens);
        CHECK_FALSE(found[0].finished);
        CHECK(model_calls == tokens);
        return made;
    };
    CHECK(allocations_for(40) == allocations_for(4));
    CHECK(model_allocations == 0);
}
