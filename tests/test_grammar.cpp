// grammar.hpp, detail/automaton.hpp and matcher.hpp: the IR's checks, and the
// Earley matcher against an independent recogniser (a fixpoint over every
// substring of short texts) on random grammars with recursion, left
// recursion, rules that match the empty text, and repetitions both unrolled
// and counted; completions are paths; limits are errors that name them.
#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <catch2/catch.hpp>

#include <xsampler/json_grammar.hpp>
#include <xsampler/matcher.hpp>

#include "texts.hpp"

using namespace xsampler;
using Catch::Matchers::Contains;

namespace
{
    /// Which rules derive which substrings of `text`: derives(r, i, j), by
    /// rounds until nothing changes (left recursion, empty rules).
    class recogniser
    {
    public:
        recogniser(const grammar& g, std::string text) : m_g(g), m_text(std::move(text))
        {
            const std::size_t n = m_text.size();
            m_table.assign(g.rules(), std::vector<std::vector<char>>(n + 1, std::vector<char>(n + 1, 0)));
            for (bool changed = true; changed;)
            {
                changed = false;
                for (grammar::rule_id r = 0; r < g.rules(); ++r)
                {
                    if (!g.defined(r))
                    {
                        continue;
                    }
                    for (std::size_t i = 0; i <= n; ++i)
                    {
                        for (std::size_t j = i; j <= n; ++j)
                        {
                            if (!m_table[r][i][j] && derives(g.body(r), i, j))
                            {
                                m_table[r][i][j] = 1;
                                changed = true;
                            }
                        }
                    }
                }
            }
        }
        bool accepts() const { return m_table[m_g.root()][0][m_text.size()] != 0; }

    private:
        bool derives(grammar::expr_id e, std::size_t i, std::size_t j) const
        {
            const auto& x = m_g.at(e);
            switch (x.kind)
            {
            case grammar::op::bytes: return m_text.compare(i, j - i, x.text) == 0 && j - i == x.text.size();
            case grammar::op::byte_set: return j == i + 1 && x.set.contains(static_cast<unsigned char>(m_text[i]));
            case grammar::op::lexeme: return m_g.lexeme_dfa(x.index).matches(std::string_view(m_text).substr(i, j - i));
            case grammar::op::rule: return m_table[x.index][i][j] != 0;
            case grammar::op::sequence: return seq(x.items, 0, i, j);
            case grammar::op::choice:
                for (const auto item : x.items)
                {
                    if (derives(item, i, j))
                    {
                        return true;
                    }
                }
                return false;
            case grammar::op::repeat: return rep(x.items[0], x.min, x.max, i, j, 0);
            }
            return false;
        }
        bool seq(const std::vector<grammar::expr_id>& items, std::size_t k, std::size_t i, std::size_t j) const
        {
            if (k == items.size())
            {
                return i == j;
            }
            for (std::size_t m = i; m <= j; ++m)
            {
                if (derives(items[k], i, m) && seq(items, k + 1, m, j))
                {
                    return true;
                }
            }
            return false;
        }
        /// s[i:j] as copies of e after `done` non-empty ones; empty copies
        /// (if e has the empty text) fill up to min
        bool rep(grammar::expr_id e, std::size_t min, std::size_t max, std::size_t i, std::size_t j,
                 std::size_t done) const
        {
            if (i == j)
            {
                return done >= min || derives(e, i, i);
            }
            if (done >= max)
            {
                return false;
            }
            for (std::size_t m = i + 1; m <= j; ++m)
            {
                if (derives(e, i, m) && rep(e, min, max, m, j, done + 1))
                {
                    return true;
                }
            }
            return false;
        }

        const grammar& m_g;
        std::string m_text;
        std::vector<std::vector<std::vector<char>>> m_table;
    };

