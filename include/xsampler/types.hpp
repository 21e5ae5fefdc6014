// xsampler — token samplers for language-model inference. BSD-3-Clause.
//
// The small vocabulary every header shares: token ids, a view of the token
// history, the sampled token, and the exception family.
//
// Errors: every bad input throws a class derived from std::invalid_argument,
// whose message names the function or stage, the parameter, the allowed range
// and the value ("top_p: p must be in (0, 1], got 1.5"), or the index of the
// offending logit ("logits: NaN at index 17").
//   - invalid_parameter: a stage or sampler parameter out of range; thrown
//     when the stage is constructed, never per token.
//   - invalid_logits: a row that cannot be sampled: empty, not 1-D, NaN or
//     +inf at some index, or every token masked with -inf.
#ifndef XSAMPLER_TYPES_HPP
#define XSAMPLER_TYPES_HPP

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace xsampler
{
    /// A token id: an index into the vocabulary (int32, as engines store them).
    using token_id = std::int32_t;

    /// A parameter outside its documented range.
    class invalid_parameter : public std::invalid_argument
    {
    public:
        using std::invalid_argument::invalid_argument;
    };

    /// A logits row that cannot be sampled from.
    class invalid_logits : public std::invalid_argument
    {
    public:
        using std::invalid_argument::invalid_argument;
    };

    /// A read-only view of the token history (prompt plus generated tokens).
    /// Cheap to copy; it does not own the tokens.
    class token_span
    {
    public:
        token_span() noexcept = default;
        token_span(const token_id* data, std::size_t size) noexcept : m_data(data), m_size(size) {}
        token_span(const std::vector<token_id>& tokens) noexcept  // NOLINT: implicit on purpose
            : m_data(tokens.data()), m_size(tokens.size())
        {
        }

        const token_id* begin() const noexcept { return m_data; }
        const token_id* end() const noexcept { return m_data + m_size; }
        std::size_t size() const noexcept { return m_size; }
        bool empty() const noexcept { return m_size == 0; }
        token_id operator[](std::size_t i) const noexcept { return m_data[i]; }

    private:
        const token_id* m_data = nullptr;
        std::size_t m_size = 0;
    };

    /// One sampled token: its id and its natural-log probability under the
    /// final (filtered, renormalised) distribution it was drawn from.
    struct sampled_token
    {
        token_id id = 0;
        double logprob = 0.0;
    };

    /// The final distribution a sampler would draw from: the kept tokens with
    /// their probabilities, sorted by probability descending, then id ascending.
    /// Probabilities sum to 1 up to rounding; a kept token whose weight
    /// underflowed has probability 0 and is never drawn.
    struct distribution
    {
        std::vector<token_id> ids;
        std::vector<double> probs;
    };

    namespace detail
    {
        // A parameter value as an error message shows it: "0.5", "1e-10",
        // "nan", "inf" (up to 9 significant digits).
        inline std::string format_value(double v)
        {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%.9g", v);
            return buf;
        }
    }
}

#endif
