// xsampler/json_schema.hpp — JSON Schema as a constraint. (xsampler, BSD-3-Clause)
//
// json_schema_grammar(schema[, options]) compiles a JSON Schema (text or
// nlohmann::json; this header needs nlohmann-json, the rest of the library
// does not) into a grammar (grammar.hpp, json_grammar.hpp) whose texts are
// compact-or-lightly-spaced JSON values that validate against it;
// json_schema_constraint(index, schema[, options]) is its constraint. The
// draft is the root's $schema (draft-04 to 2020-12; without one, 2020-12).
//   $ref          to a place in the document: a JSON pointer (#/definitions/x,
//                 #/$defs/x, #), an anchor, or a $id of one of its subschemas;
//                 recursion is a rule that refers to itself. Beside other
//                 keywords: in drafts 4 to 7 they are ignored, from 2019-09
//                 both apply. Remote references are an error.
//   allOf         the branches together: every keyword of every branch
//                 applies (types, bounds and required intersected; a
//                 property's schemas and the items' schemas combined)
//   anyOf         a choice of the branches, each together with the keywords
//                 beside it
//   oneOf         as anyOf where the branches are provably disjoint (types
//                 that do not overlap; a property one requires whose values
//                 differ, by const or enum, by type, or by patterns no
//                 string matches both; a property one requires and the
//                 other forbids; closed properties with no name in common
//                 where one refuses {}; values of enum or const); else each
//                 branch with the not of each other one it may share a value
//                 with (within the types both may accept: exclusive_branches;
//                 of two closed objects with no name in common, {} alone:
//                 the not is minProperties 1)
//   not           the values breaking one of its keywords: a schema the
//                 compiler makes (see negation_of), each keyword's breaking
//                 a branch (not minimum 3: a number below 3; not required
//                 [a]: an object without a; not enum: strings and numbers by
//                 their automata), allOf/anyOf by De Morgan, not not as
//                 itself; a keyword whose breaking cannot be enforced
//                 exactly (uniqueItems, a format, ...) is an error naming
//                 it; not oneOf: none, or two that may overlap; not of
//                 additionalProperties, patternProperties, propertyNames:
//                 an object with a member of that kind (object()); not
//                 items: contains an item that breaks it
//   if, then, else  if and then, or not if and else (conditions_of)
//   dependencies, dependentRequired, dependentSchemas  per key: no object,
//                 an object without the key, or one with it and what it needs
//   type          a name or a list of names; without type, every type, each
//                 with the keywords that apply to it (a keyword of another
//                 type is unused)
//   properties    the keys an object may have, in any order (each required
//                 one once: json_builder::object_any_order; the optional
//                 ones anywhere, again too: validators read the last), each
//                 optional unless required; a property whose schema
//                 validates nothing (false) is left out
//   required      keys that must appear (a required key not in properties
//                 gets additionalProperties' value, or any value)
//   additionalProperties  false: no key but the properties; a schema or
//                 true (its default): other keys too (unescaped, none of the
//                 listed names) anywhere among them, with such values; with
//                 options.additional_properties false only the listed keys
//                 (a subset of the valid texts, as XGrammar's strict mode)
//   patternProperties  a key takes the schemas of every pattern matching it
//                 (and of its property); additionalProperties only where no
//                 pattern matches. Other keys by the patterns they match and
//                 miss (key_classes), each class a key lexeme; those some
//                 pattern matches are generated without the option
//   minimum, maximum, exclusiveMinimum, exclusiveMaximum (draft 4: booleans
//                 beside minimum and maximum), multipleOf  exactly, as digit
//                 automata (detail/json_numbers.hpp): a bounded number is
//                 written without an exponent, in at most 15 digits, so that
//                 validators comparing in double decide as exact arithmetic
//                 does; multipleOf makes the values integers (a multipleOf
//                 that is not an integer nor a fraction exact in binary, such
//                 as 0.01, is an error: validators divide in floating point)
//   items         one schema for every item (not the list form); items that
//                 validate nothing leave the empty array
//   contains, minContains, maxContains  items counted as they are written
//                 (containing): each written as the contains it satisfies
//                 (several in one conjunction count together)
//   uniqueItems   over items of finite values (enum, const, booleans,
//                 null): each at most once (distinct_items); over strings
//                 (any bounds, pattern, format; enums of strings): a
//                 grammar::distinct mark the matcher checks where an item
//                 ends and while it is written, at most as many items as
//                 strings; over objects that always have a new completion
//                 (renewing: an optional key of endless values, or other
//                 keys allowed): the same mark, checked where an item ends;
//                 over closed objects whose every name is required, a
//                 string of endless completions (closed_strings): the
//                 distinct_closed mark, checked also while it is written;
//                 over integers under no numeric keyword: the same mark,
//                 checked where an item ends and, past 5 digits, while it is
//                 written; else an error
//   propertyNames the keys' contents its schema accepts (key_names): listed
//                 keys it refuses left out, other keys' automata intersected
//   minProperties, maxProperties  members counted as they are written; a
//                 minimum above 1 that the required keys do not meet puts
//                 the listed keys in the schema's order, each once
//                 (json_builder::object), other keys between them, each
//                 a new one (grammar::distinct_keys: a key written twice is
//                 one key), of endless keys; other keys that are a few
//                 (dfa_texts: ^[a-d]$) listed then
//   minItems, maxItems, minLength, maxLength (code points; 3.0 is 3),
//                 pattern (a regex.hpp regular expression matched anywhere in
//                 the string, as JSON Schema does, read as both ECMAScript and
//                 Python's re match it, under not as either does; its
//                 characters are then unescaped; several patterns and the
//                 lengths intersected as DFAs, lengths up to 1000 then, or
//                 any length for one class of ASCII characters repeated)
//   enum, const   the value is one of these that every other keyword beside
//                 them accepts; a number in each spelling of it (2, 2.0)
//   format        date, time, date-time, uuid, ipv4, email, uri and
//                 uri-reference asserted, each a regex over the string's
//                 content met with its pattern and lengths (email and the URIs
//                 as subsets of their RFCs: docs/semantics.md); the other
//                 formats JSON Schema defines are errors; those it does not
//                 define (int32, byte, ...) annotations, ignored as
//                 validators ignore them
// Annotations (title, description, default, examples, $comment, readOnly,
// deprecated, ...) and keywords no draft defines (x-*, misspellings) are
// ignored; with options.strict an unknown keyword is an error. A keyword a
// draft defines that this compiler cannot enforce exactly is
// invalid_parameter naming it and where it is ("json_schema: unsupported
// keyword 'minimum' at /properties/a"); so is a schema that nothing
// validates, an object nested deeper than options.max_depth, a bad value
// ("minItems must be a non-negative integer"). The compile costs the
// schema's size (regex DFAs for patterns): well under a millisecond for a
// demo-sized schema.
#ifndef XSAMPLER_JSON_SCHEMA_HPP
#define XSAMPLER_JSON_SCHEMA_HPP

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <deque>
#include <numeric>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "constraint.hpp"
#include "detail/json_numbers.hpp"
#include "detail/schema_document.hpp"
#include "json_grammar.hpp"

namespace xsampler
{
    namespace detail
    {
        class schema_compiler
        {
        public:
            using expr_id = grammar::expr_id;
            using rule_id = grammar::rule_id;
            using json = nlohmann::ordered_json;  // properties keep the schema's order
            using conj = std::vector<const json*>;  // schemas that all apply

            schema_compiler(grammar& g, schema_document& doc, const json_options& o)
                : m_g(g), m_doc(doc), m_b(g, o), m_o(o)
            {
            }

            /// The root's value.
            expr_id root()
            {
                const auto v = value_of({&m_doc.root()});
                if (!v)
                {
                    fail("the schema validates nothing", &m_doc.root());
                }
                return *v;
            }

        private:
            // the types as bits: "number" is integer | fraction
            enum : unsigned
            {
                t_null = 1,
                t_boolean = 2,
                t_object = 4,
                t_array = 8,
                t_string = 16,
                t_integer = 32,
                t_fraction = 64,
                t_all = 127
            };

            [[noreturn]] void fail(const std::string& what, const json* at) const
            {
                throw invalid_parameter("json_schema: " + what + " at " + m_doc.where(at));
            }
            [[noreturn]] void unsupported(const std::string& keyword, const json* at) const
            {
                fail("unsupported keyword '" + keyword + "'", at);
            }

            /// Every keyword some draft defines, by what it applies to (0: any value).
            static int keyword_class(const std::string& k)
            {
                static const std::map<std::string, int> classes = {
                    // annotations and the core's identifiers: ignored as assertions
                    {"title", -1}, {"description", -1}, {"default", -1}, {"examples", -1}, {"$comment", -1},
                    {"deprecated", -1}, {"readOnly", -1}, {"writeOnly", -1}, {"contentMediaType", -1},
                    {"contentEncoding", -1}, {"contentSchema", -1}, {"$schema", -1}, {"$id", -1}, {"id", -1},
                    {"$anchor", -1}, {"definitions", -1}, {"$defs", -1}, {"$vocabulary", -1},
                    {"$dynamicAnchor", -1}, {"$recursiveAnchor", -1},
                    // any value
                    {"type", 0}, {"enum", 0}, {"const", 0}, {"$ref", 0}, {"allOf", 0}, {"anyOf", 0}, {"oneOf", 0},
                    {"not", 0}, {"if", 0}, {"then", 0}, {"else", 0}, {"$dynamicRef", 0}, {"$recursiveRef", 0},
                    // numbers
                    {"multipleOf", t_integer}, {"maximum", t_integer}, {"exclusiveMaximum", t_integer},
                    {"minimum", t_integer}, {"exclusiveMinimum", t_integer},
                    // strings
                    {"maxLength", t_string}, {"minLength", t_string}, {"pattern", t_string}, {"format", t_string},
                    // arrays
                    {"items", t_array}, {"prefixItems", t_array}, {"additionalItems", t_array}, {"contains", t_array},
                    {"maxContains", t_array}, {"minContains", t_array}, {"maxItems", t_array}, {"minItems", t_array},
                    {"uniqueItems", t_array}, {"unevaluatedItems", t_array},
                    // objects
                    {"properties", t_object}, {"patternProperties", t_object}, {"additionalProperties", t_object},
                    {"propertyNames", t_object}, {"maxProperties", t_object}, {"minProperties", t_object},
                    {"required", t_object}, {"dependentRequired", t_object}, {"dependentSchemas", t_object},
                    {"dependencies", t_object}, {"unevaluatedProperties", t_object}};
                const auto it = classes.find(k);
                return it == classes.end() ? -2 : it->second;
            }

            /// Whether the document's draft defines the keyword (a keyword of
            /// another draft is an unknown one there: validators ignore it).
            bool in_draft(const std::string& k) const
            {
                const auto d = m_doc.draft();
                if (k == "contains" || k == "propertyNames" || k == "const")
                {
                    return d >= schema_document::draft6;
                }
                if (k == "if" || k == "then" || k == "else")
                {
                    return d >= schema_document::draft7;
                }
                if (k == "dependencies")
                {
                    return d <= schema_document::draft7;
                }
                if (k == "dependentRequired" || k == "dependentSchemas" || k == "minContains" || k == "maxContains" ||
                    k == "unevaluatedProperties" || k == "unevaluatedItems")
                {
                    return d >= schema_document::draft2019;
                }
                return k != "prefixItems" || d >= schema_document::draft2020;
            }
            /// s has the keyword k, and it means something (its draft defines it; a made schema's always do).
            bool has(const json* s, const std::string& k) const { return s->contains(k) && (made(s) || in_draft(k)); }
            /// keyword_class of k in s: an unknown keyword (-2) where its draft does not define it.
            int class_of(const json* s, const std::string& k) const { return made(s) || in_draft(k) ? keyword_class(k) : -2; }

            /// The types a keyword of class c > 0 (keyword_class) applies to.
            static unsigned applies_to(int c) { return c == t_integer ? t_integer | t_fraction : unsigned(c); }

            /// Drafts 4 to 7: a $ref's siblings are ignored.
            bool ref_only(const json* s) const
            {
                return m_doc.draft() <= schema_document::draft7 && s->is_object() && s->contains("$ref");
            }

