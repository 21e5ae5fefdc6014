// xsampler/dry.hpp — the DRY repetition penalty. (xsampler, BSD-3-Clause)
//
// dry{multiplier, base, allowed_length, penalty_last_n, sequence_breakers}
//   A processor (stage.hpp) that penalises the tokens that would extend a
//   sequence already repeated in the history: DRY, "don't repeat yourself"
//   (koboldcpp's sampler by pi6am, as llama.cpp's llama_sampler_dry has it).
//
//   The window w[0, N) is the last penalty_last_n tokens of the history,
//   prompt and generated alike (-1: the whole history; 0: off). R is the
//   number of tokens of w after its last sequence breaker (N if it holds
//   none): a repeated sequence never extends across a breaker. For each
//   earlier end i in [0, N - 2], the match at i is the longest common suffix
//   of w[0, i] and w[0, N), capped at R (it may overlap the window's own
//   suffix: "a a a a" matches at i = N - 2 with length N - 1). A match of
//   length L >= allowed_length predicts t = w[i + 1], the token that would
//   repeat it; every token t that is not a breaker gets, over all its
//   matches, the largest L, and its logit x becomes
//     x - multiplier * base^(L - allowed_length)
//   evaluated in double (std::pow), clamped to the lowest finite value of T
//   (the largest penalties overflow to -inf, which would mask the token:
//   DRY discourages, it never forbids), and rounded once to T. A masked
//   token (-inf) stays masked; on a sparse set a token that is not kept stays
//   dropped (candidates::set_logit). multiplier == 0 (the default) or
//   penalty_last_n == 0: off, no cost. No edit when N <= allowed_length or
//   R < allowed_length. Breakers are never penalised.
//
//   Parameters, checked at construction (invalid_parameter):
//     multiplier      finite, >= 0 (0: off)      "dry: multiplier must be finite and >= 0, got -1"
//     base            finite, >= 1 (1.75)        "dry: base must be finite and >= 1, got 0.5"
//     allowed_length  >= 1 (2)                   "dry: allowed_length must be >= 1, got 0"
//     penalty_last_n  >= -1 (-1)                 "dry: penalty_last_n must be >= -1 (-1: the whole history, 0: off), got -2"
//     sequence_breakers  ids >= 0 ({})           "dry: sequence breaker id -1 is negative"
//   At each step, before anything is edited: an id of the window or a breaker
//   id not below the row's vocabulary is invalid_parameter naming it
//   ("dry: history id 70000 is outside the vocabulary of 50257").
//
//   Cost: O(N) per step and O(penalised tokens) edits, never a pass over the
//   row: one branch-free pass checks the window's ids; a Z-algorithm over the
//   reversed window finds every match, uncapped (the capped lengths are
//   min(L, R), so the cap is applied to each token's best), skipping 16
//   tokens at a time the ends whose token is not the last token's; then R is
//   found by a scan from the end no longer than the longest match. Scratch
//   (a Z value per window token, grown by doubling; a best length per token
//   of the vocabulary; the touched tokens; a breaker bitmap of V bits) grows
//   and is reused: no allocation per step once warm. About 2 us a step for a
//   4,096-token history at V = 128256 (text-like, random, or one token
//   repeated: a box that reaches the window's start ends the scan), about
//   4 us when breakers are given and the longest match spans the window (the
//   scan for R). Like a sampler it is not thread-safe: one per sequence.
//
//   Where llama.cpp decides otherwise:
//   - Breakers are single token ids. llama.cpp takes strings, and breaks on
//     every token whose text contains one and on token sequences that spell
//     one across tokens (a head token plus a tail of up to 20 tokens); here a
//     caller lists the ids (e.g. the tokens of "\n", ":", "\"", "*").
//   - llama.cpp keeps its own window of accepted tokens, capped at the
//     model's context size when penalty_last_n is -1; here the window is cut
//     from the history passed in (-1: all of it).
//   - llama.cpp caps the exponent L - allowed_length so that base^e stays
//     below FLT_MAX and lets multiplier * base^e overflow float, which masks
//     the token (-inf); here nothing is capped but the result, clamped to
//     the lowest finite logit. The two differ only for penalties beyond
//     ~3e38.
//   - llama.cpp rounds the penalty to float and subtracts in float; here the
//     subtraction is in double and rounded once (for float logits the result
//     can differ by an ulp).
//   - llama.cpp silently disables DRY for base < 1 or penalty_last_n < -1,
//     and accepts a negative multiplier (a bonus) or an allowed_length of 0
//     (every token that occurs after the window's first position is
//     penalised); here those throw. It never checks ids against the
//     vocabulary; here an id of the window outside it throws.
#ifndef XSAMPLER_DRY_HPP
#define XSAMPLER_DRY_HPP

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "stage.hpp"

