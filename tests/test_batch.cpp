// batch.hpp: one token per row, each row with its own sampler; the tokens do
// not depend on the thread count or on the other rows.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <system_error>
#include <thread>

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

    // Each row sampled alone by its own sampler, `steps` times: what a batch must give.
    template <class T>
    std::vector<std::vector<sampled_token>> sampled_alone(const xt::xtensor<T, 2>& logits, std::size_t steps)
    {
        const std::size_t rows = logits.shape()[0];
        auto alone = make_samplers(rows);
        std::vector<std::vector<sampled_token>> want(steps, std::vector<sampled_token>(rows));
        for (std::size_t step = 0; step < steps; ++step)
        {
            for (std::size_t r = 0; r < rows; ++r)
            {
                const xt::xtensor<T, 1> row = xt::view(logits, r, xt::all());
                want[step][r] = alone[r].sample(row, {});
            }
        }
        return want;
    }

    void check_same(const std::vector<sampled_token>& got, const std::vector<sampled_token>& want)
    {
        REQUIRE(got.size() == want.size());
        for (std::size_t r = 0; r < want.size(); ++r)
        {
            INFO("row " << r);
            CHECK(got[r].id == want[r].id);
            CHECK(got[r].logprob == want[r].logprob);
        }
    }

    // Runs the parts last to first on the calling thread, counting them.
    struct counting_executor
    {
        std::size_t calls = 0;
        std::size_t n = 0;
        std::vector<int> runs;

        template <class F>
        void operator()(std::size_t parts, F&& task)
        {
            ++calls;
            n = parts;
            runs.assign(parts, 0);
            for (std::size_t p = parts; p-- > 0;)
            {
                ++runs[p];
                task(p);
            }
        }
    };

    // An engine's own pool, roughly: every part on a thread the caller starts.
    struct own_threads_executor
    {
        template <class F>
        void operator()(std::size_t parts, F task) const
        {
            std::vector<std::thread> threads;
            for (std::size_t p = 0; p < parts; ++p)
            {
                threads.emplace_back(task, p);
            }
            for (auto& t : threads)
            {
                t.join();
            }
        }
    };

    // Starts threads until the fail_from-th start, which throws as
    // std::thread does when the process can start no more.
    struct failing_start
    {
        std::size_t fail_from = 1;
        std::size_t* attempts = nullptr;

        template <class F>
        std::thread operator()(F&& f) const
        {
            if (++*attempts >= fail_from)
            {
                throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                                        "cannot start a thread");
            }
            return std::thread(std::forward<F>(f));
        }
    };

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
    const std::vector<token_history> one = {token_history(h)};
    CHECK_THROWS_MATCHES(sample_batch(logits, samplers, pool, out, one), invalid_parameter,
                         Message("sample_batch: 1 histories for 3 rows"));
    const std::vector<token_span> one_span = {token_span(h)};
    CHECK_THROWS_MATCHES(sample_batch(logits, samplers, pool, out, one_span), invalid_parameter,
                         Message("sample_batch: 1 histories for 3 rows"));
    const xt::xtensor<float, 1> flat = xt::zeros<float>({5});
    CHECK_THROWS_MATCHES(sample_batch(flat, samplers, pool, out), invalid_logits,
                         Message("sample_batch: logits must be 2-D [batch, vocab], got 1-D"));
    logits(2, 7) = std::numeric_limits<float>::quiet_NaN();
    CHECK_THROWS_MATCHES(sample_batch(logits, samplers, pool, out), invalid_logits,
                         Message("row 2: logits: NaN at index 7"));
}

TEMPLATE_TEST_CASE("sample_batch gives the same tokens with every executor", "[batch][executor]", float, double)
{
    const std::size_t rows = 13;
    const auto logits = make_rows<TestType>(rows, 2000);
    const auto want = sampled_alone(logits, 3);
    const auto run = [&](auto&& exec) {
        auto samplers = make_samplers(rows);
        std::vector<workspace> pool(4);
        std::vector<sampled_token> out;
        for (std::size_t step = 0; step < 3; ++step)
        {
            INFO("step " << step);
            sample_batch(logits, samplers, pool, out, {}, exec);
            check_same(out, want[step]);
        }
    };
    SECTION("default")
    {
        auto samplers = make_samplers(rows);
        std::vector<workspace> pool(4);
        std::vector<sampled_token> out;
        for (std::size_t step = 0; step < 3; ++step)
        {
            sample_batch(logits, samplers, pool, out);
            check_same(out, want[step]);
        }
    }
    SECTION("thread_executor") { run(thread_executor{}); }
    SECTION("serial_executor") { run(serial_executor{}); }
    SECTION("parts last to first") { run(counting_executor{}); }
    SECTION("the caller's threads") { run(own_threads_executor{}); }
    SECTION("a thread_pool")
    {
        thread_pool threads(3);
        run(threads);
    }
}

