// xsampler tool — two toy language models behind the interface an engine
// implements for the decode loop: model(prefix) -> the next token's logits,
// and model(prefixes) -> a [beams, vocab] batch for beam search.
//
// markov_model:  the logits of the next token are row T[last token] of a
//                [vocab, vocab] matrix read from an .npy file.
// bigram_model:  a word-level bigram model counted from a text: the next word
//                is drawn in proportion to how often it followed the last one
//                (logits = log counts; never-seen pairs are -inf). The counts
//                are sparse and a call builds one vocab-sized row in a buffer
//                it reuses, so memory follows the corpus. Token 0 is
//                "<eos>", the end of a sentence; it is also the context of a
//                sentence's first word. With rank R > 0 the model is
//                factorised like a neural LM head: the add-0.1-smoothed bigram
//                log-probabilities L [vocab, vocab] are cut to their R largest
//                singular values (L ~ U_R S_R V_R^T, xtensor-blas), and the
//                logits of a batch are hidden [beams, R] x head [R, vocab];
//                L is dense, so the vocabulary is capped (max_rank_vocab).
#ifndef XSAMPLER_TOOL_MODELS_HPP
#define XSAMPLER_TOOL_MODELS_HPP

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xtensor.hpp>
#include <xtensor/xview.hpp>

#include <xsampler/types.hpp>

#include "input_file.hpp"
#include "npy_matrix.hpp"
#include "table_model.hpp"

namespace tool
{
    using xsampler::token_id;
    using xsampler::token_span;

    /// The Markov model of an .npy transition matrix T [vocab, vocab].
    inline table_model markov_model(const std::string& path)
    {
        auto m = load_npy_matrix(path);
        if (m.rank != 2)
        {
            throw std::runtime_error("'" + path + "': transitions must be a 2-D [vocab, vocab] matrix");
        }
        if (m.rows() == 0 || std::visit([](const auto& v) { return v.shape()[1]; }, m.values) != m.rows())
        {
            throw std::runtime_error("'" + path + "': transitions must be square, got " + std::to_string(m.rows()) + " x " +
                                     std::to_string(std::visit([](const auto& v) { return v.shape()[1]; }, m.values)));
        }
        if (auto* d = std::get_if<xt::xtensor<double, 2>>(&m.values))
        {
            return table_model(std::move(*d));  // no copy
        }
        auto& f = std::get<xt::xtensor<float, 2>>(m.values);
        xt::xtensor<double, 2> t = xt::cast<double>(f);
        f = xt::xtensor<float, 2>();
        return table_model(std::move(t));
    }

    class bigram_model
    {
    public:
        static constexpr token_id eos = 0;
        /// The largest corpus read, in bytes (64 MiB; its words then fit a token id).
        static constexpr std::size_t max_corpus_bytes = std::size_t(64) << 20;
        /// The largest vocabulary a rank R > 0 factorises: the SVD needs the dense
        /// [vocab, vocab] table (4096 words: 128 MiB a copy, several copies at its peak).
        static constexpr std::size_t max_rank_vocab = 4096;

