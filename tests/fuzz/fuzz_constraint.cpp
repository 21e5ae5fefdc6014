// fuzz_constraint: a JSON schema or a regular expression from fuzzed bytes,
// compiled into a constraint (json_schema.hpp, constraint.hpp) over a small
// vocabulary (every single byte, tokens that span JSON's structure, eos),
// then walked.
//
// Input: a mode byte (bit 0: a regex, else a JSON schema; bit 1: with a
// budget; bits 2-4: the budget's slack), a seed byte for the walk's choices,
// then the schema's or the pattern's text (the rest of the input).
//
// Compiling either throws invalid_parameter with a message (anything else
// crashes) or gives a constraint. Its walk (random allowed tokens, then the
// canonical completion's) must hold, at every step: the mask is not empty
// until eos; eos is allowed exactly when the text is complete; advancing by
// an allowed token succeeds; the completion's bytes, read one token each,
// complete the text; with a budget, the walk ends with eos within it (a
// grammar with distinct items or counted lexemes refuses budgets, as
// documented: the walk goes on without one). A complete JSON text parses
// with nlohmann-json.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <xsampler/json_schema.hpp>

#include "fuzz_input.hpp"

namespace
{
    using namespace xsampler;

    std::shared_ptr<const vocabulary_index> small_index()
    {
        static const auto index = fuzz::small_index({"{\"", "\":", "\",", "\"}", "},", "\"},", "\":\"", ", \"", "[{", "}]", "true",
                                  "false", "null", "12", "ab", "abc", "\\u", "D83D", "\xC3\xA9", "  "});
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
    const auto index = small_index();
    const vocabulary& v = index->vocab();
    const token_id eos = v.eos()[0];
    std::unique_ptr<constraint> c;
    try
    {
        if (mode & 1)
        {
            regex_options o;
            o.max_states = 2000;
            c = std::make_unique<constraint>(regex_constraint(index, text, o));
        }
        else
        {
            c = std::make_unique<constraint>(json_schema_constraint(index, text));
        }
    }
    catch (const invalid_parameter& e)
    {
        FUZZ_REQUIRE(std::string(e.what()).size() > 8, "an error says what is wrong");
        fuzz::trace(e.what());
        return 0;
    }
    const std::size_t least = c->shortest_completion();
    FUZZ_REQUIRE(least >= 1, "eos at least");
    std::size_t budget = 0;
    if (mode & 2)
    {
        budget = least + ((mode >> 2) & 7);
        try
        {
            c->set_budget(budget);
        }
        catch (const invalid_parameter& e)
        {
            // a grammar with distinct items or counted lexemes refuses any budget; the walk goes on without one
            const std::string why = e.what();
            FUZZ_REQUIRE(why.find("distinct items") != std::string::npos || why.find("counted lexemes") != std::string::npos,
                         "only distinct items and counted lexemes refuse a budget");
            FUZZ_REQUIRE(c->tokens() == 0 && !c->ended(), "the refusal leaves the constraint as it was");
            budget = 0;
        }
    }
    if (budget != 0)
    {
        try
        {
            c->set_budget(least - 1);
            FUZZ_REQUIRE(least == 1, "a budget below the shortest completion is refused");
        }
        catch (const invalid_parameter&)
        {
        }
        c->set_budget(budget);
    }
    const std::size_t walk = 64;
    while (!c->ended())
    {
        FUZZ_REQUIRE(c->tokens() <= walk + least + 70000, "the walk ends");
        FUZZ_REQUIRE(budget == 0 || c->tokens() < budget, "the budget holds");
        const token_set& m = c->mask();
        FUZZ_REQUIRE(!m.empty(), "a mask before eos is never empty");
        FUZZ_REQUIRE(m.contains(eos) == c->complete(), "eos exactly when complete");
        token_id t = -1;
        if (c->tokens() < walk && (seed & 3) != 0)
        {
            // the k-th allowed token, k from the seed
            std::uint64_t k = (seed * 0x9e3779b97f4a7c15ull >> 33) % m.size();
            for (token_id id = 0; id < token_id(v.size()) && t < 0; ++id)
            {
                if (m.contains(id) && k-- == 0)
                {
                    t = id;
                }
            }
            fuzz::next(seed);
        }
        else
        {
            const std::string rest = c->completion();
            t = rest.empty() ? eos : v.find(rest.substr(0, 1));
            // without a budget the completion's next byte is always allowed; under one it
            // may not fit (the completion's fewest tokens may not start with that byte)
            FUZZ_REQUIRE(budget != 0 || t < 0 || m.contains(t), "the completion's next byte is allowed");
            fuzz::next(seed);
            if (t >= 0 && !m.contains(t))
            {
                t = -1;
            }
        }
        if (t < 0)
        {
            // under a budget the completion's first byte may not fit: any allowed token
            for (token_id id = 0; id < token_id(v.size()) && t < 0; ++id)
            {
                if (m.contains(id))
                {
                    t = id;
                }
            }
        }
        c->advance(t);
        if (t != eos && (mode & 1) == 0 && c->complete())
        {
            const std::string done = c->text();
            FUZZ_REQUIRE(nlohmann::json::accept(done), "a complete text is JSON: " + done);
        }
    }
    FUZZ_REQUIRE(budget == 0 || c->tokens() <= budget, "eos within the budget");
    return 0;
}
