// xsampler tool — a model whose next-token logits are row T[last token]
// of a [vocab, vocab] matrix (a Markov model), behind the interface an engine
// implements: model(prefix) -> logits row, model(prefixes) -> [beams, vocab].
// It counts its calls, so tests can check how often a decoder runs it.
#ifndef XSAMPLER_TOOL_TABLE_MODEL_HPP
#define XSAMPLER_TOOL_TABLE_MODEL_HPP

#include <stdexcept>
#include <string>
#include <vector>

#include <xtensor/xtensor.hpp>
#include <xtensor/xview.hpp>

#include <xsampler/types.hpp>

namespace tool
{
    using xsampler::token_id;
    using xsampler::token_span;

    /// Rows of a [vocab, vocab] matrix chosen by each prefix's last token.
    class table_model
    {
    public:
        explicit table_model(xt::xtensor<double, 2> next) : m_next(std::move(next)) {}

        std::size_t vocab() const { return m_next.shape()[1]; }

        /// How many times the model has been run.
        std::size_t calls() const { return m_calls; }
        const xt::xtensor<double, 2>& table() const { return m_next; }

        xt::xtensor<double, 1> operator()(token_span prefix) const
        {
            ++m_calls;
            return xt::view(m_next, row_of(prefix), xt::all());
        }

        xt::xtensor<double, 2> operator()(const std::vector<std::vector<token_id>>& prefixes) const
        {
            ++m_calls;
            xt::xtensor<double, 2> out = xt::empty<double>({prefixes.size(), vocab()});
            for (std::size_t b = 0; b < prefixes.size(); ++b)
            {
                xt::view(out, b, xt::all()) = xt::view(m_next, row_of(prefixes[b]), xt::all());
            }
            return out;
        }

    protected:
        std::size_t row_of(token_span prefix) const
        {
            if (prefix.empty() || prefix[prefix.size() - 1] < 0 ||
                std::size_t(prefix[prefix.size() - 1]) >= m_next.shape()[0])
            {
                throw std::out_of_range("model: the prefix must end in a token id below " +
                                        std::to_string(m_next.shape()[0]));
            }
            return std::size_t(prefix[prefix.size() - 1]);
        }

        xt::xtensor<double, 2> m_next;
        mutable std::size_t m_calls = 0;
    };

}

#endif
