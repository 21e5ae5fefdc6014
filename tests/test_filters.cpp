// filters.hpp, candidates.hpp, softmax.hpp, row.hpp: the contracts with
// exact values, their edge cases, and every error.
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <type_traits>

#include <catch2/catch.hpp>
#include <xtensor/xmath.hpp>

#include "helpers.hpp"
#include "stats.hpp"

using namespace xsampler;
using test_helpers::as_map;
using test_helpers::inf;
using test_helpers::logits_of;
using test_helpers::row;
using Catch::Matchers::Message;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

namespace
{
    // Tolerance of probabilities that went through log() in T and back.
    template <class T>
    constexpr double tol = std::is_same<T, float>::value ? 1e-6 : 1e-12;

    template <class T, class... Stages>
    std::map<token_id, double> dist(const xt::xtensor<T, 1>& logits, Stages... stages)
    {
        chain c{stages...};
        return as_map(c.final_distribution(logits));
    }

    template <class T>
    void check_probs(const std::map<token_id, double>& got, const std::map<token_id, double>& want)
    {
        REQUIRE(got.size() == want.size());
        for (const auto& [id, p] : want)
        {
            REQUIRE(got.count(id) == 1);
            CHECK_THAT(got.at(id), WithinRel(p, tol<T>));
        }
    }

    /// The random cases of the reference tests: a row (a 20011-token one for
    /// odd seeds, else `even_vocab`; ties, masked tokens), a temperature and
    /// a min_keep, all from the seed.
    template <class T>
    struct seeded_case
    {
        xt::xtensor<T, 1> row;
        double t;
        std::size_t keep;
    };
    template <class T>
    seeded_case<T> seeded(std::uint64_t seed, std::size_t even_vocab)
    {
        const std::size_t vocab = seed % 2 ? 20011 : even_vocab;
        return {test_helpers::random_row<T>(vocab, seed, 1.0 + double(seed % 4), seed % 3 == 0, seed % 5 == 0 ? 0.4 : 0.0),
                0.4 + 0.15 * double(seed % 7), 1 + seed % 3};
    }
}

TEMPLATE_TEST_CASE("exp2_nonpos is within 2 ulp of std::exp2 and flushes at its limit", "[row]", float, double)
{
    using limits = std::numeric_limits<TestType>;
    const double limit = detail::exp_constants<TestType>::limit;
    double worst2 = 0.0;
    double worst = 0.0;
    for (int i = 0; i < 200000; ++i)
    {
        const auto t = TestType(limit * i / 200000.0);
        worst2 = std::max(worst2, std::fabs(double(detail::exp2_nonpos(t)) - std::exp2(double(t))) / std::exp2(double(t)));
        // exp(d) = 2^(d log2e): a few ulp plus |d log2e| ulp from rounding the product.
        const auto d = TestType(double(t) / detail::log2e);
        const double rel = std::fabs(double(detail::exp_nonpos(d)) - std::exp(double(d))) / std::exp(double(d));
        worst = std::max(worst, rel / (3.0 + std::fabs(double(t))));
    }
    CHECK(worst2 < 2 * limits::epsilon());
    CHECK(worst < limits::epsilon());
    CHECK(detail::exp2_nonpos(TestType(0)) == 1);
    CHECK(detail::exp2_nonpos(-TestType(0)) == 1);
    CHECK(detail::exp2_nonpos(TestType(-1)) == TestType(0.5));
    CHECK(detail::exp2_nonpos(TestType(limit)) == 0);
    CHECK(detail::exp2_nonpos(TestType(-limits::infinity())) == 0);
    CHECK(detail::exp_nonpos(TestType(0)) == 1);
}

TEMPLATE_TEST_CASE("SIMD kernels give the scalar bits", "[row]", float, double)
{
    // Every lane of the batch exp equals the scalar exp, and the SIMD blocked
    // sum equals the scalar one, on a row with masks and a ragged tail.
    const auto r = test_helpers::random_row<TestType>(64 * 37 + 11, 3, 4.0, false, 0.1);
    using B = detail::batch<TestType>;
    for (std::size_t i = 0; i + B::size <= r.size(); i += B::size)
    {
        alignas(64) TestType out[B::size];
        detail::exp2_nonpos(B::load_unaligned(r.data() + i) - B(TestType(9))).store_aligned(out);
        for (std::size_t j = 0; j < B::size; ++j)
        {
            REQUIRE(out[j] == detail::exp2_nonpos(TestType(r(i + j) - TestType(9))));
        }
    }
    // Blocks with masked tokens take the kernel that tests exp2's limit; a
    // row without them takes the one that skips it where the minimum allows.
    const auto unmasked = test_helpers::random_row<TestType>(64 * 37 + 11, 3, 4.0);
    const auto mixed = [&] {  // two blocks that need the test, the others not
        auto v = unmasked;
        v(100) = -std::numeric_limits<TestType>::infinity();
        v(1000) -= TestType(1000);
        return v;
    }();
    const TestType m = xt::amax(unmasked)();
    const TestType s = TestType(1.25);
    for (const auto* row : {&r, &unmasked, &mixed})
    {
        std::vector<detail::block_total> storage(row->size() / detail::block_size + 1);
        detail::block_record blocks{storage.data()};
        std::vector<TestType> w(row->size());
        const double simd = detail::dense_total(row->data(), row->size(), m, s, &blocks, w.data());
        detail::blocked_sum<TestType> scalar;
        for (std::size_t i = 0; i < row->size(); ++i)
        {
            const TestType want = detail::weight((*row)(i), m, s);
            REQUIRE(w[i] == want);
            scalar.add(i, want);
        }
        CHECK(simd == scalar.total());
        CHECK(blocks.size == 38);
    }
    CHECK(std::isinf(xt::amin(r)()));
    CHECK((xt::amin(unmasked)() - m) * s > detail::exp_constants<TestType>::limit);

    // Every kernel of the one reduction (detail/reduce.hpp) sums its SIMD
    // blocks to the bits of its scalar terms added one by one: with mask
    // words (a masked token adds +0 to every channel), and on a row whose
    // x - m overflows T. The moments kernel also counts the tokens left.
    const auto wide = [&] {
        auto v = unmasked;
        v(5) = std::numeric_limits<TestType>::max() / 2;
        v(70) = -std::numeric_limits<TestType>::max();
        v(71) = -std::numeric_limits<TestType>::infinity();
        return v;
    }();
    std::vector<std::uint64_t> words((r.size() + 63) / 64);
    std::mt19937_64 g(5);
    for (auto& word : words)
    {
        word = g() % 3 == 0 ? ~std::uint64_t(0) : g();
    }
    constexpr TestType inf = std::numeric_limits<TestType>::infinity();
    const auto same = [&](const auto& k, const auto& row, const std::uint64_t* keep) {
        constexpr std::size_t K = std::decay_t<decltype(k)>::channels;
        detail::blocked_sum<TestType> simd[K], scalar[K];
        const std::size_t counted = detail::reduce_run(k, row.data(), row.size(), 0, simd, keep);
        std::size_t left = 0;
        for (std::size_t i = 0; i < row.size(); ++i)
        {
            const bool out = keep != nullptr && (keep[i / 64] >> (i % 64) & 1) == 0;
            const TestType x = out ? -inf : row(i);
            left += detail::reduce_one(k, i, x, detail::weight(x, k.m, k.s2), scalar);
        }
        for (std::size_t c = 0; c < K; ++c)
        {
            REQUIRE(simd[c].total() == scalar[c].total());
        }
        return std::pair<std::size_t, std::size_t>{counted, left};
    };
    for (const auto* row : {&r, &unmasked, &mixed, &wide})
    {
        const TestType mr = xt::amax(*row)();
        const std::uint64_t* const masks[] = {nullptr, words.data()};
        for (const std::uint64_t* keep : masks)
        {
            same(detail::weight_kernel<TestType>(mr, s), *row, keep);
            const auto count = same(detail::moments_kernel<TestType>(mr, TestType(0.75), s), *row, keep);
            CHECK(count.first == count.second);
            same(detail::moments_kernel<TestType, detail::third_sum::squares>(mr, TestType(0.75), s), *row, keep);
            same(detail::square_kernel<TestType>(mr, s), *row, keep);
            same(detail::moments_kernel<TestType, detail::third_sum::none>(mr, TestType(1), s), *row, keep);
        }
    }
}

TEMPLATE_TEST_CASE("softmax, log_softmax, logsumexp and entropy", "[softmax]", float, double)
{
    const auto l = logits_of<TestType>({0.1, 0.2, 0.3, 0.4});
    const auto p = softmax(l);
    const double want[] = {0.1, 0.2, 0.3, 0.4};
    for (std::size_t i = 0; i < 4; ++i)
    {
        CHECK_THAT(p(i), WithinRel(want[i], tol<TestType>));
        CHECK_THAT(log_softmax(l)(i), WithinAbs(std::log(want[i]), tol<TestType>));
    }
    CHECK_THAT(logsumexp(l), WithinAbs(0.0, tol<TestType>));
    const double h = -(0.1 * std::log(0.1) + 0.2 * std::log(0.2) + 0.3 * std::log(0.3) + 0.4 * std::log(0.4));
    CHECK_THAT(entropy(l), WithinRel(h, tol<TestType>));

    // Bit for bit what a chain with no filter draws from (one numerics), on a
    // row long enough for full blocks and a tail; a strided view reads the
    // same values.
    xt::xtensor<TestType, 1> wide = xt::empty<TestType>({std::size_t(1000)});
    for (std::size_t i = 0; i < wide.size(); ++i)
    {
        wide(i) = TestType(std::sin(0.37 * double(i)) * 6.0);
    }
    wide(17) = -inf;
    const auto p_wide = softmax(wide);
    chain plain{temperature{1.0}};
    const distribution d = plain.final_distribution(wide);
    REQUIRE(d.ids.size() == 999);
    for (std::size_t j = 0; j < d.ids.size(); ++j)
    {
        CHECK(p_wide(std::size_t(d.ids[j])) == d.probs[j]);
    }
    CHECK(p_wide(17) == 0.0);
    xt::xtensor<TestType, 2> twice = xt::stack(xt::xtuple(wide, wide), 1);
    CHECK((softmax(xt::view(twice, xt::all(), 0)) == p_wide));

    const auto masked = row<TestType>({0.0, -inf, 0.0});
    CHECK(softmax(masked)(1) == 0.0);
    CHECK(softmax(masked)(0) == 0.5);
    CHECK(log_softmax(masked)(1) == -inf);
    CHECK_THAT(entropy(masked), WithinRel(std::log(2.0), 1e-15));
    CHECK_THAT(logsumexp(row<TestType>({1000.0, 1000.0})), WithinRel(1000.0 + std::log(2.0), 1e-15));
}

TEMPLATE_TEST_CASE("bad rows throw invalid_logits naming the index or reason", "[row][errors]", float, double)
{
    chain c{top_k{2}};
    const auto nan = std::numeric_limits<double>::quiet_NaN();
    CHECK_THROWS_MATCHES(c.final_distribution(row<TestType>({0.0, 1.0, nan})), invalid_logits,
                         Message("logits: NaN at index 2"));
    CHECK_THROWS_MATCHES(c.final_distribution(row<TestType>({inf, 1.0})), invalid_logits,
                         Message("logits: +inf at index 0"));
    CHECK_THROWS_MATCHES(c.final_distribution(row<TestType>({-inf, -inf})), invalid_logits,
                         Message("logits: every token is masked (-inf)"));
    CHECK_THROWS_MATCHES(c.final_distribution(xt::xtensor<TestType, 1>(xt::empty<TestType>({0}))), invalid_logits,
                         Message("logits: the row is empty"));
    const xt::xtensor<TestType, 2> matrix = xt::zeros<TestType>({2, 3});
    CHECK_THROWS_MATCHES(greedy(matrix), invalid_logits, Message("logits: expected a 1-D row, got 2-D"));
    CHECK_THROWS_AS(softmax(row<TestType>({nan})), invalid_logits);
    CHECK_THROWS_AS(greedy(row<TestType>({-inf})), invalid_logits);
}

