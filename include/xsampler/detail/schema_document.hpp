// xsampler/detail/schema_document.hpp — a JSON Schema document's subschemas, drafts and $ref resolution. (xsampler, BSD-3-Clause)
//
// schema_document(root) walks the schema positions of a document (the
// keywords whose values are schemas, in every draft) and records for each
// subschema its JSON pointer (for messages) and its base URI ($id, or id in
// draft 4, resolved against the enclosing one), the resources ($id) and the
// plain-name anchors ($anchor; "$id": "#name" in drafts 6 and 7, "id":
// "#name" in draft 4). resolve(from, ref) finds a $ref's target inside the
// document: a JSON pointer (percent-decoded, ~1 and ~0 unescaped) or an
// anchor, relative to a resource of the document; anything else (another
// file, a URL not defined inside the document) is invalid_parameter naming
// the reference. The draft is the root's $schema (draft-04, -06, -07,
// 2019-09, 2020-12); without one, 2020-12.
#ifndef XSAMPLER_DETAIL_SCHEMA_DOCUMENT_HPP
#define XSAMPLER_DETAIL_SCHEMA_DOCUMENT_HPP

#include <cctype>
#include <cstddef>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "../types.hpp"

namespace xsampler
{
    namespace detail
    {
        /// The keywords whose value is a schema, a list of schemas, or a map of them.
        inline int schema_keyword_kind(const std::string& k)
        {
            static const std::map<std::string, int> kinds = {
                {"items", 1},          {"additionalItems", 1}, {"additionalProperties", 1}, {"not", 1},
                {"if", 1},             {"then", 1},            {"else", 1},                 {"contains", 1},
                {"propertyNames", 1},  {"unevaluatedItems", 1}, {"unevaluatedProperties", 1}, {"contentSchema", 1},
                {"allOf", 2},          {"anyOf", 2},           {"oneOf", 2},                {"prefixItems", 2},
                {"properties", 3},     {"patternProperties", 3}, {"definitions", 3},        {"$defs", 3},
                {"dependentSchemas", 3}, {"dependencies", 3}};
            const auto it = kinds.find(k);
            return it == kinds.end() ? 0 : it->second;
        }

        /// RFC 3986 reference resolution, enough for $id and $ref.
        class uri_ref
        {
        public:
            std::string scheme, authority, path, query, fragment;
            bool has_authority = false, has_query = false, has_fragment = false;

            static uri_ref parse(const std::string& s)
            {
                uri_ref u;
                std::size_t i = 0;
                const std::size_t colon = s.find(':');
                const std::size_t stop = s.find_first_of("/?#");
                if (colon != std::string::npos && colon > 0 && (stop == std::string::npos || colon < stop) &&
                    std::isalpha(static_cast<unsigned char>(s[0])))
                {
                    u.scheme = s.substr(0, colon);
                    i = colon + 1;
                }
                if (s.compare(i, 2, "//") == 0)
                {
                    u.has_authority = true;
                    const std::size_t end = s.find_first_of("/?#", i + 2);
                    u.authority = s.substr(i + 2, end == std::string::npos ? std::string::npos : end - i - 2);
                    i = end == std::string::npos ? s.size() : end;
                }
                const std::size_t q = s.find_first_of("?#", i);
                u.path = s.substr(i, q == std::string::npos ? std::string::npos : q - i);
                i = q == std::string::npos ? s.size() : q;
                if (i < s.size() && s[i] == '?')
                {
                    const std::size_t h = s.find('#', i);
                    u.has_query = true;
                    u.query = s.substr(i + 1, h == std::string::npos ? std::string::npos : h - i - 1);
                    i = h == std::string::npos ? s.size() : h;
                }
                if (i < s.size() && s[i] == '#')
                {
                    u.has_fragment = true;
                    u.fragment = s.substr(i + 1);
                }
                return u;
            }

            /// The text without its fragment.
            std::string resource() const
            {
                std::string out;
                if (!scheme.empty())
                {
                    out += scheme + ":";
                }
                if (has_authority)
                {
                    out += "//" + authority;
                }
                out += path;
                if (has_query)
                {
                    out += "?" + query;
                }
                return out;
            }

