// xsampler/detail/schema_conjunctions.hpp — a conjunction of subschemas as one rule, and each of its disjuncts by type. (xsampler, BSD-3-Clause)
//
// value_of: the schemas that apply together (sorted, once each) as one
// grammar rule shared by every place with the same set (recursion through
// $ref); expand: allOf merged, $ref followed, anyOf/oneOf (and if/then/
// else, dependencies, not) expanded into disjuncts of schemas without
// combinators; disjunct: one such conjunction's value, a choice over the
// types it allows (numbers, strings, arrays, objects, constants).
#ifndef XSAMPLER_DETAIL_SCHEMA_CONJUNCTIONS_HPP
#define XSAMPLER_DETAIL_SCHEMA_CONJUNCTIONS_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "schema_compiler.hpp"

namespace xsampler
{
    namespace detail
    {
        // ---- a conjunction of schemas as one rule ----

        inline void schema_compiler::normalize(conj& c)
        {
            std::sort(c.begin(), c.end(), [&](const json* a, const json* b) { return m_doc.order(a) < m_doc.order(b); });
            c.erase(std::unique(c.begin(), c.end()), c.end());
        }

        /// The texts every schema of c accepts, as one rule shared by every
        /// place with the same schemas; none when nothing validates (known
        /// without reading a rule still being compiled: recursion).
        inline std::optional<schema_compiler::expr_id> schema_compiler::value_of(conj c)
        {
            if (c.empty())
            {
                return m_g.ref(m_b.any_value());  // (no schema: any value)
            }
            normalize(c);
            std::vector<std::size_t> key;
            for (const json* s : c)
            {
                key.push_back(m_doc.order(s));
            }
            const auto found = m_rules.find(key);
            if (found != m_rules.end())
            {
                if (found->second.second == 2)
                {
                    return std::nullopt;
                }
                return m_g.ref(found->second.first);
            }
            if (m_rules.size() >= max_rules)
            {
                fail("more than " + std::to_string(max_rules) + " combinations of subschemas", c.front());
            }
            if (m_depth + 1 > m_o.max_depth)
            {
                fail("objects and arrays nested deeper than " + std::to_string(m_o.max_depth), c.front());
            }
            const rule_id r = m_g.fresh_rule("schema");
            m_rules[key] = {r, 0};
            ++m_depth;
            std::vector<conj> disjuncts;
            expand(conj{}, {{nullptr, c}}, disjuncts);
            std::vector<expr_id> alternatives;
            for (const conj& d : disjuncts)
            {
                if (const auto e = disjunct(d))
                {
                    alternatives.push_back(*e);
                }
            }
            --m_depth;
            merge_lexemes(alternatives);
            m_g.define(r, m_g.choice(alternatives));
            m_rules[key].second = alternatives.empty() ? 2 : 1;
            if (alternatives.empty())
            {
                return std::nullopt;
            }
            return m_g.ref(r);
        }

