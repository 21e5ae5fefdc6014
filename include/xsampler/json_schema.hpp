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
#include <string_view>
#include <tuple>
#include <unordered_set>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>

#include "constraint.hpp"
#include "detail/json_numbers.hpp"
#include "detail/schema_document.hpp"
#include "json_grammar.hpp"
#include "detail/schema_compiler.hpp"
#include "detail/schema_conjunctions.hpp"
#include "detail/schema_negation.hpp"
#include "detail/schema_numbers.hpp"
#include "detail/schema_strings.hpp"
#include "detail/schema_arrays.hpp"
#include "detail/schema_objects.hpp"
#include "detail/schema_one_of.hpp"
#include "detail/schema_validation.hpp"

namespace xsampler
{

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
        /// What nlohmann reads silently as something else, found in a JSON text: the first
        /// integer past 64 bits (read as a double, another number), and with unique_keys the
        /// first key given twice in one object (the last kept).
        class inexact_json : public nlohmann::json_sax<nlohmann::ordered_json>
        {
        public:
            explicit inexact_json(bool unique_keys) : m_unique_keys(unique_keys) {}

            std::string wide;      ///< the integer's text, or ""
            std::string repeated;  ///< the key, or ""

            bool null() override { return true; }
            bool boolean(bool) override { return true; }
            bool number_integer(number_integer_t) override { return true; }
            bool number_unsigned(number_unsigned_t) override { return true; }
            bool number_float(number_float_t, const string_t& text) override
            {
                if (wide.empty() && text.find_first_of(".eE") == string_t::npos)
                {
                    wide = text;
                }
                return true;
            }
            bool string(string_t&) override { return true; }
            bool binary(binary_t&) override { return true; }
            bool start_object(std::size_t) override
            {
                if (m_unique_keys)
                {
                    m_open.emplace_back();
                }
                return true;
            }
            bool key(string_t& k) override
            {
                if (m_unique_keys && !m_open.back().insert(k).second)
                {
                    repeated = k;
                    return false;
                }
                return true;
            }
            bool end_object() override
            {
                if (m_unique_keys)
                {
                    m_open.pop_back();
                }
                return true;
            }
            bool start_array(std::size_t) override { return true; }
            bool end_array() override { return true; }
            bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

        private:
            bool m_unique_keys;
            std::vector<std::unordered_set<std::string>> m_open;  // the keys of each open object
        };

        /// A JSON text read exactly: one that is not JSON, an integer past 64 bits (nlohmann
        /// would read it as a double, another number), and with unique_keys a key given twice
        /// in one object, are errors "<who>: ...".
        inline nlohmann::ordered_json parse_exact_json(std::string_view text, const std::string& who,
                                                      const std::string& what, bool unique_keys = false)
        {
            nlohmann::ordered_json j;
            try
            {
                j = nlohmann::ordered_json::parse(text);
            }
            catch (const nlohmann::ordered_json::exception& e)
            {
                throw invalid_parameter(who + ": " + what + " is not JSON: " + e.what());
            }
            inexact_json found(unique_keys);
            nlohmann::ordered_json::sax_parse(text, &found);
            if (!found.wide.empty())
            {
                throw invalid_parameter(who + ": the integer " + found.wide.substr(0, 40) +
                                        " is past 64 bits (it would be read as a double, another number)");
            }
            if (!found.repeated.empty())
            {
                const std::string& k = found.repeated;
                throw invalid_parameter(who + ": '" + (k.size() > 40 ? k.substr(0, 37) + "..." : k) +
                                        "' is given twice in one object");
            }
            return j;
        }
    }

    /// The schema's text: an integer past 64 bits is an error (nlohmann would
    /// read it as a double, another number: a const or enum of it would be
    /// generated as that double, which the schema refuses).
    inline grammar json_schema_grammar(const std::string& schema_text, const json_options& options = {})
    {
        const auto schema = detail::parse_exact_json(schema_text, "json_schema", "the schema");
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
