// Properties at scale: 100,000 random (row, parameters, order, history,
// penalties, processor edits) cases through both kinds of chain, each checked against the
// invariants (ids in range, unique, unmasked; probabilities in [0, 1], sorted,
// summing to 1; the draw among the kept tokens with the log of its probability)
// and against a plain sort-based reference computed here in double.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "helpers.hpp"

using namespace xsampler;

namespace
{
    /// Masks every token of a row whose token 0 is exactly 0: a processor
    /// that throws mid-chain.
    struct mask_all_if_zero
    {
        static constexpr const char* name = "mask_all_if_zero";
        template <class T>
        void apply(candidates<T>& c, const token_history&) const
        {
            if (c.logit(0) == T(0))
            {
                for (std::size_t i = 0; i < c.vocab(); ++i)
                {
                    c.mask(token_id(i));
                }
            }
        }
    };

    /// One random case: a row in T, parameters, an order, edits.
    template <class T>
    struct random_case
    {
        xt::xtensor<T, 1> row;
        sampling_params params;
        test_helpers::set_logits edits;
        std::vector<token_id> history;  // the penalties' (empty: none)
        std::size_t prompt = 0;
        bool penalised = false;
        token_history seen() const { return token_history(history, prompt); }
        /// The row as the processors leave it: penalties, then the edits.
        xt::xtensor<T, 1> processed() const
        {
            const auto& p = params;
            const auto r = penalised ? test_helpers::reference_penalties(row, history, prompt, p.repeat_penalty,
                                                                         p.presence_penalty, p.frequency_penalty,
                                                                         p.repeat_last_n, p.penalty_scope)
                                     : row;
            return test_helpers::edited(r, edits);
        }
    };

    template <class T>
    random_case<T> make_case(std::uint64_t seed)
    {
        philox4x32 rng(seed, 7);
        const auto u = [&] { return uniform01(rng); };
        const auto below = [&](std::size_t n) { return std::size_t(u() * double(n)); };
        random_case<T> c;
        const std::size_t vocab = 1 + below(u() < 0.2 ? 8 : 200);
        c.row = test_helpers::random_row<T>(vocab, seed, 0.5 + 4.0 * u(), u() < 0.3, u() < 0.3 ? 0.5 * u() : 0.0);
        auto& p = c.params;
        p.seed = seed;
        p.temperature = u() < 0.15 ? 0.0 : (u() < 0.3 ? 1.0 : 0.05 + 3.0 * u());
        p.top_k = u() < 0.5 ? 0 : std::int64_t(below(vocab + 3));
        p.top_p = u() < 0.4 ? 1.0 : (u() < 0.05 ? 1e-300 : u() * 0.999 + 0.001);
        p.min_p = u() < 0.5 ? 0.0 : (u() < 0.1 ? 1.0 : u() * 0.5);
        std::vector<std::string> names = {"temperature", "top_k", "top_p", "min_p"};
        for (std::size_t i = names.size(); i > 1; --i)  // a random order of all four
        {
            std::swap(names[i - 1], names[below(i)]);
        }
        p.order = names;
        if (u() < 0.5)
        {
            const std::size_t n = 1 + below(6);
            for (std::size_t i = 0; i < n; ++i)
            {
                const double x = u() < 0.3 ? -std::numeric_limits<double>::infinity() : 8.0 * (u() - 0.5);
                c.edits.edits.emplace_back(token_id(below(vocab)), x);
            }
            p.custom = {custom_stage("set_logits", c.edits)};
            p.order.insert(p.order.begin(), "set_logits");
        }
        if (u() < 0.3)
        {
            // The penalties over a random history, before everything else.
            c.penalised = true;
            c.history.resize(below(20));
            for (auto& t : c.history)
            {
                t = token_id(below(std::min<std::size_t>(vocab, 12)));
            }
            c.prompt = below(c.history.size() + 1);
            p.repeat_penalty = u() < 0.3 ? 1.0 : 0.5 + 1.5 * u();
            p.presence_penalty = u() < 0.5 ? 0.0 : 4.0 * (u() - 0.5);
            p.frequency_penalty = u() < 0.5 ? 0.0 : 4.0 * (u() - 0.5);
            p.repeat_last_n = std::int64_t(below(10)) - 1;
            p.penalty_scope = u() < 0.5 ? penalty_scope::window : penalty_scope::output;
            p.order.insert(p.order.begin(), "penalties");
        }
        // epsilon, eta and min_keep, drawn after those (the draws above are as before).
        p.min_keep = u() < 0.7 ? 1 : below(6);
        p.epsilon = u() < 0.8 ? 0.0 : (u() < 0.2 ? 0.9 : 0.3 * u() * u());
        p.eta = u() < 0.8 ? 0.0 : 0.5 * u();
        // A stage set after those takes one of the last places of the order.
        const auto insert_late = [&](const char* name) {
            p.order.insert(p.order.begin() + std::ptrdiff_t(p.order.size() - below(5) % (p.order.size() + 1)), name);
        };
        // p_less and top_h (issue 20), drawn after them.
        p.p_less = u() < 0.15;
        p.top_h = u() < 0.8 ? 0.0 : u();
        for (const char* name : {"epsilon", "eta", "p_less", "top_h"})
        {
            const std::string n = name;
            const bool on = n == "epsilon" ? p.epsilon > 0.0 : n == "eta" ? p.eta > 0.0 : n == "p_less" ? p.p_less : p.top_h > 0.0;
            if (on)
            {
                insert_late(name);
            }
        }
        // FlashInfer's joint top_k/top_p (issue 20), drawn after them: top_k
        // and top_p become neutral, top_k_top_p takes a random place after
        // the processors (which the reference applies first).
        p.top_k_top_p_joint = u() < 0.1;
        if (p.top_k_top_p_joint && (p.top_k != 0 || p.top_p != 1.0))
        {
            insert_late("top_k_top_p");
        }
        return c;
    }

