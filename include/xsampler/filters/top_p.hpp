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
//
// The nucleus (detail::nucleus): on a list, a running sum in rank order, the
// list ranked a chunk at a time as far as the sum goes; on a dense set, the
// bucketed search below (no sort of the row). Each crossing is certified by
// the error bounds of detail/exact.hpp, else re-decided with the weights in
// double (tier 2), then double-double (tier 3). The kept prefix is then
// candidates::keep_subset's. Its buffers are the workspace's scratch.
#ifndef XSAMPLER_FILTERS_TOP_P_HPP
#define XSAMPLER_FILTERS_TOP_P_HPP

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "../candidates.hpp"
#include "../stage.hpp"

namespace xsampler
{
    namespace detail
    {
        /// top_p's nucleus over a candidates set, with its scratch (grown
        /// once, reused across calls).
        template <class T>
        class nucleus
        {
        public:
            /// Keeps the shortest prefix of the rank whose mass reaches q·Z,
            /// inclusive of the token that crosses it, and at least min_keep
            /// tokens (0 counts as 1). Exact: the count is the least n with
            /// C_n >= q·Z for the real masses C_n and Z of the weights
            /// e^((x - m) S) (detail/exact.hpp). q >= 1 keeps all; q <= 0 (or
            /// NaN) keeps the best.
            void keep(candidates<T>& c, double q, std::size_t min_keep)
            {
                min_keep = std::max<std::size_t>(min_keep, 1);
                if (!(q > 0.0))
                {
                    c.keep_top(min_keep);
                    return;
                }
                const bool dense = c.dense();
                if (q >= 1.0 || min_keep >= (dense ? c.vocab() : c.items().size()))
                {
                    return;
                }
                if (dense)
                {
                    keep_dense(c, q, min_keep);
                }
                else
                {
                    keep_list(c, q, min_keep);
                }
            }

        private:
            static constexpr T inf = std::numeric_limits<T>::infinity();

            // A running sum in rank order over a copy of the list. The rank
            // order is needed only as far as the sum goes: a long list is
            // ordered a chunk at a time (the best of the rest selected, then
            // sorted), each chunk four times the one before.
            void keep_list(candidates<T>& c, double q, std::size_t min_keep)
            {
                const double z = c.total_weight();
                const double target = q * z;
                auto& r = m_kept;
                r.assign(c.items().begin(), c.items().end());
                const std::size_t n_all = r.size();
                const T m = c.max_logit();
                const T s2 = c.scale2();
                std::size_t sorted = c.rank_sorted() ? n_all : 0;
                std::size_t chunk = std::max<std::size_t>(min_keep, 1024);  // (the first holds min_keep)
                const auto sort_to = [&](std::size_t i) {
                    if (i < sorted)
                    {
                        return;
                    }
                    const auto from = r.begin() + std::ptrdiff_t(sorted);
                    const std::size_t end = n_all - sorted <= chunk + chunk / 2 ? n_all : sorted + chunk;
                    if (end < n_all)
                    {
                        std::nth_element(from, r.begin() + std::ptrdiff_t(end), r.end(), ranks_before<T>);
                    }
                    std::sort(from, r.begin() + std::ptrdiff_t(end), ranks_before<T>);
                    sorted = end;
                    chunk *= 4;
                };
                double cum = 0.0;
                for (std::size_t i = 0; i < n_all; ++i)
                {
                    sort_to(i);
                    const double before = cum;
                    cum += double(c.weight(r[i].id, r[i].logit));
                    if (cum >= target)
                    {
                        const double t = double(exponent(r[i].logit, m, s2));
                        if (!mass_certified(before, cum, t, n_all, q, z))
                        {
                            break;  // too close to call here: below
                        }
                        r.resize(std::max(i + 1, min_keep));
                        c.keep_subset(r, "top_p");
                        return;
                    }
                }
                exact(c, q, min_keep);
            }

