// speculative.hpp: verification of draft tokens (the standard, greedy and
// typical rules), against enumeration of the target's own distribution.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <xtensor/xview.hpp>

#include "helpers.hpp"
#include "stats.hpp"

using namespace xsampler;
using Catch::Matchers::Message;

namespace
{
    constexpr std::size_t V = 6;

    /// A toy model: a row that depends on the last token and the length.
    xt::xtensor<double, 1> model_row(const std::vector<token_id>& h, double a, double b, double scale)
    {
        xt::xtensor<double, 1> r = xt::empty<double>({V});
        const double last = h.empty() ? 0.0 : double(h.back());
        for (std::size_t y = 0; y < V; ++y)
        {
            r(y) = scale * std::cos(a * double(y) + b * last + 0.4 * double(h.size()));
        }
        return r;
    }
    xt::xtensor<double, 1> target_row(const std::vector<token_id>& h) { return model_row(h, 1.3, 0.7, 1.5); }
    xt::xtensor<double, 1> draft_row(const std::vector<token_id>& h) { return model_row(h, 1.1, 0.5, 1.0); }

    /// The target: temperature, top_k and a repetition penalty (its history matters twice).
    sampling_params target_params()
    {
        sampling_params p;
        p.temperature = 0.9;
        p.top_k = 5;
        p.repeat_penalty = 1.3;
        return p;
    }

    /// q as a dense row of V probabilities from a chain's final distribution.
    template <class Chain>
    std::vector<double> dense(Chain& c, const xt::xtensor<double, 1>& row, const token_history& h)
    {
        const distribution d = c.final_distribution(row, h);
        std::vector<double> q(V, 0.0);
        for (std::size_t i = 0; i < d.ids.size(); ++i)
        {
            q[std::size_t(d.ids[i])] = d.probs[i];
        }
        return q;
    }

    /// Inverse CDF over a dense q with one uniform: the draft's own draw.
    token_id draw_from(const std::vector<double>& q, philox4x32& rng)
    {
        const double u = uniform01(rng);
        double run = 0.0;
        token_id last = 0;
        for (std::size_t y = 0; y < q.size(); ++y)
        {
            if (q[y] > 0.0)
            {
                last = token_id(y);
                run += q[y];
                if (run > u)
                {
                    return token_id(y);
                }
            }
        }
        return last;
    }

    /// The target's probability of each text of n tokens after `prompt`,
    /// cell = sum of id * V^j, by enumeration of its final distributions.
    std::vector<double> enumerate_texts(sampler& target, const std::vector<token_id>& prompt, std::size_t n)
    {
        std::vector<double> probs(std::size_t(std::pow(double(V), double(n))), 0.0);
        std::vector<token_id> h = prompt;
        const auto walk = [&](auto& self, double p, std::size_t cell, std::size_t scale) -> void {
            if (h.size() == prompt.size() + n)
            {
                probs[cell] += p;
                return;
            }
            const std::vector<double> next = dense(target, target_row(h), token_history(h, prompt.size()));
            for (std::size_t y = 0; y < V; ++y)
            {
                if (next[y] > 0.0)
                {
                    h.push_back(token_id(y));
                    self(self, p * next[y], cell + y * scale, scale * V);
                    h.pop_back();
                }
            }
        };
        walk(walk, 1.0, 0, 1);
        return probs;
    }

    enum class drafter
    {
        sampled,   // x ~ q, verified with q
        one_hot,   // x = the draft model's argmax, verified without q
        misstated,     // x ~ q, verified as if one-hot: valid too (any fixed proposal is)
        bad_residual   // x ~ q, a test-local verifier that draws a rejection from p: wrong
    };

    /// The classic bug, for the power check: the rule's test, but a rejected
    /// position draws from p itself, not from max(0, p - q).
    std::size_t verify_with_bad_residual(sampler& target, const xt::xtensor<double, 2>& rows,
                                         const std::vector<token_id>& with_draft, std::size_t prompt_length,
                                         const xt::xtensor<double, 2>& q, std::vector<sampled_token>& out,
                                         philox4x32& rng)
    {
        const std::size_t k = rows.shape()[0] - 1, first = with_draft.size() - k;
        out.clear();
        for (std::size_t i = 0; i <= k; ++i)
        {
            const std::vector<token_id> h(with_draft.begin(), with_draft.begin() + std::ptrdiff_t(first + i));
            const xt::xtensor<double, 1> row = xt::view(rows, i, xt::all());
            const std::vector<double> p = dense(target, row, token_history(h, prompt_length));
            if (i < k)
            {
                const std::size_t x = std::size_t(with_draft[first + i]);
                if (uniform01(rng) < p[x] / q(i, x))
                {
                    out.push_back({token_id(x), 0.0});
                    continue;
                }
            }
            out.push_back({draw_from(p, rng), 0.0});
            return i;
        }
        return k;
    }

    /// n tokens of the toy target by speculative decoding (k draft tokens a
    /// call), many times over; the histogram of the texts (cells as
    /// enumerate_texts). accepted/proposed count the draft tokens.
    std::vector<double> speculative_texts(const std::vector<token_id>& prompt, std::size_t n, std::size_t k,
                                          std::size_t runs, drafter how, const verify_options& options,
                                          double* acceptance = nullptr)
    {
        sampler target(target_params());
        chain draft_chain{temperature{1.2}};
        philox4x32 rng(2024, 1), draft_rng(2024, 2);
        std::vector<double> counts(std::size_t(std::pow(double(V), double(n))), 0.0);
        std::vector<sampled_token> out;
        std::size_t accepted = 0, proposed = 0;
        for (std::size_t run = 0; run < runs; ++run)
        {
            std::vector<token_id> h = prompt;
            while (h.size() < prompt.size() + n)
            {
                std::vector<token_id> with_draft = h;
                xt::xtensor<double, 2> q = xt::zeros<double>({k, V});
                xt::xtensor<double, 2> rows = xt::empty<double>({k + 1, V});
                for (std::size_t j = 0; j <= k; ++j)
                {
                    xt::view(rows, j, xt::all()) = target_row(with_draft);
                    if (j == k)
                    {
                        break;
                    }
                    const auto d = draft_row(with_draft);
                    const std::vector<double> qj = dense(draft_chain, d, token_history(with_draft, prompt.size()));
                    std::copy(qj.begin(), qj.end(), &q(j, 0));
                    with_draft.push_back(how == drafter::one_hot ? greedy(d) : draw_from(qj, draft_rng));
                }
                const token_history history(with_draft, prompt.size());
                const std::size_t a =
                    how == drafter::sampled        ? verify_draft(target, rows, history, q, options, out, rng)
                    : how == drafter::bad_residual ? verify_with_bad_residual(target, rows, with_draft, prompt.size(), q, out, rng)
                                                   : verify_draft(target, rows, history, options, out, rng);
                REQUIRE(out.size() == a + 1);
                for (std::size_t j = 0; j < a; ++j)
                {
                    REQUIRE(out[j].id == with_draft[h.size() + j]);
                }
                accepted += a;
                proposed += k;
                for (const auto& t : out)
                {
                    h.push_back(t.id);
                }
            }
            std::size_t cell = 0, scale = 1;
            for (std::size_t j = 0; j < n; ++j, scale *= V)
            {
                cell += std::size_t(h[prompt.size() + j]) * scale;
            }
            counts[cell] += 1.0;
        }
        if (acceptance != nullptr)
        {
            *acceptance = double(accepted) / double(proposed);
        }
        return counts;
    }

    double statistic(const std::vector<double>& counts, const std::vector<double>& probs, std::size_t runs,
                     std::size_t& cells)
    {
        std::vector<double> expected(probs.size());
        cells = 0;
        for (std::size_t i = 0; i < probs.size(); ++i)
        {
            expected[i] = probs[i] * double(runs);
            cells += probs[i] > 0.0;
            if (probs[i] == 0.0)
            {
                REQUIRE(counts[i] == 0.0);  // never a text the target cannot emit
            }
        }
        return test_stats::chi_square(counts, expected);
    }
}

