// xsampler/vocabulary.hpp — token id -> bytes, for constraints and stop strings. (xsampler, BSD-3-Clause)
//
// A vocabulary maps each token id to the bytes it stands for, as the
// tokenizer decodes it (GPT-2's byte-level BPE: the bytes after undoing its
// byte-to-unicode mapping). Special tokens (eos, <|endoftext|>, Llama 3's
// <|eot_id|> ...) stand for no text: their bytes are empty and a constraint
// never allows them except as the end of a complete text (eos).
//
// vocabulary(tokens, special)
//   tokens[id] is the bytes of token id; `special` lists the ids that are
//   special (eos among them); an id outside [0, tokens.size()):
//   invalid_parameter. A non-special token with no bytes: invalid_parameter
//   naming it (it would match everywhere and advance nothing).
// eos: the special ids that end a text (set_eos; by default every special id).
// decode(ids): the bytes of the ids, special tokens skipped; an id outside
//   the vocabulary: invalid_parameter naming it.
// find(bytes): the non-special token with exactly these bytes, or -1.
#ifndef XSAMPLER_VOCABULARY_HPP
#define XSAMPLER_VOCABULARY_HPP

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "types.hpp"

namespace xsampler
{
    class vocabulary
    {
    public:
        vocabulary() = default;
        vocabulary(std::vector<std::string> tokens, std::vector<token_id> special)
            : m_tokens(std::move(tokens)), m_special(m_tokens.size(), false), m_eos(special)
        {
            detail::check_ids(special, m_tokens.size(), "vocabulary", "special token id");
            for (const token_id id : special)
            {
                m_special[std::size_t(id)] = true;
                m_tokens[std::size_t(id)].clear();
            }
            m_by_bytes.reserve(m_tokens.size());
            for (std::size_t id = 0; id < m_tokens.size(); ++id)
            {
                if (m_special[id])
                {
                    continue;
                }
                if (m_tokens[id].empty())
                {
                    throw invalid_parameter("vocabulary: token " + std::to_string(id) +
                                            " has no bytes and is not special");
                }
                m_by_bytes.emplace(m_tokens[id], token_id(id));  // the first id wins on a duplicate
            }
        }

        std::size_t size() const noexcept { return m_tokens.size(); }
        /// The bytes of token `id` (empty for a special token); id must be in range.
        const std::string& bytes(token_id id) const { return m_tokens.at(std::size_t(id)); }
        bool special(token_id id) const { return m_special.at(std::size_t(id)); }
        const std::vector<token_id>& eos() const noexcept { return m_eos; }
        /// The ids that end a text; each must be special.
        void set_eos(std::vector<token_id> eos)
        {
            detail::check_ids(eos, size(), "vocabulary", "eos id");
            for (const token_id id : eos)
            {
                if (!m_special[std::size_t(id)])
                {
                    throw invalid_parameter("vocabulary: eos id " + std::to_string(id) + " is not a special token");
                }
            }
            m_eos = std::move(eos);
        }

        /// The text of `ids`: their bytes concatenated, special tokens skipped.
        std::string decode(span<const token_id> ids) const
        {
            detail::check_ids(ids, size(), "vocabulary::decode", "token id");
            std::string s;
            for (const token_id id : ids)
            {
                s += m_tokens[std::size_t(id)];
            }
            return s;
        }

        /// The non-special token whose bytes are exactly `bytes`, or -1.
        token_id find(std::string_view bytes) const
        {
            const auto it = m_by_bytes.find(std::string(bytes));
            return it == m_by_bytes.end() ? -1 : it->second;
        }

    private:
        std::vector<std::string> m_tokens;
        std::vector<bool> m_special;
        std::vector<token_id> m_eos;
        std::unordered_map<std::string, token_id> m_by_bytes;
    };
}

#endif
