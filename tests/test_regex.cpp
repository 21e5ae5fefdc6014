// regex.hpp: compile_regex against std::regex (ECMAScript) on many patterns
// and strings, its UTF-8 semantics, the DFA's invariants (every state live,
// distances, completion bytes, minimality), its limits and its errors.
#include <cstdint>
#include <deque>
#include <map>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "texts.hpp"

#include <xsampler/regex.hpp>

using namespace xsampler;

namespace
{
    regex_options searching()
    {
        regex_options o;
        o.search = true;
        return o;
    }

    /// The texts a pattern is checked on: every short string over its
    /// alphabet, random strings over it, and random edits of its examples.
    std::vector<std::string> texts_for(const std::string& alphabet, const std::vector<std::string>& examples,
                                       std::uint32_t seed)
    {
        std::size_t len = 0;
        for (std::size_t count = 1; len < 6 && count * alphabet.size() <= 4000; count *= alphabet.size())
        {
            ++len;
        }
        std::vector<std::string> out = test_texts::all_strings(alphabet, len);
        std::mt19937 rng(seed);
        auto pick = [&](std::size_t n) { return std::size_t(rng() % n); };
        for (int i = 0; i < 300; ++i)
        {
            std::string s;
            const std::size_t n = pick(15);
            for (std::size_t k = 0; k < n; ++k)
            {
                s += alphabet[pick(alphabet.size())];
            }
            out.push_back(s);
        }
        for (const std::string& e : examples)
        {
            out.push_back(e);
            for (int i = 0; i < 100; ++i)
            {
                std::string s = e;
                for (int edits = 1 + int(pick(2)); edits > 0; --edits)
                {
                    const std::size_t at = pick(s.size() + 1);
                    const char c = alphabet[pick(alphabet.size())];
                    switch (pick(3))
                    {
                    case 0: s.insert(s.begin() + std::ptrdiff_t(at), c); break;
                    case 1:
                        if (at < s.size())
                        {
                            s.erase(at, 1);
                        }
                        break;
                    default:
                        if (at < s.size())
                        {
                            s[at] = c;
                        }
                    }
                }
                out.push_back(s);
            }
        }
        return out;
    }

    /// Shortest distance to an accepting state from each state, by forward
    /// BFS from each one (brute force).
    std::size_t brute_distance(const byte_dfa& dfa, std::int32_t from)
    {
        std::vector<std::size_t> dist(dfa.size(), SIZE_MAX);
        std::deque<std::int32_t> queue{from};
        dist[std::size_t(from)] = 0;
        while (!queue.empty())
        {
            const std::int32_t s = queue.front();
            queue.pop_front();
            if (dfa.accepting(s))
            {
                return dist[std::size_t(s)];
            }
            for (unsigned b = 0; b < 256; ++b)
            {
                const std::int32_t t = dfa.next(s, static_cast<unsigned char>(b));
                if (t != byte_dfa::dead && dist[std::size_t(t)] == SIZE_MAX)
                {
                    dist[std::size_t(t)] = dist[std::size_t(s)] + 1;
                    queue.push_back(t);
                }
            }
        }
        return SIZE_MAX;  // not live
    }

    /// The number of classes of equivalent states, by Moore's refinement
    /// (brute force): a minimal DFA has one state per class.
    std::size_t equivalence_classes(const byte_dfa& dfa)
    {
        const std::size_t n = dfa.size();
        std::vector<int> cls(n);
        for (std::size_t s = 0; s < n; ++s)
        {
            cls[s] = dfa.accepting(std::int32_t(s)) ? 1 : 0;
        }
        std::size_t count = 0;
        for (;;)
        {
            std::map<std::vector<int>, int> ids;
            std::vector<int> next_cls(n);
            for (std::size_t s = 0; s < n; ++s)
            {
                std::vector<int> sig{cls[s]};
                for (unsigned b = 0; b < 256; ++b)
                {
                    const std::int32_t t = dfa.next(std::int32_t(s), static_cast<unsigned char>(b));
                    sig.push_back(t == byte_dfa::dead ? -1 : cls[std::size_t(t)]);
                }
                next_cls[s] = ids.emplace(sig, int(ids.size())).first->second;
            }
            cls = next_cls;
            if (ids.size() == count)
            {
                return count;
            }
            count = ids.size();
        }
    }