TEST_CASE("verify_draft: the standard rule emits the target's distribution (chi-square over texts, with power)",
          "[speculative][stats]")
{
    const std::vector<token_id> prompt = {1, 4};
    const std::size_t n = 3, runs = 30000;
    sampler target(target_params());
    const std::vector<double> probs = enumerate_texts(target, prompt, n);
    std::size_t cells = 0;
    for (const std::size_t k : {1, 2, 4})
    {
        INFO("k = " << k);
        const auto sampled = speculative_texts(prompt, n, k, runs, drafter::sampled, {});
        CHECK(statistic(sampled, probs, runs, cells) < test_stats::chi_square_bound(cells - 1));
        const auto one_hot = speculative_texts(prompt, n, k, runs, drafter::one_hot, {});
        CHECK(statistic(one_hot, probs, runs, cells) < test_stats::chi_square_bound(cells - 1));
    }
    // A sampled draft verified as if it were one-hot is still exact (any
    // fixed proposal is), only less often accepted.
    double sampled_rate = 0.0, misstated_rate = 0.0;
    speculative_texts(prompt, n, 2, 2000, drafter::sampled, {}, &sampled_rate);
    const auto misstated = speculative_texts(prompt, n, 2, runs, drafter::misstated, {}, &misstated_rate);
    CHECK(statistic(misstated, probs, runs, cells) < test_stats::chi_square_bound(cells - 1));
    CHECK(misstated_rate < sampled_rate);
    // Power: the same loop with a rejection drawn from p instead of the
    // residual (the classic bug) fails it by far.
    const auto wrong = speculative_texts(prompt, n, 2, runs, drafter::bad_residual, {});
    CHECK(statistic(wrong, probs, runs, cells) > 10 * test_stats::chi_square_bound(cells - 1));
}

TEST_CASE("verify_draft: acceptance equals sum min(p, q) at one position, and the uniforms counted",
          "[speculative][stats]")
{
    // One draft token from q against p, fixed rows: P(accept) = sum_y min(p(y), q(y)).
    const auto p_row = test_helpers::logits_of<double>({0.5, 0.2, 0.15, 0.1, 0.05});
    const std::vector<double> q_probs = {0.2, 0.4, 0.1, 0.25, 0.05};
    double expected = 0.0;
    const distribution p = chain{}.final_distribution(p_row);
    std::vector<double> p_dense(5, 0.0);
    for (std::size_t i = 0; i < p.ids.size(); ++i)
    {
        p_dense[std::size_t(p.ids[i])] = p.probs[i];
    }
    for (std::size_t y = 0; y < 5; ++y)
    {
        expected += std::min(p_dense[y], q_probs[y]);
    }
    CHECK(expected == Approx(0.65).margin(1e-6));
    xt::xtensor<double, 2> rows = xt::empty<double>({std::size_t(2), std::size_t(5)});
    xt::view(rows, 0, xt::all()) = p_row;
    xt::view(rows, 1, xt::all()) = p_row;
    xt::xtensor<double, 2> q = xt::empty<double>({std::size_t(1), std::size_t(5)});
    std::copy(q_probs.begin(), q_probs.end(), q.begin());
    chain target{};
    philox4x32 rng(7, 7), draft_rng(7, 8);
    std::vector<sampled_token> out;
    const std::size_t trials = 100000;
    std::size_t accepted = 0;
    std::vector<double> first(5, 0.0);
    for (std::size_t t = 0; t < trials; ++t)
    {
        const std::vector<token_id> h = {draw_from(q_probs, draft_rng)};
        const std::uint64_t before = rng.position();
        const std::size_t a = verify_draft(target, rows, token_history(h, 0), q, {}, out, rng);
        accepted += a;
        first[std::size_t(out[0].id)] += 1.0;
        // Uniforms: the test, then the residual draw or the bonus's draw.
        REQUIRE(rng.position() == before + 2);
        REQUIRE(out[0].logprob == Approx(std::log(p_dense[std::size_t(out[0].id)])).margin(1e-12));
    }
    const double sd = std::sqrt(expected * (1.0 - expected) / double(trials));
    CHECK(std::abs(double(accepted) / double(trials) - expected) < 6.0 * sd);
    std::vector<double> want(5);
    for (std::size_t y = 0; y < 5; ++y)
    {
        want[y] = p_dense[y] * double(trials);
    }
    CHECK(test_stats::chi_square(first, want) < test_stats::chi_square_bound(4));
}

TEST_CASE("verify_draft: greedy verification follows the target's argmax, draws nothing", "[speculative]")
{
    const std::vector<token_id> prompt = {2};
    sampler target(target_params());
    // The target's greedy text: the most probable token of each final distribution.
    std::vector<token_id> greedy_text = prompt;
    for (int i = 0; i < 8; ++i)
    {
        greedy_text.push_back(target.final_distribution(target_row(greedy_text), token_history(greedy_text, 1)).ids[0]);
    }
    philox4x32 rng(1, 1), drafts(1, 2);
    std::vector<sampled_token> out;
    verify_options greedy_rule;
    greedy_rule.rule = verify_rule::greedy;
    for (int trial = 0; trial < 200; ++trial)
    {
        std::vector<token_id> h = prompt;
        while (h.size() < greedy_text.size())
        {
            const std::size_t k = std::size_t(trial % 4);
            std::vector<token_id> with_draft = h;
            xt::xtensor<double, 2> rows = xt::empty<double>({k + 1, V});
            for (std::size_t j = 0; j <= k; ++j)
            {
                xt::view(rows, j, xt::all()) = target_row(with_draft);
                if (j < k)
                {
                    // Half the time the right token, else a random one.
                    const std::size_t at = with_draft.size();
                    const bool right = uniform01(drafts) < 0.5 && at < greedy_text.size();
                    with_draft.push_back(right ? greedy_text[at] : token_id(random_bits(32, drafts) % V));
                }
            }
            const std::size_t a = verify_draft(target, rows, token_history(with_draft, 1), greedy_rule, out, rng);
            REQUIRE(out.size() == a + 1);
            for (const auto& t : out)
            {
                h.push_back(t.id);
            }
        }
        h.resize(greedy_text.size());
        REQUIRE(h == greedy_text);
    }
    CHECK(rng.position() == 0);
    // A temperature-0 target under the standard rule emits the same tokens.
    sampling_params cold = target_params();
    cold.temperature = 0.0;
    sampler zero(cold);
    std::vector<token_id> h = prompt;
    while (h.size() < greedy_text.size())
    {
        std::vector<token_id> with_draft = h;
        xt::xtensor<double, 2> rows = xt::empty<double>({std::size_t(3), V});
        for (std::size_t j = 0; j < 3; ++j)
        {
            xt::view(rows, j, xt::all()) = target_row(with_draft);
            with_draft.push_back(token_id(random_bits(32, drafts) % V));
        }
        with_draft.pop_back();
        verify_draft(zero, rows, token_history(with_draft, 1), {}, out, rng);
        for (const auto& t : out)
        {
            h.push_back(t.id);
        }
    }
    h.resize(greedy_text.size());
    CHECK(h == greedy_text);
}

