// The `xsampler` tool: its output contract, checked against the library, and
// one clear line on stderr for every kind of bad input.
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <xsampler/request.hpp>
#include <xtensor/xnpy.hpp>
#include <xtensor/xview.hpp>

#include "../tool/tokenizer.hpp"

#include "../tool/ngram_model.hpp"
#include "../tool/svg_plot.hpp"
#include "../tool/table_model.hpp"
#include "helpers.hpp"

#ifdef XSAMPLER_CLI

using namespace xsampler;
using test_helpers::inf;

namespace
{
    struct result
    {
        int status;
        std::string out;
        std::string err;
    };

    std::string dir()
    {
        // One folder per process: ctest runs test cases in parallel processes.
        static const std::string d = [] {
            const std::string folder = std::string(XSAMPLER_TEST_DIR) + "/" + std::to_string(getpid());
            std::filesystem::create_directories(folder);
            return folder;
        }();
        return d;
    }

    std::string path(const std::string& name) { return dir() + "/" + name; }

    // The tool with `args`, run by /bin/sh after `prefix` ("ulimit -v N;", "cat FILE |").
    result run(const std::string& args, const std::string& prefix = "")
    {
        const std::string err_file = path("stderr.txt");
        const std::string cmd = prefix + " '" + XSAMPLER_CLI + "' " + args + " 2>'" + err_file + "'";
        FILE* pipe = popen(cmd.c_str(), "r");
        REQUIRE(pipe != nullptr);
        std::string out;
        char buf[4096];
        for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;)
        {
            out.append(buf, n);
        }
        const int status = pclose(pipe);
        std::ifstream err_in(err_file);
        std::stringstream err;
        err << err_in.rdbuf();
        return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out, err.str()};
    }

    std::vector<std::string> lines(const std::string& text)
    {
        std::vector<std::string> v;
        std::istringstream in(text);
        for (std::string line; std::getline(in, line);)
        {
            v.push_back(line);
        }
        return v;
    }

    std::string write_bytes(const std::string& name, const std::string& bytes)
    {
        std::ofstream(path(name), std::ios::binary) << bytes;
        return path(name);
    }

    // An npy file whose header is `dict` (version 1, padded to 64 bytes, '\n'), then `data`.
    std::string npy_bytes(const std::string& dict, const std::string& data)
    {
        const std::string header = dict + std::string((64 - (10 + dict.size() + 1) % 64) % 64, ' ') + "\n";
        std::string bytes("\x93NUMPY\x01\x00", 8);
        bytes += char(header.size() & 0xff);
        bytes += char(header.size() >> 8);
        return bytes + header + data;
    }

    std::string f4_bytes(const std::vector<float>& v)
    {
        return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
    }

    // A prefix for run(): the tool under a virtual-memory limit of `kb`, reading `input` from a
    // pipe if given (OpenBLAS starts no threads: under the limit it would spin creating them).
    std::string memory_limit(std::size_t kb, const std::string& input = "")
    {
        return "ulimit -v " + std::to_string(kb) + "; " + (input.empty() ? "" : "cat '" + input + "' | ") +
               "OPENBLAS_NUM_THREADS=1";
    }

    // Whether the tool starts at all under the limit (it needs about 50 MB of virtual memory,
    // most of it OpenBLAS; a sanitizer's shadow memory needs terabytes).
    bool runs_under(const std::string& limit)
    {
        const auto tiny = write_bytes("tiny.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }",
                                                            f4_bytes({0.0f})));
        if (run("dist --logits " + tiny, limit).status == 0)
        {
            return true;
        }
        WARN("the tool does not start under `" << limit << "` (a sanitizer build?): memory checks skipped");
        return false;
    }

    template <class E>
    std::string write_npy(const std::string& name, const E& e)
    {
        xt::dump_npy(path(name), e);
        return path(name);
    }

    std::size_t significant_digits(std::string s)
    {
        s = s.substr(0, s.find('e'));
        s.erase(std::remove(s.begin(), s.end(), '.'), s.end());
        s.erase(0, s.find_first_not_of('0'));
        return s.size();
    }

    // The tool's dist output must be the library's final distribution.
    template <class Row>
    void check_dist(const std::string& args, const Row& logits, const sampling_params& params,
                    const token_history& history = {})
    {
        const auto r = run("dist " + args);
        INFO(args << "\n" << r.err);
        REQUIRE(r.status == 0);
        CHECK(r.err.empty());
        sampler s(params);
        const auto want = s.final_distribution(logits, history, s.engine());  // as the tool: XTC's coin
        std::vector<std::pair<token_id, double>> nonzero;
        for (std::size_t i = 0; i < want.ids.size(); ++i)
        {
            if (want.probs[i] > 0.0)
            {
                nonzero.emplace_back(want.ids[i], want.probs[i]);
            }
        }
        const auto got = lines(r.out);
        REQUIRE(got.size() == nonzero.size());
        for (std::size_t i = 0; i < got.size(); ++i)
        {
            const auto tab = got[i].find('\t');
            REQUIRE(tab != std::string::npos);
            CHECK(std::stoi(got[i].substr(0, tab)) == nonzero[i].first);
            const std::string prob = got[i].substr(tab + 1);
            CHECK(significant_digits(prob) >= 9);
            CHECK_THAT(std::stod(prob), Catch::Matchers::WithinRel(nonzero[i].second, 1e-11));
        }
    }

    void check_error(const std::string& args, const std::string& expected_part, const std::string& prefix = "")
    {
        const auto r = run(args, prefix);
        INFO(prefix << " " << args << "\nstderr: " << r.err);
        CHECK(r.status != 0);
        CHECK(r.status < 128);  // an exit, never a signal
        CHECK(r.out.empty());
        CHECK(lines(r.err).size() == 1);
        CHECK(r.err.size() <= 300);  // short: no value printed in full (DBL_MAX has 309 digits)
        CHECK(r.err.rfind("xsampler: error: ", 0) == 0);
        CHECK(r.err.find(expected_part) != std::string::npos);
    }
}

TEST_CASE("xsampler dist prints the library's final distribution", "[cli]")
{
    auto logits = test_helpers::random_row<float>(300, 31, 2.0, true, 0.2);
    const auto file = write_npy("row.npy", logits);
    sampling_params p;
    check_dist("--logits " + file, logits, p);

    p.temperature = 0.7;
    p.top_k = 40;
    p.top_p = 0.9;
    check_dist("--logits " + file + " --temp 0.7 --top-k 40 --top-p 0.9", logits, p);

    p = sampling_params{};
    p.min_p = 0.1;
    p.temperature = 1.5;
    p.order = parse_stage_order("min_p;temperature");
    check_dist("--logits " + file + " --min-p 0.1 --temp 1.5 --samplers 'min_p;temperature'", logits, p);

    p = sampling_params{};
    p.temperature = 0.0;
    const auto greedy_out = run("dist --logits " + file + " --temp 0");
    CHECK(greedy_out.out == std::to_string(greedy(logits)) + "\t1.00000000000\n");

    const auto hand = write_npy("hand.npy", test_helpers::logits_of<double>({0.1, 0.2, 0.3, 0.4}));
    CHECK(run("dist --logits " + hand + " --top-p 0.7").out == "3\t0.571428571429\n2\t0.428571428571\n");
}

TEST_CASE("xsampler reads float64, 2-D files by --row, and Fortran order", "[cli]")
{
    xt::xtensor<double, 2> batch = xt::zeros<double>({3, 200});
    for (std::size_t r = 0; r < 3; ++r)
    {
        xt::view(batch, r, xt::all()) = test_helpers::random_row<double>(200, 40 + r);
    }
    const auto file = write_npy("batch.npy", batch);
    sampling_params p;
    p.top_p = 0.8;
    check_dist("--logits " + file + " --row 2 --top-p 0.8", xt::xtensor<double, 1>(xt::view(batch, 2, xt::all())), p);
    check_dist("--logits " + file + " --top-p 0.8", xt::xtensor<double, 1>(xt::view(batch, 0, xt::all())), p);

    xt::xtensor<float, 2, xt::layout_type::column_major> fortran = xt::cast<float>(batch);
    const auto ffile = write_npy("fortran.npy", fortran);
    check_dist("--logits " + ffile + " --row 1 --top-p 0.8",
               xt::xtensor<float, 1>(xt::cast<float>(xt::view(batch, 1, xt::all()))), p);
}

TEST_CASE("xsampler reads float16 ('<f2') and bfloat16's bits ('<u2') as the float rows of their values", "[cli]")
{
    const auto source = test_helpers::random_row<float>(300, 33, 2.0, false, 0.1);
    std::string f2, u2;
    xt::xtensor<float, 1> from_f2 = source, from_u2 = source;
    for (std::size_t i = 0; i < source.size(); ++i)
    {
        const f16 h(source(i));
        const bf16 g(source(i));
        from_f2(i) = h;
        from_u2(i) = g;
        f2 += std::string{char(h.bits & 0xff), char(h.bits >> 8)};
        u2 += std::string{char(g.bits & 0xff), char(g.bits >> 8)};
    }
    const auto half = write_bytes("half.npy", npy_bytes("{'descr': '<f2', 'fortran_order': False, 'shape': (300,), }", f2));
    const auto brain =
        write_bytes("brain.npy", npy_bytes("{'descr': '<u2', 'fortran_order': False, 'shape': (2, 150), }", u2));
    sampling_params p;
    p.temperature = 0.8;
    p.top_p = 0.9;
    check_dist("--logits " + half + " --temp 0.8 --top-p 0.9", from_f2, p);
    check_dist("--logits " + brain + " --bf16 --row 1 --temp 0.8 --top-p 0.9",
               xt::xtensor<float, 1>(xt::view(from_u2, xt::range(150, 300))), p);
    check_error("dist --logits " + brain, "dtype '<u2': if these are bfloat16 bits, give --bf16");
    check_error("dist --logits " + half + " --bf16", "--bf16 reads bfloat16 bits, dtype '<u2'; the file's dtype is '<f2'");
    const auto i2 =
        write_bytes("i2.npy", npy_bytes("{'descr': '<i2', 'fortran_order': False, 'shape': (150,), }", u2.substr(0, 300)));
    check_error("dist --logits " + i2,
                "dtype '<i2' is not float32 ('<f4'), float64 ('<f8'), float16 ('<f2') or bfloat16's bits ('<u2' with --bf16)");
    const auto short_half =
        write_bytes("short_half.npy", npy_bytes("{'descr': '<f2', 'fortran_order': False, 'shape': (301,), }", f2));
    check_error("dist --logits " + short_half, "truncated npy data");
}

TEST_CASE("xsampler sample prints the library's draws and --counts tallies them", "[cli]")
{
    const auto logits = test_helpers::random_row<float>(500, 32);
    const auto file = write_npy("sample.npy", logits);
    const auto r = run("sample --logits " + file + " --seed 5 -n 25 --temp 0.8 --top-k 10");
    REQUIRE(r.status == 0);
    sampling_params p;
    p.temperature = 0.8;
    p.top_k = 10;
    p.seed = 5;
    sampler s(p);
    std::string want;
    std::map<token_id, int> tally;
    for (int i = 0; i < 25; ++i)
    {
        const auto id = s.sample(logits, {}).id;
        want += std::to_string(id) + "\n";
        ++tally[id];
    }
    CHECK(r.out == want);
    CHECK(run("sample --logits " + file + " --seed 5 --temp 0.8 --top-k 10").out == lines(want)[0] + "\n");

    const auto counted = run("sample --logits " + file + " --seed 5 -n 25 --temp 0.8 --top-k 10 --counts");
    REQUIRE(counted.status == 0);
    int total = 0;
    int previous = 1 << 30;
    for (const auto& line : lines(counted.out))
    {
        const auto tab = line.find('\t');
        const token_id id = std::stoi(line.substr(0, tab));
        const int count = std::stoi(line.substr(tab + 1));
        CHECK(count == tally[id]);
        CHECK(count <= previous);
        previous = count;
        total += count;
    }
    CHECK(total == 25);
}

