// generate.hpp, beam_search.hpp, vote.hpp: stop reasons, log-probabilities,
// beam search against brute-force enumeration, majority votes.
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <string>

#include <catch2/catch.hpp>
#include <xtensor/xview.hpp>

#include "../tool/table_model.hpp"
#include "helpers.hpp"

using namespace xsampler;
using Catch::Matchers::Message;
using Catch::Matchers::WithinAbs;

namespace
{
    using markov = tool::table_model;

    markov random_markov(std::size_t vocab, std::uint64_t seed, double sigma = 1.5)
    {
        return markov(test_helpers::random_matrix<double>(vocab, vocab, seed * 1000, sigma));
    }

    // Every sequence of up to max_tokens: those ending in eos, and those of
    // length max_tokens without it; their exact log-probabilities and scores.
    std::vector<hypothesis> enumerate(markov& m, token_id start, std::size_t max_tokens, token_id eos, double alpha)
    {
        std::vector<hypothesis> all;
        std::function<void(std::vector<token_id>&, double)> walk = [&](std::vector<token_id>& seq, double lp) {
            const token_id last = seq.empty() ? start : seq.back();
            const auto lsm = log_softmax(xt::view(m.table(), std::size_t(last), xt::all()));
            for (std::size_t v = 0; v < lsm.size(); ++v)
            {
                seq.push_back(token_id(v));
                const double next = lp + lsm(v);
                const double score = alpha == 0.0 ? next : next / std::pow(double(seq.size()), alpha);
                if (token_id(v) == eos)
                {
                    all.push_back({seq, next, score, true});
                }
                else if (seq.size() == max_tokens)
                {
                    all.push_back({seq, next, score, false});
                }
                else
                {
                    walk(seq, next);
                }
                seq.pop_back();
            }
        };
        std::vector<token_id> seq;
        walk(seq, 0.0);
        std::sort(all.begin(), all.end(), [](const hypothesis& a, const hypothesis& b) {
            return a.score > b.score || (a.score == b.score && a.tokens < b.tokens);
        });
        return all;
    }
}

TEST_CASE("generate stops at eos and keeps it, with log-probabilities of both kinds", "[generate]")
{
    auto m = random_markov(6, 1);
    chain c{temperature{0.7}, top_k{4}};
    philox4x32 rng(3);
    generate_options o;
    o.eos = {0};
    o.max_tokens = 200;
    o.top_logprobs = 3;
    o.model_logprobs = true;
    o.entropy = true;
    const auto g = generate(m, {2}, c, o, rng);
    REQUIRE(g.reason == stop_reason::eos);
    REQUIRE(!g.tokens.empty());
    CHECK(g.tokens.back() == 0);
    CHECK(std::count(g.tokens.begin(), g.tokens.end(), 0) == 1);
    CHECK(m.calls() == g.tokens.size());  // the model runs once per token
    REQUIRE(g.logprobs.size() == g.tokens.size());
    // Replay: each log-probability is the log of the final distribution it was
    // drawn from, and of the raw softmax.
    std::vector<token_id> prefix = {2};
    for (std::size_t i = 0; i < g.tokens.size(); ++i)
    {
        const xt::xtensor<double, 1> row = xt::view(m.table(), std::size_t(prefix.back()), xt::all());
        const auto d = test_helpers::as_map(c.final_distribution(row));
        REQUIRE(d.count(g.tokens[i]) == 1);
        CHECK(g.logprobs[i] == std::log(d.at(g.tokens[i])));
        CHECK(g.model_logprobs[i] == log_softmax(row)(std::size_t(g.tokens[i])));
        CHECK(g.entropies[i] == entropy(row));
        REQUIRE(g.top_logprobs[i].size() == 3);
        CHECK(g.top_logprobs[i][0].id == greedy(row));
        CHECK(g.top_logprobs[i][0].logprob >= g.top_logprobs[i][1].logprob);
        CHECK(g.top_logprobs[i][1].logprob >= g.top_logprobs[i][2].logprob);
        prefix.push_back(g.tokens[i]);
    }
}

