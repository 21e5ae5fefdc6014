// stage.hpp, processors.hpp, sampler.hpp and the verbs of candidates.hpp: a
// processor's edits decide exactly what the edited row would, the caller's row
// is never written, the max and argmax follow the kept set, user stages run in
// both kinds of chain, and errors name the stage.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <xtensor/xview.hpp>

#include "helpers.hpp"

using namespace xsampler;
using Catch::Matchers::Message;
using test_helpers::inf;
using test_helpers::edited;
using test_helpers::row;
using test_helpers::set_logits;

namespace
{
    /// A filter that keeps the odd ids: not a rank prefix.
    struct odd_ids
    {
        template <class T>
        void apply(candidates<T>& c) const
        {
            c.retain_if([](token_id id, T) { return id % 2 == 1; }, "odd_ids");
        }
    };

    /// A filter that keeps nothing.
    struct keep_none
    {
        template <class T>
        void apply(candidates<T>& c) const
        {
            c.retain_if([](token_id, T) { return false; }, "keep_none");
        }
    };

    /// Edits touching many blocks, the argmax among them (lowered), a
    /// token raised above the max, masks, and a token in the row's tail.
    template <class T>
    set_logits edits_for(const xt::xtensor<T, 1>& r)
    {
        const auto n = token_id(r.size());
        const token_id top = greedy(r);
        return set_logits{{{top, -3.0}, {5, 14.5}, {70, -inf}, {71, 0.25}, {n - 1, 14.0}, {n / 2, -inf},
                           {130, 2.0}, {129, -inf}, {5, 13.0}}};
    }
}

TEMPLATE_TEST_CASE("a processor's edits give exactly what the edited row gives", "[processors][stage]", float, double)
{
    for (const std::uint64_t seed : {1u, 2u, 3u})
    {
        const auto r = test_helpers::random_row<TestType>(3001, seed, 3.0, seed == 2, seed == 3 ? 0.3 : 0.0);
        const xt::xtensor<TestType, 1> before = r;
        const auto p = edits_for(r);
        const auto e = edited(r, p);
        int which = 0;
        const auto same = [&](auto with, auto without) {
            INFO("chain " << ++which << ", seed " << seed);
            CHECK(with.final_distribution(r).ids == without.final_distribution(e).ids);
            CHECK(with.final_distribution(r).probs == without.final_distribution(e).probs);
            philox4x32 a(seed), b(seed);
            for (int i = 0; i < 50; ++i)
            {
                const auto x = with.sample(r, {}, a);
                const auto y = without.sample(e, {}, b);
                CHECK(x.id == y.id);
                CHECK(x.logprob == y.logprob);
            }
        };
        same(chain{p}, chain{});
        same(chain{p, temperature{0.7}, top_k{40}}, chain{temperature{0.7}, top_k{40}});
        same(chain{p, top_p{0.9}}, chain{top_p{0.9}});
        same(chain{p, temperature{1.3}, top_p{0.5}, min_p{0.02}}, chain{temperature{1.3}, top_p{0.5}, min_p{0.02}});
        same(chain{p, min_p{0.1}}, chain{min_p{0.1}});
        same(chain{p, temperature{0.0}}, chain{temperature{0.0}});
        // A top_k after the processor: the fused top-k pass with edits.
        same(chain{p, top_k{40}}, chain{top_k{40}});
        same(chain{p, top_k{1}}, chain{top_k{1}});
        same(chain{p, temperature{0.8}, top_k{5}, top_p{0.9}, min_p{0.05}},
             chain{temperature{0.8}, top_k{5}, top_p{0.9}, min_p{0.05}});
        same(chain{p, top_k{200}, temperature{0.0}}, chain{top_k{200}, temperature{0.0}});
        same(chain{p, temperature{1.5}, p, top_k{3}, min_p{0.2}}, chain{temperature{1.5}, top_k{3}, min_p{0.2}});
        // Edits on a sparse set change the kept tokens only: the edited row
        // with every token outside the raw row's top 100 masked.
        const auto kept = chain{top_k{100}}.final_distribution(r).ids;
        xt::xtensor<TestType, 1> e_kept = xt::full_like(e, -std::numeric_limits<TestType>::infinity());
        for (const token_id id : kept)
        {
            e_kept(std::size_t(id)) = e(std::size_t(id));
        }
        const auto with = chain{top_k{100}, p, top_p{0.8}}.final_distribution(r);
        const auto without = chain{top_p{0.8}}.final_distribution(e_kept);
        CHECK(with.ids == without.ids);
        CHECK(with.probs == without.probs);
        philox4x32 rng(1);
        CHECK(chain{p, temperature{0.0}}.sample(r, {}, rng).id == token_id(r.size() - 1));
        CHECK(r == before);  // the caller's row is never written
    }
}

TEMPLATE_TEST_CASE("a processor before top_k keeps the fused top-k pass, exactly", "[processors][stage]", float, double)
{
    const auto r = test_helpers::random_row<TestType>(5000, 4);
    // Token 17 raised to the top: outside the raw row's top k + margin, it
    // joins the pending list.
    const set_logits raise{{{17, 100.0}}};
    chain c{raise, top_k{3}};
    const auto d = c.final_distribution(r);
    REQUIRE(d.ids.size() == 3);
    CHECK(d.ids[0] == 17);
    CHECK(d.probs == chain{top_k{3}}.final_distribution(edited(r, raise)).probs);
    candidates<TestType> fused;
    fused.load(r, 3);
    raise.apply(fused, {});
    CHECK(fused.top_k_pending());
    CHECK(fused.logit(17) == TestType(100));
    CHECK(fused.argmax() == 17);
    // temperature before top_k keeps the fused pass (same result either way).
    chain t{temperature{0.5}, top_k{3}};
    CHECK(t.final_distribution(r).ids == chain{top_k{3}, temperature{0.5}}.final_distribution(r).ids);
}

