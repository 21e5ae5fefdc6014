// xsampler/detail/schema_validation.hpp — a JSON value checked against a schema. (xsampler, BSD-3-Clause)
//
// validates(v, s): whether an enum or const candidate satisfies every other
// keyword beside it (and the compiler's own "$xs:" keywords), numbers
// compared exactly (exact_value), patterns searched by their DFAs.
#ifndef XSAMPLER_DETAIL_SCHEMA_VALIDATION_HPP
#define XSAMPLER_DETAIL_SCHEMA_VALIDATION_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>
#include <cmath>
#include <cstdio>

#include "schema_compiler.hpp"

namespace xsampler
{
    namespace detail
    {
        // ---- a value against a schema (enum and const candidates) ----

        inline bool schema_compiler::validates(const json& v, const json* s, int depth)
        {
            if (depth > 64)
            {
                fail("a value's check went through more than 64 $ref", s);
            }
            if (s->is_boolean())
            {
                return s->get<bool>();
            }
            if (!s->is_object())
            {
                fail("a schema must be an object or a boolean, got " + std::string(s->type_name()), s);
            }
            if (s->contains("$ref"))
            {
                if (!validates(v, m_doc.resolve(s, (*s)["$ref"].get<std::string>()), depth + 1))
                {
                    return false;
                }
                if (ref_only(s))
                {
                    return true;
                }
            }
            const unsigned t = type_of(v);
            const unsigned types = type_bits(s);
            if ((t & types) == 0)
            {
                return false;
            }
            if (has_const(s) && !same((*s)["const"], v))
            {
                return false;
            }
            if (s->contains("enum") && (*s)["enum"].is_array())
            {
                const auto& e = (*s)["enum"];
                if (std::none_of(e.begin(), e.end(), [&](const json& x) { return same(x, v); }))
                {
                    return false;
                }
            }
            if (made(s) && !validates_made(v, s, depth))
            {
                return false;
            }
            if (s->contains("not") && validates(v, &(*s)["not"], depth + 1))
            {
                return false;
            }
            for (const auto& kv : s->items())
            {
                const std::string& k = kv.key();
                const int c = class_of(s, k);
                if (k == "not" || c < 0)
                {
                    continue;
                }
                if (k == "if")
                {
                    const bool holds = validates(v, &(*s)["if"], depth + 1);
                    const char* branch = holds ? "then" : "else";
                    if (has(s, branch) && !validates(v, &(*s)[branch], depth + 1))
                    {
                        return false;
                    }
                }
                else if (c == 0 && (k == "allOf" || k == "anyOf" || k == "oneOf"))
                {
                    std::size_t n = 0;
                    for (const json* b : list_of(s, k.c_str()))
                    {
                        n += validates(v, b, depth + 1) ? 1 : 0;
                    }
                    const std::size_t all = (*s)[k].size();
                    if ((k == "allOf" && n != all) || (k == "anyOf" && n == 0) || (k == "oneOf" && n != 1))
                    {
                        return false;
                    }
                }
                else if (c == 0 && k != "type" && k != "enum" && k != "const" && k != "$ref" && k != "then" &&
                         k != "else")
                {
                    unsupported(k, s);
                }
                else if (c > 0 && (applies_to(c) & t) != 0)
                {
                    if (!validates_typed(v, k, s, depth))
                    {
                        return false;
                    }
                }
            }
            return true;
        }

        /// Whether the string value v has a match of the pattern (searched, as
        /// JSON Schema does), its DFA compiled once per schema.
        inline bool schema_compiler::matches_pattern(const json& v, const json& pattern, const json* s, regex_reading reading)
        {
            try
            {
                return search_automaton(pattern.get<std::string>(), reading).matches(v.get<std::string>());
            }
            catch (const invalid_parameter& e)
            {
                fail(std::string("pattern: ") + e.what(), s);
            }
        }

        /// The texts in which the pattern finds a match in that reading, compiled once (invalid_parameter).
        inline const byte_dfa& schema_compiler::search_automaton(const std::string& p, regex_reading reading)
        {
            auto it = m_searches.find({p, reading});
            if (it == m_searches.end())
            {
                regex_options o;
                o.search = true;
                o.reading = reading;
                it = m_searches.emplace(std::make_pair(p, reading), compile_regex(p, o)).first;
            }
            return it->second;
        }

