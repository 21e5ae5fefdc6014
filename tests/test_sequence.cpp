// sequence.hpp and its text stream: the text of a token stream released as
// it becomes safe, stop strings across token boundaries, the decode step.
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "../tool/tokenizer.hpp"
#include "helpers.hpp"
#include "stats.hpp"

using namespace xsampler;
using Catch::Matchers::Message;

namespace
{
    using detail::text_stream;

    const std::string fffd = "\xEF\xBF\xBD";

    struct streamed
    {
        std::vector<std::string> deltas;
        std::string text;
        std::size_t stop = text_stream::npos, stop_at = text_stream::npos;
    };

    // Feeds the tokens one at a time, taking the safe text after each; the
    // stream finishes after the last token unless a stop string ended it.
    streamed stream(const std::vector<std::string>& tokens, std::vector<std::string> stops, bool include = false,
                    std::size_t min_tokens = 0)
    {
        text_stream s(std::move(stops), include, "test");
        streamed out;
        for (std::size_t t = 0; t < tokens.size() && !s.ended(); ++t)
        {
            s.append(tokens[t], t + 1 > min_tokens);
            if (t + 1 == tokens.size())
            {
                s.finish();
            }
            out.deltas.emplace_back(s.take());
        }
        out.text = s.text();
        out.stop = s.stop_index();
        out.stop_at = s.stop_at();
        return out;
    }

    using strings = std::vector<std::string>;
}

TEST_CASE("text_stream: the plan's worked examples, delta by delta", "[text_stream]")
{
    auto a = stream({"xxE", "N", "Dyy"}, {"END"});  // held back while it may become END
    CHECK(a.deltas == strings{"xx", "", ""});
    CHECK(a.text == "xx");
    CHECK(a.stop == 0);
    CHECK(a.stop_at == 2);
    auto b = stream({"xxE", "N", "Dyy"}, {"END"}, true);  // included: nothing held back, the rest cut
    CHECK(b.deltas == strings{"xxE", "N", "D"});
    CHECK(b.text == "xxEND");
    CHECK(b.stop_at == 2);
    auto c = stream({"caf\xC3", "\xA9!"}, {});  // a character split over two tokens
    CHECK(c.deltas == strings{"caf", "\xC3\xA9!"});
    auto d = stream({"\xF0", "\x9F", "\x98", "\x80"}, {});
    CHECK(d.deltas == strings{"", "", "", "\xF0\x9F\x98\x80"});
    auto e = stream({"caf", "\xC3", "\xA9"}, {"\xC3\xA9"});  // a stop string inside a split character
    CHECK(e.deltas == strings{"caf", "", ""});
    CHECK(e.text == "caf");
    CHECK(e.stop_at == 3);
    auto f = stream({"E", "X"}, {"END"});  // released once it cannot become END
    CHECK(f.deltas == strings{"", "EX"});
    CHECK(f.stop == text_stream::npos);
    auto g = stream({"abc"}, {"abc", "b"});  // the first to complete wins, not the first to start
    CHECK(g.text == "a");
    CHECK(g.stop == 1);
    CHECK(g.stop_at == 1);
    auto h = stream({"ab"}, {"b", "ab"});  // both complete at b: the lower index
    CHECK(h.text == "a");
    CHECK(h.stop == 0);
    auto i = stream({"ab"}, {"ab", "b"});
    CHECK(i.text == "");
    CHECK(i.stop == 0);
    auto j = stream({"\xC3("}, {"("});  // stop_at indexes the text as returned: after U+FFFD, 3
    CHECK(j.deltas == strings{fffd});
    CHECK(j.stop_at == 3);
    auto k = stream({"caf\xC3"}, {});  // the end flushes pending bytes as U+FFFD
    CHECK(k.deltas == strings{"caf" + fffd});
    auto l = stream({"a", "b", "c", "d", "e", "Z"}, {"cd"});
    CHECK(l.deltas == strings{"a", "b", "", ""});
    CHECK(l.text == "ab");
    auto m = stream({"a", "b", "c", "d", "e", "Z"}, {"cd"}, true);
    CHECK(m.deltas == strings{"a", "b", "c", "d"});
    CHECK(m.text == "abcd");
}

TEST_CASE("text_stream: vLLM's stop-string cases (tests/detokenizer/test_check_stop_strings.py)", "[text_stream]")
{
    // " The user is a": single characters, the last five in one token.
    strings tokens;
    for (const char ch : std::string(" The user"))
    {
        tokens.emplace_back(1, ch);
    }
    tokens.emplace_back(" is a");
    for (const strings& stops : {strings{"a", "is"}, strings{"is", "a"}})  // earliest completing, whatever the order
    {
        const auto r = stream(tokens, stops);
        CHECK(r.text == " The user ");
        CHECK(stops[r.stop] == "is");
        CHECK(stream(tokens, stops, true).text == " The user is");
    }
    CHECK(stream({"abc"}, {"abc", "b"}).stop == 1);  // completion position, not start position
    CHECK(stream({"hello world."}, {"."}).stop_at == 11);
    CHECK(stream({"hello world."}, {"."}, true).text == "hello world.");
    CHECK(stream({"hello"}, {"zzz"}).stop == text_stream::npos);
    CHECK(stream({"hello"}, {"zzz"}).text == "hello");
}

TEST_CASE("text_stream: matches count only after min_tokens, and a border of an early match still counts",
          "[text_stream]")
{
    auto a = stream({"a", "a", "a"}, {"aa"}, false, 2);  // "aa" completes in token 2 (too early), again in 3
    CHECK(a.stop_at == 1);
    CHECK(a.text == "a");
    auto b = stream({"x", "y", "x"}, {"x"}, false, 2);
    CHECK(b.text == "xy");
    auto c = stream({"xx", "y"}, {"x"}, false, 1);  // both x's were in the first token
    CHECK(c.stop == text_stream::npos);
    CHECK(c.text == "xxy");
}