TEST_CASE("xsampler: every bad input is one line on stderr and a non-zero exit", "[cli][errors]")
{
    const auto good = write_npy("good.npy", test_helpers::row<float>({0.0, 1.0, 2.0}));
    const auto nan = write_npy("nan.npy", test_helpers::row<float>({0.0, std::nan(""), 2.0}));
    const auto pinf = write_npy("inf.npy", test_helpers::row<double>({0.0, inf}));
    const auto masked = write_npy("masked.npy", test_helpers::row<float>({-inf, -inf}));
    const auto empty = write_npy("empty.npy", xt::xtensor<float, 1>(xt::empty<float>({0})));
    const auto ints = write_npy("ints.npy", xt::xtensor<int, 1>{1, 2, 3});
    const auto rank3 = write_npy("rank3.npy", xt::xtensor<float, 3>(xt::zeros<float>({2, 2, 2})));
    const auto scalar = write_npy("scalar.npy", xt::xtensor<float, 0>(1.0f));
    std::ifstream in(good, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto truncated_data = write_bytes("truncated_data.npy", bytes.substr(0, bytes.size() - 3));
    const auto truncated_header = write_bytes("truncated_header.npy", bytes.substr(0, 40));
    const auto garbage = write_bytes("garbage.npy", "this is not an npy file at all");
    std::string bad_header = bytes;
    bad_header.replace(bad_header.find("'descr'"), 7, "'dascr'");
    const auto corrupt = write_bytes("corrupt.npy", bad_header);
    std::string no_header = bytes.substr(0, 8) + std::string("\0\0", 2);
    const auto zero_header = write_bytes("zero_header.npy", no_header);

    check_error("dist --logits " + path("missing.npy"), "cannot open");
    check_error("dist --logits " + nan, "NaN at index 1");
    check_error("dist --logits " + pinf, "+inf at index 1");
    check_error("dist --logits " + masked, "every token is masked");
    check_error("dist --logits " + empty, "the row is empty");
    check_error("dist --logits " + ints, "dtype '<i4'");
    check_error("dist --logits " + rank3, "got 3-D");
    check_error("dist --logits " + scalar, "got 0-D");
    check_error("dist --logits " + truncated_data, "truncated npy data");
    check_error("dist --logits " + truncated_header, "truncated npy header");
    check_error("dist --logits " + garbage, "not an npy file");
    check_error("dist --logits " + corrupt, "corrupt npy header");
    check_error("dist --logits " + zero_header, "truncated npy header");
    check_error("dist --logits " + good + " --row 1", "--row 1 is out of range");
    check_error("dist --logits " + good + " --top-p 0", "top_p: p must be in (0, 1], got 0");
    check_error("dist --logits " + good + " --top-p 1.5", "top_p: p must be in (0, 1], got 1.5");
    check_error("dist --logits " + good + " --temp -1", "temperature: T must be finite and >= 0, got -1");
    check_error("dist --logits " + good + " --temp nan", "temperature");
    check_error("dist --logits " + good + " --top-k -3", "top_k: k must be >= 0");
    check_error("dist --logits " + good + " --min-p 2", "min_p: m must be in [0, 1], got 2");
    check_error("dist --logits " + good + " --samplers 'top_k;nucleus'", "unknown sampler 'nucleus'");
    check_error("dist --logits " + good + " --temp 0.5 --samplers top_k", "temperature is set but not in the sampler order");
    check_error("dist --logits " + good + " --top-p abc", "--top-p");
    check_error("dist --logits " + good + " --row -1", "--row");
    check_error("dist --logits " + good + " --bogus", "bogus");
    check_error("dist", "give a row: --logits FILE.npy");
    check_error("sample --logits " + good, "--seed is required");
    check_error("sample --logits " + good + " --seed 1 -n 0", "-n: must be >= 1, got 0");
    check_error("", "subcommand");
}

TEST_CASE("xsampler's processor flags give the library's processors", "[cli][processors]")
{
    auto logits = test_helpers::random_row<float>(300, 32, 2.0, false, 0.1);
    logits(7) = 1.0f;
    logits(11) = 2.0f;
    const auto file = write_npy("row_processors.npy", logits);
    const std::vector<token_id> h = {5, 6, 7, 5, 11, 5};
    sampling_params p;
    p.repeat_penalty = 1.3;
    p.presence_penalty = 0.4;
    p.frequency_penalty = 0.2;
    p.repeat_last_n = 4;
    p.penalty_scope = penalty_scope::output;
    p.logit_bias = {{3, 2.0}, {4, -inf}, {9, -1.5}};
    p.sequence_bias = {{{5, 8}, 1.5}, {{7}, -0.5}, {{6, 5, 9}, 3.0}};
    p.no_repeat_ngram_size = 2;
    p.bad_words = {{6, 7}, {12}};
    p.banned_token_ids = {20, 21};
    p.top_k = 50;
    check_dist("--logits " + file + " --history '5 6 7 5 11 5' --prompt-tokens 2 --penalty-scope output "
               "--repeat-penalty 1.3 --presence-penalty 0.4 --frequency-penalty 0.2 --repeat-last-n 4 "
               "--logit-bias 3=2 --logit-bias 4-inf --logit-bias 9-1.5 --sequence-bias '5 8=1.5' "
               "--sequence-bias 7=-0.5 --sequence-bias '6 5 9=3' --no-repeat-ngram 2 --bad-words '6 7;12' "
               "--ban '20 21' --top-k 50",
               logits, p, token_history(h, 2));
    // llama.cpp's --samplers list names penalties; the bias still runs, first.
    p = sampling_params{};
    p.repeat_penalty = 1.5;
    p.logit_bias = {{3, 2.0}};
    p.top_k = 10;
    p.temperature = 0.5;
    p.order = {"logit_bias", "no_repeat_ngram", "bad_words", "token_mask", "penalties", "top_k", "temperature"};
    check_dist("--logits " + file + " --history '3 3 8' --repeat-penalty 1.5 --logit-bias 3+2 --top-k 10 --temp 0.5 "
               "--samplers 'penalties;top_k;temperature'",
               logits, p, std::vector<token_id>{3, 3, 8});
    // An allow list.
    p = sampling_params{};
    p.allowed_token_ids = {1, 2, 3, 250};
    check_dist("--logits " + file + " --allow '1 2 3 250'", logits, p);
    // Bad values: one line naming the flag or the processor.
    const std::string dist = "dist --logits " + file + " ";
    check_error(dist + "--logit-bias 3", "--logit-bias: '3' is not ID=BIAS, ID+BIAS or ID-BIAS");
    check_error(dist + "--logit-bias 3=", "--logit-bias: '3=' has no bias");
    check_error(dist + "--logit-bias x=1", "--logit-bias: 'x' is not a decimal integer");
    check_error(dist + "--logit-bias 300=1", "logit_bias: token id 300 is outside the vocabulary of 300");
    check_error(dist + "--logit-bias 3=inf", "logit_bias: the bias of token 3 must be finite or -inf, got inf");
    check_error(dist + "--penalty-scope all", "--penalty-scope: must be window or output, got 'all'");
    check_error(dist + "--repeat-penalty 0", "penalties: repeat_penalty must be finite and > 0, got 0");
    check_error(dist + "--repeat-last-n -2", "--repeat-last-n: must be >= -1");
    check_error(dist + "--history '1 x'", "--history: 'x' is not a token id");
    check_error(dist + "--history '1 300' --repeat-penalty 2",
                "penalties: history id 300 at position 1 is outside the vocabulary of 300");
    check_error(dist + "--history '1 2' --prompt-tokens 3", "--prompt-tokens: 3 exceeds the 2 ids of --history");
    check_error(dist + "--bad-words '1;'", "bad_words: a sequence is empty");
    check_error(dist + "--sequence-bias '1 2'", "--sequence-bias: '1 2' is not \"ID ...=BIAS\"");
    check_error(dist + "--sequence-bias =1", "sequence_bias: sequence 0 is empty");
    check_error(dist + "--sequence-bias '1 300=1'", "sequence_bias: token id 300 is outside the vocabulary of 300");
    check_error(dist + "--allow 4 --ban 4", "token_mask: every token is masked");
    check_error(dist + "--repeat-penalty 2 --samplers 'top_k'", "penalties is set but not in the sampler order");
}

TEST_CASE("xsampler's XTC and mirostat flags give the library's stages", "[cli][xtc][mirostat]")
{
    const auto logits = test_helpers::random_row<float>(400, 41, 2.5);
    const auto file = write_npy("row_xtc.npy", logits);
    sampling_params p;
    p.xtc_probability = 0.7;
    p.xtc_threshold = 0.05;
    for (const std::uint64_t seed : {0, 1, 2, 3, 4, 5})
    {
        p.seed = seed;
        check_dist("--logits " + file + " --xtc-probability 0.7 --xtc-threshold 0.05 --seed " + std::to_string(seed),
                   logits, p);
    }
    // sample: the coin and the draw from the same engine, as the library's sampler draws.
    p = sampling_params{};
    p.mirostat = 2;
    p.mirostat_tau = 3.0;
    p.mirostat_eta = 0.2;
    p.temperature = 0.7;
    p.seed = 9;
    sampler s(p);
    std::string want;
    for (int i = 0; i < 30; ++i)
    {
        want += std::to_string(s.sample(logits, {}).id) + "\n";
    }
    const auto r = run("sample --logits " + file + " --seed 9 -n 30 --temp 0.7 --mirostat 2 --mirostat-tau 3 "
                       "--mirostat-eta 0.2");
    REQUIRE(r.status == 0);
    CHECK(r.out == want);
    const std::string dist = "dist --logits " + file + " ";
    check_error(dist + "--xtc-probability 2", "xtc: probability must be in [0, 1], got 2");
    check_error(dist + "--xtc-threshold -1", "xtc: threshold must be in [0, 1], got -1");
    check_error(dist + "--xtc-probability x", "--xtc-probability");
    check_error(dist + "--mirostat 3", "--mirostat: must be <= 2");
    check_error(dist + "--mirostat 1 --mirostat-tau -2", "mirostat: tau must be finite and >= 0, got -2");
    check_error(dist + "--mirostat 2 --top-k 5", "mirostat: replaces the filters after temperature, but top_k is set");
}

TEST_CASE("xsampler generate --ignore-eos and --history", "[cli][decode][processors]")
{
    const auto t = test_helpers::random_matrix<float>(6, 6, 71);
    const auto file = write_npy("markov_ignore.npy", t);
    const auto r = run("generate --transitions " + file + " --history '2 3' --eos 0 --seed 9 --max-tokens 30 "
                       "--ignore-eos --repeat-penalty 1.2 --json");
    INFO(r.err);
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    sampling_params p;
    p.repeat_penalty = 1.2;
    p.seed = 9;
    sampler s(p);
    generate_options o;
    o.max_tokens = 30;
    o.eos = {0};
    o.ignore_eos = true;
    philox4x32 rng(9);
    const auto want = generate(tool::table_model(t), {2, 3}, s, o, rng);
    CHECK(j.at("tokens").get<std::vector<token_id>>() == want.tokens);
    CHECK(j.at("stop_reason") == "max_tokens");
    CHECK(std::find(want.tokens.begin(), want.tokens.end(), 0) == want.tokens.end());
    check_error("generate --transitions " + file + " --eos 0 --seed 1 --max-tokens 3",
                "--transitions needs a prompt: --bos ID");
    check_error("generate --transitions " + file + " --history '2 9' --eos 0 --seed 1 --max-tokens 3",
                "--history: token id 9 is out of range [0, 6)");
    check_error("generate --transitions " + file + " --history 2 --bos 2 --eos 0 --seed 1 --max-tokens 3",
                "--history is the prompt: give it or --bos / --prompt, not both");
    check_error("generate --transitions " + file + " --bos -1 --eos 0 --seed 1 --max-tokens 3",
                "--bos: token id -1 is out of range [0, 6)");
    // beam takes its prompt as ids too.
    const auto b = run("beam --transitions " + file + " --history '2 3' --eos 0 --beam-width 2 --max-tokens 3 --json");
    INFO(b.err);
    CHECK(b.status == 0);
}

TEST_CASE("xsampler generate --json reports tokens, log-probabilities and the stop reason", "[cli][decode]")
{
    const auto t = test_helpers::random_matrix<float>(6, 6, 70);
    const auto file = write_npy("markov.npy", t);
    const auto r = run("generate --transitions " + file + " --bos 2 --eos 0 --seed 9 --max-tokens 40 --temp 0.8 "
                       "--top-logprobs 2 --json");
    INFO(r.err);
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);

    // The library with the same parameters gives the same result.
    sampling_params p;
    p.temperature = 0.8;
    p.seed = 9;
    sampler s(p);
    philox4x32 rng(9);
    generate_options o;
    o.eos = {0};
    o.max_tokens = 40;
    o.top_logprobs = 2;
    o.model_logprobs = true;
    o.entropy = true;
    const auto want = generate(tool::table_model(xt::cast<double>(t)), {2}, s, o, rng);
    CHECK(j.at("tokens").get<std::vector<token_id>>() == want.tokens);
    CHECK(j.at("logprobs").get<std::vector<double>>() == want.logprobs);
    CHECK(j.at("model_logprobs").get<std::vector<double>>() == want.model_logprobs);
    CHECK(j.at("stop_reason") == to_string(want.reason));
    CHECK(j.at("top_logprobs").size() == want.tokens.size());
    if (want.reason == stop_reason::eos)
    {
        CHECK(want.tokens.back() == 0);
    }

    const auto cut = nlohmann::json::parse(
        run("generate --transitions " + file + " --bos 2 --eos 0 --seed 9 --max-tokens 1 --min-tokens 1 --json").out);
    CHECK(cut.at("stop_reason") == "max_tokens");
    CHECK(cut.at("tokens").size() == 1);
}