TEMPLATE_TEST_CASE("a chain that starts with top_k validates the row in its selection pass",
                   "[row][errors][top_k]", float, double)
{
    // The first stage other than temperature is top_k: validation and
    // selection share one pass. Faults in the vector groups and in the tail,
    // for a compile-time chain and a run-time sampler; then the set it keeps.
    const auto nan = std::numeric_limits<TestType>::quiet_NaN();
    chain c{temperature{0.7}, top_k{3}, temperature{0.0}};
    sampling_params p;
    p.top_k = 3;
    p.order = parse_stage_order("top_k;top_p");
    sampler s(p);
    auto r = test_helpers::random_row<TestType>(100, 5);
    const auto check = [&](std::size_t i, TestType bad, const std::string& message) {
        auto faulty = r;
        faulty(i) = bad;
        CHECK_THROWS_MATCHES(c.final_distribution(faulty), invalid_logits, Message(message));
        CHECK_THROWS_MATCHES(s.final_distribution(faulty), invalid_logits, Message(message));
    };
    for (const std::size_t i : {std::size_t(5), std::size_t(98)})
    {
        check(i, nan, "logits: NaN at index " + std::to_string(i));
        check(i, inf, "logits: +inf at index " + std::to_string(i));
    }
    CHECK_THROWS_MATCHES(c.final_distribution(xt::xtensor<TestType, 1>(xt::full_like(r, -inf))), invalid_logits,
                         Message("logits: every token is masked (-inf)"));
    // Ties for the max: temperature 0 after the fused top-k keeps the lowest id.
    r(40) = r(70) = TestType(50);
    CHECK(c.final_distribution(r).ids == std::vector<token_id>{40});
    CHECK(s.final_distribution(r).ids.size() == 3);
    CHECK(s.final_distribution(r).ids[0] == 40);
}

TEST_CASE("parameters are validated at construction with a message naming them", "[filters][errors]")
{
    const auto nan = std::numeric_limits<double>::quiet_NaN();
    CHECK_THROWS_MATCHES(top_p(1.5), invalid_parameter, Message("top_p: p must be in (0, 1], got 1.5"));
    CHECK_THROWS_MATCHES(top_p(0.0), invalid_parameter, Message("top_p: p must be in (0, 1], got 0"));
    CHECK_THROWS_MATCHES(top_p(nan), invalid_parameter, Message("top_p: p must be in (0, 1], got nan"));
    CHECK_THROWS_MATCHES(temperature(-0.5), invalid_parameter,
                         Message("temperature: T must be finite and >= 0, got -0.5"));
    CHECK_THROWS_MATCHES(temperature(inf), invalid_parameter,
                         Message("temperature: T must be finite and >= 0, got inf"));
    CHECK_THROWS_AS(temperature(nan), invalid_parameter);
    CHECK_THROWS_MATCHES(top_k(-1), invalid_parameter, Message("top_k: k must be >= 0 (0 disables it), got -1"));
    CHECK_THROWS_MATCHES(min_p(1.01), invalid_parameter, Message("min_p: m must be in [0, 1], got 1.01"));
    CHECK_THROWS_MATCHES(min_p(-0.1), invalid_parameter, Message("min_p: m must be in [0, 1], got -0.1"));
    CHECK_THROWS_AS(min_p(nan), invalid_parameter);
    CHECK_NOTHROW(top_p(1.0));
    CHECK_NOTHROW(min_p(0.0));
    CHECK_NOTHROW(min_p(1.0));
    CHECK_NOTHROW(temperature(0.0));
    CHECK_NOTHROW(top_k(0));
}

TEMPLATE_TEST_CASE("no stage: the plain softmax, masked tokens excluded", "[filters]", float, double)
{
    check_probs<TestType>(dist(logits_of<TestType>({0.1, 0.2, 0.3, 0.4})), {{0, 0.1}, {1, 0.2}, {2, 0.3}, {3, 0.4}});
    check_probs<TestType>(dist(row<TestType>({0.0, -inf, 0.0, -inf})), {{0, 0.5}, {2, 0.5}});
    const auto d = chain{}.final_distribution(logits_of<TestType>({0.1, 0.2, 0.3, 0.4}));
    CHECK(d.ids == std::vector<token_id>{3, 2, 1, 0});  // probability desc
}

TEMPLATE_TEST_CASE("top_p: inclusive cut, renormalised", "[filters][top_p]", float, double)
{
    const auto l = logits_of<TestType>({0.1, 0.2, 0.3, 0.4});
    SECTION("0.7 keeps {.4, .3} as {.571429, .428571}")
    {
        check_probs<TestType>(dist(l, top_p{0.7}), {{3, 0.4 / 0.7}, {2, 0.3 / 0.7}});
    }
    SECTION("0.5: the token that crosses p is kept")
    {
        check_probs<TestType>(dist(l, top_p{0.5}), {{3, 0.4 / 0.7}, {2, 0.3 / 0.7}});
    }
    SECTION("0.35: the top token alone")
    {
        check_probs<TestType>(dist(l, top_p{0.35}), {{3, 1.0}});
    }
    SECTION("a confident step keeps its top token, never an empty set")
    {
        const auto confident = row<TestType>({0.0, 12.0, 0.0, 0.0});
        check_probs<TestType>(dist(confident, top_p{0.9}), {{1, 1.0}});
        check_probs<TestType>(dist(confident, top_p{1e-9}), {{1, 1.0}});
    }
    SECTION("mass exactly at p stops there; ties at the cut go to lower ids")
    {
        // Four equal logits: weights exactly 1, Z exactly 4.
        const auto flat = row<TestType>({2.0, 2.0, 2.0, 2.0});
        check_probs<TestType>(dist(flat, top_p{0.5}), {{0, 0.5}, {1, 0.5}});
        check_probs<TestType>(dist(flat, top_p{0.25}), {{0, 1.0}});
        check_probs<TestType>(dist(flat, top_p{0.2500001}), {{0, 0.5}, {1, 0.5}});
    }
    SECTION("p == 1 keeps all")
    {
        check_probs<TestType>(dist(l, top_p{1.0}), {{0, 0.1}, {1, 0.2}, {2, 0.3}, {3, 0.4}});
    }
}

TEMPLATE_TEST_CASE("top_k: selection of the K best, ties to lower ids", "[filters][top_k]", float, double)
{
    const auto l = logits_of<TestType>({0.1, 0.2, 0.3, 0.4});
    check_probs<TestType>(dist(l, top_k{2}), {{3, 0.4 / 0.7}, {2, 0.3 / 0.7}});
    check_probs<TestType>(dist(l, top_k{1}), {{3, 1.0}});
    CHECK(dist(l, top_k{0}).size() == 4);
    CHECK(dist(l, top_k{4}).size() == 4);
    CHECK(dist(l, top_k{1000}).size() == 4);

    const auto tied = row<TestType>({1.0, 2.0, 2.0, 2.0, 0.0});
    check_probs<TestType>(dist(tied, top_k{2}), {{1, 0.5}, {2, 0.5}});
    const auto masked = row<TestType>({-inf, 1.0, -inf, 1.0});
    check_probs<TestType>(dist(masked, top_k{3}), {{1, 0.5}, {3, 0.5}});
}

TEMPLATE_TEST_CASE("temperature: scales, 0 is greedy, never changes the top-k set", "[filters][temperature]", float,
                   double)
{
    const auto l = logits_of<TestType>({0.1, 0.2, 0.3, 0.4});
    SECTION("T = 2 gives p^(1/2) renormalised; T = 0.5 gives p^2")
    {
        const double z2 = std::sqrt(0.1) + std::sqrt(0.2) + std::sqrt(0.3) + std::sqrt(0.4);
        check_probs<TestType>(dist(l, temperature{2.0}), {{0, std::sqrt(0.1) / z2},
                                                          {1, std::sqrt(0.2) / z2},
                                                          {2, std::sqrt(0.3) / z2},
                                                          {3, std::sqrt(0.4) / z2}});
        const double zh = 0.01 + 0.04 + 0.09 + 0.16;
        check_probs<TestType>(dist(l, temperature{0.5}), {{0, 0.01 / zh}, {1, 0.04 / zh}, {2, 0.09 / zh}, {3, 0.16 / zh}});
    }
    SECTION("T = 0 keeps the argmax, ties to the lowest id, probability exactly 1")
    {
        CHECK(dist(l, temperature{0.0}) == std::map<token_id, double>{{3, 1.0}});
        CHECK(dist(row<TestType>({1.0, 3.0, 3.0, -inf}), temperature{0.0}) == std::map<token_id, double>{{1, 1.0}});
        CHECK(dist(l, temperature{0.0}, top_p{0.1}, min_p{0.9}) == std::map<token_id, double>{{3, 1.0}});
    }
    SECTION("tiny T is the limit: the other weights underflow to 0")
    {
        const auto d = dist(row<TestType>({0.0, 1.0, 0.5}), temperature{1e-3});
        CHECK(d.at(1) == 1.0);
        CHECK(d.at(0) == 0.0);
        const auto subnormal = dist(row<TestType>({0.0, 1.0}), temperature{1e-310});  // 1/T overflows
        CHECK(subnormal.at(1) == 1.0);
    }
    SECTION("the top-k set is the same at every T; the top-p set is not")
    {
        const auto r = test_helpers::random_row<TestType>(1000, 5);
        std::map<token_id, double> base = dist(r, top_k{40});
        for (const double t : {0.1, 0.5, 0.8, 1.0, 1.5, 4.0})
        {
            const auto d = dist(r, temperature{t}, top_k{40});
            REQUIRE(d.size() == 40);
            for (const auto& kv : base)
            {
                CHECK(d.count(kv.first) == 1);
            }
        }
        const auto sharp = dist(r, temperature{0.5}, top_p{0.9}).size();
        const auto plain = dist(r, top_p{0.9}).size();
        const auto flat = dist(r, temperature{2.0}, top_p{0.9}).size();
        CHECK(sharp < plain);
        CHECK(plain < flat);
    }
}

TEMPLATE_TEST_CASE("min_p: p >= M * p_max, decided in logit space", "[filters][min_p]", float, double)
{
    const auto l = logits_of<TestType>({0.1, 0.2, 0.3, 0.4});
    check_probs<TestType>(dist(l, min_p{0.6}), {{3, 0.4 / 0.7}, {2, 0.3 / 0.7}});
    check_probs<TestType>(dist(l, min_p{0.45}), {{3, 0.4 / 0.9}, {2, 0.3 / 0.9}, {1, 0.2 / 0.9}});
    CHECK(dist(l, min_p{0.0}).size() == 4);
    CHECK(dist(l, min_p{1.0}) == std::map<token_id, double>{{3, 1.0}});
    check_probs<TestType>(dist(row<TestType>({1.0, 3.0, 3.0}), min_p{1.0}), {{1, 0.5}, {2, 0.5}});
    // After temperature 2 the ratios are square roots: sqrt(.1/.4) = .5 passes .45.
    CHECK(dist(l, temperature{2.0}, min_p{0.45}).size() == 4);
    CHECK(dist(l, min_p{0.45}, temperature{2.0}).size() == 3);
    // On a sparse set too.
    check_probs<TestType>(dist(l, top_k{3}, min_p{0.6}), {{3, 0.4 / 0.7}, {2, 0.3 / 0.7}});
}

TEMPLATE_TEST_CASE("stage order matters and follows the documented semantics", "[filters]", float, double)
{
    const auto l = logits_of<TestType>({0.05, 0.1, 0.15, 0.3, 0.4});
    // top_p 0.6 first: {.4, .3} (mass .7); then top_k 1: {.4}.
    CHECK(dist(l, top_p{0.6}, top_k{1}).size() == 1);
    // top_k 3 first: {.4, .3, .15} renormalised to {.47, .35, .18}; top_p .6 keeps {.4, .3}.
    check_probs<TestType>(dist(l, top_k{3}, top_p{0.6}), {{4, 0.4 / 0.7}, {3, 0.3 / 0.7}});
    // top_k 3 then top_p .4: .47 alone reaches .4.
    check_probs<TestType>(dist(l, top_k{3}, top_p{0.4}), {{4, 1.0}});
}

TEMPLATE_TEST_CASE("every filter equals the plain sort-based reference on random rows", "[filters][reference]",
                   float, double)
{
    for (std::uint64_t seed = 1; seed <= 24; ++seed)
    {
        const bool ties = seed % 3 == 0;
        const double masked = seed % 4 == 0 ? 0.3 : 0.0;
        const std::size_t vocab = seed % 2 ? 3000 : 257;
        const auto r = test_helpers::random_row<TestType>(vocab, seed, 3.0, ties, masked);
        const double t = 0.3 + 0.1 * double(seed % 9);
        const double p = 0.5 + 0.02 * double(seed);
        const std::size_t k = 1 + seed * 7;
        const double m = 0.001 * double(seed);
        INFO("seed " << seed);

        const auto check = [&](const std::map<token_id, double>& got, const test_helpers::reference& want) {
            const auto w = want.as_map();
            REQUIRE(got.size() == w.size());
            for (const auto& [id, prob] : w)
            {
                REQUIRE(got.count(id) == 1);
                CHECK_THAT(got.at(id), WithinAbs(prob, tol<TestType>));
            }
        };
        check(dist(r, temperature{t}, top_p{p}), test_helpers::reference(r).temperature(t).top_p(p));
        check(dist(r, top_k{std::int64_t(k)}), test_helpers::reference(r).top_k(k));
        check(dist(r, temperature{t}, min_p{m}), test_helpers::reference(r).temperature(t).min_p(m));
        check(dist(r, temperature{t}, top_k{std::int64_t(k)}, top_p{p}, min_p{m}),
              test_helpers::reference(r).temperature(t).top_k(k).top_p(p).min_p(m));
        check(dist(r, min_p{m}, top_p{p}, temperature{t}, top_k{std::int64_t(k)}),
              test_helpers::reference(r).min_p(m).top_p(p).temperature(t).top_k(k));
    }
}

