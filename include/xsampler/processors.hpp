// xsampler/processors.hpp — stages that see the history: bias, bans, masks, min_tokens. (xsampler, BSD-3-Clause)
//
// The processors: stages that see the history (stage.hpp) and edit a few
// logits or mask tokens before the filters run. Each costs what it touches,
// never a pass over the row, and never writes the caller's row. (The
// penalties are in penalties.hpp, DRY in dry.hpp.) An id a processor reads
// or bans that is negative or not below the row's vocabulary is
// invalid_parameter naming the processor and the id; a processor that
// leaves every token masked is invalid_logits "<name>: every token is
// masked".
//
// logit_bias{{id, bias}, ...}
//   x_id += bias for each entry (an id listed twice gets both biases, as in
//   llama.cpp); bias -inf bans the token; NaN or +inf: invalid_parameter at
//   construction. The sum is computed in double, rounded once to the row's
//   type and kept finite. Costs O(entries) per step.
// sequence_bias{{{id, ...}, bias}, ...}
//   transformers' sequence_bias (SequenceBiasLogitsProcessor): a sequence's
//   last id gets `bias` when the history (the prompt included) ends with the
//   rest of it; a one-id sequence always (as logit_bias); a longer sequence
//   never while it is longer than the history (transformers skips it, so
//   {5, 2} does not bias 2 after the history [5] alone). The biases of the sequences that match
//   and end in the same id add: summed in double in the order given, added
//   once, rounded once to the row's type and kept finite; -inf bans. An
//   empty sequence, a negative id, a NaN or +inf bias: invalid_parameter at
//   construction. Costs O(total length of the sequences) per step.
// no_repeat_ngram{n}
//   transformers' no_repeat_ngram_size: masks every token that would complete
//   an n-gram already in the history (the prompt included): for each i with
//   tokens[i, i+n-1) equal to the last n-1 tokens, tokens[i+n-1] is masked.
//   n == 1 masks every token of the history; n == 0 is off; a history of
//   fewer than n tokens bans nothing. Costs O(history) per step (a
//   comparison of the last token first), checking the history's ids.
// bad_words{{id, ...}, ...}
//   transformers' bad_words_ids, vLLM's bad_words as ids: a sequence's last
//   id is masked when the history ends with the rest of it; a one-id
//   sequence is always masked. An empty sequence: invalid_parameter at
//   construction. Costs O(total length of the sequences) per step.
// token_mask{allowed, banned}
//   vLLM's allowed_token_ids (an empty list allows every token) and a deny
//   list (transformers' suppress_tokens); the kept set becomes the allowed
//   tokens that are not banned. The allow list becomes a bitset over the
//   vocabulary (token_set) at the first step that sees the vocabulary, once
//   its ids are checked against it (so no id claims memory by itself). Costs O(|banned|) edits and, with an allow list, one
//   read of its words (O(V / 64 + |allowed|)): the way a grammar's or a
//   schema's per-step mask is applied too (candidates::keep_in).
// min_tokens{n, eos}
//   While fewer than n tokens have been generated (history.generated(): the
//   tokens after the prompt), every eos id is masked, so the sequence cannot
//   end before n tokens. n == 0 or an empty eos list: no effect. Costs
//   O(|eos|) per step while active, nothing after. An eos id that is negative
//   or not below the row's vocabulary: invalid_parameter naming it, thrown
//   at construction (negative) or at the first step that sees the row. When
//   the eos ids were the only unmasked tokens: invalid_logits
//   "min_tokens: every token is masked". vLLM's min_tokens, transformers'
//   MinNewTokensLengthLogitsProcessor; llama.cpp has no such knob.
#ifndef XSAMPLER_PROCESSORS_HPP
#define XSAMPLER_PROCESSORS_HPP

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "stage.hpp"

namespace xsampler
{
    namespace detail
    {
        // Whether `tokens` ends with the ids [first, last).
        inline bool ends_with(token_span tokens, const token_id* first, const token_id* last) noexcept
        {
            const std::size_t k = std::size_t(last - first);
            return k <= tokens.size() && std::equal(first, last, tokens.end() - k);
        }

        // A bias is finite or -inf (a ban); `what` names it in the error.
        inline void check_bias(double bias, const std::string& what)
        {
            if (std::isnan(bias) || bias == std::numeric_limits<double>::infinity())
            {
                throw invalid_parameter(what + " must be finite or -inf, got " + format_value(bias));
            }
        }

        // x_id += bias in double, rounded once to T and kept finite; -inf bans;
        // a masked token stays masked.
        template <class T>
        void add_bias(candidates<T>& c, token_id id, double bias)
        {
            if (c.logit(id) != -std::numeric_limits<T>::infinity())
            {
                c.set_logit(id, bias == -std::numeric_limits<double>::infinity()
                                    ? -std::numeric_limits<T>::infinity()
                                    : finite_logit<T>(double(c.logit(id)) + bias));
            }
        }
    }