TEMPLATE_TEST_CASE("the max and argmax follow the kept set", "[candidates][stage]", float, double)
{
    const auto r = row<TestType>({1.0, 0.5, 3.0, 2.0, 4.0, 2.0, -inf, 1.5});
    // The best odd id is 3 (logit 2, tied with 5: the lower id).
    chain greedy_after{odd_ids{}, temperature{0.0}};
    philox4x32 rng(1);
    CHECK(greedy_after.sample(r, {}, rng).id == 3);
    const auto d = chain{odd_ids{}}.final_distribution(r);
    CHECK(d.ids == std::vector<token_id>{3, 5, 7, 1});
    // Weights relative to the kept best: p(3) = 1 / (1 + 1 + e^-0.5 + e^-1.5).
    CHECK(d.probs[0] == Approx(1.0 / (2.0 + std::exp(-0.5) + std::exp(-1.5))).epsilon(1e-6));
    CHECK(chain{odd_ids{}, top_k{1}}.final_distribution(r).ids == std::vector<token_id>{3});
    CHECK(chain{odd_ids{}, top_p{0.3}}.final_distribution(r).ids == std::vector<token_id>{3});
    // Lowering the argmax: the next best takes over (ties: the lower id).
    CHECK(chain{set_logits{{{4, 0.0}, {2, 0.0}}}, temperature{0.0}}.sample(r, {}, rng).id == 3);
    CHECK(chain{set_logits{{{4, -inf}}}, min_p{1.0}}.final_distribution(r).ids == std::vector<token_id>{2});
}

TEMPLATE_TEST_CASE("stage errors name the stage and leave the chain usable", "[processors][errors]", float, double)
{
    const auto r = row<TestType>({1.0, 2.0, -inf, 0.5});
    const auto expected = chain{temperature{0.5}}.final_distribution(r);
    chain masks_all{set_logits{{{0, -inf}, {1, -inf}, {3, -inf}}}, temperature{0.5}};
    CHECK_THROWS_MATCHES(masks_all.final_distribution(r), invalid_logits,
                         Message("set_logits: every token is masked"));
    chain none{keep_none{}};
    CHECK_THROWS_MATCHES(none.final_distribution(r), invalid_logits, Message("keep_none: kept no token"));
    chain bad{set_logits{{{1, inf}}}};
    CHECK_THROWS_MATCHES(bad.final_distribution(r), invalid_logits, Message("set_logit: token 1 set to +inf"));
    chain outside{set_logits{{{4, 0.0}}}};
    CHECK_THROWS_MATCHES(outside.final_distribution(r), invalid_parameter,
                         Message("set_logit: token id 4 is outside the vocabulary of 4"));
    chain negative{set_logits{{{-1, 0.0}}}};
    CHECK_THROWS_MATCHES(negative.final_distribution(r), invalid_parameter,
                         Message("set_logit: token id -1 is outside the vocabulary of 4"));
    chain nan{set_logits{{{3, std::nan("")}}}};
    CHECK_THROWS_MATCHES(nan.final_distribution(r), invalid_logits, Message("set_logit: token 3 set to NaN"));
    // The same chains on another row: as good as new.
    chain ok{set_logits{{{0, -inf}}}, temperature{0.5}};
    CHECK_THROWS_AS(ok.final_distribution(row<TestType>({-inf, -inf})), invalid_logits);
    const auto after = ok.final_distribution(r);
    CHECK(after.ids == std::vector<token_id>{1, 3});
    CHECK(masks_all.final_distribution(row<TestType>({1.0, 2.0, 5.0, 0.5})).ids == std::vector<token_id>{2});
    CHECK(chain{temperature{0.5}}.final_distribution(r).probs == expected.probs);
}