TEST_CASE("text_stream: invalid stop strings", "[text_stream]")
{
    CHECK_THROWS_WITH(text_stream({"a", ""}, false, "sequence"), "sequence: stop string 1 is empty");
    CHECK_THROWS_WITH(text_stream({"ok", "caf\xC3"}, false, "sequence"),
                      "sequence: stop string 1 is not valid UTF-8 (byte 3)");
    CHECK_THROWS_WITH(text_stream({std::string(40000, 'a'), std::string(30000, 'b')}, false, "sequence"),
                      "sequence: the stop strings have 70000 bytes, more than 65536");
}

namespace
{
    // A reference written from the definitions, rescanning the whole text
    // after each token: well-formed sequences checked by arithmetic, the
    // proper prefixes of every code point's encoding listed.
    bool well_formed(const std::string& s)
    {
        const auto b0 = static_cast<unsigned char>(s[0]);
        const std::size_t len = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : (b0 >> 3) == 30 ? 4 : 0;
        if (len != s.size())
        {
            return false;
        }
        std::uint32_t cp = len == 1 ? b0 : b0 & (0x7Fu >> len);
        for (std::size_t k = 1; k < len; ++k)
        {
            const auto b = static_cast<unsigned char>(s[k]);
            if ((b >> 6) != 2)
            {
                return false;
            }
            cp = cp << 6 | (b & 0x3Fu);
        }
        const std::size_t shortest = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
        return shortest == len && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    }

    const std::set<std::string>& proper_prefixes()
    {
        static const std::set<std::string> all = [] {
            std::set<std::string> p;
            for (std::uint32_t cp = 0x80; cp <= 0x10FFFF; cp += 64)  // the last byte holds the low 6 bits
            {
                if (cp >= 0xD800 && cp <= 0xDFFF)
                {
                    continue;
                }
                unsigned char b[4];
                xsampler::detail::utf8_encode(cp, b);
                const int len = xsampler::detail::utf8_length(cp);
                for (int j = 1; j < len; ++j)
                {
                    p.insert(std::string(reinterpret_cast<const char*>(b), std::size_t(j)));
                }
            }
            return p;
        }();
        return all;
    }

    // The text of the bytes; a tail that may still become a character is
    // left out, or with flush becomes U+FFFD.
    std::string lossy(const std::string& bytes, bool flush)
    {
        std::string out;
        std::size_t i = 0;
        while (i < bytes.size())
        {
            std::size_t whole = 0;
            for (std::size_t len = 1; len <= 4 && i + len <= bytes.size(); ++len)
            {
                whole = well_formed(bytes.substr(i, len)) ? len : whole;
            }
            if (whole > 0)
            {
                out += bytes.substr(i, whole);
                i += whole;
                continue;
            }
            std::size_t part = 1;  // the maximal subpart: the longest proper prefix here
            for (std::size_t j = 1; j <= 3 && i + j <= bytes.size(); ++j)
            {
                part = proper_prefixes().count(bytes.substr(i, j)) > 0 ? j : part;
            }
            if (i + part == bytes.size() && proper_prefixes().count(bytes.substr(i)) > 0 && !flush)
            {
                break;  // pending
            }
            out += fffd;
            i += part;
        }
        return out;
    }

    std::size_t held_back(const std::string& text, const strings& stops)
    {
        std::size_t h = 0;
        for (const auto& s : stops)
        {
            for (std::size_t len = 1; len < s.size() && len <= text.size(); ++len)
            {
                h = text.compare(text.size() - len, len, s, 0, len) == 0 ? std::max(h, len) : h;
            }
        }
        return h;
    }
}

TEST_CASE("text_stream: streamed text equals a rescanning reference, for any cut into tokens", "[text_stream]")
{
    const strings pieces = {"a", "b", "c", " ", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80",  // é € 😀
                            "\x80", "\xC3", "\xFF", "\xE2\x82", "\xED\xA0\x80", "\xC0\xAF", "\xF4\x90"};
    philox4x32 rng(2026);
    auto below = [&](std::size_t n) { return std::size_t(uniform01(rng) * double(n)); };
    std::size_t stopped = 0, included = 0;
    for (int trial = 0; trial < 10000; ++trial)
    {
        // A third of the texts and stop strings are over {a, b} alone: their
        // stop strings overlap themselves, which the automata's borders decide.
        const bool binary = trial % 3 == 0;
        std::string bytes;
        for (std::size_t n = below(30); n > 0; --n)
        {
            bytes += pieces[below(binary ? 2 : uniform01(rng) < 0.7 ? 7 : pieces.size())];
        }
        strings tokens(1);
        for (const char ch : bytes)
        {
            tokens.back() += ch;
            if (uniform01(rng) < 0.4)
            {
                tokens.emplace_back();
            }
        }
        const std::string whole = lossy(bytes, true);
        strings stops;
        for (std::size_t n = below(5); n > 0; --n)
        {
            std::string s;
            if (!whole.empty() && uniform01(rng) < 0.7)  // from the text, between characters: it may match
            {
                std::size_t from = below(whole.size()), to = from + 1 + below(6);
                while (from > 0 && (static_cast<unsigned char>(whole[from]) >> 6) == 2)
                {
                    --from;
                }
                while (to < whole.size() && (static_cast<unsigned char>(whole[to]) >> 6) == 2)
                {
                    ++to;
                }
                s = whole.substr(from, to - from);
            }
            for (std::size_t k = s.empty() ? (binary ? 2 + below(5) : 1 + below(3)) : 0; k > 0; --k)
            {
                s += pieces[below(binary ? 2 : 5)];
            }
            stops.push_back(s);
        }
        const bool include = uniform01(rng) < 0.3;
        const std::size_t min_tokens = below(4);
        INFO("trial " << trial);
        text_stream s(stops, include, "test");
        std::string released, expected_text, before;
        std::size_t expected_stop = text_stream::npos, expected_at = text_stream::npos;
        for (std::size_t t = 0; t < tokens.size() && !s.ended(); ++t)
        {
            s.append(tokens[t], t + 1 > min_tokens);
            before += tokens[t];
            const std::string now = lossy(before, false);
            const std::string was = lossy(before.substr(0, before.size() - tokens[t].size()), false);
            for (std::size_t e = was.size() + 1; e <= now.size() && expected_stop == text_stream::npos; ++e)
            {
                for (std::size_t k = 0; k < stops.size() && t + 1 > min_tokens; ++k)
                {
                    if (e >= stops[k].size() && now.compare(e - stops[k].size(), stops[k].size(), stops[k]) == 0)
                    {
                        expected_stop = k;
                        expected_at = e - stops[k].size();
                        expected_text = now.substr(0, include ? e : expected_at);
                        break;
                    }
                }
            }
            if (expected_stop == text_stream::npos && t + 1 == tokens.size())
            {
                s.finish();
                expected_text = lossy(before, true);
            }
            released += s.take();
            if (!s.ended())
            {
                const std::size_t h = include ? 0 : held_back(now, stops);
                REQUIRE(released == now.substr(0, now.size() - h));
            }
        }
        REQUIRE(s.stop_index() == expected_stop);
        REQUIRE(s.stop_at() == expected_at);
        REQUIRE(s.text() == expected_text);
        REQUIRE(released == expected_text);
        stopped += expected_stop != text_stream::npos;
        included += include && expected_stop != text_stream::npos;
    }
    CHECK(stopped > 3000);  // the cases reach both endings
    CHECK(included > 500);
}