            unsigned type_bits(const json* s) const
            {
                if (made(s) && s->contains("$xs:types"))
                {
                    return (*s)["$xs:types"].get<unsigned>();  // (any set of bits: a number that is not an integer too)
                }
                if (!s->contains("type"))
                {
                    return t_all;
                }
                const auto& t = (*s)["type"];
                const auto bit = [&](const json& name) -> unsigned {
                    if (!name.is_string())
                    {
                        fail("type: a list of type names expected", s);
                    }
                    const std::string n = name.get<std::string>();
                    if (n == "null") return t_null;
                    if (n == "boolean") return t_boolean;
                    if (n == "object") return t_object;
                    if (n == "array") return t_array;
                    if (n == "string") return t_string;
                    if (n == "integer") return t_integer;
                    if (n == "number") return t_integer | t_fraction;
                    fail("unknown type '" + n + "'", s);
                };
                if (t.is_array() && !t.empty())
                {
                    unsigned bits = 0;
                    for (const auto& x : t)
                    {
                        bits |= bit(x);
                    }
                    return bits;
                }
                if (t.is_string())
                {
                    return bit(t);
                }
                fail("type: a type name or a non-empty list of them expected", s);
            }

            /// A value's type; 1.0 is an integer from draft 6 on, not in draft 4 (as its validators decide).
            unsigned type_of(const json& v) const
            {
                if (v.is_null()) return t_null;
                if (v.is_boolean()) return t_boolean;
                if (v.is_object()) return t_object;
                if (v.is_array()) return t_array;
                if (v.is_string()) return t_string;
                if (v.is_number_integer() || v.is_number_unsigned()) return t_integer;
                const double d = v.get<double>();
                return d == std::floor(d) && std::isfinite(d) && m_doc.draft() > schema_document::draft4 ? t_integer
                                                                                                         : t_fraction;
            }

            /// const, a keyword from draft 6 on (draft 4's validators ignore it).
            bool has_const(const json* s) const { return has(s, "const"); }

            /// A non-negative integer keyword (3.0 is 3), or `otherwise`.
            std::size_t count(const json* s, const char* key, std::size_t otherwise) const
            {
                if (!has(s, key))
                {
                    return otherwise;
                }
                const auto& v = (*s)[key];
                if (v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0))
                {
                    return v.get<std::size_t>();
                }
                if (v.is_number_float() && v.get<double>() >= 0 && v.get<double>() == std::floor(v.get<double>()) &&
                    v.get<double>() < 1e18)
                {
                    return std::size_t(v.get<double>());
                }
                fail(std::string(key) + " must be a non-negative integer, got " + v.dump(), s);
            }

            const std::vector<const json*>& list_of(const json* s, const char* key) 
            {
                const auto& v = (*s)[key];
                if (!v.is_array() || v.empty())
                {
                    fail(std::string(key) + " must be a non-empty list of schemas", s);
                }
                auto& out = m_lists[&v];
                if (out.empty())
                {
                    for (const auto& x : v)
                    {
                        out.push_back(&x);
                    }
                }
                return out;
            }

            // ---- a conjunction of schemas as one rule ----

            void normalize(conj& c)
            {
                std::sort(c.begin(), c.end(), [&](const json* a, const json* b) { return m_doc.order(a) < m_doc.order(b); });
                c.erase(std::unique(c.begin(), c.end()), c.end());
            }

            /// The texts every schema of c accepts, as one rule shared by every
            /// place with the same schemas; none when nothing validates (known
            /// without reading a rule still being compiled: recursion).
            std::optional<expr_id> value_of(conj c)
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

            /// What remains to expand: schemas (all apply) or one choice (anyOf/oneOf: one branch applies).
            struct pending
            {
                const json* choice;  // the anyOf/oneOf list, or null
                conj schemas;
            };

            /// The disjunctive form of what `todo` adds to `parts`: each
            /// element of `out` a set of schemas whose own keywords all apply
            /// ($ref, allOf, anyOf and oneOf expanded).
            void expand(conj parts, std::vector<pending> todo, std::vector<conj>& out)
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

            void check_keywords(const json* s) const
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

            bool made(const json* s) const { return m_made_nodes.count(s) != 0; }

            /// A schema of the compiler's own, its nodes marked and placed (for messages) at `owner`.
            const json* make(json j, const json* owner)
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

            /// What one schema alone says of a value, as far as hopeless() reads it.
            struct facts
            {
                struct of_property
                {
                    unsigned types = t_all;
                    std::optional<std::vector<json>> values;  // enum or const (through $ref)
                    std::vector<json> not_in;                 // a not of enum or const
                    std::vector<std::string> patterns;        // of its strings (through $ref)
                };
                bool skipped = false;  // a $ref's siblings, ignored (drafts 4 to 7)
                unsigned types = t_all;
                std::optional<std::vector<json>> values;
                std::vector<json> not_in;
                std::vector<std::string> required;
                std::map<std::string, of_property> properties;
            };

            const facts& facts_of(const json* s)
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
            bool hopeless(const conj& parts)
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
            static std::vector<json> meet(const std::vector<json>& a, const std::vector<json>& b)
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
            bool none_left(const std::vector<json>& values, unsigned types, const std::vector<json>& not_in) const
            {
                return std::all_of(values.begin(), values.end(), [&](const json& v) {
                    return (type_of(v) & types) == 0 ||
                           std::any_of(not_in.begin(), not_in.end(), [&](const json& x) { return same(x, v); });
                });
            }

            /// hopeless()'s objects: whether each required key may have a value.
            bool object_possible(const std::vector<const facts*>& all) const
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
            bool contradicts(const conj& parts, const json* s) const
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
            static bool unicode_classes(const std::string& p)
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
            std::size_t ref_index(const json* s)
            {
                m_refs.push_back({s, t_all});
                return m_refs.size() - 1;
            }

            /// {"$xs:not": i} or {"$xs:is": i} for the schema s; a negation
            /// restricted to `types` (negation_of) where negated.
            json refer(const json* s, bool negated, unsigned types = t_all)
            {
                m_refs.push_back({s, negated ? types : t_all});
                return json{{negated ? "$xs:not" : "$xs:is", m_refs.size() - 1}};
            }

            /// The schema of the values s does not accept (see above), made
            /// once per s; restricted to `types`, of the values that are of
            /// another type or that s does not accept (its keywords for the
            /// other types left out: one that cannot be enforced there is no
            /// error).
            const json* negation_of(const json* s, unsigned types = t_all)
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
            const json* equal_to(const json& v, const json* owner)
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
            json negated_keywords(const json* s, unsigned types = t_all)
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
            std::vector<const json*> excluded(const conj& own) const
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

            // ---- one disjunct: schemas without combinators ----

            /// A disjunct read: the schemas whose keywords apply (a $ref's
            /// siblings do not in drafts 4 to 7), their types, and the first
            /// with enum or const.
            struct disjunct_parts
            {
                conj own;
                unsigned types = t_all;
                const json* values_at = nullptr;
            };
            disjunct_parts parts_of(const conj& d) const
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

            std::optional<expr_id> disjunct(const conj& d)
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

            /// The numbers of `types` (integers, numbers that are not, or both)
            /// under own's numeric keywords: the builder's integer or number
            /// where there are none, else a lexeme of number_dfa (no exponent;
            /// detail/json_numbers.hpp), one per distinct set of bounds. A
            /// number that is not an integer is written with a fraction whose
            /// last digit is not 0, without an exponent.
            std::optional<expr_id> number(const conj& own, unsigned types)
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
            std::optional<expr_id> counted_integers(const number_bounds& b, bool fraction, const std::string& equal)
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
            bool numeric_bounds(const json* s, number_bounds& b, bool exact = false) const
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
            std::uint64_t divisor_of(const decimal& m, const json* s) const
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
            std::optional<expr_id> values(const json* at, const conj& own, unsigned types)
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
            expr_id constant(const json& v)
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
            std::string spellings(const json& v) const
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
            static std::string equal_texts(std::string text, bool zero, bool integer, bool zeros)
            {
                if (const std::size_t dot = text.find('.'); dot != std::string::npos)
                {
                    text.replace(dot, 1, "\\.");
                }
                return (zero ? std::string("-?0") : text) + (!integer ? "0*" : zeros ? "(\\.0+)?" : "");
            }

            /// A format JSON Schema defines is an assertion: the regular
            /// expression of format_regex over the string's content, or an
            /// error where none is; any other format is an annotation
            /// (nullptr).
            const std::string* format_of(const json* s) const
            {
                if (!s->contains("format") || !(*s)["format"].is_string())
                {
                    return nullptr;
                }
                static const std::set<std::string> defined = {
                    "date-time", "date", "time", "duration", "email", "idn-email", "hostname",
                    "idn-hostname", "ipv4", "ipv6", "uri", "uri-reference", "iri", "iri-reference", "uuid",
                    "uri-template", "json-pointer", "relative-json-pointer", "regex"};
                const std::string f = (*s)["format"].get<std::string>();
                const std::string* re = format_regex(f);
                if (re == nullptr && defined.count(f) != 0)
                {
                    fail("unsupported format '" + f + "'", s);
                }
                return re;
            }

            std::optional<expr_id> string(const conj& own)
            {
                // (the same bounds, patterns, formats and exclusions in many conjunctions: their string once)
                std::vector<std::string> key;
                for (const json* s : own)
                {
                    for (const char* k : {"minLength", "maxLength", "pattern", "format", "$xs:notPattern", "$xs:notIn"})
                    {
                        if (s->contains(k) && (k[0] != '$' || made(s)))
                        {
                            key.push_back(std::string(k) + (*s)[k].dump());
                        }
                    }
                }
                std::sort(key.begin(), key.end());
                const auto found = m_strings.find(key);
                if (found != m_strings.end())
                {
                    return found->second;
                }
                const auto content = string_content(own, false, true);
                std::optional<expr_id> e;
                if (content && content->dfa && !content->units.empty())
                {
                    e = m_g.sequence({m_g.bytes("\""), m_g.counted_lexeme(std::move(*content->dfa), content->units, content->min, content->max),
                                      m_g.bytes("\"")});
                }
                else if (content && content->dfa)
                {
                    e = m_b.pattern_string(std::move(*content->dfa));
                }
                else if (content && content->chars)
                {
                    const std::size_t k = content->prefix.size();
                    std::vector<expr_id> parts{m_g.bytes("\"")};
                    for (const byte_set& c : content->prefix)
                    {
                        parts.push_back(m_g.byte_class(c));
                    }
                    parts.push_back(m_g.repeat(m_g.byte_class(*content->chars), content->min - k,
                                               content->max == grammar::unbounded ? grammar::unbounded : content->max - k));
                    parts.push_back(m_g.bytes("\""));
                    e = m_g.sequence(std::move(parts));
                }
                else if (content)
                {
                    e = m_b.string(content->min, content->max);
                }
                return m_strings.emplace(std::move(key), e).first->second;
            }

            /// A string's bounds, and its content's DFA where a pattern, a
            /// format or a not asks for one (or `dfa` does); none when no
            /// string fits.
            struct string_bounds
            {
                std::size_t min, max;
                std::optional<byte_dfa> dfa;
                // (or: a character of each class of `prefix`, then characters of the class `chars`, min to max in
                // all; ASCII classes)
                std::optional<byte_set> chars;
                std::vector<byte_set> prefix;
                // (or: dfa's texts of min to max code points counted as they are read, units[s] whether state s
                // begins one: grammar::counted_lexeme, where dfa's product with the length is too large)
                std::vector<std::uint8_t> units;
            };

