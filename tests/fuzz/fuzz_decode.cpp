// fuzz_decode: generate (generate.hpp) and beam_search (beam_search.hpp)
// over a fuzzed Markov model: a [V, V] table of logits (V <= 32), the next
// token's row being the table's row for the last token of the prefix. The
// model misbehaves at fuzzed calls: a 0-D, 2-D or 3-D result, a row of the
// wrong size (or empty), NaN, +inf, every token masked, the wrong number of
// beams.
//
// Input, in order (fuzz_input.hpp has the encodings):
//   flags    bit 0: double logits; bit 1: generate with the compile-time
//            chain (else the run-time sampler); bits 2, 3: ask for the model
//            log-probabilities, the entropy
//   V        byte % 32 + 1
//   table    a fill byte (bits 0-1: integers in [-4, 4], uniform in [-8, 8],
//            a constant value<T>, uniform in [-60, 60]; bits 2-4: eighths
//            masked), a u32 seed, count byte % 17 of (u16 % V*V, value<T>)
//   prompt   count byte % 5, each id(V)
//   faults   count byte % 4, each (call byte % 16, kind byte % 8)
//   generate max_tokens byte % 24, min_tokens byte % 28, eos (count byte % 4,
//            each id(V)), stop sequences (count byte % 3, each a length
//            byte % 4 and that many id(V)), top_logprobs byte % 5; the
//            sampler: temperature value<double>, top_k byte % 40, top_p and
//            min_p value<double>, u32 seed
//   beam     beam_width byte % 9, max_tokens byte % 13, eos (as above),
//            length_penalty value<double>, n_best byte % 10, early_stopping
//            flag
//   then     a byte: bit 0 generate's ignore_eos; bit 1 the penalties
//            (three value<double>, last_n int8, scope flag), bit 2 DRY
//            (multiplier value<double>, allowed_length byte % 4, last_n
//            int8), bit 3 no_repeat_ngram byte % 4 (the run-time sampler
//            only; the chain of bit 1 of the flags has none)
//
// Each call either throws invalid_parameter or invalid_logits with a message
// (anything else crashes), or returns a valid result. generate: every token in
// the vocabulary of its step's row and unmasked there, logprobs finite and
// <= 0, model log-probabilities <= 0, entropies in [0, log V], the top
// log-probabilities sorted and unmasked; the last token is an eos id exactly
// when the stop reason is eos, no eos id earlier, none among the first
// min_tokens; stop_sequence: the tokens end with one and none ended earlier;
// max_tokens: exactly max_tokens tokens. beam_search: 1 to n_best
// hypotheses sorted by score (ties: smaller tokens first), each with 1 to
// max_tokens tokens in range, eos only last and exactly when finished, an
// unfinished one max_tokens long, a finite logprob <= 0 equal to the sum of
// its tokens' log-softmax under the model, and score = logprob / len^alpha.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xview.hpp>

#include <xsampler/xsampler.hpp>

#include "fuzz_input.hpp"

namespace
{
    using namespace xsampler;

    enum class fault
    {
        none,
        rank0,
        rank_other,  // generate: 2-D; beam_search: 1-D
        wrong_size,
        nan,
        plus_inf,
        all_masked,
        empty,
        rank3_or_beams  // generate: 3-D; beam_search: one beam too many
    };

    template <class T>
    struct markov
    {
        std::size_t vocab = 1;
        std::vector<T> table;  // [vocab, vocab]
        std::vector<std::pair<std::size_t, fault>> faults;
        std::size_t wrong_size = 0;  // the size a wrong_size row has
        std::size_t calls = 0;
        std::vector<std::size_t> widths;  // the row width of each call

        fault fault_at(std::size_t call) const
        {
            for (const auto& f : faults)
            {
                if (f.first == call)
                {
                    return f.second;
                }
            }
            return fault::none;
        }