TEST_CASE("xsampler beam --json: best first, each with its log-probability", "[cli][decode]")
{
    const auto t = test_helpers::random_matrix<double>(5, 5, 90);
    const auto file = write_npy("markov5.npy", t);
    const auto r = run("beam --transitions " + file + " --bos 1 --eos 0 --beam-width 3 --max-tokens 4 --n-best 3 "
                       "--length-penalty 0.5 --json");
    INFO(r.err);
    REQUIRE(r.status == 0);
    const auto hyps = nlohmann::json::parse(r.out).at("hypotheses");
    beam_options o;
    o.beam_width = 3;
    o.max_tokens = 4;
    o.n_best = 3;
    o.length_penalty = 0.5;
    o.eos = {0};
    const auto want = beam_search(tool::table_model(t), {1}, o);
    REQUIRE(hyps.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i)
    {
        CHECK(hyps[i].at("tokens").get<std::vector<token_id>>() == want[i].tokens);
        CHECK(hyps[i].at("logprob").get<double>() == want[i].logprob);
        CHECK(hyps[i].at("score").get<double>() == want[i].score);
        CHECK(hyps[i].at("finished").get<bool>() == want[i].finished);
    }
    // A score beyond double's range (length^-alpha overflows) is written as
    // the string "-inf": JSON has no infinity, and null would say nothing.
    const auto far = run("beam --transitions " + file + " --bos 1 --eos 0 --beam-width 3 --max-tokens 4 --n-best 3 "
                         "--length-penalty -1e300 --json");
    INFO(far.err);
    REQUIRE(far.status == 0);
    std::size_t overflowed = 0;
    const auto far_hyps = nlohmann::json::parse(far.out).at("hypotheses");
    for (const auto& h : far_hyps)
    {
        if (h.at("tokens").size() > 1)  // length^1e300 overflows; 1^1e300 = 1
        {
            CHECK(h.at("score") == "-inf");
            ++overflowed;
        }
        else
        {
            CHECK(h.at("score").get<double>() == h.at("logprob").get<double>());
        }
    }
    CHECK(overflowed > 0);
}

TEST_CASE("xsampler generate, beam and vote over the bigram word model", "[cli][decode]")
{
    const auto corpus = write_bytes("corpus.txt", "The cat sat. The cat ran. The dog sat.\n%\nA dog ran!\n");
    const auto greedy_text = run("generate --corpus " + corpus + " --prompt 'the' --eos 0 --seed 1 --max-tokens 10 --temp 0");
    INFO(greedy_text.err);
    CHECK(greedy_text.status == 0);
    CHECK(greedy_text.out.rfind("the | cat", 0) == 0);  // 'cat' follows 'the' twice, 'dog' once
    const auto v = nlohmann::json::parse(
        run("vote --corpus " + corpus + " --prompt 'the' --eos 0 -n 30 --seed 4 --max-tokens 5 --json").out);
    CHECK(v.at("n") == 30);
    CHECK(v.at("votes").get<double>() / 30.0 == v.at("agreement").get<double>());
    CHECK(v.at("distinct").get<int>() >= 2);
    const auto b = nlohmann::json::parse(run("beam --corpus " + corpus +
                                             " --prompt 'the' --eos 0 --beam-width 2 --max-tokens 3 --json").out);
    // p(cat | the) = 2/3, p(sat | cat) = 1/2, p(. | sat) = 1: "cat sat ." has probability 1/3.
    CHECK_THAT(std::exp(b.at("hypotheses")[0].at("logprob").get<double>()), Catch::Matchers::WithinAbs(1.0 / 3.0, 1e-12));
    CHECK(run("beam --corpus " + corpus + " --prompt 'the' --eos 0 --beam-width 2 --max-tokens 3 --rank 4 --json").status == 0);
}

TEST_CASE("xsampler generate --tokenizer gpt2: an n-gram model over GPT-2 ids", "[cli][decode][tokenizer]")
{
    const vocabulary gpt2 = load_gpt2_vocabulary(XSAMPLER_GPT2_DIR);
    const auto corpus = write_bytes("gpt2_corpus.txt", "The cat sat on the mat.\nThe dog sat on the log.\n\n"
                                                       "A cat and a dog, friends.\r\nCaf\xc3\xa9 au lait, tr\xc3\xa8s bien! "
                                                       "\xf0\x9f\x8d\xb5\n");
    const std::string gen = "generate --corpus " + corpus + " --tokenizer gpt2 --max-tokens 40 --temp 0.7 ";
    std::set<std::string> texts;
    std::size_t ended = 0;
    for (const std::string prompt : {"", " --prompt 'The dog'"})
    {
        for (int seed = 1; seed <= 6; ++seed)
        {
            const std::string args = gen + "--seed " + std::to_string(seed) + prompt;
            const auto r = run(args + " --json");
            INFO(args << "\nstderr: " << r.err);
            REQUIRE(r.status == 0);
            CHECK(run(args + " --json").out == r.out);  // reproducible for a seed
            const auto j = nlohmann::json::parse(r.out);
            const auto tokens = j.at("tokens").get<std::vector<token_id>>();
            REQUIRE(!tokens.empty());
            for (std::size_t i = 0; i < tokens.size(); ++i)
            {
                REQUIRE(tokens[i] >= 0);
                REQUIRE(tokens[i] < 50257);
                REQUIRE((tokens[i] != 50256 || i + 1 == tokens.size()));  // the eos ends the text
            }
            const std::string text = gpt2.decode(tokens);
            CHECK(j.at("text") == text);
            CHECK(j.at("model_logprobs").size() == tokens.size());
            if (j.at("stop_reason") == "eos")
            {
                CHECK(tokens.back() == 50256);
                ++ended;
            }
            else
            {
                CHECK(j.at("stop_reason") == "max_tokens");
                CHECK(tokens.size() == 40);
            }
            texts.insert(text);
            // The text output: the prompt's text and the continuation, then the count and the reason.
            const auto plain = lines(run(args).out);
            REQUIRE(plain.size() >= 2);
            const std::string shown = (prompt.empty() ? "" : "The dog") + text;
            CHECK(run(args).out.rfind(shown + "\n", 0) == 0);
            CHECK(plain.back() == "(" + std::to_string(tokens.size()) + " tokens, stop reason: " +
                                      j.at("stop_reason").get<std::string>() +
                                      (j.at("stop_reason") == "max_tokens" ? " \u2014 truncated)" : ")"));
        }
    }
    CHECK(ended > 0);
    CHECK(texts.size() > 2);  // the seeds differ

    // --eos replaces 50256: here '.' (13) ends the text.
    const auto dot = nlohmann::json::parse(run(gen + "--seed 3 --eos 13 --prompt 'The cat' --json").out);
    if (dot.at("stop_reason") == "eos")
    {
        CHECK(dot.at("tokens").back() == 13);
    }
    // Every token has a positive probability after any prefix, the never-seen ones included.
    const auto d = run("dist --corpus " + corpus + " --tokenizer gpt2 --prompt 'The'");
    REQUIRE(d.status == 0);
    CHECK(lines(d.out).size() == 50257);
    CHECK(lines(d.out)[0].rfind("3290\t", 0) == 0);  // " dog" ties with " cat" (3797); the lower id first

    check_error("generate --corpus " + corpus + " --tokenizer gpt3 --seed 1 --max-tokens 3",
                "--tokenizer: must be gpt2, got 'gpt3'");
    check_error("generate --tokenizer gpt2 --seed 1 --max-tokens 3", "--tokenizer requires --corpus");
    check_error(gen + "--seed 1 --tokenizer-dir " + path("no_gpt2"), "load_gpt2_vocabulary: '" + path("no_gpt2") + "/encoder.json': cannot open");
    check_error(gen + "--seed 1", "load_gpt2_vocabulary: '" + path("env_gpt2") + "/encoder.json': cannot open",
                "XSAMPLER_GPT2_DIR='" + path("env_gpt2") + "'");
    check_error(gen + "--seed 1 --order 0", "--order: must be >= 1");
    check_error(gen + "--seed 1 --order 17", "--order");
    check_error(gen + "--seed 1 --rank 2", "--rank excludes --tokenizer");
    check_error(gen + "--seed 1 --eos 50257", "--eos: token id 50257 is out of range");
    check_error("generate --corpus " + corpus + " --prompt the --seed 1 --max-tokens 3", "--eos is required");
    check_error("generate --corpus " + write_bytes("blank.txt", "\n\r\n\n") + " --tokenizer gpt2 --seed 1 --max-tokens 3",
                "no text");
}

