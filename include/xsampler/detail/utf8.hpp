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
            const unsigned b0 = static_cast<unsigned char>(s[at]);
            std::size_t len = 0;
            unsigned lo = 0x80, hi = 0xBF;  // the second byte's range
            if (b0 < 0x80)
            {
                cp = b0;
                return 1;
            }
            if (b0 >= 0xC2 && b0 <= 0xDF)
            {
                len = 2, cp = b0 & 0x1F;
            }
            else if (b0 >= 0xE0 && b0 <= 0xEF)
            {
                len = 3, cp = b0 & 0x0F;
                lo = b0 == 0xE0 ? 0xA0 : 0x80;  // no overlong form
                hi = b0 == 0xED ? 0x9F : 0xBF;  // no surrogate
            }
            else if (b0 >= 0xF0 && b0 <= 0xF4)
            {
                len = 4, cp = b0 & 0x07;
                lo = b0 == 0xF0 ? 0x90 : 0x80;  // no overlong form
                hi = b0 == 0xF4 ? 0x8F : 0xBF;  // nothing past U+10FFFF
            }
            else
            {
                return 0;
            }
            if (s.size() - at < len)
            {
                return 0;
            }
            for (std::size_t k = 1; k < len; ++k)
            {
                const unsigned b = static_cast<unsigned char>(s[at + k]);
                if (b < (k == 1 ? lo : 0x80u) || b > (k == 1 ? hi : 0xBFu))
                {
                    if (bad != nullptr)
                    {
                        *bad = at + k;
                    }
                    return 0;
                }
                cp = cp << 6 | (b & 0x3F);
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