TEST_CASE("sample_batch calls the executor once, with one task per part, each run once", "[batch][executor]")
{
    const auto logits = make_rows<float>(11, 300);
    const auto want = sampled_alone(logits, 1);
    const auto pool_size = GENERATE(as<std::size_t>{}, 1, 2, 4, 11, 16);
    auto samplers = make_samplers(11);
    std::vector<workspace> pool(pool_size);
    std::vector<sampled_token> out;
    counting_executor counter;
    sample_batch(logits, samplers, pool, out, {}, counter);
    CHECK(counter.calls == 1);
    CHECK(counter.n == std::min<std::size_t>(pool_size, 11));
    CHECK(counter.runs == std::vector<int>(counter.n, 1));
    check_same(out, want[0]);
}

TEST_CASE("part p samples in pool p, and an empty batch calls no executor", "[batch][executor]")
{
    const auto logits = make_rows<float>(2, 300);
    auto samplers = make_samplers(2);
    std::vector<workspace> pool(4);
    std::vector<sampled_token> out;
    counting_executor counter;
    sample_batch(logits, samplers, pool, out, {}, counter);
    CHECK(counter.n == 2);
    CHECK(pool[0].get<float>().vocab() == 300);
    CHECK(pool[1].get<float>().vocab() == 300);
    CHECK(pool[2].get<float>().vocab() == 0);
    CHECK(pool[3].get<float>().vocab() == 0);

    const xt::xtensor<float, 2> empty = xt::zeros<float>({std::size_t(0), std::size_t(300)});
    std::vector<sampler> no_samplers;
    counting_executor idle;
    sample_batch(empty, no_samplers, pool, out, {}, idle);
    CHECK(idle.calls == 0);
    CHECK(out.empty());
}

TEST_CASE("a row's error names the row, and the lowest failing row wins", "[batch][errors]")
{
    // 24 rows in 4 parts: rows 0-5, 6-11, 12-17, 18-23.
    auto logits = make_rows<float>(24, 100);
    auto samplers = make_samplers(24);
    std::vector<workspace> pool(4);
    std::vector<sampled_token> out;
    const auto nan = std::numeric_limits<float>::quiet_NaN();
    const auto check_error = [&](const std::string& message) {
        CHECK_THROWS_MATCHES(sample_batch(logits, samplers, pool, out), invalid_logits, Message(message));
        CHECK_THROWS_MATCHES(sample_batch(logits, samplers, pool, out, {}, serial_executor{}), invalid_logits,
                             Message(message));
        CHECK_THROWS_MATCHES(sample_batch(logits, samplers, pool, out, {}, counting_executor{}), invalid_logits,
                             Message(message));
        CHECK_THROWS_MATCHES(sample_batch(logits, samplers, pool, out, {}, own_threads_executor{}), invalid_logits,
                             Message(message));
    };
    logits(17, 3) = nan;
    check_error("row 17: logits: NaN at index 3");
    logits(13, 0) = std::numeric_limits<float>::infinity();  // the same part, earlier
    check_error("row 13: logits: +inf at index 0");
    logits(5, 99) = nan;  // an earlier part, run last by counting_executor
    check_error("row 5: logits: NaN at index 99");
    logits(22, 1) = nan;  // a later part changes nothing
    check_error("row 5: logits: NaN at index 99");

    auto masked = make_rows<double>(24, 100);
    xt::view(masked, 20, xt::all()) = -std::numeric_limits<double>::infinity();
    CHECK_THROWS_MATCHES(sample_batch(masked, samplers, pool, out), invalid_logits,
                         Message("row 20: logits: every token is masked (-inf)"));
}

TEST_CASE("rethrow_for_row keeps the library's exception types and passes others on", "[batch][errors]")
{
    const auto rethrow = [](std::exception_ptr e) { detail::rethrow_for_row(17, e); };
    CHECK_THROWS_MATCHES(rethrow(std::make_exception_ptr(invalid_parameter("top_k: k must be >= 0 (0 disables it), got -1"))),
                         invalid_parameter, Message("row 17: top_k: k must be >= 0 (0 disables it), got -1"));
    CHECK_THROWS_MATCHES(rethrow(std::make_exception_ptr(invalid_logits("logits: NaN at index 3"))), invalid_logits,
                         Message("row 17: logits: NaN at index 3"));
    CHECK_THROWS_MATCHES(rethrow(std::make_exception_ptr(invalid_data("model: 3 logits, expected 4"))), invalid_data,
                         Message("row 17: model: 3 logits, expected 4"));
    CHECK_THROWS_MATCHES(rethrow(std::make_exception_ptr(invalid_use("custom_stage 'c': used after being moved from"))),
                         invalid_use, Message("row 17: custom_stage 'c': used after being moved from"));
    CHECK_THROWS_MATCHES(rethrow(std::make_exception_ptr(std::runtime_error("out of tokens"))), std::runtime_error,
                         Message("out of tokens"));
    CHECK_THROWS_AS(rethrow(std::make_exception_ptr(42)), int);
}