    /// A random grammar over the bytes a, b, c: three rules that refer to
    /// each other (and themselves, on the left too), with choices, optional
    /// parts and repetitions, some of them counted. Null if it does not compile.
    struct random_grammar
    {
        grammar g;
        std::shared_ptr<const grammar_automaton> a;
    };
    random_grammar make_random(std::mt19937& rng)
    {
        random_grammar out;
        grammar& g = out.g;
        const grammar::rule_id rules[3] = {g.rule("r0"), g.rule("r1"), g.rule("r2")};
        std::function<grammar::expr_id(int)> expr = [&](int depth) -> grammar::expr_id {
            const int kind = depth > 2 ? int(rng() % 3) : int(rng() % 8);
            switch (kind)
            {
            case 0: return g.bytes(std::string(1, char('a' + rng() % 3)));
            case 1: return g.byte_class(byte_set::range('a', char('a' + rng() % 3)));
            case 2: return rng() % 4 == 0 ? g.empty() : g.ref(rules[rng() % 3]);
            case 3: return g.sequence({expr(depth + 1), expr(depth + 1)});
            case 4: return g.choice({expr(depth + 1), expr(depth + 1)});
            case 5: return g.optional(expr(depth + 1));
            case 6: return g.repeat(expr(depth + 1), rng() % 2, rng() % 2 ? grammar::unbounded : 2 + rng() % 3);
            default: return g.sequence({g.ref(rules[rng() % 3]), expr(depth + 1)});
            }
        };
        for (const auto r : rules)
        {
            g.define(r, g.choice({expr(0), expr(0)}));
        }
        g.set_root(rules[0]);
        grammar_limits limits;
        limits.unroll = rng() % 2 ? 4 : 256;  // a small unroll budget makes repetitions counted
        try
        {
            out.a = compile_grammar(g, limits);
        }
        catch (const invalid_parameter&)
        {
        }
        return out;
    }
}

TEST_CASE("matcher: random grammars accept exactly the texts an independent recogniser derives", "[grammar]")
{
    std::mt19937 rng(2026);
    std::size_t compiled = 0, accepted = 0, prefixes = 0;
    for (int trial = 0; trial < 300; ++trial)
    {
        auto rg = make_random(rng);
        if (!rg.a)
        {
            continue;
        }
        ++compiled;
        // every text over {a, b, c} up to 5 bytes
        std::vector<std::string> texts{""};
        for (std::size_t k = 0; k < texts.size() && texts.size() < 364; ++k)
        {
            if (texts[k].size() < 5)
            {
                for (const char c : {'a', 'b', 'c'})
                {
                    texts.push_back(texts[k] + c);
                }
            }
        }
        std::set<std::string> language;
        for (const auto& t : texts)
        {
            if (recogniser(rg.g, t).accepts())
            {
                language.insert(t);
            }
        }
        for (const auto& t : texts)
        {
            matcher m(rg.a);
            const bool read = m.feed(t) == t.size();
            const bool in = language.count(t) != 0;
            INFO("trial " << trial << " text '" << t << "'");
            REQUIRE((read && m.complete()) == in);
            accepted += in;
            if (read)
            {
                ++prefixes;
                // a live prefix: it and its completion are a text of the language
                const std::string done = t + m.completion();
                REQUIRE(m.shortest() == done.size() - t.size());
                if (done.size() <= 8)
                {
                    REQUIRE(recogniser(rg.g, done).accepts());
                }
            }
            // every prefix of a text of the language reads
            if (in)
            {
                REQUIRE(read);
            }
        }
    }
    CHECK(compiled >= 100);
    CHECK(accepted >= 500);
    CHECK(prefixes >= 2000);
}

TEST_CASE("matcher: left recursion, ambiguity and empty rules", "[grammar]")
{
    grammar g;
    const auto expr = g.rule("expr"), term = g.rule("term"), num = g.rule("num"), ws = g.rule("ws");
    g.define(ws, g.star(g.bytes(" ")));
    g.define(num, g.plus(g.byte_class(byte_set::range('0', '9'))));
    g.define(term, g.choice({g.sequence({g.ref(num), g.ref(ws)}),
                             g.sequence({g.bytes("("), g.ref(ws), g.ref(expr), g.bytes(")"), g.ref(ws)})}));
    g.define(expr, g.choice({g.sequence({g.ref(expr), g.byte_class(byte_set::of("+-*")), g.ref(ws), g.ref(term)}),
                             g.ref(term)}));
    g.set_root(expr);
    const auto a = compile_grammar(g);
    const auto run = [&](const std::string& t) {
        matcher m(a);
        const std::size_t n = m.feed(t);
        return n < t.size() ? "rejected at " + std::to_string(n) : m.complete() ? "accepted" : "incomplete";
    };
    CHECK(run("1+2*(3 - 4)") == "accepted");
    CHECK(run("((1)") == "incomplete");
    CHECK(run("1+)") == "rejected at 2");
    CHECK(run("") == "incomplete");
    CHECK(run("((((((((((1))))))))))") == "accepted");
    matcher m(a);
    m.feed("(1+");
    CHECK(m.completion() == "0)");
    CHECK(m.rules_here() == std::vector<std::string>{"expr"});
    // an ambiguous grammar: s ::= s s | "a"
    grammar h;
    const auto s = h.rule("s");
    h.define(s, h.choice({h.sequence({h.ref(s), h.ref(s)}), h.bytes("a")}));
    h.set_root(s);
    matcher am(compile_grammar(h));
    CHECK(am.feed("aaaaaaaa") == 8);
    CHECK(am.complete());
    CHECK(am.step('b') == false);
    CHECK(am.position() == 8);
    am.pop(3);
    CHECK(am.position() == 5);
    CHECK(am.complete());
    // nullable rules before and after
    grammar k;
    const auto root = k.rule("root"), opt = k.rule("opt");
    k.define(opt, k.choice({k.empty(), k.bytes("y")}));
    k.define(root, k.sequence({k.ref(opt), k.ref(opt), k.bytes("x"), k.ref(opt)}));
    k.set_root(root);
    const auto ka = compile_grammar(k);
    for (const char* t : {"x", "yx", "yyx", "yyxy", "xy"})
    {
        matcher km(ka);
        CHECK(km.feed(t) == std::string(t).size());
        CHECK(km.complete());
    }
    matcher km(ka);
    CHECK(km.feed("yyy") == 2);
}

