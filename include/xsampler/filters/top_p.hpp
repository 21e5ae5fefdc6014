// xsampler/filters/top_p.hpp — top_p, the inclusive nucleus, decided exactly. (xsampler, BSD-3-Clause)
//
// A filter (stage.hpp): a small value type, validated when constructed
// (invalid_parameter naming the stage, the parameter, the range and the
// value), with `apply(candidates<T>&)`; min_keep as filters.hpp states it.
//
// Exact decisions (top_p; min_p, epsilon and eta too: levels.hpp)
//   Every keep/drop decision is the one exact (real) arithmetic makes on the
//   row's own values: d_i = (x_i - m)·S with x_i the current logits as stored
//   (float or double), m their max, S the temperature scale (a double);
//   weights W_i = e^{d_i}, Z = sum W_i, p_i = W_i / Z; P, M, e, h the given
//   doubles. The fast float path decides wherever its proven error bound
//   does; the rest is re-decided in double, then double-double
//   (detail/exact.hpp, docs/semantics.md "Exact decisions").
// top_p{P[, min_keep]}, P in (0, 1]
//   With p_i the current probabilities (temperature so far included), keeps
//   the shortest prefix of the rank whose mass reaches P, *inclusive* of the
//   token that crosses P — so a confident step keeps its top token, never an
//   empty set. Precisely: the least n with C_n >= P·Z, C_n the exact mass of
//   the first n ranked tokens; no slack. {.1, .2, .3, .4} at P = 0.7 keeps
//   {.4, .3}: their exact mass is 0.70000000198 from float logits log(p) and
//   0.69999999999999996811 from double ones, both >= the double 0.7. The
//   kept tokens are renormalised by the draw. P == 1 keeps
//   all. A tie group may be split: the lower ids are kept. llama.cpp
//   accumulates in float and compares cum >= p; Hugging Face drops tokens
//   whose cumulative mass in ascending order is <= 1 - p, in float32. Both
//   agree with this in exact arithmetic.
#ifndef XSAMPLER_FILTERS_TOP_P_HPP
#define XSAMPLER_FILTERS_TOP_P_HPP

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "../candidates.hpp"
#include "../stage.hpp"

namespace xsampler
{
    class top_p
    {
    public:
        static constexpr const char* name = "top_p";
        static constexpr bool keeps_rank_prefix = true;

        explicit top_p(double p, std::size_t min_keep = 1) : m_p(p), m_min_keep(detail::min_keep_of(min_keep))
        {
            if (!(p > 0.0 && p <= 1.0))
            {
                throw invalid_parameter("top_p: p must be in (0, 1], got " + detail::format_value(p));
            }
        }
        double value() const noexcept { return m_p; }
        std::size_t min_keep() const noexcept { return m_min_keep; }

        template <class T>
        void apply(candidates<T>& c) const
        {
            if (m_p != 1.0)
            {
                c.keep_mass(m_p, m_min_keep);
            }
        }

    private:
        double m_p;
        std::size_t m_min_keep;
    };
}

#endif
