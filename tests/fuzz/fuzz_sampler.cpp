// fuzz_sampler: the run-time sampler (sampler.hpp) and the compile-time chain
// (chain.hpp) on fuzzed parameters, stage orders, histories, a user processor
// (custom_stage) and rows of float or double logits with every special value.
//
// Input, in order (fuzz_input.hpp has the encodings):
//   flags          bit 0: double rows (else float); bit 1: give the custom
//                  stage (order modes 0, 2, 3); bit 2: the processor also masks
//                  the generated tokens of the history; bits 3-4: how rows are
//                  passed (xtensor, a strided column view, xt::adapt);
//                  bits 5-6 (float rows): 1 rounds every row to f16, 2 to
//                  bf16, and the rounds are run again on the 16-bit rows
//   temperature, top_p, min_p   value<double>; top_k: see read_top_k
//   seed           u64
//   order          mode byte: 0 default; 1 one of the compile-time orders
//                  below (parameters of unlisted stages made neutral; the
//                  custom stage given iff listed); 2 a list of names (count,
//                  then each a byte into stage_names, repeats and unknown
//                  names included); 3 the same joined by ';' through
//                  parse_stage_order; then a byte choosing the custom stage's
//                  name (mostly "user")
//   edits          count byte (% 6), each (u16 id, value<T>): set_logit by the
//                  processor (a u16 below 0x8000 is taken mod the vocabulary)
//   history        count byte (% 17), each id(vocab of row 0), then the
//                  prompt length byte % (count + 2) (past the end: an error)
//   rows           count byte (% 3 + 1), each: u16 vocabulary (% 2000 + 1),
//                  a fill byte (bits 0-1 the kind: a constant value<T>,
//                  integers in [-4, 4], uniform in [-20, 20], powers of two
//                  over T's whole range; bits 2-4: eighths of the row
//                  masked), a u32 seed, then count byte (% 17) of (u16 % V,
//                  value<T>) written in
//   processors     (order modes 0, 2, 3) read_processors: a byte of which
//                  processors to set (penalties, logit bias, no-repeat n-gram,
//                  bad words, allow/deny, DRY), then their values, ids up to
//                  2099 (past the vocabulary: an error naming it)
//   filters        (order modes 0, 2, 3) read_filters: a byte of which of
//                  typical, top_n_sigma, epsilon, eta, XTC, mirostat, the
//                  dynamic temperature, min_keep and top-k's tie rule to set,
//                  then their values; then a byte of p_less (bit 0), top_h
//                  (bit 1, then its value) and FlashInfer's joint top_k/top_p
//                  (bit 2) (final_distribution takes a copy of the
//                  engine sample uses, so that XTC's coin is the same)
//
// Every call either throws invalid_parameter or invalid_logits with a message
// (anything else crashes), or: the sampled id is in [0, V), not masked in
// the row as the processor edited it, with a finite logprob <= 0 equal to the
// log of its probability in final_distribution; final_distribution's ids are
// unique, in range, unmasked, its probabilities in [0, 1], sorted, summing to
// 1 within 1e-6; top_k k > 0 keeps at most k, temperature 0 keeps one; the
// kept set is a prefix of the rank (logit desc, id asc) of the edited row
// when the processor runs first or not at all. When the order is one of the
// compile-time orders, the chain built from the same stages gives the same
// errors, ids, probabilities and draws, row for row. A row of f16 or bf16
// gives what the float row of its values gave (the same errors, ids,
// probabilities and draws), in each of the three forms.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <xtensor/xadapt.hpp>
#include <xtensor/xtensor.hpp>
#include <xtensor/xview.hpp>

#include <xsampler/xsampler.hpp>

#include "fuzz_input.hpp"

namespace
{
    using namespace xsampler;

    /// The fuzzed processor: sets a few logits (ids possibly outside the
    /// vocabulary, values possibly NaN or +inf), and may ban the tokens
    /// generated so far, like a repetition ban.
    struct user_processor
    {
        static constexpr const char* name = "user";
        std::vector<std::pair<std::uint16_t, double>> edits;  // a float's value is exact in a double
        bool ban_generated = false;

        static token_id resolve(std::uint16_t raw, std::size_t vocab)
        {
            return raw < 0x8000 ? token_id(raw % vocab) : token_id(std::int16_t(raw));
        }

