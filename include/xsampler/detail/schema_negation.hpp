// xsampler/detail/schema_negation.hpp — not: a schema's negation as a schema the compiler makes. (xsampler, BSD-3-Clause)
//
// negation_of(S): anyOf one branch per keyword of S, each a value of the
// keyword's type that breaks it, combinators by De Morgan, kept in the
// compiler's own schemas ("$xs:" keywords: see the comment below); facts_of
// and hopeless: conjunctions no value satisfies, dropped early.
#ifndef XSAMPLER_DETAIL_SCHEMA_NEGATION_HPP
#define XSAMPLER_DETAIL_SCHEMA_NEGATION_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>
#include <map>

#include "schema_compiler.hpp"

namespace xsampler
{
    namespace detail
    {
        // ---- not: the negation as a schema of the compiler's own ----
        //
        // not S is made a schema (kept in m_made, never in the document)
        // that says what a value failing S is: anyOf one branch per
        // keyword of S, each a value of the keyword's type that breaks
        // it (not {minimum: 3}: {type: number, "$xs:lt": 3}), combinators
        // by De Morgan (not anyOf: allOf of the nots; not oneOf: none
        // or two that may overlap), not not S as S. The "$xs:" keywords mean
        // something in made schemas alone (a document's are unknown
        // keywords): "$xs:not" i / "$xs:is" i the negation of / the
        // schema m_refs[i]; "$xs:notIn" values; "$xs:lt", "$xs:le",
        // "$xs:gt", "$xs:ge" bounds; "$xs:notMultipleOf",
        // "$xs:notPattern"; "$xs:types" a set of type bits (a number
        // that is not an integer among them); "$xs:some" an object
        // member of a kind (object()). A keyword whose breaking
        // cannot be enforced exactly (uniqueItems, items as a list, a
        // format, ...) is an error naming it.

        /// A schema of the compiler's own, its nodes marked and placed (for messages) at `owner`.
        inline const schema_compiler::json* schema_compiler::make(json j, const json* owner)
        {
            m_made.push_back(std::move(j));
            std::vector<const json*> todo{&m_made.back()};
            while (!todo.empty())
            {
                const json* n = todo.back();
                todo.pop_back();
                m_made_nodes.insert(n);
                m_doc.adopt(n, owner);
                if (n->is_object() || n->is_array())
                {
                    for (const auto& x : *n)
                    {
                        todo.push_back(&x);
                    }
                }
            }
            return &m_made.back();
        }

        inline const schema_compiler::facts& schema_compiler::facts_of(const json* s)
        {
            const auto found = m_facts.find(s);
            if (found != m_facts.end())
            {
                return found->second;
            }
            facts f;
            const auto listed = [](const json& list) {
                return list.is_array() ? std::vector<json>(list.begin(), list.end()) : std::vector<json>{};
            };
            if (!s->is_object() || ref_only(s))
            {
                f.skipped = true;
            }
            else
            {
                f.types = type_bits(s);
                if (has_const(s))
                {
                    f.values = std::vector<json>{(*s)["const"]};
                }
                else if (has(s, "enum") && (*s)["enum"].is_array())
                {
                    f.values = listed((*s)["enum"]);  // (not a list: an error where it is compiled)
                }
                if (made(s) && s->contains("$xs:notIn"))
                {
                    f.not_in = listed((*s)["$xs:notIn"]);
                }
                if (has(s, "required"))
                {
                    for (const auto& r : listed((*s)["required"]))
                    {
                        if (r.is_string())
                        {
                            f.required.push_back(r.get<std::string>());
                        }
                    }
                }
                if (has(s, "properties") && (*s)["properties"].is_object())
                {
                    for (const auto& kv : (*s)["properties"].items())
                    {
                        const json* v = &kv.value();
                        auto& p = f.properties[kv.key()];
                        if (v->is_boolean())
                        {
                            p.types = v->get<bool>() ? unsigned(t_all) : 0u;
                            continue;
                        }
                        if (!v->is_object())
                        {
                            continue;
                        }
                        try
                        {
                            p.values = finite_values(v);
                            if (made(v) && v->contains("$xs:not") && v->size() == 1)
                            {
                                const auto& [target, types] = m_refs.at((*v)["$xs:not"].get<std::size_t>());
                                if (const auto out = types == t_all ? finite_values(target) : std::nullopt)
                                {
                                    p.not_in = *out;
                                }
                            }
                            for (int hops = 0; hops < 32 && v->is_object(); ++hops)
                            {
                                if (!ref_only(v))
                                {
                                    p.types &= type_bits(v);
                                    if (v->contains("pattern") && (*v)["pattern"].is_string())
                                    {
                                        p.patterns.push_back((*v)["pattern"].get<std::string>());
                                    }
                                }
                                if (!v->contains("$ref") || !(*v)["$ref"].is_string())
                                {
                                    break;
                                }
                                v = m_doc.resolve(v, (*v)["$ref"].get<std::string>());
                            }
                        }
                        catch (const invalid_parameter&)
                        {
                            p = facts::of_property{};  // (a bad type or $ref is an error where the property is compiled)
                        }
                    }
                }
            }
            return m_facts.emplace(s, std::move(f)).first->second;
        }