    void check_invariants(const byte_dfa& dfa)
    {
        REQUIRE(dfa.size() >= 1);
        if (dfa.size() <= 300)
        {
            REQUIRE(equivalence_classes(dfa) == dfa.size());
        }
        for (std::int32_t s = 0; s < std::int32_t(dfa.size()); ++s)
        {
            for (unsigned b = 0; b < 256; ++b)
            {
                const std::int32_t t = dfa.next(s, static_cast<unsigned char>(b));
                REQUIRE((t == byte_dfa::dead || (t >= 0 && t < std::int32_t(dfa.size()))));
            }
            // live, and distance() is the true shortest distance
            REQUIRE(brute_distance(dfa, s) == dfa.distance(s));
            REQUIRE(dfa.accepting(s) == (dfa.distance(s) == 0));
            // following completion_byte accepts after exactly distance() bytes
            std::int32_t cur = s;
            for (std::size_t step = 0; step < dfa.distance(s); ++step)
            {
                REQUIRE_FALSE(dfa.accepting(cur));
                const unsigned char b = dfa.completion_byte(cur);
                const std::int32_t t = dfa.next(cur, b);
                REQUIRE(t != byte_dfa::dead);
                REQUIRE(dfa.distance(t) + 1 == dfa.distance(cur));
                for (unsigned smaller = 0; smaller < b; ++smaller)
                {
                    const std::int32_t u = dfa.next(cur, static_cast<unsigned char>(smaller));
                    REQUIRE((u == byte_dfa::dead || dfa.distance(u) + 1 != dfa.distance(cur)));
                }
                cur = t;
            }
            REQUIRE(dfa.accepting(cur));
        }
    }

    struct agreement_case
    {
        const char* pattern;
        std::string alphabet;
        std::vector<std::string> examples;
    };

    const std::vector<agreement_case>& agreement_cases()
    {
        static const std::vector<agreement_case> cases = {
            {R"(\d{4}-\d{2}-\d{2})", "09-a", {"2024-01-31", "0000-00-00"}},
            {R"(\(?\d{3}\)?[-. ]?\d{3}[-. ]?\d{4})", "1(-) .", {"(555) 123-4567", "555.123.4567", "5551234567"}},
            {R"([a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,})", "a.@Z-1", {"a.b@c.de", "x@y.zz"}},
            {"cat|dog|bird", "catdogbir", {"cat", "dog", "bird"}},
            {"(a|b)*abb", "abc", {"abb", "babb"}},
            {"((ab|c)*d)+", "abcd", {"abcd", "dd"}},
            {"a{2,4}b{0,2}", "ab", {"aab", "aaaabb"}},
            {"x{3}", "xy", {"xxx"}},
            {"x{2,}y", "xy", {"xxy", "xxxxy"}},
            {"[^abc]+", "abcd-", {"d-d"}},
            {"[a-f0-9]{2,3}", "af09g", {"a0", "f9a"}},
            {R"(\w+\s\W?)", "a_ -!\t", {"ab !", "a\t"}},
            {"colou?r", "colur", {"color", "colour"}},
            {"(?:ab)?c*", "abc", {"abcc", "c"}},
            {".+", "a\n\rb", {"ab"}},
            {"^a|b$", "abc", {"a", "b"}},
            {"^ab", "abc", {"ab"}},
            {"ab$", "abc", {"ab"}},
            {"^(ab|c)$", "abc", {"ab", "c"}},
            {R"(\.\*\+\?\|\(\)\[\]\{\}\^\$\\\/\-)", R"(.*+?|()[]{}^$\/-)", {R"(.*+?|()[]{}^$\/-)"}},
            {R"([\d\-]+)", "1-a", {"1-1"}},
            {"[-a][a-][\\]]", "a-]b", {"-a]", "a-]"}},
            {"a??b*?", "ab", {"ab", "abbb"}},
            {"(a*)*b", "ab", {"aab", "b"}},
            {"(a|)+b", "ab", {"aab", "b"}},
            {R"(\x41\u0042\t)", "AB\tC", {"AB\t"}},
            {R"(0x[0-9A-Fa-f]+)", "0xFg1", {"0xF1"}},
            {R"(\d+(\.\d+)?(,\s*\d+(\.\d+)?)*)", "1., ", {"1.1, 2", "1,1"}},
            {R"(-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?)", "-01.e+", {"-0.1e+1", "10E1"}},
            {"", "a", {}},
            {"a{0}b", "ab", {"b"}},
            {R"([^\d\s])", "1 a\t", {"a"}},
            {R"([\w.]+|\d{1,3})", "a.1 ", {"a.1", "123"}},
            {"(a(b(c)?)?)?d", "abcd", {"abcd", "abd", "d"}},
            {"[^x]y|x[^y]", "xyz", {"ay", "xz"}},
            {R"(\bcat\b)", "cat s", {"cat", "a cat s", "cats"}},
            {R"(\w\Bat\B\w)", "cat s", {"cats", "catsat", "ats"}},
            {R"(a\b|\b-)", "a- ", {"a", "a -", "-"}},
            {R"(\b\w+\b(\s\b\w+\b)*)", "ab -", {"ab ab", "a"}},
            {R"(\B|x\B-|^\b$)", "x- ", {"", " ", "x-"}},
            {R"(\b\B|(\b)+a(\B)*)", "ab", {"a", "ab"}},
        };
        return cases;
    }
}

