// xsampler/sampler.hpp — the run-time sampler, its parameters and its stage table. (xsampler, BSD-3-Clause)
//
// A chain composed at run time, from the parameters a server receives with a
// request.
//
// sampling_params
//   One field per knob, neutral by default (temperature 1, top_k 0, top_p 1,
//   min_p 0, min_keep 1, typical_p 1, top_n_sigma 0, dynatemp_range 0,
//   epsilon 0, eta 0, p_less off, top_h 0, xtc_probability 0, mirostat 0,
//   top_k_top_p_joint off, and every processor
//   off: the plain softmax), the seed of the sampler's own engine, the stage
//   order (names, like llama.cpp's sampler list; default the processors —
//   logit_bias, sequence_bias, penalties, dry, no_repeat_ngram, bad_words, token_mask —
//   then temperature, top_k, top_k_top_p, top_n_sigma, typical, top_p, min_p,
//   p_less, top_h, epsilon, eta, xtc: Hugging Face's order with the entropy filters after top_k and
//   the probability thresholds and XTC last), and `custom`: user stages
//   (stage.hpp) placed in the order by their names.
//   top_k_top_p_joint (FlashInfer's filter_apply_order "joint") makes top_k
//   and top_p one stage, "top_k_top_p" (filters/top_k_top_p.hpp): both cut
//   the distribution that reaches it, and the stages named "top_k" and
//   "top_p" are then neutral.
//   "temperature" is llama.cpp's temp_ext: with dynatemp_range > 0 it is the
//   dynamic temperature{T, range, exponent} (it reads the set, so a top_k
//   after it is not fused); with range 0 the plain temperature, whose fused
//   top-k pass is unchanged.
// sampler{sampling_params}
//   Built from one table of the built-in stages (detail::stage_table): each
//   row binds a stage to its sampling_params field and says when that field
//   is neutral. Every parameter is validated once, at construction, whether
//   or not its stage is in the order. A name in the order that is neither a
//   built-in nor a custom stage, a name listed twice, a non-neutral built-in
//   or a custom stage missing from the order: invalid_parameter. The fused
//   top-k pass runs when every stage before the first top_k rescales only or
//   is a processor (a custom stage that wraps one), as for chain. A
//   built-in whose parameters are neutral is left out of the chain. The
//   processors' state (the penalties' counts) lives in the sampler, and so
//   does mirostat's mu. xtc (filters/xtc.hpp) is named "xtc" in the order (default:
//   last); a sample through it consumes two uniforms.
//   mirostat = 1 or 2 (filters/mirostat.hpp, llama.cpp's --mirostat) replaces the
//   filters: the chain is the order's processors and temperature, then
//   mirostat, then the draw; any other filter that is set is an error
//   naming it (llama.cpp ignores them; its chain also leaves out penalties
//   and DRY, which run here).
//   sample(logits, history[, ws | rng]), final_distribution, filter, draw
//   and reset as for chain (chain.hpp); without an rng, the sampler's own
//   philox4x32(seed, 0), which reset() also restarts.
//   Not thread-safe: one per sequence.
// parse_stage_order("top_k;top_p;min_p;temperature")
//   Splits llama.cpp's --samplers form: names separated by ';' (empty names
//   skipped), each at most once; names are checked against the built-ins and
//   the custom stages when the sampler is built.
// trace(logits, history[, rng], f)
//   The chain stage by stage, for diagnostics and pictures: see the block
//   "Tracing" in the class.
#ifndef XSAMPLER_SAMPLER_HPP
#define XSAMPLER_SAMPLER_HPP

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "chain.hpp"
#include "dry.hpp"
#include "penalties.hpp"
#include "processors.hpp"

namespace xsampler
{
    /// The built-in stages' names in the stage table's order (below).
    inline std::vector<std::string> default_stage_order();

