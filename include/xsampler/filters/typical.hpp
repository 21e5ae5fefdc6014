// xsampler/filters/typical.hpp — locally typical sampling and its selection. (xsampler, BSD-3-Clause)
//
// typical{P, min_keep = 1}, P in (0, 1] (locally typical sampling)
//   With p_i the current probabilities (temperature so far included) and H
//   their entropy in nats, orders the kept tokens by |-log p_i - H|
//   ascending, ties to the lower id, and keeps the shortest prefix of that
//   order whose mass reaches P (inclusive of the token that crosses it, with
//   a 1e-12 slack, not yet an exact decision as top_p now makes), and never
//   fewer than min_keep of that order (all of them if there are fewer).
//   Renormalised by the draw. Not a prefix of the rank: the most probable
//   token may be dropped, and greedy after it returns the best *kept* token.
//   P == 1 disables it (llama.cpp: P >= 1 is a no-op). llama.cpp keeps the
//   prefix whose float running sum exceeds P strictly, orders ties by an
//   unstable sort, and its entropy turns NaN when a token is masked;
//   transformers keeps every token tied in distance with the crossing one (a
//   uniform row of 5 at P = 0.5 keeps all 5 there, 3 here) and checks P in
//   (0, 1). Both count min_keep in the same order.
//
// The selection (detail::typical_selection): with t_i = (x_i - m) s the log
// weight and c = E[t] (candidates::log_weight_moments), -log p_i - H = c - t_i
// exactly, so the order is by |t_i - c|, and the kept set is an interval of
// logits around the mean. Distances are doubles computed from t_i rounded to
// T; masses summed in double. Never a sort of the set: on a dense set only
// the tokens within a proven distance of c (the lightest tokens' mass bounds
// how far the kept interval can reach) are gathered; among them, buckets by
// distance summed in id order locate the crossing, and only the crossing
// bucket is refined (again by buckets, or sorted when short). Equal to a
// running sum in that order but for rounding within ~1e-15 Z of the target;
// deterministic across compilers and standard libraries. The set is then
// candidates::keep_subset's.
#ifndef XSAMPLER_FILTERS_TYPICAL_HPP
#define XSAMPLER_FILTERS_TYPICAL_HPP

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "../candidates.hpp"
#include "../stage.hpp"

namespace xsampler
{
    namespace detail
    {
        /// typical's selection over a candidates set, with its scratch
        /// (grown once, reused across calls).
        template <class T>
        class typical_selection
        {
        public:
            /// Keeps the shortest prefix of the order by distance whose mass
            /// reaches q·Z, at least min_keep of it.
            void keep(candidates<T>& c, double q, std::size_t min_keep)
            {
                const auto mo = c.log_weight_moments();
                if (mo.n <= std::max<std::size_t>(min_keep, 1))
                {
                    return;
                }
                const double target = q * mo.z;
                const double mean = mo.mean;
                const T m = c.max_logit();
                const T s = c.scale();
                const T s2 = c.scale2();
                const auto dist = [&](T logit) { return std::fabs(double(exponent(logit, m, s)) - mean); };
                auto& g = m_near;
                if (!c.dense())
                {
                    g.clear();
                    c.for_each_by_id([&](token_id id, T logit) { g.push_back({dist(logit), c.weight(id, logit), id, logit}); });
                    commit_nearest(c, target, min_keep, g.size(), -inf);
                    return;
                }
                // The kept interval lies within [min(t_tail, 2c), 0]: the tokens
                // with t >= t_tail = log((1 - q) Z / V) hold more than q Z (the
                // others hold less than V e^t_tail), and all of them lie within
                // max(c - t_tail, -c) of c. Tried tighter first; a try holds if
                // the farthest kept token is nearer than every token it left out.
                const double t_tail = q < 1.0 ? std::log((1.0 - q) * mo.z / double(c.vocab())) : -double(inf);
                const double tries[] = {std::min(t_tail + 3.0, 2.0 * mean), std::min(t_tail, 2.0 * mean) - 1.0,
                                        -double(inf)};
                for (const double t_try : tries)
                {
                    // The least T at or below t_try (so G holds every token with t >= t_try).
                    T t_low = T(t_try);
                    if (double(t_low) > t_try)
                    {
                        t_low = std::nextafter(t_low, -inf);
                    }
                    const bool all = !(t_low > -std::numeric_limits<T>::max());
                    const T x_low = all ? -std::numeric_limits<T>::max()
                                        : least_logit_where(m, [&](T x) { return exponent(x, m, s) >= t_low; });
                    g.clear();
                    c.for_each_stored_run([&](const auto* x, std::size_t first, std::size_t n) {
                        using B = batch<T>;
                        for_each_passing(
                            x, n, [&](const B& v) { return v >= B(x_low); }, [&](T v) { return v >= x_low; },
                            [&](std::size_t j) {
                                const auto id = token_id(first + j);
                                const T xj = x[j];
                                g.push_back({dist(xj), T(0), id, xj});
                            });
                    });
                    near_weights(m, s2);
                    // Every token left out has t < t_low, so a distance >= fl(mean - t_low).
                    if (commit_nearest(c, target, min_keep, g.size(), all ? -double(inf) : mean - double(t_low)))
                    {
                        return;
                    }
                }
            }

