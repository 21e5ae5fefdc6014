// xsampler tool — an n-gram model over GPT-2's token ids, counted from a
// text: the tool's `--corpus FILE --tokenizer gpt2 [--order N]` model, a real
// 50,257-token vocabulary behind the decode loop's interface
// (model(prefix) -> logits row, model(prefixes) -> [beams, vocab] batch).
//
// Documents: each non-empty line of the corpus (a trailing '\r' dropped) is
// one document, encoded with gpt2_tokenizer and ended by <|endoftext|> (the
// eos, 50256). Its contexts start at the document start: the tokens before it
// are the eos, which serves as the BOS. A prompt is the eos followed by its
// GPT-2 ids; without one, generation starts a new document.
//
// Probabilities: interpolated Witten-Bell smoothing from order N down to the
// unigrams and then a uniform floor over the whole vocabulary:
//   P_k(w | h) = (c(h, w) + T(h) P_{k-1}(w | h')) / (c(h) + T(h)),  P_0(w) = 1/V,
// where c(h) is how often context h (the k-1 tokens before) was followed by
// anything, T(h) by how many distinct tokens, and h' is h without its oldest
// token; an unseen context (c(h) = 0) leaves P_{k-1} as it is. Every token,
// the eos and never-seen ones included, has a positive probability in every
// context: a constraint that allows any token never meets a row without it.
// logits = log P. A row costs one fill of V plus the counts of the N contexts
// (the sums are collected sparsely first), into a buffer the model reuses:
// the reference is valid until the next call; one model, one thread.
#ifndef XSAMPLER_TOOL_NGRAM_MODEL_HPP
#define XSAMPLER_TOOL_NGRAM_MODEL_HPP

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "tokenizer.hpp"

#include "input_file.hpp"

namespace tool
{
    class ngram_model
    {
    public:
        /// The largest corpus read, in bytes (its tokens then fit a 32-bit count).
        static constexpr std::size_t max_corpus_bytes = std::size_t(64) << 20;
        static constexpr std::size_t max_order = 16;

        /// The model of order `order` (1 = unigrams) counted from `text`; `source` names the
        /// text in messages. An order outside [1, 16] or a text without a non-empty line:
        /// std::invalid_argument / std::runtime_error.
        ngram_model(xsampler::gpt2_tokenizer tokenizer, const std::string& text, std::size_t order,
                    const std::string& source = "corpus")
            : m_tokenizer(std::move(tokenizer)), m_order(order)
        {
            if (order < 1 || order > max_order)
            {
                throw std::invalid_argument("--order: must be in [1, " + std::to_string(max_order) + "], got " +
                                            std::to_string(order));
            }
            m_vocab = m_tokenizer.vocab().size();
            m_eos = m_tokenizer.vocab().eos().at(0);
            std::unordered_map<std::string, std::unordered_map<xsampler::token_id, std::uint32_t>> counts;
            std::size_t documents = 0;
            std::vector<xsampler::token_id> doc;
            for (std::size_t pos = 0; pos < text.size();)
            {
                std::size_t end = std::min(text.find('\n', pos), text.size());
                const std::size_t next = end + 1;
                if (end > pos && text[end - 1] == '\r')
                {
                    --end;
                }
                if (end > pos)
                {
                    ++documents;
                    doc.assign(order - 1, m_eos);
                    doc.push_back(m_eos);  // the BOS: for order 1 too (it is never predicted)
                    const auto ids = m_tokenizer.encode(std::string_view(text).substr(pos, end - pos));
                    doc.insert(doc.end(), ids.begin(), ids.end());
                    doc.push_back(m_eos);
                    // Each token after the BOS, in each of its contexts of 0 .. order-1 tokens.
                    for (std::size_t i = order; i < doc.size(); ++i)
                    {
                        for (std::size_t k = 0; k < order; ++k)
                        {
                            ++counts[key(doc.data() + i, k)][doc[i]];
                        }
                    }
                }
                pos = next;
            }
            if (documents == 0)
            {
                throw std::runtime_error(source + ": no text (each non-empty line is a document)");
            }
            m_contexts.reserve(counts.size());
            for (auto& [context, next] : counts)
            {
                context_counts c;
                c.first = m_next.size();
                for (const auto& [id, n] : next)
                {
                    m_next.push_back(id);
                    m_count.push_back(double(n));
                    c.total += double(n);
                }
                c.last = m_next.size();
                c.types = double(c.last - c.first);
                m_contexts.emplace(context, c);
            }
            m_row = xt::empty<double>({m_vocab});
            m_add.assign(m_vocab, 0.0);
        }

