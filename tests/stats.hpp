// Helpers for the statistical tests: a chi-square statistic and a bound it
// exceeds with probability far below 1e-6 under the null hypothesis.
#ifndef XSAMPLER_TESTS_STATS_HPP
#define XSAMPLER_TESTS_STATS_HPP

#include <cmath>
#include <cstddef>
#include <vector>

namespace test_stats
{
    /// Pearson's statistic over the cells with a positive expected count.
    inline double chi_square(const std::vector<double>& observed, const std::vector<double>& expected)
    {
        double x2 = 0.0;
        for (std::size_t i = 0; i < observed.size(); ++i)
        {
            if (expected[i] > 0.0)
            {
                const double d = observed[i] - expected[i];
                x2 += d * d / expected[i];
            }
        }
        return x2;
    }

    /// A 5-sigma-plus bound for chi-square with `dof` degrees of freedom:
    /// the Wilson-Hilferty approximation at z = 6 (upper tail ~1e-9), so a
    /// correct sampler with a fixed seed never fails it, while a wrong
    /// distribution with thousands of samples does.
    inline double chi_square_bound(std::size_t dof)
    {
        const double k = double(dof);
        const double z = 6.0;
        const double t = 1.0 - 2.0 / (9.0 * k) + z * std::sqrt(2.0 / (9.0 * k));
        return k * t * t * t;
    }
}

#endif