namespace
{
    // Tokens by their bytes; "<eos>" is special (no bytes).
    struct words
    {
        vocabulary vocab;
        explicit words(std::vector<std::string> tokens)
            : vocab(with_eos(std::move(tokens)), {0})
        {
        }
        static std::vector<std::string> with_eos(std::vector<std::string> t)
        {
            t.insert(t.begin(), "");
            return t;
        }
        token_id operator[](const std::string& bytes) const { return bytes.empty() ? 0 : vocab.find(bytes); }
        // A row whose greedy token is `next` (logit 20), with `second` at 10.
        xt::xtensor<float, 1> row(const std::string& next, const std::string& second = "") const
        {
            xt::xtensor<float, 1> r = xt::zeros<float>({vocab.size()});
            if (!second.empty() || next.empty())
            {
                r(std::size_t((*this)[second])) = 10.0f;
            }
            r(std::size_t((*this)[next])) = 20.0f;
            return r;
        }
    };

    struct stepped
    {
        std::vector<token_id> tokens;
        strings deltas;
        finish_reason reason = finish_reason::none;
        std::string text;
    };

    // Steps a greedy sequence through the script (a row per token) until it ends.
    stepped run(const words& w, const strings& script, sequence_options o, const std::string& second = "")
    {
        o.vocab = &w.vocab;
        basic_sequence<chain<temperature>> s(chain<temperature>(temperature(0.0)), {}, o);
        stepped out;
        for (std::size_t k = 0; !s.finished(); ++k)
        {
            const auto& r = s.step(w.row(k < script.size() ? script[k] : second, second));
            out.tokens.push_back(r.id);
            out.deltas.emplace_back(r.text);
            out.reason = r.finish;
        }
        CHECK(s.reason() == out.reason);
        out.text = s.text();
        return out;
    }
}

TEST_CASE("sequence: each stop, in its order, with the text it leaves", "[sequence]")
{
    const words w({"a", "b", "c", "d", "e", "Z", "</s>", "This text ends with EOS token"});
    sequence_options o;
    o.max_tokens = 10;
    o.stop_strings = {"cd"};
    o.eos = {w["Z"]};  // an ordinary token as eos: its text is left out unless included
    // vLLM's test_stop_string_while_stop_token_terminates, one token at a time
    auto a = run(w, {"a", "b", "c", "d", "e", "Z"}, o);
    CHECK(a.deltas == strings{"a", "b", "", ""});
    CHECK(a.reason == finish_reason::stop_string);
    CHECK(a.text == "ab");
    o.include_stop_str_in_output = true;
    CHECK(run(w, {"a", "b", "c", "d", "e", "Z"}, o).deltas == strings{"a", "b", "c", "d"});
    // eos ends it (kept in the tokens, its text out); included, its text in
    o.stop_strings.clear();
    auto b = run(w, {"a", "Z", "b"}, o);
    CHECK(b.reason == finish_reason::eos);
    CHECK(b.tokens == std::vector<token_id>{w["a"], w["Z"]});
    CHECK(b.text == "aZ");
    o.include_stop_str_in_output = false;
    CHECK(run(w, {"a", "Z", "b"}, o).text == "a");
    // vLLM's test_stop_on_eos_token: pass carries on with the eos text in
    o.eos = {w["</s>"]};
    o.min_tokens = 1;
    o.max_tokens = 3;
    o.eos_mode = eos_policy::pass;
    auto c = run(w, {"This text ends with EOS token", "</s>", "a"}, o);
    CHECK(c.reason == finish_reason::length);
    CHECK(c.text == "This text ends with EOS token</s>a");
    o.eos_mode = eos_policy::stop;
    CHECK(run(w, {"This text ends with EOS token", "</s>", "a"}, o).text == "This text ends with EOS token");
    // mask: eos is never drawn (the second best is)
    o.eos_mode = eos_policy::mask;
    auto d = run(w, {"</s>", "</s>", "</s>"}, o, "b");
    CHECK(d.tokens == std::vector<token_id>{w["b"], w["b"], w["b"]});
    // stop token ids: masked under min_tokens, then stop; text out unless included
    o.eos = {};
    o.eos_mode = eos_policy::stop;
    o.stop_token_ids = {w["e"], w["d"]};
    o.min_tokens = 2;
    o.max_tokens = 6;
    sequence_options seen = o;
    auto e = run(w, {"d", "a", "d", "b"}, o, "c");
    CHECK(e.tokens == std::vector<token_id>{w["c"], w["a"], w["d"]});
    CHECK(e.reason == finish_reason::stop_token);
    CHECK(e.text == "ca");
    seen.include_stop_str_in_output = true;
    CHECK(run(w, {"d", "a", "d", "b"}, seen, "c").text == "cad");
    // stop sequences count after min_tokens; their text is kept
    o.stop_token_ids = {};
    o.stop_sequences = {{w["a"], w["b"]}};
    auto f = run(w, {"a", "b", "a", "b", "c"}, o);
    CHECK(f.reason == finish_reason::stop_sequence);
    CHECK(f.tokens.size() == 4);
    CHECK(f.text == "abab");
    // length: the rest of the text released, a cut character as U+FFFD
    o.stop_sequences = {};
    o.max_tokens = 2;
    const words cut({"a", "\xC3", "b"});
    auto g = run(cut, {"a", "\xC3", "b"}, o);
    CHECK(g.reason == finish_reason::length);
    CHECK(g.deltas == strings{"a", fffd});
}

