// constraint.hpp, json_grammar.hpp, json_schema.hpp and generate's stop strings:
// every constrained generation parses and validates (nlohmann-json and an
// independent validator written here), the mask allows exactly the tokens
// that keep the text completable (brute force on small vocabularies), budgets
// from the minimum upwards all complete, rollback, and errors that name the
// problem.
// g++ 12 at -O3 warns "argument 1 null where non-null expected" inside
// std::vector<int>::operator= somewhere in this file's inlining (a known false
// positive of -Wnonnull on an empty vector's memmove; no user frame is named).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wnonnull"
#endif
#include <algorithm>
#include <bitset>
#include <cmath>
#include <fstream>
#include <sstream>
#include <memory>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <xtensor/xtensor.hpp>

#include <xsampler/json_schema.hpp>
#include "../tool/tokenizer.hpp"
#include <xsampler/xsampler.hpp>

#include "texts.hpp"

using namespace xsampler;
using Catch::Matchers::Contains;
using json = nlohmann::json;

namespace
{
    /// An index of every single byte, then `words`, then eos.
    std::shared_ptr<const vocabulary_index> bytes_and(const std::vector<std::string>& words)
    {
        std::vector<std::string> tokens;
        for (int b = 0; b < 256; ++b)
        {
            tokens.emplace_back(1, char(b));
        }
        tokens.insert(tokens.end(), words.begin(), words.end());
        tokens.emplace_back();
        const auto eos = token_id(tokens.size() - 1);
        return std::make_shared<const vocabulary_index>(
            std::make_shared<const vocabulary>(std::move(tokens), std::vector<token_id>{eos}));
    }

    /// Every single byte, the tokens that span JSON's structure, some words, and eos last.
    std::shared_ptr<const vocabulary_index> small_index()
    {
        static const auto index = bytes_and(
            {"{\"", "\":", "\",", "\"}", "},", "\"},", "\":\"", "\": ", ", \"", "[{", "}]", "]}",
             "[\"", "\"]", "true", "false", "null", "tr", "nu", "name", "\"name\"", "age", "12",
             "0.", "e+", "-1", "\\u", "\\n", "D83D", "DE00", "\\uD83D", "é", "\xE2\x82", "\xAC",
             "  ", "\n  ", "abc", "b,", "e]", "red", "\"red\"", "green", "[]", "{}", "\"\"", "000", "1.5"});
        return index;
    }

    std::size_t code_points(const std::string& s)
    {
        return std::size_t(std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
    }

    /// The schema subset, checked on a parsed value: independent of the grammar
    /// ($ref: a JSON pointer into `root`, siblings applying too).
    bool valid(const json& v, const json& s, const json& root)
    {
        if (s.is_boolean())
        {
            return s.get<bool>();
        }
        if (s.contains("$ref") && !valid(v, root.at(json::json_pointer(s["$ref"].get<std::string>().substr(1))), root))
        {
            return false;
        }
        std::size_t matched = 0;
        for (const char* k : {"allOf", "anyOf", "oneOf"})
        {
            matched = 0;
            for (const auto& branch : s.value(k, json::array()))
            {
                matched += valid(v, branch, root) ? 1 : 0;
            }
            if (s.contains(k) && ((k[1] == 'l' && matched != s[k].size()) || (k[1] == 'n' && matched == 0) ||
                                  (k[1] == 'n' && k[0] == 'o' && matched != 1)))
            {
                return false;
            }
        }
        if (s.contains("not") && valid(v, s["not"], root))
        {
            return false;
        }
        if (s.contains("if"))
        {
            const char* branch = valid(v, s["if"], root) ? "then" : "else";
            if (s.contains(branch) && !valid(v, s[branch], root))
            {
                return false;
            }
        }
        if (s.contains("const") && v != s["const"])
        {
            return false;
        }
        if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end())
        {
            return false;
        }
        if (s.contains("type"))
        {
            const auto is = [&v](const std::string& t) {
                return (t == "object" && v.is_object()) || (t == "array" && v.is_array()) ||
                       (t == "string" && v.is_string()) || (t == "number" && v.is_number()) ||
                       (t == "integer" && v.is_number_integer()) || (t == "boolean" && v.is_boolean()) ||
                       (t == "null" && v.is_null());
            };
            bool any = false;
            if (s["type"].is_string())
            {
                any = is(s["type"].get<std::string>());
            }
            else
            {
                for (const auto& t : s["type"])
                {
                    any = any || is(t.get<std::string>());
                }
            }
            if (!any)
            {
                return false;
            }
        }
        if (v.is_object())
        {
            if (v.size() < s.value("minProperties", std::size_t(0)) || v.size() > s.value("maxProperties", ~std::size_t(0)))
            {
                return false;
            }
            for (const auto& r : s.value("required", json::array()))
            {
                if (!v.contains(r.get<std::string>()))
                {
                    return false;
                }
            }
            const json dependencies = s.value("dependencies", json::object());
            for (const auto& d : dependencies.items())
            {
                if (v.contains(d.key()) && (d.value().is_array() ? !valid(v, json{{"required", d.value()}}, root)
                                                                  : !valid(v, d.value(), root)))
                {
                    return false;
                }
            }
            for (const auto& kv : v.items())
            {
                if (s.contains("propertyNames") && !valid(json(kv.key()), s["propertyNames"], root))
                {
                    return false;
                }
                bool listed = s.contains("properties") && s["properties"].contains(kv.key());
                if (listed && !valid(kv.value(), s["properties"][kv.key()], root))
                {
                    return false;
                }
                const json patterns = s.value("patternProperties", json::object());
                for (const auto& p : patterns.items())
                {
                    if (std::regex_search(kv.key(), std::regex(p.key())))
                    {
                        listed = true;
                        if (!valid(kv.value(), p.value(), root))
                        {
                            return false;
                        }
                    }
                }
                if (!listed && s.contains("additionalProperties") && !valid(kv.value(), s["additionalProperties"], root))
                {
                    return false;
                }
            }
        }
        if (v.is_array())
        {
            if (v.size() < s.value("minItems", std::size_t(0)) || v.size() > s.value("maxItems", ~std::size_t(0)))
            {
                return false;
            }
            if (s.contains("contains"))
            {
                const auto n = std::size_t(std::count_if(v.begin(), v.end(), [&](const json& i) { return valid(i, s["contains"], root); }));
                if (n < s.value("minContains", std::size_t(1)) || n > s.value("maxContains", ~std::size_t(0)))
                {
                    return false;
                }
            }
            for (std::size_t i = 0; s.value("uniqueItems", false) && i < v.size(); ++i)
            {
                if (std::find(v.begin() + std::ptrdiff_t(i) + 1, v.end(), v[i]) != v.end())
                {
                    return false;
                }
            }
            for (const auto& item : v)
            {
                if (s.contains("items") && !valid(item, s["items"], root))
                {
                    return false;
                }
            }
        }
        if (v.is_number())
        {
            // in double, as python3-jsonschema decides (a test of json_numbers.hpp's 15 digits too)
            const double x = v.get<double>();
            const auto bound = [&](const char* k) { return s.contains(k) && s[k].is_number(); };
            if ((bound("minimum") && x < s["minimum"].get<double>()) || (bound("maximum") && x > s["maximum"].get<double>()) ||
                (bound("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<double>()) ||
                (bound("exclusiveMaximum") && x >= s["exclusiveMaximum"].get<double>()))
            {
                return false;
            }
            if (bound("multipleOf"))
            {
                const double q = x / s["multipleOf"].get<double>();
                if (v.is_number_integer() && s["multipleOf"].is_number_integer()
                        ? v.get<std::int64_t>() % s["multipleOf"].get<std::int64_t>() != 0
                        : q != std::floor(q))
                {
                    return false;
                }
            }
        }
        if (v.is_string())
        {
            if (s.contains("pattern") && !std::regex_search(v.get<std::string>(), std::regex(s["pattern"].get<std::string>())))
            {
                return false;
            }
            const std::size_t n = code_points(v.get<std::string>());
            if (n < s.value("minLength", std::size_t(0)) || n > s.value("maxLength", ~std::size_t(0)))
            {
                return false;
            }
        }
        return true;
    }

    /// A made-up model: logits from a hash of the step and the last token,
    /// favouring a few tokens, so that runs differ by seed and end sometimes.
    struct hash_model
    {
        std::size_t vocab;
        std::uint64_t seed;
        xt::xtensor<float, 1> row;

        xt::xtensor<float, 1>& operator()(token_span prefix)
        {
            row.resize({vocab});
            philox4x32 rng(seed, prefix.size() * 7919 + (prefix.empty() ? 0 : std::size_t(prefix[prefix.size() - 1])));
            for (auto& x : row)
            {
                x = float(normal(2.0, rng));
            }
            return row;
        }
    };

    const std::vector<std::string> schemas = {
        R"({"type":"object","properties":{"name":{"type":"string","maxLength":8},"age":{"type":"integer"},
            "tags":{"type":"array","items":{"type":"string","maxLength":4},"maxItems":3},"ok":{"type":"boolean"}},
            "required":["name","age"],"additionalProperties":false})",
        R"({"type":"array","items":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":["number","null"]}},
            "required":["x"]},"minItems":1,"maxItems":4})",
        R"({"type":"object","properties":{"color":{"enum":["red","green",12,null]},"v":{"const":"abc"},
            "n":{"type":"object","properties":{"deep":{"type":"array","items":{"type":"integer"},"minItems":2}},
            "required":["deep"]}},"required":["color","n"]})",
        R"({"type":"string","minLength":2,"maxLength":6})",
        R"({"type":"object","additionalProperties":{"type":"boolean"}})",
        R"({"type":"object","additionalProperties":false})",
        R"({})",
        R"({"type":"string","pattern":"^[a-c]{1,3}@x\\.(com|org)$"})",
        // a recursive tree through $ref, and combinators: allOf merged, anyOf, a oneOf by const and type
        R"({"definitions":{"node":{"type":"object","properties":{"v":{"type":"integer"},
            "kids":{"type":"array","items":{"$ref":"#/definitions/node"},"maxItems":2}},"required":["v"],
            "additionalProperties":false}},"$ref":"#/definitions/node"})",
        R"({"allOf":[{"type":"object","properties":{"id":{"anyOf":[{"type":"integer"},{"type":"string","maxLength":2}]}},
            "required":["id"]},{"properties":{"kind":{"oneOf":[{"const":"a"},{"type":"null"}]},"id":{"not_a_keyword":1}},
            "required":["kind"]}],"title":"ignored"})",
        R"({"type":"object","properties":{"a":{"type":"string","pattern":"^x+$","maxLength":3}},"required":["a"],
            "additionalProperties":{"type":"integer"}})",
    };
    /// Schemas whose grammars have counted lexemes (budgets refuse them).
    const std::vector<std::string> counted_schemas = {
        // integers whose remainders and digit counts together are past the limit: the digits counted
        R"({"type":"array","items":{"type":"integer","multipleOf":429,"not":{"anyOf":[{"multipleOf":8},{"multipleOf":7}]}},
            "maxItems":3})",
        // a pattern whose product with its length is past the limit: its code points counted as they are read
        R"({"type":"object","properties":{"t":{"type":"string","pattern":"^(\\S+\\s+){0,9}\\S+$","maxLength":120}},
            "required":["t"],"additionalProperties":false})",
    };

    constraint make(const std::string& schema) { return json_schema_constraint(small_index(), schema); }

    /// The schema is refused with a message that contains `message`.
    void fails_with(const std::string& schema, const std::string& message)
    {
        INFO(schema);
        CHECK_THROWS_WITH(json_schema_grammar(schema), Contains(message));
    }

    /// One generation from a copy of `proto` (its masks shared), first in a
    /// chain with `stages`; with `budgeted`, under the budget max_tokens.
    template <class Model, class... Stages>
    generation constrained_run(const constraint& proto, std::size_t max_tokens, bool budgeted, Model& model,
                               std::uint64_t seed, Stages... stages)
    {
        constraint c = proto;
        if (budgeted)
        {
            c.set_budget(max_tokens);
        }
        generate_options o;
        o.eos.assign(proto.vocab().eos().begin(), proto.vocab().eos().end());
        o.max_tokens = max_tokens;
        chain ch{std::move(c), stages...};
        philox4x32 rng(seed);
        return generate(model, {}, ch, o, rng);
    }

    /// The token a random walk reads next: a random allowed one, or once
    /// `late` the completion's first byte (eos when the text is complete).
    token_id onward(const constraint& c, const std::vector<token_id>& allowed, std::mt19937& pick, bool late)
    {
        const token_id t = allowed[pick() % allowed.size()];
        if (!late)
        {
            return t;
        }
        const std::string rest = c.completion();
        return rest.empty() ? c.vocab().eos()[0] : c.vocab().find(rest.substr(0, 1));
    }

    /// The text after `after`, completed, is a whole text of the grammar.
    void completes(const compiled_grammar& compiled, const constraint& after)
    {
        matcher m(compiled.rules());
        const std::string full = after.text() + after.completion();
        REQUIRE(m.feed(full) == full.size());
        REQUIRE(m.complete());
    }

    /// Random walks through fresh constraints on `compiled` (steps each, the
    /// completion's way once `late` steps are read; budget(run) set when it is
    /// not 0), brute-forced at every step: each allowed token's text, completed,
    /// is a text of the grammar.
    template <class Budget>
    void brute_force_walks(const std::shared_ptr<const compiled_grammar>& compiled, int runs, int steps, int late,
                           std::mt19937& pick, Budget&& budget)
    {
        for (int run = 0; run < runs; ++run)
        {
            constraint c(compiled);
            if (const std::size_t b = budget(run))
            {
                c.set_budget(b);
            }
            for (int step = 0; step < steps && !c.ended(); ++step)
            {
                INFO("run " << run << " after \"" << c.text() << "\"");
                const auto allowed =
                    allowed_by_brute_force(c, [&](token_id, const constraint& after) { completes(*compiled, after); });
                REQUIRE(!allowed.empty());
                c.advance(onward(c, allowed, pick, step > late));
            }
        }
    }

    /// A copy of c advanced by t in `out`, or false if c does not allow it.
    bool advanced(const constraint& c, token_id t, constraint& out)
    {
        constraint copy = c;
        try
        {
            copy.advance(t);
        }
        catch (const invalid_parameter&)
        {
            return false;
        }
        out = std::move(copy);
        return true;
    }

    /// Brute force over the whole vocabulary: each token is in c's mask
    /// exactly when c can advance by it; check(t, after) runs for each allowed
    /// token (eos included) on a copy advanced by it. Returns the allowed tokens.
    template <class Check>
    std::vector<token_id> allowed_by_brute_force(constraint& c, Check&& check)
    {
        const token_set mask = c.mask();
        std::vector<token_id> allowed;
        for (token_id t = 0; t < token_id(c.vocab().size()); ++t)
        {
            constraint after = c;
            const bool can = advanced(c, t, after);
            REQUIRE(mask.contains(t) == can);
            if (can)
            {
                check(t, after);
                allowed.push_back(t);
            }
        }
        return allowed;
    }

    /// Random walks through c, reset for each of `runs` (steps tokens each,
    /// the completion's way after `late`), brute-forced at every step: each
    /// allowed token's text, completed, validates against the schema under
    /// the test's own validator. after_run(c) sees each walk's end. Returns
    /// how many completions were checked.
    template <class AfterRun>
    std::size_t validating_walks(constraint& c, const json& schema, std::mt19937& pick, int runs, int steps, int late,
                                 AfterRun&& after_run)
    {
        std::size_t checked = 0;
        for (int run = 0; run < runs; ++run)
        {
            c.reset();
            for (int step = 0; step < steps && !c.ended(); ++step)
            {
                const auto allowed = allowed_by_brute_force(c, [&](token_id, const constraint& after) {
                    const std::string full = after.text() + after.completion();
                    INFO(full);
                    REQUIRE(valid(json::parse(full), schema, schema));
                    ++checked;
                });
                REQUIRE(!allowed.empty());
                c.advance(onward(c, allowed, pick, step > late));
            }
            after_run(c);
        }
        return checked;
    }
}

namespace
{
    /// A processor that keeps a set: keep_in, as a constraint applies its mask.
    struct keep_set
    {
        const token_set* allowed;
        template <class T>
        void apply(candidates<T>& c, const token_history&) const
        {
            c.keep_in(*allowed, "keep_set");
        }
    };
    /// The same set as edits: every other token masked one by one.
    struct mask_rest
    {
        const token_set* allowed;
        template <class T>
        void apply(candidates<T>& c, const token_history&) const
        {
            for (token_id id = 0; id < token_id(c.vocab()); ++id)
            {
                if (!allowed->contains(id))
                {
                    c.mask(id);
                }
            }
        }
    };
    /// A filter: nothing after it is fused.
    struct no_op
    {
        template <class T>
        void apply(candidates<T>&) const
        {
        }
    };
}

TEMPLATE_TEST_CASE("keep_in on a fused top-k decides what the masked row decides", "[constraint][candidates]", float,
                   double)
{
    philox4x32 rng(5);
    // (0.97: most blocks hold a masked token, the dense set copies the whole row;
    // 0.999: a few do, each copied alone)
    for (const double density : {0.002, 0.05, 0.07, 0.5, 0.97, 0.999, 1.0})
    {
        for (std::uint64_t seed = 0; seed < 12; ++seed)
        {
            const std::size_t vocab = 3000;
            xt::xtensor<TestType, 1> row = xt::empty<TestType>({vocab});
            for (auto& x : row)
            {
                x = TestType(std::round(normal(3.0, rng) * (seed % 3 == 0 ? 1.0 : 16.0)) / 4);  // ties too
            }
            std::vector<token_id> ids;
            for (token_id i = 0; i < token_id(vocab); ++i)
            {
                if (uniform01(rng) < density || i == token_id(seed))
                {
                    ids.push_back(i);
                }
            }
            const token_set allowed(ids, "test");
            const std::size_t k = 1 + seed * 7 % 60;
            const logit_bias lower({{token_id(seed * 31 % vocab), -3.0}, {token_id(seed * 17 % vocab), -50.0}});
            chain fused{keep_set{&allowed}, lower, top_k{std::int64_t(k)}, top_p{0.9}};
            chain plain{mask_rest{&allowed}, no_op{}, lower, top_k{std::int64_t(k)}, top_p{0.9}};
            const auto a = fused.final_distribution(row);
            const auto b = plain.final_distribution(row);
            INFO("density " << density << " seed " << seed << " k " << k);
            REQUIRE(a.ids == b.ids);
            REQUIRE(a.probs == b.probs);
            // a processor before (a patched row) and a raised token the mask drops after:
            // neither the max nor the draw may see it
            token_id outside = 0;
            while (allowed.contains(outside) && outside + 1 < token_id(vocab))
            {
                ++outside;
            }
            const logit_bias pre({{token_id(seed * 7 % vocab), -1.0}});
            const logit_bias raise({{outside, 50.0}});
            chain fused2{pre, keep_set{&allowed}, raise, top_k{std::int64_t(k)}, temperature{0.0}};
            chain plain2{pre, mask_rest{&allowed}, no_op{}, raise, top_k{std::int64_t(k)}, temperature{0.0}};
            REQUIRE(fused2.final_distribution(row).ids == plain2.final_distribution(row).ids);
            chain fused3{pre, keep_set{&allowed}, raise, top_k{std::int64_t(k)}, top_p{0.9}};
            chain plain3{pre, mask_rest{&allowed}, no_op{}, raise, top_k{std::int64_t(k)}, top_p{0.9}};
            const auto c3 = fused3.final_distribution(row);
            REQUIRE(c3.ids == plain3.final_distribution(row).ids);
            REQUIRE(c3.probs == plain3.final_distribution(row).probs);
            // without a top_k: a mask that leaves the row mostly whole keeps it dense
            // (its outside masked by block), a smaller one makes it sparse; both as masked
            chain dense{pre, keep_set{&allowed}, lower, top_p{0.9}};
            chain masked{pre, mask_rest{&allowed}, no_op{}, lower, top_p{0.9}};
            const auto d1 = dense.final_distribution(row);
            const auto d2 = masked.final_distribution(row);
            REQUIRE(d1.ids == d2.ids);
            REQUIRE(d1.probs == d2.probs);
            chain dense_greedy{keep_set{&allowed}, raise, temperature{0.0}};
            chain masked_greedy{mask_rest{&allowed}, no_op{}, raise, temperature{0.0}};
            REQUIRE(dense_greedy.final_distribution(row).ids == masked_greedy.final_distribution(row).ids);
            // a dense mask keeps the selection pending (the fast path is taken)
            candidates<TestType> c;
            c.load(row, k);
            c.keep_in(allowed, "test");
            if (density == 1.0)
            {
                REQUIRE(c.top_k_pending());
            }
        }
    }
}

TEMPLATE_TEST_CASE("keep_in on a dense set: a mask read in the sum and the draw decides what the masked row decides",
                   "[constraint][candidates]", float, double)
{
    // A dense mask is not written to the row until a pass needs it: the draw's
    // sum and block read it (a temperature-only chain); an edit or another
    // stage after it writes it first. Every form gives the masked row's bits.
    philox4x32 rng(11);
    for (const std::size_t vocab : {std::size_t(3000), std::size_t(3001), std::size_t(64), std::size_t(5)})
    {
        for (const double density : {0.07, 0.3, 0.97, 0.999, 1.0})
        {
            xt::xtensor<TestType, 1> row = xt::empty<TestType>({vocab});
            for (auto& x : row)
            {
                x = TestType(normal(0.0, rng) * 4.0);
            }
            const TestType top = *std::max_element(row.begin(), row.end()) + TestType(1);
            row(vocab / 2) = top;  // the argmax (masked where vocab is even), the rest still weighing
            std::vector<token_id> ids;
            for (token_id i = 0; i < token_id(vocab); ++i)
            {
                if (uniform01(rng) < density && !(density < 1.0 && i == token_id(vocab / 2) && vocab % 2 == 0))
                {
                    ids.push_back(i);
                }
            }
            if (ids.empty())
            {
                ids.push_back(0);
            }
            const token_set allowed(ids, "test");
            INFO("vocab " << vocab << " density " << density);
            for (const double t : {1.0, 0.7})
            {
                chain lazy{keep_set{&allowed}, temperature{t}};
                chain plain{mask_rest{&allowed}, no_op{}, temperature{t}};
                const auto a = lazy.final_distribution(row);
                const auto b = plain.final_distribution(row);
                REQUIRE(a.ids == b.ids);
                REQUIRE(a.probs == b.probs);
                for (std::uint64_t seed = 0; seed < 64; ++seed)
                {
                    philox4x32 r1(seed), r2(seed);
                    const sampled_token x = lazy.sample(row, token_history{}, r1);
                    const sampled_token y = plain.sample(row, token_history{}, r2);
                    REQUIRE(allowed.contains(x.id));
                    REQUIRE(x.id == y.id);
                    REQUIRE(x.logprob == y.logprob);
                }
                // an edit after the mask writes it first, and sees it
                const logit_bias raise({{token_id(vocab / 2), 5.0}});
                chain edited{keep_set{&allowed}, raise, temperature{t}};
                chain edited_plain{mask_rest{&allowed}, no_op{}, raise, temperature{t}};
                REQUIRE(edited.final_distribution(row).probs == edited_plain.final_distribution(row).probs);
            }
            candidates<TestType> c;
            c.load(row);
            c.keep_in(allowed, "test");
            REQUIRE(c.dense() == (ids.size() * 16 >= vocab));  // (a sixteenth kept or more: the mask read, not written)
            if (c.dense())
            {
                const TestType best = c.logit(token_id(vocab / 2));  // (read before anything writes the mask)
                REQUIRE(best ==
                        (allowed.contains(token_id(vocab / 2)) ? top : -std::numeric_limits<TestType>::infinity()));
            }
            REQUIRE(c.size() == ids.size());
        }
    }
}

TEMPLATE_TEST_CASE("top_p on a long list orders it a chunk at a time and decides what the dense set decides",
                   "[constraint][candidates]", float, double)
{
    // A mask under a sixteenth of the row makes the set a list; top_p then
    // orders only as much of it as its sum reads (chunks of 1,024, 4,096,
    // ...). The same mask as edits keeps the set dense (its own algorithm):
    // both are exact, so the same tokens and probabilities.
    philox4x32 rng(23);
    const std::size_t vocab = 150000;  // (~8,250 kept: three chunks, the last selected from the rest)
    xt::xtensor<TestType, 1> row = xt::empty<TestType>({vocab});
    std::uint64_t listed_tier2 = 0;
    for (const double spread : {0.0, 0.25, 1.0, 4.0})
    {
        for (auto& x : row)
        {
            x = TestType(std::round(normal(0.0, rng) * spread * 8.0) / 8);  // ties too
        }
        std::vector<token_id> ids;
        for (token_id i = 0; i < token_id(vocab); ++i)
        {
            if (uniform01(rng) < 0.055)
            {
                ids.push_back(i);
            }
        }
        const token_set allowed(ids, "test");
        REQUIRE(allowed.size() * 16 < vocab);  // (the list path)
        // (q N a whole number: on the tied row the crossing is exact, the float bounds cannot decide)
        for (const double q : {0.3, 0.9, 0.999, 0.99999, double(ids.size() / 4) / double(ids.size())})
        {
            for (const std::size_t min_keep : {std::size_t(1), std::size_t(3000)})
            {
                INFO("spread " << spread << " q " << q << " min_keep " << min_keep);
                chain listed{keep_set{&allowed}, top_p{q, min_keep}};
                chain masked{mask_rest{&allowed}, no_op{}, top_p{q, min_keep}};
                const std::uint64_t before = detail::counters().tier2;
                const auto a = listed.final_distribution(row);
                listed_tier2 += detail::counters().tier2 - before;
                const auto b = masked.final_distribution(row);
                REQUIRE(a.ids.size() >= std::min(min_keep, ids.size()));
                REQUIRE(a.ids == b.ids);
                REQUIRE(a.probs == b.probs);
            }
        }
    }
    CHECK(listed_tier2 > 0);  // the exact re-decision ran on a list ordered in part
}