    /// How a case's decisions compare with the reference: equal, or too close
    /// to a boundary to call (a mass or ratio within `tol` of the cut).
    enum class verdict
    {
        same,
        boundary,
        differs
    };

    /// The reference (helpers.hpp: sort, std::exp weights in double, each
    /// cut as its contract reads) on the edited row, the stages in the order.
    template <class T>
    verdict check_against_reference(const random_case<T>& c, const distribution& got, double tol)
    {
        test_helpers::reference ref(c.processed());
        ref.tol = tol;
        const auto& p = c.params;
        for (const auto& name : p.order)
        {
            const std::size_t keep = std::max<std::size_t>(p.min_keep, 1);
            if (name == "temperature")
            {
                ref.temperature(p.temperature);
            }
            else if (name == "top_k_top_p" && p.top_k_top_p_joint)
            {
                ref.top_k_top_p(std::size_t(p.top_k), p.top_p, keep);
            }
            else if (p.top_k_top_p_joint && (name == "top_k" || name == "top_p"))
            {
                // neutral: the joint stage holds both cuts
            }
            else if (name == "top_k")
            {
                ref.top_k(std::size_t(p.top_k), keep);
            }
            else if (name == "top_p" && p.top_p < 1.0)
            {
                ref.top_p(p.top_p, keep);
            }
            else if (name == "min_p" && p.min_p > 0.0)
            {
                ref.min_p(p.min_p, keep);
            }
            else if (name == "epsilon" && p.epsilon > 0.0)
            {
                ref.epsilon(p.epsilon, keep);
            }
            else if (name == "eta" && p.eta > 0.0)
            {
                ref.eta(p.eta, keep);
            }
            else if (name == "p_less" && p.p_less)
            {
                ref.p_less(keep);
            }
            else if (name == "top_h" && p.top_h > 0.0)
            {
                ref.top_h(p.top_h, keep);
            }
        }
        const auto want = ref.as_map();
        const auto have = test_helpers::as_map(got);
        const bool same = have.size() == want.size() &&
                          std::equal(have.begin(), have.end(), want.begin(), [&](const auto& a, const auto& b) {
                              return a.first == b.first && std::abs(a.second - b.second) <= tol;
                          });
        return same ? verdict::same : ref.near ? verdict::boundary : verdict::differs;
    }
}