TEST_CASE("xsampler speculate: a lower-order draft verified by the n-gram target", "[cli][decode][tokenizer][speculative]")
{
    const vocabulary gpt2 = load_gpt2_vocabulary(XSAMPLER_GPT2_DIR);
    const auto corpus = write_bytes("spec_corpus.txt", "The cat sat on the mat.\nThe dog sat on the log.\n\n"
                                                       "A cat and a dog, friends. The cat and the dog sat.\n");
    const std::string model = " --corpus " + corpus + " --tokenizer gpt2 --prompt 'The' ";
    // Greedy: speculation gives generate's tokens, whatever the draft and the rule.
    const auto greedy = nlohmann::json::parse(run("generate" + model + "--temp 0 --seed 1 --max-tokens 30 --json").out);
    for (const std::string rule : {"greedy", "standard"})
    {
        for (const std::string draft : {"1", "2"})
        {
            const std::string args = "speculate" + model + "--temp 0 --seed 1 --max-tokens 30 --draft-order " + draft +
                                     " --draft-tokens 3 --rule " + rule + " --json";
            const auto r = run(args);
            INFO(args << "\nstderr: " << r.err);
            REQUIRE(r.status == 0);
            const auto j = nlohmann::json::parse(r.out);
            CHECK(j.at("tokens") == greedy.at("tokens"));
            CHECK(j.at("stop_reason") == greedy.at("stop_reason"));
            CHECK(j.at("accepted").get<std::size_t>() <= j.at("proposed").get<std::size_t>());
        }
    }
    // The target as its own draft accepts every draft token (a pass cut by
    // --max-tokens drafts only what fits: 24 is no multiple of 5).
    for (int seed = 1; seed <= 4; ++seed)
    {
        const std::string args = "speculate" + model + "--temp 0.8 --top-k 20 --seed " + std::to_string(seed) +
                                 " --max-tokens " + (seed % 2 ? "25" : "24") + " --draft-order 3 --json";
        const auto r = run(args);
        INFO(args << "\nstderr: " << r.err);
        REQUIRE(r.status == 0);
        CHECK(run(args).out == r.out);  // reproducible for a seed
        const auto j = nlohmann::json::parse(r.out);
        CHECK(j.at("accepted") == j.at("proposed"));
        CHECK(j.at("acceptance_rate") == 1.0);
        auto tokens = j.at("tokens").get<std::vector<token_id>>();
        const std::size_t shown = tokens.size() - (j.at("stop_reason") == "eos" ? 1 : 0);  // the eos has no text
        std::vector<token_id> text_tokens(tokens.begin(), tokens.begin() + std::ptrdiff_t(shown));
        CHECK(j.at("text") == gpt2.decode(text_tokens));
        // Five tokens a pass (four drafted, the bonus) but where an eos or the budget ends it.
        CHECK(j.at("target_passes").get<std::size_t>() >= (tokens.size() + 4) / 5);
    }
    // A weaker draft: fewer accepted; the text output ends with the counts.
    const auto weak = run("speculate" + model + "--temp 0.8 --seed 2 --max-tokens 25 --draft-order 1");
    REQUIRE(weak.status == 0);
    const auto shown = lines(weak.out);
    REQUIRE(shown.size() >= 2);
    CHECK(shown.front().rfind("The", 0) == 0);
    CHECK(shown.back().find(" draft tokens, ") != std::string::npos);
    CHECK(shown.back().find(" target passes, ") != std::string::npos);
    check_error("speculate" + model + "--seed 1 --max-tokens 5 --rule best", "--rule: must be standard, greedy or typical, got 'best'");
    check_error("speculate --corpus " + corpus + " --prompt the --seed 1 --max-tokens 5",
                "speculate needs the n-gram model");
    check_error("speculate" + model + "--seed 1 --max-tokens 5 --draft-tokens 0", "--draft-tokens: must be >= 1");
    check_error("speculate" + model + "--seed 1 --max-tokens 5 --draft-order 17", "--draft-order");
}

TEST_CASE("xsampler generate: --json-schema, --grammar, --regex, --budget-aware and --stop", "[cli][decode][constraint]")
{
    const vocabulary gpt2 = load_gpt2_vocabulary(XSAMPLER_GPT2_DIR);
    const auto corpus = write_bytes("people.txt", "{\"name\": \"Ada\", \"age\": 36, \"ok\": true}\n"
                                                  "{\"age\": 41, \"name\": \"Alan Turing\"}\n"
                                                  "{\"ok\": false, \"tags\": [\"math\", \"chess\"], \"name\": \"Grace\"}\n");
    const std::string schema_text =
        R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer"},)"
        R"("ok":{"type":"boolean"},"tags":{"type":"array","items":{"type":"string"},"maxItems":2}},)"
        R"("required":["name","age"],"additionalProperties":false})";
    const auto schema = write_bytes("person.json", schema_text);
    const nlohmann::json parsed_schema = nlohmann::json::parse(schema_text);
    const std::string gen = "generate --corpus " + corpus + " --tokenizer gpt2 --temp 0.9 ";
    std::size_t complete = 0;
    for (int seed = 1; seed <= 8; ++seed)
    {
        const std::string args = gen + "--max-tokens 48 --json-schema " + schema + " --seed " + std::to_string(seed);
        const auto r = run(args + " --json");
        INFO(args << "\nstderr: " << r.err);
        REQUIRE(r.status == 0);
        const auto j = nlohmann::json::parse(r.out);
        const std::string text = j.at("text");
        const auto ids = j.at("tokens").get<std::vector<token_id>>();
        CHECK(text == gpt2.decode(ids));
        if (j.at("stop_reason") == "eos")
        {
            ++complete;
            const auto value = nlohmann::json::parse(text);
            CHECK(value.contains("name"));
            CHECK(value.at("age").is_number_integer());
            for (const auto& kv : value.items())
            {
                CHECK(parsed_schema.at("properties").contains(kv.key()));
            }
        }
        // budget-aware: always complete within the budget
        const auto b = nlohmann::json::parse(run(args + " --budget-aware --json").out);
        CHECK(b.at("stop_reason") == "eos");
        CHECK(b.at("tokens").size() <= 48);
        CHECK_NOTHROW(nlohmann::json::parse(b.at("text").get<std::string>()));
    }
    CHECK(complete > 0);
    // the tightest budget that fits completes; one less is an error before generating
    const auto tight = run(gen + "--seed 2 --json-schema " + schema + " --max-tokens 64 --budget-aware --json");
    REQUIRE(tight.status == 0);
    std::size_t least = 0;
    for (std::size_t n = 4; n < 40 && least == 0; ++n)
    {
        const auto r = run(gen + "--seed 2 --json-schema " + schema + " --budget-aware --json --max-tokens " +
                           std::to_string(n));
        if (r.status == 0)
        {
            least = n;
            const auto j = nlohmann::json::parse(r.out);
            CHECK(j.at("stop_reason") == "eos");
            CHECK(j.at("tokens").size() <= n);
            CHECK_NOTHROW(nlohmann::json::parse(j.at("text").get<std::string>()));
        }
        else
        {
            CHECK_THAT(r.err, Catch::Matchers::Contains("no completion fits in " + std::to_string(n) + " tokens"));
        }
    }
    CHECK(least > 4);
    // any JSON value; a regular expression
    for (int seed = 1; seed <= 4; ++seed)
    {
        const auto j = nlohmann::json::parse(
            run(gen + "--grammar json --budget-aware --max-tokens 30 --json --seed " + std::to_string(seed)).out);
        CHECK(j.at("stop_reason") == "eos");
        CHECK_NOTHROW(nlohmann::json::parse(j.at("text").get<std::string>()));
        const auto re = nlohmann::json::parse(
            run(gen + "--regex '[A-Z][a-z]+( [A-Z][a-z]+)?' --budget-aware --max-tokens 12 --json --seed " +
                std::to_string(seed)).out);
        CHECK(re.at("stop_reason") == "eos");
        CHECK(std::regex_match(re.at("text").get<std::string>(), std::regex("[A-Z][a-z]+( [A-Z][a-z]+)?")));
    }
    // --stop: the text before it is what an API returns; stop_at says where it starts
    const auto stopped = nlohmann::json::parse(run(gen + "--max-tokens 60 --seed 1 --stop '\"' --json").out);
    CHECK(stopped.at("stop_reason") == "stop_sequence");
    CHECK(stopped.at("text").get<std::string>().substr(stopped.at("stop_at").get<std::size_t>(), 1) == "\"");
    check_error(gen + "--seed 1 --max-tokens 9 --json-schema " + write_bytes("bad.json", R"({"type":"array","uniqueItems":true})"),
                "json_schema: unsupported keyword 'uniqueItems' (only items of finite values");
    // a keyword no draft defines: ignored, refused with --json-schema-strict
    const std::string tagged = write_bytes("tagged.json", R"({"type":"boolean","x-kind":1})");
    const auto ignored = nlohmann::json::parse(run(gen + "--seed 1 --max-tokens 9 --json --json-schema " + tagged).out);
    CHECK((ignored.at("text") == "true" || ignored.at("text") == "false"));
    check_error(gen + "--seed 1 --max-tokens 9 --json-schema " + tagged + " --json-schema-strict",
                "json_schema: unknown keyword 'x-kind' (strict) at /");
    check_error(gen + "--seed 1 --max-tokens 9 --grammar yaml", "--grammar: must be json, got 'yaml'");
    check_error(gen + "--seed 1 --max-tokens 9 --grammar json --regex a", "--grammar excludes --regex");
    check_error(gen + "--seed 1 --max-tokens 9 --budget-aware", "--budget-aware needs a constraint");
    check_error(gen + "--seed 1 --max-tokens 9 --regex 'a(?=b)'", "regex: lookahead (?= is not supported, at offset 1");
    check_error("generate --corpus " + corpus + " --prompt name --eos 0 --seed 1 --max-tokens 3 --grammar json",
                "a constraint needs a vocabulary");
    check_error("generate --corpus " + corpus + " --prompt name --eos 0 --seed 1 --max-tokens 3 --stop x",
                "--stop needs a vocabulary");
}

TEST_CASE("xsampler match: accepted, incomplete or rejected at byte N in a rule, and generate --grammar-file",
          "[cli][constraint]")
{
    const auto gbnf = write_bytes("sum.gbnf", "# sums, left-recursive\n"
                                              "root ::= expr\n"
                                              "expr ::= expr \"+\" term | term\n"
                                              "term ::= [0-9]+ | \"(\" expr \")\"\n");
    const auto m = [&](const std::string& args) { return run("match --grammar-file " + gbnf + " " + args); };
    auto r = m("--text '1+(2+3)'");
    CHECK(r.status == 0);
    CHECK(r.out == "accepted\n");
    r = m("--text '1+('");
    CHECK(r.status == 1);
    CHECK(r.out == "incomplete\n");
    r = m("--text '1+)'");
    CHECK(r.status == 1);
    CHECK(r.out == "rejected at byte 2 in rule 'expr'\n");
    r = m("--text-file " + write_bytes("sum.txt", "12+34"));
    CHECK(r.out == "accepted\n");
    CHECK(run("match --grammar json --text '[1, {\"a\": null}]'").out == "accepted\n");
    CHECK(run("match --regex 'a+b' --text aaab").out == "accepted\n");
    CHECK(run("match --regex '' --text ''").out == "accepted\n");  // the empty regex: only the empty text
    CHECK(run("match --regex '' --text x").out == "rejected at byte 0 in rule 'regex'\n");
    CHECK(run("match --json-schema " + write_bytes("n.json", R"({"type":"integer"})") + " --text 12").out == "accepted\n");
    // other keys where additionalProperties allows them, unless --json-schema-listed-keys
    const std::string listed = write_bytes("o.json", R"({"properties":{"a":{"type":"integer"}},"required":["a"]})");
    CHECK(run("match --json-schema " + listed + " --text '{\"b\":[],\"a\":1}'").out == "accepted\n");
    CHECK(run("match --json-schema " + listed + " --json-schema-listed-keys --text '{\"b\":[],\"a\":1}'").out ==
          "rejected at byte 2 in rule 'member'\n");
    check_error("match --grammar-file " + gbnf, "match needs a text");
    check_error("match --text x", "match needs a grammar");
    check_error("match --json-schema '' --text x", "cannot open");
    check_error("match --grammar-file " + write_bytes("bad.gbnf", "root ::= \"a\" undefined-rule\n") + " --text a",
                "undefined-rule");
    check_error("match --grammar-file " + gbnf + " --text 1 --text-file x", "--text excludes --text-file");
    // generate under the GBNF grammar over GPT-2's vocabulary: every eos-ended text matches
    const auto corpus = write_bytes("sums.txt", "1+2\n(3+4)+5\n10+(2+3)\n");
    const std::string gen = "generate --corpus " + corpus + " --tokenizer gpt2 --temp 1 --max-tokens 24 --grammar-file " + gbnf;
    for (int seed = 1; seed <= 4; ++seed)
    {
        const auto j = nlohmann::json::parse(run(gen + " --budget-aware --json --seed " + std::to_string(seed)).out);
        CHECK(j.at("stop_reason") == "eos");
        const std::string text = j.at("text");
        CHECK(run("match --grammar-file " + gbnf + " --text-file " + write_bytes("out.txt", text)).out == "accepted\n");
    }
    // --regex '' generates the empty text, then eos; --json-schema '' is a file that cannot be opened
    const auto empty = nlohmann::json::parse(run(gen.substr(0, gen.find("--grammar-file")) + "--regex '' --json --seed 1").out);
    CHECK(empty.at("text") == "");
    CHECK(empty.at("stop_reason") == "eos");
    check_error(gen.substr(0, gen.find("--grammar-file")) + "--json-schema '' --seed 1", "cannot open");
    // the constraint ends on the loop's eos: an ordinary token as --eos is refused
    check_error(gen + " --eos 11 --seed 1", "--eos 11 with a constraint");
    check_error(gen + " --budget-aware --ignore-eos --seed 1", "--ignore-eos masks eos");
    check_error(gen + " --budget-aware --min-tokens 24 --seed 1", "--min-tokens 24 allows no eos before it");
}