        /// Whether no value satisfies every schema of `parts`, proven from
        /// their types, enum and const, and of objects their required keys'
        /// types and values: expand() drops such a
        /// way at once (allOf of if/then on one discriminating key: 2^n
        /// ways, nearly all of them empty). A necessary condition only:
        /// what it lets through, disjunct() decides exactly.
        inline bool schema_compiler::hopeless(const conj& parts)
        {
            unsigned types = t_all;
            std::optional<std::vector<json>> values;
            std::vector<json> not_in;
            std::vector<const facts*> all;
            for (const json* s : parts)
            {
                const facts& f = facts_of(s);
                if (f.skipped)
                {
                    continue;
                }
                all.push_back(&f);
                types &= f.types;
                not_in.insert(not_in.end(), f.not_in.begin(), f.not_in.end());
                if (f.values)
                {
                    values = !values ? *f.values : meet(*values, *f.values);
                }
            }
            if (values)
            {
                return none_left(*values, types, not_in);
            }
            if ((types & t_object) != 0 && !object_possible(all))
            {
                types &= ~unsigned(t_object);
            }
            return types == 0;
        }

        /// The values of a that some value of b loosely equals (loosely_same: what enum reads).
        inline std::vector<schema_compiler::json> schema_compiler::meet(const std::vector<json>& a, const std::vector<json>& b)
        {
            std::vector<json> out;
            for (const json& v : a)
            {
                if (std::any_of(b.begin(), b.end(), [&](const json& w) { return loosely_same(v, w); }))
                {
                    out.push_back(v);
                }
            }
            return out;
        }

        /// Whether every value is of none of `types` or is one of not_in.
        inline bool schema_compiler::none_left(const std::vector<json>& values, unsigned types, const std::vector<json>& not_in) const
        {
            return std::all_of(values.begin(), values.end(), [&](const json& v) {
                return (type_of(v) & types) == 0 ||
                       std::any_of(not_in.begin(), not_in.end(), [&](const json& x) { return same(x, v); });
            });
        }

        /// hopeless()'s objects: whether each required key may have a value.
        inline bool schema_compiler::object_possible(const std::vector<const facts*>& all) const
        {
            for (const facts* f : all)
            {
                for (const std::string& r : f->required)
                {
                    unsigned types = t_all;
                    std::optional<std::vector<json>> values;
                    std::vector<json> not_in;
                    for (const facts* g : all)
                    {
                        const auto p = g->properties.find(r);
                        if (p == g->properties.end())
                        {
                            continue;  // (its patterns or additionalProperties: object() reads them)
                        }
                        types &= p->second.types;
                        not_in.insert(not_in.end(), p->second.not_in.begin(), p->second.not_in.end());
                        if (p->second.values)
                        {
                            values = !values ? *p->second.values : meet(*values, *p->second.values);
                        }
                    }
                    if (types == 0 || (values && none_left(*values, types, not_in)))
                    {
                        return false;
                    }
                }
            }
            return true;
        }

        /// Whether s beside the schemas of `parts` (all applying) is S and not S.
        inline bool schema_compiler::contradicts(const conj& parts, const json* s) const
        {
            const auto in = [&](const json* x) { return std::find(parts.begin(), parts.end(), x) != parts.end(); };
            const auto negation = m_negations.find({s, t_all});
            const auto negated = m_negated.find(s);
            return (negation != m_negations.end() && in(negation->second)) ||
                   (negated != m_negated.end() && in(negated->second));
        }

        /// Whether a pattern has \d \w \s \b (or their negations) or '.':
        /// ASCII (or stopping at U+2028) in ECMA-262, Unicode in Python's
        /// re, so that on a text with other characters the two may decide
        /// otherwise (on ASCII alone they agree).
        inline bool schema_compiler::unicode_classes(const std::string& p)
        {
            for (std::size_t i = 0; i < p.size(); ++i)
            {
                if (p[i] == '.' || (p[i] == '\\' && i + 1 < p.size() && std::string("dDwWsSbB").find(p[i + 1]) != std::string::npos))
                {
                    return true;
                }
                i += p[i] == '\\' ? 1 : 0;
            }
            return false;
        }

