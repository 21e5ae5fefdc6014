// Shared by the sampler tests: rows from literals, random rows, and a plain
// sort-based reference of the filters to check the library against.
#ifndef XSAMPLER_TESTS_HELPERS_HPP
#define XSAMPLER_TESTS_HELPERS_HPP

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <map>
#include <numeric>
#include <vector>

#include <xtensor/xtensor.hpp>

#include <xsampler/xsampler.hpp>

namespace test_helpers
{
    constexpr double inf = std::numeric_limits<double>::infinity();

    template <class T>
    xt::xtensor<T, 1> row(std::initializer_list<double> values)
    {
        xt::xtensor<T, 1> r = xt::empty<T>({values.size()});
        std::transform(values.begin(), values.end(), r.begin(), [](double v) { return T(v); });
        return r;
    }

    /// Logits whose softmax is `probs` (up to the rounding of log in T).
    template <class T>
    xt::xtensor<T, 1> logits_of(std::initializer_list<double> probs)
    {
        xt::xtensor<T, 1> r = xt::empty<T>({probs.size()});
        std::transform(probs.begin(), probs.end(), r.begin(), [](double p) { return T(std::log(p)); });
        return r;
    }

    /// N(0, sigma^2) logits from a philox stream; `ties` rounds them to
    /// integers (many equal logits), `masked` sets that fraction to -inf.
    template <class T>
    xt::xtensor<T, 1> random_row(std::size_t vocab, std::uint64_t seed, double sigma = 3.0, bool ties = false,
                                 double masked = 0.0)
    {
        xsampler::philox4x32 rng(seed, 99);
        xt::xtensor<T, 1> r = xt::empty<T>({vocab});
        for (auto& x : r)
        {
            const double v = xsampler::normal(sigma, rng);
            x = T(ties ? std::round(v) : v);
            if (xsampler::uniform01(rng) < masked)
            {
                x = -std::numeric_limits<T>::infinity();
            }
        }
        r(std::size_t(seed % vocab)) = T(1);  // never all masked
        return r;
    }

    /// [rows, vocab] logits, row r drawn as random_row(vocab, seed + r, sigma)
    /// (a Markov model's transitions when rows == vocab).
    template <class T>
    xt::xtensor<T, 2> random_matrix(std::size_t rows, std::size_t vocab, std::uint64_t seed, double sigma = 1.5)
    {
        xt::xtensor<T, 2> m = xt::empty<T>({rows, vocab});
        for (std::size_t r = 0; r < rows; ++r)
        {
            const auto row = random_row<T>(vocab, seed + r, sigma);
            std::copy(row.begin(), row.end(), m.begin() + std::ptrdiff_t(r * vocab));
        }
        return m;
    }

    /// The penalties as their contract reads, by brute force: count the range
    /// with a map, apply the formula in double, round to T.
    template <class T>
    xt::xtensor<T, 1> reference_penalties(xt::xtensor<T, 1> r, const std::vector<xsampler::token_id>& h, std::size_t prompt,
                                          double rep, double pres, double freq, std::int64_t last_n,
                                          xsampler::penalty_scope scope)
    {
        const double big = double(std::numeric_limits<T>::max());
        const auto clamp = [&](double v) { return T(std::min(std::max(v, -big), big)); };
        const auto repeat = [&](double v) { return v > 0.0 ? v / rep : v * rep; };
        std::map<xsampler::token_id, int> all, out;
        const std::size_t from =
            scope == xsampler::penalty_scope::output || last_n < 0 ? 0 : h.size() - std::min(h.size(), std::size_t(last_n));
        for (std::size_t i = from; i < h.size(); ++i)
        {
            ++all[h[i]];
            if (i >= prompt)
            {
                ++out[h[i]];
            }
        }
        for (std::size_t t = 0; t < r.size(); ++t)
        {
            const auto id = xsampler::token_id(t);
            if (r(t) == -std::numeric_limits<T>::infinity())
            {
                continue;
            }
            if (scope == xsampler::penalty_scope::window)
            {
                if (all.count(id) != 0)
                {
                    const double v = repeat(double(r(t)));
                    r(t) = clamp(pres != 0.0 || freq != 0.0 ? v - (all[id] * freq + pres) : v);
                }
                continue;
            }
            // Output scope: repetition on every token, presence and frequency
            // on the generated ones, rounded once.
            const bool repeated = all.count(id) != 0 && rep != 1.0;
            const bool generated = out.count(id) != 0 && (pres != 0.0 || freq != 0.0);
            if (repeated || generated)
            {
                const double v = repeated ? repeat(double(r(t))) : double(r(t));
                r(t) = clamp(generated ? v - (out[id] * freq + pres) : v);
            }
        }
        return r;
    }

