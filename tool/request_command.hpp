// The `xsampler` tool's generate --request FILE.json [--stream] [--request-dialect openai|llama]:
// a completion request (request.hpp) run over the tool's model and answered as OpenAI's
// /v1/completions answers: choices (text, finish_reason, logprobs), usage; with --stream (or
// "stream": true) one JSON object a line per token, as the API's streamed chunks.
#ifndef XSAMPLER_TOOL_REQUEST_COMMAND_HPP
#define XSAMPLER_TOOL_REQUEST_COMMAND_HPP

#include <algorithm>
#include <cmath>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <xtensor/xview.hpp>

#include <xsampler/request.hpp>
#include <xsampler/xsampler.hpp>

#include "decode_commands.hpp"

namespace tool
{
    inline void add_request_flags(CLI::App& cmd, tool_options& o)
    {
        cmd.add_option("--request", o.request,
                       "a completion request (JSON, OpenAI's / vLLM's fields or llama.cpp's): the prompt, the "
                       "sampling parameters and the stops; the answer is OpenAI's completion object");
        cmd.add_flag("--stream", o.stream, "with --request: one JSON object a line per token, as the API streams");
        cmd.add_option("--request-dialect", o.request_dialect, "with --request: openai (default) or llama")
            ->check(CLI::IsMember({"openai", "llama"}));
    }

    /// With --request the request is the prompt and the parameters: only the model's flags,
    /// --eos, --seed (a request's without one) and the request's own flags may be given.
    inline void check_request_flags(const CLI::App& cmd)
    {
        if (cmd.count("--request") == 0)
        {
            for (const char* name : {"--stream", "--request-dialect"})
            {
                if (cmd.count(name) > 0)
                {
                    throw std::invalid_argument(std::string(name) + " goes with --request");
                }
            }
            return;
        }
        static const std::vector<std::string> allowed = {
            "--request", "--stream", "--request-dialect", "--transitions", "--corpus", "--tokenizer",
            "--tokenizer-dir", "--order", "--rank", "--eos", "--seed"};
        for (const auto* opt : cmd.get_options())
        {
            const std::string name = opt->get_name();
            if (opt->count() > 0 && std::find(allowed.begin(), allowed.end(), name) == allowed.end())
            {
                throw std::invalid_argument(name + ": the request gives it (with --request give only the model, "
                                                   "--eos, --seed, --stream and --request-dialect)");
            }
        }
    }

    /// What a request cannot say, from the model: its vocabulary (GPT-2's bytes and index for
    /// the n-gram model; a size for the others), the eos ids, and text to ids (no document or
    /// sentence start: the request's prompt is what it says).
    inline xsampler::request_context request_context_of(const tool_options& o, const any_model& model)
    {
        xsampler::request_context c;
        c.vocab_size = vocab_of(model);
        c.eos = o.generate.eos;
        c.max_tokens = limits::tokens;
        c.seed = o.params.seed;
        if (const auto* m = std::get_if<ngram_model>(&model))
        {
            xsampler::vocabulary v = m->tokenizer().vocab();
            const bool special = std::all_of(o.generate.eos.begin(), o.generate.eos.end(),
                                             [&](xsampler::token_id id) { return v.special(id); });
            if (special)
            {
                v.set_eos(o.generate.eos);  // a constraint ends on the ids the loop stops on
            }  // else a constraint is refused: it would end on another id than the loop
            c.index = std::make_shared<const xsampler::vocabulary_index>(
                std::make_shared<const xsampler::vocabulary>(std::move(v)));
            c.encode = [m](const std::string& text) { return m->tokenizer().encode(text); };
        }
        else if (const auto* words = std::get_if<bigram_model>(&model))
        {
            c.encode = [words](const std::string& text) {
                try
                {
                    auto ids = words->encode(text);
                    ids.erase(ids.begin());  // the sentence start
                    return ids;
                }
                catch (const std::invalid_argument& e)  // "--prompt: the word 'x' is not in the corpus"
                {
                    const std::string what = e.what();
                    const std::size_t colon = what.find(": ");
                    throw std::invalid_argument(colon == std::string::npos ? what : what.substr(colon + 2));
                }
            };
        }
        return c;
    }

    inline const char* api_finish_reason(xsampler::finish_reason r)
    {
        switch (r)
        {
        case xsampler::finish_reason::length:
            return "length";
        case xsampler::finish_reason::cancelled:
            return "abort";
        default:
            return "stop";
        }
    }

    /// One choice as it is generated: its sequence and the log-probs the response shows
    /// (kept only for the whole answer: a stream prints them as they come).
    struct request_choice
    {
        xsampler::sequence seq;
        nlohmann::ordered_json tokens = nlohmann::ordered_json::array(), token_logprobs = nlohmann::ordered_json::array(),
                               top_logprobs = nlohmann::ordered_json::array(),
                               text_offset = nlohmann::ordered_json::array();
        std::size_t offset = 0;  // bytes of the tokens so far
    };