        /// The index of s among the made schemas' targets (m_refs).
        inline std::size_t schema_compiler::ref_index(const json* s)
        {
            m_refs.push_back({s, t_all});
            return m_refs.size() - 1;
        }

        /// {"$xs:not": i} or {"$xs:is": i} for the schema s; a negation
        /// restricted to `types` (negation_of) where negated.
        inline schema_compiler::json schema_compiler::refer(const json* s, bool negated, unsigned types)
        {
            m_refs.push_back({s, negated ? types : t_all});
            return json{{negated ? "$xs:not" : "$xs:is", m_refs.size() - 1}};
        }

        /// The schema of the values s does not accept (see above), made
        /// once per s; restricted to `types`, of the values that are of
        /// another type or that s does not accept (its keywords for the
        /// other types left out: one that cannot be enforced there is no
        /// error).
        inline const schema_compiler::json* schema_compiler::negation_of(const json* s, unsigned types)
        {
            const auto found = m_negations.find({s, types});
            if (found != m_negations.end())
            {
                return found->second;
            }
            json broken;  // the ways to break s (within types)
            if (s->is_boolean())
            {
                broken = s->get<bool>() ? json::array() : json::array({true});
            }
            else if (!s->is_object())
            {
                fail("a schema must be an object or a boolean, got " + std::string(s->type_name()), s);
            }
            else if (ref_only(s))
            {
                if (!(*s)["$ref"].is_string())
                {
                    fail("$ref must be a string", s);
                }
                broken = json::array({refer(m_doc.resolve(s, (*s)["$ref"].get<std::string>()), true, types)});
            }
            else
            {
                broken = negated_keywords(s, types);
            }
            // (no way: every keyword holds for every value, nothing breaks s)
            json out = broken.empty() ? json(false) : json{{"anyOf", std::move(broken)}};
            if (types != t_all)
            {
                out = json{{"anyOf", json::array({json{{"$xs:types", t_all & ~types}},
                                                  json{{"$xs:types", types}, {"allOf", json::array({std::move(out)})}}})}};
            }
            const json* n = make(std::move(out), s);
            m_negations.emplace(std::make_pair(s, types), n);
            if (types == t_all)
            {
                m_negated.emplace(n, s);  // (s and n together: nothing)
            }
            return n;
        }

        /// The schema of the values equal to v, an object or []: its keys
        /// each with its value (an enum of one: const is no keyword in
        /// draft 4), no other key; no item.
        inline const schema_compiler::json* schema_compiler::equal_to(const json& v, const json* owner)
        {
            if (v.is_array())
            {
                return make(json{{"type", "array"}, {"maxItems", 0}}, owner);
            }
            json properties = json::object(), required = json::array();
            for (const auto& kv : v.items())
            {
                properties[kv.key()] = json{{"enum", json::array({kv.value()})}};
                required.push_back(kv.key());
            }
            return make(json{{"type", "object"}, {"properties", std::move(properties)}, {"required", std::move(required)},
                             {"additionalProperties", false}},
                        owner);
        }