TEMPLATE_TEST_CASE("any verb after a fused top-k load gives what an unfused load gives", "[candidates]", float,
                   double)
{
    const auto r = test_helpers::random_row<TestType>(500, 3, 3.0, true, 0.1);
    const auto top = test_helpers::reference(r).kept;  // (logit, id), ranked
    // Each case: verbs on the set after load(r, 4) and after load(r).
    using verbs = std::function<void(candidates<TestType>&)>;
    const std::vector<verbs> cases = {
        [](auto& c) { c.keep_top(4); },
        [](auto& c) { c.keep_top(2); },  // fewer than the fused k: on the list
        [](auto& c) { c.keep_top(5); },  // more: unfused first
        [](auto& c) { c.keep_top(0); },
        [](auto& c) { top_p(0.5).apply(c); },
        [](auto& c) { c.divide_scale(2.0); top_p(0.9).apply(c); },
        [](auto& c) { c.keep_log_weight_at_least(TestType(-1)); },
        [](auto& c) { c.retain_if([](token_id id, TestType) { return id % 2 == 1; }, "odd"); },
        [](auto& c) { c.keep_argmax(); },
        [](auto& c) { c.divide_scale(0.5); },
        [](auto& c) { (void)c.size(); c.keep_top(4); },
        [](auto& c) { (void)c.total_weight(); },
        [&](auto& c) { c.mask(top[0].second); c.set_logit(top[9].second, TestType(40)); c.keep_top(4); },
        [&](auto& c) { c.mask(top[0].second); c.set_logit(7, TestType(40)); top_p(0.7).apply(c); },
        [&](auto& c) { c.set_logit(top[1].second, TestType(-50)); c.keep_argmax(); },
        [&](auto& c) { c.set_logit(top[1].second, TestType(-50)); c.keep_top(3); top_p(0.6).apply(c); },
        [&](auto& c) {
            for (std::size_t i = 0; i < 80; ++i)  // more lowering edits than the margin
            {
                c.set_logit(top[i].second, TestType(-20));
            }
            CHECK(!c.top_k_pending());
            c.keep_top(4);
        },
    };
    for (std::size_t i = 0; i < cases.size(); ++i)
    {
        INFO("case " << i);
        candidates<TestType> fused, plain;
        fused.load(r, 4);
        plain.load(r);
        CHECK(fused.top_k_pending());
        cases[i](fused);
        cases[i](plain);
        CHECK(fused.argmax() == plain.argmax());
        CHECK(fused.max_logit() == plain.max_logit());
        const auto a = distribution_of(fused);
        const auto b = distribution_of(plain);
        CHECK(a.ids == b.ids);
        CHECK(a.probs == b.probs);
        CHECK(!fused.top_k_pending());
    }
    // A reader walks the kept set: the whole row, unfused.
    candidates<TestType> c;
    c.load(r, 4);
    CHECK(c.size() == test_helpers::reference(r).kept.size());
    CHECK(c.dense());
    // A throw while pending leaves the set loadable: the next load starts afresh.
    c.load(r, 4);
    c.mask(top[0].second);
    CHECK_THROWS_AS(c.set_logit(0, std::numeric_limits<TestType>::quiet_NaN()), invalid_logits);
    c.load(r, 4);
    c.keep_top(4);
    CHECK(distribution_of(c).ids == chain{top_k{4}}.final_distribution(r).ids);
}

namespace
{
    /// Random edits of a row: a mix of raising, lowering and masking, of
    /// tokens inside and outside the raw row's top k + 64, some edited twice.
    template <class T>
    set_logits random_edits(const xt::xtensor<T, 1>& r, std::size_t count, std::size_t lowering_top,
                            std::uint64_t seed)
    {
        const auto ranked = test_helpers::reference(r).kept;
        philox4x32 rng(seed, 7);
        set_logits p;
        const auto pick = [&](std::size_t n) { return std::size_t(uniform01(rng) * double(n)); };
        // Lower (or mask) the best tokens: lowering_top > 64 forces the fallback.
        for (std::size_t i = 0; i < lowering_top && i < ranked.size(); ++i)
        {
            p.edits.emplace_back(ranked[i].second, uniform01(rng) < 0.3 ? -inf : ranked[i].first - 1.0 - 10.0 * uniform01(rng));
        }
        for (std::size_t i = 0; i < count; ++i)
        {
            const double u = uniform01(rng);
            // Half of them among the best 300 ranks, the rest anywhere.
            const token_id id = u < 0.5 && !ranked.empty() ? ranked[pick(std::min<std::size_t>(300, ranked.size()))].second
                                                           : token_id(pick(r.size()));
            const double v = uniform01(rng);
            double x;
            if (v < 0.2)
            {
                x = -inf;
            }
            else if (v < 0.3 && !ranked.empty())
            {
                x = ranked[pick(std::min<std::size_t>(50, ranked.size()))].first;  // a tie with a top token
            }
            else
            {
                x = normal(4.0, rng) + (v < 0.6 ? 6.0 : 0.0);
            }
            p.edits.emplace_back(id, x);
            if (uniform01(rng) < 0.1)
            {
                p.edits.emplace_back(id, normal(3.0, rng));  // edited again
            }
        }
        return p;
    }
}

TEMPLATE_TEST_CASE("edits before a fused top_k give exactly what the edited row gives", "[processors][candidates]",
                   float, double)
{
    int checked_pending[2] = {};  // by form: set_logit one by one, edit_each
    int checked_fallback[2] = {};
    for (std::uint64_t seed = 1; seed <= 12; ++seed)
    {
        const bool ties = seed % 3 == 0;
        const double masked = seed % 4 == 1 ? 0.3 : 0.0;
        const std::size_t vocab = seed % 2 == 0 ? 4099 : 700;
        const auto r = test_helpers::random_row<TestType>(vocab, seed, 3.0, ties, masked);
        for (const std::size_t count : {std::size_t(0), std::size_t(3), std::size_t(30), std::size_t(150)})
        {
            for (const std::size_t lowering : {std::size_t(0), std::size_t(10), std::size_t(64), std::size_t(65),
                                               std::size_t(120)})
            {
                auto p = random_edits(r, count, lowering, seed * 1000 + count * 10 + lowering);
                p.in_one_call = (seed + count + lowering) % 2 == 1;  // set_logit one by one, or edit_each
                const auto e = edited(r, p);
                if (test_helpers::reference(e).kept.empty())
                {
                    continue;  // every token masked
                }
                for (const std::size_t k : {std::size_t(1), std::size_t(7), std::size_t(40), std::size_t(300)})
                {
                    INFO("seed " << seed << ", " << count << " edits, " << lowering << " lowering, k " << k
                                 << (p.in_one_call ? ", edit_each" : ""));
                    // Whether the fused selection survived the edits.
                    candidates<TestType> c;
                    c.load(r, k);
                    p.apply(c, {});
                    (c.top_k_pending() ? checked_pending : checked_fallback)[p.in_one_call] += 1;
                    const auto same = [&](auto with, auto without) {
                        const auto a = with.final_distribution(r);
                        const auto b = without.final_distribution(e);
                        CHECK(a.ids == b.ids);
                        CHECK(a.probs == b.probs);
                        philox4x32 x(seed), y(seed);
                        for (int i = 0; i < 10; ++i)
                        {
                            const auto s = with.sample(r, {}, x);
                            const auto t = without.sample(e, {}, y);
                            CHECK(s.id == t.id);
                            CHECK(s.logprob == t.logprob);
                        }
                    };
                    same(chain{p, top_k{std::int64_t(k)}}, chain{top_k{std::int64_t(k)}});
                    same(chain{temperature{0.7}, p, top_k{std::int64_t(k)}, top_p{0.9}, min_p{0.01}},
                         chain{temperature{0.7}, top_k{std::int64_t(k)}, top_p{0.9}, min_p{0.01}});
                    same(chain{p, top_k{std::int64_t(k)}, temperature{0.0}}, chain{top_k{std::int64_t(k)}, temperature{0.0}});
                    // As `extra` processors (generate's min_tokens).
                    chain fused{top_k{std::int64_t(k)}, top_p{0.8}};
                    const auto a = distribution_of(fused.filter(r, {}, p));
                    const auto b = chain{top_k{std::int64_t(k)}, top_p{0.8}}.final_distribution(e);
                    CHECK(a.ids == b.ids);
                    CHECK(a.probs == b.probs);
                }
            }
        }
    }
    // Both paths were taken, by both forms.
    for (int form = 0; form < 2; ++form)
    {
        CHECK(checked_pending[form] > 50);
        CHECK(checked_fallback[form] > 50);
    }
}

