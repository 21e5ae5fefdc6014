// filters.hpp, candidates.hpp, softmax.hpp, row.hpp: the contracts with
// exact values, their edge cases, and every error.
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>

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
    c.keep_mass(0.1, 2);
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
        const std::size_t vocab = seed % 2 ? 20011 : 300;
        const auto r = test_helpers::random_row<TestType>(vocab, seed, 1.0 + double(seed % 4), seed % 3 == 0,
                                                          seed % 5 == 0 ? 0.4 : 0.0);
        const double t = 0.4 + 0.15 * double(seed % 7);
        const double e = 1e-5 * double(1 + seed % 300);
        const double h = 1e-4 * double(1 + seed % 50);
        const std::size_t keep = 1 + seed % 3;
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
