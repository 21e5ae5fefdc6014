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
#include <numeric>
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

namespace
{
    // A user's processor for the trace test: masks one id.
    struct ban_one
    {
        token_id id;
        template <class T>
        void apply(candidates<T>& c, const token_history&) const
        {
            c.mask(id);
        }
    };
}

TEMPLATE_TEST_CASE("sampler::trace shows the chain stage by stage", "[chain][sampler][trace]", float, double)
{
    const auto r = test_helpers::random_row<TestType>(3000, 29);
    const token_id best = greedy(r);
    sampling_params p;
    p.temperature = 0.8;
    p.top_k = 40;  // fused into the load: the trace's first read ends it, exactly
    p.top_p = 0.95;
    p.min_p = 0.05;
    p.seed = 5;
    p.custom = {custom_stage("ban", ban_one{best})};
    p.order = {"ban", "penalties", "temperature", "top_k", "top_p", "min_p"};  // penalties: neutral, left out
    sampler s(p);
    std::vector<std::string> names;
    std::vector<distribution> after;
    s.trace(r, {}, [&](const std::string& name, candidates<TestType>& c) {
        names.push_back(name);
        after.push_back(distribution_of(c));
    });
    CHECK(names == std::vector<std::string>{"logits", "ban", "temperature", "top_k", "top_p", "min_p"});
    CHECK(s.describe_stages() == std::vector<std::string>{"ban", "temperature 0.8", "top_k 40", "top_p 0.95", "min_p 0.05"});
    REQUIRE(after.size() == 6);
    CHECK(after[0].probs == chain{}.final_distribution(r).probs);  // the plain softmax
    CHECK(after[0].ids.size() == 3000);
    CHECK(after[1].ids.size() == 2999);
    CHECK(std::find(after[1].ids.begin(), after[1].ids.end(), best) == after[1].ids.end());
    CHECK(after[3].ids.size() == 40);
    const auto final = s.final_distribution(r);
    CHECK(after.back().ids == final.ids);
    CHECK(after.back().probs == final.probs);

    // A trace draws nothing and changes no later draw.
    sampler untraced(p);
    for (int i = 0; i < 10; ++i)
    {
        CHECK(s.sample(r, {}).id == untraced.sample(r, {}).id);
    }
    CHECK(s.engine() == untraced.engine());

    // A random filter (XTC) takes its uniform from the engine given, as final_distribution does.
    sampling_params q;
    q.temperature = 0.5;
    q.xtc_probability = 0.5;
    q.xtc_threshold = 0.01;
    sampler x(q);
    CHECK_THROWS_AS(x.trace(r, {}, [](const std::string&, candidates<TestType>&) {}), invalid_parameter);
    philox4x32 traced(9, 0);
    philox4x32 listed(9, 0);
    for (int i = 0; i < 8; ++i)
    {
        std::vector<std::string> seen;
        distribution last;
        x.trace(r, {}, traced, [&](const std::string& name, candidates<TestType>& c) {
            seen.push_back(name);
            last = distribution_of(c);
        });
        CHECK(seen == std::vector<std::string>{"logits", "temperature", "xtc"});
        const auto want = x.final_distribution(r, {}, listed);
        CHECK(last.ids == want.ids);
        CHECK(last.probs == want.probs);
        CHECK(traced == listed);  // one uniform each
    }
}