TEST_CASE("thread_executor runs the parts it cannot start a thread for on the calling thread", "[batch][executor]")
{
    const std::thread::id caller = std::this_thread::get_id();
    SECTION("the executor alone")
    {
        const auto fail_from = GENERATE(as<std::size_t>{}, 1, 2, 4, 5);
        std::size_t attempts = 0;
        basic_thread_executor<failing_start> exec(failing_start{fail_from, &attempts});
        std::vector<std::thread::id> ran_on(5);
        std::vector<std::atomic<int>> runs(5);
        exec(5, [&](std::size_t p) {
            ++runs[p];
            ran_on[p] = std::this_thread::get_id();
        });
        // Starts 1 .. fail_from - 1 succeed (parts 1 .. fail_from - 1); no start after a failure.
        CHECK(attempts == std::min<std::size_t>(fail_from, 4));
        for (std::size_t p = 0; p < 5; ++p)
        {
            INFO("part " << p);
            CHECK(runs[p] == 1);
            CHECK((ran_on[p] == caller) == (p == 0 || p >= fail_from));
        }
    }
    SECTION("a whole batch")
    {
        const auto fail_from = GENERATE(as<std::size_t>{}, 1, 2, 3);
        const auto logits = make_rows<float>(11, 500);
        const auto want = sampled_alone(logits, 2);
        auto samplers = make_samplers(11);
        std::vector<workspace> pool(4);
        std::vector<sampled_token> out;
        std::size_t attempts = 0;
        basic_thread_executor<failing_start> exec(failing_start{fail_from, &attempts});
        for (std::size_t step = 0; step < 2; ++step)
        {
            sample_batch(logits, samplers, pool, out, {}, exec);
            check_same(out, want[step]);
        }
    }
}

TEST_CASE("thread_executor joins its threads when a task throws on the calling thread", "[batch][executor]")
{
    std::atomic<int> others{0};
    thread_executor exec;
    CHECK_THROWS_MATCHES(exec(4,
                              [&](std::size_t p) {
                                  if (p == 0)
                                  {
                                      throw std::runtime_error("part 0 failed");
                                  }
                                  ++others;
                              }),
                         std::runtime_error, Message("part 0 failed"));
    CHECK(others == 3);  // joined: every other part has finished
}

TEST_CASE("sample_batch takes spans over raw arrays, and histories", "[batch]")
{
    const auto logits = make_rows<float>(3, 400);
    const auto want = sampled_alone(logits, 2);
    auto made = make_samplers(3);
    sampler raw[3] = {made[0], made[1], made[2]};
    workspace ws[2];
    const std::vector<token_id> tokens = {5, 6, 7, 8};
    const token_history histories[3] = {token_history(token_span(tokens), 2), token_history{}, token_history(tokens)};
    std::vector<sampled_token> out;
    sample_batch(logits, {raw, 3}, {ws, 2}, out, {histories, 3});
    check_same(out, want[0]);
    sample_batch(logits, span<sampler>(raw, 3), span<workspace>(ws, 1), out, {}, serial_executor{});
    check_same(out, want[1]);

    // Histories as token spans, as sample_batch took them before token_history.
    auto samplers = make_samplers(3);
    std::vector<workspace> pool(2);
    const std::vector<token_span> spans(3, token_span(tokens));
    sample_batch(logits, samplers, pool, out, spans);
    check_same(out, want[0]);
    sample_batch(logits, samplers, pool, out, spans, serial_executor{});
    check_same(out, want[1]);
}

TEST_CASE("constraint copies on two threads share their masks safely", "[batch][constraint]")
{
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b)
    {
        tokens.emplace_back(1, char(b));
    }
    for (const char* t : {"{\"", "\":", "\",", "\"}", "[1", "true", "null"})
    {
        tokens.emplace_back(t);
    }
    tokens.emplace_back();
    const auto eos = token_id(tokens.size() - 1);
    auto index = std::make_shared<const vocabulary_index>(
        std::make_shared<const vocabulary>(std::move(tokens), std::vector<token_id>{eos}));
    const constraint proto = json_constraint(index);
    std::vector<std::size_t> ended(2, 0);
    const auto run = [&](std::size_t t) {
        for (std::uint64_t seed = 0; seed < 20; ++seed)
        {
            constraint c = proto;  // shares proto's masks
            c.set_budget(12);
            chain ch{std::move(c), temperature{1.0}};
            const auto model = [&](token_span prefix) {
                return test_helpers::random_row<float>(index->vocab().size(), seed * 131 + prefix.size() + t);
            };
            generate_options o;
            o.eos = {eos};
            o.max_tokens = 12;
            philox4x32 rng(seed, t);
            const generation g = generate(model, {}, ch, o, rng);
            ended[t] += g.reason == stop_reason::eos;
        }
    };
    std::thread a(run, 0), b(run, 1);
    a.join();
    b.join();
    CHECK(ended[0] == 20);  // every run ended with eos within its budget
    CHECK(ended[1] == 20);
    CHECK(proto.compiled().cached().first > 0);
}