    /// The parameters of one request.
    struct sampling_params
    {
        double temperature = 1.0;  ///< >= 0; 0 is greedy
        std::int64_t top_k = 0;    ///< >= 0; 0 disables
        double top_p = 1.0;        ///< in (0, 1]; 1 disables
        double min_p = 0.0;        ///< in [0, 1]; 0 disables
        std::size_t min_keep = 1;  ///< >= 1: every truncating filter keeps at least this many
        double epsilon = 0.0;      ///< in [0, 1); 0 disables
        double eta = 0.0;          ///< in [0, 1); 0 disables
        bool p_less = false;       ///< keep p >= sum p^2 (filters/p_less.hpp)
        double top_h = 0.0;        ///< in [0, 1]; 0 disables (filters/top_h.hpp)
        // The entropy filters (entropy_filters.hpp), llama.cpp's dynamic
        // temperature and transformers' top-k ties (filters.hpp).
        double typical_p = 1.0;          ///< in (0, 1]; 1 disables
        double top_n_sigma = 0.0;        ///< finite; <= 0 disables
        double dynatemp_range = 0.0;     ///< >= 0; > 0 makes "temperature" dynamic
        double dynatemp_exponent = 1.0;  ///< >= 0
        bool top_k_keep_ties = false;    ///< top_k also keeps every token tied with the k-th
        bool top_k_top_p_joint = false;  ///< FlashInfer's "joint": top_k and top_p as one stage (filters/top_k_top_p.hpp)
        // The processors (penalties.hpp, dry.hpp, processors.hpp); each neutral by default.
        double repeat_penalty = 1.0;     ///< > 0; 1 disables
        double presence_penalty = 0.0;   ///< finite; 0 disables
        double frequency_penalty = 0.0;  ///< finite; 0 disables
        std::int64_t repeat_last_n = 64;  ///< >= -1: the window scope's last n tokens; -1 all, 0 off
        xsampler::penalty_scope penalty_scope = xsampler::penalty_scope::window;  ///< which tokens count
        double dry_multiplier = 0.0;      ///< >= 0; 0 disables
        double dry_base = 1.75;
        std::int64_t dry_allowed_length = 2;
        std::int64_t dry_penalty_last_n = -1;
        std::vector<token_id> dry_sequence_breakers;
        std::vector<std::pair<token_id, double>> logit_bias;  ///< id -> bias (-inf bans)
        std::vector<std::pair<std::vector<token_id>, double>> sequence_bias;  ///< ids -> bias on the last
        std::size_t no_repeat_ngram_size = 0;                 ///< 0 disables
        std::vector<std::vector<token_id>> bad_words;         ///< id sequences
        std::vector<token_id> allowed_token_ids;              ///< empty: every token
        std::vector<token_id> banned_token_ids;
        // XTC (filters/xtc.hpp): with probability xtc_probability, the tokens with p >= xtc_threshold but the last.
        double xtc_probability = 0.0;  ///< in [0, 1]; 0 disables
        double xtc_threshold = 0.1;    ///< in [0, 1]
        // Mirostat (filters/mirostat.hpp): 1 or 2 replaces the filters after temperature (see below).
        int mirostat = 0;              ///< 0 (off), 1 or 2
        double mirostat_tau = 5.0;     ///< target surprise, bits
        double mirostat_eta = 0.1;     ///< learning rate
        std::int64_t mirostat_m = 100;  ///< v1: tokens of the Zipf estimate
        std::uint64_t seed = 0;    ///< seed of the sampler's own philox4x32 engine (stream 0)
        // (a call, not a braced list: g++ 12 fails on the list in templates)
        std::vector<std::string> order = default_stage_order();
        std::vector<custom_stage> custom;  ///< user stages, placed in `order` by name
    };

    namespace detail
    {
        /// A row of the built-in stage table: how a stage is made from the
        /// parameters, and whether they leave it neutral (then it may be
        /// left out of the order). The stage's name and properties are its
        /// own static members (stage.hpp).
        template <class S>
        struct stage_row
        {
            using stage = S;
            S (*make)(const sampling_params&);
            bool (*neutral)(const sampling_params&);
        };

        /// top_k's tie rule (top_k and top_k_top_p read it).
        inline top_k_ties top_k_ties_of(const sampling_params& p)
        {
            return p.top_k_keep_ties ? top_k_ties::keep_all : top_k_ties::lowest_id;
        }