TEST_CASE("compile_regex agrees with std::regex on ASCII patterns and texts", "[regex]")
{
    std::uint32_t seed = 1;
    for (const agreement_case& c : agreement_cases())
    {
        INFO("pattern: " << c.pattern);
        const std::regex re(c.pattern, std::regex::ECMAScript);
        const byte_dfa anchored = compile_regex(c.pattern);
        const byte_dfa search = compile_regex(c.pattern, searching());
        check_invariants(anchored);
        check_invariants(search);
        for (const std::string& text : texts_for(c.alphabet, c.examples, seed++))
        {
            INFO("text: \"" << text << "\"");
            CHECK(anchored.matches(text) == std::regex_match(text, re));
            CHECK(search.matches(text) == std::regex_search(text, re));
        }
    }
}

namespace
{
    /// UTF-8 to code points (the inputs here are valid UTF-8).
    std::wstring widen(const std::string& s)
    {
        std::wstring out;
        for (std::size_t i = 0; i < s.size();)
        {
            const unsigned char b = static_cast<unsigned char>(s[i]);
            const int n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
            std::uint32_t c = n == 1 ? b : n == 2 ? b & 0x1Fu : n == 3 ? b & 0x0Fu : b & 0x07u;
            for (int k = 1; k < n; ++k)
            {
                c = c << 6 | (static_cast<unsigned char>(s[i + std::size_t(k)]) & 0x3Fu);
            }
            out += static_cast<wchar_t>(c);
            i += std::size_t(n);
        }
        return out;
    }
}

TEST_CASE("compile_regex: characters are UTF-8 code points, as std::wregex sees them", "[regex]")
{
    static_assert(sizeof(wchar_t) == 4 || sizeof(wchar_t) == 2, "");
    if (sizeof(wchar_t) != 4)
    {
        return;  // code points above U+FFFF are two wchar_t there
    }
    // alphabet: a, é (2 bytes), € (3 bytes), 😀 (4 bytes), and a space
    const std::vector<std::string> alphabet = {"a", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", " "};
    const std::vector<std::string> patterns = {
        ".", "[^a]", "[^a]+", "[\xC3\xA9-\xE2\x82\xAC]+", "\\W", "\\S\\s", "(\xC3\xA9{2}|\xE2\x82\xAC)+", ".\xE2\x82\xAC?",
        "a.*a", "[^\xC3\xA9 ]*", "\\u20AC|\\xE9", "[\\u00e9\\u20ac]{2}", "\\D\\D"};
    std::vector<std::string> texts{""};
    for (std::size_t len = 1, from = 0; len <= 4; ++len)
    {
        const std::size_t to = texts.size();
        for (std::size_t i = from; i < to; ++i)
        {
            for (const auto& c : alphabet)
            {
                texts.push_back(texts[i] + c);
            }
        }
        from = to;
    }
    for (const std::string& p : patterns)
    {
        INFO("pattern: " << p);
        const std::wregex re(widen(p), std::regex::ECMAScript);
        const byte_dfa anchored = compile_regex(p);
        const byte_dfa search = compile_regex(p, searching());
        check_invariants(anchored);
        for (const std::string& t : texts)
        {
            INFO("text: " << t);
            CHECK(anchored.matches(t) == std::regex_match(widen(t), re));
            CHECK(search.matches(t) == std::regex_search(widen(t), re));
        }
    }
}

TEST_CASE("compile_regex: complements accept exactly the valid UTF-8 encodings", "[regex]")
{
    const byte_dfa dot = compile_regex(".");
    CHECK(dot.matches("a"));
    CHECK(dot.matches("\xC3\xA9"));          // é is one character
    CHECK(dot.matches("\xE2\x82\xAC"));      // €
    CHECK(dot.matches("\xF0\x9F\x98\x80"));  // 😀
    CHECK(dot.matches("\xF4\x8F\xBF\xBF"));  // U+10FFFF
    CHECK(dot.matches("\xEF\xBF\xBF"));      // U+FFFF
    CHECK_FALSE(dot.matches(""));
    CHECK_FALSE(dot.matches("ab"));
    CHECK_FALSE(dot.matches("\n"));
    CHECK_FALSE(dot.matches("\r"));
    CHECK_FALSE(dot.matches("\xE2\x80\xA8"));      // U+2028, a line terminator
    CHECK_FALSE(dot.matches("\x80"));              // a lone continuation byte
    CHECK(dot.walk(dot.start(), "\x80") == byte_dfa::dead);
    CHECK_FALSE(dot.matches("\xC3"));              // cut short
    CHECK_FALSE(dot.matches("\xC0\x80"));          // overlong
    CHECK_FALSE(dot.matches("\xE0\x80\xAF"));      // overlong
    CHECK_FALSE(dot.matches("\xED\xA0\x80"));      // a surrogate
    CHECK_FALSE(dot.matches("\xF4\x90\x80\x80"));  // above U+10FFFF
    CHECK_FALSE(dot.matches("\xFF"));
    CHECK(dot.walk(dot.start(), "\xED\xA0") == byte_dfa::dead);  // dead at once, not after the whole sequence

    const byte_dfa not_a = compile_regex("[^a]");
    CHECK(not_a.matches("\xE2\x82\xAC"));
    CHECK(not_a.matches("\n"));
    CHECK_FALSE(not_a.matches("a"));
    CHECK_FALSE(not_a.matches("\xC3\xA9\xC3\xA9"));

    const byte_dfa range = compile_regex("[\xC3\xA9-\xC3\xBC]+");  // é-ü
    CHECK(range.matches("\xC3\xA9\xC3\xBC\xC3\xB1"));                // éüñ
    CHECK_FALSE(range.matches("e"));
    CHECK_FALSE(range.matches("\xC3\xA8"));  // è, just below
    const byte_dfa wide = compile_regex("[\\u00ff-\\uffff]");
    CHECK(wide.matches("\xC3\xBF"));
    CHECK(wide.matches("\xEF\xBF\xBF"));
    CHECK_FALSE(wide.matches("\xED\xBF\xBF"));  // U+DFFF, a surrogate inside the range
    CHECK_FALSE(wide.matches("\xC3\xBE"));

    CHECK(compile_regex("\\uD83D\\uDE00").matches("\xF0\x9F\x98\x80"));  // a surrogate pair is one code point
    CHECK(compile_regex("\xF0\x9F\x98\x80{2}").matches("\xF0\x9F\x98\x80\xF0\x9F\x98\x80"));
    CHECK(compile_regex("\\S").matches("\xE3\x80\x81"));  // U+3001
    CHECK_FALSE(compile_regex("\\S").matches("\xE3\x80\x80"));  // U+3000 is white space
    CHECK(compile_regex("\\s").matches("\xC2\xA0"));
    CHECK(compile_regex("[^]").matches("\n"));
    CHECK(compile_regex("\\cJ").matches("\n"));
    CHECK(compile_regex("[\\b]").matches("\b"));

    // every accepted text in search mode is valid UTF-8 too
    const byte_dfa anything = compile_regex("", searching());
    CHECK(anything.matches("a\xC3\xA9\n"));
    CHECK_FALSE(anything.matches("a\x80"));
}

TEST_CASE("compile_regex: the DFA's invariants hold for every state", "[regex]")
{
    const char* pattern = GENERATE(R"(\d{4}-\d{2}-\d{2})", "[a-z]{1,64}", "(a|b)*a(a|b){4}", "a{3,}", ".{2,5}x",
                                   R"([^"\\]*)", R"(-?(0|[1-9]\d*)(\.\d+)?)", "[\\u0100-\\uffff]+|\xF0\x9F\x98\x80", "");
    const bool search = GENERATE(false, true);
    INFO(pattern << (search ? " (search)" : ""));
    regex_options options;
    options.search = search;
    check_invariants(compile_regex(pattern, options));
}