TEST_CASE("thread_pool runs each part exactly once, call after call, on threads started once", "[batch][executor]")
{
    CHECK_THROWS_MATCHES(thread_pool(0), invalid_parameter,
                         Message("thread_pool: threads must be at least 1 (the calling thread)"));
    for (std::size_t threads = 1; threads <= 4; ++threads)
    {
        INFO(threads << " threads");
        thread_pool pool(threads);
        CHECK(pool.size() == threads);
        std::atomic<int> runs[8] = {};
        std::set<std::thread::id> seen;
        std::mutex seen_mutex;
        for (std::size_t call = 0; call < 3000; ++call)
        {
            const std::size_t n = call % 9;
            pool(n, [&](std::size_t part) {
                ++runs[part];
                if (call % 97 == 0)
                {
                    const std::lock_guard<std::mutex> lock(seen_mutex);
                    seen.insert(std::this_thread::get_id());
                }
            });
            for (std::size_t p = 0; p < 8; ++p)
            {
                REQUIRE(runs[p].exchange(0) == (p < n ? 1 : 0));
            }
        }
        CHECK(seen.size() <= threads);  // no thread but the pool's and the caller's
    }
}

TEST_CASE("thread_pool: a part that throws on the calling thread propagates once no worker runs a part",
          "[batch][executor]")
{
    thread_pool pool(2);
    const auto caller = std::this_thread::get_id();
    for (int round = 0; round < 20; ++round)
    {
        std::atomic<bool> thrown{false};
        std::atomic<int> started{0}, finished{0};
        // A worker's part blocks until the caller has thrown, so the caller
        // always runs a part (the worker holds one at most) and throws while
        // the worker may be inside one.
        CHECK_THROWS_WITH(pool(3,
                               [&](std::size_t) {
                                   if (std::this_thread::get_id() == caller)
                                   {
                                       thrown = true;
                                       throw std::runtime_error("part failed");
                                   }
                                   ++started;
                                   for (int i = 0; i < 5000 && !thrown; ++i)
                                   {
                                       std::this_thread::sleep_for(std::chrono::milliseconds(1));
                                   }
                                   std::this_thread::sleep_for(std::chrono::milliseconds(2));
                                   ++finished;
                               }),
                          "part failed");
        CHECK(finished == started);  // every part a worker started ended before the call returned
    }
    std::atomic<int> after{0};
    pool(4, [&](std::size_t) { ++after; });  // still usable
    CHECK(after == 4);
}

namespace
{
    // Requests for the slots tests: request q's sampler, options, and its
    // row at generated step k; it is cancelled after cancel_at(q) tokens.
    struct requests
    {
        static constexpr std::size_t vocab = 40;
        vocabulary words;
        requests()
        {
            std::vector<std::string> tokens = {""};  // 0: eos
            for (std::size_t i = 1; i < vocab; ++i)
            {
                // letters, and the two bytes of "é" as tokens of their own
                tokens.push_back(i % 13 == 5 ? "\xC3" : i % 13 == 6 ? "\xA9" : std::string(1, char('a' + i % 7)));
            }
            words = vocabulary(tokens, {0});
        }
        sampler sampler_of(std::size_t q) const
        {
            sampling_params p;
            p.temperature = 0.6 + 0.15 * double(q % 4);
            p.top_k = std::int64_t(q % 3 == 0 ? 0 : 10 + q);
            p.top_p = q % 2 ? 0.9 : 1.0;
            p.repeat_penalty = q % 3 == 1 ? 1.2 : 1.0;
            p.seed = 500 + q;
            return sampler(p);
        }
        sequence_options options_of(std::size_t q) const
        {
            sequence_options o;
            o.max_tokens = 6 + q * 5 % 17;
            o.min_tokens = q % 4;
            o.eos = {0};
            o.vocab = &words;
            o.stop_strings = {q % 2 ? "cd" : "ba", "\xC3\xA9" "a"};
            o.include_stop_str_in_output = q % 3 == 2;
            o.top_logprobs = q % 3;
            o.top_source = q % 2 ? logprob_source::processed : logprob_source::raw;
            o.raw_logprob = q % 4 == 3;
            return o;
        }
        static std::size_t cancel_at(std::size_t q) { return q % 5 == 4 ? 3 : 1000; }
        static xt::xtensor<float, 1> row(std::size_t q, std::size_t k)
        {
            xt::xtensor<float, 1> r = test_helpers::random_row<float>(vocab, 7000 + 100 * q + k, 2.0);
            if (q % 4 == 0 && k >= 4)
            {
                r(0) = 8.0f;  // eos, likely
            }
            return r;
        }
        sequence start(std::size_t q) const
        {
            const std::vector<token_id> prompt = {token_id(1 + q), 2};
            return sequence(sampler_of(q), prompt, options_of(q));
        }
    };

