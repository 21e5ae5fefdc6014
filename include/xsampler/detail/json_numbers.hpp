// xsampler/detail/json_numbers.hpp — JSON Schema's numeric assertions, exactly: decimals and digit automata. (xsampler, BSD-3-Clause)
//
// decimal::parse(text) reads a JSON number's text (an exponent included) as
// its exact value: a sign, the integer digits and the fraction digits;
// compare(a, b) orders two exactly. number_dfa(bounds) is the automaton of
// the number texts
//     -?(0|[1-9][0-9]*)(\.[0-9]+)?    (no fraction for integers)
// with at most 15 digits in all, whose value lies within the bounds (each
// inclusive or exclusive) and, for integers, is a multiple of the divisor.
// Why 15 digits: two different decimals of at most 15 significant digits are
// two different doubles, and a double's shortest decimal (the bound as a
// schema writes it, and as nlohmann and Python print it) has at most 15 when
// such a decimal rounds to it. So a validator that compares in double
// (Python's jsonschema) decides every text of the automaton as exact
// arithmetic does against the bound's shortest decimal: it never finds a
// generated number on the wrong side of a bound. No exponent is written
// under a bound (a text with one is outside the automaton).
#ifndef XSAMPLER_DETAIL_JSON_NUMBERS_HPP
#define XSAMPLER_DETAIL_JSON_NUMBERS_HPP

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../regex.hpp"
#include "../types.hpp"

namespace xsampler
{
    namespace detail
    {
        /// An exact decimal: whole digits without leading zeros ("0" for
        /// none), fraction digits without trailing zeros; zero is never negative.
        struct decimal
        {
            bool negative = false;
            std::string whole = "0";
            std::string fraction;

            bool is_zero() const noexcept { return whole == "0" && fraction.empty(); }
            bool is_integer() const noexcept { return fraction.empty(); }

            /// A JSON number's text (-?int(.frac)?([eE][+-]?exp)?) as its value;
            /// none when it is not one or its exponent is past +-400 (no double is).
            static std::optional<decimal> parse(std::string_view t)
            {
                std::size_t i = 0;
                decimal d;
                const bool negative = i < t.size() && t[i] == '-';
                i += negative ? 1 : 0;
                std::string digits;
                const auto read_digits = [&](std::string& out) {
                    const std::size_t from = i;
                    while (i < t.size() && t[i] >= '0' && t[i] <= '9')
                    {
                        out.push_back(t[i++]);
                    }
                    return i - from;
                };
                const std::size_t whole = read_digits(digits);
                if (whole == 0 || (whole > 1 && digits[0] == '0'))
                {
                    return std::nullopt;
                }
                long point = long(whole);
                if (i < t.size() && t[i] == '.')
                {
                    ++i;
                    if (read_digits(digits) == 0)
                    {
                        return std::nullopt;
                    }
                }
                if (i < t.size() && (t[i] == 'e' || t[i] == 'E'))
                {
                    ++i;
                    const bool down = i < t.size() && t[i] == '-';
                    i += i < t.size() && (t[i] == '-' || t[i] == '+') ? 1 : 0;
                    std::string e;
                    if (read_digits(e) == 0 || e.size() > 4 || std::stol(e) > 400)
                    {
                        return std::nullopt;
                    }
                    point += down ? -std::stol(e) : std::stol(e);
                }
                if (i != t.size())
                {
                    return std::nullopt;
                }
                if (point < 0)
                {
                    digits.insert(0, std::size_t(-point), '0');
                    point = 0;
                }
                if (std::size_t(point) > digits.size())
                {
                    digits.append(std::size_t(point) - digits.size(), '0');
                }
                d.whole = digits.substr(0, std::size_t(point));
                d.fraction = digits.substr(std::size_t(point));
                d.whole.erase(0, std::min(d.whole.find_first_not_of('0'), d.whole.size()));
                if (d.whole.empty())
                {
                    d.whole = "0";
                }
                d.fraction.erase(d.fraction.find_last_not_of('0') + 1);
                d.negative = negative && !d.is_zero();
                return d;
            }

            std::string text() const
            {
                return (negative ? "-" : "") + whole + (fraction.empty() ? "" : "." + fraction);
            }
        };