TEST_CASE("compile_regex: distances and completion bytes", "[regex]")
{
    const byte_dfa date = compile_regex(R"(\d{4}-\d{2}-\d{2})");
    CHECK(date.distance(date.start()) == 10);
    std::string completed;
    for (std::int32_t s = date.start(); !date.accepting(s);)
    {
        const unsigned char b = date.completion_byte(s);
        completed += char(b);
        s = date.next(s, b);
    }
    CHECK(completed == "0000-00-00");
    const std::int32_t after = date.walk(date.start(), "2024-1");
    CHECK(date.distance(after) == 4);

    const byte_dfa words = compile_regex("abc|x+y");
    CHECK(words.distance(words.start()) == 2);
    CHECK(words.completion_byte(words.start()) == 'x');
    CHECK_THROWS_WITH(words.completion_byte(words.walk(words.start(), "xy")),
                      Catch::Contains("is accepting"));
}

TEST_CASE("compile_regex: minimal DFAs, equal for equal languages", "[regex]")
{
    CHECK(compile_regex("abc").size() == 4);
    CHECK(compile_regex("[a-z]{1,64}").size() == 65);
    CHECK(compile_regex(R"(\d{4}-\d{2}-\d{2})").size() == 11);
    CHECK(compile_regex("(a|b)*").size() == compile_regex("[ab]*").size());
    CHECK(compile_regex("(a*b*)*").size() == 1);
    CHECK(compile_regex("ab|ac").size() == compile_regex("a(b|c)").size());
    CHECK(compile_regex("(a|b)*a(a|b){4}").size() == 32);  // the 2^5 suffixes: no smaller DFA exists
    CHECK(compile_regex("x*", searching()).size() == compile_regex("", searching()).size());
    CHECK(compile_regex("").size() == 1);
    CHECK(compile_regex("").matches(""));
    CHECK_FALSE(compile_regex("").matches("a"));
    // byte classes: the bytes no state tells apart, numbered by their smallest byte
    const auto [of, classes] = compile_regex("[a-c]x|y").byte_classes();
    CHECK(classes == 4);  // the rest, a-c, x, y
    CHECK(std::vector<int>{of[0], of['a'], of['b'], of['c'], of['x'], of['y'], of['z'], of[255]} ==
          std::vector<int>{0, 1, 1, 1, 2, 3, 0, 0});
    // a table over classes gives the DFA the same table over bytes does: b*a
    std::array<std::uint16_t, 256> columns;
    columns.fill(2);
    columns['a'] = 0;
    columns['b'] = 1;
    const std::int32_t dead = byte_dfa::dead;
    const byte_dfa over_classes = byte_dfa::from_classes({1, 0, dead, dead, dead, dead}, {false, true}, columns, 3);
    std::vector<std::int32_t> bytes(2 * 256, dead);
    bytes['a'] = 1;
    bytes['b'] = 0;
    const byte_dfa over_bytes = byte_dfa::from_table(bytes, {false, true});
    CHECK(over_classes.size() == compile_regex("b*a").size());
    for (const std::string text : {"a", "bba", "", "ab", "bbc", "c"})
    {
        CHECK(over_classes.matches(text) == compile_regex("b*a").matches(text));
        CHECK(over_bytes.matches(text) == compile_regex("b*a").matches(text));
    }
}

