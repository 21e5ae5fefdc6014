// request.hpp: completion requests in OpenAI's / vLLM's and llama.cpp's
// spelling — every field's default, mapping and errors, and requests run.
#include <map>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <xtensor/xtensor.hpp>

#include <xsampler/request.hpp>
#include <xsampler/xsampler.hpp>

using namespace xsampler;
using Catch::Matchers::Message;

namespace
{
    // Every byte (ids 0..255), three words, and eos last.
    const std::vector<std::string> words = {"cat", " cat", "yes"};
    constexpr token_id cat = 256, space_cat = 257, yes = 258, eos = 259;
    constexpr std::size_t vocab_size = 260;

    std::shared_ptr<const vocabulary_index> make_index()
    {
        std::vector<std::string> tokens;
        for (int b = 0; b < 256; ++b)
        {
            tokens.emplace_back(1, char(b));
        }
        tokens.insert(tokens.end(), words.begin(), words.end());
        tokens.emplace_back();
        return std::make_shared<const vocabulary_index>(
            std::make_shared<const vocabulary>(std::move(tokens), std::vector<token_id>{eos}));
    }

    std::shared_ptr<const vocabulary_index> index()
    {
        static const auto built = make_index();
        return built;
    }

    /// Longest match first: a word where one starts, else the byte.
    std::vector<token_id> encode(const std::string& text)
    {
        std::vector<token_id> ids;
        for (std::size_t i = 0; i < text.size();)
        {
            token_id best = token_id(static_cast<unsigned char>(text[i]));
            std::size_t length = 1;
            for (std::size_t w = 0; w < words.size(); ++w)
            {
                if (words[w].size() > length && text.compare(i, words[w].size(), words[w]) == 0)
                {
                    best = token_id(256 + w);
                    length = words[w].size();
                }
            }
            ids.push_back(best);
            i += length;
        }
        return ids;
    }

    request_context context()
    {
        request_context c;
        c.index = index();
        c.encode = encode;
        c.max_tokens = 500;
        c.seed = 7;
        return c;
    }

    completion_request parse(const std::string& text, request_dialect d = request_dialect::openai)
    {
        return parse_request(text, context(), d);
    }

    /// Runs the request's first sample over a model that returns `row_for(generated)`.
    template <class RowFor>
    std::pair<std::string, finish_reason> run(const completion_request& r, RowFor row_for)
    {
        sequence seq(sampler(r.params), r.prompt, r.options);
        std::string streamed;
        while (!seq.finished())
        {
            streamed += std::string(seq.step(row_for(seq.generated().size())).text);
        }
        CHECK(streamed == seq.text());
        return {seq.text(), seq.reason()};
    }

    xt::xtensor<float, 1> zeros() { return xt::zeros<float>({vocab_size}); }

    /// A row that makes `text`'s bytes one after another (then eos) all but certain.
    auto spelling(const std::string& text)
    {
        return [text](std::size_t g) {
            auto row = zeros();
            row(g < text.size() ? std::size_t(static_cast<unsigned char>(text[g])) : std::size_t(eos)) = 40.0f;
            return row;
        };
    }
}

TEST_CASE("request: the two dialects' defaults side by side", "[request]")
{
    const auto o = parse(R"({"prompt": [1, 2, 3]})");
    const auto l = parse(R"({"prompt": [1, 2, 3]})", request_dialect::llama);
    CHECK(o.prompt == std::vector<token_id>{1, 2, 3});
    CHECK(l.prompt == o.prompt);
    // sampling: vLLM's neutral defaults against llama.cpp's common.h
    CHECK(o.params.temperature == 1.0);
    CHECK(l.params.temperature == 0.8);
    CHECK(o.params.top_k == 0);
    CHECK(l.params.top_k == 40);
    CHECK(o.params.top_p == 1.0);
    CHECK(l.params.top_p == 0.95);
    CHECK(o.params.min_p == 0.0);
    CHECK(l.params.min_p == 0.05);
    CHECK(o.params.penalty_scope == penalty_scope::output);
    CHECK(l.params.penalty_scope == penalty_scope::window);
    CHECK(l.params.repeat_last_n == 64);
    CHECK(o.params.order == default_stage_order());
    CHECK(l.params.order == std::vector<std::string>{"logit_bias", "sequence_bias", "no_repeat_ngram", "bad_words",
                                                     "token_mask", "penalties", "dry", "top_n_sigma", "top_k",
                                                     "typical", "top_p", "min_p", "xtc", "temperature"});
    CHECK(l.params.typical_p == 1.0);
    CHECK(l.params.top_n_sigma == -1.0);
    CHECK(l.params.min_keep == 1);
    CHECK(l.params.repeat_penalty == 1.0);
    CHECK(l.params.presence_penalty == 0.0);
    CHECK(l.params.dry_multiplier == 0.0);
    CHECK(l.params.dry_base == 1.75);
    CHECK(l.params.dry_allowed_length == 2);
    CHECK(l.params.dry_penalty_last_n == -1);
    CHECK(l.params.xtc_probability == 0.0);
    CHECK(l.params.xtc_threshold == 0.1);
    CHECK(l.params.mirostat == 0);
    CHECK(l.params.mirostat_tau == 5.0);
    CHECK(l.params.mirostat_eta == 0.1);
    CHECK(l.params.dynatemp_range == 0.0);
    CHECK(l.params.dynatemp_exponent == 1.0);
    // lengths: 16 against "until the context ends" (the context's limit)
    CHECK(o.options.max_tokens == 16);
    CHECK(l.options.max_tokens == 500);
    for (const auto* r : {&o, &l})
    {
        CHECK(r->options.min_tokens == 0);
        CHECK(r->options.eos == std::vector<token_id>{eos});  // the index's vocabulary's
        CHECK(r->options.eos_mode == eos_policy::stop);
        CHECK(r->options.vocab == &index()->vocab());
        CHECK(r->params.seed == 7);  // the context's
        CHECK(r->options.seed == std::optional<std::uint64_t>(7));
        CHECK(r->n == 1);
        CHECK(r->best_of == 1);
        CHECK_FALSE(r->stream);
        CHECK_FALSE(r->include_usage);
        CHECK_FALSE(r->logprobs);
        CHECK_FALSE(r->options.raw_logprob);
        CHECK(r->options.top_logprobs == 0);
        CHECK_FALSE(r->prompt_logprobs);
        CHECK(r->constraint.empty());
        CHECK(r->params.custom.empty());
        CHECK(r->options.stop_strings.empty());
    }
    // the default max_tokens is within the context's
    auto small = context();
    small.max_tokens = 8;
    CHECK(parse_request(R"({"prompt": [1]})", small).options.max_tokens == 8);
    // null is the default
    const auto n = parse(R"({"prompt": [1], "temperature": null, "max_tokens": null, "seed": null, "stop": null})");
    CHECK(n.params.temperature == 1.0);
    CHECK(n.options.max_tokens == 16);
    CHECK(n.params.seed == 7);
}

