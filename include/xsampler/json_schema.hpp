// xsampler/json_schema.hpp — a JSON-schema subset as a constraint. (xsampler, BSD-3-Clause)
//
// json_schema_grammar(schema[, options]) compiles a JSON Schema (text or
// nlohmann::json; this header needs nlohmann-json, the rest of the library
// does not) into a grammar (grammar.hpp, json_grammar.hpp) whose texts are
// compact-or-lightly-spaced JSON values that validate against it;
// json_schema_constraint(index, schema[, options]) is its constraint:
//   type          "object", "array", "string", "number", "integer",
//                 "boolean", "null", or a list of them; without type, every
//                 type, each with the keywords that apply to it
//   properties    the keys an object may have, in the schema's order (as
//                 XGrammar, LLGuidance and llama.cpp generate them), each
//                 optional unless required; only these are generated
//                 (additionalProperties other than false is then unused:
//                 the texts are valid, a subset of the valid texts)
//   required      keys that must appear (a required key not in properties
//                 gets additionalProperties' value, or any value, after the
//                 listed ones)
//   additionalProperties  false: no key but the properties; a schema or
//                 true: without properties, any keys with such values
//   items         one schema for every item (not the list form)
//   minItems, maxItems, minLength, maxLength (code points), pattern (a
//                 regex.hpp regular expression matched anywhere in the
//                 string, as JSON Schema does; its characters are then
//                 unescaped; not together with minLength/maxLength)
//   enum, const   the value is one of these (with `type`, those of that type)
//   title, description, default, examples, $schema, $id, $comment: ignored
// Any other keyword is invalid_parameter naming it and where it is
// ("json_schema: unsupported keyword 'oneOf' at /properties/a"); so is a
// schema that nothing validates (false, an empty enum), an object nested
// deeper than options.max_depth, a bad value ("minItems must be a
// non-negative integer"). The compile costs the schema's size (regex DFAs
// for patterns): well under a millisecond for a demo-sized schema.
#ifndef XSAMPLER_JSON_SCHEMA_HPP
#define XSAMPLER_JSON_SCHEMA_HPP

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "constraint.hpp"
#include "json_grammar.hpp"

namespace xsampler
{
    namespace detail
    {
        class schema_compiler
        {
        public:
            using expr_id = grammar::expr_id;
            using json = nlohmann::ordered_json;  // properties keep the schema's order

            schema_compiler(grammar& g, const json_options& o) : m_g(g), m_b(g, o), m_max_depth(o.max_depth) {}

            expr_id compile(const json& s, const std::string& where, std::size_t depth)
            {
                if (s.is_boolean())
                {
                    if (!s.get<bool>())
                    {
                        fail("the schema false validates nothing", where);
                    }
                    return m_g.ref(m_b.any_value());
                }
                if (!s.is_object())
                {
                    fail("a schema must be an object or a boolean, got " + std::string(s.type_name()), where);
                }
                static const std::set<std::string> known = {
                    "type",     "properties", "required",  "additionalProperties", "items",   "enum",
                    "const",    "minItems",   "maxItems",  "minLength",            "maxLength", "pattern",
                    "title",    "description", "default",  "examples",             "$schema", "$id",
                    "$comment"};
                for (const auto& kv : s.items())
                {
                    if (known.count(kv.key()) == 0)
                    {
                        fail("unsupported keyword '" + kv.key() + "'", where);
                    }
                }
                if (s.contains("enum") || s.contains("const"))
                {
                    return values(s, where);
                }
                std::vector<std::string> types;
                if (s.contains("type"))
                {
                    const auto& t = s["type"];
                    if (t.is_string())
                    {
                        types.push_back(t.get<std::string>());
                    }
                    else if (t.is_array() && !t.empty())
                    {
                        for (const auto& x : t)
                        {
                            if (!x.is_string())
                            {
                                fail("type: a list of type names expected", where);
                            }
                            types.push_back(x.get<std::string>());
                        }
                    }
                    else
                    {
                        fail("type: a type name or a non-empty list of them expected", where);
                    }
                }
                else
                {
                    types = {"object", "array", "string", "number", "boolean", "null"};
                }
                std::sort(types.begin(), types.end());
                types.erase(std::unique(types.begin(), types.end()), types.end());
                const bool has_number = std::find(types.begin(), types.end(), "number") != types.end();
                std::vector<expr_id> options;
                for (const auto& t : types)
                {
                    // objects and arrays are rules: a node used in several places
                    // (additionalProperties serving several names) is compiled once
                    if (t == "object")
                    {
                        options.push_back(as_rule("object", object(s, where, depth)));
                    }
                    else if (t == "array")
                    {
                        options.push_back(as_rule("array", array(s, where, depth)));
                    }
                    else if (t == "string")
                    {
                        options.push_back(string(s, where));
                    }
                    else if (t == "number")
                    {
                        options.push_back(m_b.number());
                    }
                    else if (t == "integer")
                    {
                        if (!has_number)  // every integer is a number
                        {
                            options.push_back(m_b.integer());
                        }
                    }
                    else if (t == "boolean")
                    {
                        options.push_back(m_b.literal("true"));
                        options.push_back(m_b.literal("false"));
                    }
                    else if (t == "null")
                    {
                        options.push_back(m_b.literal("null"));
                    }
                    else
                    {
                        fail("unknown type '" + t + "'", where);
                    }
                }
                return m_g.choice(std::move(options));
            }