TEST_CASE("verify_draft: typical acceptance, its threshold and what it emits (chi-square)", "[speculative][stats]")
{
    // p: 0.5, 0.3, 0.12, 0.08; H = 1.1995 nats; alpha e^-H = 0.3 * 0.30131 = 0.090393;
    // threshold min(0.09, 0.0904) = 0.09: 0 1 2 pass, 3 fails.
    const auto p_row = test_helpers::logits_of<double>({0.5, 0.3, 0.12, 0.08});
    chain target{};
    xt::xtensor<double, 2> rows = xt::empty<double>({std::size_t(2), std::size_t(4)});
    xt::view(rows, 0, xt::all()) = p_row;
    xt::view(rows, 1, xt::all()) = p_row;
    verify_options typical;
    typical.rule = verify_rule::typical;
    std::vector<sampled_token> out;
    philox4x32 rng(3, 3);
    for (token_id x = 0; x < 4; ++x)
    {
        const std::vector<token_id> h = {x};
        const std::uint64_t before = rng.position();
        const std::size_t a = verify_draft(target, rows, token_history(h, 0), typical, out, rng);
        CHECK(a == (x < 3 ? 1u : 0u));
        CHECK(out[0].id == (x < 3 ? x : 0));
        CHECK(rng.position() == before + (x < 3 ? 1u : 0u));  // the bonus's draw only
    }
    // Token 3 (p 0.08) either side of its own probability.
    const std::vector<token_id> three = {3};
    typical.typical_threshold = 0.0799;
    CHECK(verify_draft(target, rows, token_history(three, 0), typical, out, rng) == 1);
    typical.typical_threshold = 0.0801;
    CHECK(verify_draft(target, rows, token_history(three, 0), typical, out, rng) == 0);
    // The entropy's term: on a flat row of 4 (H = ln 4) it is alpha / 4.
    const auto flat = test_helpers::logits_of<double>({0.25, 0.25, 0.25, 0.25});
    xt::view(rows, 0, xt::all()) = flat;
    typical.typical_threshold = 0.9;
    typical.typical_alpha = 0.99;  // threshold 0.2475: every token passes
    CHECK(verify_draft(target, rows, token_history(three, 0), typical, out, rng) == 1);
    typical.typical_alpha = 1.0;  // 0.25, against p = 0.25 as the row rounds it: the same call twice
    const std::size_t at_quarter = verify_draft(target, rows, token_history(three, 0), typical, out, rng);
    typical.typical_threshold = 0.2501;  // the entropy term, 0.25, is still the smaller
    CHECK(verify_draft(target, rows, token_history(three, 0), typical, out, rng) == at_quarter);
    typical.typical_alpha = 0.5;  // 0.125: every token passes
    CHECK(verify_draft(target, rows, token_history(three, 0), typical, out, rng) == 1);
    typical.typical_threshold = 0.2;  // min(0.2, 0.125): passes
    CHECK(verify_draft(target, rows, token_history(three, 0), typical, out, rng) == 1);
    typical.typical_threshold = 0.9;
    xt::view(rows, 0, xt::all()) = test_helpers::logits_of<double>({0.7, 0.1, 0.1, 0.1});
    // H = 0.9404; alpha e^-H = 0.5 * 0.3905 = 0.195 > 0.1: token 3 fails, token 0 passes.
    CHECK(verify_draft(target, rows, token_history(three, 0), typical, out, rng) == 0);
    CHECK(out[0].id == 0);
    // What it emits at k = 1 with x ~ q: P(y) = q(y) [p(y) >= t] + [y = argmax] sum of q over the failing tokens.
    xt::view(rows, 0, xt::all()) = p_row;
    typical = verify_options();
    typical.rule = verify_rule::typical;
    const std::vector<double> q = {0.1, 0.2, 0.3, 0.4};
    const std::vector<double> expected = {0.1 + 0.4, 0.2, 0.3, 0.0};
    std::vector<double> observed(4, 0.0), want(4);
    philox4x32 draft_rng(3, 4);
    const std::size_t trials = 40000;
    for (std::size_t t = 0; t < trials; ++t)
    {
        const std::vector<token_id> h = {draw_from(q, draft_rng)};
        verify_draft(target, rows, token_history(h, 0), typical, out, rng);
        observed[std::size_t(out[0].id)] += 1.0;
    }
    for (std::size_t y = 0; y < 4; ++y)
    {
        want[y] = expected[y] * double(trials);
    }
    CHECK(observed[3] == 0.0);
    CHECK(test_stats::chi_square(observed, want) < test_stats::chi_square_bound(2));
}

TEST_CASE("verify_draft: a constrained target never emits outside its language, whatever the draft",
          "[speculative][constraint]")
{
    // Tokens: a, b, ab, ba, x, eos; the language (ab)+.
    const auto vocab = std::make_shared<const vocabulary>(std::vector<std::string>{"a", "b", "ab", "ba", "x", ""},
                                                          std::vector<token_id>{5});
    const auto index = std::make_shared<const vocabulary_index>(vocab);
    auto target = chain{regex_constraint(index, "(ab)+"), temperature{1.0}};
    philox4x32 rng(11, 0), drafts(11, 1);
    std::vector<sampled_token> out;
    for (int trial = 0; trial < 300; ++trial)
    {
        std::vector<token_id> h;
        bool ended = false;
        while (!ended && h.size() < 12)
        {
            const std::size_t k = 1 + std::size_t(trial % 3);
            std::vector<token_id> with_draft = h;
            std::size_t k_drafted = 0;
            for (; k_drafted < k && (with_draft.empty() || with_draft.back() != 5); ++k_drafted)
            {
                with_draft.push_back(token_id(random_bits(32, drafts) % 6));  // a drafter stops at eos
            }
            const xt::xtensor<double, 2> rows = xt::zeros<double>({k_drafted + 1, std::size_t(6)});
            verify_options stop_at_eos;
            stop_at_eos.eos = {5};
            const std::size_t a = verify_draft(target, rows, token_history(with_draft, 0), stop_at_eos, out, rng);
            REQUIRE(out.size() == a + (a > 0 && out[a - 1].id == 5 ? 0 : 1));
            for (const auto& t : out)
            {
                h.push_back(t.id);
                if (t.id == 5)
                {
                    ended = true;
                    break;
                }
            }
        }
        // The text read by a fresh constraint: every token allowed, eos only when complete.
        constraint check = regex_constraint(index, "(ab)+");
        for (const token_id id : h)
        {
            REQUIRE_NOTHROW(check.advance(id));
        }
    }
}

TEST_CASE("verify_draft: errors name the problem and leave the target usable", "[speculative][errors]")
{
    chain target{};
    philox4x32 rng(0);
    std::vector<sampled_token> out;
    const xt::xtensor<double, 2> rows = xt::zeros<double>({std::size_t(3), std::size_t(4)});
    const std::vector<token_id> h = {0, 1, 2};
    const token_history two_generated(h, 1);
    xt::xtensor<double, 2> q = xt::zeros<double>({std::size_t(2), std::size_t(4)});
    q(0, 1) = 1.0;
    q(1, 2) = 1.0;
    CHECK(verify_draft(target, rows, two_generated, q, {}, out, rng) <= 2);
    const xt::xtensor<double, 1> flat = xt::zeros<double>({std::size_t(4)});
    CHECK_THROWS_WITH(verify_draft(target, flat, two_generated, {}, out, rng),
                      "verify_draft: target rows must be [k + 1, vocab], got 1-D");
    CHECK_THROWS_WITH(verify_draft(target, xt::xtensor<double, 2>::from_shape({0, 4}), two_generated, {}, out, rng),
                      "verify_draft: target rows must be [k + 1, vocab], got 2-D with no row");
    CHECK_THROWS_WITH(verify_draft(target, rows, token_history(h, 2), {}, out, rng),
                      "verify_draft: 2 draft tokens (3 target rows) but the history has 1 generated tokens");
    const std::vector<token_id> far = {0, 1, 9};
    CHECK_THROWS_WITH(verify_draft(target, rows, token_history(far, 1), {}, out, rng),
                      "verify_draft: draft token 9 is outside the vocabulary of 4");
    CHECK_THROWS_WITH(verify_draft(target, rows, two_generated, xt::xtensor<double, 2>(xt::zeros<double>({3, 4})), {}, out, rng),
                      "verify_draft: draft_probs must be [2, 4] for 3 target rows, got [3, 4]");
    // A drafted token's entry is checked first; the others as a residual reads
    // them (row 0 masks the drafted token 1: it is rejected, the residual reads entry 0).
    xt::xtensor<double, 2> bad = q;
    bad(1, 2) = std::nan("");
    CHECK_THROWS_WITH(verify_draft(target, rows, two_generated, bad, {}, out, rng),
                      "verify_draft: draft_probs row 1: entry 2 is nan, not a probability");
    bad = q;
    bad(0, 0) = -0.5;
    xt::xtensor<double, 2> masked = rows;
    masked(0, 1) = -test_helpers::inf;
    CHECK_THROWS_WITH(verify_draft(target, masked, two_generated, bad, {}, out, rng),
                      "verify_draft: position 0: draft_probs row 0: entry 0 is -0.5, not a probability");
    bad = q;
    bad(0, 1) = 0.0;
    bad(0, 0) = 1.0;
    CHECK_THROWS_WITH(verify_draft(target, rows, two_generated, bad, {}, out, rng),
                      "verify_draft: draft_probs row 0: the draft token 1 has probability 0 (the draft cannot have drawn it)");
    verify_options typical;
    typical.rule = verify_rule::typical;
    typical.typical_threshold = 0.0;
    CHECK_THROWS_WITH(verify_draft(target, rows, two_generated, typical, out, rng),
                      "verify_draft: typical_threshold must be in (0, 1], got 0");
    typical.typical_threshold = 0.09;
    typical.typical_alpha = 1.5;
    CHECK_THROWS_WITH(verify_draft(target, rows, two_generated, typical, out, rng),
                      "verify_draft: typical_alpha must be in (0, 1], got 1.5");
    // A bad row names its position; the positions before it were decided.
    xt::xtensor<double, 2> nan_row = rows;
    nan_row(1, 2) = std::nan("");
    const std::vector<token_id> agree = {0, 0, 0};  // a uniform row accepts any draft at probability 1/4
    verify_options greedy_rule;
    greedy_rule.rule = verify_rule::greedy;
    CHECK_THROWS_WITH(verify_draft(target, nan_row, token_history(agree, 1), greedy_rule, out, rng),
                      "verify_draft: position 1: logits: NaN at index 2");
    // The target is usable after every error.
    CHECK(verify_draft(target, rows, two_generated, q, {}, out, rng) <= 2);
}

