// xsampler/types.hpp — token ids, spans, the history, errors. (xsampler, BSD-3-Clause)
//
// The small vocabulary every header shares: token ids, spans, the token
// history (with where its prompt ends), the sampled token, and the exception
// family.
//
// Errors: every exception the library throws derives from xsampler::error
// and from the matching standard exception, so a caller catches either
// family. The message names the function or stage, the parameter, the
// allowed range and the value ("top_p: p must be in (0, 1], got 1.5"), or
// the index of the offending logit ("logits: NaN at index 17").
//   - invalid_parameter (std::invalid_argument): a stage or sampler
//     parameter out of range, a grammar or schema that cannot be compiled;
//     thrown when the object is constructed, never per token.
//   - invalid_logits (std::invalid_argument): a row that cannot be sampled:
//     empty, not 1-D, NaN or +inf at some index, longer than token_id can
//     index, or every token masked with -inf.
//   - invalid_data (std::runtime_error): data read from outside that is
//     malformed or unreadable (a tokenizer's files).
//   - invalid_use (std::logic_error): an object used in a state that does
//     not allow it (a custom_stage after it was moved from).
// The object that threw stays usable.
#ifndef XSAMPLER_TYPES_HPP
#define XSAMPLER_TYPES_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace xsampler
{
    /// A token id: an index into the vocabulary (int32, as engines store them).
    using token_id = std::int32_t;

    /// The base of every exception the library throws; each one also derives
    /// from the standard exception named beside it.
    class error
    {
    public:
        virtual ~error() = default;
        /// The message: what went wrong, naming the parameter or the index.
        virtual const char* what() const noexcept = 0;

    protected:
        error() = default;
        error(const error&) = default;
        error& operator=(const error&) = default;
    };

    namespace detail
    {
        /// An xsampler::error that is also the standard exception Std.
        template <class Std>
        class error_as : public error, public Std
        {
        public:
            using Std::Std;
            const char* what() const noexcept override { return Std::what(); }
        };
    }

    /// A parameter outside its documented range (std::invalid_argument).
    class invalid_parameter : public detail::error_as<std::invalid_argument>
    {
    public:
        using error_as::error_as;
    };

    /// A logits row that cannot be sampled from (std::invalid_argument).
    class invalid_logits : public detail::error_as<std::invalid_argument>
    {
    public:
        using error_as::error_as;
    };

    /// Data read from outside that is malformed or unreadable (std::runtime_error).
    class invalid_data : public detail::error_as<std::runtime_error>
    {
    public:
        using error_as::error_as;
    };

    /// An object used in a state that does not allow it (std::logic_error).
    class invalid_use : public detail::error_as<std::logic_error>
    {
    public:
        using error_as::error_as;
    };

    /// A token with its logit.
    template <class T>
    struct scored
    {
        T logit;
        token_id id;
    };

    /// The rank of the contract: higher logit first, then lower id.
    template <class T>
    bool ranks_before(const scored<T>& a, const scored<T>& b) noexcept
    {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    }

    /// A view of n contiguous elements (std::span's subset, for C++17): cheap
    /// to copy, does not own them. span<const T> binds to a std::vector<T> (or
    /// any container with data() and size()) implicitly.
    template <class T>
    class span
    {
    public:
        using element_type = T;
        using value_type = std::remove_cv_t<T>;

        span() noexcept = default;
        span(T* data, std::size_t size) noexcept : m_data(data), m_size(size) {}
        template <class C, class = std::enable_if_t<std::is_convertible<decltype(std::declval<C&>().data()), T*>::value>>
        span(C& container) noexcept  // NOLINT: implicit on purpose, like std::span
            : m_data(container.data()), m_size(container.size())
        {
        }

        T* begin() const noexcept { return m_data; }
        T* end() const noexcept { return m_data + m_size; }
        T* data() const noexcept { return m_data; }
        std::size_t size() const noexcept { return m_size; }
        bool empty() const noexcept { return m_size == 0; }
        T& operator[](std::size_t i) const noexcept { return m_data[i]; }
        /// Elements [from, from + count), clamped to the span.
        span subspan(std::size_t from, std::size_t count = ~std::size_t(0)) const noexcept
        {
            from = std::min(from, m_size);
            return {m_data + from, std::min(count, m_size - from)};
        }

    private:
        T* m_data = nullptr;
        std::size_t m_size = 0;
    };

    /// A read-only view of token ids.
    using token_span = span<const token_id>;

    /// The token history a stage sees: the prompt followed by the tokens
    /// generated so far, and where the prompt ends (engines differ on which of
    /// them a penalty counts). Cheap to copy; it does not own the tokens. A
    /// history made from tokens alone is all prompt.
    class token_history
    {
    public:
        token_history() noexcept = default;
        token_history(token_span tokens) noexcept  // NOLINT: implicit on purpose
            : m_tokens(tokens), m_prompt(tokens.size())
        {
        }
        token_history(const std::vector<token_id>& tokens) noexcept  // NOLINT: implicit on purpose
            : token_history(token_span(tokens))
        {
        }
        /// The first prompt_length tokens are the prompt; prompt_length must
        /// be at most tokens.size() (invalid_parameter otherwise).
        token_history(token_span tokens, std::size_t prompt_length) : m_tokens(tokens), m_prompt(prompt_length)
        {
            if (prompt_length > tokens.size())
            {
                throw invalid_parameter("history: prompt length " + std::to_string(prompt_length) + " exceeds the " +
                                        std::to_string(tokens.size()) + " tokens of the history");
            }
        }

        /// Prompt and generated tokens, in order.
        token_span tokens() const noexcept { return m_tokens; }
        std::size_t size() const noexcept { return m_tokens.size(); }
        std::size_t prompt_length() const noexcept { return m_prompt; }
        token_span prompt() const noexcept { return m_tokens.subspan(0, m_prompt); }
        token_span generated() const noexcept { return m_tokens.subspan(m_prompt); }

    private:
        token_span m_tokens;
        std::size_t m_prompt = 0;
    };

    namespace detail
    {
        /// Throws invalid_parameter("<what> <id> is negative") for the first
        /// negative id ("min_tokens: eos id -1 is negative").
        inline void check_not_negative(span<const token_id> ids, const std::string& what)
        {
            for (const token_id id : ids)
            {
                if (id < 0)
                {
                    throw invalid_parameter(what + " " + std::to_string(id) + " is negative");
                }
            }
        }

        /// Throws invalid_parameter("<who>: <what> <id> is outside the
        /// vocabulary of V") for the first id of `ids` not in [0, vocab).
        inline void check_ids(span<const token_id> ids, std::size_t vocab, const char* who, const char* what)
        {
            for (const token_id id : ids)
            {
                if (std::size_t(id) >= vocab)  // (a negative id converts to more than any vocabulary)
                {
                    throw invalid_parameter(std::string(who) + ": " + what + " " + std::to_string(id) +
                                            " is outside the vocabulary of " + std::to_string(vocab));
                }
            }
        }
    }

    /// A set of token ids as a bitset (bit i of word w is token 64w + i): what
    /// a mask over the vocabulary is handed to candidates::keep_in as. It
    /// grows to its largest id; ids past its words are not in it.
    class token_set
    {
    public:
        token_set() = default;
        /// The set of `ids`; a negative id: invalid_parameter naming `who`.
        token_set(const std::vector<token_id>& ids, const std::string& who)
        {
            detail::check_not_negative(ids, who + ": token id");
            for (const token_id id : ids)
            {
                insert(id);
            }
        }
        /// The set whose bit i of words[i / 64] is set for each member i.
        explicit token_set(std::vector<std::uint64_t> words) : m_words(std::move(words))
        {
            for (std::size_t w = 0; w < m_words.size(); ++w)
            {
                if (m_words[w] != 0)
                {
                    m_size += std::size_t(__builtin_popcountll(m_words[w]));
                    m_largest = token_id(w * 64 + 63 - std::size_t(__builtin_clzll(m_words[w])));
                }
            }
        }
        void insert(token_id id)
        {
            const auto w = std::size_t(id) / 64;
            if (w >= m_words.size())
            {
                m_words.resize(w + 1, 0);
            }
            if (!contains(id))
            {
                m_words[w] |= std::uint64_t(1) << (std::size_t(id) % 64);
                ++m_size;
                m_largest = std::max(m_largest, id);
            }
        }
        bool contains(token_id id) const noexcept
        {
            const auto w = std::size_t(id) / 64;
            return id >= 0 && w < m_words.size() && (m_words[w] >> (std::size_t(id) % 64) & 1) != 0;
        }
        bool empty() const noexcept { return m_size == 0; }
        std::size_t size() const noexcept { return m_size; }
        /// The largest id in the set (-1 when empty).
        token_id largest() const noexcept { return m_largest; }
        const std::vector<std::uint64_t>& words() const noexcept { return m_words; }

    private:
        std::vector<std::uint64_t> m_words;
        std::size_t m_size = 0;
        token_id m_largest = -1;
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
        /// Tokens a decode loop reserves up front: max_tokens comes from
        /// outside, so beyond this the buffers grow with what is generated.
        inline std::size_t tokens_to_reserve(std::size_t max_tokens) noexcept
        {
            return std::min<std::size_t>(max_tokens, 4096);
        }

        // A parameter value as an error message shows it: "0.5", "1e-10",
        // "nan", "inf" (up to 9 significant digits).
        inline std::string format_value(double v)
        {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%.9g", v);
            return buf;
        }

        // A stage's words with its min_keep when that is not 1 ("typical
        // 0.9, min_keep 3").
        inline std::string with_min_keep(std::string text, std::size_t min_keep)
        {
            return min_keep > 1 ? text + ", min_keep " + std::to_string(min_keep) : text;
        }
    }
}

#endif