        /// One branch per way of breaking one of s's keywords that apply to `types`.
        inline schema_compiler::json schema_compiler::negated_keywords(const json* s, unsigned types)
        {
            json out = json::array();
            const auto typed = [](const char* type, json rest) {
                rest["type"] = type;
                return rest;
            };
            const bool draft4 = m_doc.draft() <= schema_document::draft4;
            for (const auto& kv : s->items())
            {
                const std::string& k = kv.key();
                const json& x = kv.value();
                const int c = class_of(s, k);
                if (made(s) && k.rfind("$xs:", 0) == 0)
                {
                    // (a made schema negated: contains' reference; the others are never negated)
                    if (k != "$xs:is" && k != "$xs:not")
                    {
                        fail("internal: a made schema's " + k + " negated", s);
                    }
                    const auto& [target, within] = m_refs.at(x.get<std::size_t>());
                    out.push_back(k == "$xs:is" ? refer(target, true, types)
                                                : json{{"$xs:types", within}, {"allOf", json::array({refer(target, false)})}});
                    continue;
                }
                if (c < 0 || (c > 0 && (applies_to(c) & types) == 0) || k == "then" || k == "else" ||
                    k == "minContains" || k == "maxContains" ||
                    (k == "additionalItems" && !(s->contains("items") && (*s)["items"].is_array())) ||
                    (k == "uniqueItems" && x == false) || (k == "additionalProperties" && (x == true || x == json::object())))
                {
                    continue;  // an annotation, an unknown keyword, or one that holds for every value
                }
                if (k == "type")
                {
                    if (const unsigned other = types & ~type_bits(s))
                    {
                        out.push_back(json{{"$xs:types", other}});  // (a number not an integer among them)
                    }
                }
                else if (k == "enum" || k == "const")
                {
                    if (k == "enum" && !x.is_array())
                    {
                        fail("enum must be a list", s);
                    }
                    // none of the values: an object (or []) by the schema of the values equal
                    // to it, broken; the others by their texts
                    json others = json::array(), all = json::array();
                    for (const json& v : k == "enum" ? x : json::array({x}))
                    {
                        if (v.is_object() || (v.is_array() && v.empty()))
                        {
                            all.push_back(refer(equal_to(v, s), true, types));
                        }
                        else
                        {
                            others.push_back(v);
                        }
                    }
                    if (!others.empty() || all.empty())
                    {
                        all.push_back(json{{"$xs:notIn", std::move(others)}});
                    }
                    out.push_back(all.size() == 1 ? std::move(all[0]) : json{{"allOf", std::move(all)}});
                }
                else if (k == "$ref")
                {
                    if (!x.is_string())
                    {
                        fail("$ref must be a string", s);
                    }
                    out.push_back(refer(m_doc.resolve(s, x.get<std::string>()), true, types));
                }
                else if (k == "allOf")
                {
                    for (const json* b : list_of(s, "allOf"))
                    {
                        out.push_back(refer(b, true, types));
                    }
                }
                else if (k == "anyOf" || k == "oneOf")
                {
                    // none of the branches, or (oneOf) two that may both match
                    const auto& branches = list_of(s, k.c_str());
                    json all = json::array();
                    for (const json* b : branches)
                    {
                        all.push_back(refer(b, true, types));
                    }
                    out.push_back(json{{"allOf", all}});
                    if (k == "oneOf")
                    {
                        const auto& shared = overlaps(s).types;
                        for (std::size_t i = 0; i < branches.size(); ++i)
                        {
                            for (std::size_t j = i + 1; j < branches.size(); ++j)
                            {
                                if (shared[i][j] != 0)
                                {
                                    out.push_back(json{{"allOf", json::array({refer(branches[i], false), refer(branches[j], false)})}});
                                }
                            }
                        }
                    }
                }
                else if (k == "not")
                {
                    out.push_back(refer(&x, false));
                }
                else if (k == "additionalProperties")
                {
                    // a member no property or pattern of s lists, whose value breaks it
                    out.push_back(json{{"type", "object"}, {"$xs:some", json{{"of", ref_index(s)}, {"value", refer(&x, true)}}}});
                }
                else if (k == "propertyNames")
                {
                    // a key it does not accept (any value)
                    out.push_back(json{{"type", "object"}, {"$xs:some", json{{"of", ref_index(s)}, {"names", ref_index(&x)},
                                                                             {"value", true}}}});
                }
                else if (k == "patternProperties")
                {
                    if (!x.is_object())
                    {
                        fail("patternProperties must be an object", s);
                    }
                    for (const auto& p : x.items())
                    {
                        // a member that a pattern matches, whose value breaks its schema
                        out.push_back(json{{"type", "object"}, {"$xs:some", json{{"of", ref_index(s)}, {"pattern", p.key()},
                                                                                 {"value", refer(&p.value(), true)}}}});
                    }
                }
                else if (k == "items" && (x.is_object() || x.is_boolean()))
                {
                    // an item that breaks it
                    out.push_back(json{{"type", "array"}, {"contains", refer(&x, true)}});
                }
                else if (k == "contains")
                {
                    // fewer than minContains (1: no item) or more than maxContains
                    const std::size_t lo = count(s, "minContains", 1), hi = count(s, "maxContains", grammar::unbounded);
                    if (lo == 1)
                    {
                        out.push_back(json{{"type", "array"}, {"items", refer(&x, true)}});
                    }
                    else if (lo > 1)
                    {
                        out.push_back(json{{"type", "array"}, {"contains", refer(&x, false)}, {"minContains", 0}, {"maxContains", lo - 1}});
                    }
                    if (hi != grammar::unbounded)
                    {
                        out.push_back(json{{"type", "array"}, {"contains", refer(&x, false)}, {"minContains", hi + 1}});
                    }
                }
                else if (k == "if")
                {
                    // if and not then, or not if and not else
                    for (const char* branch : {"then", "else"})
                    {
                        if (has(s, branch))
                        {
                            out.push_back(json{{"allOf", json::array({refer(&x, branch[0] == 'e'), refer(&(*s)[branch], true)})}});
                        }
                    }
                }
                else if (k == "dependencies" || k == "dependentRequired" || k == "dependentSchemas")
                {
                    // the key, and a name it requires missing or the schema it brings broken
                    for (const auto& d : dependencies_of(s))
                    {
                        if (k != d.keyword)
                        {
                            continue;  // (another of the three keywords: read with that one)
                        }
                        const json has = json{{"type", "object"}, {"required", json::array({d.key})}};
                        for (const auto& n : d.names ? *d.value : json::array())
                        {
                            out.push_back(json{{"allOf", json::array({has, json{{"properties", json{{n.get<std::string>(), false}}}}})}});
                        }
                        if (!d.names)
                        {
                            out.push_back(json{{"allOf", json::array({has, refer(d.value, true)})}});
                        }
                    }
                }
                else if (k == "minimum" || k == "maximum" || k == "exclusiveMinimum" || k == "exclusiveMaximum")
                {
                    if (draft4 && k[0] == 'e')
                    {
                        continue;  // read with its minimum or maximum
                    }
                    number_bounds checked;
                    numeric_bounds(s, checked);  // (its errors: a bound that is not a number, a draft's form)
                    const bool lower = k == "minimum" || k == "exclusiveMinimum";
                    const char* modifier = lower ? "exclusiveMinimum" : "exclusiveMaximum";
                    const bool exclusive = k[0] == 'e' || (draft4 && s->contains(modifier) && (*s)[modifier] == true);
                    // below an inclusive lower bound, at or below an exclusive one, ...
                    out.push_back(typed("number", json{{lower ? (exclusive ? "$xs:le" : "$xs:lt") : (exclusive ? "$xs:ge" : "$xs:gt"), x}}));
                }
                else if (k == "multipleOf")
                {
                    // (a fraction's quotients round to integers in validators' doubles past 2^53)
                    if (!x.is_number_integer() && !x.is_number_unsigned())
                    {
                        fail("unsupported keyword 'multipleOf' under not (" + x.dump() + ": only an integer)", s);
                    }
                    out.push_back(typed("number", json{{"$xs:notMultipleOf", x}}));
                }
                else if (k == "minLength" || k == "minItems" || k == "minProperties")
                {
                    const std::size_t n = count(s, k.c_str(), 0);
                    if (n > 0)
                    {
                        out.push_back(typed(k == "minLength" ? "string" : k == "minItems" ? "array" : "object",
                                            json{{"max" + k.substr(3), n - 1}}));
                    }
                }
                else if (k == "maxLength" || k == "maxItems" || k == "maxProperties")
                {
                    const std::size_t n = count(s, k.c_str(), 0);
                    if (n == grammar::unbounded)
                    {
                        continue;  // no value is longer: it holds for every value
                    }
                    out.push_back(typed(k == "maxLength" ? "string" : k == "maxItems" ? "array" : "object",
                                        json{{"min" + k.substr(3), n + 1}}));
                }
                else if (k == "pattern")
                {
                    out.push_back(typed("string", json{{"$xs:notPattern", x}}));
                }
                else if (k == "format")
                {
                    if (format_of(s) != nullptr)
                    {
                        // our formats are subsets of the validators' checkers: their complements are not
                        fail("unsupported keyword 'format' under not", s);
                    }
                }
                else if (k == "required")
                {
                    if (!x.is_array())
                    {
                        fail("required must be a list of names", s);
                    }
                    for (const auto& name : x)
                    {
                        if (!name.is_string())
                        {
                            fail("required must be a list of names", s);
                        }
                        out.push_back(typed("object", json{{"properties", json{{name.get<std::string>(), false}}}}));
                    }
                }
                else if (k == "properties")
                {
                    if (!x.is_object())
                    {
                        fail("properties must be an object", s);
                    }
                    for (const auto& p : x.items())
                    {
                        out.push_back(typed("object", json{{"required", json::array({p.key()})},
                                                           {"properties", json{{p.key(), refer(&p.value(), true)}}}}));
                    }
                }
                else
                {
                    fail("unsupported keyword '" + k + "' under not", s);
                }
            }
            return out;
        }

        /// The values the made schemas of own exclude ("$xs:notIn").
        inline std::vector<const schema_compiler::json*> schema_compiler::excluded(const conj& own) const
        {
            std::vector<const json*> out;
            for (const json* s : own)
            {
                if (made(s) && s->contains("$xs:notIn"))
                {
                    for (const auto& v : (*s)["$xs:notIn"])
                    {
                        out.push_back(&v);
                    }
                }
            }
            return out;
        }
    }
}

#endif
