// xsampler_bench: every stage beside the floor and a naive reference, on the
// same rows, in the same run.
//
// Rows: float32 logits drawn N(0, 3^2) with a fixed seed; `peaked` variants
// raise one logit by 15 (a confident step). Each case times the whole call an
// engine makes per token (the row in, the token out) with the workspace reused
// across iterations. Names are a contract other tooling reads.
//
//   xsampler_bench --benchmark_filter='/128256$' --benchmark_repetitions=5 \
//                  --benchmark_report_aggregates_only=true
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <xsimd/xsimd.hpp>
#include <xtensor/xadapt.hpp>
#include <xtensor/xtensor.hpp>

#include <xsampler/xsampler.hpp>

namespace
{
    const std::int64_t vocabs[] = {32000, 50257, 128256, 262144};

    // N(0, sigma^2) float32 logits, fixed seed; `peak` is added to one token.
    const std::vector<float>& logits(std::size_t vocab, bool peaked)
    {
        static std::vector<std::vector<float>> cache(8);
        const std::size_t slot = std::size_t(std::find(std::begin(vocabs), std::end(vocabs), std::int64_t(vocab)) -
                                             std::begin(vocabs)) * 2 + (peaked ? 1 : 0);
        auto& row = cache[slot];
        if (row.empty())
        {
            xsampler::philox4x32 rng(20261129, vocab);
            row.resize(vocab);
            for (auto& x : row)
            {
                x = float(xsampler::normal(3.0, rng));
            }
            if (peaked)
            {
                row[vocab / 3] += 15.0f;
            }
        }
        return row;
    }

    auto adapt(const std::vector<float>& row)
    {
        return xt::adapt(row.data(), row.size(), xt::no_ownership(), std::vector<std::size_t>{row.size()});
    }

    void finish(benchmark::State& state, std::size_t vocab)
    {
        state.SetItemsProcessed(std::int64_t(state.iterations()) * std::int64_t(vocab));
    }

    // The floor: one max pass and one exp-sum pass over the row, vectorised
    // with xsimd (float lanes, xsimd's exp) — the least work of any exact
    // sampler that needs the softmax normaliser.
    float floor_max_expsum(const float* x, std::size_t n)
    {
        using batch = xsimd::batch<float>;
        constexpr std::size_t w = batch::size;
        const std::size_t vec_end = n - n % (4 * w);
        batch m0(x[0]), m1(x[0]), m2(x[0]), m3(x[0]);
        for (std::size_t i = 0; i < vec_end; i += 4 * w)
        {
            m0 = xsimd::max(m0, batch::load_unaligned(x + i));
            m1 = xsimd::max(m1, batch::load_unaligned(x + i + w));
            m2 = xsimd::max(m2, batch::load_unaligned(x + i + 2 * w));
            m3 = xsimd::max(m3, batch::load_unaligned(x + i + 3 * w));
        }
        alignas(64) float lanes[w];
        xsimd::max(xsimd::max(m0, m1), xsimd::max(m2, m3)).store_aligned(lanes);
        float m = *std::max_element(lanes, lanes + w);
        for (std::size_t i = vec_end; i < n; ++i)
        {
            m = std::max(m, x[i]);
        }
        const batch vm(m);
        batch s0(0.0f), s1(0.0f);
        for (std::size_t i = 0; i < vec_end; i += 4 * w)
        {
            s0 += xsimd::exp(batch::load_unaligned(x + i) - vm) + xsimd::exp(batch::load_unaligned(x + i + w) - vm);
            s1 += xsimd::exp(batch::load_unaligned(x + i + 2 * w) - vm) +
                  xsimd::exp(batch::load_unaligned(x + i + 3 * w) - vm);
        }
        float s = xsimd::hadd(s0 + s1);
        for (std::size_t i = vec_end; i < n; ++i)
        {
            s += std::exp(x[i] - m);
        }
        return m + std::log(s);
    }

    /// The naive references' draw: the first of `kept` entries whose running
    /// weight passes `target` (the last if rounding leaves none).
    template <class Weight, class Id>
    std::int32_t naive_draw(std::size_t kept, double target, Weight weight, Id id)
    {
        double run = 0.0;
        for (std::size_t i = 0; i < kept; ++i)
        {
            run += weight(i);
            if (run > target)
            {
                return id(i);
            }
        }
        return id(kept - 1);
    }

    void BM_floor(benchmark::State& state)
    {
        const auto& row = logits(std::size_t(state.range(0)), false);
        for (auto _ : state)
        {
            benchmark::DoNotOptimize(floor_max_expsum(row.data(), row.size()));
        }
        finish(state, row.size());
    }

    void BM_greedy(benchmark::State& state)
    {
        const auto& row = logits(std::size_t(state.range(0)), false);
        const auto view = adapt(row);
        for (auto _ : state)
        {
            benchmark::DoNotOptimize(xsampler::greedy(view));
        }
        finish(state, row.size());
    }

    template <class Chain>
    void run_chain(benchmark::State& state, Chain chain, bool peaked)
    {
        const auto& row = logits(std::size_t(state.range(0)), peaked);
        const auto view = adapt(row);
        xsampler::philox4x32 rng(1);
        for (auto _ : state)
        {
            benchmark::DoNotOptimize(chain.sample(view, {}, rng));
        }
        finish(state, row.size());
    }

