// The `xsampler` command-line tool: the library's samplers on a row of logits
// read from an .npy file, and decoding over two toy models.
//
//   xsampler dist   ROW [stage flags] [--svg FILE [--svg-scale linear|log] [--svg-bars N]]
//   xsampler sample ROW [stage flags] --seed S [-n N] [--counts]
//   xsampler generate MODEL --eos ID --seed S --max-tokens N [--min-tokens N]
//                   [--stop-seq "ID ID ..."]... [--top-logprobs N] [stage flags] [--json]
//   xsampler beam   MODEL --eos ID --beam-width B --max-tokens N [--n-best K]
//                   [--length-penalty A] [--json]
//   xsampler vote   MODEL --eos ID -n N --seed S [--max-tokens N] [stage flags] [--json]
//   xsampler speculate MODEL --seed S --max-tokens N [--draft-order M (1)] [--draft-tokens K (4)]
//                   [--rule standard|greedy|typical] [--stop TEXT] [stage flags] [--json]
//                   (the n-gram model only: --order N the target, M the draft)
//   xsampler match  (--grammar json | --grammar-file F.gbnf | --json-schema F | --regex RE)
//                   (--text T | --text-file F): accepted (exit 0), incomplete or
//                   rejected at byte N in rule R (exit 1)
//   generate's constraints: the same grammar flags, and --budget-aware
//   MODEL: --transitions T.npy --bos ID | --corpus FILE --prompt TEXT [--rank R]
//          | --corpus FILE --tokenizer gpt2 [--tokenizer-dir DIR] [--order N] [--prompt TEXT]
//          (an n-gram model over GPT-2 ids; --eos defaults to 50256; generate --stop TEXT
//          ends at a text)
//   ROW:   --logits FILE.npy [--row I] | MODEL (the next-token row after its prompt)
//
//   MODEL may take its prompt as ids instead: --history "ID ..." (generate, beam, vote).
//
// Stage flags, named as llama.cpp names them: --temp T, --top-k K, --top-p P,
// --min-p M, --samplers "top_k;top_p;min_p;temperature" (the order), and the
// processors' (tool_options.hpp): --history "ID ..." [--prompt-tokens N]
// (dist, sample), --repeat-penalty, --repeat-last-n, --presence-penalty,
// --frequency-penalty, --penalty-scope window|output, --logit-bias ID=BIAS,
// --no-repeat-ngram N, --bad-words "ID ID;ID", --allow, --ban, --dry-*;
// generate also --ignore-eos; XTC: --xtc-probability P, --xtc-threshold T
// (dist takes --seed for its coin); mirostat: --mirostat 1|2,
// --mirostat-tau T, --mirostat-eta E. Any bad input exits non-zero with one
// line on stderr.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <xtensor/xview.hpp>

#include <xsampler/xsampler.hpp>

#include "decode_commands.hpp"
#include "request_command.hpp"
#include "speculate_command.hpp"
#include "npy_matrix.hpp"
#include "svg_plot.hpp"
#include "tool_options.hpp"

namespace
{
    using tool::tool_options;

    // A token's name in the output: its word (the corpus model), else nothing.
    using word_of = std::function<std::string(xsampler::token_id)>;

    void print_distribution(const xsampler::distribution& d, const word_of& word)
    {
        for (std::size_t i = 0; i < d.ids.size(); ++i)
        {
            if (d.probs[i] > 0.0)
            {
                std::printf("%d\t%#.12g%s\n", int(d.ids[i]), d.probs[i],
                            word ? ("\t" + word(d.ids[i])).c_str() : "");
            }
        }
    }

    template <class Row>
    void print_samples(xsampler::sampler& s, const Row& row, const xsampler::token_history& history,
                       const tool_options& o)
    {
        std::map<xsampler::token_id, std::int64_t> counts;
        for (std::int64_t i = 0; i < o.n; ++i)
        {
            const auto id = s.sample(row, history).id;
            if (o.counts)
            {
                ++counts[id];
            }
            else
            {
                std::printf("%d\n", int(id));
            }
        }
        std::vector<std::pair<xsampler::token_id, std::int64_t>> sorted(counts.begin(), counts.end());
        std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
        for (const auto& [id, count] : sorted)
        {
            std::printf("%d\t%lld\n", int(id), static_cast<long long>(count));
        }
    }

