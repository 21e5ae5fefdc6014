// penalties.hpp, dry.hpp and the bias, bans and masks of processors.hpp: the
// processors that break repetition and restrict the vocabulary, on
// hand-checked rows, against plain references written here (brute force,
// compared exactly), and against the numbers of llama.cpp's and
// transformers' own tests (test-sampling.cpp's test_penalties and test_dry,
// test_logits_process.py), re-derived.
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "helpers.hpp"

using namespace xsampler;
using Catch::Matchers::Message;
using Catch::Matchers::WithinAbs;
using test_helpers::inf;
using test_helpers::row;

namespace
{
    /// The stage's edits decide what the hand-edited row decides: the same
    /// distribution, bit for bit, alone and before a fused top_k (the edits
    /// on its pending list); the caller's row is unchanged.
    template <class S, class T>
    void check_edits(S stage, const xt::xtensor<T, 1>& r, const token_history& h, const xt::xtensor<T, 1>& want)
    {
        const xt::xtensor<T, 1> before = r;
        const auto got = chain{stage}.final_distribution(r, h);
        const auto expected = chain{}.final_distribution(want);
        CHECK(got.ids == expected.ids);
        CHECK(got.probs == expected.probs);
        const auto got_top = chain{stage, top_k{2}}.final_distribution(r, h);
        const auto expected_top = chain{top_k{2}}.final_distribution(want);
        CHECK(got_top.ids == expected_top.ids);
        CHECK(got_top.probs == expected_top.probs);
        CHECK(r == before);
    }

}

TEMPLATE_TEST_CASE("penalties: the sign rule, presence and frequency, by hand", "[processors][penalties]", float,
                   double)
{
    using T = TestType;
    const auto r = row<T>({2.0, -1.0, 0.5, 3.0, 0.0, -inf});
    const std::vector<token_id> h = {0, 1, 0, 3, 5};
    // Window scope, the whole history (64 > 5): token 0 twice, 1 and 3 once, 5
    // (masked) once. repeat 2, presence 0.5, frequency 0.25:
    //   0: 2 / 2 - (2 * 0.25 + 0.5) = 0;  1: -1 * 2 - 0.75 = -2.75;
    //   3: 3 / 2 - 0.75 = 0.75;  5 stays masked.
    check_edits(penalties{2.0, 0.5, 0.25}, r, h, row<T>({0.0, -2.75, 0.5, 0.75, 0.0, -inf}));
    // The last 3 tokens {0, 3, 5}: token 0 once, token 1 not at all.
    check_edits(penalties{2.0, 0.5, 0.25, 3}, r, h, row<T>({0.25, -1.0, 0.5, 0.75, 0.0, -inf}));
    // -1: the whole history; 0: off.
    check_edits(penalties{2.0, 0.5, 0.25, -1}, r, h, row<T>({0.0, -2.75, 0.5, 0.75, 0.0, -inf}));
    check_edits(penalties{2.0, 0.5, 0.25, 0}, r, h, r);
    CHECK(penalties(2.0, 0.5, 0.25, 0).neutral());
    CHECK(penalties().neutral());
    // A logit of 0 is multiplied: it stays 0 (llama.cpp and transformers agree).
    check_edits(penalties{3.0}, row<T>({0.0, 1.0}), std::vector<token_id>{0}, row<T>({0.0, 1.0}));
    // repeat < 1 rewards repeats: 2 / 0.5 = 4, -1 * 0.5 = -0.5.
    check_edits(penalties{0.5}, r, h, row<T>({4.0, -0.5, 0.5, 6.0, 0.0, -inf}));
    // Output scope: prompt {0, 1}, generated {0, 3, 5}. Repetition on every
    // token (0, 1, 3), presence and frequency on the generated (0 and 3 once):
    //   0: 2 / 2 - 0.75 = 0.25;  1: -2;  3: 1.5 - 0.75 = 0.75.
    const token_history prompted(h, 2);
    check_edits(penalties{2.0, 0.5, 0.25, 64, penalty_scope::output}, r, prompted,
                row<T>({0.25, -2.0, 0.5, 0.75, 0.0, -inf}));
    // ...and the window scope counts the prompt too.
    check_edits(penalties{2.0, 0.5, 0.25, 64, penalty_scope::window}, r, prompted,
                row<T>({0.0, -2.75, 0.5, 0.75, 0.0, -inf}));
    // Presence and frequency of -0 subtract nothing: a -0 logit keeps its sign.
    const std::vector<token_id> zeros = {0, 1, 0};
    const auto signed_zero = row<T>({-0.0, 1.0});
    for (const auto scope : {penalty_scope::window, penalty_scope::output})
    {
        candidates<T> c;
        c.load(signed_zero);  // (read in place: the row must outlive c's use)
        penalties(2.0, -0.0, -0.0, 64, scope).apply(c, token_history(zeros, 1));
        CHECK(std::signbit(c.logit(0)));
        CHECK(c.logit(1) == T(0.5));
    }
    // Negative presence and frequency raise; values stay finite.
    const T big = std::numeric_limits<T>::max();
    check_edits(penalties{1.0, -1e300, 0.0}, r, h, row<T>({double(big), double(big), 0.5, double(big), 0.0, -inf}));
    check_edits(penalties{1e-300}, row<T>({double(big), -1.0}), std::vector<token_id>{0, 1},
                row<T>({double(big), -1e-300}));
}

TEMPLATE_TEST_CASE("penalties: llama.cpp's and transformers' published cases", "[processors][penalties]", float,
                   double)
{
    using T = TestType;
    // transformers' test_repetition_penalty_dist_process: vocab 10, scores
    // 0.1 everywhere but [0][0] = -0.1 and [1][5] = 0.4, input ids
    // [[0, 1], [5, 0]], penalty 2; expected -0.2 and 0.05 (row 0), 0.2 and
    // 0.05 (row 1).
    xt::xtensor<T, 1> s0 = xt::empty<T>({10});
    s0.fill(T(0.1));
    s0(0) = T(-0.1);
    auto w0 = s0;
    w0(0) = T(-0.2);
    w0(1) = T(0.05);
    check_edits(penalties{2.0, 0.0, 0.0, -1}, s0, std::vector<token_id>{0, 1}, w0);
    xt::xtensor<T, 1> s1 = xt::empty<T>({10});
    s1.fill(T(0.1));
    s1(5) = T(0.4);
    auto w1 = s1;
    w1(5) = T(0.2);
    w1(0) = T(0.05);
    check_edits(penalties{2.0, 0.0, 0.0, -1}, s1, std::vector<token_id>{5, 0}, w1);
    // llama.cpp's test_penalties: probabilities 0.2 x 5 as logits log(0.2),
    // the window = the last tokens given, then a softmax; expected within 1e-5.
    struct llama_case
    {
        std::vector<token_id> last;
        double repeat, frequency, presence;
        std::vector<double> expected;
    };
    const std::vector<llama_case> cases = {
        {{0}, 50.0, 0.0, 0.0, {0, 0.25, 0.25, 0.25, 0.25}},
        {{0, 1, 2}, 50.0, 0.0, 0.0, {0, 0, 0, 0.5, 0.5}},
        {{0, 1, 2, 0, 0}, 50.0, 0.0, 0.0, {0, 0, 0, 0.5, 0.5}},
        {{0}, 1.0, 5.0, 5.0, {0.000011, 0.249997, 0.249997, 0.249997, 0.249997}},
        {{0, 1, 2}, 1.0, 5.0, 5.0, {0.000023, 0.000023, 0.000023, 0.499966, 0.499966}},
        {{0, 1, 2, 0, 0}, 1.0, 5.0, 5.0, {0.000000, 0.000023, 0.000023, 0.499977, 0.499977}},
    };
    const auto fifths = test_helpers::logits_of<T>({0.2, 0.2, 0.2, 0.2, 0.2});
    for (const auto& k : cases)
    {
        const auto d = chain{penalties{k.repeat, k.presence, k.frequency, std::int64_t(k.last.size())}}
                           .final_distribution(fifths, k.last);
        const auto p = test_helpers::as_map(d);
        for (std::size_t t = 0; t < 5; ++t)
        {
            INFO("last tokens " << k.last.size() << ", token " << t);
            CHECK(std::abs(p.at(token_id(t)) - k.expected[t]) < 1e-5);
        }
    }
}

