// xsampler/chain.hpp — chains composed at compile time, and the workspace. (xsampler, BSD-3-Clause)
//
// A chain composed at compile time: stages (stage.hpp) run in the order given,
// then one draw (select.hpp). The run-time chain is sampler.hpp.
//
// chain{stage, stage, ...}
//   Every stage call is inlined. Processors get the history; filters do not.
//   When every stage before the first top_k only rescales (temperature) or
//   is a processor (a custom_stage only if it wraps one), the top-k
//   selection runs in the row's validation pass (candidates::load), and so
//   it does after `extra` processors: the selection's list, left untrimmed,
//   survives as many edits lowering its tokens as it holds beyond k (more
//   fall back to the dense set of the edited row, exactly).
// sample(logits, history, rng) draws one token: one uniform01 from rng per
// random filter (xtc), in chain order, then one for the draw;
// final_distribution(logits, history[, rng]) returns what sample would draw
// from; filter(logits, history[, rng], extra...) returns the candidates
// sample would draw from, after `extra` processors run first (generate's
// min_tokens), valid until the next call — the draw and diagnostics then
// read it (a random filter needs the rng: without one it is an error);
// draw(c, rng) draws from them and lets the stages that learn from the draw
// (mirostat) observe the token (observe(t) lets them see a token chosen
// another way); reset() forgets what they learnt.
// The history is the prompt plus the tokens generated so far, with where the
// prompt ends (types.hpp); a chain owns its stages' state and its workspace
// and is reused across the steps of one sequence. Not thread-safe: one per
// sequence (or per thread).
#ifndef XSAMPLER_CHAIN_HPP
#define XSAMPLER_CHAIN_HPP

#include <cstddef>
#include <tuple>
#include <utility>