TEST_CASE("sequence: stop_at indexes the text as returned, after U+FFFD", "[sequence]")
{
    const words w({"\xC3(", "x"});
    sequence_options o;
    o.stop_strings = {"("};
    auto a = run(w, {"\xC3("}, o);
    CHECK(a.reason == finish_reason::stop_string);
    CHECK(a.text == fffd);
    o.vocab = &w.vocab;
    basic_sequence<chain<temperature>> s(chain<temperature>(temperature(0.0)), {}, o);
    s.step(w.row("\xC3("));
    CHECK(s.stop_at() == 3);
    CHECK(s.stop_index() == 0);
}

TEST_CASE("sequence: its own engine draws what the sampler's sample() draws", "[sequence]")
{
    sampling_params p;
    p.temperature = 1.3;
    p.top_p = 0.95;
    p.seed = 77;
    sampler reference(p);
    sequence_options o;
    o.max_tokens = 50;
    o.raw_logprob = o.entropy = true;
    o.top_logprobs = 3;
    std::vector<token_id> history = {5, 6};
    sequence s(sampler(p), history, o);
    for (std::size_t k = 0; k < 50; ++k)
    {
        const auto r = test_helpers::random_row<float>(40, 1000 + k);
        const sampled_token t = reference.sample(r, token_history(token_span(history), 2));
        const step_result& got = s.step(r);
        REQUIRE(got.id == t.id);
        CHECK(got.logprob == t.logprob);
        CHECK(got.raw_logprob == log_softmax(r)(std::size_t(t.id)));
        CHECK(got.top.size() == 3);
        CHECK(got.top[0].logprob >= got.top[2].logprob);
        CHECK(std::isfinite(got.entropy));
        history.push_back(t.id);
    }
    CHECK(s.reason() == finish_reason::length);
    CHECK(std::vector<token_id>(s.generated().begin(), s.generated().end()) ==
          std::vector<token_id>(history.begin() + 2, history.end()));
    CHECK(s.history().prompt_length() == 2);
    // reset: the same request again, from the engine's start
    s.reset(token_span(history.data(), 2));
    CHECK(s.step(test_helpers::random_row<float>(40, 1000)).id == history[2]);
    // another stream of the same seed draws differently
    o.stream = 1;
    sequence other(sampler(p), token_span(history.data(), 2), o);
    std::size_t same = 0;
    for (std::size_t k = 0; k < 50; ++k)
    {
        same += other.step(test_helpers::random_row<float>(40, 1000 + k)).id == history[2 + k];
    }
    CHECK(same < 40);
}

TEST_CASE("sequence: processed top log-probabilities are the drawn distribution's, and a step in a given workspace",
          "[sequence]")
{
    sampling_params p;
    p.temperature = 0.7;
    p.top_k = 5;
    p.seed = 9;
    sequence_options o;
    o.max_tokens = 40;
    o.top_logprobs = 8;
    o.top_source = logprob_source::processed;
    sequence s(sampler(p), {}, o);
    o.top_logprobs = 3;
    sequence three(sampler(p), {}, o);
    sequence other(sampler(p), {}, o);
    sampler reference(p);
    workspace ws;
    for (std::size_t k = 0; k < 40; ++k)
    {
        const auto r = test_helpers::random_row<float>(30, 300 + k, 2.0, k % 3 == 0);
        const distribution d = reference.final_distribution(r, s.history());
        const step_result& got = s.step(r);
        REQUIRE(got.top.size() == 5);  // only the kept tokens: top_k 5 of 30
        bool drawn_listed = false;
        for (std::size_t i = 0; i < 5; ++i)
        {
            CHECK(got.top[i].id == d.ids[i]);
            CHECK(std::exp(got.top[i].logprob) == Approx(d.probs[i]).epsilon(1e-12));
            if (got.top[i].id == got.id)
            {
                CHECK(got.top[i].logprob == got.logprob);  // the same bits as the draw's
                drawn_listed = true;
            }
        }
        CHECK(drawn_listed);
        const std::vector<sampled_token> five(got.top.begin(), got.top.end());
        // step(row, ws): the same token and lists, in a workspace another sequence also uses
        other.step(test_helpers::random_row<float>(50, k), ws);
        const step_result& in_ws = three.step(r, ws);
        CHECK(in_ws.id == got.id);
        CHECK(in_ws.logprob == got.logprob);
        REQUIRE(in_ws.top.size() == 3);
        for (std::size_t i = 0; i < 3; ++i)
        {
            CHECK(in_ws.top[i].id == five[i].id);
            CHECK(in_ws.top[i].logprob == five[i].logprob);
        }
    }
    workspace fresh;
    sequence in_fresh(sampler(p), {}, o);
    in_fresh.step(test_helpers::random_row<float>(30, 1), fresh);
    CHECK(fresh.get<float>().vocab() == 30);  // the step ran in the workspace given
    // Greedy: the only kept token, log-probability 0 (vLLM's processed logprobs).
    p.temperature = 0;
    sequence greedy(sampler(p), {}, o);
    const auto r = test_helpers::random_row<float>(30, 1);
    const step_result& g = greedy.step(r);
    REQUIRE(g.top.size() == 1);
    CHECK(g.top[0].id == g.id);
    CHECK(g.top[0].logprob == 0.0);
    CHECK(g.logprob == 0.0);
    // A dense set lists its unmasked tokens only.
    sampling_params plain;
    o.top_logprobs = 10;
    sequence dense(sampler(plain), {}, o);
    xt::xtensor<float, 1> masked = test_helpers::random_row<float>(6, 2);
    masked(1) = masked(4) = -std::numeric_limits<float>::infinity();
    const step_result& m = dense.step(masked);
    CHECK(m.top.size() == 4);
    const xt::xtensor<double, 1> want = log_softmax(masked);
    for (const auto& t : m.top)
    {
        CHECK(t.logprob == Approx(want(std::size_t(t.id))).margin(1e-6));  // from float weights, as the draw's
    }
}