        /// -1, 0, 1 as |a| is below, equal to, above |b|.
        inline int compare_magnitude(const decimal& a, const decimal& b)
        {
            if (a.whole.size() != b.whole.size())
            {
                return a.whole.size() < b.whole.size() ? -1 : 1;
            }
            if (const int c = a.whole.compare(b.whole))
            {
                return c < 0 ? -1 : 1;
            }
            const std::size_t n = std::max(a.fraction.size(), b.fraction.size());
            const int c = (a.fraction + std::string(n - a.fraction.size(), '0'))
                              .compare(b.fraction + std::string(n - b.fraction.size(), '0'));
            return c < 0 ? -1 : c > 0 ? 1 : 0;
        }

        /// -1, 0, 1 as a is below, equal to, above b.
        inline int compare(const decimal& a, const decimal& b)
        {
            if (a.negative != b.negative)
            {
                return a.negative ? -1 : 1;
            }
            const int m = compare_magnitude(a, b);
            return a.negative ? -m : m;
        }

        /// Numbers a schema allows: within the bounds, integers (a multiple of
        /// the divisor) or any number.
        struct number_bounds
        {
            std::optional<decimal> lower, upper;
            bool lower_exclusive = false, upper_exclusive = false;
            bool integer = false;
            std::uint64_t divisor = 1;  ///< integers: a multiple of it
            std::vector<std::uint64_t> not_divisors;  ///< integers: a multiple of none of these

            /// Tightens the lower bound to `d` (exclusive or not) where it is higher.
            void at_least(const decimal& d, bool exclusive)
            {
                const int c = lower ? compare(d, *lower) : 1;
                if (c > 0 || (c == 0 && exclusive))
                {
                    lower = d;
                    lower_exclusive = exclusive;
                }
            }
            void at_most(const decimal& d, bool exclusive)
            {
                const int c = upper ? compare(d, *upper) : -1;
                if (c < 0 || (c == 0 && exclusive))
                {
                    upper = d;
                    upper_exclusive = exclusive;
                }
            }
            /// Whether a value lies within the bounds (the divisor and integer aside).
            bool within(const decimal& x) const
            {
                const int lo = lower ? compare(x, *lower) : 1, hi = upper ? compare(x, *upper) : -1;
                return (lo > 0 || (lo == 0 && !lower_exclusive)) && (hi < 0 || (hi == 0 && !upper_exclusive));
            }
            /// Equal bounds give equal automata.
            std::string key() const
            {
                return (lower ? (lower_exclusive ? "(" : "[") + lower->text() : std::string("-")) + "," +
                       (upper ? upper->text() + (upper_exclusive ? ")" : "]") : std::string("-")) +
                       (integer ? "i" : "n") + std::to_string(divisor) + [this] {
                           std::string s;
                           for (const auto n : not_divisors)
                           {
                               s += "!" + std::to_string(n);
                           }
                           return s;
                       }();
            }
        };

        /// The digits a text under a bound may have (see the top of this file).
        constexpr std::size_t max_number_digits = 15;

        /// The minimal DFA of the states `start` reaches by `step` (a state
        /// and a byte to the next, or none), accepting where `accept` says;
        /// states are any hashable value. More than max_states reached is
        /// invalid_parameter.
        template <class State, class Step, class Accept>
        byte_dfa automaton_of(const State& start, const std::string& bytes, Step step, Accept accept,
                              std::size_t max_states)
        {
            // each byte read its own class, the others one more (dead everywhere)
            std::array<bool, 256> listed{};
            for (const char c : bytes)
            {
                listed[static_cast<unsigned char>(c)] = true;
            }
            const auto [class_of, k] = regex::listed_classes(listed);
            std::unordered_map<State, std::int32_t> id;
            std::vector<State> states{start};
            id.emplace(start, 0);
            std::vector<std::int32_t> table(k, byte_dfa::dead);
            std::vector<bool> accepting;
            for (std::size_t s = 0; s < states.size(); ++s)
            {
                const State here = states[s];
                accepting.push_back(accept(here));
                for (const char c : bytes)
                {
                    const std::optional<State> next = step(here, c);
                    if (!next)
                    {
                        continue;
                    }
                    auto it = id.find(*next);
                    if (it == id.end())
                    {
                        if (states.size() >= max_states)
                        {
                            throw invalid_parameter("more than " + std::to_string(max_states) + " automaton states");
                        }
                        it = id.emplace(*next, std::int32_t(states.size())).first;
                        states.push_back(*next);
                        table.resize(states.size() * k, byte_dfa::dead);
                    }
                    table[s * k + class_of[static_cast<unsigned char>(c)]] = it->second;
                }
            }
            return byte_dfa::from_classes(std::move(table), accepting, class_of, k);
        }

