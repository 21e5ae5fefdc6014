// make_logits: writes a float32 .npy file of logits drawn N(0, sigma^2) from
// a philox4x32 stream — test and demo input for the `xsampler` tool.
//
//   make_logits OUT.npy --vocab V [--rows R] [--sigma S] [--peak X] [--seed N]
//
// With --rows R > 1 the file is [R, V], else [V]. --peak adds X to token 0's
// logit in every row (a confident step).
#include <cstdint>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xnpy.hpp>
#include <xtensor/xtensor.hpp>

#include <xsampler/random.hpp>

int main(int argc, char** argv)
{
    CLI::App app{"make_logits: write N(0, sigma^2) float32 logits to an .npy file"};
    std::string out;
    std::size_t vocab = 0;
    std::size_t rows = 1;
    double sigma = 3.0;
    double peak = 0.0;
    std::uint64_t seed = 0;
    app.add_option("out", out, "output .npy file")->required();
    app.add_option("--vocab", vocab, "vocabulary size")->required()->check(CLI::PositiveNumber);
    app.add_option("--rows", rows, "rows; 1 writes a 1-D file")->check(CLI::PositiveNumber);
    app.add_option("--sigma", sigma, "standard deviation (default 3)");
    app.add_option("--peak", peak, "added to token 0's logit (default 0)");
    app.add_option("--seed", seed, "philox4x32 seed (default 0)");
    CLI11_PARSE(app, argc, argv);

    xsampler::philox4x32 rng(seed);
    xt::xtensor<float, 2> logits = xt::empty<float>({rows, vocab});
    for (auto& x : logits)
    {
        x = float(xsampler::normal(sigma, rng));  // two uniform01 draws each
    }
    for (std::size_t r = 0; r < rows; ++r)
    {
        logits(r, 0) += float(peak);
    }
    try
    {
        if (rows == 1)
        {
            xt::dump_npy(out, xt::xtensor<float, 1>(xt::flatten(logits)));
        }
        else
        {
            xt::dump_npy(out, logits);
        }
    }
    catch (const std::exception& e)
    {
        std::cerr << "make_logits: error: " << e.what() << '\n';
        return 1;
    }
}