    void BM_sample_temperature(benchmark::State& state)
    {
        run_chain(state, xsampler::chain{xsampler::temperature{0.8}}, false);
    }
    void BM_sample_top_k(benchmark::State& state)
    {
        run_chain(state, xsampler::chain{xsampler::temperature{0.8}, xsampler::top_k{40}}, false);
    }
    void BM_sample_top_p(benchmark::State& state)
    {
        run_chain(state, xsampler::chain{xsampler::temperature{0.8}, xsampler::top_p{0.95}}, false);
    }
    void BM_sample_top_p_peaked(benchmark::State& state)
    {
        run_chain(state, xsampler::chain{xsampler::temperature{0.8}, xsampler::top_p{0.95}}, true);
    }
    void BM_sample_min_p(benchmark::State& state)
    {
        run_chain(state, xsampler::chain{xsampler::temperature{0.8}, xsampler::min_p{0.05}}, false);
    }
    // epsilon and eta (exact thresholds: a Z pass, for eta an entropy pass,
    // then one compare pass), transformers' suggested values.
    void BM_epsilon(benchmark::State& state)
    {
        run_chain(state, xsampler::chain{xsampler::temperature{0.8}, xsampler::epsilon{3e-4}}, false);
    }
    void BM_eta(benchmark::State& state)
    {
        run_chain(state, xsampler::chain{xsampler::temperature{0.8}, xsampler::eta{6e-4}}, false);
    }
    // p-less (keep p >= sum p^2): one pass for Z and the weights, one for
    // sum w^2 and its bound, one compare pass.
    void BM_p_less(benchmark::State& state)
    {
        run_chain(state, xsampler::chain{xsampler::temperature{0.8}, xsampler::p_less{}}, false);
    }
    // FlashInfer's joint top-k/top-p (K 40, P 0.95, both on the whole row):
    // top_p's nucleus on the whole row, then the best 40 of it. Its naive
    // reference is BM_reference_sort_top_p's sort and running sum, cut at K.
    void BM_top_k_top_p(benchmark::State& state)
    {
        run_chain(state, xsampler::chain{xsampler::temperature{0.8}, xsampler::top_k_top_p{40, 0.95}}, false);
    }
    // top-H (H 0.4): the 100 best selected, their entropy prefix.
    void BM_top_h(benchmark::State& state)
    {
        run_chain(state, xsampler::chain{xsampler::temperature{0.8}, xsampler::top_h{0.4}}, false);
    }
    // top-H as transformers does it, in double: the 100 best by a partial
    // sort, their softmax and entropy terms, the prefix, one draw.
    void BM_reference_top_h(benchmark::State& state)
    {
        const auto& row = logits(std::size_t(state.range(0)), false);
        std::vector<std::pair<float, std::int32_t>> all(row.size());
        std::vector<double> q(100);
        xsampler::philox4x32 rng(1);
        for (auto _ : state)
        {
            for (std::size_t i = 0; i < row.size(); ++i)
            {
                all[i] = {row[i] / 0.8f, std::int32_t(i)};
            }
            const std::size_t n = std::min<std::size_t>(100, all.size());
            std::partial_sort(all.begin(), all.begin() + std::ptrdiff_t(n), all.end(), [](const auto& a, const auto& b) {
                return a.first > b.first || (a.first == b.first && a.second < b.second);
            });
            double z = 0.0;
            for (std::size_t i = 0; i < n; ++i)
            {
                q[i] = std::exp(double(all[i].first - all[0].first));
                z += q[i];
            }
            double entropy = 0.0;
            for (std::size_t i = 0; i < n; ++i)
            {
                q[i] /= z;
                entropy -= q[i] * std::log(q[i]);
            }
            std::size_t kept = 1;
            double cum = -q[0] * std::log(q[0]);
            while (kept < n && cum - q[kept] * std::log(q[kept]) <= 0.4 * entropy)
            {
                cum -= q[kept] * std::log(q[kept]);
                ++kept;
            }
            double mass = 0.0;
            for (std::size_t i = 0; i < kept; ++i)
            {
                mass += q[i];
            }
            const double target = xsampler::uniform01(rng) * mass;
            benchmark::DoNotOptimize(naive_draw(
                kept, target, [&](std::size_t i) { return q[i]; }, [&](std::size_t i) { return all[i].second; }));
        }
        finish(state, row.size());
    }
    // p-less done plainly, in double: softmax, sum p^2, the kept tokens
    // listed, renormalised, one draw.
    void BM_reference_p_less(benchmark::State& state)
    {
        const auto& row = logits(std::size_t(state.range(0)), false);
        std::vector<double> p(row.size());
        std::vector<std::int32_t> kept;
        kept.reserve(row.size());
        xsampler::philox4x32 rng(1);
        for (auto _ : state)
        {
            const float m = *std::max_element(row.begin(), row.end());
            double z = 0.0;
            for (std::size_t i = 0; i < row.size(); ++i)
            {
                p[i] = std::exp(double(row[i] - m) / 0.8);
                z += p[i];
            }
            double b = 0.0;
            for (double& x : p)
            {
                x /= z;
                b += x * x;
            }
            kept.clear();
            double mass = 0.0;
            for (std::size_t i = 0; i < row.size(); ++i)
            {
                if (p[i] >= b)
                {
                    kept.push_back(std::int32_t(i));
                    mass += p[i];
                }
            }
            const double target = xsampler::uniform01(rng) * mass;
            benchmark::DoNotOptimize(naive_draw(
                kept.size(), target, [&](std::size_t i) { return p[std::size_t(kept[i])]; },
                [&](std::size_t i) { return kept[i]; }));
        }
        finish(state, row.size());
    }
    // llama.cpp's default chain without penalties.
    auto llama_default()
    {
        return xsampler::chain{xsampler::top_k{40}, xsampler::top_p{0.95}, xsampler::min_p{0.05},
                               xsampler::temperature{0.8}};
    }
    void BM_sample_chain(benchmark::State& state) { run_chain(state, llama_default(), false); }
    void BM_sample_chain_peaked(benchmark::State& state) { run_chain(state, llama_default(), true); }