TEST_CASE("xsampler decoding commands: bad input is one line on stderr", "[cli][decode][errors]")
{
    const auto file = write_npy("markov3.npy", xt::xtensor<float, 2>(xt::zeros<float>({3, 3})));
    const auto rect = write_npy("rect.npy", xt::xtensor<float, 2>(xt::zeros<float>({3, 4})));
    const auto corpus = write_bytes("corpus2.txt", "one two. two one.");
    check_error("generate --transitions " + file + " --bos 7 --eos 0 --seed 1 --max-tokens 3", "--bos: token id 7 is out of range");
    check_error("generate --transitions " + file + " --bos 1 --eos 9 --seed 1 --max-tokens 3", "--eos: token id 9");
    check_error("generate --transitions " + rect + " --bos 1 --eos 0 --seed 1 --max-tokens 3", "must be square");
    check_error("generate --transitions " + file + " --bos 1 --eos 0 --seed 1 --max-tokens 3 --stop-seq '1 x'",
                "--stop-seq: 'x' is not a token id");
    check_error("generate --eos 0 --seed 1 --max-tokens 3", "give a model");
    check_error("generate --corpus " + corpus + " --prompt 'three' --eos 0 --seed 1 --max-tokens 3",
                "the word 'three' is not in the corpus");
    check_error("generate --corpus " + path("nope.txt") + " --prompt 'one' --eos 0 --seed 1 --max-tokens 3", "cannot open");
    check_error("generate --transitions " + file + " --bos 1 --eos 0 --seed 1", "--max-tokens is required");
    check_error("beam --transitions " + file + " --bos 1 --eos 0 --beam-width 2 --max-tokens 3 --n-best 3",
                "n_best <= beam_width");
    check_error("beam --corpus " + corpus + " --prompt one --eos 0 --beam-width 2 --max-tokens 3 --rank 99", "--rank");
    check_error("vote --transitions " + file + " --bos 1 --eos 0 -n 0 --seed 1", "-n: must be >= 1");
    check_error("vote --transitions " + file + " --bos 1 --eos 0 -n 3 --seed 1 --top-p 2", "top_p");

    // From token 1 only eos (0) can follow: --min-tokens 1 masks it, and the library says why.
    const auto eos_only = write_npy("eos_only.npy", xt::xtensor<double, 2>{{0.0, 0.0}, {0.0, -inf}});
    check_error("generate --transitions " + eos_only + " --bos 1 --eos 0 --seed 1 --max-tokens 3 --min-tokens 1",
                "min_tokens: every token is masked");
    check_error("generate --transitions " + file + " --bos 1 --eos 0 --seed 1 --max-tokens 3 --stop-seq '1 3'",
                "--stop-seq: token id 3 is out of range [0, 3)");
    check_error("generate --transitions " + file + " --bos 1 --eos 0 --seed 1 --max-tokens 3 --top-logprobs 4",
                "--top-logprobs: must be <= the vocabulary (3), got 4");
}

TEST_CASE("xsampler reads an npy file by its header, and trusts no size in it", "[cli][errors]")
{
    const std::string f4 = "{'descr': '<f4', 'fortran_order': False, 'shape': ";
    const std::string three = f4_bytes({0.0f, 1.0f, 2.0f});
    const auto claims = write_bytes("claims.npy", npy_bytes(f4 + "(100000000000,), }", three));
    const auto overflow = write_bytes("overflow.npy", npy_bytes(f4 + "(4294967296, 4294967296), }", three));
    const auto too_big = write_bytes("too_big.npy", npy_bytes(f4 + "(99999999999999999999999,), }", three));
    const auto text_dim = write_bytes("text_dim.npy", npy_bytes(f4 + "('abc',), }", three));
    const auto real_dim = write_bytes("real_dim.npy", npy_bytes(f4 + "(3.9,), }", three));
    const auto short_data = write_bytes("short_data.npy", npy_bytes(f4 + "(4,), }", three));
    const auto long_header = write_bytes("long_header.npy", npy_bytes(f4 + "(3,), }" + std::string(40000, ' '), three));
    std::string v2 = npy_bytes(f4 + "(3,), }", three);
    v2.replace(6, 4, std::string("\x02\x00\xf0\xff", 4));
    v2.insert(10, "\xff\xff");  // a 4-byte header length of 0xfffffff0
    const auto v2_claims = write_bytes("v2_claims.npy", v2);

    check_dist("--logits " + long_header, test_helpers::row<float>({0.0, 1.0, 2.0}), sampling_params{});
    check_error("dist --logits " + claims, "'" + claims + "': truncated npy data: shape (100000000000,) needs 400000000000 bytes, the file holds 12");
    check_error("dist --logits " + overflow, "'" + overflow + "': npy shape (4294967296, 4294967296) is too large");
    check_error("dist --logits " + too_big, "'" + too_big + "': corrupt npy header: shape: dimension");
    check_error("dist --logits " + text_dim, "'" + text_dim + "': corrupt npy header: shape: 'abc' is not a non-negative integer");
    check_error("dist --logits " + real_dim, "'" + real_dim + "': corrupt npy header: shape: '3.9' is not");
    check_error("dist --logits " + short_data, "'" + short_data + "': truncated npy data: shape (4,) needs 16 bytes, the file holds 12");
    check_error("dist --logits " + v2_claims, "'" + v2_claims + "': truncated npy header");
    check_error("dist --logits " + dir(), "'" + dir() + "': is a directory");

    // Under a memory limit of 120 MB the tool reads a 32 MB file, which it holds once (it held
    // it four times); it never allocates what a header claims, and reads a device or a pipe only
    // as far as the header says.
    const auto limit = memory_limit(120000);
    if (!runs_under(limit))
    {
        return;
    }
    check_error("dist --logits /dev/zero", "'/dev/zero': not an npy file (bad magic)", limit);
    check_error("dist --logits " + claims, "truncated npy data", limit);
    check_error("dist --logits /dev/stdin",
                "'/dev/stdin': truncated npy data: the header declares 400000000000 bytes, the file holds 12",
                memory_limit(120000, claims));
    const auto big = write_bytes("big.npy", npy_bytes(f4 + "(1, 8000000), }", std::string(32000000, '\0')));
    check_error("dist --logits " + big + " --row 1", "--row 1 is out of range: '" + big + "' has 1 row(s)", limit);
    std::filesystem::remove(big);
}

TEST_CASE("xsampler reads numbers in decimal, within documented bounds", "[cli][errors]")
{
    const auto logits = test_helpers::random_row<float>(50, 33);
    const auto file = write_npy("numbers.npy", logits);
    const auto markov = write_npy("numbers6.npy", test_helpers::random_matrix<float>(6, 6, 34));
    const std::string gen = "generate --transitions " + markov + " --bos 1 --eos 0 --seed 1 ";
    const std::string beam = "beam --transitions " + markov + " --bos 1 --eos 0 --max-tokens 3 ";

    // A leading zero is still decimal: 010 is ten, not eight.
    const auto top10 = run("dist --logits " + file + " --top-k 10");
    CHECK(lines(top10.out).size() == 10);
    CHECK(run("dist --logits " + file + " --top-k 010").out == top10.out);
    CHECK(run("sample --logits " + file + " --seed 010 -n 20").out == run("sample --logits " + file + " --seed 10 -n 20").out);
    check_error("dist --logits " + file + " --row 010", "--row 10 is out of range");
    check_error("beam --transitions " + markov + " --bos 010 --eos 0 --beam-width 2 --max-tokens 3",
                "--bos: token id 10 is out of range [0, 6)");

    check_error("dist --logits " + file + " --top-k 0x10", "--top-k: '0x10' is not a decimal integer");
    check_error("dist --logits " + file + " --top-k +3", "--top-k: '+3' is not a decimal integer");
    check_error("dist --logits " + file + " --temp 0x1p3", "--temp: '0x1p3' is not a decimal number");
    check_error("dist --logits " + file + " --temp 1e999", "temperature: T must be finite and >= 0, got inf");
    check_error("sample --logits " + file + " --seed -1", "--seed: must be >= 0, got -1 (allowed: 0 to 18446744073709551615)");
    check_error("sample --logits " + file + " --seed 18446744073709551616", "--seed: must be <= 18446744073709551615");
    check_error("sample --logits " + file + " --seed 1 -n 99999999999999999999", "-n: must be <= 10000000");
    check_error("sample --logits " + file + " --seed 1 -n 10000001", "-n: must be <= 10000000, got 10000001");
    check_error("sample --logits " + file + " --seed 1 -n " + std::string(400, '9'), "-n: must be <= 10000000");
    check_error(gen + "--max-tokens -1", "--max-tokens: must be >= 0, got -1 (allowed: 0 to 1000000)");
    check_error(gen + "--max-tokens 1000001", "--max-tokens: must be <= 1000000");
    check_error(gen + "--max-tokens 3 --min-tokens 1000001", "--min-tokens: must be <= 1000000");
    check_error(gen + "--max-tokens 3 --top-logprobs 9223372036854775808", "--top-logprobs: must be <= 2147483647");
    check_error(gen + "--max-tokens 3 --top-logprobs 7", "--top-logprobs: must be <= the vocabulary (6), got 7");
    check_error(gen + "--max-tokens 3 --stop-seq '1 4294967297'", "--stop-seq: '4294967297' is not a token id");
    check_error(gen + "--max-tokens 3 --stop-seq '1 6'", "--stop-seq: token id 6 is out of range [0, 6)");
    check_error(gen + "--max-tokens 3 --eos 0x1", "--eos: '0x1' is not a decimal integer");
    check_error(gen + "--max-tokens 3 --eos 4294967296", "--eos: must be <= 2147483647");
    check_error(beam + "--beam-width 0", "--beam-width: must be >= 1, got 0 (allowed: 1 to 1024)");
    check_error(beam + "--beam-width 1025", "--beam-width: must be <= 1024");
    check_error(beam + "--beam-width 4611686018427387904", "--beam-width: must be <= 1024");
    check_error(beam + "--beam-width 9223372036854775809", "--beam-width: must be <= 1024");
    check_error(beam + "--beam-width 2 --n-best 2000", "--n-best: must be <= 1024");
    check_error(beam + "--beam-width 2 --length-penalty 1e999", "length_penalty must be finite, got inf");
    check_error("beam --transitions " + markov + " --bos 1 --eos 0 --beam-width 2 --max-tokens 0",
                "--max-tokens: must be >= 1, got 0");
    check_error("vote --transitions " + markov + " --bos 1 --eos 0 --seed 1 -n 2 --max-tokens -1", "--max-tokens: must be >= 0");
}

