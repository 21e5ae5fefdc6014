// Shared by the regex and grammar tests: every short text over an alphabet.
#ifndef XSAMPLER_TESTS_TEXTS_HPP
#define XSAMPLER_TESTS_TEXTS_HPP

#include <cstddef>
#include <string>
#include <vector>

namespace test_texts
{
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