    // XTC on the whole row: firing at every call (its worst case: the
    // threshold needs Z, one exp-sum pass more than the draw's), at half of
    // them, and after llama.cpp's chain (its place in llama.cpp's order,
    // after min_p: a short list).
    void BM_sample_xtc(benchmark::State& state)
    {
        run_chain(state, xsampler::chain{xsampler::temperature{0.8}, xsampler::xtc{1.0, 0.01}}, false);
    }
    void BM_sample_xtc_half(benchmark::State& state)
    {
        run_chain(state, xsampler::chain{xsampler::temperature{0.8}, xsampler::xtc{0.5, 0.01}}, false);
    }
    void BM_sample_chain_xtc(benchmark::State& state)
    {
        run_chain(state,
                  xsampler::chain{xsampler::top_k{40}, xsampler::top_p{0.95}, xsampler::min_p{0.05},
                                  xsampler::xtc{0.5, 0.1}, xsampler::temperature{0.8}},
                  false);
    }
    // Mirostat after temperature (llama.cpp's chain with --mirostat): v1
    // selects its m = 100 tokens and then its top k; v2 thresholds at
    // 2^-mu, which needs Z.
    void BM_sample_mirostat_v1(benchmark::State& state)
    {
        run_chain(state, xsampler::chain{xsampler::temperature{0.8}, xsampler::mirostat{1, 5.0, 0.1}}, false);
    }
    void BM_sample_mirostat_v2(benchmark::State& state)
    {
        run_chain(state, xsampler::chain{xsampler::temperature{0.8}, xsampler::mirostat{2, 5.0, 0.1}}, false);
    }

    // The same chain composed at run time (stage table, std::variant slots).
    xsampler::sampling_params llama_default_params()
    {
        xsampler::sampling_params p;
        p.top_k = 40;
        p.top_p = 0.95;
        p.min_p = 0.05;
        p.temperature = 0.8;
        p.order = xsampler::parse_stage_order("top_k;top_p;min_p;temperature");
        return p;
    }
    xsampler::sampler llama_default_sampler() { return xsampler::sampler(llama_default_params()); }
    void BM_sampler_chain(benchmark::State& state) { run_chain(state, llama_default_sampler(), false); }

    // The processors, each on its own, before the run-time default chain, with
    // a 4,096-token history (2,048 prompt, 2,048 generated) drawn from 3,000
    // ids, so that it repeats as text does: ~63 distinct ids in the last 64,
    // ~2,200 in the whole. The history is the same at every iteration (the
    // penalties' counts stay current; a decode step adds one token more).
    // BM_sampler_history is the chain alone with that history: each
    // processor's cost is its time minus that one.
    const std::vector<xsampler::token_id>& long_history()
    {
        static const std::vector<xsampler::token_id> h = [] {
            xsampler::philox4x32 rng(7);
            std::vector<xsampler::token_id> ids(4096);
            for (auto& id : ids)
            {
                id = xsampler::token_id(xsampler::uniform01(rng) * 3000.0);
            }
            return ids;
        }();
        return h;
    }
    // The same history with its ids spread over the vocabulary (id * 42:
    // up to 125,958, a token in most 64-token blocks of a 128,256 row).
    const std::vector<xsampler::token_id>& spread_history()
    {
        static const std::vector<xsampler::token_id> h = [] {
            auto ids = long_history();
            for (auto& id : ids)
            {
                id *= 42;
            }
            return ids;
        }();
        return h;
    }
    void run_with_history(benchmark::State& state, xsampler::sampling_params p, bool spread = false)
    {
        const auto& row = logits(std::size_t(state.range(0)), false);
        const auto view = adapt(row);
        const xsampler::token_history history(spread ? spread_history() : long_history(), 2048);
        xsampler::sampler s(std::move(p));
        xsampler::philox4x32 rng(1);
        for (auto _ : state)
        {
            benchmark::DoNotOptimize(s.sample(view, history, rng));
        }
        finish(state, row.size());
    }
    void BM_sampler_history(benchmark::State& state) { run_with_history(state, llama_default_params()); }
    // The llama.cpp chain with one processor first.
    xsampler::sampling_params llama_params_after(const std::string& processor)
    {
        auto p = llama_default_params();
        p.order = xsampler::parse_stage_order(processor + ";top_k;top_p;min_p;temperature");
        return p;
    }
    // repeat 1.1, presence 0.5, frequency 0.5 in `scope`.
    xsampler::sampling_params penalties_params(xsampler::penalty_scope scope)
    {
        auto p = llama_params_after("penalties");
        p.repeat_penalty = 1.1;
        p.presence_penalty = 0.5;
        p.frequency_penalty = 0.5;
        p.penalty_scope = scope;
        return p;
    }
    void BM_sampler_penalties(benchmark::State& state)
    {
        run_with_history(state, penalties_params(xsampler::penalty_scope::window));
    }
    // Output scope: repetition over all 4,096 tokens, presence and frequency
    // over the 2,048 generated: ~2,250 distinct ids edited.
    void BM_sampler_penalties_output(benchmark::State& state)
    {
        run_with_history(state, penalties_params(xsampler::penalty_scope::output));
    }
    // The same over ids spread across the row: most blocks copied.
    void BM_sampler_penalties_output_spread(benchmark::State& state)
    {
        run_with_history(state, penalties_params(xsampler::penalty_scope::output), true);
    }
    void BM_sampler_dry(benchmark::State& state)
    {
        auto p = llama_params_after("dry");
        p.dry_multiplier = 0.8;
        run_with_history(state, p);
    }
    void BM_sampler_logit_bias(benchmark::State& state)
    {
        auto p = llama_params_after("logit_bias");
        for (int i = 0; i < 100; ++i)
        {
            p.logit_bias.emplace_back(xsampler::token_id(i * 997 % state.range(0)), i % 2 == 0 ? 1.5 : -2.0);
        }
        run_with_history(state, p);
    }
    // 100 three-id sequences, half of them matching the history's last two
    // ids (so their third is biased), the others not.
    void BM_sampler_sequence_bias(benchmark::State& state)
    {
        auto p = llama_params_after("sequence_bias");
        const auto& h = long_history();
        for (int i = 0; i < 100; ++i)
        {
            const auto third = xsampler::token_id(i * 997 % state.range(0));
            p.sequence_bias.push_back({{i % 2 == 0 ? h[h.size() - 2] : xsampler::token_id(i), h.back(), third},
                                       i % 2 == 0 ? 1.5 : -2.0});
        }
        run_with_history(state, p);
    }
    void BM_sampler_no_repeat_ngram(benchmark::State& state)
    {
        auto p = llama_params_after("no_repeat_ngram");
        p.no_repeat_ngram_size = 3;
        run_with_history(state, p);
    }
    // An allow list of 1,000 ids: the chain then runs on 1,000 tokens.
    void BM_sampler_allow_1000(benchmark::State& state)
    {
        auto p = llama_params_after("token_mask");
        for (int i = 0; i < 1000; ++i)
        {
            p.allowed_token_ids.push_back(xsampler::token_id(i * 101 % state.range(0)));
        }
        run_with_history(state, p);
    }

