// The `xsampler` tool's decoding subcommands: generate, beam, vote — over a
// Markov model (--transitions T.npy --bos ID) or a bigram word model counted
// from a text (--corpus FILE --prompt TEXT [--rank R]).
#ifndef XSAMPLER_EXAMPLES_DECODE_COMMANDS_HPP
#define XSAMPLER_EXAMPLES_DECODE_COMMANDS_HPP

#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <xsampler/xsampler.hpp>

#include "models.hpp"

namespace examples
{
    struct decode_options
    {
        std::string transitions;
        std::int64_t bos = -1;
        std::string corpus;
        std::string prompt;
        std::size_t rank = 0;
        std::vector<std::int64_t> eos;
        std::uint64_t seed = 0;
        std::size_t max_tokens = 0;
        std::size_t min_tokens = 0;
        std::vector<std::string> stop_seqs;
        std::size_t top_logprobs = 0;
        std::size_t beam_width = 0;
        std::size_t n_best = 1;
        double length_penalty = 1.0;
        std::int64_t n = 0;
        bool json = false;
    };

    inline void add_model_flags(CLI::App& cmd, decode_options& o)
    {
        auto* t = cmd.add_option("--transitions", o.transitions, "Markov model: [vocab, vocab] .npy of next-token logits");
        auto* b = cmd.add_option("--bos", o.bos, "Markov model: the prompt's single token");
        auto* c = cmd.add_option("--corpus", o.corpus, "bigram word model: a text file to count");
        auto* p = cmd.add_option("--prompt", o.prompt, "bigram word model: the prompt's words");
        cmd.add_option("--rank", o.rank, "bigram word model: factorise to rank R (0 = exact, default)");
        t->needs(b);
        b->needs(t);
        c->excludes(t);
        p->needs(c);
        cmd.add_option("--eos", o.eos, "stop token id(s)")->required()->expected(1, 64);
        cmd.add_flag("--json", o.json, "print JSON");
    }

    using any_model = std::variant<table_model, bigram_model>;

    struct loaded
    {
        any_model model;
        std::vector<token_id> prompt;
    };

    inline loaded load_model(const decode_options& o)
    {
        const auto check_id = [](std::int64_t id, std::size_t vocab, const std::string& flag) {
            if (id < 0 || std::uint64_t(id) >= vocab)
            {
                throw std::invalid_argument(flag + ": token id " + std::to_string(id) + " is out of range [0, " +
                                            std::to_string(vocab) + ")");
            }
        };
        if (o.transitions.empty() && o.corpus.empty())
        {
            throw std::invalid_argument("give a model: --transitions T.npy --bos ID, or --corpus FILE --prompt TEXT");
        }
        if (!o.transitions.empty())
        {
            auto m = markov_model(o.transitions);
            check_id(o.bos, m.vocab(), "--bos");
            for (const auto e : o.eos)
            {
                check_id(e, m.vocab(), "--eos");
            }
            return {std::move(m), {token_id(o.bos)}};
        }
        auto m = bigram_model::from_file(o.corpus, o.rank);
        for (const auto e : o.eos)
        {
            check_id(e, m.vocab(), "--eos");
        }
        auto prompt = m.encode(o.prompt);
        return {std::move(m), std::move(prompt)};
    }

    inline std::vector<token_id> eos_ids(const decode_options& o)
    {
        return std::vector<token_id>(o.eos.begin(), o.eos.end());
    }

    inline std::string text_of(const any_model& m, const std::vector<token_id>& ids)
    {
        if (const auto* words = std::get_if<bigram_model>(&m))
        {
            return words->decode(ids);
        }
        std::string s;
        for (const auto id : ids)
        {
            s += (s.empty() ? "" : " ") + std::to_string(id);
        }
        return s;
    }

