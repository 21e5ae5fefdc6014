// The `xsampler` command-line tool: the library's samplers on a row of logits
// read from an .npy file, and decoding over two toy models.
//
//   xsampler dist   --logits FILE.npy [--row I] [stage flags]
//   xsampler sample --logits FILE.npy [--row I] [stage flags] --seed S [-n N] [--counts]
//   xsampler generate MODEL --eos ID --seed S --max-tokens N [--min-tokens N]
//                   [--stop-seq "ID ID ..."]... [--top-logprobs N] [stage flags] [--json]
//   xsampler beam   MODEL --eos ID --beam-width B --max-tokens N [--n-best K]
//                   [--length-penalty A] [--json]
//   xsampler vote   MODEL --eos ID -n N --seed S [--max-tokens N] [stage flags] [--json]
//   MODEL: --transitions T.npy --bos ID | --corpus FILE --prompt TEXT [--rank R]
//
// Stage flags, named as llama.cpp names them: --temp T, --top-k K, --top-p P,
// --min-p M, --samplers "top_k;top_p;min_p;temperature" (the order). Any bad
// input exits non-zero with one line on stderr.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <xtensor/xview.hpp>

#include <xsampler/xsampler.hpp>

#include "decode_commands.hpp"
#include "npy_matrix.hpp"

namespace
{
    struct options
    {
        std::string logits;
        std::size_t row = 0;
        xsampler::sampling_params params;
        std::string samplers;
        std::uint64_t seed = 0;
        std::int64_t n = 1;
        bool counts = false;
        examples::decode_options decode;
    };

    void add_stage_flags(CLI::App& cmd, options& o)
    {
        cmd.add_option("--temp", o.params.temperature, "temperature T >= 0; 0 is greedy (default 1)");
        cmd.add_option("--top-k", o.params.top_k, "keep the K most probable tokens; 0 disables (default 0)");
        cmd.add_option("--top-p", o.params.top_p, "keep the smallest set with mass >= P, in (0, 1] (default 1)");
        cmd.add_option("--min-p", o.params.min_p, "keep p >= M * p_max, M in [0, 1] (default 0)");
        cmd.add_option("--samplers", o.samplers,
                       "stage order, ';'-separated (default \"temperature;top_k;top_p;min_p\")");
    }

    void add_row_flags(CLI::App& cmd, options& o)
    {
        cmd.add_option("--logits", o.logits, "float32/float64 .npy file, [vocab] or [batch, vocab]")->required();
        cmd.add_option("--row", o.row, "row of a [batch, vocab] file (default 0)");
        add_stage_flags(cmd, o);
    }

    void print_distribution(const xsampler::distribution& d)
    {
        for (std::size_t i = 0; i < d.ids.size(); ++i)
        {
            if (d.probs[i] > 0.0)
            {
                std::printf("%d\t%#.12g\n", int(d.ids[i]), d.probs[i]);
            }
        }
    }