        /// The disjunctive form of what `todo` adds to `parts`: each
        /// element of `out` a set of schemas whose own keywords all apply
        /// ($ref, allOf, anyOf and oneOf expanded).
        inline void schema_compiler::expand(conj parts, std::vector<pending> todo, std::vector<conj>& out)
        {
            while (!todo.empty())
            {
                pending p = std::move(todo.back());
                todo.pop_back();
                if (p.choice != nullptr)
                {
                    for (const json& branch : *p.choice)
                    {
                        auto next = todo;
                        next.push_back({nullptr, {&branch}});
                        expand(parts, std::move(next), out);
                    }
                    return;
                }
                for (const json* s : p.schemas)
                {
                    if (s->is_boolean())
                    {
                        if (!s->get<bool>())
                        {
                            return;  // false: this way validates nothing
                        }
                        continue;
                    }
                    if (!s->is_object())
                    {
                        fail("a schema must be an object or a boolean, got " + std::string(s->type_name()), s);
                    }
                    if (std::find(parts.begin(), parts.end(), s) != parts.end())
                    {
                        continue;
                    }
                    if (contradicts(parts, s))
                    {
                        return;  // S and not S: this way validates nothing ({"not": {"$ref": "#"}} at the root)
                    }
                    parts.push_back(s);
                    check_keywords(s);
                    if (hopeless(parts))
                    {
                        return;  // (proven: no value satisfies them all)
                    }
                    if (s->contains("$ref"))
                    {
                        if (!(*s)["$ref"].is_string())
                        {
                            fail("$ref must be a string", s);
                        }
                        todo.push_back({nullptr, {m_doc.resolve(s, (*s)["$ref"].get<std::string>())}});
                        if (ref_only(s))
                        {
                            continue;
                        }
                    }
                    if (s->contains("allOf"))
                    {
                        todo.push_back({nullptr, list_of(s, "allOf")});
                    }
                    if (s->contains("not"))
                    {
                        todo.push_back({nullptr, {negation_of(&(*s)["not"])}});
                    }
                    if (made(s) && s->contains("$xs:not"))
                    {
                        const auto& [target, types] = m_refs.at((*s)["$xs:not"].get<std::size_t>());
                        todo.push_back({nullptr, {negation_of(target, types)}});
                    }
                    if (made(s) && s->contains("$xs:is"))
                    {
                        todo.push_back({nullptr, {m_refs.at((*s)["$xs:is"].get<std::size_t>()).first}});
                    }
                    for (const json* choice : conditions_of(s))
                    {
                        todo.push_back({choice, {}});
                    }
                    for (const char* k : {"anyOf", "oneOf"})
                    {
                        if (s->contains(k))
                        {
                            todo.push_back({k[0] == 'o' ? exclusive_branches(s) : &(*s)[k], {}});
                        }
                    }
                }
            }
            if (out.size() >= max_disjuncts)
            {
                fail("anyOf/oneOf combine into more than " + std::to_string(max_disjuncts) + " alternatives",
                     parts.front());
            }
            out.push_back(std::move(parts));
        }

        inline void schema_compiler::check_keywords(const json* s) const
        {
            for (const auto& kv : s->items())
            {
                const std::string& k = kv.key();
                const int c = class_of(s, k);
                if (c == -2 && m_o.strict && !made(s))
                {
                    fail("unknown keyword '" + k + "' (strict)", s);
                }
                if (ref_only(s) && k != "$ref")
                {
                    continue;
                }
                if (k == "$dynamicRef" || k == "$recursiveRef")
                {
                    unsupported(k, s);
                }
            }
        }

        // ---- one disjunct: schemas without combinators ----

        inline schema_compiler::disjunct_parts schema_compiler::parts_of(const conj& d) const
        {
            disjunct_parts p;
            for (const json* s : d)
            {
                if (ref_only(s))
                {
                    continue;
                }
                p.own.push_back(s);
                p.types &= type_bits(s);
                if (p.values_at == nullptr && (s->contains("enum") || has_const(s)))
                {
                    p.values_at = s;
                }
            }
            return p;
        }

        inline std::optional<schema_compiler::expr_id> schema_compiler::disjunct(const conj& d)
        {
            const auto [own, types, values_at] = parts_of(d);
            if (values_at != nullptr)
            {
                return values(values_at, own, types);
            }
            if (own.empty())
            {
                return m_g.ref(m_b.any_value());
            }
            std::vector<expr_id> options;
            if (types & t_object)
            {
                if (const auto e = object(own))
                {
                    options.push_back(*e);
                }
            }
            if (types & t_array)
            {
                if (const auto e = array(own))
                {
                    options.push_back(*e);
                }
            }
            if (types & t_string)
            {
                if (const auto e = string(own))
                {
                    options.push_back(*e);
                }
            }
            if (types & (t_integer | t_fraction))
            {
                if (const auto e = number(own, types & (t_integer | t_fraction)))
                {
                    options.push_back(*e);
                }
            }
            const auto out = excluded(own);
            const auto is_out = [&](const json& v) {
                return std::any_of(out.begin(), out.end(), [&](const json* x) { return loosely_same(*x, v); });
            };
            for (const json* v : out)
            {
                if ((v->is_object() && (types & t_object)) || (v->is_array() && (types & t_array)))
                {
                    fail("unsupported keyword 'enum' under not (an object or array value)", own.front());
                }
            }
            if (types & t_boolean)
            {
                for (const bool b : {true, false})
                {
                    if (!is_out(json(b)))
                    {
                        options.push_back(m_b.literal(b ? "true" : "false"));
                    }
                }
            }
            if ((types & t_null) && !is_out(json(nullptr)))
            {
                options.push_back(m_b.literal("null"));
            }
            if (options.empty())
            {
                return std::nullopt;
            }
            return m_g.choice(std::move(options));
        }
    }
}

#endif