namespace
{
    /// Logits from probabilities (0 becomes -inf: masked).
    xt::xtensor<double, 2> logits_from(const std::vector<std::vector<double>>& probs)
    {
        xt::xtensor<double, 2> out = xt::empty<double>({probs.size(), probs[0].size()});
        for (std::size_t i = 0; i < probs.size(); ++i)
        {
            for (std::size_t y = 0; y < probs[i].size(); ++y)
            {
                out(i, y) = probs[i][y] > 0.0 ? std::log(probs[i][y]) : -test_helpers::inf;
            }
        }
        return out;
    }

    std::vector<token_id> ids_of(const std::vector<sampled_token>& out)
    {
        std::vector<token_id> ids;
        for (const auto& t : out)
        {
            ids.push_back(t.id);
        }
        return ids;
    }
}

TEST_CASE("verify_draft: FlashInfer's and transformers' hand-made cases", "[speculative][parity]")
{
    chain target{};
    std::vector<sampled_token> out;
    // FlashInfer's chain_speculative_sampling docstring: draft [[.1 .2 .3 .4], [.2 .3 .4 .1]],
    // drafted [2, 1], target [[0 .1 .6 .3], [1 0 0 0], [.7 .1 .1 .1]]: token 2 is accepted
    // surely (.6 >= .3), token 1 rejected surely (p 0), the residual [.8 0 0 0] gives 0.
    const xt::xtensor<double, 2> draft = {{.1, .2, .3, .4}, {.2, .3, .4, .1}};
    const auto rows = logits_from({{0, .1, .6, .3}, {1, 0, 0, 0}, {.7, .1, .1, .1}});
    const std::vector<token_id> h = {2, 1};
    for (std::uint64_t seed = 0; seed < 50; ++seed)
    {
        philox4x32 rng(seed);
        CHECK(verify_draft(target, rows, token_history(h, 0), draft, {}, out, rng) == 1);
        CHECK(ids_of(out) == std::vector<token_id>{2, 0});
    }
    // transformers' test_speculative_sampling: V 10, drafted [1, 4, 5] with draft logits
    // +10 on the drafted token and -10 elsewhere; the target's rows 0 and 1 equal the
    // draft's (accepted surely), row 2 is -inf but +10 on token 8: [1, 4, 8], 2 accepted.
    xt::xtensor<double, 2> draft_logits = xt::full_like(xt::xtensor<double, 2>::from_shape({3, 10}), -10.0);
    draft_logits(0, 1) = draft_logits(1, 4) = draft_logits(2, 5) = 10.0;
    xt::xtensor<double, 2> q = xt::empty<double>({3, 10});
    for (std::size_t i = 0; i < 3; ++i)
    {
        const xt::xtensor<double, 1> row = xt::view(draft_logits, i, xt::all());
        xt::view(q, i, xt::all()) = softmax(row);
    }
    xt::xtensor<double, 2> t_rows = xt::zeros<double>({4, 10});
    xt::view(t_rows, 0, xt::all()) = xt::view(draft_logits, 0, xt::all());
    xt::view(t_rows, 1, xt::all()) = xt::view(draft_logits, 1, xt::all());
    xt::view(t_rows, 2, xt::all()) = -test_helpers::inf;
    t_rows(2, 8) = 10.0;
    const std::vector<token_id> drafted = {8, 0, 3, 9, 8, 1, 4, 5};  // the prompt, then the draft
    for (std::uint64_t seed = 0; seed < 50; ++seed)
    {
        philox4x32 rng(seed);
        CHECK(verify_draft(target, t_rows, token_history(drafted, 5), q, {}, out, rng) == 2);
        CHECK(ids_of(out) == std::vector<token_id>{1, 4, 8});
    }
    // FlashInfer's test_chain_spec_residual_has_one_nonzero_index (V 1025, k 1): draft
    // one-hot on 0, target row 0 one-hot on V - 1: [V - 1]; and
    // test_chain_spec_onehot_target_is_exact: a one-hot target on the drafted ids (and
    // on 7 at the bonus) gives them all, then 7.
    const std::size_t big = 1025;
    xt::xtensor<double, 2> one_hot = xt::full_like(xt::xtensor<double, 2>::from_shape({2, big}), -test_helpers::inf);
    one_hot(0, big - 1) = 0.0;
    one_hot(1, 0) = 0.0;
    const std::vector<token_id> zero = {0};
    philox4x32 rng(1);
    CHECK(verify_draft(target, one_hot, token_history(zero, 0), {}, out, rng) == 0);
    CHECK(ids_of(out) == std::vector<token_id>{token_id(big - 1)});
    xt::xtensor<double, 2> exact = xt::full_like(xt::xtensor<double, 2>::from_shape({4, big}), -test_helpers::inf);
    const std::vector<token_id> three = {600, 3, 1024};
    for (std::size_t i = 0; i < 3; ++i)
    {
        exact(i, std::size_t(three[i])) = 0.0;
    }
    exact(3, 7) = 0.0;
    CHECK(verify_draft(target, exact, token_history(three, 0), {}, out, rng) == 3);
    CHECK(ids_of(out) == std::vector<token_id>{600, 3, 1024, 7});
    // test_chain_spec_all_draft_rejected (V 1024): draft uniform on the lower half,
    // target uniform on the upper half: the first token is from the upper half.
    const std::size_t half = 512;
    xt::xtensor<double, 2> upper = xt::zeros<double>({std::size_t(2), 2 * half});
    xt::view(upper, xt::all(), xt::range(0, half)) = -test_helpers::inf;
    xt::xtensor<double, 2> lower = xt::zeros<double>({std::size_t(1), 2 * half});
    xt::view(lower, 0, xt::range(0, half)) = 1.0 / double(half);
    for (int i = 0; i < 20; ++i)
    {
        CHECK(verify_draft(target, upper, token_history(zero, 0), lower, {}, out, rng) == 0);
        CHECK(out[0].id >= token_id(half));
    }
}

TEST_CASE("verify_draft: FlashInfer's residual case drawn by its weights (chi-square)", "[speculative][parity][stats]")
{
    // test_chain_spec_residual_normalizer_selects_token: the residual's mass on
    // ids 1, 66, 131, ... with rising weights (here j + 1 on the j-th), the draft
    // one-hot on 0 (which the target does not keep): every draw follows the residual.
    const std::size_t vocab = 1025, cells = 16;
    xt::xtensor<double, 2> rows = xt::full_like(xt::xtensor<double, 2>::from_shape({2, vocab}), -test_helpers::inf);
    double total = 0.0;
    for (std::size_t j = 0; j < cells; ++j)
    {
        rows(0, 1 + 65 * j) = std::log(double(j + 1));
        rows(1, 1 + 65 * j) = 0.0;
        total += double(j + 1);
    }
    chain target{};
    philox4x32 rng(12345, 17);
    std::vector<sampled_token> out;
    const std::vector<token_id> zero = {0};
    const std::size_t trials = 40000;
    std::vector<double> observed(cells, 0.0), expected(cells);
    for (std::size_t t = 0; t < trials; ++t)
    {
        REQUIRE(verify_draft(target, rows, token_history(zero, 0), {}, out, rng) == 0);
        REQUIRE((out[0].id - 1) % 65 == 0);
        observed[std::size_t(out[0].id - 1) / 65] += 1.0;
    }
    for (std::size_t j = 0; j < cells; ++j)
    {
        expected[j] = double(trials) * double(j + 1) / total;
    }
    CHECK(test_stats::chi_square(observed, expected) < test_stats::chi_square_bound(cells - 1));
}