TEMPLATE_TEST_CASE("penalties: counts kept across calls equal counts from scratch, and errors",
                   "[processors][penalties]", float, double)
{
    using T = TestType;
    philox4x32 rng(17);
    const auto pick = [&](std::size_t n) { return std::size_t(uniform01(rng) * double(n)) % n; };
    const std::size_t vocab = 6;
    for (int round = 0; round < 40; ++round)
    {
        const double rep = std::vector<double>{1.0, 0.5, 1.3, 2.0}[pick(4)];
        const double pres = std::vector<double>{0.0, 0.5, -1.5}[pick(3)];
        const double freq = std::vector<double>{0.0, 0.25, 2.0}[pick(3)];
        const std::int64_t last_n = std::vector<std::int64_t>{-1, 0, 1, 3, 8, 64}[pick(6)];
        const auto scope = pick(2) == 0 ? penalty_scope::window : penalty_scope::output;
        INFO("round " << round << ": " << rep << " " << pres << " " << freq << " " << last_n);
        penalties kept(rep, pres, freq, last_n, scope);
        std::vector<token_id> h;
        std::size_t prompt = 0;
        for (int step = 0; step < 30; ++step)
        {
            // Grow by a token mostly; sometimes roll back, restart, or move
            // where the prompt ends.
            const std::size_t what = pick(10);
            if (what == 0 && !h.empty())
            {
                h.resize(pick(h.size()));
                prompt = std::min(prompt, h.size());
            }
            else if (what == 1)
            {
                prompt = pick(h.size() + 1);
            }
            else
            {
                h.push_back(token_id(pick(vocab)));
            }
            const auto r = test_helpers::random_row<T>(vocab, std::uint64_t(round * 100 + step), 2.0, false, 0.2);
            const token_history th(h, prompt);
            const auto want = test_helpers::reference_penalties(r, h, prompt, rep, pres, freq, last_n, scope);
            check_edits(penalties(rep, pres, freq, last_n, scope), r, th, want);
            // The long-lived one, updated incrementally, agrees bit for bit.
            candidates<T> c;
            c.load(r);
            kept.apply(c, th);
            for (std::size_t t = 0; t < vocab; ++t)
            {
                CHECK(c.logit(token_id(t)) == want(t));
            }
        }
    }
}

TEMPLATE_TEST_CASE("penalties: errors name the parameter or the id, and leave the counts usable",
                   "[processors][penalties][errors]", float, double)
{
    using T = TestType;
    CHECK_THROWS_MATCHES(penalties(0.0), invalid_parameter,
                         Message("penalties: repeat_penalty must be finite and > 0, got 0"));
    CHECK_THROWS_MATCHES(penalties(inf), invalid_parameter,
                         Message("penalties: repeat_penalty must be finite and > 0, got inf"));
    CHECK_THROWS_MATCHES(penalties(1.0, std::nan("")), invalid_parameter,
                         Message("penalties: presence_penalty must be finite, got nan"));
    CHECK_THROWS_MATCHES(penalties(1.0, 0.0, -inf), invalid_parameter,
                         Message("penalties: frequency_penalty must be finite, got -inf"));
    CHECK_THROWS_MATCHES(penalties(1.0, 0.0, 0.5, -2), invalid_parameter,
                         Message("penalties: repeat_last_n must be >= -1, got -2"));
    const auto r = row<T>({1.0, 2.0, 3.0});
    penalties p(2.0, 0.0, 0.0, -1);
    chain c{std::move(p)};
    const auto good = c.final_distribution(r, std::vector<token_id>{2, 1});
    CHECK_THROWS_MATCHES(c.final_distribution(r, std::vector<token_id>{2, 1, 3}), invalid_parameter,
                         Message("penalties: history id 3 at position 2 is outside the vocabulary of 3"));
    CHECK_THROWS_MATCHES(c.final_distribution(r, std::vector<token_id>{-1}), invalid_parameter,
                         Message("penalties: history id -1 at position 0 is outside the vocabulary of 3"));
    // The counts are those of the last good history: extending it works.
    CHECK(c.final_distribution(r, std::vector<token_id>{2, 1}).probs == good.probs);
    CHECK(c.final_distribution(r, std::vector<token_id>{2, 1, 0}).probs ==
          chain{}.final_distribution(row<T>({2.0, 1.0, 1.5})).probs);
}

TEMPLATE_TEST_CASE("penalties in the run-time sampler: params, order and scope", "[processors][penalties][sampler]",
                   float, double)
{
    using T = TestType;
    const auto r = test_helpers::random_row<T>(300, 8);
    const std::vector<token_id> h = {5, 6, 7, 5, 250, 5};
    sampling_params p;
    p.repeat_penalty = 1.3;
    p.presence_penalty = 0.4;
    p.frequency_penalty = 0.2;
    p.repeat_last_n = 4;
    p.temperature = 0.8;
    p.top_k = 40;
    sampler s(p);
    const auto d = s.final_distribution(r, h);
    const auto want = chain{penalties{1.3, 0.4, 0.2, 4}, temperature{0.8}, top_k{40}}.final_distribution(r, h);
    CHECK(d.ids == want.ids);
    CHECK(d.probs == want.probs);
    p.order = {"temperature", "top_k"};
    CHECK_THROWS_MATCHES(sampler(p), invalid_parameter,
                         Message("samplers: penalties is set but not in the sampler order"));
    p.repeat_penalty = -1.0;
    p.order = default_stage_order();
    CHECK_THROWS_MATCHES(sampler(p), invalid_parameter,
                         Message("penalties: repeat_penalty must be finite and > 0, got -1"));
}