TEST_CASE("xsampler's word model: memory bounded by the corpus, any bytes are text", "[cli][decode][errors]")
{
    // 16000 distinct words in about 100 KB: dense vocab x vocab tables took 4 GB; sparse counts
    // and one row of logits at a time fit the memory limit.
    std::string words;
    for (int i = 0; i < 16000; ++i)
    {
        words += "w" + std::to_string(i) + (i % 20 == 19 ? ".\n" : " ");
    }
    const auto wide = write_bytes("wide.txt", words);
    const std::string args = " --corpus " + wide + " --prompt w1 --eos 0 ";
    const auto limit = memory_limit(150000);
    const auto limited = runs_under(limit) ? limit : "";
    const auto greedy_run = run("generate" + args + "--seed 1 --max-tokens 3 --temp 0", limited);
    INFO(greedy_run.err);
    CHECK(greedy_run.status == 0);
    CHECK(greedy_run.out.rfind("w1 | w2 w3 w4\n", 0) == 0);
    const auto beams = nlohmann::json::parse(run("beam" + args + "--beam-width 4 --max-tokens 30 --json", limited).out);
    CHECK(beams.at("hypotheses")[0].at("text") == "w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12 w13 w14 w15 w16 w17 w18 w19 .");
    check_error("beam" + args + "--beam-width 4 --max-tokens 3 --rank 2",
                "--rank: factorising needs a dense vocab x vocab table; '" + wide + "' has 16001 words, more than the limit of 4096");

    // Bytes other than ASCII letters, digits and apostrophes separate words, NUL and UTF-8 alike.
    const auto binary = write_bytes("binary.txt", std::string("hello\0\xff\xfe world.\xc3\xa9t\xc3\xa9 w\x01x", 24));
    const std::string bin = " --corpus " + binary + " --eos 0 --seed 1 --max-tokens 5 --temp 0";
    CHECK(run("generate" + bin + " --prompt hello").out == "hello | world .\n(2 tokens, stop reason: eos)\n");
    // A prompt without words starts at a sentence start; it is split as the corpus is.
    CHECK(run("generate" + bin + " --prompt ''").out.rfind(" | hello world .\n", 0) == 0);
    CHECK(run("generate" + bin + " --prompt 'WORLD.'").out.rfind("world . | hello world .\n", 0) == 0);
    check_error("generate" + bin + " --prompt 'h\xc3\xa9llo'", "--prompt: the word 'h' is not in the corpus");

    const auto no_words = write_bytes("no_words.txt", std::string("\xff\0 ... !?\n", 10));
    check_error("generate --corpus " + no_words + " --prompt '' --eos 0 --seed 1 --max-tokens 3", "'" + no_words + "': no words in the text");
    check_error("generate --corpus " + dir() + " --prompt '' --eos 0 --seed 1 --max-tokens 3", "'" + dir() + "': is a directory");
    check_error("generate --corpus /dev/zero --prompt '' --eos 0 --seed 1 --max-tokens 3",
                "'/dev/zero': is larger than the 64 MiB this tool reads");
}

namespace
{
    std::string read_file(const std::string& name)
    {
        std::ifstream in(name, std::ios::binary);
        return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    }

    // Whether `doc` is well-formed XML, as far as an SVG needs: an optional declaration, one
    // root element, every element closed in order, attributes quoted and unique per element,
    // only the five named entities and character references, no '<' in text or values, no
    // control characters. "" if it is; else what is wrong.
    std::string xml_error(const std::string& doc)
    {
        const auto name_char = [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ':' || c == '.';
        };
        // Text or an attribute value from i to end: entities and characters.
        const auto check_text = [&](std::size_t i, std::size_t end) -> std::string {
            for (; i < end; ++i)
            {
                const auto c = static_cast<unsigned char>(doc[i]);
                if (c < 0x20 && c != '\n' && c != '\t' && c != '\r')
                {
                    return "control character at " + std::to_string(i);
                }
                if (c == '<')
                {
                    return "'<' in text at " + std::to_string(i);
                }
                if (c == '&')
                {
                    const std::size_t semi = doc.find(';', i);
                    if (semi == std::string::npos || semi > end)
                    {
                        return "unterminated entity at " + std::to_string(i);
                    }
                    const std::string e = doc.substr(i + 1, semi - i - 1);
                    const bool named = e == "amp" || e == "lt" || e == "gt" || e == "quot" || e == "apos";
                    const bool dec = e.size() > 1 && e[0] == '#' &&
                                     std::all_of(e.begin() + 1, e.end(), [](char d) { return d >= '0' && d <= '9'; });
                    if (!named && !dec)
                    {
                        return "bad entity '&" + e + ";'";
                    }
                    i = semi;
                }
            }
            return "";
        };
        std::vector<std::string> open;
        std::size_t roots = 0;
        std::size_t i = 0;
        if (doc.rfind("<?xml", 0) == 0)
        {
            i = doc.find("?>");
            if (i == std::string::npos)
            {
                return "unterminated declaration";
            }
            i += 2;
        }
        while (i < doc.size())
        {
            const std::size_t lt = std::min(doc.find('<', i), doc.size());
            if (open.empty() && doc.find_first_not_of(" \n\t\r", i) < lt)
            {
                return "text outside the root element at " + std::to_string(i);
            }
            if (const auto e = check_text(i, lt); !e.empty())
            {
                return e;
            }
            if (lt == doc.size())
            {
                break;
            }
            i = lt + 1;
            const bool closing = i < doc.size() && doc[i] == '/';
            i += closing ? 1 : 0;
            const std::size_t start = i;
            while (i < doc.size() && name_char(doc[i]))
            {
                ++i;
            }
            const std::string name = doc.substr(start, i - start);
            if (name.empty())
            {
                return "a tag without a name at " + std::to_string(start);
            }
            if (closing)
            {
                if (open.empty() || open.back() != name)
                {
                    return "</" + name + "> closes " + (open.empty() ? std::string("nothing") : "<" + open.back() + ">");
                }
                open.pop_back();
                i = doc.find_first_not_of(" \n\t", i);
                if (i == std::string::npos || doc[i] != '>')
                {
                    return "bad closing tag </" + name + ">";
                }
                ++i;
                continue;
            }
            std::set<std::string> attributes;
            for (;;)
            {
                const std::size_t before = i;
                i = doc.find_first_not_of(" \n\t", i);
                if (i == std::string::npos)
                {
                    return "unterminated tag <" + name + ">";
                }
                if (doc[i] == '>' || doc.compare(i, 2, "/>") == 0)
                {
                    break;
                }
                if (i == before)
                {
                    return "no space before an attribute of <" + name + ">";
                }
                const std::size_t a = i;
                while (i < doc.size() && name_char(doc[i]))
                {
                    ++i;
                }
                const std::string attribute = doc.substr(a, i - a);
                if (attribute.empty() || i + 1 >= doc.size() || doc[i] != '=' || (doc[i + 1] != '"' && doc[i + 1] != '\''))
                {
                    return "bad attribute in <" + name + "> at " + std::to_string(a);
                }
                if (!attributes.insert(attribute).second)
                {
                    return "attribute " + attribute + " twice in <" + name + ">";
                }
                const std::size_t close = doc.find(doc[i + 1], i + 2);
                if (close == std::string::npos)
                {
                    return "unterminated value of " + attribute;
                }
                if (const auto e = check_text(i + 2, close); !e.empty())
                {
                    return e;
                }
                i = close + 1;
            }
            if (open.empty())
            {
                ++roots;
            }
            if (doc[i] == '>')
            {
                open.push_back(name);
                i += 1;
            }
            else
            {
                i += 2;
            }
        }
        if (!open.empty())
        {
            return "<" + open.back() + "> is never closed";
        }
        return roots == 1 ? "" : std::to_string(roots) + " root elements";
    }

    std::size_t count_of(const std::string& text, const std::string& part)
    {
        std::size_t n = 0;
        for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size()))
        {
            ++n;
        }
        return n;
    }

    // The captures of `pattern`'s first group, in order.
    std::vector<std::string> all_matches(const std::string& text, const std::string& pattern)
    {
        const std::regex re(pattern);
        std::vector<std::string> found;
        for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
        {
            found.push_back((*it)[1]);
        }
        return found;
    }
}

TEST_CASE("the xml checker of the svg tests fails on what is not well-formed", "[cli][svg]")
{
    CHECK(xml_error("<?xml version=\"1.0\"?>\n<svg a=\"1\"><g><text>a &amp; b &#8594;</text></g><rect/></svg>\n") == "");
    CHECK(!xml_error("<svg><g></svg>").empty());
    CHECK(!xml_error("<svg><text>a < b</text></svg>").empty());
    CHECK(!xml_error("<svg><text>a & b</text></svg>").empty());
    CHECK(!xml_error("<svg a=\"1\" a=\"2\"/>").empty());
    CHECK(!xml_error("<svg a=1/>").empty());
    CHECK(!xml_error("<svg/><svg/>").empty());
    CHECK(!xml_error("<svg><text>\x01</text></svg>").empty());
    CHECK(!xml_error("<svg>").empty());
}

TEST_CASE("xsampler dist --svg draws one panel per stage with the kept counts", "[cli][svg]")
{
    const auto logits = test_helpers::random_row<float>(300, 77, 2.0);
    const auto file = write_npy("svg_row.npy", logits);
    const std::vector<std::string> stages = {"--temp 0.7", "--top-k 40", "--top-p 0.9", "--min-p 0.05"};
    std::string flags;
    for (const auto& s : stages)
    {
        flags += " " + s;
    }
    const auto svg_file = path("stages.svg");
    const auto r = run("dist --logits " + file + flags + " --svg " + svg_file);
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK(r.out == run("dist --logits " + file + flags).out);  // the listing is unchanged
    const std::string svg = read_file(svg_file);
    CHECK(xml_error(svg) == "");
    CHECK(count_of(svg, "<g class=\"panel\"") == stages.size() + 1);
    CHECK(all_matches(svg, "data-stage=\"([a-z_]+)\"") ==
          std::vector<std::string>{"logits", "temperature", "top_k", "top_p", "min_p"});
    for (const auto* title : {"softmax of the logits", "temperature 0.7", "top_k 40", "top_p 0.9", "min_p 0.05"})
    {
        CHECK(svg.find(title) != std::string::npos);
    }
    // Panel i's kept count is what dist lists after the first i stages.
    const auto kept = all_matches(svg, ">kept ([0-9]+) of 300<");
    REQUIRE(kept.size() == stages.size() + 1);
    std::string prefix;
    for (std::size_t i = 0; i < kept.size(); ++i)
    {
        INFO("stages:" << prefix);
        CHECK(std::stoul(kept[i]) == lines(run("dist --logits " + file + prefix).out).size());
        prefix += i < stages.size() ? " " + stages[i] : "";
    }
    CHECK(std::stoul(kept.back()) < std::stoul(kept[2]));  // the filters cut
    // 20 bars a panel, each kept or dropped; the same input gives the same bytes.
    CHECK(count_of(svg, "<rect class=\"kept\"") + count_of(svg, "<rect class=\"dropped\"") == 20 * kept.size());
    CHECK(count_of(svg, "<rect class=\"dropped\"") > 0);
    REQUIRE(run("dist --logits " + file + flags + " --svg " + path("again.svg")).status == 0);
    CHECK(read_file(path("again.svg")) == svg);

    const auto log = run("dist --logits " + file + flags + " --svg " + svg_file + " --svg-scale log --svg-bars 7");
    REQUIRE(log.status == 0);
    const std::string log_svg = read_file(svg_file);
    CHECK(xml_error(log_svg) == "");
    CHECK(log_svg.find("log scale") != std::string::npos);
    CHECK(count_of(log_svg, "<rect class=\"kept\"") + count_of(log_svg, "<rect class=\"dropped\"") == 7 * kept.size());

    // A processor is a stage too; a neutral one is not in the chain.
    const auto pen = run("dist --logits " + file + " --history '3 5' --repeat-penalty 1.5 --presence-penalty 0 --top-k 5 --svg " +
                         svg_file);
    REQUIRE(pen.status == 0);
    const std::string pen_svg = read_file(svg_file);
    CHECK(all_matches(pen_svg, "data-stage=\"([a-z_]+)\"") == std::vector<std::string>{"logits", "penalties", "top_k"});
    CHECK(pen_svg.find("penalties repeat 1.5, last 64") != std::string::npos);
    CHECK(all_matches(pen_svg, ">kept ([0-9]+) of 300<").back() == "5");

    // XTC's coin comes from --seed: the picture's last panel is what dist lists.
    const std::string xtc = " --temp 0.8 --xtc-probability 0.5 --xtc-threshold 0.02";
    for (const auto* seed : {"1", "2", "3", "4"})
    {
        const auto listed = run("dist --logits " + file + xtc + " --seed " + seed + " --svg " + svg_file);
        REQUIRE(listed.status == 0);
        const std::string xtc_svg = read_file(svg_file);
        CHECK(xml_error(xtc_svg) == "");
        CHECK(xtc_svg.find("xtc probability 0.5, threshold 0.02") != std::string::npos);
        CHECK(all_matches(xtc_svg, ">kept ([0-9]+) of 300<").back() == std::to_string(lines(listed.out).size()));
    }

    check_error("dist --logits " + file + " --svg " + path("no/such/dir/x.svg"), "--svg: cannot write");
    check_error("dist --logits " + file + " --svg " + dir(), "--svg: cannot write");
    check_error("dist --logits " + file + " --svg " + svg_file + " --svg-scale cubic", "--svg-scale: must be linear or log");
    check_error("dist --logits " + file + " --svg " + svg_file + " --svg-bars 0", "--svg-bars: must be >= 1");
    check_error("dist --logits " + file + " --svg-scale log", "--svg-scale requires --svg");
}

