// The `xsampler` tool's options: one struct that holds the library's own
// parameter structs, and one function per flag (or per group of flags that
// always go together) that binds it to its field. Every subcommand that takes
// a flag calls the same function, so a flag is defined, and checked, once.
//
//   params    sampling_params   --temp --top-k --top-p --min-p --seed
//   generate  generate_options  --max-tokens (generate, vote) --min-tokens
//                               --stop-seq --top-logprobs --eos
//   beam      beam_options      --max-tokens (beam) --beam-width --n-best
//                               --length-penalty --eos
//   the rest: what only the tool has (the logits file and row, the model's
//   source, -n, --counts, --json, the --samplers text).
#ifndef XSAMPLER_EXAMPLES_TOOL_OPTIONS_HPP
#define XSAMPLER_EXAMPLES_TOOL_OPTIONS_HPP

#include <charconv>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <xsampler/xsampler.hpp>

namespace examples
{
    struct tool_options
    {
        xsampler::sampling_params params;
        xsampler::generate_options generate;
        xsampler::beam_options beam;
        std::string samplers;  // the stage order as typed; make_sampler parses it into params.order
        // dist, sample
        std::string logits;
        std::size_t row = 0;
        std::int64_t n = 1;  // also vote's
        bool counts = false;
        // generate, beam, vote: the model
        std::string transitions;
        std::int64_t bos = -1;
        std::string corpus;
        std::string prompt;
        std::size_t rank = 0;
        bool json = false;
    };

    inline void add_stage_flags(CLI::App& cmd, tool_options& o)
    {
        cmd.add_option("--temp", o.params.temperature, "temperature T >= 0; 0 is greedy (default 1)");
        cmd.add_option("--top-k", o.params.top_k, "keep the K most probable tokens; 0 disables (default 0)");
        cmd.add_option("--top-p", o.params.top_p, "keep the smallest set with mass >= P, in (0, 1] (default 1)");
        cmd.add_option("--min-p", o.params.min_p, "keep p >= M * p_max, M in [0, 1] (default 0)");
        cmd.add_option("--samplers", o.samplers,
                       "stage order, ';'-separated (default \"temperature;top_k;top_p;min_p\")");
    }

    inline CLI::Option* add_seed(CLI::App& cmd, tool_options& o, const std::string& help)
    {
        return cmd.add_option("--seed", o.params.seed, help)->required();
    }

    inline CLI::Option* add_n(CLI::App& cmd, tool_options& o, const std::string& help)
    {
        // Not CLI::PositiveNumber: its message does not say what is allowed in the tool's words.
        const CLI::Validator at_least_one(
            [](std::string& text) -> std::string {
                std::int64_t n = 0;
                const auto end = text.data() + text.size();
                const auto [last, error] = std::from_chars(text.data(), end, n);
                if (error == std::errc{} && last == end && n < 1)
                {
                    return "must be >= 1, got " + text;
                }
                return {};  // a count, or not a number: the conversion says so
            },
            ">= 1");
        return cmd.add_option("-n", o.n, help)->check(at_least_one);
    }

    inline CLI::Option* add_max_tokens(CLI::App& cmd, std::size_t& max_tokens, const std::string& help)
    {
        return cmd.add_option("--max-tokens", max_tokens, help);
    }

    inline void add_row_flags(CLI::App& cmd, tool_options& o)
    {
        cmd.add_option("--logits", o.logits, "float32/float64 .npy file, [vocab] or [batch, vocab]")->required();
        cmd.add_option("--row", o.row, "row of a [batch, vocab] file (default 0)");
        add_stage_flags(cmd, o);
    }

    // "ID ID ..." -> the ids; a word that is not a token id is a parse error.
    inline std::vector<xsampler::token_id> parse_token_ids(const std::string& text, const std::string& flag)
    {
        std::istringstream in(text);
        std::vector<xsampler::token_id> ids;
        for (std::string word; in >> word;)
        {
            xsampler::token_id id = -1;
            const auto end = word.data() + word.size();
            const auto [last, error] = std::from_chars(word.data(), end, id);
            if (error != std::errc{} || last != end || id < 0)
            {
                throw CLI::ValidationError(flag, "'" + word + "' is not a token id");
            }
            ids.push_back(id);
        }
        return ids;
    }

    inline void add_stop_seq(CLI::App& cmd, tool_options& o)
    {
        cmd.add_option_function<std::vector<std::string>>(
            "--stop-seq",
            [&o](const std::vector<std::string>& texts) {
                std::vector<std::vector<xsampler::token_id>> seqs;
                for (const auto& text : texts)
                {
                    seqs.push_back(parse_token_ids(text, "--stop-seq"));
                }
                o.generate.stop_sequences = std::move(seqs);
            },
            "a stop sequence of token ids, \"ID ID ...\" (repeatable)");
    }

    inline void add_model_flags(CLI::App& cmd, tool_options& o)
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
        // One list for generate, vote and beam: the flag writes it into both option structs.
        cmd.add_option_function<std::vector<xsampler::token_id>>(
               "--eos",
               [&o](const std::vector<xsampler::token_id>& ids) {
                   o.generate.eos = ids;
                   o.beam.eos = ids;
               },
               "stop token id(s)")
            ->required()
            ->expected(1, 64);
        cmd.add_flag("--json", o.json, "print JSON");
    }

    // The sampler of the parameters (it validates every one of them).
    inline xsampler::sampler make_sampler(const tool_options& o)
    {
        xsampler::sampling_params p = o.params;
        if (!o.samplers.empty())
        {
            p.order = xsampler::parse_stage_order(o.samplers);
        }
        return xsampler::sampler(p);
    }
}

#endif