        static ngram_model from_file(const std::string& path, const std::string& tokenizer_dir, std::size_t order)
        {
            xsampler::gpt2_tokenizer tokenizer(tokenizer_dir);
            const std::string text = read_text_file(path, max_corpus_bytes, "64 MiB");
            return ngram_model(std::move(tokenizer), text, order, "'" + path + "'");
        }

        std::size_t vocab() const { return m_vocab; }
        std::size_t order() const { return m_order; }
        xsampler::token_id eos() const { return m_eos; }
        const xsampler::gpt2_tokenizer& tokenizer() const { return m_tokenizer; }

        /// The eos (a document start) followed by the prompt's GPT-2 ids.
        std::vector<xsampler::token_id> encode(const std::string& prompt) const
        {
            std::vector<xsampler::token_id> ids = {m_eos};
            const auto more = m_tokenizer.encode(prompt);
            ids.insert(ids.end(), more.begin(), more.end());
            return ids;
        }

        /// The text of `ids` (the eos decodes to nothing).
        std::string decode(const std::vector<xsampler::token_id>& ids) const { return m_tokenizer.decode(ids); }

        /// The next token's logits after `prefix` (which must not be empty).
        const xt::xtensor<double, 1>& operator()(xsampler::token_span prefix) const
        {
            fill(prefix, m_row.data());
            return m_row;
        }

        /// A [beams, vocab] batch, one row per prefix.
        const xt::xtensor<double, 2>& operator()(const std::vector<std::vector<xsampler::token_id>>& prefixes) const
        {
            m_batch.resize({prefixes.size(), m_vocab});
            for (std::size_t b = 0; b < prefixes.size(); ++b)
            {
                fill(prefixes[b], m_batch.data() + b * m_vocab);
            }
            return m_batch;
        }

    private:
        struct context_counts
        {
            std::size_t first = 0;  // successors m_next[first, last) with counts m_count
            std::size_t last = 0;
            double total = 0.0;  // c(h)
            double types = 0.0;  // T(h)
        };

        // The k ids before `at`, as a map key.
        static std::string key(const xsampler::token_id* at, std::size_t k)
        {
            std::string s(k * sizeof(xsampler::token_id), '\0');
            if (k > 0)
            {
                std::memcpy(&s[0], at - k, s.size());
            }
            return s;
        }

        void fill(xsampler::token_span prefix, double* row) const
        {
            if (prefix.empty())
            {
                throw std::out_of_range("model: the prefix must not be empty (it starts with the eos)");
            }
            // The last order-1 ids, padded on the left with the eos (the document start).
            std::vector<xsampler::token_id> history(m_order - 1, m_eos);
            const std::size_t take = std::min(prefix.size(), m_order - 1);
            for (std::size_t i = 0; i < take; ++i)
            {
                const xsampler::token_id id = prefix[prefix.size() - take + i];
                if (id < 0 || std::size_t(id) >= m_vocab)
                {
                    throw std::out_of_range("model: token id " + std::to_string(id) + " is outside the vocabulary of " +
                                            std::to_string(m_vocab));
                }
                history[m_order - 1 - take + i] = id;
            }
            const xsampler::token_id* end = history.data() + history.size();
            // From the longest context down: P = sum_k weight_k c_k(w) / (c_k + T_k) + weight_0 / V.
            double weight = 1.0;
            m_touched.clear();
            for (std::size_t k = m_order; k-- > 0;)
            {
                const auto it = m_contexts.find(key(end, k));
                if (it == m_contexts.end())
                {
                    continue;
                }
                const context_counts& c = it->second;
                const double scale = weight / (c.total + c.types);
                for (std::size_t j = c.first; j < c.last; ++j)
                {
                    const auto w = std::size_t(m_next[j]);
                    if (m_add[w] == 0.0)
                    {
                        m_touched.push_back(w);
                    }
                    m_add[w] += scale * m_count[j];
                }
                weight *= c.types / (c.total + c.types);
            }
            const double floor = weight / double(m_vocab);
            std::fill(row, row + m_vocab, std::log(floor));
            for (const std::size_t w : m_touched)
            {
                row[w] = std::log(floor + m_add[w]);
                m_add[w] = 0.0;
            }
        }

        xsampler::gpt2_tokenizer m_tokenizer;
        std::size_t m_order = 3;
        std::size_t m_vocab = 0;
        xsampler::token_id m_eos = 0;
        std::unordered_map<std::string, context_counts> m_contexts;  // key: the context's ids' bytes
        std::vector<xsampler::token_id> m_next;
        std::vector<double> m_count;
        mutable std::vector<double> m_add;  // [vocab], zero between calls
        mutable std::vector<std::size_t> m_touched;
        mutable xt::xtensor<double, 1> m_row;
        mutable xt::xtensor<double, 2> m_batch;
    };
}

#endif