namespace
{
    // A user's filter for the picture: the three best tokens.
    struct keep_three
    {
        template <class T>
        void apply(candidates<T>& c) const
        {
            c.keep_top(3);
        }
    };
}

TEST_CASE("the picture has a panel for a user's stage, titled by its name alone", "[cli][svg]")
{
    const auto logits = test_helpers::random_row<double>(50, 8);
    sampling_params p;
    p.temperature = 0.5;
    p.custom = {custom_stage("keep_three", keep_three{})};
    p.order = {"temperature", "top_k", "keep_three"};  // top_k: neutral, no panel
    sampler s(p);
    auto f = tool::svg::trace_figure(s, logits, {}, 5, [](token_id id) { return "t<" + std::to_string(id) + ">"; });
    REQUIRE(f.panels.size() == 3);
    CHECK(f.panels[1].title == "temperature 0.5");
    CHECK(f.panels[2].title == "keep_three");
    CHECK(f.panels[2].kept == 3);
    CHECK(f.vocab == 50);
    const std::string svg = tool::svg::render(f);
    CHECK(xml_error(svg) == "");
    CHECK(count_of(svg, "<g class=\"panel\"") == 3);
    CHECK(svg.find("data-stage=\"keep_three\"") != std::string::npos);
    CHECK(svg.find(">kept 3 of 50<") != std::string::npos);
    CHECK(count_of(svg, "<rect class=\"kept\"") == 5 + 5 + 3);  // temperature keeps the rank: the top 3 stay
    CHECK(count_of(svg, "<rect class=\"dropped\"") == 2);
    CHECK(svg.find(">t&lt;" + std::to_string(f.ids[0]) + "&gt;</text>") != std::string::npos);
    CHECK(tool::svg::render(f) == svg);
}

TEST_CASE("xsampler dist over the word model: words in the listing and the picture, escaped", "[cli][svg]")
{
    const auto corpus = write_bytes("svg_corpus.txt", "The cat sat. The cat ran. The dog sat.\n");
    const auto r = run("dist --corpus " + corpus + " --prompt 'the' --svg " + path("words.svg"));
    INFO(r.err);
    REQUIRE(r.status == 0);
    const auto listing = lines(r.out);  // p(cat | the) = 2/3, p(dog | the) = 1/3
    REQUIRE(listing.size() == 2);
    CHECK(listing[0].substr(listing[0].rfind('\t')) == "\tcat");
    CHECK(listing[1].substr(listing[1].rfind('\t')) == "\tdog");
    const std::string svg = read_file(path("words.svg"));
    CHECK(xml_error(svg) == "");
    CHECK(svg.find(">cat</text>") != std::string::npos);
    CHECK(svg.find("the word after &quot;the&quot;") != std::string::npos);
    // After "sat" comes only the sentence end, token 0, "<eos>": escaped in the picture.
    REQUIRE(run("dist --corpus " + corpus + " --prompt 'sat' --svg " + path("eos.svg")).out == "0\t1.00000000000\t<eos>\n");
    const std::string eos = read_file(path("eos.svg"));
    CHECK(xml_error(eos) == "");
    CHECK(eos.find(">&lt;eos&gt;</text>") != std::string::npos);
    CHECK(eos.find("<eos>") == std::string::npos);
    // sample draws from the same row.
    CHECK(run("sample --corpus " + corpus + " --prompt 'sat' --seed 3 -n 2").out == "0\n0\n");
    check_error("dist --corpus " + corpus + " --prompt 'the' --logits " + path("svg_row.npy"), "give the row once");
    check_error("dist --corpus " + corpus + " --prompt 'the' --row 1", "--row requires --logits");
}

// --- epsilon, eta, min_keep ---

TEST_CASE("xsampler's --epsilon, --eta, --p-less, --top-h, --top-k-top-p-joint and --min-keep give the library's filters",
          "[cli][exact]")
{
    const auto logits = test_helpers::random_row<float>(300, 57, 2.0);
    const auto file = write_npy("exact_row.npy", logits);
    sampling_params p;
    p.epsilon = 0.01;
    check_dist("--logits " + file + " --epsilon 0.01", logits, p);
    CHECK(lines(run("dist --logits " + file + " --epsilon 0.01").out).size() < 300);
    p = sampling_params{};
    p.eta = 0.002;
    check_dist("--logits " + file + " --eta 0.002", logits, p);
    CHECK(lines(run("dist --logits " + file + " --eta 0.002").out).size() < 300);
    p = sampling_params{};
    p.top_k = 2;
    p.min_keep = 5;
    check_dist("--logits " + file + " --top-k 2 --min-keep 5", logits, p);
    CHECK(lines(run("dist --logits " + file + " --top-k 2 --min-keep 5").out).size() == 5);
    p = sampling_params{};
    p.epsilon = 0.3;
    p.eta = 0.5;
    p.min_keep = 3;
    p.order = parse_stage_order("eta;epsilon");
    check_dist("--logits " + file + " --epsilon 0.3 --eta 0.5 --min-keep 3 --samplers 'eta;epsilon'", logits, p);
    p = sampling_params{};
    p.p_less = true;
    check_dist("--logits " + file + " --p-less", logits, p);
    CHECK(lines(run("dist --logits " + file + " --p-less").out).size() < 300);
    p = sampling_params{};
    p.top_h = 0.5;
    check_dist("--logits " + file + " --top-h 0.5", logits, p);
    CHECK(lines(run("dist --logits " + file + " --top-h 0.5").out).size() <= 100);
    p = sampling_params{};
    p.top_k = 40;
    p.top_p = 0.6;
    p.top_k_top_p_joint = true;
    check_dist("--logits " + file + " --top-k 40 --top-p 0.6 --top-k-top-p-joint", logits, p);

    const auto good = write_npy("exact_good.npy", test_helpers::row<float>({0.0, 1.0, 2.0}));
    check_error("dist --logits " + good + " --epsilon 1", "epsilon: e must be in [0, 1) (0 disables it), got 1");
    check_error("dist --logits " + good + " --epsilon abc", "--epsilon");
    check_error("dist --logits " + good + " --eta -0.5", "eta: h must be in [0, 1) (0 disables it), got -0.5");
    check_error("dist --logits " + good + " --eta x", "--eta");
    check_error("dist --logits " + good + " --min-keep -1", "--min-keep");
    check_error("dist --logits " + good + " --min-keep 1.5", "--min-keep");
    check_error("dist --logits " + good + " --epsilon 0.1 --samplers top_k", "epsilon is set but not in the sampler order");
    check_error("dist --logits " + good + " --p-less --samplers top_k", "p_less is set but not in the sampler order");
    check_error("dist --logits " + good + " --top-h 2", "top_h: h must be in [0, 1] (0 disables it), got 2");
    check_error("dist --logits " + good + " --top-k 2 --top-k-top-p-joint --samplers 'top_k;top_p'",
                "top_k_top_p is set but not in the sampler order");
}

// --- generate --request: a completion request, answered as OpenAI's /v1/completions ---

namespace
{
    /// The tool's n-gram model and request context, built in the test as the tool builds them.
    struct gpt2_request_model
    {
        tool::ngram_model model;
        request_context context;
    };

    gpt2_request_model gpt2_request(const std::string& corpus)
    {
        gpt2_request_model g{tool::ngram_model::from_file(corpus, XSAMPLER_GPT2_DIR, 3), {}};
        vocabulary v = g.model.tokenizer().vocab();
        v.set_eos({50256});
        g.context.index = std::make_shared<const vocabulary_index>(std::make_shared<const vocabulary>(std::move(v)));
        g.context.max_tokens = 1'000'000;
        return g;
    }

    const char* api_reason(finish_reason r)
    {
        return r == finish_reason::length ? "length" : "stop";
    }
}