        template <class T>
        void apply(candidates<T>& c, const token_history& history) const
        {
            for (const auto& e : edits)
            {
                c.set_logit(resolve(e.first, c.vocab()), T(e.second));
            }
            if (ban_generated)
            {
                for (const token_id id : history.generated())
                {
                    if (id >= 0 && std::size_t(id) < c.vocab())
                    {
                        c.mask(id);
                    }
                }
            }
        }

        /// The row as the processor leaves it, when it runs on a dense set.
        template <class T>
        std::vector<T> edited(const std::vector<T>& row, const token_history& history) const
        {
            std::vector<T> out = row;
            for (const auto& e : edits)
            {
                const token_id id = resolve(e.first, row.size());
                if (id >= 0 && std::size_t(id) < row.size())
                {
                    out[std::size_t(id)] = T(e.second);
                }
            }
            if (ban_generated)
            {
                for (const token_id id : history.generated())
                {
                    if (id >= 0 && std::size_t(id) < row.size())
                    {
                        out[std::size_t(id)] = -std::numeric_limits<T>::infinity();
                    }
                }
            }
            return out;
        }
    };

    // The compile-time orders the chain is compared on.
    template <class... S>
    struct order
    {
    };
    using U = user_processor;
    using orders = std::tuple<order<temperature, top_k, top_p, min_p>, order<top_k, top_p, min_p, temperature>,
                              order<U, temperature, top_k, top_p, min_p>, order<U, top_k, top_p, min_p, temperature>,
                              order<temperature, top_k>, order<top_k>, order<top_p, min_p>,
                              order<min_p, temperature, top_p>, order<temperature, U, top_k>, order<top_k, U, top_p>,
                              order<top_k, temperature, U, min_p, top_p>, order<>, order<U>,
                              order<top_p, top_k, temperature>, order<temperature, min_p, U, top_k, top_p>,
                              order<min_p, top_k>>;

    template <class... S>
    std::vector<std::string> names_of(order<S...>)
    {
        return {std::string(S::name)...};
    }

    std::vector<std::vector<std::string>> order_names()
    {
        return std::apply([](auto... o) { return std::vector<std::vector<std::string>>{names_of(o)...}; }, orders{});
    }

    template <class S>
    S make_stage(const sampling_params& p, const user_processor& u)
    {
        if constexpr (std::is_same<S, temperature>::value)
        {
            return temperature(p.temperature);
        }
        else if constexpr (std::is_same<S, top_k>::value)
        {
            return top_k(p.top_k);
        }
        else if constexpr (std::is_same<S, top_p>::value)
        {
            return top_p(p.top_p);
        }
        else if constexpr (std::is_same<S, min_p>::value)
        {
            return min_p(p.min_p);
        }
        else
        {
            return u;
        }
    }

    const char* const stage_names[] = {"temperature", "top_k",      "top_p",           "min_p",       "user",
                                       "typical",     "",           "penalties",       "logit_bias",  "dry",
                                       "bad_words",   "token_mask", "no_repeat_ngram", "top_n_sigma", "epsilon",
                                       "eta",         "xtc",        "tfs",             "p_less",      "top_h",
                                       "top_k_top_p", "sequence_bias"};
    constexpr std::size_t stage_name_count = sizeof(stage_names) / sizeof(stage_names[0]);

    /// The processors' parameters, read after the rows (so that inputs written
    /// before them decode as they did): a byte of which to set, then each.
    void read_processors(fuzz::input& in, sampling_params& p)
    {
        const unsigned which = in.byte();
        const auto id = [&] { return token_id(in.u16() % 2100); };  // past the vocabulary sometimes
        if (which & 1)
        {
            fuzz::read_penalties(in, p);
        }
        if (which & 2)
        {
            for (std::size_t n = in.byte() % 5; n > 0; --n)
            {
                const token_id t = id();
                p.logit_bias.emplace_back(in.flag() ? -t : t, in.value<double>());
            }
        }
        if (which & 4)
        {
            p.no_repeat_ngram_size = in.byte() % 5;
        }
        if (which & 8)
        {
            p.bad_words.resize(in.byte() % 4);
            for (auto& w : p.bad_words)
            {
                w.resize(in.byte() % 4);  // 0: an empty sequence, an error
                for (auto& t : w)
                {
                    t = id();
                }
            }
        }
        if (which & 16)
        {
            p.allowed_token_ids.resize(in.byte() % 9);
            for (auto& t : p.allowed_token_ids)
            {
                t = id();
            }
            p.banned_token_ids.resize(in.byte() % 5);
            for (auto& t : p.banned_token_ids)
            {
                t = id();
            }
        }
        if (which & 32)
        {
            p.dry_multiplier = in.value<double>();
            p.dry_base = in.value<double>();
            p.dry_allowed_length = std::int64_t(std::int8_t(in.byte()));
            p.dry_penalty_last_n = std::int64_t(std::int8_t(in.byte()));
            p.dry_sequence_breakers.resize(in.byte() % 3);
            for (auto& t : p.dry_sequence_breakers)
            {
                t = id();
            }
        }
        if (which & 64)
        {
            p.sequence_bias.resize(in.byte() % 4);
            for (auto& e : p.sequence_bias)
            {
                e.first.resize(in.byte() % 4);  // 0: an empty sequence, an error
                for (auto& t : e.first)
                {
                    t = id();
                }
                e.second = in.value<double>();
            }
        }
    }