TEMPLATE_TEST_CASE("keep_in on a dense set: the max under a pending mask is the masked row's, ties to the lowest id",
                   "[constraint][candidates]", float, double)
{
    // Greedy right after the mask reads the max the mask leaves (settle with
    // the mask pending): logits of a few values (ties across blocks and
    // runs), the row's argmax masked, patched blocks before the mask (runs
    // that begin past 0), rows shorter than a block.
    philox4x32 rng(31);
    for (const std::size_t vocab : {std::size_t(5), std::size_t(63), std::size_t(64), std::size_t(65), std::size_t(200),
                                    std::size_t(3001)})
    {
        for (std::uint64_t seed = 0; seed < 40; ++seed)
        {
            xt::xtensor<TestType, 1> row = xt::empty<TestType>({vocab});
            for (auto& x : row)
            {
                x = TestType(std::floor(uniform01(rng) * 5.0));
            }
            const std::size_t top = std::size_t(seed * 131 % vocab);
            row(top) = TestType(9);
            std::vector<token_id> ids;
            for (token_id i = 0; i < token_id(vocab); ++i)
            {
                if (i != token_id(top) && uniform01(rng) < (seed % 2 == 0 ? 0.5 : 0.95))
                {
                    ids.push_back(i);
                }
            }
            if (ids.empty())
            {
                ids.push_back(token_id((top + 1) % vocab));
            }
            const token_set allowed(ids, "test");
            const logit_bias pre({{token_id(seed * 7 % vocab), -1.0}, {token_id(seed * 29 % vocab), 0.0}});
            INFO("vocab " << vocab << " seed " << seed);
            chain lazy{pre, keep_set{&allowed}, temperature{0.0}};
            chain plain{pre, mask_rest{&allowed}, no_op{}, temperature{0.0}};
            const auto a = lazy.final_distribution(row);
            const auto b = plain.final_distribution(row);
            REQUIRE(a.ids == b.ids);
            REQUIRE(allowed.contains(a.ids[0]));
            chain lazy2{keep_set{&allowed}, temperature{0.0}};  // (no patch: one run)
            chain plain2{mask_rest{&allowed}, no_op{}, temperature{0.0}};
            REQUIRE(lazy2.final_distribution(row).ids == plain2.final_distribution(row).ids);
        }
    }
}

TEST_CASE("keep_in on a dense set: when every allowed token is masked it throws and the set is as it was",
          "[constraint][candidates]")
{
    xt::xtensor<float, 1> row = xt::zeros<float>({std::size_t(1000)});
    std::vector<token_id> ids;
    for (token_id i = 0; i < 990; ++i)
    {
        ids.push_back(i);  // 99% allowed: the dense path
    }
    const token_set allowed(ids, "test");
    candidates<float> c;
    c.load(row);
    for (token_id i = 0; i < 990; ++i)
    {
        c.mask(i);  // the allowed tokens are already gone
    }
    CHECK_THROWS_WITH(c.keep_in(allowed, "keep"), Contains("keep: every token is masked"));
    CHECK(c.size() == 10);  // tokens 990..999 are still kept
    CHECK(c.argmax() == 990);
}

TEST_CASE("keep_in and set_logit decide the same on a fused top-k, a dense set and a sparse one", "[constraint][candidates]")
{
    // Every allowed token already masked: keep_in throws and leaves the set as
    // it was, also on a fused top-k whose list holds every token.
    const xt::xtensor<float, 1> small = {-2.0f, 1.0f, 6.0f};
    const token_set two(std::vector<token_id>{1, 2}, "test");
    for (const std::size_t k : {std::size_t(0), std::size_t(2)})
    {
        for (const std::size_t margin : {std::size_t(0), std::size_t(8)})
        {
            INFO("k " << k << " margin " << margin);
            candidates<float> c;
            c.load(small, k, margin);
            c.mask(1);
            c.mask(2);
            CHECK_THROWS_WITH(c.keep_in(two, "keep"), Contains("keep: every token is masked"));
            CHECK(c.argmax() == 0);
            CHECK(c.size() == 1);
        }
    }
    // A token outside a keep_in's mask stays dropped when an edit sets its
    // logit, whichever way the set is held: dense with the mask not yet
    // written (10 of 64 allowed), a fused top-k, or a sparse list.
    xt::xtensor<float, 1> row = xt::empty<float>({std::size_t(64)});
    for (std::size_t i = 0; i < 64; ++i)
    {
        row(i) = float(i) * 0.1f;
    }
    std::vector<token_id> ids;
    for (token_id i = 0; i < 10; ++i)
    {
        ids.push_back(i);
    }
    const token_set ten(ids, "test");
    for (const std::size_t k : {std::size_t(0), std::size_t(5)})
    {
        for (const bool sparse : {false, true})
        {
            INFO("k " << k << " sparse " << sparse);
            candidates<float> c;
            c.load(row, k);
            if (sparse)
            {
                c.keep_top(63);  // drops token 0: a sparse list
            }
            c.keep_in(ten, "keep");
            c.set_logit(50, 100.0f);
            c.set_logit(3, 50.0f);  // an allowed one is edited as usual
            CHECK(c.argmax() == 3);
            c.keep_top(5);
            const auto d = distribution_of(c);
            CHECK(std::set<token_id>(d.ids.begin(), d.ids.end()) == std::set<token_id>{3, 6, 7, 8, 9});
        }
    }
}

TEST_CASE("constraint: the mask allows exactly the tokens after which the text can be completed", "[constraint]")
{
    const auto index = small_index();
    const auto& v = index->vocab();
    const token_id eos = v.eos()[0];
    std::mt19937 pick(7);
    std::vector<std::string> all = schemas;
    all.insert(all.end(), counted_schemas.begin(), counted_schemas.end());
    for (const auto& text : all)
    {
        const json schema = json::parse(text);
        constraint c = make(text);
        for (int run = 0; run < 6; ++run)
        {
            c.reset();
            for (int step = 0; step < 40 && !c.ended(); ++step)
            {
                // allowed <=> the bytes continue the text (or eos on a complete text),
                // and then the text is completable: its completion parses and validates
                const auto allowed = allowed_by_brute_force(c, [&](token_id t, const constraint& after) {
                    const std::string full = after.text() + after.completion();
                    INFO(text << "\n" << full);
                    const json value = json::parse(full);  // throws if not JSON
                    REQUIRE(valid(value, schema, schema));
                    if (t == eos)
                    {
                        REQUIRE(after.completion().empty());
                    }
                });
                REQUIRE(std::count(allowed.begin(), allowed.end(), eos) == c.complete());
                REQUIRE(!allowed.empty());
                // go on mostly along random tokens, later along the completion
                c.advance(onward(c, allowed, pick, step > 25));
            }
        }
    }
}

namespace
{
    /// A string's text in the wide counted grammars: printable ASCII but '"'.
    byte_set string_text()
    {
        byte_set text;
        for (unsigned b = 0x20; b <= 0x7e; ++b)
        {
            if (b != '"')
            {
                text.insert(static_cast<unsigned char>(b));
            }
        }
        return text;
    }

    /// Grammars built on the IR directly: left recursion, nesting, ambiguity.
    /// Grammars over the IR, each with the limits it is compiled with.
    std::vector<std::pair<grammar, grammar_limits>> ir_grammars()
    {
        std::vector<std::pair<grammar, grammar_limits>> out;
        {
            grammar g;  // arithmetic, left-recursive
            const auto expr = g.rule("expr"), term = g.rule("term");
            const auto digits = g.plus(g.byte_class(byte_set::range('0', '9')));
            g.define(term, g.choice({digits, g.sequence({g.bytes("("), g.ref(expr), g.bytes(")")})}));
            g.define(expr, g.choice({g.sequence({g.ref(expr), g.byte_class(byte_set::of("+-")), g.ref(term)}), g.ref(term)}));
            g.set_root(expr);
            out.emplace_back(std::move(g), grammar_limits{});
        }
        {
            grammar g;  // nested lists of names, right-recursive, with optional spaces
            const auto list = g.rule("list"), items = g.rule("items");
            const auto item = g.choice({g.ref(list), g.plus(g.byte_class(byte_set::range('a', 'c')))});
            g.define(items, g.choice({item, g.sequence({item, g.bytes(","), g.optional(g.bytes(" ")), g.ref(items)})}));
            g.define(list, g.sequence({g.bytes("["), g.optional(g.ref(items)), g.bytes("]")}));
            g.set_root(list);
            out.emplace_back(std::move(g), grammar_limits{});
        }
        {
            grammar g;  // an ambiguous one: s ::= s s | "ab" | "a"
            const auto s = g.rule("s");
            g.define(s, g.choice({g.sequence({g.ref(s), g.ref(s)}), g.bytes("ab"), g.bytes("a")}));
            g.set_root(s);
            out.emplace_back(std::move(g), grammar_limits{});
        }
        {
            // counted repetitions (unroll 4): quoted names of 0 to 5 letters, lists of
            // 2 to 4 of them; a name may end at every count but may not pass 5
            grammar g;
            const auto name = g.rule("name"), list = g.rule("list");
            g.define(name, g.sequence({g.bytes("\""), g.repeat(g.byte_class(byte_set::range('a', 'e')), 0, 5), g.bytes("\"")}));
            g.define(list, g.sequence({g.bytes("["), g.ref(name),
                                      g.repeat(g.sequence({g.bytes(","), g.ref(name)}), 1, 3), g.bytes("]")}));
            g.set_root(list);
            grammar_limits limits;
            limits.unroll = 4;
            out.emplace_back(std::move(g), limits);
        }
        {
            // a counted repetition that ends its rule: item ::= "x" [a-e]{0,5} | "(" item ")"
            // (recursive: a rule of its own), in [item (, item){0,3}]: tokens such as
            // "b," read past an item's end
            grammar g;
            const auto item = g.rule("item"), list = g.rule("list");
            g.define(item, g.choice({g.sequence({g.bytes("x"), g.repeat(g.byte_class(byte_set::range('a', 'e')), 0, 5)}),
                                     g.sequence({g.bytes("("), g.ref(item), g.bytes(")")})}));
            g.define(list, g.sequence({g.bytes("["), g.ref(item), g.repeat(g.sequence({g.bytes(","), g.ref(item)}), 0, 3),
                                      g.bytes("]")}));
            g.set_root(list);
            grammar_limits limits;
            limits.unroll = 4;
            out.emplace_back(std::move(g), limits);
        }
        for (const std::size_t least : {0, 2, 1})
        {
            // a wide counted body (printable ASCII but '"', and 2-byte characters):
            // a string's text of `least` to 6 characters, walked by the index as a
            // region after its opening quote; [s] or [s, s]
            grammar g;
            const auto str = g.rule("str"), list = g.rule("list");
            const byte_set text = string_text();
            const byte_set lead = byte_set::range(0xc2, 0xdf);
            const auto ch = g.choice({g.byte_class(text), g.sequence({g.byte_class(lead), g.byte_class(byte_set::range(0x80, 0xbf))})});
            // (the third ends with '!"': what follows the count is a byte of its text too)
            g.define(str, g.sequence({g.bytes("\""), g.repeat(ch, least, least == 1 ? 9 : 6), g.bytes(least == 1 ? "!\"" : "\"")}));
            g.define(list, g.sequence({g.bytes("["), g.ref(str), g.optional(g.sequence({g.bytes(", "), g.ref(str)})), g.bytes("]")}));
            g.set_root(list);
            grammar_limits limits;
            limits.unroll = 4;
            out.emplace_back(std::move(g), limits);
        }
        return out;
    }
}

TEST_CASE("constraint: a counted lexeme's masks and completions are its product's with the length", "[constraint]")
{
    const auto index = small_index();
    const auto& v = index->vocab();
    std::mt19937 pick(11);
    struct one_case
    {
        const char* pattern;
        std::size_t min, max;
    };
    for (const auto& k : std::vector<one_case>{{"^(ab|\xC3\xA9)*$", 2, 9},
                                               {"^(aa)+b?$", 3, 13},
                                               {"^[abc\xC3\xA9 ]*$", 4, grammar::unbounded},
                                               {"^(\\S+\\s+){0,2}\\S+$", 0, 12},
                                               {"^[a-z]*(12)*$", 5, 11}})
    {
        const auto build = [&](bool counted) {
            return std::make_shared<const compiled_grammar>(
                index, test_texts::pattern_with_length(k.pattern, k.min, k.max, "\"", "\"", counted), "counted");
        };
        const auto counted = build(true), product = build(false);
        brute_force_walks(counted, 3, 16, 10, pick, [](int) { return std::size_t(0); });
        for (int run = 0; run < 12; ++run)
        {
            constraint c(counted), p(product);
            for (int step = 0; step < 40 && !p.ended(); ++step)
            {
                INFO(k.pattern << " {" << k.min << "," << k.max << "} after " << p.text());
                const token_set& cm = c.mask();
                const token_set& pm = p.mask();
                std::vector<token_id> allowed;
                for (token_id t = 0; t < token_id(v.size()); ++t)
                {
                    REQUIRE(cm.contains(t) == pm.contains(t));
                    if (pm.contains(t))
                    {
                        allowed.push_back(t);
                    }
                }
                REQUIRE(c.complete() == p.complete());
                REQUIRE(c.completion() == p.completion());
                REQUIRE(c.shortest_completion() == p.shortest_completion());
                const token_id t = onward(p, allowed, pick, step > 8 + run);
                c.advance(t);
                p.advance(t);
            }
            REQUIRE(c.ended());
        }
    }
    // budgets need the token costs of a state, which a counted lexeme's count changes: refused
    grammar g;
    const auto r = g.rule("root");
    const auto [content, units] = dfa_code_point_units(compile_regex("[ab]*"));
    g.define(r, g.counted_lexeme(content, units, 2, 4));
    g.set_root(r);
    constraint c = grammar_constraint(index, g);
    CHECK_THROWS_WITH(c.set_budget(10), Contains("counted lexemes"));
    CHECK(c.mask().contains(v.find("a")));
}

TEST_CASE("constraint: on recursive grammars too, the mask allows exactly the tokens that continue the text",
          "[constraint]")
{
    const auto index = small_index();
    const auto& v = index->vocab();
    const token_id eos = v.eos()[0];
    std::mt19937 pick(17);
    const std::size_t regions = index->regions_cached();
    for (const auto& [g, limits] : ir_grammars())
    {
        const auto compiled = std::make_shared<const compiled_grammar>(index, g, "ir", limits);
        for (int run = 0; run < 8; ++run)
        {
            constraint c(compiled);  // shares the masks of the runs before: contexts vary, positions repeat
            for (int step = 0; step < 30 && !c.ended(); ++step)
            {
                const auto allowed = allowed_by_brute_force(c, [&](token_id t, const constraint& after) {
                    completes(*compiled, after);
                    if (t == eos)
                    {
                        REQUIRE(after.completion().empty());
                    }
                });
                REQUIRE(std::count(allowed.begin(), allowed.end(), eos) == c.complete());
                c.advance(onward(c, allowed, pick, step > 20));
            }
        }
        CHECK(compiled->stats().position_hits > 0);
    }
    CHECK(index->regions_cached() > regions);  // the wide counted strings' text, walked as a region
}

TEST_CASE("constraint: a second request with the same compiled grammar starts warm, and fork diverges", "[constraint]")
{
    const auto index = small_index();
    const auto& v = index->vocab();
    const auto compiled = std::make_shared<const compiled_grammar>(index, json_schema_grammar(schemas[0]), "json_schema");
    constraint first(compiled);
    const std::vector<std::string> pieces = {"{\"", "name", "\":\"", "abc", "\",", "\"", "age", "\":", "12", "}"};
    std::vector<token_set> masks;
    for (const auto& p : pieces)
    {
        masks.push_back(first.mask());
        first.advance(v.find(p));
    }
    const auto before = compiled->stats();
    constraint second(compiled);
    for (std::size_t i = 0; i < pieces.size(); ++i)
    {
        REQUIRE(second.mask().words() == masks[i].words());
        if (i == 4)
        {
            // a fork here takes another way; the original is unaffected
            constraint other = second.fork();
            CHECK_THROWS_WITH(other.advance(v.find("\"}")), Contains("does not continue"));  // age is required
            other.advance(v.find("\""));
            other.advance(v.find(","));
            CHECK(other.text() == "{\"name\":\"abc\",");
            CHECK(other.mask().words() == masks[5].words());
        }
        second.advance(v.find(pieces[i]));
    }
    CHECK(second.complete());
    const auto after = compiled->stats();
    CHECK(after.position_walks == before.position_walks);  // every position and context was known
    CHECK(after.context_walks == before.context_walks);
    CHECK(after.position_hits > before.position_hits);
}

TEST_CASE("constraint: a compile walks each item's position ahead and a first request composes its sets from them",
          "[constraint]")
{
    const auto index = bytes_and({"abc", "ab(", "x1 ", "12", "12+", "1;", "(a", " = ", "a b", "f(a,b)", " ab", "x=1;"});
    const grammar g = parse_gbnf(R"g(
        root ::= stmt stmt*
        stmt ::= name ws "=" ws expr ";" ws
        expr ::= expr ws [-+*/] ws term | term
        term ::= name | [0-9] [0-9]* | name "(" ws expr ")" | "(" ws expr ws ")"
        name ::= [a-z_] [a-z0-9_]*
        ws   ::= [ \t]*
    )g");
    const auto compiled = std::make_shared<const compiled_grammar>(index, g, "expr");
    const auto primed = compiled->stats();
    CHECK(primed.position_walks > 10);  // one per state a kernel item may be in (every rule here counts nothing)
    CHECK(compiled->cached().first == primed.position_walks);
    grammar_limits lazy;
    lazy.primed_items = 0;  // every position walked on first use
    const auto unprimed = std::make_shared<const compiled_grammar>(index, g, "expr", lazy);
    CHECK(unprimed->stats().position_walks == 0);
    CHECK(unprimed->cached().first == 0);
    const auto& v = index->vocab();
    constraint c(compiled), d(unprimed);
    std::size_t composed = 0;
    for (const char ch : std::string("ab = ab + 12;x = f(a * (b1 - 2));"))
    {
        const auto before = compiled->stats();
        const token_set& mask = c.mask();
        const auto after = compiled->stats();
        REQUIRE(mask.words() == d.mask().words());
        d.advance(v.find(std::string(1, ch)));
        if (after.context_walks == before.context_walks)
        {
            // the kernel's items were walked alone at compile time: a new set of them reads no node
            CHECK(after.nodes_stepped + after.nodes_repeated + after.nodes_plain ==
                  before.nodes_stepped + before.nodes_repeated + before.nodes_plain);
            composed += after.position_walks - before.position_walks;
        }
        REQUIRE(mask.contains(v.find(std::string(1, ch))));
        c.advance(v.find(std::string(1, ch)));
    }
    CHECK(composed > 0);  // sets of several items, each new, made of the items' masks
    CHECK(c.complete());
}

TEST_CASE("constraint: budgets on recursive grammars from the minimum upwards all complete", "[constraint]")
{
    const auto index = small_index();
    const auto& v = index->vocab();
    for (const auto& [g, limits] : ir_grammars())
    {
        const auto compiled = std::make_shared<const compiled_grammar>(index, g, "ir", limits);
        const std::size_t least = constraint(compiled).shortest_completion();
        for (std::size_t budget = least; budget < least + 10; ++budget)
        {
            for (std::uint64_t seed = 0; seed < 6; ++seed)
            {
                hash_model model{v.size(), seed + 300, {}};
                const generation out = constrained_run(constraint(compiled), budget, true, model, seed);
                REQUIRE(out.reason == stop_reason::eos);
                REQUIRE(out.tokens.size() <= budget);
                matcher m(compiled->rules());
                const std::string text = v.decode(out.tokens);
                REQUIRE(m.feed(text) == text.size());
                REQUIRE(m.complete());
            }
        }
    }
}