TEST_CASE("prompt_logprobs: each prompt token under the row before it, as log_softmax gives it", "[sequence]")
{
    const auto rows = test_helpers::random_matrix<float>(5, 30, 41);
    const std::vector<token_id> prompt = {7, 3, 29, 3, 0};
    for (const std::size_t given : {4, 5})
    {
        const xt::xtensor<float, 2> used = xt::view(rows, xt::range(0, given), xt::all());
        const auto got = prompt_logprobs(used, prompt, 3);
        REQUIRE(got.size() == 5);
        CHECK(got[0].id == 7);
        CHECK(std::isnan(got[0].logprob));  // nothing scores the first token (vLLM: None)
        CHECK(got[0].top.empty());
        for (std::size_t i = 1; i < 5; ++i)
        {
            const xt::xtensor<float, 1> row = xt::view(rows, i - 1, xt::all());
            const xt::xtensor<double, 1> want = log_softmax(row);
            CHECK(got[i].id == prompt[i]);
            CHECK(got[i].logprob == want(std::size_t(prompt[i])));
            REQUIRE(got[i].top.size() == 3);
            std::vector<std::size_t> order(30);
            std::iota(order.begin(), order.end(), 0);
            std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return want(a) > want(b); });
            for (std::size_t k = 0; k < 3; ++k)
            {
                CHECK(got[i].top[k].id == token_id(order[k]));
                CHECK(got[i].top[k].logprob == want(order[k]));
            }
        }
    }
    // The last row (the first generated token's) is not read.
    xt::xtensor<float, 2> last_nan = rows;
    xt::view(last_nan, 4, xt::all()) = std::numeric_limits<float>::quiet_NaN();
    CHECK(prompt_logprobs(last_nan, prompt).size() == 5);
    xt::xtensor<float, 2> nan = rows;
    nan(2, 6) = std::numeric_limits<float>::quiet_NaN();
    CHECK_THROWS_MATCHES(prompt_logprobs(nan, prompt), invalid_logits,
                         Message("prompt_logprobs: row 2: logits: NaN at index 6"));
    CHECK_THROWS_MATCHES(prompt_logprobs(rows, token_span(prompt.data(), 3)), invalid_parameter,
                         Message("prompt_logprobs: 5 rows for a prompt of 3 tokens (give 2 or 3)"));
    CHECK_THROWS_MATCHES(prompt_logprobs(rows, token_span()), invalid_parameter,
                         Message("prompt_logprobs: 5 rows for a prompt of 0 tokens (give 0)"));
    const std::vector<token_id> wide = {1, 30};
    CHECK_THROWS_MATCHES(prompt_logprobs(xt::xtensor<float, 2>(xt::view(rows, xt::range(0, 1), xt::all())), wide),
                         invalid_parameter, Message("prompt_logprobs: prompt token 1 (id 30) is outside the vocabulary of 30"));
    CHECK_THROWS_MATCHES(prompt_logprobs(xt::xtensor<float, 1>(xt::view(rows, 0, xt::all())), prompt), invalid_logits,
                         Message("prompt_logprobs: logits must be 2-D [prompt, vocab], got 1-D"));
    CHECK(prompt_logprobs(xt::xtensor<float, 2>::from_shape({0, 30}), token_span()).empty());
}

namespace
{
    // The statistic of `calls` samples of k = 2 from p = {.1, .2, .3, .4}
    // against the law of two draws without replacement: p_a p_b / (1 - p_a)
    // over the 12 ordered pairs (dof 11). `sample(rng, out)` fills out.
    template <class F>
    double ordered_pairs_statistic(F&& sample, std::size_t calls)
    {
        const double p[4] = {0.1, 0.2, 0.3, 0.4};
        std::vector<double> observed(16, 0.0), expected(16, 0.0);
        philox4x32 rng(2024, 0);
        std::vector<sampled_token> out;
        for (std::size_t i = 0; i < calls; ++i)
        {
            sample(rng, out);
            REQUIRE(out.size() == 2);
            REQUIRE(out[0].id != out[1].id);
            observed[std::size_t(out[0].id * 4 + out[1].id)] += 1.0;
        }
        for (std::size_t a = 0; a < 4; ++a)
        {
            for (std::size_t b = 0; b < 4; ++b)
            {
                expected[a * 4 + b] = a == b ? 0.0 : double(calls) * p[a] * p[b] / (1.0 - p[a]);
            }
        }
        return test_stats::chi_square(observed, expected);
    }
}