    /// A string as the JSON output shows it: invalid UTF-8 (a token that splits a character)
    /// replaced by U+FFFD.
    inline std::string shown_text(const std::string& bytes)
    {
        const std::string quoted = nlohmann::ordered_json(bytes).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
        return nlohmann::ordered_json::parse(quoted).get<std::string>();
    }

    /// A token as the response names it: its bytes as shown (GPT-2), its word, or "token_id:N".
    inline std::string token_name(const any_model& model, xsampler::token_id id)
    {
        if (const auto* m = std::get_if<ngram_model>(&model))
        {
            return shown_text(m->tokenizer().vocab().bytes(id));
        }
        if (const auto* words = std::get_if<bigram_model>(&model))
        {
            return words->decode({id});
        }
        return "token_id:" + std::to_string(id);
    }

    /// The log-probabilities of a token and its alternatives as the completion API shows them;
    /// alternatives with one name (bytes that show as the same text) keep the first, the most probable.
    inline nlohmann::ordered_json top_object(const any_model& model, xsampler::span<const xsampler::sampled_token> top)
    {
        nlohmann::ordered_json object = nlohmann::ordered_json::object();
        for (const auto& t : top)
        {
            const std::string name = token_name(model, t.id);
            if (!object.contains(name))
            {
                object[name] = nlohmann::ordered_json(json_number(t.logprob));
            }
        }
        return object;
    }

    /// The step's log-probs in the completion API's form: the model's (vLLM's default) or the
    /// drawn distribution's, as the request asks.
    inline nlohmann::ordered_json step_logprobs(const any_model& model, const xsampler::completion_request& r,
                                                const xsampler::step_result& s, request_choice& c, bool keep)
    {
        const std::string name = token_name(model, s.id);
        const bool raw = r.options.top_source == xsampler::logprob_source::raw;
        const nlohmann::ordered_json lp = nlohmann::ordered_json(json_number(raw ? s.raw_logprob : s.logprob));
        const nlohmann::ordered_json top = top_object(model, s.top);
        const std::size_t offset = c.offset;
        if (const auto* m = std::get_if<ngram_model>(&model))  // the bytes, not the name as shown
        {
            c.offset += m->tokenizer().vocab().bytes(s.id).size();
        }
        if (keep)
        {
            c.tokens.push_back(name);
            c.token_logprobs.push_back(lp);
            c.top_logprobs.push_back(top);
            c.text_offset.push_back(offset);
        }
        return {{"tokens", {name}}, {"token_logprobs", {lp}}, {"top_logprobs", {top}}, {"text_offset", {offset}}};
    }

    /// The choice's text: the sequence's (decoded over GPT-2's bytes), or the tokens' words or
    /// ids separated by spaces, without an eos that ended it.
    inline std::string choice_text(const any_model& model, const xsampler::sequence& seq)
    {
        if (std::holds_alternative<ngram_model>(model))
        {
            return seq.text();
        }
        auto g = seq.generated();
        const std::size_t shown = g.size() - (seq.reason() == xsampler::finish_reason::eos ? 1 : 0);
        return text_of(model, std::vector<xsampler::token_id>(g.begin(), g.begin() + std::ptrdiff_t(shown)));
    }

    /// A step's text for a stream: the safe delta (GPT-2), else the token's word or id after a
    /// space (none for the first, and nothing for an eos that ends the choice).
    inline std::string step_text(const any_model& model, const xsampler::sequence& seq, const xsampler::step_result& s)
    {
        if (std::holds_alternative<ngram_model>(model))
        {
            return std::string(s.text);
        }
        if (s.finish == xsampler::finish_reason::eos)
        {
            return "";
        }
        return (seq.generated().size() > 1 ? " " : "") + text_of(model, {s.id});
    }

    /// vLLM's prompt_logprobs: each prompt token after the first with its log-probability under
    /// the model and the top-n alternatives (the first: null).
    inline nlohmann::ordered_json prompt_logprobs_of(const any_model& model, const xsampler::completion_request& r)
    {
        const std::size_t n = r.prompt.size(), vocab = vocab_of(model);
        xt::xtensor<double, 2> rows = xt::empty<double>({n - 1, vocab});
        for (std::size_t i = 1; i < n; ++i)
        {
            std::visit([&](const auto& m) {
                xt::view(rows, i - 1, xt::all()) = m(xsampler::token_span(r.prompt).subspan(0, i));
            }, model);
        }
        nlohmann::ordered_json out = nlohmann::ordered_json::array();
        for (const auto& entry : xsampler::prompt_logprobs(rows, r.prompt, *r.prompt_logprobs))
        {
            if (std::isnan(entry.logprob))
            {
                out.push_back(nullptr);
                continue;
            }
            nlohmann::ordered_json one = {{token_name(model, entry.id), json_number(entry.logprob)}};
            const nlohmann::ordered_json top = top_object(model, entry.top);  // (items() of a temporary dangles)
            for (const auto& [name, logprob] : top.items())
            {
                if (!one.contains(name))
                {
                    one[name] = logprob;
                }
            }
            out.push_back(one);
        }
        return out;
    }