TEMPLATE_TEST_CASE("logit_bias adds, bans with -inf, and names a bad id", "[processors][bias]", float, double)
{
    using T = TestType;
    const auto r = row<T>({1.0, 2.0, 3.0, -inf});
    // An id listed twice gets both biases (llama.cpp's list); -inf bans; a
    // masked token stays masked.
    check_edits(logit_bias{{{0, 2.0}, {2, -inf}, {0, 0.5}, {3, 5.0}}}, r, {}, row<T>({3.5, 2.0, -inf, -inf}));
    const T big = std::numeric_limits<T>::max();
    check_edits(logit_bias{{{1, 1e300}}}, r, {}, row<T>({1.0, double(big), 3.0, -inf}));
    CHECK_THROWS_MATCHES(logit_bias({{-1, 1.0}}), invalid_parameter, Message("logit_bias: token id -1 is negative"));
    CHECK_THROWS_MATCHES(logit_bias({{1, inf}}), invalid_parameter,
                         Message("logit_bias: the bias of token 1 must be finite or -inf, got inf"));
    CHECK_THROWS_MATCHES(logit_bias({{1, std::nan("")}}), invalid_parameter,
                         Message("logit_bias: the bias of token 1 must be finite or -inf, got nan"));
    chain c{logit_bias{{{4, 1.0}}}};
    CHECK_THROWS_MATCHES(c.final_distribution(r), invalid_parameter,
                         Message("logit_bias: token id 4 is outside the vocabulary of 4"));
    chain bans_all{logit_bias{{{0, -inf}, {1, -inf}, {2, -inf}}}};
    CHECK_THROWS_MATCHES(bans_all.final_distribution(r), invalid_logits,
                         Message("logit_bias: every token is masked"));
    CHECK(bans_all.final_distribution(row<T>({1.0, 2.0, 3.0, 4.0})).ids == std::vector<token_id>{3});
}

namespace
{
    /// The tokens no_repeat_ngram{n} bans after h, by brute force.
    std::set<token_id> ngram_bans(const std::vector<token_id>& h, std::size_t n)
    {
        std::set<token_id> banned;
        for (std::size_t i = 0; n > 0 && i + n <= h.size(); ++i)
        {
            bool match = true;
            for (std::size_t j = 0; j + 1 < n; ++j)
            {
                match = match && h[i + j] == h[h.size() - (n - 1) + j];
            }
            if (match)
            {
                banned.insert(h[i + n - 1]);
            }
        }
        return banned;
    }

    /// The tokens bad_words{words} bans after h, by brute force.
    std::set<token_id> bad_word_bans(const std::vector<token_id>& h, const std::vector<std::vector<token_id>>& words)
    {
        std::set<token_id> banned;
        for (const auto& w : words)
        {
            const std::size_t k = w.size() - 1;
            if (k <= h.size() && std::vector<token_id>(h.end() - std::ptrdiff_t(k), h.end()) ==
                                     std::vector<token_id>(w.begin(), w.end() - 1))
            {
                banned.insert(w.back());
            }
        }
        return banned;
    }

    /// r with the tokens of `banned` masked.
    template <class T>
    xt::xtensor<T, 1> masked(xt::xtensor<T, 1> r, const std::set<token_id>& banned)
    {
        for (const token_id t : banned)
        {
            r(std::size_t(t)) = -std::numeric_limits<T>::infinity();
        }
        return r;
    }
}

TEMPLATE_TEST_CASE("no_repeat_ngram and bad_words: transformers' cases and a brute-force reference",
                   "[processors][bans]", float, double)
{
    using T = TestType;
    // transformers' test_no_repeat_ngram_dist_processor: vocab 3, input ids
    // [[1, 1, 2, 1], [0, 1, 0, 1]]; n = 2 bans [[1, 2], [0]], n = 3 [[], [0]].
    const auto zeros3 = row<T>({0.0, 0.0, 0.0});
    const std::vector<token_id> a = {1, 1, 2, 1}, b = {0, 1, 0, 1};
    check_edits(no_repeat_ngram{2}, zeros3, a, row<T>({0.0, -inf, -inf}));
    check_edits(no_repeat_ngram{2}, zeros3, b, row<T>({-inf, 0.0, 0.0}));
    check_edits(no_repeat_ngram{3}, zeros3, a, zeros3);
    check_edits(no_repeat_ngram{3}, zeros3, b, row<T>({-inf, 0.0, 0.0}));
    // n = 1 bans every token seen; a history shorter than n bans nothing; 0 is off.
    check_edits(no_repeat_ngram{1}, zeros3, std::vector<token_id>{2}, row<T>({0.0, 0.0, -inf}));
    check_edits(no_repeat_ngram{5}, zeros3, a, zeros3);
    check_edits(no_repeat_ngram{0}, zeros3, a, zeros3);
    // transformers' test_no_bad_words_dist_processor: vocab 5, eos 4, input
    // ids [[0, 1, 3, 1], [0, 1, 0, 1]], bad words [[1], [4], [1, 0], [0, 1, 2],
    // [1, 3, 1, 3]]; masks [[T, T, F, T, F], [T, T, T, F, F]]. transformers
    // drops a one-token bad word equal to eos ([4]) so the text can end; we
    // ban what is listed, so the case is re-derived without [4].
    const auto zeros5 = row<T>({0.0, 0.0, 0.0, 0.0, 0.0});
    const bad_words words{{{1}, {1, 0}, {0, 1, 2}, {1, 3, 1, 3}}};
    check_edits(words, zeros5, std::vector<token_id>{0, 1, 3, 1}, row<T>({-inf, -inf, 0.0, -inf, 0.0}));
    check_edits(words, zeros5, std::vector<token_id>{0, 1, 0, 1}, row<T>({-inf, -inf, -inf, 0.0, 0.0}));
    check_edits(bad_words{{{4}}}, zeros5, {}, row<T>({0.0, 0.0, 0.0, 0.0, -inf}));
    CHECK_THROWS_MATCHES(bad_words({{1}, {}}), invalid_parameter, Message("bad_words: a sequence is empty"));
    CHECK_THROWS_MATCHES(bad_words({{1, -2}}), invalid_parameter, Message("bad_words: token id -2 is negative"));
    CHECK_THROWS_MATCHES((chain{bad_words{{{1, 7}}}}.final_distribution(zeros5)), invalid_parameter,
                         Message("bad_words: token id 7 is outside the vocabulary of 5"));
    CHECK_THROWS_MATCHES(chain{no_repeat_ngram{2}}.final_distribution(zeros3, std::vector<token_id>{0, 9}),
                         invalid_parameter, Message("no_repeat_ngram: history id 9 is outside the vocabulary of 3"));
    // Random histories over 4 tokens: the bans equal the brute-force ones.
    philox4x32 rng(23);
    const auto pick = [&](std::size_t n) { return token_id(std::size_t(uniform01(rng) * double(n)) % n); };
    const auto r = row<T>({0.5, -1.0, 2.0, 1.0, 0.0, 3.0});
    for (int i = 0; i < 300; ++i)
    {
        std::vector<token_id> h(std::size_t(pick(14)));
        for (auto& t : h)
        {
            t = pick(4);
        }
        const std::size_t n = std::size_t(pick(5));
        std::vector<std::vector<token_id>> w(std::size_t(pick(4)));
        for (auto& seq : w)
        {
            seq.resize(std::size_t(pick(3)) + 1);
            for (auto& t : seq)
            {
                t = pick(6);
            }
        }
        INFO("case " << i);
        check_edits(no_repeat_ngram{n}, r, h, masked(r, ngram_bans(h, n)));
        check_edits(bad_words{w}, r, h, masked(r, bad_word_bans(h, w)));
    }
}