    struct outcome
    {
        std::vector<token_id> tokens;
        std::vector<double> logprobs, raw, tops;  // tops: every top entry's log-probability
        std::string streamed;
        finish_reason why = finish_reason::none;
        bool operator==(const outcome& o) const
        {
            return tokens == o.tokens && logprobs == o.logprobs && streamed == o.streamed && why == o.why &&
                   tops == o.tops && raw.size() == o.raw.size() &&
                   std::equal(raw.begin(), raw.end(), o.raw.begin(), [](double a, double b) {
                       return a == b || (std::isnan(a) && std::isnan(b));
                   });
        }
        void add(const step_result& r)
        {
            if (r.id >= 0)
            {
                tokens.push_back(r.id);
                logprobs.push_back(r.logprob);
                raw.push_back(r.raw_logprob);
                for (const auto& t : r.top)
                {
                    tops.push_back(t.logprob);
                }
            }
            streamed += r.text;
            why = r.finish;
        }
    };

    outcome run_alone(const requests& reqs, std::size_t q)
    {
        sequence s = reqs.start(q);
        outcome o;
        while (!s.finished())
        {
            o.add(s.generated().size() == requests::cancel_at(q) ? s.finish(finish_reason::cancelled)
                                                                  : s.step(requests::row(q, s.generated().size())));
        }
        return o;
    }

    // 8 requests over 4 rows: each step the active ones (at most 4) take
    // random rows in a random slot order, unread rows are NaN; a finished or
    // cancelled request leaves, the next one takes its place.
    template <class Executor>
    std::vector<outcome> run_in_slots(const requests& reqs, std::size_t threads, Executor&& exec, std::uint64_t seed)
    {
        const std::size_t rows = 4, total = 8;
        std::vector<outcome> got(total);
        std::vector<std::unique_ptr<sequence>> seqs(total);
        std::vector<std::size_t> active;
        std::size_t next = 0;
        std::vector<workspace> pool(threads);
        std::vector<step_result> out;
        std::mt19937_64 shuffle(seed);
        xt::xtensor<float, 2> logits = xt::empty<float>(std::array<std::size_t, 2>{rows, requests::vocab});
        while (next < total || !active.empty())
        {
            while (active.size() < rows && next < total)
            {
                seqs[next] = std::make_unique<sequence>(reqs.start(next));
                active.push_back(next++);
            }
            for (std::size_t a = 0; a < active.size();)
            {
                sequence& s = *seqs[active[a]];
                if (s.generated().size() == requests::cancel_at(active[a]))
                {
                    got[active[a]].add(s.finish(finish_reason::cancelled));
                    active.erase(active.begin() + std::ptrdiff_t(a));
                }
                else
                {
                    ++a;
                }
            }
            if (active.empty())
            {
                continue;
            }
            std::shuffle(active.begin(), active.end(), shuffle);
            std::vector<std::size_t> row_of = {0, 1, 2, 3};
            std::shuffle(row_of.begin(), row_of.end(), shuffle);
            logits.fill(std::numeric_limits<float>::quiet_NaN());
            std::vector<slot> slots;
            for (std::size_t a = 0; a < active.size(); ++a)
            {
                const std::size_t q = active[a];
                xt::view(logits, row_of[a], xt::all()) = requests::row(q, seqs[q]->generated().size());
                slots.push_back({row_of[a], seqs[q].get()});
            }
            sample_batch(logits, slots, pool, out, nullptr, exec);
            REQUIRE(out.size() == active.size());
            for (std::size_t a = 0; a < active.size(); ++a)
            {
                got[active[a]].add(out[a]);
            }
            active.erase(std::remove_if(active.begin(), active.end(), [&](std::size_t q) { return seqs[q]->finished(); }),
                         active.end());
        }
        return got;
    }
}

TEST_CASE("sample_batch over slots: requests that come and go draw what each draws alone", "[batch][slots]")
{
    const requests reqs;
    std::vector<outcome> want;
    std::set<finish_reason> reasons;
    for (std::size_t q = 0; q < 8; ++q)
    {
        want.push_back(run_alone(reqs, q));
        reasons.insert(want.back().why);
    }
    CHECK(reasons == std::set<finish_reason>{finish_reason::eos, finish_reason::stop_string, finish_reason::length,
                                             finish_reason::cancelled});
    for (std::uint64_t seed = 0; seed < 3; ++seed)
    {
        INFO("shuffle " << seed);
        CHECK(run_in_slots(reqs, 1, serial_executor{}, seed) == want);
        CHECK(run_in_slots(reqs, 3, serial_executor{}, seed) == want);
        CHECK(run_in_slots(reqs, 2, thread_executor{}, seed) == want);
        for (std::size_t threads = 1; threads <= 4; ++threads)
        {
            thread_pool pool(threads);
            CHECK(run_in_slots(reqs, threads, pool, seed) == want);
        }
    }
}