TEMPLATE_TEST_CASE("100,000 random cases: invariants, both chains, and the sort-based reference", "[properties]",
                   float, double)
{
    // Float weights carry relative errors of ~|d| * 6e-8; double's ~1e-15.
    const double tol = std::is_same<TestType, float>::value ? 1e-5 : 1e-11;
    constexpr std::uint64_t cases = 50000;  // per type: 100,000 in all
    std::size_t boundary = 0;
    std::size_t differs = 0;
    std::size_t thrown = 0;
    for (std::uint64_t seed = 1; seed <= cases; ++seed)
    {
        const auto c = make_case<TestType>(seed);
        sampler s(c.params);
        distribution d;
        try
        {
            d = s.final_distribution(c.row, c.seen());
        }
        catch (const invalid_logits& e)
        {
            // Only a processor that masked every token may throw here.
            ++thrown;
            INFO("seed " << seed << ": " << e.what());
            REQUIRE(std::string(e.what()) == "set_logits: every token is masked");
            continue;
        }
        INFO("seed " << seed << ", V " << c.row.size());
        // Invariants.
        REQUIRE(!d.ids.empty());
        REQUIRE(d.ids.size() == d.probs.size());
        std::vector<token_id> ids = d.ids;
        std::sort(ids.begin(), ids.end());
        REQUIRE(std::adjacent_find(ids.begin(), ids.end()) == ids.end());
        REQUIRE(ids.front() >= 0);
        REQUIRE(std::size_t(ids.back()) < c.row.size());
        double sum = 0.0;
        for (std::size_t i = 0; i < d.probs.size(); ++i)
        {
            REQUIRE(d.probs[i] >= 0.0);
            REQUIRE(d.probs[i] <= 1.0);
            REQUIRE((i == 0 || d.probs[i - 1] >= d.probs[i]));
            sum += d.probs[i];
        }
        REQUIRE(std::abs(sum - 1.0) < 1e-6);
        // The draw: a kept token of positive probability, its log-probability.
        const sampled_token t = s.sample(c.row, c.seen());
        const auto at = std::find(d.ids.begin(), d.ids.end(), t.id);
        REQUIRE(at != d.ids.end());
        const double p = d.probs[std::size_t(at - d.ids.begin())];
        REQUIRE(p > 0.0);
        REQUIRE(t.logprob == std::log(p));
        // The compile-time chain in Hugging Face's order gives the same bits.
        if (c.params.custom.empty() && !c.penalised &&
            c.params.order == std::vector<std::string>{"temperature", "top_k", "top_p", "min_p"})
        {
            const std::size_t keep = c.params.min_keep;
            chain same{temperature{c.params.temperature}, top_k{c.params.top_k, keep}, top_p{c.params.top_p, keep},
                       min_p{c.params.min_p, keep}};
            const auto e = same.final_distribution(c.row);
            REQUIRE(e.ids == d.ids);
            REQUIRE(e.probs == d.probs);
        }
        // The reference.
        const verdict v = check_against_reference(c, d, tol);
        boundary += v == verdict::boundary;
        differs += v == verdict::differs;
        CHECK(v != verdict::differs);
    }
    // The reference decides every cut exactly: none differs, none is excused.
    CHECK(differs == 0);
    CHECK(boundary == 0);  // the reference is exact: no case is excused
    CHECK(thrown < cases / 20);
}

