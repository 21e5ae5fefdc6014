// fuzz_regex: compile_regex (regex.hpp) on any pattern bytes.
//
// Input: a flags byte (bit 0: options.search; bit 1: forbid a JSON string's
// bytes '"', '\\' and 0x00-0x1f; bits 2-3: the reading, ecmascript, both,
// either), then the pattern (any bytes). Limits:
// max_states 2000, max_nfa_nodes 20000, max_work 5e6, so that no input is slow.
//
// compile_regex either throws invalid_parameter with a message starting
// "regex: " (anything else crashes), or returns a DFA where: every next() is
// dead or a state; every state's distance is finite (it is live) and it
// accepts iff the distance is 0; random walks never leave the live states,
// and a step changes the distance by at least -1; from every state a walk
// reaches, following completion_byte reaches an accepting state in exactly
// distance() bytes, each a step closer; every accepted text found so is
// valid UTF-8 without forbidden bytes. In anchored mode, the shortest text
// accepted is also accepted by the search-mode DFA of the same pattern; and
// by the next wider reading's DFA (both, then ecmascript, then either).
#include <cstdint>
#include <random>
#include <string>
#include <string_view>

#include <xsampler/regex.hpp>

#include "fuzz_input.hpp"

namespace
{
    using namespace xsampler;

