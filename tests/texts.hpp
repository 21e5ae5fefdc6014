// Shared by the regex, grammar and constraint tests: every short text over an
// alphabet; a pattern with a length, counted or as the product.
#ifndef XSAMPLER_TESTS_TEXTS_HPP
#define XSAMPLER_TESTS_TEXTS_HPP

#include <cstddef>
#include <string>
#include <vector>

#include <xsampler/grammar.hpp>

namespace test_texts
{
    /// root ::= open P close, P the pattern's texts of min to max code points:
    /// a counted lexeme, or (the oracle) the pattern's product with the length.
    inline xsampler::grammar pattern_with_length(const std::string& pattern, std::size_t min, std::size_t max,
                                                 const std::string& open, const std::string& close, bool counted)
    {
        using namespace xsampler;
        const byte_dfa d = compile_regex(pattern);
        grammar g;
        const auto r = g.rule("root");
        grammar::expr_id body = 0;
        if (counted)
        {
            auto [content, units] = dfa_code_point_units(d);
            body = g.counted_lexeme(std::move(content), std::move(units), min, max);
        }
        else
        {
            body = g.lexeme(dfa_code_points(d, min, max, 100000));
        }
        g.define(r, g.sequence({g.bytes(open), body, g.bytes(close)}));
        g.set_root(r);
        return g;
    }

    /// Every string over `alphabet` up to length `max_len`, shortest first.
    inline std::vector<std::string> all_strings(const std::string& alphabet, std::size_t max_len)
    {
        std::vector<std::string> out{""};
        std::size_t from = 0;
        for (std::size_t len = 1; len <= max_len; ++len)
        {
            const std::size_t to = out.size();
            for (std::size_t i = from; i < to; ++i)
            {
                for (const char c : alphabet)
                {
                    out.push_back(out[i] + c);
                }
            }
            from = to;
        }
        return out;
    }
}

#endif