TEMPLATE_TEST_CASE("edit_each is set_logit one token after another, in every state of the set", "[candidates]",
                   float, double)
{
    using T = TestType;
    const auto r = test_helpers::random_row<T>(3000, 8, 3.0, false, 0.1);
    const auto ranked = test_helpers::reference(r).kept;
    token_set half;  // a mask that keeps a sixteenth or more: deferred on a dense set
    for (std::size_t i = 0; i < r.size(); i += 2)
    {
        half.insert(token_id(i));
    }
    // A few edits a fused list survives: tokens outside it lowered (one to
    // -inf) and raised (j = 5), members of it lowered, one twice, and an id
    // twice. Then all: the best 100 ranks (more lowered than any margin),
    // 300 more anywhere, two of them twice.
    philox4x32 rng(3);
    std::vector<token_id> anywhere;
    for (std::size_t i = 0; i < 300; ++i)
    {
        anywhere.push_back(token_id(uniform01(rng) * double(r.size())) % token_id(r.size()));
    }
    const std::vector<token_id> few = {anywhere[0], anywhere[1], ranked[3].second, anywhere[2],
                                       ranked[3].second, anywhere[3], ranked[60].second, anywhere[1]};
    std::vector<token_id> all;
    for (std::size_t i = 0; i < 100; ++i)
    {
        all.push_back(ranked[i].second);
    }
    all.insert(all.end(), anywhere.begin(), anywhere.end());
    all.push_back(all[5]);
    all.push_back(all[200]);
    const auto f = [](std::size_t j, T x) {
        return j % 37 == 0 ? -std::numeric_limits<T>::infinity() : j % 5 == 0 ? x + T(4) : j < 100 ? x - T(20) : x - T(1);
    };
    // The states: dense, dense with a deferred mask, sparse, and a pending
    // fused top-k, alone or with a pending keep_in; a row of T, and for
    // float one of f16 (read in place).
    const auto check_state = [&](const auto& row, const std::string& state, const std::vector<token_id>& some) {
        INFO(state << ", " << some.size() << " edits");
        candidates<T> each, one;
        for (auto* c : {&each, &one})
        {
            c->load(row, state.rfind("pending", 0) == 0 ? 20 : 0);
            if (state == "masked" || state == "pending keep_in")
            {
                c->keep_in(half, "mask");
            }
            if (state == "sparse")
            {
                c->keep_top(500);
            }
        }
        CHECK(each.top_k_pending() == (state.rfind("pending", 0) == 0));
        each.edit_each(some, f);
        for (std::size_t j = 0; j < some.size(); ++j)
        {
            const T x = one.logit(some[j]);
            if (x != -std::numeric_limits<T>::infinity() && f(j, x) != x)
            {
                one.set_logit(some[j], f(j, x));
            }
        }
        CHECK(each.top_k_pending() == one.top_k_pending());
        if (&some == &few && state == "pending")
        {
            CHECK(each.top_k_pending());  // three lowered members of the list: within its margin
        }
        for (std::size_t i = 0; i < r.size(); ++i)
        {
            if (each.logit(token_id(i)) != one.logit(token_id(i)))
            {
                FAIL_CHECK("token " << i << ": " << each.logit(token_id(i)) << " != " << one.logit(token_id(i)));
            }
        }
        CHECK(each.max_logit() == one.max_logit());
        CHECK(each.argmax() == one.argmax());
        CHECK(each.edited() == one.edited());  // (every case changes a logit: else edit_each may say true)
        candidates<T> each_copy = each, one_copy = one;  // (size() unfuses: on copies)
        CHECK(each_copy.size() == one_copy.size());
        each.keep_top(20);
        one.keep_top(20);
        const auto a = distribution_of(each);
        const auto b = distribution_of(one);
        CHECK(a.ids == b.ids);
        CHECK(a.probs == b.probs);
    };
    for (const std::string state : {"dense", "masked", "sparse", "pending", "pending keep_in"})
    {
        check_state(r, state, few);
        check_state(r, state, all);
    }
    if constexpr (std::is_same<T, float>::value)
    {
        xt::xtensor<f16, 1> r16 = xt::xtensor<f16, 1>::from_shape({r.size()});
        for (std::size_t i = 0; i < r.size(); ++i)
        {
            r16(i) = f16(r(i));
        }
        for (const std::string state : {"dense", "pending"})
        {
            check_state(r16, state, few);
            check_state(r16, state, all);
        }
    }
    // Errors: every id checked first, nothing changed; a NaN or +inf result
    // as set_logit's, the edits before it made.
    candidates<T> c;
    c.load(r, 20);
    const std::vector<token_id> bad = {ranked[0].second, token_id(r.size())};
    CHECK_THROWS_MATCHES(c.edit_each(bad, [](std::size_t, T) { return T(0); }), invalid_parameter,
                         Message("edit_each: token id 3000 is outside the vocabulary of 3000"));
    const std::vector<token_id> negative = {-1};
    CHECK_THROWS_MATCHES(c.edit_each(negative, [](std::size_t, T) { return T(0); }), invalid_parameter,
                         Message("edit_each: token id -1 is outside the vocabulary of 3000"));
    CHECK(c.logit(ranked[0].second) == ranked[0].first);
    CHECK(c.top_k_pending());
    const std::vector<token_id> two = {ranked[0].second, ranked[1].second};
    CHECK_THROWS_MATCHES(c.edit_each(two,
                                     [](std::size_t j, T) { return j == 0 ? T(50) : std::numeric_limits<T>::quiet_NaN(); }),
                         invalid_logits, Message("set_logit: token " + std::to_string(ranked[1].second) + " set to NaN"));
    CHECK(c.logit(ranked[0].second) == T(50));
    CHECK(c.logit(ranked[1].second) == ranked[1].first);
    c.load(r);  // usable again
    CHECK(c.logit(ranked[0].second) == ranked[0].first);
}