    inline int run_generate(const decode_options& o, xsampler::sampler& s)
    {
        loaded input = load_model(o);  // not a structured binding: clang 14 lambdas cannot capture those
        auto& model = input.model;
        auto& prompt = input.prompt;
        xsampler::generate_options g;
        g.max_tokens = o.max_tokens;
        g.min_tokens = o.min_tokens;
        g.eos = eos_ids(o);
        g.top_logprobs = o.top_logprobs;
        g.model_logprobs = g.entropy = o.json;  // the text output shows neither
        for (const auto& text : o.stop_seqs)
        {
            std::istringstream in(text);
            std::vector<token_id> seq;
            std::string word;
            while (in >> word)
            {
                std::size_t used = 0;
                long long id = -1;
                try
                {
                    id = std::stoll(word, &used);
                }
                catch (const std::exception&)
                {
                }
                if (used != word.size() || id < 0)
                {
                    throw std::invalid_argument("--stop-seq: '" + word + "' is not a token id");
                }
                seq.push_back(token_id(id));
            }
            g.stop_sequences.push_back(seq);
        }
        xsampler::philox4x32 rng(o.seed);
        const auto out = std::visit([&](auto& m) { return xsampler::generate(m, prompt, s, g, rng); }, model);
        if (o.json)
        {
            nlohmann::json j;
            j["tokens"] = out.tokens;
            j["logprobs"] = out.logprobs;
            j["model_logprobs"] = out.model_logprobs;
            j["entropies"] = out.entropies;
            j["stop_reason"] = xsampler::to_string(out.reason);
            if (o.top_logprobs > 0)
            {
                j["top_logprobs"] = nlohmann::json::array();
                for (const auto& step : out.top_logprobs)
                {
                    auto alternatives = nlohmann::json::array();
                    for (const auto& t : step)
                    {
                        alternatives.push_back({{"id", t.id}, {"logprob", t.logprob}});
                    }
                    j["top_logprobs"].push_back(alternatives);
                }
            }
            if (std::holds_alternative<bigram_model>(model))
            {
                j["text"] = text_of(model, out.tokens);
            }
            std::cout << j.dump() << '\n';
            return 0;
        }
        const bool words = std::holds_alternative<bigram_model>(model);
        const std::vector<token_id> shown(prompt.begin() + (words ? 1 : 0), prompt.end());  // not the sentence start
        std::cout << text_of(model, shown) << " | " << text_of(model, out.tokens) << '\n';
        std::cout << "(" << out.tokens.size() << " tokens, stop reason: " << xsampler::to_string(out.reason)
                  << (out.reason == xsampler::stop_reason::max_tokens ? " — truncated" : "") << ")\n";
        return 0;
    }

    inline int run_beam(const decode_options& o)
    {
        loaded input = load_model(o);  // not a structured binding: clang 14 lambdas cannot capture those
        auto& model = input.model;
        auto& prompt = input.prompt;
        xsampler::beam_options b;
        b.beam_width = o.beam_width;
        b.max_tokens = o.max_tokens;
        b.eos = eos_ids(o);
        b.length_penalty = o.length_penalty;
        b.n_best = o.n_best;
        const auto found = std::visit([&](auto& m) { return xsampler::beam_search(m, prompt, b); }, model);
        if (o.json)
        {
            nlohmann::json j;
            j["hypotheses"] = nlohmann::json::array();
            for (const auto& h : found)
            {
                nlohmann::json one = {{"tokens", h.tokens}, {"logprob", h.logprob}, {"score", h.score}, {"finished", h.finished}};
                if (std::holds_alternative<bigram_model>(model))
                {
                    one["text"] = text_of(model, h.tokens);
                }
                j["hypotheses"].push_back(one);
            }
            std::cout << j.dump() << '\n';
            return 0;
        }
        for (const auto& h : found)
        {
            std::printf("%10.3g%%  %s%s\n", 100.0 * std::exp(h.logprob), text_of(model, h.tokens).c_str(),
                        h.finished ? "" : "  (unfinished: max tokens)");
        }
        return 0;
    }

    inline int run_vote(const decode_options& o, xsampler::sampler& s)
    {
        if (o.n < 1)
        {
            throw std::invalid_argument("-n: must be >= 1, got " + std::to_string(o.n));
        }
        loaded input = load_model(o);  // not a structured binding: clang 14 lambdas cannot capture those
        auto& model = input.model;
        auto& prompt = input.prompt;
        xsampler::generate_options g;
        g.max_tokens = o.max_tokens;
        g.eos = eos_ids(o);
        const auto complete = [&](xsampler::philox4x32& rng) {
            return std::visit([&](auto& m) { return xsampler::generate(m, prompt, s, g, rng).tokens; }, model);
        };
        const auto r = xsampler::self_consistency(std::size_t(o.n), o.seed, complete);
        if (o.json)
        {
            nlohmann::json j = {{"answer", r.answer},        {"text", text_of(model, r.answer)},
                                {"votes", r.votes},          {"n", r.total},
                                {"agreement", r.agreement},  {"distinct", r.distinct}};
            if (r.runner_up)
            {
                j["runner_up"] = *r.runner_up;
                j["runner_up_votes"] = r.runner_up_votes;
            }
            std::cout << j.dump() << '\n';
            return 0;
        }
        std::printf("majority: %s\n", text_of(model, r.answer).c_str());
        std::printf("votes %zu of %zu, agreement %.0f%%, %zu distinct answers\n", r.votes, r.total, 100.0 * r.agreement,
                    r.distinct);
        if (r.runner_up)
        {
            std::printf("runner-up (%zu votes): %s\n", r.runner_up_votes, text_of(model, *r.runner_up).c_str());
        }
        return 0;
    }
}

#endif