        /// Counts the words of `text` (runs of ASCII letters, digits and apostrophes
        /// after the first, lower-cased; '.', '!', '?' and a '%' at the start of a line
        /// end a sentence; every other byte, UTF-8 or binary, separates words).
        /// rank 0: exact log counts; rank R: a rank-R factorisation. `source` names
        /// the text in messages. Memory: the text's tokens and distinct pairs, plus one
        /// vocab-sized row; rank R adds the dense table while it is factorised.
        bigram_model(const std::string& text, std::size_t rank, const std::string& source = "corpus")
            : m_words{"<eos>"}
        {
            std::vector<token_id> stream = {eos};
            split(text, [&](const std::string& w) { stream.push_back(id_or_add(w)); },
                  [&] {
                      if (stream.back() != eos)
                      {
                          stream.push_back(eos);
                      }
                  });
            if (stream.back() != eos)
            {
                stream.push_back(eos);
            }
            const std::size_t v = m_words.size();
            if (v < 2)
            {
                throw std::runtime_error(source + ": no words in the text");
            }
            if (rank > v)
            {
                throw std::invalid_argument("--rank: must be <= the vocabulary (" + std::to_string(v) + "), got " +
                                            std::to_string(rank));
            }
            if (rank > 0 && v > max_rank_vocab)
            {
                throw std::invalid_argument("--rank: factorising needs a dense vocab x vocab table; " + source + " has " +
                                            std::to_string(v) + " words, more than the limit of " +
                                            std::to_string(max_rank_vocab));
            }

            // Sparse counts: the distinct (context, next) pairs, sorted, and each pair's count.
            std::vector<std::uint64_t> pairs(stream.size() - 1);
            for (std::size_t i = 0; i + 1 < stream.size(); ++i)
            {
                pairs[i] = std::uint64_t(stream[i]) << 32 | std::uint64_t(stream[i + 1]);
            }
            std::vector<token_id>().swap(stream);
            std::sort(pairs.begin(), pairs.end());
            m_first.assign(v + 1, 0);
            for (std::size_t i = 0; i < pairs.size(); ++i)
            {
                if (i > 0 && pairs[i] == pairs[i - 1])
                {
                    m_counts.back() += 1.0;
                    continue;
                }
                m_next.push_back(token_id(pairs[i] & 0xffffffffu));
                m_counts.push_back(1.0);
                ++m_first[std::size_t(pairs[i] >> 32) + 1];
            }
            for (std::size_t c = 0; c < v; ++c)
            {
                m_first[c + 1] += m_first[c];
            }
            m_row = xt::empty<double>({v});
            if (rank == 0)
            {
                return;
            }

            // The dense table only to factorise it, computed as it always was (same SVD input).
            xt::xtensor<double, 2> counts = xt::zeros<double>({v, v});
            for (std::size_t c = 0; c < v; ++c)
            {
                for (std::size_t k = m_first[c]; k < m_first[c + 1]; ++k)
                {
                    counts(c, std::size_t(m_next[k])) = m_counts[k];
                }
            }
            xt::xtensor<double, 2> smoothed = counts + 0.1;
            const xt::xtensor<double, 2> sums = xt::sum(smoothed, {1}, xt::keep_dims);
            const xt::xtensor<double, 2> logp = xt::log(smoothed / sums);
            auto usv = xt::linalg::svd(logp, false, true);
            const xt::xtensor<double, 2> u = std::get<0>(usv);
            const xt::xtensor<double, 1> s = std::get<1>(usv);
            const xt::xtensor<double, 2> vt = std::get<2>(usv);
            m_hidden = xt::view(u, xt::all(), xt::range(0, rank)) * xt::view(s, xt::newaxis(), xt::range(0, rank));
            m_head = xt::view(vt, xt::range(0, rank), xt::all());
        }

        static bigram_model from_file(const std::string& path, std::size_t rank)
        {
            const std::string text = read_text_file(path, max_corpus_bytes, "64 MiB");
            return bigram_model(text, rank, "'" + path + "'");
        }

        std::size_t vocab() const { return m_words.size(); }
        const std::string& word(token_id id) const { return m_words.at(std::size_t(id)); }

        /// The prompt's words as ids after the sentence start (<eos>), split as the
        /// corpus is (a sentence end in it is <eos>); an unknown word is an error that
        /// names it. A prompt without words is the sentence start alone.
        std::vector<token_id> encode(const std::string& prompt) const
        {
            std::vector<token_id> ids = {eos};
            split(prompt,
                  [&](const std::string& w) {
                      const auto it = m_ids.find(w);
                      if (it == m_ids.end())
                      {
                          throw std::invalid_argument("--prompt: the word '" + w.substr(0, 40) +
                                                      "' is not in the corpus");
                      }
                      ids.push_back(it->second);
                  },
                  [&] {
                      if (ids.back() != eos)
                      {
                          ids.push_back(eos);
                      }
                  });
            return ids;
        }

        std::string decode(const std::vector<token_id>& ids) const
        {
            std::string text;
            for (const token_id id : ids)
            {
                text += (text.empty() ? "" : " ") + (id == eos ? std::string(".") : word(id));
            }
            return text;
        }

