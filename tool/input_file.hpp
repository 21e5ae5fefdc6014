// xsampler tool — opening a file the tool reads, so that every way it can be
// wrong is one xsampler::invalid_data (a std::runtime_error) that names it:
// missing or unreadable, a directory, shorter than its contents claim.
//
// A regular file's size is known before anything is read (stat), so a size
// the contents claim is checked against it before anything is allocated for
// it. Other files (a pipe, /dev/zero) have no size: a reader takes them in
// pieces, allocating only for what has arrived, up to a limit of its own.
#ifndef XSAMPLER_TOOL_INPUT_FILE_HPP
#define XSAMPLER_TOOL_INPUT_FILE_HPP

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>

#include <xsampler/types.hpp>

namespace tool
{
    class input_file
    {
    public:
        explicit input_file(const std::string& path) : m_path(path)
        {
            namespace fs = std::filesystem;
            std::error_code ec;
            const auto status = fs::status(path, ec);
            if (fs::is_directory(status))
            {
                fail("is a directory, not a file");
            }
            m_in.open(path, std::ios::binary);
            if (!m_in)
            {
                fail(std::string("cannot open: ") + std::strerror(errno));
            }
            if (fs::is_regular_file(status))
            {
                const auto size = fs::file_size(path, ec);
                if (!ec)
                {
                    m_size = size;
                }
            }
        }

        const std::string& path() const { return m_path; }

        /// The size of a regular file; none for a pipe or a device.
        std::optional<std::uint64_t> size() const { return m_size; }

        /// Up to n bytes into out; how many there were (fewer only at the end of the file).
        std::size_t read_some(char* out, std::size_t n)
        {
            m_in.read(out, std::streamsize(n));
            if (m_in.bad())
            {
                fail("read error");
            }
            return std::size_t(m_in.gcount());
        }

        [[noreturn]] void fail(const std::string& why) const { throw xsampler::invalid_data("'" + m_path + "': " + why); }

    private:
        std::string m_path;
        std::ifstream m_in;
        std::optional<std::uint64_t> m_size;
    };

    /// The whole of a text file of at most `limit` bytes; a longer one is an
    /// error naming it and the limit (found at most 64 KiB past the limit).
    inline std::string read_text_file(const std::string& path, std::size_t limit, const std::string& limit_text)
    {
        input_file in(path);
        if (in.size() && *in.size() > limit)
        {
            in.fail("is larger than the " + limit_text + " this tool reads");
        }
        std::string text;
        text.reserve(in.size() ? std::size_t(*in.size()) : 0);
        char buf[1 << 16];
        for (std::size_t n; (n = in.read_some(buf, sizeof buf)) > 0;)
        {
            if (n > limit - text.size())
            {
                in.fail("is larger than the " + limit_text + " this tool reads");
            }
            text.append(buf, n);
        }
        return text;
    }
}

#endif