    // A processor before the chain (min_tokens masking one eos id): the edit
    // costs one block copy, and top_k no longer runs in the validation pass.
    void BM_sample_chain_processor(benchmark::State& state)
    {
        const std::vector<xsampler::token_id> eos = {xsampler::token_id(state.range(0) / 2)};
        run_chain(state,
                  xsampler::chain{xsampler::min_tokens(1, eos), xsampler::top_k{40}, xsampler::top_p{0.95},
                                  xsampler::min_p{0.05}, xsampler::temperature{0.8}},
                  false);
    }

    // generate over a model that returns the benchmark row at every step,
    // through the run-time default chain: 32 tokens an iteration (divide the
    // time by 32 for a token), without and with the diagnostics.
    void run_generate(benchmark::State& state, bool diagnostics)
    {
        const auto& row = logits(std::size_t(state.range(0)), false);
        const auto view = adapt(row);
        const auto model = [&](xsampler::token_span) { return view; };
        auto s = llama_default_sampler();
        xsampler::generate_options o;
        o.max_tokens = 32;
        o.model_logprobs = o.entropy = diagnostics;
        o.top_logprobs = diagnostics ? 5 : 0;
        xsampler::philox4x32 rng(1);
        for (auto _ : state)
        {
            benchmark::DoNotOptimize(xsampler::generate(model, {0}, s, o, rng));
        }
        state.SetItemsProcessed(std::int64_t(state.iterations()) * 32 * std::int64_t(row.size()));
    }
    void BM_generate_chain(benchmark::State& state) { run_generate(state, false); }
    void BM_generate_chain_diagnostics(benchmark::State& state) { run_generate(state, true); }

    // One request stepped 32 tokens an iteration over the run-time default
    // chain and the benchmark row: a hand-written loop (the history kept by
    // hand, sampler.sample), then a sequence without stops, then one with a
    // vocabulary and four stop strings that never match (each token's bytes
    // decoded, matched and held back). The sequence's overhead per token is
    // its time less the loop's, over 32; the targets are 0.05x and 0.1x
    // BM_floor.
    const xsampler::vocabulary& words(std::size_t vocab)
    {
        static std::map<std::size_t, xsampler::vocabulary> made;
        auto at = made.find(vocab);
        if (at == made.end())
        {
            std::vector<std::string> tokens;
            for (std::size_t i = 0; i < vocab; ++i)
            {
                tokens.push_back(" w" + std::to_string(i));
            }
            at = made.emplace(vocab, xsampler::vocabulary(std::move(tokens), {})).first;
        }
        return at->second;
    }
    constexpr std::size_t steps_per_request = 32;
    void BM_sampler_loop(benchmark::State& state)
    {
        const auto& row = logits(std::size_t(state.range(0)), false);
        const auto view = adapt(row);
        auto s = llama_default_sampler();
        std::vector<xsampler::token_id> history;
        history.reserve(steps_per_request + 1);
        for (auto _ : state)
        {
            history.assign(1, 0);
            s.reset();
            while (history.size() <= steps_per_request)
            {
                history.push_back(s.sample(view, xsampler::token_history(history, 1)).id);
            }
            benchmark::DoNotOptimize(history.data());
        }
        state.SetItemsProcessed(std::int64_t(state.iterations()) * std::int64_t(steps_per_request * row.size()));
    }
    void run_sequence(benchmark::State& state, bool stops)
    {
        const auto& row = logits(std::size_t(state.range(0)), false);
        const auto view = adapt(row);
        auto s = llama_default_sampler();
        xsampler::sequence_options o;
        o.max_tokens = steps_per_request;
        if (stops)
        {
            o.vocab = &words(row.size());
            o.stop_strings = {"\n\n", "###", "</answer>", "User:"};
        }
        const std::vector<xsampler::token_id> prompt = {0};
        xsampler::basic_sequence<xsampler::sampler&> seq(s, prompt, o);
        for (auto _ : state)
        {
            seq.reset(prompt);
            while (!seq.finished())
            {
                benchmark::DoNotOptimize(seq.step(view).id);
            }
        }
        state.SetItemsProcessed(std::int64_t(state.iterations()) * std::int64_t(steps_per_request * row.size()));
    }
    void BM_sequence_step(benchmark::State& state) { run_sequence(state, false); }
    void BM_sequence_step_stops(benchmark::State& state) { run_sequence(state, true); }