    class logit_bias
    {
    public:
        static constexpr const char* name = "logit_bias";

        explicit logit_bias(std::vector<std::pair<token_id, double>> bias = {}) : m_bias(std::move(bias))
        {
            for (const auto& b : m_bias)
            {
                if (b.first < 0)
                {
                    throw invalid_parameter("logit_bias: token id " + std::to_string(b.first) + " is negative");
                }
                detail::check_bias(b.second, "logit_bias: the bias of token " + std::to_string(b.first));
            }
        }
        const std::vector<std::pair<token_id, double>>& entries() const noexcept { return m_bias; }
        bool neutral() const noexcept { return m_bias.empty(); }
        /// The stage in words, as sampler::describe_stages gives it.
        std::string describe() const { return "logit_bias on " + std::to_string(m_bias.size()) + " id(s)"; }

        template <class T>
        void apply(candidates<T>& c, const token_history&) const
        {
            for (const auto& b : m_bias)
            {
                if (std::size_t(b.first) >= c.vocab())
                {
                    throw invalid_parameter("logit_bias: token id " + std::to_string(b.first) +
                                            " is outside the vocabulary of " + std::to_string(c.vocab()));
                }
            }
            for (const auto& b : m_bias)
            {
                detail::add_bias(c, b.first, b.second);
            }
        }

    private:
        std::vector<std::pair<token_id, double>> m_bias;
    };

    class sequence_bias
    {
    public:
        static constexpr const char* name = "sequence_bias";
        using entry = std::pair<std::vector<token_id>, double>;

        explicit sequence_bias(std::vector<entry> entries = {}) : m_entries(std::move(entries))
        {
            for (std::size_t i = 0; i < m_entries.size(); ++i)
            {
                const auto& e = m_entries[i];
                if (e.first.empty())
                {
                    throw invalid_parameter("sequence_bias: sequence " + std::to_string(i) + " is empty");
                }
                detail::check_not_negative(e.first, "sequence_bias: token id");
                detail::check_bias(e.second, "sequence_bias: the bias of sequence " + std::to_string(i));
                m_order.push_back(i);
            }
            // Grouped by last id, the given order kept within a group (the sum's order).
            std::stable_sort(m_order.begin(), m_order.end(), [&](std::size_t a, std::size_t b) {
                return m_entries[a].first.back() < m_entries[b].first.back();
            });
        }
        const std::vector<entry>& entries() const noexcept { return m_entries; }
        bool neutral() const noexcept { return m_entries.empty(); }
        /// The stage in words, as sampler::describe_stages gives it.
        std::string describe() const { return "sequence_bias: " + std::to_string(m_entries.size()) + " sequence(s)"; }

        template <class T>
        void apply(candidates<T>& c, const token_history& history) const
        {
            for (const auto& e : m_entries)
            {
                detail::check_ids(e.first, c.vocab(), name, "token id");
            }
            const token_span t = history.tokens();
            for (std::size_t g = 0; g < m_order.size();)
            {
                const token_id last = m_entries[m_order[g]].first.back();
                double sum = 0.0;
                bool matched = false;
                for (; g < m_order.size() && m_entries[m_order[g]].first.back() == last; ++g)
                {
                    const auto& w = m_entries[m_order[g]].first;
                    if ((w.size() == 1 || w.size() <= t.size()) &&
                        detail::ends_with(t, w.data(), w.data() + w.size() - 1))  // the rest of the sequence
                    {
                        sum += m_entries[m_order[g]].second;
                        matched = true;
                    }
                }
                if (matched)
                {
                    detail::add_bias(c, last, sum);
                }
            }
        }

    private:
        std::vector<entry> m_entries;
        std::vector<std::size_t> m_order;  // entries grouped by last id
    };

    class no_repeat_ngram
    {
    public:
        static constexpr const char* name = "no_repeat_ngram";

        explicit no_repeat_ngram(std::size_t n = 0) : m_n(n) {}
        std::size_t value() const noexcept { return m_n; }
        bool neutral() const noexcept { return m_n == 0; }
        /// The stage in words, as sampler::describe_stages gives it.
        std::string describe() const { return std::string(name) + " " + std::to_string(m_n); }