    // f(row, history, word) on the --row of the --logits file, in the file's own dtype, or on
    // a model's next-token row after its prompt (the history: the prompt; word: the corpus
    // model's words, else empty).
    template <class F>
    void with_row(const tool_options& o, F&& f)
    {
        const bool model = !o.transitions.empty() || !o.corpus.empty();
        if (model && !o.logits.empty())
        {
            throw std::invalid_argument("--logits: give the row once: --logits FILE.npy or a model, not both");
        }
        if (!model)
        {
            if (o.logits.empty())
            {
                throw std::invalid_argument("give a row: --logits FILE.npy [--row I], or a model: --corpus FILE "
                                            "--prompt TEXT | --transitions T.npy --bos ID");
            }
            const auto logits = tool::load_npy_matrix(o.logits, o.bf16);
            if (o.row >= logits.rows())
            {
                throw std::out_of_range("--row " + std::to_string(o.row) + " is out of range: '" + o.logits +
                                        "' has " + std::to_string(logits.rows()) + " row(s)");
            }
            std::visit([&](const auto& m) { f(xt::view(m, o.row, xt::all()), tool::history_of(o), word_of{}); },
                       logits.values);
            return;
        }
        const tool::loaded input = tool::load_model(o);
        const xsampler::token_history history(
            input.prompt, o.prompt_tokens < 0 ? input.prompt.size() : std::size_t(o.prompt_tokens));
        std::visit(
            [&](const auto& m) {
                word_of word;
                if constexpr (std::is_same_v<std::decay_t<decltype(m)>, tool::bigram_model>)
                {
                    word = [&m](xsampler::token_id id) { return m.word(id); };
                }
                if constexpr (std::is_same_v<std::decay_t<decltype(m)>, tool::ngram_model>)
                {
                    word = [&m](xsampler::token_id id) {
                        // the token's bytes as a JSON string: a newline or a partial UTF-8 character stays on one line
                        return nlohmann::json(m.decode({id})).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
                    };
                }
                f(m(xsampler::token_span(input.prompt)), history, word);
            },
            input.model);
    }

    // Where the row came from, for the picture's heading.
    std::string source_of(const tool_options& o)
    {
        if (!o.corpus.empty() && !o.tokenizer.empty())
        {
            return std::to_string(o.order) + "-gram GPT-2 model of '" + std::filesystem::path(o.corpus).filename().string() +
                   "', the token after " + (o.history.empty() ? "\"" + o.prompt + "\"" : std::string("the --history ids"));
        }
        if (!o.corpus.empty())
        {
            return "bigram model of '" + std::filesystem::path(o.corpus).filename().string() + "', the word after " +
                   (o.prompt.empty() ? std::string("the --history ids") : "\"" + o.prompt + "\"");
        }
        if (!o.transitions.empty())
        {
            return "Markov model '" + std::filesystem::path(o.transitions).filename().string() + "'";
        }
        return "'" + std::filesystem::path(o.logits).filename().string() + "' row " + std::to_string(o.row);
    }

    // Writes `text` to `path`; a failure is one line naming the flag, the path and the reason.
    void write_file(const std::string& path, const std::string& text, const std::string& flag)
    {
        errno = 0;
        std::ofstream out(path, std::ios::binary);
        if (out)
        {
            out << text;
            out.close();
        }
        if (!out)
        {
            const std::string reason = errno != 0 ? std::string(": ") + std::strerror(errno) : "";
            throw std::runtime_error(flag + ": cannot write '" + tool::detail::echo(path) + "'" + reason);
        }
    }

    // One line on stderr, whatever the message holds.
    int fail(std::string message, int status)
    {
        std::replace(message.begin(), message.end(), '\n', ' ');
        std::cerr << "xsampler: error: " << message << '\n';
        return status;
    }
}