            /// `ref` resolved against this base (RFC 3986, 5.2.2).
            uri_ref resolve(const uri_ref& ref) const
            {
                uri_ref t;
                if (!ref.scheme.empty())
                {
                    t = ref;
                    t.path = remove_dots(ref.path);
                }
                else
                {
                    t.scheme = scheme;
                    if (ref.has_authority)
                    {
                        t.has_authority = true;
                        t.authority = ref.authority;
                        t.path = remove_dots(ref.path);
                        t.has_query = ref.has_query;
                        t.query = ref.query;
                    }
                    else
                    {
                        t.has_authority = has_authority;
                        t.authority = authority;
                        if (ref.path.empty())
                        {
                            t.path = path;
                            t.has_query = ref.has_query || has_query;
                            t.query = ref.has_query ? ref.query : query;
                        }
                        else
                        {
                            if (ref.path[0] == '/')
                            {
                                t.path = remove_dots(ref.path);
                            }
                            else if (has_authority && path.empty())
                            {
                                t.path = remove_dots("/" + ref.path);
                            }
                            else
                            {
                                const std::size_t slash = path.rfind('/');
                                t.path = remove_dots((slash == std::string::npos ? "" : path.substr(0, slash + 1)) + ref.path);
                            }
                            t.has_query = ref.has_query;
                            t.query = ref.query;
                        }
                    }
                }
                t.has_fragment = ref.has_fragment;
                t.fragment = ref.fragment;
                return t;
            }

        private:
            static std::string remove_dots(const std::string& in)
            {
                std::vector<std::string> out;
                std::size_t i = 0;
                const bool absolute = !in.empty() && in[0] == '/';
                if (absolute)
                {
                    i = 1;
                }
                bool trailing = false;
                while (i <= in.size())
                {
                    const std::size_t end = std::min(in.find('/', i), in.size());
                    const std::string seg = in.substr(i, end - i);
                    trailing = seg == "." || seg == "..";
                    if (seg == "..")
                    {
                        if (!out.empty())
                        {
                            out.pop_back();
                        }
                    }
                    else if (seg != ".")
                    {
                        out.push_back(seg);
                    }
                    i = end + 1;
                }
                std::string s = absolute ? "/" : "";
                for (std::size_t k = 0; k < out.size(); ++k)
                {
                    s += (k == 0 ? "" : "/") + out[k];
                }
                if (trailing && (s.empty() || s.back() != '/'))
                {
                    s += "/";
                }
                return s;
            }
        };

        class schema_document
        {
        public:
            using json = nlohmann::ordered_json;
            enum draft_kind
            {
                draft4 = 4,
                draft6 = 6,
                draft7 = 7,
                draft2019 = 2019,
                draft2020 = 2020
            };

            explicit schema_document(const json& root) : m_root(root)
            {
                m_draft = draft2020;
                if (root.is_object() && root.contains("$schema") && root["$schema"].is_string())
                {
                    const std::string s = root["$schema"].get<std::string>();
                    if (s.find("draft-04") != std::string::npos || s.find("draft-03") != std::string::npos)
                    {
                        m_draft = draft4;
                    }
                    else if (s.find("draft-06") != std::string::npos)
                    {
                        m_draft = draft6;
                    }
                    else if (s.find("draft-07") != std::string::npos)
                    {
                        m_draft = draft7;
                    }
                    else if (s.find("2019-09") != std::string::npos)
                    {
                        m_draft = draft2019;
                    }
                }
                index(root, "", uri_ref{});
            }

            draft_kind draft() const noexcept { return m_draft; }
            const json& root() const noexcept { return m_root; }

            /// The JSON pointer of a subschema ("/" for the root).
            std::string where(const json* s) const
            {
                const auto it = m_nodes.find(s);
                return it == m_nodes.end() || it->second.pointer.empty() ? "/" : it->second.pointer;
            }
            /// A number per subschema, in the order first seen (a stable key).
            std::size_t order(const json* s)
            {
                const auto it = m_nodes.find(s);
                if (it != m_nodes.end())
                {
                    return it->second.order;
                }
                return register_node(s, "", uri_ref{}).order;
            }

            /// Places a schema made outside the document (a compiler's own) where `owner` is:
            /// its messages name owner's pointer, its $refs resolve from owner's base.
            void adopt(const json* s, const json* owner)
            {
                if (m_nodes.count(s) == 0)
                {
                    const auto it = m_nodes.find(owner);
                    register_node(s, it == m_nodes.end() ? "" : it->second.pointer, it == m_nodes.end() ? uri_ref{} : it->second.base);
                }
            }