        /// Whether s's properties or patternProperties take the key (its additionalProperties does not).
        inline bool schema_compiler::lists(const json* s, const std::string& key)
        {
            if (s->contains("properties") && (*s)["properties"].contains(key))
            {
                return true;
            }
            if (!s->contains("patternProperties") || !(*s)["patternProperties"].is_object())
            {
                return false;
            }
            for (const auto& p : (*s)["patternProperties"].items())
            {
                if (matches_pattern(json(key), json(p.key()), s))
                {
                    return true;
                }
            }
            return false;
        }

        /// A number as validators compare it: an integer as written, a
        /// double (nlohmann's float) as its exact binary value (Python
        /// compares an int with a float exactly, two floats as doubles).
        inline std::optional<decimal> schema_compiler::exact_value(const json& v)
        {
            if (!v.is_number_float())
            {
                return decimal::parse(v.dump());
            }
            const double d = v.get<double>();
            if (!std::isfinite(d))
            {
                return std::nullopt;
            }
            char text[1600];  // (1e308's 309 digits and 1,100 after the point: every double's expansion)
            std::snprintf(text, sizeof text, "%.1100f", d);
            return decimal::parse(text);
        }

        /// An enum or const number's exact value (exact_value).
        inline decimal schema_compiler::value_of_number(const json& v, const json* s) const
        {
            const auto d = exact_value(v);
            if (!d)
            {
                fail("enum/const value " + v.dump() + " is out of range", s);
            }
            return *d;
        }

        /// A made schema's "$xs:" keywords (see negation_of) on a value.
        inline bool schema_compiler::validates_made(const json& v, const json* s, int depth)
        {
            if (s->contains("$xs:not"))
            {
                const auto& [target, types] = m_refs.at((*s)["$xs:not"].get<std::size_t>());
                if ((type_of(v) & types) != 0 && validates(v, target, depth + 1))
                {
                    return false;
                }
            }
            if (s->contains("$xs:is") && !validates(v, m_refs.at((*s)["$xs:is"].get<std::size_t>()).first, depth + 1))
            {
                return false;
            }
            if (s->contains("$xs:some") && v.is_object())
            {
                // a member of the kind (see object()) whose value validates
                const json& some = (*s)["$xs:some"];
                const json* s0 = m_refs.at(some["of"].get<std::size_t>()).first;
                bool found = false;
                for (const auto& kv : v.items())
                {
                    bool of_kind = false;
                    if (some.contains("names"))
                    {
                        of_kind = !validates(json(kv.key()), m_refs.at(some["names"].get<std::size_t>()).first, depth + 1);
                    }
                    else if (some.contains("pattern"))
                    {
                        of_kind = matches_pattern(json(kv.key()), some["pattern"], s);
                    }
                    else
                    {
                        of_kind = !lists(s0, kv.key());
                    }
                    found = found || (of_kind && validates(kv.value(), &some["value"], depth + 1));
                }
                if (!found)
                {
                    return false;
                }
            }
            if (s->contains("$xs:notIn"))
            {
                const auto& e = (*s)["$xs:notIn"];
                if (std::any_of(e.begin(), e.end(), [&](const json& x) { return loosely_same(x, v); }))
                {
                    return false;
                }
            }
            if (v.is_number())
            {
                number_bounds b;
                numeric_bounds(s, b, true);
                const decimal d = value_of_number(v, s);
                if (!b.within(d) || std::any_of(b.not_divisors.begin(), b.not_divisors.end(), [&](std::uint64_t n) {
                        return *multiple_of(d, *decimal::parse(std::to_string(n)));
                    }))
                {
                    return false;
                }
            }
            return !(v.is_string() && s->contains("$xs:notPattern") &&
                     matches_pattern(v, (*s)["$xs:notPattern"], s, regex_reading::either));
        }