    // The seed text's algorithm done plainly: divide by T, sort everything,
    // softmax, cumulative sum, inclusive cut, renormalise, draw.
    void BM_reference_sort_top_p(benchmark::State& state)
    {
        const auto& row = logits(std::size_t(state.range(0)), false);
        std::vector<std::pair<float, std::int32_t>> sorted(row.size());
        std::vector<double> probs(row.size());
        xsampler::philox4x32 rng(1);
        for (auto _ : state)
        {
            for (std::size_t i = 0; i < row.size(); ++i)
            {
                sorted[i] = {row[i] / 0.8f, std::int32_t(i)};
            }
            std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
                return a.first > b.first || (a.first == b.first && a.second < b.second);
            });
            double z = 0.0;
            for (std::size_t i = 0; i < sorted.size(); ++i)
            {
                probs[i] = std::exp(double(sorted[i].first - sorted[0].first));
                z += probs[i];
            }
            double cum = 0.0;
            std::size_t kept = sorted.size();
            for (std::size_t i = 0; i < sorted.size(); ++i)
            {
                cum += probs[i] / z;
                if (cum >= 0.95)
                {
                    kept = i + 1;
                    break;
                }
            }
            const double target = xsampler::uniform01(rng) * cum * z;
            benchmark::DoNotOptimize(naive_draw(
                kept, target, [&](std::size_t i) { return probs[i]; }, [&](std::size_t i) { return sorted[i].second; }));
        }
        finish(state, row.size());
    }

    // [batch, vocab] rows, each a rotation of the benchmark row: different, equally hard.
    xt::xtensor<float, 2> batch_rows(std::size_t batch, std::size_t vocab)
    {
        const auto& row = logits(vocab, false);
        xt::xtensor<float, 2> rows = xt::empty<float>({batch, vocab});
        for (std::size_t r = 0; r < batch; ++r)
        {
            std::rotate_copy(row.begin(), row.begin() + std::ptrdiff_t(r * 997 % vocab), row.end(),
                             rows.begin() + std::ptrdiff_t(r * vocab));
        }
        return rows;
    }

    // B rows of V through llama.cpp's default chain, one sampler (own
    // parameters, own philox stream) per row, on 1 or 2 threads.
    void BM_batch_chain(benchmark::State& state)
    {
        const auto batch = std::size_t(state.range(0));
        const auto vocab = std::size_t(state.range(1));
        const xt::xtensor<float, 2> rows = batch_rows(batch, vocab);
        auto p = llama_default_params();
        std::vector<xsampler::sampler> samplers;
        for (std::size_t r = 0; r < batch; ++r)
        {
            p.seed = r;
            samplers.emplace_back(p);
        }
        std::vector<xsampler::workspace> pool(std::size_t(state.range(2)));
        std::vector<xsampler::sampled_token> out;
        for (auto _ : state)
        {
            xsampler::sample_batch(rows, samplers, pool, out);
            benchmark::DoNotOptimize(out.data());
        }
        state.SetItemsProcessed(std::int64_t(state.iterations()) * std::int64_t(batch * vocab));
    }

    // The same batch as sequences in slots (the engine's form), half of
    // them refilled with a new request (reset) after every step, the slots
    // listed in reverse row order.
    void BM_batch_slots(benchmark::State& state)
    {
        const auto batch = std::size_t(state.range(0));
        const auto vocab = std::size_t(state.range(1));
        const xt::xtensor<float, 2> rows = batch_rows(batch, vocab);
        auto p = llama_default_params();
        const std::vector<xsampler::token_id> prompt = {1, 2, 3};
        std::vector<xsampler::sequence> seqs;
        seqs.reserve(batch);
        for (std::size_t r = 0; r < batch; ++r)
        {
            p.seed = r;
            seqs.emplace_back(xsampler::sampler(p), prompt, xsampler::sequence_options());
        }
        std::vector<xsampler::slot> slots;
        for (std::size_t r = batch; r-- > 0;)
        {
            slots.push_back({r, &seqs[r]});
        }
        std::vector<xsampler::workspace> pool(std::size_t(state.range(2)));
        std::vector<xsampler::step_result> out;
        std::size_t step = 0;
        for (auto _ : state)
        {
            xsampler::sample_batch(rows, slots, pool, out);
            benchmark::DoNotOptimize(out.data());
            for (std::size_t r = ++step % 2; r < batch; r += 2)
            {
                seqs[r].reset(prompt);
            }
        }
        state.SetItemsProcessed(std::int64_t(state.iterations()) * std::int64_t(batch * vocab));
    }

    // --- the entropy filters: typical, top_n_sigma, the dynamic temperature
    //     (each after temperature 0.8, as an engine runs them), and typical
    //     done plainly (sort everything by distance) ---
    void BM_typical(benchmark::State& state)
    {
        run_chain(state, xsampler::chain{xsampler::temperature{0.8}, xsampler::typical{0.9}}, false);
    }
    void BM_top_n_sigma(benchmark::State& state)
    {
        run_chain(state, xsampler::chain{xsampler::temperature{0.8}, xsampler::top_n_sigma{1.0}}, false);
    }
    void BM_dynatemp(benchmark::State& state)
    {
        run_chain(state, xsampler::chain{xsampler::temperature{0.8, 0.5, 1.0}}, false);
    }
    void BM_reference_sort_typical(benchmark::State& state)
    {
        const auto& row = logits(std::size_t(state.range(0)), false);
        std::vector<std::pair<double, std::int32_t>> order(row.size());
        std::vector<double> probs(row.size());
        xsampler::philox4x32 rng(1);
        for (auto _ : state)
        {
            const float mx = *std::max_element(row.begin(), row.end());
            double z = 0.0;
            for (std::size_t i = 0; i < row.size(); ++i)
            {
                probs[i] = std::exp(double(row[i] - mx) / 0.8);
                z += probs[i];
            }
            double h = 0.0;
            for (std::size_t i = 0; i < row.size(); ++i)
            {
                probs[i] /= z;
                h -= probs[i] > 0.0 ? probs[i] * std::log(probs[i]) : 0.0;
            }
            for (std::size_t i = 0; i < row.size(); ++i)
            {
                order[i] = {std::fabs(-std::log(probs[i]) - h), std::int32_t(i)};
            }
            std::sort(order.begin(), order.end());
            double cum = 0.0;
            std::size_t kept = order.size();
            for (std::size_t i = 0; i < order.size(); ++i)
            {
                cum += probs[std::size_t(order[i].second)];
                if (cum >= 0.9)
                {
                    kept = i + 1;
                    break;
                }
            }
            const double target = xsampler::uniform01(rng) * cum;
            benchmark::DoNotOptimize(naive_draw(
                kept, target, [&](std::size_t i) { return probs[std::size_t(order[i].second)]; },
                [&](std::size_t i) { return order[i].second; }));
        }
        finish(state, row.size());
    }

    // Speculative verification (speculative.hpp): k = 4 draft tokens against
    // the run-time llama.cpp default chain (/V/0) or temperature 0.8 alone
    // (/V/1: every token kept), rows [5, V] (the row above at every
    // position), a 16-token prompt. The draft's q equals the target's
    // final distribution, so every token is accepted: five filters, four
    // tests and the bonus's draw, the most work a call does. The floor of
    // the call is 5x BM_floor. BM_reference_verify_draft is the way an
    // engine builds it from final_distribution (a sorted copy per position).
    struct verify_case
    {
        xt::xtensor<float, 2> rows;
        xt::xtensor<double, 2> q;
        std::vector<xsampler::token_id> history;
    };
    // The dense case: temperature 0.8 alone keeps every token (the
    // reference sorts all of them, five times).
    xsampler::sampler verify_target(bool dense)
    {
        xsampler::sampling_params p;
        p.temperature = 0.8;
        return dense ? xsampler::sampler(p) : llama_default_sampler();
    }
    const verify_case& verify_rows(std::size_t vocab, bool dense)
    {
        static std::map<std::pair<std::size_t, bool>, verify_case> made;
        auto at = made.find({vocab, dense});
        if (at == made.end())
        {
            verify_case v;
            const auto& row = logits(vocab, false);
            v.rows = xt::empty<float>({std::size_t(5), vocab});
            for (std::size_t i = 0; i < 5; ++i)
            {
                std::copy(row.begin(), row.end(), &v.rows(i, 0));
            }
            auto s = verify_target(dense);
            const xsampler::distribution d = s.final_distribution(adapt(row));
            v.q = xt::zeros<double>({std::size_t(4), vocab});
            for (std::size_t i = 0; i < 4; ++i)
            {
                for (std::size_t j = 0; j < d.ids.size(); ++j)
                {
                    v.q(i, std::size_t(d.ids[j])) = d.probs[j];
                }
            }
            v.history.assign(16, 1);
            v.history.insert(v.history.end(), 4, d.ids[0]);
            at = made.emplace(std::make_pair(vocab, dense), std::move(v)).first;
        }
        return at->second;
    }
    void BM_verify_draft(benchmark::State& state)
    {
        const bool dense = state.range(1) != 0;
        const auto& v = verify_rows(std::size_t(state.range(0)), dense);
        auto s = verify_target(dense);
        xsampler::philox4x32 rng(1);
        std::vector<xsampler::sampled_token> out;
        std::size_t accepted = 0;
        for (auto _ : state)
        {
            accepted += xsampler::verify_draft(s, v.rows, xsampler::token_history(v.history, 16), v.q, {}, out, rng);
            benchmark::DoNotOptimize(out.data());
        }
        state.counters["accepted"] = double(accepted) / double(state.iterations());
        finish(state, v.rows.size());
    }
    void BM_reference_verify_draft(benchmark::State& state)
    {
        const bool dense = state.range(1) != 0;
        const auto& v = verify_rows(std::size_t(state.range(0)), dense);
        auto s = verify_target(dense);
        xsampler::philox4x32 rng(1);
        std::vector<xsampler::token_id> out;
        std::size_t accepted = 0;
        for (auto _ : state)
        {
            out.clear();
            for (std::size_t i = 0; i <= 4; ++i)
            {
                const xsampler::distribution d = s.final_distribution(
                    xt::view(v.rows, i, xt::all()),
                    xsampler::token_history(xsampler::token_span(v.history).subspan(0, 16 + i), 16));
                if (i == 4)  // the bonus
                {
                    const double target = xsampler::uniform01(rng);
                    out.push_back(naive_draw(
                        d.ids.size(), target, [&](std::size_t j) { return d.probs[j]; },
                        [&](std::size_t j) { return d.ids[j]; }));
                    break;
                }
                const xsampler::token_id x = v.history[16 + i];
                const auto at = std::find(d.ids.begin(), d.ids.end(), x);
                const double p = at == d.ids.end() ? 0.0 : d.probs[std::size_t(at - d.ids.begin())];
                if (xsampler::uniform01(rng) < p / v.q(i, std::size_t(x)))
                {
                    out.push_back(x);
                    ++accepted;
                    continue;
                }
                std::vector<double> r(d.ids.size());
                double total = 0.0;
                for (std::size_t j = 0; j < d.ids.size(); ++j)
                {
                    r[j] = std::max(0.0, d.probs[j] - v.q(i, std::size_t(d.ids[j])));
                    total += r[j];
                }
                const double target = xsampler::uniform01(rng) * total;
                out.push_back(naive_draw(
                    r.size(), target, [&](std::size_t j) { return r[j]; }, [&](std::size_t j) { return d.ids[j]; }));
                break;
            }
            benchmark::DoNotOptimize(out.data());
        }
        state.counters["accepted"] = double(accepted) / double(state.iterations());
        finish(state, v.rows.size());
    }

    // fp16 and bf16 rows (issue 22): the float benchmark's row rounded to H,
    // read in place through xt::adapt, named as the float case with _f16 or
    // _bf16 appended; beside it _f16_wide / _bf16_wide, the float row of the
    // same values (rounding to 16 bits makes ties, which some stages take
    // other paths for): the 16-bit row's target is at most that row's time.
    template <class H>
    const std::vector<H>& half_logits(std::size_t vocab, bool peaked)
    {
        static std::map<std::pair<std::size_t, bool>, std::vector<H>> cache;
        auto& row = cache[{vocab, peaked}];
        if (row.empty())
        {
            for (const float x : logits(vocab, peaked))
            {
                row.push_back(H(x));
            }
        }
        return row;
    }
    template <class H>
    const std::vector<float>& widened_logits(std::size_t vocab, bool peaked)
    {
        static std::map<std::pair<std::size_t, bool>, std::vector<float>> cache;
        auto& row = cache[{vocab, peaked}];
        if (row.empty())
        {
            const auto& h = half_logits<H>(vocab, peaked);
            row.assign(h.begin(), h.end());
        }
        return row;
    }
    template <class R, class Chain>
    void run_chain_on(benchmark::State& state, const std::vector<R>& row, Chain& chain)
    {
        const auto view = xt::adapt(row.data(), row.size(), xt::no_ownership(), std::vector<std::size_t>{row.size()});
        xsampler::philox4x32 rng(1);
        for (auto _ : state)
        {
            benchmark::DoNotOptimize(chain.sample(view, {}, rng));
        }
        finish(state, row.size());
    }
    template <class H, class Chain>
    void run_chain_half(benchmark::State& state, Chain chain, bool peaked, bool wide)
    {
        if (wide)
        {
            run_chain_on(state, widened_logits<H>(std::size_t(state.range(0)), peaked), chain);
            return;
        }
        run_chain_on(state, half_logits<H>(std::size_t(state.range(0)), peaked), chain);
    }
    template <class H>
    void register_half(const std::string& suffix)
    {
        using namespace xsampler;
        const auto add = [&](const std::string& name, auto chain, bool peaked) {
            for (const bool wide : {false, true})
            {
                for (const auto v : vocabs)
                {
                    benchmark::RegisterBenchmark((name + "_" + suffix + (wide ? "_wide" : "")).c_str(),
                                                 [chain, peaked, wide](benchmark::State& s) {
                                                     run_chain_half<H>(s, chain, peaked, wide);
                                                 })
                        ->Arg(v)
                        ->Unit(benchmark::kMicrosecond);
                }
            }
        };
        for (const auto v : vocabs)
        {
            benchmark::RegisterBenchmark(("BM_greedy_" + suffix).c_str(), [](benchmark::State& state) {
                const auto& row = half_logits<H>(std::size_t(state.range(0)), false);
                const auto view = xt::adapt(row.data(), row.size(), xt::no_ownership(), std::vector<std::size_t>{row.size()});
                for (auto _ : state)
                {
                    benchmark::DoNotOptimize(greedy(view));
                }
                finish(state, row.size());
            })->Arg(v)->Unit(benchmark::kMicrosecond);
        }
        add("BM_sample_temperature", chain{temperature{0.8}}, false);
        add("BM_sample_top_k", chain{temperature{0.8}, top_k{40}}, false);
        add("BM_sample_top_p", chain{temperature{0.8}, top_p{0.95}}, false);
        add("BM_sample_top_p_peaked", chain{temperature{0.8}, top_p{0.95}}, true);
        add("BM_sample_min_p", chain{temperature{0.8}, min_p{0.05}}, false);
        add("BM_sample_chain", llama_default(), false);
        add("BM_eta", chain{temperature{0.8}, eta{6e-4}}, false);
        add("BM_sample_xtc", chain{temperature{0.8}, xtc{1.0, 0.01}}, false);
        add("BM_typical", chain{temperature{0.8}, typical{0.9}}, false);
        add("BM_top_n_sigma", chain{temperature{0.8}, top_n_sigma{1.0}}, false);
        add("BM_dynatemp", chain{temperature{0.8, 0.5, 1.0}}, false);
    }
    const bool half_registered = (register_half<xsampler::f16>("f16"), register_half<xsampler::bf16>("bf16"), true);

    void vocab_args(benchmark::internal::Benchmark* b)
    {
        for (const auto v : vocabs)
        {
            b->Arg(v);
        }
        b->Unit(benchmark::kMicrosecond);
    }
    // Each vocabulary with the llama.cpp default chain (0) and a dense one (1).
    void verify_args(benchmark::internal::Benchmark* b)
    {
        for (const std::int64_t dense : {0, 1})
        {
            for (const auto v : vocabs)
            {
                b->Args({v, dense});
            }
        }
        b->Unit(benchmark::kMicrosecond);
    }
}