TEST_CASE("verify_draft: vLLM's greedy rejection-sampler cases", "[speculative][parity]")
{
    // tests/v1/sample/test_rejection_sampler.py: logits +100 on the target's
    // token, -100 elsewhere; the bonus is the argmax of the last row.
    struct greedy_case
    {
        const char* name;
        std::vector<token_id> draft, target;  // target: one per position, the bonus last
        std::vector<token_id> expected;
    };
    const std::vector<greedy_case> cases = {
        {"perfect_match", {1, 2, 3}, {1, 2, 3, 4}, {1, 2, 3, 4}},
        {"early_mismatch", {1, 2, 3}, {1, 5, 3, 4}, {1, 5}},
        {"multiple_sequences 0", {1, 2}, {1, 2, 5}, {1, 2, 5}},
        {"multiple_sequences 1", {3}, {3, 4}, {3, 4}},
        {"single_token_sequence", {1}, {1, 2}, {1, 2}},
        {"empty_sequence", {}, {5}, {5}},
        {"multiple_mismatches 0", {1, 2, 3}, {1, 2, 7, 6}, {1, 2, 7}},
        {"multiple_mismatches 1", {4, 5, 6}, {4, 8, 6, 9}, {4, 8}},
        {"parametrized 1", {1}, {2, 3}, {2}},
        {"parametrized 2b", {3, 4}, {3, 4, 7}, {3, 4, 7}},
    };
    chain target{temperature{0.0}};
    verify_options greedy_rule;
    greedy_rule.rule = verify_rule::greedy;
    std::vector<sampled_token> out;
    philox4x32 rng(0);
    for (const auto& c : cases)
    {
        INFO(c.name);
        xt::xtensor<double, 2> rows = xt::full_like(xt::xtensor<double, 2>::from_shape({c.target.size(), 10}), -100.0);
        for (std::size_t i = 0; i < c.target.size(); ++i)
        {
            rows(i, std::size_t(c.target[i])) = 100.0;
        }
        std::vector<token_id> h = {0};  // a prompt, then the draft
        h.insert(h.end(), c.draft.begin(), c.draft.end());
        CHECK(verify_draft(target, rows, token_history(h, 1), greedy_rule, out, rng) == c.expected.size() - 1);
        CHECK(ids_of(out) == c.expected);
        // The standard rule on this temperature-0 target decides the same.
        CHECK(verify_draft(target, rows, token_history(h, 1), {}, out, rng) == c.expected.size() - 1);
        CHECK(ids_of(out) == c.expected);
    }
}

TEST_CASE("verify_draft: vLLM's typical-acceptance cases", "[speculative][parity]")
{
    // tests/samplers/test_typical_acceptance_sampler.py (V 30000, k 3): a
    // high-entropy target accepts every draft and adds the bonus; a one-hot
    // target rejects drafts that miss it and emits the hot token; drafts
    // matching the first two hot tokens keep them, then the third is the argmax.
    const std::size_t vocab = 30000, k = 5;
    chain target{};
    verify_options typical;
    typical.rule = verify_rule::typical;  // vLLM's engine defaults: 0.09, 0.3
    std::vector<sampled_token> out;
    philox4x32 rng(0), noise(0, 1);
    xt::xtensor<double, 2> flat = xt::empty<double>({k + 1, vocab});
    for (auto& x : flat)
    {
        x = std::log(uniform01(noise) + 1e-3);  // torch.rand as probabilities, unnormalised
    }
    std::vector<token_id> h = {11, 22, 33, 44, 55};
    CHECK(verify_draft(target, flat, token_history(h, 0), typical, out, rng) == k);
    CHECK(out.size() == k + 1);
    xt::xtensor<double, 2> hot = xt::full_like(xt::xtensor<double, 2>::from_shape({k + 1, vocab}), -test_helpers::inf);
    const std::vector<token_id> hot_ids = {7, 8, 9, 10, 11, 12};
    for (std::size_t i = 0; i <= k; ++i)
    {
        hot(i, std::size_t(hot_ids[i])) = 0.0;
    }
    CHECK(verify_draft(target, hot, token_history(h, 0), typical, out, rng) == 0);
    CHECK(ids_of(out) == std::vector<token_id>{7});
    h = {7, 8, 100, 10, 11};
    CHECK(verify_draft(target, hot, token_history(h, 0), typical, out, rng) == 2);
    CHECK(ids_of(out) == std::vector<token_id>{7, 8, 9});
    h.assign(hot_ids.begin(), hot_ids.begin() + std::ptrdiff_t(k));
    CHECK(verify_draft(target, hot, token_history(h, 0), typical, out, rng) == k);
    CHECK(ids_of(out) == hot_ids);
    // test_accept_tokens_set_non_default_posteriors: the zeros of the one-hot
    // target at 1e-5; the defaults reject a draft that misses the hot token, a
    // threshold far below 1e-5 (vLLM's 0; ours must be positive) accepts it.
    xt::xtensor<double, 2> nearly = xt::full_like(hot, std::log(1e-5));
    for (std::size_t i = 0; i <= k; ++i)
    {
        nearly(i, std::size_t(hot_ids[i])) = 0.0;
    }
    h = {1, 2, 3, 4, 5};
    CHECK(verify_draft(target, nearly, token_history(h, 0), typical, out, rng) == 0);
    CHECK(ids_of(out) == std::vector<token_id>{7});
    typical.typical_threshold = 1e-9;
    typical.typical_alpha = 1e-9;
    CHECK(verify_draft(target, nearly, token_history(h, 0), typical, out, rng) == k);
    CHECK(out.size() == k + 1);
}