        /// The next token's row after a prefix, at a call with fault f.
        std::vector<T> next_row(token_span prefix, fault f) const
        {
            const std::size_t v = vocab;
            const std::size_t state =
                prefix.empty() ? 0 : std::size_t((std::int64_t(prefix[prefix.size() - 1]) % std::int64_t(v) + std::int64_t(v)) % std::int64_t(v));
            std::vector<T> row(table.begin() + std::ptrdiff_t(state * v), table.begin() + std::ptrdiff_t(state * v + v));
            switch (f)
            {
            case fault::wrong_size: row.resize(wrong_size, T(0)); break;
            case fault::empty: row.clear(); break;
            case fault::nan: row[state] = std::numeric_limits<T>::quiet_NaN(); break;
            case fault::plus_inf: row[v - 1] = std::numeric_limits<T>::infinity(); break;
            case fault::all_masked: std::fill(row.begin(), row.end(), -std::numeric_limits<T>::infinity()); break;
            default: break;
            }
            return row;
        }
    };

    std::uint64_t splitmix(std::uint64_t& state)
    {
        std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }

    std::vector<token_id> read_ids(fuzz::input& in, std::size_t count, std::size_t vocab)
    {
        std::vector<token_id> ids(count);
        for (auto& id : ids)
        {
            id = in.id(vocab);
        }
        return ids;
    }

    bool contains(const std::vector<token_id>& ids, token_id id)
    {
        return std::find(ids.begin(), ids.end(), id) != ids.end();
    }

    template <class T>
    bool masked(T x)
    {
        return x == -std::numeric_limits<T>::infinity();
    }

    // --- generate ---

