// Prints draws for fixed rows, chains and seeds. The portability test builds
// this with g++ and clang++, libstdc++ and libc++, -O0 and -O3, for x86-64's
// baseline (SSE2) and for the build machine (-march=native), and checks
// that every build prints tests/golden_draws.txt exactly: the library's
// promise that the same engine, seed and logits give the same tokens.
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

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
    {
        // 16-bit rows (F16C's loads under -march=native, integer lanes on the
        // baseline): the draws of the float row of the same values.
        xt::xtensor<f16, 1> h = xt::xtensor<f16, 1>::from_shape({f.size()});
        xt::xtensor<bf16, 1> g = xt::xtensor<bf16, 1>::from_shape({f.size()});
        xt::xtensor<float, 1> hw = f, gw = f;
        for (std::size_t i = 0; i < f.size(); ++i)
        {
            h(i) = f16(f(i));
            g(i) = bf16(f(i));
            hw(i) = h(i);
            gw(i) = g(i);
        }
        chain c{temperature{0.8}, top_k{40}, top_p{0.95}, min_p{0.05}};
        chain t{top_p{0.9}};
        for (const char* row : {"f16", "float-of-f16", "bf16", "float-of-bf16"})
        {
            const std::string r = row;
            philox4x32 rng(42, 1);
            philox4x32 rng2(43);
            const std::string a = "llama-default/" + r + "/philox";
            const std::string b = "top_p/" + r + "/philox";
            if (r == "f16")
            {
                print(a.c_str(), c, h, rng);
                print(b.c_str(), t, h, rng2);
            }
            else if (r == "bf16")
            {
                print(a.c_str(), c, g, rng);
                print(b.c_str(), t, g, rng2);
            }
            else
            {
                print(a.c_str(), c, r == "float-of-f16" ? hw : gw, rng);
                print(b.c_str(), t, r == "float-of-f16" ? hw : gw, rng2);
            }
        }
        // Every 16-bit pattern through the vector loads: a digest of the bits.
        using B = detail::batch<float>;
        std::vector<f16> all_h(65536);
        std::vector<bf16> all_g(65536);
        for (std::uint32_t b = 0; b < 65536; ++b)
        {
            all_h[b] = f16::from_bits(std::uint16_t(b));
            all_g[b] = bf16::from_bits(std::uint16_t(b));
        }
        // FNV-1a over the widened values' bits: through the vector loads, and
        // (f16) one at a time (F16C's scalar form or the integer steps).
        const auto fold = [](std::uint64_t& d, float x) {
            std::uint32_t u;
            std::memcpy(&u, &x, 4);
            d = (d ^ u) * 1099511628211ull;
        };
        const auto vector_digest = [&](const auto& all) {
            std::uint64_t d = 1469598103934665603ull;
            alignas(64) float lane[B::size];
            for (std::size_t b = 0; b < 65536; b += B::size)
            {
                detail::load_logits<float>(all.data() + b).store_aligned(lane);
                for (const float x : lane)
                {
                    fold(d, x);
                }
            }
            return d;
        };
        const auto scalar_digest = [&] {
            std::uint64_t d = 1469598103934665603ull;
            for (const f16 h : all_h)
            {
                fold(d, float(h));
            }
            return d;
        };
        std::printf("widened-digest/f16/bf16: %016llx %016llx\n", (unsigned long long)vector_digest(all_h),
                    (unsigned long long)vector_digest(all_g));
        // The f16 digests are equal; and again with flush-to-zero and
        // denormals-are-zero set (x86), which must change nothing.
        std::printf("scalar-digest/f16: %016llx\n", (unsigned long long)scalar_digest());
#if defined(__SSE2__)
        const unsigned csr = _mm_getcsr();
        _mm_setcsr(csr | 0x8040u);  // FTZ | DAZ
#endif
        const std::uint64_t vector = vector_digest(all_h);
        const std::uint64_t scalar = scalar_digest();
#if defined(__SSE2__)
        _mm_setcsr(csr);
#endif
        std::printf("ftz-daz-digest/f16: %016llx %016llx\n", (unsigned long long)vector, (unsigned long long)scalar);
    }
    return 0;
}