        private:
            static constexpr T inf = std::numeric_limits<T>::infinity();

            struct near_token
            {
                double d;  // distance |t - c|
                T w;       // weight
                token_id id;
                T logit;
            };
            static bool nearer(const near_token& a, const near_token& b) noexcept
            {
                return a.d < b.d || (a.d == b.d && a.id < b.id);
            }

            // A scratch buffer of at least n records for recursion depth `depth`.
            near_token* near_level(std::size_t depth, std::size_t n)
            {
                if (m_near_levels.size() <= depth)
                {
                    m_near_levels.resize(depth + 1);
                }
                if (m_near_levels[depth].size() < n)
                {
                    m_near_levels[depth].resize(n);
                }
                return m_near_levels[depth].data();
            }

            // Appends to m_near_out the shortest prefix, by (d, id), of the
            // records cur[0, len) (given in id order) whose mass reaches `need`,
            // and returns true; or appends them all and returns false. Buckets
            // by distance (64 over [dmin, dmax], a key monotone in d), their
            // masses summed in id order, locate the crossing bucket, which is
            // refined the same way; 256 records or fewer are sorted and walked.
            bool nearest_prefix(const near_token* cur, std::size_t len, double need, std::size_t depth)
            {
                auto& out = m_near_out;
                constexpr std::size_t buckets = 64;
                // A token whose exponent underflowed to -inf (weight 0) is infinitely
                // far: dmax is the largest finite distance, and the infinite ones
                // go to the last bucket (or last in the walk).
                double dmin = double(inf);
                double dmax = 0.0;
                bool infinite = false;
                for (std::size_t i = 0; i < len; ++i)
                {
                    const double d = cur[i].d;
                    dmin = std::min(dmin, d);
                    if (d < double(inf))
                    {
                        dmax = std::max(dmax, d);
                    }
                    else
                    {
                        infinite = true;
                    }
                }
                const double scale = double(buckets) / (dmax - dmin);
                if (len <= 256 || depth >= 64 || !(dmax > dmin) || !std::isfinite(scale))
                {
                    // Few, or all at one distance (already in (d, id) order), or
                    // too close to split: walk in (d, id) order.
                    near_token* buf = near_level(depth, len);
                    std::copy(cur, cur + len, buf);
                    if (dmax > dmin || infinite)
                    {
                        std::sort(buf, buf + len, nearer);
                    }
                    double cum = 0.0;
                    for (std::size_t i = 0; i < len; ++i)
                    {
                        out.push_back(buf[i]);
                        cum += double(buf[i].w);
                        if (cum >= need)
                        {
                            return true;
                        }
                    }
                    return false;
                }
                const auto key = [&](double d) {
                    return d >= dmax ? buckets - 1 : std::min(std::size_t((d - dmin) * scale), buckets - 1);
                };
                double mass[buckets] = {};
                for (std::size_t i = 0; i < len; ++i)
                {
                    mass[key(cur[i].d)] += double(cur[i].w);
                }
                double cum = 0.0;
                std::size_t pushed = 0;  // the buckets below this one are in `out`
                const auto push_below = [&](std::size_t b) {
                    for (std::size_t i = 0; i < len; ++i)
                    {
                        const std::size_t k = key(cur[i].d);
                        if (k >= pushed && k < b)
                        {
                            out.push_back(cur[i]);
                        }
                    }
                    pushed = b;
                };
                for (std::size_t b = 0; b < buckets; ++b)
                {
                    if (mass[b] == 0.0 || cum + mass[b] < need)
                    {
                        cum += mass[b];
                        continue;
                    }
                    push_below(b);
                    near_token* buf = near_level(depth, len);
                    std::size_t count = 0;
                    for (std::size_t i = 0; i < len; ++i)
                    {
                        if (key(cur[i].d) == b)
                        {
                            buf[count++] = cur[i];
                        }
                    }
                    pushed = b + 1;
                    if (nearest_prefix(buf, count, need - cum, depth + 1))
                    {
                        return true;
                    }
                    cum += mass[b];  // rounding left it short: it is kept whole
                }
                push_below(buckets);
                return false;
            }