TEST_CASE("generate: max_tokens truncates and says so, and min_tokens suppresses eos", "[generate]")
{
    // Token 0 (eos) is by far the most likely after every token.
    xt::xtensor<double, 2> table = xt::zeros<double>({4, 4});
    xt::view(table, xt::all(), 0) = 8.0;
    const markov m(table);
    generate_options o;
    o.eos = {0};
    o.max_tokens = 3;
    chain greedy_chain{temperature{0.0}};
    philox4x32 rng(1);
    const auto eos_first = generate(m, {1}, greedy_chain, o, rng);
    CHECK(eos_first.reason == stop_reason::eos);
    CHECK(eos_first.tokens == std::vector<token_id>{0});

    o.min_tokens = 5;  // eos never allowed within 3 tokens
    o.model_logprobs = true;
    const auto truncated = generate(m, {1}, greedy_chain, o, rng);
    CHECK(truncated.reason == stop_reason::max_tokens);
    CHECK(truncated.tokens.size() == 3);
    CHECK(std::count(truncated.tokens.begin(), truncated.tokens.end(), 0) == 0);
    CHECK(truncated.model_logprobs[0] < -7.0);  // raw softmax: the token was unlikely

    o.min_tokens = 2;
    o.max_tokens = 10;
    const auto after_two = generate(m, {1}, greedy_chain, o, rng);
    CHECK(after_two.reason == stop_reason::eos);
    CHECK(after_two.tokens.size() == 3);
    CHECK(after_two.tokens.back() == 0);

    o.max_tokens = 0;
    CHECK(generate(m, {1}, greedy_chain, o, rng).reason == stop_reason::max_tokens);
    CHECK(std::string(to_string(stop_reason::stop_sequence)) == "stop_sequence");
}

TEST_CASE("generate: a model row of the wrong rank or an invalid row is an error naming the step", "[generate][errors]")
{
    const xt::xtensor<double, 2> square = xt::zeros<double>({3, 3});
    chain c{temperature{0.5}};
    philox4x32 rng(1);
    generate_options o;
    o.max_tokens = 5;
    const auto rank2 = [&](token_span) { return square; };
    CHECK_THROWS_MATCHES(generate(rank2, {1}, c, o, rng), invalid_logits,
                         Message("generate: step 0: logits: expected a 1-D row, got 2-D"));
    // Valid rows for two steps, then a NaN.
    const auto third_bad = [&](token_span prefix) {
        xt::xtensor<double, 1> r = {0.0, 1.0, 2.0};
        if (prefix.size() == 3)
        {
            r(1) = std::nan("");
        }
        return r;
    };
    CHECK_THROWS_MATCHES(generate(third_bad, {1}, c, o, rng), invalid_logits,
                         Message("generate: step 2: logits: NaN at index 1"));
    // The sampler that threw is as good as new.
    philox4x32 a(9), b(9);
    chain fresh{temperature{0.5}};
    const auto fine = [&](token_span) { return xt::xtensor<double, 1>{0.0, 1.0, 2.0}; };
    CHECK(generate(fine, {1}, c, o, a).tokens == generate(fine, {1}, fresh, o, b).tokens);
}

TEST_CASE("generate: a stop sequence split across steps ends it", "[generate]")
{
    // A deterministic cycle 1 -> 2 -> 3 -> 1 under greedy decoding.
    xt::xtensor<double, 2> table = xt::zeros<double>({4, 4});
    table(1, 2) = 5.0;
    table(2, 3) = 5.0;
    table(3, 1) = 5.0;
    table(0, 1) = 5.0;
    const markov m(table);
    chain g{temperature{0.0}};
    philox4x32 rng(1);
    generate_options o;
    o.max_tokens = 20;
    o.stop_sequences = {{3, 1, 2}};
    const auto out = generate(m, {0}, g, o, rng);
    CHECK(out.reason == stop_reason::stop_sequence);
    CHECK(out.tokens == std::vector<token_id>{1, 2, 3, 1, 2});
    o.min_tokens = 6;  // the first completion is too early: the next one ends it
    const auto later = generate(m, {0}, g, o, rng);
    CHECK(later.reason == stop_reason::stop_sequence);
    CHECK(later.tokens == std::vector<token_id>{1, 2, 3, 1, 2, 3, 1, 2});
    o.stop_sequences = {{}};
    CHECK_THROWS_MATCHES(generate(m, {0}, g, o, rng), invalid_parameter, Message("generate: stop sequence 0 is empty"));
}