        /// The number texts within b (see the top of this file); size() == 0
        /// when there are none. Too many states (a large divisor between
        /// bounds) is invalid_parameter.
        inline byte_dfa number_dfa(const number_bounds& b, std::size_t max_states = 50000)
        {
            // a text's state: where it is, its sign, digits read (all, fraction), how it
            // compares so far with each bound's magnitude (-1, 0, 1), the remainder
            enum : std::uint64_t
            {
                start,
                signed_,
                whole,  // [1-9][0-9]*
                zero,   // a lone 0
                point,
                fraction
            };
            struct parts
            {
                std::uint64_t where, negative, digits, fraction_digits, lower, upper, remainder;
            };
            const auto pack = [](const parts& p) {
                return p.where | p.negative << 3 | p.digits << 4 | p.fraction_digits << 9 | p.lower << 14 |
                       p.upper << 16 | p.remainder << 18;
            };
            const auto unpack = [](std::uint64_t k) {
                return parts{k & 7, k >> 3 & 1, k >> 4 & 31, k >> 9 & 31, k >> 14 & 3, k >> 16 & 3, k >> 18};
            };
            // a comparison as 0 (below), 1 (equal), 2 (above)
            const auto digit_step = [](std::uint64_t so_far, std::size_t at, char d, const std::string& of) {
                if (at >= of.size())
                {
                    return std::uint64_t(2);  // longer: above
                }
                if (so_far != 1)
                {
                    return so_far;
                }
                return std::uint64_t(d < of[at] ? 0 : d > of[at] ? 2 : 1);
            };
            const auto fraction_step = [](std::uint64_t so_far, std::size_t at, char d, const std::string& of) {
                if (so_far != 1)
                {
                    return so_far;
                }
                const char f = at < of.size() ? of[at] : '0';
                return std::uint64_t(d < f ? 0 : d > f ? 2 : 1);
            };
            // the whole part read: fewer digits than the bound's is below
            const auto whole_done = [](std::uint64_t so_far, std::size_t digits, const std::string& of) {
                return digits < of.size() ? std::uint64_t(0) : so_far;
            };
            const decimal none;
            const decimal& lo = b.lower ? *b.lower : none;
            const decimal& hi = b.upper ? *b.upper : none;
            // the remainder modulo every divisor's and not-divisor's multiple
            std::uint64_t m = b.divisor == 0 ? 1 : b.divisor;
            for (const std::uint64_t n : b.not_divisors)
            {
                if (n == 0 || m / std::gcd(m, n) > (std::uint64_t(1) << 40) / n)
                {
                    throw invalid_parameter("multipleOf: the divisors' common multiple is too large");
                }
                m = m / std::gcd(m, n) * n;
            }
            const bool integer = b.integer || m > 1;  // (a divisor is for integers)
            if (std::any_of(b.not_divisors.begin(), b.not_divisors.end(),
                            [&](std::uint64_t n) { return n != 0 && (b.divisor == 0 ? 1 : b.divisor) % n == 0; }))
            {
                return byte_dfa{};  // every multiple of the divisor is one of a not-divisor's
            }
            if (m > 1 && b.lower && b.upper && b.lower->whole.size() <= max_number_digits &&
                b.upper->whole.size() <= max_number_digits)
            {
                // a few integers between the bounds: their texts listed, fewer states
                // than the remainders modulo a large common multiple take
                const std::int64_t largest = 999999999999999;  // max_number_digits nines
                const auto whole = [](const decimal& d) {
                    const std::int64_t w = std::stoll(d.whole);
                    return d.negative ? -w : w;
                };
                const std::int64_t from = std::max(whole(*b.lower) - 1, -largest),
                                   to = std::min(whole(*b.upper) + 1, largest);
                if (from > to)
                {
                    return byte_dfa{};
                }
                if (std::uint64_t(to - from) <= max_states)
                {
                    std::vector<std::string> texts;
                    for (std::int64_t v = from; v <= to; ++v)
                    {
                        const std::uint64_t magnitude = std::uint64_t(v < 0 ? -v : v);
                        const auto divides = [&](std::uint64_t n) { return n != 0 && magnitude % n == 0; };
                        if (!divides(b.divisor == 0 ? 1 : b.divisor) ||
                            std::any_of(b.not_divisors.begin(), b.not_divisors.end(), divides))
                        {
                            continue;
                        }
                        decimal d;
                        d.negative = v < 0;
                        d.whole = std::to_string(magnitude);
                        if (b.within(d))
                        {
                            texts.push_back(d.text());
                            if (v == 0)
                            {
                                texts.push_back("-0");
                            }
                        }
                    }
                    return dfa_of_texts(texts);
                }
            }
            // a missing bound's comparison stays 1 (equal): fewer states
            const auto both = [&](parts& p, auto&& f) {
                if (b.lower)
                {
                    p.lower = f(p.lower, lo);
                }
                if (b.upper)
                {
                    p.upper = f(p.upper, hi);
                }
            };

            const auto step = [&](std::uint64_t key, char c) -> std::optional<std::uint64_t> {
                parts p = unpack(key);
                const bool digit = c >= '0' && c <= '9';
                switch (p.where)
                {
                case start:
                    if (c == '-')
                    {
                        p.where = signed_;
                        p.negative = b.lower || b.upper ? 1 : 0;  // (without a bound the sign is never read)
                        return pack(p);
                    }
                    [[fallthrough]];
                case signed_:
                case whole:
                    if (!digit || (p.where == whole ? p.digits >= max_number_digits : false))
                    {
                        if (c == '.' && p.where == whole && !integer && p.digits < max_number_digits)
                        {
                            p.where = point;
                            both(p, [&](std::uint64_t s, const decimal& d) { return whole_done(s, p.digits, d.whole); });
                            return pack(p);
                        }
                        return std::nullopt;
                    }
                    both(p, [&](std::uint64_t s, const decimal& d) { return digit_step(s, p.digits, c, d.whole); });
                    p.remainder = (p.remainder * 10 + std::uint64_t(c - '0')) % m;
                    p.where = p.where == whole || c != '0' ? whole : zero;
                    ++p.digits;
                    return pack(p);
                case zero:
                    if (c != '.' || integer)
                    {
                        return std::nullopt;
                    }
                    p.where = point;
                    both(p, [&](std::uint64_t s, const decimal& d) { return whole_done(s, p.digits, d.whole); });
                    return pack(p);
                case point:
                case fraction:
                    if (!digit || p.digits >= max_number_digits)
                    {
                        return std::nullopt;
                    }
                    both(p, [&](std::uint64_t s, const decimal& d) { return fraction_step(s, p.fraction_digits, c, d.fraction); });
                    p.where = fraction;
                    ++p.digits;
                    // past both bounds' fractions only whether it is above matters
                    p.fraction_digits = std::min<std::uint64_t>(p.fraction_digits + 1,
                                                                std::max(lo.fraction.size(), hi.fraction.size()));
                    return pack(p);
                default:
                    return std::nullopt;
                }
            };
            // the value against a bound, from the sign and the magnitude's comparison
            const auto signed_compare = [](bool negative, std::uint64_t magnitude, const decimal& d) {
                const int mag = int(magnitude) - 1;
                if (!negative)
                {
                    return d.negative ? 1 : mag;
                }
                if (d.negative)
                {
                    return -mag;
                }
                return d.is_zero() && mag == 0 ? 0 : -1;  // -0 equals 0
            };
            const auto accept = [&](std::uint64_t key) {
                parts p = unpack(key);
                if (p.where == whole || p.where == zero)
                {
                    both(p, [&](std::uint64_t s, const decimal& d) { return whole_done(s, p.digits, d.whole); });
                }
                else if (p.where != fraction)
                {
                    return false;
                }
                // equal so far, but the bound has more fraction digits (never trailing zeros): below
                if (p.lower == 1 && p.fraction_digits < lo.fraction.size())
                {
                    p.lower = 0;
                }
                if (p.upper == 1 && p.fraction_digits < hi.fraction.size())
                {
                    p.upper = 0;
                }
                const int l = signed_compare(p.negative != 0, p.lower, lo), h = signed_compare(p.negative != 0, p.upper, hi);
                const bool multiple = p.remainder % (b.divisor == 0 ? 1 : b.divisor) == 0 &&
                                      std::none_of(b.not_divisors.begin(), b.not_divisors.end(),
                                                   [&](std::uint64_t n) { return p.remainder % n == 0; });
                return multiple && (!b.lower || l > 0 || (l == 0 && !b.lower_exclusive)) &&
                       (!b.upper || h < 0 || (h == 0 && !b.upper_exclusive));
            };
            // both comparisons start equal (1); without a bound they are never read
            return automaton_of(pack(parts{start, 0, 0, 0, 1, 1, 0}), "-.0123456789", step, accept, max_states);
        }