TEST_CASE("byte_dfa: intersection, difference, union and a set of texts decide as their parts do", "[regex]")
{
    const auto& cases = agreement_cases();
    std::uint32_t seed = 7;
    for (std::size_t i = 0; i + 1 < cases.size(); ++i)
    {
        const agreement_case& x = cases[i];
        const agreement_case& y = cases[(i * 7 + 3) % cases.size()];
        INFO("patterns: " << x.pattern << " and " << y.pattern);
        const byte_dfa a = compile_regex(x.pattern), b = compile_regex(y.pattern, searching());
        const byte_dfa both = dfa_intersection(a, b), only = dfa_difference(a, b), either = dfa_union(a, b);
        if (either.size() != 0)
        {
            check_invariants(either);
        }
        std::vector<std::string> examples = x.examples;
        examples.insert(examples.end(), y.examples.begin(), y.examples.end());
        const byte_dfa listed = dfa_of_texts(examples);
        const byte_dfa unquoted = dfa_intersection(a, compile_regex("[^\"]*"));
        const byte_dfa quoted = dfa_enclosed(unquoted, '"', '"');
        if (both.size() != 0)
        {
            check_invariants(both);
        }
        if (only.size() != 0)
        {
            check_invariants(only);
        }
        for (const std::string& text : texts_for(x.alphabet + y.alphabet, examples, seed++))
        {
            INFO("text: \"" << text << "\"");
            CHECK((both.size() > 0 && both.matches(text)) == (a.matches(text) && b.matches(text)));
            CHECK((only.size() > 0 && only.matches(text)) == (a.matches(text) && !b.matches(text)));
            CHECK((either.size() > 0 && either.matches(text)) == (a.matches(text) || b.matches(text)));
            CHECK((listed.size() > 0 && listed.matches(text)) ==
                  (std::find(examples.begin(), examples.end(), text) != examples.end()));
            CHECK((quoted.size() > 0 && quoted.matches('"' + text + '"')) ==
                  (unquoted.size() > 0 && unquoted.matches(text)));
            if (text.empty() || text[0] != '"')
            {
                CHECK_FALSE((quoted.size() > 0 && quoted.matches(text)));  // never without its quotes
            }
        }
    }
    // nothing left: size 0; minimal: equal languages, equal sizes
    CHECK(dfa_intersection(compile_regex("a+"), compile_regex("b+")).size() == 0);
    CHECK(dfa_difference(compile_regex("[ab]"), compile_regex("a|b")).size() == 0);
    CHECK(dfa_difference(compile_regex("[abc]"), compile_regex("a|b")).size() == compile_regex("c").size());
    CHECK(dfa_intersection(compile_regex("[a-z]*"), compile_regex(".{2,3}")).size() == compile_regex("[a-z]{2,3}").size());
    CHECK(dfa_of_texts({"ab", "ac", ""}).size() == compile_regex("(a[bc])?").size());
    CHECK(dfa_union(compile_regex("a+"), compile_regex("b+")).size() == compile_regex("a+|b+").size());
    CHECK(dfa_union(compile_regex("a"), dfa_of_texts({})).size() == compile_regex("a").size());
    CHECK(dfa_union(dfa_of_texts({}), dfa_of_texts({})).size() == 0);
    CHECK_THROWS_WITH(dfa_union(compile_regex("[a-z]{0,40}"), compile_regex("[a-m]*x[a-z]{30}"), 100), Catch::Contains("more than 100 states"));
    CHECK(dfa_of_texts({}).size() == 0);
    // enclosed: the quotes are one lexeme's, the content's loop no accepting state
    const byte_dfa word = dfa_enclosed(compile_regex("[a-z]+"), '"', '"');
    CHECK(word.size() == compile_regex("\"[a-z]+\"").size());
    CHECK(word.matches("\"ab\""));
    CHECK_FALSE(word.matches("\"ab"));
    CHECK_FALSE(word.matches("\"\""));
    CHECK(dfa_enclosed(compile_regex("a+b"), '(', ')').matches("(aab)"));
    CHECK(dfa_enclosed(dfa_of_texts({}), '"', '"').size() == 0);
    CHECK_THROWS_WITH(dfa_enclosed(compile_regex("a\"b"), '"', '"'), Catch::Contains("closing byte 34"));
}