TEMPLATE_TEST_CASE("the fused selection survives up to the margin of lowering edits", "[candidates]", float, double)
{
    const auto r = test_helpers::random_row<TestType>(3000, 5);
    const auto ranked = test_helpers::reference(r).kept;
    const std::size_t margin = 64;
    candidates<TestType> c;
    c.load(r, 10, margin);
    // Raises, edits outside the list and masks outside it are free.
    c.set_logit(ranked[2000].second, TestType(30));
    c.set_logit(ranked[0].second, TestType(31));
    c.mask(ranked[1500].second);
    for (std::size_t i = 1; i <= margin; ++i)
    {
        c.set_logit(ranked[i].second, TestType(-10));
        CHECK(c.top_k_pending());
    }
    // The list holds at least the top 10 + 64 and fewer than the selector's
    // capacity (2 x 74): lowering its members one by one unfuses within it.
    std::size_t i = margin + 1;
    while (c.top_k_pending() && i < 1000)
    {
        c.set_logit(ranked[i++].second, TestType(-10));
    }
    CHECK(!c.top_k_pending());
    CHECK(i <= 2 * (10 + margin) + 1);
    CHECK(c.dense());
    c.keep_top(10);
    CHECK(c.items().size() == 10);
    CHECK(c.argmax() == ranked[0].second);
}

TEMPLATE_TEST_CASE("verbs after a dense top-p keep weights, thresholds and the fused load right", "[candidates]",
                   float, double)
{
    // Found by review: retain_if dropping the argmax after a dense top_p
    // must not reuse the weights stored relative to the old max.
    xt::xtensor<TestType, 1> r = xt::full_like(xt::xtensor<TestType, 1>::from_shape({256}), TestType(-20));
    r(0) = 5;
    r(1) = 4;
    r(2) = 3;
    r(3) = 2;
    r(9) = -std::numeric_limits<TestType>::infinity();
    chain later{top_p{0.999}, odd_ids{}};
    candidates<TestType> fresh;
    fresh.load(r);
    fresh.retain_if([&](token_id id, TestType) { return id % 2 == 1 && r(std::size_t(id)) > TestType(-20); }, "x");
    const auto d = later.final_distribution(r);
    CHECK(d.ids == std::vector<token_id>{1, 3});
    CHECK(d.probs == distribution_of(fresh).probs);
    philox4x32 rng(5);
    for (int i = 0; i < 20; ++i)
    {
        const auto t = later.sample(r, {}, rng);
        CHECK(t.logprob == std::log(d.probs[t.id == 1 ? 0 : 1]));
    }
    // keep_log_weight_at_least: d must be <= 0; -inf keeps the unmasked tokens.
    candidates<TestType> c;
    c.load(r);
    CHECK_THROWS_MATCHES(c.keep_log_weight_at_least(TestType(0.5)), invalid_parameter,
                         Message("keep_log_weight_at_least: d must be <= 0, got 0.5"));
    CHECK_THROWS_AS(c.keep_log_weight_at_least(TestType(std::nan(""))), invalid_parameter);
    c.keep_log_weight_at_least(-std::numeric_limits<TestType>::infinity());
    CHECK(c.size() == 255);
    // keep_argmax settles a fused top-k load.
    c.load(r, 3);
    c.keep_argmax();
    top_p(0.5).apply(c);
    CHECK(c.argmax() == 0);
}

