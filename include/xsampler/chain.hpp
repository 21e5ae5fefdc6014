// xsampler — token samplers for language-model inference. BSD-3-Clause.
//
// Chains of stages: filters (filters.hpp) run in order, then one draw
// (select.hpp).
//
// chain{stage, stage, ...}
//   Composed at compile time; every stage call is inlined. Stages run in the
//   order given.
// sampler{sampling_params}
//   Composed at run time from the parameters a server receives with a request:
//   temperature, top_k, top_p, min_p, seed and the stage order. Every
//   parameter is validated once, at construction. Default order: temperature,
//   top_k, top_p, min_p (Hugging Face's order); any order may be given, like
//   llama.cpp's sampler list. A stage missing from the order does not run, and
//   giving it a non-neutral value is an error rather than silently ignored.
//   Neutral values: temperature 1, top_k 0, top_p 1, min_p 0 — so default
//   parameters draw from the plain softmax.
//
// Both take the token history (prompt plus generated tokens) at every call.
// The stages here ignore it; penalties, n-gram blocking, grammars and
// stateful samplers need it, which is why a chain object owns its state and
// workspace and is reused across the steps of one sequence. A chain is not
// thread-safe: one per sequence (or per thread).
//
// sample(logits, history, rng) draws one token (one uniform01 from rng);
// final_distribution(logits, history) returns what sample would draw from.
#ifndef XSAMPLER_CHAIN_HPP
#define XSAMPLER_CHAIN_HPP

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "filters.hpp"
#include "random.hpp"
#include "select.hpp"

namespace xsampler
{
    /// The scratch memory of one sampling call: a candidates set for float
    /// rows and one for double rows. It grows to the vocabulary once and is
    /// reused; chains own one, and sample_batch takes one per thread.
    class workspace
    {
    public:
        template <class T>
        candidates<T>& get() noexcept
        {
            return std::get<candidates<T>>(m_sets);
        }

    private:
        std::tuple<candidates<float>, candidates<double>> m_sets;
    };

    /// A chain of stages composed at compile time.
    template <class... Stages>
    class chain
    {
    public:
        explicit chain(Stages... stages) : m_stages(std::move(stages)...) {}

        template <class E, class URBG>
        sampled_token sample(const xt::xexpression<E>& logits, const token_history& history, URBG& rng)
        {
            return draw(filter(logits, history), rng);
        }

        template <class E>
        distribution final_distribution(const xt::xexpression<E>& logits, const token_history& history = {})
        {
            return distribution_of(filter(logits, history));
        }

        const std::tuple<Stages...>& stages() const noexcept { return m_stages; }

    private:
        template <class E>
        candidates<detail::logit_type<E>>& filter(const xt::xexpression<E>& logits, const token_history& /*history*/)
        {
            auto& c = m_ws.get<detail::logit_type<E>>();
            c.load(logits, top_k_first());
            std::apply([&](const auto&... stage) { (stage.apply(c), ...); }, m_stages);
            return c;
        }

        // k when the first stage other than temperature is top_k{k} (the
        // validation pass then selects too), else 0.
        std::size_t top_k_first() const noexcept
        {
            std::size_t k = 0;
            bool decided = false;
            std::apply(
                [&](const auto&... s) {
                    [[maybe_unused]] const auto see = [&](const auto& stage) {
                        using S = std::decay_t<decltype(stage)>;
                        if (decided || std::is_same<S, temperature>::value)
                        {
                            return;
                        }
                        decided = true;
                        if constexpr (std::is_same<S, top_k>::value)
                        {
                            k = std::size_t(stage.value());
                        }
                    };
                    (see(s), ...);
                },
                m_stages);
            return k;
        }

        std::tuple<Stages...> m_stages;
        workspace m_ws;
    };

    template <class... Stages>
    chain(Stages...) -> chain<Stages...>;

    /// The stages a run-time sampler can order.
    enum class stage
    {
        temperature,
        top_k,
        top_p,
        min_p
    };

    /// The name of a stage as the order string spells it.
    inline const char* stage_name(stage s) noexcept
    {
        switch (s)
        {
        case stage::temperature: return "temperature";
        case stage::top_k: return "top_k";
        case stage::top_p: return "top_p";
        case stage::min_p: return "min_p";
        }
        return "?";
    }

    namespace detail
    {
        inline void check_no_repeats(const std::vector<stage>& order)
        {
            for (auto it = order.begin(); it != order.end(); ++it)
            {
                if (std::find(order.begin(), it, *it) != it)
                {
                    throw invalid_parameter(std::string("samplers: '") + stage_name(*it) + "' is listed twice");
                }
            }
        }
    }