namespace xsampler
{
    class dry
    {
    public:
        static constexpr const char* name = "dry";

        /// Off (multiplier 0).
        dry() = default;

        dry(double multiplier, double base = 1.75, std::int64_t allowed_length = 2, std::int64_t penalty_last_n = -1,
            std::vector<token_id> sequence_breakers = {})
            : m_multiplier(multiplier),
              m_base(base),
              m_allowed(allowed_length),
              m_last_n(penalty_last_n),
              m_breakers(std::move(sequence_breakers))
        {
            if (!(std::isfinite(multiplier) && multiplier >= 0.0))
            {
                throw invalid_parameter("dry: multiplier must be finite and >= 0, got " +
                                        detail::format_value(multiplier));
            }
            if (!(std::isfinite(base) && base >= 1.0))
            {
                throw invalid_parameter("dry: base must be finite and >= 1, got " + detail::format_value(base));
            }
            if (allowed_length < 1)
            {
                throw invalid_parameter("dry: allowed_length must be >= 1, got " + std::to_string(allowed_length));
            }
            if (penalty_last_n < -1)
            {
                throw invalid_parameter("dry: penalty_last_n must be >= -1 (-1: the whole history, 0: off), got " +
                                        std::to_string(penalty_last_n));
            }
            detail::check_not_negative(m_breakers, "dry: sequence breaker id");
            std::sort(m_breakers.begin(), m_breakers.end());
            m_breakers.erase(std::unique(m_breakers.begin(), m_breakers.end()), m_breakers.end());
        }

        double multiplier() const noexcept { return m_multiplier; }
        double base() const noexcept { return m_base; }
        std::int64_t allowed_length() const noexcept { return m_allowed; }
        std::int64_t penalty_last_n() const noexcept { return m_last_n; }
        /// The stage in words, as sampler::describe_stages gives it.
        std::string describe() const
        {
            return "dry multiplier " + detail::format_value(m_multiplier) + ", base " + detail::format_value(m_base) +
                   ", allowed length " + std::to_string(m_allowed);
        }
        /// The breaker ids, sorted, without duplicates.
        const std::vector<token_id>& sequence_breakers() const noexcept { return m_breakers; }
        /// Whether the stage can edit anything (multiplier > 0 and a window).
        bool enabled() const noexcept { return m_multiplier > 0.0 && m_last_n != 0; }

        /// The penalty a token gets for a match of length `length` >=
        /// allowed_length (before the clamp to the lowest finite logit).
        double penalty(std::size_t length) const noexcept
        {
            return m_multiplier * std::pow(m_base, double(length - std::size_t(m_allowed)));
        }