TEST_CASE("sample_batch over slots: a failing slot lets the others step, and bad slots are errors", "[batch][slots][errors]")
{
    const requests reqs;
    std::vector<sequence> seqs;
    const std::vector<token_id> prompt = {1, 2};
    for (std::size_t q = 0; q < 3; ++q)
    {
        sequence_options o = reqs.options_of(q);
        o.min_tokens = 10;  // no stop within the steps below
        o.max_tokens = 20;
        seqs.emplace_back(reqs.sampler_of(q), prompt, o);
    }
    xt::xtensor<float, 2> logits = xt::empty<float>(std::array<std::size_t, 2>{3, requests::vocab});
    for (std::size_t q = 0; q < 3; ++q)
    {
        xt::view(logits, q, xt::all()) = requests::row(q, 0);
    }
    logits(1, 4) = std::numeric_limits<float>::quiet_NaN();
    std::vector<workspace> pool(2);
    std::vector<step_result> out;
    const std::vector<slot> slots = {{2, &seqs[2]}, {1, &seqs[1]}, {0, &seqs[0]}};
    std::vector<std::exception_ptr> errors;
    xt::xtensor<float, 2> good = logits;
    good(1, 4) = 0.5f;
    sample_batch(good, slots, pool, out, &errors);  // out and errors hold a good step's
    REQUIRE(out[1].id >= 0);
    sample_batch(logits, slots, pool, out, &errors);
    REQUIRE(errors.size() == 3);
    CHECK(!errors[0]);
    CHECK(!errors[2]);
    CHECK_THROWS_MATCHES(std::rethrow_exception(errors[1]), invalid_logits, Message("step 1: logits: NaN at index 4"));
    CHECK(out[1].id == -1);
    CHECK(out[0].id == seqs[2].generated()[1]);
    CHECK(seqs[1].generated().size() == 1);  // as before the call
    CHECK(seqs[0].generated().size() == 2);
    sample_batch(good, slots, pool, out, &errors);  // the errors of the last call are cleared
    CHECK(!errors[1]);
    CHECK(seqs[1].generated().size() == 2);
    // without `errors`: the others step, then the lowest failing slot's error names it and its row
    CHECK_THROWS_MATCHES(sample_batch(logits, slots, pool, out), invalid_logits,
                         Message("slot 1 (row 1): step 2: logits: NaN at index 4"));
    CHECK(seqs[0].generated().size() == 4);
    CHECK(seqs[2].generated().size() == 4);
    CHECK(seqs[1].generated().size() == 2);
    // Two failing slots in different parts, on a pool: the lower slot's error, whatever the timing.
    {
        std::vector<sequence> more;
        for (std::size_t q = 0; q < 3; ++q)
        {
            sequence_options o = reqs.options_of(q);
            o.min_tokens = o.max_tokens = 200;
            more.emplace_back(reqs.sampler_of(q), prompt, o);
        }
        xt::xtensor<float, 2> two_bad = good;
        two_bad(0, 1) = two_bad(2, 3) = std::numeric_limits<float>::quiet_NaN();
        const std::vector<slot> spread = {{2, &more[0]}, {1, &more[1]}, {0, &more[2]}};
        thread_pool threads(2);
        for (int call = 0; call < 50; ++call)
        {
            CHECK_THROWS_MATCHES(sample_batch(two_bad, spread, pool, out, nullptr, threads), invalid_logits,
                                 Message("slot 0 (row 2): step 0: logits: NaN at index 3"));
        }
        CHECK(more[1].generated().size() == 50);
    }

    // Checked before any row: nothing steps.
    const auto bad = [&](std::vector<slot> s) { sample_batch(logits, s, pool, out, &errors); };
    CHECK_THROWS_MATCHES(bad({{0, &seqs[0]}, {2, &seqs[2]}, {0, &seqs[0]}}), invalid_parameter,
                         Message("sample_batch: slot 2 repeats the sequence of slot 0"));
    CHECK_THROWS_MATCHES(bad({{0, &seqs[0]}, {1, nullptr}}), invalid_parameter,
                         Message("sample_batch: slot 1 has no sequence"));
    CHECK_THROWS_MATCHES(bad({{0, &seqs[0]}, {3, &seqs[2]}}), invalid_parameter,
                         Message("sample_batch: slot 1 reads row 3 of a batch of 3"));
    seqs[2].finish(finish_reason::cancelled);
    CHECK_THROWS_MATCHES(bad({{0, &seqs[0]}, {2, &seqs[2]}}), invalid_use,
                         Message("sample_batch: slot 1's sequence has ended (cancelled)"));
    CHECK_THROWS_MATCHES(sample_batch(logits, slots, span<workspace>(), out), invalid_parameter,
                         Message("sample_batch: the workspace pool is empty (give one per thread)"));
    CHECK_THROWS_MATCHES(sample_batch(xt::xtensor<float, 1>(requests::row(0, 0)), slots, pool, out), invalid_logits,
                         Message("sample_batch: logits must be 2-D [batch, vocab], got 1-D"));
    CHECK(seqs[0].generated().size() == 4);
    // The marks of the rejected calls are cleared: the same sequences step again.
    sample_batch(logits, std::vector<slot>{{0, &seqs[0]}}, pool, out);
    CHECK(seqs[0].generated().size() == 5);
    sample_batch(logits, std::vector<slot>{}, pool, out);
    CHECK(out.empty());
}