        inline bool schema_compiler::validates_typed(const json& v, const std::string& k, const json* s, int depth)
        {
            const json& x = (*s)[k];
            if (v.is_string())
            {
                std::size_t chars = 0;
                for (const char c : v.get_ref<const std::string&>())
                {
                    chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
                }
                if (k == "minLength") return chars >= count(s, "minLength", 0);
                if (k == "maxLength") return chars <= count(s, "maxLength", 0);
                if (k == "pattern")
                {
                    return matches_pattern(v, x, s, regex_reading::both);
                }
                if (k == "format")
                {
                    const std::string* f = format_of(s);
                    return f == nullptr || format_dfa(f).matches(v.get<std::string>());
                }
            }
            else if (v.is_array())
            {
                if (k == "minItems") return v.size() >= count(s, "minItems", 0);
                if (k == "maxItems") return v.size() <= count(s, "maxItems", 0);
                if (k == "items" && !x.is_array())
                {
                    return std::all_of(v.begin(), v.end(), [&](const json& i) { return validates(i, &x, depth + 1); });
                }
                if (k == "additionalItems" && !(s->contains("items") && (*s)["items"].is_array()))
                {
                    return true;
                }
                if (k == "uniqueItems")
                {
                    // (1 and true count as equal, as distinct_items has them: a subset either way)
                    for (std::size_t i = 0; x == true && i < v.size(); ++i)
                    {
                        for (std::size_t j = i + 1; j < v.size(); ++j)
                        {
                            if (loosely_same(v[i], v[j]))
                            {
                                return false;
                            }
                        }
                    }
                    return true;
                }
                if (k == "minContains" || k == "maxContains")
                {
                    return true;  // (read with contains)
                }
                if (k == "contains")
                {
                    const auto n = std::size_t(std::count_if(v.begin(), v.end(), [&](const json& i) { return validates(i, &x, depth + 1); }));
                    return n >= count(s, "minContains", 1) && n <= count(s, "maxContains", grammar::unbounded);
                }
            }
            else if (v.is_object())
            {
                if (k == "required")
                {
                    return std::all_of(x.begin(), x.end(), [&](const json& n) { return n.is_string() && v.contains(n.get<std::string>()); });
                }
                if (k == "dependencies" || k == "dependentRequired" || k == "dependentSchemas")
                {
                    for (const auto& d : dependencies_of(s))
                    {
                        if (d.keyword == k && v.contains(d.key) &&
                            (d.names ? std::any_of(d.value->begin(), d.value->end(), [&](const json& n) { return !v.contains(n.get<std::string>()); })
                                     : !validates(v, d.value, depth + 1)))
                        {
                            return false;
                        }
                    }
                    return true;
                }
                if (k == "propertyNames")
                {
                    return std::all_of(v.items().begin(), v.items().end(), [&](const auto& kv) { return validates(json(kv.key()), &x, depth + 1); });
                }
                if (k == "minProperties") return v.size() >= count(s, "minProperties", 0);
                if (k == "maxProperties") return v.size() <= count(s, "maxProperties", 0);
                if (k == "properties")
                {
                    for (const auto& kv : x.items())
                    {
                        if (v.contains(kv.key()) && !validates(v[kv.key()], &kv.value(), depth + 1))
                        {
                            return false;
                        }
                    }
                    return true;
                }
                if (k == "patternProperties")
                {
                    for (const auto& kv : v.items())
                    {
                        for (auto p = x.begin(); x.is_object() && p != x.end(); ++p)
                        {
                            if (matches_pattern(json(kv.key()), json(p.key()), s) && !validates(kv.value(), &p.value(), depth + 1))
                            {
                                return false;
                            }
                        }
                    }
                    return true;
                }
                if (k == "additionalProperties")
                {
                    for (const auto& kv : v.items())
                    {
                        if (!lists(s, kv.key()) && !validates(kv.value(), &x, depth + 1))
                        {
                            return false;
                        }
                    }
                    return true;
                }

            }
            else if (v.is_number())
            {
                if (keyword_class(k) != t_integer)
                {
                    return true;
                }
                number_bounds b;
                numeric_bounds(s, b, true);
                const decimal d = value_of_number(v, s);
                if (k != "multipleOf")
                {
                    return b.within(d);
                }
                if (const auto m = multiple_of(d, decimal::parse(x.dump()).value()))
                {
                    return *m;
                }
                fail("enum/const value " + v.dump() + " against multipleOf " + x.dump() + ": too many digits", s);
            }
            else
            {
                return true;
            }
            unsupported(k, s);
        }
    }
}

#endif