namespace
{
    /// A tree of two branches from the root, each two deep: the root's
    /// children drawn from q at the prefix (sampled: one after the other,
    /// i.i.d.; one_hot: the draft's two most probable, distinct), each with
    /// one child drawn from q after it (sampled) or its argmax (one_hot).
    /// n tokens of the target by tree verification, many times; the
    /// histogram of the texts. `split` verifies the two branches as two
    /// separate chains, the second against p again after the first's
    /// rejection: the wrong way, for the power check.
    std::vector<double> tree_texts(const std::vector<token_id>& prompt, std::size_t n, std::size_t runs, drafter how,
                                   bool split = false)
    {
        sampler target(target_params());
        chain draft_chain{temperature{1.2}};
        philox4x32 rng(77, 1), draft_rng(77, 2);
        std::vector<double> counts(std::size_t(std::pow(double(V), double(n))), 0.0);
        tree_result result;
        std::vector<sampled_token> out;
        for (std::size_t run = 0; run < runs; ++run)
        {
            std::vector<token_id> h = prompt;
            while (h.size() < prompt.size() + n)
            {
                draft_tree tree{{}, {-1, 0, -1, 2}};
                xt::xtensor<double, 2> q = xt::zeros<double>({std::size_t(4), V});
                xt::xtensor<double, 2> rows = xt::empty<double>({std::size_t(5), V});
                xt::view(rows, 0, xt::all()) = target_row(h);
                const std::vector<double> q0 = dense(draft_chain, draft_row(h), token_history(h, prompt.size()));
                std::vector<token_id> firsts;
                if (how == drafter::one_hot)
                {
                    std::vector<token_id> order(V);
                    std::iota(order.begin(), order.end(), 0);
                    std::stable_sort(order.begin(), order.end(), [&](token_id a, token_id b) { return q0[std::size_t(a)] > q0[std::size_t(b)]; });
                    firsts = {order[0], order[1]};
                }
                else
                {
                    firsts = {draw_from(q0, draft_rng), draw_from(q0, draft_rng)};
                }
                for (std::size_t b = 0; b < 2; ++b)
                {
                    std::vector<token_id> path = h;
                    path.push_back(firsts[b]);
                    std::copy(q0.begin(), q0.end(), &q(2 * b, 0));
                    xt::view(rows, 1 + 2 * b, xt::all()) = target_row(path);
                    const auto d = draft_row(path);
                    const std::vector<double> q1 = dense(draft_chain, d, token_history(path, prompt.size()));
                    std::copy(q1.begin(), q1.end(), &q(2 * b + 1, 0));
                    const token_id second = how == drafter::one_hot ? greedy(d) : draw_from(q1, draft_rng);
                    path.push_back(second);
                    xt::view(rows, 2 + 2 * b, xt::all()) = target_row(path);
                    tree.tokens.push_back(firsts[b]);
                    tree.tokens.push_back(second);
                }
                const token_history history(h, prompt.size());
                if (split)
                {
                    // Branch 0 as a chain; if its first token is rejected, branch 1 against p afresh.
                    for (std::size_t b = 0; b < 2; ++b)
                    {
                        std::vector<token_id> with_draft = h;
                        with_draft.push_back(tree.tokens[2 * b]);
                        with_draft.push_back(tree.tokens[2 * b + 1]);
                        const xt::xtensor<double, 2> chain_rows = xt::concatenate(
                            xt::xtuple(xt::view(rows, xt::range(0, 1), xt::all()), xt::view(rows, xt::range(1 + 2 * b, 3 + 2 * b), xt::all())));
                        const xt::xtensor<double, 2> chain_q = xt::view(q, xt::range(2 * b, 2 * b + 2), xt::all());
                        const std::size_t a = verify_draft(target, chain_rows, token_history(with_draft, prompt.size()),
                                                           chain_q, {}, out, rng);
                        if (a > 0 || b == 1)
                        {
                            break;
                        }
                    }
                    for (const auto& t : out)
                    {
                        h.push_back(t.id);
                    }
                    continue;
                }
                if (how == drafter::one_hot)
                {
                    verify_tree(target, rows, history, tree, {}, result, rng);
                }
                else
                {
                    verify_tree(target, rows, history, tree, q, {}, result, rng);
                }
                REQUIRE(result.tokens.size() == result.accepted() + 1);
                for (std::size_t j = 0; j < result.accepted(); ++j)
                {
                    REQUIRE(result.tokens[j].id == tree.tokens[result.nodes[j]]);
                }
                for (const auto& t : result.tokens)
                {
                    h.push_back(t.id);
                }
            }
            std::size_t cell = 0, scale = 1;
            for (std::size_t j = 0; j < n; ++j, scale *= V)
            {
                cell += std::size_t(h[prompt.size() + j]) * scale;
            }
            counts[cell] += 1.0;
        }
        return counts;
    }
}

TEST_CASE("verify_tree: the standard rule over two branches emits the target's distribution (chi-square, with power)",
          "[speculative][tree][stats]")
{
    const std::vector<token_id> prompt = {3, 0};
    const std::size_t n = 3, runs = 30000;
    sampler target(target_params());
    const std::vector<double> probs = enumerate_texts(target, prompt, n);
    std::size_t cells = 0;
    const auto sampled = tree_texts(prompt, n, runs, drafter::sampled);
    CHECK(statistic(sampled, probs, runs, cells) < test_stats::chi_square_bound(cells - 1));
    const auto one_hot = tree_texts(prompt, n, runs, drafter::one_hot);
    CHECK(statistic(one_hot, probs, runs, cells) < test_stats::chi_square_bound(cells - 1));
    // Power: each branch verified against p on its own (the second not against
    // the residual the first left) is far off.
    const auto split = tree_texts(prompt, n, runs, drafter::sampled, true);
    CHECK(statistic(split, probs, runs, cells) > 10 * test_stats::chi_square_bound(cells - 1));
}

TEST_CASE("verify_tree: a chain-shaped tree is verify_draft, bit for bit, under every rule", "[speculative][tree]")
{
    const std::vector<token_id> prompt = {5, 1};
    chain draft_chain{temperature{1.2}};
    philox4x32 drafts(9, 9);
    for (const verify_rule rule : {verify_rule::standard, verify_rule::greedy, verify_rule::typical})
    {
        verify_options o;
        o.rule = rule;
        sampler a(target_params()), b(target_params());
        philox4x32 rng_a(4, 4), rng_b(4, 4);
        std::vector<sampled_token> out;
        tree_result result;
        for (int trial = 0; trial < 300; ++trial)
        {
            const std::size_t k = std::size_t(trial % 5);
            std::vector<token_id> with_draft = prompt;
            xt::xtensor<double, 2> q = xt::zeros<double>({k, V});
            xt::xtensor<double, 2> rows = xt::empty<double>({k + 1, V});
            draft_tree tree;
            for (std::size_t j = 0; j <= k; ++j)
            {
                xt::view(rows, j, xt::all()) = target_row(with_draft);
                if (j < k)
                {
                    const std::vector<double> qj = dense(draft_chain, draft_row(with_draft), token_history(with_draft, 2));
                    std::copy(qj.begin(), qj.end(), &q(j, 0));
                    with_draft.push_back(draw_from(qj, drafts));
                    tree.tokens.push_back(with_draft.back());
                    tree.parents.push_back(std::ptrdiff_t(j) - 1);
                }
            }
            const bool with_q = trial % 2 == 0;
            const std::size_t accepted = with_q ? verify_draft(a, rows, token_history(with_draft, 2), q, o, out, rng_a)
                                                : verify_draft(a, rows, token_history(with_draft, 2), o, out, rng_a);
            if (with_q)
            {
                verify_tree(b, rows, token_history(prompt, 2), tree, q, o, result, rng_b);
            }
            else
            {
                verify_tree(b, rows, token_history(prompt, 2), tree, o, result, rng_b);
            }
            REQUIRE(result.accepted() == accepted);
            REQUIRE(result.tokens.size() == out.size());
            for (std::size_t j = 0; j < out.size(); ++j)
            {
                REQUIRE(result.tokens[j].id == out[j].id);
                REQUIRE(result.tokens[j].logprob == out[j].logprob);
                if (j < accepted)
                {
                    REQUIRE(result.nodes[j] == j);
                }
            }
            REQUIRE(rng_a.position() == rng_b.position());
        }
    }
}