            /// Whether d is P1 P2 .. Pk C* for classes of ASCII bytes (k at most
            /// max_class_prefix; `^[a-z][-a-z0-9.+]*$`): C and the Pi.
            static std::optional<std::pair<byte_set, std::vector<byte_set>>> repeated_class(const byte_dfa& d)
            {
                static constexpr std::size_t max_class_prefix = 16;
                std::vector<byte_set> prefix;
                std::int32_t q = d.start();
                while (true)
                {
                    byte_set out;
                    std::int32_t next = byte_dfa::dead;
                    bool single = true;  // (one next state for every byte read)
                    for (unsigned b = 0; b < 256; ++b)
                    {
                        const std::int32_t t = d.next(q, static_cast<unsigned char>(b));
                        if (t == byte_dfa::dead)
                        {
                            continue;
                        }
                        if (b >= 0x80 || (next != byte_dfa::dead && t != next))
                        {
                            single = false;
                            break;
                        }
                        next = t;
                        out.insert(static_cast<unsigned char>(b));
                    }
                    if (!single)
                    {
                        return std::nullopt;
                    }
                    if (next == q)
                    {
                        // the loop: it ends the text, and no state before it does
                        if (!d.accepting(q))
                        {
                            return std::nullopt;
                        }
                        return std::make_pair(out, prefix);
                    }
                    if (next == byte_dfa::dead || d.accepting(q) || prefix.size() == max_class_prefix)
                    {
                        return std::nullopt;
                    }
                    prefix.push_back(out);
                    q = next;
                }
            }
            std::optional<string_bounds> string_content(const conj& own, bool dfa, bool counted = false)
            {
                std::size_t min = 0, max = grammar::unbounded;
                std::vector<const json*> patterns;  // (the schemas with a pattern or a format)
                for (const json* s : own)
                {
                    const std::size_t lo = count(s, "minLength", 0), hi = count(s, "maxLength", grammar::unbounded);
                    if (lo > hi)
                    {
                        fail("minLength " + std::to_string(lo) + " > maxLength " + std::to_string(hi), s);
                    }
                    min = std::max(min, lo);
                    max = std::min(max, hi);
                    if (s->contains("pattern"))
                    {
                        if (!(*s)["pattern"].is_string())
                        {
                            fail("pattern must be a string", s);
                        }
                        patterns.push_back(s);
                    }
                    else if (format_of(s) != nullptr || (made(s) && s->contains("$xs:notPattern")))
                    {
                        patterns.push_back(s);  // (its format, or what it excludes, below)
                    }
                }
                std::vector<std::string> out;  // values a not excludes (their content)
                for (const json* v : excluded(own))
                {
                    if (v->is_string())
                    {
                        out.push_back(v->get<std::string>());
                    }
                }
                if (!out.empty() && patterns.empty())
                {
                    patterns.push_back(own.front());  // (the exclusions below)
                }
                if (min > max)
                {
                    return std::nullopt;
                }
                if (patterns.empty() && !dfa)
                {
                    return string_bounds{min, max, std::nullopt, std::nullopt, {}, {}};
                }
                // the patterns' DFAs and the length's intersected (the content unescaped)
                std::optional<byte_dfa> content;
                // (the product stays small: a large lexeme is slow to compile into the grammar)
                const auto meet = [&](byte_dfa d) {
                    content = content ? dfa_intersection(*content, d, max_product) : std::move(d);
                };
                for (const json* s : patterns)
                {
                    if (s->contains("pattern"))
                    {
                        try
                        {
                            meet(pattern_dfa((*s)["pattern"].get<std::string>(), false));
                        }
                        catch (const invalid_parameter& e)
                        {
                            fail(std::string("pattern: ") + e.what(), s);
                        }
                    }
                    if (const std::string* f = format_of(s))
                    {
                        try
                        {
                            meet(format_dfa(f));
                        }
                        catch (const invalid_parameter& e)
                        {
                            fail("format '" + (*s)["format"].get<std::string>() + "' together with the string's other bounds: " + e.what(), s);
                        }
                    }
                    if (made(s) && s->contains("$xs:notPattern"))
                    {
                        try
                        {
                            meet(pattern_dfa((*s)["$xs:notPattern"].get<std::string>(), true));
                        }
                        catch (const invalid_parameter& e)
                        {
                            fail(std::string("pattern under not: ") + e.what(), s);
                        }
                    }
                }
                if (!out.empty())
                {
                    meet(dfa_difference(content ? *content : content_dfa(), dfa_of_texts(out), max_product));
                }
                if (!content)
                {
                    content = content_dfa();
                }
                if (min > 0 || max != grammar::unbounded)
                {
                    const json* first = patterns.empty() ? own.front() : patterns.front();
                    const std::string what = patterns.empty() ? std::string("a key's length")
                                             : first->contains("pattern") || !first->contains("format")
                                                 ? std::string("pattern")
                                                 : "format '" + (*first)["format"].get<std::string>() + "'";
                    // (the pattern's code points counted as the grammar reads them: where it may, and the product
                    // is refused)
                    const auto count_units = [&](const std::string& refused) -> std::optional<string_bounds> {
                        if (!counted)
                        {
                            fail(refused, first);
                        }
                        std::pair<byte_dfa, std::vector<std::uint8_t>> counted_content;
                        try
                        {
                            counted_content = dfa_code_point_units(*content);
                        }
                        catch (const invalid_parameter& e)
                        {
                            fail(refused + "; counted: " + e.what(), first);
                        }
                        auto& [d, units] = counted_content;
                        if (d.size() == 0)
                        {
                            return std::nullopt;
                        }
                        const std::size_t lengths = (max == grammar::unbounded ? min : max) + 1;
                        const std::size_t entries = d.size() * lengths;
                        if (lengths > detail::unit_ends::max_entries || entries > detail::unit_ends::max_entries ||
                            m_unit_entries + entries > max_unit_entries)
                        {
                            fail(refused + "; counted, its " + std::to_string(d.size()) + " states x " + std::to_string(lengths) +
                                     " lengths are past the limit (" + std::to_string(detail::unit_ends::max_entries) +
                                     " for one, " + std::to_string(max_unit_entries) + " for the schema's)",
                                 first);
                        }
                        if (grammar::ends_of(d, grammar::lexeme_units{units, min, max, 0}).shortest() == detail::unit_ends::none)
                        {
                            return std::nullopt;  // (no text of the pattern has such a length)
                        }
                        m_unit_entries += entries;
                        return string_bounds{min, max, std::move(d), std::nullopt, {}, std::move(units)};
                    };
                    if (min > 1000 || (max != grammar::unbounded && max > 1000))
                    {
                        // (ASCII characters of one class repeated after a few of others, ^[a-z0-9 _-]+$: counted
                        // by the grammar)
                        if (const auto chars = dfa || !content ? std::nullopt : repeated_class(*content))
                        {
                            if (std::max(min, chars->second.size()) > max)
                            {
                                return std::nullopt;
                            }
                            return string_bounds{std::max(min, chars->second.size()), max, std::nullopt, chars->first, chars->second, {}};
                        }
                        return count_units(what + " together with a length bound above 1000 is not supported");
                    }
                    try
                    {
                        // (and all of them together at most max_length_states: each is one lexeme)
                        const std::size_t left = max_length_states - std::min(m_length_states, max_length_states);
                        try
                        {
                            content = dfa_code_points(*content, min, max, std::min(max_length_product, left));
                        }
                        catch (const invalid_parameter&)
                        {
                            if (left >= max_length_product)
                            {
                                throw;
                            }
                            throw invalid_parameter("the schema's patterns with length bounds take more than " +
                                                    std::to_string(max_length_states) + " states together");
                        }
                        m_length_states += content->size();
                    }
                    catch (const invalid_parameter& e)
                    {
                        return count_units(what + " together with minLength/maxLength: " + e.what());
                    }
                }
                if (content->size() == 0)
                {
                    return std::nullopt;
                }
                return string_bounds{min, max, std::move(content), std::nullopt, {}, {}};
            }

            /// The formats enforced, each a regular expression over the string's
            /// content (docs/semantics.md): date, time and date-time as RFC 3339
            /// writes them (a real day of the Gregorian calendar, year 0001 to 9999;
            /// seconds 00-59, a leap second refused), uuid as 8-4-4-4-12 hex
            /// digits, ipv4 as four decimal octets without leading zeros; email,
            /// uri and uri-reference as subsets of their RFCs (an email's
            /// dot-atom local part at a host name; a URI without a bracketed IP
            /// literal host), uri-template as RFC 6570's ASCII templates.
            /// nullptr for another format.
            static const std::string* format_regex(const std::string& f)
            {
                static const std::map<std::string, std::string> regexes = [] {
                    const std::string year = "([0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})";
                    const std::string leap = "([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)";
                    const std::string date = "(" + year + "-(0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|" + year +
                                             "-(0[469]|11)-(0[1-9]|[12][0-9]|30)|" + year +
                                             "-02-(0[1-9]|1[0-9]|2[0-8])|" + leap + "-02-29)";
                    const std::string time =
                        R"re(([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9]))re";
                    // RFC 3986's parts (unreserved, sub-delims, pct-encoded)
                    const std::string unreserved = R"re(A-Za-z0-9._~\-)re", sub_delims = "!$&'()*+,;=";
                    const std::string pct = "%[0-9A-Fa-f]{2}";
                    const std::string pchar = "([" + unreserved + sub_delims + ":@]|" + pct + ")";
                    const std::string segment = pchar + "*", segment_nz = pchar + "+";
                    const std::string authority = "(([" + unreserved + sub_delims + ":]|" + pct + ")*@)?([" + unreserved +
                                                  sub_delims + "]|" + pct + ")*(:[0-9]*)?";
                    const std::string path_abempty = "(/" + segment + ")*";
                    const std::string rooted = "//" + authority + path_abempty + "|/(" + segment_nz + "(/" + segment + ")*)?|";
                    const std::string hier_part = "(" + rooted + segment_nz + "(/" + segment + ")*)?";
                    const std::string relative_part =
                        "(" + rooted + "([" + unreserved + sub_delims + "@]|" + pct + ")+(/" + segment + ")*)?";
                    const std::string query_fragment = "(\\?(" + pchar + "|[/?])*)?(#(" + pchar + "|[/?])*)?";
                    const std::string scheme = R"re([A-Za-z][A-Za-z0-9+.\-]*)re";
                    const std::string atext = R"re([A-Za-z0-9!#$%&'*+/=?^_`{|}~\-])re";
                    const std::string label = R"re([A-Za-z0-9]([A-Za-z0-9\-]{0,61}[A-Za-z0-9])?)re";
                    const std::string octet = "(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
                    const std::string hex = "[0-9A-Fa-f]";
                    // RFC 6570's templates: ASCII literals, expressions of level 4 (its reserved
                    // operators = , ! @ | left out), names without percent-encoding
                    const std::string varchar = "[A-Za-z0-9_]", varname = varchar + "(\\.?" + varchar + ")*";
                    const std::string varspec = varname + "(:[1-9][0-9]{0,3}|\\*)?";
                    const std::string expression = "\\{[+#./;?&]?" + varspec + "(," + varspec + ")*\\}";
                    const std::string uri_template = "([!#$&(-;=?-\\[\\]_a-z~]|" + pct + "|" + expression + ")*";
                    return std::map<std::string, std::string>{
                        {"date", date},
                        {"time", time},
                        {"date-time", date + "[Tt]" + time},
                        {"uuid", hex + "{8}-" + hex + "{4}-" + hex + "{4}-" + hex + "{4}-" + hex + "{12}"},
                        {"ipv4", octet + "(\\." + octet + "){3}"},
                        {"email", atext + "+(\\." + atext + "+)*@" + label + "(\\." + label + ")*"},
                        {"uri", scheme + ":" + hier_part + query_fragment},
                        {"uri-reference", "(" + scheme + ":" + hier_part + "|" + relative_part + ")" + query_fragment},
                        {"uri-template", uri_template}};
                }();
                const auto it = regexes.find(f);
                return it == regexes.end() ? nullptr : &it->second;
            }

            /// Alternatives that are lexemes (strings of patterns, one for each
            /// disjunct of a not of an anyOf) as one, their DFAs' union while it
            /// stays within max_union: the grammar's automaton would determinise
            /// their choice all at once, unminimised until the end (Handwritten
            /// allany16: 31 of ~900 states each, past its work limit).
            void merge_lexemes(std::vector<expr_id>& alternatives)
            {
                static constexpr std::size_t max_union = 30000;
                std::vector<expr_id> kept;
                std::optional<byte_dfa> joined;
                std::size_t lexemes = 0;
                for (const expr_id e : alternatives)
                {
                    const auto& x = m_g.at(e);
                    if (x.kind != grammar::op::lexeme || m_g.units_of(x.index) != nullptr)
                    {
                        kept.push_back(e);
                        continue;
                    }
                    try
                    {
                        joined = joined ? dfa_union(*joined, m_g.lexeme_dfa(x.index), max_union) : m_g.lexeme_dfa(x.index);
                        ++lexemes;
                    }
                    catch (const invalid_parameter&)
                    {
                        return;  // (the union too large: the choice stays as it is)
                    }
                }
                if (lexemes >= 2)
                {
                    kept.push_back(m_g.lexeme(std::move(*joined)));
                    alternatives = std::move(kept);
                }
            }