        /// The next word's logits: one vocab-sized row, rebuilt in place at each call
        /// (the reference is valid until the next call).
        const xt::xtensor<double, 1>& operator()(token_span prefix) const
        {
            const std::size_t c = last(prefix);
            if (m_head.size() == 0)
            {
                fill_exact(c, m_row.data());
                return m_row;
            }
            xt::xtensor<double, 2> hidden = xt::view(m_hidden, xt::range(c, c + 1), xt::all());
            const xt::xtensor<double, 2> one = xt::linalg::dot(hidden, m_head);  // the batch's product, one row
            std::copy(one.begin(), one.end(), m_row.begin());
            return m_row;
        }

        /// A [beams, vocab] batch: with a rank, one matrix product
        /// hidden[last ids] x head, the shape of a neural LM head.
        const xt::xtensor<double, 2>& operator()(const std::vector<std::vector<token_id>>& prefixes) const
        {
            if (m_head.size() == 0)
            {
                m_batch.resize({prefixes.size(), vocab()});
                for (std::size_t b = 0; b < prefixes.size(); ++b)
                {
                    fill_exact(last(prefixes[b]), m_batch.data() + b * vocab());
                }
                return m_batch;
            }
            xt::xtensor<double, 2> hidden = xt::empty<double>({prefixes.size(), m_hidden.shape()[1]});
            for (std::size_t b = 0; b < prefixes.size(); ++b)
            {
                xt::view(hidden, b, xt::all()) = xt::view(m_hidden, last(prefixes[b]), xt::all());
            }
            m_batch = xt::linalg::dot(hidden, m_head);
            return m_batch;
        }

    private:
        static bool word_char(char ch)
        {
            return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
        }

        // on_word(w) for each word of text, on_end() at each sentence end; bytes, not a locale's letters.
        template <class OnWord, class OnEnd>
        static void split(const std::string& text, OnWord&& on_word, OnEnd&& on_end)
        {
            std::string word;
            for (std::size_t i = 0; i <= text.size(); ++i)
            {
                const char ch = i < text.size() ? text[i] : '\n';
                if (word_char(ch) || (ch == '\'' && !word.empty()))
                {
                    word += ch >= 'A' && ch <= 'Z' ? char(ch - 'A' + 'a') : ch;
                    continue;
                }
                if (!word.empty())
                {
                    on_word(word);
                    word.clear();
                }
                const bool line_start = i == 0 || text[i - 1] == '\n';
                if (i < text.size() && (ch == '.' || ch == '!' || ch == '?' || (ch == '%' && line_start)))
                {
                    on_end();
                }
            }
        }

        // log counts of context c's successors (log 0 = -inf: never seen, never drawn).
        void fill_exact(std::size_t c, double* row) const
        {
            std::fill(row, row + vocab(), -std::numeric_limits<double>::infinity());
            for (std::size_t k = m_first[c]; k < m_first[c + 1]; ++k)
            {
                row[m_next[k]] = std::log(m_counts[k]);
            }
        }

        token_id id_or_add(const std::string& w)
        {
            const auto it = m_ids.find(w);
            if (it != m_ids.end())
            {
                return it->second;
            }
            const auto id = token_id(m_words.size());
            m_words.push_back(w);
            m_ids.emplace(w, id);
            return id;
        }

        std::size_t last(token_span prefix) const
        {
            if (prefix.empty() || prefix[prefix.size() - 1] < 0 || std::size_t(prefix[prefix.size() - 1]) >= vocab())
            {
                throw std::out_of_range("model: the prefix must end in a token id below " + std::to_string(vocab()));
            }
            return std::size_t(prefix[prefix.size() - 1]);
        }

        std::vector<std::string> m_words;
        std::unordered_map<std::string, token_id> m_ids;
        // Counts, sparse: context c is followed by m_next[k] m_counts[k] times, k in [m_first[c], m_first[c + 1]).
        std::vector<std::size_t> m_first;
        std::vector<token_id> m_next;
        std::vector<double> m_counts;
        mutable xt::xtensor<double, 1> m_row;    // [vocab], the last row asked for
        mutable xt::xtensor<double, 2> m_batch;  // [beams, vocab], the last batch
        xt::xtensor<double, 2> m_hidden;         // [vocab, R]
        xt::xtensor<double, 2> m_head;           // [R, vocab]
    };
}

#endif
