// xsampler/detail/schema_one_of.hpp — oneOf: branches no value satisfies twice. (xsampler, BSD-3-Clause)
//
// exclusive_branches: a oneOf as anyOf where its branches are provably
// disjoint (summaries: types, finite values, required keys and their
// values, closed properties; separated, values_apart, patterns_apart),
// else each branch with the not of each other one it may share a value
// with; conditions_of (if/then/else) and dependencies_of read here too.
#ifndef XSAMPLER_DETAIL_SCHEMA_ONE_OF_HPP
#define XSAMPLER_DETAIL_SCHEMA_ONE_OF_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>
#include <map>
#include <set>

#include "schema_compiler.hpp"

namespace xsampler
{
    namespace detail
    {
        // ---- oneOf: branches that no value satisfies twice ----

        inline std::vector<schema_compiler::summary> schema_compiler::summaries(const json* branch)
        {
            std::vector<conj> ds;
            expand(conj{}, {{nullptr, {branch}}}, ds);
            std::vector<summary> out;
            for (const conj& d : ds)
            {
                summary sm;
                for (const json* s : d)
                {
                    const facts& f = facts_of(s);
                    if (f.skipped)
                    {
                        continue;
                    }
                    sm.types &= f.types;
                    if (f.values)
                    {
                        std::vector<json> vs;
                        for (const auto& v : *f.values)
                        {
                            if (!sm.values || overlap({v}, *sm.values))
                            {
                                vs.push_back(v);
                            }
                        }
                        sm.values = std::move(vs);
                    }
                    sm.required.insert(sm.required.end(), f.required.begin(), f.required.end());
                    if (s->contains("additionalProperties") && (*s)["additionalProperties"] == false &&
                        !(s->contains("patternProperties") && !(*s)["patternProperties"].empty()))
                    {
                        sm.closed = true;  // (patterns let other keys in: not closed to them)
                    }
                    for (const auto& [name, property] : f.properties)
                    {
                        sm.listed.insert(name);
                        auto& slot = sm.property_values[name];
                        if (property.values && (!slot || slot->size() > property.values->size()))
                        {
                            slot = property.values;
                        }
                        sm.property_types.emplace(name, t_all).first->second &= property.types;
                        auto& patterns = sm.property_patterns[name];
                        patterns.insert(patterns.end(), property.patterns.begin(), property.patterns.end());
                    }
                    sm.empty_fails = sm.empty_fails || fails_empty_object(s);
                }
                out.push_back(std::move(sm));
            }
            return out;
        }

        /// The values a schema allows when it lists them (enum or const, through $ref and allOf).
        inline std::optional<std::vector<schema_compiler::json>> schema_compiler::finite_values(const json* s)
        {
            for (int hops = 0; hops < 32 && s->is_object(); ++hops)
            {
                if (has_const(s) && !ref_only(s))
                {
                    return std::vector<json>{(*s)["const"]};
                }
                if (s->contains("enum") && (*s)["enum"].is_array() && !ref_only(s))
                {
                    return std::vector<json>((*s)["enum"].begin(), (*s)["enum"].end());
                }
                if (!s->contains("$ref") || !(*s)["$ref"].is_string())
                {
                    return std::nullopt;
                }
                s = m_doc.resolve(s, (*s)["$ref"].get<std::string>());
            }
            return std::nullopt;
        }

        /// Equality that also takes true for 1 and false for 0, anywhere in
        /// the values (python3-jsonschema's enum inside arrays and objects):
        /// what a not excludes, so that both readings agree on every output.
        inline bool schema_compiler::loosely_same(const json& a, const json& b)
        {
            const auto numeric = [](nlohmann::json v, const auto& self) -> nlohmann::json {
                if (v.is_boolean())
                {
                    return v.get<bool>() ? 1 : 0;
                }
                if (v.is_structured())
                {
                    for (auto& x : v)
                    {
                        x = self(x, self);
                    }
                }
                return v;
            };
            return numeric(nlohmann::json(a), numeric) == numeric(nlohmann::json(b), numeric);
        }

        inline bool schema_compiler::overlap(const std::vector<json>& a, const std::vector<json>& b)
        {
            return std::any_of(a.begin(), a.end(), [&](const json& v) {
                return std::any_of(b.begin(), b.end(), [&](const json& w) { return same(v, w); });
            });
        }

        /// The types of the listed values.
        inline unsigned schema_compiler::types_of(const std::vector<json>& values) const
        {
            unsigned of = 0;
            for (const json& v : values)
            {
                of |= type_of(v);
            }
            return of;
        }

        /// The types of the values a and b may both accept (0: none, proven).
        inline unsigned schema_compiler::shared(const summary& a, const summary& b)
        {
            unsigned both = a.types & b.types;
            for (const summary* x : {&a, &b})
            {
                if (x->values)
                {
                    both &= types_of(*x->values);
                }
            }
            if (a.values && b.values && !overlap(*a.values, *b.values))
            {
                return 0;
            }
            if ((both & t_object) != 0 && separated(a, b))
            {
                both &= ~unsigned(t_object);
            }
            return both;
        }