TEMPLATE_TEST_CASE("sequence_bias: transformers' case, sums per token, and a brute-force reference",
                   "[processors][bias]", float, double)
{
    using T = TestType;
    // transformers' test_bias_dist_processor: vocab 5, input ids
    // [[0, 1, 3, 1], [0, 1, 0, 1]], zero scores, biases (1): 100, (4): 100,
    // (1, 0): -100, (0, 1, 2): -100, (1, 3, 1, 3): -100, (1, 3, 1, 3, 1, 3):
    // -100 (longer than the input: never); expected [[-100, 100, 0, -100,
    // 100], [-100, 100, -100, 0, 100]].
    const auto zeros5 = row<T>({0.0, 0.0, 0.0, 0.0, 0.0});
    const sequence_bias bias{{{{1}, 100.0},
                              {{4}, 100.0},
                              {{1, 0}, -100.0},
                              {{0, 1, 2}, -100.0},
                              {{1, 3, 1, 3}, -100.0},
                              {{1, 3, 1, 3, 1, 3}, -100.0}}};
    check_edits(bias, zeros5, std::vector<token_id>{0, 1, 3, 1}, row<T>({-100.0, 100.0, 0.0, -100.0, 100.0}));
    check_edits(bias, zeros5, std::vector<token_id>{0, 1, 0, 1}, row<T>({-100.0, 100.0, -100.0, 0.0, 100.0}));
    // Sequences ending in one token add (2 + 0.5 after "1 3", 2 alone); -inf
    // bans; a masked token stays masked; an empty history matches one-id ones only.
    const sequence_bias sums{{{{3}, 2.0}, {{1, 3}, 0.5}, {{0, 2}, -inf}, {{4}, 1.0}}};
    const auto r = row<T>({0.25, 1.0, 3.0, -1.0, -inf});
    check_edits(sums, r, std::vector<token_id>{4, 1}, row<T>({0.25, 1.0, 3.0, 1.5, -inf}));
    check_edits(sums, r, std::vector<token_id>{3, 0}, row<T>({0.25, 1.0, -inf, 1.0, -inf}));
    check_edits(sums, r, {}, row<T>({0.25, 1.0, 3.0, 1.0, -inf}));
    // As transformers: a sequence longer than the history never counts, even
    // when the history is exactly the rest of it ({1, 3} after [1] alone).
    check_edits(sums, r, std::vector<token_id>{1}, row<T>({0.25, 1.0, 3.0, 1.0, -inf}));
    check_edits(sums, r, std::vector<token_id>{2, 1}, row<T>({0.25, 1.0, 3.0, 1.5, -inf}));
    CHECK(sequence_bias().neutral());
    CHECK_THROWS_MATCHES(sequence_bias({{{1}, 1.0}, {{}, 1.0}}), invalid_parameter,
                         Message("sequence_bias: sequence 1 is empty"));
    CHECK_THROWS_MATCHES(sequence_bias({{{1, -2}, 1.0}}), invalid_parameter,
                         Message("sequence_bias: token id -2 is negative"));
    CHECK_THROWS_MATCHES(sequence_bias({{{1}, inf}}), invalid_parameter,
                         Message("sequence_bias: the bias of sequence 0 must be finite or -inf, got inf"));
    CHECK_THROWS_MATCHES((chain{sequence_bias{{{{1, 7}, 1.0}}}}.final_distribution(zeros5)), invalid_parameter,
                         Message("sequence_bias: token id 7 is outside the vocabulary of 5"));
    // One-id sequences are logit_bias; random histories and sequences against a brute force.
    const auto x = row<T>({0.5, -1.0, 2.0, 1.0, 0.0, 3.0});
    CHECK(chain{sequence_bias{{{{2}, 1.5}, {{0}, -0.5}}}}.final_distribution(x).probs ==
          chain{logit_bias{{{2, 1.5}, {0, -0.5}}}}.final_distribution(x).probs);
    philox4x32 rng(29);
    const auto pick = [&](std::size_t n) { return token_id(std::size_t(uniform01(rng) * double(n)) % n); };
    for (int i = 0; i < 300; ++i)
    {
        std::vector<token_id> h(std::size_t(pick(10)));
        for (auto& t : h)
        {
            t = pick(3);
        }
        std::vector<sequence_bias::entry> entries(std::size_t(pick(5)));
        std::vector<double> want(6, 0.0);
        for (auto& e : entries)
        {
            e.first.resize(std::size_t(pick(3)) + 1);
            for (auto& t : e.first)
            {
                t = pick(e.first.size() == 1 ? 6 : 3);
            }
            e.second = double(pick(9)) - 4.0;
            const std::size_t k = e.first.size() - 1;  // transformers: skipped while longer than the history
            if ((k == 0 || k + 1 <= h.size()) && std::vector<token_id>(h.end() - std::ptrdiff_t(k), h.end()) ==
                                     std::vector<token_id>(e.first.begin(), e.first.end() - 1))
            {
                want[std::size_t(e.first.back())] += e.second;
            }
        }
        auto expected = x;
        for (std::size_t t = 0; t < 6; ++t)
        {
            expected(t) = T(double(x(t)) + want[t]);
        }
        INFO("case " << i);
        check_edits(sequence_bias{entries}, x, h, expected);
    }
}

