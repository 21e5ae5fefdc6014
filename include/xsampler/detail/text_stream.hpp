// xsampler/detail/text_stream.hpp — a token stream's text, released as it becomes safe. (xsampler, BSD-3-Clause)
//
// text_stream is the incremental detokenizer of a sequence (sequence.hpp):
// it takes each token's bytes, keeps the text as UTF-8, finds stop strings
// across token boundaries, and says which part of the text can be shown
// now.
//
// The text is always valid UTF-8: a well-formed character enters it whole;
// a byte sequence that cannot be one becomes U+FFFD, one for each maximal
// subpart (the bytes that could start a character, up to the first that
// breaks it, or one byte: Unicode's practice, Python's errors="replace").
// Bytes that may still complete a character are pending: they are not
// text yet. Offsets (stop_at) index the text, not the raw bytes.
//
// Stop strings (non-empty, valid UTF-8) are matched byte by byte over the
// text (one KMP automaton each), so a match does not depend on how the text
// was cut into tokens. The first byte at which some stop string completes
// ends the text; among stop strings completing at that byte the lowest
// index wins (vLLM's check_stop_strings). The text is cut where the stop
// string starts, or where it ends with include_stop.
//
// Release: while running, take() returns the text not yet returned except
// its longest suffix that is a proper prefix of a stop string (none with
// include_stop) — llama.cpp's partial-stop rule — and never the pending
// bytes. After a stop, take() returns the rest up to the cut; after
// finish(), everything (pending bytes flushed as one U+FFFD). The deltas
// concatenated equal text(): a match that starts before the released end
// would have been a longer held-back suffix.
#ifndef XSAMPLER_DETAIL_TEXT_STREAM_HPP
#define XSAMPLER_DETAIL_TEXT_STREAM_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "../types.hpp"
#include "utf8.hpp"

namespace xsampler
{
    namespace detail
    {
        class text_stream
        {
        public:
            static constexpr std::size_t npos = std::string::npos;
            static constexpr std::size_t max_stop_bytes = 65536;  ///< all stop strings together

            text_stream() = default;

            /// who names the owner in errors: "sequence: stop string 2 is
            /// not valid UTF-8", "... is empty", "... have 70000 bytes, more
            /// than 65536".
            text_stream(std::vector<std::string> stops, bool include_stop, const std::string& who)
                : m_stops(std::move(stops)), m_state(m_stops.size(), 0), m_include(include_stop)
            {
                std::size_t total = 0;
                for (std::size_t k = 0; k < m_stops.size(); ++k)
                {
                    const std::string& s = m_stops[k];
                    const std::string name = who + ": stop string " + std::to_string(k);
                    if (s.empty())
                    {
                        throw invalid_parameter(name + " is empty");
                    }
                    std::uint32_t cp = 0;
                    for (std::size_t at = 0, n = 0; at < s.size(); at += n)
                    {
                        if ((n = utf8_decode(s, at, cp)) == 0)
                        {
                            throw invalid_parameter(name + " is not valid UTF-8 (byte " + std::to_string(at) + ")");
                        }
                    }
                    total += s.size();
                }
                if (total > max_stop_bytes)
                {
                    throw invalid_parameter(who + ": the stop strings have " + std::to_string(total) +
                                            " bytes, more than " + std::to_string(max_stop_bytes));
                }
                m_fail.reserve(total + m_stops.size());
                for (const std::string& s : m_stops)
                {
                    // m_fail[m_base[k] + i]: the longest proper border of s[0, i);
                    // s[0, 0) and s[0, 1) have none.
                    m_base.push_back(m_fail.size());
                    m_fail.insert(m_fail.end(), 2, 0);
                    for (std::size_t i = 2, q = 0; i <= s.size(); ++i)
                    {
                        while (q > 0 && s[q] != s[i - 1])
                        {
                            q = m_fail[m_base.back() + q];
                        }
                        q += s[q] == s[i - 1] ? 1 : 0;
                        m_fail.push_back(std::uint32_t(q));
                    }
                }
            }

            /// A new text: the stop strings and the capacity are kept.
            void clear() noexcept
            {
                m_text.clear();
                std::fill(m_state.begin(), m_state.end(), std::size_t(0));
                m_pending_size = m_released = 0;
                m_stop = m_stop_at = npos;
                m_finished = false;
            }

            void reserve(std::size_t bytes) { m_text.reserve(bytes); }