TEMPLATE_TEST_CASE("keep_subset keeps exactly a subset a stage computed, and refuses anything else", "[candidates]",
                   float, double)
{
    const TestType ninf = -std::numeric_limits<TestType>::infinity();
    xt::xtensor<TestType, 1> r = xt::full_like(xt::xtensor<TestType, 1>::from_shape({300}), TestType(-3));
    r(4) = 2;
    r(7) = 5;
    r(100) = 1;
    r(299) = 4;
    r(50) = ninf;
    const auto kept = [](candidates<TestType>& c) {
        std::vector<token_id> ids;
        c.for_each_by_id([&](token_id id, TestType) { ids.push_back(id); });
        return ids;
    };
    const auto refused = [&](candidates<TestType>& c, std::vector<scored<TestType>> list, token_id bad) {
        const std::size_t before = c.size();
        CHECK_THROWS_MATCHES(c.keep_subset(list, "mine"), invalid_parameter,
                             Message("mine: keep_subset: token " + std::to_string(bad) +
                                     " is not a token of the set with its logit, or is listed twice"));
        CHECK(c.size() == before);  // unchanged
    };
    candidates<TestType> c;
    c.load(r);
    // Dense: the argmax may go; the max follows what is kept.
    refused(c, {{TestType(2), 4}, {ninf, 50}}, 50);                   // masked: not in the set
    refused(c, {{TestType(2), 4}, {TestType(3), 100}}, 100);          // another logit
    refused(c, {{TestType(2), 4}, {TestType(1), 100}, {TestType(2), 4}}, 4);  // twice
    refused(c, {{TestType(2), 300}}, 300);                            // past the vocabulary
    refused(c, {{TestType(2), 4}, {TestType(1), 100}, {TestType(1), 100}}, 100);  // twice, in id order
    std::vector<scored<TestType>> none;
    CHECK_THROWS_MATCHES(c.keep_subset(none, "mine"), invalid_logits, Message("mine: kept no token"));
    std::vector<scored<TestType>> list{{TestType(1), 100}, {TestType(4), 299}, {TestType(2), 4}};
    c.keep_subset(list, "mine");
    CHECK(!c.dense());
    CHECK(c.size() == 3);
    CHECK(c.argmax() == 299);
    CHECK(c.max_logit() == TestType(4));
    CHECK(kept(c) == std::vector<token_id>{4, 100, 299});
    // Sparse: only tokens still in the set, each once; the bits left clear
    // by a refusal (the same tokens are accepted after it).
    refused(c, {{TestType(5), 7}}, 7);                                // dropped before
    refused(c, {{TestType(2), 4}, {TestType(2), 4}}, 4);
    std::vector<scored<TestType>> two{{TestType(2), 4}, {TestType(1), 100}};
    c.keep_subset(two, "mine");
    CHECK(kept(c) == std::vector<token_id>{4, 100});
    CHECK(c.argmax() == 4);
    // The distribution is the one of the subset.
    candidates<TestType> fresh;
    fresh.load(r);
    fresh.retain_if([](token_id id, TestType) { return id == 4 || id == 100; }, "x");
    CHECK(distribution_of(c).probs == distribution_of(fresh).probs);
    // Dense, in id order (checked in one pass, no bitmap), the best token
    // kept: the weights a dense pass stored stay current, and the
    // distribution is the subset's.
    candidates<TestType> d;
    d.load(r);
    (void)d.total_weight_stored();
    std::vector<scored<TestType>> in_order{{TestType(2), 4}, {TestType(5), 7}, {TestType(1), 100}};
    d.keep_subset(in_order, "mine");
    CHECK(kept(d) == std::vector<token_id>{4, 7, 100});
    CHECK(d.argmax() == 7);
    fresh.load(r);
    fresh.retain_if([](token_id id, TestType) { return id == 4 || id == 7 || id == 100; }, "x");
    CHECK(distribution_of(d).probs == distribution_of(fresh).probs);
    // After a fused top-k load: the set is the unfused one.
    c.load(r, 2);
    std::vector<scored<TestType>> low{{TestType(-3), 0}};
    c.keep_subset(low, "mine");
    CHECK(kept(c) == std::vector<token_id>{0});
    // A negative id is refused like any other stranger.
    refused(c, {{TestType(-3), -1}}, -1);
}

TEMPLATE_TEST_CASE("keep_monotone keeps x >= low that pass, asking decide only from low up to sure", "[candidates]",
                   float, double)
{
    xt::xtensor<TestType, 1> r = {0, 1, 2, 3, 4, 5, 6, 7};
    r(2) = -std::numeric_limits<TestType>::infinity();
    const auto kept = [](candidates<TestType>& c) {
        std::vector<token_id> ids;
        c.for_each_by_id([&](token_id id, TestType) { ids.push_back(id); });
        return ids;
    };
    for (const bool sparse : {false, true})
    {
        CAPTURE(sparse);
        candidates<TestType> c;
        c.load(r);
        if (sparse)
        {
            c.keep_top(7);  // every unmasked token, as a list
        }
        std::vector<TestType> asked;
        c.keep_monotone(TestType(3), TestType(6), [&](TestType x) { asked.push_back(x); return x >= TestType(4); }, 1);
        std::sort(asked.begin(), asked.end());
        CHECK(asked == std::vector<TestType>{3, 4, 5});  // each once; never below low, never from sure
        CHECK(kept(c) == std::vector<token_id>{4, 5, 6, 7});
        CHECK(c.argmax() == 7);
        // Fewer than min_keep pass: the top min_keep instead.
        c.keep_monotone(TestType(7), TestType(7), [](TestType) { return false; }, 3);
        CHECK(kept(c) == std::vector<token_id>{5, 6, 7});
        // A decide that drops the best token (not monotone): the max follows.
        c.keep_monotone(TestType(5), TestType(8), [](TestType x) { return x < TestType(7); }, 1);
        CHECK(kept(c) == std::vector<token_id>{5, 6});
        CHECK(c.argmax() == 6);
        CHECK(c.max_logit() == TestType(6));
    }
    // Found by review: a low of -inf keeps no masked token (decide never
    // sees one); NaN is refused and changes nothing.
    candidates<TestType> d;
    d.load(r);
    const TestType inf = std::numeric_limits<TestType>::infinity();
    bool saw_masked = false;
    d.keep_monotone(-inf, -inf, [&](TestType x) { saw_masked = saw_masked || x == -inf; return true; }, 1);
    CHECK_FALSE(saw_masked);
    CHECK(kept(d) == std::vector<token_id>{0, 1, 3, 4, 5, 6, 7});
    CHECK_THROWS_MATCHES(d.keep_monotone(TestType(std::nan("")), TestType(0), [](TestType) { return true; }, 1),
                         invalid_parameter, Message("keep_monotone: low and sure must not be NaN"));
    CHECK(d.size() == 7);
    // A decide that reads the set (which may order a short list by id) sees
    // every token once.
    d.keep_top(7);
    std::vector<TestType> seen;
    d.keep_monotone(TestType(0), TestType(8), [&](TestType x) { (void)d.total_weight(); seen.push_back(x); return true; }, 1);
    std::sort(seen.begin(), seen.end());
    CHECK(seen == std::vector<TestType>{0, 1, 3, 4, 5, 6, 7});
    CHECK(kept(d) == std::vector<token_id>{0, 1, 3, 4, 5, 6, 7});
}