TEMPLATE_TEST_CASE("token_mask: allow and deny lists as bitsets", "[processors][mask]", float, double)
{
    using T = TestType;
    const auto r = row<T>({1.0, 2.0, 3.0, -inf, 0.5});
    check_edits(token_mask{{}, {2, 2, 0}}, r, {}, row<T>({-inf, 2.0, -inf, -inf, 0.5}));
    // Allowed and not banned; a masked allowed token stays out.
    const auto d = chain{token_mask{{4, 2, 3, 1}, {2}}}.final_distribution(r);
    CHECK(d.ids == std::vector<token_id>{1, 4});
    CHECK(d.probs == chain{}.final_distribution(row<T>({-inf, 2.0, -inf, -inf, 0.5})).probs);
    // Greedy and top-k after it pick among the allowed.
    philox4x32 rng(2);
    CHECK(chain{token_mask{{0, 4}}, temperature{0.0}}.sample(r, {}, rng).id == 0);
    CHECK(chain{token_mask{{0, 4, 1}}, top_k{2}}.final_distribution(r).ids == std::vector<token_id>{1, 0});
    CHECK_THROWS_MATCHES(token_mask({-3}), invalid_parameter, Message("token_mask: allowed: token id -3 is negative"));
    CHECK_THROWS_MATCHES(token_mask({}, {-3}), invalid_parameter,
                         Message("token_mask: banned: token id -3 is negative"));
    CHECK_THROWS_MATCHES((chain{token_mask{{1, 70}}}.final_distribution(r)), invalid_parameter,
                         Message("token_mask: allowed token id 70 is outside the vocabulary of 5"));
    CHECK_THROWS_MATCHES((chain{token_mask{{}, {5}}}.final_distribution(r)), invalid_parameter,
                         Message("token_mask: banned token id 5 is outside the vocabulary of 5"));
    CHECK_THROWS_MATCHES((chain{token_mask{{3}}}.final_distribution(r)), invalid_logits,
                         Message("token_mask: every token is masked"));
    CHECK_THROWS_MATCHES((chain{token_mask{{1}, {1}}}.final_distribution(r)), invalid_logits,
                         Message("token_mask: every token is masked"));
    // An allow list over a larger row, against the edited row.
    const auto big = test_helpers::random_row<T>(3000, 6);
    std::vector<token_id> allowed;
    auto want = big;
    want.fill(-std::numeric_limits<T>::infinity());
    for (token_id id = 5; id < 3000; id += 7)
    {
        allowed.push_back(id);
        want(std::size_t(id)) = big(std::size_t(id));
    }
    check_edits(token_mask{allowed}, big, {}, want);
    const auto top = chain{token_mask{allowed}, top_p{0.7}, min_p{0.05}}.final_distribution(big);
    const auto ref = chain{top_p{0.7}, min_p{0.05}}.final_distribution(want);
    CHECK(top.ids == ref.ids);
    CHECK(top.probs == ref.probs);
}

TEMPLATE_TEST_CASE("the processors in the run-time sampler, in the default order", "[processors][sampler]", float,
                   double)
{
    using T = TestType;
    const auto r = test_helpers::random_row<T>(200, 9);
    const std::vector<token_id> h = {3, 4, 3, 4, 3};
    sampling_params p;
    p.logit_bias = {{7, 2.5}, {8, -inf}};
    p.repeat_penalty = 1.5;
    p.no_repeat_ngram_size = 2;
    p.bad_words = {{3, 4, 9}};
    p.allowed_token_ids = {3, 4, 7, 8, 9, 10, 11};
    p.banned_token_ids = {11};
    p.top_p = 0.9;
    const auto d = sampler(p).final_distribution(r, h);
    const auto want = chain{logit_bias{p.logit_bias}, penalties{1.5}, no_repeat_ngram{2}, bad_words{p.bad_words},
                            token_mask{p.allowed_token_ids, p.banned_token_ids}, top_p{0.9}}
                          .final_distribution(r, h);
    CHECK(d.ids == want.ids);
    CHECK(d.probs == want.probs);
    // 4 is banned (3 -> 4 seen), 8 by its bias, 9 as a bad word, 11 denied.
    for (const token_id gone : {4, 8, 9, 11})
    {
        CHECK(std::find(d.ids.begin(), d.ids.end(), gone) == d.ids.end());
    }
    p.order = {"top_p"};
    CHECK_THROWS_MATCHES(sampler(p), invalid_parameter,
                         Message("samplers: logit_bias is set but not in the sampler order"));
}

// --- DRY ---

namespace
{
    /// Every token's logit after the stage runs once on `r`.
    template <class T>
    std::vector<T> after(const dry& d, const xt::xtensor<T, 1>& r, const token_history& history)
    {
        candidates<T> c;
        c.load(r);
        dry stage = d;
        detail::run_stage(stage, c, history);
        std::vector<T> out(r.size());
        for (std::size_t i = 0; i < r.size(); ++i)
        {
            out[i] = c.logit(token_id(i));
        }
        return out;
    }

    template <class T>
    std::vector<T> zeros(std::size_t n)
    {
        return std::vector<T>(n, T(0));
    }

    /// The plain definition: for each earlier end i, extend the match
    /// backwards one token at a time while the tokens agree and the suffix's
    /// token is not a breaker; the token after it, unless a breaker, keeps its
    /// longest match; then the penalty as the contract writes it.
    struct reference_dry
    {
        double multiplier;
        double base;
        std::int64_t allowed;
        std::int64_t last_n;
        std::vector<token_id> breakers;

        bool breaker(token_id t) const { return std::find(breakers.begin(), breakers.end(), t) != breakers.end(); }

        template <class T>
        std::vector<T> apply(const std::vector<T>& logits, const std::vector<token_id>& history) const
        {
            std::vector<T> out = logits;
            if (multiplier == 0.0 || last_n == 0)
            {
                return out;
            }
            const std::size_t n = last_n < 0 ? history.size() : std::min(history.size(), std::size_t(last_n));
            const std::vector<token_id> w(history.end() - std::ptrdiff_t(n), history.end());
            std::map<token_id, std::size_t> longest;
            for (std::size_t i = 0; i + 1 < n; ++i)
            {
                const token_id t = w[i + 1];
                if (breaker(t))
                {
                    continue;
                }
                std::size_t len = 0;
                while (len <= i && w[i - len] == w[n - 1 - len] && !breaker(w[n - 1 - len]))
                {
                    ++len;
                }
                if (len >= std::size_t(allowed))
                {
                    longest[t] = std::max(longest[t], len);
                }
            }
            for (const auto& [t, len] : longest)
            {
                const T x = out[std::size_t(t)];
                if (x == -std::numeric_limits<T>::infinity())
                {
                    continue;
                }
                double y = double(x) - multiplier * std::pow(base, double(len - std::size_t(allowed)));
                y = std::max(y, double(std::numeric_limits<T>::lowest()));
                out[std::size_t(t)] = T(y);
            }
            return out;
        }
    };
}