#include "entropy_filters.hpp"
#include "filters.hpp"
#include "processors.hpp"
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

    namespace detail
    {
        /// The k a stage selects as a top-k (its fused_top_k(), stage.hpp);
        /// 0 for a stage that is no top-k.
        template <class S>
        auto top_k_of(const S& stage, int) noexcept -> decltype(std::size_t(stage.fused_top_k()))
        {
            return stage.fused_top_k();
        }
        template <class S>
        std::size_t top_k_of(const S&, long) noexcept
        {
            return 0;
        }

        /// Decides the fused top-k of a run of stages: feed each stage in
        /// order; k is the first top_k's if every stage before it rescales
        /// only or is a processor (not restricts_set).
        struct fused_top_k
        {
            std::size_t k = 0;
            bool decided = false;

            template <class S>
            void see(const S& stage) noexcept
            {
                if (decided || rescales_now(stage))
                {
                    return;
                }
                if (is_processor_stage<S>::value)
                {
                    return;  // its edits keep the fused selection (candidates::load)
                }
                decided = true;
                k = top_k_of(stage, 0);
            }
            /// A custom stage is processor-shaped whatever it wraps: it is
            /// fused through only if it wraps a processor.
            void see(const custom_stage& stage) noexcept
            {
                if (decided)
                {
                    return;
                }
                if (stage.processor())
                {
                    return;
                }
                decided = true;
                k = 0;
            }
        };

        /// Loads the row into the workspace's set and runs `extra` processors
        /// then `stages` (a callable that runs the chain's own stages on c).
        template <class E, class RunStages, class... Extra>
        candidates<logit_type<E>>& run_chain(workspace& ws, const xt::xexpression<E>& logits,
                                             const token_history& history, const fused_top_k& fused,
                                             RunStages&& stages, Extra&... extra)
        {
            auto& c = ws.get<logit_type<E>>();
            c.load(logits, fused.k);
            (run_stage(extra, c, history), ...);
            stages(c);
            return c;
        }

        /// Whether an argument list starts with an engine (filter's overloads).
        template <class... A>
        struct starts_with_urbg : std::false_type
        {
        };
        template <class G, class... A>
        struct starts_with_urbg<G, A...> : is_urbg<G>
        {
        };
    }

    /// The members chain and sampler share: the ways to run a chain, built
    /// on Derived's for_each_stage(f), m_fused and m_ws.
    template <class Derived>
    class chain_runner
    {
    public:
        /// Filters the row, then draws one token (one uniform01 from rng,
        /// after one per random filter).
        template <class E, class URBG, std::enable_if_t<detail::is_urbg<URBG>::value, int> = 0>
        sampled_token sample(const xt::xexpression<E>& logits, const token_history& history, URBG& rng)
        {
            return draw(filter(logits, history, rng), rng);
        }

        /// What sample would draw from (random filters take their uniforms
        /// from rng; without it, a random filter is an error).
        template <class E>
        distribution final_distribution(const xt::xexpression<E>& logits, const token_history& history = {})
        {
            return distribution_of(filter(logits, history));
        }
        template <class E, class URBG, std::enable_if_t<detail::is_urbg<URBG>::value, int> = 0>
        distribution final_distribution(const xt::xexpression<E>& logits, const token_history& history, URBG& rng)
        {
            return distribution_of(filter(logits, history, rng));
        }

        /// The candidates sample would draw from, after `extra` processors
        /// run first; valid until the next call. With an engine first in
        /// `extra`, random filters draw their uniforms from it.
        template <class E, class... Extra, std::enable_if_t<!detail::starts_with_urbg<Extra...>::value, int> = 0>
        candidates<detail::logit_type<E>>& filter(const xt::xexpression<E>& logits, const token_history& history,
                                                  Extra&... extra)
        {
            return run(self().m_ws, detail::uniform_source(), logits, history, extra...);
        }
        template <class E, class URBG, class... Extra, std::enable_if_t<detail::is_urbg<URBG>::value, int> = 0>
        candidates<detail::logit_type<E>>& filter(const xt::xexpression<E>& logits, const token_history& history,
                                                  URBG& rng, Extra&... extra)
        {
            return run(self().m_ws, detail::uniform_source(rng), logits, history, extra...);
        }

        /// The same in the caller's workspace ws (many chains sharing a few
        /// workspaces, as sample_batch does); valid until ws is used again.
        template <class E, class URBG, class... Extra, std::enable_if_t<detail::is_urbg<URBG>::value, int> = 0>
        candidates<detail::logit_type<E>>& filter(workspace& ws, const xt::xexpression<E>& logits,
                                                  const token_history& history, URBG& rng, Extra&... extra)
        {
            return run(ws, detail::uniform_source(rng), logits, history, extra...);
        }

        /// Draws from candidates this chain filtered (one uniform01 from
        /// rng), then lets the stages that learn from the draw (mirostat)
        /// observe the token: each draw is one sample.
        template <class T, class URBG>
        sampled_token draw(candidates<T>& c, URBG& rng)
        {
            const sampled_token t = xsampler::draw(c, rng);
            observe(t);
            return t;
        }

        /// Lets the stages that learn from the draw (mirostat) observe a token
        /// chosen another way, as a draw of it (speculative.hpp's verified
        /// tokens): t.logprob is its log-probability under what this chain
        /// filtered.
        void observe(const sampled_token& t)
        {
            self().for_each_stage([&](auto& stage) { detail::observe_stage(stage, t); });
        }

        /// Up to k distinct tokens of what sample would draw from, without
        /// replacement (select.hpp's sample_distinct: V uniforms from rng,
        /// after those of the random filters). Nothing is drawn, so no stage
        /// observes a token (mirostat's mu stays).
        template <class E, class URBG, std::enable_if_t<detail::is_urbg<URBG>::value, int> = 0>
        std::size_t sample_distinct(const xt::xexpression<E>& logits, const token_history& history, std::size_t k,
                                    URBG& rng, std::vector<sampled_token>& out)
        {
            detail::check_distinct_k(k, logits.derived_cast().size());  // before a random filter draws
            return xsampler::sample_distinct(filter(logits, history, rng), k, rng, out);
        }

        /// Forgets what the stages learnt (mirostat's mu back to 2 tau).
        void reset()
        {
            self().for_each_stage([](auto& stage) { detail::reset_stage(stage); });
        }

    protected:
        /// Loads the row into ws and runs the stages (random filters take
        /// their uniforms from `uniforms`) after `extra` processors.
        template <class E, class... Extra>
        candidates<detail::logit_type<E>>& run(workspace& ws, const detail::uniform_source& uniforms,
                                               const xt::xexpression<E>& logits, const token_history& history,
                                               Extra&... extra)
        {
            return detail::run_chain(
                ws, logits, history, self().m_fused,
                [&](auto& c) {
                    self().for_each_stage([&](auto& stage) { detail::run_stage(stage, c, history, uniforms); });
                },
                extra...);
        }

    private:
        Derived& self() noexcept { return static_cast<Derived&>(*this); }
    };

    /// A chain of stages composed at compile time.
    template <class... Stages>
    class chain : public chain_runner<chain<Stages...>>
    {
    public:
        explicit chain(Stages... stages) : m_stages(std::move(stages)...)
        {
            std::apply([&](const auto&... s) { (m_fused.see(s), ...); }, m_stages);
        }

        const std::tuple<Stages...>& stages() const noexcept { return m_stages; }

    private:
        friend class chain_runner<chain>;

        template <class F>
        void for_each_stage(F&& f)
        {
            std::apply([&](auto&... stage) { (f(stage), ...); }, m_stages);
        }

        std::tuple<Stages...> m_stages;
        detail::fused_top_k m_fused;
        workspace m_ws;
    };

    template <class... Stages>
    chain(Stages...) -> chain<Stages...>;
}

#endif