        template <class T>
        void apply(candidates<T>& c, const token_history& history) const
        {
            const token_span t = history.tokens();
            const std::size_t len = t.size();
            if (m_n == 0 || len < m_n)
            {
                return;
            }
            detail::check_ids(t, c.vocab(), name, "history id");
            // Every i with t[i, i + n - 1) == t[len - n + 1, len): ban t[i + n - 1].
            const std::size_t k = m_n - 1;
            const token_id* suffix = t.data() + (len - k);
            for (std::size_t i = 0; i + m_n <= len; ++i)
            {
                if (k == 0 || (t[i + k - 1] == suffix[k - 1] && std::equal(suffix, suffix + k - 1, t.data() + i)))
                {
                    c.mask(t[i + k]);
                }
            }
        }

    private:
        std::size_t m_n;
    };

    class bad_words
    {
    public:
        static constexpr const char* name = "bad_words";

        explicit bad_words(std::vector<std::vector<token_id>> words = {}) : m_words(std::move(words))
        {
            for (const auto& w : m_words)
            {
                if (w.empty())
                {
                    throw invalid_parameter("bad_words: a sequence is empty");
                }
                detail::check_not_negative(w, "bad_words: token id");
            }
        }
        const std::vector<std::vector<token_id>>& words() const noexcept { return m_words; }
        bool neutral() const noexcept { return m_words.empty(); }
        /// The stage in words, as sampler::describe_stages gives it.
        std::string describe() const { return "bad_words: " + std::to_string(m_words.size()) + " sequence(s)"; }

        template <class T>
        void apply(candidates<T>& c, const token_history& history) const
        {
            for (const auto& w : m_words)
            {
                detail::check_ids(w, c.vocab(), name, "token id");
            }
            const token_span t = history.tokens();
            for (const auto& w : m_words)
            {
                if (detail::ends_with(t, w.data(), w.data() + w.size() - 1))  // the rest of the word
                {
                    c.mask(w.back());
                }
            }
        }

    private:
        std::vector<std::vector<token_id>> m_words;
    };

    class token_mask
    {
    public:
        static constexpr const char* name = "token_mask";
        /// Its allow list keeps a set (keep_in), not a few edits: a top_k
        /// after it is not fused into the row's pass (it would be undone).
        static constexpr bool restricts_set = true;

        explicit token_mask(std::vector<token_id> allowed = {}, std::vector<token_id> banned = {})
            : m_allowed(sorted_ids(std::move(allowed), "allowed")), m_banned(sorted_ids(std::move(banned), "banned"))
        {
        }
        const std::vector<token_id>& allowed() const noexcept { return m_allowed; }
        const std::vector<token_id>& banned() const noexcept { return m_banned; }
        bool neutral() const noexcept { return m_allowed.empty() && m_banned.empty(); }
        /// The stage in words, as sampler::describe_stages gives it.
        std::string describe() const
        {
            return "token_mask: allow " + std::to_string(m_allowed.size()) + ", ban " + std::to_string(m_banned.size());
        }

        template <class T>
        void apply(candidates<T>& c, const token_history&)
        {
            detail::check_ids(m_allowed, c.vocab(), name, "allowed token id");
            detail::check_ids(m_banned, c.vocab(), name, "banned token id");
            for (const token_id id : m_banned)
            {
                c.mask(id);
            }
            if (!m_allowed.empty())
            {
                if (m_set_vocab != c.vocab())  // the bitset, built once per vocabulary
                {
                    m_set = token_set(m_allowed, name);
                    m_set_vocab = c.vocab();
                }
                c.keep_in(m_set, name);
            }
        }

    private:
        static std::vector<token_id> sorted_ids(std::vector<token_id> ids, const char* which)
        {
            detail::check_not_negative(ids, std::string("token_mask: ") + which + ": token id");
            std::sort(ids.begin(), ids.end());
            ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
            return ids;
        }

        std::vector<token_id> m_allowed;  // sorted, unique
        std::vector<token_id> m_banned;   // sorted, unique
        token_set m_set;                  // m_allowed as a bitset, for m_set_vocab (ids checked below it)
        std::size_t m_set_vocab = 0;
    };

    class min_tokens
    {
    public:
        static constexpr const char* name = "min_tokens";

        min_tokens(std::size_t n, std::vector<token_id> eos) : m_n(n), m_eos(std::move(eos))
        {
            detail::check_not_negative(m_eos, "min_tokens: eos id");
        }
        std::size_t value() const noexcept { return m_n; }
        const std::vector<token_id>& eos() const noexcept { return m_eos; }

        /// Whether the step after this history masks the eos ids.
        bool active(const token_history& history) const noexcept { return history.generated().size() < m_n; }

        template <class T>
        void apply(candidates<T>& c, const token_history& history) const
        {
            if (!active(history))
            {
                return;
            }
            detail::check_ids(m_eos, c.vocab(), name, "eos id");
            for (const token_id e : m_eos)
            {
                c.mask(e);
            }
        }

    private:
        std::size_t m_n;
        std::vector<token_id> m_eos;
    };
}

#endif
