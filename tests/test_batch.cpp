// batch.hpp: one token per row, each row with its own sampler; the tokens do
// not depend on the thread count or on the other rows.
#include <catch2/catch.hpp>
#include <xtensor/xview.hpp>

#include "helpers.hpp"

using namespace xsampler;
using Catch::Matchers::Message;

namespace
{
    std::vector<sampler> make_samplers(std::size_t rows)
    {
        std::vector<sampler> out;
        for (std::size_t r = 0; r < rows; ++r)
        {
            sampling_params p;
            p.temperature = 0.5 + 0.1 * double(r % 5);
            p.top_k = std::int64_t(r % 3 == 0 ? 0 : 20 + r);
            p.top_p = r % 2 ? 0.9 : 1.0;
            p.min_p = r % 4 == 1 ? 0.02 : 0.0;
            p.seed = 1000 + r;
            out.emplace_back(p);
        }
        return out;
    }

    template <class T>
    xt::xtensor<T, 2> make_rows(std::size_t rows, std::size_t vocab)
    {
        xt::xtensor<T, 2> m = xt::empty<T>({rows, vocab});
        for (std::size_t r = 0; r < rows; ++r)
        {
            xt::view(m, r, xt::all()) = test_helpers::random_row<T>(vocab, 50 + r, 2.5, r % 3 == 2, r % 4 == 3 ? 0.2 : 0.0);
        }
        return m;
    }
}

TEMPLATE_TEST_CASE("sample_batch equals each row sampled alone, on any number of threads", "[batch]", float, double)
{
    const std::size_t rows = 11;
    const std::size_t vocab = 3000;
    const auto logits = make_rows<TestType>(rows, vocab);

    // Each row alone, three steps.
    auto alone = make_samplers(rows);
    std::vector<std::vector<token_id>> want(rows);
    for (int step = 0; step < 3; ++step)
    {
        for (std::size_t r = 0; r < rows; ++r)
        {
            const xt::xtensor<TestType, 1> row = xt::view(logits, r, xt::all());
            want[r].push_back(alone[r].sample(row, {}).id);
        }
    }
    for (const std::size_t threads : {1, 2, 3, 16})
    {
        auto batched = make_samplers(rows);
        std::vector<workspace> pool(threads);
        std::vector<sampled_token> out;
        for (int step = 0; step < 3; ++step)
        {
            sample_batch(logits, batched, pool, out);
            REQUIRE(out.size() == rows);
            for (std::size_t r = 0; r < rows; ++r)
            {
                CHECK(out[r].id == want[r][std::size_t(step)]);
            }
        }
    }
}

TEST_CASE("a row's tokens do not depend on the other rows of the batch", "[batch]")
{
    const auto logits = make_rows<float>(6, 500);
    auto full = make_samplers(6);
    std::vector<workspace> pool(2);
    std::vector<sampled_token> out;
    sample_batch(logits, full, pool, out);

    // Row 4 in a batch of its own, with its own sampler.
    auto all = make_samplers(6);
    std::vector<sampler> just_four = {all[4]};
    const xt::xtensor<float, 2> only = xt::view(logits, xt::range(4, 5), xt::all());
    std::vector<sampled_token> alone;
    sample_batch(only, just_four, pool, alone);
    CHECK(alone[0].id == out[4].id);
    CHECK(alone[0].logprob == out[4].logprob);
}

TEST_CASE("sample_batch rejects bad shapes and passes row errors on", "[batch][errors]")
{
    auto logits = make_rows<float>(3, 100);
    auto samplers = make_samplers(3);
    std::vector<workspace> pool(2);
    std::vector<sampled_token> out;
    auto two = make_samplers(2);
    CHECK_THROWS_MATCHES(sample_batch(logits, two, pool, out), invalid_parameter,
                         Message("sample_batch: 2 samplers for 3 rows"));
    std::vector<workspace> none;
    CHECK_THROWS_MATCHES(sample_batch(logits, samplers, none, out), invalid_parameter,
                         Message("sample_batch: the workspace pool is empty (give one per thread)"));
    const std::vector<token_id> h = {1, 2};
    CHECK_THROWS_MATCHES(sample_batch(logits, samplers, pool, out, {token_span(h)}), invalid_parameter,
                         Message("sample_batch: 1 histories for 3 rows"));
    const xt::xtensor<float, 1> flat = xt::zeros<float>({5});
    CHECK_THROWS_MATCHES(sample_batch(flat, samplers, pool, out), invalid_logits,
                         Message("sample_batch: logits must be 2-D [batch, vocab], got 1-D"));
    logits(2, 7) = std::numeric_limits<float>::quiet_NaN();
    CHECK_THROWS_MATCHES(sample_batch(logits, samplers, pool, out), invalid_logits,
                         Message("logits: NaN at index 7"));
}