TEMPLATE_TEST_CASE("dry: hand-checked edits", "[processors][dry]", float, double)
{
    using T = TestType;
    const auto r5 = row<T>({0, 0, 0, 0, 0});
    std::vector<T> expected;

    // "0 1 2 0 1": the suffix "0 1" occurred before, followed by 2 (L = 2 =
    // allowed_length): token 2 loses 1 * 1.1^0 = 1. "1" alone (L = 1) is
    // below allowed_length.
    expected = {0, 0, -1, 0, 0};
    CHECK(after(dry(1.0, 1.1, 2, -1), r5, std::vector<token_id>{0, 1, 2, 0, 1}) == expected);

    // llama.cpp's own example: "a b c c b c y a b c" (a b c y = 0 1 2 3),
    // match lengths at each end 0 0 3 1 0 2 0 0 0 (the last end is not one).
    // allowed_length 2, base 2: c (after "a b c", L 3) loses 2^1 = 2, y
    // (after "b c", L 2) loses 2^0 = 1; b (after "c", L 1) is below 2.
    const std::vector<token_id> abc{0, 1, 2, 2, 1, 2, 3, 0, 1, 2};
    expected = {0, 0, -2, -1, 0};
    CHECK(after(dry(1.0, 2.0, 2, -1), r5, abc) == expected);
    // allowed_length 1: c loses 2^2 = 4, y 2^1 = 2, b 2^0 = 1.
    expected = {0, -1, -4, -2, 0};
    CHECK(after(dry(1.0, 2.0, 1, -1), r5, abc) == expected);

    // The last token: "5 5 5 5" matches itself at ends 0, 1, 2 with lengths
    // 1, 2, 3 (overlapping the suffix); 5 keeps the longest, 3: 2^(3-2) = 2.
    const auto r6 = row<T>({0, 0, 0, 0, 0, 0});
    expected = {0, 0, 0, 0, 0, -2};
    CHECK(after(dry(1.0, 2.0, 2, -1), r6, std::vector<token_id>{5, 5, 5, 5}) == expected);

    // The longest match per token, not the sum or the last: in
    // "0 1 2 1 2 0 1" token 2 follows "0 1" (L 2) and "2 1" vs "0 1" (L 1);
    // allowed_length 1, base 2: 2^(2-1) = 2 (times multiplier 0.5: 1).
    expected = {0, 0, -1, 0, 0};
    CHECK(after(dry(0.5, 2.0, 1, -1), r5, std::vector<token_id>{0, 1, 2, 1, 2, 0, 1}) == expected);

    // The window: "0 1 2 0 1" cut to its last 4 tokens "1 2 0 1" repeats only
    // "1" (L 1 < 2): no edit; cut to 5, token 2 loses 1.
    expected = zeros<T>(5);
    CHECK(after(dry(1.0, 1.1, 2, 4), r5, std::vector<token_id>{0, 1, 2, 0, 1}) == expected);
    expected = {0, 0, -1, 0, 0};
    CHECK(after(dry(1.0, 1.1, 2, 5), r5, std::vector<token_id>{0, 1, 2, 0, 1}) == expected);
    CHECK(after(dry(1.0, 1.1, 2, 500), r5, std::vector<token_id>{0, 1, 2, 0, 1}) == expected);
    // The prompt counts like generated tokens.
    const std::vector<token_id> h{0, 1, 2, 0, 1};
    CHECK(after(dry(1.0, 1.1, 2, -1), r5, token_history(token_span(h), 4)) == expected);
    CHECK(after(dry(1.0, 1.1, 2, -1), r5, token_history(token_span(h), 0)) == expected);

    // Off: multiplier 0 (the default) or penalty_last_n 0.
    expected = zeros<T>(5);
    CHECK(after(dry(), r5, h) == expected);
    CHECK(after(dry(0.0), r5, h) == expected);
    CHECK(after(dry(1.0, 1.1, 2, 0), r5, h) == expected);
}

TEMPLATE_TEST_CASE("dry: sequence breakers", "[processors][dry]", float, double)
{
    using T = TestType;
    const auto r6 = row<T>({0, 0, 0, 0, 0, 0});
    std::vector<T> expected;
    const std::vector<token_id> h{0, 1, 2, 3, 0, 1};

    // No breaker: "0 1" repeats, 2 follows it: 2 loses 1.
    expected = {0, 0, -1, 0, 0, 0};
    CHECK(after(dry(1.0, 1.1, 2, -1), r6, h) == expected);
    // 2 a breaker: a breaker is never penalised.
    expected = zeros<T>(6);
    CHECK(after(dry(1.0, 1.1, 2, -1, {2}), r6, h) == expected);
    // 3 a breaker: the suffix after it is "0 1" (R 2), the match is 2 long.
    expected = {0, 0, -1, 0, 0, 0};
    CHECK(after(dry(1.0, 1.1, 2, -1, {3}), r6, h) == expected);
    // 0 a breaker: the suffix after the last 0 is "1" (R 1 < 2): nothing.
    expected = zeros<T>(6);
    CHECK(after(dry(1.0, 1.1, 2, -1, {0}), r6, h) == expected);
    // The last token a breaker: R 0.
    CHECK(after(dry(1.0, 1.1, 1, -1, {1}), r6, h) == expected);

    // A match cannot extend across a breaker: "3 0 1 2 5 3 0 1 2" matches
    // "3 0 1 2" (L 4) before 5, but with breaker 3 only "0 1 2" (L 3).
    // allowed_length 2, base 2: 2^2 = 4 without the breaker, 2^1 = 2 with.
    const std::vector<token_id> g{3, 0, 1, 2, 5, 3, 0, 1, 2};
    expected = {0, 0, 0, 0, 0, -4};
    CHECK(after(dry(1.0, 2.0, 2, -1), r6, g) == expected);
    expected = {0, 0, 0, 0, 0, -2};
    CHECK(after(dry(1.0, 2.0, 2, -1, {3}), r6, g) == expected);
    // Duplicate breaker ids are one.
    CHECK(after(dry(1.0, 2.0, 2, -1, {3, 3, 3}), r6, g) == expected);
    CHECK(dry(1.0, 2.0, 2, -1, {4, 3, 3}).sequence_breakers() == std::vector<token_id>{3, 4});
}

TEMPLATE_TEST_CASE("dry: masked tokens stay masked, huge penalties stay finite", "[processors][dry]", float, double)
{
    using T = TestType;
    constexpr T ninf = -std::numeric_limits<T>::infinity();
    constexpr T lowest = std::numeric_limits<T>::lowest();

    // Token 2 is masked before DRY: it stays -inf (not lifted to the lowest).
    const auto masked = row<T>({0, 0, -test_helpers::inf, 0, 0});
    std::vector<T> expected{0, 0, ninf, 0, 0};
    CHECK(after(dry(1.0, 1.1, 2, -1), masked, std::vector<token_id>{0, 1, 2, 0, 1}) == expected);

    // 400 zeros, base 10: 10^397 overflows double; the logit becomes the
    // lowest finite value, and the token is still kept.
    const std::vector<token_id> zs(400, 0);
    const auto r = row<T>({1, 0});
    expected = {lowest, 0};
    CHECK(after(dry(1.0, 10.0, 2, -1), r, zs) == expected);
    // multiplier 1e300, base 10, L 3 (allowed 2): 1e301 - 1 is finite in
    // double, beyond float.
    expected = {std::is_same<T, float>::value ? lowest : T(1.0 - 1e300 * std::pow(10.0, 1.0)), 0};
    CHECK(after(dry(1e300, 10.0, 2, -1), r, std::vector<token_id>{0, 0, 0, 0}) == expected);
    const auto d = chain{dry(1.0, 10.0, 2, -1)}.final_distribution(r, zs);
    CHECK(d.ids == std::vector<token_id>{1, 0});
    CHECK(d.probs == std::vector<double>{1.0, 0.0});

    // base 1: a flat penalty, whatever the length.
    expected = {T(1 - 0.75), 0};
    CHECK(after(dry(0.75, 1.0, 2, -1), r, zs) == expected);
}