        /// Without bounds, the digits of an integer's magnitude (no sign:
        /// divisibility is the same for -x): 0|[1-9][0-9]*, a multiple of b's
        /// divisor and of none of its not-divisors, any number of digits (the
        /// grammar counts them: grammar::counted_lexeme, every state's byte a
        /// digit, so number_dfa's product with the 15 digits is not built).
        /// size() == 0 when there are none; bounds: invalid_parameter.
        inline byte_dfa integer_digits_dfa(const number_bounds& b, std::size_t max_states = 50000)
        {
            if (b.lower || b.upper)
            {
                throw invalid_parameter("integer_digits_dfa: integers under bounds");
            }
            std::uint64_t m = b.divisor == 0 ? 1 : b.divisor;
            for (const std::uint64_t n : b.not_divisors)
            {
                if (n == 0 || m / std::gcd(m, n) > (std::uint64_t(1) << 40) / n)
                {
                    throw invalid_parameter("multipleOf: the divisors' common multiple is too large");
                }
                m = m / std::gcd(m, n) * n;
            }
            // a state: 0 none read, 1 a lone 0, 2 + r [1-9][0-9]* with remainder r modulo m
            const auto step = [&](std::uint64_t k, char c) -> std::optional<std::uint64_t> {
                const auto d = std::uint64_t(c - '0');
                if (k == 1)
                {
                    return std::nullopt;
                }
                if (k == 0)
                {
                    return d == 0 ? std::uint64_t(1) : 2 + d % m;
                }
                return 2 + ((k - 2) * 10 + d) % m;
            };
            const auto accept = [&](std::uint64_t k) {
                if (k == 0)
                {
                    return false;
                }
                const std::uint64_t r = k == 1 ? 0 : k - 2;
                return r % (b.divisor == 0 ? 1 : b.divisor) == 0 &&
                       std::none_of(b.not_divisors.begin(), b.not_divisors.end(), [&](std::uint64_t n) { return r % n == 0; });
            };
            return automaton_of(std::uint64_t(0), "0123456789", step, accept, max_states);
        }

        /// Whether x is a multiple of m > 0, exactly; none when m, written
        /// with as many fraction digits as x, has more than 18 digits.
        inline std::optional<bool> multiple_of(const decimal& x, const decimal& m)
        {
            const std::size_t q = std::max(x.fraction.size(), m.fraction.size());
            const auto scaled = [q](const decimal& d) { return d.whole + d.fraction + std::string(q - d.fraction.size(), '0'); };
            std::string ms = scaled(m);
            ms.erase(0, std::min(ms.find_first_not_of('0'), ms.size()));
            if (ms.empty() || ms.size() > 18)
            {
                return std::nullopt;
            }
            const std::uint64_t n = std::stoull(ms);
            std::uint64_t r = 0;
            for (const char c : scaled(x))
            {
                r = (r * 10 + std::uint64_t(c - '0')) % n;  // r < n < 10^18: no wrap
            }
            return r == 0;
        }
    }
}

#endif