TEST_CASE("constraint: names and numbers in a recursive expression: a set read again is not stepped", "[constraint]")
{
    // a left-recursive expression grammar whose names and numbers may end at every
    // byte (the items after them, and a nullable ws predicted anew each byte, are
    // in every set): a letter after a letter leaves the set as it was, and the
    // walks read such nodes as the set again (set_classes) instead of stepping
    const auto index = bytes_and({"abc", "abcd", "abc(", "ab_1", "x1 ", "foo)", "foo;", "12", "123", "12+", "1;", "(a",
                                  "((", "))", " = ", "a b", "zz=", "q(x)", "n12", "ab;", "abc abc", "\tab", " ab", "x=1;",
                                  "f(a,b)", "bar(", "_y9;", "99)", "ab  ", "k\t=", "abcdefgh", "abcdefgh(", "1234567;",
                                  // names past the depth a run's index counts (255 bytes), read by nodes there
                                  std::string(300, 'a'), std::string(300, 'a') + "(", std::string(254, 'b') + "=1;",
                                  std::string(255, 'b') + "c;", std::string(260, 'c') + "1"});
    const auto compiled = std::make_shared<const compiled_grammar>(index, parse_gbnf(R"g(
        root ::= stmt+
        stmt ::= name ws "=" ws expr ";" ws
        expr ::= expr ws op ws term | term
        op   ::= [-+*/]
        term ::= name | num | name "(" ws args? ")" | "(" ws expr ws ")"
        args ::= expr ("," ws expr)*
        name ::= [a-z_] [a-z0-9_]*
        num  ::= [0-9]+
        ws   ::= [ \t]*
    )g"), "expr");
    std::mt19937 pick(23);
    const std::size_t least = constraint(compiled).shortest_completion();
    brute_force_walks(compiled, 12, 24, 16, pick, [&](int run) {  // budgets in odd runs: the costs' walks too
        return run % 2 == 1 ? least + 4 + std::size_t(run) : 0;
    });
    const auto stats = compiled->stats();
    CHECK(stats.nodes_repeated > 0);
    CHECK(stats.nodes_stepped > 0);
    CHECK(stats.runs_by_tokens > 0);  // a name's letters after a letter: by the index of [a-z0-9_]
}

TEST_CASE("constraint: free text that may end at every byte is one region when no rule reads the root", "[constraint]")
{
    // Lines of printable text after "> ": the root may end after every character,
    // but its end only ends the text (no rule reads the root), so it is no "pop"
    // for the context to go on from, and the text's loop is a region of the trie.
    // Where a rule does read the root (the last grammar: brackets around it), its
    // end goes on and the same positions need the context. (The last three words
    // die after the root may end.)
    const auto index = bytes_and({"ab", "abc ", " de", "x\n", "\ny", "[a", "]]", "b]", "[[", "a b c", "~~", "\n\n",
                                  "zz", "q]", "hello world", "!?", "> hi", "> a\x7f", "ab\x7f", "a!\x01"});
    struct probe
    {
        const char* gbnf;
        bool root_read;
        std::size_t regions;  // new shapes walked as regions
        bool only_regions;    // no node is read outside them
    };
    for (const probe& p : {probe{"root ::= \"> \" [ -~]+ (\"\\n\" [ -~]+)*", false, 2, false},
                           // its start is on no loop but leads into one: a region too
                           probe{"root ::= [ -~] [ -~]*", false, 2, true},
                           // the root predicts `tail` where it may end: the chart is stepped there
                           probe{"root ::= [a-z ]+ (tail [a-z ]+)* tail?\ntail ::= [!?]+", false, 0, false},
                           probe{"root ::= [ -Z\\\\^-~]+ | \"[\" root \"]\"", true, 0, false}})
    {
        INFO(p.gbnf);
        const std::size_t regions = index->regions_cached();
        const auto compiled = std::make_shared<const compiled_grammar>(index, parse_gbnf(p.gbnf), "text");
        CHECK(compiled->rules()->root_read == p.root_read);
        std::mt19937 pick(29);
        brute_force_walks(compiled, 6, 12, 9, pick, [](int) { return std::size_t(0); });
        const auto stats = compiled->stats();
        if (p.root_read)
        {
            CHECK(stats.context_walks > 0);  // "]" may follow a letter: the context's
        }
        else
        {
            CHECK(stats.context_walks == 0);  // no pops: nothing for the context
        }
        CHECK(index->regions_cached() - regions == p.regions);  // the text's loops, walked as regions
        CHECK((stats.nodes_plain + stats.nodes_stepped == 0) == p.only_regions);
        if (p.regions == 0)
        {
            CHECK(stats.nodes_stepped > 0);  // the chart is stepped (its sets pop nothing either)
        }
    }
}

TEST_CASE("constraint: inside a counted string only the subtrees where the text may close are left to the context",
          "[constraint]")
{
    // Lists of strings of at most 5 characters (printable, no quote or comma),
    // counted (unroll 2): a string may end after every character, but only its
    // closing quote may follow, and no character is one. So where the count
    // ends or a byte dies ("," past the maximum), the context can go on only
    // with a quote right there: the position leaves it nothing else. Closed by
    // "!\"" instead, '!' may both follow the text and be a character of it: the
    // chart decides (at least 0 characters: every position may end), or below
    // the minimum (2) the context looks below every iteration's end.
    // (tokens with a quote after a character, or what follows the string: in
    // the second vocabulary only)
    const auto plain = bytes_and({"ab", "abc", "ab,", "bc,", "abcde,", ",\"", "xy!", "bc!", "xyz!"});
    const auto crossing = bytes_and({"ab", "abc", "ab,", "bc,", "abcde,", "a!\"", "b!\"", "!\"", "\"]", "\",", ",\"", "a\"",
                                     "ab\"]", "bcd\",\"", "xy!"});
    grammar_limits limits;
    limits.unroll = 2;
    struct probe
    {
        const char* close;
        int least;
        bool filtered, region;
    };
    for (const probe& p : {probe{"\"\\\"\"", 0, true, true}, probe{"\"!\\\"\"", 0, false, false},
                           probe{"\"!\\\"\"", 2, false, true}})
    {
        const std::string gbnf = "root ::= \"[\" str (\",\" str)* \"]\"\nstr ::= \"\\\"\" [ !#-+\\x2D-~]{" +
                                 std::to_string(p.least) + ",5} " + p.close;
        INFO(gbnf);
        const std::size_t regions = plain->regions_cached();
        const auto compiled = std::make_shared<const compiled_grammar>(plain, parse_gbnf(gbnf), "strings", limits);
        constraint c(compiled);
        std::size_t walks = 0;  // context walks at the positions inside the first string
        for (const char* t : {"[", "\"", "a", "b", "c", "d", "e"})
        {
            const std::size_t before = compiled->stats().context_walks;
            if (c.text().size() >= 2)
            {
                allowed_by_brute_force(c, [](token_id, const constraint&) {});
                walks += compiled->stats().context_walks - before;
            }
            c.advance(c.vocab().find(t));
        }
        CHECK((plain->regions_cached() > regions) == p.region);  // the counted text, walked as a region
        if (p.filtered)
        {
            CHECK(walks == 0);
        }
        else
        {
            CHECK(walks > 0);
        }
        std::mt19937 pick(31);
        brute_force_walks(std::make_shared<const compiled_grammar>(crossing, parse_gbnf(gbnf), "strings", limits), 12, 14,
                          10, pick, [](int) { return std::size_t(0); });
    }
}

TEST_CASE("constraint: at a budget's end in a long string the tokens that cannot go on past its end keep their costs",
          "[constraint]")
{
    // a string of up to 1,000 of [a-z!] closed by !" : every two-byte token inside
    // may end the text before its last byte (a "check" token), so a tight budget
    // that cuts them would read them all again; only those whose later byte is a
    // '!' can go on past the text's end, and "x!" is cheaper so: then only '"'
    // is left (no token spells !")
    std::string letters = "!";
    for (char x = 'a'; x <= 'z'; ++x)
    {
        letters += x;
    }
    std::vector<std::string> pairs;
    for (const char x : letters)
    {
        for (const char y : letters)
        {
            pairs.push_back(std::string{x, y});
        }
    }
    const auto index = bytes_and(pairs);
    const auto compiled =
        std::make_shared<const compiled_grammar>(index, parse_gbnf(R"g(root ::= "\"" [a-z!]{0,1000} "!\"")g"), "text");
    {
        matcher m(compiled->rules());
        REQUIRE(m.feed("\"ab") == 3);
        const auto after = m.after_kernel();  // the text's end: then its '!'
        CHECK(std::count(after.begin(), after.end(), true) == 1);
        CHECK(after['!']);
    }
    std::mt19937 pick(5);
    std::size_t context_only = 0;  // steps where some "x!" fits only past the text's end
    for (std::size_t budget = 5; budget < 14; ++budget)
    {
        constraint c(compiled);
        c.set_budget(budget);
        while (!c.ended())
        {
            INFO("budget " << budget << " after " << c.text());
            const auto allowed = allowed_by_brute_force(c, [](token_id, const constraint&) {});
            REQUIRE(!allowed.empty());
            const bool past = std::find(allowed.begin(), allowed.end(), index->vocab().find("a!")) != allowed.end();
            const bool inside = std::find(allowed.begin(), allowed.end(), index->vocab().find("ab")) != allowed.end();
            context_only += std::size_t(past && !inside && c.text().size() > 1);
            c.advance(allowed[pick() % allowed.size()]);
        }
        REQUIRE(c.complete());
    }
    CHECK(context_only > 0);
}

TEST_CASE("constraint: the completion is a path the machine follows byte by byte", "[constraint]")
{
    const auto index = small_index();
    const auto& v = index->vocab();
    std::mt19937 pick(11);
    for (const auto& text : schemas)
    {
        constraint c = make(text);
        for (int run = 0; run < 20; ++run)
        {
            c.reset();
            const std::size_t walk = pick() % 30;
            for (std::size_t step = 0; step < walk && !c.complete(); ++step)
            {
                const token_set& m = c.mask();
                std::vector<token_id> allowed;
                for (token_id t = 0; t < token_id(v.size()); ++t)
                {
                    if (m.contains(t) && !v.special(t))
                    {
                        allowed.push_back(t);
                    }
                }
                c.advance(allowed[pick() % allowed.size()]);
            }
            // each byte of the completion leaves the rest of it as the completion
            std::string rest = c.completion();
            while (!rest.empty())
            {
                c.advance(v.find(rest.substr(0, 1)));
                rest.erase(0, 1);
                REQUIRE(c.completion() == rest);
            }
            REQUIRE(c.complete());
        }
    }
}

TEST_CASE("constraint: thousands of seeded generations parse and validate", "[constraint]")
{
    const auto index = small_index();
    const auto& v = index->vocab();
    std::size_t runs = 0, eos_ends = 0;
    for (std::size_t k = 0; k < schemas.size(); ++k)
    {
        const json schema = json::parse(schemas[k]);
        const constraint proto = make(schemas[k]);
        const std::size_t least = proto.shortest_completion();
        for (std::uint64_t seed = 0; seed < 300; ++seed)
        {
            const bool budgeted = seed % 2 == 0;
            hash_model model{v.size(), seed, {}};
            const generation g =
                constrained_run(proto, budgeted ? least + seed % 24 : 48, budgeted, model, seed, temperature{1.0});
            ++runs;
            const std::string text = v.decode(g.tokens);
            INFO(schemas[k] << "\nseed " << seed << ": " << text);
            if (g.reason == stop_reason::eos)
            {
                ++eos_ends;
                const json value = json::parse(text);
                REQUIRE(valid(value, schema, schema));
            }
            else
            {
                REQUIRE(!budgeted);  // a budget always ends with eos
            }
        }
    }
    CHECK(runs == 300 * schemas.size());
    CHECK(eos_ends >= runs / 2);
}

TEST_CASE("constraint: budgets from the minimum upwards all complete", "[constraint]")
{
    const auto index = small_index();
    const auto& v = index->vocab();
    for (const auto& text : schemas)
    {
        const json schema = json::parse(text);
        const constraint proto = make(text);
        const std::size_t least = proto.shortest_completion();
        for (std::size_t budget = least; budget < least + 12; ++budget)
        {
            for (std::uint64_t seed = 0; seed < 8; ++seed)
            {
                hash_model model{v.size(), seed + 100, {}};
                const generation g = constrained_run(proto, budget, true, model, seed);
                INFO(text << " budget " << budget << ": " << v.decode(g.tokens));
                REQUIRE(g.reason == stop_reason::eos);
                REQUIRE(g.tokens.size() <= budget);
                REQUIRE(valid(json::parse(v.decode(g.tokens)), schema, schema));
            }
        }
        // one less than the minimum: said before generating
        constraint c = proto;
        if (least > 1)
        {
            REQUIRE_THROWS_WITH(c.set_budget(least - 1), Contains("no completion fits in " + std::to_string(least - 1)));
        }
    }
}

TEST_CASE("constraint: under a budget advance takes exactly the tokens the mask allows", "[constraint]")
{
    const auto index = small_index();
    const auto& v = index->vocab();
    std::mt19937 pick(23);
    std::size_t refused = 0;
    std::vector<std::pair<std::string, constraint>> protos;
    for (const auto& text : schemas)
    {
        protos.emplace_back(text, make(text));
    }
    for (auto& [g, limits] : ir_grammars())
    {
        protos.emplace_back("ir grammar", constraint(std::make_shared<const compiled_grammar>(index, g, "ir", limits)));
    }
    for (const auto& [text, proto] : protos)
    {
        const std::size_t least = proto.shortest_completion();
        for (std::size_t budget : {least, least + 1, least + 3})
        {
            constraint c = proto;
            c.set_budget(budget);
            while (!c.complete() || c.tokens() + 1 < budget)
            {
                const token_set mask = c.mask();
                const std::string before = c.text();
                std::vector<token_id> allowed;
                for (token_id t = 0; t < token_id(v.size()); ++t)
                {
                    if (v.special(t))
                    {
                        continue;
                    }
                    constraint probe = c.fork();
                    bool took = true;
                    try
                    {
                        probe.advance(t);
                    }
                    catch (const invalid_parameter& e)
                    {
                        took = false;
                        const std::string what = e.what();
                        if (what.find("leaves no completion within the budget") != std::string::npos)
                        {
                            ++refused;
                            REQUIRE(probe.text() == before);  // as it was, and still usable
                            REQUIRE(probe.mask().words() == mask.words());
                        }
                    }
                    INFO(text << " budget " << budget << " after \"" << before << "\" token " << t);
                    REQUIRE(took == mask.contains(t));
                    if (took)
                    {
                        allowed.push_back(t);
                    }
                }
                if (allowed.empty())
                {
                    break;
                }
                c.advance(allowed[pick() % allowed.size()]);
            }
            REQUIRE(c.complete());
        }
    }
    CHECK(refused > 0);
}

TEST_CASE("constraint: just after a counted string's opening quote, each budget's mask is what advance takes",
          "[constraint]")
{
    // the position walked as a counted region (its costs by the iterations each token ends)
    const auto index = small_index();
    const auto& v = index->vocab();
    const auto grammars = ir_grammars();
    std::size_t cut = 0;
    for (std::size_t k = grammars.size() - 3; k < grammars.size(); ++k)
    {
        const auto compiled = std::make_shared<const compiled_grammar>(index, grammars[k].first, "ir", grammars[k].second);
        const std::size_t least = constraint(compiled).shortest_completion();
        for (std::size_t budget = least; budget < least + 6; ++budget)
        {
            for (const bool apart : {false, true})  // '[' '"' leaves one token less
            {
                constraint c(compiled);
                c.set_budget(budget);
                for (const char* t : apart ? std::vector<const char*>{"[", "\""} : std::vector<const char*>{"[\""})
                {
                    c.advance(v.find(t));
                }
                INFO("grammar " << k << " budget " << budget);
                const auto allowed = allowed_by_brute_force(c, [](token_id, const constraint&) {});
                constraint free(compiled);
                free.advance(v.find("[\""));
                cut += free.mask().size() - allowed.size();
            }
        }
    }
    CHECK(cut > 0);  // tight budgets cut some tokens there
}

TEST_CASE("constraint: a budget set after some tokens counts them", "[constraint]")
{
    const auto index = small_index();
    const auto& v = index->vocab();
    constraint c = make(schemas[0]);  // {"name":"","age":0}: 10 tokens with eos
    c.advance(v.find("{\""));
    const std::size_t need = c.shortest_completion();
    CHECK_THROWS_WITH(c.set_budget(need), Contains("after the 1 read"));
    CHECK(c.text() == "{\"");
    c.set_budget(need + 1);
    CHECK(c.mask().contains(v.find("name")));
}

TEST_CASE("constraint: the shortest completion counts tokens of the vocabulary", "[constraint]")
{
    // {"age":0,"name":""} (both required, in any order: the least in byte order) in
    // the fewest tokens of the test's vocabulary, and eos
    constraint c = make(schemas[0]);
    CHECK(c.completion() == R"({"age":0,"name":""})");
    CHECK(c.shortest_completion() == 12);
}

TEST_CASE("constraint: rollback, and a rewound history", "[constraint]")
{
    const auto index = small_index();
    const auto& v = index->vocab();
    constraint c = make(schemas[0]);
    const std::vector<std::string> pieces = {"{\"", "name", "\":\"", "abc", "\",", "\"", "age", "\":", "12"};
    std::vector<token_id> ids;
    for (const auto& p : pieces)
    {
        ids.push_back(v.find(p));
        REQUIRE(ids.back() >= 0);
    }
    std::vector<token_set> masks;
    for (const token_id t : ids)
    {
        masks.push_back(c.mask());
        c.advance(t);
    }
    c.rollback(4);
    CHECK(c.text() == "{\"name\":\"abc\",");
    CHECK(c.mask().words() == masks[5].words());
    CHECK_THROWS_WITH(c.rollback(6), Contains("rollback of 6 tokens, only 5 read"));
    // the processor follows the history, forwards and back
    xt::xtensor<float, 1> row = xt::zeros<float>({v.size()});
    chain ch{make(schemas[0])};
    const std::vector<token_id> draft(ids.begin(), ids.begin() + 7);
    const auto d1 = ch.final_distribution(row, token_history(draft, 0));
    const std::vector<token_id> shorter(ids.begin(), ids.begin() + 3);
    const auto d2 = ch.final_distribution(row, token_history(shorter, 0));
    constraint fresh = make(schemas[0]);
    for (std::size_t i = 0; i < 3; ++i)
    {
        fresh.advance(ids[i]);
    }
    CHECK(d2.ids.size() == fresh.mask().size());
    CHECK(d1.ids.size() != d2.ids.size());
}

TEST_CASE("constraint: errors name the problem and leave the constraint usable", "[constraint]")
{
    const auto index = small_index();
    const auto& v = index->vocab();
    constraint c = make(schemas[0]);
    CHECK_THROWS_WITH(c.advance(v.find("}")), Contains("does not continue the text"));
    CHECK_THROWS_WITH(c.advance(v.eos()[0]), Contains("eos (token"));
    CHECK_THROWS_WITH(c.advance(-1), Contains("token id -1 is outside the vocabulary"));
    c.advance(v.find("{\""));
    CHECK(c.text() == "{\"");
    xt::xtensor<float, 1> small = xt::zeros<float>({10});
    chain ch{make(schemas[0])};
    CHECK_THROWS_WITH(ch.final_distribution(small, token_history()), Contains("fewer than the vocabulary"));
    // a history token the constraint does not allow
    xt::xtensor<float, 1> row = xt::zeros<float>({v.size()});
    const std::vector<token_id> bad = {v.find("]")};
    CHECK_THROWS_WITH(ch.final_distribution(row, token_history(bad, 0)), Contains("does not continue the text"));
    CHECK(ch.final_distribution(row, token_history()).ids.size() == 2);  // '{' and '{"' start the object
}

TEST_CASE("constraint: more distinct items at one position than a mask tracks is an error and never a wrong mask", "[constraint]")
{
    // root ::= r0 | ... | rN, ri ::= "x" i's digits | "(" ri ")": recursive rules
    // (not inlined), so after "x" every ri is an item of its own
    grammar g;
    const std::size_t n = 70000;
    std::vector<grammar::expr_id> refs;
    for (std::size_t i = 0; i < n; ++i)
    {
        const auto r = g.rule("r" + std::to_string(i));
        g.define(r, g.choice({g.sequence({g.bytes("x"), g.bytes(std::to_string(i))}),
                              g.sequence({g.bytes("("), g.ref(r), g.bytes(")")})}));
        refs.push_back(g.ref(r));
    }
    const auto root = g.rule("root");
    g.define(root, g.choice(refs));
    g.set_root(root);
    grammar_limits limits;
    limits.max_seconds = 60;  // about 1 s alone: the time is not what is tested
    constraint c = grammar_constraint(small_index(), g, "wide", limits);
    CHECK(c.mask().contains(small_index()->vocab().find("x")));
    c.advance(small_index()->vocab().find("x"));
    CHECK_THROWS_WITH(c.mask(), Contains("distinct items at one position"));
    c.advance(small_index()->vocab().find("7"));  // still usable: r7, r70..., r7xxxx
    CHECK(c.text() == "x7");
}

TEST_CASE("json_schema: unsupported keywords and bad values are errors that name them", "[constraint]")
{
    const auto fails = [](const std::string& schema, const std::string& message) {
        INFO(schema);
        CHECK_THROWS_WITH(make(schema), Contains(message));
    };
    fails(R"({"type":"array","not":{"uniqueItems":true}})", "unsupported keyword 'uniqueItems' under not at /");
    fails(R"({"not":{"enum":[[1]]}})", "unsupported keyword 'enum' under not (an object or array value)");
    // nesting: 64 levels at most by default (json_options::max_depth)
    const auto deep = [](int levels) {
        std::string s = R"({"type":"integer"})";
        for (int i = 0; i < levels; ++i)
        {
            s = R"({"type":"object","properties":{"a":)" + s + R"(},"required":["a"]})";
        }
        return s;
    };
    CHECK_NOTHROW(make(deep(63)));
    fails(deep(64), "objects and arrays nested deeper than 64 at /properties/a/properties/a");
    // a value nested 100,000 deep (a const, an enum's object) is refused before it is copied, not a stack overflow
    const std::string arrays = R"({"const":)" + std::string(100000, '[') + std::string(100000, ']') + "}";
    fails(arrays, "the schema nests objects and arrays deeper than 1000");
    std::string objects;
    for (int i = 0; i < 100000; ++i)
    {
        objects += R"({"a":)";
    }
    objects += "1" + std::string(100000, '}');
    fails(R"({"enum":[)" + objects + "]}", "the schema nests objects and arrays deeper than 1000");
    CHECK_THROWS_WITH(json_schema_grammar(nlohmann::json::parse(arrays)), Contains("deeper than 1000"));
    CHECK_NOTHROW(make(R"({"const":)" + std::string(900, '[') + std::string(900, ']') + "}"));
    fails(R"({"not":{}})", "the schema validates nothing at /");
    fails(R"({"type":"object","oneOf":[]})", "oneOf must be a non-empty list of schemas at /");
    fails(R"({"properties":{"a":{"type":"number","multipleOf":0.01}}})",
          "multipleOf 0.01 is not supported (only integers and fractions exact in binary");
    fails(R"({"properties":{"a":{"minimum":"3"}}})", "minimum must be a number, got \"3\" at /properties/a");
    fails(R"({"type":"integer","exclusiveMinimum":true,"minimum":1})", "exclusiveMinimum must be a number (a boolean is draft 4's");
    fails(R"({"$schema":"http://json-schema.org/draft-04/schema#","exclusiveMaximum":3})", "exclusiveMaximum must be a boolean in draft 4");
    fails(R"({"type":"integer","multipleOf":0})", "multipleOf must be above 0, got 0");
    fails(R"({"type":"integer","minimum":1,"maximum":0})", "the schema validates nothing at /");
    fails(R"({"type":"array","items":[{"type":"string"}]})", "items as a list");
    fails(R"({"type":"array","minItems":3,"maxItems":2})", "minItems 3 > maxItems 2");
    fails(R"({"type":"string","maxLength":-1})", "maxLength must be a non-negative integer");
    fails(R"({"type":"strin"})", "unknown type 'strin'");
    fails(R"({"enum":[1,2],"type":"string"})", "the schema validates nothing at /");
    fails(R"({"type":"object","required":["a"],"additionalProperties":false})", "required 'a' is not in properties");
    fails(R"(false)", "the schema validates nothing at /");
    fails(R"({"type":)", "the schema is not JSON");
    fails(R"({"enum":[1],"minimum":3})", "the schema validates nothing at /");
    fails(R"({"enum":["abcd"],"maxLength":3})", "the schema validates nothing at /");
    fails(R"({"type":"string","format":"hostname"})", "unsupported format 'hostname' at /");
    fails(R"({"properties":{"a":{"format":"ipv6"}}})", "unsupported format 'ipv6' at /properties/a");
    fails(R"({"$ref":"#/definitions/missing"})", "$ref '#/definitions/missing' at /: the schema has nothing at that pointer");
    fails(R"({"$ref":"other.json#/a"})", "$ref 'other.json#/a' at / is not inside this schema");
    fails(R"({"$defs":{"a":[{"type":"string"}]},"$ref":"#/$defs/a/99999999999999999999999"})",
          "the schema has nothing at that pointer");  // (an index past any number: no std::out_of_range)
    fails(R"({"oneOf":[{"type":"array","uniqueItems":true},{"type":"array","maxItems":2}]})",
          "unsupported keyword 'uniqueItems' under not at /oneOf/0");
    fails(R"({"type":"string","minLength":1000000})", "the shortest value is longer than 65536 bytes");
    fails(R"({"type":"array","minItems":300,"items":{"type":"array","minItems":300}})", "longer than 65536 bytes");
    CHECK_THROWS_WITH(json_constraint(small_index(), json_options{300, 32}), Contains("whitespace must be <= 255"));
    // required names served by additionalProperties compile it once: 30 levels stay linear
    std::string nested = R"({"type":"integer"})", wide = nested;
    for (int level = 0; level < 30; ++level)
    {
        nested = R"({"type":"object","required":["a"],"properties":{"b":{"type":"null"}},"additionalProperties":)" +
                 nested + "}";
        wide = R"({"type":"object","required":["a","b","c"],"additionalProperties":)" + wide + "}";
    }
    CHECK(json_schema_grammar(nested).size() < 2000);
    CHECK_THROWS_WITH(make(wide), Contains("the shortest value is longer than 65536 bytes"));
}

namespace
{
    /// Whether the schema's grammar accepts each text, in order. The compile time is not what
    /// these cases test: a sanitizer build on a slow machine runs them several times slower.
    std::vector<bool> accepted(const std::string& schema, const std::vector<std::string>& texts,
                               const json_options& o = {})
    {
        grammar_limits limits;
        limits.max_seconds = 60;
        const auto a = compile_grammar(json_schema_grammar(schema, o), limits);
        std::vector<bool> out;
        for (const auto& t : texts)
        {
            matcher m(a);
            out.push_back(m.feed(t) == t.size() && m.complete());
        }
        return out;
    }
    using bools = std::vector<bool>;
    /// Options for only the keys a schema lists (json_options::additional_properties off).
    json_options listed_keys()
    {
        json_options o;
        o.additional_properties = false;
        return o;
    }
}

TEST_CASE("json_schema: formats as regular expressions over the string's content", "[constraint]")
{
    const auto of = [](const std::string& format) { return R"({"type":"string","format":")" + format + R"("})"; };
    // a real day of the Gregorian calendar: leap years by 4, 100 and 400; year 0 refused
    CHECK(accepted(of("date"), {R"("2024-02-29")", R"("2023-02-29")", R"("2000-02-29")", R"("1900-02-29")",
                                R"("0400-02-29")", R"("0000-01-01")", R"("0001-01-01")", R"("9999-12-31")",
                                R"("2023-04-31")", R"("2023-05-31")", R"("2023-13-01")", R"("2023-00-10")",
                                R"("2023-01-00")", R"("2023-1-01")", R"("2023-01-01 ")"}) ==
          bools{true, false, true, false, true, false, true, true, false, true, false, false, false, false, false});
    // RFC 3339: 't' and 'z' in either case, a fraction, an offset; no leap second
    CHECK(accepted(of("date-time"), {R"("2024-01-01T00:00:00Z")", R"("2024-01-01t23:59:59.123z")",
                                     R"("2024-01-01T12:30:00+05:30")", R"("2024-01-01T12:30:00-23:59")",
                                     R"("2024-01-01T24:00:00Z")", R"("2024-01-01T23:59:60Z")",
                                     R"("2024-01-01T12:30:00")", R"("2024-01-01 12:30:00Z")",
                                     R"("2024-01-01T12:30:00+0530")", R"("2024-01-01T12:30:00.Z")",
                                     R"("2023-02-29T00:00:00Z")"}) ==
          bools{true, true, true, true, false, false, false, false, false, false, false});
    CHECK(accepted(of("time"), {R"("08:30:00Z")", R"("08:30:00.5+01:00")", R"("08:30Z")", R"("8:30:00Z")"}) ==
          bools{true, true, false, false});
    CHECK(accepted(of("uuid"), {R"("123e4567-e89b-12d3-a456-426614174000")", R"("123E4567-E89B-12D3-A456-426614174000")",
                                R"("123e4567e89b12d3a456426614174000")", R"("123e4567-e89b-12d3-a456-42661417400g")"}) ==
          bools{true, true, false, false});
    CHECK(accepted(of("ipv4"), {R"("192.168.0.1")", R"("255.255.255.255")", R"("0.0.0.0")", R"("256.1.1.1")",
                                R"("01.1.1.1")", R"("1.1.1")", R"("1.1.1.1.1")"}) ==
          bools{true, true, true, false, false, false, false});
    // email and URIs: subsets of their RFCs (a dot-atom at a host name; no bracketed IP literal)
    CHECK(accepted(of("email"), {R"("first.last@example.com")", R"("x+y@ex-ample.org")", R"("a@b")",
                                 R"("a..b@c")", R"(".a@b")", R"("a@-b.c")", R"("a@b-.c")", R"("@c")", R"("a@")"}) ==
          bools{true, true, true, false, false, false, false, false, false});
    CHECK(accepted(of("uri"), {R"("https://u:p@example.com:8080/a/b?q=1&r=%20#frag")", R"("mailto:a@b.c")",
                               R"("urn:isbn:0451450523")", R"("file:///etc/passwd")", R"("http://a:b/")",
                               R"("http://a b")", R"("http://a%2")", R"("//example.com")", R"("1a:b")",
                               R"("http://h/p#f#g")", R"("http://[::1]/")"}) ==
          bools{true, true, true, true, false, false, false, false, false, false, false});
    CHECK(accepted(of("uri-reference"), {R"("//example.com/a")", R"("/path?q")", R"("rel/path")", R"("#f")",
                                         R"("")", R"("http://x")", R"("a b")", R"("re:l")"}) ==
          bools{true, true, true, true, true, true, false, true});
    // RFC 6570's templates of level 4: literals, %-escapes, {op? name(:prefix|*)?, ...}
    CHECK(accepted(of("uri-template"), {R"("http://example.com/{path}")", R"("/search{?q,lang}")", R"("{+base}/x{#frag}")",
                                        R"("{/list*}{;a.b:30}")", R"("a%20b")", R"("")", R"("http://example.com/{")",
                                        R"("{}")", R"("{a b}")", R"("{=x}")", R"("{x:0}")", R"("{x:10000}")", R"("a b")",
                                        R"("a%2")", R"("{a..b}")"}) ==
          bools{true, true, true, true, true, true, false, false, false, false, false, false, false, false, false});
    // with a length bound and a pattern (intersected); as an enum's filter; a format on another type is ignored
    CHECK(accepted(R"({"type":"string","format":"date","pattern":"^2024"})", {R"("2024-03-01")", R"("2023-03-01")"}) ==
          bools{true, false});
    CHECK(accepted(R"({"type":"string","format":"ipv4","maxLength":8})", {R"("1.2.3.4")", R"("10.20.30.40")"}) ==
          bools{true, false});
    // past 1000 code points the format's automaton is counted by the grammar
    const std::string long_uri = "http://a.b/" + std::string(2037, 'c');
    CHECK(accepted(R"({"type":"string","format":"uri","maxLength":2048})",
                   {R"("http://a.b/c")", R"("http://a b")", "\"" + long_uri + "\"", "\"" + long_uri + "d\""}) ==
          bools{true, false, true, false});
    CHECK(accepted(R"({"enum":["2024-02-30","2024-02-28",3],"format":"date"})",
                   {R"("2024-02-30")", R"("2024-02-28")", "3"}) == bools{false, true, true});
    CHECK(accepted(R"({"type":"integer","format":"date"})", {"7"}) == bools{true});
    // unknown formats stay annotations
    CHECK(accepted(R"({"type":"string","format":"int32"})", {R"("x")"}) == bools{true});
    // brute force: every allowed token's text completes into the grammar's language (budgets in odd runs)
    const std::string both = R"({"type":"object","properties":{"t":{"type":"string","format":"date-time"},
        "u":{"type":"string","format":"uri"}},"required":["t","u"]})";
    std::mt19937 pick(41);
    brute_force_walks(std::make_shared<const compiled_grammar>(small_index(), json_schema_grammar(both), "formats"), 6, 40,
                      30, pick, [](int run) { return run % 2 == 1 ? std::size_t(90) : std::size_t(0); });
}

TEST_CASE("json_schema: numbers within bounds and multiples, exactly, as validators comparing in double decide",
          "[constraint]")
{
    using detail::decimal;
    using detail::number_bounds;
    // decimals: exact values from any JSON number text
    CHECK(decimal::parse("1.2500e2")->text() == "125");
    CHECK(decimal::parse("-0.0")->text() == "0");
    CHECK(decimal::parse("12e-5")->text() == "0.00012");
    CHECK(!decimal::parse("01"));
    CHECK(!decimal::parse("1e999"));
    CHECK(detail::compare(*decimal::parse("-1.5"), *decimal::parse("-1.25")) == -1);
    CHECK(detail::compare(*decimal::parse("0.3"), *decimal::parse("0.25")) == 1);
    CHECK(detail::multiple_of(*decimal::parse("7.5"), *decimal::parse("2.5")) == true);
    CHECK(detail::multiple_of(*decimal::parse("7"), *decimal::parse("2.5")) == false);
    // number_dfa against exact arithmetic on every text of up to 4 bytes and random longer ones; every
    // text it accepts is also decided the same way in double (15 digits at most)
    struct bounds_case
    {
        const char *lower, *upper;
        bool lower_exclusive, upper_exclusive, integer;
        std::uint64_t divisor;
    };
    const bounds_case cases[] = {{"0", nullptr, false, false, true, 1},      {"0.1", nullptr, true, false, false, 1},
                                 {"-3", "2.5", false, true, false, 1},       {"1.25", "1.3", false, false, false, 1},
                                 {nullptr, "-0.5", false, false, false, 1},  {"-10", "10", true, true, true, 7},
                                 {"0.001", "0.01", false, true, false, 1},   {"-0", "0", false, false, false, 1},
                                 {"99", nullptr, false, false, true, 11},    {nullptr, nullptr, false, false, true, 3}};
    std::mt19937 rng(7);
    std::vector<std::string> texts, level = {""};
    for (int n = 1; n <= 4; ++n)
    {
        std::vector<std::string> longer;
        for (const auto& t : level)
        {
            for (const char c : std::string("-.0123456789"))
            {
                longer.push_back(t + c);
            }
        }
        texts.insert(texts.end(), longer.begin(), longer.end());
        level = std::move(longer);
    }
    for (const char* t : {"0.001", "0.005", "0.0099", "0.01", "0.00999999999999", "-1.5", "110", "-0.0", "2.4999999"})
    {
        texts.push_back(t);
    }
    for (int r = 0; r < 4000; ++r)
    {
        std::string t = rng() % 3 == 0 ? "-" : "";
        for (int k = int(rng() % 17); k >= 0; --k)
        {
            t += rng() % 7 == 0 ? '.' : char('0' + rng() % 10);
        }
        texts.push_back(t);
    }
    for (const auto& k : cases)
    {
        number_bounds b;
        if (k.lower)
        {
            b.at_least(*decimal::parse(k.lower), k.lower_exclusive);
        }
        if (k.upper)
        {
            b.at_most(*decimal::parse(k.upper), k.upper_exclusive);
        }
        b.integer = k.integer;
        b.divisor = k.divisor;
        const byte_dfa d = detail::number_dfa(b);
        std::size_t accepted_texts = 0;
        for (const auto& t : texts)
        {
            INFO(t << " within " << b.key());
            const auto x = decimal::parse(t);
            const std::size_t digits = std::size_t(std::count_if(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; }));
            const bool expected = x && t.find_first_of("eE") == std::string::npos && digits <= 15 &&
                                  (!k.integer || t.find('.') == std::string::npos) && b.within(*x) &&
                                  (k.divisor == 1 || *detail::multiple_of(*x, *decimal::parse(std::to_string(k.divisor))));
            REQUIRE(d.matches(t) == expected);
            if (expected)
            {
                ++accepted_texts;
                const double v = std::strtod(t.c_str(), nullptr);
                CHECK((!k.lower || (k.lower_exclusive ? v > std::strtod(k.lower, nullptr) : v >= std::strtod(k.lower, nullptr))));
                CHECK((!k.upper || (k.upper_exclusive ? v < std::strtod(k.upper, nullptr) : v <= std::strtod(k.upper, nullptr))));
            }
        }
        CHECK(accepted_texts > 0);
    }
    // near a bound in double: 0.1 is not above 0.1; 15 digits above it are, and more are not written
    const std::string above = R"({"type":"number","exclusiveMinimum":0.1})";
    CHECK(accepted(above, {"0.1", "0.10000000000001", "0.100000000000001", "1e5", "0.2"}) ==
          bools{false, true, false, false, true});
    // integers: inclusive and exclusive bounds, negative ones, -0; draft 4's booleans
    CHECK(accepted(R"({"type":"integer","minimum":1,"maximum":12})", {"0", "1", "12", "13", "-1", "1.0", "-0"}) ==
          bools{false, true, true, false, false, false, false});
    CHECK(accepted(R"({"type":"integer","exclusiveMinimum":-3,"exclusiveMaximum":0})", {"-3", "-2", "-1", "-0", "0"}) ==
          bools{false, true, true, false, false});
    CHECK(accepted(R"({"$schema":"http://json-schema.org/draft-04/schema#","type":"number","minimum":0,
                     "exclusiveMinimum":true,"maximum":1,"exclusiveMaximum":false})",
                   {"0", "-0", "0.5", "1", "1.5"}) == bools{false, false, true, true, false});
    // a bound's fraction against an integer; an integer type with a fractional bound
    CHECK(accepted(R"({"type":"integer","minimum":1.5})", {"1", "2"}) == bools{false, true});
    CHECK(accepted(R"({"type":"number","minimum":-1.25,"maximum":1e2})", {"-1.25", "-1.3", "100", "100.01", "99.99"}) ==
          bools{true, false, true, false, true});
    // multipleOf: integers, an exact binary fraction, several at once; numbers then integers
    CHECK(accepted(R"({"type":"integer","multipleOf":7})", {"0", "14", "-21", "15"}) == bools{true, true, true, false});
    CHECK(accepted(R"({"type":"number","multipleOf":2.5,"exclusiveMinimum":0})", {"5", "10", "2.5", "-5", "0", "7"}) ==
          bools{true, true, false, false, false, false});
    CHECK(accepted(R"({"allOf":[{"multipleOf":2},{"multipleOf":3}],"type":"integer"})", {"6", "4", "9", "12"}) ==
          bools{true, false, false, true});
    // a remainder modulo a large common multiple: 420 and not 630 (1,260 remainders, each at every digit count)
    CHECK(accepted(R"({"type":"integer","minimum":10000,"multipleOf":420,"not":{"multipleOf":630}})",
                   {"10500", "10080", "9660", "10920", "999999999999840", "9999999999998400"}) ==
          bools{true, false, false, true, true, false});
    // without a bound the sign is not kept: 429 and not 8 (3,432 remainders at each of 15 digit counts) compile
    CHECK(accepted(R"({"type":"number","allOf":[{"multipleOf":33},{"multipleOf":13},{"not":{"multipleOf":8}}]})",
                   {"429", "-858", "3432", "-3432", "0", "-4290"}) == bools{true, true, false, false, false, true});
    // past number_dfa's 50,000 states (24,024 remainders at each of 15 digit counts): the sign, then the digits
    // counted by the grammar, at most 15 of them
    const std::string counted = R"({"type":"integer","multipleOf":429,"not":{"anyOf":[{"multipleOf":8},{"multipleOf":7}]}})";
    CHECK(accepted(counted, {"429", "-858", "3003", "3432", "0", "-0", "4290", "100000000000329", "1000000000000287", "0429", "-"}) ==
          bools{true, true, false, false, false, false, true, true, false, false, false});
    // past the digits' own limit too: the error says where and both reasons
    CHECK_THROWS_WITH(json_schema_grammar(std::string(R"({"type":"integer","not":{"anyOf":[{"multipleOf":4999},{"multipleOf":13}]}})")),
                      Contains("within these bounds: more than 50000 automaton states; counting its digits: more than 50000 "
                               "automaton states at /"));
    // a few integers between bounds listed: 13, not 2, 3, 5, 7 or 11, between 100 and 1000 (30,030 remainders)
    const std::string listed = R"({"type":"integer","multipleOf":13,"exclusiveMinimum":100,"exclusiveMaximum":1000,
        "not":{"anyOf":[{"multipleOf":2},{"multipleOf":3},{"multipleOf":5},{"multipleOf":7},{"multipleOf":11}]}})";
    CHECK(accepted(listed, {"221", "169", "143", "130", "1001", "91", "-221", "221.0", "0221"}) ==
          bools{true, true, false, false, false, false, false, false, false});
    CHECK(accepted(R"({"type":"integer","minimum":-3,"maximum":3,"multipleOf":2})", {"-2", "0", "-0", "2", "4", "-4"}) ==
          bools{true, true, true, true, false, false});
    // a multiple of 6 is one of 3: nothing left
    CHECK_THROWS_WITH(json_schema_grammar(std::string(R"({"type":"integer","multipleOf":6,"not":{"multipleOf":3}})")),
                      Contains("validates nothing"));
    // an enum or const value checked as validators compare: a double by its exact binary value (...768 here)
    CHECK_THROWS_WITH(json_schema_grammar(std::string(R"({"enum":[1234567890123456780],"maximum":1.2345678901234568e18})")),
                      Contains("validates nothing"));
    CHECK_THROWS_WITH(json_schema_grammar(std::string(R"({"enum":[1.2345678901234568e18],"multipleOf":100})")),
                      Contains("validates nothing"));
    CHECK(accepted(R"({"enum":[1234567890123456768,5],"maximum":1.2345678901234568e18})", {"1234567890123456768", "5"}) ==
          bools{true, true});
    // an integer past 64 bits in the schema's text is an error (nlohmann reads it as another number)
    CHECK_THROWS_WITH(json_schema_grammar(std::string(R"({"const":18446744073709551617})")),
                      Contains("the integer 18446744073709551617 is past 64 bits"));
    // draft 4: 1.0 is not an integer, and const is no keyword (ignored)
    CHECK(accepted(R"({"$schema":"http://json-schema.org/draft-04/schema#","type":"integer","enum":[1.0,2]})", {"1.0", "2"}) ==
          bools{false, true});
    CHECK(accepted(R"({"$schema":"http://json-schema.org/draft-04/schema#","type":"integer","const":1})", {"1", "2"}) ==
          bools{true, true});
    // a number of an enum or const in each spelling validators read as it (2 and 2.0, 2.5 and 2.50, 0 and -0;
    // draft 4's 2.0 is no integer; past 2^53 a fraction's double is another number)
    CHECK(accepted(R"({"enum":[2.0,2.5,0,[1]]})", {"2", "2.00", "2.50", "2.51", "-0", "0.0", "[1.0]", "3"}) ==
          bools{true, true, true, false, true, true, true, false});
    CHECK(accepted(R"({"$schema":"http://json-schema.org/draft-04/schema#","enum":[2.0,7]})", {"2", "2.0", "7.0"}) ==
          bools{true, false, false});
    CHECK(accepted(R"({"const":9007199254740993})", {"9007199254740993", "9007199254740993.0"}) == bools{true, false});
    // enum and const values checked exactly, beside bounds and multiples
    CHECK(accepted(R"({"enum":[1,2.5,3,7.5,-1],"multipleOf":2.5,"minimum":0})", {"1", "2.5", "7.5", "3", "-1"}) ==
          bools{false, true, true, false, false});
    // without bounds a number is the plain grammar (an exponent allowed)
    CHECK(accepted(R"({"type":"number"})", {"1e5", "1.5"}) == bools{true, true});
    // every token the mask allows leads to a completion that validates in double, and no other does
    const std::string text = R"({"type":"object","properties":{"a":{"type":"number","exclusiveMinimum":0.1,"maximum":12.5},
        "b":{"type":"integer","multipleOf":3,"minimum":-7},"c":{"type":"array","items":{"type":"integer","exclusiveMaximum":-2}}},
        "required":["a","b","c"],"additionalProperties":false})";
    const json schema = json::parse(text);
    constraint c = json_schema_constraint(small_index(), text);
    CHECK(validating_walks(c, schema, rng, 6, 24, 16, [](const constraint&) {}) > 100);
}

TEST_CASE("json_schema: not, as the schema of the values that break one of its keywords", "[constraint]")
{
    CHECK(accepted(R"({"not":{"type":"string"}})", {"1", "null", "{}", "\"a\"", "[\"a\"]"}) == bools{true, true, true, false, true});
    // values: strings, integers (and a fraction's trailing zeros), booleans, null
    CHECK(accepted(R"({"type":["string","integer","boolean","null"],"not":{"enum":["a",1,true,null]}})",
                   {"\"a\"", "\"b\"", "1", "2", "true", "false", "null"}) ==
          bools{false, true, false, true, false, true, false});
    CHECK(accepted(R"({"type":"number","minimum":0,"not":{"const":1.5}})", {"1.5", "1.50", "1.25", "15"}) ==
          bools{false, false, true, true});
    CHECK(accepted(R"({"enum":[1,2,3],"not":{"const":2}})", {"1", "2", "3"}) == bools{true, false, true});
    // an object or [] not in an enum: a key missing, another value (not 1, 1.0 or true), another key
    CHECK(accepted(R"({"not":{"enum":[{"a":1,"b":[]},[],{},"x"]}})",
                   {R"({"a":1,"b":[]})", R"({"b":[],"a":1.0})", R"({"a":true,"b":[]})", R"({"a":1})", R"({"a":2,"b":[]})",
                    R"({"a":1,"b":[0]})", R"({"a":1,"b":[],"c":0})", "[]", "{}", "[0]", R"("x")", R"("y")", "0"}) ==
          bools{false, false, false, true, true, true, true, false, false, true, false, true, true});
    CHECK(accepted(R"({"$schema":"http://json-schema.org/draft-04/schema#","type":"object","not":{"enum":[{"a":{"b":2}}]}})",
                   {R"({"a":{"b":2}})", R"({"a":{"b":3}})", R"({"a":{}})"}) == bools{false, true, true});
    // two kinds of other keys (here any key, and keys of 2 characters or more) are two key automata
    CHECK(accepted(R"({"additionalProperties":{"not":{"const":{}}},"not":{"propertyNames":{"maxLength":1}}})",
                   {R"({"c":1})", R"({"cc":1})", R"({"cc":{}})"}) == bools{false, true, false});
    CHECK(accepted(R"({"oneOf":[{"additionalProperties":{"not":{"enum":[{}]}}},{"propertyNames":{"maxLength":1}}]})",
                   {R"({"c":1})", R"({"cc":1})", R"({"c":{}})"}) == bools{false, true, true});
    // object keywords: a required key absent; a property's value that breaks its schema
    CHECK(accepted(R"({"type":"object","not":{"required":["a"]}})", {"{}", R"({"a":1})", R"({"b":1})"}) ==
          bools{true, false, true});
    CHECK(accepted(R"({"type":"object","not":{"required":["a"]}})", {R"({"b":1})"}, listed_keys()) == bools{false});
    CHECK(accepted(R"({"type":"object","properties":{"a":{}},"not":{"properties":{"a":{"type":"string"}}}})",
                   {R"({"a":1})", R"({"a":"x"})", "{}"}) == bools{true, false, false});
    // numbers and strings: bounds, multiples, lengths, patterns, formats
    CHECK(accepted(R"({"type":"integer","not":{"minimum":3}})", {"2", "3", "-5"}) == bools{true, false, true});
    CHECK(accepted(R"({"type":"integer","not":{"exclusiveMaximum":3}})", {"2", "3", "4"}) == bools{false, true, true});
    CHECK(accepted(R"({"type":"integer","not":{"multipleOf":3}})", {"3", "4", "0", "-7"}) == bools{false, true, false, true});
    CHECK(accepted(R"({"type":"string","not":{"minLength":2}})", {"\"a\"", "\"ab\"", "\"\""}) == bools{true, false, true});
    CHECK(accepted(R"({"type":"string","not":{"pattern":"^a"}})", {"\"abc\"", "\"bac\""}) == bools{false, true});
    // where validators decide otherwise than our automata, not is an error: a format (ours are subsets of their
    // checkers), a fraction's multiples (doubles)
    fails_with(R"({"type":"string","not":{"format":"date"}})", "unsupported keyword 'format' under not at /not");
    // a class escape or '.' under not: what neither ECMAScript nor Python's re (Unicode digits, '.' through
    // U+2028) matches; outside not, what both match (Python's \D refuses U+0663)
    CHECK(accepted(R"({"type":"string","not":{"pattern":"\\d"}})", {"\"abc\"", "\"a1\"", "\"\xD9\xA3\""}) ==
          bools{true, false, false});
    CHECK(accepted(R"({"type":"string","not":{"pattern":"^a.b"}})", {"\"axb\"", "\"ab\"", "\"a\xE2\x80\xA8" "b\""}) ==
          bools{false, true, false});
    CHECK(accepted(R"({"type":"string","pattern":"^\\D+$"})", {"\"ab\"", "\"a1\"", "\"\xD9\xA3\""}) == bools{true, false, false});
    CHECK(accepted(R"({"type":"string","pattern":"^a.b$"})", {"\"axb\"", "\"a\xE2\x80\xA8" "b\""}) == bools{true, false});
    CHECK(accepted(R"({"type":"string","not":{"pattern":"^a\\.b"}})", {"\"a.b\"", "\"axb\""}) == bools{false, true});
    fails_with(R"({"not":{"multipleOf":0.1875}})", "unsupported keyword 'multipleOf' under not (0.1875: only an integer)");
    // draft 4 has no const: it holds for every value, so its negation is nothing
    fails_with(R"({"$schema":"http://json-schema.org/draft-04/schema#","not":{"const":false}})", "the schema validates nothing");
    CHECK(accepted(R"({"type":"array","not":{"maxItems":1}})", {"[]", "[1]", "[1,2]"}) == bools{false, false, true});
    // combinators by De Morgan; not not; through $ref
    CHECK(accepted(R"({"not":{"not":{"type":"integer"}}})", {"1", "\"a\""}) == bools{true, false});
    CHECK(accepted(R"({"not":{"anyOf":[{"type":"string"},{"type":"null"}]}})", {"\"a\"", "null", "1"}) ==
          bools{false, false, true});
    CHECK(accepted(R"({"not":{"allOf":[{"type":"integer"},{"minimum":3}]}})", {"5", "2", "\"x\""}) == bools{false, true, true});
    CHECK(accepted(R"({"not":{"oneOf":[{"type":"integer"},{"type":"string"}]}})", {"5", "\"x\"", "null"}) ==
          bools{false, false, true});
    CHECK(accepted(R"({"$defs":{"s":{"type":"string"}},"not":{"$ref":"#/$defs/s"}})", {"\"x\"", "1"}) == bools{false, true});
    // S and not S together validate nothing, a root that is its own negation too; not of the root below it is
    // well-founded (an object whose "a" is not such an object); no string is longer than the largest maxLength
    fails_with(R"({"allOf":[{"$ref":"#/$defs/p"},{"not":{"$ref":"#/$defs/p"}}],"$defs":{"p":{"type":"integer"}}})",
               "the schema validates nothing at /");
    fails_with(R"({"not":{"$ref":"#"}})", "the schema validates nothing at /");
    CHECK(accepted(R"({"type":"object","properties":{"a":{"not":{"$ref":"#"}}}})",
                   {"{}", R"({"a":1})", R"({"a":{}})", R"({"a":{"a":1}})", R"({"a":{"a":{}}})"}) ==
          bools{true, true, false, false, true});
    fails_with(R"({"type":"string","not":{"maxLength":18446744073709551615}})", "the schema validates nothing at /");
    // annotations and unknown keywords hold for every value: their negation is nothing
    CHECK(accepted(R"({"anyOf":[{"type":"null"},{"not":{"title":"t","x-y":1}}]})", {"null", "1"}) == bools{true, false});
    // every token the mask allows leads to a completion that validates, and no other does
    const std::string text = R"({"type":"object","properties":{"a":{"type":"string","not":{"enum":["ab","x"]}},
        "b":{"not":{"anyOf":[{"type":"string"},{"type":"object"},{"type":"array"},{"minimum":2}]}},
        "c":{"type":"integer","not":{"multipleOf":2}}},"required":["a","b","c"],"not":{"required":["d"]}})";
    const json schema = json::parse(text);
    constraint c = json_schema_constraint(small_index(), text);
    std::mt19937 pick(9);
    CHECK(validating_walks(c, schema, pick, 6, 24, 16, [](const constraint&) {}) > 100);
}

TEST_CASE("json_schema: $ref to definitions, $defs, anchors and $id, recursion, siblings by draft", "[constraint]")
{
    const std::string list = R"({"$defs":{"cell":{"type":"object","properties":{"v":{"type":"integer"},
        "next":{"$ref":"#/$defs/cell"}},"required":["v"],"additionalProperties":false}},"$ref":"#/$defs/cell"})";
    CHECK(accepted(list, {R"({"v":1})", R"({"v":1,"next":{"v":2,"next":{"v":3}}})", R"({"next":{"v":2}})",
                          R"({"v":1,"next":{"v":"x"}})", R"({"v":1,"next":{}})"}) ==
          bools{true, true, false, false, false});
    // '#' is the root; an escaped pointer; a draft-4 id and a $anchor; $id-relative refs
    CHECK(accepted(R"({"type":["array","integer"],"items":{"$ref":"#"}})", {"[1,[2,[]]]", "3", "[\"a\"]"}) ==
          bools{true, true, false});
    CHECK(accepted(R"({"definitions":{"a/b~c":{"type":"null"}},"properties":{"x":{"$ref":"#/definitions/a~1b~0c"}}})",
                   {R"({"x":null})", R"({"x":1})"}) == bools{true, false});
    CHECK(accepted(R"({"$schema":"http://json-schema.org/draft-04/schema#","definitions":{"n":{"id":"#num","type":"integer"}},
                     "properties":{"x":{"$ref":"#num"}}})", {R"({"x":1})", R"({"x":"1"})"}) == bools{true, false});
    CHECK(accepted(R"({"$defs":{"s":{"$anchor":"str","type":"string"}},"properties":{"x":{"$ref":"#str"}}})",
                   {R"({"x":"a"})", R"({"x":1})"}) == bools{true, false});
    CHECK(accepted(R"({"$id":"http://example.com/root.json","$defs":{"i":{"$id":"int.json","type":"integer"}},
                     "properties":{"p":{"$ref":"int.json"},"q":{"$ref":"http://example.com/int.json"},
                     "r":{"$ref":"root.json#/$defs/i"}}})", {R"({"p":1,"q":2,"r":3})", R"({"q":"x"})"}) ==
          bools{true, false});
    // beside $ref: drafts 4 to 7 ignore the siblings, 2019-09 and later (the default) apply both
    const std::string sibling = R"("definitions":{"s":{"type":"string"}},"properties":{"a":{"$ref":"#/definitions/s","maxLength":1}}})";
    CHECK(accepted(R"({"$schema":"http://json-schema.org/draft-07/schema#",)" + sibling, {R"({"a":"xyz"})"}) == bools{true});
    CHECK(accepted("{" + sibling, {R"({"a":"xyz"})", R"({"a":"x"})"}) == bools{false, true});
    // a mutual recursion, and a cycle of $refs that never reaches a schema (it validates everything)
    CHECK(accepted(R"({"$defs":{"a":{"type":"array","items":{"$ref":"#/$defs/b"}},"b":{"anyOf":[{"type":"null"},{"$ref":"#/$defs/a"}]}},
                     "$ref":"#/$defs/a"})", {"[null,[null,[]]]", "[1]"}) == bools{true, false});
    CHECK(accepted(R"({"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})", {"[1,{}]"}) ==
          bools{true});
}