TEST_CASE("sample_distinct: k tokens without replacement follow sequential draws (chi-square, with power)",
          "[sequence][distinct][stats]")
{
    const xt::xtensor<double, 1> logp = {std::log(0.1), std::log(0.2), std::log(0.3), std::log(0.4)};
    chain plain{};
    const double right = ordered_pairs_statistic(
        [&](philox4x32& rng, std::vector<sampled_token>& out) {
            const std::uint64_t before = rng.position();
            REQUIRE(plain.sample_distinct(logp, {}, 2, rng, out) == 2);
            REQUIRE(rng.position() == before + 4);  // V uniforms, always
        },
        100000);
    CHECK(right < test_stats::chi_square_bound(11));
    // Power: the same harness and uniforms with a wrong race time (U / w, not
    // -log(1 - U) / w) fails it by far.
    const double wrong = ordered_pairs_statistic(
        [](philox4x32& rng, std::vector<sampled_token>& out) {
            const double p[4] = {0.1, 0.2, 0.3, 0.4};
            out.clear();
            for (token_id i = 0; i < 4; ++i)
            {
                out.push_back({i, uniform01(rng) / p[i]});
            }
            std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.logprob < b.logprob; });
            out.resize(2);
        },
        100000);
    CHECK(wrong > 10 * test_stats::chi_square_bound(11));
}

TEMPLATE_TEST_CASE("sample_distinct: ordered triples after top_p against enumeration, log-probs, errors",
                   "[sequence][distinct][stats]", float, double)
{
    using T = TestType;
    const double p[6] = {0.05, 0.30, 0.10, 0.25, 0.02, 0.28};
    xt::xtensor<T, 1> logits = xt::empty<T>({std::size_t(6)});
    for (std::size_t i = 0; i < 6; ++i)
    {
        logits(i) = T(std::log(p[i]));
    }
    chain nucleus{top_p{0.97}};  // keeps 1, 5, 3, 2, 0: a sparse set of 5
    const distribution d = nucleus.final_distribution(logits);
    REQUIRE(d.ids == std::vector<token_id>{1, 5, 3, 2, 0});
    std::vector<double> q(6, 0.0);
    for (std::size_t i = 0; i < d.ids.size(); ++i)
    {
        q[std::size_t(d.ids[i])] = d.probs[i];
    }
    const std::size_t calls = 100000;
    std::vector<double> observed(216, 0.0), expected(216, 0.0);
    philox4x32 rng(77, 3);
    std::vector<sampled_token> out;
    for (std::size_t i = 0; i < calls; ++i)
    {
        const std::uint64_t before = rng.position();
        REQUIRE(nucleus.sample_distinct(logits, {}, 3, rng, out) == 3);
        REQUIRE(rng.position() == before + 6);  // one uniform per id, the masked one's skipped
        observed[std::size_t(out[0].id * 36 + out[1].id * 6 + out[2].id)] += 1.0;
        for (const auto& t : out)
        {
            REQUIRE(t.logprob == Approx(std::log(q[std::size_t(t.id)])).margin(1e-12));
        }
    }
    std::size_t cells = 0;
    for (std::size_t a = 0; a < 6; ++a)
    {
        for (std::size_t b = 0; b < 6; ++b)
        {
            for (std::size_t c = 0; c < 6; ++c)
            {
                if (a != b && b != c && a != c && q[a] > 0 && q[b] > 0 && q[c] > 0)
                {
                    expected[a * 36 + b * 6 + c] = double(calls) * q[a] * q[b] / (1.0 - q[a]) * q[c] / (1.0 - q[a] - q[b]);
                    ++cells;
                }
            }
        }
    }
    REQUIRE(cells == 60);
    CHECK(test_stats::chi_square(observed, expected) < test_stats::chi_square_bound(59));
    // The same engine state gives the same tokens; fewer kept than k gives them all.
    philox4x32 a(5), b(5);
    std::vector<sampled_token> first, second;
    nucleus.sample_distinct(logits, {}, 4, a, first);
    nucleus.sample_distinct(logits, {}, 4, b, second);
    REQUIRE(first.size() == 4);
    for (std::size_t i = 0; i < 4; ++i)
    {
        CHECK(first[i].id == second[i].id);
    }
    chain two{top_k{2}};
    CHECK(two.sample_distinct(logits, {}, 5, a, out) == 2);
    CHECK(std::set<token_id>{out[0].id, out[1].id} == std::set<token_id>{1, 5});
    CHECK_THROWS_MATCHES(two.sample_distinct(logits, {}, 0, a, out), invalid_parameter,
                         Message("sample_distinct: k must be in [1, 6], got 0"));
    CHECK_THROWS_MATCHES(two.sample_distinct(logits, {}, 7, a, out), invalid_parameter,
                         Message("sample_distinct: k must be in [1, 6], got 7"));
    const philox4x32 unmoved = a;
    chain xtc_chain{xtc{1.0, 0.1}};  // a random filter: k is checked before it draws
    CHECK_THROWS(xtc_chain.sample_distinct(logits, {}, 7, a, out));
    CHECK(a == unmoved);
    // Greedy keeps one token: it alone, with log-probability 0.
    chain greedy_chain{temperature{0.0}};
    CHECK(greedy_chain.sample_distinct(logits, {}, 3, a, out) == 1);
    CHECK(out[0].id == 1);
    CHECK(out[0].logprob == 0.0);
}