            /// A pattern's content DFA, or (negated) the content none of whose
            /// readings matches (what it matches in ECMAScript or in Python's re:
            /// their complement, what neither does); once per pattern (a schema's
            /// disjuncts read the same patterns again).
            const byte_dfa& pattern_dfa(const std::string& pattern, bool negated)
            {
                auto it = m_patterns.find({negated, pattern});
                if (it == m_patterns.end())
                {
                    byte_dfa d = negated ? dfa_difference(content_dfa(), compile_regex(pattern, content_options(true, regex_reading::either)),
                                                          max_product)
                                         : compile_regex(pattern, content_options(true, regex_reading::both));
                    it = m_patterns.emplace(std::make_pair(negated, pattern), std::move(d)).first;
                }
                return it->second;
            }
            /// The DFA of a format's regex (format_regex), compiled once per schema.
            const byte_dfa& format_dfa(const std::string* re)
            {
                auto it = m_formats.find(re);
                if (it == m_formats.end())
                {
                    it = m_formats.emplace(re, compile_regex(*re, content_options(false))).first;
                }
                return it->second;
            }

            /// Every string content ([^]*), compiled once.
            const byte_dfa& content_dfa()
            {
                if (m_content.size() == 0)
                {
                    m_content = compile_regex("[^]*", content_options(false));
                }
                return m_content;
            }

            /// The contents (content_options) in which the regex finds a match, compiled once per schema.
            const byte_dfa& search_dfa(const std::string& regex, const json* s)
            {
                auto it = m_key_patterns.find(regex);
                if (it == m_key_patterns.end())
                {
                    try
                    {
                        it = m_key_patterns.emplace(regex, compile_regex(regex, content_options(true))).first;
                    }
                    catch (const invalid_parameter& e)
                    {
                        fail("pattern '" + regex + "': " + e.what(), s);
                    }
                }
                return it->second;
            }

            /// A string's unescaped content: valid UTF-8 without '"', '\\' and the control bytes.
            static regex_options content_options(bool search, regex_reading reading = regex_reading::ecmascript)
            {
                regex_options o;
                o.search = search;
                o.reading = reading;
                for (int b = 0; b < 0x20; ++b)
                {
                    o.forbidden[std::size_t(b)] = true;
                }
                o.forbidden['"'] = o.forbidden['\\'] = true;
                return o;
            }

            std::optional<expr_id> array(const conj& own)
            {
                std::size_t min = 0, max = grammar::unbounded;
                conj items;
                const json* unique = nullptr;
                std::vector<const json*> contains;  // the schemas with contains (minContains, maxContains)
                for (const json* s : own)
                {
                    const std::size_t lo = count(s, "minItems", 0), hi = count(s, "maxItems", grammar::unbounded);
                    if (lo > hi)
                    {
                        fail("minItems " + std::to_string(lo) + " > maxItems " + std::to_string(hi), s);
                    }
                    min = std::max(min, lo);
                    max = std::min(max, hi);
                    for (const char* k : {"prefixItems", "unevaluatedItems"})
                    {
                        if (has(s, k))
                        {
                            unsupported(k, s);
                        }
                    }
                    if (has(s, "contains"))
                    {
                        if (contains.size() == max_contains)
                        {
                            fail("contains in more than " + std::to_string(max_contains) + " schemas of one conjunction", s);
                        }
                        contains.push_back(s);
                    }
                    if (s->contains("uniqueItems") && (*s)["uniqueItems"] == true)
                    {
                        unique = s;
                    }
                    if (s->contains("items"))
                    {
                        if ((*s)["items"].is_array())
                        {
                            fail("items as a list (tuple validation) is not supported", s);
                        }
                        items.push_back(&(*s)["items"]);
                    }
                }
                if (min > max)
                {
                    return std::nullopt;
                }
                if (!contains.empty())
                {
                    return containing(items, min, max, contains, unique);
                }
                if (unique != nullptr && max > 1)
                {
                    return distinct_items(items, min, max, unique);
                }
                const auto item = value_of(items);
                if (!item)
                {
                    if (min > 0)
                    {
                        return std::nullopt;
                    }
                    return m_b.array(m_g.empty(), 0, 0);
                }
                return m_b.array(*item, min, max);
            }

            /// contains: min..max items of which, for each contains,
            /// minContains..maxContains (1..unbounded) satisfy it: the items
            /// written as items and the contains of each set (and not those
            /// outside it whose maxContains bounds them).
            std::optional<expr_id> containing(const conj& items, std::size_t min, std::size_t max,
                                              const std::vector<const json*>& at, const json* unique)
            {
                if (unique != nullptr && max > 1)
                {
                    fail("contains together with uniqueItems is not supported", at.front());
                }
                std::vector<json_builder::count_bound> counts;
                for (const json* s : at)
                {
                    counts.push_back({count(s, "minContains", 1), count(s, "maxContains", grammar::unbounded)});
                    if (counts.back().lo > counts.back().hi)
                    {
                        return std::nullopt;
                    }
                }
                std::vector<std::pair<unsigned, expr_id>> kinds;  // (the contains an item satisfies, its text)
                for (unsigned mask = 0; mask < (1u << at.size()); ++mask)
                {
                    conj c = items;
                    for (std::size_t j = 0; j < at.size(); ++j)
                    {
                        if (mask & (1u << j))
                        {
                            c.push_back(&(*at[j])["contains"]);
                        }
                        else if (counts[j].hi != grammar::unbounded)
                        {
                            c.push_back(negation_of(&(*at[j])["contains"]));
                        }
                    }
                    const auto v = value_of(c);
                    if (v)
                    {
                        kinds.push_back({mask, *v});
                    }
                }
                try
                {
                    const expr_id e = m_b.array_counting(kinds, min, max, counts);
                    return e == grammar::none ? std::nullopt : std::optional<expr_id>(e);
                }
                catch (const invalid_parameter& e)
                {
                    fail(e.what(), at.front());
                }
            }

            /// uniqueItems: items of finite values (enum, const, booleans, null),
            /// each value at most once; values equal for validators (1 and
            /// 1.0, and 1 and true: loosely_same) share a slot. Items that are
            /// strings (string_values) are checked by the matcher
            /// (grammar::distinct): where each ends, and while it is written
            /// (no item is begun that can only end as an earlier one); the
            /// array holds at most as many items as there are strings. Objects
            /// that renew (renewing()) are marked too, checked where each
            /// ends. Other items are an error.
            std::optional<expr_id> distinct_items(const conj& items, std::size_t min, std::size_t max, const json* at)
            {
                std::vector<conj> ds;
                expand(conj{}, {{nullptr, items}}, ds);
                if (const auto values = string_values(items, ds))
                {
                    const auto item = value_of(items);
                    if (!item)
                    {
                        return min > 0 ? std::nullopt : std::optional<expr_id>(m_b.array(m_g.empty(), 0, 0));
                    }
                    if (values->first < enough_values)
                    {
                        if (min > values->first)
                        {
                            if (values->second)
                            {
                                return std::nullopt;  // (fewer strings than items)
                            }
                            fail("uniqueItems with minItems " + std::to_string(min) + " over strings of which " +
                                     std::to_string(values->first) + " are known (branches not counted together)",
                                 at);
                        }
                        max = std::min<std::size_t>(max, std::size_t(values->first));
                    }
                    return marked_array(*item, min, max);
                }
                const bool renews = renewing(ds), closed = !renews && closed_strings(ds);
                if (closed || renews || std::all_of(ds.begin(), ds.end(), [&](const conj& d) { return many_integers(d); }))
                {
                    const auto item = value_of(items);
                    if (!item)
                    {
                        return min > 0 ? std::nullopt : std::optional<expr_id>(m_b.array(m_g.empty(), 0, 0));
                    }
                    return marked_array(*item, min, max, closed);
                }
                std::vector<json> candidates;
                for (const conj& d : ds)
                {
                    const auto [own, types, values_at] = parts_of(d);
                    if (values_at != nullptr)
                    {
                        const auto vs = finite_values(values_at);
                        if (!vs)
                        {
                            fail("enum must be a list", values_at);
                        }
                        candidates.insert(candidates.end(), vs->begin(), vs->end());
                    }
                    else if ((types & ~unsigned(t_boolean | t_null)) == 0)
                    {
                        for (const json& v : {json(true), json(false), json(nullptr)})
                        {
                            candidates.push_back(v);
                        }
                    }
                    else
                    {
                        fail("unsupported keyword 'uniqueItems' (only items of finite values: enum, const, boolean, null; "
                             "strings; integers under no numeric keyword; objects with an optional key of endless values, or other "
                             "keys allowed; or closed objects of required strings)", at);
                    }
                }
                std::vector<std::vector<json>> slots;
                for (const json& v : candidates)
                {
                    if (!std::all_of(items.begin(), items.end(), [&](const json* s) { return validates(v, s); }))
                    {
                        continue;
                    }
                    auto slot = std::find_if(slots.begin(), slots.end(), [&](const std::vector<json>& vs) {
                        return std::any_of(vs.begin(), vs.end(), [&](const json& w) { return loosely_same(v, w); });
                    });
                    if (slot == slots.end())
                    {
                        slots.emplace_back();
                        slot = slots.end() - 1;
                    }
                    if (std::none_of(slot->begin(), slot->end(), [&](const json& w) { return w.dump() == v.dump(); }))
                    {
                        slot->push_back(v);
                    }
                }
                if (slots.size() > 64)
                {
                    fail("uniqueItems over more than 64 values", at);
                }
                // (one array per list of values and bounds: a definition read in several places is one)
                std::string values;
                for (const auto& slot : slots)
                {
                    for (const json& v : slot)
                    {
                        values += v.dump() + '\n';
                    }
                    values += '\n';
                }
                const auto [known, added] = m_distinct_arrays.emplace(std::make_tuple(values, min, max), grammar::none);
                if (added)
                {
                    std::vector<expr_id> texts;
                    for (const auto& slot : slots)
                    {
                        std::vector<expr_id> options;
                        for (const json& v : slot)
                        {
                            options.push_back(constant(v));
                        }
                        texts.push_back(m_g.choice(std::move(options)));
                    }
                    known->second = m_b.distinct_array(texts, min, max);
                }
                const expr_id e = known->second;
                return e == grammar::none ? std::nullopt : std::optional<expr_id>(e);
            }

            /// An array of `item` marked grammar::distinct (distinct_closed:
            /// closed_strings; a plain one where max <= 1: unique already).
            expr_id marked_array(expr_id item, std::size_t min, std::size_t max, bool closed = false)
            {
                if (max <= 1)
                {
                    return m_b.array(item, min, max);
                }
                // (fresh rules: the item's ends are the array's alone; one array per item and bounds)
                const bool rule = m_g.at(item).kind == grammar::op::rule;  // (a schema's rule: by the rule, read anywhere)
                const auto [known, added] = m_marked_arrays.emplace(
                    std::make_tuple(rule ? m_g.at(item).index : item, rule, min, max, closed), grammar::none);
                if (!added)
                {
                    return known->second;
                }
                const rule_id u = m_g.fresh_rule("unique-item"), r = m_g.fresh_rule("unique-items");
                m_g.define(u, item);
                m_g.define(r, m_b.array(m_g.ref(u), min, max));
                if (closed)
                {
                    m_g.distinct_closed(r, u);
                }
                else
                {
                    m_g.distinct(r, u);
                }
                known->second = m_g.ref(r);
                return known->second;
            }

            /// Whether every disjunct is objects that can always still become
            /// a new value, however much of one is written: objects whose
            /// grammar (json_builder::object_any_order: no maxProperties, no
            /// members counted) writes at any gap, any number of times, a key
            /// that takes endless values (an optional listed key, the last
            /// written being the one validators read), or any other key with
            /// any value (other keys allowed by json_options and by every
            /// additionalProperties). So a begun item never runs out of new
            /// completions and the matcher checks only where an item ends.
            bool renewing(const std::vector<conj>& ds)
            {
                return !ds.empty() && std::all_of(ds.begin(), ds.end(), [&](const conj& d) { return renewing_one(d, 0, false); });
            }
            static constexpr unsigned max_endless_depth = 8;
            /// An object's names as object() writes them, where nothing counts
            /// them (no maxProperties, no patterns or propertyNames, no
            /// minProperties past the required ones): none otherwise.
            struct object_shape
            {
                std::vector<std::string> required, names;  // (required: sorted)
                bool free_keys;                            // other keys with any value
            };
            std::optional<object_shape> shape_of(const conj& own) const
            {
                std::size_t min = 0;
                object_shape out{{}, {}, m_o.additional_properties};
                for (const json* s : own)
                {
                    if ((made(s) && s->contains("$xs:some")) || has(s, "maxProperties") || has(s, "patternProperties") ||
                        has(s, "propertyNames"))
                    {
                        return std::nullopt;
                    }
                    min = std::max(min, count(s, "minProperties", 0));
                    if (has(s, "required") && (*s)["required"].is_array())
                    {
                        for (const auto& x : (*s)["required"])
                        {
                            if (x.is_string())
                            {
                                out.required.push_back(x.get<std::string>());
                            }
                        }
                    }
                    if (has(s, "properties") && (*s)["properties"].is_object())
                    {
                        for (const auto& kv : (*s)["properties"].items())
                        {
                            out.names.push_back(kv.key());
                        }
                    }
                    const json* extra = s->contains("additionalProperties") ? &(*s)["additionalProperties"] : nullptr;
                    out.free_keys = out.free_keys && (extra == nullptr || *extra == json(true) || *extra == json::object());
                }
                std::sort(out.required.begin(), out.required.end());
                out.required.erase(std::unique(out.required.begin(), out.required.end()), out.required.end());
                if (min > 1 && min > out.required.size())
                {
                    return std::nullopt;  // (members counted: each key once)
                }
                return out;
            }
            /// The schemas of a listed name's value, as object() takes them (no patterns here).
            conj member_schemas(const conj& own, const std::string& name) const
            {
                conj c;
                for (const json* s : own)
                {
                    if (has(s, "properties") && (*s)["properties"].is_object() && (*s)["properties"].contains(name))
                    {
                        c.push_back(&(*s)["properties"][name]);
                    }
                    else if (s->contains("additionalProperties"))
                    {
                        c.push_back(&(*s)["additionalProperties"]);
                    }
                }
                return c;
            }