    /// The filters of issue 11, read after the processors: a byte of which to
    /// set (typical, top_n_sigma, epsilon, eta, xtc, mirostat, dynamic
    /// temperature, min_keep and top-k's tie rule), then each.
    void read_filters(fuzz::input& in, sampling_params& p)
    {
        const unsigned which = in.byte();
        if (which & 1)
        {
            p.typical_p = in.value<double>();
        }
        if (which & 2)
        {
            p.top_n_sigma = in.value<double>();
        }
        if (which & 4)
        {
            p.epsilon = in.value<double>();
        }
        if (which & 8)
        {
            p.eta = in.value<double>();
        }
        if (which & 16)
        {
            p.xtc_probability = in.value<double>();
            p.xtc_threshold = in.value<double>();
        }
        if (which & 32)
        {
            p.mirostat = int(in.byte() % 4);  // 3: an error
            p.mirostat_tau = in.value<double>();
            p.mirostat_eta = in.value<double>();
            p.mirostat_m = std::int64_t(std::int8_t(in.byte()));
        }
        if (which & 64)
        {
            p.dynatemp_range = in.value<double>();
            p.dynatemp_exponent = in.value<double>();
        }
        if (which & 128)
        {
            p.min_keep = in.byte() % 6;
            p.top_k_keep_ties = in.flag();
        }
        // Stages added since (issue 20), in a byte of their own so that
        // older inputs decode as they did: p_less, top_h, top_k_top_p_joint.
        const unsigned later = in.byte();
        p.p_less = (later & 1) != 0;
        p.top_k_top_p_joint = (later & 4) != 0;
        if (later & 2)
        {
            p.top_h = in.value<double>();
        }
    }

    /// Whether any processor of the table is set.
    bool processors_set(const sampling_params& p)
    {
        return p.repeat_penalty != 1.0 || p.presence_penalty != 0.0 || p.frequency_penalty != 0.0 ||
               !p.logit_bias.empty() || !p.sequence_bias.empty() || p.no_repeat_ngram_size != 0 || !p.bad_words.empty() ||
               !p.allowed_token_ids.empty() || !p.banned_token_ids.empty() || p.dry_multiplier != 0.0;
    }

    std::int64_t read_top_k(fuzz::input& in)
    {
        const unsigned s = in.byte();
        switch (s)
        {
        case 0: return -1;
        case 1: return std::numeric_limits<std::int64_t>::min();
        case 2: return std::numeric_limits<std::int64_t>::max();
        case 3: return std::int64_t(1) << 32;
        case 4: return std::int64_t(in.u64());
        default: return std::int64_t(s % 64) + (s >= 128 ? 1990 : 0);  // small, or near the largest vocabulary
        }
    }

    std::uint64_t splitmix(std::uint64_t& state)
    {
        std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }

