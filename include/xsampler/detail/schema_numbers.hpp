// xsampler/detail/schema_numbers.hpp — numbers under bounds and multipleOf, and enum/const values. (xsampler, BSD-3-Clause)
//
// number: a number's bounds (numeric_bounds, each draft's form) and divisor
// as digit automata (detail/json_numbers.hpp), or counted integers;
// values / constant: enum and const as texts, a number in each of its
// spellings (2, 2.0: spellings, equal_texts).
#ifndef XSAMPLER_DETAIL_SCHEMA_NUMBERS_HPP
#define XSAMPLER_DETAIL_SCHEMA_NUMBERS_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>
#include <cmath>
#include <numeric>

#include "schema_compiler.hpp"

namespace xsampler
{
    namespace detail
    {
        /// The numbers of `types` (integers, numbers that are not, or both)
        /// under own's numeric keywords: the builder's integer or number
        /// where there are none, else a lexeme of number_dfa (no exponent;
        /// detail/json_numbers.hpp), one per distinct set of bounds. A
        /// number that is not an integer is written with a fraction whose
        /// last digit is not 0, without an exponent.
        inline std::optional<schema_compiler::expr_id> schema_compiler::number(const conj& own, unsigned types)
        {
            number_bounds b;
            b.integer = (types & t_fraction) == 0;
            const bool fraction = (types & t_integer) == 0;
            const json* at = nullptr;
            for (const json* s : own)
            {
                if (numeric_bounds(s, b))
                {
                    at = s;
                }
            }
            // values a not excludes: the texts of each (the trailing zeros a fraction may have)
            std::string key = b.key(), equal;
            for (const json* v : excluded(own))
            {
                // (true and false exclude 1 and 0 too: loosely_same)
                const std::string number = v->is_boolean() ? (v->get<bool>() ? "1" : "0") : v->is_number() ? v->dump() : "";
                if (const auto d = number.empty() ? std::nullopt : decimal::parse(number))
                {
                    equal += (equal.empty() ? "" : "|") + equal_texts(d->text(), d->is_zero(), d->is_integer(), true);
                    at = own.front();
                }
            }
            key += " not " + equal + (fraction ? " fraction" : "");
            if (at == nullptr)
            {
                if (!fraction)
                {
                    return b.integer ? m_b.integer() : m_b.number();
                }
                at = own.front();
            }
            auto it = m_numbers.find(key);
            if (it == m_numbers.end())
            {
                byte_dfa d;
                try
                {
                    d = number_dfa(b);
                    if (fraction && d.size() != 0)
                    {
                        d = dfa_intersection(d, compile_regex("-?(0|[1-9][0-9]{0,14})\\.[0-9]{0,14}[1-9]"));
                    }
                    if (!equal.empty() && d.size() != 0)
                    {
                        d = dfa_difference(d, compile_regex(equal));
                    }
                }
                catch (const invalid_parameter& e)
                {
                    std::optional<expr_id> counted;
                    try
                    {
                        counted = counted_integers(b, fraction, equal);
                    }
                    catch (const invalid_parameter& c)
                    {
                        fail("multipleOf " + std::to_string(b.divisor) + " within these bounds: " + e.what() +
                                 "; counting its digits: " + c.what(),
                             at);
                    }
                    if (!counted)
                    {
                        fail("multipleOf " + std::to_string(b.divisor) + " within these bounds: " + e.what(), at);
                    }
                    it = m_numbers.emplace(key, *counted).first;
                    return it->second == grammar::none ? std::nullopt : std::optional<expr_id>(it->second);
                }
                it = m_numbers.emplace(key, d.size() == 0 ? grammar::none : m_g.lexeme(std::move(d))).first;
            }
            if (it->second == grammar::none)
            {
                return std::nullopt;
            }
            return it->second;
        }

        /// Integers without bounds whose divisors' product with the 15
        /// digits number_dfa writes is past its limit (multiples of 429 and
        /// of no 8, Handwritten allany7): a sign, then their digits counted
        /// by the grammar (integer_digits_dfa: the remainders alone), at
        /// most 15 of them as number_dfa writes. None where these are not
        /// such integers (grammar::none: there are none).
        inline std::optional<schema_compiler::expr_id> schema_compiler::counted_integers(const number_bounds& b, bool fraction, const std::string& equal)
        {
            if (b.lower || b.upper || fraction || !equal.empty() || (b.divisor <= 1 && b.not_divisors.empty()))
            {
                return std::nullopt;
            }
            byte_dfa digits = integer_digits_dfa(b);
            if (digits.size() == 0)
            {
                return grammar::none;
            }
            // (its table counts toward the schema's, as a pattern's does)
            const std::size_t entries = digits.size() * (max_number_digits + 1);
            if (m_unit_entries + entries > max_unit_entries)
            {
                throw invalid_parameter("the schema's counted lexemes need more than " + std::to_string(max_unit_entries) +
                                        " states x lengths");
            }
            m_unit_entries += entries;
            std::vector<std::uint8_t> units(digits.size(), 1);  // (every state reads a digit)
            return m_g.sequence({m_g.optional(m_g.bytes("-")), m_g.counted_lexeme(std::move(digits), std::move(units), 1,
                                                                                     max_number_digits)});
        }

