// xsampler/filters/mirostat.hpp — mirostat v1 and v2: a stage that steers the surprise. (xsampler, BSD-3-Clause)
//
// mirostat{version, tau, eta, m = 100}
//   Keeps the surprise of the drawn tokens (-log2 p, in bits) near tau by
//   a truncation whose width follows a running value mu (Basu et al.,
//   "Mirostat", 2021; llama.cpp's mirostat and mirostat_v2 samplers). It is
//   the last stage of its chain: the draw that follows it is the draw whose
//   token it learns from. State: mu, 2 tau at construction and after
//   reset(). After each draw (observe, stage.hpp), with p the drawn token's
//   probability in the distribution drawn from (the truncated set,
//   renormalised: exp of sampled_token::logprob),
//     mu <- mu - eta * (-log2 p - tau).
//   Only a draw changes mu: a call that throws, filter and
//   final_distribution leave it as it was.
//   version 2: keeps the tokens with -log2 p_i <= mu, i.e. p_i >= 2^-mu
//     (p the current probabilities, temperature so far included), at least
//     the best token: a rank prefix, decided exactly as epsilon decides
//     its threshold (2^-mu is the double exp2(-mu)).
//   version 1: estimates the Zipf exponent s from the m best tokens,
//     s = sum t_i b_i / sum t_i^2 over i = 1 .. min(m, kept) - 1, with
//     t_i = ln((i + 1) / i) and b_i = ln(p_i / p_{i+1}) = (x_i - x_{i+1}) S
//     (the logit gap times the temperature scale: exact, no exp); then with
//     e = s - 1 and N the vocabulary size, keeps the top
//     k = (e 2^mu / (1 - N^-e))^(1/s) tokens (at e = 0 the limit,
//     (2^mu / ln N)^(1/s)), k rounded down and clamped to [1, kept]; k is
//     NaN (fewer than 2 tokens) keeps 1.
//   tau finite and >= 0; eta finite and >= 0 (0: mu never moves); m >= 2.
//   Differences from llama.cpp: its v1 computes b_i from float
//   probabilities (a token whose probability underflows gives an infinite
//   b_i); here from the logits. Its chain with mirostat is logit bias,
//   temperature, mirostat: penalties and DRY are left out with the other
//   samplers of its list; the run-time sampler here keeps every processor
//   (sampler.hpp).
#ifndef XSAMPLER_FILTERS_MIROSTAT_HPP
#define XSAMPLER_FILTERS_MIROSTAT_HPP

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "../candidates.hpp"
#include "levels.hpp"

namespace xsampler
{
    class mirostat
    {
    public:
        static constexpr const char* name = "mirostat";
        static constexpr bool keeps_rank_prefix = true;

        mirostat(int version, double tau, double eta, std::int64_t m = 100)
            : m_version(version), m_tau(tau), m_eta(eta), m_m(m), m_mu(2.0 * tau)
        {
            if (version != 1 && version != 2)
            {
                throw invalid_parameter("mirostat: version must be 1 or 2, got " + std::to_string(version));
            }
            if (!(tau >= 0.0 && tau <= std::numeric_limits<double>::max()))
            {
                throw invalid_parameter("mirostat: tau must be finite and >= 0, got " + detail::format_value(tau));
            }
            if (!(eta >= 0.0 && eta <= std::numeric_limits<double>::max()))
            {
                throw invalid_parameter("mirostat: eta must be finite and >= 0, got " + detail::format_value(eta));
            }
            if (m < 2)
            {
                throw invalid_parameter("mirostat: m must be >= 2, got " + std::to_string(m));
            }
        }

        int version() const noexcept { return m_version; }
        double tau() const noexcept { return m_tau; }
        double eta() const noexcept { return m_eta; }
        std::int64_t m() const noexcept { return m_m; }
        /// The stage in words, as sampler::describe_stages gives it.
        std::string describe() const
        {
            return "mirostat " + std::to_string(m_version) + ": tau " + detail::format_value(m_tau) + ", eta " +
                   detail::format_value(m_eta) + (m_version == 1 ? ", m " + std::to_string(m_m) : "");
        }
        /// The running target: 2 tau until the first draw.
        double mu() const noexcept { return m_mu; }

        template <class T>
        void apply(candidates<T>& c)
        {
            if (m_version == 2)
            {
                keep_surprise_at_most(c);
                return;
            }
            c.keep_top(top_count(c));
        }

        void observe(const sampled_token& t) noexcept
        {
            const double surprise = -t.logprob / std::log(2.0);
            const double mu = m_mu - m_eta * (surprise - m_tau);
            // A surprise is finite (a drawn token has a positive weight);
            // mu stays finite whatever eta is.
            m_mu = std::isfinite(mu) ? mu : m_mu;
        }

        void reset() noexcept { m_mu = 2.0 * m_tau; }

    private:
        // v2: p_i >= 2^-mu (the double exp2(-mu)), exactly, at least the best token.
        template <class T>
        void keep_surprise_at_most(candidates<T>& c)
        {
            const double floor_p = std::exp2(-m_mu);
            if (!(floor_p > 0.0))
            {
                return;  // 2^-mu underflows: every token passes
            }
            if (floor_p > 1.0)
            {
                c.keep_argmax();  // no token reaches it: the best one is kept
                return;
            }
            detail::keep_probability_at_least(c, floor_p, 1);
        }

        // v1: k from the estimated Zipf exponent of the m best tokens.
        template <class T>
        std::size_t top_count(candidates<T>& c)
        {
            auto& top = m_top.get(T());
            c.top_items(std::size_t(m_m), top);
            const double s_scale = double(c.scale());
            double sum_tb = 0.0;
            double sum_tt = 0.0;
            for (std::size_t i = 0; i + 1 < top.size(); ++i)
            {
                const double t = std::log(double(i + 2) / double(i + 1));
                const double b = (double(top[i].logit) - double(top[i + 1].logit)) * s_scale;
                sum_tb += t * b;
                sum_tt += t * t;
            }
            const double s = sum_tb / sum_tt;
            const double e = s - 1.0;
            const double n = double(c.vocab());
            const double mu2 = std::exp2(m_mu);
            const double base = std::fabs(e) < 1e-12 ? mu2 / std::log(n) : e * mu2 / (1.0 - std::pow(n, -e));
            const double k = std::pow(base, 1.0 / s);
            if (!(k >= 1.0))
            {
                return 1;  // NaN (fewer than 2 tokens) or below 1
            }
            return k >= n ? c.vocab() : std::size_t(k);
        }

        int m_version;
        double m_tau;
        double m_eta;
        std::int64_t m_m;
        double m_mu;
        detail::scored_lists m_top;  // scratch
    };
}

#endif
