// Shared by the fuzz targets: the fuzzer's bytes read front to back as
// values (every read past the end gives 0, so any input decodes), the
// special values every target needs, and the checks that crash the fuzzer.
//
// Encodings (tests/fuzz/make_corpus.py writes the seeds with the same ones):
//   byte, u16, u32, u64   little-endian
//   value<T>()            one selector byte s, then maybe more:
//                           s < 16     a special: NaN, +inf, -inf, -0, +0,
//                                      the smallest denormal (+ and -), the
//                                      smallest normal, the largest and the
//                                      lowest finite, 1, -1, epsilon, 0.5, the
//                                      largest below 1, 1 + epsilon
//                           s < 24     sizeof(T) raw bytes of a T
//                           s < 64     (s - 24) / 39, a fraction in [0, 1]
//                           s < 192    (s - 128) / 8, in [-16, 8): many ties
//                           otherwise  an int16 (2 bytes) / 256
//   id(vocab)             u16: below 0x8000, that mod vocab (in range);
//                         else the u16 as an int16 (negative or past vocab)
#ifndef XSAMPLER_TESTS_FUZZ_INPUT_HPP
#define XSAMPLER_TESTS_FUZZ_INPUT_HPP

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <string>

#include <initializer_list>
#include <memory>
#include <vector>

#include <xsampler/types.hpp>
#include <xsampler/vocabulary.hpp>

// A failed property: what failed and where, then abort (the fuzzer saves the
// input as a crash).
#define FUZZ_REQUIRE(cond, what)                                                                        \
    do                                                                                                  \
    {                                                                                                   \
        if (!(cond))                                                                                    \
        {                                                                                               \
            std::fprintf(stderr, "fuzz check failed: %s (%s:%d): %s\n", #cond, __FILE__, __LINE__,     \
                         std::string(what).c_str());                                                    \
            std::abort();                                                                               \
        }                                                                                               \
    } while (0)

namespace fuzz
{
    /// With XSAMPLER_FUZZ_TRACE set, the targets say what each input did
    /// (to check that a seed reaches what it was made for, or to read a crash).
    inline bool tracing()
    {
        static const bool on = std::getenv("XSAMPLER_FUZZ_TRACE") != nullptr;
        return on;
    }

    inline void trace(const std::string& what)
    {
        if (tracing())
        {
            std::fprintf(stderr, "trace: %s\n", what.c_str());
        }
    }

    class input
    {
    public:
        input(const std::uint8_t* data, std::size_t size) noexcept : m_data(data), m_size(size) {}

        bool empty() const noexcept { return m_pos >= m_size; }

        std::uint8_t byte() noexcept { return m_pos < m_size ? m_data[m_pos++] : 0; }
        std::uint16_t u16() noexcept { return std::uint16_t(byte() | (unsigned(byte()) << 8)); }
        std::uint32_t u32() noexcept { return std::uint32_t(u16()) | (std::uint32_t(u16()) << 16); }
        std::uint64_t u64() noexcept { return std::uint64_t(u32()) | (std::uint64_t(u32()) << 32); }
        bool flag() noexcept { return byte() & 1; }

        template <class T>
        T value() noexcept
        {
            using lim = std::numeric_limits<T>;
            const unsigned s = byte();
            if (s < 16)
            {
                const T specials[16] = {lim::quiet_NaN(), lim::infinity(),     -lim::infinity(), T(-0.0),
                                        T(0),             lim::denorm_min(),   -lim::denorm_min(), lim::min(),
                                        lim::max(),       lim::lowest(),       T(1),             T(-1),
                                        lim::epsilon(),   T(0.5),              T(1) - lim::epsilon() / 2,
                                        T(1) + lim::epsilon()};
                return specials[s];
            }
            if (s < 24)
            {
                unsigned char bits[sizeof(T)];
                for (auto& b : bits)
                {
                    b = byte();
                }
                T v;
                std::memcpy(&v, bits, sizeof v);
                return v;
            }
            if (s < 64)
            {
                return T(double(s - 24) / 39.0);
            }
            if (s < 192)
            {
                return T((double(s) - 128.0) / 8.0);
            }
            return T(double(std::int16_t(u16())) / 256.0);
        }

        /// A token id: in [0, vocab) unless the top bit of the u16 is set.
        xsampler::token_id id(std::size_t vocab) noexcept
        {
            const std::uint16_t v = u16();
            if (v < 0x8000 && vocab > 0)
            {
                return xsampler::token_id(v % vocab);
            }
            return xsampler::token_id(std::int16_t(v));
        }

    private:
        const std::uint8_t* m_data;
        std::size_t m_size;
        std::size_t m_pos = 0;
    };

    /// Runs f; returns the message of the documented exception it threw
    /// (invalid_parameter or invalid_logits, which must have a message), or
    /// an empty string if it returned. Any other exception escapes and
    /// crashes the fuzzer.
    template <class F>
    std::string documented_error(F&& f)
    {
        try
        {
            f();
            return {};
        }
        catch (const xsampler::invalid_parameter& e)
        {
            FUZZ_REQUIRE(*e.what() != '\0', "an invalid_parameter without a message");
            return std::string("invalid_parameter: ") + e.what();
        }
        catch (const xsampler::invalid_logits& e)
        {
            FUZZ_REQUIRE(*e.what() != '\0', "an invalid_logits without a message");
            return std::string("invalid_logits: ") + e.what();
        }
    }

    /// The targets' entry: the first byte's low bit picks the row type; run
    /// is called as run(T{}, flags) with that byte.
    template <class Run>
    void by_row_type(input& in, Run&& run)
    {
        const unsigned flags = in.byte();
        if (flags & 1)
        {
            run(double{}, flags);
        }
        else
        {
            run(float{}, flags);
        }
    }

    /// The penalties of sampling_params `p`: repeat, presence, frequency
    /// (value<double> each), repeat_last_n (an int8), the scope (a flag).
    template <class Params>
    void read_penalties(input& in, Params& p)
    {
        using scope = decltype(p.penalty_scope);
        p.repeat_penalty = in.value<double>();
        p.presence_penalty = in.value<double>();
        p.frequency_penalty = in.value<double>();
        p.repeat_last_n = std::int64_t(std::int8_t(in.byte()));
        p.penalty_scope = in.flag() ? scope::output : scope::window;
    }

    /// A small vocabulary for the constraint targets: every single byte, the
    /// extra tokens given, and eos last.
    /// The walks' choices: a 64-bit LCG step, its high bits returned.
    inline std::uint64_t next(std::uint64_t& seed) noexcept
    {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        return seed >> 33;
    }

    inline std::shared_ptr<const xsampler::vocabulary_index> small_index(std::initializer_list<const char*> extra)
    {
        std::vector<std::string> tokens;
        for (int b = 0; b < 256; ++b)
        {
            tokens.emplace_back(1, char(b));
        }
        for (const char* t : extra)
        {
            tokens.emplace_back(t);
        }
        tokens.emplace_back();
        const auto eos = xsampler::token_id(tokens.size() - 1);
        return std::make_shared<const xsampler::vocabulary_index>(
            std::make_shared<const xsampler::vocabulary>(std::move(tokens), std::vector<xsampler::token_id>{eos}));
    }
}

#endif