    bool valid_utf8(const std::string& s)
    {
        for (std::size_t i = 0; i < s.size();)
        {
            const unsigned char b = static_cast<unsigned char>(s[i]);
            const int n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
            if (n == 0 || i + std::size_t(n) > s.size())
            {
                return false;
            }
            std::uint32_t c = n == 1 ? b : n == 2 ? (b & 0x1Fu) : n == 3 ? (b & 0x0Fu) : (b & 0x07u);
            for (int k = 1; k < n; ++k)
            {
                const unsigned char t = static_cast<unsigned char>(s[i + std::size_t(k)]);
                if ((t >> 6) != 2)
                {
                    return false;
                }
                c = c << 6 | (t & 0x3Fu);
            }
            static const std::uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
            if (c < least[n] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
            {
                return false;
            }
            i += std::size_t(n);
        }
        return true;
    }

    /// Follows completion_byte from `state`, appending the bytes to `text`;
    /// checks each step.
    void complete(const byte_dfa& dfa, std::int32_t state, std::string& text)
    {
        const std::size_t d = dfa.distance(state);
        for (std::size_t step = 0; step < d; ++step)
        {
            FUZZ_REQUIRE(!dfa.accepting(state), "an accepting state before distance() bytes");
            const unsigned char b = dfa.completion_byte(state);
            const std::int32_t t = dfa.next(state, b);
            FUZZ_REQUIRE(t != byte_dfa::dead && dfa.distance(t) + 1 == dfa.distance(state),
                         "completion_byte " + std::to_string(b) + " is not a step closer");
            text += char(b);
            state = t;
        }
        FUZZ_REQUIRE(dfa.accepting(state), "not accepting after distance() completion bytes");
    }

    void check_text(const std::string& text, const regex_options& options)
    {
        FUZZ_REQUIRE(valid_utf8(text), "an accepted text that is not valid UTF-8");
        for (const char c : text)
        {
            FUZZ_REQUIRE(!options.forbidden[static_cast<unsigned char>(c)], "an accepted text with a forbidden byte");
        }
    }

    void check(const byte_dfa& dfa, const regex_options& options, std::uint32_t seed)
    {
        const std::size_t n = dfa.size();
        FUZZ_REQUIRE(n >= 1 && n <= options.max_states, "size " + std::to_string(n));
        for (std::int32_t s = 0; s < std::int32_t(n); ++s)
        {
            FUZZ_REQUIRE(dfa.distance(s) < n, "state " + std::to_string(s) + " is not live");
            FUZZ_REQUIRE(dfa.accepting(s) == (dfa.distance(s) == 0), "accepting() and distance() disagree");
            for (unsigned b = 0; b < 256; ++b)
            {
                const std::int32_t t = dfa.next(s, static_cast<unsigned char>(b));
                FUZZ_REQUIRE(t == byte_dfa::dead || (t >= 0 && std::size_t(t) < n), "next() out of range");
                FUZZ_REQUIRE(t == byte_dfa::dead || dfa.distance(s) <= dfa.distance(t) + 1,
                             "a step shortens the distance by more than 1");
                FUZZ_REQUIRE(t == byte_dfa::dead || !options.forbidden[b], "a move on a forbidden byte");
            }
        }
        std::mt19937 rng(seed);
        for (int walk = 0; walk < 8; ++walk)
        {
            std::string text;
            std::int32_t s = dfa.start();
            for (int step = 0; step < 24; ++step)
            {
                // a random live move: try a few random bytes, else the completion byte
                std::int32_t t = byte_dfa::dead;
                unsigned char b = 0;
                for (int attempt = 0; attempt < 4 && t == byte_dfa::dead; ++attempt)
                {
                    b = static_cast<unsigned char>(rng());
                    t = dfa.next(s, b);
                }
                if (t == byte_dfa::dead)
                {
                    if (dfa.accepting(s))
                    {
                        break;
                    }
                    b = dfa.completion_byte(s);
                    t = dfa.next(s, b);
                }
                text += char(b);
                s = t;
                if (dfa.accepting(s))
                {
                    check_text(text, options);
                }
            }
            complete(dfa, s, text);
            check_text(text, options);
            FUZZ_REQUIRE(dfa.matches(text), "matches() disagrees with the walk");
        }
    }
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    fuzz::input in(data, size);
    const unsigned flags = in.byte();
    const std::string_view pattern(reinterpret_cast<const char*>(data) + (size > 0 ? 1 : 0), size > 0 ? size - 1 : 0);
    regex_options options;
    options.search = (flags & 1) != 0;
    options.reading = (flags >> 2 & 3) == 1 ? regex_reading::both : (flags >> 2 & 3) == 2 ? regex_reading::either
                                                                                          : regex_reading::ecmascript;
    if (flags & 2)
    {
        for (unsigned b = 0; b < 0x20; ++b)
        {
            options.forbidden[b] = true;
        }
        options.forbidden['"'] = true;
        options.forbidden['\\'] = true;
    }
    options.max_states = 2000;
    options.max_nfa_nodes = 20000;
    options.max_work = 5000000;
    byte_dfa dfa;
    try
    {
        dfa = compile_regex(pattern, options);
    }
    catch (const invalid_parameter& e)
    {
        FUZZ_REQUIRE(std::string_view(e.what()).substr(0, 7) == "regex: ", std::string("a message ") + e.what());
        fuzz::trace(e.what());
        return 0;
    }
    fuzz::trace("compiled to " + std::to_string(dfa.size()) + " states");
    std::uint32_t seed = 0;
    for (std::size_t i = 0; i < size; ++i)
    {
        seed = seed * 31 + data[i];
    }
    check(dfa, options, seed);
    std::string shortest;
    complete(dfa, dfa.start(), shortest);
    // the same pattern in another mode or reading accepts it too (or meets a limit)
    const auto also = [&](const regex_options& other, const char* what) {
        try
        {
            FUZZ_REQUIRE(compile_regex(pattern, other).matches(shortest), std::string(what) + " rejects a text");
        }
        catch (const invalid_parameter& e)
        {
            const std::string_view m(e.what());
            FUZZ_REQUIRE(m.find("DFA states") != m.npos || m.find("NFA nodes") != m.npos || m.find("max_work") != m.npos,
                         std::string(what) + " fails: " + e.what());
        }
    };
    if (!options.search)
    {
        regex_options search = options;
        search.search = true;
        also(search, "search mode");
    }
    if (options.reading != regex_reading::either)
    {
        regex_options wider = options;
        wider.reading = options.reading == regex_reading::both ? regex_reading::ecmascript : regex_reading::either;
        also(wider, "a wider reading");
    }
    return 0;
}