TEMPLATE_TEST_CASE("an object that threw is as good as new", "[properties][errors]", float, double)
{
    const auto good = test_helpers::random_row<TestType>(700, 3, 3.0, false, 0.2);
    const auto nan_row = [&] {
        auto r = good;
        r(123) = std::numeric_limits<TestType>::quiet_NaN();
        return r;
    }();
    const xt::xtensor<TestType, 1> masked = xt::full_like(good, -std::numeric_limits<TestType>::infinity());
    const xt::xtensor<TestType, 2> rank2 = xt::zeros<TestType>({2, 3});
    const xt::xtensor<TestType, 1> empty = xt::zeros<TestType>({0});
    sampling_params p;
    p.temperature = 0.8;
    p.top_k = 50;
    p.top_p = 0.9;
    p.seed = 11;
    p.custom = {custom_stage("mask_all_if_zero", mask_all_if_zero{})};
    p.order = parse_stage_order("mask_all_if_zero;temperature;top_k;top_p");
    auto zero_first = good;
    zero_first(0) = 0;

    sampler tried(p);
    sampler fresh(p);
    chain c{temperature{0.8}, top_k{50}, top_p{0.9}, mask_all_if_zero{}};
    chain c_fresh{temperature{0.8}, top_k{50}, top_p{0.9}, mask_all_if_zero{}};
    philox4x32 a(5), b(5);
    for (int round = 0; round < 3; ++round)
    {
        CHECK_THROWS_AS(tried.sample(nan_row, {}), invalid_logits);
        CHECK_THROWS_AS(tried.sample(masked, {}), invalid_logits);
        CHECK_THROWS_AS(tried.sample(rank2, {}), invalid_logits);
        CHECK_THROWS_AS(tried.sample(empty, {}), invalid_logits);
        CHECK_THROWS_AS(tried.sample(zero_first, {}), invalid_logits);
        CHECK_THROWS_AS(c.sample(nan_row, {}, a), invalid_logits);
        CHECK_THROWS_AS(c.sample(zero_first, {}, a), invalid_logits);
        // A throwing call consumes no randomness and leaves no state behind.
        const auto x = tried.sample(good, {});
        const auto y = fresh.sample(good, {});
        CHECK(x.id == y.id);
        CHECK(x.logprob == y.logprob);
        CHECK(tried.engine() == fresh.engine());
        CHECK(c.sample(good, {}, a).id == c_fresh.sample(good, {}, b).id);
        CHECK(a == b);
        CHECK(tried.final_distribution(good).probs == fresh.final_distribution(good).probs);
    }

    // generate: a model that throws mid-way, then the same sampler again.
    const auto table = test_helpers::random_matrix<TestType>(16, 16, 4);
    int calls = 0;
    const auto flaky = [&](token_span prefix) {
        if (++calls == 4)
        {
            throw std::runtime_error("model failed");
        }
        return xt::xtensor<TestType, 1>(xt::view(table, std::size_t(prefix[prefix.size() - 1]), xt::all()));
    };
    const auto steady = [&](token_span prefix) {
        return xt::xtensor<TestType, 1>(xt::view(table, std::size_t(prefix[prefix.size() - 1]), xt::all()));
    };
    generate_options o;
    o.max_tokens = 12;
    o.min_tokens = 3;
    o.eos = {0};
    philox4x32 g1(8), g2(8);
    sampler s1(p), s2(p);
    CHECK_THROWS_MATCHES(generate(flaky, {1}, s1, o, g1), std::runtime_error, Catch::Matchers::Message("model failed"));
    philox4x32 r1(9), r2(9);
    const auto after = generate(steady, {1}, s1, o, r1);
    const auto fresh_run = generate(steady, {1}, s2, o, r2);
    CHECK(after.tokens == fresh_run.tokens);
    CHECK(after.logprobs == fresh_run.logprobs);

    // sample_batch: a batch with a bad row, then the same workspaces.
    xt::xtensor<TestType, 2> batch = xt::empty<TestType>({std::size_t(3), good.size()});
    for (std::size_t r = 0; r < 3; ++r)
    {
        xt::view(batch, r, xt::all()) = good;
    }
    xt::view(batch, 1, 7) = std::numeric_limits<TestType>::quiet_NaN();
    sampling_params q = p;
    q.custom.clear();
    q.order = default_stage_order();
    std::vector<sampler> rows_tried(3, sampler(q)), rows_fresh(3, sampler(q));
    std::vector<workspace> pool(2), pool_fresh(2);
    std::vector<sampled_token> out, out_fresh;
    CHECK_THROWS_MATCHES(sample_batch(batch, rows_tried, pool, out), invalid_logits,
                         Catch::Matchers::Message("row 1: logits: NaN at index 7"));
    xt::view(batch, 1, 7) = TestType(0);
    rows_tried = rows_fresh;  // a failed batch may have drawn for its other rows
    sample_batch(batch, rows_tried, pool, out);
    sample_batch(batch, rows_fresh, pool_fresh, out_fresh);
    for (std::size_t r = 0; r < 3; ++r)
    {
        CHECK(out[r].id == out_fresh[r].id);
        CHECK(out[r].logprob == out_fresh[r].logprob);
    }
}