TEST_CASE("json_schema: allOf merges, anyOf chooses, oneOf excludes what two branches match", "[constraint]")
{
    // allOf: properties from both, required from both, a property's schemas together
    const std::string all = R"({"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},
        {"properties":{"b":{"type":"integer"},"a":{"maxLength":1}},"required":["b"]}]})";
    CHECK(accepted(all, {R"({"a":"x","b":1})", R"({"a":"xy","b":1})", R"({"a":"x"})", R"({"b":1})"}) ==
          bools{true, false, false, false});
    // additionalProperties false in one branch forbids the other's properties: a required one leaves nothing
    CHECK_THROWS_WITH(json_schema_grammar(std::string(R"({"allOf":[{"required":["a"]},{"type":"object",
        "properties":{"b":{}},"additionalProperties":false}]})")), Contains("validates nothing"));
    CHECK(accepted(R"({"allOf":[{"properties":{"a":{}}},{"type":"object","properties":{"b":{}},"additionalProperties":false}]})",
                   {R"({"b":1})", R"({"a":1})"}) == bools{true, false});
    // strings of several patterns in one choice: one lexeme, their union (the others beside it)
    CHECK(accepted(R"({"anyOf":[{"type":"string","pattern":"^a+$","maxLength":3},{"type":"string","pattern":"^b+$","minLength":2},
        {"type":"integer"},{"type":"string","pattern":"^c$"}]})", {"\"aaa\"", "\"aaaa\"", "\"b\"", "\"bbbbb\"", "5", "\"c\"", "\"ab\""}) ==
          bools{true, false, false, true, true, true, false});
    // types intersect; bounds intersect
    CHECK(accepted(R"({"allOf":[{"type":["string","integer"]},{"type":["integer","null"]}]})", {"1", "\"a\"", "null"}) ==
          bools{true, false, false});
    CHECK(accepted(R"({"allOf":[{"type":"array","minItems":1},{"maxItems":2,"items":{"type":"integer"}}]})",
                   {"[]", "[1]", "[1,2]", "[1,2,3]", "[\"a\"]"}) == bools{false, true, true, false, false});
    // anyOf beside other keywords: each branch together with them
    const std::string any = R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],
        "anyOf":[{"properties":{"b":{"type":"null"}},"required":["b"]},{"properties":{"c":{"type":"boolean"}},"required":["c"]}]})";
    CHECK(accepted(any, {R"({"a":1,"b":null})", R"({"a":1,"c":true})", R"({"b":null})", R"({"a":1})"}) ==
          bools{true, true, false, false});
    // oneOf: by type, by a discriminating const, by a key one requires and the other forbids, by enum values
    CHECK(accepted(R"({"oneOf":[{"type":"string"},{"type":"integer"},{"type":"null"}]})", {"\"a\"", "1", "null", "true"}) ==
          bools{true, true, true, false});
    const std::string tagged = R"({"oneOf":[{"type":"object","properties":{"kind":{"const":"a"},"x":{"type":"integer"}},
        "required":["kind","x"]},{"type":"object","properties":{"kind":{"enum":["b","c"]}},"required":["kind"]}]})";
    CHECK(accepted(tagged, {R"({"kind":"a","x":1})", R"({"kind":"c"})", R"({"kind":"d"})", R"({"kind":"a"})"}) ==
          bools{true, true, false, false});
    CHECK(accepted(R"({"oneOf":[{"type":"object","required":["x"]},{"type":"object","properties":{"y":{}},"additionalProperties":false}]})",
                   {R"({"x":1})", R"({"y":1})", "{}"}) == bools{true, true, true});
    CHECK(accepted(R"({"oneOf":[{"enum":[1,2]},{"enum":["1",3]}]})", {"1", "\"1\"", "3", "4"}) ==
          bools{true, true, true, false});
    // branches that may both match: each branch and not the others, within the types both accept
    CHECK(accepted(R"({"properties":{"a":{"oneOf":[{"type":"object","required":["x"]},{"type":"object","required":["y"]}]}}})",
                   {R"({"a":{"x":1}})", R"({"a":{"y":1}})", R"({"a":{"x":1,"y":2}})", R"({"a":{}})", R"({"a":1})"}) ==
          bools{true, true, false, false, false});
    // numbers: an integer is both (1.0 too, from draft 6 on); one that is not is written without trailing zeros
    CHECK(accepted(R"({"oneOf":[{"type":"number"},{"type":"integer"},{"type":"null"}]})",
                   {"1.5", "-0.25", "1", "1.0", "0", "1.50", "null"}) == bools{true, true, false, false, false, false, true});
    // untyped object branches: a non-object matches both, so only objects; these are told apart by "k"
    const std::string untyped = R"({"oneOf":[{"properties":{"k":{"const":"a"}},"required":["k"],"additionalProperties":false},
        {"properties":{"k":{"const":"b"},"n":{}},"required":["k","n"]}]})";
    CHECK(accepted(untyped, {R"({"k":"a"})", R"({"k":"b","n":1})", "1", "null", R"({"k":"b"})"}) ==
          bools{true, true, false, false, false});
    // required sets: both present is neither
    const std::string shapes = R"({"type":"object","properties":{"r":{"type":"number"},"l":{"type":"number"},"w":{"type":"number"}},
        "oneOf":[{"required":["r"]},{"required":["l","w"]}]})";
    CHECK(accepted(shapes, {R"({"r":1})", R"({"l":1,"w":2})", R"({"r":1,"l":1,"w":1})", R"({"r":1,"l":1})", "{}"}) ==
          bools{true, true, false, true, false});
    // a closed branch with patternProperties takes the keys its patterns match: not told apart by a required one
    CHECK(accepted(R"({"oneOf":[{"required":["xa"]},{"patternProperties":{"^x":{}},"additionalProperties":false}]})",
                   {R"({"xa":1})", "{}", R"({"y":1})"}) == bools{false, true, false});
    // told apart without negations (twelve branches: their negations' product is past the limit): a required
    // key's patterns that no string matches both, or closed objects with no key in common, where {} matches
    // both of them (so an object of one needs a key) or fails one of them
    {
        std::string tagged_by_pattern = R"({"oneOf":[)", closed_apart = R"({"oneOf":[{"enum":["k0","k1"]})";
        for (int i = 0; i < 12; ++i)
        {
            const std::string k = "k" + std::to_string(i);
            tagged_by_pattern += std::string(i ? "," : "") + R"({"type":"object","properties":{"id":{"type":"string","pattern":"^)" + k +
                                 R"(/"},"a":{"type":"integer"},"b":{"type":"boolean"},"c":{"enum":[1,2]}},"required":["id"],"additionalProperties":false})";
            closed_apart += R"(,{"type":"object","additionalProperties":false,"properties":{")" + k +
                            R"(":{"additionalProperties":false,"properties":{"g":{"type":"boolean"}}}}})";
        }
        CHECK(accepted(tagged_by_pattern + "]}", {R"({"id":"k0/x","a":1})", R"({"id":"k11/","c":2})", R"({"id":"k12/"})", "{}"}) ==
              bools{true, true, false, false});
        CHECK(accepted(closed_apart + "]}", {R"({"k0":{}})", R"({"k11":{"g":true}})", "{}", R"({"k0":{},"k1":{}})", R"("k1")"}) ==
              bools{true, true, false, false, true});
    }
    CHECK(accepted(R"({"oneOf":[{"properties":{"a":{}},"required":["a"],"additionalProperties":false},
        {"properties":{"b":{}},"additionalProperties":false}]})", {"{}", R"({"a":1})", R"({"b":1})", R"({"a":1,"b":1})"}) ==
          bools{true, true, true, false});
    // a key one branch requires is there, so the other's properties hold for it too
    CHECK(accepted(R"({"oneOf":[{"properties":{"type":{"enum":["a","b"]}},"required":["value"]},
        {"properties":{"type":{"const":"c"}},"required":["type"]}]})",
                   {R"({"value":1})", R"({"type":"c"})", R"({"type":"a","value":1})", R"({"type":"c","value":1})", "{}",
                    R"({"type":"d"})", "1"}) == bools{true, true, true, true, false, false, false});
    // (draft 7: an enum beside $ref is ignored, so it tells nothing apart: {"k":"b"} matches both)
    CHECK(accepted(R"({"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"s":{"type":"string"}},
        "oneOf":[{"properties":{"k":{"$ref":"#/definitions/s","enum":["a"]}},"required":["k"]},{"properties":{"k":{"enum":["b"]}}}]})",
                   {R"({"k":"b"})", R"({"k":"c"})", "{}"}) == bools{false, true, true});
    // patterns tell strings apart, not other values
    CHECK(accepted(R"({"oneOf":[{"properties":{"id":{"pattern":"^a"}},"required":["id"]},{"properties":{"id":{"pattern":"^b"}},
        "required":["id"]}]})", {R"({"id":"a"})", R"({"id":"b"})", R"({"id":1})", R"({"id":"c"})"}) == bools{true, true, false, false});
    // its negation: no branch, or two
    CHECK(accepted(R"({"type":"integer","not":{"oneOf":[{"minimum":3},{"maximum":5}]}})", {"2", "3", "5", "6"}) ==
          bools{false, true, true, false});
    CHECK(accepted(R"({"type":"object","properties":{"a":{}},"required":["a"],
        "oneOf":[{"required":["a"]},{"properties":{"a":{"type":"string"}}}]})", {R"({"a":1})", R"({"a":"s"})"}) ==
          bools{true, false});
    {
        const std::string text = R"({"type":"object","properties":{"a":{"oneOf":[{"type":"integer","maximum":20},
            {"type":"number","minimum":3},{"enum":["x",4]}]},"b":{"type":"boolean"}},"required":["a"],
            "oneOf":[{"required":["b"]},{"properties":{"a":{"minimum":10}}}]})";
        const json schema = json::parse(text);
        constraint c = json_schema_constraint(small_index(), text);
        std::mt19937 pick(4);
        CHECK(validating_walks(c, schema, pick, 6, 20, 12, [](const constraint&) {}) > 100);
    }
    // enum and const keep the values every other keyword accepts
    CHECK(accepted(R"({"enum":["a","bb",1,null],"maxLength":1,"allOf":[{"not_a_keyword":0}]})",
                   {"\"a\"", "\"bb\"", "1", "null"}) == bools{true, false, true, true});
    CHECK(accepted(R"({"allOf":[{"enum":[1,2,3]},{"enum":[3,2,5]}],"const":2})", {"1", "2", "3"}) ==
          bools{false, true, false});
    // an object or array value: its keys in the order given, gaps between its tokens as anywhere
    CHECK(accepted(R"({"const":[1,{"a":[],"b":null}]})", {R"([1,{"a":[],"b":null}])", R"([1, {"a": [ ], "b": null} ])",
                                                          R"([1,{"a":[],"b":null} ,2])", R"([1,{"b":null,"a":[]}])"}) ==
          bools{true, true, false, false});
}

