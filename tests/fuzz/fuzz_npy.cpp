// fuzz_npy: the xsampler tool's .npy reader (tool/npy_matrix.hpp) on any
// bytes. The bytes are written to a file (one per process) and read back
// with tool::load_npy_matrix, once as a float file and once with --bf16: it
// either throws a std::exception with a message, or returns a 1-D or 2-D
// matrix whose elements are the file's data, element for element (C or
// Fortran order; float16 and bfloat16 bits widened), with all of that data
// inside the file. scripts/fuzz runs it with -malloc_limit_mb=512, so a reader that
// allocates what a header merely claims shows as a crash.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <variant>

#include <unistd.h>

#include "../../tool/npy_matrix.hpp"
#include "fuzz_input.hpp"

namespace
{
    const std::string& scratch_path()
    {
        static const std::string path = [] {
            const char* dir = std::getenv("TMPDIR");
            return std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/xsampler_fuzz_npy_" +
                   std::to_string(::getpid()) + ".npy";
        }();
        return path;
    }

    struct remove_at_exit
    {
        ~remove_at_exit() { std::remove(scratch_path().c_str()); }
    } cleanup;

    /// Where the data starts, by the preamble the reader checked.
    std::size_t data_offset(const std::uint8_t* data, std::size_t size)
    {
        const std::size_t len_bytes = data[6] == 1 ? 2 : 4;
        std::size_t header_len = 0;
        for (std::size_t i = 0; i < len_bytes; ++i)
        {
            header_len |= std::size_t(data[8 + i]) << (8 * i);
        }
        FUZZ_REQUIRE(8 + len_bytes + header_len <= size, "a matrix from a file whose header is cut short");
        return 8 + len_bytes + header_len;
    }

    /// The value after a key of the header dict the reader took. `header` has
    /// had all whitespace removed: the reader trims it around every token, and
    /// an accepted dict's keys and values hold none. Keys are unique and may be
    /// quoted either way; a quoted value ends at its own quote, any other at
    /// ',' or '}'.
    std::string value_of(const std::string& header, const std::string& key)
    {
        std::size_t at = std::string::npos;
        for (const char q : {'\'', '"'})
        {
            const std::size_t found = header.find(q + key + q + ':');
            if (found != std::string::npos)
            {
                FUZZ_REQUIRE(at == std::string::npos, "a repeated '" + key + "' key");
                at = found + key.size() + 3;
            }
        }
        FUZZ_REQUIRE(at != std::string::npos && at < header.size(), "no '" + key + "' key");
        const char q = header[at];
        const bool quoted = q == '\'' || q == '"';
        const std::size_t end = quoted ? header.find(q, at + 1) : header.find_first_of(",}", at);
        FUZZ_REQUIRE(end != std::string::npos, "no end to '" + key + "''s value");
        return quoted ? header.substr(at + 1, end - at - 1) : header.substr(at, end - at);
    }

    template <class T>
    void check_matrix(const xt::xtensor<T, 2>& m, std::size_t rank, const std::uint8_t* data, std::size_t size,
                      bool bf16)
    {
        const std::size_t rows = m.shape()[0];
        const std::size_t cols = m.shape()[1];
        FUZZ_REQUIRE(rank == 1 || rank == 2, "rank " + std::to_string(rank));
        FUZZ_REQUIRE(rank == 2 || rows == 1, "a 1-D file read as " + std::to_string(rows) + " rows");
        const std::size_t offset = data_offset(data, size);
        std::string header(reinterpret_cast<const char*>(data) + 8, offset - 8);
        header.erase(std::remove_if(header.begin(), header.end(),
                                    [](unsigned char ch) { return std::isspace(ch) != 0; }),
                     header.end());
        const std::string descr = value_of(header, "descr");
        FUZZ_REQUIRE(descr != "<u2" || bf16, "'<u2' read without --bf16");
        FUZZ_REQUIRE(!bf16 || descr == "<u2", "--bf16 read dtype " + descr);
        const bool half = descr == "<f2" || descr == "<u2";
        FUZZ_REQUIRE(half || descr == (sizeof(T) == 4 ? "<f4" : "<f8"), "dtype " + descr + " read as another");
        const std::size_t item = half ? 2 : sizeof(T);
        FUZZ_REQUIRE(cols == 0 || rows <= (size - offset) / item / cols,
                     "shape " + std::to_string(rows) + " x " + std::to_string(cols) + " beyond the " +
                         std::to_string(size - offset) + " bytes of data");
        // Fortran order stores column by column (a 1-D array either way).
        const bool fortran = rank == 2 && value_of(header, "fortran_order") == "True";
        for (std::size_t r = 0; cols > 0 && r < rows; ++r)  // [rows, 0] may claim any number of rows
        {
            for (std::size_t c = 0; c < cols; ++c)
            {
                const std::size_t at = fortran ? c * rows + r : r * cols + c;
                T v;
                if (half)
                {
                    std::uint16_t bits;
                    std::memcpy(&bits, data + offset + at * 2, 2);
                    v = T(descr == "<f2" ? float(xsampler::f16::from_bits(bits)) : float(xsampler::bf16::from_bits(bits)));
                }
                else
                {
                    std::memcpy(&v, data + offset + at * sizeof(T), sizeof v);
                }
                const T got = m(r, c);
                FUZZ_REQUIRE(std::memcmp(&v, &got, sizeof v) == 0 || (v != v && got != got),
                             "element (" + std::to_string(r) + ", " + std::to_string(c) + ") is not the file's");
            }
        }
    }
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    {
        std::FILE* f = std::fopen(scratch_path().c_str(), "wb");
        FUZZ_REQUIRE(f != nullptr, "cannot write " + scratch_path());
        FUZZ_REQUIRE(size == 0 || std::fwrite(data, 1, size, f) == size, "short write");
        FUZZ_REQUIRE(std::fclose(f) == 0, "cannot close " + scratch_path());
    }
    for (const bool bf16 : {false, true})
    {
        tool::npy_matrix m;
        try
        {
            m = tool::load_npy_matrix(scratch_path(), bf16);
        }
        catch (const std::exception& e)
        {
            FUZZ_REQUIRE(*e.what() != '\0', "an exception without a message");
            continue;
        }
        std::visit([&](const auto& values) { check_matrix(values, m.rank, data, size, bf16); }, m.values);
    }
    return 0;
}