TEST_CASE("dfa_code_points: the product with any code point repeated min to max times, the same language and size", "[regex]")
{
    regex_options json;  // (a JSON string's content)
    json.search = true;
    for (unsigned b = 0; b < 0x20; ++b)
    {
        json.forbidden[b] = true;
    }
    json.forbidden['"'] = json.forbidden['\\'] = true;
    const std::size_t none = ~std::size_t(0);
    for (const char* pattern : {"^[a-z0-9]{1,8}(\\.[a-z]{1,4}){0,2}$", "^(\\S+\\s+){0,3}\\S+$", "é|ab|[^a]{2,5}", "^x*$",
                                "^([a-z][0-9])+$", "", "^[^.]{1,3}(\\.[^.]{1,3}){1,2}$"})
    {
        const byte_dfa p = compile_regex(pattern, json);
        for (const auto& [min, max] : std::vector<std::pair<std::size_t, std::size_t>>{
                 {0, 3}, {2, 5}, {1, none}, {4, 4}, {0, 12}, {3, 40}, {7, none}, {0, 0}})
        {
            INFO(pattern << " " << min << ".." << max);
            regex_options plain = json;
            plain.search = false;
            const byte_dfa length =
                compile_regex("[^]{" + std::to_string(min) + "," + (max == none ? "" : std::to_string(max)) + "}", plain);
            const byte_dfa old = dfa_intersection(p, length, 1000000), now = dfa_code_points(p, min, max, 1000000);
            CHECK(now.size() == old.size());
            CHECK(dfa_difference(now, old, 1000000).size() == 0);
            CHECK(dfa_difference(old, now, 1000000).size() == 0);
        }
    }
    // a bounded pattern far from max keeps no count: up to 4 words of up to 8 letters under maxLength 100 stay
    // the pattern's own size (the plain product copies each state for every length it is reached at)
    const byte_dfa words = compile_regex("^[a-z]{1,8}(-[a-z]{1,8}){0,3}$", json);
    CHECK_THROWS_WITH(dfa_intersection(words, compile_regex("[^]{0,100}"), 200), Catch::Contains("more than 200 states"));
    CHECK(dfa_code_points(words, 0, 100, 200).size() == words.size());
}

TEST_CASE("compile_regex: search mode adds any text where the pattern is not anchored", "[regex]")
{
    const byte_dfa a = compile_regex("a", searching());
    CHECK(a.matches("xay"));
    CHECK(a.matches("\xC3\xA9" "a\n"));
    CHECK_FALSE(a.matches("xyz"));
    const byte_dfa start = compile_regex("^a", searching());
    CHECK(start.matches("ab"));
    CHECK_FALSE(start.matches("ba"));
    const byte_dfa both = compile_regex("^a$|b", searching());
    CHECK(both.matches("a"));
    CHECK(both.matches("xbx"));
    CHECK_FALSE(both.matches("ax"));
    // anchors are no-ops when the whole text must match
    CHECK(compile_regex("^ab$").size() == compile_regex("ab").size());
    // anywhere in the pattern: ^ at the text's start alone, $ at its end alone
    const byte_dfa path = compile_regex(R"(^(/?(\.\.|[a-z]*)($|/))*$)", searching());
    for (const char* t : {"", "a/b", "/a/../b/", "a/b/", "../x"})
    {
        CHECK(path.matches(t));
    }
    for (const char* t : {"ab.", "a//b.", "A"})
    {
        CHECK_FALSE(path.matches(t));
    }
    const byte_dfa inner = compile_regex("(^[^7]*$)|9", searching());
    CHECK(inner.matches("abc"));
    CHECK(inner.matches("797"));
    CHECK_FALSE(inner.matches("77"));
    const byte_dfa mixed = compile_regex("(a|^b)c(d|$)", searching());
    CHECK(mixed.matches("xacdx"));
    CHECK(mixed.matches("bc"));
    CHECK(mixed.matches("xac"));
    CHECK_FALSE(mixed.matches("xbcd"));
    CHECK_FALSE(mixed.matches("acx"));
    // the start's state is its own (a later state with its NFA nodes would take ^ for granted)
    const byte_dfa again = compile_regex("(^a|b)*c", searching());
    CHECK(again.matches("abc"));
    CHECK(again.matches("xbc"));
    CHECK(again.matches("xac"));  // (a search: "c" alone matches)
    CHECK_FALSE(compile_regex("(^a|b)*c").matches("bac"));
    CHECK(compile_regex("(^a|b)*c").matches("abbc"));
    CHECK(compile_regex("a?($)?b?").matches("a"));
    CHECK_FALSE(compile_regex("a($)b?").matches("ab"));
}