    template <class T>
    std::vector<T> read_row(fuzz::input& in)
    {
        using lim = std::numeric_limits<T>;
        const std::size_t vocab = in.u16() % 2000 + 1;
        const unsigned fill = in.byte();
        std::uint64_t state = in.u32();
        const T constant = (fill & 3) == 0 ? in.value<T>() : T(0);
        std::vector<T> row(vocab);
        for (auto& x : row)
        {
            const std::uint64_t r = splitmix(state);
            switch (fill & 3)
            {
            case 0: x = constant; break;
            case 1: x = T(int(r % 9) - 4); break;
            case 2: x = T(double(r >> 11) * 0x1p-53 * 40.0 - 20.0); break;
            default:
            {
                const int span = lim::max_exponent - (lim::min_exponent - lim::digits);
                const int e = int((r >> 8) % unsigned(span)) + (lim::min_exponent - lim::digits);
                x = T(std::ldexp(T(1), e)) * ((r & 1) ? T(-1) : T(1));
            }
            }
            if (((r >> 4) & 7) < ((fill >> 2) & 7))
            {
                x = -lim::infinity();
            }
        }
        const std::size_t explicit_count = in.byte() % 17;
        for (std::size_t i = 0; i < explicit_count; ++i)
        {
            const std::size_t at = in.u16() % vocab;
            row[at] = in.value<T>();
        }
        return row;
    }

    /// What one row gives: final_distribution and sample, or their errors.
    struct round_result
    {
        std::string dist_error;
        std::string sample_error;
        distribution dist;
        sampled_token token;
    };

    struct case_facts
    {
        bool greedy = false;  // temperature 0 is in the order
        std::size_t k = 0;    // top_k's k if listed and > 0
        bool has_user = false;
        bool rank_prefix = false;  // every stage keeps a rank prefix of the edited row
    };

    template <class T>
    void check_round(const round_result& r, const std::vector<T>& row, const std::vector<T>& edited, const case_facts& f)
    {
        const std::size_t vocab = row.size();
        FUZZ_REQUIRE(r.dist_error == r.sample_error,
                     "final_distribution and sample disagree: '" + r.dist_error + "' vs '" + r.sample_error + "'");
        if (!r.dist_error.empty())
        {
            return;
        }
        const auto& d = r.dist;
        FUZZ_REQUIRE(!d.ids.empty() && d.ids.size() == d.probs.size(), "an empty final distribution");
        std::vector<bool> seen(vocab, false);
        double sum = 0.0;
        for (std::size_t i = 0; i < d.ids.size(); ++i)
        {
            const token_id id = d.ids[i];
            const double p = d.probs[i];
            FUZZ_REQUIRE(id >= 0 && std::size_t(id) < vocab, "id " + std::to_string(id) + " outside the vocabulary");
            FUZZ_REQUIRE(!seen[std::size_t(id)], "id " + std::to_string(id) + " listed twice");
            seen[std::size_t(id)] = true;
            FUZZ_REQUIRE(edited[std::size_t(id)] != -std::numeric_limits<T>::infinity(),
                         "masked id " + std::to_string(id) + " kept");
            FUZZ_REQUIRE(p >= 0.0 && p <= 1.0, "probability " + std::to_string(p) + " of id " + std::to_string(id));
            if (i > 0)
            {
                FUZZ_REQUIRE(d.probs[i - 1] > p || (d.probs[i - 1] == p && d.ids[i - 1] < id),
                             "final_distribution not sorted at " + std::to_string(i));
            }
            sum += p;
        }
        FUZZ_REQUIRE(std::fabs(sum - 1.0) <= 1e-6, "probabilities sum to " + std::to_string(sum));
        if (f.greedy)
        {
            FUZZ_REQUIRE(d.ids.size() == 1, "temperature 0 kept " + std::to_string(d.ids.size()) + " tokens");
        }
        if (f.k > 0)
        {
            FUZZ_REQUIRE(d.ids.size() <= f.k, "top_k " + std::to_string(f.k) + " kept " + std::to_string(d.ids.size()));
        }
        if (f.rank_prefix)
        {
            // The worst kept token ranks before the best dropped one.
            const auto rank = [&](token_id id) { return scored<T>{edited[std::size_t(id)], id}; };
            scored<T> worst_kept = rank(d.ids[0]);
            for (const token_id id : d.ids)
            {
                worst_kept = ranks_before(worst_kept, rank(id)) ? rank(id) : worst_kept;
            }
            for (std::size_t i = 0; i < vocab; ++i)
            {
                if (!seen[i] && edited[i] != -std::numeric_limits<T>::infinity())
                {
                    FUZZ_REQUIRE(ranks_before(worst_kept, rank(token_id(i))),
                                 "not a rank prefix: id " + std::to_string(i) + " dropped, id " +
                                     std::to_string(worst_kept.id) + " kept");
                }
            }
        }

        const sampled_token t = r.token;
        FUZZ_REQUIRE(t.id >= 0 && std::size_t(t.id) < vocab, "sampled id " + std::to_string(t.id) + " outside the vocabulary");
        FUZZ_REQUIRE(edited[std::size_t(t.id)] != -std::numeric_limits<T>::infinity(),
                     "sampled a masked id " + std::to_string(t.id));
        FUZZ_REQUIRE(std::isfinite(t.logprob) && t.logprob <= 0.0, "sampled logprob " + std::to_string(t.logprob));
        std::size_t at = 0;
        while (at < d.ids.size() && d.ids[at] != t.id)
        {
            ++at;
        }
        FUZZ_REQUIRE(at < d.ids.size() && d.probs[at] > 0.0,
                     "sampled id " + std::to_string(t.id) + " has no probability in final_distribution");
        FUZZ_REQUIRE(t.logprob == std::log(d.probs[at]),
                     "logprob " + std::to_string(t.logprob) + " is not log(" + std::to_string(d.probs[at]) + ")");
    }