TEST_CASE("a copy of a workspace that evaluated a strided row reads its own copy of the row", "[candidates]")
{
    // A column of a matrix is not contiguous: load() evaluates it into the
    // workspace's buffer. A copy must read its own buffer, not the original's,
    // which the original's next load overwrites.
    xt::xtensor<float, 2> m = xt::zeros<float>({std::size_t(100), std::size_t(2)});
    for (std::size_t i = 0; i < 100; ++i)
    {
        m(i, 0) = float(i % 7);
        m(i, 1) = -float(i);
    }
    candidates<float> a;
    a.load(xt::view(m, xt::all(), 0));
    a.set_logit(0, 9.0f);  // block 0 is copied; ids 64 to 99 are still read from the row
    candidates<float> b(a);
    candidates<float> c;
    c = a;
    a.load(xt::view(m, xt::all(), 1));
    for (candidates<float>* x : {&b, &c})
    {
        CHECK(x->logit(0) == 9.0f);
        CHECK(x->logit(70) == 0.0f);
        CHECK(x->logit(99) == 1.0f);
        CHECK(x->argmax() == 0);
        x->keep_top(3);
        CHECK(x->items().size() == 3);
        CHECK(x->logit(69) == 6.0f);
    }
    CHECK(a.argmax() == 0);
    CHECK(a.logit(99) == -99.0f);
}

TEST_CASE("a token outside a keep_in mask stays out after a pass writes the mask, and masks intersect", "[candidates]")
{
    // A keep_in of half the row is deferred; a pass over the runs writes it
    // into the row as -inf. An edit must still tell a token outside the mask
    // (dropped) from one the caller masked (an edit revives it).
    xt::xtensor<float, 1> row = xt::zeros<float>({std::size_t(200)});
    for (std::size_t i = 0; i < 200; ++i)
    {
        row(i) = float(i % 7) * 0.25f;
    }
    row(8) = -std::numeric_limits<float>::infinity();
    token_set even, low;
    for (token_id i = 0; i < 200; i += 2)
    {
        even.insert(i);
    }
    for (token_id i = 0; i < 150; ++i)
    {
        low.insert(i);
    }
    for (const bool written : {false, true})
    {
        candidates<float> c;
        c.load(row);
        c.keep_in(even, "even");
        c.keep_in(low, "low");
        CHECK(c.dense());
        if (written)
        {
            c.for_each_run([](const float*, std::size_t, std::size_t) {});
        }
        c.set_logit(3, 5.0f);    // odd: outside the first mask
        c.set_logit(160, 5.0f);  // even but outside the second
        c.set_logit(8, 4.0f);    // masked by the caller, inside both: revived
        CHECK(c.logit(3) == -std::numeric_limits<float>::infinity());
        CHECK(c.logit(160) == -std::numeric_limits<float>::infinity());
        const candidates<float>& read = c;  // the max is a cache: its readers are const
        CHECK(read.argmax() == 8);
        CHECK(read.max_logit() == 4.0f);
        CHECK(c.size() == 75);
    }
}

TEST_CASE("a workspace's stage scratch is one object per type, reused, and empty in a copy", "[candidates]")
{
    candidates<float> c;
    c.scratch<std::vector<int>>().assign(5, 1);
    c.scratch<int>() = 7;
    CHECK(c.scratch<std::vector<int>>().size() == 5);
    CHECK(c.scratch<int>() == 7);
    candidates<float> d = c;
    CHECK(d.scratch<int>() == 0);
    CHECK(d.scratch<std::vector<int>>().empty());
    CHECK(c.scratch<int>() == 7);
    // typical keeps its buffers there: a chain and its copy decide alike.
    xt::xtensor<float, 1> r = xt::empty<float>({std::size_t(500)});
    for (std::size_t i = 0; i < r.size(); ++i)
    {
        r(i) = float(std::cos(0.11 * double(i)) * 4.0);
    }
    chain a{temperature{0.9}, typical{0.7}};
    const distribution first = a.final_distribution(r);
    chain b = a;
    CHECK(b.final_distribution(r).ids == first.ids);
    CHECK(a.final_distribution(r).probs == first.probs);
}