TEST_CASE("describe_stages: every built-in stage in its own words, in the chain's order", "[chain][sampler][trace]")
{
    sampling_params p;
    p.logit_bias = {{1, 2.0}, {2, -1.0}};
    p.sequence_bias = {{{3, 4}, -2.0}};
    p.repeat_penalty = 1.5;
    p.frequency_penalty = 0.25;
    p.penalty_scope = penalty_scope::output;
    p.dry_multiplier = 0.8;
    p.no_repeat_ngram_size = 3;
    p.bad_words = {{4, 5}};
    p.allowed_token_ids = {1, 2, 3};
    p.banned_token_ids = {7};
    p.temperature = 0.0;
    p.top_k = 40;
    p.top_k_keep_ties = true;
    p.top_n_sigma = 1.5;
    p.typical_p = 0.9;
    p.top_p = 0.875;
    p.min_p = 0.05;
    p.p_less = true;
    p.top_h = 0.25;
    p.epsilon = 0.001;
    p.eta = 0.002;
    p.xtc_probability = 0.5;
    p.xtc_threshold = 0.125;
    p.min_keep = 3;
    CHECK(sampler(p).describe_stages() ==
          std::vector<std::string>{"logit_bias on 2 id(s)", "sequence_bias: 1 sequence(s)", "penalties repeat 1.5, frequency 0.25, output scope",
                                   "dry multiplier 0.8, base 1.75, allowed length 2", "no_repeat_ngram 3",
                                   "bad_words: 1 sequence(s)", "token_mask: allow 3, ban 1", "temperature 0 (greedy)",
                                   "top_k 40, ties kept, min_keep 3", "top_n_sigma 1.5, min_keep 3", "typical 0.9, min_keep 3",
                                   "top_p 0.875, min_keep 3", "min_p 0.05, min_keep 3", "p_less, min_keep 3",
                                   "top_h 0.25, min_keep 3", "epsilon 0.001, min_keep 3", "eta 0.002, min_keep 3",
                                   "xtc probability 0.5, threshold 0.125, min_keep 3"});
    sampling_params q;
    q.temperature = 0.75;
    q.dynatemp_range = 0.5;
    q.top_k = 8;
    q.top_p = 0.5;
    q.top_k_top_p_joint = true;
    CHECK(sampler(q).describe_stages() ==
          std::vector<std::string>{"temperature 0.75, dynamic: range 0.5, exponent 1", "top_k_top_p 8, 0.5"});
    sampling_params m;
    m.mirostat = 1;
    m.mirostat_tau = 3.0;
    CHECK(sampler(m).describe_stages() == std::vector<std::string>{"mirostat 1: tau 3, eta 0.1, m 100"});
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
                         Message("samplers: unknown sampler 'tfs' (known: logit_bias, sequence_bias, penalties, dry, no_repeat_ngram, bad_words, token_mask, "
                                 "temperature, top_k, top_k_top_p, top_n_sigma, typical, top_p, min_p, p_less, top_h, epsilon, eta, xtc)"));
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

TEMPLATE_TEST_CASE("a sequence makes no allocation per token, with stop strings, text and top log-probs",
                   "[sequence][allocation]", float, double)
{
    const auto table = test_helpers::random_matrix<TestType>(64, 64, 7);
    std::vector<std::string> bytes;
    for (std::size_t i = 0; i < 64; ++i)
    {
        bytes.push_back(std::string(1, char('a' + i % 26)) + (i % 5 == 0 ? "\xC3" : i % 5 == 1 ? "\xA9" : ""));
    }
    const vocabulary vocab(bytes, {});
    sampling_params p;
    p.temperature = 0.9;
    p.top_p = 0.95;
    sequence_options o;
    o.vocab = &vocab;
    o.stop_strings = {"zzzzq", "\xC3\xA9\xC3\xA9\xC3\xA9x", "never", "abcabc!"};
    o.raw_logprob = o.entropy = true;
    o.top_logprobs = 5;
    const std::vector<token_id> prompt = {3};
    sampler borrowed(p);
    const auto allocations_for = [&](std::size_t tokens) {
        o.max_tokens = tokens;
        const std::size_t before = allocations.load();
        basic_sequence<sampler&> s(borrowed, prompt, o);
        while (!s.finished())
        {
            const token_span seen = s.history().tokens();
            s.step(xt::view(table, std::size_t(seen[seen.size() - 1]), xt::all()));
        }
        REQUIRE(s.generated().size() == tokens);  // no stop string matched
        return allocations.load() - before;
    };
    allocations_for(4);  // grows the sampler's workspace
    CHECK(allocations_for(200) == allocations_for(2));
}