TEST_CASE("beam search equals brute-force enumeration with a wide beam", "[beam]")
{
    for (std::uint64_t seed = 1; seed <= 6; ++seed)
    {
        const std::size_t vocab = 4;
        const std::size_t max_tokens = 4;
        const double alpha = seed % 3 == 0 ? 0.0 : (seed % 3 == 1 ? 1.0 : 0.6);
        auto m = random_markov(vocab, seed, 1.2);
        const auto exhaustive = enumerate(m, 1, max_tokens, 0, alpha);
        beam_options o;
        o.beam_width = 256;  // >= vocab^max_tokens: nothing is ever pruned
        o.max_tokens = max_tokens;
        o.eos = {0};
        o.length_penalty = alpha;
        o.n_best = 5;
        o.early_stopping = seed % 2 == 0;
                const auto got = beam_search(m, {1}, o);
        INFO("seed " << seed << " alpha " << alpha);
        REQUIRE(got.size() == 5);
        for (std::size_t i = 0; i < got.size(); ++i)
        {
            CHECK(got[i].tokens == exhaustive[i].tokens);
            CHECK(got[i].logprob == exhaustive[i].logprob);
            CHECK(got[i].score == exhaustive[i].score);
            CHECK(got[i].finished == exhaustive[i].finished);
        }
        CHECK(m.calls() <= max_tokens);  // once per step, all beams in one batch
    }
}

TEST_CASE("every beam's reported log-probability is its sequence's probability", "[beam]")
{
    auto m = random_markov(12, 9, 2.0);
    for (const std::size_t width : {1, 2, 3, 5})
    {
        beam_options o;
        o.beam_width = width;
        o.n_best = width;
        o.max_tokens = 7;
        o.eos = {0, 5};
                const std::size_t before = m.calls();
        const auto got = beam_search(m, {3}, o);
        CHECK(m.calls() - before <= 7);
        for (const auto& h : got)
        {
            double lp = 0.0;
            token_id last = 3;
            for (const token_id t : h.tokens)
            {
                lp += log_softmax(xt::view(m.table(), std::size_t(last), xt::all()))(std::size_t(t));
                last = t;
            }
            CHECK(h.logprob == lp);
            CHECK(h.finished == (h.tokens.back() == 0 || h.tokens.back() == 5));
            CHECK(h.score == h.logprob / double(h.tokens.size()));
            CHECK(h.tokens.size() <= 7);
        }
        for (std::size_t i = 1; i < got.size(); ++i)
        {
            CHECK(got[i - 1].score >= got[i].score);
        }
    }
    // Width 1 without eos is greedy decoding.
    beam_options o;
    o.beam_width = 1;
    o.max_tokens = 5;
    const auto beam1 = beam_search(m, {3}, o);
    chain g{temperature{0.0}};
    philox4x32 rng(1);
    generate_options go;
    go.max_tokens = 5;
    CHECK(beam1[0].tokens == generate(m, {3}, g, go, rng).tokens);
    CHECK_FALSE(beam1[0].finished);
}

TEST_CASE("beam search: a certain sentence scores 0 at any length penalty (found by fuzz_decode)", "[beam]")
{
    const auto certain = [](const std::vector<std::vector<token_id>>& prefixes) {
        return xt::xtensor<double, 2>(xt::zeros<double>({prefixes.size(), std::size_t(1)}));
    };
    beam_options b;
    b.beam_width = 1;
    b.max_tokens = 2;
    for (const double alpha : {-2000.0, -1e300, 1e300, 1.0})
    {
        b.length_penalty = alpha;
        const auto found = beam_search(certain, {0}, b);
        REQUIRE(found.size() == 1);
        CHECK(found[0].logprob == 0.0);
        CHECK(found[0].score == 0.0);
    }
}

TEST_CASE("beam search options are validated", "[beam][errors]")
{
    auto m = random_markov(4, 2);
    beam_options o;
    o.n_best = 5;
    o.beam_width = 4;
    CHECK_THROWS_MATCHES(beam_search(m, {1}, o), invalid_parameter,
                         Message("beam_search: need 1 <= n_best <= beam_width, got n_best 5, beam_width 4"));
    o.n_best = 1;
    o.max_tokens = 0;
    CHECK_THROWS_AS(beam_search(m, {1}, o), invalid_parameter);
    o.max_tokens = 3;
    o.length_penalty = std::nan("");
    CHECK_THROWS_AS(beam_search(m, {1}, o), invalid_parameter);
}