    template <class Row>
    void print_samples(xsampler::sampler& s, const Row& row, const options& o)
    {
        std::map<xsampler::token_id, std::int64_t> counts;
        for (std::int64_t i = 0; i < o.n; ++i)
        {
            const auto id = s.sample(row, {}).id;
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

    // One line on stderr, whatever the message holds.
    int fail(std::string message, int status)
    {
        std::replace(message.begin(), message.end(), '\n', ' ');
        std::cerr << "xsampler: error: " << message << '\n';
        return status;
    }

    int run(const std::string& command, options& o)
    {
        if (!o.samplers.empty())
        {
            o.params.order = xsampler::parse_stage_order(o.samplers);
        }
        o.params.seed = o.seed;
        xsampler::sampler s(o.params);  // validates every parameter before the file is read
        if (command == "generate")
        {
            return examples::run_generate(o.decode, s);
        }
        if (command == "beam")
        {
            return examples::run_beam(o.decode);
        }
        if (command == "vote")
        {
            return examples::run_vote(o.decode, s);
        }
        if (o.n < 1)
        {
            throw xsampler::invalid_parameter("-n: must be >= 1, got " + std::to_string(o.n));
        }
        const auto logits = examples::load_npy_matrix(o.logits);
        if (o.row >= logits.rows())
        {
            throw std::out_of_range("--row " + std::to_string(o.row) + " is out of range: '" + o.logits + "' has " +
                                    std::to_string(logits.rows()) + " row(s)");
        }
        std::visit(
            [&](const auto& m) {
                const auto row = xt::view(m, o.row, xt::all());
                if (command == "dist")
                {
                    print_distribution(s.final_distribution(row));
                }
                else
                {
                    print_samples(s, row, o);
                }
            },
            logits.values);
        return 0;
    }
}

int main(int argc, char** argv)
{
    CLI::App app{"xsampler: sample the next token from a row of logits"};
    app.require_subcommand(1);
    options o;
    auto* dist = app.add_subcommand("dist", "print the final distribution: ID<TAB>PROB, most probable first");
    add_row_flags(*dist, o);
    auto* sample = app.add_subcommand("sample", "print N sampled ids, one a line");
    add_row_flags(*sample, o);
    sample->add_option("--seed", o.seed, "seed of the philox4x32 engine")->required();
    sample->add_option("-n", o.n, "number of samples (default 1)");
    sample->add_flag("--counts", o.counts, "print ID<TAB>COUNT lines instead, most frequent first");

    auto& d = o.decode;
    auto* generate = app.add_subcommand("generate", "decode a sequence from a model, with its stop reason");
    examples::add_model_flags(*generate, d);
    add_stage_flags(*generate, o);
    generate->add_option("--seed", d.seed, "seed of the philox4x32 engine")->required();
    generate->add_option("--max-tokens", d.max_tokens, "stop after N tokens (stop reason max_tokens)")->required();
    generate->add_option("--min-tokens", d.min_tokens, "no eos or stop sequence before N tokens (default 0)");
    generate->add_option("--stop-seq", d.stop_seqs, "a stop sequence of token ids, \"ID ID ...\" (repeatable)");
    generate->add_option("--top-logprobs", d.top_logprobs, "report the N most probable tokens at each step");

    auto* beam = app.add_subcommand("beam", "beam search: the best sequences with their probabilities");
    examples::add_model_flags(*beam, d);
    beam->add_option("--beam-width", d.beam_width, "beams kept at each step")->required()->check(CLI::PositiveNumber);
    beam->add_option("--max-tokens", d.max_tokens, "longest sequence")->required()->check(CLI::PositiveNumber);
    beam->add_option("--n-best", d.n_best, "sequences to return, <= beam width (default 1)");
    beam->add_option("--length-penalty", d.length_penalty, "score = logprob / length^A (default 1)");

    auto* vote = app.add_subcommand("vote", "self-consistency: N samples and their majority");
    examples::add_model_flags(*vote, d);
    add_stage_flags(*vote, o);
    vote->add_option("-n", d.n, "number of samples")->required();
    vote->add_option("--seed", d.seed, "seed; sample i uses philox4x32(seed, i)")->required();
    d.max_tokens = 32;
    vote->add_option("--max-tokens", d.max_tokens, "longest completion (default 32)");

    try
    {
        app.parse(argc, argv);
    }
    catch (const CLI::CallForHelp& e)
    {
        return app.exit(e);
    }
    catch (const CLI::ParseError& e)
    {
        return fail(e.what(), 2);
    }
    try
    {
        for (const auto* cmd : {dist, sample, generate, beam, vote})
        {
            if (cmd->parsed())
            {
                return run(cmd->get_name(), o);
            }
        }
        return fail("no subcommand", 2);
    }
    catch (const std::exception& e)
    {
        return fail(e.what(), 1);
    }
}
