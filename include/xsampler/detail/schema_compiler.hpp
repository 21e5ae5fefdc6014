// xsampler/detail/schema_compiler.hpp — the JSON Schema compiler's state, keywords and types. (xsampler, BSD-3-Clause)
//
// detail::schema_compiler(grammar, document, options).root(): a schema
// document (detail/schema_document.hpp) to a grammar (json_schema.hpp
// states what each keyword becomes). This file holds the class: which
// keywords each draft defines and which type each applies to
// (keyword_class, in_draft), type bits, counts and lists read from a
// schema, its limits, and the caches its passes share. The passes are
// defined beside it: conjunctions and disjuncts (schema_conjunctions.hpp),
// not (schema_negation.hpp), numbers and constants (schema_numbers.hpp),
// strings (schema_strings.hpp), arrays and uniqueItems (schema_arrays.hpp),
// objects (schema_objects.hpp), oneOf's disjointness (schema_one_of.hpp),
// values checked against a schema (schema_validation.hpp); include
// json_schema.hpp.
#ifndef XSAMPLER_DETAIL_SCHEMA_COMPILER_HPP
#define XSAMPLER_DETAIL_SCHEMA_COMPILER_HPP

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>

#include "../json_grammar.hpp"
#include "../regex.hpp"
#include "json_numbers.hpp"
#include "schema_document.hpp"

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

            void normalize(conj& c);

            std::optional<expr_id> value_of(conj c);

            /// What remains to expand: schemas (all apply) or one choice (anyOf/oneOf: one branch applies).
            struct pending
            {
                const json* choice;  // the anyOf/oneOf list, or null
                conj schemas;
            };

            void expand(conj parts, std::vector<pending> todo, std::vector<conj>& out);

            void check_keywords(const json* s) const;

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

            const json* make(json j, const json* owner);

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

            const facts& facts_of(const json* s);

            bool hopeless(const conj& parts);

            static std::vector<json> meet(const std::vector<json>& a, const std::vector<json>& b);

            bool none_left(const std::vector<json>& values, unsigned types, const std::vector<json>& not_in) const;

            bool object_possible(const std::vector<const facts*>& all) const;

            bool contradicts(const conj& parts, const json* s) const;

            static bool unicode_classes(const std::string& p);

            std::size_t ref_index(const json* s);

            json refer(const json* s, bool negated, unsigned types = t_all);

            const json* negation_of(const json* s, unsigned types = t_all);

            const json* equal_to(const json& v, const json* owner);

            json negated_keywords(const json* s, unsigned types = t_all);

            std::vector<const json*> excluded(const conj& own) const;

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
            disjunct_parts parts_of(const conj& d) const;

            std::optional<expr_id> disjunct(const conj& d);

            std::optional<expr_id> number(const conj& own, unsigned types);

            std::optional<expr_id> counted_integers(const number_bounds& b, bool fraction, const std::string& equal);

            bool numeric_bounds(const json* s, number_bounds& b, bool exact = false) const;

            std::uint64_t divisor_of(const decimal& m, const json* s) const;

            std::optional<expr_id> values(const json* at, const conj& own, unsigned types);

            expr_id constant(const json& v);

            std::string spellings(const json& v) const;

            static std::string equal_texts(std::string text, bool zero, bool integer, bool zeros);

            const std::string* format_of(const json* s) const;

            std::optional<expr_id> string(const conj& own);

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

            static std::optional<std::pair<byte_set, std::vector<byte_set>>> repeated_class(const byte_dfa& d);
            std::optional<string_bounds> string_content(const conj& own, bool dfa, bool counted = false);

            static const std::string* format_regex(const std::string& f);

            void merge_lexemes(std::vector<expr_id>& alternatives);

            const byte_dfa& pattern_dfa(const std::string& pattern, bool negated);
            const byte_dfa& format_dfa(const std::string* re);

            const byte_dfa& content_dfa();

            const byte_dfa& search_dfa(const std::string& regex, const json* s);

            static regex_options content_options(bool search, regex_reading reading = regex_reading::ecmascript);

            std::optional<expr_id> array(const conj& own);

            std::optional<expr_id> containing(const conj& items, std::size_t min, std::size_t max,
                                              const std::vector<const json*>& at, const json* unique);

            std::optional<expr_id> distinct_items(const conj& items, std::size_t min, std::size_t max, const json* at);

            expr_id marked_array(expr_id item, std::size_t min, std::size_t max, bool closed = false);

            bool renewing(const std::vector<conj>& ds);
            static constexpr unsigned max_endless_depth = 8;
            /// An object's names as object() writes them, where nothing counts
            /// them (no maxProperties, no patterns or propertyNames, no
            /// minProperties past the required ones): none otherwise.
            struct object_shape
            {
                std::vector<std::string> required, names;  // (required: sorted)
                bool free_keys;                            // other keys with any value
            };
            std::optional<object_shape> shape_of(const conj& own) const;
            conj member_schemas(const conj& own, const std::string& name) const;

            bool renewing_one(const conj& d, unsigned depth, bool proven);

            bool closed_strings(const std::vector<conj>& ds);
            static bool endless_everywhere(const byte_dfa& d);
            bool endless(const conj& c, unsigned depth);

            /// (numbers under none of these: the builder's, of up to 15 integer digits; a bound or a
            /// multiple is number_dfa's, at most 15 digits: maybe few values, or none)
            static constexpr std::array<const char*, 11> numeric_keywords = {
                "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "multipleOf", "$xs:gt", "$xs:ge",
                "$xs:lt", "$xs:le", "$xs:notMultipleOf", "$xs:types"};
            template <class Keys>
            static bool any_keyword(const conj& own, const Keys& keys);
            bool many_integers(const conj& d) const;

            /// A count of values that is as good as endless: a text of 2^32
            /// bytes is past what a matcher reads.
            static constexpr std::uint64_t enough_values = std::uint64_t(1) << 32;
            /// Enum strings alone past this many are marked (string_values): slots would keep the list order.
            static constexpr std::uint64_t max_enum_slots = 10;
            std::optional<std::pair<std::uint64_t, bool>> string_values(const conj& items, const std::vector<conj>& ds);
            static std::uint64_t strings_in(const string_bounds& b);

            /// A patternProperties entry: the regex, its schema, and the schema it is in.
            struct key_pattern
            {
                std::string regex;
                const json* value;
                const json* in;
            };

            std::optional<expr_id> object(const conj& own);

            std::optional<byte_dfa> key_names(const json* p, bool negated = false);

            std::vector<std::pair<byte_dfa, std::vector<bool>>> key_classes(const std::vector<key_pattern>& patterns, const byte_dfa& all,
                                                                             const std::string& tag);

            expr_id other_key(std::vector<std::string> names, const byte_dfa& content, const std::string& tag);

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

            std::vector<summary> summaries(const json* branch);

            std::optional<std::vector<json>> finite_values(const json* s);

            /// JSON Schema's equality: objects whatever their keys' order, 1 == 1.0.
            static bool same(const json& a, const json& b) { return nlohmann::json(a) == nlohmann::json(b); }
            static bool loosely_same(const json& a, const json& b);

            static bool overlap(const std::vector<json>& a, const std::vector<json>& b);

            unsigned types_of(const std::vector<json>& values) const;

            unsigned shared(const summary& a, const summary& b);

            bool separated(const summary& a, const summary& b);

            bool values_apart(const summary& a, const summary& b, const std::string& r);

            bool fails_empty_object(const json* s);

            bool patterns_apart(const std::string& x, const std::string& y);

            /// For a oneOf, per pair of branches the types of the values both
            /// may accept, and whether the objects both accept are {} alone
            /// (closed properties with no name in common).
            struct pairs
            {
                std::vector<std::vector<unsigned>> types;
                std::vector<std::vector<bool>> empty_only;
            };

            const pairs& overlaps(const json* s);

            const std::vector<const json*>& conditions_of(const json* s);

            /// A dependency: its key, and the names it requires or the schema it brings.
            struct dependency
            {
                std::string key;
                const json* value;
                bool names;  // value: a list of names (else a schema)
                const char* keyword;
            };

            std::vector<dependency> dependencies_of(const json* s) const;

            const json* exclusive_branches(const json* s);

            // ---- a value against a schema (enum and const candidates) ----

            bool validates(const json& v, const json* s, int depth = 0);

            bool matches_pattern(const json& v, const json& pattern, const json* s, regex_reading reading = regex_reading::ecmascript);
            const byte_dfa& search_automaton(const std::string& p, regex_reading reading);

            bool lists(const json* s, const std::string& key);

            static std::optional<decimal> exact_value(const json& v);

            decimal value_of_number(const json& v, const json* s) const;

            bool validates_made(const json& v, const json* s, int depth);

            bool validates_typed(const json& v, const std::string& k, const json* s, int depth);

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
}

#endif