TEST_CASE("json_schema: other keys where additionalProperties allows them, and patterns and lengths together", "[constraint]")
{
    // by default (json_options::additional_properties), beside the properties (in any order) other
    // keys anywhere, never a listed one with another value; without it only the properties
    json_options others;
    const json_options closed = listed_keys();
    const std::string open = R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"boolean"}},"required":["b"]})";
    CHECK(accepted(open, {R"({"b":true})", R"({"x":[1],"a":1,"é":{},"b":false,"z":null})", R"({"a":"1","b":true})",
                          R"({"b":true,"a":1})", R"({"ab":1,"b":true})", R"({"x":1})", R"({"a\u0062":1,"b":true})"},
                   others) == bools{true, true, false, true, true, false, false});
    CHECK(accepted(open, {R"({"b":true})", R"({"x":1,"b":true})"}, closed) == bools{true, false});
    CHECK(accepted(R"({"additionalProperties":{"type":"null"}})", {R"({"x":null})", R"({"x":1})"}, closed) ==
          bools{true, false});
    // a name that is a prefix of another, the empty name: each keeps its own schema
    CHECK(accepted(R"({"properties":{"a":{"type":"integer"},"ab":{"type":"null"},"":{"type":"boolean"}}})",
                   {R"({"a":1,"ab":null,"":true})", R"({"ab":1})", R"({"abc":1,"a":2})", R"({"":1})", R"({"b":"x","":false})"},
                   others) == bools{true, false, true, false, true});
    // additionalProperties as a schema; false
    CHECK(accepted(R"({"properties":{"a":{}},"additionalProperties":{"type":"null"}})",
                   {R"({"a":1,"b":null})", R"({"b":1})", "{}"}, others) == bools{true, false, true});
    CHECK(accepted(R"({"properties":{"a":{}},"additionalProperties":false})", {R"({"a":1})", R"({"b":null})"}, others) ==
          bools{true, false});
    // allOf: a key one branch lists and the other does not takes the other's additionalProperties
    CHECK(accepted(R"({"allOf":[{"properties":{"a":{"type":"integer"}}},{"additionalProperties":{"type":"integer"}}]})",
                   {R"({"a":1,"q":2})", R"({"q":"x"})", R"({"a":"x"})"}, others) == bools{true, false, false});
    // brute force: every token the mask allows leads to a completion that validates, and no other does
    const std::string text = R"({"type":"object","properties":{"a":{"type":"string","pattern":"^x+$","maxLength":3}},
        "required":["a"],"additionalProperties":{"type":"integer"}})";
    const json schema = json::parse(text);
    constraint c = json_schema_constraint(small_index(), text, others);
    std::mt19937 pick(3);
    std::size_t others_read = 0;
    validating_walks(c, schema, pick, 8, 30, 20,
                     [&](const constraint& end) { others_read += json::parse(end.text() + end.completion()).size() - 1; });
    CHECK(others_read > 0);
    // a pattern with lengths (in code points), and two patterns, intersected
    const std::string code = R"({"type":"string","pattern":"^[a-zé]+$","minLength":2,"maxLength":3})";
    CHECK(accepted(code, {"\"ab\"", "\"éé\"", "\"abc\"", "\"a\"", "\"abcd\"", "\"A1\""}) ==
          bools{true, true, true, false, false, false});
    CHECK(accepted(R"({"allOf":[{"pattern":"^a"},{"pattern":"b$"}],"type":"string"})", {"\"ab\"", "\"axb\"", "\"a\"", "\"b\""}) ==
          bools{true, true, false, false});
    // word boundaries, where ECMAScript and Python's re agree (next to a character past ASCII, Python's \w may
    // hold: there \b holds for neither reading, and under not for either)
    CHECK(accepted(R"({"type":"string","pattern":"^https?://[a-z]+\\.[a-z]{2,6}\\b([-a-z/]*)$"})",
                   {"\"http://ab.com/x\"", "\"https://ab.comx\"", "\"http://ab.c\"", "\"http://ab.co-\""}) ==
          bools{true, true, false, true});
    CHECK(accepted(R"({"type":"string","pattern":"^a\\b"})", {"\"a\"", "\"a-\"", "\"ab\"", "\"a\u00e9\"", "\"aé\""}) ==
          bools{true, true, false, false, false});
    CHECK(accepted(R"({"type":"string","not":{"pattern":"\\bx"}})", {"\"ax\"", "\"x\"", "\"-x\"", "\"éx\"", "\"éax\""}) ==
          bools{true, false, false, false, true});
    // past 1000 code points, or a product past its limit, the grammar counts the pattern's code points
    const auto quoted = [](std::size_t n, char c) { return "\"" + std::string(n, c) + "\""; };
    CHECK(accepted(R"({"type":"string","pattern":"a","maxLength":5000})",
                   {"\"xa\"", "\"x\"", quoted(5000, 'a'), quoted(5001, 'a'), "\"" + std::string(4998, 'x') + "\u00e9a\""}) ==
          bools{true, false, true, false, true});
    CHECK_THROWS_WITH(json_schema_grammar(std::string(R"({"type":"string","pattern":"^(a{1000}b)*$","maxLength":5000})")),
                      Contains("counted, its 1001 states x 5001 lengths are past the limit"));
    CHECK_THROWS_WITH(json_schema_grammar(std::string(R"({"type":"string","pattern":"^(a{1000}b)*$","minLength":1,"maxLength":1000})")),
                      Contains("validates nothing"));
    {
        // ten words at most, 120 code points at most (Github_hard's o62061): 24,559 states as a product
        const std::string words = R"({"type":"string","pattern":"^(\\S+\\s+){0,9}\\S+$","maxLength":120})";
        std::string ten, eleven;
        for (int k = 0; k < 10; ++k)
        {
            ten += std::string(k > 0 ? " " : "") + "w\u00e9";
        }
        eleven = ten + " x";
        CHECK(accepted(words, {"\"a b\"", "\"a \\t b\"", "\" a\"", "\"a \"", "\"" + ten + "\"", "\"" + eleven + "\"",
                               quoted(120, 'x'), quoted(121, 'x'), "\"" + std::string(117, 'x') + " \u00e9\u00e9\"",
                               "\"" + std::string(117, 'x') + " \u00e9\u00e9\u00e9\""}) ==
              bools{true, false, false, false, true, false, true, false, true, false});
    }
    // ... and a class of ASCII characters repeated is counted by the grammar too, at any length
    CHECK(accepted(R"({"type":"string","pattern":"^[a-c ]+$","maxLength":1500})",
                   {"\"ab c\"", "\"abd\"", "\"\"", quoted(1500, 'a'), quoted(1501, 'a')}) == bools{true, false, false, true, false});
    CHECK(accepted(R"({"type":"string","pattern":"^[ab]*$","minLength":1200})", {quoted(1199, 'b'), quoted(1200, 'b')}) ==
          bools{false, true});
    CHECK_THROWS_WITH(json_schema_grammar(std::string(R"({"type":"string","pattern":"^a$","minLength":2})")),
                      Contains("validates nothing"));
    {
        // a product may reach 12,000 states, all of a schema's together 30,000; past them, counted
        std::string any = R"({"anyOf":[)";
        for (int n = 40; n < 52; ++n)
        {
            any += std::string(n > 40 ? "," : "") + R"({"type":"string","pattern":"^(\\S+\\s+){0,9}\\S+$","maxLength":)" +
                   std::to_string(n) + "}";
        }
        CHECK(accepted(any + "]}", {quoted(51, 'x'), quoted(52, 'x'), "\"a  b\""}) == bools{true, false, true});
    }
    // ... and after a few characters of other ASCII classes (winget's protocols)
    CHECK(accepted(R"({"type":"string","pattern":"^[a-z][-a-z0-9.+]*$","maxLength":2048})",
                   {"\"a-1\"", "\"1a\"", "\"\"", "\"a\"", "\"" + std::string(1, 'x') + std::string(2047, '+') + "\"",
                    "\"x" + std::string(2048, '+') + "\""}) == bools{true, false, false, true, true, false});
    CHECK(accepted(R"({"type":"string","pattern":"^[ab]1x*$","minLength":1002})", {"\"b1" + std::string(1000, 'x') + "\"",
                                                                                   "\"b1" + std::string(999, 'x') + "\""}) ==
          bools{true, false});
    // (counted: two strings of 1001 characters, so no three distinct ones)
    CHECK_THROWS_WITH(json_schema_grammar(std::string(R"({"type":"array","uniqueItems":true,"minItems":3,"items":{"type":"string",
        "pattern":"^[ab]x*$","minLength":1001,"maxLength":1001}})")), Contains("validates nothing"));
}

TEST_CASE("json_schema: keys in any order, the optional ones and other keys anywhere", "[constraint]")
{
    // each required key once in any order; optional and other keys before, between, after, and
    // again (validators keep the last value, which its schema accepted like the first)
    const std::string s = R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},
        "c":{"type":"null"}},"required":["a","b"]})";
    CHECK(accepted(s, {R"({"a":1,"b":"x"})", R"({"b":"x","a":1})", R"({"c":null,"b":"x","x":[],"a":1,"c":null})",
                       R"({"b":"x"})", R"({"a":1,"b":"x","a":2})", R"({"b":"x","a":"1"})", R"({"c":1,"a":1,"b":"x"})",
                       "{}", R"({"a":1,"b":"x",})"}) ==
          bools{true, true, true, false, false, false, false, false, false});
    CHECK(accepted(s, {R"({"c":null,"b":"x","a":1})", R"({"x":1,"a":1,"b":"x"})"}, listed_keys()) == bools{true, false});
    // maxProperties counts each member written (a key written twice twice: a subset)
    CHECK(accepted(R"({"type":"object","properties":{"a":{},"b":{}},"required":["b"],"maxProperties":2})",
                   {R"({"a":1,"b":2})", R"({"b":2,"x":1})", R"({"a":1,"x":1,"b":2})", R"({"a":1,"a":1,"b":2})", "{}"}) ==
          bools{true, true, false, false, false});
    // a minProperties the required keys meet, or of 1
    CHECK(accepted(R"({"type":"object","required":["a","b"],"minProperties":2})", {R"({"b":1,"a":2})", R"({"a":1})"}) ==
          bools{true, false});
    CHECK(accepted(R"({"type":"object","properties":{"a":{}},"minProperties":1})", {"{}", R"({"x":1})", R"({"a":1,"a":2})"}) ==
          bools{false, true, true});
    // 64 sets of required keys at most per object (in their order beyond): 6 in any order, 7 in order
    const auto required = [](int n) {
        std::string keys;
        for (int k = 0; k < n; ++k)
        {
            keys += (k ? ",\"k" : "\"k") + std::to_string(k) + "\"";
        }
        return R"({"type":"object","required":[)" + keys + "]}";
    };
    const auto text = [](std::vector<int> order) {
        std::string t = "{";
        for (const int k : order)
        {
            t += (t.size() > 1 ? ",\"k" : "\"k") + std::to_string(k) + "\":0";
        }
        return t + "}";
    };
    CHECK(accepted(required(6), {text({5, 4, 3, 2, 1, 0}), text({0, 1, 2, 3, 4})}) == bools{true, false});
    CHECK(accepted(required(7), {text({0, 1, 2, 3, 4, 5, 6}), text({6, 5, 4, 3, 2, 1, 0})}) == bools{true, false});
    // and 1,024 in all the objects of a grammar: 16 such objects, the 17th in order
    std::string seventeen = R"({"type":"object","properties":{)";
    for (int p = 0; p < 17; ++p)
    {
        seventeen += (p ? ",\"p" : "\"p") + std::to_string(p) + "\":" + required(6);
    }
    seventeen += "}}";
    const std::string reversed = text({5, 4, 3, 2, 1, 0});
    CHECK(accepted(seventeen, {"{\"p0\":" + reversed + "}", "{\"p15\":" + reversed + "}", "{\"p16\":" + reversed + "}",
                               "{\"p16\":" + text({0, 1, 2, 3, 4, 5}) + "}"}) == bools{true, true, false, true});
    // every allowed token's text completes to a valid value
    const std::string both = R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"enum":["red","green"]},
        "c":{"type":"array","items":{"type":"null"}}},"required":["a","b"],"additionalProperties":{"type":"boolean"}})";
    constraint c = json_schema_constraint(small_index(), both);
    std::mt19937 pick(19);
    CHECK(validating_walks(c, json::parse(both), pick, 8, 24, 16, [](const constraint&) {}) > 100);
}

TEST_CASE("json_schema: a member of a kind under not is the last of its key", "[constraint]")
{
    // an object with a key ^a whose value is not an integer: once such a member is written, no other
    // key that is not listed follows (the same key again would replace the value validators read)
    const std::string s = R"({"type":"object","not":{"patternProperties":{"^a":{"type":"integer"}}}})";
    CHECK(accepted(s, {R"({"a1":"x"})", R"({"a1":1,"a1":"x"})", R"({"b":1,"a1":"x"})", R"({"a1":"x","a1":1})",
                       R"({"a1":"x","b":2})", R"({"a1":1})"}) == bools{true, true, true, false, false, false});
    CHECK(accepted(R"({"type":"object","properties":{"p":{}},"not":{"additionalProperties":{"type":"integer"}}})",
                   {R"({"a":"x","p":1})", R"({"a":1,"a":"x","p":3})", R"({"a":"x","a":1})"}) == bools{true, true, false});
    // two members of two kinds each, whose keys (two characters with a and b, with c and d) are apart
    const std::string four = R"({"type":"object","propertyNames":{"pattern":"^..$"},"maxProperties":2,"allOf":[
        {"not":{"propertyNames":{"not":{"pattern":"a"}}}},{"not":{"propertyNames":{"not":{"pattern":"b"}}}},
        {"not":{"propertyNames":{"not":{"pattern":"c"}}}},{"not":{"propertyNames":{"not":{"pattern":"d"}}}}]})";
    CHECK(accepted(four, {R"({"ab":1,"cd":2})", R"({"ac":1,"bd":2})", R"({"ab":1})", R"({"ab":1,"ab":2})"}) ==
          bools{true, true, false, false});
    // two propertyNames that no key meets together: no key (an empty automaton matched nothing, read
    // past its end before; found by a hostile probe)
    CHECK(accepted(R"({"type":"object","properties":{"b":{}},"propertyNames":{"const":"b"},"allOf":[{"propertyNames":{"minLength":2}}]})",
                   {R"({"b":0})", "{}"}) == bools{false, true});
    CHECK(accepted(R"({"properties":{"a":{}},"propertyNames":false})", {R"({"a":0})", "{}", "1"}) == bools{false, true, true});
}