TEST_CASE("beam search: an invalid row names the step and the beam, and beam_width is bounded", "[beam][errors]")
{
    // Two live beams from the first step on; at step 3 (prefixes of 1 + 3
    // tokens) beam 1's row has a NaN at index 2.
    std::size_t calls = 0;
    const auto nan_at_step_3 = [&](const std::vector<std::vector<token_id>>& prefixes) {
        ++calls;
        xt::xtensor<double, 2> out = xt::zeros<double>({prefixes.size(), std::size_t(4)});
        xt::view(out, xt::all(), 1) = 1.0;
        xt::view(out, xt::all(), 3) = 0.5;
        if (prefixes[0].size() == 4)
        {
            out(1, 2) = std::nan("");
        }
        return out;
    };
    beam_options o;
    o.beam_width = 2;
    o.max_tokens = 6;
    CHECK_THROWS_MATCHES(beam_search(nan_at_step_3, {1}, o), invalid_logits,
                         Message("beam_search: step 3, beam 1: logits: NaN at index 2"));
    CHECK(calls == 4);

    // 2 x beam_width must not wrap: the bound is token_id's max / 2, checked
    // before the model runs.
    auto m = random_markov(4, 3);
    const std::size_t bound = std::size_t(std::numeric_limits<token_id>::max()) / 2;
    CHECK(max_beam_width == bound);
    for (const std::size_t width : {bound + 1, std::numeric_limits<std::size_t>::max()})
    {
        o.beam_width = width;
        CHECK_THROWS_MATCHES(beam_search(m, {1}, o), invalid_parameter,
                             Message("beam_search: beam_width must be at most " + std::to_string(bound) + ", got " +
                                     std::to_string(width)));
    }
    CHECK(m.calls() == 0);
    // A beam as wide as the bound runs, allocating only for the beams that
    // live (64 here), and equals a beam that is merely wide enough.
    o.eos = {0};
    o.max_tokens = 3;
    o.n_best = 4;
    o.beam_width = bound;
    const auto widest = beam_search(m, {1}, o);
    o.beam_width = 64;
    const auto wide = beam_search(m, {1}, o);
    REQUIRE(widest.size() == wide.size());
    for (std::size_t i = 0; i < wide.size(); ++i)
    {
        CHECK(widest[i].tokens == wide[i].tokens);
        CHECK(widest[i].logprob == wide[i].logprob);
        CHECK(widest[i].score == wide[i].score);
    }
}

TEST_CASE("majority vote: winner, agreement, distinct answers, runner-up, ties", "[vote]")
{
    const std::vector<std::string> answers = {"42", "41", "42", "7", "42", "41"};
    const auto r = majority_vote(answers);
    CHECK(r.answer == "42");
    CHECK(r.votes == 3);
    CHECK(r.total == 6);
    CHECK(r.agreement == 0.5);
    CHECK(r.distinct == 3);
    REQUIRE(r.runner_up);
    CHECK(*r.runner_up == "41");
    CHECK(r.runner_up_votes == 2);

    const auto tie = majority_vote(std::vector<int>{3, 5, 5, 3});
    CHECK(tie.answer == 3);  // equal votes: the first to appear wins
    CHECK(*tie.runner_up == 5);
    CHECK(tie.agreement == 0.5);

    const auto unanimous = majority_vote(std::vector<int>{9, 9, 9});
    CHECK(unanimous.agreement == 1.0);
    CHECK_FALSE(unanimous.runner_up);
    CHECK_THROWS_MATCHES(majority_vote(std::vector<int>{}), invalid_parameter,
                         Message("majority_vote: no answers to vote on"));
}

TEST_CASE("self-consistency draws independent, reproducible streams", "[vote]")
{
    // Each sample: a die roll biased toward 4 by a chain over fixed logits.
    const auto logits = test_helpers::logits_of<double>({0.1, 0.1, 0.1, 0.1, 0.5, 0.1});
    chain c{};
    const auto roll = [&](philox4x32& rng) { return int(c.sample(logits, {}, rng).id); };
    const auto a = self_consistency(101, 77, roll);
    const auto b = self_consistency(101, 77, roll);
    CHECK(a.answer == 4);
    CHECK(a.votes == b.votes);
    CHECK(a.distinct == b.distinct);
    CHECK(a.agreement > 0.35);
    CHECK(a.agreement < 0.65);
    philox4x32 third(77, 2);
    std::vector<int> replay;
    for (std::uint64_t i = 0; i < 101; ++i)
    {
        philox4x32 rng(77, i);
        replay.push_back(roll(rng));
    }
    CHECK(majority_vote(replay).votes == a.votes);
    CHECK_THROWS_AS(self_consistency(0, 1, roll), invalid_parameter);
}