TEST_CASE("verify_draft, verify_tree and step_draft allocate nothing once grown", "[speculative][allocation]")
{
    constexpr std::size_t vocab = 1000, k = 4;
    const auto random = test_helpers::random_matrix<float>(k + 1, vocab, 11);
    xt::xtensor<float, 2> agree = xt::zeros<float>({k + 1, vocab});  // the draft tokens the argmax
    xt::xtensor<double, 2> q = xt::empty<double>({k, vocab});
    q.fill(1.0 / double(vocab));
    std::vector<token_id> history(16, 7);
    const std::vector<token_id> draft = {1, 2, 3, 4};
    history.insert(history.end(), draft.begin(), draft.end());
    for (std::size_t i = 0; i < k; ++i)
    {
        agree(i, std::size_t(draft[i])) = 5.0f;
    }
    sampling_params p;
    p.temperature = 0.8;
    p.top_k = 40;
    p.top_p = 0.95;
    p.repeat_penalty = 1.1;
    sampler s(p);
    philox4x32 rng(1);
    std::vector<sampled_token> out;
    out.reserve(k + 1);
    const token_history h(history, 16);
    const draft_tree tree{{1, 2, 3, 4}, {-1, 0, -1, 2}};
    tree_result result;
    result.tokens.reserve(k + 1);
    result.nodes.reserve(k);
    const std::vector<token_id> prefix(history.begin(), history.begin() + 16);
    for (const verify_rule rule : {verify_rule::standard, verify_rule::greedy, verify_rule::typical})
    {
        verify_options o;
        o.rule = rule;
        const auto calls = [&] {
            for (int i = 0; i < 10; ++i)
            {
                verify_draft(s, random, h, q, o, out, rng);
                verify_draft(s, agree, h, o, out, rng);
                verify_tree(s, random, token_history(prefix, 16), tree, q, o, result, rng);
            }
        };
        calls();  // grows the workspace and the tree's buffers
        const std::size_t before = allocations.load();
        calls();
        CHECK(allocations.load() - before == 0);
    }
    // A sequence: every draft token accepted (greedy), top log-probs and raw log-probs asked.
    sequence_options so;
    so.max_tokens = 500;
    so.raw_logprob = true;
    so.top_logprobs = 3;
    sampling_params cold = p;
    cold.temperature = 0.0;
    cold.repeat_penalty = 1.0;  // its copy of the history grows by doubling as the sequence does
    sequence seq(sampler(cold), prefix, so);
    verify_options greedy_rule;
    greedy_rule.rule = verify_rule::greedy;
    REQUIRE(seq.step_draft(agree, draft, greedy_rule).size() == k + 1);  // grows the steps
    const std::size_t before = allocations.load();
    for (int i = 0; i < 20; ++i)
    {
        REQUIRE(seq.step_draft(agree, draft, greedy_rule).size() == k + 1);
        seq.step_draft(random, draft, q, verify_options{});
    }
    CHECK(allocations.load() - before == 0);
}