TEST_CASE("matcher: a set of thousands of items is kept without repeats", "[grammar]")
{
    // root ::= r0 | ... | r2999, ri ::= "x" i's digits | "(" ri ")" | ri "!": after
    // "(((x" every ri is live three levels deep, sets of thousands of items
    grammar g;
    const std::size_t n = 3000;
    std::vector<grammar::expr_id> refs;
    for (std::size_t i = 0; i < n; ++i)
    {
        const auto r = g.rule("r" + std::to_string(i));
        g.define(r, g.choice({g.sequence({g.bytes("x"), g.bytes(std::to_string(i))}),
                              g.sequence({g.bytes("("), g.ref(r), g.bytes(")")}),
                              g.sequence({g.ref(r), g.bytes("!")})}));
        refs.push_back(g.ref(r));
    }
    const auto root = g.rule("root");
    g.define(root, g.choice(refs));
    g.set_root(root);
    const auto a = compile_grammar(g);
    const auto accepts = [&](const std::string& t) {
        matcher m(a);
        return m.feed(t) == t.size() && m.complete();
    };
    CHECK(accepts("(((x2999)!)!)"));
    CHECK(accepts("x0!!"));
    CHECK(accepts("((x17))"));
    CHECK(!accepts("((x17)"));
    CHECK(!accepts("(x3000)"));
    CHECK(!accepts("(x17))"));
    matcher m(a);
    CHECK(m.feed("(((x") == 4);
    CHECK(m.items() >= n);
    std::set<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> distinct;
    for (const earley_item* x = m.begin(); x != m.end(); ++x)
    {
        distinct.insert({x->state, x->origin, x->count});
    }
    CHECK(distinct.size() == m.items());
    // each item once: as many as a fresh chart from the same bytes after a pop
    const std::size_t items = m.items();
    m.pop(2);
    CHECK(m.feed("(x") == 2);
    CHECK(m.items() == items);
    CHECK(m.feed("29") == 2);  // x29, x290..x299, x2900..x2999
    CHECK(!m.complete());
    CHECK(m.feed(")))") == 3);
    CHECK(m.complete());
}