            // Whether exact arithmetic keeps exactly the prefix whose computed
            // masses are `before` (without its last token) and `after` (with it),
            // the last token of exponent t (base 2), of a set of at most n tokens
            // with computed total z, all from tier-1 weights: C_n >= q Z > C_{n-1}.
            static bool mass_certified(double before, double after, double t, std::size_t n, double q, double z) noexcept
            {
                const double ez = z_error<T>(z, n);
                const double slack = 4.0 * unit<double>() * (after + q * z);
                return after - prefix_error<T>(after, t, n) - slack >= q * (z + ez) &&
                       before + prefix_error<T>(before, t, n) + slack < q * (z - ez);
            }

            // mass_certified with sum W|t| over the prefix (with its last token)
            // at most a_c and over the row at most a_z, rather than |t| C_n and Z
            // log2 n: on real rows both are a few times smaller.
            static bool mass_certified_given(double before, double after, double a_c, double a_z, std::size_t n, double q,
                                             double z) noexcept
            {
                const double ez = z_error_given<T>(z, a_z, n);
                const double slack = 4.0 * unit<double>() * (after + q * z);
                return after - prefix_error_given<T>(after, a_c, n) - slack >= q * (z + ez) &&
                       before + prefix_error_given<T>(before, a_c, n) + slack < q * (z - ez);
            }

            // The nucleus where the fast path could not decide: the kept set as a
            // list, the weights again in double (tier 2), then in double-double
            // (tier 3) where double cannot decide either; the exact all-tied case
            // by counting. Rare on real rows; O(V log V) at worst.
            void exact(candidates<T>& c, double q, std::size_t min_keep)
            {
                auto& count = counters();
                ++count.tier2;
                const double m = double(c.max_logit());
                const double s2 = c.scale2_double();
                const double ud = unit<double>();
                const bool dense = c.dense();
                auto& e = m_exact;
                e.resize(dense ? c.vocab() : c.items().size());
                // The mass of each octave of weight: octave k holds the tokens
                // with floor(t) = -k, t = (x - m) s2 in double (monotone in x).
                // Z in four partial sums (independent chains).
                auto& octave = m_octave_mass;
                octave.assign(1100, 0.0);
                double part[4] = {0.0, 0.0, 0.0, 0.0};
                std::size_t n = 0;
                const auto take = [&](token_id id, T x, double t, double w) {
                    exact_item& it = e[n];
                    it.item = {x, id};
                    it.w = w;
                    it.octave = t > -1099.0 ? int(-std::floor(t)) : 1099;
                    octave[std::size_t(it.octave)] += w;
                    part[n % 4] += w;
                    ++n;
                };
                if (dense)
                {
                    // The exps in double vectors, 64 tokens at a time.
                    using D = batch<double>;
                    alignas(64) double xd[64], td[64], wd[64];
                    c.for_each_stored_run([&](const auto* x, std::size_t first, std::size_t len) {
                        for (std::size_t i = 0; i < len; i += 64)
                        {
                            const std::size_t k = std::min<std::size_t>(64, len - i);
                            for (std::size_t j = 0; j < 64; ++j)
                            {
                                xd[j] = j < k ? double(T(x[i + j])) : m;
                            }
                            for (std::size_t j = 0; j < 64; j += D::size)
                            {
                                const D t = exponent(D::load_aligned(xd + j), D(m), D(s2));
                                t.store_aligned(td + j);
                                exp2_nonpos(t).store_aligned(wd + j);
                            }
                            for (std::size_t j = 0; j < k; ++j)
                            {
                                const T xj = x[i + j];
                                if (xj != -inf)
                                {
                                    take(token_id(first + i + j), xj, td[j], wd[j]);
                                }
                            }
                        }
                    });
                }
                else
                {
                    for (const auto& item : c.items())
                    {
                        const double t = exponent(double(item.logit), m, s2);
                        take(item.id, item.logit, t, exp2_nonpos(t));
                    }
                }
                e.resize(n);
                const double z = (part[0] + part[1]) + (part[2] + part[3]);
                const double dn = double(n);
                const double ez = 1.06 * ((3.0 * std::log2(dn + 1.0) + 8.0) * ud + (dn + 8.0) * ud) * z +
                                  dn * flush_error<double>();
                // G: the octaves from the top whose mass reaches q Z by a margin
                // (1e-9 Z, far above every error here) hold the nucleus: a rank
                // prefix (t is monotone in the logit), sorted alone.
                int last = 1099;
                double above = 0.0;
                for (int k = 0; k < 1100; ++k)
                {
                    above += octave[std::size_t(k)];
                    if (above >= q * z + 1e-9 * z)
                    {
                        last = k;
                        break;
                    }
                }
                const auto by_rank = [](const exact_item& l, const exact_item& r) { return ranks_before(l.item, r.item); };
                std::size_t g = std::size_t(std::partition(e.begin(), e.end(), [&](const exact_item& x) { return x.octave <= last; }) -
                                            e.begin());
                if (g < min_keep)
                {
                    g = std::min(n, min_keep);
                    std::partial_sort(e.begin(), e.begin() + std::ptrdiff_t(g), e.end(), by_rank);
                }
                else
                {
                    std::sort(e.begin(), e.begin() + std::ptrdiff_t(g), by_rank);
                }
                std::size_t kept = 0;
                {
                    dd_sum cum;
                    const auto error = [&](double c, double t) {
                        return 1.06 * (weight_error<double>(t) + 2.0 * ud + 2.0 * dn * ud * ud) * c +
                               dn * flush_error<double>();
                    };
                    for (std::size_t i = 0; i < g; ++i)
                    {
                        const double before = value(cum.s);
                        cum.add(e[i].w);
                        const double after = value(cum.s);
                        if (after >= q * z)
                        {
                            const double t = exponent(double(e[i].item.logit), m, s2);
                            const double slack = 4.0 * ud * (after + q * z);
                            if (after - error(after, t) - slack >= q * (z + ez) &&
                                before + error(before, t) + slack < q * (z - ez))
                            {
                                kept = i + 1;
                            }
                            break;
                        }
                    }
                }
                if (kept == 0)
                {
                    kept = exact_dd(c, q, g);
                }
                m_kept.resize(std::max(kept, std::min(min_keep, n)));
                for (std::size_t i = 0; i < m_kept.size(); ++i)
                {
                    m_kept[i] = e[i].item;
                }
                c.keep_subset(m_kept, "top_p");
            }

