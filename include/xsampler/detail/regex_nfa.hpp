// xsampler/detail/regex_nfa.hpp — a parsed pattern as Thompson's NFA over bytes. (xsampler, BSD-3-Clause)
//
// detail::regex::nfa_builder(ast, limit).build(node, next): the tree
// (regex_parser.hpp) as NFA nodes, built back to front: bytes by the UTF-8
// ranges of their code points (utf8_sequences), anchors and \b \B as
// epsilon nodes that compile_regex (regex.hpp) decides; more than `limit`
// nodes (max_nfa_nodes) is invalid_parameter. vector_hash: the hash of a set
// of NFA nodes, subset construction's key.
#ifndef XSAMPLER_DETAIL_REGEX_NFA_HPP
#define XSAMPLER_DETAIL_REGEX_NFA_HPP

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "../types.hpp"
#include "regex_classes.hpp"
#include "regex_parser.hpp"

namespace xsampler
{
    namespace detail::regex
    {
        /// Thompson's NFA over bytes: a byte node moves on [lo, hi] to out; an
        /// epsilon node to out and out2 (-1: none); the accept node ends a match.
        struct nfa_node
        {
            enum kind_t : unsigned char
            {
                byte,
                eps,
                accept,
                begin,  // an epsilon to out at the text's start alone
                end,    // one to out at its end alone
                word,   // one to out between a word character and another (\b)
                inside  // one to out elsewhere (\B)
            } kind;
            unsigned char lo = 0, hi = 0;
            std::int32_t out = -1, out2 = -1;
        };

        class nfa_builder
        {
        public:
            nfa_builder(const std::vector<ast_node>& ast, std::size_t limit) : m_ast(ast), m_limit(limit) {}
            std::vector<nfa_node> nodes;
            bool anchored = false;  // a ^ or $ within the pattern (not the top level's)
            bool bounded = false;   // a \b or \B

            int node(nfa_node n)
            {
                if (nodes.size() >= m_limit)
                {
                    too_big();
                }
                nodes.push_back(n);
                return int(nodes.size()) - 1;
            }
            int eps(int out, int out2) { return node({nfa_node::eps, 0, 0, out, out2}); }

            // The start of `a` followed by `next` (built back to front).
            int build(int a, int next)
            {
                if (++m_steps > 4 * m_limit)
                {
                    too_big();
                }
                const ast_node& n = m_ast[std::size_t(a)];
                switch (n.kind)
                {
                case ast_node::empty: return next;
                case ast_node::begin: anchored = true; return node({nfa_node::begin, 0, 0, next, -1});
                case ast_node::end: anchored = true; return node({nfa_node::end, 0, 0, next, -1});
                case ast_node::word: bounded = true; return node({nfa_node::word, 0, 0, next, -1});
                case ast_node::inside: bounded = true; return node({nfa_node::inside, 0, 0, next, -1});
                case ast_node::set: return build_set(n.chars, next);
                case ast_node::concat:
                {
                    int cur = next;
                    for (auto it = n.kids.rbegin(); it != n.kids.rend(); ++it)
                    {
                        cur = build(*it, cur);
                    }
                    return cur;
                }
                case ast_node::alt:
                {
                    int cur = -1;
                    for (auto it = n.kids.rbegin(); it != n.kids.rend(); ++it)
                    {
                        const int s = build(*it, next);
                        cur = cur < 0 ? s : eps(s, cur);
                    }
                    return cur;
                }
                case ast_node::repeat:
                default:
                {
                    const int child = n.kids[0];
                    int cur = next;
                    if (n.max < 0)
                    {
                        cur = star(child, next);
                    }
                    else
                    {
                        for (int i = n.min; i < n.max; ++i)
                        {
                            const int body = build(child, cur);
                            cur = eps(body, next);
                        }
                    }
                    for (int i = 0; i < n.min; ++i)
                    {
                        cur = build(child, cur);
                    }
                    return cur;
                }
                }
            }

            int star(int child, int next)
            {
                const int s = eps(-1, next);
                const int body = build(child, s);
                nodes[std::size_t(s)].out = body;
                return s;
            }

            int build_set(const cp_set& chars, int next)
            {
                std::vector<byte_seq> seqs;
                for (const auto& r : chars)
                {
                    utf8_sequences(r.first, r.second, seqs);
                }
                if (seqs.empty())
                {
                    return eps(-1, -1);  // matches nothing
                }
                // Sequences that end alike share their tails (the continuation
                // bytes of most multi-byte ranges), so that subset construction
                // meets one NFA node where the encodings converge.
                std::map<std::tuple<unsigned char, unsigned char, int>, int> shared;
                int cur = -1;
                for (auto it = seqs.rbegin(); it != seqs.rend(); ++it)
                {
                    int s = next;
                    for (auto b = it->rbegin(); b != it->rend(); ++b)
                    {
                        const auto key = std::make_tuple(b->first, b->second, s);
                        const auto found = shared.find(key);
                        if (found != shared.end())
                        {
                            s = found->second;
                            continue;
                        }
                        const int made = node({nfa_node::byte, b->first, b->second, s, -1});
                        shared.emplace(key, made);
                        s = made;
                    }
                    cur = cur < 0 ? s : eps(s, cur);
                }
                return cur;
            }

        private:
            const std::vector<ast_node>& m_ast;
            std::size_t m_limit;
            std::size_t m_steps = 0;
            [[noreturn]] void too_big() const
            {
                throw invalid_parameter("regex: the pattern expands to more than " + std::to_string(m_limit) +
                                        " NFA nodes (max_nfa_nodes); reduce its repeat counts");
            }
        };

        struct vector_hash
        {
            std::size_t operator()(const std::vector<std::int32_t>& v) const noexcept
            {
                std::uint64_t h = 1469598103934665603ull;
                for (const std::int32_t x : v)
                {
                    h = (h ^ std::uint32_t(x)) * 1099511628211ull;
                }
                return std::size_t(h ^ (h >> 29));
            }
        };
    }
}

#endif
