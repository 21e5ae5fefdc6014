// fuzz_grammar: a GBNF grammar from fuzzed bytes (gbnf.hpp), compiled
// (matcher.hpp) within small limits, then walked byte by byte through the
// matcher and token by token through a constraint over a small vocabulary.
//
// Input: a mode byte (bit 0: a budget; bits 1-3: its slack), a seed byte for
// the walks' choices, then the grammar's text.
//
// Parsing and compiling either throw invalid_parameter with a message
// (anything else crashes) or give a grammar. Then, at every step of a random
// walk: a byte the matcher reads leaves it live (a finite shortest
// completion, which read byte by byte completes the text, each byte leaving
// the rest as the completion); pop() undoes a step exactly. The constraint's
// mask holds exactly the tokens it can advance by (brute force over the
// vocabulary), eos exactly when the text is complete; with a budget the walk
// ends with eos within it.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <xsampler/constraint.hpp>
#include <xsampler/gbnf.hpp>

#include "fuzz_input.hpp"

namespace
{
    using namespace xsampler;

    std::shared_ptr<const vocabulary_index> small_index()
    {
        static const auto index = fuzz::small_index({"ab", "abc", "ba", "(a", "a)", "1+", "+1", "12", "  ", "\xC3\xA9", "xyz", "\"\"", "[]"});
        return index;
    }
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    if (size < 2)
    {
        return 0;
    }
    const std::uint8_t mode = data[0];
    std::uint64_t seed = data[1];
    const std::string text(reinterpret_cast<const char*>(data + 2), size - 2);
    std::shared_ptr<const grammar_automaton> rules;
    try
    {
        gbnf_options o;
        o.max_size = 4096;
        grammar_limits limits;
        limits.max_states = 20000;
        limits.max_nfa_states = 100000;
        limits.max_work = 5000000;
        limits.max_seconds = 2.0;
        rules = compile_grammar(parse_gbnf(text, o), limits);
    }
    catch (const invalid_parameter& e)
    {
        FUZZ_REQUIRE(std::string(e.what()).size() > 8, "an error says what is wrong");
        fuzz::trace(e.what());
        return 0;
    }
    // the matcher, byte by byte
    matcher m(rules);
    for (int step = 0; step < 48; ++step)
    {
        std::vector<unsigned char> live;
        for (unsigned b = 0; b < 256; ++b)
        {
            if (m.step(static_cast<unsigned char>(b)))
            {
                live.push_back(static_cast<unsigned char>(b));
                m.pop();
            }
        }
        const std::uint64_t shortest = m.shortest();
        FUZZ_REQUIRE(shortest < grammar_automaton::infinite, "every state the matcher reaches can end");
        FUZZ_REQUIRE((shortest == 0) == m.complete(), "a complete text needs no completion");
        FUZZ_REQUIRE(!live.empty() || m.complete(), "a state that reads nothing is complete");
        if (step % 8 == 0 && shortest < 256)
        {
            matcher copy = m;
            std::string rest = copy.completion();
            FUZZ_REQUIRE(rest.size() == shortest, "the completion is the shortest");
            while (!rest.empty())
            {
                FUZZ_REQUIRE(copy.step(static_cast<unsigned char>(rest[0])), "the completion reads");
                rest.erase(0, 1);
                FUZZ_REQUIRE(copy.completion() == rest, "the completion is a path");
            }
            FUZZ_REQUIRE(copy.complete(), "the completion completes");
        }
        if (live.empty())
        {
            break;
        }
        const bool done = m.complete();
        const std::size_t at = m.position();
        m.step(live[fuzz::next(seed) % live.size()]);
        m.pop();
        FUZZ_REQUIRE(m.position() == at && m.complete() == done, "pop undoes a step");
        m.step(live[fuzz::next(seed) % live.size()]);
    }
    // the constraint, token by token
    const auto index = small_index();
    const vocabulary& v = index->vocab();
    const token_id eos = v.eos()[0];
    std::shared_ptr<const compiled_grammar> compiled;
    try
    {
        compiled = std::make_shared<const compiled_grammar>(index, rules, "grammar");
    }
    catch (const invalid_parameter& e)  // the shortest text is too long
    {
        fuzz::trace(e.what());
        return 0;
    }
    constraint c(compiled);
    std::size_t budget = 0;
    if (mode & 1)
    {
        budget = c.shortest_completion() + ((mode >> 1) & 7);
        c.set_budget(budget);
    }
    for (int step = 0; step < 40 && !c.ended(); ++step)
    {
        const token_set mask = c.mask();
        std::vector<token_id> allowed;
        for (token_id t = 0; t < token_id(v.size()); ++t)
        {
            if (budget == 0)
            {
                constraint copy = c;
                bool can = true;
                try
                {
                    copy.advance(t);
                }
                catch (const invalid_parameter&)
                {
                    can = false;
                }
                FUZZ_REQUIRE(mask.contains(t) == can, "the mask holds exactly the tokens that continue the text");
            }
            if (mask.contains(t))
            {
                allowed.push_back(t);
            }
        }
        FUZZ_REQUIRE(!allowed.empty(), "a mask before eos is never empty");
        FUZZ_REQUIRE(mask.contains(eos) == c.complete(), "eos exactly when complete");
        token_id t = allowed[fuzz::next(seed) % allowed.size()];
        if (budget == 0 && step > 30)
        {
            const std::string rest = c.completion();
            t = rest.empty() ? eos : v.find(rest.substr(0, 1));
        }
        c.advance(t);
    }
    if (budget != 0)
    {
        while (!c.ended())
        {
            FUZZ_REQUIRE(c.tokens() < budget, "the budget holds");
            const token_set& mask = c.mask();
            FUZZ_REQUIRE(!mask.empty(), "a budgeted mask before eos is never empty");
            token_id t = -1;
            for (token_id id = 0; id < token_id(v.size()) && t < 0; ++id)
            {
                if (mask.contains(id) && fuzz::next(seed) % 3 == 0)
                {
                    t = id;
                }
            }
            for (token_id id = 0; id < token_id(v.size()) && t < 0; ++id)
            {
                if (mask.contains(id))
                {
                    t = id;
                }
            }
            c.advance(t);
        }
        FUZZ_REQUIRE(c.tokens() <= budget, "eos within the budget");
    }
    return 0;
}