            // Tier 3 of exact: the weights in double-double over m_exact
            // (its first g ranked), the count kept.
            std::size_t exact_dd(candidates<T>& c, double q, std::size_t g)
            {
                auto& count = counters();
                ++count.tier3;
                auto& e = m_exact;
                const std::size_t n = e.size();
                const double m = double(c.max_logit());
                dd_sum zs;
                for (auto& x : e)
                {
                    x.w3 = exp_dd(exponent_dd(double(x.item.logit), m, c.exact_scale()));
                    zs.add(x.w3);
                }
                const double dn = double(n);
                const double rel = 1.1 * exp_dd_error + (dn + 2.0) * std::ldexp(1.0, -103);
                const double z = zs.s.hi;
                const double ez = rel * 1.01 * z + dn * exp_dd_tiny;
                const dd target = mul(zs.s, q);
                dd_sum cum;
                for (std::size_t i = 0; i < g; ++i)
                {
                    const dd before = cum.s;
                    cum.add(e[i].w3);
                    const double over = sub(cum.s, target).hi;
                    if (over < 0.0)
                    {
                        continue;
                    }
                    const double under = sub(target, before).hi;
                    const double slack = std::ldexp(1.0, -100) * z;
                    if (over > rel * cum.s.hi + dn * exp_dd_tiny + q * ez + slack &&
                        under > rel * before.hi + dn * exp_dd_tiny + q * ez + slack)
                    {
                        return i + 1;
                    }
                    // Exactly equal only if every token is tied (Lindemann-
                    // Weierstrass, docs/semantics.md): then the least k >= q n.
                    const bool tied = std::all_of(e.begin(), e.end(), [&](const exact_item& x) { return x.item.logit == e[0].item.logit; });
                    if (tied)
                    {
                        double k = std::max(1.0, std::ceil(q * dn));
                        while (std::fma(q, dn, -k) > 0.0)
                        {
                            k += 1.0;
                        }
                        while (k > 1.0 && std::fma(q, dn, -(k - 1.0)) <= 0.0)
                        {
                            k -= 1.0;
                        }
                        return std::size_t(k);
                    }
                    ++count.residual;
                    return i + 1;
                }
                ++count.residual;  // cannot happen: the mass of the first g exceeds q Z by far
                return g;
            }