    /// One JSON line, its members in the API's order (token bytes may split a character:
    /// replaced, as generate --json does).
    inline std::string dumped_line(const nlohmann::ordered_json& j)
    {
        return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    }

    inline void run_request(const tool_options& o)
    {
        const any_model model = model_of(o);
        check_ids(o, vocab_of(model));
        const auto dialect = o.request_dialect == "llama" ? xsampler::request_dialect::llama
                                                          : xsampler::request_dialect::openai;
        // --stream is "stream": true in the request (its checks: best_of, prompt_logprobs, stream_options)
        auto json = xsampler::detail::parse_request_text(read_text_file(*o.request, std::size_t(16) << 20, "16 MiB"));
        if (o.stream && json.is_object())
        {
            json["stream"] = true;
        }
        auto r = xsampler::parse_request(json, request_context_of(o, model), dialect);
        const bool stream = r.stream;
        if (r.best_of > r.n)
        {
            r.options.raw_logprob = true;  // best_of ranks by the model's log-probabilities
        }
        const xsampler::sequence first(xsampler::sampler(r.params), r.prompt, r.options);
        std::vector<request_choice> choices;
        for (std::size_t i = 0; i < r.best_of; ++i)
        {
            choices.push_back({first.fork(i)});
        }
        const nlohmann::ordered_json head = {{"object", "text_completion"}, {"model", r.model}};
        // Each step: every running choice one token, in index order (a chunk each when streaming).
        for (bool running = true; running;)
        {
            running = false;
            for (std::size_t i = 0; i < choices.size(); ++i)
            {
                auto& c = choices[i];
                if (c.seq.finished())
                {
                    continue;
                }
                const auto& s = std::visit([&](const auto& m) -> const xsampler::step_result& {
                    return c.seq.step(m(c.seq.history().tokens()));
                }, model);
                running = running || !c.seq.finished();
                nlohmann::ordered_json lp = r.logprobs ? step_logprobs(model, r, s, c, !stream) : nlohmann::ordered_json();
                if (stream)
                {
                    nlohmann::ordered_json chunk = head;
                    chunk["choices"] = {{{"index", i},
                                         {"text", step_text(model, c.seq, s)},
                                         {"logprobs", lp},
                                         {"finish_reason", c.seq.finished() ? nlohmann::ordered_json(api_finish_reason(c.seq.reason()))
                                                                            : nlohmann::ordered_json()}}};
                    std::cout << dumped_line(chunk) << '\n';
                }
            }
        }
        // best_of: the n of the highest cumulative raw log-probability, ties to the lower index.
        std::vector<std::size_t> rank(choices.size());
        std::iota(rank.begin(), rank.end(), std::size_t(0));
        std::stable_sort(rank.begin(), rank.end(), [&](std::size_t a, std::size_t b) {
            return choices[a].seq.cumulative_logprob() > choices[b].seq.cumulative_logprob();
        });
        rank.resize(r.n);
        if (r.best_of == r.n)
        {
            std::sort(rank.begin(), rank.end());
        }
        std::size_t completion_tokens = 0;  // of the choices returned, as vLLM counts
        for (const auto i : rank)
        {
            completion_tokens += choices[i].seq.generated().size();
        }
        const nlohmann::ordered_json usage = {{"prompt_tokens", r.prompt.size()},
                                      {"completion_tokens", completion_tokens},
                                      {"total_tokens", r.prompt.size() + completion_tokens}};
        if (stream)
        {
            if (r.include_usage)
            {
                nlohmann::ordered_json last = head;
                last["choices"] = nlohmann::ordered_json::array();
                last["usage"] = usage;
                std::cout << dumped_line(last) << '\n';
            }
            return;
        }
        nlohmann::ordered_json out = head;
        out["choices"] = nlohmann::ordered_json::array();
        const nlohmann::ordered_json prompt_lp = r.prompt_logprobs ? prompt_logprobs_of(model, r) : nlohmann::ordered_json();
        for (std::size_t j = 0; j < rank.size(); ++j)
        {
            const auto& c = choices[rank[j]];
            nlohmann::ordered_json choice = {{"index", j},
                                             {"text", choice_text(model, c.seq)},
                                             {"logprobs", nlohmann::ordered_json()},
                                             {"finish_reason", api_finish_reason(c.seq.reason())}};
            if (r.logprobs)
            {
                choice["logprobs"] = {{"tokens", c.tokens},
                                      {"token_logprobs", c.token_logprobs},
                                      {"top_logprobs", c.top_logprobs},
                                      {"text_offset", c.text_offset}};
            }
            if (r.prompt_logprobs)
            {
                choice["prompt_logprobs"] = prompt_lp;
            }
            out["choices"].push_back(choice);
        }
        out["usage"] = usage;
        std::cout << dumped_line(out) << '\n';
    }
}

#endif