        /// Whether no object satisfies both: a key one requires (so there)
        /// whose value cannot satisfy both (values_apart), one the other's
        /// closed properties lack,
        /// or closed properties with no name in common (only {} is both)
        /// where {} fails one.
        inline bool schema_compiler::separated(const summary& a, const summary& b)
        {
            if (a.closed && b.closed && (a.empty_fails || b.empty_fails) &&
                std::none_of(a.listed.begin(), a.listed.end(), [&](const std::string& n) { return b.listed.count(n) != 0; }))
            {
                return true;
            }
            for (const summary* x : {&a, &b})
            {
                const summary& y = x == &a ? b : a;
                for (const auto& r : x->required)
                {
                    // (present, so both properties' schemas hold for its value)
                    if ((y.closed && y.listed.count(r) == 0) || values_apart(*x, y, r))
                    {
                        return true;
                    }
                }
            }
            return false;
        }

        /// Whether no value of the property r satisfies both summaries'
        /// schemas of it: listed values that differ, types, or patterns
        /// no string matches both.
        inline bool schema_compiler::values_apart(const summary& a, const summary& b, const std::string& r)
        {
            const auto ia = a.property_values.find(r), ib = b.property_values.find(r);
            if (ia != a.property_values.end() && ib != b.property_values.end() && ia->second && ib->second &&
                !overlap(*ia->second, *ib->second))
            {
                return true;  // a discriminator
            }
            const auto ta = a.property_types.find(r), tb = b.property_types.find(r);
            const unsigned types = (ta != a.property_types.end() ? ta->second : unsigned(t_all)) &
                                   (tb != b.property_types.end() ? tb->second : unsigned(t_all));
            const auto typed = [&](const summary& x, unsigned t) {
                const auto iv = x.property_values.find(r);
                return iv == x.property_values.end() || !iv->second ? t : t & types_of(*iv->second);
            };
            if (typed(a, typed(b, types)) == 0)
            {
                return true;
            }
            const auto pa = a.property_patterns.find(r), pb = b.property_patterns.find(r);
            if (types == t_string && pa != a.property_patterns.end() && pb != b.property_patterns.end())
            {
                for (const std::string& x : pa->second)
                {
                    for (const std::string& y : pb->second)
                    {
                        if (patterns_apart(x, y))
                        {
                            return true;  // (pkg:cargo/... and pkg:gem/...)
                        }
                    }
                }
            }
            return false;
        }

        /// Whether {} fails s's own keywords (proven: not an object, a required key, minProperties).
        inline bool schema_compiler::fails_empty_object(const json* s)
        {
            const facts& f = facts_of(s);
            if (f.skipped)
            {
                return false;
            }
            return (f.types & t_object) == 0 || !f.required.empty() ||
                   (has(s, "minProperties") && (*s)["minProperties"].is_number() && (*s)["minProperties"].get<double>() > 0);
        }

        /// Whether no string is found by both patterns, in either reading (their product is empty).
        inline bool schema_compiler::patterns_apart(const std::string& x, const std::string& y)
        {
            const auto key = std::minmax(x, y);
            const auto found = m_patterns_apart.find(key);
            if (found != m_patterns_apart.end())
            {
                return found->second;
            }
            bool apart = false;
            try
            {
                apart = dfa_intersection(search_automaton(x, regex_reading::either), search_automaton(y, regex_reading::either),
                                         max_product)
                            .size() == 0;
            }
            catch (const invalid_parameter&)
            {
                apart = false;  // (a pattern that does not compile, or a product too large: not proven)
            }
            return m_patterns_apart.emplace(std::make_pair(key.first, key.second), apart).first->second;
        }

        inline const schema_compiler::pairs& schema_compiler::overlaps(const json* s)
        {
            auto found = m_overlaps.find(s);
            if (found != m_overlaps.end())
            {
                return found->second;
            }
            const auto& branches = list_of(s, "oneOf");
            std::vector<std::vector<summary>> all;
            for (const json* b : branches)
            {
                all.push_back(summaries(b));
            }
            const std::size_t n = all.size();
            pairs out{std::vector<std::vector<unsigned>>(n, std::vector<unsigned>(n, 0)),
                      std::vector<std::vector<bool>>(n, std::vector<bool>(n, true))};
            for (std::size_t i = 0; i < n; ++i)
            {
                for (std::size_t j = i + 1; j < n; ++j)
                {
                    for (const auto& x : all[i])
                    {
                        for (const auto& y : all[j])
                        {
                            const unsigned both = shared(x, y);
                            out.types[i][j] |= both;
                            if ((both & t_object) != 0 &&
                                !(x.closed && y.closed &&
                                  std::none_of(x.listed.begin(), x.listed.end(), [&](const std::string& k) { return y.listed.count(k) != 0; })))
                            {
                                out.empty_only[i][j] = false;
                            }
                        }
                    }
                    out.types[j][i] = out.types[i][j];
                    out.empty_only[j][i] = out.empty_only[i][j] = out.empty_only[i][j] && (out.types[i][j] & t_object) != 0;
                }
            }
            return m_overlaps.emplace(s, std::move(out)).first->second;
        }