TEST_CASE("token_history knows where the prompt ends", "[types]")
{
    const std::vector<token_id> tokens = {5, 6, 7, 8, 9};
    const token_history all(tokens);
    CHECK(all.prompt_length() == 5);
    CHECK(all.generated().empty());
    const token_history h(token_span(tokens), 2);
    CHECK(std::vector<token_id>(h.prompt().begin(), h.prompt().end()) == std::vector<token_id>{5, 6});
    CHECK(std::vector<token_id>(h.generated().begin(), h.generated().end()) == std::vector<token_id>{7, 8, 9});
    CHECK_THROWS_MATCHES(token_history(token_span(tokens), 6), invalid_parameter,
                         Message("history: prompt length 6 exceeds the 5 tokens of the history"));
}

TEMPLATE_TEST_CASE("min_tokens masks the eos ids until enough tokens are generated", "[processors]", float, double)
{
    const auto r = row<TestType>({5.0, 1.0, 4.0, 0.0});
    const std::vector<token_id> tokens = {3, 3, 1};
    const min_tokens mt(2, {0, 2});
    chain c{mt};
    // One generated token after a prompt of two: eos 0 and 2 masked.
    CHECK(c.final_distribution(r, token_history(token_span(tokens), 2)).ids == std::vector<token_id>{1, 3});
    // Two generated: no effect.
    CHECK(c.final_distribution(r, token_history(token_span(tokens), 1)).ids ==
          std::vector<token_id>{0, 2, 1, 3});
    // A plain history is all prompt: nothing generated yet.
    CHECK(c.final_distribution(r, tokens).ids == std::vector<token_id>{1, 3});
    CHECK_THROWS_MATCHES(chain{min_tokens(1, {0, 1, 2, 3})}.final_distribution(r), invalid_logits,
                         Message("min_tokens: every token is masked"));
    CHECK_THROWS_MATCHES(chain{min_tokens(1, {4})}.final_distribution(r), invalid_parameter,
                         Message("min_tokens: eos id 4 is outside the vocabulary of 4"));
    CHECK_THROWS_MATCHES(min_tokens(1, {-1}), invalid_parameter, Message("min_tokens: eos id -1 is negative"));
}

TEMPLATE_TEST_CASE("user stages run in the run-time sampler as in the chain", "[sampler][stage]", float, double)
{
    const auto r = test_helpers::random_row<TestType>(2000, 8);
    const auto p = edits_for(r);
    sampling_params params;
    params.temperature = 0.9;
    params.top_k = 50;
    params.custom = {custom_stage("edits", p), custom_stage("odd", odd_ids{})};
    params.order = parse_stage_order("edits;temperature;top_k;odd");
    params.seed = 4;
    sampler s(params);
    chain c{p, temperature{0.9}, top_k{50}, odd_ids{}};
    CHECK(s.final_distribution(r).probs == c.final_distribution(r).probs);
    CHECK(s.final_distribution(r).ids == c.final_distribution(r).ids);
    philox4x32 rng(4, 0);
    for (int i = 0; i < 20; ++i)
    {
        CHECK(s.sample(r, {}).id == c.sample(r, {}, rng).id);
    }
    sampler copy = s;  // copies copy the stages
    CHECK(copy.final_distribution(r).ids == c.final_distribution(r).ids);
    CHECK(custom_stage("edits", p).processor());
    CHECK(!custom_stage("odd", odd_ids{}).processor());
    CHECK(custom_stage("wrapped", custom_stage("edits", p)).processor());
    // A custom processor before top_k keeps the fused pass, a custom filter
    // turns it off: either way, exactly the static chain's result.
    for (const char* order : {"edits;top_k;temperature", "odd;edits;top_k;temperature", "edits;odd;top_k;temperature"})
    {
        INFO(order);
        sampling_params q = params;
        q.order = parse_stage_order(order);
        q.custom = {custom_stage("edits", p), custom_stage("odd", odd_ids{})};
        if (std::string(order).find("odd") == std::string::npos)
        {
            q.custom.pop_back();
        }
        sampler t(q);
        const auto e = edited(r, p);
        const auto d = t.final_distribution(r);
        const auto reference_chain = [&] {
            if (std::string(order) == "edits;top_k;temperature")
            {
                return chain{top_k{50}, temperature{0.9}}.final_distribution(e);
            }
            if (std::string(order) == "odd;edits;top_k;temperature")
            {
                return chain{odd_ids{}, p, top_k{50}, temperature{0.9}}.final_distribution(r);
            }
            return chain{p, odd_ids{}, top_k{50}, temperature{0.9}}.final_distribution(r);
        }();
        CHECK(d.ids == reference_chain.ids);
        CHECK(d.probs == reference_chain.probs);
    }

    sampling_params bad = params;
    bad.order = parse_stage_order("edits;temperature;top_k");
    CHECK_THROWS_MATCHES(sampler(bad), invalid_parameter,
                         Message("samplers: custom stage 'odd' is not in the sampler order"));
    bad.order = parse_stage_order("edits;temperature;top_k;odd;tfs");
    CHECK_THROWS_MATCHES(sampler(bad), invalid_parameter,
                         Message("samplers: unknown sampler 'tfs' (known: logit_bias, sequence_bias, penalties, dry, no_repeat_ngram, bad_words, token_mask, "
                                 "temperature, top_k, top_k_top_p, top_n_sigma, typical, top_p, min_p, p_less, top_h, epsilon, eta, xtc, "
                                 "edits, odd)"));
    bad.custom.push_back(custom_stage("top_k", odd_ids{}));
    CHECK_THROWS_MATCHES(sampler(bad), invalid_parameter,
                         Message("samplers: custom stage 'top_k' has the name of another stage"));
    CHECK_THROWS_MATCHES(custom_stage("a;b", odd_ids{}), invalid_parameter,
                         Message("custom_stage: the name must be non-empty and without ';', got 'a;b'"));
}