TEST_CASE("matcher: counted repetitions count code points exactly", "[grammar]")
{
    for (const auto& [min, max] : std::vector<std::pair<std::size_t, std::size_t>>{{3, 1000}, {0, 70}, {70, 70}, {5, grammar::unbounded}})
    {
        grammar g;
        const auto r = g.rule("root");
        g.define(r, g.sequence({g.bytes("<"), g.repeat(g.any_code_point(), min, max), g.bytes(">")}));
        g.set_root(r);
        grammar_limits limits;
        limits.unroll = 16;  // counted, not unrolled
        const auto a = compile_grammar(g, limits);
        CHECK(a->rules.size() == 2);  // the root and the counted rule
        for (std::size_t n : {std::size_t(0), std::size_t(2), std::size_t(3), std::size_t(5), std::size_t(69),
                              std::size_t(70), std::size_t(71), std::size_t(1000), std::size_t(1001)})
        {
            std::string t = "<";
            for (std::size_t i = 0; i < n; ++i)
            {
                t += i % 3 == 0 ? "\xC3\xA9" : i % 3 == 1 ? "\xF0\x9F\x98\x80" : ">";  // é, 😀 and '>' itself
            }
            t += ">";
            matcher m(a);
            const bool in = n >= min && n <= max;
            INFO("{" << min << "," << max << "} with " << n);
            CHECK(((m.feed(t) == t.size()) && m.complete()) == in);
        }
        matcher m(a);
        m.feed("<");
        CHECK(m.shortest() == min + 1);
    }
    // an item that can go on after it ends, with what differs from the next one's start
    // (digits then spaces, the next one a comma): counted, exact
    grammar g;
    const auto r = g.rule("root");
    const auto item = g.sequence({g.bytes(","), g.plus(g.byte_class(byte_set::range('0', '9'))), g.star(g.bytes(" "))});
    g.define(r, g.repeat(item, 2, 40));
    g.set_root(r);
    grammar_limits limits;
    limits.unroll = 8;
    const auto a = compile_grammar(g, limits);
    CHECK(a->rules.size() == 2);
    for (std::size_t n = 0; n < 45; ++n)
    {
        std::string t;
        for (std::size_t i = 0; i < n; ++i)
        {
            t += "," + std::to_string(i * 37) + std::string(i % 3, ' ');
        }
        matcher m(a);
        CHECK(((m.feed(t) == t.size()) && m.complete()) == (n >= 2 && n <= 40));
    }
    // one that cannot say how many were read is an error, unless unrolled
    grammar h;
    const auto hr = h.rule("root");
    h.define(hr, h.repeat(h.plus(h.byte_class(byte_set::range('0', '9'))), 2, 40));
    h.set_root(hr);
    CHECK_THROWS_WITH(compile_grammar(h, limits), Contains("cannot be counted"));
    // nor one whose item can end at once through a rule that matches the empty text
    grammar e;
    const auto er = e.rule("root"), as = e.rule("as");
    e.define(as, e.choice({e.sequence({e.bytes("a"), e.ref(as)}), e.bytes("")}));
    e.define(er, e.repeat(e.sequence({e.ref(as), e.optional(e.bytes("b"))}), 2, 40));
    e.set_root(er);
    CHECK_THROWS_WITH(compile_grammar(e, limits), Contains("can end without reading a byte"));
    matcher eu(compile_grammar(e));
    CHECK(eu.feed("aabab") == 5);
    CHECK(eu.complete());
    matcher unrolled(compile_grammar(h));
    CHECK(unrolled.feed("12345") == 5);
    CHECK(unrolled.complete());
}