            // The nucleus of a whole row in O(V + n log n) for a nucleus of n
            // tokens, without sorting the row. Everything is decided on
            // t = (x - m) s2, the weight's exponent, which is monotone in the
            // logit (each rounding is), so every set below is a prefix of the
            // rank — whether or not the rounded exp2 is monotone:
            //  1. one SIMD pass computes Z and keeps every weight;
            //  2. tail bound: tokens lighter than (Z - target) / V hold less than
            //     Z - target together, so the nucleus is among G, the tokens with
            //     t >= t_low for t_low = log2 of that bound (tried first at 8x
            //     the bound; any G whose mass reaches the target holds the
            //     nucleus, so the bound only decides the speed);
            //  3. G is gathered and bucketed by floor(4 (t - t_low))
            //     (4 buckets an octave of weight); the bucket masses locate the
            //     bucket where the running mass crosses the target;
            //  4. only that bucket is sorted by rank and walked token by token;
            //  5. the crossing is certified exact by the error bounds of
            //     detail/exact.hpp (mass_certified), else exact re-decides.
            // Masses are summed in double: per bucket, G's tokens in id order
            // into four partial sums (token i into sum i mod 4) added as
            // (s0 + s1) + (s2 + s3); then bucket by bucket; then token by token in
            // the crossing bucket.
            void keep_dense(candidates<T>& c, double q, std::size_t min_keep)
            {
                const double z = c.total_weight_stored();
                const double target = q * z;
                const T limit = exp_constants<T>::limit;
                const T t_floor = T(std::log2((z - target) / double(c.vocab())));
                // A scale that underflows T, or that T cannot hold (scale() and
                // scale2() are then clamped): the bounds do not hold: exact.
                if (std::isnormal(c.scale2()) && c.scale2_double() < double(std::numeric_limits<T>::max()))
                {
                    for (const T t_low : {T(t_floor + T(3)), t_floor, limit})
                    {
                        if (t_low <= T(0))
                        {
                            const int found = above(c, std::max(t_low, limit), q, z, min_keep);
                            if (found > 0)
                            {
                                return;
                            }
                            if (found < 0)
                            {
                                break;
                            }
                        }
                    }
                }
                // Too close to call on the float weights, or rounding left every
                // prefix short: re-decided exactly.
                exact(c, q, min_keep);
            }

            // key(m) at t_low = limit: the most buckets there can be.
            static constexpr int limit_key() noexcept { return int(exp_constants<T>::limit) * 4; }

