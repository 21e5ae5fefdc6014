// The `xsampler speculate` subcommand: speculative decoding with the n-gram
// model at two orders over the same corpus (--order N the target, --draft-order
// M the draft), through sequence::step_draft. The draft samples its tokens
// with the same sampler parameters from its own distribution, q; the target
// verifies them (--rule standard, greedy or typical). The text follows the
// target's distribution under the standard rule, so it is what `generate`
// would give in law (not token for token: the uniforms are used otherwise).
#ifndef XSAMPLER_TOOL_SPECULATE_COMMAND_HPP
#define XSAMPLER_TOOL_SPECULATE_COMMAND_HPP

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <xtensor/xview.hpp>

#include <xsampler/xsampler.hpp>

#include "decode_commands.hpp"

namespace tool
{
    inline xsampler::verify_rule verify_rule_of(const std::string& name)
    {
        if (name == "standard")
        {
            return xsampler::verify_rule::standard;
        }
        if (name == "greedy")
        {
            return xsampler::verify_rule::greedy;
        }
        if (name == "typical")
        {
            return xsampler::verify_rule::typical;
        }
        throw std::invalid_argument("--rule: must be standard, greedy or typical, got '" + detail::echo(name) + "'");
    }

    /// speculate's model: the n-gram one only (before --eos defaults from it).
    inline void check_speculate_model(const tool_options& o)
    {
        if (o.tokenizer.empty())
        {
            throw std::invalid_argument("speculate needs the n-gram model: --corpus FILE --tokenizer gpt2 [--order N] "
                                        "[--draft-order M]");
        }
    }

    inline void run_speculate(const tool_options& o)
    {
        xsampler::verify_options rule;
        rule.rule = verify_rule_of(o.speculate.rule);
        loaded input = load_model(o);
        const auto& target = std::get<ngram_model>(input.model);
        const ngram_model draft = ngram_model::from_file(o.corpus, gpt2_dir(o), o.speculate.draft_order);
        const std::vector<token_id>& prompt = input.prompt;
        const std::size_t vocab = target.vocab();
        xsampler::generate_options g = o.generate;
        g.vocab = &target.tokenizer().vocab();
        g.stop_strings = o.stop_strings;
        xsampler::sequence_options so = xsampler::detail::sequence_options_of(g);
        so.vocab = g.vocab;
        so.seed = o.params.seed;
        xsampler::sequence seq(make_sampler(o), prompt, so, "speculate");
        auto draft_sampler = make_sampler(o);
        xsampler::philox4x32 draft_rng(o.params.seed, 1);  // the target's is stream 0
        const std::size_t k_most = o.speculate.draft_tokens;
        xt::xtensor<double, 2> rows({k_most + 1, vocab});
        xt::xtensor<double, 2> q({k_most, vocab});
        std::vector<token_id> with_draft, draft_tokens;
        std::size_t proposed = 0, accepted = 0, passes = 0;
        const auto is_eos = [&](token_id id) {
            return std::find(o.generate.eos.begin(), o.generate.eos.end(), id) != o.generate.eos.end();
        };
        while (!seq.finished())
        {
            with_draft.assign(seq.history().tokens().begin(), seq.history().tokens().end());
            draft_tokens.clear();
            // The draft: up to k tokens, each drawn by the draft's sampler from
            // its own final distribution (q); it stops after an eos, and at
            // the room max_tokens leaves (one token of the pass is the target's).
            const std::size_t room = o.generate.max_tokens - seq.generated().size();
            const std::size_t k_now = std::min(k_most, room - 1);
            for (std::size_t j = 0; j < k_now && (draft_tokens.empty() || !is_eos(draft_tokens.back())); ++j)
            {
                const xsampler::token_history h(with_draft, prompt.size());
                auto& c = draft_sampler.filter(draft(with_draft), h, draft_rng);
                auto q_row = xt::view(q, j, xt::all());
                std::fill(q_row.begin(), q_row.end(), 0.0);
                const double z = c.total_weight();
                c.for_each_by_id([&](token_id id, double logit) { q_row(std::size_t(id)) = c.weight(id, logit) / z; });
                draft_tokens.push_back(draft_sampler.draw(c, draft_rng).id);
                with_draft.push_back(draft_tokens.back());
            }
            // The target, once on the prefix and the draft: k + 1 rows.
            const std::size_t k = draft_tokens.size();
            for (std::size_t j = 0; j <= k; ++j)
            {
                xt::view(rows, j, xt::all()) = target(xsampler::token_span(with_draft).subspan(0, with_draft.size() - k + j));
            }
            const auto steps = seq.step_draft(xt::view(rows, xt::range(0, k + 1), xt::all()), draft_tokens,
                                              xt::view(q, xt::range(0, k), xt::all()), rule);
            ++passes;
            proposed += k;
            for (std::size_t i = 0; i < steps.size() && i < k && steps[i].id == draft_tokens[i]; ++i)
            {
                ++accepted;  // a token emitted in place of a draft token never equals it
            }
        }
        const std::vector<token_id> out(seq.generated().begin(), seq.generated().end());
        const auto reason = xsampler::detail::stop_reason_of(seq.reason());
        const double rate = proposed > 0 ? double(accepted) / double(proposed) : 0.0;
        if (o.json)
        {
            nlohmann::json j;
            j["tokens"] = out;
            j["text"] = seq.text();
            j["stop_reason"] = xsampler::to_string(reason);
            j["proposed"] = proposed;
            j["accepted"] = accepted;
            j["acceptance_rate"] = rate;
            j["target_passes"] = passes;
            std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
            return;
        }
        std::cout << target.decode(prompt) << seq.text() << '\n';
        std::cout << "(" << out.size() << " tokens, stop reason: " << xsampler::to_string(reason) << "; " << proposed
                  << " draft tokens, " << accepted << " accepted (" << rate << "); " << passes << " target passes, "
                  << (passes > 0 ? double(out.size()) / double(passes) : 0.0) << " tokens each)\n";
    }
}

#endif
