// Prints draws for fixed rows, chains and seeds. The portability test builds
// this with g++ and clang++, libstdc++ and libc++, -O0 and -O3, for x86-64's
// baseline (SSE2) and for the build machine (-march=native), and checks
// that every build prints tests/golden_draws.txt exactly: the library's
// promise that the same engine, seed and logits give the same tokens.
#include <cstdio>
#include <random>

#include <xtensor/xview.hpp>

#include "helpers.hpp"

namespace
{
    template <class Chain, class Row, class URBG>
    void print(const char* name, Chain& c, const Row& row, URBG& rng)
    {
        std::printf("%s:", name);
        for (int i = 0; i < 12; ++i)
        {
            const auto t = c.sample(row, {}, rng);
            std::printf(" %d/%.17g", int(t.id), t.logprob);
        }
        std::printf("\n");
    }
}

int main()
{
    using namespace xsampler;
    const auto f = test_helpers::random_row<float>(50257, 7);
    const auto d = test_helpers::random_row<double>(4099, 8, 2.0, true, 0.2);
    {
        chain c{};
        philox4x32 rng(42);
        print("plain/float/philox", c, f, rng);
    }
    {
        chain c{temperature{0.8}, top_k{40}, top_p{0.95}, min_p{0.05}};
        philox4x32 rng(42, 1);
        print("llama-default/float/philox", c, f, rng);
    }
    {
        chain c{temperature{1.3}, top_p{0.9}};
        std::mt19937 rng(5489u);
        print("temp-top_p/double/mt19937", c, d, rng);
    }
    {
        sampling_params p;
        p.temperature = 0.7;
        p.min_p = 0.02;
        p.seed = 1234;
        sampler s(p);
        std::printf("sampler-own-engine/float:");
        for (int i = 0; i < 12; ++i)
        {
            std::printf(" %d", int(s.sample(f, {}).id));
        }
        std::printf("\n");
    }
    {
        // Masked tokens, and weights below exp2's limit (the kernels that test it).
        auto wide = test_helpers::random_row<float>(10007, 9, 3.0, false, 0.2);
        for (std::size_t i = 0; i < wide.size(); i += 3)
        {
            wide(i) -= 150.0f;
        }
        chain c{temperature{0.9}};
        philox4x32 rng(7);
        print("masked-wide/float/philox", c, wide, rng);
        chain p{top_p{0.9}};
        print("masked-wide-top_p/float/philox", p, wide, rng);
    }
    {
        chain c{top_k{1000}, temperature{2.0}};
        std::mt19937_64 rng(99);
        print("top_k-temp/double/mt19937_64", c, d, rng);
    }
    return 0;
}