TEST_CASE("json_schema: patternProperties, by the patterns each key matches", "[constraint]")
{
    // a key takes the schemas of every pattern it matches (searched, as JSON Schema does) and of its property;
    // additionalProperties only where no pattern matches; keys a pattern matches are written without the option
    const std::string text = R"({"type":"object","properties":{"a":{"type":"string"},"x-a":{"maximum":5}},
        "patternProperties":{"^x-":{"type":"integer"},"y$":{"type":"number","minimum":2}},"additionalProperties":false})";
    CHECK(accepted(text, {R"({"x-b":1})", R"({"x-b":"s"})", R"({"a":"s","x-q":3})", R"({"zz":1})", R"({"x-y":3})",
                          R"({"x-y":1})", R"({"ay":2.5})", R"({"x-a":6})", R"({"x-a":4})", R"({"x-a":4.5})", R"({"x-y":2.5})"}) ==
          bools{true, false, true, false, true, false, true, false, true, false, false});
    // keys no pattern matches: by additionalProperties unless json_options::additional_properties is off
    json_options others;
    const std::string map = R"({"type":"object","patternProperties":{"^[a-z]+$":{"type":"string"}},
        "additionalProperties":{"type":"null"}})";
    CHECK(accepted(map, {R"({"abc":"x","d":"y"})", R"({"ABC":null})", R"({"abc":1})"}, listed_keys()) ==
          bools{true, false, false});
    CHECK(accepted(map, {R"({"abc":"x","D":null})", R"({"ABC":"x"})", R"({"abc":null})"}, others) == bools{true, false, false});
    // in allOf each branch's own: a key its branch's patterns miss takes that branch's additionalProperties
    CHECK(accepted(R"({"allOf":[{"patternProperties":{"^a":{"type":"integer"}},"additionalProperties":false},
                     {"patternProperties":{"b":{"minimum":3}}}]})", {R"({"ab":3})", R"({"ab":2})", R"({"a":"x"})", R"({"b":3})"}) ==
          bools{true, false, false, false});
    // enum and const values are checked by the same rules
    CHECK(accepted(R"({"enum":[{"x-a":1},{"x-a":"s"},{"b":"s"}],"patternProperties":{"^x":{"type":"integer"}},
                     "additionalProperties":{"type":"integer"}})", {R"({"x-a":1})", R"({"x-a":"s"})", R"({"b":"s"})"}) ==
          bools{true, false, false});
    // a required key the patterns serve; one additionalProperties false forbids
    CHECK(accepted(R"({"required":["x-1"],"patternProperties":{"^x-":{"type":"boolean"}},"additionalProperties":false})",
                   {R"({"x-1":true})", "{}", R"({"x-1":1})"}) == bools{true, false, false});
    CHECK_THROWS_WITH(json_schema_grammar(std::string(R"({"required":["y"],"patternProperties":{"^x-":{}},"additionalProperties":false})")),
                      Contains("required 'y' is not in properties and additionalProperties is false at /"));
    CHECK_THROWS_WITH(json_schema_grammar(std::string(R"({"patternProperties":{"(":{}}})")), Contains("pattern '(': regex:"));
    // under not: a member a pattern matches whose value breaks its schema; a member no property or pattern
    // lists whose value breaks additionalProperties (a listed one of the object, or another key)
    CHECK(accepted(R"({"type":"object","properties":{"ab":{},"b":{}},"not":{"patternProperties":{"^a":{"type":"integer"}}}})",
                   {"{}", R"({"ab":1})", R"({"ab":"x"})", R"({"b":"x"})"}) == bools{false, false, true, false});
    CHECK(accepted(R"({"type":"object","properties":{"a":{},"b":{}},"not":{"properties":{"a":{}},"additionalProperties":false}})",
                   {"{}", R"({"a":1})", R"({"b":1})", R"({"a":1,"b":2})"}) == bools{false, false, true, true});
    CHECK(accepted(R"({"type":"object","properties":{"a":{}},"not":{"properties":{"a":{}},"additionalProperties":{"type":"integer"}}})",
                   {"{}", R"({"a":"x"})", R"({"x":1})", R"({"x":"s"})", R"({"x":1,"y":"s"})"}, others) ==
          bools{false, false, false, true, true});
    CHECK(accepted(R"({"enum":[{"a":1},{"a":1,"b":2}],"not":{"properties":{"a":{}},"additionalProperties":false}})",
                   {R"({"a":1})", R"({"a":1,"b":2})"}) == bools{false, true});
    // so an overlapping oneOf of closed objects compiles: {"k":"a","n":1} breaks the first branch
    CHECK(accepted(R"({"oneOf":[{"properties":{"k":{"const":"a"}},"additionalProperties":false},
                     {"properties":{"k":{},"n":{}},"required":["n"]}]})",
                   {R"({"k":"a"})", R"({"n":1})", R"({"k":"a","n":1})", "{}", "1"}) == bools{true, true, true, true, false});
    // a class escape or '.' decides otherwise on other characters in validators (Python's re is Unicode): the
    // other keys are then ASCII, a listed key that is not is an error, and a not of such propertyNames too
    CHECK(accepted(R"({"patternProperties":{"^\\d+$":{"type":"integer"}},"additionalProperties":{"type":"string"}})",
                   {R"({"\u0663":"x"})", "{\"\xD9\xA3\":\"x\"}", R"({"3":1})", R"({"a":"x"})"}, others) ==
          bools{false, false, true, true});
    fails_with(R"({"properties":{"\u00e9":{}},"patternProperties":{"^\\w":{}}})", "a class escape or '.' on a key that is not ASCII");
    fails_with(R"({"type":"object","not":{"propertyNames":{"pattern":"^\\d+$"}}})", "unsupported keyword 'propertyNames' under not");
    // propertyNames: the keys' contents its schema accepts, listed ones left out; under not, a key it refuses
    CHECK(accepted(R"({"type":"object","propertyNames":{"pattern":"^[a-z]+$","maxLength":3},"additionalProperties":{"type":"integer"}})",
                   {"{}", R"({"ab":1})", R"({"abcd":1})", R"({"AB":1})", R"({"ab":"x"})"}, others) ==
          bools{true, true, false, false, false});
    CHECK(accepted(R"({"type":"object","propertyNames":{"anyOf":[{"const":"x"},{"pattern":"^y"}]},"additionalProperties":{"type":"null"}})",
                   {R"({"x":null})", R"({"yz":null})", R"({"z":null})", R"({"xy":null})"}) == bools{true, true, false, false});
    CHECK(accepted(R"({"type":"object","properties":{"a":{},"bb":{}},"propertyNames":{"maxLength":1}})", {R"({"a":1})", R"({"bb":1})"}) ==
          bools{true, false});
    CHECK(accepted(R"({"type":"object","properties":{"a":{},"bb":{}},"not":{"propertyNames":{"maxLength":1}}})",
                   {R"({"a":1})", R"({"bb":1})", "{}"}) == bools{false, true, false});
    CHECK(accepted(R"({"enum":[{"a":1},{"bb":1}],"propertyNames":{"maxLength":1}})", {R"({"a":1})", R"({"bb":1})"}) ==
          bools{true, false});
    fails_with(R"({"type":"object","required":["bb"],"propertyNames":{"maxLength":1}})", "the schema validates nothing");
    // two nots of a kind: a member for each (one key of each kind is written even without the option: asked for)
    CHECK(accepted(R"({"type":"object","propertyNames":{"pattern":"^(\\w\\d)+$"},"allOf":[{"not":{"propertyNames":{"not":{"const":"a4"}}}},
                     {"not":{"propertyNames":{"not":{"const":"b5"}}}}]})", {R"({"a4":1,"b5":true})", R"({"a4":1})", R"({"b5":1,"a4":2})"}) ==
          bools{true, false, true});
    // one member may be of several kinds: "b" is a key the first branch does not list and the key the not asks for
    CHECK(accepted(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"enum":["x",1]}},
                     "oneOf":[{"properties":{"a":{}},"additionalProperties":false},{"patternProperties":{"^b":{"type":"string"}}}],
                     "not":{"propertyNames":{"not":{"const":"b"}}}})", {R"({"b":1})", R"({"b":"x"})", R"({"a":1,"b":1})", R"({"a":1})"}) ==
          bools{false, true, false, false});
    // brute force: every token the mask allows leads to a completion that validates, and no other does
    const json schema = json::parse(text);
    constraint c = json_schema_constraint(small_index(), text);
    std::mt19937 pick(8);
    std::size_t patterned = 0;
    CHECK(validating_walks(c, schema, pick, 8, 24, 14, [&](const constraint& end) {
              const json value = json::parse(end.text() + end.completion());
              for (const auto& kv : value.items())
              {
                  patterned += kv.key() != "a" && kv.key() != "x-a" ? 1 : 0;
              }
          }) > 100);
    CHECK(patterned > 0);
    // and members of a kind: a key of the object that the not's schema does not list
    const std::string kind = R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"enum":["x",1]},"c":{"type":"null"}},
        "oneOf":[{"properties":{"a":{},"b":{}},"additionalProperties":false},{"patternProperties":{"^[bc]":{"type":"string"}}}]})";
    const json kind_schema = json::parse(kind);
    constraint k = json_schema_constraint(small_index(), kind);
    CHECK(validating_walks(k, kind_schema, pick, 8, 20, 12, [](const constraint&) {}) > 100);
}

TEST_CASE("json_schema: if, then and else, and dependencies", "[constraint]")
{
    // if and then, or not if and else (a missing branch holds for every value)
    const std::string parity = R"({"type":"integer","if":{"minimum":10},"then":{"multipleOf":2},"else":{"maximum":5}})";
    CHECK(accepted(parity, {"12", "13", "4", "7", "10"}) == bools{true, false, true, false, true});
    CHECK(accepted(R"({"type":"integer","if":{"minimum":10},"then":{"multipleOf":2}})", {"13", "7"}) == bools{false, true});
    CHECK(accepted(R"({"type":"integer","not":{"if":{"minimum":10},"then":{"multipleOf":2},"else":{"maximum":5}}})",
                   {"12", "13", "4", "7"}) == bools{false, true, false, true});
    CHECK(accepted(R"({"enum":[1,12,13,4],"if":{"minimum":10},"then":{"multipleOf":2}})", {"1", "12", "13", "4"}) ==
          bools{true, true, false, true});
    // the usual form: a property's value picks another's pattern
    const std::string postal = R"({"type":"object","properties":{"country":{"enum":["US","CA"]},"code":{"type":"string"}},
        "required":["country","code"],"if":{"properties":{"country":{"const":"US"}}},
        "then":{"properties":{"code":{"pattern":"^[0-9]{5}$"}}},"else":{"properties":{"code":{"pattern":"^[A-Z][0-9][A-Z]$"}}}})";
    CHECK(accepted(postal, {R"({"country":"US","code":"12345"})", R"({"country":"US","code":"A1B"})",
                            R"({"country":"CA","code":"A1B"})", R"({"country":"CA","code":"12345"})"}) ==
          bools{true, false, true, false});
    // twelve if/then on one discriminating key: 4,096 ways (each if and then, or not if), all but 13 proven
    // empty as they are formed (a key of two constant values, or required and absent)
    std::string chain = R"({"type":"object","properties":{"kind":{"type":"string"},"n":{}},"required":["kind"],"allOf":[)";
    for (int i = 0; i < 12; ++i)
    {
        chain += (i == 0 ? "" : ",") + std::string(R"({"if":{"properties":{"kind":{"const":"k)") + std::to_string(i) +
                 R"("}},"required":["kind"]},"then":{"properties":{"n":{"minimum":)" + std::to_string(i) + "}}}}";
    }
    chain += "]}";
    CHECK(accepted(chain, {R"({"kind":"k3","n":3})", R"({"kind":"k3","n":2})", R"({"n":11,"kind":"k11"})",
                           R"({"kind":"k11","n":10})", R"({"kind":"k","n":-5})", R"({"kind":"k0"})", R"({"n":1})"}) ==
          bools{true, false, true, false, true, true, false});
    // what the proof leaves alone: two constants of a key no one requires (objects without it), other types;
    // a property of a string's schema is not read (its bad type is no error there, as before)
    CHECK(accepted(R"({"type":"string","properties":{"a":{"type":"any"},"b":{"$ref":"#/nowhere"}}})", {"\"x\""}) ==
          bools{true});
    fails_with(R"({"anyOf":[{"enum":"x"},{"type":"string"}]})", "enum must be a list at /anyOf/0");
    CHECK(accepted(R"({"allOf":[{"properties":{"a":{"const":1}}},{"properties":{"a":{"const":2}}}]})",
                   {"{}", R"({"a":1})", R"({"a":2})", R"("x")"}) == bools{true, false, false, true});
    CHECK(accepted(R"({"required":["a"],"allOf":[{"properties":{"a":{"const":1}}},{"properties":{"a":{"enum":[2,1.0]}}}]})",
                   {R"({"a":1})", R"({"a":2})", "3"}) == bools{true, false, true});
    // dependencies: names a key requires, or a schema it brings; dependentRequired and dependentSchemas alike
    const std::string deps = R"({"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
        "properties":{"a":{},"b":{},"c":{}},"dependencies":{"a":["b"],"c":{"required":["a"]}}})";
    CHECK(accepted(deps, {"{}", R"({"a":1})", R"({"a":1,"b":2})", R"({"c":1})", R"({"a":1,"b":1,"c":1})", R"({"b":1})"}) ==
          bools{true, false, true, false, true, true});
    CHECK(accepted(R"({"type":"object","properties":{"a":{},"b":{}},"dependentRequired":{"a":["b"]}})",
                   {R"({"a":1})", R"({"a":1,"b":1})"}) == bools{false, true});
    CHECK(accepted(R"({"properties":{"a":{},"b":{"type":"integer"}},"dependentSchemas":{"a":{"properties":{"b":{"minimum":3}}}}})",
                   {R"({"a":1,"b":2})", R"({"a":1,"b":3})", R"({"b":2})", "7"}) == bools{false, true, true, true});
    CHECK(accepted(R"({"type":"object","properties":{"a":{},"b":{}},"not":{"dependentRequired":{"a":["b"]}}})",
                   {R"({"a":1})", R"({"a":1,"b":1})", "{}"}) == bools{true, false, false});
    // a keyword of another draft is unknown there, as validators have it (so its not is nothing, and a oneOf
    // branch with it alone holds for every value)
    const std::string d7 = R"({"$schema":"http://json-schema.org/draft-07/schema#",)";
    fails_with(R"({"type":"object","properties":{"a":{},"b":{}},"not":{"dependencies":{"a":["b"]}}})", "validates nothing");
    CHECK(accepted(R"({"type":"object","properties":{"a":{},"b":{}},"oneOf":[{"dependencies":{"a":["b"]}},{"required":["a"]}]})",
                   {R"({"a":1})", "{}"}) == bools{false, true});
    fails_with(d7 + R"("type":"object","properties":{"a":{},"b":{}},"not":{"dependentRequired":{"a":["b"]}}})", "validates nothing");
    CHECK(accepted(d7 + R"("type":"array","oneOf":[{"contains":{"type":"integer"},"maxContains":1},{"minItems":2}]})",
                   {"[1,2]", "[1]"}) == bools{false, true});
    CHECK(accepted(d7 + R"("type":"object","properties":{"a":{},"b":{}},"dependencies":{"a":["b"]}})", {R"({"a":1})", R"({"a":1,"b":1})"}) ==
          bools{false, true});
    fails_with(R"({"$schema":"http://json-schema.org/draft-06/schema#","not":{"if":{"type":"integer"},"then":{"minimum":3}}})",
               "validates nothing");
    CHECK(accepted(R"({"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"a":{}},
                     "oneOf":[{"propertyNames":{"maxLength":0}},{"required":["a"]}]})", {R"({"a":1})", "{}"}) == bools{false, true});
    fails_with(R"({"$schema":"http://json-schema.org/draft-06/schema#","type":"integer","not":{"exclusiveMinimum":true}})",
               "exclusiveMinimum must be a number (a boolean is draft 4's form");
    fails_with(R"({"dependentRequired":{"a":{"type":"string"}}})", "dependentRequired 'a' must be a list of names at /");
    fails_with(R"({"dependentSchemas":{"a":["b"]}})", "dependentSchemas 'a' must be a schema at /");
    // brute force: every token the mask allows leads to a completion that validates, and no other does
    const std::string text = R"({"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"n":{
        "type":"integer","if":{"maximum":3},"then":{"minimum":1},"else":{"multipleOf":5}},"u":{"type":"boolean"},"v":{"type":"null"}},
        "required":["n"],"dependencies":{"u":["v"]}})";
    const json schema = json::parse(text);
    constraint c = json_schema_constraint(small_index(), text);
    std::mt19937 pick(14);
    CHECK(validating_walks(c, schema, pick, 8, 24, 14, [](const constraint&) {}) > 100);
}

TEST_CASE("json_schema: contains, minContains and maxContains, and not items", "[constraint]")
{
    CHECK(accepted(R"({"type":"array","contains":{"type":"string"}})", {"[]", "[1]", "[\"a\"]", "[1,\"a\",2]", "[1,2,3]"}) ==
          bools{false, false, true, true, false});
    // counted: the others are items that break contains where maxContains bounds them
    const std::string counted = R"({"type":"array","items":{"type":"integer"},"contains":{"minimum":5},"minContains":2,
        "maxContains":3,"maxItems":5})";
    CHECK(accepted(counted, {"[5,6]", "[5]", "[1,5,2,6]", "[5,6,7,8]", "[1,2,5,6,7]", "[1,2,3,5,6,7]"}) ==
          bools{true, false, true, false, true, false});
    // negations: an item that breaks items; no item (fewer than minContains) or too many
    CHECK(accepted(R"({"type":"array","not":{"items":{"type":"integer"}}})", {"[]", "[1]", "[1,\"a\"]"}) ==
          bools{false, false, true});
    CHECK(accepted(R"({"type":"array","not":{"contains":{"type":"integer"}}})", {"[]", "[1]", "[\"a\"]"}) ==
          bools{true, false, true});
    CHECK(accepted(R"({"type":"array","items":{"type":"integer"},"not":{"contains":{"minimum":5},"maxContains":1}})",
                   {"[5]", "[5,6]", "[1]"}) == bools{false, true, true});
    CHECK(accepted(R"({"enum":[[1,2],[1],["a"]],"contains":{"type":"string"}})", {"[1,2]", "[\"a\"]"}) == bools{false, true});
    fails_with(R"({"type":"array","minItems":2,"contains":{"const":1},"maxContains":1,"items":{"enum":[1]}})",
               "the schema validates nothing");
    fails_with(R"({"type":"array","contains":{"const":1},"uniqueItems":true,"items":{"enum":[1,2]}})",
               "contains together with uniqueItems is not supported");
    // several contains count together: an item may satisfy more than one
    CHECK(accepted(R"({"type":"array","allOf":[{"contains":{"type":"string"}},{"contains":{"type":"integer"}}]})",
                   {"[]", "[\"a\"]", "[1,\"a\"]", "[\"a\",2,null]", "[1]"}) == bools{false, false, true, true, false});
    CHECK(accepted(R"({"type":"array","items":{"type":"integer"},"allOf":[{"contains":{"minimum":3}},{"contains":{"maximum":5},"maxContains":1}]})",
                   {"[4]", "[4,4]", "[3,9]", "[9,1]", "[9]", "[9,1,2]"}) == bools{true, false, true, true, false, false});
    // brute force: every token the mask allows leads to a completion that validates, and no other does
    const std::string text = R"({"type":"object","properties":{"a":{"type":"array","items":{"enum":[1,2,"red",null]},
        "contains":{"type":"string"},"maxContains":1,"maxItems":4},"b":{"type":"array","not":{"items":{"type":"integer"}},"maxItems":3}},
        "required":["a","b"]})";
    const json schema = json::parse(text);
    constraint c = json_schema_constraint(small_index(), text);
    std::mt19937 pick(15);
    CHECK(validating_walks(c, schema, pick, 8, 28, 16, [](const constraint&) {}) > 100);
}

TEST_CASE("json_schema: uniqueItems over strings", "[constraint]")
{
    // strings equal as decoded code points are one value, checked where an item ends
    const std::string plain = R"({"type":"array","uniqueItems":true,"items":{"type":"string"}})";
    CHECK(accepted(plain, {"[]", R"(["a","b"])", R"(["a","a"])", R"(["a","\u0061"])", R"(["\/","/"])", R"(["ab","a","b"])",
                           R"(["a", "b" ,"a"])", "[\"\\uD83D\\uDE00\",\"\xF0\x9F\x98\x80\"]", R"(["",""])"}) ==
          bools{true, true, false, false, false, true, false, false, false});
    // a pattern every state of which reads on, with minItems; beside a plain array in an anyOf
    CHECK(accepted(R"({"type":"array","uniqueItems":true,"minItems":2,"items":{"type":"string","pattern":"^[a-z]+$"}})",
                   {R"(["ab","abc"])", R"(["ab","ab"])", R"(["ab"])"}) == bools{true, false, false});
    CHECK(accepted(R"({"anyOf":[{"type":"array","uniqueItems":true,"items":{"type":"string"}},{"type":"array","maxItems":2}]})",
                   {R"(["a","a"])", R"(["a","a","a"])", R"(["a","b","c"])"}) == bools{true, false, true});
    // other items stay refused
    for (const char* items : {R"({"type":["string","null"]})", "{}", R"({"anyOf":[{"type":"string"},{"enum":["a",1]}]})"})
    {
        fails_with(std::string(R"({"type":"array","uniqueItems":true,"items":)") + items + "}",
                   "unsupported keyword 'uniqueItems' (only items of finite values: enum, const, boolean, null; strings; integers "
                   "under no numeric keyword; objects with an optional key of endless values, or other keys allowed; or closed objects of "
                   "required strings) at /");
    }
    // brute force on a small vocabulary ("\"\"", "\",", "\\u"...): the mask is what advance accepts,
    // every allowed token's text completes to a valid value, and the completions skip repeats
    std::mt19937 pick(21);
    for (const std::string& text :
         {std::string(R"({"type":"array","uniqueItems":true,"minItems":3,"items":{"type":"string"}})"),
          std::string(R"({"type":"object","properties":{"t":{"type":"array","uniqueItems":true,"minItems":2,"maxItems":4,
              "items":{"type":"string","pattern":"^[a-e]+$"}}},"required":["t"],"additionalProperties":false})"),
          // strings that run out: 13 of them, three at most 1 char long ("\u0061" spells one of those)
          std::string(R"({"type":"array","uniqueItems":true,"minItems":3,"items":{"type":"string","pattern":"^[a-c]{0,2}$"}})"),
          std::string(R"({"type":"array","uniqueItems":true,"minItems":2,"items":{"anyOf":[{"type":"string","maxLength":1},
              {"enum":["ab","abc"]}]}})"),
          // an enum of strings past 10 alone: marked, so in any order (all of them: the last one is the only way on)
          std::string(R"({"type":"array","uniqueItems":true,"minItems":11,"items":{"enum":["a","b","c","d","e","f","g","ab","ba",
              "abc","red"]}})")})
    {
        INFO(text);
        const json schema = json::parse(text);
        constraint c = json_schema_constraint(small_index(), text);
        CHECK(validating_walks(c, schema, pick, 6, 30, 20, [&](const constraint& end) {
                  CHECK(valid(json::parse(end.text() + end.completion()), schema, schema));
              }) > 200);
        // a budget's costs do not know the marks: refused
        CHECK_THROWS_WITH(c.set_budget(64), Contains("a budget over a grammar with distinct items"));
    }
    // check B's search goes as deep as an item is long (past 1000 characters: counted by the grammar)
    {
        const std::string x1099(1099, 'x');
        CHECK(accepted(R"({"type":"array","uniqueItems":true,"minItems":3,"items":{"type":"string","pattern":"^[ab]x*$",
            "minLength":1100,"maxLength":1101}})", {"[\"a" + x1099 + "\",\"b" + x1099 + "\",\"a" + x1099 + "x\"]",
                                                     "[\"a" + x1099 + "\",\"b" + x1099 + "\",\"a" + x1099 + "\"]"}) ==
              bools{true, false});
    }
    CHECK(accepted(R"({"type":"array","uniqueItems":true,"items":{"enum":["a","b","c","d","e","f","g","h","i","j","k"]}})",
                   {R"(["k","a"])", R"(["a","a"])", R"(["b","a","b"])", R"(["a","b","c","d","e","f","g","h","i","j","k"])"}) ==
          bools{true, false, false, true});
    // bounded strings: a byte after which an item can only repeat an earlier one is refused where it is read
    // (check B), and an array holds at most as many items as there are strings
    const auto read = [](const std::string& schema, const std::string& text) {
        matcher m(compile_grammar(json_schema_grammar(schema)));
        return m.feed(text);
    };
    const std::string one = R"({"type":"array","uniqueItems":true,"items":{"type":"string","maxLength":1}})";
    CHECK(read(one, R"(["a","a"])") == 6);
    CHECK(read(one, R"(["a","\u0061"])") == 11);  // (its last hex digit)
    CHECK(read(one, R"(["a","b"])") == 9);
    CHECK(read(one, R"(["a",""])") == 8);
    const std::string three = R"({"type":"array","uniqueItems":true,"items":{"type":"string","pattern":"^(ab|ac|b)$"}})";
    CHECK(read(three, R"(["ab","ac","b"])") == 15);
    CHECK(read(three, R"(["ab","ac","b",)") == 14);  // (three strings, three items)
    CHECK(read(three, R"(["ab","b","a)") == 12);    // ("ac" is left)
    CHECK(read(three, R"(["ab","ac","a)") == 12);   // (only "ab" and "ac" begin with a)
    CHECK(read(R"({"type":"array","uniqueItems":true,"items":{"type":"string","format":"date"}})",
               R"(["2024-02-29","2024-02-29"])") == 24);
    CHECK(accepted(three, {R"(["b","ac","ab"])", R"(["ab","ab"])"}) == bools{true, false});
    fails_with(R"({"type":"array","uniqueItems":true,"minItems":4,"items":{"type":"string","pattern":"^(ab|ac|b)$"}})",
               "the schema validates nothing");
    fails_with(R"({"type":"array","uniqueItems":true,"minItems":4,"items":{"anyOf":[{"type":"string","pattern":"^(ab|ac|b)$"},
        {"enum":["c"]}]}})",
               "uniqueItems with minItems 4 over strings of which 3 are known (branches not counted together) at /");
    {
        matcher m(compile_grammar(json_schema_grammar(std::string(R"({"type":"array","uniqueItems":true,"minItems":4,"items":{"type":"string","maxLength":1}})"))));
        m.feed(R"([" ","!",)");
        CHECK(m.completion() == R"("","#"])");
    }
    // a token that begins the array and repeats an item in it: read again though the array begins inside it
    const auto index = bytes_and({R"(:["a","a"])", R"(:["a","b"])", R"(["a","a"])", R"("a","a")"});
    constraint d = json_schema_constraint(index, std::string(R"({"type":"object","properties":{"t":{"type":"array",
        "uniqueItems":true,"items":{"type":"string"}}},"required":["t"],"additionalProperties":false})"));
    for (const char b : std::string(R"({"t")"))
    {
        d.advance(token_id(static_cast<unsigned char>(b)));
    }
    CHECK(d.mask().contains(index->vocab().find(R"(:["a","b"])")));
    CHECK(!d.mask().contains(index->vocab().find(R"(:["a","a"])")));
    CHECK(allowed_by_brute_force(d, [](token_id, const constraint&) {}).size() > 2);
    d.advance(token_id(':'));
    CHECK(!d.mask().contains(index->vocab().find(R"(["a","a"])")));
    d.advance(token_id('['));
    CHECK(!d.mask().contains(index->vocab().find(R"("a","a")")));
    CHECK(allowed_by_brute_force(d, [](token_id, const constraint&) {}).size() > 2);
    // generation: every text that ends with eos validates, repeats included in what the model favours
    const std::string tags = R"({"type":"array","uniqueItems":true,"minItems":4,"items":{"type":"string","minLength":1}})";
    const json schema = json::parse(tags);
    const constraint proto = json_schema_constraint(small_index(), tags);
    std::size_t ended = 0;
    for (std::uint64_t seed = 0; seed < 12; ++seed)
    {
        hash_model model{proto.vocab().size(), seed, {}};
        const generation g = constrained_run(proto, 80, false, model, seed);
        if (g.reason == stop_reason::eos)
        {
            const std::string text = proto.vocab().decode(g.tokens);
            INFO(text);
            CHECK(valid(json::parse(text), schema, schema));
            ++ended;
        }
    }
    CHECK(ended > 0);
}