        private:
            [[noreturn]] static void fail(const std::string& what, const std::string& where)
            {
                throw invalid_parameter("json_schema: " + what + " at " + (where.empty() ? "/" : where));
            }

            expr_id as_rule(const char* hint, expr_id body)
            {
                const auto r = m_g.fresh_rule(hint);
                m_g.define(r, body);
                return m_g.ref(r);
            }

            void check_depth(std::size_t depth, const std::string& where) const
            {
                if (depth + 1 > m_max_depth)
                {
                    fail("objects and arrays nested deeper than " + std::to_string(m_max_depth), where);
                }
            }

            static std::size_t count(const json& s, const char* key, std::size_t otherwise,
                                     const std::string& where)
            {
                if (!s.contains(key))
                {
                    return otherwise;
                }
                const auto& v = s[key];
                if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0))
                {
                    fail(std::string(key) + " must be a non-negative integer, got " + v.dump(), where);
                }
                return v.get<std::size_t>();
            }

            static bool has_type(const json& v, const std::string& t)
            {
                if (t == "object") return v.is_object();
                if (t == "array") return v.is_array();
                if (t == "string") return v.is_string();
                if (t == "number") return v.is_number();
                if (t == "integer") return v.is_number_integer() || (v.is_number_float() && v.get<double>() == std::floor(v.get<double>()));
                if (t == "boolean") return v.is_boolean();
                if (t == "null") return v.is_null();
                return false;
            }

            expr_id values(const json& s, const std::string& where)
            {
                for (const auto& kv : s.items())
                {
                    const std::string& k = kv.key();
                    if (k != "enum" && k != "const" && k != "type" && k != "title" && k != "description" &&
                        k != "default" && k != "examples" && k != "$schema" && k != "$id" && k != "$comment")
                    {
                        fail("'" + k + "' together with enum or const is not supported", where);
                    }
                }
                std::vector<json> candidates;
                if (s.contains("const"))
                {
                    candidates.push_back(s["const"]);
                }
                if (s.contains("enum"))
                {
                    if (!s["enum"].is_array())
                    {
                        fail("enum must be a list", where);
                    }
                    for (const auto& v : s["enum"])
                    {
                        if (!s.contains("const") || v == s["const"])
                        {
                            candidates.push_back(v);
                        }
                    }
                    if (s.contains("const"))
                    {
                        candidates.erase(candidates.begin());  // const counts only if enum has it
                    }
                }
                std::vector<std::string> texts;
                for (const auto& v : candidates)
                {
                    bool typed = !s.contains("type");
                    if (!typed)
                    {
                        const auto& t = s["type"];
                        if (t.is_string())
                        {
                            typed = has_type(v, t.get<std::string>());
                        }
                        else if (t.is_array())
                        {
                            for (const auto& x : t)
                            {
                                typed = typed || (x.is_string() && has_type(v, x.get<std::string>()));
                            }
                        }
                    }
                    if (typed)
                    {
                        const std::string text = v.dump();
                        if (std::find(texts.begin(), texts.end(), text) == texts.end())
                        {
                            texts.push_back(text);
                        }
                    }
                }
                if (texts.empty())
                {
                    fail("enum/const: no value left (of the type given)", where);
                }
                std::vector<expr_id> options;
                for (const auto& t : texts)
                {
                    options.push_back(m_b.literal(t));
                }
                return m_g.choice(std::move(options));
            }