TEST_CASE("a thread_pool call allocates nothing, and sample_batch over it nothing once grown", "[batch][allocation]")
{
    thread_pool threads(3);
    std::atomic<std::size_t> sum{0};
    threads(3, [&](std::size_t part) { sum += part; });
    const std::size_t before = allocations.load();
    for (std::size_t call = 0; call < 500; ++call)
    {
        threads(1 + call % 5, [&](std::size_t part) { sum += part; });
    }
    CHECK(allocations.load() - before == 0);
    CHECK(sum.load() > 0);

    // sample_batch over slots, on the pool: nothing per call once the
    // workspaces, the sequences and out / errors have grown.
    const auto rows = test_helpers::random_matrix<float>(6, 64, 5);
    sampling_params p;
    p.temperature = 0.9;
    p.top_p = 0.95;
    sequence_options o;
    o.max_tokens = 300;
    o.top_logprobs = 3;
    const std::vector<token_id> prompt = {1, 2};
    std::vector<sequence> seqs;
    for (std::size_t r = 0; r < 6; ++r)
    {
        p.seed = r;
        o.top_source = r % 2 ? logprob_source::processed : logprob_source::raw;
        seqs.emplace_back(sampler(p), prompt, o);
    }
    std::vector<slot> slots;
    for (std::size_t r = 0; r < 6; ++r)
    {
        slots.push_back({5 - r, &seqs[r]});
    }
    std::vector<workspace> pool(3);
    std::vector<step_result> out;
    std::vector<std::exception_ptr> errors;
    for (std::size_t step = 0; step < 4; ++step)
    {
        sample_batch(rows, slots, pool, out, &errors, threads);
    }
    const std::size_t batch_before = allocations.load();
    for (std::size_t step = 0; step < 200; ++step)
    {
        sample_batch(rows, slots, pool, out, step % 2 ? &errors : nullptr, threads);
    }
    CHECK(allocations.load() - batch_before == 0);
    CHECK(seqs[0].generated().size() == 204);
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

// --- XTC (filters/xtc.hpp) and mirostat (filters/mirostat.hpp): a random filter, a stage that learns from the draw ---

namespace
{
    /// The kept ids of c, in id order.
    template <class T>
    std::vector<token_id> kept_ids(candidates<T>& c)
    {
        std::vector<token_id> ids;
        c.for_each_by_id([&](token_id id, T) { ids.push_back(id); });
        return ids;
    }

    /// Applies one stage to a freshly loaded row (u for a random filter).
    template <class T, class S>
    std::vector<token_id> after(S stage, const xt::xtensor<T, 1>& logits, double u = 0.0)
    {
        candidates<T> c;
        c.load(logits);
        stage.apply(c, u);
        return kept_ids(c);
    }
}

TEMPLATE_TEST_CASE("xtc removes the tokens above the threshold but the last", "[xtc]", float, double)
{
    using ids = std::vector<token_id>;
    // llama.cpp's test_xtc cases: probabilities {.4, .3, .2, .1}.
    const auto probs = test_helpers::logits_of<TestType>({0.4, 0.3, 0.2, 0.1});
    CHECK(after(xtc(1.0, 0.09), probs) == ids{3});
    CHECK(after(xtc(1.0, 0.19), probs) == ids{2, 3});
    CHECK(after(xtc(1.0, 0.29), probs) == ids{1, 2, 3});
    CHECK(after(xtc(1.0, 0.39), probs) == ids{0, 1, 2, 3});  // only one token reaches it
    // p = {.463, .281, .170, .063, .023} (logits 3, 2.5, 2, 1, 0).
    const auto r = row<TestType>({3.0, 2.5, 2.0, 1.0, 0.0});
    CHECK(after(xtc(1.0, 0.1), r) == ids{2, 3, 4});
    CHECK(after(xtc(1.0, 0.25), r) == ids{1, 2, 3, 4});
    CHECK(after(xtc(1.0, 0.3), r) == ids{0, 1, 2, 3, 4});
    CHECK(after(xtc(1.0, 0.0), r) == ids{4});            // every token reaches 0: the least is left
    CHECK(after(xtc(1.0, 0.6), r) == ids{0, 1, 2, 3, 4});  // above 0.5: never
    SECTION("the coin: it fires iff u < probability")
    {
        CHECK(after(xtc(0.5, 0.1), r, 0.4999) == ids{2, 3, 4});
        CHECK(after(xtc(0.5, 0.1), r, 0.5) == ids{0, 1, 2, 3, 4});
        CHECK(after(xtc(0.0, 0.1), r, 0.0) == ids{0, 1, 2, 3, 4});
        CHECK(after(xtc(1.0, 0.1), r, 0.9999999) == ids{2, 3, 4});
    }
    SECTION("min_keep: no removal that would leave fewer")
    {
        CHECK(after(xtc(1.0, 0.1, 3), r) == ids{2, 3, 4});
        CHECK(after(xtc(1.0, 0.1, 4), r) == ids{0, 1, 2, 3, 4});
        CHECK(after(xtc(1.0, 0.0, 2), r) == ids{0, 1, 2, 3, 4});
    }
    SECTION("ties at the threshold go by rank: the lower ids are removed first")
    {
        const auto tied = row<TestType>({0.0, 1.0, 1.0, 1.0, -3.0});  // ids 1, 2, 3 at p = .2954
        CHECK(after(xtc(1.0, 0.29), tied) == ids{0, 3, 4});
        CHECK(after(xtc(1.0, 0.3), tied) == ids{0, 1, 2, 3, 4});
    }
    SECTION("masked tokens stay out; after a truncation it works on the list")
    {
        const auto masked = row<TestType>({3.0, -inf, 2.5, 2.0, -inf, 1.0});
        CHECK(after(xtc(1.0, 0.1), masked) == ids{3, 5});
        candidates<TestType> c;
        c.load(r);
        c.keep_top(3);  // {0, 1, 2}: p = {.507, .308, .185}
        xtc(1.0, 0.2).apply(c, 0.0);
        CHECK(kept_ids(c) == ids{1, 2});
        CHECK(c.argmax() == 1);  // greedy after it: the best token it left
    }
}

TEST_CASE("xtc validates its parameters", "[xtc][errors]")
{
    CHECK_THROWS_WITH(xtc(-0.1, 0.1), "xtc: probability must be in [0, 1], got -0.1");
    CHECK_THROWS_WITH(xtc(1.5, 0.1), "xtc: probability must be in [0, 1], got 1.5");
    CHECK_THROWS_WITH(xtc(0.5, std::nan("")), "xtc: threshold must be in [0, 1], got nan");
    CHECK_THROWS_WITH(xtc(0.5, 1.1), "xtc: threshold must be in [0, 1], got 1.1");
    CHECK(xtc(0.5, 0.1, 0).min_keep() == 1);  // 0 counts as 1, as for every filter
}

TEMPLATE_TEST_CASE("a random filter takes one uniform per call from the caller's engine", "[xtc][random]", float,
                   double)
{
    const auto r = row<TestType>({3.0, 2.5, 2.0, 1.0, 0.0});
    chain c{xtc(0.5, 0.1)};
    SECTION("sample: XTC's uniform, then the draw's")
    {
        for (std::uint64_t seed = 0; seed < 50; ++seed)
        {
            philox4x32 rng(seed);
            philox4x32 replay(seed);
            const double coin = uniform01(replay);
            const sampled_token t = c.sample(r, {}, rng);
            // The draw's inverse CDF over the set the coin left, from the next uniform.
            candidates<TestType> set;
            set.load(r);
            xtc(0.5, 0.1).apply(set, coin);
            CHECK(draw(set, replay).id == t.id);
            CHECK(rng == replay);
        }
    }
    SECTION("final_distribution and filter need the engine, and name the stage without it")
    {
        CHECK_THROWS_WITH(c.final_distribution(r), Catch::Contains("xtc: draws a uniform per call"));
        philox4x32 rng(7);
        philox4x32 expected(7);
        uniform01(expected);
        c.final_distribution(r, {}, rng);
        CHECK(rng == expected);
    }
    SECTION("the run-time sampler leaves XTC out at probability 0: one uniform per sample")
    {
        sampling_params p;
        p.xtc_threshold = 0.2;
        sampler off(p);
        philox4x32 expected(0);
        uniform01(expected);
        off.sample(r, {});
        CHECK(off.engine() == expected);
        p.xtc_probability = 0.5;
        sampler on(p);
        uniform01(expected);
        on.sample(r, {});
        CHECK(on.engine() == expected);
    }
}

namespace
{
    /// Pearson's chi-square of n draws against expected probabilities
    /// (cells expected below 5 pooled), checked against the 6-sigma bound.
    void check_counts_follow(const std::vector<double>& observed, const std::vector<double>& probs, double n)
    {
        std::vector<double> obs{0.0};
        std::vector<double> exp{0.0};  // the pooled cell first
        for (std::size_t i = 0; i < probs.size(); ++i)
        {
            if (probs[i] * n >= 5.0)
            {
                obs.push_back(observed[i]);
                exp.push_back(probs[i] * n);
            }
            else
            {
                obs[0] += observed[i];
                exp[0] += probs[i] * n;
            }
        }
        CHECK(test_stats::chi_square(obs, exp) < test_stats::chi_square_bound(obs.size() - 1));
    }
}

TEMPLATE_TEST_CASE("xtc's draws follow the mixture its coin makes (chi-square)", "[xtc][statistical]", float, double)
{
    const auto r = row<TestType>({3.0, 2.5, 2.0, 1.0, 0.0, -1.0});
    std::vector<double> w(6);
    std::transform(r.begin(), r.end(), w.begin(), [](TestType x) { return std::exp(double(x) - 3.0); });
    const double z = std::accumulate(w.begin(), w.end(), 0.0);
    const double z_left = z - w[0] - w[1];  // threshold 0.1 removes ids 0 and 1 (p .46, .28; id 2 has .17)
    const double q = 0.3;
    std::vector<double> probs(6);
    for (std::size_t i = 0; i < 6; ++i)
    {
        probs[i] = (1 - q) * w[i] / z + (i >= 2 ? q * w[i] / z_left : 0.0);
    }
    chain c{xtc(q, 0.1)};
    philox4x32 rng(11);
    const std::size_t n = 60000;
    std::vector<double> observed(6, 0.0);
    for (std::size_t i = 0; i < n; ++i)
    {
        observed[std::size_t(c.sample(r, {}, rng).id)] += 1.0;
    }
    check_counts_follow(observed, probs, double(n));
}

TEMPLATE_TEST_CASE("mirostat v2 keeps p >= 2^-mu and moves mu by the drawn token's surprise", "[mirostat]", float,
                   double)
{
    // p = {.463, .281, .170, .063, .023}.
    const auto r = row<TestType>({3.0, 2.5, 2.0, 1.0, 0.0});
    using ids = std::vector<token_id>;
    SECTION("the truncation at mu = 2 tau")
    {
        const auto kept = [&](double tau) {
            candidates<TestType> c;
            c.load(r);
            mirostat(2, tau, 0.1).apply(c);
            return kept_ids(c);
        };
        CHECK(kept(1.0) == ids{0, 1});        // 2^-2 = .25
        CHECK(kept(1.5) == ids{0, 1, 2});     // 2^-3 = .125
        CHECK(kept(2.5) == ids{0, 1, 2, 3});  // 2^-5 = .031: .023 is out
        CHECK(kept(0.3) == ids{0});           // 2^-0.6 = .66: not even the best token; it is kept
        CHECK(kept(600.0) == ids{0, 1, 2, 3, 4});  // 2^-1200 underflows: every token
    }
    SECTION("mu follows mu - eta (surprise - tau) after each draw, and only after a draw")
    {
        chain c{mirostat(2, 1.0, 0.1)};
        auto& steer = std::get<0>(c.stages());
        philox4x32 rng(3);
        double mu = 2.0;
        for (int i = 0; i < 200; ++i)
        {
            const sampled_token t = c.sample(r, {}, rng);
            mu -= 0.1 * (-t.logprob / std::log(2.0) - 1.0);
            REQUIRE(steer.mu() == Approx(mu).epsilon(1e-12));
        }
        c.final_distribution(r);  // reads, never learns
        c.filter(r, {});
        CHECK(steer.mu() == Approx(mu).epsilon(1e-12));
        const auto bad = row<TestType>({1.0, std::nan("")});
        CHECK_THROWS_AS(c.sample(bad, {}, rng), invalid_logits);
        CHECK(steer.mu() == Approx(mu).epsilon(1e-12));  // a throwing call leaves it
        c.reset();
        CHECK(steer.mu() == 2.0);
    }
}

TEMPLATE_TEST_CASE("mirostat v1 keeps the top k of its Zipf estimate", "[mirostat]", float, double)
{
    // An exact Zipf row: p_i proportional to (i + 1)^-s, so the estimate is s.
    const std::size_t n = 5000;
    for (const double s : {0.8, 1.0, 1.1, 1.7})
    {
        for (const double mu : {4.0, 8.0, 12.0})
        {
            xt::xtensor<TestType, 1> r = xt::empty<TestType>({n});
            for (std::size_t i = 0; i < n; ++i)
            {
                r(i) = TestType(-s * std::log(double(i + 1)));
            }
            const double e = s - 1.0;
            const double base = std::fabs(e) < 1e-12 ? std::exp2(mu) / std::log(double(n))
                                                     : e * std::exp2(mu) / (1.0 - std::pow(double(n), -e));
            const double k = std::min(std::max(std::floor(std::pow(base, 1.0 / s)), 1.0), double(n));
            mirostat steer(1, mu / 2.0, 0.1);
            candidates<TestType> c;
            c.load(r);
            steer.apply(c);
            INFO("s " << s << " mu " << mu << " k " << k);
            // The float row's estimate is within rounding of s: k within 1.
            CHECK(std::fabs(double(c.size()) - k) <= (std::is_same<TestType, double>::value ? 0.0 : 1.0));
            CHECK(kept_ids(c).back() == token_id(c.size() - 1));  // a rank prefix
        }
    }
    SECTION("fewer than two tokens: the best one")
    {
        const auto one = row<TestType>({-inf, 2.0, -inf});
        candidates<TestType> c;
        c.load(one);
        mirostat(1, 3.0, 0.1).apply(c);
        CHECK(kept_ids(c) == std::vector<token_id>{1});
    }
}

TEMPLATE_TEST_CASE("mirostat's draws at a fixed mu follow the truncated distribution (chi-square)",
                   "[mirostat][statistical]", float, double)
{
    xt::xtensor<TestType, 1> r = xt::empty<TestType>({20});
    for (std::size_t i = 0; i < 20; ++i)
    {
        r(i) = TestType(-0.3 * double((i * 7) % 20));  // p_0 = .26, in shuffled ids
    }
    chain c{mirostat(2, 2.0, 0.0)};  // eta 0: mu stays 4, p >= 1/16: five tokens
    const auto d = c.final_distribution(r);
    REQUIRE(d.ids.size() == 5);
    std::vector<double> observed(d.ids.size(), 0.0);
    philox4x32 rng(5);
    const std::size_t n = 60000;
    for (std::size_t i = 0; i < n; ++i)
    {
        const token_id id = c.sample(r, {}, rng).id;
        const auto at = std::find(d.ids.begin(), d.ids.end(), id);
        REQUIRE(at != d.ids.end());
        observed[std::size_t(at - d.ids.begin())] += 1.0;
    }
    check_counts_follow(observed, d.probs, double(n));
}

TEST_CASE("mirostat in the run-time sampler: processors, temperature, mirostat", "[mirostat][sampler]")
{
    const auto r = row<double>({3.0, 2.5, 2.0, 1.0, 0.0});
    sampling_params p;
    p.mirostat = 2;
    p.mirostat_tau = 1.0;
    p.temperature = 0.9;
    p.logit_bias = {{3, 1.0}};
    sampler s(p);
    chain c{logit_bias(p.logit_bias), temperature(0.9), mirostat(2, 1.0, 0.1)};
    philox4x32 rng(p.seed, 0);  // the sampler's own engine
    std::vector<token_id> first;
    for (int i = 0; i < 100; ++i)
    {
        const token_id got = s.sample(r, {}).id;
        first.push_back(got);
        REQUIRE(got == c.sample(r, {}, rng).id);
    }
    SECTION("reset: mu and the engine start over, so the draws repeat")
    {
        s.reset();
        for (const token_id expected : first)
        {
            REQUIRE(s.sample(r, {}).id == expected);
        }
    }
    SECTION("generate draws through it too")
    {
        generate_options o;
        o.max_tokens = 50;
        const auto model = [&](token_span) { return r; };
        philox4x32 a(4);
        philox4x32 b(4);
        chain d{logit_bias(p.logit_bias), temperature(0.9), mirostat(2, 1.0, 0.1)};
        const auto g = generate(model, {0}, d, o, a);
        auto& steer = std::get<2>(d.stages());
        double mu = 2.0;
        for (const double lp : g.logprobs)
        {
            mu -= 0.1 * (-lp / std::log(2.0) - 1.0);
        }
        CHECK(steer.mu() == Approx(mu).epsilon(1e-12));
        (void)b;
    }
    SECTION("a filter set beside it is an error naming it")
    {
        sampling_params q = p;
        q.top_k = 40;
        CHECK_THROWS_WITH(sampler(q), "mirostat: replaces the filters after temperature, but top_k is set (unset it, or "
                                      "set mirostat to 0)");
        q = p;
        q.mirostat = 3;
        CHECK_THROWS_WITH(sampler(q), "mirostat: must be 0 (off), 1 or 2, got 3");
        q = p;
        q.mirostat = 0;
        q.mirostat_tau = -1.0;
        CHECK_THROWS_WITH(sampler(q), "mirostat: tau must be finite and >= 0, got -1");
    }
}

TEST_CASE("mirostat validates its parameters", "[mirostat][errors]")
{
    CHECK_THROWS_WITH(mirostat(0, 5.0, 0.1), "mirostat: version must be 1 or 2, got 0");
    CHECK_THROWS_WITH(mirostat(2, inf, 0.1), "mirostat: tau must be finite and >= 0, got inf");
    CHECK_THROWS_WITH(mirostat(2, 5.0, -0.1), "mirostat: eta must be finite and >= 0, got -0.1");
    CHECK_THROWS_WITH(mirostat(1, 5.0, 0.1, 1), "mirostat: m must be >= 2, got 1");
}