TEST_CASE("sizes from outside are not allocated up front", "[properties][errors]")
{
    // self_consistency(2^62): sampling runs (and here stops by the sample's
    // own error) instead of failing to reserve 2^62 answers.
    int calls = 0;
    const auto sample = [&](philox4x32&) {
        if (++calls == 3)
        {
            throw std::runtime_error("enough");
        }
        return 1;
    };
    CHECK_THROWS_MATCHES(self_consistency(std::size_t(1) << 62, 1, sample), std::runtime_error,
                         Catch::Matchers::Message("enough"));
    CHECK(calls == 3);
    // self_consistency tallies as answers arrive: the answers alive at once
    // are the distinct ones (3) and the one just sampled, whatever n is.
    struct counted
    {
        int value;
        static int& live() { static int n = 0; return n; }
        static int& peak() { static int n = 0; return n; }
        explicit counted(int v) : value(v) { note(); }
        counted(const counted& o) : value(o.value) { note(); }
        ~counted() { --live(); }
        counted& operator=(const counted&) = default;
        bool operator==(const counted& o) const { return value == o.value; }
        static void note() { peak() = std::max(peak(), ++live()); }
    };
    const auto vote = self_consistency(30000, 5, [](philox4x32& rng) { return counted(int(rng() % 3)); });
    CHECK(vote.total == 30000);
    CHECK(vote.distinct == 3);
    CHECK(vote.votes + vote.runner_up_votes <= 30000);
    CHECK(counted::peak() <= 8);
    // A lazy row too long for token_id is refused before it is evaluated (a
    // copy of it would need 8 GiB).
    const auto huge = xt::zeros<float>({std::size_t(1) << 31});
    const auto too_long = Catch::Matchers::Message("logits: a row of 2147483648 tokens is longer than token_id can index");
    candidates<float> c;
    CHECK_THROWS_MATCHES(c.load(huge), invalid_logits, too_long);
    CHECK_THROWS_MATCHES(greedy(huge), invalid_logits, too_long);
    chain plain{temperature{1.0}};
    philox4x32 draws(1);
    CHECK_THROWS_MATCHES(plain.sample(huge, token_history{}, draws), invalid_logits, too_long);
    // generate with a huge max_tokens reserves a bounded amount and stops at eos.
    const auto model = [](token_span) { return xt::xtensor<double, 1>{0.0, 5.0}; };
    chain greedy_chain{temperature{0.0}};
    philox4x32 rng(1);
    generate_options o;
    o.max_tokens = std::size_t(1) << 62;
    o.eos = {1};
    CHECK(generate(model, {0}, greedy_chain, o, rng).tokens == std::vector<token_id>{1});
}