    template <class T, class Sampler>
    void run_generate(markov<T>& model, const std::vector<token_id>& prompt, Sampler& s, const generate_options& o,
                      std::uint64_t seed)
    {
        std::vector<std::vector<T>> rows;  // what each call returned, when it was a 1-D row
        const auto call = [&](token_span prefix) {
            const std::size_t n = model.calls++;
            const fault f = model.fault_at(n);
            std::vector<T> row = model.next_row(prefix, f);
            rows.push_back(row);
            if (f == fault::rank0)
            {
                return xt::xarray<T>(row.empty() ? T(0) : row[0]);
            }
            xt::xarray<T> out = xt::adapt(row, std::vector<std::size_t>{row.size()});
            if (f == fault::rank_other)
            {
                out.reshape({std::size_t(1), row.size()});
            }
            else if (f == fault::rank3_or_beams)
            {
                out.reshape({std::size_t(1), std::size_t(1), row.size()});
            }
            return out;
        };
        philox4x32 rng(seed, 0);
        generation g;
        const std::string error = fuzz::documented_error([&] { g = generate(call, prompt, s, o, rng); });
        fuzz::trace("generate: " + (error.empty() ? std::to_string(g.tokens.size()) + " tokens, " + to_string(g.reason) : error));
        if (!error.empty())
        {
            if (error.rfind("invalid_logits: ", 0) == 0)
            {
                FUZZ_REQUIRE(error.rfind("invalid_logits: generate: step ", 0) == 0, "a row error without its step: " + error);
            }
            return;
        }
        const std::size_t n = g.tokens.size();
        FUZZ_REQUIRE(n == model.calls && n == rows.size(), "tokens and model calls differ");
        FUZZ_REQUIRE(n <= o.max_tokens, "more than max_tokens");
        FUZZ_REQUIRE(g.logprobs.size() == n, "logprobs and tokens differ in length");
        FUZZ_REQUIRE(g.model_logprobs.size() == (o.model_logprobs ? n : 0), "model_logprobs of the wrong length");
        FUZZ_REQUIRE(g.entropies.size() == (o.entropy ? n : 0), "entropies of the wrong length");
        FUZZ_REQUIRE(g.top_logprobs.size() == (o.top_logprobs > 0 ? n : 0), "top_logprobs of the wrong length");
        for (std::size_t i = 0; i < n; ++i)
        {
            const token_id t = g.tokens[i];
            const auto& row = rows[i];
            const std::string at = "step " + std::to_string(i) + ": ";
            FUZZ_REQUIRE(t >= 0 && std::size_t(t) < row.size(), at + "token " + std::to_string(t) + " out of range");
            FUZZ_REQUIRE(!masked(row[std::size_t(t)]), at + "a masked token drawn");
            FUZZ_REQUIRE(std::isfinite(g.logprobs[i]) && g.logprobs[i] <= 0.0, at + "logprob " + std::to_string(g.logprobs[i]));
            if (i < o.min_tokens || o.ignore_eos)
            {
                FUZZ_REQUIRE(!contains(o.eos, t), at + "an eos token before min_tokens or with ignore_eos");
            }
            if (i + 1 < n)
            {
                FUZZ_REQUIRE(!contains(o.eos, t), at + "an eos token did not stop the loop");
                if (i >= o.min_tokens)
                {
                    const std::vector<token_id> so_far(g.tokens.begin(), g.tokens.begin() + std::ptrdiff_t(i + 1));
                    for (const auto& seq : o.stop_sequences)
                    {
                        FUZZ_REQUIRE(!(seq.size() <= so_far.size() &&
                                       std::equal(seq.begin(), seq.end(), so_far.end() - std::ptrdiff_t(seq.size()))),
                                     at + "a stop sequence did not stop the loop");
                    }
                }
            }
            if (o.model_logprobs)
            {
                FUZZ_REQUIRE(!(g.model_logprobs[i] > 0.0) && !std::isnan(g.model_logprobs[i]),
                             at + "model logprob " + std::to_string(g.model_logprobs[i]));
            }
            if (o.entropy)
            {
                const double h = g.entropies[i];
                FUZZ_REQUIRE(std::isfinite(h) && h >= 0.0 && h <= std::log(double(row.size())) + 1e-6,
                             at + "entropy " + std::to_string(h) + " of " + std::to_string(row.size()) + " tokens");
            }
            if (o.top_logprobs > 0)
            {
                const auto& top = g.top_logprobs[i];
                const auto unmasked = std::size_t(std::count_if(row.begin(), row.end(), [](T x) { return !masked(x); }));
                FUZZ_REQUIRE(top.size() == std::min(o.top_logprobs, unmasked),
                             at + std::to_string(top.size()) + " top logprobs");
                for (std::size_t j = 0; j < top.size(); ++j)
                {
                    FUZZ_REQUIRE(top[j].id >= 0 && std::size_t(top[j].id) < row.size() && !masked(row[std::size_t(top[j].id)]),
                                 at + "top logprob id " + std::to_string(top[j].id));
                    FUZZ_REQUIRE(!(top[j].logprob > 0.0) && !std::isnan(top[j].logprob), at + "top logprob > 0 or NaN");
                    FUZZ_REQUIRE(j == 0 || top[j - 1].logprob >= top[j].logprob, at + "top logprobs not sorted");
                }
            }
        }
        const token_id last = n > 0 ? g.tokens.back() : -1;
        switch (g.reason)
        {
        case stop_reason::eos:
            FUZZ_REQUIRE(n > o.min_tokens && contains(o.eos, last), "stop reason eos without an eos token last");
            break;
        case stop_reason::stop_sequence:
        {
            FUZZ_REQUIRE(n > o.min_tokens, "a stop sequence within min_tokens");
            FUZZ_REQUIRE(!contains(o.eos, last), "stop reason stop_sequence on an eos token");
            const bool ends = std::any_of(o.stop_sequences.begin(), o.stop_sequences.end(), [&](const auto& seq) {
                return seq.size() <= n && std::equal(seq.begin(), seq.end(), g.tokens.end() - std::ptrdiff_t(seq.size()));
            });
            FUZZ_REQUIRE(ends, "stop reason stop_sequence, but the tokens end with none");
            break;
        }
        case stop_reason::max_tokens:
            FUZZ_REQUIRE(n == o.max_tokens, "stop reason max_tokens after " + std::to_string(n) + " of " +
                                                 std::to_string(o.max_tokens) + " tokens");
            FUZZ_REQUIRE(n == 0 || n <= o.min_tokens || !contains(o.eos, last), "stop reason max_tokens on an eos token");
            break;
        }
    }

    // --- beam_search ---

