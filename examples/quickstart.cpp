// quickstart: the README's tour — sample one token, inspect the distribution,
// build a sampler from run-time parameters.
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
}