TEST_CASE("verify_tree: greedy and typical choose among branches, and its errors", "[speculative][tree]")
{
    // Rows as probabilities over 4 tokens: the root's after the prefix, then one per node.
    // Nodes: 0 = token 1 (root), 1 = token 2 (after 0), 2 = token 3 (root), 3 = token 0 (after 2).
    chain target{};
    draft_tree tree{{1, 2, 3, 0}, {-1, 0, -1, 2}};
    const auto rows = logits_from({{.1, .45, .05, .4}, {.2, .2, .5, .1}, {.7, .1, .1, .1}, {.6, .2, .1, .1},
                                   {.25, .25, .25, .25}});
    const std::vector<token_id> prefix = {0};
    tree_result result;
    philox4x32 rng(0);
    verify_options o;
    // Greedy: the root's argmax is 1 (node 0), then after it 2 (node 1), then the argmax 0 of row 2.
    o.rule = verify_rule::greedy;
    verify_tree(target, rows, token_history(prefix, 1), tree, o, result, rng);
    CHECK(result.nodes == std::vector<std::size_t>{0, 1});
    CHECK(ids_of(result.tokens) == std::vector<token_id>{1, 2, 0});
    // Typical (threshold 0.09, alpha 0.3): both branches pass twice (0.45, 0.5;
    // 0.4, 0.6); equal lengths: the larger sum of ln p is branch 2 (0.4 * 0.6 =
    // 0.24 > 0.45 * 0.5 = 0.225); its end is a leaf: the bonus drawn from row 4.
    o.rule = verify_rule::typical;
    verify_tree(target, rows, token_history(prefix, 1), tree, o, result, rng);
    CHECK(result.nodes == std::vector<std::size_t>{2, 3});
    REQUIRE(result.tokens.size() == 3);
    CHECK(result.tokens[0].id == 3);
    CHECK(result.tokens[1].id == 0);
    CHECK(result.tokens[0].logprob == Approx(std::log(0.4)).epsilon(1e-12));
    // A longer branch wins over a better-scored shorter one: node 3 (token 3, p .01 in row 3) fails.
    draft_tree longer{{1, 2, 3, 3}, {-1, 0, -1, 2}};
    const auto rows2 = logits_from({{.1, .45, .05, .4}, {.2, .2, .5, .1}, {.7, .1, .1, .1}, {.6, .35, .04, .01},
                                    {.25, .25, .25, .25}});
    verify_tree(target, rows2, token_history(prefix, 1), longer, o, result, rng);
    CHECK(result.nodes == std::vector<std::size_t>{0, 1});  // branch 2's second token (p .01) fails
    CHECK(ids_of(result.tokens) == std::vector<token_id>{1, 2, result.tokens[2].id});
    // An eos accepted ends the path: no bonus.
    o.eos = {2};
    verify_tree(target, rows2, token_history(prefix, 1), longer, o, result, rng);
    CHECK(ids_of(result.tokens) == std::vector<token_id>{1, 2});
    o.rule = verify_rule::greedy;
    verify_tree(target, rows2, token_history(prefix, 1), longer, o, result, rng);
    CHECK(ids_of(result.tokens) == std::vector<token_id>{1, 2});
    // Errors.
    CHECK_THROWS_WITH(verify_tree(target, rows, token_history(prefix, 1), draft_tree{{1, 2}, {-1}}, o, result, rng),
                      "verify_tree: the tree has 2 tokens but 1 parents");
    CHECK_THROWS_WITH(verify_tree(target, rows, token_history(prefix, 1), draft_tree{{1, 2, 3, 0}, {-1, 2, -1, 2}}, o, result, rng),
                      "verify_tree: node 1's parent 2 is not an earlier node (or -1, the root)");
    CHECK_THROWS_WITH(verify_tree(target, rows, token_history(prefix, 1), draft_tree{{1, 2}, {-1, 0}}, o, result, rng),
                      "verify_tree: 2 draft nodes need 3 target rows, got 5");
    CHECK_THROWS_WITH(verify_tree(target, rows, token_history(prefix, 1), draft_tree{{1, 2, 3, 9}, {-1, 0, -1, 2}}, o, result, rng),
                      "verify_tree: draft token 9 is outside the vocabulary of 4");
    xt::xtensor<double, 2> nan_rows = rows;
    nan_rows(0, 1) = std::nan("");
    CHECK_THROWS_WITH(verify_tree(target, nan_rows, token_history(prefix, 1), tree, verify_options{}, result, rng),
                      "verify_tree: row 0: logits: NaN at index 1");
    o.rule = verify_rule::typical;
    CHECK_THROWS_WITH(verify_tree(target, nan_rows, token_history(prefix, 1), tree, o, result, rng),
                      "verify_tree: row 0: logits: NaN at index 1");
    // Usable after the errors.
    verify_tree(target, rows, token_history(prefix, 1), tree, verify_options{}, result, rng);
    CHECK(result.tokens.size() == result.accepted() + 1);
}

namespace
{
    /// One token of the toy vocabulary a step's record: id, log-probs, top, text.
    struct step_record
    {
        token_id id;
        double logprob, raw_logprob;
        std::vector<sampled_token> top;
        std::string text;
        finish_reason finish;
    };

    step_record record(const step_result& r)
    {
        return {r.id, r.logprob, r.raw_logprob, std::vector<sampled_token>(r.top.begin(), r.top.end()), std::string(r.text),
                r.finish};
    }
}

TEST_CASE("sequence::step_draft: steps, text and stops as step() gives them (greedy target)", "[speculative][sequence]")
{
    const vocabulary vocab(std::vector<std::string>{"a", "b", "c", " ", "x", ""}, std::vector<token_id>{5});
    sampling_params cold = target_params();
    cold.temperature = 0.0;
    sequence_options o;
    o.max_tokens = 12;
    o.eos = {5};
    o.vocab = &vocab;
    o.stop_strings = {"cb", "xx"};
    o.raw_logprob = true;
    o.top_logprobs = 2;
    const std::vector<token_id> prompt = {1, 2};
    std::map<finish_reason, int> reasons;
    for (int trial = 0; trial < 60; ++trial)
    {
        INFO("trial " << trial);
        o.max_tokens = 4 + std::size_t(trial % 9);
        // One token at a time.
        sequence one(sampler(cold), prompt, o);
        std::vector<step_record> expected;
        while (!one.finished())
        {
            const std::vector<token_id> h(one.history().tokens().begin(), one.history().tokens().end());
            expected.push_back(record(one.step(target_row(h))));
        }
        // By drafts of 0..4 tokens, half of them right.
        sequence many(sampler(cold), prompt, o);
        philox4x32 drafts(std::uint64_t(trial), 5);
        std::vector<step_record> got;
        std::string deltas;
        verify_options rule;
        rule.rule = trial % 2 == 0 ? verify_rule::greedy : verify_rule::standard;
        while (!many.finished())
        {
            std::vector<token_id> with_draft(many.history().tokens().begin(), many.history().tokens().end());
            const std::size_t k = std::size_t(trial + int(got.size())) % 5;
            xt::xtensor<double, 2> rows = xt::empty<double>({k + 1, V});
            std::vector<token_id> draft;
            for (std::size_t j = 0; j <= k; ++j)
            {
                xt::view(rows, j, xt::all()) = target_row(with_draft);
                if (j < k)
                {
                    const std::size_t at = with_draft.size() - prompt.size();
                    const bool right = uniform01(drafts) < 0.6 && at < expected.size();
                    draft.push_back(right ? expected[at].id : token_id(random_bits(32, drafts) % V));
                    with_draft.push_back(draft.back());
                }
            }
            for (const step_result& r : many.step_draft(rows, draft, rule))
            {
                got.push_back(record(r));
                deltas += r.text;
            }
        }
        REQUIRE(got.size() == expected.size());
        for (std::size_t i = 0; i < got.size(); ++i)
        {
            CHECK(got[i].id == expected[i].id);
            CHECK(got[i].logprob == expected[i].logprob);
            CHECK(got[i].raw_logprob == expected[i].raw_logprob);
            CHECK(got[i].finish == expected[i].finish);
            REQUIRE(got[i].top.size() == expected[i].top.size());
            for (std::size_t j = 0; j < got[i].top.size(); ++j)
            {
                CHECK(got[i].top[j].id == expected[i].top[j].id);
                CHECK(got[i].top[j].logprob == expected[i].top[j].logprob);
            }
        }
        CHECK(many.text() == one.text());
        CHECK(deltas == many.text());
        CHECK(many.reason() == one.reason());
        ++reasons[one.reason()];
        CHECK(std::vector<token_id>(many.generated().begin(), many.generated().end()) ==
              std::vector<token_id>(one.generated().begin(), one.generated().end()));
    }
    CHECK(reasons[finish_reason::stop_string] > 0);  // a stop inside an accepted draft, among others
    CHECK(reasons[finish_reason::length] > 0);
}