TEST_CASE("compile_regex: readings of class escapes in ECMAScript and Python's re", "[regex]")
{
    const auto read = [](const char* pattern, regex_reading r) {
        regex_options o;
        o.reading = r;
        return compile_regex(pattern, o);
    };
    const std::string arabic_three = "\xD9\xA3", nbsp = "\xC2\xA0", fs = "\x1C", bom = "\xEF\xBB\xBF",
                      line_separator = "\xE2\x80\xA8", e_acute = "\xC3\xA9";
    // ECMAScript's: \d ASCII, \s with U+FEFF, . stops at U+2028
    CHECK_FALSE(compile_regex("\\d").matches(arabic_three));
    CHECK(compile_regex("\\D").matches(arabic_three));
    CHECK(compile_regex("\\s").matches(bom));
    CHECK_FALSE(compile_regex("\\s").matches(fs));
    CHECK_FALSE(compile_regex(".").matches(line_separator));
    // both: what ECMAScript and Python both match (Python's \D refuses U+0663, \s takes U+001C but not U+FEFF)
    using r = regex_reading;
    CHECK(read("\\d", r::both).matches("7"));
    CHECK_FALSE(read("\\D", r::both).matches(arabic_three));
    CHECK(read("\\D", r::both).matches("x"));
    CHECK(read("\\s", r::both).matches(nbsp));
    CHECK_FALSE(read("\\s", r::both).matches(bom));
    CHECK_FALSE(read("\\s", r::both).matches(fs));
    CHECK(read("\\S", r::both).matches(e_acute));
    CHECK_FALSE(read("\\S", r::both).matches(bom));
    CHECK_FALSE(read(".", r::both).matches(line_separator));
    CHECK_FALSE(read("[^\\d]", r::both).matches(arabic_three));
    CHECK(read("[^\\d]", r::both).matches("x"));
    // either: what one of them matches (their complement: what neither does)
    CHECK(read("\\d", r::either).matches(arabic_three));
    CHECK(read("\\w", r::either).matches(e_acute));
    CHECK_FALSE(read("\\w", r::either).matches("-"));
    CHECK(read("\\s", r::either).matches(bom));
    CHECK(read("\\s", r::either).matches(fs));
    CHECK(read("\\S", r::either).matches(bom));
    CHECK_FALSE(read("\\S", r::either).matches(nbsp));
    CHECK(read(".", r::either).matches(line_separator));
    CHECK_FALSE(read(".", r::either).matches("\n"));
    CHECK(read("[^\\d]", r::either).matches(arabic_three));
    CHECK_FALSE(read("[^\\d]", r::either).matches("5"));
    // \b and \B: ECMAScript's word characters are ASCII, Python's re's Unicode: next to a character past ASCII
    // both holds neither, either holds both
    CHECK(compile_regex("a\\b.").matches("a" + e_acute));
    CHECK_FALSE(compile_regex("a\\B.").matches("a" + e_acute));
    CHECK(read("a\\b.", r::both).matches("a-"));
    CHECK_FALSE(read("a\\b.", r::both).matches("a" + e_acute));
    CHECK_FALSE(read("a\\B.", r::both).matches("a" + e_acute));
    CHECK_FALSE(read(".\\b", r::both).matches(e_acute));
    CHECK(read("a\\b.", r::either).matches("a" + e_acute));
    CHECK(read("a\\B.", r::either).matches("a" + e_acute));
    CHECK(read(".\\B", r::either).matches(e_acute));
    CHECK_FALSE(read("a\\B.", r::either).matches("a-"));
    // \B in the empty text: ECMAScript holds it, Python's re (before 3.14) not
    CHECK(compile_regex("^\\B$").matches(""));
    CHECK_THROWS_WITH(read("^\\B$", r::both), Catch::Contains("matches no text"));
    CHECK_FALSE(read("\\B|a", r::both).matches(""));
    CHECK(read("\\B-", r::both).matches("-"));
    CHECK(read("^\\B$", r::either).matches(""));
}

TEST_CASE("compile_regex: forbidden bytes", "[regex]")
{
    regex_options json;
    for (unsigned b = 0; b < 0x20; ++b)
    {
        json.forbidden[b] = true;
    }
    json.forbidden['"'] = true;
    json.forbidden['\\'] = true;
    const byte_dfa dot = compile_regex(".*", json);
    CHECK(dot.matches("ab\xC3\xA9"));
    CHECK_FALSE(dot.matches("a\"b"));
    CHECK_FALSE(dot.matches("a\tb"));
    CHECK_FALSE(dot.matches("\\"));
    check_invariants(dot);
    json.search = true;
    const byte_dfa search = compile_regex("^x", json);
    CHECK(search.matches("xy"));
    CHECK_FALSE(search.matches("x\"y"));
    check_invariants(search);
    json.search = false;
    CHECK_THROWS_WITH(compile_regex("\"", json), Catch::Contains("matches no text without the forbidden bytes"));
    CHECK_THROWS_WITH(compile_regex("a\\tb", json), Catch::Contains("matches no text"));
    CHECK(compile_regex("a|\\t", json).matches("a"));
}