TEMPLATE_TEST_CASE("dry: equals a brute-force reference on random histories", "[processors][dry]", float, double)
{
    using T = TestType;
    std::mt19937_64 rng(20240611);
    const auto pick = [&](std::size_t n) { return std::size_t(rng() % n); };
    const double multipliers[] = {0.0, 0.5, 0.8, 1.0, 2.5, 1e30};
    const double bases[] = {1.0, 1.1, 1.75, 3.0, 100.0};
    int edited = 0;
    for (int trial = 0; trial < 400; ++trial)
    {
        const reference_dry ref{multipliers[pick(6)], bases[pick(5)], std::int64_t(1 + pick(4)),
                                std::int64_t(pick(4) == 0 ? -1 : std::int64_t(pick(80))), {}};
        reference_dry with_breakers = ref;
        for (std::size_t b = pick(3); b > 0; --b)
        {
            with_breakers.breakers.push_back(token_id(pick(6)));
        }
        for (const reference_dry* p : std::initializer_list<const reference_dry*>{&ref, &with_breakers})
        {
            // One stage object across several histories and vocabularies:
            // its scratch is reused.
            const dry stage(p->multiplier, p->base, p->allowed, p->last_n, p->breakers);
            dry reused = stage;
            for (int h = 0; h < 4; ++h)
            {
                const std::size_t vocab = 6 + pick(3) * 61;  // 6, 67, 128
                const std::size_t alphabet = 2 + pick(5);      // few distinct ids: many repeats
                const std::size_t length = pick(5) == 0 ? pick(400) : pick(40);
                std::vector<token_id> history(length);
                for (auto& t : history)
                {
                    t = token_id(pick(alphabet));
                }
                if (pick(3) == 0 && length > 8)  // a planted long repeat
                {
                    const std::size_t from = pick(length / 2);
                    const std::size_t len = std::min(length - from, 1 + pick(length / 2));
                    const std::vector<token_id> copy(history.begin() + std::ptrdiff_t(from),
                                                     history.begin() + std::ptrdiff_t(from + len));
                    history.insert(history.end(), copy.begin(), copy.end());
                }
                const auto r = test_helpers::random_row<T>(vocab, std::uint64_t(trial * 8 + h), 3.0, false,
                                                           h == 3 ? 0.3 : 0.0);
                const std::vector<T> logits(r.begin(), r.end());
                const auto want = p->apply(logits, history);
                candidates<T> c;
                c.load(r);
                detail::run_stage(reused, c, history);
                std::vector<T> got(vocab);
                for (std::size_t i = 0; i < vocab; ++i)
                {
                    got[i] = c.logit(token_id(i));
                }
                INFO("trial " << trial << " history " << h << " multiplier " << p->multiplier << " base " << p->base
                              << " allowed " << p->allowed << " last_n " << p->last_n << " breakers "
                              << p->breakers.size() << " length " << history.size());
                CHECK(got == want);
                edited += got != logits;
            }
        }
    }
    CHECK(edited > 500);  // most cases are not trivial
}

TEMPLATE_TEST_CASE("dry: llama.cpp's test_dry cases", "[processors][dry]", float, double)
{
    using T = TestType;
    // tests/test-sampling.cpp: logits log(p); DRY; then the softmax. Its
    // breakers are token sequences; the one case with a breaker uses {{3}},
    // a single id, which is ours exactly. llama.cpp checks within 1e-5.
    struct llama_case
    {
        std::vector<double> probs;
        std::vector<token_id> history;
        std::vector<double> expected;
        double multiplier;
        double base;
        std::int64_t allowed;
        std::int64_t last_n;
        std::vector<token_id> breakers;
    };
    const std::vector<llama_case> cases{
        // "0 1" is 2 tokens, not more than allowed_length 2: no penalty.
        {{0.25, 0.25, 0.25, 0.25}, {0, 1}, {0.25, 0.25, 0.25, 0.25}, 1.0, 1.1, 2, 4, {}},
        // "0 1" repeats before 2: 2 loses 1 * 1.1^0 = 1:
        // 1 / (3 + e^-1) = 0.296923, e^-1 / (3 + e^-1) = 0.109232.
        {{0.25, 0.25, 0.25, 0.25}, {0, 1, 2, 0, 1}, {0.296923, 0.296923, 0.109232, 0.296923}, 1.0, 1.1, 2, 5, {}},
        // "0 1" repeats before 3, a breaker: no penalty.
        {{0.2, 0.2, 0.2, 0.2, 0.2}, {0, 1, 3, 4, 0, 1}, {0.2, 0.2, 0.2, 0.2, 0.2}, 1.0, 1.1, 2, 6, {3}},
        // multiplier 2: 2 loses 2: 1 / (4 + e^-2) = 0.241818, e^-2 / (4 + e^-2) = 0.032727.
        {{0.2, 0.2, 0.2, 0.2, 0.2},
         {0, 1, 2, 0, 1},
         {0.241818, 0.241818, 0.032727, 0.241818, 0.241818},
         2.0,
         1.1,
         2,
         5,
         {}},
        // "0 1" (L 2) is below allowed_length 4: no penalty.
        {{0.2, 0.2, 0.2, 0.2, 0.2}, {0, 1, 2, 3, 4, 0, 1}, {0.2, 0.2, 0.2, 0.2, 0.2}, 1.0, 1.1, 4, 7, {}},
    };
    for (std::size_t i = 0; i < cases.size(); ++i)
    {
        const auto& k = cases[i];
        INFO("llama.cpp case " << i);
        xt::xtensor<T, 1> r = xt::empty<T>({k.probs.size()});
        for (std::size_t j = 0; j < k.probs.size(); ++j)
        {
            r(j) = T(std::log(k.probs[j]));
        }
        const auto d = chain{dry(k.multiplier, k.base, k.allowed, k.last_n, k.breakers)}.final_distribution(r, k.history);
        const auto m = test_helpers::as_map(d);
        REQUIRE(m.size() == k.expected.size());
        for (std::size_t j = 0; j < k.expected.size(); ++j)
        {
            CHECK_THAT(m.at(token_id(j)), WithinAbs(k.expected[j], 1e-6));
        }
    }
    // The same numbers in closed form.
    const auto d = chain{dry(1.0, 1.1, 2, 5)}.final_distribution(row<T>({0, 0, 0, 0}), std::vector<token_id>{0, 1, 2, 0, 1});
    const double z = 3 + std::exp(-1.0);
    CHECK_THAT(test_helpers::as_map(d).at(2), WithinAbs(std::exp(-1.0) / z, 1e-7));
    CHECK_THAT(test_helpers::as_map(d).at(0), WithinAbs(1 / z, 1e-7));
}