    /// A processor that writes fixed values into fixed tokens (-inf masks).
    /// With `in_one_call`, the edits go through candidates::edit_each,
    /// which leaves a token at -inf as it is.
    struct set_logits
    {
        static constexpr const char* name = "set_logits";
        std::vector<std::pair<xsampler::token_id, double>> edits;
        bool in_one_call = false;

        template <class T>
        void apply(xsampler::candidates<T>& c, const xsampler::token_history&) const
        {
            if (in_one_call)
            {
                std::vector<xsampler::token_id> ids;
                for (const auto& e : edits)
                {
                    ids.push_back(e.first);
                }
                c.edit_each(ids, [&](std::size_t j, T) { return T(edits[j].second); });
                return;
            }
            for (const auto& e : edits)
            {
                c.set_logit(e.first, T(e.second));
            }
        }
    };

    /// The same edits written into a copy of a row.
    template <class T>
    xt::xtensor<T, 1> edited(xt::xtensor<T, 1> r, const set_logits& p)
    {
        for (const auto& e : p.edits)
        {
            if (!p.in_one_call || r(std::size_t(e.first)) != -std::numeric_limits<T>::infinity())
            {
                r(std::size_t(e.first)) = T(e.second);
            }
        }
        return r;
    }

    inline std::map<xsampler::token_id, double> as_map(const xsampler::distribution& d)
    {
        std::map<xsampler::token_id, double> m;
        for (std::size_t i = 0; i < d.ids.size(); ++i)
        {
            m[d.ids[i]] = d.probs[i];
        }
        return m;
    }

    /// The plain definition, for checking: sort everything by (logit desc,
    /// id asc), softmax with std::exp at scale s, and cut as the contracts
    /// say. The cuts are decided in long double on the exact values (x - m)·s
    /// of the row (the scale as the library holds it, a double), with a
    /// margin check: `near` is set where long double itself cannot separate
    /// the two sides (never seen: its error is ~1e-16 relative).
    struct reference
    {
        double scale = 1.0;
        double tol = 0.0;   ///< unused by the cuts (kept for the callers)
        bool near = false;  ///< a cut long double cannot call
        std::vector<std::pair<double, xsampler::token_id>> kept;  // (logit, id), ranked