        /// The built-in stages of the run-time sampler: adding one is one row.
        /// The rows' order is the default order (default_stage_order): the
        /// processors first (logit_bias, sequence_bias, penalties, dry, no_repeat_ngram,
        /// bad_words, token_mask: llama.cpp, vLLM and transformers all bias
        /// before they penalise), then Hugging Face's filter order:
        /// temperature, top_k, top_p, min_p, then epsilon, eta and xtc, with
        /// top_k_top_p (joint mode) right after top_k, top_n_sigma and typical
        /// between top_k and top_p (llama.cpp runs top_n_sigma before top_k
        /// and typical before top_p; both read the whole set, so after top_k
        /// they cost what top_k left), p_less and top_h after min_p.
        inline const auto& stage_table()
        {
            static const auto table = std::make_tuple(
                stage_row<logit_bias>{[](const sampling_params& p) { return logit_bias(p.logit_bias); },
                                      [](const sampling_params& p) { return p.logit_bias.empty(); }},
                stage_row<sequence_bias>{[](const sampling_params& p) { return sequence_bias(p.sequence_bias); },
                                         [](const sampling_params& p) { return p.sequence_bias.empty(); }},
                stage_row<penalties>{[](const sampling_params& p) {
                                         return penalties(p.repeat_penalty, p.presence_penalty, p.frequency_penalty,
                                                          p.repeat_last_n, p.penalty_scope);
                                     },
                                     [](const sampling_params& p) {
                                         return penalties(p.repeat_penalty, p.presence_penalty, p.frequency_penalty,
                                                          p.repeat_last_n, p.penalty_scope)
                                             .neutral();
                                     }},
                stage_row<dry>{[](const sampling_params& p) {
                                   return dry(p.dry_multiplier, p.dry_base, p.dry_allowed_length, p.dry_penalty_last_n,
                                              p.dry_sequence_breakers);
                               },
                               [](const sampling_params& p) {
                                   return p.dry_multiplier == 0.0 || p.dry_penalty_last_n == 0;
                               }},
                stage_row<no_repeat_ngram>{[](const sampling_params& p) { return no_repeat_ngram(p.no_repeat_ngram_size); },
                                           [](const sampling_params& p) { return p.no_repeat_ngram_size == 0; }},
                stage_row<bad_words>{[](const sampling_params& p) { return bad_words(p.bad_words); },
                                     [](const sampling_params& p) { return p.bad_words.empty(); }},
                stage_row<token_mask>{[](const sampling_params& p) {
                                          return token_mask(p.allowed_token_ids, p.banned_token_ids);
                                      },
                                      [](const sampling_params& p) {
                                          return p.allowed_token_ids.empty() && p.banned_token_ids.empty();
                                      }},
                // "temperature" is llama.cpp's temp_ext: dynamic when dynatemp_range > 0.
                stage_row<temperature>{[](const sampling_params& p) {
                                           return temperature(p.temperature, p.dynatemp_range, p.dynatemp_exponent);
                                       },
                                       [](const sampling_params& p) {
                                           return p.temperature == 1.0 && p.dynatemp_range == 0.0;
                                       }},
                stage_row<top_k>{[](const sampling_params& p) {
                                     return top_k(p.top_k, p.min_keep, top_k_ties_of(p));
                                 },
                                 [](const sampling_params& p) { return p.top_k == 0 || p.top_k_top_p_joint; }},
                stage_row<top_k_top_p>{[](const sampling_params& p) {
                                           return top_k_top_p(p.top_k, p.top_p, p.min_keep, top_k_ties_of(p));
                                       },
                                       [](const sampling_params& p) {
                                           return !p.top_k_top_p_joint || (p.top_k == 0 && p.top_p == 1.0);
                                       }},
                stage_row<top_n_sigma>{[](const sampling_params& p) { return top_n_sigma(p.top_n_sigma, p.min_keep); },
                                       [](const sampling_params& p) { return p.top_n_sigma <= 0.0; }},
                stage_row<typical>{[](const sampling_params& p) { return typical(p.typical_p, p.min_keep); },
                                   [](const sampling_params& p) { return p.typical_p == 1.0; }},
                stage_row<top_p>{[](const sampling_params& p) { return top_p(p.top_p, p.min_keep); },
                                 [](const sampling_params& p) { return p.top_p == 1.0 || p.top_k_top_p_joint; }},
                stage_row<min_p>{[](const sampling_params& p) { return min_p(p.min_p, p.min_keep); },
                                 [](const sampling_params& p) { return p.min_p == 0.0; }},
                stage_row<p_less>{[](const sampling_params& p) { return p_less(p.min_keep); },
                                  [](const sampling_params& p) { return !p.p_less; }},
                stage_row<top_h>{[](const sampling_params& p) { return top_h(p.top_h, p.min_keep); },
                                 [](const sampling_params& p) { return p.top_h == 0.0; }},
                stage_row<epsilon>{[](const sampling_params& p) { return epsilon(p.epsilon, p.min_keep); },
                                   [](const sampling_params& p) { return p.epsilon == 0.0; }},
                stage_row<eta>{[](const sampling_params& p) { return eta(p.eta, p.min_keep); },
                               [](const sampling_params& p) { return p.eta == 0.0; }},
                stage_row<xtc>{[](const sampling_params& p) { return xtc(p.xtc_probability, p.xtc_threshold, p.min_keep); },
                               [](const sampling_params& p) { return p.xtc_probability == 0.0; }});
            return table;
        }

