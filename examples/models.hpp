// xsampler examples — two toy language models behind the interface an engine
// implements for the decode loop: model(prefix) -> the next token's logits,
// and model(prefixes) -> a [beams, vocab] batch for beam search.
//
// markov_model:  the logits of the next token are row T[last token] of a
//                [vocab, vocab] matrix read from an .npy file.
// bigram_model:  a word-level bigram model counted from a text: the next word
//                is drawn in proportion to how often it followed the last one
//                (logits = log counts; never-seen pairs are -inf). Token 0 is
//                "<eos>", the end of a sentence; it is also the context of a
//                sentence's first word. With rank R > 0 the model is
//                factorised like a neural LM head: the add-0.1-smoothed bigram
//                log-probabilities L [vocab, vocab] are cut to their R largest
//                singular values (L ~ U_R S_R V_R^T, xtensor-blas), and the
//                logits of a batch are hidden [beams, R] x head [R, vocab].
#ifndef XSAMPLER_EXAMPLES_MODELS_HPP
#define XSAMPLER_EXAMPLES_MODELS_HPP

#include <cctype>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xtensor.hpp>
#include <xtensor/xview.hpp>

#include <xsampler/types.hpp>

#include "npy_matrix.hpp"
#include "table_model.hpp"

namespace examples
{
    using xsampler::token_id;
    using xsampler::token_span;

    /// The Markov model of an .npy transition matrix T [vocab, vocab].
    inline table_model markov_model(const std::string& path)
    {
        const auto m = load_npy_matrix(path);
        if (m.rank != 2)
        {
            throw std::runtime_error("'" + path + "': transitions must be a 2-D [vocab, vocab] matrix");
        }
        xt::xtensor<double, 2> t = std::visit([](const auto& v) { return xt::xtensor<double, 2>(xt::cast<double>(v)); }, m.values);
        if (t.shape()[0] != t.shape()[1] || t.shape()[0] == 0)
        {
            throw std::runtime_error("'" + path + "': transitions must be square, got " + std::to_string(t.shape()[0]) +
                                     " x " + std::to_string(t.shape()[1]));
        }
        return table_model(std::move(t));
    }

    class bigram_model
    {
    public:
        static constexpr token_id eos = 0;

        /// Counts the words of `text` (lower-cased letters, digits and
        /// apostrophes; '.', '!', '?' and a line holding only '%' end a
        /// sentence). rank 0: exact log counts; rank R: a rank-R factorisation.
        bigram_model(const std::string& text, std::size_t rank) : m_words{"<eos>"}
        {
            std::vector<token_id> stream = {eos};
            std::string word;
            const auto flush = [&] {
                if (!word.empty())
                {
                    stream.push_back(id_or_add(word));
                    word.clear();
                }
            };
            for (std::size_t i = 0; i < text.size(); ++i)
            {
                const char ch = text[i];
                const bool line_start = i == 0 || text[i - 1] == '\n';
                if (std::isalnum(static_cast<unsigned char>(ch)) || (ch == '\'' && !word.empty()))
                {
                    word += char(std::tolower(static_cast<unsigned char>(ch)));
                }
                else
                {
                    flush();
                    if ((ch == '.' || ch == '!' || ch == '?' || (ch == '%' && line_start)) && stream.back() != eos)
                    {
                        stream.push_back(eos);
                    }
                }
            }
            flush();
            if (stream.back() != eos)
            {
                stream.push_back(eos);
            }
            const std::size_t v = m_words.size();
            if (v < 2)
            {
                throw std::runtime_error("corpus: no words in the text");
            }
            xt::xtensor<double, 2> counts = xt::zeros<double>({v, v});
            for (std::size_t i = 0; i + 1 < stream.size(); ++i)
            {
                counts(std::size_t(stream[i]), std::size_t(stream[i + 1])) += 1.0;
            }
            m_counts_rows = v;
            if (rank == 0)
            {
                m_exact = xt::log(counts);  // log 0 = -inf: never seen, never drawn
                return;
            }
            if (rank > v)
            {
                throw std::invalid_argument("--rank: must be <= the vocabulary (" + std::to_string(v) + "), got " +
                                            std::to_string(rank));
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
            std::ifstream in(path);
            if (!in)
            {
                throw std::runtime_error("'" + path + "': cannot open the corpus");
            }
            std::stringstream text;
            text << in.rdbuf();
            return bigram_model(text.str(), rank);
        }

        std::size_t vocab() const { return m_words.size(); }
        const std::string& word(token_id id) const { return m_words.at(std::size_t(id)); }

        /// The prompt's words as ids after the sentence start (<eos>); an
        /// unknown word is an error that names it.
        std::vector<token_id> encode(const std::string& prompt) const
        {
            std::vector<token_id> ids = {eos};
            std::string word;
            std::istringstream in(prompt);
            while (in >> word)
            {
                std::string w;
                for (const char ch : word)
                {
                    if (std::isalnum(static_cast<unsigned char>(ch)) || ch == '\'')
                    {
                        w += char(std::tolower(static_cast<unsigned char>(ch)));
                    }
                }
                if (w.empty())
                {
                    continue;
                }
                const auto it = m_ids.find(w);
                if (it == m_ids.end())
                {
                    throw std::invalid_argument("--prompt: the word '" + w + "' is not in the corpus");
                }
                ids.push_back(it->second);
            }
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

        xt::xtensor<double, 1> operator()(token_span prefix) const
        {
            const std::vector<std::vector<token_id>> one = {std::vector<token_id>(prefix.begin(), prefix.end())};
            return xt::view((*this)(one), 0, xt::all());
        }

        /// A [beams, vocab] batch: with a rank, one matrix product
        /// hidden[last ids] x head, the shape of a neural LM head.
        xt::xtensor<double, 2> operator()(const std::vector<std::vector<token_id>>& prefixes) const
        {
            xt::xtensor<double, 2> out = xt::empty<double>({prefixes.size(), vocab()});
            if (m_head.size() == 0)
            {
                for (std::size_t b = 0; b < prefixes.size(); ++b)
                {
                    xt::view(out, b, xt::all()) = xt::view(m_exact, last(prefixes[b]), xt::all());
                }
                return out;
            }
            xt::xtensor<double, 2> hidden = xt::empty<double>({prefixes.size(), m_hidden.shape()[1]});
            for (std::size_t b = 0; b < prefixes.size(); ++b)
            {
                xt::view(hidden, b, xt::all()) = xt::view(m_hidden, last(prefixes[b]), xt::all());
            }
            out = xt::linalg::dot(hidden, m_head);
            return out;
        }

    private:
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

        std::size_t last(const std::vector<token_id>& prefix) const
        {
            if (prefix.empty() || prefix.back() < 0 || std::size_t(prefix.back()) >= m_counts_rows)
            {
                throw std::out_of_range("model: the prefix must end in a token id below " + std::to_string(m_counts_rows));
            }
            return std::size_t(prefix.back());
        }

        std::vector<std::string> m_words;
        std::unordered_map<std::string, token_id> m_ids;
        std::size_t m_counts_rows = 0;
        xt::xtensor<double, 2> m_exact;
        xt::xtensor<double, 2> m_hidden;  // [vocab, R]
        xt::xtensor<double, 2> m_head;    // [R, vocab]
    };
}

#endif