namespace
{
    // Request q's draft once g tokens are generated: (q + g) % 4 ids of its own stream.
    std::vector<token_id> draft_of(std::size_t q, std::size_t g)
    {
        philox4x32 r(900 + q, g);
        std::vector<token_id> d((q + g) % 4);
        for (auto& t : d)
        {
            t = token_id(random_bits(32, r) % requests::vocab);
        }
        return d;
    }
    verify_options rule_of(std::size_t q)
    {
        verify_options o;
        o.rule = q % 3 == 0 ? verify_rule::standard : q % 3 == 1 ? verify_rule::greedy : verify_rule::typical;
        return o;
    }
    constexpr std::size_t most_drafted = 3;

    outcome drafts_alone(const requests& reqs, std::size_t q, bool with_q)
    {
        sequence s = reqs.start(q);
        const verify_options o = rule_of(q);
        outcome out;
        while (!s.finished())
        {
            const std::size_t g = s.generated().size();
            const std::vector<token_id> draft = draft_of(q, g);
            xt::xtensor<float, 2> rows = xt::empty<float>({draft.size() + 1, requests::vocab});
            for (std::size_t j = 0; j <= draft.size(); ++j)
            {
                xt::view(rows, j, xt::all()) = requests::row(q, g + j);
            }
            xt::xtensor<double, 2> probs = xt::empty<double>({draft.size(), requests::vocab});
            probs.fill(1.0 / double(requests::vocab));
            for (const auto& r : with_q ? s.step_draft(rows, draft, probs, o) : s.step_draft(rows, draft, o))
            {
                out.add(r);
            }
        }
        return out;
    }

    // 8 requests over 4 rows of [4, K + 1, V], in random rows and slot order; unread rows are NaN.
    template <class Executor>
    std::vector<outcome> drafts_in_slots(const requests& reqs, std::size_t threads, Executor&& exec, std::uint64_t seed,
                                         bool with_q)
    {
        const std::size_t rows = 4, total = 8;
        std::vector<outcome> got(total);
        std::vector<std::unique_ptr<sequence>> seqs(total);
        std::vector<std::vector<token_id>> drafts(total);
        std::vector<verify_options> rules(total);
        std::vector<std::size_t> active;
        std::size_t next = 0;
        std::vector<workspace> pool(threads);
        std::vector<span<const step_result>> out;
        std::mt19937_64 shuffle(seed);
        xt::xtensor<float, 3> logits = xt::empty<float>({rows, most_drafted + 1, requests::vocab});
        xt::xtensor<double, 3> probs = xt::empty<double>({rows, most_drafted, requests::vocab});
        probs.fill(1.0 / double(requests::vocab));
        while (next < total || !active.empty())
        {
            while (active.size() < rows && next < total)
            {
                seqs[next] = std::make_unique<sequence>(reqs.start(next));
                rules[next] = rule_of(next);
                active.push_back(next++);
            }
            std::shuffle(active.begin(), active.end(), shuffle);
            std::vector<std::size_t> row_of = {0, 1, 2, 3};
            std::shuffle(row_of.begin(), row_of.end(), shuffle);
            logits.fill(std::numeric_limits<float>::quiet_NaN());
            std::vector<draft_slot> slots;
            for (std::size_t a = 0; a < active.size(); ++a)
            {
                const std::size_t q = active[a];
                const std::size_t g = seqs[q]->generated().size();
                drafts[q] = draft_of(q, g);
                for (std::size_t j = 0; j <= drafts[q].size(); ++j)
                {
                    xt::view(logits, row_of[a], j, xt::all()) = requests::row(q, g + j);
                }
                slots.push_back({row_of[a], seqs[q].get(), drafts[q], &rules[q]});
            }
            if (with_q)
            {
                step_draft_batch(logits, probs, slots, pool, out, nullptr, exec);
            }
            else
            {
                step_draft_batch(logits, slots, pool, out, nullptr, exec);
            }
            REQUIRE(out.size() == active.size());
            for (std::size_t a = 0; a < active.size(); ++a)
            {
                for (const auto& r : out[a])
                {
                    got[active[a]].add(r);
                }
            }
            active.erase(std::remove_if(active.begin(), active.end(), [&](std::size_t q) { return seqs[q]->finished(); }),
                         active.end());
        }
        return got;
    }
}