            // The records' weights (detail::weight's bits), a vector at a time.
            void near_weights(T m, T s2) noexcept
            {
                using B = batch<T>;
                auto& g = m_near;
                alignas(64) T lane[B::size];
                for (std::size_t i = 0; i < g.size(); i += B::size)
                {
                    const std::size_t k = std::min(B::size, g.size() - i);
                    for (std::size_t j = 0; j < B::size; ++j)
                    {
                        lane[j] = j < k ? g[i + j].logit : m;
                    }
                    exp2_nonpos(exponent(B::load_aligned(lane), B(m), B(s2))).store_aligned(lane);
                    for (std::size_t j = 0; j < k; ++j)
                    {
                        g[i + j].w = lane[j];
                    }
                }
            }

            // The typical set among the records m_near[0, n) (in id order): the
            // prefix, at least min_keep; committed if proven whole — `limit` is
            // -inf when no token was left out of the records, else every token
            // left out has a distance >= limit and the farthest kept token must be
            // nearer. Returns whether it was committed.
            bool commit_nearest(candidates<T>& c, double target, std::size_t min_keep, std::size_t n, double limit)
            {
                auto& g = m_near;
                auto& out = m_near_out;
                const bool whole = limit == -double(inf);
                out.clear();
                if (!nearest_prefix(g.data(), n, target, 0) && !whole)
                {
                    return false;  // the records hold less than the target
                }
                if (out.size() < min_keep)
                {
                    if (n < min_keep && !whole)
                    {
                        return false;
                    }
                    out.assign(g.begin(), g.begin() + std::ptrdiff_t(n));
                    const std::size_t k = std::min(min_keep, n);
                    std::nth_element(out.begin(), out.begin() + std::ptrdiff_t(k - 1), out.end(), nearer);
                    out.resize(k);
                }
                double farthest = 0.0;
                for (const auto& r : out)
                {
                    farthest = std::max(farthest, r.d);
                }
                if (!whole && !(farthest < limit))
                {
                    return false;
                }
                m_kept.clear();
                for (const auto& r : out)
                {
                    m_kept.push_back({r.logit, r.id});
                }
                c.keep_subset(m_kept, "typical");
                return true;
            }


            std::vector<near_token> m_near;
            std::vector<near_token> m_near_out;
            std::vector<std::vector<near_token>> m_near_levels;
            std::vector<scored<T>> m_kept;
        };
    }

    class typical
    {
    public:
        static constexpr const char* name = "typical";
        static constexpr bool keeps_rank_prefix = false;
        /// Probability mass by which the kept prefix may fall short of P.
        static constexpr double mass_slack = 1e-12;

        explicit typical(double p, std::size_t min_keep = 1)
            : m_p(p), m_min_keep(detail::min_keep_of(min_keep))
        {
            if (!(p > 0.0 && p <= 1.0))
            {
                throw invalid_parameter("typical: p must be in (0, 1], got " + detail::format_value(p));
            }
        }
        double value() const noexcept { return m_p; }
        std::size_t min_keep() const noexcept { return m_min_keep; }
        /// The stage in words, as sampler::describe_stages gives it.
        std::string describe() const
        {
            return detail::with_min_keep(std::string(name) + " " + detail::format_value(m_p), m_min_keep);
        }

        /// The selection and its buffers are the workspace's scratch
        /// (candidates::scratch): the stage holds its parameters only.
        template <class T>
        void apply(candidates<T>& c) const
        {
            if (m_p < 1.0)
            {
                c.template scratch<detail::typical_selection<T>>().keep(c, m_p - mass_slack, m_min_keep);
            }
        }

    private:
        double m_p;
        std::size_t m_min_keep;
    };
}

#endif