    template <class T>
    void run_beam(markov<T>& model, const std::vector<token_id>& prompt, const beam_options& o)
    {
        const auto call = [&](const std::vector<std::vector<token_id>>& prefixes) {
            const std::size_t n = model.calls++;
            const fault f = model.fault_at(n);
            if (f == fault::rank0)
            {
                return xt::xarray<T>(T(0));
            }
            std::vector<std::vector<T>> rows;
            for (const auto& p : prefixes)
            {
                rows.push_back(model.next_row(token_span(p), f));
            }
            if (f == fault::rank3_or_beams)
            {
                rows.push_back(rows.back());
            }
            const std::size_t width = rows.empty() ? 0 : rows[0].size();
            model.widths.push_back(width);
            if (f == fault::rank_other)
            {
                xt::xarray<T> out = xt::adapt(rows[0], std::vector<std::size_t>{width});
                return out;
            }
            xt::xarray<T> out = xt::empty<T>({rows.size(), width});
            for (std::size_t b = 0; b < rows.size(); ++b)
            {
                std::copy(rows[b].begin(), rows[b].end(), out.data() + b * width);
            }
            return out;
        };
        std::vector<hypothesis> hs;
        const std::string error = fuzz::documented_error([&] { hs = beam_search(call, prompt, o); });
        fuzz::trace("beam_search: width " + std::to_string(o.beam_width) + ", n_best " + std::to_string(o.n_best) +
                    ", max_tokens " + std::to_string(o.max_tokens) + ", alpha " + detail::format_value(o.length_penalty) +
                    ": " + (error.empty() ? std::to_string(hs.size()) + " hypotheses" : error));
        for (const auto& h : hs)
        {
            fuzz::trace("  " + std::to_string(h.tokens.size()) + " tokens, logprob " + detail::format_value(h.logprob) +
                        ", score " + detail::format_value(h.score) + (h.finished ? ", finished" : ""));
        }
        if (!error.empty())
        {
            return;
        }
        FUZZ_REQUIRE(!hs.empty() && hs.size() <= o.n_best, std::to_string(hs.size()) + " hypotheses");
        const double alpha = o.length_penalty;
        for (std::size_t i = 0; i < hs.size(); ++i)
        {
            const auto& h = hs[i];
            const std::string at = "hypothesis " + std::to_string(i) + ": ";
            if (i > 0)
            {
                const auto& p = hs[i - 1];
                FUZZ_REQUIRE(p.score > h.score || (p.score == h.score && p.tokens <= h.tokens), at + "not sorted by score");
            }
            FUZZ_REQUIRE(!h.tokens.empty() && h.tokens.size() <= o.max_tokens, at + std::to_string(h.tokens.size()) + " tokens");
            FUZZ_REQUIRE(h.finished == contains(o.eos, h.tokens.back()), at + "finished but not ending with eos, or the reverse");
            FUZZ_REQUIRE(h.finished || h.tokens.size() == o.max_tokens, at + "unfinished before max_tokens");
            FUZZ_REQUIRE(std::isfinite(h.logprob) && h.logprob <= 0.0, at + "logprob " + std::to_string(h.logprob));
            FUZZ_REQUIRE(!std::isnan(h.score), at + "score NaN, logprob " + detail::format_value(h.logprob) + ", alpha " +
                                                   detail::format_value(alpha));
            // The contract: logprob / len^alpha, and 0 for a certain sentence.
            const double expected_score = alpha == 0.0 || h.logprob == 0.0
                                              ? h.logprob
                                              : h.logprob / std::pow(double(h.tokens.size()), alpha);
            FUZZ_REQUIRE(h.score == expected_score, at + "score " + std::to_string(h.score) + " is not logprob / len^alpha");
            // The log-probability, recomputed from the model's rows (a row of a
            // valid run may only have changed width, which next_row gives again).
            std::vector<token_id> prefix = prompt;
            double logprob = 0.0;
            for (std::size_t j = 0; j < h.tokens.size(); ++j)
            {
                const token_id t = h.tokens[j];
                FUZZ_REQUIRE(j + 1 == h.tokens.size() || !contains(o.eos, t), at + "an eos token inside");
                FUZZ_REQUIRE(j < model.widths.size() && t >= 0 && std::size_t(t) < model.widths[j],
                             at + "token " + std::to_string(t) + " out of range");
                const std::vector<T> row = model.next_row(token_span(prefix), model.fault_at(j));
                const auto lsm = log_softmax(xt::adapt(row, std::vector<std::size_t>{row.size()}));
                logprob = logprob + lsm(std::size_t(t));
                prefix.push_back(t);
            }
            FUZZ_REQUIRE(logprob == h.logprob, at + "logprob " + std::to_string(h.logprob) + ", recomputed " + std::to_string(logprob));
        }
    }