TEST_CASE("xsampler generate --request: OpenAI's completion object, choice by choice the library's", "[cli][decode][request]")
{
    const auto corpus = write_bytes("request_corpus.txt", "The cat sat on the mat. The dog sat on the log.\n"
                                                          "A cat and a dog sat on a mat.\n");
    auto g = gpt2_request(corpus);
    const auto& m = g.model;
    g.context.encode = [&m](const std::string& text) { return m.tokenizer().encode(text); };
    const std::string gen = "generate --corpus " + corpus + " --tokenizer gpt2 --request ";
    const std::string request = R"({"model": "ngram", "prompt": "The cat", "max_tokens": 4, "temperature": 0.9,
                                    "seed": 5, "n": 3, "logprobs": 2, "stop": [" on"]})";
    const auto out = run(gen + write_bytes("request.json", request));
    INFO("stderr: " << out.err);
    REQUIRE(out.status == 0);
    REQUIRE(lines(out.out).size() == 1);
    const auto j = nlohmann::json::parse(out.out);
    CHECK(j.at("object") == "text_completion");
    CHECK(j.at("model") == "ngram");
    const auto r = parse_request(request, g.context);
    const sequence first(sampler(r.params), r.prompt, r.options);
    REQUIRE(j.at("choices").size() == 3);
    std::size_t generated = 0;
    std::set<std::string> reasons;
    for (std::size_t i = 0; i < 3; ++i)
    {
        // choice i is stream i of the request's seed, as the library runs it
        auto seq = first.fork(i);
        std::vector<std::string> tokens;
        std::vector<double> logprobs;
        std::vector<std::size_t> offsets;
        std::size_t offset = 0;
        while (!seq.finished())
        {
            const auto& s = seq.step(m(seq.history().tokens()));
            tokens.push_back(m.tokenizer().vocab().bytes(s.id));
            logprobs.push_back(s.raw_logprob);  // vLLM's default: the model's
            offsets.push_back(offset);
            offset += tokens.back().size();
            CHECK(s.top.size() == 2);
        }
        const auto& c = j.at("choices")[i];
        INFO("choice " << i);
        CHECK(c.at("index") == i);
        CHECK(c.at("text") == seq.text());
        CHECK(c.at("finish_reason") == api_reason(seq.reason()));
        reasons.insert(c.at("finish_reason").get<std::string>());
        CHECK(c.at("logprobs").at("tokens").get<std::vector<std::string>>() == tokens);
        CHECK(c.at("logprobs").at("token_logprobs").get<std::vector<double>>() == logprobs);
        CHECK(c.at("logprobs").at("text_offset").get<std::vector<std::size_t>>() == offsets);
        REQUIRE(c.at("logprobs").at("top_logprobs").size() == tokens.size());
        for (const auto& top : c.at("logprobs").at("top_logprobs"))
        {
            CHECK((top.size() == 2 || top.size() == 1));  // two names, unless equal
        }
        generated += tokens.size();
    }
    CHECK(reasons.size() == 2);  // " on" stops some, max_tokens others
    CHECK(j.at("usage").at("prompt_tokens") == r.prompt.size());
    CHECK(j.at("usage").at("completion_tokens") == generated);
    CHECK(j.at("usage").at("total_tokens") == r.prompt.size() + generated);

    SECTION("--stream: a chunk a token, in index order; the deltas make each choice's text")
    {
        const auto streamed = run(gen + path("request.json") + " --stream");
        REQUIRE(streamed.status == 0);
        std::vector<std::string> texts(3);
        std::vector<std::size_t> chunks(3);
        std::vector<std::string> finished(3);
        for (const auto& line : lines(streamed.out))
        {
            const auto chunk = nlohmann::json::parse(line);
            REQUIRE(chunk.at("choices").size() == 1);
            const auto& c = chunk.at("choices")[0];
            const std::size_t i = c.at("index");
            CHECK(finished[i].empty());  // nothing after a choice's last chunk
            texts[i] += c.at("text").get<std::string>();
            ++chunks[i];
            CHECK(c.at("logprobs").at("tokens").size() == 1);
            if (!c.at("finish_reason").is_null())
            {
                finished[i] = c.at("finish_reason");
            }
        }
        for (std::size_t i = 0; i < 3; ++i)
        {
            const auto& c = j.at("choices")[i];
            CHECK(texts[i] == c.at("text"));
            CHECK(chunks[i] == c.at("logprobs").at("tokens").size());
            CHECK(finished[i] == c.at("finish_reason"));
        }
        // "stream": true in the request is the same, and include_usage ends with the usage
        const auto usage = run(gen + write_bytes("stream.json", R"({"prompt": "The cat", "max_tokens": 4,
            "temperature": 0.9, "seed": 5, "n": 3, "logprobs": 2, "stop": [" on"], "stream": true,
            "stream_options": {"include_usage": true}})"));
        REQUIRE(usage.status == 0);
        const auto all = lines(usage.out);
        REQUIRE(all.size() == lines(streamed.out).size() + 1);
        CHECK(std::equal(all.begin(), all.end() - 1, lines(streamed.out).begin(), [](const auto& a, const auto& b) {
            auto x = nlohmann::json::parse(a), y = nlohmann::json::parse(b);
            x.erase("model"), y.erase("model");  // the first request names its model
            return x == y;
        }));
        const auto last = nlohmann::json::parse(all.back());
        CHECK(last.at("choices").empty());
        CHECK(last.at("usage") == j.at("usage"));
    }
    SECTION("prompt_logprobs: each prompt token after the first under the model, as the library's")
    {
        const auto p = run(gen + write_bytes("prompt_lp.json", R"({"prompt": "The cat sat", "max_tokens": 1,
                                                                   "prompt_logprobs": 1})"));
        REQUIRE(p.status == 0);
        const auto lp = nlohmann::json::parse(p.out).at("choices")[0].at("prompt_logprobs");
        const auto ids = m.tokenizer().encode("The cat sat");
        REQUIRE(lp.size() == ids.size());
        CHECK(lp[0].is_null());
        for (std::size_t i = 1; i < ids.size(); ++i)
        {
            xt::xtensor<double, 2> rows = xt::empty<double>({std::size_t(1), m.vocab()});
            xt::view(rows, 0, xt::all()) = m(token_span(ids).subspan(0, i));
            const std::vector<token_id> two = {ids[i - 1], ids[i]};
            const auto expected = prompt_logprobs(rows, two, 1)[1];
            const std::string name = m.tokenizer().vocab().bytes(ids[i]);
            CHECK(lp[i].at(name) == expected.logprob);
            CHECK(lp[i].size() <= 2);  // the token and the best alternative (one if the same)
        }
        // --stream is "stream": true: stream_options may come with it, prompt_logprobs may not
        const auto u = run(gen + write_bytes("usage.json", R"({"prompt": "The", "max_tokens": 2,
                                                              "stream_options": {"include_usage": true}})") + " --stream");
        REQUIRE(u.status == 0);
        CHECK(nlohmann::json::parse(lines(u.out).back()).at("usage").at("completion_tokens") == 2);
        check_error(gen + path("prompt_lp.json") + " --stream", "request: prompt_logprobs: cannot be streamed");
    }
    SECTION("best_of: the n of the highest cumulative log-probability of the model")
    {
        const std::string best = R"({"prompt": "The", "max_tokens": 6, "best_of": 4, "seed": 2})";
        const auto b = run(gen + write_bytes("best.json", best));
        REQUIRE(b.status == 0);
        const auto answer = nlohmann::json::parse(b.out);
        REQUIRE(answer.at("choices").size() == 1);
        auto parsed = parse_request(best, g.context);
        parsed.options.raw_logprob = true;
        const sequence root(sampler(parsed.params), parsed.prompt, parsed.options);
        std::string best_text;
        double best_score = -inf;
        for (std::size_t i = 0; i < 4; ++i)
        {
            auto seq = root.fork(i);
            while (!seq.finished())
            {
                seq.step(m(seq.history().tokens()));
            }
            if (seq.cumulative_logprob() > best_score)
            {
                best_score = seq.cumulative_logprob();
                best_text = seq.text();
            }
        }
        CHECK(answer.at("choices")[0].at("text") == best_text);
        CHECK(answer.at("choices")[0].at("logprobs").is_null());
    }
    SECTION("a constraint, and llama.cpp's dialect")
    {
        const auto c = run(gen + write_bytes("choice.json", R"({"prompt": "The", "guided_choice": [" cat", " dog sat"],
                                                               "seed": 1})"));
        REQUIRE(c.status == 0);
        const auto choice = nlohmann::json::parse(c.out).at("choices")[0];
        CHECK((choice.at("text") == " cat" || choice.at("text") == " dog sat"));
        CHECK(choice.at("finish_reason") == "stop");
        const auto l = run(gen + write_bytes("llama.json", R"({"prompt": "The", "n_predict": 4, "seed": 1})") +
                           " --request-dialect llama");
        REQUIRE(l.status == 0);
        CHECK(nlohmann::json::parse(l.out).at("usage").at("completion_tokens") <= 4);
    }
}

TEST_CASE("xsampler generate --request: other models, and bad requests", "[cli][decode][request]")
{
    // A Markov table: ids only, each token named token_id:N, the text its ids
    xt::xtensor<float, 2> t = {{0, 5, 0}, {0, 0, 5}, {5, 0, 0}};
    const auto table = write_npy("request_markov.npy", t);
    const auto r = run("generate --transitions " + table + " --eos 0 --request " +
                       write_bytes("ids.json", R"({"prompt": [1], "max_tokens": 5, "temperature": 0, "logprobs": 0})"));
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    const auto c = nlohmann::json::parse(r.out).at("choices")[0];
    CHECK(c.at("text") == "2");  // the eos that ends it shows nothing (GPT-2's has no bytes)
    CHECK(c.at("finish_reason") == "stop");
    CHECK(c.at("logprobs").at("tokens") == nlohmann::json{"token_id:2", "token_id:0"});
    const auto streamed = run("generate --transitions " + table + " --eos 0 --stream --request " +
                              write_bytes("ids2.json", R"({"prompt": [1], "max_tokens": 5, "n": 2, "seed": 3})"));
    const auto whole = run("generate --transitions " + table + " --eos 0 --request " + path("ids2.json"));
    REQUIRE(streamed.status == 0);
    REQUIRE(whole.status == 0);
    std::vector<std::string> texts(2);
    for (const auto& line : lines(streamed.out))
    {
        const auto chunk = nlohmann::json::parse(line).at("choices")[0];
        texts[chunk.at("index").get<std::size_t>()] += chunk.at("text").get<std::string>();
    }
    for (std::size_t i = 0; i < 2; ++i)
    {
        CHECK(texts[i] == nlohmann::json::parse(whole.out).at("choices")[i].at("text"));
    }

    const auto corpus = write_bytes("request_corpus2.txt", "The cat sat on the mat.\n");
    const std::string gen = "generate --corpus " + corpus + " --tokenizer gpt2 --request ";
    const auto file = [](const std::string& name, const std::string& text) { return write_bytes(name, text); };
    check_error(gen + file("bad1.json", R"({"prompt": "x", "top_kk": 1})"), "request: unknown field 'top_kk'");
    check_error(gen + file("bad2.json", R"({"prompt": "x", "n_predict": 3})"),
                "request: 'n_predict' is llama.cpp's; this request is read as OpenAI's / vLLM's (use 'max_tokens')");
    check_error(gen + file("bad3.json", R"({"prompt": "x"})") + " --top-k 3", "--top-k: the request gives it");
    check_error(gen + file("bad4.json", R"({"prompt": "x", "best_of": 2})") + " --stream",
                "request: best_of: cannot be streamed (best_of 2 > n 1)");
    check_error(gen + file("bad5.json", R"({"prompt": "x", "guided_regex": "a"})") + " --eos 13",
                "request: guided_regex: a constrained text ends with the index's eos ids");
    check_error(gen + file("bad6.json", "{"), "request: the request is not JSON");
    check_error(gen + file("bad8.json", R"({"prompt": "x", "n": 1, "n": 2})"), "request: 'n' is given twice");
    check_error("generate --request " + file("bad9.json", R"({"prompt": "x"})"), "give a model");
    const auto words = write_bytes("request_words.txt", "the cat sat. the dog sat.");
    check_error("generate --corpus " + words + " --eos 0 --request " + file("bad10.json", R"({"prompt": "the zebra"})"),
                "request: prompt: the word 'zebra' is not in the corpus");
    check_error(gen + path("no_request.json"), "cannot open");
    check_error("generate --corpus " + corpus + " --tokenizer gpt2 --seed 1 --max-tokens 3 --stream",
                "--stream goes with --request");
    check_error("generate --transitions " + table + " --eos 0 --request " + file("bad7.json", R"({"prompt": "x"})"),
                "request: prompt: text needs the context's encode");
}

#endif

// --- the entropy filters' flags: --typical, --top-n-sigma, --dynatemp-range,
//     --dynatemp-exp, --top-k-ties, and their --samplers names ---

TEST_CASE("xsampler's entropy filter flags give the library's stages", "[cli][typical][top_n_sigma][dynatemp][top_k_ties]")
{
    auto logits = test_helpers::random_row<float>(300, 37, 2.0, true, 0.1);
    const auto file = write_npy("entropy_row.npy", logits);
    // Each flag against the library's sampler with the same parameters.
    const std::pair<const char*, void (*)(sampling_params&)> cases[] = {
        {" --typical 0.6", [](sampling_params& p) { p.typical_p = 0.6; }},
        {" --top-n-sigma 1.5", [](sampling_params& p) { p.top_n_sigma = 1.5; }},
        {" --temp 0.8 --dynatemp-range 0.5 --dynatemp-exp 2",
         [](sampling_params& p) {
             p.temperature = 0.8;
             p.dynatemp_range = 0.5;
             p.dynatemp_exponent = 2.0;
         }},
        // the row's logits are rounded to integers: ties at the 3rd
        {" --top-k 3 --top-k-ties all", [](sampling_params& p) { p.top_k = 3, p.top_k_keep_ties = true; }},
        {" --top-k 3 --top-k-ties lowest-id", [](sampling_params& p) { p.top_k = 3; }},
        {" --typical 0.9 --top-n-sigma 2 --samplers 'typical;top_n_sigma'",
         [](sampling_params& p) {
             p.typical_p = 0.9;
             p.top_n_sigma = 2.0;
             p.order = parse_stage_order("typical;top_n_sigma");
         }},
    };
    for (const auto& [flags, set] : cases)
    {
        sampling_params p;
        set(p);
        check_dist("--logits " + file + flags, logits, p);
    }

    const std::string dist = "dist --logits " + file;
    check_error(dist + " --typical 1.5", "typical: p must be in (0, 1], got 1.5");
    check_error(dist + " --typical x", "--typical");
    check_error(dist + " --top-n-sigma inf", "top_n_sigma: n must be finite");
    check_error(dist + " --top-n-sigma x", "--top-n-sigma");
    check_error(dist + " --dynatemp-range -1", "temperature: dynatemp_range must be finite and >= 0, got -1");
    check_error(dist + " --dynatemp-range x", "--dynatemp-range");
    check_error(dist + " --dynatemp-exp -2", "temperature: dynatemp_exponent must be finite and >= 0, got -2");
    check_error(dist + " --dynatemp-exp x", "--dynatemp-exp");
    check_error(dist + " --top-k-ties some", "--top-k-ties");
    check_error(dist + " --typical 0.5 --samplers 'top_k'", "typical is set but not in the sampler order");
}