        /// Adds s's minimum, maximum, exclusiveMinimum, exclusiveMaximum
        /// (draft 4: booleans beside minimum and maximum) and multipleOf
        /// to b; whether it has any. A multipleOf makes b integers: an
        /// integer divisor, or a fraction exact in binary (2.5: multiples
        /// of 5); another fraction (0.01) is an error, since validators
        /// divide in binary floating point and decide it otherwise. With
        /// `exact` the bounds are their values as validators compare them
        /// (exact_value: an enum or const value's check), else their
        /// shortest decimals (the automata: detail/json_numbers.hpp).
        inline bool schema_compiler::numeric_bounds(const json* s, number_bounds& b, bool exact) const
        {
            const auto value = [&](const char* k) {
                const auto& v = (*s)[k];
                const bool bound = std::string(k) != "multipleOf" && std::string(k) != "$xs:notMultipleOf";
                const std::optional<decimal> d =
                    !v.is_number() ? std::nullopt : exact && bound ? exact_value(v) : decimal::parse(v.dump());
                if (!d)
                {
                    fail(std::string(k) + " must be a number, got " + v.dump(), s);
                }
                return *d;
            };
            const bool draft4 = m_doc.draft() <= schema_document::draft4;
            bool any = false;
            if (made(s))
            {
                for (const char* k : {"$xs:lt", "$xs:le", "$xs:gt", "$xs:ge"})
                {
                    if (s->contains(k))
                    {
                        const std::string key = k;
                        if (key[4] == 'l')
                        {
                            b.at_most(value(k), key[5] == 't');
                        }
                        else
                        {
                            b.at_least(value(k), key[5] == 't');
                        }
                        any = true;
                    }
                }
                if (s->contains("$xs:notMultipleOf"))
                {
                    b.not_divisors.push_back(divisor_of(value("$xs:notMultipleOf"), s));
                    b.integer = true;
                    any = true;
                }
            }
            for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
            {
                if (!s->contains(k))
                {
                    continue;
                }
                const std::string key = k;
                const bool lower = key == "minimum" || key == "exclusiveMinimum";
                const bool flag = key[0] == 'e';  // exclusive*
                if (flag && draft4 != (*s)[k].is_boolean())
                {
                    fail(std::string(k) + (draft4 ? " must be a boolean in draft 4" :
                                                    " must be a number (a boolean is draft 4's form: its \"$schema\" says which)"),
                         s);
                }
                if (flag && draft4)
                {
                    continue;  // read with its minimum or maximum
                }
                const char* modifier = lower ? "exclusiveMinimum" : "exclusiveMaximum";
                const bool exclusive = flag || (draft4 && s->contains(modifier) && (*s)[modifier] == true);
                if (lower)
                {
                    b.at_least(value(k), exclusive);
                }
                else
                {
                    b.at_most(value(k), exclusive);
                }
                any = true;
            }
            if (s->contains("multipleOf"))
            {
                const std::uint64_t divisor = divisor_of(value("multipleOf"), s);
                const std::string text = (*s)["multipleOf"].dump();
                const std::uint64_t lcm = b.divisor / std::gcd(b.divisor, divisor);
                if (lcm > (std::uint64_t(1) << 40) / divisor)
                {
                    fail("multipleOf " + text + " together with the others beside it is too large", s);
                }
                b.divisor = lcm * divisor;
                b.integer = true;
                any = true;
            }
            return any;
        }

        /// The integers that are multiples of m are those of the returned
        /// divisor: m = n / 10^q is exact in binary when 5^q divides n,
        /// and then x is a multiple when n / gcd(n, 10^q) divides it.
        inline std::uint64_t schema_compiler::divisor_of(const decimal& m, const json* s) const
        {
            const std::string text = m.text();
            if (m.negative || m.is_zero())
            {
                fail("multipleOf must be above 0, got " + text, s);
            }
            const std::string digits = (m.whole == "0" ? "" : m.whole) + m.fraction;
            std::uint64_t n = digits.size() <= 18 ? std::stoull(digits) : 0, ten = 1, five = 1;
            for (std::size_t i = 0; i < m.fraction.size() && n != 0; ++i)
            {
                ten *= 10;
                five *= 5;
            }
            if (n == 0 || n % five != 0)
            {
                fail("multipleOf " + text + " is not supported (only integers and fractions exact in binary, "
                     "such as 0.5 or 2.5: validators divide in floating point)", s);
            }
            return n / std::gcd(n, ten);
        }