TEST_CASE("request: OpenAI / vLLM fields and what they map to", "[request]")
{
    const auto r = parse(R"({
        "model": "m", "prompt": "cat!", "max_tokens": 40, "min_tokens": 3, "temperature": 0.5, "top_p": 0.9,
        "top_k": 5, "min_p": 0.1, "n": 2, "best_of": 3, "seed": 11, "stop": ["x", "yz", "x"],
        "stop_token_ids": [5, 6, 5], "include_stop_str_in_output": true, "ignore_eos": true, "logprobs": 4,
        "prompt_logprobs": 2, "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.2,
        "logit_bias": {"3": 100, "4": -100}, "allowed_token_ids": [1, 2, 3], "sequence_bias": [[[1, 2], -1.5]],
        "user": "u", "stream": false})");
    CHECK(r.model == "m");
    CHECK(r.prompt == std::vector<token_id>{cat, '!'});  // text through the context's encode
    CHECK(r.options.max_tokens == 40);
    CHECK(r.options.min_tokens == 3);
    CHECK(r.params.temperature == 0.5);
    CHECK(r.params.top_p == 0.9);
    CHECK(r.params.top_k == 5);
    CHECK(r.params.min_p == 0.1);
    CHECK(r.n == 2);
    CHECK(r.best_of == 3);
    CHECK(r.params.seed == 11);
    CHECK(r.options.seed == std::optional<std::uint64_t>(11));
    CHECK(r.options.stop_strings == std::vector<std::string>{"x", "yz"});  // repeated ones once
    CHECK(r.options.stop_token_ids == std::vector<token_id>{5, 6});        // deduplicated, as vLLM
    CHECK(r.options.include_stop_str_in_output);
    CHECK(r.options.eos_mode == eos_policy::pass);  // vLLM's ignore_eos: eos is sampled and ignored
    CHECK(r.logprobs);
    CHECK(r.options.top_logprobs == 4);
    CHECK(r.options.raw_logprob);  // vLLM's default logprobs_mode: the model's
    CHECK(r.options.top_source == logprob_source::raw);
    CHECK(r.prompt_logprobs == std::optional<std::size_t>(2));
    CHECK(r.params.presence_penalty == 0.5);
    CHECK(r.params.frequency_penalty == -0.5);
    CHECK(r.params.repeat_penalty == 1.2);
    CHECK(r.params.logit_bias == std::vector<std::pair<token_id, double>>{{3, 100.0}, {4, -100.0}});
    CHECK(r.params.allowed_token_ids == std::vector<token_id>{1, 2, 3});
    CHECK(r.params.sequence_bias == std::vector<std::pair<std::vector<token_id>, double>>{{{1, 2}, -1.5}});
    CHECK_FALSE(r.stream);

    SECTION("stream and stream_options: include_usage is true once stream_options is given (vLLM)")
    {
        const auto q = parse(R"({"prompt": [1], "stream": true, "stream_options": {}})");
        CHECK(q.stream);
        CHECK(q.include_usage);
        CHECK_FALSE(parse(R"({"prompt": [1], "stream": true, "stream_options": {"include_usage": false}})").include_usage);
        CHECK_FALSE(parse(R"({"prompt": [1], "stream": true})").include_usage);
    }
    SECTION("a list of one prompt is that prompt; any 64-bit seed; nlohmann::json too")
    {
        CHECK(parse(R"({"prompt": [[1, 2]]})").prompt == std::vector<token_id>{1, 2});
        CHECK(parse(R"({"prompt": ["cat"]})").prompt == std::vector<token_id>{cat});
        CHECK(parse(R"({"prompt": [1], "seed": -5})").params.seed == std::uint64_t(-5));
        const nlohmann::json plain = {{"prompt", {1, 2}}, {"temperature", 0.5}};
        CHECK(parse_request(plain, context()).params.temperature == 0.5);
    }

    SECTION("top_k -1 is off; max_completion_tokens is max_tokens; seed -1 is the context's")
    {
        const auto q = parse(R"({"prompt": [1], "top_k": -1, "max_completion_tokens": 9, "seed": -1})");
        CHECK(q.params.top_k == 0);
        CHECK(q.options.max_tokens == 9);
        CHECK(q.params.seed == 7);
        const auto big = parse(R"({"prompt": [1], "seed": 18446744073709551615})");
        CHECK(big.params.seed == 18446744073709551615ull);
    }
    SECTION("chat's logprobs: true with top_logprobs; logprobs_mode processed")
    {
        const auto q = parse(R"({"prompt": [1], "logprobs": true, "top_logprobs": 3})");
        CHECK(q.logprobs);
        CHECK(q.options.top_logprobs == 3);
        CHECK(q.options.raw_logprob);
        const auto p = parse(R"({"prompt": [1], "logprobs": 0, "logprobs_mode": "processed_logprobs"})");
        CHECK(p.logprobs);
        CHECK(p.options.top_logprobs == 0);
        CHECK_FALSE(p.options.raw_logprob);  // the drawn distribution's: step_result::logprob
        CHECK(p.options.top_source == logprob_source::processed);
        const auto off = parse(R"({"prompt": [1], "logprobs": false, "prompt_logprobs": false})");
        CHECK_FALSE(off.logprobs);
        CHECK_FALSE(off.prompt_logprobs);
        CHECK(parse(R"({"prompt": [1], "prompt_logprobs": true})").prompt_logprobs == std::optional<std::size_t>(1));
    }
    SECTION("bad_words: as written and after one space, the second where it starts another token and is as long")
    {
        // "cat" -> [cat]; " cat" -> [ cat]: another first token, as long: both banned.
        // "dog" -> [d o g]; " dog" -> [' ' d o g]: longer: only the first.
        const auto q = parse(R"({"prompt": [1], "bad_words": ["  cat", "dog", "dog"]})");
        CHECK(q.params.bad_words == std::vector<std::vector<token_id>>{{cat}, {space_cat}, {'d', 'o', 'g'}});
    }
    SECTION("the constraint fields")
    {
        const std::vector<std::pair<std::string, std::string>> cases = {
            {R"({"type": "json_object"})", "json"},
            {R"({"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "integer"}, "strict": true}})",
             "json_schema"},
        };
        for (const auto& c : cases)
        {
            const auto q = parse(R"({"prompt": [1], "response_format": )" + c.first + "}");
            CHECK(q.constraint == c.second);
            CHECK(q.params.order.front() == "constraint");
            REQUIRE(q.params.custom.size() == 1);
            CHECK(q.params.custom.front().name() == "constraint");
        }
        CHECK(parse(R"({"prompt": [1], "response_format": {"type": "text"}})").constraint.empty());
        CHECK(parse(R"({"prompt": [1], "response_format": {"type": "text", "json_schema": null}})").constraint.empty());
        // each constraint field, run over a uniform row: every text is in its language, and more than one is drawn
        const std::vector<std::tuple<std::string, request_dialect, std::set<std::string>>> runs = {
            {R"("guided_regex": "(cat|yes)!")", request_dialect::openai, {"cat!", "yes!"}},
            // (an enum of numbers allows 7.0 for 7: the same JSON number)
            {R"("response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"enum": ["cat", true]}}})",
             request_dialect::openai, {"\"cat\"", "true"}},
            {R"("guided_json": {"enum": ["a", "b"]})", request_dialect::openai, {"\"a\"", "\"b\""}},
            {R"("structured_outputs": {"grammar": "root ::= \"a\" | \"bb\""})", request_dialect::openai, {"a", "bb"}},
            {R"("structured_outputs": {"choice": ["x", "yz"]})", request_dialect::openai, {"x", "yz"}},
            {R"("grammar": "root ::= \"a\" | \"bb\"", "temperature": 1, "top_k": 0, "top_p": 1, "min_p": 0)",
             request_dialect::llama, {"a", "bb"}},
            {R"("json_schema": {"enum": [true, null]}, "temperature": 1, "top_k": 0, "top_p": 1, "min_p": 0)",
             request_dialect::llama, {"true", "null"}},
        };
        for (const auto& [fields, dialect, texts] : runs)
        {
            INFO(fields);
            std::set<std::string> seen;
            for (std::uint64_t seed = 0; seed < 40; ++seed)
            {
                const auto q = parse(R"({"prompt": [1], "seed": )" + std::to_string(seed) + ", " + fields + "}", dialect);
                const auto out = run(q, [](std::size_t) { return zeros(); });
                CHECK(out.second == finish_reason::eos);
                CHECK(texts.count(out.first) == 1);
                seen.insert(out.first);
            }
            CHECK(seen == texts);
        }
        CHECK(parse(R"({"prompt": [1], "guided_json": {"type": "string"}})").constraint == "json_schema");
        CHECK(parse(R"({"prompt": [1], "guided_json": "{\"type\": \"string\"}"})").constraint == "json_schema");
        CHECK(parse(R"({"prompt": [1], "guided_regex": "a+"})").constraint == "regex");
        CHECK(parse(R"({"prompt": [1], "guided_grammar": "root ::= \"a\""})").constraint == "grammar");
        CHECK(parse(R"({"prompt": [1], "guided_choice": ["a", "b"]})").constraint == "choice");
        CHECK(parse(R"({"prompt": [1], "structured_outputs": {"regex": "a+"}})").constraint == "regex");
        CHECK(parse(R"({"prompt": [1], "structured_outputs": {"json_object": true}})").constraint == "json");
        CHECK(parse(R"({"prompt": [1], "grammar": "root ::= \"a\""})", request_dialect::llama).constraint == "grammar");
        CHECK(parse(R"({"prompt": [1], "json_schema": {"type": "object"}})", request_dialect::llama).constraint ==
              "json_schema");
    }
}