TEST_CASE("sequence::step_draft: the texts follow the target (chi-square), max_tokens, errors", "[speculative][sequence][stats]")
{
    const std::vector<token_id> prompt = {1, 4};
    const std::size_t n = 3, runs = 20000;
    sampler target(target_params());
    const std::vector<double> probs = enumerate_texts(target, prompt, n);
    sequence_options o;
    o.max_tokens = n;
    o.seed = 5;
    sequence s(sampler(target_params()), prompt, o);
    std::vector<double> counts(probs.size(), 0.0);
    philox4x32 drafts(6, 6);
    chain draft_chain{temperature{1.2}};
    for (std::size_t run = 0; run < runs; ++run)
    {
        s.reset(prompt);
        s.engine() = philox4x32(5, run);
        while (!s.finished())
        {
            std::vector<token_id> with_draft(s.history().tokens().begin(), s.history().tokens().end());
            const std::size_t k = 1 + run % 4;  // up to one more than fits: verified only as far as it fits
            xt::xtensor<double, 2> rows = xt::empty<double>({k + 1, V});
            xt::xtensor<double, 2> q = xt::zeros<double>({k, V});
            std::vector<token_id> draft;
            for (std::size_t j = 0; j <= k; ++j)
            {
                xt::view(rows, j, xt::all()) = target_row(with_draft);
                if (j < k)
                {
                    const std::vector<double> qj = dense(draft_chain, draft_row(with_draft), token_history(with_draft, 2));
                    std::copy(qj.begin(), qj.end(), &q(j, 0));
                    draft.push_back(draw_from(qj, drafts));
                    with_draft.push_back(draft.back());
                }
            }
            const auto steps = s.step_draft(rows, draft, q);
            REQUIRE(!steps.empty());
            CHECK(steps[steps.size() - 1].finish == (s.finished() ? finish_reason::length : finish_reason::none));
        }
        REQUIRE(s.generated().size() == n);
        std::size_t cell = 0, scale = 1;
        for (std::size_t j = 0; j < n; ++j, scale *= V)
        {
            cell += std::size_t(s.generated()[j]) * scale;
        }
        counts[cell] += 1.0;
    }
    std::size_t cells = 0;
    CHECK(statistic(counts, probs, runs, cells) < test_stats::chi_square_bound(cells - 1));
    // Errors leave the sequence as it was.
    o.max_tokens = 8;
    sequence e(sampler(target_params()), prompt, o);
    const std::vector<token_id> two = {1, 2};
    xt::xtensor<double, 2> rows = xt::zeros<double>({std::size_t(2), V});
    CHECK_THROWS_WITH(e.step_draft(rows, two), "sequence: step_draft: 2 draft tokens need 3 target rows, got 2");
    const std::vector<token_id> far = {9};
    CHECK_THROWS_WITH(e.step_draft(rows, far), "sequence: step_draft: draft token 9 is outside the vocabulary of 6");
    xt::xtensor<double, 2> nan_rows = xt::zeros<double>({std::size_t(3), V});
    nan_rows(1, 3) = std::nan("");
    verify_options greedy_rule;
    greedy_rule.rule = verify_rule::greedy;
    const std::vector<token_id> zeros = {0, 0};  // a flat row's argmax: accepted, then row 1
    const philox4x32 before = e.engine();
    CHECK_THROWS_WITH(e.step_draft(nan_rows, zeros, greedy_rule), "step 1: logits: NaN at index 3");
    CHECK(e.generated().empty());
    CHECK(e.engine() == before);
    const std::vector<token_id> one = {0};
    CHECK(e.step_draft(rows, one).size() >= 1);
    e.finish(finish_reason::cancelled);
    CHECK_THROWS_WITH(e.step_draft(rows, one), "sequence: step_draft after the end (cancelled)");
}

TEST_CASE("speculative: a review's cases (aliasing drafts, typical trees under a grammar, xtc, stop cuts)",
          "[speculative][tree][sequence]")
{
    // step_draft with a draft that is a view of the sequence's own history,
    // after a reset to a longer prompt (the insert reallocates).
    sequence_options o;
    o.max_tokens = 8;
    std::vector<token_id> prompt = {0, 1};
    sampling_params cold = target_params();
    cold.temperature = 0.0;
    sequence s(sampler(cold), prompt, o);
    std::vector<token_id> long_prompt(30, 2);
    long_prompt[0] = 3;
    long_prompt[1] = 4;
    s.reset(long_prompt);
    const xt::xtensor<double, 2> zeros = xt::zeros<double>({std::size_t(3), V});
    verify_options greedy_rule;
    greedy_rule.rule = verify_rule::greedy;
    const auto steps = s.step_draft(zeros, s.history().tokens().subspan(0, 2), greedy_rule);
    REQUIRE(steps.size() >= 1);
    CHECK(s.generated()[0] == 0);  // a flat row's argmax is 0: the draft token 3 is rejected
    // Typical on a tree reads only the rows the walk can reach: under a grammar,
    // a failed node's row (whose token breaks the text) and an eos's child are
    // never filtered.
    const auto vocab = std::make_shared<const vocabulary>(std::vector<std::string>{"a", "b", "ab", "ba", "x", ""},
                                                          std::vector<token_id>{5});
    const auto index = std::make_shared<const vocabulary_index>(vocab);
    auto constrained = chain{regex_constraint(index, "(ab)+"), temperature{1.0}};
    verify_options typical;
    typical.rule = verify_rule::typical;
    typical.eos = {5};
    tree_result result;
    philox4x32 rng(3);
    const std::vector<token_id> empty;
    const xt::xtensor<double, 2> flat = xt::zeros<double>({std::size_t(4), std::size_t(6)});
    verify_tree(constrained, flat, token_history(empty), draft_tree{{4, 0, 2}, {-1, 0, -1}}, typical, result, rng);
    CHECK(result.tokens.size() == result.accepted() + 1);
    const std::vector<token_id> ab = {2};
    verify_tree(constrained, flat, token_history(ab), draft_tree{{2, 5, 0}, {-1, 0, 1}}, typical, result, rng);
    CHECK(ids_of(result.tokens) == std::vector<token_id>{2, 5});  // "abab", then eos: nothing after
    // A chain-shaped tree under typical with XTC: the same uniforms and tokens as verify_draft.
    sampling_params xtc_params = target_params();
    xtc_params.xtc_probability = 0.5;
    xtc_params.xtc_threshold = 0.05;
    philox4x32 drafts(8, 8);
    for (const verify_rule rule : {verify_rule::typical, verify_rule::standard, verify_rule::greedy})
    {
        verify_options ro;
        ro.rule = rule;
        sampler a(xtc_params), b(xtc_params);
        philox4x32 rng_a(5, 5), rng_b(5, 5);
        std::vector<sampled_token> out;
        for (int trial = 0; trial < 200; ++trial)
        {
            const std::size_t k = 1 + std::size_t(trial % 4);
            std::vector<token_id> with_draft = {1, 2};
            xt::xtensor<double, 2> rows = xt::empty<double>({k + 1, V});
            draft_tree tree;
            for (std::size_t j = 0; j <= k; ++j)
            {
                xt::view(rows, j, xt::all()) = target_row(with_draft);
                if (j < k)
                {
                    with_draft.push_back(token_id(random_bits(32, drafts) % V));
                    tree.tokens.push_back(with_draft.back());
                    tree.parents.push_back(std::ptrdiff_t(j) - 1);
                }
            }
            const std::vector<token_id> p2 = {1, 2};
            const std::size_t accepted = verify_draft(a, rows, token_history(with_draft, 2), ro, out, rng_a);
            verify_tree(b, rows, token_history(p2, 2), tree, ro, result, rng_b);
            REQUIRE(result.accepted() == accepted);
            REQUIRE(ids_of(result.tokens) == ids_of(out));
            for (std::size_t j = 0; j < out.size(); ++j)
            {
                REQUIRE(result.tokens[j].logprob == out[j].logprob);
            }
            REQUIRE(rng_a.position() == rng_b.position());
        }
    }
    // Text views when a stop string cuts the text: every view inside text().
    const vocabulary letters(std::vector<std::string>{"a", "b", "c", "x", "y", "z"}, std::vector<token_id>{});
    sequence_options so;
    so.max_tokens = 10;
    so.vocab = &letters;
    so.stop_strings = {"abc"};
    const std::vector<token_id> x = {3};
    sequence cut(sampler(cold), x, so);
    xt::xtensor<double, 2> rows = xt::zeros<double>({std::size_t(5), V});
    const std::vector<token_id> draft = {3, 0, 1, 2};
    for (std::size_t j = 0; j < 4; ++j)
    {
        rows(j, std::size_t(draft[j])) = 5.0;  // the target agrees with the draft
    }
    std::string deltas;
    for (const auto& r : cut.step_draft(rows, draft, greedy_rule))
    {
        CHECK(r.text.data() >= cut.text().data());
        CHECK(r.text.data() + r.text.size() <= cut.text().data() + cut.text().size());
        deltas += r.text;
    }
    CHECK(cut.reason() == finish_reason::stop_string);
    CHECK(cut.text() == "x");
    CHECK(deltas == "x");
}