TEST_CASE("top_p accumulates in double: exact nucleus on a 128k row", "[filters][top_p]")
{
    // The failure the issue quotes: a float running sum drifts by tens of
    // tokens on a 128k row. The nucleus here must equal the one computed in
    // long double from the sorted probabilities.
    const std::size_t vocab = 128256;
    const auto r = test_helpers::random_row<float>(vocab, 2025, 2.0);
    const double p = 0.95;
    chain c{top_p{p}};
    const std::size_t got = c.final_distribution(r).ids.size();

    std::vector<long double> w;
    const float mx = xt::amax(r)();
    for (const float x : r)
    {
        w.push_back(std::exp((long double)x - (long double)mx));
    }
    std::sort(w.rbegin(), w.rend());
    const long double z = std::accumulate(w.begin(), w.end(), 0.0L);
    long double cum = 0.0L;
    std::size_t exact = 0;
    while (cum < (long double)p * z)
    {
        cum += w[exact++];
    }
    float fcum = 0.0f;
    std::size_t float_count = 0;
    while (fcum < float(p))
    {
        fcum += float(w[float_count++] / z);
    }
    CHECK(got == exact);
    CHECK(exact > 10000);
    CHECK(float_count != exact);  // why the issue asks for double
}

TEMPLATE_TEST_CASE("the fast paths keep exactly the sets of the exact sort-based reference",
                   "[filters][reference][fast]", float, double)
{
    // The plain algorithm: every candidate sorted by rank, the cuts decided
    // in long double on the row's own values (helpers.hpp); against it the
    // SIMD selection of top-k, the bucketed top-p and the vectorised min-p
    // must agree token for token, ties at the cut and masked tokens included.
    for (std::uint64_t seed = 100; seed < 160; ++seed)
    {
        const bool ties = seed % 3 == 0;
        const std::size_t vocab = seed % 2 ? 20011 : 4096;
        const auto r = test_helpers::random_row<TestType>(vocab, seed, 1.0 + double(seed % 4), ties, seed % 5 == 0 ? 0.4 : 0.0);
        const double t = 0.4 + 0.15 * double(seed % 7);
        const double ps[] = {0.3, 0.75, 0.9, 0.99, 0.999};
        const double p = ps[seed % 5];
        const std::int64_t k = std::int64_t(1 + seed % 200);
        const double m = 0.001 * double(seed % 50);
        INFO("seed " << seed << " p " << p << " k " << k << " m " << m);

        const auto ids = [](const test_helpers::reference& ref) {
            std::set<token_id> s;
            for (const auto& x : ref.kept)
            {
                s.insert(x.second);
            }
            return s;
        };
        const auto kept = [](const distribution& d) { return std::set<token_id>(d.ids.begin(), d.ids.end()); };
        const auto ref = [&] {
            test_helpers::reference x(r);
            x.temperature(t);
            return x;
        };
        auto nucleus = ref();
        nucleus.top_p(p);
        CHECK_FALSE(nucleus.near);
        CHECK(kept(chain{temperature{t}, top_p{p}}.final_distribution(r)) == ids(nucleus));
        CHECK(kept(chain{temperature{t}, top_k{k}}.final_distribution(r)) == ids(ref().top_k(std::size_t(k))));
        if (m > 0.0)
        {
            auto above = ref();
            above.min_p(m);
            CHECK_FALSE(above.near);
            CHECK(kept(chain{temperature{t}, min_p{m}}.final_distribution(r)) == ids(above));
        }
    }
}

// --- Exact decisions (detail/exact.hpp, docs/semantics.md "Exact decisions") ---

namespace
{
    /// The kept ids of a chain's distribution, as a set.
    std::set<token_id> kept_ids(const distribution& d) { return std::set<token_id>(d.ids.begin(), d.ids.end()); }

    /// The ids a reference keeps, as a set.
    std::set<token_id> kept_ids(const test_helpers::reference& r)
    {
        std::set<token_id> s;
        for (const auto& x : r.kept)
        {
            s.insert(x.second);
        }
        return s;
    }

    detail::exact_counters counted(const std::function<void()>& f)
    {
        detail::counters() = {};
        f();
        return detail::counters();
    }
}

TEMPLATE_TEST_CASE("top_p decides exactly: transformers' row, {.1, .2, .3, .4}", "[filters][exact]", float, double)
{
    // transformers' TopPLogitsWarper case: logits log([0.3, 0.1, 0.1, 0.5]),
    // P = 0.8. From float32 logits the exact mass of the top two is
    // 0.8000000042 >= 0.8 (the double 0.80000000000000004): two kept, as
    // transformers expects (the float weights give 0.79999999 and kept three
    // before). From float64 logits it is 0.79999999999999995842 < 0.8: three.
    const auto l = logits_of<TestType>({0.3, 0.1, 0.1, 0.5});
    const bool is_float = std::is_same<TestType, float>::value;
    const auto tiers = counted([&] {
        CHECK(kept_ids(chain{top_p{0.8}}.final_distribution(l)) ==
              (is_float ? std::set<token_id>{3, 0} : std::set<token_id>{3, 0, 1}));
    });
    CHECK(tiers.tier2 >= 1);  // the float bounds (1e-6) cannot separate a gap of 4e-9...
    CHECK((tiers.tier3 == 0 || !is_float));  // ...double's can
    CHECK(tiers.residual == 0);
    test_helpers::reference ref(l);
    ref.top_p(0.8);
    CHECK_FALSE(ref.near);
    CHECK(ref.kept.size() == (is_float ? 2u : 3u));

    // {.1, .2, .3, .4} at 0.7: the exact masses of {.4, .3} are 0.70000000198
    // (float logits) and 0.69999999999999996811 (double), both >= the double
    // 0.7 = 0.69999999999999995559: {.4, .3} kept in both, with no slack.
    const auto h = logits_of<TestType>({0.1, 0.2, 0.3, 0.4});
    CHECK(kept_ids(chain{top_p{0.7}}.final_distribution(h)) == std::set<token_id>{3, 2});
    // Just above that mass, three.
    CHECK(kept_ids(chain{top_p{is_float ? 0.70000001 : 0.70000000000000007}}.final_distribution(h)) ==
          std::set<token_id>{3, 2, 1});
}

TEMPLATE_TEST_CASE("top_p decides exactly on rows k/100 with P the exact mass of the top j", "[filters][exact]",
                   float, double)
{
    // P_j = the exact mass of the top j tokens (long double, on the row's own
    // T logits), rounded to double, and its two neighbours. The neighbours are
    // half an ulp or more away from the mass: j and j + 1 tokens, always.
    // The rounded value itself is as the long-double reference says, where
    // long double can call it (it can in nearly every case).
    std::size_t checked = 0;
    std::size_t uncalled = 0;
    const auto tiers = counted([&] {
        for (std::uint64_t seed = 1; seed <= 40; ++seed)
        {
            philox4x32 rng(seed, 11);
            const std::size_t n = 3 + std::size_t(uniform01(rng) * 12.0);
            std::vector<int> k(n, 1);  // n parts of 100, each >= 1
            for (int left = 100 - int(n); left > 0; --left)
            {
                ++k[std::size_t(uniform01(rng) * double(n))];
            }
            xt::xtensor<TestType, 1> r = xt::empty<TestType>({n});
            for (std::size_t i = 0; i < n; ++i)
            {
                r(i) = TestType(std::log(k[i] / 100.0));
            }
            test_helpers::reference base(r);
            long double z;
            const auto w = base.weights(z);
            long double cum = 0.0L;
            for (std::size_t j = 1; j < n; ++j)
            {
                cum += w[j - 1];
                if (w[j] == w[j - 1])
                {
                    continue;  // a tie group: its prefix masses are shared
                }
                const double p = double(cum / z);
                const double below = std::nextafter(p, 0.0);
                const double above = std::nextafter(p, 1.0);
                INFO("seed " << seed << " j " << j << " P " << p);
                for (const double q : {below, p, above})
                {
                    if (q <= 0.0 || q >= 1.0)
                    {
                        continue;
                    }
                    test_helpers::reference ref(r);
                    ref.top_p(q);
                    const auto got = chain{top_p{q}}.final_distribution(r).ids.size();
                    if (q == below)
                    {
                        CHECK(got == j);
                    }
                    if (q == above)
                    {
                        CHECK(got == j + 1);
                    }
                    if (ref.near)
                    {
                        ++uncalled;
                        continue;
                    }
                    CHECK(got == ref.kept.size());
                    ++checked;
                }
            }
        }
    });
    INFO("checked " << checked << ", uncalled " << uncalled);
    CHECK(checked > 500);
    CHECK(uncalled * 10 < checked);
    CHECK(tiers.tier3 > 0);  // P within 2^-53 of the mass: past double's bound
    CHECK(tiers.residual == 0);
}

TEST_CASE("top_p on large float rows: P at fractions of the crossing token's weight", "[filters][exact]")
{
    // Rows like the benchmark's (N(0, 3.75^2), 50k and 128k tokens), P put
    // a fraction phi of the way through the weight of token j of the rank
    // (long double): exactly j tokens. Mid fractions are decided by the
    // float path's bound (sum W|t| from the buckets and the rest's entropy),
    // fractions near 0 or 1 by tier 2.
    for (const std::size_t vocab : {std::size_t(50257), std::size_t(128256)})
    {
        const auto r = test_helpers::random_row<float>(vocab, 777 + vocab, 3.75);
        test_helpers::reference base(r);
        long double z;
        const auto w = base.weights(z);
        REQUIRE(std::is_sorted(w.rbegin(), w.rend()));
        std::vector<long double> cum(w.size() + 1, 0.0L);
        for (std::size_t i = 0; i < w.size(); ++i)
        {
            cum[i + 1] = cum[i] + w[i];
        }
        std::size_t tier1 = 0;
        for (const double target : {0.5, 0.9, 0.95, 0.99})
        {
            const std::size_t j = std::size_t(std::lower_bound(cum.begin(), cum.end(), (long double)target * z) - cum.begin());
            for (const long double phi : {0.001L, 0.1L, 0.3L, 0.5L, 0.7L, 0.9L, 0.999L})
            {
                const double p = double((cum[j - 1] + phi * w[j - 1]) / z);
                const auto tiers = counted([&] { CHECK(chain{top_p{p}}.final_distribution(r).ids.size() == j); });
                tier1 += tiers.tier2 == 0;
            }
        }
        CHECK(tier1 > 0);
    }
}