TEST_CASE("matcher: a counted lexeme counts code points as it reads, as the pattern's product with the length does", "[grammar]")
{
    struct one_case
    {
        const char* pattern;
        std::size_t min, max;
    };
    const std::vector<one_case> cases{{"(ab|\xC3\xA9)*", 2, 5},   {"(aa)+b?", 3, 7},      {"[ab\xC3\xA9]*", 4, grammar::unbounded},
                                      {"a*(b\xC3\xA9)*", 0, 3}, {"(a|b\xC3\xA9)+", 5, grammar::unbounded}, {"a|bb", 0, 1}};
    const std::vector<std::string> letters{"a", "b", "\xC3\xA9", ">", "\xC3"};
    for (const auto& c : cases)
    {
        const auto build = [&](bool counted) {
            return compile_grammar(test_texts::pattern_with_length(c.pattern, c.min, c.max, "<", ">", counted));
        };
        const auto counted = build(true), product = build(false);
        CHECK(counted->has_units());
        CHECK(!product->has_units());
        // every text of up to 6 letters (the last may be half a code point), as both read it
        std::size_t compared = 0, accepted = 0;
        std::vector<std::size_t> digits(1, 0);
        for (std::size_t len = 0; len <= 6; ++len)
        {
            digits.assign(len, 0);
            while (true)
            {
                std::string t = "<";
                for (const std::size_t d : digits)
                {
                    t += letters[d];
                }
                matcher m(counted), p(product);
                const std::size_t read = m.feed(t);
                INFO(c.pattern << " {" << c.min << "," << c.max << "} reading " << t);
                REQUIRE(read == p.feed(t));
                if (read == t.size())
                {
                    REQUIRE(m.complete() == p.complete());
                    REQUIRE(m.shortest() == p.shortest());
                    REQUIRE(m.completion() == p.completion());
                    accepted += std::size_t(m.complete());
                }
                ++compared;
                std::size_t k = 0;
                while (k < len && ++digits[k] == letters.size())
                {
                    digits[k++] = 0;
                }
                if (k == len)
                {
                    break;
                }
            }
        }
        INFO(c.pattern);
        CHECK(compared > 1000);
        CHECK(accepted > 0);
    }
    // a rule of its own, its counts exact at every step: (aa)+ with 3..7 code points is 4 or 6 a's
    grammar g;
    const auto r = g.rule("root");
    const auto [even, even_units] = dfa_code_point_units(compile_regex("(aa)+"));
    g.define(r, g.counted_lexeme(even, even_units, 3, 7));
    g.set_root(r);
    const auto a = compile_grammar(g);
    for (std::size_t n = 0; n <= 9; ++n)
    {
        matcher m(a);
        const std::string t(n, 'a');
        CHECK(((m.feed(t) == n) && m.complete()) == (n == 4 || n == 6));
    }
    matcher m(a);
    CHECK(m.shortest() == 4);
    CHECK(m.completion() == "aaaa");
    // bad input is an error that says what is wrong
    CHECK_THROWS_WITH(g.counted_lexeme(even, even_units, 3, 3), Contains("accepts no text of 3 to 3 units"));
    CHECK_THROWS_WITH(g.counted_lexeme(even, {1}, 0, 3), Contains("unit flags"));
    CHECK_THROWS_WITH(g.counted_lexeme(even, even_units, 4, 3), Contains("maximum is below"));
    CHECK_THROWS_WITH(g.counted_lexeme(even, even_units, 0, 10000000), Contains("entries"));
    std::vector<std::int32_t> table(2 * 256, byte_dfa::dead);  // 'a' or a lone continuation byte
    table['a'] = table[0x80] = 1;
    CHECK_THROWS_WITH(dfa_code_point_units(byte_dfa::from_table(table, {false, true})), Contains("continuation"));
}

TEST_CASE("matcher: the completion is a path", "[grammar]")
{
    std::mt19937 rng(5);
    std::size_t checked = 0;
    for (int trial = 0; trial < 2000; ++trial)
    {
        auto rg = make_random(rng);
        if (!rg.a)
        {
            continue;
        }
        matcher m(rg.a);
        for (int step = 0; step < 6; ++step)  // a few random bytes first
        {
            const char c = char('a' + rng() % 3);
            if (!m.step(static_cast<unsigned char>(c)))
            {
                break;
            }
        }
        std::string rest = m.completion();
        while (!rest.empty())
        {
            REQUIRE(m.step(static_cast<unsigned char>(rest[0])));
            rest.erase(0, 1);
            REQUIRE(m.completion() == rest);
            ++checked;
        }
        REQUIRE(m.complete());
    }
    CHECK(checked > 100);
}

TEST_CASE("json_canonical: equal JSON values share a key", "[grammar]")
{
    const auto key = [](const std::string& text) {
        std::string out;
        REQUIRE(detail::json_canonical::canonical(text, 0, out) == text.size());
        return out;
    };
    const auto same = [&](const std::string& a, const std::string& b) { return key(a) == key(b); };
    CHECK(same(R"("a")", R"("\u0061")"));
    CHECK(same(R"("\/")", R"("/")"));
    CHECK(same(R"("\uD83D\uDE00")", "\"\xF0\x9F\x98\x80\""));
    CHECK(!same(R"("a")", R"("A")"));
    CHECK(!same(R"("ab")", R"("a")"));
    CHECK(same("1", "1.0"));
    CHECK(same("1", "1e0"));
    CHECK(same("100", "1E+2"));
    CHECK(same("0", "-0.0"));
    CHECK(same("true", "1"));
    CHECK(same("false", "0"));
    CHECK(!same("1", "2"));
    CHECK(!same("null", "0"));
    // two decimals that round to one double: equal for a validator that reads doubles
    CHECK(same("1.0000000000000001", "1"));
    CHECK(!same("1.000000000000001", "1"));
    // objects by their members in any order, the last of a key written twice
    CHECK(same(R"({"a":1,"b":[1,"x"]})", R"({ "b" : [ 1.0 , "x" ] , "a" : 1 })"));
    CHECK(same(R"({"a":1,"a":2})", R"({"a":2})"));
    CHECK(!same(R"({"a":1})", R"({"a":1,"b":null})"));
    CHECK(!same(R"([1,2])", R"([2,1])"));
    CHECK(!same(R"({"a":"b"})", R"(["a","b"])"));
    // keys are self-delimiting: parts cannot run into each other
    CHECK(!same(R"(["ab","c"])", R"(["a","bc"])"));
    std::string out;
    CHECK(detail::json_canonical::canonical(R"({"a":)", 0, out) == detail::json_canonical::npos);
    CHECK(detail::json_canonical::canonical(std::string(2000, '[') + std::string(2000, ']'), 0, out) ==
          detail::json_canonical::npos);
}