            expr_id object(const json& s, const std::string& where, std::size_t depth)
            {
                check_depth(depth, where);
                std::vector<std::string> required;
                if (s.contains("required"))
                {
                    if (!s["required"].is_array())
                    {
                        fail("required must be a list of names", where);
                    }
                    for (const auto& r : s["required"])
                    {
                        if (!r.is_string())
                        {
                            fail("required must be a list of names", where);
                        }
                        required.push_back(r.get<std::string>());
                    }
                }
                const bool closed = s.contains("additionalProperties") && s["additionalProperties"].is_boolean() &&
                                    !s["additionalProperties"].get<bool>();
                if (s.contains("additionalProperties") && !s["additionalProperties"].is_boolean() &&
                    !s["additionalProperties"].is_object())
                {
                    fail("additionalProperties must be a boolean or a schema", where);
                }
                std::vector<json_builder::member> members;
                if (s.contains("properties"))
                {
                    if (!s["properties"].is_object())
                    {
                        fail("properties must be an object", where);
                    }
                    for (const auto& kv : s["properties"].items())
                    {
                        json_builder::member m;
                        m.key = json(kv.key()).dump();
                        m.value = compile(kv.value(), where + "/properties/" + kv.key(), depth + 1);
                        m.required = std::find(required.begin(), required.end(), kv.key()) != required.end();
                        members.push_back(std::move(m));
                    }
                }
                // additionalProperties' value, compiled once for every key it serves
                expr_id extra = grammar::none;
                const auto additional = [&]() {
                    if (extra == grammar::none)
                    {
                        extra = s.contains("additionalProperties") && s["additionalProperties"].is_object()
                                    ? compile(s["additionalProperties"], where + "/additionalProperties", depth + 1)
                                    : m_g.ref(m_b.any_value());
                    }
                    return extra;
                };
                for (const auto& r : required)
                {
                    const std::string name = json(r).dump();
                    const bool listed = std::any_of(members.begin(), members.end(),
                                                    [&](const json_builder::member& m) { return m.key == name; });
                    if (!listed)
                    {
                        if (closed)
                        {
                            fail("required '" + r + "' is not in properties and additionalProperties is false", where);
                        }
                        members.push_back({name, additional(), true});
                    }
                }
                if (members.empty() && !closed)
                {
                    return m_b.free_object(m_b.string(0, grammar::unbounded), additional());
                }
                return m_b.object(members);
            }

            expr_id array(const json& s, const std::string& where, std::size_t depth)
            {
                check_depth(depth, where);
                const std::size_t min = count(s, "minItems", 0, where);
                const std::size_t max = count(s, "maxItems", grammar::unbounded, where);
                if (min > max)
                {
                    fail("minItems " + std::to_string(min) + " > maxItems " + std::to_string(max), where);
                }
                expr_id item;
                if (s.contains("items"))
                {
                    if (s["items"].is_array())
                    {
                        fail("items as a list (tuple validation) is not supported", where);
                    }
                    item = compile(s["items"], where + "/items", depth + 1);
                }
                else
                {
                    item = m_g.ref(m_b.any_value());
                }
                return m_b.array(item, min, max);
            }

            expr_id string(const json& s, const std::string& where)
            {
                const std::size_t min = count(s, "minLength", 0, where);
                const std::size_t max = count(s, "maxLength", grammar::unbounded, where);
                if (min > max)
                {
                    fail("minLength " + std::to_string(min) + " > maxLength " + std::to_string(max), where);
                }
                if (!s.contains("pattern"))
                {
                    return m_b.string(min, max);
                }
                if (!s["pattern"].is_string())
                {
                    fail("pattern must be a string", where);
                }
                if (s.contains("minLength") || s.contains("maxLength"))
                {
                    fail("pattern together with minLength or maxLength is not supported", where);
                }
                regex_options o;
                o.search = true;
                for (int b = 0; b < 0x20; ++b)
                {
                    o.forbidden[std::size_t(b)] = true;
                }
                o.forbidden['"'] = o.forbidden['\\'] = true;
                try
                {
                    return m_b.pattern_string(compile_regex(s["pattern"].get<std::string>(), o));
                }
                catch (const invalid_parameter& e)
                {
                    fail(std::string("pattern: ") + e.what(), where);
                }
            }

            grammar& m_g;
            json_builder m_b;
            std::size_t m_max_depth;
        };
    }

    /// The grammar of a schema (see the top of this file).
    inline grammar json_schema_grammar(const nlohmann::ordered_json& schema, const json_options& options = {})
    {
        grammar g;
        detail::schema_compiler c(g, options);
        const auto root = g.rule("root");
        g.define(root, c.compile(schema, "", 0));
        g.set_root(root);
        return g;
    }

    /// A nlohmann::json holds its keys sorted: properties are generated in that order.
    inline grammar json_schema_grammar(const nlohmann::json& schema, const json_options& options = {})
    {
        return json_schema_grammar(nlohmann::ordered_json(schema), options);
    }

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