            /// renewing() for one disjunct; with `proven`, it must also be
            /// shown to have a value (each required key one).
            bool renewing_one(const conj& d, unsigned depth, bool proven)
            {
                const disjunct_parts parts = parts_of(d);
                if (parts.values_at != nullptr || parts.own.empty() || parts.types != t_object || depth > max_endless_depth)
                {
                    return false;
                }
                const auto shape = shape_of(parts.own);
                if (!shape)
                {
                    return false;
                }
                const auto has_value = [&](const std::string& name) { return value_of(member_schemas(parts.own, name)).has_value(); };
                if (proven && !std::all_of(shape->required.begin(), shape->required.end(), has_value))
                {
                    return false;
                }
                if (shape->free_keys)
                {
                    return true;  // (a key no earlier item has)
                }
                return std::any_of(shape->names.begin(), shape->names.end(), [&](const std::string& name) {
                    // (a key no value fits is left out of the grammar: its value must be written)
                    return !std::binary_search(shape->required.begin(), shape->required.end(), name) &&
                           endless(member_schemas(parts.own, name), depth + 1) && has_value(name);
                });
            }

            /// Whether every disjunct is closed objects whose every name that
            /// has a value (one at least) is required, a string with endless
            /// completions from every prefix of its content: such an item has a new completion
            /// until the quote that ends the last member's string, and from
            /// there the matcher searches (grammar::distinct_closed).
            bool closed_strings(const std::vector<conj>& ds)
            {
                return !ds.empty() && std::all_of(ds.begin(), ds.end(), [&](const conj& d) {
                    const disjunct_parts parts = parts_of(d);
                    const auto shape = parts.values_at != nullptr || parts.own.empty() || parts.types != t_object
                                           ? std::nullopt
                                           : shape_of(parts.own);
                    if (!shape || shape->free_keys ||
                        std::any_of(parts.own.begin(), parts.own.end(), [](const json* s) {
                            return s->contains("additionalProperties") && (*s)["additionalProperties"] != json(false);
                        }))
                    {
                        return false;
                    }
                    // (a required name that properties do not list takes any value: no string)
                    std::vector<std::string> names = shape->names;
                    names.insert(names.end(), shape->required.begin(), shape->required.end());
                    bool some = false;  // (a name with a value: else {} alone, which runs out at once)
                    return std::all_of(names.begin(), names.end(), [&](const std::string& name) {
                        const conj c = member_schemas(parts.own, name);
                        if (!value_of(c))
                        {
                            return true;  // (left out of the grammar)
                        }
                        some = true;
                        std::vector<conj> values;
                        expand(conj{}, {{nullptr, c}}, values);
                        return std::binary_search(shape->required.begin(), shape->required.end(), name) &&
                               std::all_of(values.begin(), values.end(), [&](const conj& v) {
                                   const disjunct_parts p = parts_of(v);
                                   if (p.values_at != nullptr || p.types != t_string)
                                   {
                                       return false;
                                   }
                                   const auto content = string_content(p.own, true);
                                   return !content || (content->dfa && endless_everywhere(*content->dfa));
                               });
                    }) && some;
                });
            }
            /// Whether every state of d has endless completions (reaches a cycle).
            static bool endless_everywhere(const byte_dfa& d)
            {
                std::vector<std::vector<std::int32_t>> before(d.size());
                std::vector<std::size_t> after(d.size(), 0);  // distinct next states not yet known to end
                for (std::size_t q = 0; q < d.size(); ++q)
                {
                    std::vector<std::int32_t> next;
                    for (unsigned b = 0; b < 256; ++b)
                    {
                        const std::int32_t t = d.next(std::int32_t(q), static_cast<unsigned char>(b));
                        if (t != byte_dfa::dead && std::find(next.begin(), next.end(), t) == next.end())
                        {
                            next.push_back(t);
                            before[std::size_t(t)].push_back(std::int32_t(q));
                        }
                    }
                    after[q] = next.size();
                }
                std::vector<std::int32_t> finite;  // (states whose every way ends: peeled from the last)
                for (std::size_t q = 0; q < d.size(); ++q)
                {
                    if (after[q] == 0)
                    {
                        finite.push_back(std::int32_t(q));
                    }
                }
                for (std::size_t i = 0; i < finite.size(); ++i)
                {
                    for (const std::int32_t p : before[std::size_t(finite[i])])
                    {
                        if (--after[std::size_t(p)] == 0)
                        {
                            finite.push_back(p);
                        }
                    }
                }
                return finite.empty();
            }
            /// Whether some disjunct of c takes endless values (proven: any
            /// value; strings the string keywords count past enough_values;
            /// numbers under no numeric keyword; arrays of any length of
            /// items that have a value, endless ones where they are
            /// distinct; renewing objects that have one).
            bool endless(const conj& c, unsigned depth)
            {
                if (depth > max_endless_depth)
                {
                    return false;
                }
                std::vector<conj> ds;
                expand(conj{}, {{nullptr, c}}, ds);
                return std::any_of(ds.begin(), ds.end(), [&](const conj& d) {
                    const disjunct_parts parts = parts_of(d);  // (no structured binding: lambdas below read own)
                    const conj& own = parts.own;
                    const unsigned types = parts.types;
                    const json* values_at = parts.values_at;
                    if (values_at != nullptr)
                    {
                        return false;
                    }
                    if (own.empty())
                    {
                        return true;
                    }
                    const auto any_has = [&](std::initializer_list<const char*> keys) { return any_keyword(own, keys); };
                    if (types & t_string)
                    {
                        const auto content = string_content(own, false);
                        if (content && strings_in(*content) >= enough_values)
                        {
                            return true;
                        }
                    }
                    if ((types & (t_integer | t_fraction)) && !any_keyword(own, numeric_keywords) && !any_has({"$xs:notIn"}))
                    {
                        return true;
                    }
                    // (distinct items: endless where they are)
                    if ((types & t_array) && !any_has({"maxItems", "contains", "prefixItems", "$xs:notIn"}))
                    {
                        conj items;
                        for (const json* s : own)
                        {
                            if (s->contains("items"))
                            {
                                if (!(*s)["items"].is_object() && !(*s)["items"].is_boolean())
                                {
                                    return false;
                                }
                                items.push_back(&(*s)["items"]);
                            }
                        }
                        if (value_of(items) && (!any_has({"uniqueItems"}) || endless(items, depth + 1)))
                        {
                            return true;
                        }
                    }
                    return (types & t_object) && renewing_one(d, depth + 1, true);
                });
            }