            /// Appends a token's bytes. may_stop: whether a stop string that
            /// completes in them ends the text (min_tokens: not yet). After
            /// a stop or finish() nothing is appended.
            void append(std::string_view bytes, bool may_stop)
            {
                for (std::size_t i = 0; i < bytes.size() && !ended(); ++i)
                {
                    take_byte(static_cast<unsigned char>(bytes[i]), may_stop);
                }
            }

            /// Ends the text where it is (a reason other than a stop string):
            /// pending bytes become one U+FFFD, matched against nothing.
            void finish()
            {
                if (m_pending_size > 0 && m_stop == npos)
                {
                    m_text += replacement;
                }
                m_pending_size = 0;
                m_finished = true;
            }

            /// The text that is safe to show and was not returned before; the
            /// view lasts until the next append, finish or clear.
            std::string_view take() noexcept
            {
                const std::size_t end = ended() ? m_text.size() : m_text.size() - held();
                const std::string_view delta(m_text.data() + m_released, end - m_released);
                m_released = end;
                return delta;
            }

            /// The text so far (without pending bytes); the final text after a
            /// stop or finish().
            const std::string& text() const noexcept { return m_text; }
            bool stopped() const noexcept { return m_stop != npos; }
            bool ended() const noexcept { return m_finished || stopped(); }
            std::size_t stop_index() const noexcept { return m_stop; }
            /// Where the matched stop string starts in text(); npos.
            std::size_t stop_at() const noexcept { return m_stop_at; }

        private:
            static constexpr std::string_view replacement = "\xEF\xBF\xBD";

            /// The longest suffix of the text that is a proper prefix of a
            /// stop string: it may still become one.
            std::size_t held() const noexcept
            {
                std::size_t h = 0;
                for (std::size_t k = 0; k < m_state.size() && !m_include; ++k)
                {
                    h = std::max(h, m_state[k]);
                }
                return h;
            }

            void take_byte(unsigned char b, bool may_stop)
            {
                if (m_pending_size > 0)
                {
                    const utf8_lead lead(m_pending[0]);
                    if (lead.continues(m_pending_size, b))
                    {
                        m_pending[m_pending_size++] = char(b);
                        if (m_pending_size == lead.length)
                        {
                            m_pending_size = 0;
                            put(std::string_view(m_pending, lead.length), may_stop);
                        }
                        return;
                    }
                    m_pending_size = 0;  // a maximal subpart: one U+FFFD, and b starts afresh
                    put(replacement, may_stop);
                    if (ended())
                    {
                        return;
                    }
                }
                const std::size_t length = utf8_lead(b).length;
                if (length == 1)
                {
                    const char c = char(b);
                    put(std::string_view(&c, 1), may_stop);
                }
                else if (length == 0)
                {
                    put(replacement, may_stop);
                }
                else
                {
                    m_pending[m_pending_size++] = char(b);
                }
            }

            /// A whole character (or U+FFFD) into the text, each byte
            /// stepping every stop string's automaton.
            void put(std::string_view ch, bool may_stop)
            {
                for (const char c : ch)
                {
                    m_text += c;
                    for (std::size_t k = 0; k < m_stops.size(); ++k)
                    {
                        const std::string& s = m_stops[k];
                        std::size_t q = m_state[k];
                        while (q > 0 && s[q] != c)
                        {
                            q = m_fail[m_base[k] + q];
                        }
                        q += s[q] == c ? 1 : 0;
                        if (q == s.size())
                        {
                            if (may_stop)
                            {
                                m_stop = k;
                                m_stop_at = m_text.size() - s.size();
                                m_text.resize(m_include ? m_text.size() : m_stop_at);
                                return;
                            }
                            q = m_fail[m_base[k] + q];  // matched too early: it counts as a border
                        }
                        m_state[k] = q;
                    }
                }
            }

            std::vector<std::string> m_stops;
            std::vector<std::uint32_t> m_fail;   // each stop string's failure function, one after another
            std::vector<std::size_t> m_base;     // where stop string k's starts in m_fail
            std::vector<std::size_t> m_state;    // per stop string: the longest prefix that ends the text
            std::string m_text;
            char m_pending[4] = {};
            std::size_t m_pending_size = 0;
            std::size_t m_released = 0;
            std::size_t m_stop = npos, m_stop_at = npos;
            bool m_include = false;
            bool m_finished = false;
        };
    }
}

#endif