        /// if/then/else and the dependencies of s, each a choice of made
        /// branches: if and then, or not if and else; per key of
        /// dependencies (dependentRequired, dependentSchemas), a value that
        /// is no object, an object without the key, or one with the key
        /// and the names it requires (the schema it brings).
        inline const std::vector<const schema_compiler::json*>& schema_compiler::conditions_of(const json* s)
        {
            auto found = m_conditions.find(s);
            if (found != m_conditions.end())
            {
                return found->second;
            }
            std::vector<const json*> out;
            if (has(s, "if"))
            {
                const json* cond = &(*s)["if"];
                json then = json::array({refer(cond, false)}), otherwise = json::array({refer(cond, true)});
                if (has(s, "then"))
                {
                    then.push_back(refer(&(*s)["then"], false));
                }
                if (has(s, "else"))
                {
                    otherwise.push_back(refer(&(*s)["else"], false));
                }
                out.push_back(make(json::array({json{{"allOf", then}}, json{{"allOf", otherwise}}}), s));
            }
            for (const auto& [key, value, names, keyword] : dependencies_of(s))
            {
                json branches = json::array({json{{"$xs:types", t_all & ~unsigned(t_object)}},
                                             json{{"type", "object"}, {"properties", json{{key, false}}}}});
                branches.push_back(names ? json{{"type", "object"}, {"required", *value}}
                                            : json{{"type", "object"}, {"required", json::array({key})},
                                                   {"allOf", json::array({refer(value, false)})}});
                out.push_back(make(std::move(branches), s));
            }
            return m_conditions.emplace(s, std::move(out)).first->second;
        }

        /// dependencies (names or a schema per key), dependentRequired, dependentSchemas.
        inline std::vector<schema_compiler::dependency> schema_compiler::dependencies_of(const json* s) const
        {
            std::vector<dependency> out;
            for (const char* k : {"dependencies", "dependentRequired", "dependentSchemas"})
            {
                if (!has(s, k))
                {
                    continue;
                }
                if (!(*s)[k].is_object())
                {
                    fail(std::string(k) + " must be an object", s);
                }
                for (const auto& kv : (*s)[k].items())
                {
                    const bool names = kv.value().is_array();
                    if ((k[9] == 'R' && !names) || (k[9] == 'S' && names))
                    {
                        fail(std::string(k) + " '" + kv.key() + "' must be " + (names ? "a schema" : "a list of names"), s);
                    }
                    for (const auto& n : names ? kv.value() : json::array())
                    {
                        if (!n.is_string())
                        {
                            fail(std::string(k) + " '" + kv.key() + "' must be a list of names", s);
                        }
                    }
                    out.push_back({kv.key(), &kv.value(), names, k});
                }
            }
            return out;
        }

        /// A oneOf's branches as anyOf branches: each branch and not each
        /// other branch that may match the same value (restricted to the
        /// types both may accept: negation_of); the oneOf's own list where
        /// its branches are proven disjoint.
        inline const schema_compiler::json* schema_compiler::exclusive_branches(const json* s)
        {
            const auto& [shared, empty_only] = overlaps(s);
            const auto& branches = list_of(s, "oneOf");
            bool disjoint = true;
            json out = json::array();
            for (std::size_t i = 0; i < branches.size(); ++i)
            {
                json all = json::array({refer(branches[i], false)});
                bool nonempty = false;
                for (std::size_t j = 0; j < branches.size(); ++j)
                {
                    if (j == i || shared[i][j] == 0)
                    {
                        continue;
                    }
                    disjoint = false;
                    // (both accept {} alone of the objects: an object of i fails j where it has a key)
                    const unsigned types = empty_only[i][j] ? shared[i][j] & ~unsigned(t_object) : shared[i][j];
                    nonempty = nonempty || empty_only[i][j];
                    if (types != 0)
                    {
                        all.push_back(refer(branches[j], true, types));
                    }
                }
                if (nonempty)
                {
                    all.push_back(json{{"minProperties", 1}});
                }
                out.push_back(json{{"allOf", std::move(all)}});
            }
            if (disjoint)
            {
                return &(*s)["oneOf"];
            }
            auto found = m_exclusive.find(s);
            if (found == m_exclusive.end())
            {
                found = m_exclusive.emplace(s, make(std::move(out), s)).first;
            }
            return found->second;
        }
    }
}

#endif