        template <class... Rows>
        std::variant<typename Rows::stage..., custom_stage, mirostat> slot_of(const std::tuple<Rows...>&);
    }

    inline std::vector<std::string> default_stage_order()
    {
        std::vector<std::string> names;
        std::apply([&](const auto&... row) { (names.emplace_back(std::decay_t<decltype(row)>::stage::name), ...); },
                   detail::stage_table());
        return names;
    }

    namespace detail
    {
        /// A run-time stage: a built-in one, a user's, or mirostat.
        using stage_slot = decltype(slot_of(stage_table()));

        /// "temperature, top_k, ..." (the built-ins' names).
        inline std::string builtin_names()
        {
            std::string names;
            for (const auto& name : default_stage_order())
            {
                names += (names.empty() ? "" : ", ") + name;
            }
            return names;
        }

        inline void check_no_repeats(const std::vector<std::string>& order)
        {
            for (auto it = order.begin(); it != order.end(); ++it)
            {
                if (std::find(order.begin(), it, *it) != it)
                {
                    throw invalid_parameter("samplers: '" + *it + "' is listed twice");
                }
            }
        }
    }

    inline std::vector<std::string> parse_stage_order(const std::string& text)
    {
        std::vector<std::string> order;
        for (std::size_t pos = 0; pos <= text.size();)
        {
            const std::size_t end = std::min(text.find(';', pos), text.size());
            std::string name = text.substr(pos, end - pos);
            pos = end + 1;
            if (!name.empty())
            {
                order.push_back(std::move(name));
            }
        }
        detail::check_no_repeats(order);
        return order;
    }

    /// A chain composed at run time from sampling_params.
    class sampler : public chain_runner<sampler>
    {
    public:
        explicit sampler(sampling_params params)
            : m_params(std::move(params)),
              m_engine(m_params.seed, 0)
        {
            detail::check_no_repeats(m_params.order);
            if (m_params.mirostat < 0 || m_params.mirostat > 2)
            {
                throw invalid_parameter("mirostat: must be 0 (off), 1 or 2, got " + std::to_string(m_params.mirostat));
            }
            // The mirostat parameters are validated whether or not it is on.
            const mirostat steer(m_params.mirostat == 0 ? 1 : m_params.mirostat, m_params.mirostat_tau,
                                 m_params.mirostat_eta, m_params.mirostat_m);
            const auto listed = [&](const std::string& name) {
                return std::find(m_params.order.begin(), m_params.order.end(), name) != m_params.order.end();
            };
            // Every built-in is made (so validated) whether it is listed or not.
            struct known_stage
            {
                std::string name;
                detail::stage_slot slot;
                bool neutral;
                bool filter;  // not a processor: mirostat replaces it
            };
            std::vector<known_stage> known;
            std::apply(
                [&](const auto&... row) {
                    const auto add = [&](const auto& r) {
                        using S = typename std::decay_t<decltype(r)>::stage;
                        const bool neutral = r.neutral(m_params);
                        if (!neutral && !listed(S::name))
                        {
                            throw invalid_parameter(std::string("samplers: ") + S::name +
                                                    " is set but not in the sampler order");
                        }
                        known.push_back({S::name, r.make(m_params), neutral,
                                         !detail::is_processor<S, float>::value && !detail::kept_with_mirostat<S>::value});
                    };
                    (add(row), ...);
                },
                detail::stage_table());
            for (const auto& c : m_params.custom)
            {
                if (std::any_of(known.begin(), known.end(), [&](const auto& k) { return k.name == c.name(); }))
                {
                    throw invalid_parameter("samplers: custom stage '" + c.name() + "' has the name of another stage");
                }
                if (!listed(c.name()))
                {
                    throw invalid_parameter("samplers: custom stage '" + c.name() + "' is not in the sampler order");
                }
                known.push_back({c.name(), c, false, !c.processor()});
            }
            for (const auto& name : m_params.order)
            {
                const auto it = std::find_if(known.begin(), known.end(), [&](const auto& k) { return k.name == name; });
                if (it == known.end())
                {
                    std::string names = detail::builtin_names();
                    for (const auto& c : m_params.custom)
                    {
                        names += ", " + c.name();
                    }
                    throw invalid_parameter("samplers: unknown sampler '" + name + "' (known: " + names + ")");
                }
                if (it->neutral)
                {
                    continue;  // a neutral built-in does nothing: left out of the chain
                }
                if (m_params.mirostat != 0 && it->filter)
                {
                    throw invalid_parameter("mirostat: replaces the filters after temperature, but " + name +
                                            " is set (unset it, or set mirostat to 0)");
                }
                m_stages.push_back(it->slot);
            }
            if (m_params.mirostat != 0)
            {
                m_stages.emplace_back(steer);
            }
            for (const auto& slot : m_stages)
            {
                std::visit([&](const auto& s) { m_fused.see(s); }, slot);
            }
        }