        template <class T>
        void apply(candidates<T>& c, const token_history& history) const
        {
            if (!enabled())
            {
                return;
            }
            const std::size_t vocab = c.vocab();
            const token_span all = history.tokens();
            const std::size_t n =
                m_last_n < 0 ? all.size() : std::min(all.size(), static_cast<std::size_t>(m_last_n));
            const token_id* w = all.data() + (all.size() - n);

            // Every check before any edit or any state.
            check_ids(w, n, vocab);
            const auto allowed = std::size_t(m_allowed);
            if (n <= allowed)
            {
                return;
            }

            // Stale entries, left if a call threw after recording.
            for (const token_id t : m_touched)
            {
                m_best[std::size_t(t)] = 0;
            }
            m_touched.clear();
            if (m_best.size() < vocab)
            {
                m_best.resize(vocab, 0);
            }
            if (m_z.size() < n)
            {
                // Doubling: a history that grows a token a step allocates
                // O(log N) times in all. At most min(N, vocab) tokens are touched.
                m_z.resize(std::max(n, 2 * m_z.size()));
                m_touched.reserve(std::min(m_z.size(), vocab));
            }
            std::size_t* z = m_z.data();
            std::size_t* best = m_best.data();

            // The Z-algorithm over the reversed window s[j] = w[n - 1 - j]:
            // z[k] is the common prefix of s and s[k, n), the match ending at
            // window position n - 1 - k, here uncapped (capped below: the
            // capped Z values are min(z, R), so the cap commutes with the max
            // over matches). [lo, hi] is the rightmost box, s[lo, hi] ==
            // s[0, hi - lo]. An end k whose token is not s[0] matches nothing
            // (z = 0) and is skipped without storing z: a box looks up z only
            // at its mirror k - lo, whose token equals s[k], so only at ends
            // that were computed. Once a box reaches the window's start the
            // rest adds nothing (a window of one token repeated, or of any
            // period, costs one extension).
            const token_id* e = w + (n - 1);
            const auto s = [e](std::size_t j) { return e[-std::ptrdiff_t(j)]; };
            const token_id head = e[0];
            std::size_t lo = 0;
            std::size_t hi = 0;
            // Each token's longest match, in best[] (m_touched lists the
            // tokens there); consecutive matches before the same token (runs
            // of one token repeated) are folded in registers first.
            std::size_t longest = 0;
            token_id run_token = -1;
            std::size_t run_len = 0;
            const auto record = [&](token_id t, std::size_t len) {
                if (len == 0)
                {
                    return;
                }
                std::size_t& b = best[std::size_t(t)];
                if (b == 0)
                {
                    m_touched.push_back(t);
                }
                b = std::max(b, len);
                longest = std::max(longest, len);
            };
            for (std::size_t k = next_end(w, n, 1, head); k < n;
                 k = k + 1 < n && s(k + 1) == head ? k + 1 : next_end(w, n, k + 1, head))
            {
                std::size_t len = 0;
                if (k > hi)
                {
                    len = 1 + agree(e - 1, e - (k + 1), n - k - 1);
                    lo = k;
                    hi = k + len - 1;
                }
                else
                {
                    // Inside the box the token before end k is the one before
                    // its mirror k - lo, and the match at k is no longer than
                    // the mirror's, which was recorded: only an extension past
                    // hi can say something new.
                    const std::size_t mirror = z[k - lo];
                    const std::size_t inside = hi - k + 1;
                    if (mirror < inside)
                    {
                        z[k] = mirror;
                        continue;
                    }
                    const std::size_t i = hi + 1 + agree(e - (hi + 1), e - (hi + 1 - k), n - (hi + 1));
                    len = i - k;
                    lo = k;
                    hi = i - 1;
                }
                z[k] = len;
                if (len >= allowed)
                {
                    const token_id t = s(k - 1);  // the token after the match
                    if (t != run_token)
                    {
                        record(run_token, run_len);
                        run_token = t;
                        run_len = 0;
                    }
                    run_len = std::max(run_len, len);
                }
                if (hi + 1 == n)
                {
                    break;  // the box reaches the window's start: every later end is in it
                }
            }
            record(run_token, run_len);

            // R, the tokens after the window's last breaker, needed only up
            // to the longest match: a scan of at most that many tokens.
            std::size_t r = longest;
            const std::uint64_t* bits = m_breakers.empty() || m_touched.empty() ? nullptr : breaker_bits(vocab);
            const auto is_breaker = [bits](token_id t) {
                return bits != nullptr && ((bits[std::size_t(t) / 64] >> (std::size_t(t) % 64)) & 1u) != 0;
            };
            if (bits != nullptr)
            {
                // 16 tokens at a time, branch-free, until a chunk holds a breaker.
                r = 0;
                constexpr std::size_t chunk = 16;
                while (r + chunk <= longest)
                {
                    unsigned any = 0;
                    for (std::size_t j = 0; j < chunk; ++j)
                    {
                        const auto t = std::size_t(s(r + j));
                        any |= unsigned(bits[t / 64] >> (t % 64)) & 1u;
                    }
                    if (any != 0)
                    {
                        break;
                    }
                    r += chunk;
                }
                while (r < longest && !is_breaker(s(r)))
                {
                    ++r;
                }
            }

            // The edits, one per penalised token.
            for (const token_id t : m_touched)
            {
                const std::size_t len = std::min(best[std::size_t(t)], r);
                best[std::size_t(t)] = 0;
                if (len < allowed || is_breaker(t))
                {
                    continue;
                }
                const T x = c.logit(t);
                if (x == -std::numeric_limits<T>::infinity())
                {
                    continue;  // masked stays masked
                }
                c.set_logit(t, detail::finite_logit<T>(double(x) - penalty(len)));
            }
            m_touched.clear();
        }

