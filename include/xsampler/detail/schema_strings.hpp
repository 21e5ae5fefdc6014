// xsampler/detail/schema_strings.hpp — strings: lengths, patterns and formats as automata over their content. (xsampler, BSD-3-Clause)
//
// string / string_content: a string's bounds (minLength, maxLength in code
// points, pattern, format, their negations) met as DFAs (regex.hpp), or a
// counted lexeme where a length bound is large; format_regex: the formats
// asserted; merge_lexemes: string alternatives as one lexeme.
#ifndef XSAMPLER_DETAIL_SCHEMA_STRINGS_HPP
#define XSAMPLER_DETAIL_SCHEMA_STRINGS_HPP

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
        /// A format JSON Schema defines is an assertion: the regular
        /// expression of format_regex over the string's content, or an
        /// error where none is; any other format is an annotation
        /// (nullptr).
        inline const std::string* schema_compiler::format_of(const json* s) const
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

        inline std::optional<schema_compiler::expr_id> schema_compiler::string(const conj& own)
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

        /// Whether d is P1 P2 .. Pk C* for classes of ASCII bytes (k at most
        /// max_class_prefix; `^[a-z][-a-z0-9.+]*$`): C and the Pi.
        inline std::optional<std::pair<byte_set, std::vector<byte_set>>> schema_compiler::repeated_class(const byte_dfa& d)
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

        inline std::optional<schema_compiler::string_bounds> schema_compiler::string_content(const conj& own, bool dfa, bool counted)
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
        inline const std::string* schema_compiler::format_regex(const std::string& f)
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
        inline void schema_compiler::merge_lexemes(std::vector<expr_id>& alternatives)
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
        inline const byte_dfa& schema_compiler::pattern_dfa(const std::string& pattern, bool negated)
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
        inline const byte_dfa& schema_compiler::format_dfa(const std::string* re)
        {
            auto it = m_formats.find(re);
            if (it == m_formats.end())
            {
                it = m_formats.emplace(re, compile_regex(*re, content_options(false))).first;
            }
            return it->second;
        }

        /// Every string content ([^]*), compiled once.
        inline const byte_dfa& schema_compiler::content_dfa()
        {
            if (m_content.size() == 0)
            {
                m_content = compile_regex("[^]*", content_options(false));
            }
            return m_content;
        }

        /// The contents (content_options) in which the regex finds a match, compiled once per schema.
        inline const byte_dfa& schema_compiler::search_dfa(const std::string& regex, const json* s)
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
        inline regex_options schema_compiler::content_options(bool search, regex_reading reading)
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
    }
}

#endif
