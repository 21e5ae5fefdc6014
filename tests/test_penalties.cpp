// dry.hpp: the DRY repetition penalty — hand-checked edits, a brute-force
// reference on many random histories (exact), llama.cpp's own test cases
// (tests/test-sampling.cpp, test_dry) re-derived, errors, and the caller's row.
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "helpers.hpp"

using namespace xsampler;
using Catch::Matchers::Message;
using Catch::Matchers::WithinAbs;
using test_helpers::row;

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