namespace
{
    /// '[' strings (min..max of them) ']' whose items are pairwise different (grammar::distinct).
    std::shared_ptr<const grammar_automaton> distinct_strings(std::size_t min, std::size_t max)
    {
        grammar g;
        detail::json_builder b(g, json_options{});
        const auto item = g.fresh_rule("item"), array = g.fresh_rule("array");
        g.define(item, b.string(0, grammar::unbounded));
        g.define(array, b.array(g.ref(item), min, max));
        g.distinct(array, item);
        g.set_root(array);
        return compile_grammar(g);
    }
    std::size_t read(const std::shared_ptr<const grammar_automaton>& a, const std::string& text)
    {
        matcher m(a);
        return m.feed(text);
    }
}

TEST_CASE("matcher: distinct items are checked where each ends", "[grammar]")
{
    const auto a = distinct_strings(0, grammar::unbounded);
    CHECK(a->has_distinct());
    CHECK(a->distinct_last.count() == 1);
    CHECK(a->distinct_last['"']);
    // refused at the quote that ends the repeat, escapes decoded
    CHECK(read(a, R"(["a","a"])") == 7);
    CHECK(read(a, R"(["a","\u0061"])") == 12);
    CHECK(read(a, R"(["a", "b" , "a"])") == 14);
    CHECK(read(a, R"(["ab","a","b"])") == 14);
    CHECK(read(a, R"(["",""])") == 5);
    // unchecked: the grammar's language without the mark
    matcher loose(a);
    loose.check_distinct(false);
    CHECK(loose.feed(R"(["a","a"])") == 9);
    CHECK(loose.complete());
    // pop forgets the items read past the new position; a copy carries them
    matcher m(a);
    REQUIRE(m.feed(R"(["x","y",)") == 9);
    matcher fork = m;
    CHECK(fork.feed(R"("y")") == 2);
    m.pop(4);  // ["x",
    CHECK(m.feed(R"("y","y")") == 6);
    m.pop(m.position() - 5);  // ["x", again: "y" is new
    CHECK(m.feed(R"("y"])") == 4);
    CHECK(m.complete());
    // the completion skips items equal to earlier ones: where an item's end is refused, the least
    // byte as close after which some byte is closer (a string grows by a char: not always the shortest)
    matcher c(a);
    REQUIRE(c.feed(R"(["",)") == 4);
    CHECK(c.completion() == R"(" "])");
    CHECK(c.position() == 4);
    const auto three = distinct_strings(3, 5);
    CHECK(matcher(three).completion() == R"([""," ","!"])");
    matcher d(three);
    REQUIRE(d.feed(R"([" ","",)") == 8);
    CHECK(d.completion() == R"("!"])");
    matcher e(three);
    REQUIRE(e.feed(R"(["a","b",)") == 9);
    CHECK(e.completion() == R"(""])");
    // items inside a counted repetition (minItems, maxItems): found through its origins
    CHECK(read(three, R"(["a","b","c","d","b"])") == 19);
    CHECK(read(three, R"(["a","b","c","d","e"])") == 21);
    const auto many = distinct_strings(2, 200);  // (the items after the first in a counted rule)
    CHECK(std::any_of(many->rules.begin(), many->rules.end(), [](const auto& r) { return r.counted; }));
    CHECK(read(many, R"(["a","b","c","a"])") == 15);
    CHECK(read(many, R"(["a","b","c","d"])") == 17);
    // a long completion: each repeated item grows by one char (300 items, not 300 growing ones)
    const auto hundreds = distinct_strings(300, 400);
    matcher h(hundreds);
    const std::string text = h.completion();
    CHECK(text.size() < 300 * 6);
    CHECK(h.feed(text) == text.size());
    CHECK(h.complete());
    // an item read through another rule: the matcher could not find its array, so compile refuses it
    grammar g;
    detail::json_builder b(g, json_options{});
    const auto item = g.fresh_rule("item"), items = g.fresh_rule("items"), array = g.fresh_rule("array");
    g.define(item, b.string(0, grammar::unbounded));
    g.define(items, g.choice({g.ref(item), g.sequence({g.ref(item), g.bytes(","), g.ref(items)})}));
    g.define(array, g.sequence({g.bytes("["), g.optional(g.ref(items)), g.bytes("]")}));
    g.distinct(array, item);
    g.set_root(array);
    CHECK_THROWS_WITH(compile_grammar(g), Contains("the distinct item 'item' is read outside its array 'array''s own body (in 'items')"));
    // items that run out of values (against distinct()'s advice): check B refuses the third item's quote, the text
    // is left where only whitespace goes on, and completion() says so
    grammar f;
    detail::json_builder fb(f, json_options{});
    const auto letter = f.fresh_rule("letter"), letters = f.fresh_rule("letters");
    f.define(letter, f.choice({f.bytes("\"a\""), f.bytes("\"b\"")}));
    f.define(letters, fb.array(f.ref(letter), 3, 3));
    f.distinct(letters, letter);
    f.set_root(letters);
    matcher two(compile_grammar(f));
    REQUIRE(two.feed(R"(["a","b",)") == 9);
    CHECK(!two.step('"'));
    CHECK_THROWS_WITH(two.completion(), Contains("distinct items with no new value left"));
}

