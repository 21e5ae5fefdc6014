// xsampler/penalties.hpp — repetition, presence and frequency penalties. (xsampler, BSD-3-Clause)
//
// The penalties on tokens the history already holds, with llama.cpp's and
// vLLM/OpenAI's choice of which tokens count.
//
// penalties{repeat, presence, frequency, last_n, scope}
//   For a token t counted c > 0 times, with x its logit:
//     repetition (repeat = r > 0; 1 is off): x / r when x > 0, else x * r
//       (once per distinct token: transformers, llama.cpp and vLLM agree);
//     then presence and frequency (any finite values; OpenAI allows
//       [-2, 2]): x -= c * frequency + presence.
//   Computed in double, rounded once to the row's type and kept finite
//   (clamped to the type's largest magnitude); a masked token stays masked.
//   Which tokens count (penalty_scope):
//     window (llama.cpp; the default): all three count the last `last_n`
//       tokens of the whole history, prompt included (64 by default; 0 turns
//       the penalties off; -1 counts the whole history);
//     output (vLLM, OpenAI): presence and frequency count only the generated
//       tokens (history.generated()), repetition counts every token, prompt
//       and generated; last_n is not used.
//   Neutral (no effect, no cost) when repeat == 1 and presence == frequency
//   == 0, or in the window scope when last_n == 0.
//   Cost: the counts are kept across calls and updated by the tokens that
//   entered or left the counted range, as long as each history extends the
//   last one (the same tokens, more at the end; the prompt length may not
//   shrink); any other history (an engine rolling back a rejected draft, a
//   new sequence) rebuilds them. Then one edit per distinct counted token,
//   all in one candidates::edit_each call: O(window) per step (the output
//   scope: O(distinct tokens of the history)), never a pass over the
//   vocabulary. The history is
//   compared with the last one (a memcmp) and its new ids are checked. The
//   state: two count arrays the size of the vocabulary (grown once) and a
//   copy of the history, which grows by doubling (O(log n) allocations over
//   a sequence of n tokens, none in most steps).
//   Errors: repeat <= 0 or not finite, presence or frequency not finite,
//   last_n < -1: invalid_parameter at construction. A history id that is
//   negative or not below the row's vocabulary: invalid_parameter naming it
//   ("penalties: history id 70000 at position 12 is outside the vocabulary of
//   50257"), before anything is counted or edited; the counts then stay those
//   of the last good history.
//   Not thread-safe (it keeps the counts): one per sequence, like the sampler.
#ifndef XSAMPLER_PENALTIES_HPP
#define XSAMPLER_PENALTIES_HPP

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "stage.hpp"

namespace xsampler
{
    /// Which tokens the penalties count (see penalties).
    enum class penalty_scope
    {
        window,  ///< llama.cpp: the last last_n tokens of the whole history
        output   ///< vLLM / OpenAI: presence, frequency on generated tokens; repetition on all
    };

    namespace detail
    {
        /// How often each token occurs in a range [begin, end) of a history,
        /// with the list of the tokens present; updated token by token.
        class token_counts
        {
        public:
            /// Empties the counts for a vocabulary of `vocab` (O(present)
            /// when the vocabulary is the same; grows once otherwise).
            void reset(std::size_t vocab)
            {
                if (m_count.size() != vocab)
                {
                    m_count.assign(vocab, 0);
                    m_where.assign(vocab, 0);
                    m_present.clear();
                }
                for (const token_id t : m_present)
                {
                    m_count[std::size_t(t)] = 0;
                }
                m_present.clear();
                begin = end = 0;
            }
            void add(token_id t)
            {
                auto& c = m_count[std::size_t(t)];
                if (c++ == 0)
                {
                    m_where[std::size_t(t)] = std::uint32_t(m_present.size());
                    m_present.push_back(t);
                }
            }
            void remove(token_id t) noexcept
            {
                if (--m_count[std::size_t(t)] == 0)
                {
                    const std::uint32_t at = m_where[std::size_t(t)];
                    m_present[at] = m_present.back();
                    m_where[std::size_t(m_present[at])] = at;
                    m_present.pop_back();
                }
            }
            std::uint32_t count(token_id t) const noexcept { return m_count[std::size_t(t)]; }
            /// The distinct tokens counted, in no particular order.
            const std::vector<token_id>& present() const noexcept { return m_present; }

            /// Moves the counted range to [b, e) of `tokens`, whose prefix up
            /// to the old end is the tokens counted so far (b >= begin, e >= end).
            void slide(const token_id* tokens, std::size_t b, std::size_t e)
            {
                for (std::size_t i = begin; i < std::min(b, end); ++i)
                {
                    remove(tokens[i]);
                }
                for (std::size_t i = std::max(b, end); i < e; ++i)
                {
                    add(tokens[i]);
                }
                begin = b;
                end = e;
            }

            std::size_t begin = 0;
            std::size_t end = 0;

        private:
            std::vector<std::uint32_t> m_count;  // per token of the vocabulary
            std::vector<std::uint32_t> m_where;  // a present token's index in m_present
            std::vector<token_id> m_present;
        };
    }

    class penalties
    {
    public:
        static constexpr const char* name = "penalties";

