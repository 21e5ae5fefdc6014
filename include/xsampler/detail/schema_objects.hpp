// xsampler/detail/schema_objects.hpp — objects: properties, patternProperties, additionalProperties, propertyNames. (xsampler, BSD-3-Clause)
//
// object: the listed keys in any order (each required one once), other
// keys by the patterns they match and miss (key_classes), propertyNames'
// contents (key_names), minProperties/maxProperties counted as written;
// other_key: a key that is none of the listed names, as one lexeme.
#ifndef XSAMPLER_DETAIL_SCHEMA_OBJECTS_HPP
#define XSAMPLER_DETAIL_SCHEMA_OBJECTS_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>
#include <map>
#include <tuple>

#include "schema_compiler.hpp"

namespace xsampler
{
    namespace detail
    {
        /// Objects: the listed keys in the schemas' order (properties, then
        /// required), each with every schema that applies to it (its
        /// property, the patterns it matches, else additionalProperties);
        /// beside them keys by the patterns they match and miss (one class
        /// of keys per combination that some key has), and the keys no
        /// pattern matches where additionalProperties allows them, unless
        /// options.additional_properties is off (and nothing else is
        /// listed).
        inline std::optional<schema_compiler::expr_id> schema_compiler::object(const conj& own)
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
        inline std::optional<byte_dfa> schema_compiler::key_names(const json* p, bool negated)
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
        inline std::vector<std::pair<byte_dfa, std::vector<bool>>> schema_compiler::key_classes(const std::vector<key_pattern>& patterns, const byte_dfa& all, const std::string& tag)
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
        inline schema_compiler::expr_id schema_compiler::other_key(std::vector<std::string> names, const byte_dfa& content, const std::string& tag)
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
    }
}

#endif