TEMPLATE_TEST_CASE("dry: errors name the parameter and leave the chain usable", "[processors][dry][errors]", float,
                   double)
{
    using T = TestType;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    CHECK_THROWS_MATCHES(dry(-1.0), invalid_parameter, Message("dry: multiplier must be finite and >= 0, got -1"));
    CHECK_THROWS_MATCHES(dry(nan), invalid_parameter, Message("dry: multiplier must be finite and >= 0, got nan"));
    CHECK_THROWS_MATCHES(dry(test_helpers::inf), invalid_parameter,
                         Message("dry: multiplier must be finite and >= 0, got inf"));
    CHECK_THROWS_MATCHES(dry(1.0, 0.5), invalid_parameter, Message("dry: base must be finite and >= 1, got 0.5"));
    CHECK_THROWS_MATCHES(dry(1.0, test_helpers::inf), invalid_parameter,
                         Message("dry: base must be finite and >= 1, got inf"));
    CHECK_THROWS_MATCHES(dry(1.0, 1.75, 0), invalid_parameter, Message("dry: allowed_length must be >= 1, got 0"));
    CHECK_THROWS_MATCHES(dry(1.0, 1.75, -3), invalid_parameter, Message("dry: allowed_length must be >= 1, got -3"));
    CHECK_THROWS_MATCHES(
        dry(1.0, 1.75, 2, -2), invalid_parameter,
        Message("dry: penalty_last_n must be >= -1 (-1: the whole history, 0: off), got -2"));
    CHECK_THROWS_MATCHES(dry(1.0, 1.75, 2, -1, {3, -1}), invalid_parameter,
                         Message("dry: sequence breaker id -1 is negative"));
    // Checked whether or not the stage is on.
    CHECK_THROWS_MATCHES(dry(0.0, 0.5), invalid_parameter, Message("dry: base must be finite and >= 1, got 0.5"));

    // Ids outside the vocabulary, checked before any edit.
    const xt::xtensor<T, 1> big = xt::zeros<T>({std::size_t(50257)});
    const xt::xtensor<T, 1> before = big;
    auto c = chain{dry(1.0)};
    const std::vector<token_id> good{1, 2, 3, 1, 2};
    const std::vector<token_id> bad{1, 2, 70000, 1, 2};
    const std::vector<token_id> negative{1, 2, -3, 1, 2};
    CHECK_THROWS_MATCHES(c.final_distribution(big, bad), invalid_parameter,
                         Message("dry: history id 70000 is outside the vocabulary of 50257"));
    CHECK_THROWS_MATCHES(c.final_distribution(big, negative), invalid_parameter,
                         Message("dry: history id -3 is outside the vocabulary of 50257"));
    candidates<T> set;
    set.load(big);
    dry stage(1.0);
    CHECK_THROWS_AS(detail::run_stage(stage, set, bad), invalid_parameter);
    CHECK_FALSE(set.edited());
    // Usable after the throw: token 3 loses 1 (1.75^0).
    const auto d = c.final_distribution(big, good);
    CHECK(d.ids.back() == 3);
    CHECK(d.probs.back() * std::exp(1.0) == Approx(d.probs.front()).epsilon(1e-5));
    CHECK(big == before);
    // Outside the window, an id is not read, so not checked.
    auto windowed = chain{dry(1.0, 1.75, 2, 5)};
    const std::vector<token_id> bad_early{70000, 1, 2, 3, 1, 2};
    CHECK(windowed.final_distribution(big, bad_early).ids.back() == 3);
    // Off: nothing is read.
    auto off = chain{dry()};
    CHECK(off.final_distribution(row<T>({0, 1}), bad).ids.size() == 2);

    // A breaker outside the vocabulary.
    auto breaker = chain{dry(1.0, 1.75, 2, -1, {1, 4, 9})};
    CHECK_THROWS_MATCHES(breaker.final_distribution(row<T>({0, 0, 0, 0}), good), invalid_parameter,
                         Message("dry: sequence breaker id 4 is outside the vocabulary of 4"));
    CHECK(breaker.final_distribution(row<T>({0, 0, 0, 0, 0, 0, 0, 0, 0, 0}), good).ids.size() == 10);
}

TEMPLATE_TEST_CASE("dry: the caller's row is never written", "[processors][dry]", float, double)
{
    using T = TestType;
    const auto r = test_helpers::random_row<T>(1000, 7);
    const xt::xtensor<T, 1> before = r;
    std::vector<token_id> history;
    for (int i = 0; i < 300; ++i)
    {
        history.push_back(token_id((i * 7) % 23));
    }
    auto c = chain{dry(0.8, 1.75, 2), temperature{0.7}, top_k{40}};
    philox4x32 rng(3);
    for (int i = 0; i < 20; ++i)
    {
        const auto s = c.sample(r, history, rng);
        history.push_back(s.id);
    }
    c.final_distribution(r, history);
    CHECK(r == before);
    // And the edits are exactly the reference's.
    const reference_dry ref{0.8, 1.75, 2, -1, {}};
    const std::vector<T> logits(r.begin(), r.end());
    CHECK(after(dry(0.8, 1.75, 2), r, history) == ref.apply(logits, history));
    CHECK(after(dry(0.8, 1.75, 2), r, history) != logits);
}

TEST_CASE("dry: equals the reference on every short history", "[processors][dry]")
{
    // Every history of up to 9 tokens over {0, 1, 2} and of up to 14 over
    // {0, 1}: every shape of box the Z-algorithm meets, with and without a
    // breaker, at allowed_length 1 and 2.
    const auto r = row<double>({0.5, -1.0, 2.0});
    const std::vector<double> logits{0.5, -1.0, 2.0};
    const reference_dry refs[] = {{1.0, 2.0, 1, -1, {}}, {1.0, 2.0, 2, -1, {}}, {1.0, 2.0, 1, -1, {2}},
                                  {1.0, 3.0, 2, 7, {0}}};
    std::size_t count = 0;
    for (const std::size_t alphabet : {3, 2})
    {
        for (std::size_t length = 0; length <= (alphabet == 3 ? 9u : 14u); ++length)
        {
            std::size_t total = 1;
            for (std::size_t i = 0; i < length; ++i)
            {
                total *= alphabet;
            }
            for (std::size_t code = 0; code < total; ++code)
            {
                std::vector<token_id> history(length);
                std::size_t c = code;
                for (auto& t : history)
                {
                    t = token_id(c % alphabet);
                    c /= alphabet;
                }
                for (const auto& ref : refs)
                {
                    const auto want = ref.apply(logits, history);
                    const auto got =
                        after(dry(ref.multiplier, ref.base, ref.allowed, ref.last_n, ref.breakers), r, history);
                    if (got != want)
                    {
                        INFO("alphabet " << alphabet << " history code " << code << " length " << length
                                         << " allowed " << ref.allowed);
                        CHECK(got == want);
                    }
                    ++count;
                }
            }
        }
    }
    CHECK(count == 4 * (29524 + 32767));
}
