// xsampler tool — reading a float32/float64 .npy file as a [rows, cols]
// matrix, turning every way a file can be bad into a std::runtime_error with
// a one-line message that names the file. float16 ('<f2') and bfloat16 are
// read too, widened to float32 as they are read (exactly: every 16-bit value
// is a float). numpy has no bfloat16 dtype: a bfloat16 array is saved as its
// bits, dtype '<u2' (x.view(np.uint16) of an ml_dtypes.bfloat16 array), read
// as bfloat16 when the caller says so (the tool's --bf16), an error otherwise.
//
// The file is read in order and trusted for nothing: the 10-byte preamble
// (magic, version, header length) first, then the header — a Python dict
// literal, parsed here (xtensor's loader misreads header lengths of 32 KiB
// and more, and reads shapes such as (3.9,) as 3) — and only then the data,
// whose length the header's dtype and shape give and which must not exceed
// what the file holds (stat) before anything is allocated for it.
// Limits: a header of at most 1 MiB; rank 1 ([n], read as [1, n]) or 2.
// C-order data is read straight into the returned matrix (peak memory: the
// data once); Fortran-order data costs one transposing copy.
#ifndef XSAMPLER_TOOL_NPY_MATRIX_HPP
#define XSAMPLER_TOOL_NPY_MATRIX_HPP

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include <xtensor/xtensor.hpp>
#include <xsampler/half.hpp>

#include "input_file.hpp"

namespace tool
{
    /// The file's array: 1-D [n] becomes [1, n]; `rank` says which it was.
    struct npy_matrix
    {
        std::variant<xt::xtensor<float, 2>, xt::xtensor<double, 2>> values;
        std::size_t rank = 0;

        std::size_t rows() const
        {
            return std::visit([](const auto& m) { return m.shape()[0]; }, values);
        }
    };

    constexpr std::size_t npy_max_header_bytes = std::size_t(1) << 20;

    namespace detail
    {
        struct npy_header
        {
            std::string descr;
            bool fortran_order = false;
            std::vector<std::uint64_t> shape;
        };

        // At most 24 characters of what a file holds, printable and quoted, for a message.
        inline std::string shown(const std::string& s)
        {
            const bool quoted = s.size() >= 2 && (s[0] == '\'' || s[0] == '"') && s.back() == s[0] && s.size() <= 24;
            std::string out;
            for (const char ch : s.substr(0, 24))
            {
                out += std::isprint(static_cast<unsigned char>(ch)) ? ch : '?';
            }
            return quoted ? out : "'" + out + (s.size() > 24 ? "...'" : "'");
        }

        // The header dict numpy writes, {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), },
        // in any key order, with any spacing; std::runtime_error("why") if it is anything else.
        class npy_header_parser
        {
        public:
            explicit npy_header_parser(const std::string& text) : m_text(text) {}

            npy_header parse()
            {
                npy_header h;
                bool seen[3] = {false, false, false};
                expect('{');
                while (!peek('}'))
                {
                    const std::string key = quoted();
                    expect(':');
                    const int k = key == "descr" ? 0 : key == "fortran_order" ? 1 : key == "shape" ? 2 : -1;
                    if (k < 0 || seen[k])
                    {
                        throw std::runtime_error((k < 0 ? "unexpected key " : "repeated key ") + shown(key));
                    }
                    seen[k] = true;
                    if (k == 0)
                    {
                        h.descr = quoted();
                    }
                    else if (k == 1)
                    {
                        h.fortran_order = boolean();
                    }
                    else
                    {
                        h.shape = shape();
                    }
                    if (!peek('}'))
                    {
                        expect(',');
                    }
                }
                expect('}');
                skip_space();
                if (m_pos != m_text.size())
                {
                    throw std::runtime_error("text after the dict: " + shown(m_text.substr(m_pos)));
                }
                const char* names[] = {"descr", "fortran_order", "shape"};
                for (int k = 0; k < 3; ++k)
                {
                    if (!seen[k])
                    {
                        throw std::runtime_error(std::string("no '") + names[k] + "' key");
                    }
                }
                return h;
            }

        private:
            void skip_space()
            {
                while (m_pos < m_text.size() && std::isspace(static_cast<unsigned char>(m_text[m_pos])))
                {
                    ++m_pos;
                }
            }

            bool peek(char ch)
            {
                skip_space();
                return m_pos < m_text.size() && m_text[m_pos] == ch;
            }

            void expect(char ch)
            {
                if (!peek(ch))
                {
                    throw std::runtime_error(std::string("expected '") + ch + "' at byte " + std::to_string(m_pos) +
                                             (m_pos < m_text.size() ? ", got " + shown(m_text.substr(m_pos)) : ""));
                }
                ++m_pos;
            }