        template <class T>
        explicit reference(const xt::xtensor<T, 1>& logits)
        {
            for (std::size_t i = 0; i < logits.size(); ++i)
            {
                if (logits(i) != -std::numeric_limits<T>::infinity())
                {
                    kept.emplace_back(double(logits(i)), xsampler::token_id(i));
                }
            }
            std::sort(kept.begin(), kept.end(),
                      [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
        }

        std::vector<double> probs() const
        {
            std::vector<double> w;
            for (const auto& k : kept)
            {
                w.push_back(std::exp((k.first - kept.front().first) * scale));
            }
            const double z = std::accumulate(w.begin(), w.end(), 0.0);
            for (auto& x : w)
            {
                x /= z;
            }
            return w;
        }

        /// (x - m)·s in long double (x - m exact for float logits; a double
        /// difference rounds once, at 2^-64).
        std::vector<long double> log_weights() const
        {
            std::vector<long double> d;
            for (const auto& k : kept)
            {
                d.push_back(((long double)k.first - (long double)kept.front().first) * (long double)scale);
            }
            return d;
        }
        /// The weights e^d in long double, and their sum.
        std::vector<long double> weights(long double& z) const
        {
            std::vector<long double> w;
            z = 0.0L;
            for (const long double d : log_weights())
            {
                w.push_back(std::exp(d));
                z += w.back();
            }
            return w;
        }
        /// Long double's own error on a sum of n such weights, relative: each
        /// weight within an ulp, each addition within half an ulp, doubled.
        long double margin() const { return (long double)(kept.size() + 4) * std::numeric_limits<long double>::epsilon(); }

        reference& temperature(double t)
        {
            if (t == 0.0)
            {
                kept.resize(1);
            }
            else
            {
                scale /= t;
            }
            return *this;
        }
        reference& top_k(std::size_t k, std::size_t keep = 1)
        {
            if (k > 0 && k < keep)
            {
                k = keep;
            }
            if (k > 0 && k < kept.size())
            {
                kept.resize(k);
            }
            return *this;
        }
        reference& top_p(double p, std::size_t keep = 1)
        {
            long double z;
            const auto w = weights(z);
            const long double target = (long double)p * z;
            long double cum = 0.0L;
            for (std::size_t i = 0; i < w.size(); ++i)
            {
                cum += w[i];
                near = near || std::abs(cum - target) < margin() * z;
                if (cum >= target)
                {
                    cut(i + 1, keep);
                    break;
                }
            }
            return *this;
        }
        /// FlashInfer's joint mode: top_k's mask (its length from k alone) and
        /// top_p's (the running sum over the current distribution), both
        /// prefixes of the rank, intersected: the shorter one.
        reference& top_k_top_p(std::size_t k, double p, std::size_t keep = 1)
        {
            const std::size_t by_k = k == 0 ? kept.size() : std::max(k, keep);
            if (p < 1.0)
            {
                top_p(p, keep);
            }
            cut(std::min(kept.size(), by_k), keep);
            return *this;
        }
        reference& min_p(double m, std::size_t keep = 1)
        {
            const auto d = log_weights();
            const long double l = std::log((long double)m);
            cut(prefix([&](std::size_t i) { return d[i] >= l; },
                       [&](std::size_t i) { return m != 1.0 && std::abs(d[i] - l) < margin() * (1.0L + std::abs(l)); }),
                keep);
            return *this;
        }
        reference& epsilon(double e, std::size_t keep = 1)
        {
            long double z;
            const auto w = weights(z);
            const long double cut_w = (long double)e * z;
            cut(prefix([&](std::size_t i) { return w[i] >= cut_w; },
                       [&](std::size_t i) { return std::abs(w[i] - cut_w) < margin() * w[i]; }),
                keep);
            return *this;
        }
        reference& eta(double h, std::size_t keep = 1)
        {
            long double z;
            const auto w = weights(z);
            long double ent = 0.0L;
            for (const long double x : w)
            {
                if (x > 0.0L)
                {
                    ent -= x / z * std::log(x / z);
                }
            }
            const long double cut_p = std::min((long double)h, std::sqrt((long double)h) * std::exp(-ent));
            cut(prefix([&](std::size_t i) { return w[i] / z >= cut_p; },
                       [&](std::size_t i) { return std::abs(w[i] / z - cut_p) < 64.0L * margin() * cut_p; }),
                keep);
            return *this;
        }
        reference& p_less(std::size_t keep = 1)
        {
            long double z;
            const auto w = weights(z);
            long double b = 0.0L;
            for (const long double x : w)
            {
                b += x * x;
            }
            const long double cut_w = b / z;  // p_i >= B / Z^2 iff w_i >= B / Z
            cut(prefix([&](std::size_t i) { return w[i] >= cut_w; },
                       [&](std::size_t i) { return std::abs(w[i] - cut_w) < 4.0L * margin() * cut_w; }),
                keep);
            return *this;
        }
        reference& top_h(double h, std::size_t keep = 1)
        {
            const std::size_t n = std::min<std::size_t>(kept.size(), 100);
            const auto d = log_weights();
            std::vector<long double> w(n);
            long double z = 0.0L;
            for (std::size_t i = 0; i < n; ++i)
            {
                w[i] = std::exp(d[i]);
                z += w[i];
            }
            std::vector<long double> terms(n);
            long double e = 0.0L;
            for (std::size_t i = 0; i < n; ++i)
            {
                const long double q = w[i] / z;
                terms[i] = q > 0.0L ? -q * std::log(q) : 0.0L;
                e += terms[i];
            }
            const long double tau = (long double)h * e;
            long double cum = 0.0L;
            std::size_t k = n;
            for (std::size_t i = 0; h < 1.0 && i < n; ++i)
            {
                cum += terms[i];
                near = near || (i > 0 && std::abs(cum - tau) < 16.0L * margin() * (e + 1.0L));
                if (cum > tau)
                {
                    k = i;
                    break;
                }
            }
            cut(std::max<std::size_t>(k, 1), keep);
            return *this;
        }
        /// The length of the prefix of the ranked tokens that `keeps`, noting
        /// in `near` a token on it or just past it that `close` finds too
        /// close to its threshold to call.
        template <class Keeps, class Close>
        std::size_t prefix(Keeps&& keeps, Close&& close)
        {
            std::size_t n = 0;
            for (; n < kept.size(); ++n)
            {
                near = near || close(n);
                if (!keeps(n))
                {
                    break;
                }
            }
            return n;
        }
        /// Keeps the first n, or the first `keep` if n is fewer.
        void cut(std::size_t n, std::size_t keep)
        {
            kept.resize(std::min(kept.size(), std::max(n, std::max<std::size_t>(keep, 1))));
        }

        std::map<xsampler::token_id, double> as_map() const
        {
            const auto pr = probs();
            std::map<xsampler::token_id, double> m;
            for (std::size_t i = 0; i < kept.size(); ++i)
            {
                m[kept[i].second] = pr[i];
            }
            return m;
        }
    };
}

#endif