    template <class T>
    void run(fuzz::input& in, unsigned flags)
    {
        markov<T> model;
        const std::size_t v = in.byte() % 32 + 1;
        model.vocab = v;
        model.table.resize(v * v);
        const unsigned fill = in.byte();
        std::uint64_t state = in.u32();
        const T constant = (fill & 3) == 2 ? in.value<T>() : T(0);
        for (auto& x : model.table)
        {
            const std::uint64_t r = splitmix(state);
            switch (fill & 3)
            {
            case 0: x = T(int(r % 9) - 4); break;
            case 1: x = T(double(r >> 11) * 0x1p-53 * 16.0 - 8.0); break;
            case 2: x = constant; break;
            default: x = T(double(r >> 11) * 0x1p-53 * 120.0 - 60.0); break;
            }
            if (((r >> 4) & 7) < ((fill >> 2) & 7))
            {
                x = -std::numeric_limits<T>::infinity();
            }
        }
        const std::size_t explicit_count = in.byte() % 17;
        for (std::size_t i = 0; i < explicit_count; ++i)
        {
            const std::size_t at = in.u16() % (v * v);
            model.table[at] = in.value<T>();
        }
        const std::vector<token_id> prompt = read_ids(in, in.byte() % 5, v);
        const std::size_t fault_count = in.byte() % 4;
        for (std::size_t i = 0; i < fault_count; ++i)
        {
            const std::size_t at = in.byte() % 16;
            model.faults.emplace_back(at, fault(in.byte() % 8 + 1));
        }
        model.wrong_size = in.byte() % 40;

        generate_options g;
        g.max_tokens = in.byte() % 24;
        g.min_tokens = in.byte() % 28;
        g.eos = read_ids(in, in.byte() % 4, v);
        g.stop_sequences.resize(in.byte() % 3);
        for (auto& seq : g.stop_sequences)
        {
            seq = read_ids(in, in.byte() % 4, v);
        }
        g.model_logprobs = flags & 4;
        g.entropy = flags & 8;
        g.top_logprobs = in.byte() % 5;
        sampling_params p;
        p.temperature = in.value<double>();
        p.top_k = in.byte() % 40;
        p.top_p = in.value<double>();
        p.min_p = in.value<double>();
        const std::uint64_t seed = in.u32();

        beam_options b;
        b.beam_width = in.byte() % 9;
        b.max_tokens = in.byte() % 13;
        b.eos = read_ids(in, in.byte() % 4, v);
        b.length_penalty = in.value<double>();
        b.n_best = in.byte() % 10;
        b.early_stopping = in.flag();
        // The processors that keep state across steps, and ignore_eos (read
        // last, so that inputs written before them decode as they did).
        const unsigned processors = in.byte();
        g.ignore_eos = processors & 1;
        if (processors & 2)
        {
            fuzz::read_penalties(in, p);
        }
        if (processors & 4)
        {
            p.dry_multiplier = in.value<double>();
            p.dry_allowed_length = std::int64_t(in.byte() % 4);
            p.dry_penalty_last_n = std::int64_t(std::int8_t(in.byte()));
        }
        if (processors & 8)
        {
            p.no_repeat_ngram_size = in.byte() % 4;
        }

        if (flags & 2)
        {
            std::optional<chain<top_k, top_p, min_p, temperature>> c;
            const std::string error = fuzz::documented_error(
                [&] { c.emplace(top_k(p.top_k), top_p(p.top_p), min_p(p.min_p), temperature(p.temperature)); });
            fuzz::trace(error.empty() ? "chain" : error);
            if (error.empty())
            {
                run_generate(model, prompt, *c, g, seed);
            }
        }
        else
        {
            std::optional<sampler> s;
            const std::string error = fuzz::documented_error([&] { s.emplace(p); });
            fuzz::trace(error.empty() ? "sampler" : error);
            if (error.empty())
            {
                run_generate(model, prompt, *s, g, seed);
            }
        }
        model.calls = 0;
        run_beam(model, prompt, b);
    }
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    fuzz::input in(data, size);
    fuzz::by_row_type(in, [&](auto type, unsigned flags) { run<decltype(type)>(in, flags); });
    return 0;
}