TEMPLATE_TEST_CASE("top_p on a tied row with P·N integral: decided by counting", "[filters][exact]", float, double)
{
    // Every weight is 1: C_k = k, Z = N, and C_k = P·Z exactly when k = P·N
    // — the one case where exact equality happens (docs/semantics.md).
    const auto r = row<TestType>({2, 2, 2, 2, 2, 2, 2, 2});
    const auto tiers = counted([&] {
        CHECK(chain{top_p{0.25}}.final_distribution(r).ids == std::vector<token_id>{0, 1});
        CHECK(chain{top_p{0.375}}.final_distribution(r).ids == std::vector<token_id>{0, 1, 2});
        CHECK(chain{top_p{0.5}}.final_distribution(r).ids.size() == 4);
    });
    CHECK(tiers.tier3 == 3);
    CHECK(tiers.residual == 0);
    CHECK(chain{top_p{std::nextafter(0.25, 1.0)}}.final_distribution(r).ids.size() == 3);
    CHECK(chain{top_p{std::nextafter(0.25, 0.0)}}.final_distribution(r).ids.size() == 2);
    // 0.3 is below 3/10: 0.3·10 < 3, so 3 tokens reach it.
    const auto ten = row<TestType>({1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
    CHECK(chain{top_p{0.3}}.final_distribution(ten).ids.size() == 3);
    CHECK(chain{top_p{0.7}}.final_distribution(ten).ids.size() == 7);  // 0.7 < 7/10 too
    CHECK(chain{top_p{0.1}}.final_distribution(ten).ids.size() == 2);  // 0.1 > 1/10: one token falls short
}

TEMPLATE_TEST_CASE("min_p decides exactly at p_i = M·p_max", "[filters][exact]", float, double)
{
    // The neighbours of ln M (times T) among the T values: the one above is
    // kept, the one below dropped, at temperature 1 and 1/2 (S = 2).
    using L = std::numeric_limits<TestType>;
    for (const double m : {0.05, 0.1, 0.3, 1.0 / 3.0, 0.9, 0.999})
    {
        for (const double t : {1.0, 0.5})
        {
            const long double l = std::log((long double)m) * (long double)t;
            TestType above = TestType(l);
            while ((long double)above < l)
            {
                above = std::nextafter(above, L::infinity());
            }
            TestType below = std::nextafter(above, -L::infinity());
            while ((long double)below >= l)
            {
                below = std::nextafter(below, -L::infinity());
            }
            INFO("M " << m << " T " << t);
            xt::xtensor<TestType, 1> r = xt::empty<TestType>({4});
            r(0) = 0;
            r(1) = below;
            r(2) = above;
            r(3) = TestType(-20);
            const auto tiers = counted([&] {
                CHECK(kept_ids(chain{temperature{t}, min_p{m}}.final_distribution(r)) == std::set<token_id>{0, 2});
            });
            CHECK(tiers.tier2 >= 1);  // a gap of one ulp: past the fast path's bound
            CHECK(tiers.residual == 0);
            if (std::is_same<TestType, double>::value)
            {
                CHECK(tiers.tier3 >= 1);  // past double's too
            }
            // A list (after top-k) decides the same.
            CHECK(kept_ids(chain{temperature{t}, top_k{3}, min_p{m}}.final_distribution(r)) == std::set<token_id>{0, 2});
        }
    }
    // M = 1: exactly the tokens tied with the max.
    const auto r = row<TestType>({1, 3, 3, std::nextafter(TestType(3), TestType(0))});
    CHECK(kept_ids(chain{min_p{1.0}}.final_distribution(r)) == std::set<token_id>{1, 2});
}

TEST_CASE("a scale float cannot hold: the exact tiers decide, not a clamped fast path", "[filters][exact]")
{
    // Found by review. Temperature 1e-39: S = 1e39 is beyond float, so
    // scale() is clamped; the exact d of the second token is -1 (p / p_max =
    // e^-1 = 0.37, p_max = 0.731), the clamped one -0.34.
    const auto r = test_helpers::row<float>({0.0, -1e-39});
    CHECK(kept_ids(chain{temperature{1e-39}, min_p{0.5}}.final_distribution(r)) == std::set<token_id>{0});
    CHECK(kept_ids(chain{temperature{1e-39}, min_p{0.3}}.final_distribution(r)) == std::set<token_id>{0, 1});
    CHECK(kept_ids(chain{temperature{1e-39}, top_p{0.7}}.final_distribution(r)) == std::set<token_id>{0});
    CHECK(kept_ids(chain{temperature{1e-39}, top_p{0.75}}.final_distribution(r)) == std::set<token_id>{0, 1});
    CHECK(kept_ids(chain{temperature{1e-39}, epsilon{0.3}}.final_distribution(r)) == std::set<token_id>{0});
}

TEMPLATE_TEST_CASE("min_keep: every truncating filter keeps at least min_keep", "[filters][exact][min_keep]", float,
                   double)
{
    const auto l = logits_of<TestType>({0.05, 0.1, 0.15, 0.3, 0.4});
    CHECK(kept_ids(chain{top_k{1, 3}}.final_distribution(l)) == std::set<token_id>{4, 3, 2});  // max(k, min_keep)
    CHECK(kept_ids(chain{top_k{4, 2}}.final_distribution(l)).size() == 4);
    CHECK(kept_ids(chain{top_k{0, 2}}.final_distribution(l)).size() == 5);  // 0 still disables
    CHECK(kept_ids(chain{top_p{0.1, 3}}.final_distribution(l)) == std::set<token_id>{4, 3, 2});
    CHECK(kept_ids(chain{top_p{0.5, 1}}.final_distribution(l)) == std::set<token_id>{4, 3});
    CHECK(kept_ids(chain{top_p{0.5, 0}}.final_distribution(l)) == std::set<token_id>{4, 3});  // 0 counts as 1
    CHECK(kept_ids(chain{min_p{0.9, 2}}.final_distribution(l)) == std::set<token_id>{4, 3});
    CHECK(kept_ids(chain{min_p{0.9}}.final_distribution(l)) == std::set<token_id>{4});
    CHECK(kept_ids(chain{epsilon{0.35, 4}}.final_distribution(l)).size() == 4);
    CHECK(kept_ids(chain{eta{0.5, 5}}.final_distribution(l)).size() == 5);
    CHECK(kept_ids(chain{top_p{0.1, 99}}.final_distribution(l)).size() == 5);  // more than there are: all
    // A fused top-k (load(row, k)) respects it too.
    candidates<TestType> c;
    c.load(l, 2);
    top_p(0.1, 2).apply(c);
    CHECK(c.size() == 2);
    // The run-time sampler passes sampling_params::min_keep to every filter.
    sampling_params p;
    p.min_keep = 3;
    p.top_k = 1;
    CHECK(sampler(p).final_distribution(l).ids.size() == 3);
    p.top_k = 0;
    p.top_p = 0.1;
    CHECK(sampler(p).final_distribution(l).ids.size() == 3);
    p.top_p = 1.0;
    p.epsilon = 0.35;
    CHECK(sampler(p).final_distribution(l).ids.size() == 3);
}

TEMPLATE_TEST_CASE("epsilon and eta: transformers' cases", "[filters][exact][epsilon][eta]", float, double)
{
    // EpsilonLogitsWarper(0.1): keep p >= 0.1.
    CHECK(kept_ids(chain{epsilon{0.1}}.final_distribution(logits_of<TestType>({0.87, 0.099, 0.001, 0.03}))) ==
          std::set<token_id>{0});
    check_probs<TestType>(dist(logits_of<TestType>({0.4, 0.299, 0.101, 0.2}), epsilon{0.1}),
                          {{0, 0.4}, {1, 0.299}, {2, 0.101}, {3, 0.2}});
    // Ramps arange(10) - 5, the second times 100: epsilon 0.05 with
    // min_keep 2 keeps 3 and 2; eta 0.1 with min_keep 2 keeps 2 and 2.
    xt::xtensor<TestType, 1> ramp = xt::empty<TestType>({10});
    xt::xtensor<TestType, 1> steep = xt::empty<TestType>({10});
    for (std::size_t i = 0; i < 10; ++i)
    {
        ramp(i) = TestType(double(i) - 5.0);
        steep(i) = TestType((double(i) - 5.0) * 100.0);
    }
    CHECK(chain{epsilon{0.05, 2}}.final_distribution(ramp).ids.size() == 3);
    CHECK(chain{epsilon{0.05, 2}}.final_distribution(steep).ids.size() == 2);
    CHECK(chain{eta{0.1, 2}}.final_distribution(ramp).ids.size() == 2);
    CHECK(chain{eta{0.1, 2}}.final_distribution(steep).ids.size() == 2);
    // EtaLogitsWarper(0.0625): cut min(0.0625, 0.25 e^-H) = 0.0625 on both
    // rows (0.25 e^-H is 0.1320 and 0.1644): [0, .1, .8, .1] keeps all three
    // (log 0 = -inf, masked); [.01, .04, .9, .05] keeps .9 alone.
    CHECK(kept_ids(chain{eta{0.0625}}.final_distribution(row<TestType>({-inf, std::log(0.1), std::log(0.8), std::log(0.1)}))) ==
          std::set<token_id>{1, 2, 3});
    CHECK(kept_ids(chain{eta{0.0625}}.final_distribution(logits_of<TestType>({0.01, 0.04, 0.9, 0.05}))) ==
          std::set<token_id>{2});
    // Where e^-H decides: a flat row of 100 tokens and one of weight 50
    // (H = 2.61 nats): the cut is 0.9^0.5 e^-H = 0.0698 < 0.9.
    std::vector<double> probs(101, 0.5 / 100.0);
    probs[0] = 0.5;
    xt::xtensor<TestType, 1> flat = xt::empty<TestType>({101});
    for (std::size_t i = 0; i < 101; ++i)
    {
        flat(i) = TestType(std::log(probs[i]));
    }
    CHECK(kept_ids(chain{eta{0.9}}.final_distribution(flat)) == std::set<token_id>{0});
    // Validation names the stage, the parameter, the range and the value.
    CHECK_THROWS_MATCHES(epsilon{1.0}, invalid_parameter,
                         Message("epsilon: e must be in [0, 1) (0 disables it), got 1"));
    CHECK_THROWS_MATCHES(epsilon{-0.5}, invalid_parameter,
                         Message("epsilon: e must be in [0, 1) (0 disables it), got -0.5"));
    CHECK_THROWS_MATCHES(eta{std::nan("")}, invalid_parameter,
                         Message("eta: h must be in [0, 1) (0 disables it), got nan"));
    CHECK(kept_ids(chain{epsilon{0.0}, eta{0.0}}.final_distribution(flat)).size() == 101);  // 0 disables
}

TEMPLATE_TEST_CASE("epsilon and eta agree with the exact sort-based reference", "[filters][exact][epsilon][eta]",
                   float, double)
{
    for (std::uint64_t seed = 200; seed < 260; ++seed)
    {
        const auto [r, t, keep] = seeded<TestType>(seed, 300);
        const double e = 1e-5 * double(1 + seed % 300);
        const double h = 1e-4 * double(1 + seed % 50);
        INFO("seed " << seed << " e " << e << " h " << h);
        test_helpers::reference a(r);
        a.temperature(t).epsilon(e, keep);
        CHECK_FALSE(a.near);
        CHECK(kept_ids(chain{temperature{t}, epsilon{e, keep}}.final_distribution(r)) == kept_ids(a));
        test_helpers::reference b(r);
        b.temperature(t).eta(h, keep);
        CHECK_FALSE(b.near);
        CHECK(kept_ids(chain{temperature{t}, eta{h, keep}}.final_distribution(r)) == kept_ids(b));
        // On a list (after top-k) too.
        test_helpers::reference c(r);
        c.temperature(t).top_k(50).eta(h, keep);
        CHECK(kept_ids(chain{temperature{t}, top_k{50}, eta{h, keep}}.final_distribution(r)) == kept_ids(c));
    }
}

TEMPLATE_TEST_CASE("p_less: llama.cpp's case, ties, exact at its level, min_keep, the sampler", "[filters][exact][p_less]",
                   float, double)
{
    // llama.cpp's test_p_less: {.1, .15, .2, .25, .3} has sum p^2 = 0.225:
    // .25 and .3 pass, renormalised to 5/11 and 6/11.
    const auto five = logits_of<TestType>({0.10, 0.15, 0.20, 0.25, 0.30});
    check_probs<TestType>(dist(five, p_less{}), {{3, 0.25 / 0.55}, {4, 0.30 / 0.55}});
    // A tied set: p_i = sum p^2 = 1/n exactly, every token kept.
    CHECK(kept_ids(chain{p_less{}}.final_distribution(logits_of<TestType>({0.2, 0.2, 0.2, 0.2, 0.2}))).size() == 5);
    // Two tokens: the less probable passes only when tied (p1 >= p0^2 + p1^2
    // iff p1 >= p0), however small the gap; the exact tiers decide it.
    const TestType gap = std::is_same<TestType, float>::value ? TestType(1e-6) : TestType(1e-14);
    CHECK(kept_ids(chain{p_less{}}.final_distribution(row<TestType>({0, -gap}))) == std::set<token_id>{0});
    CHECK(kept_ids(chain{p_less{}}.final_distribution(row<TestType>({-gap, 0}))) == std::set<token_id>{1});
    CHECK(kept_ids(chain{p_less{}}.final_distribution(row<TestType>({0, 0}))) == std::set<token_id>{0, 1});
    // Three tied at the top and one a hair below them (a masked token
    // between): sum p^2 is just above 1/4 and the fourth's p just below it.
    const TestType inf = std::numeric_limits<TestType>::infinity();
    CHECK(kept_ids(chain{p_less{}}.final_distribution(row<TestType>({0, 0, -inf, 0, -gap}))) ==
          std::set<token_id>{0, 1, 3});
    // min_keep, and a temperature: a flatter distribution keeps more.
    CHECK(chain{p_less{3}}.final_distribution(five).ids.size() == 3);
    CHECK(chain{temperature{100.0}, p_less{}}.final_distribution(five).ids.size() == 3);
    // The run-time sampler: off by default, on with p_less, in the default order after min_p.
    sampling_params params;
    CHECK(sampler(params).final_distribution(five).ids.size() == 5);
    params.p_less = true;
    CHECK(sampler(params).final_distribution(five).ids == chain{p_less{}}.final_distribution(five).ids);
    params.order = parse_stage_order("p_less;temperature");
    params.temperature = 100.0;
    CHECK(sampler(params).final_distribution(five).ids.size() == 2);  // before the temperature
}

TEMPLATE_TEST_CASE("top_h: transformers' cases, ties, the 100 best, a dominated row, min_keep, the sampler",
                   "[filters][exact][top_h]", float, double)
{
    const TestType inf = std::numeric_limits<TestType>::infinity();
    const auto keeps = [](const xt::xtensor<TestType, 1>& r, double h) {
        return kept_ids(chain{top_h{h}}.final_distribution(r));
    };
    // test_logits_process.py's TopH cases.
    CHECK(keeps(logits_of<TestType>({0.97, 0.01, 0.01, 0.01}), 0.3) == std::set<token_id>{0});
    CHECK(keeps(logits_of<TestType>({0.4, 0.3, 0.2, 0.1}), 0.7) == std::set<token_id>{0, 1});
    CHECK(keeps(logits_of<TestType>({0.25, 0.25, 0.25, 0.25}), 1.0).size() == 4);
    CHECK(keeps(row<TestType>({std::log(0.75), std::log(0.25), -inf, -inf}), 0.4) == std::set<token_id>{0});
    // Four tied tokens at 0.5: the first two sum to exactly half of E, kept
    // (inclusive; decided as equal after double-double).
    CHECK(keeps(row<TestType>({0, 0, 0, 0}), 0.5) == std::set<token_id>{0, 1});
    // Only the 100 best count: 150 tied tokens at H = 1 keep the 100 lowest ids.
    const xt::xtensor<TestType, 1> flat = xt::zeros<TestType>({150});
    const auto d = chain{top_h{1.0}}.final_distribution(flat);
    CHECK(d.ids.size() == 100);
    CHECK(*std::max_element(d.ids.begin(), d.ids.end()) == 99);
    // One token dominates: at temperature 0.01 ten tokens 800 nats below the
    // best have q = e^-800 / Z (0 in double), yet exactly the first two
    // terms sum to 810/8010 of E: H = 0.1 keeps one, 0.2 two, 0.25 three.
    xt::xtensor<TestType, 1> dominated = xt::full_like(xt::xtensor<TestType, 1>::from_shape({11}), TestType(-8));
    dominated(0) = 0;
    CHECK(kept_ids(chain{temperature{0.01}, top_h{0.1}}.final_distribution(dominated)).size() == 1);
    CHECK(kept_ids(chain{temperature{0.01}, top_h{0.2}}.final_distribution(dominated)) == std::set<token_id>{0, 1});
    CHECK(kept_ids(chain{temperature{0.01}, top_h{0.25}}.final_distribution(dominated)).size() == 3);
    // Where the exact sides differ by less than double-double resolves, the
    // exact sum of its terms decides: {1, 0, 0} at temperature 1e-30 has
    // E's first term 2e-30 of the others, so at H = 0.5 the second token's
    // prefix exceeds H·E by half of it.
    const auto at = [](std::initializer_list<double> v, double t, double h) {
        return chain{temperature{t}, top_h{h}}.final_distribution(row<TestType>(v)).ids.size();
    };
    CHECK(at({1, 0, 0}, 1e-30, 0.5) == 1);
    CHECK(at({1, 0, 0, 0}, 1e-30, 0.5) == 2);
    if (std::is_same<TestType, double>::value)
    {
        // A token whose gap overflows (its weight is 0, its term too); gaps
        // that overflow the terms unless scaled (G = 1e301, 1e308).
        CHECK(at({0, 0, -1.7e308}, 0.5, 0.3) == 1);
        CHECK(at({1, 0, 0, 0}, 1e-301, 2.0 / 3.0) == 2);
        CHECK(at({1e308, 0, 0}, 1.0, 0.5) == 1);
        CHECK(at({1e308, 0, 0, -1e300}, 1.0, 0.5) == 1);
    }

    // min_keep; 0 disables; validation names the stage.
    CHECK(chain{top_h{0.3, 3}}.final_distribution(logits_of<TestType>({0.97, 0.01, 0.01, 0.01})).ids.size() == 3);
    CHECK(keeps(logits_of<TestType>({0.97, 0.01, 0.01, 0.01}), 0.0).size() == 4);
    CHECK_THROWS_MATCHES(top_h{1.5}, invalid_parameter, Message("top_h: h must be in [0, 1] (0 disables it), got 1.5"));
    CHECK_THROWS_MATCHES(top_h{std::nan("")}, invalid_parameter,
                         Message("top_h: h must be in [0, 1] (0 disables it), got nan"));
    // The run-time sampler: top_h in sampling_params, in the default order.
    sampling_params params;
    params.top_h = 0.7;
    CHECK(sampler(params).final_distribution(logits_of<TestType>({0.4, 0.3, 0.2, 0.1})).ids.size() == 2);
}

TEMPLATE_TEST_CASE("p_less agrees with the exact sort-based reference", "[filters][exact][p_less]", float, double)
{
    for (std::uint64_t seed = 300; seed < 360; ++seed)
    {
        const auto [r, t, keep] = seeded<TestType>(seed, 300);
        INFO("seed " << seed);
        test_helpers::reference a(r);
        a.temperature(t).p_less(keep);
        CHECK_FALSE(a.near);
        CHECK(kept_ids(chain{temperature{t}, p_less{keep}}.final_distribution(r)) == kept_ids(a));
        // On a list (after top-k) too.
        test_helpers::reference b(r);
        b.temperature(t).top_k(50).p_less(keep);
        CHECK(kept_ids(chain{temperature{t}, top_k{50}, p_less{keep}}.final_distribution(r)) == kept_ids(b));
    }
}

TEMPLATE_TEST_CASE("top_h agrees with the exact sort-based reference", "[filters][exact][top_h]", float, double)
{
    for (std::uint64_t seed = 400; seed < 460; ++seed)
    {
        const auto [r, t, keep] = seeded<TestType>(seed, 60);
        const double h = double(1 + seed % 19) / 20.0;
        INFO("seed " << seed << " h " << h);
        for (const std::size_t k : {std::size_t(0), std::size_t(50)})  // a whole row, then a list after top-k
        {
            test_helpers::reference b(r);
            b.temperature(t).top_k(k).top_h(h, keep);
            CHECK_FALSE(b.near);
            CHECK(kept_ids(chain{temperature{t}, top_k{std::int64_t(k)}, top_h{h, keep}}.final_distribution(r)) == kept_ids(b));
        }
    }
}

TEMPLATE_TEST_CASE("top_k_top_p: FlashInfer's joint mode, both cuts on one distribution, the sampler, validation",
                   "[filters][exact][top_k_top_p]", float, double)
{
    const auto l = logits_of<TestType>({0.4, 0.3, 0.2, 0.1});
    const auto keeps = [&](std::int64_t k, double p, std::size_t keep = 1) {
        return kept_ids(chain{top_k_top_p{k, p, keep}}.final_distribution(l));
    };
    // K 2, P 0.5: top_p on the whole row keeps {.4, .3} (.4 < .5 <= .7), top_k
    // keeps the same two; in sequence top_p sees {4/7, 3/7} and keeps one.
    CHECK(keeps(2, 0.5) == std::set<token_id>{0, 1});
    CHECK(kept_ids(chain{top_k{2}, top_p{0.5}}.final_distribution(l)) == std::set<token_id>{0});
    // K 3, P 0.75: the nucleus is {.4, .3, .2} (.7 < .75 <= .9) here, {4/9, 3/9} in sequence.
    CHECK(keeps(3, 0.75) == std::set<token_id>{0, 1, 2});
    CHECK(kept_ids(chain{top_k{3}, top_p{0.75}}.final_distribution(l)) == std::set<token_id>{0, 1});
    // The shorter cut wins either way; each neutral value leaves the other alone.
    CHECK(keeps(1, 0.9) == std::set<token_id>{0});
    CHECK(keeps(4, 0.35) == std::set<token_id>{0});
    CHECK(keeps(0, 0.5) == std::set<token_id>{0, 1});
    CHECK(keeps(3, 1.0) == std::set<token_id>{0, 1, 2});
    CHECK(keeps(0, 1.0).size() == 4);
    // Renormalised over the intersection; min_keep holds for both cuts.
    check_probs<TestType>(dist(l, top_k_top_p{2, 0.5}), {{0, 0.4 / 0.7}, {1, 0.3 / 0.7}});
    CHECK(keeps(1, 0.1, 3) == std::set<token_id>{0, 1, 2});
    // Ties: both cuts split a tie group to the lower ids; keep_all keeps the
    // K-th's ties that the nucleus holds.
    const auto tied = row<TestType>({0, 1, 1, 1, 0});
    CHECK(kept_ids(chain{top_k_top_p{2, 0.9}}.final_distribution(tied)) == std::set<token_id>{1, 2});
    CHECK(kept_ids(chain{top_k_top_p{2, 0.9, 1, top_k_ties::keep_all}}.final_distribution(tied)) ==
          std::set<token_id>{1, 2, 3});
    CHECK(kept_ids(chain{top_k_top_p{2, 0.5, 1, top_k_ties::keep_all}}.final_distribution(tied)) ==
          std::set<token_id>{1, 2});
    // Validation names the parameter as top_k and top_p do.
    CHECK_THROWS_MATCHES(top_k_top_p(-1, 0.5), invalid_parameter,
                         Message("top_k: k must be >= 0 (0 disables it), got -1"));
    CHECK_THROWS_MATCHES(top_k_top_p(5, 0.0), invalid_parameter, Message("top_p: p must be in (0, 1], got 0"));
    // The run-time sampler: top_k_top_p_joint turns top_k and top_p into this stage.
    sampling_params params;
    params.top_k = 2;
    params.top_p = 0.5;
    CHECK(sampler(params).final_distribution(l).ids.size() == 1);
    params.top_k_top_p_joint = true;
    CHECK(kept_ids(sampler(params).final_distribution(l)) == std::set<token_id>{0, 1});
    params.temperature = 0.5;  // {.16, .09, .04, .01} / .3: .16/.3 >= .5 alone
    CHECK(sampler(params).final_distribution(l).ids.size() == 1);
    params.order = parse_stage_order("temperature;top_k;top_p");
    CHECK_THROWS_MATCHES(sampler(params), invalid_parameter,
                         Message("samplers: top_k_top_p is set but not in the sampler order"));
    params.order = parse_stage_order("top_k_top_p;temperature");  // before temperature: on the raw row
    CHECK(kept_ids(sampler(params).final_distribution(l)) == std::set<token_id>{0, 1});
}

TEMPLATE_TEST_CASE("top_k_top_p agrees with the intersection of the two masks (FlashInfer's test)",
                   "[filters][exact][top_k_top_p]", float, double)
{
    // FlashInfer's test_top_k_top_p_joint_sampling_from_probs: probabilities
    // uniform in [0, 1) normalised; P 0.1 with K = V/2 and P 0.5 with K = V/10;
    // the mask: rank < K and the mass ranked strictly above < P. Here the
    // kept set itself must equal it (not only each draw fall inside).
    for (const std::size_t vocab : {std::size_t(111), std::size_t(32000)})
    {
        for (std::uint64_t seed = 0; seed < 6; ++seed)
        {
            philox4x32 rng(seed, vocab);
            xt::xtensor<TestType, 1> r = xt::zeros<TestType>({vocab});
            for (auto& x : r)
            {
                x = TestType(std::log(uniform01(rng) + 1e-12));
            }
            for (const double p : {0.1, 0.5, 0.3})  // and P .3 with K V/5, where the two cuts are close
            {
                const std::size_t k = p == 0.1 ? vocab / 2 : p == 0.5 ? vocab / 10 : vocab / 5;
                INFO("vocab " << vocab << " seed " << seed << " p " << p);
                test_helpers::reference a(r);
                a.top_k_top_p(k, p);
                CHECK_FALSE(a.near);
                CHECK(kept_ids(chain{top_k_top_p{std::int64_t(k), p}}.final_distribution(r)) == kept_ids(a));
            }
        }
    }
    // Random K, P, temperature and min_keep, on a whole row and after a top_k.
    for (std::uint64_t seed = 500; seed < 540; ++seed)
    {
        const auto [r, t, keep] = seeded<TestType>(seed, 60);
        const double p = double(1 + seed % 19) / 20.0;
        const std::size_t k = 1 + (seed * 7919) % 40;
        INFO("seed " << seed << " p " << p << " k " << k);
        for (const std::size_t first : {std::size_t(0), std::size_t(50)})
        {
            test_helpers::reference b(r);
            b.temperature(t).top_k(first).top_k_top_p(k, p, keep);
            CHECK_FALSE(b.near);
            CHECK(kept_ids(chain{temperature{t}, top_k{std::int64_t(first)}, top_k_top_p{std::int64_t(k), p, keep}}
                               .final_distribution(r)) == kept_ids(b));
        }
    }
}

TEMPLATE_TEST_CASE("epsilon and eta draw from the renormalised kept set", "[filters][exact][epsilon][eta][stats]",
                   float, double)
{
    const auto r = test_helpers::random_row<TestType>(64, 77, 1.5);
    for (int which = 0; which < 2; ++which)
    {
        chain<temperature, epsilon> ce{temperature{0.9}, epsilon{0.01}};
        chain<temperature, eta> ch{temperature{0.9}, eta{0.02}};
        const auto d = which == 0 ? ce.final_distribution(r) : ch.final_distribution(r);
        REQUIRE(d.ids.size() > 5);
        REQUIRE(d.ids.size() < 64);
        std::map<token_id, std::size_t> index;
        for (std::size_t i = 0; i < d.ids.size(); ++i)
        {
            index[d.ids[i]] = i;
        }
        philox4x32 rng(5 + std::uint64_t(which));
        const std::size_t n = 40000;
        std::vector<double> observed(d.ids.size(), 0.0);
        for (std::size_t i = 0; i < n; ++i)
        {
            const auto tok = which == 0 ? ce.sample(r, {}, rng) : ch.sample(r, {}, rng);
            REQUIRE(index.count(tok.id) == 1);
            observed[index[tok.id]] += 1.0;
        }
        std::vector<double> expected;
        for (const double p : d.probs)
        {
            expected.push_back(p * double(n));
        }
        const double x2 = test_stats::chi_square(observed, expected);
        INFO("chi-square " << x2 << " over " << observed.size() << " cells");
        CHECK(x2 < test_stats::chi_square_bound(observed.size() - 1));
    }
}

// ===========================================================================
// The entropy filters (entropy_filters.hpp): typical, top_n_sigma; the
// dynamic temperature and top_k's keep-ties rule (filters.hpp).
// ===========================================================================

#include "stats.hpp"

namespace
{

    /// Row `seed` of the reference tests: integer logits (ties) when
    /// seed % 3 == 0, 30% masked when seed % 4 == 0.
    template <class T>
    xt::xtensor<T, 1> seeded_row(std::uint64_t seed, std::size_t vocab, double sigma)
    {
        return test_helpers::random_row<T>(vocab, seed, sigma, seed % 3 == 0, seed % 4 == 0 ? 0.3 : 0.0);
    }

    /// The unmasked (logit, id) of a row, and its max.
    template <class T>
    std::vector<std::pair<double, token_id>> finite_logits(const xt::xtensor<T, 1>& logits, double& mx)
    {
        std::vector<std::pair<double, token_id>> x;
        for (std::size_t i = 0; i < logits.size(); ++i)
        {
            if (logits(i) != -std::numeric_limits<T>::infinity())
            {
                x.emplace_back(double(logits(i)), token_id(i));
                mx = std::max(mx, double(logits(i)));
            }
        }
        return x;
    }

    /// Locally typical sampling done plainly, in double from the logits: the
    /// softmax at scale s with std::exp, H, every kept token sorted by
    /// (|-log p - H|, id), the running sum cut at P - slack, min_keep.
    /// `near` is set when a distance at the cut or the mass is within 1e-9
    /// of deciding otherwise (the library's own rounding may then differ).
    struct typical_reference
    {
        std::map<token_id, double> kept;
        bool near = false;

        template <class T>
        typical_reference(const xt::xtensor<T, 1>& logits, double scale, double p, std::size_t min_keep)
        {
            double mx = -inf;
            const auto x = finite_logits(logits, mx);
            double z = 0.0;
            for (const auto& v : x)
            {
                z += std::exp((v.first - mx) * scale);
            }
            double h = 0.0;
            std::vector<double> lp;
            for (const auto& v : x)
            {
                lp.push_back((v.first - mx) * scale - std::log(z));
                h -= std::exp(lp.back()) * lp.back();
            }
            std::vector<std::tuple<double, token_id, double, double>> order;  // distance, id, probability, logit
            for (std::size_t i = 0; i < x.size(); ++i)
            {
                order.emplace_back(std::fabs(-lp[i] - h), x[i].second, std::exp(lp[i]), x[i].first);
            }
            std::sort(order.begin(), order.end());
            double cum = 0.0;
            std::size_t n = order.size();
            for (std::size_t i = 0; i < order.size(); ++i)
            {
                cum += std::get<2>(order[i]);
                near = near || std::fabs(cum - (p - typical::mass_slack)) < 1e-9;
                if (cum >= p - typical::mass_slack)
                {
                    n = i + 1;
                    break;
                }
            }
            n = std::min(std::max(n, min_keep), order.size());
            if (n < order.size())
            {
                // Equal logits tie exactly (then ids decide, here and in the library).
                near = near || (std::get<0>(order[n]) - std::get<0>(order[n - 1]) < 1e-9 &&
                                std::get<3>(order[n]) != std::get<3>(order[n - 1]));
            }
            double kept_mass = 0.0;
            for (std::size_t i = 0; i < n; ++i)
            {
                kept_mass += std::get<2>(order[i]);
            }
            for (std::size_t i = 0; i < n; ++i)
            {
                kept[std::get<1>(order[i])] = std::get<2>(order[i]) / kept_mass;
            }
        }
    };

    /// top_n_sigma done plainly in long double; `near` when a logit is within
    /// 1e-12 (relative) of the threshold.
    template <class T>
    std::set<token_id> top_n_sigma_reference(const xt::xtensor<T, 1>& logits, double n, bool& near)
    {
        long double sum = 0.0L;
        long double mx = -INFINITY;
        std::size_t count = 0;
        for (const T x : logits)
        {
            if (x != -std::numeric_limits<T>::infinity())
            {
                sum += x;
                mx = std::max(mx, (long double)x);
                ++count;
            }
        }
        const long double mean = sum / count;
        long double dev = 0.0L;
        for (const T x : logits)
        {
            if (x != -std::numeric_limits<T>::infinity())
            {
                dev += (x - mean) * (x - mean);
            }
        }
        const long double threshold = mx - n * std::sqrt(dev / count);
        std::set<token_id> kept;
        for (std::size_t i = 0; i < logits.size(); ++i)
        {
            const long double x = logits(i);
            if (logits(i) != -std::numeric_limits<T>::infinity())
            {
                near = near || std::fabs(x - threshold) <= 1e-12L * (1.0L + std::fabs(threshold));
                if (x >= threshold)
                {
                    kept.insert(token_id(i));
                }
            }
        }
        return kept;
    }

    /// The probabilities the dynamic temperature gives, from the formula in
    /// double: entropy of the softmax, normalised by ln n, then divide.
    template <class T>
    std::map<token_id, double> dynatemp_reference(const xt::xtensor<T, 1>& logits, double t, double range, double e)
    {
        double mx = -inf;
        const auto x = finite_logits(logits, mx);
        const auto softmax = [&](double scale) {
            double z = 0.0;
            for (const auto& v : x)
            {
                z += std::exp((v.first - mx) * scale);
            }
            std::map<token_id, double> p;
            for (const auto& v : x)
            {
                p[v.second] = std::exp((v.first - mx) * scale) / z;
            }
            return p;
        };
        double h = 0.0;
        for (const auto& kv : softmax(1.0))
        {
            h -= kv.second > 0.0 ? kv.second * std::log(kv.second) : 0.0;
        }
        const double lo = std::max(0.0, t - range);
        const double hi = t + range;
        const double hn = std::min(1.0, std::max(0.0, h / std::log(double(x.size()))));
        const double td = lo + (hi - lo) * std::pow(hn, e);
        return softmax(1.0 / td);
    }

    /// Draws with the library and checks them against its own distribution
    /// by chi-square (fixed seed, a bound of about 6 sigma).
    template <class Chain, class Row>
    void check_draws(Chain& c, const Row& r, std::uint64_t seed)
    {
        const auto want = as_map(c.final_distribution(r));
        philox4x32 rng(seed, 3);
        const std::size_t draws = 20000;
        std::map<token_id, double> seen;
        for (std::size_t i = 0; i < draws; ++i)
        {
            const auto t = c.sample(r, {}, rng);
            REQUIRE(want.count(t.id) == 1);
            seen[t.id] += 1.0;
        }
        std::vector<double> observed;
        std::vector<double> expected;
        for (const auto& [id, p] : want)
        {
            observed.push_back(seen[id]);
            expected.push_back(p * double(draws));
        }
        REQUIRE(observed.size() >= 2);
        CHECK(test_stats::chi_square(observed, expected) < test_stats::chi_square_bound(observed.size() - 1));
    }
}

TEMPLATE_TEST_CASE("typical: llama.cpp's and transformers' cases, re-derived", "[filters][typical]", float, double)
{
    // Both projects' rows, P = 0.5. {.97, .01 x3}: H = 0.168 nats; .97 is at
    // distance 0.137, the .01s at 4.44: .97 alone reaches .5.
    check_probs<TestType>(dist(logits_of<TestType>({0.97, 0.01, 0.01, 0.01}), typical{0.5}), {{0, 1.0}});
    // {.4, .2 x3}: H = 1.332; the .2s at 0.277, .4 at 0.416: .2 + .2 + .2
    // = .6 crosses .5 at the third (llama.cpp reports the unrenormalised .2s).
    check_probs<TestType>(dist(logits_of<TestType>({0.4, 0.2, 0.2, 0.2}), typical{0.5}),
                          {{1, 1.0 / 3}, {2, 1.0 / 3}, {3, 1.0 / 3}});
    // transformers' uniform row of 5 with min_tokens_to_keep 3: every
    // distance ties; transformers keeps all 5 (every token tied with the
    // crossing one), we keep the lower ids: 3 (mass .6 >= .5, min_keep 3).
    const auto uniform = row<TestType>({0.0, 0.0, 0.0, 0.0, 0.0});
    CHECK(kept_ids(chain{typical{0.5, 3}}.final_distribution(uniform)) == std::set<token_id>{0, 1, 2});
    CHECK(kept_ids(chain{typical{0.5, 5}}.final_distribution(uniform)) == std::set<token_id>{0, 1, 2, 3, 4});
    // transformers' ramps, P = 0.7, min_tokens_to_keep 2: [2, 2] kept.
    // arange(10) - 5: H = 1.04; token 8 (p .233) at 0.42, token 9 (.632) at
    // 0.58: .865 >= .7 at two. Times 100: token 9 holds all the mass (one
    // would do), min_keep 2 adds token 8, the next by distance.
    auto ramp = row<TestType>({-5, -4, -3, -2, -1, 0, 1, 2, 3, 4});
    CHECK(kept_ids(chain{typical{0.7, 2}}.final_distribution(ramp)) == std::set<token_id>{8, 9});
    ramp *= TestType(100);
    CHECK(kept_ids(chain{typical{0.7, 2}}.final_distribution(ramp)) == std::set<token_id>{8, 9});
    CHECK(kept_ids(chain{typical{0.7, 1}}.final_distribution(ramp)) == std::set<token_id>{9});
}

TEMPLATE_TEST_CASE("typical: not a rank prefix, min_keep, P = 1, masked tokens", "[filters][typical]", float, double)
{
    const auto l = logits_of<TestType>({0.4, 0.2, 0.2, 0.2});
    // The best token is dropped: greedy after it takes the best kept one.
    CHECK(chain{typical{0.5}, temperature{0.0}}.final_distribution(l).ids == std::vector<token_id>{1});
    // min_keep counts in the typical order: the .2s, then .4.
    CHECK(kept_ids(chain{typical{0.5, 4}}.final_distribution(l)) == std::set<token_id>{0, 1, 2, 3});
    CHECK(kept_ids(chain{typical{0.1, 2}}.final_distribution(l)) == std::set<token_id>{1, 2});
    // {.97, .01 x3}, min_keep 3: .97 then the .01s by id.
    CHECK(kept_ids(chain{typical{0.5, 3}}.final_distribution(logits_of<TestType>({0.97, 0.01, 0.01, 0.01}))) ==
          std::set<token_id>{0, 1, 2});
    // P = 1 keeps everything (llama.cpp: P >= 1 is a no-op).
    CHECK(kept_ids(chain{typical{1.0}}.final_distribution(l)).size() == 4);
    // Masked tokens are not part of the distribution (llama.cpp's entropy
    // would be NaN): the same as the row without them.
    const auto masked = row<TestType>({std::log(0.4), -inf, std::log(0.2), std::log(0.2), -inf, std::log(0.2)});
    check_probs<TestType>(dist(masked, typical{0.5}), {{2, 1.0 / 3}, {3, 1.0 / 3}, {5, 1.0 / 3}});
    // Temperature so far is part of the distribution: at T = 0.25, {.4,
    // .2 x3} becomes {.8, .05 x3} (H 0.64): .8 is nearest and alone reaches .5.
    CHECK(kept_ids(chain{temperature{0.25}, typical{0.5}}.final_distribution(l)) == std::set<token_id>{0});
    // A temperature so small that the other tokens' exponents underflow to -inf
    // (weight 0, an infinite distance from H = 0), on a row long enough to be
    // bucketed (found by fuzz_sampler: the bucket key of an infinite distance):
    // the best token alone holds the mass.
    const auto wide = test_helpers::random_row<TestType>(1000, 3);
    CHECK(chain{temperature{1e-39}, typical{0.9}}.final_distribution(wide).ids ==
          std::vector<token_id>{greedy(wide)});
    CHECK(chain{top_k{600}, temperature{1e-39}, typical{0.9}}.final_distribution(wide).ids ==
          std::vector<token_id>{greedy(wide)});
}

TEMPLATE_TEST_CASE("typical equals the plain sort-based reference on random rows", "[filters][typical][reference]",
                   float, double)
{
    std::size_t near = 0;
    for (std::uint64_t seed = 1; seed <= 300; ++seed)
    {
        const auto r = seeded_row<TestType>(seed, seed % 5 == 0 ? 3001 : 5 + seed % 200, 0.5 + double(seed % 5));
        const double t = 0.5 + 0.25 * double(seed % 5);
        const double p = 0.05 + 0.9 * double(seed % 17) / 16.0;
        const std::size_t min_keep = 1 + seed % 4;
        INFO("seed " << seed << " p " << p << " min_keep " << min_keep);
        const typical_reference want(r, 1.0 / t, p, min_keep);
        if (want.near)
        {
            ++near;
            continue;
        }
        const auto got = as_map(chain{temperature{t}, typical{p, min_keep}}.final_distribution(r));
        REQUIRE(got.size() == want.kept.size());
        for (const auto& [id, prob] : want.kept)
        {
            REQUIRE(got.count(id) == 1);
            CHECK_THAT(got.at(id), WithinAbs(prob, 1e3 * tol<TestType>));
        }
        // After a filter the set is a list: the same decision on it.
        const auto after_min_p = chain{min_p{0.001}, temperature{t}, typical{p, min_keep}}.final_distribution(r);
        CHECK(kept_ids(after_min_p).size() <= kept_ids(chain{min_p{0.001}}.final_distribution(r)).size());
    }
    CHECK(near < 15);
}

TEMPLATE_TEST_CASE("typical on whole rows keeps the set of the plain algorithm on the same weights",
                   "[filters][typical][fast]", float, double)
{
    // The library's own distances and weights, sorted by (distance, id), one
    // running sum: the gathered, bucketed path must keep the same tokens on
    // 128k rows (the interval reaches far down the tail on flat rows).
    for (std::uint64_t seed = 40; seed < 48; ++seed)
    {
        const std::size_t vocab = seed % 2 ? 128256 : 20011;
        const auto r = test_helpers::random_row<TestType>(vocab, seed, 0.3 + double(seed % 4), seed % 3 == 0,
                                                          seed % 4 == 1 ? 0.2 : 0.0);
        const double t = 0.6 + 0.2 * double(seed % 3);
        const double ps[] = {0.2, 0.5, 0.9, 0.95, 0.99};
        const double p = ps[seed % 5];
        INFO("seed " << seed << " p " << p);
        candidates<TestType> c;
        c.load(r);
        c.divide_scale(t);
        const auto mo = c.log_weight_moments();
        CHECK(mo.z == c.total_weight());  // the fused pass gives Z's own bits
        CHECK(mo.n == c.size());
        const TestType m = c.max_logit();
        std::vector<std::tuple<double, token_id, double>> order;
        c.for_each_by_id([&](token_id id, TestType x) {
            order.emplace_back(std::fabs(double(detail::exponent(x, m, c.scale())) - mo.mean), id, double(c.weight(x)));
        });
        std::sort(order.begin(), order.end());
        const double target = (p - typical::mass_slack) * mo.z;
        double cum = 0.0;
        std::set<token_id> want;
        bool near = false;
        for (const auto& o : order)
        {
            cum += std::get<2>(o);
            want.insert(std::get<1>(o));
            near = std::fabs(cum - target) < 1e-12 * mo.z;
            if (cum >= target)
            {
                break;
            }
        }
        if (!near)
        {
            CHECK(kept_ids(chain{temperature{t}, typical{p}}.final_distribution(r)) == want);
        }
        CHECK(want.size() > 1);
    }
}

TEMPLATE_TEST_CASE("top_n_sigma: llama.cpp's cases, temperature invariance, masks, min_keep",
                   "[filters][top_n_sigma]", float, double)
{
    const auto l = logits_of<TestType>({0.1, 0.2, 0.3, 0.4});
    // llama.cpp: logits ln(.1) .. ln(.4): mean -1.508, sigma 0.5206;
    // max - sigma = -1.437 keeps ln .3 and ln .4 -> {.428571, .571429}.
    check_probs<TestType>(dist(l, top_n_sigma{1.0}), {{2, 0.3 / 0.7}, {3, 0.4 / 0.7}});
    // n = 0 is a no-op (llama.cpp since its PR 13345), as is n < 0; n = 3 keeps all.
    check_probs<TestType>(dist(l, top_n_sigma{0.0}), {{0, 0.1}, {1, 0.2}, {2, 0.3}, {3, 0.4}});
    check_probs<TestType>(dist(l, top_n_sigma{-1.0}), {{0, 0.1}, {1, 0.2}, {2, 0.3}, {3, 0.4}});
    check_probs<TestType>(dist(l, top_n_sigma{3.0}), {{0, 0.1}, {1, 0.2}, {2, 0.3}, {3, 0.4}});
    // Invariant to temperature: the same set at any T (renormalised at T).
    for (const double t : {0.1, 0.5, 2.0, 10.0})
    {
        CHECK(kept_ids(chain{temperature{t}, top_n_sigma{1.0}}.final_distribution(l)) == std::set<token_id>{2, 3});
        CHECK(kept_ids(chain{top_n_sigma{1.0}, temperature{t}}.final_distribution(l)) == std::set<token_id>{2, 3});
    }
    // Masked tokens are not part of sigma.
    const auto masked = row<TestType>({std::log(0.1), -inf, std::log(0.2), std::log(0.3), -inf, std::log(0.4)});
    check_probs<TestType>(dist(masked, top_n_sigma{1.0}), {{3, 0.3 / 0.7}, {5, 0.4 / 0.7}});
    // min_keep: never fewer than that many of the rank.
    CHECK(kept_ids(chain{top_n_sigma{1.0, 3}}.final_distribution(l)) == std::set<token_id>{1, 2, 3});
    CHECK(kept_ids(chain{top_n_sigma{1.0, 2}}.final_distribution(l)) == std::set<token_id>{2, 3});
    CHECK(kept_ids(chain{top_n_sigma{0.01, 9}}.final_distribution(l)).size() == 4);
    // One token left, or all equal: sigma 0 keeps the tied maxima.
    CHECK(kept_ids(chain{top_k{1}, top_n_sigma{1.0}}.final_distribution(l)) == std::set<token_id>{3});
    CHECK(kept_ids(chain{top_n_sigma{1.0}}.final_distribution(row<TestType>({2, 2, 2}))).size() == 3);
}

TEMPLATE_TEST_CASE("top_n_sigma decides exactly at its threshold", "[filters][top_n_sigma][exact]", float, double)
{
    // Two tokens: sigma = |a - b| / 2, so max - 2 sigma is exactly the other
    // one: n = 2 keeps both, the next double below 2 keeps the max alone,
    // whatever rounding sigma takes in floating point.
    philox4x32 rng(7, 1);
    const double below = std::nextafter(2.0, 0.0);
    for (int i = 0; i < 300; ++i)
    {
        const auto a = TestType(normal(3.0, rng));
        const auto b = TestType(normal(3.0, rng));
        if (a == b)
        {
            continue;
        }
        INFO(a << " " << b);
        const xt::xtensor<TestType, 1> r = {a, b, -std::numeric_limits<TestType>::infinity()};
        CHECK(kept_ids(chain{top_n_sigma{2.0}}.final_distribution(r)).size() == 2);
        CHECK(kept_ids(chain{top_n_sigma{below}}.final_distribution(r)).size() == 1);
    }
    // {a, b, a, b}: sigma = (b - a) / 2 in exact arithmetic, so max - 2 sigma
    // is the lower pair exactly, whatever b - a rounds to.
    for (const double c : {0.0, 0.1, 1e3, -7.3, 0.5})
    {
        const auto r = row<TestType>({-1 + c, 1 + c, -1 + c, 1 + c});
        CHECK(kept_ids(chain{top_n_sigma{2.0}}.final_distribution(r)).size() == 4);
        CHECK(kept_ids(chain{top_n_sigma{below}}.final_distribution(r)).size() == 2);
    }
}

TEMPLATE_TEST_CASE("top_n_sigma equals a long double reference on random rows", "[filters][top_n_sigma][reference]",
                   float, double)
{
    std::size_t near = 0;
    for (std::uint64_t seed = 1; seed <= 300; ++seed)
    {
        const auto r = seeded_row<TestType>(seed, seed % 7 == 0 ? 20011 : 3 + seed % 300, 3.0);
        const double n = 0.25 * double(seed % 13);
        INFO("seed " << seed << " n " << n);
        bool is_near = false;
        const auto want = top_n_sigma_reference(r, n, is_near);
        if (is_near || n == 0.0)
        {
            near += is_near;
            continue;
        }
        CHECK(kept_ids(chain{top_n_sigma{n}}.final_distribution(r)) == want);
        CHECK(kept_ids(chain{top_k{50}, top_n_sigma{n}}.final_distribution(r)).size() <= 50);
    }
    CHECK(near < 40);  // integer rows put logits on the threshold; those are checked above
}

TEMPLATE_TEST_CASE("dynamic temperature: llama.cpp's cases and the formula", "[filters][dynatemp]", float, double)
{
    const auto l = logits_of<TestType>({0.1, 0.2, 0.3, 0.4});
    // llama.cpp's temp_ext cases: range 0 is the plain temperature (T 1
    // unchanged, T 0 greedy).
    check_probs<TestType>(dist(l, temperature{1.0, 0.0, 1.0}), {{0, 0.1}, {1, 0.2}, {2, 0.3}, {3, 0.4}});
    check_probs<TestType>(dist(l, temperature{0.0, 0.0, 1.0}), {{3, 1.0}});
    // {.4, .2 x3}: H = 1.3322, ln 4 = 1.3863, h = 0.9610; T = 1, range .5:
    // T_dyn = 0.5 + 1.0 * 0.9610 = 1.4610.
    const auto q = logits_of<TestType>({0.4, 0.2, 0.2, 0.2});
    const auto want = dynatemp_reference(q, 1.0, 0.5, 1.0);
    CHECK_THAT(want.at(0), WithinRel(std::pow(0.4, 1 / 1.46096) /
                                         (std::pow(0.4, 1 / 1.46096) + 3 * std::pow(0.2, 1 / 1.46096)),
                                     1e-4));
    check_probs<TestType>(dist(q, temperature{1.0, 0.5, 1.0}), want);
    check_probs<TestType>(dist(q, temperature{0.7, 0.3, 2.5}), dynatemp_reference(q, 0.7, 0.3, 2.5));
    // exponent 0: h^0 = 1, so T_dyn = T + range.
    check_probs<TestType>(dist(q, temperature{1.0, 0.5, 0.0}), as_map(chain{temperature{1.5}}.final_distribution(q)));
    // T below the range: min 0; T = 0 with a range is dynamic, not greedy.
    check_probs<TestType>(dist(q, temperature{0.0, 0.8, 1.0}), dynatemp_reference(q, 0.0, 0.8, 1.0));
    // One token holds every weight (the others underflow): H = 0, so
    // T_dyn = min: 0 (greedy) when T <= range, else T - range.
    const auto peaked = row<TestType>({0.0, -5000.0, -5000.0});
    check_probs<TestType>(dist(peaked, temperature{0.5, 0.5, 1.0}), {{0, 1.0}});
    CHECK(chain{temperature{0.5, 0.5, 1.0}, top_k{2}}.final_distribution(peaked).ids.size() == 1);
    // One candidate: nothing to do.
    check_probs<TestType>(dist(l, top_k{1}, temperature{1.0, 0.5, 1.0}), {{3, 1.0}});
    // A set after a filter: n and H are the kept set's.
    check_probs<TestType>(dist(l, top_k{3}, temperature{1.0, 0.5, 1.0}),
                          dynatemp_reference(row<TestType>({-inf, std::log(0.2), std::log(0.3), std::log(0.4)}), 1.0,
                                             0.5, 1.0));
}

TEMPLATE_TEST_CASE("dynamic temperature reads the whole set: a top_k after it is not fused", "[filters][dynatemp]",
                   float, double)
{
    for (std::uint64_t seed = 1; seed <= 20; ++seed)
    {
        const auto r = seeded_row<TestType>(seed, 1000 + seed, 2.0);
        INFO("seed " << seed);
        const double t = 0.3 + 0.1 * double(seed % 7);
        const double range = 0.1 * double(1 + seed % 5);
        const auto full = dynatemp_reference(r, t, range, 1.0 + double(seed % 3));
        const auto got = as_map(chain{temperature{t, range, 1.0 + double(seed % 3)}}.final_distribution(r));
        REQUIRE(got.size() == full.size());
        for (const auto& [id, p] : full)
        {
            CHECK_THAT(got.at(id), WithinAbs(p, 1e3 * tol<TestType>));
        }
        // With top_k after it: the temperature of the whole row, then the k best.
        chain c{temperature{t, range, 1.0}, top_k{5}};
        std::map<token_id, double> top;
        const auto all = dynatemp_reference(r, t, range, 1.0);
        const auto best = chain{top_k{5}}.final_distribution(r);
        double mass = 0.0;
        for (const auto id : best.ids)
        {
            mass += all.at(id);
        }
        for (const auto id : best.ids)
        {
            top[id] = all.at(id) / mass;
        }
        const auto fused = as_map(c.final_distribution(r));
        REQUIRE(fused.size() == top.size());
        for (const auto& [id, p] : top)
        {
            CHECK_THAT(fused.at(id), WithinAbs(p, 1e3 * tol<TestType>));
        }
    }
}

TEMPLATE_TEST_CASE("top_k ties: lowest_id keeps exactly k, keep_all every token tied with the k-th",
                   "[filters][top_k][top_k_ties]", float, double)
{
    const auto r = row<TestType>({3, 1, 3, 3, 0, -inf});
    CHECK(kept_ids(chain{top_k{2}}.final_distribution(r)) == std::set<token_id>{0, 2});
    CHECK(kept_ids(chain{top_k{2, top_k_ties::keep_all}}.final_distribution(r)) == std::set<token_id>{0, 2, 3});
    CHECK(kept_ids(chain{top_k{1, top_k_ties::keep_all}}.final_distribution(r)) == std::set<token_id>{0, 2, 3});
    CHECK(kept_ids(chain{top_k{4, top_k_ties::keep_all}}.final_distribution(r)) == std::set<token_id>{0, 1, 2, 3});
    CHECK(kept_ids(chain{top_k{9, top_k_ties::keep_all}}.final_distribution(r)).size() == 5);
    CHECK(kept_ids(chain{top_k{0, top_k_ties::keep_all}}.final_distribution(r)).size() == 5);
    // transformers' uniform row: top_k 3 keeps all 5 (tied with the 3rd).
    const auto uniform = row<TestType>({0, 0, 0, 0, 0});
    CHECK(kept_ids(chain{top_k{3, top_k_ties::keep_all}}.final_distribution(uniform)).size() == 5);
    CHECK(kept_ids(chain{top_k{3}}.final_distribution(uniform)) == std::set<token_id>{0, 1, 2});
    // A sorted reference on random rows with many ties, dense and after a
    // filter, and after temperature and a processor (which the lowest_id
    // rule would fuse; keep_all is not fused).
    for (std::uint64_t seed = 1; seed <= 60; ++seed)
    {
        const auto x = test_helpers::random_row<TestType>(seed % 2 ? 3000 : 300, seed, 2.0, true, seed % 4 == 0 ? 0.3 : 0.0);
        const auto k = std::size_t(1 + seed * 3);
        std::vector<TestType> v;
        for (const TestType e : x)
        {
            if (e != -std::numeric_limits<TestType>::infinity())
            {
                v.push_back(e);
            }
        }
        std::sort(v.rbegin(), v.rend());
        std::set<token_id> want;
        for (std::size_t i = 0; i < x.size(); ++i)
        {
            if (x(i) != -std::numeric_limits<TestType>::infinity() && (k >= v.size() || x(i) >= v[k - 1]))
            {
                want.insert(token_id(i));
            }
        }
        INFO("seed " << seed);
        CHECK(kept_ids(chain{top_k{std::int64_t(k), top_k_ties::keep_all}}.final_distribution(x)) == want);
        CHECK(kept_ids(chain{temperature{0.7}, min_tokens(1, {7}), top_k{std::int64_t(k), top_k_ties::keep_all}}
                           .final_distribution(test_helpers::edited(x, {{{7, -inf}}}))) ==
              kept_ids(chain{top_k{std::int64_t(k), top_k_ties::keep_all}}.final_distribution(
                  test_helpers::edited(x, {{{7, -inf}}}))));
        CHECK(kept_ids(chain{min_p{0.0001}, top_k{std::int64_t(k), top_k_ties::keep_all}}.final_distribution(x)) ==
              kept_ids(chain{top_k{std::int64_t(k), top_k_ties::keep_all}, min_p{0.0001}}.final_distribution(x)));
    }
}

TEMPLATE_TEST_CASE("the entropy filters: the compile-time chain and the run-time sampler agree",
                   "[filters][typical][top_n_sigma][dynatemp][top_k_ties]", float, double)
{
    const auto r = test_helpers::random_row<TestType>(5000, 77, 2.5, true, 0.1);
    sampling_params p;
    p.temperature = 0.9;
    p.dynatemp_range = 0.4;
    p.dynatemp_exponent = 1.5;
    p.top_k = 400;
    p.top_k_keep_ties = true;
    p.top_n_sigma = 2.0;
    p.typical_p = 0.8;
    p.min_keep = 2;
    chain c{temperature{0.9, 0.4, 1.5}, top_k{400, top_k_ties::keep_all}, top_n_sigma{2.0, 2}, typical{0.8, 2}};
    sampler s(p);
    const auto a = c.final_distribution(r);
    const auto b = s.final_distribution(r);
    CHECK(a.ids == b.ids);
    CHECK(a.probs == b.probs);
    philox4x32 r1(5, 0);
    philox4x32 r2(5, 0);
    for (int i = 0; i < 50; ++i)
    {
        CHECK(c.sample(r, {}, r1).id == s.sample(r, {}, r2).id);
    }
    // The default order puts them between top_k and top_p; a plain
    // temperature keeps its fused top-k pass.
    const auto order = default_stage_order();
    const auto at = [&](const char* n) { return std::find(order.begin(), order.end(), n) - order.begin(); };
    CHECK(at("top_k") < at("top_n_sigma"));
    CHECK(at("top_n_sigma") < at("typical"));
    CHECK(at("typical") < at("top_p"));
    CHECK(temperature{0.8}.rescales_only());
    CHECK_FALSE(temperature(0.8, 0.1, 1.0).rescales_only());
    CHECK(detail::rescales_now(temperature{0.8}));
}

TEMPLATE_TEST_CASE("the entropy filters' draws follow their distributions (chi-square)",
                   "[filters][typical][top_n_sigma][dynatemp][top_k_ties][stats]", float, double)
{
    const auto r = test_helpers::random_row<TestType>(64, 11, 1.0, false, 0.0);
    chain a{typical{0.7}};
    check_draws(a, r, 1);
    chain b{top_n_sigma{2.0}};
    check_draws(b, r, 2);
    chain c{temperature{0.8, 0.5, 1.0}, top_k{10}};
    check_draws(c, r, 3);
    const auto ties = test_helpers::random_row<TestType>(64, 12, 1.0, true, 0.0);
    chain d{top_k{5, top_k_ties::keep_all}};
    check_draws(d, ties, 4);
}

TEST_CASE("the entropy filters validate their parameters", "[filters][errors][typical][top_n_sigma][dynatemp]")
{
    const auto nan = std::numeric_limits<double>::quiet_NaN();
    CHECK_THROWS_MATCHES(typical(0.0), invalid_parameter, Message("typical: p must be in (0, 1], got 0"));
    CHECK_THROWS_MATCHES(typical(1.5), invalid_parameter, Message("typical: p must be in (0, 1], got 1.5"));
    CHECK_THROWS_MATCHES(typical(nan), invalid_parameter, Message("typical: p must be in (0, 1], got nan"));
    CHECK_NOTHROW(typical(0.5, 0));  // min_keep 0 counts as 1, as for every filter
    CHECK_THROWS_MATCHES(top_n_sigma(inf), invalid_parameter,
                         Message("top_n_sigma: n must be finite (<= 0 disables it), got inf"));
    CHECK_THROWS_AS(top_n_sigma(nan), invalid_parameter);
    CHECK_NOTHROW(top_n_sigma(1.0, 0));
    CHECK_THROWS_MATCHES(temperature(1.0, -0.5, 1.0), invalid_parameter,
                         Message("temperature: dynatemp_range must be finite and >= 0, got -0.5"));
    CHECK_THROWS_MATCHES(temperature(1.0, inf, 1.0), invalid_parameter,
                         Message("temperature: dynatemp_range must be finite and >= 0, got inf"));
    CHECK_THROWS_MATCHES(temperature(1.0, 0.5, -1.0), invalid_parameter,
                         Message("temperature: dynatemp_exponent must be finite and >= 0, got -1"));
    CHECK_THROWS_AS(temperature(1.0, 0.5, nan), invalid_parameter);
    CHECK_THROWS_MATCHES(temperature(-1.0, 0.5, 1.0), invalid_parameter,
                         Message("temperature: T must be finite and >= 0, got -1"));
    CHECK_NOTHROW(typical(1.0));
    CHECK_NOTHROW(top_n_sigma(-3.0));
    CHECK_NOTHROW(temperature(0.0, 2.0, 0.0));
    sampling_params p;
    p.typical_p = 2.0;
    CHECK_THROWS_MATCHES(sampler(p), invalid_parameter, Message("typical: p must be in (0, 1], got 2"));
    p = sampling_params{};
    p.dynatemp_range = -1.0;
    CHECK_THROWS_MATCHES(sampler(p), invalid_parameter,
                         Message("temperature: dynatemp_range must be finite and >= 0, got -1"));
}

TEMPLATE_TEST_CASE("the entropy filters decide alike on a whole row and on a list", "[filters][typical][top_n_sigma]",
                   float, double)
{
    // min_p at 1e-300 keeps every token but turns the set into a list: the
    // list paths (typical's moments by id, top_n_sigma's sums and exact
    // sums from the list) must keep what the whole-row paths keep.
    for (std::uint64_t seed = 1; seed <= 12; ++seed)
    {
        const auto r = seeded_row<TestType>(seed, seed % 2 ? 5000 : 700, 2.0);
        INFO("seed " << seed);
        const double p = 0.3 + 0.05 * double(seed);
        const auto dense = chain{temperature{0.9}, typical{p, 2}}.final_distribution(r);
        const auto list = chain{min_p{1e-300}, temperature{0.9}, typical{p, 2}}.final_distribution(r);
        CHECK(dense.ids == list.ids);
        CHECK(dense.probs == list.probs);
        const double n = 0.5 * double(seed % 5);
        CHECK(kept_ids(chain{top_n_sigma{n}}.final_distribution(r)) ==
              kept_ids(chain{min_p{1e-300}, top_n_sigma{n}}.final_distribution(r)));
    }
    // The exact re-decision from a list: two tokens left by top_k.
    philox4x32 rng(9, 1);
    for (int i = 0; i < 100; ++i)
    {
        const auto a = TestType(normal(3.0, rng));
        const auto b = TestType(normal(3.0, rng));
        if (a == b)
        {
            continue;
        }
        const xt::xtensor<TestType, 1> r = {a, TestType(-100), b, TestType(-200)};
        CHECK(kept_ids(chain{top_k{2}, top_n_sigma{2.0}}.final_distribution(r)).size() == 2);
        CHECK(kept_ids(chain{top_k{2}, top_n_sigma{std::nextafter(2.0, 0.0)}}.final_distribution(r)).size() == 1);
    }
}

TEST_CASE("the fused top-k pass: kept for a plain temperature, not after a dynamic one or for keep_all",
          "[filters][dynatemp][top_k_ties]")
{
    const auto fused = [](auto... stages) {
        detail::fused_top_k f;
        (f.see(stages), ...);
        return f.k;
    };
    CHECK(fused(temperature{0.8}, top_k{5}) == 5);
    CHECK(fused(temperature{0.8, 0.0, 2.0}, top_k{5}) == 5);
    CHECK(fused(temperature{0.8, 0.3, 1.0}, top_k{5}) == 0);
    CHECK(fused(temperature{0.8}, top_k{5, top_k_ties::keep_all}) == 0);
    CHECK(fused(top_n_sigma{1.0}, top_k{5}) == 0);
    CHECK(fused(typical{0.5}, top_k{5}) == 0);
}