    /// Parses "top_k;top_p;min_p;temperature" (llama.cpp's --samplers form):
    /// names separated by ';' (empty names are skipped), each at most once.
    /// Unknown or repeated names throw invalid_parameter.
    inline std::vector<stage> parse_stage_order(const std::string& text)
    {
        static constexpr stage all[] = {stage::temperature, stage::top_k, stage::top_p, stage::min_p};
        std::vector<stage> order;
        for (std::size_t pos = 0; pos <= text.size();)
        {
            const std::size_t end = std::min(text.find(';', pos), text.size());
            const std::string name = text.substr(pos, end - pos);
            pos = end + 1;
            if (name.empty())
            {
                continue;
            }
            const stage* found =
                std::find_if(std::begin(all), std::end(all), [&](stage s) { return name == stage_name(s); });
            if (found == std::end(all))
            {
                throw invalid_parameter("samplers: unknown sampler '" + name +
                                        "' (known: temperature, top_k, top_p, min_p)");
            }
            order.push_back(*found);
        }
        detail::check_no_repeats(order);
        return order;
    }

    /// The parameters of one request.
    struct sampling_params
    {
        double temperature = 1.0;  ///< >= 0; 0 is greedy
        std::int64_t top_k = 0;    ///< >= 0; 0 disables
        double top_p = 1.0;        ///< in (0, 1]; 1 disables
        double min_p = 0.0;        ///< in [0, 1]; 0 disables
        std::uint64_t seed = 0;    ///< seed of the sampler's own philox4x32 engine (stream 0)
        std::vector<stage> order = {stage::temperature, stage::top_k, stage::top_p, stage::min_p};
    };

    /// A chain composed at run time from sampling_params.
    class sampler
    {
    public:
        explicit sampler(sampling_params params)
            : m_params(std::move(params)),
              m_temperature(m_params.temperature),
              m_top_k(m_params.top_k),
              m_top_p(m_params.top_p),
              m_min_p(m_params.min_p),
              m_engine(m_params.seed, 0)
        {
            const auto listed = [&](stage s) {
                return std::find(m_params.order.begin(), m_params.order.end(), s) != m_params.order.end();
            };
            const std::pair<stage, bool> neutral[] = {{stage::temperature, m_params.temperature == 1.0},
                                                      {stage::top_k, m_params.top_k == 0},
                                                      {stage::top_p, m_params.top_p == 1.0},
                                                      {stage::min_p, m_params.min_p == 0.0}};
            for (const auto& [s, is_neutral] : neutral)
            {
                if (!is_neutral && !listed(s))
                {
                    throw invalid_parameter(std::string("samplers: ") + stage_name(s) +
                                            " is set but not in the sampler order");
                }
            }
            detail::check_no_repeats(m_params.order);
        }

        /// Draws with the sampler's own engine (philox4x32(seed, 0)).
        template <class E>
        sampled_token sample(const xt::xexpression<E>& logits, const token_history& history)
        {
            return sample(logits, history, m_engine);
        }

        /// Draws with the sampler's own engine, in the caller's workspace (for
        /// many samplers sharing a few workspaces, as sample_batch does).
        template <class E>
        sampled_token sample(const xt::xexpression<E>& logits, const token_history& history, workspace& ws)
        {
            return draw(filter(logits, history, ws), m_engine);
        }

        template <class E, class URBG>
        sampled_token sample(const xt::xexpression<E>& logits, const token_history& history, URBG& rng)
        {
            return draw(filter(logits, history, m_ws), rng);
        }

        template <class E>
        distribution final_distribution(const xt::xexpression<E>& logits, const token_history& history = {})
        {
            return distribution_of(filter(logits, history, m_ws));
        }

        const sampling_params& params() const noexcept { return m_params; }
        philox4x32& engine() noexcept { return m_engine; }

    private:
        template <class E>
        candidates<detail::logit_type<E>>& filter(const xt::xexpression<E>& logits, const token_history& /*history*/,
                                                  workspace& ws) const
        {
            auto& c = ws.get<detail::logit_type<E>>();
            c.load(logits, top_k_first());
            for (const stage s : m_params.order)
            {
                switch (s)
                {
                case stage::temperature: m_temperature.apply(c); break;
                case stage::top_k: m_top_k.apply(c); break;
                case stage::top_p: m_top_p.apply(c); break;
                case stage::min_p: m_min_p.apply(c); break;
                }
            }
            return c;
        }

        // k when the first stage other than temperature is top_k{k}, else 0.
        std::size_t top_k_first() const noexcept
        {
            for (const stage s : m_params.order)
            {
                if (s != stage::temperature)
                {
                    return s == stage::top_k ? std::size_t(m_top_k.value()) : 0;
                }
            }
            return 0;
        }

        sampling_params m_params;
        temperature m_temperature;
        top_k m_top_k;
        top_p m_top_p;
        min_p m_min_p;
        philox4x32 m_engine;
        workspace m_ws;
    };
}

#endif