BENCHMARK(BM_floor)->Apply(vocab_args);
BENCHMARK(BM_greedy)->Apply(vocab_args);
BENCHMARK(BM_sample_temperature)->Apply(vocab_args);
BENCHMARK(BM_sample_top_k)->Apply(vocab_args);
BENCHMARK(BM_sample_top_p)->Apply(vocab_args);
BENCHMARK(BM_sample_top_p_peaked)->Apply(vocab_args);
BENCHMARK(BM_sample_min_p)->Apply(vocab_args);
BENCHMARK(BM_epsilon)->Arg(128256);
BENCHMARK(BM_eta)->Arg(128256);
BENCHMARK(BM_p_less)->Arg(128256);
BENCHMARK(BM_reference_p_less)->Arg(128256);
BENCHMARK(BM_top_h)->Arg(128256);
BENCHMARK(BM_top_k_top_p)->Arg(128256);
BENCHMARK(BM_reference_top_h)->Arg(128256);
BENCHMARK(BM_sample_chain)->Apply(vocab_args);
BENCHMARK(BM_sample_chain_peaked)->Apply(vocab_args);
BENCHMARK(BM_sampler_chain)->Apply(vocab_args);
BENCHMARK(BM_sample_xtc)->Arg(128256);
BENCHMARK(BM_sample_xtc_half)->Arg(128256);
BENCHMARK(BM_sample_chain_xtc)->Arg(128256);
BENCHMARK(BM_sample_mirostat_v1)->Arg(128256);
BENCHMARK(BM_sample_mirostat_v2)->Arg(128256);
BENCHMARK(BM_sample_chain_processor)->Apply(vocab_args);
// The processors with a 4,096-token history, at V = 128256.
BENCHMARK(BM_sampler_history)->Arg(128256);
BENCHMARK(BM_sampler_penalties)->Arg(128256);
BENCHMARK(BM_sampler_penalties_output)->Arg(128256);
BENCHMARK(BM_sampler_penalties_output_spread)->Arg(128256);
BENCHMARK(BM_sampler_dry)->Arg(128256);
BENCHMARK(BM_sampler_logit_bias)->Arg(128256);
BENCHMARK(BM_sampler_sequence_bias)->Arg(128256);
BENCHMARK(BM_sampler_no_repeat_ngram)->Arg(128256);
BENCHMARK(BM_sampler_allow_1000)->Arg(128256);
// 32 tokens an iteration.
BENCHMARK(BM_generate_chain)->Apply(vocab_args);
BENCHMARK(BM_generate_chain_diagnostics)->Apply(vocab_args);
BENCHMARK(BM_sampler_loop)->Apply(vocab_args);
BENCHMARK(BM_sequence_step)->Apply(vocab_args);
BENCHMARK(BM_sequence_step_stops)->Apply(vocab_args);
BENCHMARK(BM_verify_draft)->Apply(verify_args);
BENCHMARK(BM_reference_verify_draft)->Apply(verify_args);
BENCHMARK(BM_reference_sort_top_p)->Apply(vocab_args);

BENCHMARK(BM_typical)->Apply(vocab_args);
BENCHMARK(BM_top_n_sigma)->Apply(vocab_args);
BENCHMARK(BM_dynatemp)->Apply(vocab_args);
BENCHMARK(BM_reference_sort_typical)->Arg(128256)->Unit(benchmark::kMicrosecond);
// Names: BM_batch_chain/B/V/threads.
BENCHMARK(BM_batch_chain)->Args({64, 128256, 1})->Args({64, 128256, 2})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_batch_slots)->Args({64, 128256, 1})->Args({64, 128256, 2})->UseRealTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
