// custom_stage: a user-written processor and filter, in both kinds of chain.
//
// A stage is a value type with a templated apply (include/xsampler/stage.hpp):
// a processor takes the history too and edits a few logits; a filter reshapes
// or truncates. Both change the candidates only through its verbs.
#include <cmath>
#include <cstdio>
#include <vector>

#include <xtensor/xtensor.hpp>

#include <xsampler/xsampler.hpp>

// A processor: never emit these ids, and never repeat the last token.
struct ban_ids
{
    static constexpr const char* name = "ban_ids";
    std::vector<xsampler::token_id> banned;

    template <class T>
    void apply(xsampler::candidates<T>& c, const xsampler::token_history& history) const
    {
        for (const auto id : banned)
        {
            c.mask(id);
        }
        if (history.size() > 0)
        {
            c.mask(history.tokens()[history.size() - 1]);
        }
    }
};

// A filter, koboldcpp's top-a: keep p >= a * p_max^2. With weights relative to
// the best token (w_max = 1), p_max = 1 / Z, so the rule is
// log w >= log a - log Z.
struct top_a
{
    static constexpr const char* name = "top_a";
    double a;

    template <class T>
    void apply(xsampler::candidates<T>& c) const
    {
        c.keep_log_weight_at_least(T(std::log(a) - std::log(c.total_weight())));
    }
};

void print(const char* title, const xsampler::distribution& d)
{
    std::printf("%s:", title);
    for (std::size_t i = 0; i < d.ids.size(); ++i)
    {
        std::printf("  %d: %.4f", d.ids[i], d.probs[i]);
    }
    std::printf("\n");
}

int main()
{
    const xt::xtensor<float, 1> logits = {2.0f, 3.5f, 3.0f, -1.0f, 1.5f, 2.5f, 0.0f};
    const std::vector<xsampler::token_id> history = {0, 4, 2};  // the last token: 2

    // Compile time: the stage objects themselves, every call inlined.
    xsampler::chain chain{ban_ids{{1}}, top_a{0.2}, xsampler::temperature{0.8}};
    print("chain  ", chain.final_distribution(logits, history));

    // Run time: the same stages by name, placed in the order like built-ins.
    xsampler::sampling_params p;
    p.temperature = 0.8;
    p.custom = {xsampler::custom_stage("ban_ids", ban_ids{{1}}), xsampler::custom_stage("top_a", top_a{0.2})};
    p.order = xsampler::parse_stage_order("ban_ids;top_a;temperature");
    xsampler::sampler sampler(p);
    print("sampler", sampler.final_distribution(logits, history));

    xsampler::philox4x32 rng(7);
    std::printf("sampled %d\n", chain.sample(logits, history, rng).id);
}
