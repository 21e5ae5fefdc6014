// xsampler/sampler.hpp — the run-time sampler, its parameters and its stage table. (xsampler, BSD-3-Clause)
//
// A chain composed at run time, from the parameters a server receives with a
// request.
//
// sampling_params
//   One field per knob, neutral by default (temperature 1, top_k 0, top_p 1,
//   min_p 0, typical_p 1, top_n_sigma 0, dynatemp_range 0, and every
//   processor off: the plain softmax), the seed of the sampler's own engine,
//   the stage order (names, like llama.cpp's sampler list; default the
//   processors — logit_bias, penalties, dry, no_repeat_ngram, bad_words,
//   token_mask — then temperature, top_k, top_n_sigma, typical, top_p,
//   min_p: Hugging Face's order with the entropy filters after top_k), and
//   `custom`: user stages (stage.hpp) placed in the order by their names.
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
//   processors' state (the penalties' counts) lives in the sampler.
//   sample(logits, history[, ws | rng]) and final_distribution as for chain
//   (chain.hpp); without an rng, the sampler's own philox4x32(seed, 0).
//   Not thread-safe: one per sequence.
// parse_stage_order("top_k;top_p;min_p;temperature")
//   Splits llama.cpp's --samplers form: names separated by ';' (empty names
//   skipped), each at most once; names are checked against the built-ins and
//   the custom stages when the sampler is built.
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
    /// The processors first (logit_bias, penalties, dry, no_repeat_ngram,
    /// bad_words, token_mask: llama.cpp, vLLM and transformers all bias
    /// before they penalise), then Hugging Face's filter order: temperature,
    /// top_k, top_p, min_p, with top_n_sigma and typical between top_k and
    /// top_p (llama.cpp runs top_n_sigma before top_k and typical before
    /// top_p; both read the whole set, so after top_k they cost what top_k
    /// left).
    inline std::vector<std::string> default_stage_order()
    {
        return {"logit_bias", "penalties", "dry", "no_repeat_ngram", "bad_words", "token_mask",
                "temperature", "top_k", "top_n_sigma", "typical", "top_p", "min_p"};
    }

    /// The parameters of one request.
    struct sampling_params
    {
        double temperature = 1.0;  ///< >= 0; 0 is greedy
        std::int64_t top_k = 0;    ///< >= 0; 0 disables
        double top_p = 1.0;        ///< in (0, 1]; 1 disables
        double min_p = 0.0;        ///< in [0, 1]; 0 disables
        std::size_t min_keep = 1;  ///< >= 1: every truncating filter keeps at least this many
        // The entropy filters (entropy_filters.hpp), llama.cpp's dynamic
        // temperature and transformers' top-k ties (filters.hpp).
        double typical_p = 1.0;          ///< in (0, 1]; 1 disables
        double top_n_sigma = 0.0;        ///< finite; <= 0 disables
        double dynatemp_range = 0.0;     ///< >= 0; > 0 makes "temperature" dynamic
        double dynatemp_exponent = 1.0;  ///< >= 0
        bool top_k_keep_ties = false;    ///< top_k also keeps every token tied with the k-th
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
        std::size_t no_repeat_ngram_size = 0;                 ///< 0 disables
        std::vector<std::vector<token_id>> bad_words;         ///< id sequences
        std::vector<token_id> allowed_token_ids;              ///< empty: every token
        std::vector<token_id> banned_token_ids;
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

        /// The built-in stages of the run-time sampler: adding one is one row.
        inline const auto& stage_table()
        {
            static const auto table = std::make_tuple(
                stage_row<logit_bias>{[](const sampling_params& p) { return logit_bias(p.logit_bias); },
                                      [](const sampling_params& p) { return p.logit_bias.empty(); }},
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
                                     return top_k(p.top_k, p.top_k_keep_ties ? top_k_ties::keep_all : top_k_ties::lowest_id);
                                 },
                                 [](const sampling_params& p) { return p.top_k == 0; }},
                stage_row<top_n_sigma>{[](const sampling_params& p) { return top_n_sigma(p.top_n_sigma, p.min_keep); },
                                       [](const sampling_params& p) { return p.top_n_sigma <= 0.0; }},
                stage_row<typical>{[](const sampling_params& p) { return typical(p.typical_p, p.min_keep); },
                                   [](const sampling_params& p) { return p.typical_p == 1.0; }},
                stage_row<top_p>{[](const sampling_params& p) { return top_p(p.top_p); },
                                 [](const sampling_params& p) { return p.top_p == 1.0; }},
                stage_row<min_p>{[](const sampling_params& p) { return min_p(p.min_p); },
                                 [](const sampling_params& p) { return p.min_p == 0.0; }});
            return table;
        }

        template <class... Rows>
        std::variant<typename Rows::stage..., custom_stage> slot_of(const std::tuple<Rows...>&);
        /// A run-time stage: a built-in one or a user's.
        using stage_slot = decltype(slot_of(stage_table()));

        /// "temperature, top_k, ..." (the built-ins' names).
        inline std::string builtin_names()
        {
            std::string names;
            std::apply([&](const auto&... row) { ((names += (names.empty() ? "" : ", ") +
                                                   std::string(std::decay_t<decltype(row)>::stage::name)), ...); },
                       stage_table());
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
    class sampler
    {
    public:
        explicit sampler(sampling_params params) : m_params(std::move(params)), m_engine(m_params.seed, 0)
        {
            detail::check_no_repeats(m_params.order);
            const auto listed = [&](const std::string& name) {
                return std::find(m_params.order.begin(), m_params.order.end(), name) != m_params.order.end();
            };
            // Every built-in is made (so validated) whether it is listed or not.
            std::vector<std::pair<std::string, detail::stage_slot>> known;
            std::vector<std::string> neutral;
            std::apply(
                [&](const auto&... row) {
                    const auto add = [&](const auto& r) {
                        using S = typename std::decay_t<decltype(r)>::stage;
                        known.emplace_back(S::name, r.make(m_params));
                        if (r.neutral(m_params))
                        {
                            neutral.push_back(S::name);
                        }
                        else if (!listed(S::name))
                        {
                            throw invalid_parameter(std::string("samplers: ") + S::name +
                                                    " is set but not in the sampler order");
                        }
                    };
                    (add(row), ...);
                },
                detail::stage_table());
            for (const auto& c : m_params.custom)
            {
                if (std::any_of(known.begin(), known.end(), [&](const auto& k) { return k.first == c.name(); }))
                {
                    throw invalid_parameter("samplers: custom stage '" + c.name() + "' has the name of another stage");
                }
                if (!listed(c.name()))
                {
                    throw invalid_parameter("samplers: custom stage '" + c.name() + "' is not in the sampler order");
                }
                known.emplace_back(c.name(), c);
            }
            for (const auto& name : m_params.order)
            {
                const auto it = std::find_if(known.begin(), known.end(), [&](const auto& k) { return k.first == name; });
                if (it != known.end() && std::find(neutral.begin(), neutral.end(), name) != neutral.end())
                {
                    continue;  // a neutral built-in does nothing: left out of the chain
                }
                if (it == known.end())
                {
                    std::string names = detail::builtin_names();
                    for (const auto& c : m_params.custom)
                    {
                        names += ", " + c.name();
                    }
                    throw invalid_parameter("samplers: unknown sampler '" + name + "' (known: " + names + ")");
                }
                m_stages.push_back(it->second);
            }
            for (const auto& slot : m_stages)
            {
                std::visit([&](const auto& s) { m_fused.see(s); }, slot);
            }
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
            return draw(run(ws, logits, history), m_engine);
        }

        template <class E, class URBG>
        sampled_token sample(const xt::xexpression<E>& logits, const token_history& history, URBG& rng)
        {
            return draw(run(m_ws, logits, history), rng);
        }

        template <class E>
        distribution final_distribution(const xt::xexpression<E>& logits, const token_history& history = {})
        {
            return distribution_of(run(m_ws, logits, history));
        }

        template <class E, class... Extra>
        candidates<detail::logit_type<E>>& filter(const xt::xexpression<E>& logits, const token_history& history,
                                                  Extra&... extra)
        {
            return run(m_ws, logits, history, extra...);
        }

        const sampling_params& params() const noexcept { return m_params; }
        philox4x32& engine() noexcept { return m_engine; }

    private:
        template <class E, class... Extra>
        candidates<detail::logit_type<E>>& run(workspace& ws, const xt::xexpression<E>& logits,
                                               const token_history& history, Extra&... extra)
        {
            return detail::run_chain(
                ws, logits, history, m_fused,
                [&](auto& c) {
                    for (auto& slot : m_stages)
                    {
                        std::visit([&](auto& stage) { detail::run_stage(stage, c, history); }, slot);
                    }
                },
                extra...);
        }

        sampling_params m_params;
        std::vector<detail::stage_slot> m_stages;
        detail::fused_top_k m_fused;
        philox4x32 m_engine;
        workspace m_ws;
    };
}

#endif