            // The nucleus among G = the tokens with t >= t_low: 1 if the mass of
            // G reaches the target q z and the crossing is certified exact (the
            // kept tokens end in id order, at least min_keep of them); 0 if G's
            // mass falls short; -1 if the crossing is too close to call here.
            int above(candidates<T>& c, T t_low, double q, double z, std::size_t min_keep)
            {
                const double target = q * z;
                const std::size_t n = c.vocab();
                const T m = c.max_logit();
                const T s2 = c.scale2();
                const auto key = [&](T logit) { return std::size_t(int((exponent(logit, m, s2) - t_low) * T(4))); };

                // Gather G's ids, a vector at a time, branch-free.
                using B = batch<T>;
                const T x_low = least_logit_where(m, [&](T x) { return exponent(x, m, s2) >= t_low; });
                token_id* ids = grown(m_ids, n + B::size);  // gathers write past their count
                std::size_t count = 0;
                c.for_each_stored_run([&](const auto* x, std::size_t first, std::size_t len) {
                    const std::size_t vec_end = len - len % B::size;
                    for (std::size_t i = 0; i < vec_end; i += B::size)
                    {
                        count += compress_bits<B::size>(mask_bits(load_logits<T>(x + i) >= B(x_low)),
                                                                first + i, ids + count);
                    }
                    for (std::size_t j = vec_end; j < len; ++j)
                    {
                        ids[count] = token_id(first + j);
                        count += T(x[j]) >= x_low;
                    }
                });

                // The bucket masses, each bucket's as four partial sums, so that a
                // run of one bucket is not one chain of additions through memory.
                const T* w = c.weights();
                auto& mass = m_bucket_mass;
                const std::size_t buckets = key(m) + 1;
                mass.reserve(4 * (std::size_t(-limit_key()) + 1));
                mass.assign(4 * buckets, 0.0);
                std::uint16_t* keys = grown(m_keys, n);  // at most 4 * 1022 + 1 buckets
                for (std::size_t i = 0; i < count; ++i)
                {
                    keys[i] = std::uint16_t(key(c.logit(ids[i])));
                    mass[4 * keys[i] + i % 4] += double(w[ids[i]]);
                }
                for (std::size_t b = 0; b < buckets; ++b)
                {
                    mass[b] = (mass[4 * b] + mass[4 * b + 1]) + (mass[4 * b + 2] + mass[4 * b + 3]);
                }
                mass.resize(buckets);

                // Bounds on sum W|t| for mass_certified_given: bucket b's tokens
                // have |t| <= |t_low| - (b - 1) / 4 (a quarter octave of slack
                // for the key's rounding), and the rest R, of exact mass at most
                // r_up, at most R log2(n / R) (the entropy of W / R is at most
                // log2 n, |t| = -log2 W; increasing in R up to n / e); R's float
                // mass is z - g within z's lane roundings (8u z) and g's. The
                // factors 1.001 cover W against w and |t| against its rounding.
                const auto t_most = [&](std::size_t b) { return std::max(0.0, -double(t_low) - (double(b) - 1.0) / 4.0); };
                double g = 0.0, a_g = 0.0;
                for (std::size_t b = 0; b < buckets; ++b)
                {
                    g += mass[b];
                    a_g += mass[b] * t_most(b);
                }
                const double dn = double(n);
                const double r_up = 1.001 * std::max(0.0, z - g) + 17.0 * unit<T>() * z + dn * flush_error<T>();
                const double a_r = r_up < dn / 2.72 ? r_up * std::log2(dn / r_up) : dn * log2e / 2.71;
                const double a_z = 1.001 * (a_g + a_r);

                double cum = 0.0;
                double a_heavy = 0.0;  // sum w |t| bound over the heavier buckets
                for (std::size_t b = buckets; b-- > 0;)
                {
                    if (mass[b] == 0.0 || cum + mass[b] < target)
                    {
                        cum += mass[b];
                        a_heavy += mass[b] * t_most(b);
                        continue;
                    }
                    // The crossing bucket: everything heavier, in id order, from
                    // the front of `out`; this bucket's tokens from the back (each
                    // token is written at both ends, and counted at one or none:
                    // the two ends never pass each other). G itself is left as it
                    // is: if rounding makes the walk fall short, the next bucket
                    // is split the same way.
                    scored<T>* out = grown(m_spare, n);
                    std::size_t heavier = 0;
                    std::size_t here = 0;
                    for (std::size_t i = 0; i < count; ++i)
                    {
                        const scored<T> s{c.logit(ids[i]), ids[i]};
                        const std::size_t k = keys[i];
                        out[heavier] = s;
                        out[count - 1 - here] = s;
                        heavier += k > b;
                        here += k == b;
                    }
                    scored<T>* const border = out + (count - here);
                    std::sort(border, out + count, [](const scored<T>& l, const scored<T>& r) { return ranks_before(l, r); });
                    // Keeps the first `kept` tokens of the rank: the heavier ones
                    // and the first kept - heavier of this bucket (in id order).
                    const auto commit = [&](std::size_t kept) {
                        if (kept < min_keep)
                        {
                            c.keep_top(min_keep);  // still dense: selects from the row
                            return 1;
                        }
                        const std::size_t mine = kept - heavier;
                        const auto by_id = [](const scored<T>& l, const scored<T>& r) { return l.id < r.id; };
                        std::sort(border, border + mine, by_id);
                        m_kept.resize(kept);
                        std::merge(out, out + heavier, border, border + mine, m_kept.begin(), by_id);
                        c.keep_subset(m_kept, "top_p");
                        return 1;
                    };
                    const double cum_heavy = cum;
                    for (std::size_t i = 0; i < here; ++i)
                    {
                        const double before = cum;
                        cum += double(w[border[i].id]);
                        if (cum >= target)
                        {
                            // This bucket's tokens so far have |t| at most this one's (ranked).
                            const double t = double(exponent(border[i].logit, m, s2));
                            const double a_c = 1.001 * (a_heavy + (cum - cum_heavy) * std::abs(t));
                            if (mass_certified(before, cum, t, n, q, z) || mass_certified_given(before, cum, a_c, a_z, n, q, z))
                            {
                                return commit(heavier + i + 1);
                            }
                            // Too close for the float weights: G again in double,
                            // the rest as it is with its bound.
                            const std::size_t kept = in_double(c, heavier, border, here, ids, keys, b, count, x_low, t_low, q);
                            return kept == 0 ? -1 : commit(kept);
                        }
                    }
                    a_heavy += (cum - cum_heavy) * t_most(b);  // rounding left it short: on to the next bucket
                }
                return 0;
            }

