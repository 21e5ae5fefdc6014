// xsampler/detail/utf8.hpp — UTF-8: the one decoder and encoder. (xsampler, BSD-3-Clause)
//
// Every header that reads or writes UTF-8 (regex, gbnf, JSON, the tool's
// tokenizer) goes through these. Well-formed means RFC 3629: the shortest
// form, no surrogate (U+D800..U+DFFF), nothing above U+10FFFF.
#ifndef XSAMPLER_DETAIL_UTF8_HPP
#define XSAMPLER_DETAIL_UTF8_HPP

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace xsampler
{
    namespace detail
    {
        constexpr std::uint32_t max_code_point = 0x10FFFF;

        /// What a well-formed sequence that starts with byte b0 is: its length
        /// (1 to 4; 0 when b0 starts none), the range [lo, hi] of its second
        /// byte (every later byte is in [0x80, 0xBF]) and the lead's payload.
        struct utf8_lead
        {
            std::size_t length = 0;
            unsigned lo = 0x80, hi = 0xBF;
            std::uint32_t payload = 0;

            explicit utf8_lead(unsigned char b0) noexcept
            {
                if (b0 < 0x80)
                {
                    length = 1, payload = b0;
                }
                else if (b0 >= 0xC2 && b0 <= 0xDF)
                {
                    length = 2, payload = b0 & 0x1Fu;
                }
                else if (b0 >= 0xE0 && b0 <= 0xEF)
                {
                    length = 3, payload = b0 & 0x0Fu;
                    lo = b0 == 0xE0 ? 0xA0 : 0x80;  // no overlong form
                    hi = b0 == 0xED ? 0x9F : 0xBF;  // no surrogate
                }
                else if (b0 >= 0xF0 && b0 <= 0xF4)
                {
                    length = 4, payload = b0 & 0x07u;
                    lo = b0 == 0xF0 ? 0x90 : 0x80;  // no overlong form
                    hi = b0 == 0xF4 ? 0x8F : 0xBF;  // nothing past U+10FFFF
                }
            }
            /// Whether b can be byte k (1 <= k < length) of such a sequence.
            bool continues(std::size_t k, unsigned char b) const noexcept
            {
                return b >= (k == 1 ? lo : 0x80u) && b <= (k == 1 ? hi : 0xBFu);
            }
        };

        /// The well-formed UTF-8 sequence that starts at s[at]: its length (1
        /// to 4), its code point in `cp`; 0 when the bytes there are not one
        /// (or at is past the end), and then `bad`, if given, is the offset of
        /// the first byte that breaks it (`at` for a byte that starts no
        /// sequence, or a sequence cut by the end).
        inline std::size_t utf8_decode(std::string_view s, std::size_t at, std::uint32_t& cp,
                                       std::size_t* bad = nullptr) noexcept
        {
            if (bad != nullptr)
            {
                *bad = at;
            }
            if (at >= s.size())
            {
                return 0;
            }
            const utf8_lead lead(static_cast<unsigned char>(s[at]));
            const std::size_t len = lead.length;
            if (len == 0 || s.size() - at < len)
            {
                return 0;
            }
            cp = lead.payload;
            for (std::size_t k = 1; k < len; ++k)
            {
                const auto b = static_cast<unsigned char>(s[at + k]);
                if (!lead.continues(k, b))
                {
                    if (bad != nullptr)
                    {
                        *bad = at + k;
                    }
                    return 0;
                }
                cp = cp << 6 | (b & 0x3Fu);
            }
            return len;
        }

        /// The length of c's encoding (c <= U+10FFFF).
        inline int utf8_length(std::uint32_t c) noexcept { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }

        /// c's encoding into out[0, utf8_length(c)); a surrogate is encoded
        /// as its three bytes (what JSON's lone \uD800 escapes spell).
        inline void utf8_encode(std::uint32_t c, unsigned char* out) noexcept
        {
            switch (utf8_length(c))
            {
            case 1: out[0] = static_cast<unsigned char>(c); break;
            case 2:
                out[0] = static_cast<unsigned char>(0xC0 | c >> 6);
                out[1] = static_cast<unsigned char>(0x80 | (c & 0x3F));
                break;
            case 3:
                out[0] = static_cast<unsigned char>(0xE0 | c >> 12);
                out[1] = static_cast<unsigned char>(0x80 | (c >> 6 & 0x3F));
                out[2] = static_cast<unsigned char>(0x80 | (c & 0x3F));
                break;
            default:
                out[0] = static_cast<unsigned char>(0xF0 | c >> 18);
                out[1] = static_cast<unsigned char>(0x80 | (c >> 12 & 0x3F));
                out[2] = static_cast<unsigned char>(0x80 | (c >> 6 & 0x3F));
                out[3] = static_cast<unsigned char>(0x80 | (c & 0x3F));
            }
        }

        inline void utf8_append(std::uint32_t c, std::string& out)
        {
            unsigned char b[4];
            utf8_encode(c, b);
            out.append(reinterpret_cast<const char*>(b), std::size_t(utf8_length(c)));
        }
    }
}

#endif