TEST_CASE("request: llama.cpp fields and what they map to", "[request]")
{
    const auto r = parse(R"({
        "prompt": [1, "cat", 2], "n_predict": 30, "temperature": 1.5, "dynatemp_range": 0.5, "dynatemp_exponent": 2,
        "top_k": 0, "top_p": 2, "min_p": 0.2, "typical_p": 0.9, "top_n_sigma": 1.5, "min_keep": 0,
        "repeat_penalty": 1.1, "repeat_last_n": -1, "presence_penalty": 3, "frequency_penalty": 0.25,
        "dry_multiplier": 0.8, "dry_base": 2, "dry_allowed_length": 3, "dry_penalty_last_n": 100,
        "xtc_probability": 0.5, "xtc_threshold": 0.2, "mirostat": 0, "mirostat_tau": 4, "mirostat_eta": 0.2,
        "seed": 5, "stop": ["", "x"], "ignore_eos": true,
        "logit_bias": [[3, false], ["cat", 1.5], [4, -2]], "n_probs": 3, "post_sampling_probs": true,
        "cache_prompt": true, "n_keep": 4})",
                         request_dialect::llama);
    CHECK(r.prompt == std::vector<token_id>{1, cat, 2});  // ids and text mixed
    CHECK(r.options.max_tokens == 30);
    CHECK(r.params.temperature == 1.5);
    CHECK(r.params.dynatemp_range == 0.5);
    CHECK(r.params.dynatemp_exponent == 2.0);
    CHECK(r.params.top_k == 0);    // <= 0: off
    CHECK(r.params.top_p == 1.0);  // >= 1: off
    CHECK(r.params.min_p == 0.2);
    CHECK(r.params.typical_p == 0.9);
    CHECK(r.params.top_n_sigma == 1.5);
    CHECK(r.params.min_keep == 1);  // llama.cpp's 0 keeps one token, as 1 does
    CHECK(r.params.repeat_penalty == 1.1);
    CHECK(r.params.repeat_last_n == -1);
    CHECK(r.params.presence_penalty == 3.0);  // no [-2, 2] in llama.cpp
    CHECK(r.params.frequency_penalty == 0.25);
    CHECK(r.params.dry_multiplier == 0.8);
    CHECK(r.params.dry_base == 2.0);
    CHECK(r.params.dry_allowed_length == 3);
    CHECK(r.params.dry_penalty_last_n == 100);
    // llama.cpp's default breakers "\n", ":", "\"", "*" through encode
    CHECK(r.params.dry_sequence_breakers == std::vector<token_id>{'\n', ':', '"', '*'});
    CHECK(r.params.xtc_probability == 0.5);
    CHECK(r.params.xtc_threshold == 0.2);
    CHECK(r.params.mirostat == 0);
    CHECK(r.params.mirostat_tau == 5.0);  // mirostat off: its parameters do nothing (the defaults)
    CHECK(r.params.mirostat_eta == 0.1);
    CHECK(r.params.seed == 5);
    CHECK(r.options.stop_strings == std::vector<std::string>{"x"});  // "" skipped, as llama.cpp
    CHECK(r.options.eos_mode == eos_policy::mask);  // llama.cpp's ignore_eos: eos biased to -inf
    const double ban = -std::numeric_limits<double>::infinity();
    CHECK(r.params.logit_bias == std::vector<std::pair<token_id, double>>{{3, ban}, {cat, 1.5}, {4, -2.0}});
    CHECK(r.logprobs);
    CHECK(r.options.top_logprobs == 3);
    CHECK(r.options.top_source == logprob_source::processed);
    CHECK_FALSE(r.options.raw_logprob);
    CHECK(r.ignored == std::vector<std::string>{"cache_prompt", "n_keep"});

    const auto o = parse(R"({"prompt": [1], "logit_bias": {"5": false, "yes": 2}, "top_k": 1000, "n_predict": -1,
                             "dry_sequence_breakers": ["cat"], "dry_multiplier": 1, "seed": -1, "temperature": -1})",
                         request_dialect::llama);
    CHECK(o.params.logit_bias == std::vector<std::pair<token_id, double>>{{5, ban}, {yes, 2.0}});
    CHECK(o.params.top_k == 0);  // past the vocabulary: all of it
    CHECK(o.options.max_tokens == 500);
    CHECK(o.params.dry_sequence_breakers == std::vector<token_id>{cat});
    CHECK(o.params.seed == 7);
    CHECK(o.params.temperature == 0.0);  // <= 0: greedy
    CHECK(parse(R"({"prompt": [1], "n_probs": 2})", request_dialect::llama).options.raw_logprob);

    SECTION("samplers: only the listed stages run (the others' parameters do nothing, as in llama.cpp)")
    {
        const auto q = parse(R"({"prompt": [1], "samplers": ["top-k", "temp", "penalties"], "repeat_penalty": 1.2,
                                 "temperature": 0.7, "xtc_probability": 0.5, "dry_multiplier": 1})",
                             request_dialect::llama);
        CHECK(q.params.order == std::vector<std::string>{"logit_bias", "sequence_bias", "no_repeat_ngram",
                                                         "bad_words", "token_mask", "top_k", "temperature",
                                                         "penalties"});
        CHECK(q.params.top_k == 40);
        CHECK(q.params.temperature == 0.7);
        CHECK(q.params.repeat_penalty == 1.2);
        CHECK(q.params.top_p == 1.0);
        CHECK(q.params.min_p == 0.0);
        CHECK(q.params.typical_p == 1.0);
        CHECK(q.params.top_n_sigma == -1.0);
        CHECK(q.params.xtc_probability == 0.0);
        CHECK(q.params.dry_multiplier == 0.0);
    }
    SECTION("the parameters of a stage that does not run are not checked (llama.cpp ignores them)")
    {
        const auto q = parse(R"({"prompt": [1], "dry_base": 0.5, "xtc_threshold": 2, "mirostat_tau": -1})",
                             request_dialect::llama);
        CHECK(q.params.dry_base == 1.75);
        CHECK(q.params.xtc_threshold == 0.1);
        CHECK(q.params.mirostat_tau == 5.0);
        request_context bare;
        bare.vocab_size = 10;
        bare.eos = {9};
        const auto unlisted = parse_request(R"({"prompt": [1], "dry_multiplier": 1, "samplers": ["top_k"]})", bare,
                                            request_dialect::llama);
        CHECK(unlisted.params.dry_multiplier == 0.0);
        CHECK(parse(R"({"prompt": [1], "dry_multiplier": 1, "dry_base": 0.5})", request_dialect::llama).params.dry_base ==
              1.75);  // llama.cpp's: a base below 1 is the default
        // clamps: min_p below 0 is 0, typical_p above 1 is 1
        const auto c = parse(R"({"prompt": [1], "min_p": -1, "typical_p": 3})", request_dialect::llama);
        CHECK(c.params.min_p == 0.0);
        CHECK(c.params.typical_p == 1.0);
    }
    SECTION("samplers as llama.cpp's letters, and names in any case")
    {
        const auto base = std::vector<std::string>{"logit_bias", "sequence_bias", "no_repeat_ngram", "bad_words",
                                                   "token_mask"};
        auto expect = base;
        expect.insert(expect.end(), {"top_k", "temperature"});
        CHECK(parse(R"({"prompt": [1], "samplers": "kt"})", request_dialect::llama).params.order == expect);
        CHECK(parse(R"({"prompt": [1], "samplers": ["TOP_K", "Temp"]})", request_dialect::llama).params.order == expect);
        CHECK(parse(R"({"prompt": [1], "samplers": "edskypmxt"})", request_dialect::llama).params.order ==
              parse(R"({"prompt": [1]})", request_dialect::llama).params.order);
    }
    SECTION("mirostat: temperature then mirostat, the list unused (llama.cpp)")
    {
        const auto q = parse(R"({"prompt": [1], "mirostat": 2, "mirostat_tau": 3, "repeat_penalty": 1.3})",
                             request_dialect::llama);
        CHECK(q.params.mirostat == 2);
        CHECK(q.params.mirostat_tau == 3.0);
        CHECK(q.params.order == std::vector<std::string>{"logit_bias", "sequence_bias", "no_repeat_ngram",
                                                         "bad_words", "token_mask", "temperature"});
        CHECK(q.params.temperature == 0.8);
        CHECK(q.params.top_k == 0);
        CHECK(q.params.top_p == 1.0);
        CHECK(q.params.min_p == 0.0);
        CHECK(q.params.repeat_penalty == 1.0);
        CHECK(parse(R"({"prompt": [1], "mirostat": 1, "dynatemp_range": 0.5})", request_dialect::llama)
                  .params.dynatemp_range == 0.0);  // llama.cpp's plain temperature before mirostat
    }
}