            /// (numbers under none of these: the builder's, of up to 15 integer digits; a bound or a
            /// multiple is number_dfa's, at most 15 digits: maybe few values, or none)
            static constexpr std::array<const char*, 11> numeric_keywords = {
                "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "multipleOf", "$xs:gt", "$xs:ge",
                "$xs:lt", "$xs:le", "$xs:notMultipleOf", "$xs:types"};
            template <class Keys>
            static bool any_keyword(const conj& own, const Keys& keys)
            {
                return std::any_of(own.begin(), own.end(), [&](const json* s) {
                    return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return s->contains(k); });
                });
            }
            /// Whether d is integers under no numeric keyword, some values
            /// excluded at most (a not's enum): written without a fraction or
            /// an exponent, up to 15 digits, so from a prefix of up to 5
            /// digits more than enough_values complete it, and past that the
            /// matcher's check B searches (matcher.hpp); every byte that
            /// leads there is a digit, one that may end an item. (Numbers
            /// with a fraction may enter an exponent, of few values, by a
            /// byte that ends none: not yet.)
            bool many_integers(const conj& d) const
            {
                const disjunct_parts parts = parts_of(d);
                return parts.values_at == nullptr && !parts.own.empty() && parts.types == t_integer &&
                       !any_keyword(parts.own, numeric_keywords);
            }

            /// A count of values that is as good as endless: a text of 2^32
            /// bytes is past what a matcher reads.
            static constexpr std::uint64_t enough_values = std::uint64_t(1) << 32;
            /// Enum strings alone past this many are marked (string_values): slots would keep the list order.
            static constexpr std::uint64_t max_enum_slots = 10;
            /// Whether every disjunct is strings alone (a string type with its
            /// bounds, pattern and format, or an enum of strings), one at least
            /// a string type or an enum of more than max_enum_slots; then how
            /// many strings one of them has (capped at enough_values; an
            /// enum's, those that are items) and whether that is all of them
            /// (one disjunct).
            std::optional<std::pair<std::uint64_t, bool>> string_values(const conj& items, const std::vector<conj>& ds)
            {
                if (ds.empty())
                {
                    return std::nullopt;
                }
                std::uint64_t most = 0;
                bool open = false;
                for (const conj& d : ds)
                {
                    const auto [own, types, values_at] = parts_of(d);
                    if (values_at != nullptr)
                    {
                        const auto vs = finite_values(values_at);
                        if (!vs || !std::all_of(vs->begin(), vs->end(), [](const json& v) { return v.is_string(); }))
                        {
                            return std::nullopt;
                        }
                        std::set<std::string> listed;  // (those that are items)
                        for (const json& v : *vs)
                        {
                            if (std::all_of(items.begin(), items.end(), [&](const json* s) { return validates(v, s); }))
                            {
                                listed.insert(v.get<std::string>());
                            }
                        }
                        most = std::max<std::uint64_t>(most, listed.size());
                        continue;
                    }
                    if (own.empty() || types != t_string)
                    {
                        return std::nullopt;
                    }
                    const auto content = string_content(own, false);
                    most = std::max(most, content ? strings_in(*content) : 0);
                    open = true;
                }
                if (!open && most <= max_enum_slots)
                {
                    return std::nullopt;  // (a few enum strings alone: distinct_items' slots, a rule per set used)
                }
                return std::make_pair(most, ds.size() == 1);
            }
            /// How many strings bounds b holds, capped at enough_values.
            static std::uint64_t strings_in(const string_bounds& b)
            {
                const auto add = [](std::uint64_t x, std::uint64_t y) { return std::min(enough_values, x + y); };
                const auto times = [](std::uint64_t x, std::uint64_t y) {
                    return x != 0 && y > enough_values / x ? enough_values : std::min(enough_values, x * y);
                };
                if (b.dfa)
                {
                    // accepted texts by state, the states after a state first (a cycle: endless)
                    const byte_dfa& d = *b.dfa;
                    const auto [class_of, k] = d.byte_classes();
                    std::vector<std::uint64_t> width(k, 0);
                    std::vector<unsigned char> first(k, 0);
                    for (unsigned c = 256; c-- > 0;)
                    {
                        ++width[class_of[c]];
                        first[class_of[c]] = static_cast<unsigned char>(c);
                    }
                    std::vector<std::uint64_t> count(d.size(), 0);
                    std::vector<std::uint8_t> mark(d.size(), 0);  // 1: on the path, 2: counted
                    std::vector<std::pair<std::int32_t, std::size_t>> path{{d.start(), 0}};
                    mark[std::size_t(d.start())] = 1;
                    while (!path.empty())
                    {
                        auto& [q, c] = path.back();
                        if (c == k)
                        {
                            std::uint64_t n = d.accepting(q) ? 1 : 0;
                            for (std::size_t j = 0; j < k; ++j)
                            {
                                const std::int32_t t = d.next(q, first[j]);
                                n = t == byte_dfa::dead ? n : add(n, times(width[j], count[std::size_t(t)]));
                            }
                            count[std::size_t(q)] = n;
                            mark[std::size_t(q)] = 2;
                            path.pop_back();
                            continue;
                        }
                        const std::int32_t t = d.next(q, first[c++]);
                        if (t == byte_dfa::dead || mark[std::size_t(t)] == 2)
                        {
                            continue;
                        }
                        if (mark[std::size_t(t)] == 1)
                        {
                            return enough_values;  // (every state reaches an accepting one)
                        }
                        mark[std::size_t(t)] = 1;
                        path.emplace_back(t, 0);
                    }
                    return count[std::size_t(d.start())];
                }
                const auto size = [](const byte_set& c) {
                    std::uint64_t n = 0;
                    for (unsigned b = 0; b < 256; ++b)
                    {
                        n += c.contains(static_cast<unsigned char>(b)) ? 1 : 0;
                    }
                    return n;
                };
                std::uint64_t chars = 1112064;  // (Unicode's scalar values)
                if (b.chars)
                {
                    chars = size(*b.chars);
                }
                if (!b.prefix.empty())
                {
                    // (the prefix's texts, each followed by the class's of min - k to max - k)
                    std::uint64_t first = 1;
                    for (const byte_set& c : b.prefix)
                    {
                        first = times(first, size(c));
                    }
                    const std::size_t k = b.prefix.size();
                    return times(first, strings_in(string_bounds{b.min - k, b.max == grammar::unbounded ? b.max : b.max - k,
                                                                 std::nullopt, b.chars, {}, {}}));
                }
                if (chars <= 1)
                {
                    return b.min > 0 && chars == 0 ? 0 : chars == 0 ? 1 : std::min<std::uint64_t>(enough_values, b.max - b.min) + 1;
                }
                std::uint64_t n = 0, power = 1;  // power: chars^length
                for (std::size_t length = 0; length <= b.max && n < enough_values; ++length)
                {
                    n = length >= b.min ? add(n, power) : n;
                    power = times(power, chars);
                }
                return n;
            }

            /// A patternProperties entry: the regex, its schema, and the schema it is in.
            struct key_pattern
            {
                std::string regex;
                const json* value;
                const json* in;
            };

            /// Objects: the listed keys in the schemas' order (properties, then
            /// required), each with every schema that applies to it (its
            /// property, the patterns it matches, else additionalProperties);
            /// beside them keys by the patterns they match and miss (one class
            /// of keys per combination that some key has), and the keys no
            /// pattern matches where additionalProperties allows them, unless
            /// options.additional_properties is off (and nothing else is
            /// listed).
            std::optional<expr_id> object(const conj& own)
            {
                std::vector<std::string> names;  // the properties, in order of first appearance
                std::vector<std::string> required;
                std::vector<key_pattern> patterns;
                bool closed = false;
                std::size_t min = 0, max = grammar::unbounded;  // minProperties, maxProperties
                std::vector<const json*> somes;  // made "$xs:some"s: a member of a kind each (negation_of)
                std::optional<byte_dfa> keys_allowed;  // propertyNames: the keys' contents allowed (none: all)
                std::string keys_tag;  // (their schemas, for other_key's cache)
                for (const json* s : own)
                {
                    if (made(s) && s->contains("$xs:some"))
                    {
                        if (somes.size() == max_kinds)
                        {
                            fail("unsupported keyword 'additionalProperties' or 'patternProperties' under not, more than " +
                                 std::to_string(max_kinds) + " times in one conjunction", s);
                        }
                        somes.push_back(s);
                    }
                    min = std::max(min, count(s, "minProperties", 0));
                    max = std::min(max, count(s, "maxProperties", grammar::unbounded));
                    if (has(s, "propertyNames"))
                    {
                        const auto k = key_names(&(*s)["propertyNames"]);
                        if (k)
                        {
                            keys_allowed = keys_allowed ? dfa_intersection(*keys_allowed, *k, max_key_states) : *k;
                            keys_tag += "n" + std::to_string(m_doc.order(&(*s)["propertyNames"]));
                        }
                    }
                    for (const char* k : {"unevaluatedProperties"})
                    {
                        if (has(s, k) && !((*s)[k].is_object() && (*s)[k].empty()))
                        {
                            unsupported(k, s);
                        }
                    }
                    if (s->contains("patternProperties"))
                    {
                        if (!(*s)["patternProperties"].is_object())
                        {
                            fail("patternProperties must be an object", s);
                        }
                        for (const auto& kv : (*s)["patternProperties"].items())
                        {
                            patterns.push_back({kv.key(), &kv.value(), s});
                        }
                    }
                    if (s->contains("additionalProperties"))
                    {
                        const auto& a = (*s)["additionalProperties"];
                        if (!a.is_boolean() && !a.is_object())
                        {
                            fail("additionalProperties must be a boolean or a schema", s);
                        }
                        closed = closed || (a.is_boolean() && !a.get<bool>());
                    }
                    if (s->contains("properties"))
                    {
                        if (!(*s)["properties"].is_object())
                        {
                            fail("properties must be an object", s);
                        }
                        for (const auto& kv : (*s)["properties"].items())
                        {
                            if (std::find(names.begin(), names.end(), kv.key()) == names.end())
                            {
                                names.push_back(kv.key());
                            }
                        }
                    }
                    if (s->contains("required"))
                    {
                        const auto& r = (*s)["required"];
                        if (!r.is_array())
                        {
                            fail("required must be a list of names", s);
                        }
                        for (const auto& x : r)
                        {
                            if (!x.is_string())
                            {
                                fail("required must be a list of names", s);
                            }
                            if (std::find(required.begin(), required.end(), x.get<std::string>()) == required.end())
                            {
                                required.push_back(x.get<std::string>());
                            }
                        }
                    }
                }
                // the schemas of a key: in each schema its property and the patterns it matches, else its
                // additionalProperties (a listed name's patterns by matching it; other keys' by their class)
                const auto schemas_of = [&](const std::string* name, const std::vector<bool>& matched) {
                    conj c;
                    for (const json* s : own)
                    {
                        bool any = false;
                        if (name != nullptr && s->contains("properties") && (*s)["properties"].contains(*name))
                        {
                            c.push_back(&(*s)["properties"][*name]);
                            any = true;
                        }
                        for (std::size_t i = 0; i < patterns.size(); ++i)
                        {
                            if (patterns[i].in == s && matched[i] && patterns[i].value != nullptr)
                            {
                                c.push_back(patterns[i].value);
                                any = true;
                            }
                        }
                        if (!any && s->contains("additionalProperties"))
                        {
                            c.push_back(&(*s)["additionalProperties"]);
                        }
                    }
                    return c;
                };
                const auto matches_of = [&](const std::string& name) {
                    std::vector<bool> matched;
                    for (const auto& p : patterns)
                    {
                        matched.push_back(matches_pattern(json(name), json(p.regex), p.in));
                    }
                    return matched;
                };
                for (const auto& r : required)
                {
                    if (std::find(names.begin(), names.end(), r) == names.end())
                    {
                        names.push_back(r);
                    }
                }
                // the members of a kind: a key a pattern matches, or one another schema's (s0's) properties and
                // patterns miss (its patterns split the keys as markers, without schemas)
                const bool unmatched = !closed && (m_o.additional_properties || (names.empty() && patterns.empty()));
                struct kind_of
                {
                    const json* some;
                    std::size_t first, last;  // its markers in patterns
                    std::vector<std::string> names;  // s0's properties: no member of the kind
                    std::optional<byte_dfa> outside;  // (not propertyNames) the keys it does not allow
                };
                std::vector<kind_of> kinds;
                const std::size_t real_patterns = patterns.size();  // (the markers after them)
                for (const json* m : somes)
                {
                    const json& some = (*m)["$xs:some"];
                    const json* s0 = m_refs.at(some["of"].get<std::size_t>()).first;
                    kind_of k{&some, patterns.size(), patterns.size(), {}, std::nullopt};
                    if (some.contains("names"))
                    {
                        const auto allowed = key_names(m_refs.at(some["names"].get<std::size_t>()).first, true);
                        k.outside = allowed ? dfa_difference(content_dfa(), *allowed, max_key_states) : byte_dfa{};
                    }
                    else if (some.contains("pattern"))
                    {
                        patterns.push_back({some["pattern"].get<std::string>(), nullptr, m});
                    }
                    else
                    {
                        const json listed = s0->contains("properties") ? (*s0)["properties"] : json::object();
                        const json matched = s0->contains("patternProperties") ? (*s0)["patternProperties"] : json::object();
                        for (const auto& kv : matched.items())
                        {
                            patterns.push_back({kv.key(), nullptr, m});
                        }
                        for (const auto& kv : listed.items())
                        {
                            k.names.push_back(kv.key());
                        }
                    }
                    k.last = patterns.size();
                    kinds.push_back(std::move(k));
                }
                const auto of_kind = [&](const kind_of& k, const std::string* name, const std::vector<bool>& matched) {
                    const bool marked = std::find(matched.begin() + std::ptrdiff_t(k.first), matched.begin() + std::ptrdiff_t(k.last), true) !=
                                        matched.begin() + std::ptrdiff_t(k.last);
                    if (k.outside)
                    {
                        return name == nullptr ? k.outside->size() != 0 : k.outside->matches(*name);
                    }
                    if (k.some->contains("pattern"))
                    {
                        return marked;
                    }
                    return !marked && (name == nullptr || std::find(k.names.begin(), k.names.end(), *name) == k.names.end());
                };
                // the kinds a key may be, as a mask
                const auto kinds_of = [&](const std::string* name, const std::vector<bool>& matched) {
                    unsigned mask = 0;
                    for (std::size_t r = 0; r < kinds.size(); ++r)
                    {
                        mask |= of_kind(kinds[r], name, matched) ? 1u << r : 0u;
                    }
                    return mask;
                };
                // a kind's keys within a class of other keys
                const auto kind_keys = [&](const kind_of& k, const byte_dfa& keys) {
                    return k.outside ? dfa_intersection(keys, *k.outside, max_key_states) : keys;
                };
                // a member's values as a member of each set of the kinds it may be (a mask of them)
                const auto with_kinds = [&](conj c, unsigned mask) {
                    for (std::size_t r = 0; r < kinds.size(); ++r)
                    {
                        if (mask & (1u << r))
                        {
                            c.push_back(&(*kinds[r].some)["value"]);
                        }
                    }
                    return value_of(c);
                };
                const auto subsets = [](unsigned of, auto&& each) {
                    for (unsigned t = of; t != 0; t = (t - 1) & of)
                    {
                        each(t);
                    }
                };
                // a minProperties above the listed keys where other keys are a few (^[a-d]$ beside
                // additionalProperties false): those listed too, each then counted once
                auto classes = key_classes(patterns, keys_allowed ? *keys_allowed : content_dfa(), keys_tag);
                for (std::size_t i = 0; i < classes.size() && min > 1 && min > names.size(); ++i)
                {
                    const auto& matched = classes[i].second;
                    const auto end = matched.begin() + std::ptrdiff_t(real_patterns);
                    const auto texts = std::find(matched.begin(), end, true) != end || unmatched
                                           ? dfa_texts(classes[i].first, max_listed_keys) : std::nullopt;
                    for (const std::string& t : texts ? *texts : std::vector<std::string>{})
                    {
                        if (names.size() < max_listed_keys && std::find(names.begin(), names.end(), t) == names.end())
                        {
                            names.push_back(t);
                        }
                    }
                }
                std::vector<json_builder::member> members;
                for (const auto& name : names)
                {
                    const bool needed = std::find(required.begin(), required.end(), name) != required.end();
                    if (keys_allowed && !keys_allowed->matches(name))
                    {
                        if (needed)
                        {
                            return std::nullopt;  // propertyNames refuses a required key
                        }
                        continue;
                    }
                    const std::vector<bool> matched = matches_of(name);
                    for (const auto& p : patterns)
                    {
                        if (unicode_classes(p.regex) && std::any_of(name.begin(), name.end(), [](char ch) { return (ch & 0x80) != 0; }))
                        {
                            fail("patternProperties '" + p.regex + "' beside the property '" + name + "': a class escape or "
                                 "'.' on a key that is not ASCII (validators' Unicode classes differ)", p.in);
                        }
                    }
                    const conj c = schemas_of(&name, matched);
                    for (const json* s : own)
                    {
                        // (a schema that requires a key its own additionalProperties forbids: a clearer message)
                        if (s->contains("additionalProperties") && (*s)["additionalProperties"] == false &&
                            s->contains("required") && (*s)["required"].is_array() && std::find((*s)["required"].begin(), (*s)["required"].end(), json(name)) != (*s)["required"].end() &&
                            !lists(s, name))
                        {
                            fail("required '" + name + "' is not in properties and additionalProperties is false", s);
                        }
                    }
                    const auto v = value_of(c);
                    if (!v)
                    {
                        if (needed)
                        {
                            return std::nullopt;
                        }
                        continue;  // a key no value fits: left out
                    }
                    json_builder::member m{json(name).dump(), *v, needed};
                    subsets(kinds_of(&name, matched), [&](unsigned t) {
                        if (const auto value = with_kinds(c, t))
                        {
                            m.some.push_back({t, *value});
                        }
                    });
                    members.push_back(m);
                }
                // other keys: a class per combination of patterns matched; none matched where every schema's
                // additionalProperties allows them (and those of the kind, their keys none of s0's names)
                std::vector<std::pair<expr_id, expr_id>> others;
                std::vector<std::tuple<unsigned, expr_id, expr_id>> others_of_kind;
                // (whether every other key has endless completions from every prefix: counted where distinct)
                bool endless_keys = true;
                const auto endless = [&](const byte_dfa& keys) { endless_keys = endless_keys && (min <= 1 || endless_everywhere(keys)); };
                // other keys of the kinds in `mask` within a class of keys (their values c): the class's keys
                // that each kind allows, none of the names each kind excludes
                const auto add_of_kinds = [&](const byte_dfa& keys, const std::string& tag, const conj& c, unsigned applies) {
                    subsets(applies, [&](unsigned t) {
                        std::vector<std::string> excluded = names;
                        byte_dfa in = keys;
                        std::string kinds_tag = tag + "\1";  // (the kinds themselves: their keys differ)
                        for (std::size_t r = 0; r < kinds.size() && in.size() != 0; ++r)
                        {
                            if (t & (1u << r))
                            {
                                excluded.insert(excluded.end(), kinds[r].names.begin(), kinds[r].names.end());
                                in = kind_keys(kinds[r], in);
                                kinds_tag += std::to_string(m_doc.order(kinds[r].some)) + ",";
                            }
                        }
                        const auto v = in.size() != 0 ? with_kinds(c, t) : std::nullopt;
                        const expr_id key = v ? other_key(excluded, in, kinds_tag) : grammar::none;
                        if (key != grammar::none)
                        {
                            others_of_kind.push_back({t, key, *v});  // (none: no key left beside the names)
                            // (finitely many keys of kinds whose values are free: a key written as a plain
                            // member is read as one of those kinds too, so they run out only once seen)
                            bool free = true;
                            for (std::size_t r = 0; r < kinds.size(); ++r)
                            {
                                const json& value = (*kinds[r].some)["value"];
                                free = free && ((t >> r & 1u) == 0 || value == json(true) || value == json::object());
                            }
                            if (!free)
                            {
                                endless(in);
                            }
                        }
                    });
                };
                // (without patterns, names or propertyNames: any key, escapes too, the string's rule)
                const bool any_key = names.empty() && patterns.empty() && !keys_allowed;
                for (auto& [keys, matched] : classes)
                {
                    // (keys of a kind are written where the schemas allow them, without the option: asked for)
                    const auto end = matched.begin() + std::ptrdiff_t(real_patterns);
                    const bool listed = std::find(matched.begin(), end, true) != end || unmatched;
                    const conj c = schemas_of(nullptr, matched);
                    const auto v = listed ? value_of(c) : std::nullopt;  // (compiled only where written)
                    std::string tag = keys_tag;
                    for (std::size_t i = 0; i < patterns.size(); ++i)
                    {
                        tag += (matched[i] ? "+" : "-") + patterns[i].regex + '\0';
                    }
                    const expr_id key = !v ? grammar::none : any_key ? m_b.string(0, grammar::unbounded) : other_key(names, keys, tag);
                    if (key != grammar::none)
                    {
                        others.push_back({key, *v});
                        if (!any_key)
                        {
                            endless(keys);
                        }
                    }
                    add_of_kinds(keys, tag, c, kinds_of(nullptr, matched));
                }
                // how many members: the required ones at least, the listed ones at most without others
                const std::size_t needed = std::size_t(std::count_if(members.begin(), members.end(), [](const auto& m) { return m.required; }));
                if (min > max || needed > max || (others.empty() && min > members.size()))
                {
                    return std::nullopt;
                }
                // (past the required members, a minimum above 1 counts the other keys too, each a new one)
                const bool distinct = min > needed && min > 1 && (!others.empty() || !others_of_kind.empty());
                if (distinct && !endless_keys)
                {
                    fail("minProperties " + std::to_string(min) + " beside keys the schema does not list, some of "
                         "them finitely many (a key written twice is one key: only new ones count)", own.front());
                }
                if (any_key && others.size() == 1 && min == 0 && max == grammar::unbounded && kinds.empty())
                {
                    return m_b.free_object(others[0].first, others[0].second);
                }
                // whether no key is both of the kinds in t and of those in u (known where a kind is the keys
                // a not of propertyNames allows or a pattern matches, within propertyNames: their automata)
                std::vector<std::optional<byte_dfa>> kind_keys_of(kinds.size());
                for (std::size_t r = 0; r < kinds.size(); ++r)
                {
                    if (kinds[r].outside)
                    {
                        kind_keys_of[r] = *kinds[r].outside;
                    }
                    else if (kinds[r].some->contains("pattern"))
                    {
                        kind_keys_of[r] = search_dfa(patterns[kinds[r].first].regex, patterns[kinds[r].first].in);
                    }
                    if (kind_keys_of[r] && keys_allowed)
                    {
                        kind_keys_of[r] = dfa_intersection(*kind_keys_of[r], *keys_allowed, max_key_states);
                    }
                }
                std::map<std::pair<unsigned, unsigned>, bool> apart_known;
                const auto kinds_apart = [&](unsigned t, unsigned u) {
                    const auto [it, added] = apart_known.emplace(std::make_pair(std::min(t, u), std::max(t, u)), false);
                    if (added)
                    {
                        std::optional<byte_dfa> both;
                        for (std::size_t r = 0; r < kinds.size(); ++r)
                        {
                            if (((t | u) >> r & 1u) != 0 && kind_keys_of[r])
                            {
                                both = both ? dfa_intersection(*both, *kind_keys_of[r], max_key_states) : *kind_keys_of[r];
                            }
                        }
                        it->second = both && both->size() == 0;
                    }
                    return it->second;
                };
                // keys in any order where nothing is counted but the members written (a minimum the required
                // ones meet, or of 1): the members of a kind are in the listed order
                const std::size_t at_least = needed >= min ? 0 : min;
                const expr_id e = kinds.empty() && at_least <= 1 ? m_b.object_any_order(members, others, at_least, max)
                                                                 : m_b.object(members, others, min, max, kinds.size(), others_of_kind,
                                                                              kinds_apart, distinct);
                return e == grammar::none ? std::nullopt : std::optional<expr_id>(e);
            }

            /// propertyNames: the key contents (unescaped) the schema accepts as
            /// strings; none when it accepts every key. A union over its
            /// disjuncts: enum/const strings, or the string keywords' DFA.
            std::optional<byte_dfa> key_names(const json* p, bool negated = false)
            {
                if (p->is_boolean())
                {
                    return p->get<bool>() ? std::nullopt : std::optional<byte_dfa>(byte_dfa{});
                }
                std::vector<conj> ds;
                expand(conj{}, {{nullptr, {p}}}, ds);
                std::optional<byte_dfa> all;
                for (const conj& d : ds)
                {
                    const auto [own, types, values_at] = parts_of(d);
                    if ((types & t_string) == 0)
                    {
                        continue;
                    }
                    for (const json* s : own)
                    {
                        // (its complement: our formats are subsets of the checkers; Unicode classes differ)
                        if (negated && (format_of(s) != nullptr ||
                                        (s->contains("pattern") && (*s)["pattern"].is_string() && unicode_classes((*s)["pattern"].get<std::string>()))))
                        {
                            fail("unsupported keyword 'propertyNames' under not (a format, or a pattern with a class escape "
                                 "or '.')", s);
                        }
                    }
                    byte_dfa part;
                    if (values_at != nullptr)
                    {
                        std::vector<std::string> texts;
                        const auto values = finite_values(values_at);
                        if (!values)
                        {
                            fail("enum must be a list", values_at);
                        }
                        for (const json& v : *values)
                        {
                            if (v.is_string() && std::all_of(own.begin(), own.end(), [&](const json* s) { return validates(v, s); }))
                            {
                                texts.push_back(v.get<std::string>());
                            }
                        }
                        part = dfa_intersection(dfa_of_texts(texts), content_dfa(), max_key_states);
                    }
                    else if (const auto b = string_content(own, true))
                    {
                        part = std::move(*b->dfa);
                    }
                    if (part.size() == 0)
                    {
                        continue;
                    }
                    try
                    {
                        // A or B: all but (all but A, but B)
                        all = all ? dfa_difference(content_dfa(), dfa_difference(dfa_difference(content_dfa(), *all, max_key_states), part,
                                                                               max_key_states), max_key_states)
                                  : std::move(part);
                    }
                    catch (const invalid_parameter& e)
                    {
                        fail(std::string("propertyNames: ") + e.what(), p);
                    }
                }
                return all ? all : std::optional<byte_dfa>(byte_dfa{});
            }

            /// The keys' contents split by the patterns they match: each class
            /// non-empty, with which patterns it matches.
            /// (all: the keys propertyNames allows, which `tag` names; the classes
            /// kept per tag and patterns, as an object's conjunctions share them)
            std::vector<std::pair<byte_dfa, std::vector<bool>>> key_classes(const std::vector<key_pattern>& patterns, const byte_dfa& all,
                                                                             const std::string& tag)
            {
                if (patterns.size() > max_patterns)
                {
                    fail("patternProperties: more than " + std::to_string(max_patterns) + " patterns on one object",
                         patterns.back().in);
                }
                std::vector<std::string> key{tag};
                for (const auto& p : patterns)
                {
                    key.push_back(p.regex);
                }
                const auto found = m_key_classes.find(key);
                if (found != m_key_classes.end())
                {
                    return found->second;
                }
                std::vector<std::pair<byte_dfa, std::vector<bool>>> classes;
                byte_dfa start = all;
                if (std::any_of(patterns.begin(), patterns.end(), [](const key_pattern& p) { return unicode_classes(p.regex); }))
                {
                    // (a key of other characters may match here and not in validators, or the other way)
                    start = dfa_intersection(start, compile_regex("[\\x20-\\x7e]*", content_options(false)), max_key_states);
                }
                if (start.size() != 0)
                {
                    classes.push_back({std::move(start), {}});
                }
                for (const auto& p : patterns)
                {
                    std::vector<std::pair<byte_dfa, std::vector<bool>>> split;
                    const byte_dfa& match = search_dfa(p.regex, p.in);
                    try
                    {
                        for (auto& [keys, matched] : classes)
                        {
                            for (const bool in : {true, false})
                            {
                                byte_dfa part = in ? dfa_intersection(keys, match, max_key_states)
                                                   : dfa_difference(keys, match, max_key_states);
                                if (part.size() != 0)
                                {
                                    auto m = matched;
                                    m.push_back(in);
                                    split.push_back({std::move(part), std::move(m)});
                                }
                            }
                        }
                    }
                    catch (const invalid_parameter& e)
                    {
                        fail("patternProperties '" + p.regex + "': " + e.what(), p.in);
                    }
                    classes = std::move(split);
                }
                return m_key_classes.emplace(std::move(key), std::move(classes)).first->second;
            }

            /// A key, quotes included, that is none of the names (grammar::none when there is none) (its content
            /// unescaped: another spelling of a name is refused too); one
            /// lexeme per set of names, built from their trie beside the
            /// content's automaton.
            expr_id other_key(std::vector<std::string> names, const byte_dfa& content, const std::string& tag)
            {
                std::sort(names.begin(), names.end());
                auto found = m_other_keys.find({names, tag});
                if (found != m_other_keys.end())
                {
                    return found->second;
                }
                std::map<std::pair<std::int64_t, unsigned char>, std::int64_t> child;
                std::vector<bool> is_name(1, false);
                for (const auto& n : names)
                {
                    std::int64_t at = 0;
                    for (const char c : n)
                    {
                        auto it = child.emplace(std::make_pair(at, static_cast<unsigned char>(c)), std::int64_t(is_name.size())).first;
                        if (it->second == std::int64_t(is_name.size()))
                        {
                            is_name.push_back(false);
                        }
                        at = it->second;
                    }
                    is_name[std::size_t(at)] = true;
                }
                // a state: (trie node, or -1 once off the trie) * 2^32 + the content's state; start and end apart
                constexpr std::int64_t start = -1, end = -2;
                const auto step = [&](std::int64_t k, char ch) -> std::optional<std::int64_t> {
                    const auto b = static_cast<unsigned char>(ch);
                    if (k == start)
                    {
                        return b == '"' ? std::optional<std::int64_t>(std::int64_t(1) << 32 | content.start()) : std::nullopt;
                    }
                    if (k == end)
                    {
                        return std::nullopt;
                    }
                    const std::int64_t node = (k >> 32) - 1;  // -1: off the trie
                    const auto state = std::int32_t(k & 0xffffffff);
                    if (b == '"')
                    {
                        return content.accepting(state) && (node < 0 || !is_name[std::size_t(node)])
                                   ? std::optional<std::int64_t>(end)
                                   : std::nullopt;
                    }
                    const std::int32_t next = content.next(state, b);
                    if (next == byte_dfa::dead)
                    {
                        return std::nullopt;
                    }
                    const auto it = node < 0 ? child.end() : child.find({node, b});
                    return (it == child.end() ? 0 : (it->second + 1) << 32) | next;
                };
                std::string bytes;
                for (int b = 0; b < 256; ++b)
                {
                    bytes.push_back(static_cast<char>(b));
                }
                byte_dfa key = automaton_of(start, bytes, step, [&](std::int64_t k) { return k == end; },
                                            std::size_t(1) << 20);
                const expr_id e = key.size() == 0 ? grammar::none : m_g.lexeme(std::move(key));  // (none: every key is a name)
                return m_other_keys.emplace(std::make_pair(std::move(names), tag), e).first->second;
            }

            // ---- oneOf: branches that no value satisfies twice ----

            /// What a schema alone says of a value: its types, and its values when finite.
            struct summary
            {
                unsigned types = t_all;
                std::optional<std::vector<json>> values;
                std::vector<std::string> required;
                std::map<std::string, std::optional<std::vector<json>>> property_values;  // of the listed ones
                std::map<std::string, unsigned> property_types;                           // (absent: any)
                std::map<std::string, std::vector<std::string>> property_patterns;        // all apply to its strings
                bool closed = false;
                bool empty_fails = false;  // {} fails it (proven)
                std::set<std::string> listed;
            };

            std::vector<summary> summaries(const json* branch)
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
            std::optional<std::vector<json>> finite_values(const json* s)
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

            /// JSON Schema's equality: objects whatever their keys' order, 1 == 1.0.
            static bool same(const json& a, const json& b) { return nlohmann::json(a) == nlohmann::json(b); }
            /// Equality that also takes true for 1 and false for 0, anywhere in
            /// the values (python3-jsonschema's enum inside arrays and objects):
            /// what a not excludes, so that both readings agree on every output.
            static bool loosely_same(const json& a, const json& b)
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

            static bool overlap(const std::vector<json>& a, const std::vector<json>& b)
            {
                return std::any_of(a.begin(), a.end(), [&](const json& v) {
                    return std::any_of(b.begin(), b.end(), [&](const json& w) { return same(v, w); });
                });
            }

            /// The types of the listed values.
            unsigned types_of(const std::vector<json>& values) const
            {
                unsigned of = 0;
                for (const json& v : values)
                {
                    of |= type_of(v);
                }
                return of;
            }

            /// The types of the values a and b may both accept (0: none, proven).
            unsigned shared(const summary& a, const summary& b)
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
            bool separated(const summary& a, const summary& b)
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
            bool values_apart(const summary& a, const summary& b, const std::string& r)
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
            bool fails_empty_object(const json* s)
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
            bool patterns_apart(const std::string& x, const std::string& y)
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

            /// For a oneOf, per pair of branches the types of the values both
            /// may accept, and whether the objects both accept are {} alone
            /// (closed properties with no name in common).
            struct pairs
            {
                std::vector<std::vector<unsigned>> types;
                std::vector<std::vector<bool>> empty_only;
            };

            const pairs& overlaps(const json* s)
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
            const std::vector<const json*>& conditions_of(const json* s)
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

            /// A dependency: its key, and the names it requires or the schema it brings.
            struct dependency
            {
                std::string key;
                const json* value;
                bool names;  // value: a list of names (else a schema)
                const char* keyword;
            };

            /// dependencies (names or a schema per key), dependentRequired, dependentSchemas.
            std::vector<dependency> dependencies_of(const json* s) const
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
            const json* exclusive_branches(const json* s)
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

            // ---- a value against a schema (enum and const candidates) ----

            bool validates(const json& v, const json* s, int depth = 0)
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
            bool matches_pattern(const json& v, const json& pattern, const json* s, regex_reading reading = regex_reading::ecmascript)
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
            const byte_dfa& search_automaton(const std::string& p, regex_reading reading)
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
            bool lists(const json* s, const std::string& key)
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
            static std::optional<decimal> exact_value(const json& v)
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
            decimal value_of_number(const json& v, const json* s) const
            {
                const auto d = exact_value(v);
                if (!d)
                {
                    fail("enum/const value " + v.dump() + " is out of range", s);
                }
                return *d;
            }

            /// A made schema's "$xs:" keywords (see negation_of) on a value.
            bool validates_made(const json& v, const json* s, int depth)
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

            bool validates_typed(const json& v, const std::string& k, const json* s, int depth)
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

            static constexpr std::size_t max_rules = 100000, max_disjuncts = 1024, max_product = 5000;
            /// A pattern's texts of a length bound (dfa_code_points): one lexeme, larger than other products
            /// (winget's package identifiers: 5,453 states; a counter beside the DFA is the plan past it).
            static constexpr std::size_t max_length_product = 12000, max_length_states = 30000;
            static constexpr std::size_t max_unit_entries = std::size_t(1) << 23;  // counted lexemes' states x lengths, in all
            std::size_t m_unit_entries = 0;
            std::size_t m_length_states = 0;  // (string_content's so far)
            static constexpr std::size_t max_patterns = 16, max_key_states = 10000, max_kinds = 6, max_contains = 4;
            static constexpr std::size_t max_listed_keys = 64;  // other keys listed where a minProperties needs them

            grammar& m_g;
            schema_document& m_doc;
            json_builder m_b;
            json_options m_o;
            std::size_t m_depth = 0;
            std::map<std::vector<std::size_t>, std::pair<rule_id, int>> m_rules;  // 0 compiling, 1 done, 2 nothing
            std::map<const json*, std::vector<const json*>> m_lists;
            std::map<const json*, pairs> m_overlaps;  // overlaps()'s
            std::map<const json*, const json*> m_exclusive;  // exclusive_branches()'s
            std::map<std::pair<std::string, std::string>, bool> m_patterns_apart;
            std::map<const json*, std::vector<const json*>> m_conditions;  // conditions_of()'s
            std::map<const std::string*, byte_dfa> m_formats;  // format_dfa's
            std::map<std::pair<bool, std::string>, byte_dfa> m_patterns;  // pattern_dfa's
            std::map<std::pair<std::string, regex_reading>, byte_dfa> m_searches;  // matches_pattern's
            std::map<std::pair<std::vector<std::string>, std::string>, expr_id> m_other_keys;  // other_key()'s
            std::map<std::tuple<std::string, std::size_t, std::size_t>, expr_id> m_distinct_arrays;  // distinct_items()' slots
            std::map<std::tuple<std::size_t, bool, std::size_t, std::size_t, bool>, expr_id> m_marked_arrays;  // marked_array()'s
            std::map<std::string, byte_dfa> m_key_patterns;  // search_dfa()'s
            std::map<std::vector<std::string>, std::vector<std::pair<byte_dfa, std::vector<bool>>>> m_key_classes;  // key_classes()'s
            std::deque<json> m_made;                     // the compiler's own schemas (negation_of)
            std::set<const json*> m_made_nodes;          // every node of them
            std::map<const json*, facts> m_facts;        // facts_of's
            std::vector<std::pair<const json*, unsigned>> m_refs;  // "$xs:not" and "$xs:is" targets (a not's types)
            std::map<std::pair<const json*, unsigned>, const json*> m_negations;  // negation_of's, by schema and types
            std::map<const json*, const json*> m_negated;    // and back: the schema a whole negation is of
            byte_dfa m_content;  // a string's content, unescaped ([^]*)
            std::map<std::string, expr_id> m_numbers;  // number()'s lexemes by their bounds' key (none: no number)
            std::map<std::string, expr_id> m_spellings;  // constant()'s numbers, by spellings()
            std::map<std::vector<std::string>, std::optional<expr_id>> m_strings;  // string()'s
        };
    }

    /// The grammar of a schema (see the top of this file).
    namespace detail
    {
        /// Objects and arrays a schema may nest (its values are copied and
        /// compared recursively: a const of 100,000 nested arrays would overflow
        /// the stack).
        constexpr std::size_t max_schema_nesting = 1000;

        /// Refuses a JSON value nested deeper than max_schema_nesting, walked
        /// without recursion.
        template <class Json>
        void check_nesting(const Json& value)
        {
            std::vector<std::pair<const Json*, std::size_t>> todo{{&value, 1}};
            while (!todo.empty())
            {
                const auto [v, depth] = todo.back();
                todo.pop_back();
                if (!v->is_structured())
                {
                    continue;
                }
                if (depth > max_schema_nesting)
                {
                    throw invalid_parameter("json_schema: the schema nests objects and arrays deeper than " +
                                            std::to_string(max_schema_nesting));
                }
                for (const auto& child : *v)
                {
                    todo.push_back({&child, depth + 1});
                }
            }
        }
    }

    inline grammar json_schema_grammar(const nlohmann::ordered_json& schema, const json_options& options = {})
    {
        detail::check_nesting(schema);
        grammar g;
        detail::schema_document doc(schema);
        detail::schema_compiler c(g, doc, options);
        const auto root = g.rule("root");
        g.define(root, c.root());
        g.set_root(root);
        return g;
    }

    /// A nlohmann::json holds its keys sorted: properties are generated in that order.
    inline grammar json_schema_grammar(const nlohmann::json& schema, const json_options& options = {})
    {
        detail::check_nesting(schema);  // (before the copy)
        return json_schema_grammar(nlohmann::ordered_json(schema), options);
    }

    namespace detail
    {
        /// The first integer of a JSON text past 64 bits (nlohmann reads it as a double, which is
        /// another number): what the text says, for an error.
        class wide_integers : public nlohmann::json_sax<nlohmann::ordered_json>
        {
        public:
            std::string found;

            bool null() override { return true; }
            bool boolean(bool) override { return true; }
            bool number_integer(number_integer_t) override { return true; }
            bool number_unsigned(number_unsigned_t) override { return true; }
            bool number_float(number_float_t, const string_t& text) override
            {
                if (found.empty() && text.find_first_of(".eE") == string_t::npos)
                {
                    found = text;
                }
                return true;
            }
            bool string(string_t&) override { return true; }
            bool binary(binary_t&) override { return true; }
            bool start_object(std::size_t) override { return true; }
            bool key(string_t&) override { return true; }
            bool end_object() override { return true; }
            bool start_array(std::size_t) override { return true; }
            bool end_array() override { return true; }
            bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
        };
    }

    /// The schema's text: an integer past 64 bits is an error (nlohmann would
    /// read it as a double, another number: a const or enum of it would be
    /// generated as that double, which the schema refuses).
    inline grammar json_schema_grammar(const std::string& schema_text, const json_options& options = {})
    {
        nlohmann::ordered_json schema;
        try
        {
            schema = nlohmann::ordered_json::parse(schema_text);
        }
        catch (const nlohmann::ordered_json::exception& e)
        {
            throw invalid_parameter(std::string("json_schema: the schema is not JSON: ") + e.what());
        }
        detail::wide_integers wide;
        nlohmann::ordered_json::sax_parse(schema_text, &wide);
        if (!wide.found.empty())
        {
            throw invalid_parameter("json_schema: the integer " + wide.found.substr(0, 40) +
                                    " is past 64 bits (it would be read as a double, another number)");
        }
        return json_schema_grammar(schema, options);
    }

    template <class Schema>
    constraint json_schema_constraint(std::shared_ptr<const vocabulary_index> index, const Schema& schema,
                                      const json_options& options = {})
    {
        return grammar_constraint(std::move(index), json_schema_grammar(schema, options), "json_schema");
    }
}

#endif