            /// The target of `ref` written in the subschema `from` (see the top of this file).
            const json* resolve(const json* from, const std::string& ref)
            {
                const auto it = m_nodes.find(from);
                const uri_ref base = it == m_nodes.end() ? uri_ref{} : it->second.base;
                const uri_ref target = base.resolve(uri_ref::parse(ref));
                const std::string resource = target.resource();
                const auto r = m_resources.find(resource);
                if (r == m_resources.end())
                {
                    throw invalid_parameter("json_schema: $ref '" + ref + "' at " + where(from) +
                                            " is not inside this schema (remote references are not fetched)");
                }
                if (!target.has_fragment || target.fragment.empty())
                {
                    return r->second;
                }
                const std::string fragment = percent_decoded(target.fragment);
                if (fragment[0] != '/')
                {
                    const auto a = m_anchors.find(resource + "#" + fragment);
                    if (a == m_anchors.end())
                    {
                        throw invalid_parameter("json_schema: $ref '" + ref + "' at " + where(from) +
                                                ": no anchor '" + fragment + "' in the schema");
                    }
                    return a->second;
                }
                const json* at = r->second;
                std::string pointer = where(at) == "/" ? "" : where(at);
                uri_ref at_base = m_nodes.at(at).base;
                std::size_t i = 1;
                while (i <= fragment.size())
                {
                    const std::size_t end = std::min(fragment.find('/', i), fragment.size());
                    std::string token = fragment.substr(i, end - i);
                    std::string key;
                    for (std::size_t k = 0; k < token.size(); ++k)
                    {
                        if (token[k] == '~' && k + 1 < token.size() && (token[k + 1] == '0' || token[k + 1] == '1'))
                        {
                            key += token[k + 1] == '0' ? '~' : '/';
                            ++k;
                        }
                        else
                        {
                            key += token[k];
                        }
                    }
                    if (at->is_object() && at->contains(key))
                    {
                        at = &(*at)[key];
                    }
                    else if (at->is_array() && !key.empty() &&
                             key.size() <= 18 && key.find_first_not_of("0123456789") == std::string::npos &&
                             std::stoull(key) < at->size())
                    {
                        at = &(*at)[std::size_t(std::stoull(key))];
                    }
                    else
                    {
                        throw invalid_parameter("json_schema: $ref '" + ref + "' at " + where(from) +
                                                ": the schema has nothing at that pointer");
                    }
                    pointer += "/" + token;
                    i = end + 1;
                }
                if (m_nodes.count(at) == 0)
                {
                    register_node(at, pointer, at_base);
                }
                return at;
            }

        private:
            struct node
            {
                std::string pointer;
                uri_ref base;
                std::size_t order = 0;
            };

            static std::string percent_decoded(const std::string& s)
            {
                std::string out;
                for (std::size_t i = 0; i < s.size(); ++i)
                {
                    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
                        std::isxdigit(static_cast<unsigned char>(s[i + 2])))
                    {
                        out += char(std::stoi(s.substr(i + 1, 2), nullptr, 16));
                        i += 2;
                    }
                    else
                    {
                        out += s[i];
                    }
                }
                return out;
            }

            node& register_node(const json* s, const std::string& pointer, const uri_ref& base)
            {
                node& n = m_nodes[s];
                n.pointer = pointer;
                n.base = base;
                n.order = m_nodes.size() - 1;
                return n;
            }

            void index(const json& s, const std::string& pointer, uri_ref base)
            {
                if (m_nodes.count(&s) != 0)
                {
                    return;
                }
                if (s.is_object())
                {
                    const char* id_key = m_draft == draft4 ? "id" : "$id";
                    if (s.contains(id_key) && s[id_key].is_string() && !(s.contains("$ref") && m_draft <= draft7))
                    {
                        const std::string id = s[id_key].get<std::string>();
                        if (!id.empty() && id[0] == '#')
                        {
                            if (m_draft <= draft7)
                            {
                                m_anchors[base.resource() + id] = &s;
                            }
                        }
                        else
                        {
                            base = base.resolve(uri_ref::parse(id));
                            base.has_fragment = false;
                            base.fragment.clear();
                            m_resources[base.resource()] = &s;
                        }
                    }
                    if (s.contains("$anchor") && s["$anchor"].is_string())
                    {
                        m_anchors[base.resource() + "#" + s["$anchor"].get<std::string>()] = &s;
                    }
                }
                register_node(&s, pointer, base);
                if (pointer.empty())
                {
                    m_resources[base.resource()] = &s;
                    m_resources[""] = &s;
                }
                if (!s.is_object())
                {
                    return;
                }
                for (const auto& kv : s.items())
                {
                    const int kind = schema_keyword_kind(kv.key());
                    const std::string here = pointer + "/" + escaped(kv.key());
                    const json& v = kv.value();
                    if (kind == 1 || (kind == 2 && v.is_array()) || (kind == 3 && v.is_object()))
                    {
                        if (kind == 1 && !v.is_array())
                        {
                            index(v, here, base);
                        }
                        else if (v.is_array())
                        {
                            for (std::size_t i = 0; i < v.size(); ++i)
                            {
                                index(v[i], here + "/" + std::to_string(i), base);
                            }
                        }
                        else
                        {
                            for (const auto& e : v.items())
                            {
                                if (e.value().is_object() || e.value().is_boolean())
                                {
                                    index(e.value(), here + "/" + escaped(e.key()), base);
                                }
                            }
                        }
                    }
                }
            }

            static std::string escaped(const std::string& key)
            {
                std::string out;
                for (const char c : key)
                {
                    out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
                }
                return out;
            }

            const json& m_root;
            draft_kind m_draft;
            std::unordered_map<const json*, node> m_nodes;
            std::map<std::string, const json*> m_resources, m_anchors;
        };
    }
}

#endif