TEST_CASE("request: errors name the field", "[request]")
{
    using d = request_dialect;
    const std::vector<std::tuple<d, std::string, std::string>> cases = {
        {d::openai, R"([1])", "request: must be a JSON object, got [1]"},
        {d::openai, R"({"prompt": [1],)", ""},  // not JSON: checked below by prefix
        {d::openai, R"({"prompt": [1], "top_kk": 3})", "request: unknown field 'top_kk'"},
        {d::openai, R"({"prompt": [1], "n_probs": 3})",
         "request: 'n_probs' is llama.cpp's; this request is read as OpenAI's / vLLM's (use 'logprobs')"},
        {d::llama, R"({"prompt": [1], "max_tokens": 3})",
         "request: 'max_tokens' is OpenAI's / vLLM's; this request is read as llama.cpp's (use 'n_predict')"},
        {d::llama, R"({"prompt": [1], "guided_regex": "a"})",
         "request: 'guided_regex' is OpenAI's / vLLM's; this request is read as llama.cpp's"},
        {d::openai, R"({"messages": []})",
         "request: messages: a chat request needs a chat template, which the library does not apply; send the "
         "templated text as 'prompt'"},
        {d::openai, R"({})", "request: prompt: is required"},
        {d::openai, R"({"prompt": []})", "request: prompt: is empty"},
        {d::openai, R"({"prompt": ""})", "request: prompt: is empty"},
        {d::openai, R"({"prompt": ["a", "b"]})",
         "request: prompt: one prompt per request (a list of prompts is a batch: send each as its own request)"},
        {d::openai, R"({"prompt": [260]})", "request: prompt: token id 260 is outside the vocabulary [0, 260)"},
        {d::openai, R"({"prompt": [1.5]})", "request: prompt: must be an integer, got 1.5"},
        {d::openai, R"({"prompt": [1], "max_tokens": 0})", "request: max_tokens: must be in [1, 500], got 0"},
        {d::openai, R"({"prompt": [1], "max_tokens": 501})", "request: max_tokens: must be in [1, 500], got 501"},
        {d::openai, R"({"prompt": [1], "max_tokens": 5.0})", "request: max_tokens: must be an integer, got 5.0"},
        {d::openai, R"({"prompt": [1], "max_tokens": "5"})", "request: max_tokens: must be an integer, got \"5\""},
        {d::openai, R"({"prompt": [1], "max_tokens": 4, "max_completion_tokens": 4})",
         "request: max_tokens: and max_completion_tokens are the same field; give one"},
        {d::openai, R"({"prompt": [1], "max_tokens": 4, "min_tokens": 5})",
         "request: min_tokens: must be in [0, 4], got 5"},
        {d::openai, R"({"prompt": [1], "temperature": 2.5})", "request: temperature: must be in [0, 2], got 2.5"},
        {d::openai, R"({"prompt": [1], "temperature": -0.1})", "request: temperature: must be in [0, 2], got -0.1"},
        {d::openai, R"({"prompt": [1], "temperature": "hot"})",
         "request: temperature: must be a number, got \"hot\""},
        {d::openai, R"({"prompt": [1], "top_p": 0})", "request: top_p: must be in (0, 1], got 0"},
        {d::openai, R"({"prompt": [1], "top_p": 1.01})", "request: top_p: must be in (0, 1], got 1.01"},
        {d::openai, R"({"prompt": [1], "top_k": -2})", "request: top_k: must be -1 or 0 (off) or at least 1, got -2"},
        {d::openai, R"({"prompt": [1], "top_k": 261})",
         "request: top_k: must be <= the vocabulary size 260, got 261"},
        {d::openai, R"({"prompt": [1], "top_k": 5.5})", "request: top_k: must be an integer, got 5.5"},
        {d::openai, R"({"prompt": [1], "min_p": 1.5})", "request: min_p: must be in [0, 1], got 1.5"},
        {d::openai, R"({"prompt": [1], "n": 0})", "request: n: must be in [1, 128], got 0"},
        {d::openai, R"({"prompt": [1], "n": 129})", "request: n: must be in [1, 128], got 129"},
        {d::openai, R"({"prompt": [1], "n": 3, "best_of": 2})", "request: best_of: must be in [3, 128], got 2"},
        {d::openai, R"({"prompt": [1], "n": 2, "temperature": 0})",
         "request: n: must be 1 when using greedy sampling (temperature 0)"},
        {d::openai, R"({"prompt": [1], "best_of": 2, "temperature": 0})",
         "request: best_of: must be 1 when using greedy sampling (temperature 0)"},
        {d::openai, R"({"prompt": [1], "best_of": 2, "stream": true})",
         "request: best_of: cannot be streamed (best_of 2 > n 1)"},
        {d::openai, R"({"prompt": [1], "stop": ""})", "request: stop: cannot contain an empty string"},
        {d::openai, R"({"prompt": [1], "stop": [3]})", "request: stop: must be a string, got 3"},
        {d::openai, R"({"prompt": [1], "stop_token_ids": [-1]})",
         "request: stop_token_ids: token id -1 is outside the vocabulary [0, 260)"},
        {d::openai, R"({"prompt": [1], "include_stop_str_in_output": 1})",
         "request: include_stop_str_in_output: must be true or false, got 1"},
        {d::openai, R"({"prompt": [1], "ignore_eos": "yes"})", "request: ignore_eos: must be true or false, got \"yes\""},
        {d::openai, R"({"prompt": [1], "logprobs": 21})", "request: logprobs: must be in [0, 20], got 21"},
        {d::openai, R"({"prompt": [1], "logprobs": -1})", "request: logprobs: must be in [0, 20], got -1"},
        {d::openai, R"({"prompt": [1], "top_logprobs": 2})", "request: top_logprobs: needs logprobs: true"},
        {d::openai, R"({"prompt": [1], "logprobs": false, "top_logprobs": 2})",
         "request: top_logprobs: needs logprobs: true"},
        {d::openai, R"({"prompt": [1], "logprobs": 2, "top_logprobs": 2})",
         "request: top_logprobs: goes with logprobs: true (an integer logprobs is the count)"},
        {d::openai, R"({"prompt": [1], "logprobs_mode": "raw_logits"})",
         "request: logprobs_mode: must be \"raw_logprobs\" or \"processed_logprobs\", got \"raw_logits\""},
        {d::openai, R"({"prompt": [1], "prompt_logprobs": 21})", "request: prompt_logprobs: must be in [0, 20], got 21"},
        {d::openai, R"({"prompt": [1], "presence_penalty": 2.5})",
         "request: presence_penalty: must be in [-2, 2], got 2.5"},
        {d::openai, R"({"prompt": [1], "frequency_penalty": -3})",
         "request: frequency_penalty: must be in [-2, 2], got -3"},
        {d::openai, R"({"prompt": [1], "repetition_penalty": 0})",
         "request: repetition_penalty: must be > 0, got 0"},
        {d::openai, R"({"prompt": [1], "logit_bias": {"3": 101}})",
         "request: logit_bias[\"3\"]: must be in [-100, 100], got 101"},
        {d::openai, R"({"prompt": [1], "logit_bias": {"a": 1}})",
         "request: logit_bias[\"a\"]: the key must be a token id, got \"a\""},
        {d::openai, R"({"prompt": [1], "logit_bias": {"300": 1}})",
         "request: logit_bias[\"300\"]: token id 300 is outside the vocabulary [0, 260)"},
        {d::openai, R"({"prompt": [1], "logit_bias": [[3, 1]]})",
         "request: logit_bias: must be an object, got [[3,1]]"},
        {d::openai, R"({"prompt": [1], "allowed_token_ids": []})",
         "request: allowed_token_ids: is empty (it would allow no token)"},
        {d::openai, R"({"prompt": [1], "bad_words": [""]})", "request: bad_words: cannot contain an empty string"},
        {d::openai, R"({"prompt": [1], "bad_words": ["  "]})", "request: bad_words: \"  \" encodes to no token"},
        {d::openai, R"({"prompt": [1], "sequence_bias": [[[], 1]]})", "request: sequence_bias: a sequence is empty"},
        {d::openai, R"({"prompt": [1], "sequence_bias": [[1, 1]]})",
         "request: sequence_bias: must be an array, got 1"},
        {d::openai, R"({"prompt": [1], "sequence_bias": [[[1]]]})",
         "request: sequence_bias: each entry is [[ids...], bias], got [[1]]"},
        {d::openai, R"({"prompt": [1], "response_format": {"type": "yaml"}})",
         "request: response_format.type: must be \"text\", \"json_object\" or \"json_schema\", got \"yaml\""},
        {d::openai, R"({"prompt": [1], "response_format": {"type": "json_schema", "json_schema": {"schema": {}}}})",
         "request: response_format.json_schema.name: is required"},
        {d::openai, R"({"prompt": [1], "response_format": {"type": "json_schema", "json_schema": {"name": "n"}}})",
         "request: response_format.json_schema.schema: is required"},
        {d::openai, R"({"prompt": [1], "response_format": {"type": "json_schema", "schema": {}}})",
         "request: response_format.schema: unknown field"},
        {d::openai, R"({"prompt": [1], "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"$ref": "https://example.com/s.json"}}}})",
         "request: response_format: json_schema: "},  // the compiler's error, prefixed: checked by prefix
        {d::openai, R"({"prompt": [1], "guided_regex": "a", "guided_choice": ["a"]})",
         "request: guided_regex: and guided_choice are both constraints; give one"},
        {d::openai, R"({"prompt": [1], "guided_regex": "(a"})", "request: guided_regex: regex: "},
        {d::openai, R"({"prompt": [1], "guided_choice": []})", "request: guided_choice: is empty (it would allow no text)"},
        {d::openai, R"({"prompt": [1], "structured_outputs": {"regex": "a", "choice": ["a"]}})",
         "request: structured_outputs: give exactly one of json, regex, choice, grammar, json_object"},
        {d::openai, R"({"prompt": [1], "structured_outputs": {"whitespace_pattern": " "}})",
         "request: structured_outputs.whitespace_pattern: unknown field"},
        {d::openai, R"({"prompt": [1], "guided_regex": "a", "ignore_eos": true})",
         "request: guided_regex: a constrained text ends with eos; ignore_eos would not let it end"},
        {d::openai, R"({"prompt": [1], "stream": true, "stream_options": {"include_usage": 1}})",
         "request: stream_options.include_usage: must be true or false, got 1"},
        {d::openai, R"({"prompt": [1], "user": 3})", "request: user: must be a string, got 3"},
        {d::llama, R"({"prompt": [1], "n_predict": 0})", "request: n_predict: 0 generates nothing (give -1 or at least 1)"},
        {d::llama, R"({"prompt": [1], "n_predict": -2})", "request: n_predict: must be in [-1, 500], got -2"},
        {d::llama, R"({"prompt": [1], "top_p": 0})",
         "request: top_p: must be > 0 (llama.cpp keeps one token at 0: use top_k 1), got 0"},
        {d::llama, R"({"prompt": [1], "mirostat": 3})", "request: mirostat: must be in [0, 2], got 3"},
        {d::llama, R"({"prompt": [1], "samplers": ["top_k", "infill"]})",
         "request: samplers: \"infill\" is not supported"},
        {d::llama, R"({"prompt": [1], "samplers": ["top_k", "top_kk"]})",
         "request: samplers: \"top_kk\" is not a stage"},
        {d::llama, R"({"prompt": [1], "samplers": ["top_k", "top-k"]})", "request: samplers: \"top-k\" is listed twice"},
        {d::llama, R"({"prompt": [1], "samplers": "kz"})", "request: samplers: \"z\" is not a stage"},
        {d::llama, R"({"prompt": [1], "samplers": ["k"]})",
         "request: samplers: unknown stage \"k\" (letters go in a string)"},
        {d::llama, R"({"prompt": [1], "samplers": 3})", "request: samplers: must be an array, got 3"},
        {d::llama, R"({"prompt": [1], "logit_bias": {"-1": 1}})",
         "request: logit_bias[\"-1\"]: token id -1 is outside the vocabulary [0, 260)"},
        {d::llama, R"({"prompt": [1], "logit_bias": {"": 1}})",
         "request: logit_bias[\"\"]: the key is empty (a token id or a text)"},
        {d::llama, R"({"prompt": [1], "dry_sequence_breakers": []})",
         "request: dry_sequence_breakers: is empty (llama.cpp refuses it too)"},
        {d::llama, R"({"prompt": [1], "cache_prompt": "yes"})", "request: cache_prompt: must be true or false, got \"yes\""},
        {d::llama, R"({"prompt": [1], "typical_p": 0})", "request: typical_p: typical: "},
        {d::openai, R"({"prompt": [1], "max_tokens": 2, "max_tokens": 3})", "request: 'max_tokens' is given twice in one object"},
        {d::openai, R"({"prompt": [1], "response_format": {"type": "text", "type": "json_object"}})",
         "request: 'type' is given twice in one object"},
        {d::openai, R"({"prompt": [1], "logit_bias": {"3": 1, "03": 2}})",
         "request: logit_bias[\"03\"]: token id 3 is given twice"},
        {d::openai, R"({"prompt": [1], "stream_options": {"include_usage": true}})",
         "request: stream_options: goes with stream: true"},
        {d::openai, R"({"prompt": [1], "stream": true, "prompt_logprobs": 1})",
         "request: prompt_logprobs: cannot be streamed (vLLM refuses it too)"},
        {d::openai, R"({"prompt": [1], "response_format": {"type": null}})", "request: response_format.type: is required"},
        {d::openai, R"({"prompt": [[1], [2]]})",
         "request: prompt: one prompt per request (a list of prompts is a batch: send each as its own request)"},
        {d::openai, R"({"prompt": [[[1]]]})",
         "request: prompt: one prompt per request (a list of prompts is a batch: send each as its own request)"},
        {d::openai, R"({"prompt": [1], "n": 9223372036854775808})", "request: n: is too large, got 9223372036854775808"},
        {d::openai, R"({"prompt": [1], "logprobs": true, "top_logprobs": 21})",
         "request: top_logprobs: must be in [0, 20], got 21"},
        {d::openai, R"({"prompt": [1], "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "string", "minLength": 100000}}}})",
         "request: response_format: "},  // the compiled grammar's own limit, named by the field
        {d::openai, R"({"prompt": [1], "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa": 1})",
         "request: unknown field 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...'"},
        {d::llama, R"({"prompt": [1], "logit_bias": [[3]]})",
         "request: logit_bias: each entry is [id or text, bias or false], got [3]"},
        {d::llama, R"({"prompt": [1], "logit_bias": [[3, true]]})", "request: logit_bias: must be a number, got true"},
        {d::llama, R"({"prompt": [1], "dry_sequence_breakers": ["ab"], "dry_multiplier": 1})",
         "request: dry_sequence_breakers: \"ab\" is 2 tokens; a breaker is one token here"},
        {d::llama, R"({"prompt": [1], "grammar": "root ::= \"a\"", "json_schema": {}})",
         "request: grammar: and json_schema are both constraints; give one"},
        {d::llama, R"({"prompt": [1], "repeat_penalty": 0})", "request: repeat_penalty: penalties: "},  // the stage's own check
        {d::llama, R"({"prompt": [1], "logprobs": 2})",
         "request: 'logprobs' is OpenAI's / vLLM's; this request is read as llama.cpp's (use 'n_probs')"},
    };
    for (const auto& [dialect, text, message] : cases)
    {
        INFO(text);
        try
        {
            parse(text, dialect);
            FAIL_CHECK("accepted");
        }
        catch (const invalid_parameter& e)
        {
            const std::string what = e.what();
            if (message.empty())
            {
                CHECK(what.rfind("request: the request is not JSON: ", 0) == 0);
            }
            else if (message.back() == ' ')
            {
                CHECK(what.rfind(message, 0) == 0);
                CHECK(what.size() > message.size());
            }
            else
            {
                CHECK(what == message);
            }
        }
    }
    // the stop strings' 64 KiB, checked as they are read
    CHECK_THROWS_MATCHES(parse(R"({"prompt": [1], "stop": [")" + std::string(40000, 'a') + R"(", ")" +
                               std::string(40000, 'b') + R"("]})"),
                         invalid_parameter, Message("request: stop: the stop strings have more than 65536 bytes"));
    // deep nesting: refused before anything recurses
    const std::string deep = R"({"prompt": [1], "user": )" + std::string(5000, '[') + std::string(5000, ']') + "}";
    CHECK_THROWS_MATCHES(parse(deep), invalid_parameter,
                         Message("request: the request nests objects and arrays deeper than 1000"));
    CHECK_THROWS_MATCHES(parse(std::string(5000, '[') + std::string(5000, ']')), invalid_parameter,
                         Message("request: the request nests objects and arrays deeper than 1000"));
    CHECK_THROWS_MATCHES(parse(R"({"prompt": [1], "seed": 123456789012345678901234567890})"), invalid_parameter,
                         Message("request: the integer 123456789012345678901234567890 is past 64 bits (it would be read as a double, another number)"));
}

