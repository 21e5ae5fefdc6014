// xsampler/detail/expansion.hpp — exact sums and products of doubles. (xsampler, BSD-3-Clause)
//
// Exact arithmetic on doubles for the rare decision that rounding cannot
// settle: a value is held as an expansion, a sum of doubles of increasing
// magnitude that do not overlap (Shewchuk's arithmetic: two_sum and
// two_product are error-free, so every operation below is exact). The sign
// of an expansion is the sign of its largest component.
//
// Contract
// - Exact while no intermediate product or sum overflows and no product's
//   rounding error falls below the normal range (2^-1022): callers keep
//   their inputs within documented magnitudes (top_n_sigma: float rows
//   always; double rows with logits within [2^-300, 2^300] in magnitude).
// - Needs round-to-nearest IEEE doubles; std::fma is exact by definition
//   (hardware or libm), whatever -ffp-contract says.
// - Not fast (O(length) per added double, products O(m n)); used only where
//   a bound shows the fast double path might decide wrongly.
#ifndef XSAMPLER_DETAIL_EXPANSION_HPP
#define XSAMPLER_DETAIL_EXPANSION_HPP

#include <cmath>
#include <cstddef>
#include <vector>

namespace xsampler
{
    namespace detail
    {
        /// a + b = s + e exactly, s = fl(a + b).
        inline void two_sum(double a, double b, double& s, double& e) noexcept
        {
            s = a + b;
            const double bv = s - a;
            const double av = s - bv;
            e = (a - av) + (b - bv);
        }

        /// a * b = p + e exactly, p = fl(a * b) (no underflow).
        inline void two_product(double a, double b, double& p, double& e) noexcept
        {
            p = a * b;
            e = std::fma(a, b, -p);
        }

        /// An exact sum of doubles (nonoverlapping, increasing magnitude,
        /// zeros dropped).
        class expansion
        {
        public:
            expansion() = default;
            explicit expansion(double v) { add(v); }

            /// this += v, exactly.
            void add(double v)
            {
                double q = v;
                std::size_t out = 0;
                for (std::size_t i = 0; i < m_c.size(); ++i)
                {
                    double h;
                    two_sum(q, m_c[i], q, h);
                    if (h != 0.0)
                    {
                        m_c[out++] = h;
                    }
                }
                m_c.resize(out);
                if (q != 0.0)
                {
                    m_c.push_back(q);
                }
            }
            void add(const expansion& other)
            {
                for (const double v : other.m_c)
                {
                    add(v);
                }
            }
            /// this * b, exactly.
            expansion times(double b) const
            {
                expansion r;
                for (const double v : m_c)
                {
                    double p, e;
                    two_product(v, b, p, e);
                    r.add(e);
                    r.add(p);
                }
                return r;
            }
            expansion times(const expansion& other) const
            {
                expansion r;
                for (const double v : other.m_c)
                {
                    r.add(times(v));
                }
                return r;
            }
            expansion negated() const
            {
                expansion r = *this;
                for (double& v : r.m_c)
                {
                    v = -v;
                }
                return r;
            }
            /// -1, 0 or 1.
            int sign() const noexcept { return m_c.empty() ? 0 : (m_c.back() > 0.0 ? 1 : -1); }
            /// The value rounded (for messages and tests).
            double approx() const noexcept
            {
                double s = 0.0;
                for (const double v : m_c)
                {
                    s += v;
                }
                return s;
            }

        private:
            std::vector<double> m_c;
        };
    }
}

#endif
