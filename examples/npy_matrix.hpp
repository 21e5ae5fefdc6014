// xsampler examples — reading a float32/float64 .npy file as a [rows, cols]
// matrix with xtensor's npy loader, turning every way a file can be bad into
// a std::runtime_error with a one-line message.
//
// xtensor's loader trusts its input: it does not check that the data it
// reads is all there, reads an empty header past its end, and misreads a
// header length whose low bytes are 128 or more. So the preamble is checked
// here first and the data length after.
#ifndef XSAMPLER_EXAMPLES_NPY_MATRIX_HPP
#define XSAMPLER_EXAMPLES_NPY_MATRIX_HPP

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <variant>

#include <xtensor/xnpy.hpp>
#include <xtensor/xtensor.hpp>

namespace examples
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

    namespace detail
    {
        [[noreturn]] inline void fail(const std::string& path, const std::string& why)
        {
            throw std::runtime_error("'" + path + "': " + why);
        }

        template <class T>
        xt::xtensor<T, 2> as_matrix(xt::detail::npy_file&& file)
        {
            auto flat = std::move(file).cast<T>();
            const auto& shape = flat.shape();
            const std::size_t rows = shape.size() == 2 ? shape[0] : 1;
            const std::size_t cols = shape.size() == 2 ? shape[1] : shape[0];
            xt::xtensor<T, 2> m = xt::empty<T>({rows, cols});
            std::size_t r = 0;
            std::size_t c = 0;
            for (const T v : flat)  // flat iterates in row-major order whatever the file's layout
            {
                m(r, c) = v;
                if (++c == cols)
                {
                    c = 0;
                    ++r;
                }
            }
            return m;
        }
    }

    inline npy_matrix load_npy_matrix(const std::string& path)
    {
        std::ifstream in(path, std::ios::binary);
        if (!in)
        {
            detail::fail(path, std::string("cannot open: ") + std::strerror(errno));
        }
        const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (in.bad())
        {
            detail::fail(path, "read error");
        }

        // Preamble: magic, version, header length, header ending in '\n'.
        constexpr char magic[] = "\x93NUMPY";
        if (bytes.size() < 10 || bytes.compare(0, 6, magic) != 0)
        {
            detail::fail(path, "not an npy file (bad magic)");
        }
        const auto byte = [&](std::size_t i) { return std::uint32_t(static_cast<unsigned char>(bytes[i])); };
        const std::uint32_t major = byte(6);
        if ((major != 1 && major != 2) || byte(7) != 0)
        {
            detail::fail(path, "unsupported npy format version " + std::to_string(major) + "." + std::to_string(byte(7)));
        }
        const std::size_t len_bytes = major == 1 ? 2 : 4;
        if (bytes.size() < 8 + len_bytes)
        {
            detail::fail(path, "truncated npy header");
        }
        std::size_t header_len = 0;
        for (std::size_t i = 0; i < len_bytes; ++i)
        {
            header_len |= std::size_t(byte(8 + i)) << (8 * i);
        }
        const std::size_t data_offset = 8 + len_bytes + header_len;
        if (header_len == 0 || bytes.size() < data_offset)
        {
            detail::fail(path, "truncated npy header");
        }
        if (bytes[data_offset - 1] != '\n')
        {
            detail::fail(path, "corrupt npy header (no terminating newline)");
        }
        for (std::size_t i = 0; i + 1 < len_bytes; ++i)
        {
            if (byte(8 + i) >= 0x80)  // xtensor sign-extends these bytes
            {
                detail::fail(path, "npy header length " + std::to_string(header_len) +
                                       " is not one xtensor's loader reads correctly");
            }
        }

        std::istringstream stream(bytes);
        xt::detail::npy_file file = [&] {
            try
            {
                return xt::detail::load_npy_file(stream);
            }
            catch (const std::bad_alloc&)
            {
                detail::fail(path, "npy shape too large to load");
            }
            catch (const std::exception& e)
            {
                detail::fail(path, std::string("corrupt npy header: ") + e.what());
            }
        }();

        std::size_t count = 1;
        for (const std::size_t d : file.m_shape)
        {
            if (d != 0 && count > SIZE_MAX / d)
            {
                detail::fail(path, "npy shape overflows");
            }
            count *= d;
        }
        const std::string& dtype = file.m_typestring;
        if (dtype != "<f4" && dtype != "<f8")
        {
            detail::fail(path, "dtype '" + dtype + "' is not float32 ('<f4') or float64 ('<f8')");
        }
        const std::size_t need = count * (dtype == "<f4" ? 4 : 8);
        if (need / (dtype == "<f4" ? 4 : 8) != count || !stream || bytes.size() - data_offset < need)
        {
            detail::fail(path, "truncated npy data: expected " + std::to_string(need) + " bytes, found " +
                                   std::to_string(bytes.size() - data_offset));
        }
        const std::size_t rank = file.m_shape.size();
        if (rank != 1 && rank != 2)
        {
            detail::fail(path, "expected a 1-D [vocab] or 2-D [batch, vocab] array, got " + std::to_string(rank) + "-D");
        }

        npy_matrix out;
        out.rank = rank;
        if (dtype == "<f4")
        {
            out.values = detail::as_matrix<float>(std::move(file));
        }
        else
        {
            out.values = detail::as_matrix<double>(std::move(file));
        }
        return out;
    }
}

#endif