            // The mass below a logit, from the stored weights (detail/reduce.hpp).
            struct below_kernel
            {
                static constexpr std::size_t channels = 1;
                static constexpr int tiers = 1;
                static constexpr bool reads_weights = true;
                static constexpr bool counts = false;
                T low;
                batch<T> vlow;
                template <class S>
                int plan(const S*, std::uint64_t) const noexcept
                {
                    return 0;
                }
                template <int>
                XSAMPLER_ALWAYS_INLINE void terms(const batch<T>& x, const batch<T>& w, batch<T> (&t)[1]) const noexcept
                {
                    t[0] = xsimd::select(x < vlow, w, batch<T>(T(0)));
                }
                void terms(T x, T w, T (&t)[1]) const noexcept { t[0] = x < low ? w : T(0); }
            };

            // Tier 2 of the dense search, on G = the tokens with x >= x_low
            // (t >= t_low): their weights in double; the rest R summed from the
            // float weights in one pass, with the bound u (3 sum W|t| + 5 sum W)
            // + ... of detail/exact.hpp, sum W|t| bounded by R's entropy (no
            // exponents in the pass). Returns the exact count if
            // these bounds certify a crossing in the bucket given (`out` holds
            // the heavier tokens, `border` this bucket's, ranked), else 0.
            XSAMPLER_NOINLINE std::size_t in_double(candidates<T>& c, std::size_t heavier, const scored<T>* border,
                                                     std::size_t here, const token_id* ids, const std::uint16_t* keys, std::size_t bucket,
                                          std::size_t count, T x_low, T t_low, double q)
            {
                ++counters().tier2;
                const double md = double(c.max_logit());
                const double s2d = c.scale2_double();
                const auto w2 = [&](T x) { return exp2_nonpos(exponent(double(x), md, s2d)); };
                // G's weights in double vectors, 64 at a time; the heavier
                // buckets' share (key above this bucket's) on the way, as the
                // weights times 0 or 1 (exact), in vector sums (no chain of
                // scalar additions).
                using D = batch<double>;
                alignas(64) double xd[64], wd[64], hd[64];
                D zacc(0.0), hacc(0.0);
                for (std::size_t i = 0; i < count; i += 64)
                {
                    const std::size_t k = std::min<std::size_t>(64, count - i);
                    for (std::size_t j = 0; j < 64; ++j)
                    {
                        xd[j] = j < k ? double(c.logit(ids[i + j])) : md;
                        hd[j] = j < k && keys[i + j] > bucket ? 1.0 : 0.0;
                    }
                    for (std::size_t j = 0; j < 64; j += D::size)
                    {
                        exp2_nonpos(exponent(D::load_aligned(xd + j), D(md), D(s2d))).store_aligned(wd + j);
                    }
                    std::fill(wd + k, wd + 64, 0.0);
                    for (std::size_t j = 0; j < 64; j += D::size)
                    {
                        const D w = D::load_aligned(wd + j);
                        zacc += w;
                        hacc += w * D::load_aligned(hd + j);
                    }
                }
                alignas(64) double lz[D::size], lh[D::size];
                zacc.store_aligned(lz);
                hacc.store_aligned(lh);
                double z_g = 0.0, heavy = 0.0;
                for (std::size_t j = 0; j < D::size; ++j)
                {
                    z_g += lz[j];
                    heavy += lh[j];
                }
                // R: every unmasked token below x_low, from its float weight.
                blocked_sum<T> rs[1];
                c.reduce(below_kernel{x_low, batch<T>(x_low)}, rs);
                const double r = rs[0].total();
                const double ut = unit<T>();
                const double ud = unit<double>();
                const double dn = double(c.vocab());
                // R's exact mass is below r_up (its weights within 405u, the
                // flushed ones within the flush bound), and sum W |t| over R is
                // at most R log2(n / R) (the entropy of W / R is at most log2 n;
                // |t| = -log2 W), which increases with R up to n / e. So R is
                // within u (3 R log2(n / R) + 5 R) (+ the rounding of |t|) of the
                // exact (the factor 1 + 68u covers |t| against -log2 W and
                // log2's rounding), plus its lanes of at most 8 terms in T (64
                // in the bound), the rest in double.
                const double r_up = 1.001 * r + dn * flush_error<T>();
                const double rt = r_up < dn / 2.72 ? r_up * std::log2(dn / r_up) : dn * log2e / 2.71;
                const double er = 1.1 * (ut * (3.0 * rt * (1.0 + 68.0 * ut) + 5.0 * r_up) + 64.0 * ut * r + (dn + 64.0) * ud * r) +
                                  dn * flush_error<T>();
                const double rel_g = 1.06 * ((3.0 * (std::abs(double(t_low)) + 1.0) + 5.0) * ud + (double(count) + 8.0) * ud);
                const double z2 = z_g + r;
                const double ez2 = rel_g * z_g + er + 2.0 * ud * z2;
                const double target = q * z2;
                double cum = heavy;
                for (std::size_t i = 0; i < here; ++i)
                {
                    const double before = cum;
                    cum += w2(border[i].logit);
                    if (cum >= target)
                    {
                        const double slack = 4.0 * ud * (cum + target);
                        if (cum - rel_g * cum - slack >= q * (z2 + ez2) && before + rel_g * before + slack < q * (z2 - ez2))
                        {
                            return heavier + i + 1;
                        }
                        return 0;
                    }
                }
                return 0;
            }

            std::vector<scored<T>> m_kept;  // the list keep_subset takes
            std::vector<double> m_bucket_mass;
            std::vector<token_id> m_ids;
            std::vector<scored<T>> m_spare;
            std::vector<std::uint16_t> m_keys;
            // exact's: a kept token with its weights in double and double-double
            struct exact_item
            {
                scored<T> item;
                double w;
                int octave;
                dd w3;
            };
            std::vector<exact_item> m_exact;
            std::vector<double> m_octave_mass;
        };
    }
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
        /// The stage in words, as sampler::describe_stages gives it.
        std::string describe() const
        {
            return detail::with_min_keep(std::string(name) + " " + detail::format_value(m_p), m_min_keep);
        }

        template <class T>
        void apply(candidates<T>& c) const
        {
            if (m_p != 1.0)
            {
                c.template scratch<detail::nucleus<T>>().keep(c, m_p, m_min_keep);
            }
        }

    private:
        double m_p;
        std::size_t m_min_keep;
    };
}

#endif