    template <class T, class Sampler, class Row>
    round_result run_round(Sampler& s, const Row& row, const token_history& history)
    {
        round_result r;
        philox4x32 coin = s.engine();  // XTC's coin in final_distribution is the one sample draws
        r.dist_error = fuzz::documented_error([&] { r.dist = s.final_distribution(row, history, coin); });
        r.sample_error = fuzz::documented_error([&] { r.token = s.sample(row, history); });
        return r;
    }

    /// Two ways of sampling the same row gave the same errors, ids,
    /// probabilities and draw.
    void same_round(const round_result& got, const round_result& want, const std::string& where)
    {
        FUZZ_REQUIRE(got.dist_error == want.dist_error, where + "'" + got.dist_error + "' vs '" + want.dist_error + "'");
        FUZZ_REQUIRE(got.sample_error == want.sample_error, where + "'" + got.sample_error + "' vs '" + want.sample_error + "'");
        if (!want.dist_error.empty())
        {
            return;
        }
        FUZZ_REQUIRE(got.dist.ids == want.dist.ids, where + "ids differ");
        FUZZ_REQUIRE(got.dist.probs == want.dist.probs, where + "probabilities differ");
        if (want.sample_error.empty())
        {
            FUZZ_REQUIRE(got.token.id == want.token.id && got.token.logprob == want.token.logprob,
                         where + "draws differ: " + std::to_string(got.token.id) + " vs " + std::to_string(want.token.id));
        }
    }

    /// A chain with an engine, called like a sampler (which has its own).
    template <class Chain>
    struct with_engine
    {
        Chain& c;
        philox4x32& rng;
        template <class E>
        distribution final_distribution(const E& row, const token_history& h, philox4x32& coin)
        {
            return c.final_distribution(row, h, coin);
        }
        philox4x32& engine() noexcept { return rng; }
        template <class E>
        sampled_token sample(const E& row, const token_history& h)
        {
            return c.sample(row, h, rng);
        }
    };

    // The compile-time chain does what the sampler did, row for row.
    template <class T, class... S>
    void compare_chain(order<S...>, const sampling_params& p, const user_processor& u,
                       const std::vector<std::vector<T>>& rows, const token_history& history,
                       const std::vector<round_result>& expected)
    {
        chain<S...> c(make_stage<S>(p, u)...);
        philox4x32 rng(p.seed, 0);
        with_engine<chain<S...>> runner{c, rng};
        for (std::size_t i = 0; i < rows.size(); ++i)
        {
            const auto row = xt::adapt(rows[i], {rows[i].size()});
            same_round(run_round<T>(runner, row, history), expected[i], "row " + std::to_string(i) + ": chain vs sampler: ");
        }
    }

    template <class T, std::size_t I = 0>
    void compare_matching_chain(const sampling_params& p, const user_processor& u,
                                const std::vector<std::vector<T>>& rows, const token_history& history,
                                const std::vector<round_result>& expected)
    {
        if constexpr (I < std::tuple_size<orders>::value)
        {
            using O = std::tuple_element_t<I, orders>;
            if (p.order == names_of(O{}))
            {
                fuzz::trace("compared with compile-time order " + std::to_string(I));
                compare_chain<T>(O{}, p, u, rows, history, expected);
                return;
            }
            compare_matching_chain<T, I + 1>(p, u, rows, history, expected);
        }
    }