TEST_CASE("step_draft_batch: requests verify their drafts in slots and emit what each emits alone", "[batch][slots][speculative]")
{
    const requests reqs;
    for (const bool with_q : {false, true})
    {
        INFO("draft_probs " << with_q);
        std::vector<outcome> want;
        for (std::size_t q = 0; q < 8; ++q)
        {
            want.push_back(drafts_alone(reqs, q, with_q));
        }
        for (std::uint64_t seed = 0; seed < 2; ++seed)
        {
            INFO("shuffle " << seed);
            CHECK(drafts_in_slots(reqs, 1, serial_executor{}, seed, with_q) == want);
            CHECK(drafts_in_slots(reqs, 3, serial_executor{}, seed, with_q) == want);
            CHECK(drafts_in_slots(reqs, 2, thread_executor{}, seed, with_q) == want);
            thread_pool pool(3);
            CHECK(drafts_in_slots(reqs, 3, pool, seed, with_q) == want);
        }
    }
    // Errors: checked before any slot, and a failing slot names itself.
    std::vector<sequence> seqs;
    const std::vector<token_id> prompt = {1, 2};
    for (std::size_t q = 0; q < 2; ++q)
    {
        sequence_options o = reqs.options_of(q);
        o.min_tokens = o.max_tokens = 50;
        seqs.emplace_back(reqs.sampler_of(q), prompt, o);
    }
    xt::xtensor<float, 3> logits = xt::zeros<float>({std::size_t(2), std::size_t(3), requests::vocab});
    const std::vector<token_id> two = {1, 2}, three = {1, 2, 3};
    std::vector<workspace> pool(2);
    std::vector<span<const step_result>> out;
    const auto flat = xt::xtensor<float, 2>(xt::zeros<float>({std::size_t(2), requests::vocab}));
    CHECK_THROWS_MATCHES(step_draft_batch(flat, std::vector<draft_slot>{}, pool, out), invalid_logits,
                         Message("step_draft_batch: target rows must be 3-D [batch, k + 1, vocab], got 2-D"));
    CHECK_THROWS_MATCHES(step_draft_batch(logits, std::vector<draft_slot>{{0, &seqs[0], three, nullptr}}, pool, out),
                         invalid_parameter, Message("step_draft_batch: slot 0's draft has 3 tokens, more than the 2 the rows hold"));
    CHECK_THROWS_MATCHES(step_draft_batch(logits, std::vector<draft_slot>{{0, &seqs[0], two, nullptr}, {1, &seqs[0], two, nullptr}},
                                          pool, out),
                         invalid_parameter, Message("step_draft_batch: slot 1 repeats the sequence of slot 0"));
    CHECK_THROWS_MATCHES(step_draft_batch(logits, std::vector<draft_slot>{{0, &seqs[0], two, nullptr}}, span<workspace>(), out),
                         invalid_parameter, Message("step_draft_batch: the workspace pool is empty (give one per thread)"));
    const xt::xtensor<double, 3> wrong_q = xt::zeros<double>({std::size_t(2), std::size_t(3), requests::vocab});
    CHECK_THROWS_MATCHES(step_draft_batch(logits, wrong_q, std::vector<draft_slot>{{0, &seqs[0], two, nullptr}}, pool, out),
                         invalid_parameter,
                         Message("step_draft_batch: draft_probs must be [batch, k, vocab] beside rows [batch, k + 1, vocab], got [2, 3, 40]"));
    CHECK(seqs[0].generated().empty());
    logits(1, 1, 5) = std::numeric_limits<float>::quiet_NaN();
    verify_options greedy_rule;
    greedy_rule.rule = verify_rule::greedy;
    const std::vector<token_id> zero = {1};  // a flat row's argmax (eos 0 masked by min_tokens), accepted: row 1 is read
    std::vector<std::exception_ptr> errors;
    step_draft_batch(logits, std::vector<draft_slot>{{0, &seqs[0], zero, &greedy_rule}, {1, &seqs[1], zero, &greedy_rule}}, pool,
                     out, &errors);
    CHECK(!errors[0]);
    REQUIRE(errors[1]);
    CHECK_THROWS_MATCHES(std::rethrow_exception(errors[1]), invalid_logits, Message("step 1: logits: NaN at index 5"));
    CHECK(out[0].size() == 2);
    CHECK(out[1].size() == 0);
    CHECK(seqs[1].generated().empty());
    CHECK_THROWS_MATCHES(step_draft_batch(logits, std::vector<draft_slot>{{1, &seqs[1], zero, &greedy_rule}}, pool, out),
                         invalid_logits, Message("slot 0 (row 1): step 1: logits: NaN at index 5"));
}