TEST_CASE("request: what the context must give", "[request]")
{
    request_context bare;
    bare.vocab_size = 10;
    bare.eos = {9};
    const auto r = parse_request(std::string(R"({"prompt": [1, 2], "stop_token_ids": [3]})"), bare);
    CHECK(r.options.eos == std::vector<token_id>{9});
    CHECK(r.options.vocab == nullptr);
    const std::vector<std::pair<std::string, std::string>> cases = {
        {R"({"prompt": "text"})", "request: prompt: text needs the context's encode (request_context::encode)"},
        {R"({"prompt": [1], "stop": "x"})",
         "request: stop: stop strings need the vocabulary's bytes (request_context::index)"},
        {R"({"prompt": [1], "guided_regex": "a"})",
         "request: guided_regex: a constraint needs the vocabulary's index (request_context::index)"},
        {R"({"prompt": [1], "bad_words": ["a"]})",
         "request: bad_words: text needs the context's encode (request_context::encode)"},
        {R"({"prompt": [12]})", "request: prompt: token id 12 is outside the vocabulary [0, 10)"},
    };
    for (const auto& [text, message] : cases)
    {
        INFO(text);
        CHECK_THROWS_MATCHES(parse_request(text, bare), invalid_parameter, Message(message));
    }
    CHECK_THROWS_MATCHES(parse_request(std::string(R"({"prompt": [1], "dry_multiplier": 0.5})"), bare,
                                       request_dialect::llama),
                         invalid_parameter,
                         Message("request: dry_multiplier: llama.cpp's default sequence breakers are text: they need "
                                 "the context's encode (or give dry_sequence_breakers)"));
    auto zero = context();
    zero.max_tokens = 0;
    CHECK_THROWS_MATCHES(parse_request(R"({"prompt": [1]})", zero), invalid_parameter,
                         Message("request: the context's max_tokens is 0"));
    auto outside = bare;
    outside.eos = {10};
    CHECK_THROWS_MATCHES(parse_request(R"({"prompt": [1]})", outside), invalid_parameter,
                         Message("request: the context's eos id 10 is outside the vocabulary"));
    request_context none;
    CHECK_THROWS_MATCHES(parse_request(std::string(R"({"prompt": [1]})"), none), invalid_parameter,
                         Message("request: the context has no vocabulary (give index or vocab_size)"));
    // a constraint ends a text with the index's eos ids: the context's must be the same
    auto other = context();
    other.eos = {3};
    CHECK_THROWS_MATCHES(parse_request(std::string(R"({"prompt": [1], "guided_regex": "a"})"), other),
                         invalid_parameter,
                         Message("request: guided_regex: a constrained text ends with the index's eos ids, which "
                                 "must be the context's eos ids (and there must be some)"));
    auto throwing = context();
    throwing.encode = [](const std::string& text) -> std::vector<token_id> {
        throw std::invalid_argument("the word '" + text + "' is unknown");
    };
    CHECK_THROWS_MATCHES(parse_request(R"({"prompt": "zebra"})", throwing), invalid_parameter,
                         Message("request: prompt: the word 'zebra' is unknown"));
    auto bad_encode = context();
    bad_encode.encode = [](const std::string&) { return std::vector<token_id>{999}; };
    CHECK_THROWS_MATCHES(parse_request(std::string(R"({"prompt": "a"})"), bad_encode), invalid_parameter,
                         Message("request: prompt: the context's encode returned token id 999, outside the vocabulary"));
}