TEST_CASE("compile_regex: limits", "[regex]")
{
    regex_options small;
    small.max_states = 1000;
    CHECK_THROWS_WITH(compile_regex("(a|b)*a(a|b){20}", small), Catch::Contains("max_states = 1000"));
    CHECK_THROWS_WITH(compile_regex("(a|b)*a(a|b){20}", small), Catch::Contains("more than 1000 DFA states"));
    CHECK(compile_regex("(a|b)*a(a|b){8}", small).size() == 512);
    CHECK_THROWS_WITH(compile_regex("(a{1000}){1000}"), Catch::Contains("more than 100000 NFA nodes"));
    CHECK_THROWS_WITH(compile_regex("((){1000}){1000}"), Catch::Contains("NFA nodes"));
    CHECK_THROWS_WITH(compile_regex(std::string(300, '(') + std::string(300, ')')),
                      Catch::Contains("nested deeper than 256"));
    CHECK(compile_regex("a{1000}").size() == 1001);
    regex_options little_work = searching();
    little_work.max_work = 1000000;
    CHECK_THROWS_WITH(compile_regex(".{0,1000}", little_work), Catch::Contains("max_work = 1000000"));
}

TEST_CASE("compile_regex: unsupported constructs and malformed patterns name what and where", "[regex]")
{
    struct error_case
    {
        const char* pattern;
        const char* message;
    };
    const std::vector<error_case> cases = {
        {"ab(?=c)", "lookahead (?= is not supported, at offset 2"},
        {"(?!c)", "negative lookahead (?! is not supported, at offset 0"},
        {"(?<=c)", "lookbehind (?<= is not supported, at offset 0"},
        {"(?<!c)", "negative lookbehind (?<! is not supported, at offset 0"},
        {"a(?<name>b)", "named group (?<name> is not supported, at offset 1"},
        {"(?P<name>b)", "named group"},
        {"(?i)abc", "inline flags or group modifiers (?i are not supported, at offset 0"},
        {"(a)\\1", "backreference \\1 is not supported, at offset 3"},
        {"\\k<a>", "named backreference \\k is not supported"},
        {"[\\B]", "unknown escape \\B inside a class, at offset 1"},
        {"a\\b+", "quantifier + has nothing to repeat, at offset 3"},
        {"\\B{2}", "quantifier {2} has nothing to repeat, at offset 2"},
        {"\\p{L}", "Unicode property \\p is not supported"},
        {"\\P{L}", "Unicode property \\P is not supported"},
        {"a*+", "possessive quantifier *+ is not supported, at offset 1"},
        {"\\q", "unknown escape \\q"},
        {"\\u{1F600}", "\\u{...} is not supported"},
        {"\\uD800", "lone surrogate"},
        {"\\x4", "escape \\x needs 2 hex digits, at offset 0"},
        {"\\01", "octal escape"},
        {"abc\\", "ends with a lone \\"},
        {"(ab", "unbalanced parenthesis: ( is not closed, at offset 0"},
        {"ab)", "unbalanced parenthesis: ) has no (, at offset 2"},
        {"a|b)", "unbalanced parenthesis: ) has no (, at offset 3"},
        {"[z-a]", "bad range z-a (the end is below the start), at offset 1"},
        {"[\\d-z]", "bad range: a class escape cannot end a range"},
        {"[abc", "bracket [ is not closed, at offset 0"},
        {"*a", "quantifier * has nothing to repeat, at offset 0"},
        {"a|+", "quantifier + has nothing to repeat, at offset 2"},
        {"(?:)?", ""},  // an empty group may be repeated
        {"a**", "quantifier * follows another quantifier, at offset 2"},
        {"a{2}{3}", "quantifier { follows another quantifier, at offset 4"},
        {"{2}", "quantifier {2} has nothing to repeat, at offset 0"},
        {"a{3,2}", "quantifier {3,2} has max < min, at offset 1"},
        {"a{1001}", "repeat count 1001 exceeds 1000, at offset 1"},
        {"a{2,99999999999}", "exceeds 1000"},
        {"a{", "{ does not begin a quantifier"},
        {"a{x}", "{ does not begin a quantifier"},
        {"a{1,x}", "{ does not begin a quantifier"},
        {"a^b", "matches no text"},
        {"a$b", "matches no text"},
        {"\xC3", "invalid UTF-8 byte 0xC3, at offset 0"},
        {"a\x80", "invalid UTF-8 byte 0x80, at offset 1"},
        {"\xC0\x80", "invalid UTF-8 byte 0xC0, at offset 0"},
        {"\xED\xA0\x80", "invalid UTF-8 byte 0xA0, at offset 1"},
        {"[]", "matches no text"},
    };
    for (const error_case& c : cases)
    {
        INFO("pattern: " << c.pattern);
        if (*c.message == '\0')
        {
            CHECK_NOTHROW(compile_regex(c.pattern));
            continue;
        }
        CHECK_THROWS_AS(compile_regex(c.pattern), invalid_parameter);
        CHECK_THROWS_WITH(compile_regex(c.pattern), Catch::StartsWith("regex: ") && Catch::Contains(c.message));
    }
    // accepted: lazy quantifiers, a lone ] or }, escaped punctuation
    CHECK(compile_regex("a+?b{1,2}?").matches("abb"));
    CHECK(compile_regex("]}").matches("]}"));
    CHECK(compile_regex("\\{\\}").matches("{}"));
}