TEST_CASE("json_schema: uniqueItems over objects that always have a new completion", "[constraint]")
{
    // an optional key of endless values can be written again at any gap (the last one counts), so an item
    // never runs out of new values: checked where it ends only, equal as values (key order, escapes, the
    // last of a key written twice)
    const std::string people = R"({"type":"array","uniqueItems":true,"items":{"type":"object","properties":{
        "name":{"type":"string"},"age":{"type":"integer","minimum":0}},"additionalProperties":false}})";
    CHECK(accepted(people, {R"([{"name":"a"},{"name":"b"}])", R"([{"name":"a"},{"name":"a"}])",
                            R"([{"name":"a","age":1},{"age":1,"name":"a"}])", R"([{"name":"a"},{"name":"\u0061"}])",
                            R"([{"name":"b","name":"a"},{"name":"a"}])", R"([{"name":"a"},{"name":"a","name":"c"}])",
                            R"([{},{}])", R"([{},{"age":0}])", R"([{"age":1},{"age":1, "name":"x"},{"name":"x","age":1}])"}) ==
          bools{true, false, false, false, false, true, false, true, false});
    const auto read = [](const std::string& schema, const std::string& text) {
        matcher m(compile_grammar(json_schema_grammar(schema)));
        return m.feed(text);
    };
    // refused at the brace that ends the repeat; the item goes on from there
    CHECK(read(people, R"([{"name":"a"},{"name":"a"}])") == 25);
    CHECK(read(people, R"([{"name":"a"},{"name":"b","name":"a"}])") == 36);
    // other keys allowed (json_options::additional_properties, the default): a fresh key makes a new value
    CHECK(accepted(R"({"type":"array","uniqueItems":true,"items":{"type":"object"}})",
                   {R"([{"k":1},{"k":1.0}])", R"([{"k":1},{"k":[1]}])", R"([{"k":{"a":true}},{"k":{"a":true}}])"}) ==
          bools{false, true, false});
    // an optional array of distinct endless strings has endless values too
    CHECK(accepted(R"({"type":"array","uniqueItems":true,"items":{"type":"object","properties":{"k":{"type":"string"},
        "tags":{"type":"array","uniqueItems":true,"items":{"type":"string"}}},"required":["k"],"additionalProperties":false}})",
                   {R"([{"k":"a"},{"k":"a"}])", R"([{"k":"a"},{"k":"a","tags":["x"]}])", R"([{"k":"a","tags":["x"]},{"tags":["x"],"k":"a"}])",
                    R"([{"k":"a","tags":["x","x"]}])"}) == bools{false, true, false, false});
    // objects that can run out (maxProperties, only finite values) stay an error (closed objects of strings: below)
    for (const char* items : {R"({"type":"object","maxProperties":2})",
                              R"({"type":"object","properties":{"b":{"type":"boolean"}},"additionalProperties":false})",
                              R"({"type":"object","properties":{"t":{"type":"array","uniqueItems":true,"items":{"type":"boolean"}}},
                                 "additionalProperties":false})"})
    {
        INFO(items);
        fails_with(std::string(R"({"type":"array","uniqueItems":true,"items":)") + items + "}",
                   "unsupported keyword 'uniqueItems' (only items of finite values: enum, const, boolean, null; strings; integers "
                   "under no numeric keyword; objects with an optional key of endless values, or other keys allowed; or closed objects of "
                   "required strings) at /");
    }
    // brute force on the small vocabulary ("{\"", "\"}", "},", "}]"...): the mask is what advance accepts and every
    // allowed token's text completes to a valid value; a distinct string array inside each distinct object
    // keeps its own check B (maxLength 1: three items run it out)
    std::mt19937 pick(5);
    for (const std::string text :
         {R"({"type":"array","uniqueItems":true,"minItems":3,"items":{"type":"object","properties":{"name":{"type":"string"},
              "age":{"type":"integer","minimum":0}},"additionalProperties":false}})",
          R"({"type":"array","uniqueItems":true,"minItems":2,"items":{"type":"object","properties":{"name":{"type":"array",
              "uniqueItems":true,"items":{"type":"string","maxLength":1}}},"required":["name"]}})"})
    {
        INFO(text);
        const json schema = json::parse(text);
        constraint c = json_schema_constraint(small_index(), text);
        CHECK(validating_walks(c, schema, pick, 4, 24, 16, [&](const constraint& end) {
                  CHECK(valid(json::parse(end.text() + end.completion()), schema, schema));
              }) > 100);
    }
    {
        matcher m(compile_grammar(json_schema_grammar(std::string(R"({"type":"array","uniqueItems":true,"minItems":2,
            "items":{"type":"object","properties":{"name":{"type":"array","uniqueItems":true,"items":{"type":"string",
            "maxLength":1}}},"required":["name"]}})"))));
        CHECK(m.feed(R"([{"name":["a","a"]}])") == 15);  // (check B inside an object item)
        m.pop(m.position());
        m.feed(R"([{"name":[]},)");
        CHECK(m.completion() == R"({"name":[],"":0}])");  // (from where the repeat is refused: another member)
    }
}

TEST_CASE("json_schema: uniqueItems over closed objects of required strings", "[constraint]")
{
    // every name required, each a string that can always read on: an item has a new completion until the quote
    // that ends its last member, which is refused where only an earlier item's end can follow; equal as values
    const std::string hashes = R"({"type":"array","uniqueItems":true,"items":{"type":"object","properties":{
        "value":{"type":"string"},"algorithm":{"type":"string","pattern":"^[a-z]+[0-9]*$"}},"required":["value","algorithm"],
        "additionalProperties":false}})";
    CHECK(accepted(hashes, {R"([{"value":"a","algorithm":"b"},{"value":"a","algorithm":"c"}])",
                            R"([{"value":"a","algorithm":"b"},{"algorithm":"b","value":"a"}])",
                            R"([{"value":"a","algorithm":"b"},{"value":"\u0061","algorithm":"b"}])",
                            R"([{"value":"a","algorithm":"b"}, { "value" : "a" ,"algorithm":"b" } ])",
                            R"([{"value":"ab","algorithm":"b"},{"value":"a","algorithm":"bb"}])",
                            R"([{"value":"a","algorithm":"b"},{"value":"a","algorithm":"b1"},{"value":"a","algorithm":"b"}])"}) ==
          bools{true, false, false, false, true, false});
    const auto read = [](const std::string& schema, const std::string& text) {
        matcher m(compile_grammar(json_schema_grammar(schema)));
        return m.feed(text);
    };
    for (const std::string text : {R"([{"value":"a","algorithm":"b"},{"value":"a","algorithm":"b"}])",
                                   R"([{"value":"a","algorithm":"b"},{"algorithm":"b","value":"a"}])",
                                   R"([{"value":"a","algorithm":"b"},{"algorithm":"b", "value":"\u0061"}])"})
    {
        INFO(text);
        CHECK(read(hashes, text) == text.rfind('"'));  // (the quote that ends the last member)
    }
    {
        matcher m(compile_grammar(json_schema_grammar(hashes)));
        m.feed(R"([{"value":"a","algorithm":"b"},{"algorithm":"b","value":"a)");
        const std::string done = m.text() + m.completion();
        CHECK(done.substr(m.text().size(), 2) != "\"}");
        CHECK(json::parse(done)[1] != json::parse(done)[0]);
    }
    // strings that can run out (an enum, maxLength, a pattern's last state), an optional name of few values, no
    // name with a value ({} alone: the key left out, bounded numbers being number_dfa's of at most 15 digits): an error
    for (const auto& [value, required] : {std::make_pair(R"({"enum":["a","b"]})", true),
                                          std::make_pair(R"({"type":"string","maxLength":3})", true),
                                          std::make_pair(R"({"type":"string","pattern":"^a+b$"})", true),
                                          std::make_pair(R"({"type":"integer","minimum":10000000000000000})", false),
                                          std::make_pair("false", false)})
    {
        INFO(value);
        fails_with(std::string(R"({"type":"array","uniqueItems":true,"items":{"type":"object","properties":{"k":)") + value +
                       (required ? R"(},"required":["k"],"additionalProperties":false}})" : R"(},"additionalProperties":false}})"),
                   "unsupported keyword 'uniqueItems'");
    }
    fails_with(R"({"type":"array","uniqueItems":true,"items":{"type":"object","properties":{"k":{"type":"string"},
        "b":{"type":"boolean"}},"required":["k"],"additionalProperties":false}})", "unsupported keyword 'uniqueItems'");
    fails_with(R"({"type":"array","uniqueItems":true,"items":{"type":"object","additionalProperties":false}})",
               "unsupported keyword 'uniqueItems'");
    {
        // other keys off (json_options): a required name that properties do not list takes any value
        json_options strict;
        strict.additional_properties = false;
        CHECK_THROWS_WITH(json_schema_grammar(std::string(R"({"type":"array","uniqueItems":true,"items":{"type":"object",
            "properties":{"a":{"type":"string"}},"required":["a","x"]}})"), strict), Contains("unsupported keyword 'uniqueItems'"));
    }
    // whitespace inside a name or a string is no gap: the search may write a second space there; at each point
    // of these texts the mask is what advance accepts
    const auto spaced = [](const char* name, const char* value) {
        return std::string(R"({"type":"array","uniqueItems":true,"items":{"type":"object","properties":{")") + name + "\":" + value +
               R"(},"required":[")" + name + R"("],"additionalProperties":false}})";
    };
    for (const auto& [schema, text] :
         {std::make_pair(spaced("a  b", R"({"type":"string"})"), std::string(R"([{"a  b":"x"},{"a  b":"y"}])")),
          std::make_pair(spaced("a", R"({"type":"string","pattern":"^ *$"})"), std::string(R"([{"a":""},{"a":" "}, {"a":"  "}])"))})
    {
        INFO(schema);
        CHECK(accepted(schema, {text}) == bools{true});
        constraint c = json_schema_constraint(small_index(), schema);
        for (const char b : text)
        {
            INFO(c.text());
            CHECK(!allowed_by_brute_force(c, [](token_id, const constraint&) {}).empty());
            c.advance(token_id(static_cast<unsigned char>(b)));  // (the small vocabulary's single bytes)
        }
    }
    // brute force on the small vocabulary: the mask is what advance accepts (check B refuses "\"}" and "\"" where
    // the item would repeat), and every allowed token's text completes to a valid value
    std::mt19937 pick(8);
    for (const std::string text :
         {R"({"type":"array","uniqueItems":true,"minItems":3,"items":{"type":"object","properties":{"name":{"type":"string"}},
              "required":["name"],"additionalProperties":false}})",
          R"({"type":"array","uniqueItems":true,"minItems":2,"items":{"type":"object","properties":{"name":{"type":"string"},
              "age":{"type":"string","pattern":"^[0-9]+$"}},"required":["name","age"],"additionalProperties":false}})"})
    {
        INFO(text);
        const json schema = json::parse(text);
        constraint c = json_schema_constraint(small_index(), text);
        CHECK(validating_walks(c, schema, pick, 4, 28, 18, [&](const constraint& end) {
                  CHECK(valid(json::parse(end.text() + end.completion()), schema, schema));
              }) > 100);
    }
    // a walk that writes an earlier item again token by token: the mask drops the quote where it would end it
    {
        const std::string text = R"({"type":"array","uniqueItems":true,"items":{"type":"object","properties":{"name":{"type":"string"}},
            "required":["name"],"additionalProperties":false}})";
        constraint c = json_schema_constraint(small_index(), text);
        const vocabulary& v = c.vocab();
        const auto id = [&](const std::string& t) {
            for (token_id i = 0; i < token_id(v.size()); ++i)
            {
                if (v.bytes(i) == t)
                {
                    return i;
                }
            }
            return token_id(-1);
        };
        for (const char* t : {"[{", "\"name\"", ":", "\"", "abc", "\"}", ",", "{\"", "name", "\":\"", "abc"})
        {
            c.advance(id(t));
        }
        const token_set mask = c.mask();
        CHECK(!mask.contains(id("\"")));
        CHECK(!mask.contains(id("\"}")));
        CHECK(!mask.contains(id("\"},")));
        CHECK(mask.contains(id("a")));
    }
}

TEST_CASE("json_schema: uniqueItems over integers", "[constraint]")
{
    // integers under no numeric keyword (a not's enum aside), equal as values (-0 is 0), checked where each ends
    const std::string ints = R"({"type":"array","uniqueItems":true,"items":{"type":"integer"}})";
    CHECK(accepted(ints, {"[1,2,3]", "[1,1]", "[0,-0]", "[12, 13 ,12]", "[-5,5]", "[]", "[7,70,700]"}) ==
          bools{true, false, false, false, true, true, true});
    CHECK(accepted(R"({"type":"array","uniqueItems":true,"items":{"type":"integer","not":{"enum":[0]}}})",
                   {"[1,2]", "[0]", "[3,3]"}) == bools{true, false, false});
    const auto read = [&](const std::string& text) {
        matcher m(compile_grammar(json_schema_grammar(ints)));
        return m.feed(text);
    };
    // refused where the repeat would end: the comma after 1 (it may still become 10), the 0 itself (it ends there)
    CHECK(read("[1,1,") == 4);
    CHECK(read("[0,0") == 3);
    CHECK(read("[0,-0") == 4);
    {
        // completion() past a repeat: a short way (the greedy step takes -1, which is one byte from the end in
        // the grammar without the mark, then searches: 11], where 2] is the shortest)
        matcher m(compile_grammar(json_schema_grammar(ints)));
        m.feed("[0,-1,-10,-");
        const std::string rest = m.completion();
        CHECK(rest.size() <= 3);
        CHECK(m.feed(rest) == rest.size());
        CHECK(m.complete());
    }
    // check B: past 5 digits an item may run out of new values (at most 15 digits); here every completion of
    // 12345678901234 is taken, so its last 4 is refused, and 1234567890123 may still end
    std::string taken = "[12345678901234";
    for (int d = 0; d <= 9; ++d)
    {
        taken += ",12345678901234" + std::to_string(d);
    }
    taken += ",1234567890123";
    CHECK(read(taken + "4") == taken.size());
    CHECK(read(taken + "5]") == taken.size() + 2);
    CHECK(read(taken + "]") == taken.size() + 1);
    // bounded integers (number_dfa's: maybe few values) and numbers with a fraction (an exponent of few values
    // is begun by a byte that ends no item) stay an error
    for (const char* items : {R"({"type":"integer","minimum":0})", R"({"type":"number"})", R"({"type":["integer","string"]})"})
    {
        INFO(items);
        fails_with(std::string(R"({"type":"array","uniqueItems":true,"items":)") + items + "}", "unsupported keyword 'uniqueItems'");
    }
    // brute force on the small vocabulary ("12", "-1", "000", "e+"...): the mask is what advance accepts and every
    // allowed token's text completes to a valid value
    std::mt19937 pick(7);
    const std::string text = R"({"type":"array","uniqueItems":true,"minItems":3,"items":{"type":"integer"}})";
    const json schema = json::parse(text);
    constraint c = json_schema_constraint(small_index(), text);
    CHECK(validating_walks(c, schema, pick, 4, 24, 16, [&](const constraint& end) {
              CHECK(valid(json::parse(end.text() + end.completion()), schema, schema));
          }) > 100);
}

TEST_CASE("json_schema: uniqueItems over finite items, minProperties and maxProperties", "[constraint]")
{
    // each value at most once, in any order; 1, 1.0 and true are one value (as some validators have them)
    CHECK(accepted(R"({"type":"array","uniqueItems":true,"items":{"enum":["a","b","c",1,1.0,true]}})",
                   {"[]", "[\"c\",\"a\",\"b\"]", "[\"a\",\"a\"]", "[1,true]", "[1,\"a\",1.0]", "[true,\"b\"]", "[1.0]"}) ==
          bools{true, true, false, false, false, true, true});
    CHECK(accepted(R"({"type":"array","uniqueItems":true,"minItems":2,"items":{"type":"boolean"}})",
                   {"[true,false]", "[false,true]", "[true]", "[true,true]"}) == bools{true, true, false, false});
    // past 10 values, in the list's order (a subset); an enum value that repeats an item is left out
    CHECK(accepted(R"({"type":"array","uniqueItems":true,"items":{"enum":[0,1,2,3,4,5,6,7,8,9,10,11]}})",
                   {"[0,1,11]", "[11,0]", "[3,3]", "[]", "[0,1,2,3,4,5,6,7,8,9,10,11]", "[0, 2 ,4]"}) ==
          bools{true, false, false, true, true, true});
    // one array per list of values and bounds, however many places read it (jscsrc's operators: six)
    const std::string ops = R"("$defs":{"ops":{"type":"array","uniqueItems":true,"items":{"enum":[0,1,2,3,4,5,6,7,8,9,10,11]}},
        "marked":{"type":"array","uniqueItems":true,"items":{"type":"string"}}})";
    const std::size_t once = json_schema_grammar(R"({"properties":{"a":{"$ref":"#/$defs/ops"},"m":{"$ref":"#/$defs/marked"}},)" + ops + "}").rules();
    const std::size_t twice = json_schema_grammar(R"({"properties":{"a":{"$ref":"#/$defs/ops"},"m":{"$ref":"#/$defs/marked"},
        "b":{"allOf":[{"$ref":"#/$defs/ops"},{"title":"b"}]},"n":{"allOf":[{"$ref":"#/$defs/marked"},{"title":"n"}]}},)" + ops + "}").rules();
    CHECK(twice <= once + 4);  // (a schema rule or two for each new conjunction; the arrays' rules, 13 and 2, once)
    // (the count is kept where it still matters: a maxItems below the values' number)
    CHECK(accepted(R"({"type":"array","uniqueItems":true,"minItems":2,"maxItems":3,"items":{"enum":[0,1,2,3,4,5,6,7,8,9,10,11]}})",
                   {"[0]", "[0,5]", "[0,5,7]", "[0,5,7,9]", "[10,11]"}) == bools{false, true, true, false, true});
    // (with minItems: a late first value leaves too few after it, and that way is left out, not a dead rule)
    CHECK(accepted(R"({"type":"array","uniqueItems":true,"minItems":3,"items":{"enum":[0,1,2,3,4,5,6,7,8,9,10,11]}})",
                   {"[0,1,2]", "[9,10,11]", "[10,11]"}) == bools{true, true, false});
    CHECK(accepted(R"({"enum":[[1,2],[1,1],[true,1]],"uniqueItems":true})", {"[1,2]", "[1,1]", "[true,1]"}) ==
          bools{true, false, false});
    CHECK(accepted(R"({"type":"array","uniqueItems":true,"maxItems":1})", {"[\"x\"]", "[]"}) == bools{true, true});
    fails_with(R"({"type":"array","uniqueItems":true,"minItems":3,"items":{"enum":[1,2]}})", "the schema validates nothing");
    // members counted: each written; a minimum above 1 counts other keys too, each a new one (a key written twice
    // is one key: grammar::distinct_keys refuses it again, decoded)
    const json_options others;
    const std::string two = R"({"type":"object","properties":{"a":{},"b":{},"c":{}},"minProperties":2,"maxProperties":2})";
    CHECK(accepted(two, {R"({"a":1,"b":2})", R"({"a":1})", R"({"a":1,"b":2,"c":3})", R"({"b":1,"c":2})", "{}"}) ==
          bools{true, false, false, true, false});
    CHECK(accepted(R"({"type":"object","properties":{"a":{},"b":{}},"minProperties":1,"maxProperties":2})",
                   {"{}", R"({"x":1})", R"({"a":1,"x":1})", R"({"a":1,"b":2,"x":1})"}, others) == bools{false, true, true, false});
    CHECK(accepted(R"({"type":"object","additionalProperties":{"type":"string"},"minProperties":1})",
                   {"{}", R"({"a":"x"})", R"({"a":"x","b":"y"})"}) == bools{false, true, true});
    CHECK(accepted(R"({"type":"object","properties":{"a":{},"b":{}},"minProperties":2,"maxProperties":3})",
                   {R"({"a":1,"x":1})", R"({"a":1,"x":1,"b":2})", R"({"a":1,"x":1,"b":2,"y":3})", R"({"x":1,"x":2})"}, others) ==
          bools{true, true, false, false});
    CHECK(accepted(R"({"type":"object","additionalProperties":{"type":"string"},"minProperties":2})",
                   {R"({"a":"x","b":"y"})", R"({"a":"x","a":"y"})", R"({"a":"x","\u0061":"y"})", R"({"a":"x","b":1})",
                    R"({"a":"x","ab":"y","b":"z"})"}) == bools{true, false, false, false, true});
    // other keys that are a few (^[a-c]$ beside additionalProperties false) are listed then: each counts once
    const std::string few = R"({"type":"object","patternProperties":{"^[a-c]$":{"type":"integer"}},"additionalProperties":false,
        "minProperties":2})";
    CHECK(accepted(few, {R"({"a":1,"c":2})", R"({"b":1})", R"({"a":1,"a":2})", R"({"a":1,"b":2,"c":3})", R"({"a":1,"d":2})",
                         R"({"a":"x","b":1})"}) == bools{true, false, false, true, false, false});
    // (other keys still count toward a minProperties of 1 alone)
    CHECK(accepted(R"({"type":"object","properties":{"x":{}},"patternProperties":{"^[ab]$":{}},"minProperties":3})",
                   {R"({"x":1,"a":2,"b":3})", R"({"x":1,"q":2,"a":3})", R"({"a":1,"b":2})", R"({"q":1,"a":2,"q":3})"}, others) ==
          bools{true, true, false, false});
    CHECK(accepted(R"({"type":"object","patternProperties":{"^[a-c]+$":{}},"additionalProperties":false,"minProperties":2})",
                   {R"({"a":1,"ab":2})", R"({"a":1,"a":2})", R"({"a":1,"d":2})"}) == bools{true, false, false});
    // a key of a kind (a not of propertyNames): its keys are a few, any value; written plain, it is of the kind too
    const std::string kind = R"({"type":"object","not":{"propertyNames":{"not":{"enum":["p","q"]}}},"minProperties":2})";
    CHECK(accepted(kind, {R"({"p":1,"x":2})", R"({"p":1,"p":2})", R"({"x":1,"y":2})", R"({"x":1,"q":0})", R"({"p":1,"q":2})"}) ==
          bools{true, false, false, true, true});
    CHECK(accepted(R"({"type":"object","not":{"patternProperties":{"^[pq]$":{"type":"string"}}},"minProperties":2})",
                   {R"({"p":1,"x":2})", R"({"p":"s","x":2})", R"({"x":2,"q":null})"}) == bools{true, false, true});
    // finitely many other keys, too many to list (676), may run out where another member is needed
    fails_with(R"({"type":"object","patternProperties":{"^[a-z]{2}$":{}},"additionalProperties":false,"minProperties":2})",
               "minProperties 2 beside keys the schema does not list, some of them finitely many");
    fails_with(R"({"type":"object","properties":{"a":{},"b":{}},"required":["a","b"],"maxProperties":1})", "validates nothing");
    CHECK(accepted(R"({"type":"object","properties":{"a":{},"b":{}},"required":["a"],"not":{"maxProperties":1}})",
                   {R"({"a":1})", R"({"a":1,"b":2})"}) == bools{false, true});
    CHECK(accepted(R"({"enum":[{},{"a":1}],"minProperties":1})", {"{}", R"({"a":1})"}) == bools{false, true});
    // brute force: every token the mask allows leads to a completion that validates, and no other does
    {
        // other keys counted, each new: the masks never offer a key again, nor a way that needs one
        const std::string keys = R"({"type":"object","properties":{"name":{"type":"string"}},"additionalProperties":
            {"type":"integer"},"not":{"propertyNames":{"not":{"enum":["a","abc"]}}},"minProperties":3,"maxProperties":4})";
        constraint k = json_schema_constraint(small_index(), keys);
        std::mt19937 walk(5);
        CHECK(validating_walks(k, json::parse(keys), walk, 8, 30, 18, [](const constraint&) {}) > 100);
    }
    const std::string text = R"({"type":"object","properties":{"t":{"type":"array","uniqueItems":true,"maxItems":3,
        "items":{"enum":["red","green",12,null]}},"u":{"type":"boolean"},"v":{"type":"null"},"w":{"type":"integer"}},
        "minProperties":2,"maxProperties":3})";
    const json schema = json::parse(text);
    constraint c = json_schema_constraint(small_index(), text);
    std::mt19937 pick(12);
    CHECK(validating_walks(c, schema, pick, 8, 30, 18, [](const constraint&) {}) > 100);
}