        using chain_runner<sampler>::sample;

        /// Back to the state after construction: the stages forget what
        /// they learnt (mirostat's mu) and the engine restarts at
        /// philox4x32(seed, 0).
        void reset()
        {
            chain_runner<sampler>::reset();
            m_engine = philox4x32(m_params.seed, 0);
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
            return draw(run(ws, detail::uniform_source(m_engine), logits, history), m_engine);
        }

        const sampling_params& params() const noexcept { return m_params; }
        /// Each stage of the chain in words, in order: a built-in's describe()
        /// ("top_p 0.9", "penalties repeat 1.1, last 64"), a user's stage's
        /// name. These are the stages trace() calls f after, one by one.
        std::vector<std::string> describe_stages() const
        {
            std::vector<std::string> out;
            for (const auto& slot : m_stages)
            {
                std::visit([&out](const auto& stage) { out.push_back(detail::stage_words(stage, 0)); }, slot);
            }
            return out;
        }
        philox4x32& engine() noexcept { return m_engine; }

        // ---- Tracing: the chain stage by stage ---------------------------
        /// Runs the chain on one row as sample() would, and calls
        /// f(const std::string& name, candidates<T>& c) once after the row is
        /// loaded (name "logits": every unmasked token, scale 1, the plain
        /// softmax) and once after each stage that runs, with the stage's
        /// name (a built-in's, or a custom stage's own). A built-in whose
        /// parameters are neutral is left out of the chain, so it is not
        /// traced either. The last call sees the set sample() draws from:
        /// distribution_of(c) there equals final_distribution(logits,
        /// history[, rng]) given an engine in the same state. A random
        /// filter (xtc) takes its uniform from rng; without one it is an
        /// error, as for final_distribution. f may read the set
        /// (distribution_of, size, ...), which ends a pending fused top-k
        /// exactly (candidates.hpp), so what the later stages keep is
        /// unchanged; f must not change it. The stages run on a copy of the
        /// sampler's, so whatever state they keep (mirostat's mu, the
        /// penalties' counts) is the same after a trace as before it, and
        /// nothing is drawn or observed: only rng moves. Allocates (the
        /// copy): it is for diagnostics, not for the per-token path. c is
        /// valid until the next call on this sampler.
        template <class E, class F>
        void trace(const xt::xexpression<E>& logits, const token_history& history, F&& f)
        {
            trace_stages(detail::uniform_source(), logits, history, f);
        }
        template <class E, class URBG, class F, std::enable_if_t<detail::is_urbg<URBG>::value, int> = 0>
        void trace(const xt::xexpression<E>& logits, const token_history& history, URBG& rng, F&& f)
        {
            trace_stages(detail::uniform_source(rng), logits, history, f);
        }

    private:
        template <class E, class F>
        void trace_stages(const detail::uniform_source& uniforms, const xt::xexpression<E>& logits,
                          const token_history& history, F& f)
        {
            auto stages = m_stages;
            detail::run_chain(m_ws, logits, history, m_fused, [&](auto& c) {
                f(std::string("logits"), c);
                for (auto& slot : stages)
                {
                    std::visit(
                        [&](auto& stage) {
                            detail::run_stage(stage, c, history, uniforms);
                            f(detail::name_of(stage), c);
                        },
                        slot);
                }
            });
        }
        // ---- end of Tracing ----------------------------------------------

    private:
        friend class chain_runner<sampler>;

        template <class F>
        void for_each_stage(F&& f)
        {
            for (auto& slot : m_stages)
            {
                std::visit(f, slot);
            }
        }

        sampling_params m_params;
        std::vector<detail::stage_slot> m_stages;
        detail::fused_top_k m_fused;
        philox4x32 m_engine;
        workspace m_ws;
    };
}

#endif