        /// enum and const: the values every schema of the disjunct accepts.
        inline std::optional<schema_compiler::expr_id> schema_compiler::values(const json* at, const conj& own, unsigned types)
        {
            std::vector<const json*> candidates;
            if (has_const(at))
            {
                candidates.push_back(&(*at)["const"]);
            }
            else
            {
                if (!(*at)["enum"].is_array())
                {
                    fail("enum must be a list", at);
                }
                for (const auto& v : (*at)["enum"])
                {
                    candidates.push_back(&v);
                }
            }
            std::vector<std::string> texts;
            std::vector<expr_id> options;
            for (const json* v : candidates)
            {
                bool ok = (type_of(*v) & types) != 0;
                for (const json* s : own)
                {
                    ok = ok && validates(*v, s);
                }
                const std::string spelled = v->is_number() ? spellings(*v) : std::string();
                const std::string text = spelled.empty() ? v->dump() : spelled;  // (2 and 2.0 are one)
                if (ok && std::find(texts.begin(), texts.end(), text) == texts.end())
                {
                    texts.push_back(text);
                    options.push_back(constant(*v));
                }
            }
            if (texts.empty())
            {
                return std::nullopt;
            }
            return m_g.choice(std::move(options));
        }

        /// A value's text: scalars as written (dump), objects with their keys
        /// in the order given, a gap between any two of its tokens.
        inline schema_compiler::expr_id schema_compiler::constant(const json& v)
        {
            if (v.is_number())
            {
                const std::string spelled = spellings(v);
                if (spelled.empty())
                {
                    return m_b.literal(v.dump());
                }
                auto it = m_spellings.find(spelled);
                if (it == m_spellings.end())
                {
                    it = m_spellings.emplace(spelled, m_g.lexeme(compile_regex(spelled))).first;
                }
                return it->second;
            }
            if (!v.is_object() && !v.is_array())
            {
                return m_b.literal(v.dump());
            }
            std::vector<expr_id> parts{m_b.literal(v.is_object() ? "{" : "["), m_b.ws()};
            bool first = true;
            for (const auto& kv : v.items())
            {
                if (!first)
                {
                    parts.insert(parts.end(), {m_b.literal(","), m_b.ws()});
                }
                first = false;
                if (v.is_object())
                {
                    parts.insert(parts.end(), {m_b.literal(json(kv.key()).dump()), m_b.ws(), m_b.literal(":"), m_b.ws()});
                }
                parts.insert(parts.end(), {constant(kv.value()), m_b.ws()});
            }
            parts.push_back(m_b.literal(v.is_object() ? "}" : "]"));
            return m_g.sequence(std::move(parts));
        }

        /// A number's texts that validators read as it: an integer with a
        /// fraction of zeros (2, 2.0, 2.00; draft 4's 2.0 is no integer, so
        /// there only 2, and past 2^53 only the integer), a fraction with
        /// trailing zeros (2.5, 2.50), 0 and -0 alike: a regex, or empty
        /// where the text as written is the one (an exponent, or a double
        /// past 2^53, whose digits need not be its value).
        inline std::string schema_compiler::spellings(const json& v) const
        {
            std::string digits;
            if (v.is_number_integer() || v.is_number_unsigned())
            {
                digits = v.dump();
            }
            else
            {
                const double d = v.get<double>();
                if (d == std::floor(d) && std::fabs(d) < 9007199254740992.0)
                {
                    digits = std::to_string(static_cast<long long>(d));
                }
                else if (v.dump().find_first_of("eE") == std::string::npos)
                {
                    return equal_texts(v.dump(), false, false, false);
                }
                else
                {
                    return std::string();
                }
            }
            // (past 2^53 a fraction's double need not be the integer)
            const bool exact = digits.size() < 16 || std::fabs(std::stod(digits)) < 9007199254740992.0;
            return equal_texts(digits, digits == "0" || digits == "-0", true, m_doc.draft() > schema_document::draft4 && exact);
        }

        /// The texts of a number written `text` (no exponent) that validators
        /// read as it, a regex: a fraction with trailing zeros (2.5, 2.50), an
        /// integer with a fraction of zeros where `zeros` (2, 2.0), 0 and -0
        /// alike.
        inline std::string schema_compiler::equal_texts(std::string text, bool zero, bool integer, bool zeros)
        {
            if (const std::size_t dot = text.find('.'); dot != std::string::npos)
            {
                text.replace(dot, 1, "\\.");
            }
            return (zero ? std::string("-?0") : text) + (!integer ? "0*" : zeros ? "(\\.0+)?" : "");
        }
    }
}

#endif