int main(int argc, char** argv)
{
    CLI::App app{"xsampler: sample the next token from a row of logits"};
    app.require_subcommand(1);
    tool_options o;
    // Each subcommand runs from its callback, inside app.parse, once every flag is parsed and
    // checked. The sampler is built first: it validates every parameter before a file is read.
    auto* dist = app.add_subcommand("dist", "print the final distribution: ID<TAB>PROB, most probable first");
    tool::add_row_flags(*dist, o);
    tool::add_integer(*dist, "--seed", o.params.seed, std::uint64_t(0), UINT64_MAX,
                          "seed of the engine XTC's coin is drawn from (default 0)");
    tool::add_svg_flags(*dist, o);
    dist->callback([&o] {
        auto s = tool::make_sampler(o);
        with_row(o, [&](const auto& row, const xsampler::token_history& history, const word_of& word) {
            if (!o.svg.empty())
            {
                auto rng = s.engine();  // a copy: the listing below draws the same coins
                auto figure = tool::svg::trace_figure(
                    s, row, history, o.svg_bars, [&](xsampler::token_id id) { return word ? word(id) : std::to_string(id); },
                    rng);
                figure.source = source_of(o);
                figure.log_scale = o.svg_log;
                write_file(o.svg, tool::svg::render(figure), "--svg");
            }
            print_distribution(s.final_distribution(row, history, s.engine()), word);
        });
    });

    auto* sample = app.add_subcommand("sample", "print N sampled ids, one a line");
    tool::add_row_flags(*sample, o);
    tool::add_seed(*sample, o, "seed of the philox4x32 engine");
    tool::add_n(*sample, o, "number of samples (default 1)");
    sample->add_flag("--counts", o.counts, "print ID<TAB>COUNT lines instead, most frequent first");
    sample->callback([&o] {
        auto s = tool::make_sampler(o);
        with_row(o, [&](const auto& row, const xsampler::token_history& history, const word_of&) {
            print_samples(s, row, history, o);
        });
    });

    auto* generate = app.add_subcommand("generate", "decode a sequence from a model, with its stop reason");
    tool::add_model_flags(*generate, o);
    tool::add_stage_flags(*generate, o);
    // --seed and --max-tokens: required without --request (checked in the callback)
    tool::add_seed(*generate, o, "seed of the philox4x32 engine (with --request: of a request without a seed, default 0)")
        ->required(false);
    tool::add_max_tokens(*generate, o.generate.max_tokens, 0, "stop after N tokens (stop reason max_tokens)");
    tool::add_integer(*generate, "--min-tokens", o.generate.min_tokens, std::size_t(0), tool::limits::tokens,
                          "no eos or stop sequence before N tokens (default 0), at most 10^6");
    tool::add_stop_seq(*generate, o);
    tool::add_stop_strings(*generate, o);
    tool::add_constraint_flags(*generate, o);
    generate->add_flag("--ignore-eos", o.generate.ignore_eos, "mask the eos ids at every step (llama.cpp's)");
    tool::add_integer(*generate, "--top-logprobs", o.generate.top_logprobs, std::size_t(0),
                          std::size_t(tool::limits::token_id),
                          "report the N most probable tokens at each step, N <= the vocabulary");
    tool::add_request_flags(*generate, o);
    generate->callback([&o, generate] {
        tool::check_request_flags(*generate);
        if (o.request)
        {
            tool::check_model_given(o);  // before --eos: what is missing first
        }
        tool::default_eos(o);
        if (o.request)
        {
            tool::run_request(o);
            return;
        }
        for (const char* flag : {"--seed", "--max-tokens"})
        {
            if (generate->count(flag) == 0)
            {
                throw std::invalid_argument(std::string(flag) + " is required");
            }
        }
        tool::make_sampler(o);  // the parameters are checked before the model is read
        tool::run_generate(o);
    });

    int status = 0;
    auto* match = app.add_subcommand(
        "match", "whether a text is in a grammar's language: accepted, incomplete or rejected at byte N");
    tool::add_constraint_flags(*match, o, false);
    tool::add_text_flags(*match, o);
    match->callback([&o, &status] { status = tool::run_match(o); });

    auto* beam = app.add_subcommand("beam", "beam search: the best sequences with their probabilities");
    tool::add_model_flags(*beam, o);
    tool::add_history(*beam, o);
    tool::add_integer(*beam, "--beam-width", o.beam.beam_width, std::size_t(1), tool::limits::beam_width,
                          "beams kept at each step, at most 1024")
        ->required();
    tool::add_max_tokens(*beam, o.beam.max_tokens, 1, "longest sequence")->required();
    tool::add_integer(*beam, "--n-best", o.beam.n_best, std::size_t(1), tool::limits::beam_width,
                          "sequences to return, <= beam width (default 1)");
    tool::add_real(*beam, "--length-penalty", o.beam.length_penalty, "score = logprob / length^A (default 1)");
    beam->callback([&o] {
        tool::default_eos(o);
        tool::run_beam(o);
    });

    auto* speculate = app.add_subcommand(
        "speculate", "speculative decoding: the n-gram model at a lower order drafts, the target verifies");
    tool::add_model_flags(*speculate, o);
    tool::add_stage_flags(*speculate, o);
    tool::add_seed(*speculate, o, "seed: the target's philox4x32 stream 0, the draft's stream 1");
    tool::add_max_tokens(*speculate, o.generate.max_tokens, 0, "stop after N tokens (stop reason max_tokens)")
        ->required();
    tool::add_integer(*speculate, "--draft-order", o.speculate.draft_order, std::size_t(1), tool::limits::order,
                      "the draft model's order, at most 16 (default 1)");
    tool::add_integer(*speculate, "--draft-tokens", o.speculate.draft_tokens, std::size_t(1), std::size_t(64),
                      "draft tokens per target pass, at most 64 (default 4)");
    speculate->add_option("--rule", o.speculate.rule, "verification: standard, greedy or typical (default standard)");
    tool::add_stop_strings(*speculate, o);
    speculate->callback([&o] {
        tool::check_speculate_model(o);
        tool::default_eos(o);
        tool::make_sampler(o);  // the parameters are checked before the models are read
        tool::run_speculate(o);
    });

    auto* vote = app.add_subcommand("vote", "self-consistency: N samples and their majority");
    tool::add_model_flags(*vote, o);
    tool::add_stage_flags(*vote, o);
    tool::add_n(*vote, o, "number of samples")->required();
    tool::add_seed(*vote, o, "seed; sample i uses philox4x32(seed, i)");
    o.generate.max_tokens = 32;  // vote's default; generate requires the flag, so it never sees this one
    tool::add_max_tokens(*vote, o.generate.max_tokens, 0, "longest completion (default 32)");
    vote->callback([&o] {
        tool::default_eos(o);
        auto s = tool::make_sampler(o);
        tool::run_vote(o, s);
    });

    try
    {
        app.parse(argc, argv);
        return status;
    }
    catch (const CLI::CallForHelp& e)
    {
        return app.exit(e);
    }
    catch (const CLI::ParseError& e)
    {
        return fail(e.what(), 2);
    }
    catch (const std::exception& e)
    {
        return fail(e.what(), 1);
    }
}
