// A program that uses xsampler as an installed or vendored package would.
#include <cstdio>

#include <xtensor/xtensor.hpp>
#include <xsampler/xsampler.hpp>

int main()
{
    const xt::xtensor<float, 1> logits = {0.5f, 2.0f, 1.0f, -1.0f};
    xsampler::chain c{xsampler::temperature{0.8}, xsampler::top_k{2}};
    xsampler::philox4x32 rng(1);
    const auto token = c.sample(logits, {}, rng);
    std::printf("xsampler %d.%d.%d greedy %d sampled %d\n", XSAMPLER_VERSION_MAJOR, XSAMPLER_VERSION_MINOR,
                XSAMPLER_VERSION_PATCH, int(xsampler::greedy(logits)), int(token.id));
    return token.id == 1 || token.id == 2 ? 0 : 1;
}