TEST_CASE("request: a parsed request runs as its fields say", "[request]")
{
    SECTION("stop strings cut the text; include_stop_str_in_output keeps them; max_tokens ends it")
    {
        const auto cut = run(parse(R"({"prompt": [1], "stop": ["d. "], "temperature": 0})"), spelling("word. more"));
        CHECK(cut == std::make_pair(std::string("wor"), finish_reason::stop_string));
        const auto kept = run(parse(R"({"prompt": [1], "stop": "d. ", "include_stop_str_in_output": true})"),
                              spelling("word. more"));
        CHECK(kept == std::make_pair(std::string("word. "), finish_reason::stop_string));
        const auto length = run(parse(R"({"prompt": [1], "max_tokens": 3})"), spelling("word. more"));
        CHECK(length == std::make_pair(std::string("wor"), finish_reason::length));
        const auto ended = run(parse(R"({"prompt": [1]})"), spelling("ok"));
        CHECK(ended == std::make_pair(std::string("ok"), finish_reason::eos));
    }
    SECTION("ignore_eos: vLLM samples eos and carries on, llama.cpp masks it")
    {
        const auto vllm = parse(R"({"prompt": [1], "ignore_eos": true, "max_tokens": 4})");
        sequence seq(sampler(vllm.params), vllm.prompt, vllm.options);
        std::vector<token_id> drawn;
        while (!seq.finished())
        {
            drawn.push_back(seq.step(spelling("")(0)).id);
        }
        CHECK(drawn == std::vector<token_id>(4, eos));
        CHECK(seq.reason() == finish_reason::length);
        const auto llama = parse(R"({"prompt": [1], "ignore_eos": true, "n_predict": 2, "temperature": 0})",
                                 request_dialect::llama);
        const auto masked = run(llama, [](std::size_t) {
            auto row = zeros();
            row(std::size_t(eos)) = 40.0f;
            row(std::size_t('z')) = 1.0f;
            return row;
        });
        CHECK(masked == std::make_pair(std::string("zz"), finish_reason::length));
    }
    SECTION("guided_choice: every text is one of the choices, and each is drawn")
    {
        std::set<std::string> texts;
        for (std::uint64_t seed = 0; seed < 100; ++seed)
        {
            const auto r = parse(R"({"prompt": [1], "guided_choice": ["cat", "yes!", "c"], "seed": )" +
                                 std::to_string(seed) + "}");
            const auto out = run(r, [](std::size_t) { return zeros(); });
            CHECK(out.second == finish_reason::eos);
            texts.insert(out.first);
        }
        CHECK(texts == std::set<std::string>{"cat", "yes!", "c"});
    }
    SECTION("the request holds the vocabulary its text is decoded with (the context may go)")
    {
        completion_request r;
        {
            auto c = context();
            c.index = make_index();  // only the context holds it
            r = parse_request(R"({"prompt": [1], "stop": "k."})", c);
        }
        REQUIRE(r.index != nullptr);
        CHECK(run(r, spelling("ok. fine")) == std::make_pair(std::string("o"), finish_reason::stop_string));
    }
    SECTION("the seed picks the draw: equal seeds, equal texts")
    {
        const auto a = run(parse(R"({"prompt": [1], "seed": 3, "max_tokens": 20})"), [](std::size_t) { return zeros(); });
        const auto b = run(parse(R"({"prompt": [1], "seed": 3, "max_tokens": 20})"), [](std::size_t) { return zeros(); });
        const auto c = run(parse(R"({"prompt": [1], "seed": 4, "max_tokens": 20})"), [](std::size_t) { return zeros(); });
        CHECK(a == b);
        CHECK(a != c);
    }
    SECTION("bad_words and logit_bias act on the row")
    {
        const auto r = parse(R"({"prompt": [1], "bad_words": ["cat"], "logit_bias": {"65": 50}, "temperature": 0,
                                 "max_tokens": 1})");
        const auto out = run(r, [](std::size_t) {
            auto row = zeros();
            row(std::size_t(cat)) = 40.0f;
            row(std::size_t(space_cat)) = 30.0f;
            return row;
        });
        CHECK(out.first == "A");  // cat and " cat" banned, 'A' biased past the rest
    }
}