TEST_CASE("sample_n: sample i is stream i of the seed, and best_of keeps the best by raw cumulative log-probability",
          "[sequence][sample_n]")
{
    // A Markov model over 5 tokens (0 = eos): the row of the last token.
    const auto table = test_helpers::random_matrix<double>(5, 5, 13, 1.0);
    const auto model = [&](token_span t) {
        return xt::xtensor<double, 1>(xt::view(table, std::size_t(t[t.size() - 1]), xt::all()));
    };
    sampling_params p;
    p.temperature = 1.3;
    p.top_k = 4;
    p.seed = 11;
    const sampler s(p);
    generate_options o;
    o.max_tokens = 4;
    o.eos = {0};
    const std::vector<token_id> prompt = {2};
    const auto alone = [&](std::uint64_t seed, std::uint64_t i, const generate_options& options) {
        sampler copy(p);
        philox4x32 rng(seed, i);
        return generate(model, prompt, copy, options, rng);
    };
    const auto three = sample_n(model, prompt, s, o, 3);
    REQUIRE(three.size() == 3);
    for (std::uint64_t i = 0; i < 3; ++i)
    {
        const generation g = alone(11, i, o);
        CHECK(three[i].tokens == g.tokens);
        CHECK(three[i].logprobs == g.logprobs);
        CHECK(three[i].model_logprobs.empty());
    }
    CHECK(sample_n(model, prompt, s, o, 1, 0, 12)[0].tokens == alone(12, 0, o).tokens);
    // best_of 8, n 3: the three best of the eight streams by the sum of raw log-probabilities.
    generate_options raw = o;
    raw.model_logprobs = true;
    std::vector<generation> all;
    std::set<std::vector<token_id>> distinct;
    std::vector<std::pair<double, std::size_t>> scores;
    for (std::uint64_t i = 0; i < 8; ++i)
    {
        all.push_back(alone(11, i, raw));
        distinct.insert(all.back().tokens);
        double sum = 0.0;
        for (const double l : all.back().model_logprobs)
        {
            sum += l;
        }
        scores.push_back({-sum, std::size_t(i)});  // best first, ties to the lower index
    }
    REQUIRE(distinct.size() >= 4);
    std::sort(scores.begin(), scores.end());
    const auto best = sample_n(model, prompt, s, o, 3, 8);
    REQUIRE(best.size() == 3);
    for (std::size_t j = 0; j < 3; ++j)
    {
        CHECK(best[j].tokens == all[scores[j].second].tokens);
        CHECK(best[j].model_logprobs.empty());  // not asked for
    }
    CHECK(sample_n(model, prompt, s, raw, 3, 8)[2].model_logprobs == all[scores[2].second].model_logprobs);
    CHECK_THROWS_MATCHES(sample_n(model, prompt, s, o, 0), invalid_parameter, Message("sample_n: n must be >= 1, got 0"));
    CHECK_THROWS_MATCHES(sample_n(model, prompt, s, o, 3, 2), invalid_parameter,
                         Message("sample_n: best_of 2 is less than n 3"));
}

TEST_CASE("sequence: a bad row or token leaves it as before, errors name the step", "[sequence][errors]")
{
    sampling_params p;
    p.seed = 3;
    const words w({"a", "b", "c"});
    sequence_options o;
    o.vocab = &w.vocab;
    o.max_tokens = 8;
    const std::vector<token_id> prompt = {1};
    sequence s(sampler(p), prompt, o);
    sequence uninterrupted(sampler(p), prompt, o);
    auto good = [](std::size_t k) { return test_helpers::random_row<float>(4, 50 + k, 1.0); };
    for (std::size_t k = 0; k < 3; ++k)
    {
        REQUIRE(s.step(good(k)).id == uninterrupted.step(good(k)).id);
    }
    const std::string text = s.text();
    const auto position = s.engine();
    xt::xtensor<float, 1> nan = good(3);
    nan(1) = std::numeric_limits<float>::quiet_NaN();
    CHECK_THROWS_MATCHES(s.step(nan), invalid_logits, Message("step 3: logits: NaN at index 1"));
    xt::xtensor<float, 1> wide = xt::zeros<float>({6});
    wide(5) = 50.0f;  // drawn, and outside the vocabulary of 4
    CHECK_THROWS_MATCHES(s.step(wide), invalid_parameter, Message("sequence: token 5 is outside the vocabulary of 4"));
    CHECK(s.generated().size() == 3);
    CHECK(s.text() == text);
    CHECK(s.engine() == position);
    for (std::size_t k = 3; k < 8; ++k)
    {
        REQUIRE(s.step(good(k)).id == uninterrupted.step(good(k)).id);
    }
    CHECK(s.text() == uninterrupted.text());
    CHECK_THROWS_MATCHES(s.step(good(0)), invalid_use, Message("sequence: step after the end (length)"));
    CHECK_THROWS_MATCHES(s.finish(finish_reason::cancelled), invalid_use, Message("sequence: finish after the end"));
}