TEMPLATE_TEST_CASE("numerics at the edges: extreme logits and temperatures, the smallest parameters", "[properties]",
                   float, double)
{
    using T = TestType;
    const T big = std::numeric_limits<T>::max();
    const T tiny = std::numeric_limits<T>::denorm_min();
    // Logits up to the type's largest, at temperatures 1e-30 to 1e30: no NaN,
    // probabilities sum to 1, the draw is a kept token of positive probability.
    const auto extreme = test_helpers::row<T>({double(big), double(-big), 0.0, double(big) / 3, -0.0, double(tiny)});
    for (const double t : {1e-30, 1e-5, 1.0, 1e5, 1e30})
    {
        INFO("temperature " << t);
        chain c{temperature{t}};
        const auto d = c.final_distribution(extreme);
        double sum = 0.0;
        for (const double p : d.probs)
        {
            REQUIRE(!std::isnan(p));
            sum += p;
        }
        CHECK(std::abs(sum - 1.0) < 1e-6);
        CHECK(d.ids[0] == 0);  // the max
        philox4x32 rng(3);
        const auto s = c.sample(extreme, {}, rng);
        CHECK(std::isfinite(s.logprob));
        CHECK(s.logprob <= 0.0);
    }
    // A row spanning more than the type's largest value (x - m overflows T).
    // At T = largest/2 the scaled logits are {0, -4, -2}: every token keeps
    // its true weight, in Z, min-p's and top-p's decisions and the draw.
    const auto wide = test_helpers::row<T>({double(big), double(-big), 0.0});
    {
        chain c{temperature{double(big) / 2}};
        const auto d = c.final_distribution(wide);
        const double z = 1.0 + std::exp(-2.0) + std::exp(-4.0);
        CHECK(d.ids == std::vector<token_id>{0, 2, 1});
        CHECK(std::abs(d.probs[0] - 1.0 / z) < 1e-6);
        CHECK(std::abs(d.probs[1] - std::exp(-2.0) / z) < 1e-6);
        CHECK(std::abs(d.probs[2] - std::exp(-4.0) / z) < 1e-6);
        CHECK(chain{temperature{double(big) / 2}, min_p{0.05}}.final_distribution(wide).ids ==
              std::vector<token_id>{0, 2});
        CHECK(chain{temperature{double(big) / 2}, min_p{0.01}}.final_distribution(wide).ids.size() == 3);
        CHECK(chain{temperature{double(big) / 2}, top_p{0.9}}.final_distribution(wide).ids ==
              std::vector<token_id>{0, 2});
        CHECK(chain{temperature{double(big) / 2}, top_p{0.99}}.final_distribution(wide).ids.size() == 3);
        // 4000 draws: token 1 (p = 0.0159) comes up, never with a NaN log-probability.
        philox4x32 rng(5);
        std::size_t ones = 0;
        for (int i = 0; i < 4000; ++i)
        {
            const auto s = c.sample(wide, {}, rng);
            REQUIRE(std::isfinite(s.logprob));
            ones += s.id == 1;
        }
        CHECK(ones > 20);
        // At scale 1 the spread is exact in double where it fits.
        const double lp = log_softmax(wide)(1);
        CHECK(lp == (std::is_same<T, float>::value ? -2.0 * double(big) : -test_helpers::inf));
    }
    // A temperature so high that the float scale rounds to 0: every token
    // weighs 1 (the true weights are within 1e-11 of it), the wide one too.
    if (std::is_same<T, float>::value)
    {
        const auto d = chain{temperature{1e50}}.final_distribution(wide);
        CHECK(d.ids == std::vector<token_id>{0, 1, 2});
        for (const double p : d.probs)
        {
            CHECK(p == 1.0 / 3.0);
        }
    }
    // The smallest positive double as a parameter: temperature -> greedy in
    // effect (every other weight underflows), top-p -> the argmax alone,
    // min-p -> every unmasked token.
    const auto r = test_helpers::row<T>({1.0, 3.0, 2.0, -test_helpers::inf});
    const double least = std::numeric_limits<double>::denorm_min();
    philox4x32 rng(1);
    CHECK(chain{temperature{least}}.sample(r, {}, rng).id == 1);
    CHECK(chain{top_p{least}}.final_distribution(r).ids == std::vector<token_id>{1});
    CHECK(chain{min_p{least}}.final_distribution(r).ids == std::vector<token_id>{1, 2, 0});
    // -0.0, +0.0 and denormals are ordinary, equal-weight logits.
    const auto zeros = test_helpers::row<T>({-0.0, 0.0, double(tiny), -double(tiny)});
    const auto z = chain{}.final_distribution(zeros);
    CHECK(z.ids == std::vector<token_id>{0, 1, 2, 3});  // equal probabilities: by id
    // ...but they rank by logit: the denormal first, -0.0 tied with +0.0 (the lower id).
    CHECK(chain{top_k{2}}.final_distribution(zeros).ids == std::vector<token_id>{0, 2});
    for (const double p : z.probs)
    {
        CHECK(p == 0.25);
    }
}