    /// Calls f with the row as an xtensor expression of the given form.
    template <class T, class F>
    void with_row(unsigned form, const std::vector<T>& row, F&& f)
    {
        if (form == 1)
        {
            auto m = xt::xtensor<T, 2>::from_shape({row.size(), std::size_t(2)});
            for (std::size_t i = 0; i < row.size(); ++i)
            {
                m(i, 0) = row[i];
                m(i, 1) = T(0.0f);
            }
            f(xt::view(m, xt::all(), 0));  // strided: copied once
        }
        else if (form == 2)
        {
            f(xt::adapt(row.data(), row.size(), xt::no_ownership(), std::vector<std::size_t>{row.size()}));
        }
        else
        {
            xt::xtensor<T, 1> r = xt::adapt(row, {row.size()});
            f(r);
        }
    }

    /// Masks in `row` what the bias and the token mask ban for certain (a
    /// kept token must not be one of them); the penalties' and bans' edits
    /// are checked by their unit tests against brute-force references.
    template <class T>
    void banned_by_processors(const sampling_params& p, std::vector<T>& row)
    {
        const auto ban = [&](token_id t) {
            if (t >= 0 && std::size_t(t) < row.size())
            {
                row[std::size_t(t)] = -std::numeric_limits<T>::infinity();
            }
        };
        const auto listed = [&](const char* n) { return std::find(p.order.begin(), p.order.end(), n) != p.order.end(); };
        if (listed("logit_bias"))
        {
            for (const auto& b : p.logit_bias)
            {
                if (b.second == -std::numeric_limits<double>::infinity())
                {
                    ban(b.first);
                }
            }
        }
        if (listed("token_mask"))
        {
            for (const token_id t : p.banned_token_ids)
            {
                ban(t);
            }
            for (std::size_t i = 0; !p.allowed_token_ids.empty() && i < row.size(); ++i)
            {
                const auto& a = p.allowed_token_ids;
                if (std::find(a.begin(), a.end(), token_id(i)) == a.end())
                {
                    ban(token_id(i));
                }
            }
        }
    }

    /// The rounds again on the 16-bit rows (H) whose values the float rows
    /// hold, by a sampler made from the same parameters.
    template <class H>
    void compare_half(const sampling_params& p, unsigned form, const std::vector<std::vector<float>>& rows,
                      const token_history& history, const std::vector<round_result>& expected)
    {
        fuzz::trace(std::string("compared with the rows as ") + (std::is_same<H, f16>::value ? "f16" : "bf16"));
        sampler s(p);
        for (std::size_t i = 0; i < rows.size(); ++i)
        {
            const std::vector<H> row(rows[i].begin(), rows[i].end());  // exact: the values are H's
            round_result got;
            with_row<H>(form, row, [&](const auto& expr) { got = run_round<float>(s, expr, history); });
            same_round(got, expected[i], "row " + std::to_string(i) + ": " + (std::is_same<H, f16>::value ? "f16" : "bf16") +
                                             " vs float: ");
        }
    }