TEST_CASE("json_schema: annotations and unknown keywords are ignored, and strict refuses unknown ones", "[constraint]")
{
    const std::string s = R"({"type":"object","title":"t","description":"d","examples":[{}],"default":{},
        "readOnly":true,"deprecated":false,"$comment":"c","x-kubernetes-kind":"k","readonly":true,"example":1,
        "properties":{"a":{"type":"integer","format":"int32","x-order":1}}})";
    CHECK(accepted(s, {R"({"a":1})", R"({"a":"1"})"}) == bools{true, false});
    json_options strict;
    strict.strict = true;
    CHECK_THROWS_WITH(json_schema_grammar(s, strict), Contains("unknown keyword 'x-kubernetes-kind' (strict) at /"));
    CHECK(accepted(R"({"type":"integer","title":"t","format":"int64"})", {"1"}, strict) == bools{true});
    // false beside optional properties and items leaves them out; 3.0 is an integer
    CHECK(accepted(R"({"properties":{"a":false,"b":{"type":"null"}}})", {R"({"b":null})", R"({"a":1})"}) ==
          bools{true, false});
    CHECK(accepted(R"({"type":"array","items":false})", {"[]", "[1]"}) == bools{true, false});
    CHECK(accepted(R"({"type":"string","minLength":2.0})", {"\"ab\"", "\"a\""}) == bools{true, false});
}

TEST_CASE("json_schema: no limit on properties or on the length of a value", "[constraint]")
{
    // the grammar orders the properties: 100 of them compile, and any subset in order is allowed
    std::string props;
    for (int i = 0; i < 100; ++i)
    {
        props += std::string(i == 0 ? "" : ",") + "\"k" + std::to_string(i) + "\":{\"type\":\"integer\"}";
    }
    constraint c = make("{\"type\":\"object\",\"properties\":{" + props + "},\"required\":[\"k99\"]}");
    CHECK(c.completion() == R"({"k99":0})");
    const auto& v = c.vocab();
    for (const char ch : std::string(R"({"k3":1,"k98":2,"k99":3})"))
    {
        c.advance(v.find(std::string(1, ch)));
    }
    CHECK(c.complete());
    // a 5000-byte enum value is generated exactly
    const std::string big(5000, 'x');
    constraint e = make(R"({"enum":[")" + big + R"("]})");
    CHECK(e.completion() == "\"" + big + "\"");
}

TEST_CASE("json: any JSON value, and whitespace bounded", "[constraint]")
{
    const auto index = small_index();
    const auto& v = index->vocab();
    constraint c = json_constraint(index);
    for (const char* piece : {"[{", "\"", "a", "\":", " ", " ", "nu", "l", "l", "}]"})
    {
        c.advance(v.find(piece));
    }
    CHECK(c.complete());
    CHECK(json::parse(c.text()) == json::parse(R"([{"a":null}])"));
    constraint d = json_constraint(index);
    d.advance(v.find("["));
    d.advance(v.find(" "));
    d.advance(v.find(" "));
    CHECK_FALSE(d.mask().contains(v.find(" ")));  // two bytes of whitespace in a gap at most
}

TEST_CASE("generate: stop strings, split across tokens", "[constraint][generate]")
{
    const auto index = small_index();
    const auto& v = index->vocab();
    // a model that spells "xxENDyy" one byte at a time, then "abc"
    const std::string script = "xxENDyy";
    std::vector<token_id> spelled;
    for (const char ch : script)
    {
        spelled.push_back(v.find(std::string(1, ch)));
    }
    auto model = [&](token_span prefix) {
        xt::xtensor<float, 1> r = xt::zeros<float>({v.size()});
        r(std::size_t(prefix.size() < spelled.size() ? spelled[prefix.size()] : v.find("abc"))) = 50.0f;
        return r;
    };
    chain greedy_chain{temperature{0.0}};
    philox4x32 rng(1);
    generate_options o;
    o.stop_strings = {"END"};
    o.vocab = &v;
    o.max_tokens = 20;
    const generation g = generate(model, {}, greedy_chain, o, rng);
    CHECK(g.reason == stop_reason::stop_sequence);
    CHECK(g.tokens.size() == 5);  // x x E N D
    CHECK(g.stop_at == 2);
    CHECK(g.text == "xx");
    // a stop string inside one token's bytes
    o.stop_strings = {"Dyy"};
    const generation h = generate(model, {}, greedy_chain, o, rng);
    CHECK(h.tokens.size() == 7);
    CHECK(h.stop_at == 4);
    o.stop_strings = {"ca"};  // spans "abc" + "abc"
    const generation k = generate(model, {}, greedy_chain, o, rng);
    CHECK(k.tokens.size() == 9);
    CHECK(k.stop_at == 9);
    o.vocab = nullptr;
    CHECK_THROWS_WITH(generate(model, {}, greedy_chain, o, rng), Contains("stop strings need a vocabulary"));
    o.vocab = &v;
    o.stop_strings = {""};
    CHECK_THROWS_WITH(generate(model, {}, greedy_chain, o, rng), Contains("generate: stop string 0 is empty"));
    // a short stop string inside text written before min_tokens allowed stopping is not new
    o.stop_strings = {"x", "zzzzzzz"};
    o.min_tokens = 2;
    const generation m = generate(model, {}, greedy_chain, o, rng);
    CHECK(m.reason == stop_reason::max_tokens);
    // a budget needs every byte to be a token
    auto words_only = std::make_shared<const vocabulary_index>(std::make_shared<const vocabulary>(
        std::vector<std::string>{"{", "}", "\"", "a", ":", ""}, std::vector<token_id>{5}));
    constraint j = json_constraint(words_only);
    CHECK_THROWS_WITH(j.set_budget(10), Contains("a budget needs every single byte to be a token"));
}

namespace
{
    std::shared_ptr<const vocabulary_index> gpt2_index()
    {
        static const auto index = std::make_shared<const vocabulary_index>(
            std::make_shared<const vocabulary>(load_gpt2_vocabulary(XSAMPLER_GPT2_DIR)));
        return index;
    }

    /// A cheap model over a real vocabulary: a fixed random row, rotated by
    /// an amount that depends on the step and the last token.
    struct rotating_model
    {
        std::vector<float> base;
        std::uint64_t seed;
        xt::xtensor<float, 1> row;

        rotating_model(std::size_t vocab, std::uint64_t s) : base(vocab), seed(s)
        {
            philox4x32 rng(s, 3);
            for (auto& x : base)
            {
                x = float(normal(3.0, rng));
            }
        }
        xt::xtensor<float, 1>& operator()(token_span prefix)
        {
            const std::size_t n = base.size();
            const std::size_t shift =
                (prefix.size() * 7919 + (prefix.empty() ? 0 : std::size_t(prefix[prefix.size() - 1])) * 104729) % n;
            row.resize({n});
            std::copy(base.begin() + std::ptrdiff_t(shift), base.end(), row.begin());
            std::copy(base.begin(), base.begin() + std::ptrdiff_t(shift), row.begin() + std::ptrdiff_t(n - shift));
            return row;
        }
    };

    std::string read_file(const std::string& path)
    {
        std::ifstream in(path);
        std::stringstream s;
        s << in.rdbuf();
        return s.str();
    }
}

TEST_CASE("constraint: GPT-2's vocabulary: the demo schema's generations parse and validate", "[constraint][gpt2]")
{
    const auto index = gpt2_index();
    const auto& v = index->vocab();
    const std::string text = read_file(XSAMPLER_DEMO_SCHEMA);
    const json schema = json::parse(text);
    const constraint proto = json_schema_constraint(index, text);
    const std::size_t least = proto.shortest_completion();
    CHECK(least <= 17);  // {" age ": 0 ," member ": true ," name ":" "} eos, in GPT-2's tokens (keys in any order)
    std::size_t eos_ends = 0;
    for (std::uint64_t seed = 0; seed < 100; ++seed)
    {
        const bool budgeted = seed % 2 == 0;
        rotating_model model(v.size(), seed);
        const generation g = constrained_run(proto, budgeted ? least + seed % 40 : 64, budgeted, model, seed, top_k{40},
                                             top_p{0.95}, temperature{0.9});
        const std::string out = v.decode(g.tokens);
        INFO("seed " << seed << ": " << out);
        if (g.reason == stop_reason::eos)
        {
            ++eos_ends;
            REQUIRE(valid(json::parse(out), schema, schema));
        }
        else
        {
            REQUIRE(!budgeted);
        }
    }
    CHECK(eos_ends >= 50);
    // any JSON value
    const constraint any = json_constraint(index);
    for (std::uint64_t seed = 0; seed < 60; ++seed)
    {
        rotating_model model(v.size(), seed + 1000);
        const generation g = constrained_run(any, 24, true, model, seed, temperature{1.0});
        INFO("seed " << seed << ": " << v.decode(g.tokens));
        REQUIRE(g.reason == stop_reason::eos);
        CHECK_NOTHROW(json::parse(v.decode(g.tokens)));
    }
}

TEST_CASE("vocabulary_index: later_bytes marks the tokens with such a byte past their first, cached", "[constraint]")
{
    const std::vector<std::string> tokens = {"ab", "a\"", "\"", "\"a", "x\"}", "b\"c", "ba", "\"\"", ""};
    const auto v = std::make_shared<const vocabulary>(tokens, std::vector<token_id>{8});
    const vocabulary_index ix(v);
    std::bitset<256> quote;
    quote['"'] = true;
    const auto later = ix.later_bytes(quote);
    std::vector<token_id> marked;
    for (token_id t = 0; t < token_id(tokens.size()); ++t)
    {
        if (((*later)[std::size_t(t) / 64] >> (t % 64) & 1) != 0)
        {
            marked.push_back(t);
        }
    }
    CHECK(marked == std::vector<token_id>{1, 4, 5, 7});  // a", x"}, b"c, "" (not ", "a, nor eos)
    CHECK(ix.later_bytes(quote) == later);
    std::bitset<256> none;
    const auto nothing = ix.later_bytes(none);
    CHECK(std::all_of(nothing->begin(), nothing->end(), [](std::uint64_t w) { return w == 0; }));
}

TEST_CASE("vocabulary_index: walk_region keeps the tokens that stay in a region and lists where it is left", "[constraint]")
{
    const std::vector<std::string> tokens = {"ab", "a\"", "\\n", "\\x", "\"", "A", "a\\", "b\"c", "ba", ""};
    const auto v = std::make_shared<const vocabulary>(tokens, std::vector<token_id>{9});
    const vocabulary_index ix(v);
    // state 0: a-z stay, '"' leaves, '\' to state 1; state 1: 'n' back to 0; every other byte dies
    byte_region r;
    using run = byte_region::run;
    r.runs = {run{0x21, byte_region::dead}, run{0x22, byte_region::exit}, run{0x5B, byte_region::dead},
              run{0x5C, 1},                 run{0x60, byte_region::dead}, run{0x7A, 0},
              run{0xFF, byte_region::dead}, run{0x6D, byte_region::dead}, run{0x6E, 0},
              run{0xFF, byte_region::dead}};
    r.begin = {0, 7, 10};
    const auto walked = ix.walk_region(r);
    std::vector<token_id> inside;
    for (token_id t = 0; t < token_id(v->size()); ++t)
    {
        if (walked->inside[std::size_t(t) / 64] >> (t % 64) & 1)
        {
            inside.push_back(t);
        }
    }
    CHECK(inside == std::vector<token_id>{0, 2, 6, 8});  // ab, \n, a\ (inside an escape), ba
    // where '"' is read in state 0, in preorder: at the root, after "a", after "b"
    REQUIRE(walked->exits.size() == 3);
    const std::vector<std::string> before = {"", "a", "b"};
    for (std::size_t k = 0; k < 3; ++k)
    {
        const auto node = walked->exits[k].node;
        CHECK(ix.byte(node) == '"');
        CHECK(walked->exits[k].from == 0);
        CHECK(ix.depth(node) == before[k].size() + 1);
        if (!before[k].empty())
        {
            CHECK(ix.byte(ix.parent(node)) == static_cast<unsigned char>(before[k][0]));
        }
    }
    // the same shape again is the same walk, from the index's cache
    CHECK(ix.walk_region(r) == walked);
    // counted: a-z and \n each end an iteration (back to state 0); the count each token needs
    byte_region counted = r;
    counted.start = 0;
    counted.runs[5].to = byte_region::end;
    counted.runs[8].to = byte_region::end;
    const auto iterations = ix.walk_region(counted);
    CHECK(iterations != walked);  // another shape
    CHECK(iterations->inside == walked->inside);
    CHECK(iterations->need == std::vector<std::uint16_t>{2, 0xFFFF, 1, 0xFFFF, 0xFFFF, 0xFFFF, 2, 0xFFFF, 2, 0xFFFF});
    CHECK(iterations->most == 2);
    REQUIRE(iterations->exits.size() == 3);
    CHECK(iterations->exits[0].ends == 0);  // '"' first
    CHECK(iterations->exits[1].ends == 1);  // after "a"
    CHECK(iterations->exits[2].ends == 1);  // after "b"
    byte_region no_start = counted;
    no_start.start = -1;  // an iteration's end with nowhere to go back to
    CHECK_THROWS_WITH(ix.walk_region(no_start), Contains("walk_region: state 0"));
    byte_region bad = r;
    bad.runs[6].last = 0xFE;  // state 0's runs stop short of byte 255
    CHECK_THROWS_WITH(ix.walk_region(bad), Contains("walk_region: state 0"));
    CHECK_THROWS_WITH(ix.walk_region(byte_region{}), Contains("walk_region: a region needs states"));
    CHECK(ix.regions_cached() == 2);
    {
        // exits from a state other than the first, and the state each token inside ends in
        const auto v2 = std::make_shared<const vocabulary>(
            std::vector<std::string>{"a\\", "\\\"", "a\\\"", "\\n\"", "aa", ""}, std::vector<token_id>{5});
        const vocabulary_index ix2(v2);
        // state 0: 'a' stays, '\' to state 1, '"' leaves; state 1: 'n' back to 0, '"' leaves; others die
        byte_region e;
        e.runs = {run{0x21, byte_region::dead}, run{0x22, byte_region::exit}, run{0x5B, byte_region::dead},
                  run{0x5C, 1},                 run{0x60, byte_region::dead}, run{0x61, 0},
                  run{0xFF, byte_region::dead}, run{0x21, byte_region::dead}, run{0x22, byte_region::exit},
                  run{0x6D, byte_region::dead}, run{0x6E, 0},                 run{0xFF, byte_region::dead}};
        e.begin = {0, 7, 12};
        const auto w = ix2.walk_region(e);
        CHECK(w->inside[0] == ((std::uint64_t(1) << 0) | (std::uint64_t(1) << 4)));  // a\ and aa
        CHECK(w->last == std::vector<std::uint16_t>{1, 0, 0, 0, 0, 0});              // a\ ends after the backslash
        // in preorder: '"' after "\" (in state 1), after "\n" (state 0), after "a\" (state 1)
        REQUIRE(w->exits.size() == 3);
        const std::vector<std::pair<std::size_t, std::uint32_t>> at = {{2, 1}, {3, 0}, {3, 1}};
        for (std::size_t k = 0; k < 3; ++k)
        {
            CHECK(ix2.byte(w->exits[k].node) == '"');
            CHECK(ix2.depth(w->exits[k].node) == at[k].first);
            CHECK(w->exits[k].from == at[k].second);
        }
    }
}

TEST_CASE("constraint: a region's exits leave the context nothing the whole walk would not", "[constraint]")
{
    // "! pops the string at once, deeper than the next exit's ab" would: that exit's
    // subtree must not inherit it (a root for ab"x, a context walk for nothing)
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b)
    {
        tokens.emplace_back(1, char(b));
    }
    for (const char* t : {"\"!", "ab", "ab\"", "ab\"x"})
    {
        tokens.emplace_back(t);
    }
    tokens.emplace_back();
    const auto v = std::make_shared<const vocabulary>(tokens, std::vector<token_id>{token_id(tokens.size() - 1)});
    const auto ix = std::make_shared<const vocabulary_index>(v);
    grammar g;  // root ::= '"' [ -~ but "]* '"!'
    const byte_set text = string_text();
    const auto root = g.rule("root");
    g.define(root, g.sequence({g.bytes("\""), g.star(g.byte_class(text)), g.bytes("\"!")}));
    g.set_root(root);
    const auto compiled = std::make_shared<const compiled_grammar>(ix, g, "exits");
    constraint c(compiled);
    c.advance(v->find("\""));
    const token_set& m = c.mask();
    CHECK(ix->regions_cached() == 1);
    CHECK(m.contains(v->find("ab\"")));
    CHECK(!m.contains(v->find("ab\"x")));
    CHECK(compiled->stats().context_walks == 0);
}

TEST_CASE("constraint: a string's text is one region of the trie, walked once for every grammar over the vocabulary",
          "[constraint][gpt2]")
{
    const auto index = std::make_shared<const vocabulary_index>(gpt2_index()->shared_vocab());
    const auto& v = index->vocab();
    struct probe
    {
        const char* schema;
        const char* before;
        std::size_t shapes;  // new region shapes: the string's text (and, compiled ahead, its states inside a character)
    };
    const std::vector<probe> probes = {
        // (and the other keys' text: its start beside the names' first bytes, a state after a
        // whole name, and the text without escapes with its states inside a character, shared by
        // every object: another object adds its start alone)
        {R"({"type":"object","properties":{"a":{"type":"string"}},"required":["a"]})", R"({"a": ")", 10},
        {R"({"type":"object","properties":{"b":{"type":"string"}},"required":["b"]})", R"({"b": ")", 1},
        {R"({"type":"array","items":{"type":"string"},"maxItems":3})", R"([")", 0},
        {R"({"type":"object","properties":{"a":{"type":"string"}},"required":["a"]})", R"({"a": "x\n)", 0},
        // counted strings just begun: their text is a region too (a count per token)
        {R"({"type":"object","properties":{"a":{"type":"string","maxLength":40}},"required":["a"]})", R"({"a": ")", 1},
        // (with a minimum above one, the compile also walks its text after one character: the shape of
        // the positions read some way, which every later count shares)
        {R"({"type":"array","items":{"type":"string","minLength":3,"maxLength":300}})", R"([")", 1},
    };
    for (const auto& p : probes)
    {
        const std::size_t before = index->regions_cached();
        constraint c = json_schema_constraint(index, std::string(p.schema));
        for (const char ch : std::string(p.before))
        {
            c.advance(v.find(std::string(1, ch)));
        }
        INFO(p.schema << " after " << p.before);
        // each token allowed exactly when the chart reads it
        CHECK(allowed_by_brute_force(c, [](token_id, const constraint&) {}).size() > 45000);
        // the text inside a JSON string is one shape whatever surrounds it; so is a counted string's
        CHECK(index->regions_cached() - before == p.shapes);
    }
}

TEST_CASE("constraint: a pattern's loop one byte past a thin loop is in the region, with or without a budget",
          "[constraint][gpt2]")
{
    // (.+/)?.+:.+ searched: after "ab:" any character completes a match, and only a
    // line separator (U+2028, U+2029: . reads neither) leads back to the loop before
    // it. The region is that loop and the loop after it, not the first alone (which
    // left nearly every token to a walk through the chart: 3.6 ms a budgeted step)
    const auto index = std::make_shared<const vocabulary_index>(gpt2_index()->shared_vocab());
    const auto& v = index->vocab();
    grammar_limits lazy;
    lazy.primed_items = 0;  // the position walked at mask(), not at compile time
    const auto compiled = std::make_shared<const compiled_grammar>(
        index, json_schema_grammar(std::string(R"({"type":"string","pattern":"(.+/)?.+:.+"})")), "pattern", lazy);
    for (const std::size_t budget : {std::size_t(0), std::size_t(7)})  // 7: a tight one (its costs walked)
    {
        constraint c(compiled);
        c.set_budget(budget);
        for (const char ch : std::string("\"ab:"))
        {
            c.advance(v.find(std::string(1, ch)));
        }
        INFO("budget " << budget);
        const auto before = compiled->stats();
        c.mask();
        const auto after = compiled->stats();
        CHECK(after.nodes_stepped + after.nodes_plain - before.nodes_stepped - before.nodes_plain < 2000);
        const auto allowed =
            allowed_by_brute_force(c, [&](token_id, const constraint& next) { completes(*compiled, next); });
        CHECK(allowed.size() > (budget == 0 ? 45000 : 40000));
    }
}

TEST_CASE("constraint: a budget that only just fits reads the tokens that close a string through the chart, not the trie",
          "[constraint][gpt2]")
{
    // in a counted string read some way, with no token to spare, the tokens that
    // close it (a", ."}, ...) are read through the chart in byte order, each from the
    // bytes it shares with the one before (at Llama 3's 128,256 tokens, ~500 of them:
    // the whole trie walked through the chart instead took 24 ms a step)
    const auto index = std::make_shared<const vocabulary_index>(gpt2_index()->shared_vocab());
    const auto& v = index->vocab();
    const auto compiled = std::make_shared<const compiled_grammar>(
        index,
        json_schema_grammar(std::string(R"({"type":"object","properties":{"a":{"type":"string","minLength":1,"maxLength":100},)"
                                        R"("b":{"type":"string","minLength":1,"maxLength":100}},"required":["a","b"]})")),
        "closing");
    for (const std::size_t spare : {std::size_t(0), std::size_t(1)})
    {
        constraint c(compiled);
        const std::string before = R"({"a":"xy)";
        for (const char ch : before)
        {
            c.advance(v.find(std::string(1, ch)));
        }
        c.set_budget(before.size() + c.shortest_completion() + spare);
        INFO("spare " << spare);
        c.mask();  // (the costs walked once)
        const auto walked = compiled->stats();
        c.mask();  // the same step again: its checks, no walk of the trie
        CHECK(compiled->stats().nodes_stepped - walked.nodes_stepped < 5000);
        const auto allowed =
            allowed_by_brute_force(c, [&](token_id, const constraint& next) { completes(*compiled, next); });
        CHECK(allowed.size() > (spare == 0 ? 10 : 40000));
        CHECK(allowed.size() < (spare == 0 ? 2000 : 50257));
    }
}

TEST_CASE("constraint: GPT-2's vocabulary: long completions under tight budgets end complete", "[constraint][gpt2]")
{
    // strings of minLength 1500 and 5000, 3000 items: each step reads precomputed
    // costs (the whole run takes well under a second; it used to take minutes)
    const auto index = gpt2_index();
    const auto& v = index->vocab();
    struct probe
    {
        std::string schema;
        std::size_t budget;
    };
    for (const auto& p : {probe{R"({"type":"string","minLength":1500})", 400},
                          probe{R"({"type":"string","minLength":5000})", 1500},
                          probe{R"({"type":"array","minItems":3000,"items":{"type":"integer"}})", 7000}})
    {
        const constraint proto = json_schema_constraint(index, p.schema);
        REQUIRE(proto.shortest_completion() <= p.budget);
        rotating_model model(v.size(), 99);
        const generation g = constrained_run(proto, p.budget, true, model, 5, temperature{1.0});
        const std::string out = v.decode(g.tokens);
        INFO(p.schema);
        REQUIRE(g.reason == stop_reason::eos);
        REQUIRE(g.tokens.size() <= p.budget);
        REQUIRE(valid(json::parse(out), json::parse(p.schema), json::parse(p.schema)));
    }
    // the shortest a 1500-char string takes is far below one token per char
    CHECK(json_schema_constraint(index, std::string(R"({"type":"string","minLength":1500})")).shortest_completion() < 100);
}

TEST_CASE("regex: generations all match std::regex, and every allowed token can still match", "[constraint][regex]")
{
    const std::vector<std::string> patterns = {R"(\d{4}-\d{2}-\d{2})", R"([a-z]{1,8}@[a-z]{1,8}\.(com|org))",
                                               R"((yes|no|maybe)!?)", R"([A-Z][a-z]+( [A-Z][a-z]+){0,2})",
                                               R"(\(?\d{3}\)? ?\d{3}-\d{4})", R"(abc|ab( ab)*)"};
    for (const auto& index : {small_index(), gpt2_index()})
    {
        const auto& v = index->vocab();
        const bool small = v.size() < 1000;
        for (const auto& pattern : patterns)
        {
            const std::regex re(pattern);
            const constraint proto = regex_constraint(index, pattern);
            for (std::uint64_t seed = 0; seed < (small ? 60 : 20); ++seed)
            {
                rotating_model model(v.size(), seed + 77);
                const generation g =
                    constrained_run(proto, proto.shortest_completion() + seed % 16, true, model, seed, temperature{1.0});
                const std::string out = v.decode(g.tokens);
                INFO(pattern << " seed " << seed << ": " << out);
                REQUIRE(g.reason == stop_reason::eos);
                REQUIRE(std::regex_match(out, re));
            }
            if (!small)
            {
                continue;
            }
            // brute force: each token allowed exactly when the constraint can advance by it,
            // and then the text plus its completion matches
            constraint c = proto;
            std::mt19937 pick(3);
            while (!c.ended())
            {
                auto allowed = allowed_by_brute_force(c, [&](token_id, const constraint& after) {
                    REQUIRE(std::regex_match(after.text() + after.completion(), re));
                });
                const auto eos = std::find(allowed.begin(), allowed.end(), v.eos()[0]);
                REQUIRE((eos != allowed.end()) == std::regex_match(c.text(), re));
                if (eos != allowed.end())
                {
                    allowed.erase(eos);
                }
                if (allowed.empty() || c.tokens() > 12)  // then along the completion, and eos
                {
                    const std::string rest = c.completion();
                    c.advance(rest.empty() ? v.eos()[0] : v.find(rest.substr(0, 1)));
                    continue;
                }
                c.advance(allowed[pick() % allowed.size()]);
            }
        }
    }
}