        explicit penalties(double repeat = 1.0, double presence = 0.0, double frequency = 0.0,
                           std::int64_t last_n = 64, penalty_scope scope = penalty_scope::window)
            : m_repeat(repeat), m_presence(presence), m_frequency(frequency), m_last_n(last_n), m_scope(scope)
        {
            if (!(repeat > 0.0) || !std::isfinite(repeat))
            {
                throw invalid_parameter("penalties: repeat_penalty must be finite and > 0, got " +
                                        detail::format_value(repeat));
            }
            if (!std::isfinite(presence))
            {
                throw invalid_parameter("penalties: presence_penalty must be finite, got " +
                                        detail::format_value(presence));
            }
            if (!std::isfinite(frequency))
            {
                throw invalid_parameter("penalties: frequency_penalty must be finite, got " +
                                        detail::format_value(frequency));
            }
            if (last_n < -1)
            {
                throw invalid_parameter("penalties: repeat_last_n must be >= -1, got " + std::to_string(last_n));
            }
        }

        double repeat() const noexcept { return m_repeat; }
        double presence() const noexcept { return m_presence; }
        double frequency() const noexcept { return m_frequency; }
        std::int64_t last_n() const noexcept { return m_last_n; }
        penalty_scope scope() const noexcept { return m_scope; }
        /// The stage in words, as sampler::describe_stages gives it.
        std::string describe() const
        {
            std::string t = name;
            const auto add = [&t](const std::string& part) { t += (t == name ? " " : ", ") + part; };
            if (m_repeat != 1.0)
            {
                add("repeat " + detail::format_value(m_repeat));
            }
            if (m_presence != 0.0)
            {
                add("presence " + detail::format_value(m_presence));
            }
            if (m_frequency != 0.0)
            {
                add("frequency " + detail::format_value(m_frequency));
            }
            add(m_scope == penalty_scope::output ? "output scope" : "last " + std::to_string(m_last_n));
            return t;
        }

        /// Whether the stage changes nothing whatever the history.
        bool neutral() const noexcept
        {
            return (m_repeat == 1.0 && m_presence == 0.0 && m_frequency == 0.0) ||
                   (m_scope == penalty_scope::window && m_last_n == 0);
        }

        template <class T>
        void apply(candidates<T>& c, const token_history& history)
        {
            if (neutral())
            {
                return;
            }
            update(history, c.vocab());
            // Window scope: all three on the window's counts. Output scope:
            // repetition on every token counted, presence and frequency by
            // the generated count (a subset: with repeat 1, only those).
            // One edit per token, rounded once.
            const bool window = m_scope == penalty_scope::window;
            const bool repeat = window || m_repeat != 1.0;
            const detail::token_counts& counts = window ? m_all : m_output;
            const std::vector<token_id>& tokens = (repeat ? m_all : m_output).present();
            c.edit_each(tokens, [&](std::size_t j, T x) { return penalised(x, repeat, counts.count(tokens[j])); });
        }

    private:
        // x -> the repetition rule (if `repeat`), then minus the count's
        // presence and frequency terms (if count > 0 and either is set: a
        // -0 logit stays -0), in double, rounded once.
        template <class T>
        T penalised(T x, bool repeat, std::uint32_t count) const
        {
            double v = x;
            if (repeat)
            {
                v = v > 0.0 ? v / m_repeat : v * m_repeat;
            }
            if (count > 0 && (m_presence != 0.0 || m_frequency != 0.0))
            {
                v -= double(count) * m_frequency + m_presence;
            }
            return detail::finite_logit<T>(v);
        }

        // Brings the counts to `history`: incrementally when it extends the
        // last one, else rebuilt. Checks the ids first, so a bad history
        // leaves the counts as they were.
        void update(const token_history& history, std::size_t vocab)
        {
            const token_span tokens = history.tokens();
            const std::size_t n = tokens.size();
            const std::size_t old = m_seen.size();
            const bool extends = vocab == m_vocab && n >= old && history.prompt_length() >= m_prompt_length &&
                                 (old == 0 || std::memcmp(tokens.data(), m_seen.data(), old * sizeof(token_id)) == 0);
            const std::size_t first_new = extends ? old : 0;
            for (std::size_t i = first_new; i < n; ++i)
            {
                if (tokens[i] < 0 || std::size_t(tokens[i]) >= vocab)
                {
                    throw invalid_parameter("penalties: history id " + std::to_string(tokens[i]) + " at position " +
                                            std::to_string(i) + " is outside the vocabulary of " +
                                            std::to_string(vocab));
                }
            }
            if (!extends)
            {
                m_seen.clear();
                m_all.reset(vocab);
                m_output.reset(vocab);
                m_vocab = vocab;
            }
            m_seen.insert(m_seen.end(), tokens.begin() + std::ptrdiff_t(first_new), tokens.end());
            m_prompt_length = history.prompt_length();
            const std::size_t window_begin =
                m_scope == penalty_scope::output || m_last_n < 0 ? 0 : n - std::min(n, std::size_t(m_last_n));
            m_all.slide(m_seen.data(), window_begin, n);
            if (m_scope == penalty_scope::output)
            {
                m_output.slide(m_seen.data(), std::max(m_output.begin, m_prompt_length), n);
            }
        }

        double m_repeat;
        double m_presence;
        double m_frequency;
        std::int64_t m_last_n;
        penalty_scope m_scope;
        // The counting state: a cache of the last history's counts.
        std::vector<token_id> m_seen;  // the last history's tokens
        std::size_t m_prompt_length = 0;
        std::size_t m_vocab = 0;
        detail::token_counts m_all;     // window scope: the window; output scope: every token
        detail::token_counts m_output;  // output scope: the generated tokens
    };
}

#endif
