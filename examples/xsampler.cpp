// The `xsampler` command-line tool: the library's samplers on a row of logits
// read from an .npy file.
//
//   xsampler dist   --logits FILE.npy [--row I] [stage flags]
//   xsampler sample --logits FILE.npy [--row I] [stage flags] --seed S [-n N] [--counts]
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
    };

    void add_row_flags(CLI::App& cmd, options& o)
    {
        cmd.add_option("--logits", o.logits, "float32/float64 .npy file, [vocab] or [batch, vocab]")->required();
        cmd.add_option("--row", o.row, "row of a [batch, vocab] file (default 0)");
        cmd.add_option("--temp", o.params.temperature, "temperature T >= 0; 0 is greedy (default 1)");
        cmd.add_option("--top-k", o.params.top_k, "keep the K most probable tokens; 0 disables (default 0)");
        cmd.add_option("--top-p", o.params.top_p, "keep the smallest set with mass >= P, in (0, 1] (default 1)");
        cmd.add_option("--min-p", o.params.min_p, "keep p >= M * p_max, M in [0, 1] (default 0)");
        cmd.add_option("--samplers", o.samplers,
                       "stage order, ';'-separated (default \"temperature;top_k;top_p;min_p\")");
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
        return run(dist->parsed() ? "dist" : "sample", o);
    }
    catch (const std::exception& e)
    {
        return fail(e.what(), 1);
    }
}