    template <class T>
    void run(fuzz::input& in, unsigned flags)
    {
        sampling_params p;
        p.temperature = in.value<double>();
        p.top_k = read_top_k(in);
        p.top_p = in.value<double>();
        p.min_p = in.value<double>();
        p.seed = in.u64();

        const unsigned mode = in.byte() % 4;
        bool custom = flags & 2;
        if (mode == 1)
        {
            const auto all = order_names();
            p.order = all[in.byte() % all.size()];
            const auto listed = [&](const char* n) { return std::find(p.order.begin(), p.order.end(), n) != p.order.end(); };
            p.temperature = listed("temperature") ? p.temperature : 1.0;
            p.top_k = listed("top_k") ? p.top_k : 0;
            p.top_p = listed("top_p") ? p.top_p : 1.0;
            p.min_p = listed("min_p") ? p.min_p : 0.0;
            custom = listed("user");
        }
        else if (mode >= 2)
        {
            const std::size_t count = in.byte() % 7;
            std::vector<std::string> names;
            for (std::size_t i = 0; i < count; ++i)
            {
                names.emplace_back(stage_names[in.byte() % stage_name_count]);
            }
            if (mode == 2)
            {
                p.order = names;
            }
            else
            {
                std::string text;
                for (const auto& n : names)
                {
                    text += n + ((in.byte() & 3) == 0 ? ";;" : ";");
                }
                const std::string error = fuzz::documented_error([&] { p.order = parse_stage_order(text); });
                if (!error.empty())
                {
                    fuzz::trace(error);
                    return;
                }
            }
        }
        const char* const custom_names[] = {"user", "user", "user", "user", "top_k", "", "a;b", "min_p"};
        const std::string custom_name = custom_names[in.byte() % 8];

        user_processor u;
        u.ban_generated = flags & 4;
        const std::size_t edit_count = in.byte() % 6;
        for (std::size_t i = 0; i < edit_count; ++i)
        {
            const std::uint16_t id = in.u16();
            u.edits.emplace_back(id, double(in.value<T>()));
        }

        std::vector<token_id> tokens(in.byte() % 17);
        const std::size_t history_vocab = in.u16() % 2000 + 1;
        for (auto& t : tokens)
        {
            t = in.id(history_vocab);
        }
        const std::size_t prompt_length = in.byte() % (tokens.size() + 2);

        std::vector<std::vector<T>> rows(in.byte() % 3 + 1);
        const unsigned half = std::is_same<T, float>::value ? (flags >> 5) & 3 : 0;
        for (auto& r : rows)
        {
            r = read_row<T>(in);
            for (auto& x : r)
            {
                x = half == 1 ? T(f16(float(x))) : half == 2 ? T(bf16(float(x))) : x;
            }
        }
        if (mode != 1)
        {
            read_processors(in, p);
            read_filters(in, p);
        }

        std::optional<token_history> history;
        if (!fuzz::documented_error([&] { history.emplace(token_span(tokens), prompt_length); }).empty())
        {
            FUZZ_REQUIRE(prompt_length > tokens.size(), "a valid prompt length rejected");
            fuzz::trace("history rejected");
            return;
        }
        if (custom)
        {
            const std::string error =
                fuzz::documented_error([&] { p.custom.emplace_back(custom_name, u); });
            if (!error.empty())
            {
                FUZZ_REQUIRE(custom_name.empty() || custom_name.find(';') != std::string::npos,
                             "custom_stage rejected the name '" + custom_name + "': " + error);
                fuzz::trace(error);
                return;
            }
        }
        std::optional<sampler> s;
        const std::string rejected = fuzz::documented_error([&] { s.emplace(p); });
        if (!rejected.empty())
        {
            fuzz::trace(rejected);
            return;
        }

        case_facts facts;
        const auto listed = [&](const char* n) { return std::find(p.order.begin(), p.order.end(), n) != p.order.end(); };
        facts.greedy = listed("temperature") && p.temperature == 0.0 && p.dynatemp_range == 0.0;
        facts.k = listed("top_k") && !p.top_k_keep_ties && p.top_k > 0 && p.mirostat == 0 && !p.top_k_top_p_joint
                      ? std::max(std::size_t(p.top_k), std::max<std::size_t>(p.min_keep, 1))
                      : 0;
        facts.has_user = custom && listed(custom_name.c_str());
        // typical and XTC keep sets that are not rank prefixes.
        facts.rank_prefix = (!facts.has_user || p.order.front() == custom_name) && !processors_set(p) &&
                            !(listed("typical") && p.typical_p != 1.0) && !(listed("xtc") && p.xtc_probability != 0.0);

        const unsigned form = (flags >> 3) & 3;
        std::vector<round_result> results;
        for (const auto& row : rows)
        {
            round_result r;
            with_row<T>(form, row, [&](const auto& expr) { r = run_round<T>(*s, expr, *history); });
            std::vector<T> edited = facts.has_user ? u.edited(row, *history) : row;
            banned_by_processors(p, edited);
            fuzz::trace("vocab " + std::to_string(row.size()) + ": " +
                        (r.dist_error.empty() ? std::to_string(r.dist.ids.size()) + " kept, drew " +
                                                    std::to_string(r.token.id)
                                              : r.dist_error));
            check_round(r, row, edited, facts);
            results.push_back(std::move(r));
        }
        if (custom_name == "user")
        {
            compare_matching_chain<T>(p, u, rows, *history, results);
        }
        if constexpr (std::is_same<T, float>::value)
        {
            if (half == 1)
            {
                compare_half<f16>(p, form, rows, *history, results);
            }
            else if (half == 2)
            {
                compare_half<bf16>(p, form, rows, *history, results);
            }
        }
    }
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    fuzz::input in(data, size);
    fuzz::by_row_type(in, [&](auto type, unsigned flags) { run<decltype(type)>(in, flags); });
    return 0;
}