    private:
        // How many of a[0] == b[0], a[-1] == b[-1], ... hold before the first
        // that does not, at most `most`: 16 pairs at a time while all agree.
        static std::size_t agree(const token_id* a, const token_id* b, std::size_t most) noexcept
        {
            constexpr std::size_t chunk = 16;
            std::size_t n = 0;
            while (n + chunk <= most)
            {
                unsigned differ = 0;
                for (std::size_t j = 0; j < chunk; ++j)
                {
                    differ |= unsigned(a[-std::ptrdiff_t(n + j)] != b[-std::ptrdiff_t(n + j)]);
                }
                if (differ != 0)
                {
                    break;
                }
                n += chunk;
            }
            while (n < most && a[-std::ptrdiff_t(n)] == b[-std::ptrdiff_t(n)])
            {
                ++n;
            }
            return n;
        }

        // The least end k' >= k whose token s[k'] = w[n - 1 - k'] is `head`,
        // or n: a scan down the window, 16 tokens at a time where none is.
        static std::size_t next_end(const token_id* w, std::size_t n, std::size_t k, token_id head) noexcept
        {
            if (k >= n)
            {
                return n;
            }
            std::size_t i = n - 1 - k;  // the window position of end k; scans i, i - 1, ..., 0
            if (w[i] == head)
            {
                return k;  // runs of matches: no chunk
            }
            constexpr std::size_t chunk = 16;
            while (i >= chunk)
            {
                const token_id* p = w + (i + 1 - chunk);
                unsigned any = 0;
                for (std::size_t j = 0; j < chunk; ++j)
                {
                    any |= unsigned(p[j] == head);
                }
                if (any != 0)
                {
                    break;
                }
                i -= chunk;
            }
            for (;; --i)
            {
                if (w[i] == head)
                {
                    return n - 1 - i;
                }
                if (i == 0)
                {
                    return n;
                }
            }
        }

        // Throws naming the first id of the window, then the first breaker,
        // outside [0, vocab). One branch-free pass over the window.
        void check_ids(const token_id* w, std::size_t n, std::size_t vocab) const
        {
            // vocab <= INT32_MAX (detail::check_row_size); a negative id wraps above it.
            const auto v = std::uint32_t(vocab);
            unsigned bad = 0;
            for (std::size_t i = 0; i < n; ++i)
            {
                bad |= unsigned(std::uint32_t(w[i]) >= v);
            }
            if (bad)
            {
                const token_id* it =
                    std::find_if(w, w + n, [vocab](token_id t) { return t < 0 || std::size_t(t) >= vocab; });
                throw invalid_parameter("dry: history id " + std::to_string(*it) + " is outside the vocabulary of " +
                                        std::to_string(vocab));
            }
            if (!m_breakers.empty() && std::size_t(m_breakers.back()) >= vocab)
            {
                const auto it = std::find_if(m_breakers.begin(), m_breakers.end(),
                                             [vocab](token_id b) { return std::size_t(b) >= vocab; });
                throw invalid_parameter("dry: sequence breaker id " + std::to_string(*it) +
                                        " is outside the vocabulary of " + std::to_string(vocab));
            }
        }

        // A bitmap of the breakers over [0, vocab), rebuilt when the vocabulary changes.
        const std::uint64_t* breaker_bits(std::size_t vocab) const
        {
            if (m_bits_vocab != vocab)
            {
                m_bits.assign(vocab / 64 + 1, 0);
                for (const token_id b : m_breakers)
                {
                    m_bits[std::size_t(b) / 64] |= std::uint64_t(1) << (std::size_t(b) % 64);
                }
                m_bits_vocab = vocab;
            }
            return m_bits.data();
        }

        double m_multiplier = 0.0;
        double m_base = 1.75;
        std::int64_t m_allowed = 2;
        std::int64_t m_last_n = -1;
        std::vector<token_id> m_breakers;  // sorted, unique

        // Scratch, reused across calls.
        mutable std::vector<std::size_t> m_z;        // Z values of the first R ends
        mutable std::vector<std::size_t> m_best;     // per token: its longest match, 0 if none
        mutable std::vector<token_id> m_touched;     // the tokens with m_best != 0
        mutable std::vector<std::uint64_t> m_bits;   // the breakers, one bit per token id
        mutable std::size_t m_bits_vocab = 0;
    };
}

#endif