            // The text up to (not including) the first of `ends`, whitespace trimmed.
            std::string token(const char* ends)
            {
                skip_space();
                const std::size_t end = std::min(m_text.find_first_of(ends, m_pos), m_text.size());
                std::string t = m_text.substr(m_pos, end - m_pos);
                m_pos = end;
                while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back())))
                {
                    t.pop_back();
                }
                return t;
            }

            std::string quoted()
            {
                skip_space();
                const char q = m_pos < m_text.size() ? m_text[m_pos] : '\0';
                if (q != '\'' && q != '"')
                {
                    throw std::runtime_error("expected a quoted string at byte " + std::to_string(m_pos));
                }
                const std::size_t end = m_text.find(q, m_pos + 1);
                if (end == std::string::npos)
                {
                    throw std::runtime_error("unterminated string at byte " + std::to_string(m_pos));
                }
                std::string s = m_text.substr(m_pos + 1, end - m_pos - 1);
                m_pos = end + 1;
                return s;
            }

            bool boolean()
            {
                const std::string t = token(",}");
                if (t != "True" && t != "False")
                {
                    throw std::runtime_error("fortran_order must be True or False, got " + shown(t));
                }
                return t == "True";
            }

            std::vector<std::uint64_t> shape()
            {
                std::vector<std::uint64_t> dims;
                expect('(');
                while (!peek(')'))
                {
                    const std::string t = token(",)}");
                    std::uint64_t d = 0;
                    const auto [last, error] = std::from_chars(t.data(), t.data() + t.size(), d);
                    if (t.empty() || !std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; }))
                    {
                        throw std::runtime_error("shape: " + shown(t) + " is not a non-negative integer");
                    }
                    if (error != std::errc{} || last != t.data() + t.size())
                    {
                        throw std::runtime_error("shape: dimension " + shown(t) + " is too large");
                    }
                    dims.push_back(d);
                    if (dims.size() > 32)  // numpy's own limit
                    {
                        throw std::runtime_error("shape: more than 32 dimensions");
                    }
                    if (!peek(')'))
                    {
                        expect(',');
                    }
                }
                expect(')');
                return dims;
            }

            const std::string& m_text;
            std::size_t m_pos = 0;
        };

        // Up to `count` items of T into out, from little-endian; how many bytes arrived.
        template <class T>
        std::size_t read_items(input_file& in, T* out, std::size_t count)
        {
            const std::size_t bytes = count * sizeof(T);
            std::size_t got = 0;
            for (std::size_t n = 1; got < bytes && n > 0; got += n)
            {
                n = in.read_some(reinterpret_cast<char*>(out) + got, bytes - got);
            }
            const std::uint16_t probe = 1;
            unsigned char first = 0;
            std::memcpy(&first, &probe, 1);
            if (first != 1)  // a big-endian machine
            {
                for (std::size_t i = 0; i < got / sizeof(T); ++i)
                {
                    auto* b = reinterpret_cast<unsigned char*>(out + i);
                    std::reverse(b, b + sizeof(T));
                }
            }
            return got;
        }

        // The [rows, cols] data after the header, stored in layout L. A regular file's length has
        // been checked against the header's, so the data is read straight into the matrix. A
        // pipe's is not known: it is read in pieces of 16 MiB, allocating only for what arrived.
        template <class T, xt::layout_type L>
        xt::xtensor<T, 2, L> read_layout(input_file& in, std::size_t rows, std::size_t cols)
        {
            const std::size_t count = rows * cols;
            std::size_t got = 0;
            xt::xtensor<T, 2, L> m;
            if (in.size())
            {
                m.resize({rows, cols});
                got = read_items(in, m.data(), count);
            }
            else
            {
                std::vector<T> arrived;
                for (std::size_t n = 1; arrived.size() < count && n > 0; got += n)
                {
                    const std::size_t have = arrived.size();
                    const std::size_t piece = std::min<std::size_t>(count - have, (std::size_t(1) << 24) / sizeof(T));
                    arrived.resize(have + piece);
                    n = read_items(in, arrived.data() + have, piece);
                    arrived.resize(have + n / sizeof(T));
                }
                if (got == count * sizeof(T))
                {
                    m.resize({rows, cols});
                    std::copy(arrived.begin(), arrived.end(), m.data());
                }
            }
            if (got < count * sizeof(T))
            {
                in.fail("truncated npy data: the header declares " + std::to_string(count * sizeof(T)) +
                        " bytes, the file holds " + std::to_string(got));
            }
            return m;
        }

        template <class T>
        xt::xtensor<T, 2> read_matrix(input_file& in, std::size_t rows, std::size_t cols, bool fortran_order)
        {
            if (!fortran_order)
            {
                return read_layout<T, xt::layout_type::row_major>(in, rows, cols);
            }
            return read_layout<T, xt::layout_type::column_major>(in, rows, cols);  // one transposing copy
        }
    }

    /// bf16_bits: the file's data are bfloat16 bits, dtype '<u2' (only then is '<u2' read).
    inline npy_matrix load_npy_matrix(const std::string& path, bool bf16_bits = false)
    {
        input_file in(path);
        const auto read_exactly = [&](std::string& s, std::size_t n, const char* what) {
            s.resize(n);
            std::size_t got = 0;
            for (std::size_t k = 1; got < n && k > 0; got += k)
            {
                k = in.read_some(&s[got], n - got);
            }
            if (got < n)
            {
                in.fail(what);
            }
        };

        // Preamble: magic, version, header length.
        std::string preamble;
        preamble.resize(10);
        preamble.resize(in.read_some(&preamble[0], 10));
        if (preamble.size() < 6 || preamble.compare(0, 6, "\x93NUMPY") != 0)
        {
            in.fail("not an npy file (bad magic)");
        }
        if (preamble.size() < 10)
        {
            in.fail("truncated npy header");
        }
        const auto byte = [&](std::size_t i) { return std::uint32_t(static_cast<unsigned char>(preamble[i])); };
        const std::uint32_t major = byte(6);
        if ((major != 1 && major != 2) || byte(7) != 0)
        {
            in.fail("unsupported npy format version " + std::to_string(major) + "." + std::to_string(byte(7)));
        }
        std::uint64_t header_len = byte(8) | byte(9) << 8;
        std::uint64_t preamble_len = 10;
        if (major == 2)
        {
            std::string more;
            read_exactly(more, 2, "truncated npy header");
            header_len |= std::uint64_t(static_cast<unsigned char>(more[0])) << 16 |
                          std::uint64_t(static_cast<unsigned char>(more[1])) << 24;
            preamble_len = 12;
        }
        if (header_len == 0 || (in.size() && *in.size() < preamble_len + header_len))
        {
            in.fail("truncated npy header");
        }
        if (header_len > npy_max_header_bytes)
        {
            in.fail("npy header of " + std::to_string(header_len) + " bytes is longer than the 1 MiB this tool reads");
        }

        // Header: the dict, padded with spaces, ending in '\n'.
        std::string header;
        read_exactly(header, std::size_t(header_len), "truncated npy header");
        if (header.back() != '\n')
        {
            in.fail("corrupt npy header (no terminating newline)");
        }
        detail::npy_header h;
        try
        {
            h = detail::npy_header_parser(header).parse();
        }
        catch (const std::runtime_error& e)
        {
            in.fail(std::string("corrupt npy header: ") + e.what());
        }
        if (bf16_bits && h.descr != "<u2")
        {
            in.fail("--bf16 reads bfloat16 bits, dtype '<u2'; the file's dtype is " + detail::shown(h.descr));
        }
        if (h.descr == "<u2" && !bf16_bits)
        {
            in.fail("dtype '<u2': if these are bfloat16 bits, give --bf16");
        }
        if (h.descr != "<f4" && h.descr != "<f8" && h.descr != "<f2" && h.descr != "<u2")
        {
            in.fail("dtype " + detail::shown(h.descr) +
                    " is not float32 ('<f4'), float64 ('<f8'), float16 ('<f2') or bfloat16's bits ('<u2' with --bf16)");
        }
        const std::size_t rank = h.shape.size();
        if (rank != 1 && rank != 2)
        {
            in.fail("expected a 1-D [vocab] or 2-D [batch, vocab] array, got " + std::to_string(rank) + "-D");
        }

        // Data: its length from the header, checked against the file's before any allocation.
        const std::uint64_t rows = rank == 2 ? h.shape[0] : 1;
        const std::uint64_t cols = h.shape[rank - 1];
        const std::uint64_t item = h.descr == "<f4" ? 4 : h.descr == "<f8" ? 8 : 2;
        const std::uint64_t limit = std::min<std::uint64_t>(SIZE_MAX, PTRDIFF_MAX) / item;
        const std::string shape_text =
            "(" + std::to_string(h.shape[0]) + (rank == 2 ? ", " + std::to_string(h.shape[1]) : ",") + ")";
        if (cols != 0 && rows > limit / cols)
        {
            in.fail("npy shape " + shape_text + " is too large: its size overflows");
        }
        const std::uint64_t need = rows * cols * item;
        if (in.size() && *in.size() - preamble_len - header_len < need)
        {
            in.fail("truncated npy data: shape " + shape_text + " needs " + std::to_string(need) +
                    " bytes, the file holds " + std::to_string(*in.size() - preamble_len - header_len));
        }
        npy_matrix out;
        out.rank = rank;
        if (item == 4)
        {
            out.values = detail::read_matrix<float>(in, std::size_t(rows), std::size_t(cols), h.fortran_order);
        }
        else if (item == 2)
        {
            const auto bits = detail::read_matrix<std::uint16_t>(in, std::size_t(rows), std::size_t(cols), h.fortran_order);
            const bool f16 = h.descr == "<f2";
            xt::xtensor<float, 2> wide = xt::xtensor<float, 2>::from_shape(bits.shape());
            std::transform(bits.begin(), bits.end(), wide.begin(), [f16](std::uint16_t b) {
                return f16 ? float(xsampler::f16::from_bits(b)) : float(xsampler::bf16::from_bits(b));
            });
            out.values = std::move(wide);
        }
        else
        {
            out.values = detail::read_matrix<double>(in, std::size_t(rows), std::size_t(cols), h.fortran_order);
        }
        return out;
    }
}

#endif