TEST_CASE("sequence: finish from outside releases the held text, and bad options are errors", "[sequence][errors]")
{
    const words w({"x", "E", "N"});
    sequence_options o;
    o.vocab = &w.vocab;
    o.stop_strings = {"END"};
    basic_sequence<chain<temperature>> s(chain<temperature>(temperature(0.0)), {}, o);
    CHECK(s.step(w.row("x")).text == "x");
    CHECK(s.step(w.row("E")).text == "");  // it may become END
    CHECK_THROWS_MATCHES(s.finish(finish_reason::none), invalid_use,
                         Message("sequence: finish(none): only cancelled or length end it from outside"));
    CHECK_THROWS_MATCHES(s.finish(finish_reason::eos), invalid_use,
                         Message("sequence: finish(eos): only cancelled or length end it from outside"));
    const auto& r = s.finish(finish_reason::cancelled);
    CHECK(r.text == "E");
    CHECK(r.finish == finish_reason::cancelled);
    CHECK(s.text() == "xE");
    o.max_tokens = 0;
    CHECK(sequence(sampler(sampling_params()), {}, o).reason() == finish_reason::length);
    o.max_tokens = 2;
    o.min_tokens = 3;
    CHECK_THROWS_MATCHES(sequence(sampler(sampling_params()), {}, o), invalid_parameter,
                         Message("sequence: min_tokens 3 exceeds max_tokens 2"));
    o.min_tokens = 0;
    o.stop_sequences = {{1}, {}};
    CHECK_THROWS_MATCHES(sequence(sampler(sampling_params()), {}, o), invalid_parameter,
                         Message("sequence: stop sequence 1 is empty"));
    o.stop_sequences = {};
    o.stop_token_ids = {-2};
    CHECK_THROWS_MATCHES(sequence(sampler(sampling_params()), {}, o), invalid_parameter,
                         Message("sequence: stop token id -2 is negative"));
    o.stop_token_ids = {};
    o.vocab = nullptr;
    CHECK_THROWS_MATCHES(sequence(sampler(sampling_params()), {}, o), invalid_parameter,
                         Message("sequence: stop strings need a vocabulary (options.vocab)"));
}

TEST_CASE("sequence: fork draws stream i of the seed, reproducibly and independently", "[sequence]")
{
    sampling_params p;
    p.temperature = 1.0;
    p.seed = 11;
    sequence_options o;
    o.max_tokens = 30;
    o.raw_logprob = true;
    const std::vector<token_id> prompt = {2};
    auto rows = [](std::size_t k) { return test_helpers::random_row<double>(16, 300 + k, 1.0); };
    sequence original(sampler(p), prompt, o);
    sequence forked = original.fork(3);
    o.stream = 3;
    sequence built(sampler(p), prompt, o);
    double cumulative = 0;
    for (std::size_t k = 0; k < 30; ++k)
    {
        const step_result& a = forked.step(rows(k));
        REQUIRE(a.id == built.step(rows(k)).id);
        cumulative += a.raw_logprob;
    }
    CHECK(forked.cumulative_logprob() == cumulative);
    CHECK(forked.cumulative_logprob() == built.cumulative_logprob());
    CHECK(original.generated().size() == 0);  // untouched by its fork
    // Independence: the first tokens of streams 0 and 1 of 20,000 seeds
    // against p_i p_j (dof 15).
    const auto logits = test_helpers::logits_of<double>({0.1, 0.2, 0.3, 0.4});
    const double probs[] = {0.1, 0.2, 0.3, 0.4};
    std::vector<double> observed(16, 0.0), expected(16, 0.0);
    constexpr std::size_t n = 20000;
    sequence_options one;
    one.max_tokens = 1;
    for (std::size_t seed = 0; seed < n; ++seed)
    {
        one.seed = seed;
        basic_sequence<chain<temperature>> s0(chain<temperature>(temperature(1.0)), {}, one);
        auto s1 = s0.fork(1);
        observed[std::size_t(s0.step(logits).id) * 4 + std::size_t(s1.step(logits).id)] += 1;
    }
    for (std::size_t c = 0; c < 16; ++c)
    {
        expected[c] = double(n) * probs[c / 4] * probs[c % 4];
    }
    CHECK(test_stats::chi_square(observed, expected) < test_stats::chi_square_bound(15));
    // The power of the test: stream 1 repeating stream 0 (fully dependent) fails it.
    std::vector<double> same(16, 0.0);
    for (std::size_t c = 0; c < 4; ++c)
    {
        same[c * 5] = observed[c * 4] + observed[c * 4 + 1] + observed[c * 4 + 2] + observed[c * 4 + 3];
    }
    CHECK(test_stats::chi_square(same, expected) > test_stats::chi_square_bound(15));
}

TEST_CASE("sequence: vLLM's min_tokens with a stop string, over GPT-2's tokens (tests/detokenizer/test_min_tokens.py)",
          "[sequence]")
{
    const gpt2_tokenizer gpt2(XSAMPLER_GPT2_DIR);
    const std::string sentence = "Hello, my name is Lee, and I'm a student in the college of engineering";
    const std::vector<token_id> all = gpt2.encode(sentence);
    // the split vLLM's numbers rest on (OPT's vocabulary is GPT-2's BPE)
    REQUIRE(all.size() > 12);
    const strings expected_split = {"Hello", ",", " my", " name", " is", " Lee", ",", " and", " I", "'m", " a", " student"};
    for (std::size_t i = 0; i < expected_split.size(); ++i)
    {
        REQUIRE(gpt2.vocab().bytes(all[i]) == expected_split[i]);
    }
    const std::vector<token_id> prompt(all.begin(), all.begin() + 4);
    const token_id eos = 50256;
    auto text_of = [&](std::size_t min_tokens, strings stops) {
        sequence_options o;
        o.min_tokens = min_tokens;
        o.stop_strings = std::move(stops);
        o.eos = {eos};
        o.vocab = &gpt2.vocab();
        basic_sequence<chain<temperature>> s(chain<temperature>(temperature(0.0)), prompt, o);
        std::string streamed;
        while (!s.finished())
        {
            const std::size_t at = s.history().size();
            xt::xtensor<float, 1> row = xt::zeros<float>({std::size_t(gpt2.vocab().size())});
            row(std::size_t(at < all.size() ? all[at] : eos)) = 20.0f;
            streamed += s.step(row).text;
        }
        CHECK(streamed == s.text());
        return s.text();
    };
    CHECK(text_of(0, {}) == " is Lee, and I'm a student in the college of engineering");
    CHECK(text_of(0, {"e"}) == " is L");
    CHECK(text_of(5, {"e"}) == " is Lee, and I'm a stud");
}
