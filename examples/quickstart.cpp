// quickstart: the README's tour — sample one token, inspect the distribution,
// build a sampler from run-time parameters, run a decode loop (a test checks
// its output against tests/quickstart.txt).
#include <cmath>
#include <cstdio>
#include <vector>
#include <xtensor/xtensor.hpp>
#include <xsampler/xsampler.hpp>

int main()
{
    // One row of logits from the LM head (any xtensor expression: a tensor,
    // a row view of [batch, vocab], or xt::adapt over the engine's float*).
    xt::xtensor<float, 1> logits = {1.0f, 3.5f, 3.0f, -2.0f, 0.5f, -INFINITY};

    // llama.cpp's default chain, composed at compile time.
    xsampler::chain chain{xsampler::top_k{40}, xsampler::top_p{0.95}, xsampler::min_p{0.05},
                          xsampler::temperature{0.8}};
    xsampler::philox4x32 rng(/*seed*/ 42, /*stream*/ 0);
    std::vector<xsampler::token_id> history = {1, 2};  // prompt + generated so far

    xsampler::sampled_token t = chain.sample(logits, history, rng);
    std::printf("sampled %d (log p = %.4f)\n", t.id, t.logprob);

    // What it draws from: ids and renormalised probabilities.
    auto d = chain.final_distribution(logits, history);
    for (std::size_t i = 0; i < d.ids.size(); ++i)
        std::printf("  %d: %.4f\n", d.ids[i], d.probs[i]);

    // The same, built at run time from a request's parameters.
    xsampler::sampling_params p;
    p.temperature = 0.0;  // greedy
    xsampler::sampler greedy(p);
    std::printf("greedy %d\n", greedy.sample(logits, history).id);

    // A decode loop: a sequence keeps the history with the prompt marked (so
    // penalties and constraints see what was generated), stops, and releases
    // the text as it becomes safe to show (" sat" waits: it may become " sat.").
    xsampler::vocabulary vocab({"<eos>", " The", " cat", " sat", ".", " on"}, /*special*/ {0});
    auto model = [](xsampler::token_span tokens) {  // a stand-in for the LM: it likes id + 1
        xt::xtensor<float, 1> row = xt::zeros<float>({6});
        row(std::size_t(tokens[tokens.size() - 1] % 5 + 1)) = 5.0f;
        return row;
    };
    xsampler::sequence_options o;
    o.max_tokens = 16;
    o.eos = {0};
    o.stop_strings = {" sat."};
    o.vocab = &vocab;
    p.temperature = 0.8;
    p.seed = 42;
    const std::vector<xsampler::token_id> prompt = {1};  // " The"
    xsampler::sequence seq(xsampler::sampler(p), prompt, o);
    while (!seq.finished())
    {
        const xsampler::step_result& r = seq.step(model(seq.history().tokens()));
        std::printf("[%.*s]", int(r.text.size()), r.text.data());
    }
    std::printf("\n%s after %zu tokens: \"%s\"\n", xsampler::to_string(seq.reason()), seq.generated().size(),
                seq.text().c_str());
}
