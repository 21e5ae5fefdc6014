// xsampler/detail/schema_arrays.hpp — arrays: items, contains, and uniqueItems. (xsampler, BSD-3-Clause)
//
// array: items with minItems/maxItems; containing: items counted as they
// are written; uniqueItems (distinct_items): finite values each at most
// once, or a grammar::distinct mark (marked_array) where the matcher can
// check it: strings, integers, objects that always have a new completion
// (renewing, endless) or closed objects of endless strings
// (closed_strings); how many distinct strings a bound allows
// (string_values, strings_in).
#ifndef XSAMPLER_DETAIL_SCHEMA_ARRAYS_HPP
#define XSAMPLER_DETAIL_SCHEMA_ARRAYS_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>
#include <array>
#include <initializer_list>
#include <set>
#include <tuple>

#include "schema_compiler.hpp"

namespace xsampler
{
    namespace detail
    {
        inline std::optional<schema_compiler::expr_id> schema_compiler::array(const conj& own)
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
        inline std::optional<schema_compiler::expr_id> schema_compiler::containing(const conj& items, std::size_t min, std::size_t max, const std::vector<const json*>& at, const json* unique)
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
        inline std::optional<schema_compiler::expr_id> schema_compiler::distinct_items(const conj& items, std::size_t min, std::size_t max, const json* at)
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
        inline schema_compiler::expr_id schema_compiler::marked_array(expr_id item, std::size_t min, std::size_t max, bool closed)
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
        inline bool schema_compiler::renewing(const std::vector<conj>& ds)
        {
            return !ds.empty() && std::all_of(ds.begin(), ds.end(), [&](const conj& d) { return renewing_one(d, 0, false); });
        }

        inline std::optional<schema_compiler::object_shape> schema_compiler::shape_of(const conj& own) const
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
        inline schema_compiler::conj schema_compiler::member_schemas(const conj& own, const std::string& name) const
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
        inline bool schema_compiler::renewing_one(const conj& d, unsigned depth, bool proven)
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
        inline bool schema_compiler::closed_strings(const std::vector<conj>& ds)
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
        inline bool schema_compiler::endless_everywhere(const byte_dfa& d)
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
        inline bool schema_compiler::endless(const conj& c, unsigned depth)
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

        template <class Keys>
        inline bool schema_compiler::any_keyword(const conj& own, const Keys& keys)
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
        inline bool schema_compiler::many_integers(const conj& d) const
        {
            const disjunct_parts parts = parts_of(d);
            return parts.values_at == nullptr && !parts.own.empty() && parts.types == t_integer &&
                   !any_keyword(parts.own, numeric_keywords);
        }

        /// Whether every disjunct is strings alone (a string type with its
        /// bounds, pattern and format, or an enum of strings), one at least
        /// a string type or an enum of more than max_enum_slots; then how
        /// many strings one of them has (capped at enough_values; an
        /// enum's, those that are items) and whether that is all of them
        /// (one disjunct).
        inline std::optional<std::pair<std::uint64_t, bool>> schema_compiler::string_values(const conj& items, const std::vector<conj>& ds)
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
        inline std::uint64_t schema_compiler::strings_in(const string_bounds& b)
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
    }
}

#endif