TEST_CASE("matcher: distinct keys are checked where each ends, the object found through its members' rules", "[grammar]")
{
    // object ::= '{' (member (',' members)?)? '}', members right-recursive, a value an integer or an object again
    grammar g;
    detail::json_builder b(g, json_options{});
    const auto key = g.fresh_rule("key"), member = g.fresh_rule("member"), members = g.fresh_rule("members"),
               object = g.fresh_rule("object"), value = g.fresh_rule("value");
    g.define(key, b.string(0, grammar::unbounded));
    g.define(value, g.choice({g.repeat(g.byte_class(byte_set::range('0', '9')), 1, 3), g.ref(object)}));
    g.define(member, g.sequence({g.ref(key), g.bytes(":"), g.ref(value)}));
    g.define(members, g.sequence({g.ref(member), g.optional(g.sequence({g.bytes(","), g.ref(members)}))}));
    g.define(object, g.sequence({g.bytes("{"), g.optional(g.ref(members)), g.bytes("}")}));
    g.distinct_keys(object, key);  // (read in member's body, not the object's: allowed for keys)
    g.set_root(object);
    const auto a = compile_grammar(g);
    CHECK(read(a, R"({"a":1,"a":2})") == 9);
    CHECK(read(a, R"({"a":1,"b":2,"\u0061":3})") == 20);
    CHECK(read(a, R"({"a":1,"b":{"a":2,"b":3},"c":4})") == 31);  // (the inner object's keys are its own)
    CHECK(read(a, R"({"a":1,"b":{"a":2,"a":3}})") == 20);
    // past many members (a rule each up the chart): the first key again is refused
    std::string many = "{";
    for (int i = 0; i < 40; ++i)
    {
        many += "\"k" + std::to_string(i) + "\":1,";
    }
    CHECK(read(a, many + R"("k0":1})") == many.size() + 3);
    CHECK(read(a, many + R"("k40":1})") == many.size() + 8);
    // past a value nested deeper than 1000 (skipped by its brackets): the keys after it are still compared
    const std::string deep = R"({"d":)" + [] {
        std::string t;
        for (int i = 0; i < 1100; ++i)
        {
            t += "{\"e\":";
        }
        return t + "1" + std::string(1100, '}');
    }();
    CHECK(read(a, deep + R"(,"x":1,"x":2})") == deep.size() + 9);
    CHECK(read(a, deep + R"(,"x":1,"y":2})") == deep.size() + 13);
    // pop forgets the keys read past the new position
    matcher m(a);
    REQUIRE(m.feed(R"({"x":1,"y":2,)") == 13);
    m.pop(6);  // {"x":1,
    CHECK(m.feed(R"("y":3})") == 6);
    CHECK(m.complete());
    m.pop(m.position() - 7);  // {"x":1, again: a member popped, then others
    CHECK(m.feed(R"("z":{"y":1},"y":2,"z":3})") == 20);  // (the inner "y" is its own object's)
    // keys that run out (against distinct_keys()' advice): check B refuses a third key's quote
    grammar f;
    const auto k2 = f.fresh_rule("key"), obj = f.fresh_rule("object"), mem = f.fresh_rule("members");
    f.define(k2, f.choice({f.bytes("\"a\""), f.bytes("\"b\"")}));
    f.define(mem, f.sequence({f.ref(k2), f.bytes(":1"), f.optional(f.sequence({f.bytes(","), f.ref(mem)}))}));
    f.define(obj, f.sequence({f.bytes("{"), f.ref(mem), f.bytes("}")}));
    f.distinct_keys(obj, k2);
    f.set_root(obj);
    matcher two(compile_grammar(f));
    REQUIRE(two.feed(R"({"b":1,)") == 7);
    CHECK(two.step('"'));  // ("a" is left)
    CHECK(!two.step('b'));
    CHECK(two.feed(R"(a":1,)") == 5);
    CHECK(!two.step('"'));
}

TEST_CASE("grammar: errors name the rule, and limits are errors", "[grammar]")
{
    const auto fails = [](const std::function<void(grammar&)>& build, const std::string& message,
                          const grammar_limits& limits = {}) {
        grammar g;
        build(g);
        CHECK_THROWS_WITH(compile_grammar(g, limits), Contains(message));
    };
    fails([](grammar& g) { g.define(g.rule("x"), g.ref(g.rule("term"))), g.set_root(g.rule("x")); },
          "rule 'term' is used (in 'x') but never defined");
    fails([](grammar& g) { g.define(g.rule("x"), g.bytes("a")); }, "no root rule");
    fails([](grammar& g) { g.set_root(g.rule("root")); }, "the root rule 'root' is never defined");
    fails(
        [](grammar& g) {
            const auto x = g.rule("x"), loop = g.rule("loop");
            g.define(loop, g.sequence({g.bytes("a"), g.ref(loop)}));
            g.define(x, g.choice({g.bytes("b"), g.ref(loop)}));
            g.set_root(x);
        },
        "rule 'loop' derives no text");
    fails(
        [](grammar& g) {
            const auto x = g.rule("x");
            g.define(x, g.star(g.optional(g.bytes("a"))));
            g.set_root(x);
        },
        "rule 'x': a repetition without bound of an expression that can match the empty text");
    fails(
        [](grammar& g) {
            const auto x = g.rule("x"), y = g.rule("y");
            g.define(x, g.choice({g.ref(y), g.bytes("a")}));
            g.define(y, g.sequence({g.optional(g.bytes("b")), g.ref(x)}));
            g.set_root(x);
        },
        "derives itself without reading a byte");
    CHECK_THROWS_WITH(grammar().repeat(0, 1, 0), Contains("no expression 0"));
    {
        grammar g;
        CHECK_THROWS_WITH(g.repeat(g.bytes("a"), 3, 2), Contains("whose maximum is below its minimum"));
        CHECK_THROWS_WITH(g.code_points({{0x20, 0x110000}}), Contains("past U+10FFFF"));
    }
    // limits: states, work and rules
    const auto big = [](grammar& g) {
        const auto r = g.rule("root");
        std::vector<grammar::expr_id> alts;
        for (int i = 0; i < 300; ++i)
        {
            alts.push_back(g.bytes("key" + std::to_string(i * 7919)));
        }
        g.define(r, g.choice(alts));
        g.set_root(r);
    };
    grammar_limits few;
    few.max_states = 100;
    fails(big, "more than 100 automaton states (grammar_limits::max_states), in rule 'root'", few);
    grammar_limits little;
    little.max_work = 1000;
    fails(big, "grammar_limits::max_work", little);
    grammar_limits rules;
    rules.max_rules = 1;
    fails([](grammar& g) {
        g.define(g.rule("a"), g.ref(g.rule("b")));
        g.define(g.rule("b"), g.bytes("x"));
        g.set_root(g.rule("a"));
    }, "2 rules, more than the limit 1", rules);
    // a dead alternative is dropped, a rule the root does not reach is ignored
    grammar g;
    const auto root = g.rule("root"), dead = g.rule("dead"), unused = g.rule("unused");
    g.define(dead, g.sequence({g.bytes("d"), g.ref(dead)}));
    g.define(unused, g.ref(dead));
    g.define(root, g.bytes("ok"));
    g.set_root(root);
    matcher m(compile_grammar(g));
    CHECK(m.feed("ok") == 2);
    CHECK(m.complete());
}
