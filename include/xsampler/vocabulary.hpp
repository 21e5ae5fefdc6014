// xsampler/vocabulary.hpp — token id -> bytes, for constraints and stop strings. (xsampler, BSD-3-Clause)
//
// A vocabulary maps each token id to the bytes it stands for, as the
// tokenizer decodes it (GPT-2's byte-level BPE: the bytes after undoing its
// byte-to-unicode mapping). Special tokens (eos, <|endoftext|>, Llama 3's
// <|eot_id|> ...) stand for no text: their bytes are empty and a constraint
// never allows them except as the end of a complete text (eos).
//
// vocabulary(tokens, special)
//   tokens[id] is the bytes of token id; `special` lists the ids that are
//   special (eos among them); an id outside [0, tokens.size()):
//   invalid_parameter. A non-special token with no bytes: invalid_parameter
//   naming it (it would match everywhere and advance nothing).
// eos: the special ids that end a text (set_eos; by default every special id).
// decode(ids): the bytes of the ids, special tokens skipped; an id outside
//   the vocabulary: invalid_parameter naming it.
// find(bytes): the non-special token with exactly these bytes, or -1.
//
// vocabulary_index(vocab): the non-special tokens as a byte trie in
//   preorder, built once (about 30 ms for GPT-2's 50,257) and shared by every
//   constraint over the vocabulary (constraint.hpp walks it); fewest_tokens
//   spells a text in the fewest tokens.
// walk_region(region): the trie walked through a region of a byte automaton
//   (byte_region: states and their byte runs, each run staying in the region,
//   dying, or leaving it): the tokens whose bytes all stay in, and the nodes
//   where a byte leaves (exits), in preorder. Cached by the region's shape in
//   the index (at most region_cache_limit entries, then the least recently
//   used goes), so every grammar over the vocabulary shares it: the text
//   inside a JSON string is one region whatever surrounds it. Thread-safe.
// runs_of(bytes): the trie read through a byte class (class_runs), for a
//   walk that reads a run of the class by its tokens instead of its nodes
//   (mark_run); nullptr where fewer than an eighth of the trie's nodes read
//   a byte of the class. A byte per token and four per node (GPT-2: 0.44
//   MB, Llama 3: 1.2 MB); cached and shared like the regions.
#ifndef XSAMPLER_VOCABULARY_HPP
#define XSAMPLER_VOCABULARY_HPP

#include <algorithm>
#include <array>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "types.hpp"

namespace xsampler
{
    class vocabulary
    {
    public:
        vocabulary() = default;
        vocabulary(std::vector<std::string> tokens, std::vector<token_id> special)
            : m_tokens(std::move(tokens)), m_special(m_tokens.size(), false), m_eos(special)
        {
            detail::check_ids(special, m_tokens.size(), "vocabulary", "special token id");
            for (const token_id id : special)
            {
                m_special[std::size_t(id)] = true;
                m_tokens[std::size_t(id)].clear();
            }
            m_by_bytes.reserve(m_tokens.size());
            for (std::size_t id = 0; id < m_tokens.size(); ++id)
            {
                if (m_special[id])
                {
                    continue;
                }
                if (m_tokens[id].empty())
                {
                    throw invalid_parameter("vocabulary: token " + std::to_string(id) +
                                            " has no bytes and is not special");
                }
                m_by_bytes.emplace(m_tokens[id], token_id(id));  // the first id wins on a duplicate
            }
        }

        std::size_t size() const noexcept { return m_tokens.size(); }
        /// The bytes of token `id` (empty for a special token); id must be in range.
        const std::string& bytes(token_id id) const { return m_tokens.at(std::size_t(id)); }
        bool special(token_id id) const { return m_special.at(std::size_t(id)); }
        const std::vector<token_id>& eos() const noexcept { return m_eos; }
        /// The ids that end a text; each must be special.
        void set_eos(std::vector<token_id> eos)
        {
            detail::check_ids(eos, size(), "vocabulary", "eos id");
            for (const token_id id : eos)
            {
                if (!m_special[std::size_t(id)])
                {
                    throw invalid_parameter("vocabulary: eos id " + std::to_string(id) + " is not a special token");
                }
            }
            m_eos = std::move(eos);
        }

        /// The text of `ids`: their bytes concatenated, special tokens skipped.
        std::string decode(span<const token_id> ids) const
        {
            detail::check_ids(ids, size(), "vocabulary::decode", "token id");
            std::string s;
            for (const token_id id : ids)
            {
                s += m_tokens[std::size_t(id)];
            }
            return s;
        }

        /// The non-special token whose bytes are exactly `bytes`, or -1.
        token_id find(std::string_view bytes) const
        {
            const auto it = m_by_bytes.find(std::string(bytes));
            return it == m_by_bytes.end() ? -1 : it->second;
        }

    private:
        std::vector<std::string> m_tokens;
        std::vector<bool> m_special;
        std::vector<token_id> m_eos;
        std::unordered_map<std::string, token_id> m_by_bytes;
    };

    /// A region of a byte automaton: states numbered from 0 (where a walk
    /// starts); state s's bytes are runs[begin[s] .. begin[s + 1]), in byte
    /// order, each (its last byte, to): `to` a state of the region, dead,
    /// exit, or end (a counted rule's iteration ends: back to state `start`,
    /// one more done). The runs of a state end at byte 255.
    struct byte_region
    {
        static constexpr std::int32_t dead = -1;
        static constexpr std::int32_t exit = -2;
        static constexpr std::int32_t end = -3;
        struct run
        {
            unsigned char last;
            std::int32_t to;
        };
        std::vector<std::uint32_t> begin{0};
        std::vector<run> runs;
        std::int32_t start = -1;  // where an iteration ends (a counted region), or -1

        std::size_t states() const noexcept { return begin.size() - 1; }
        /// Its shape as bytes: equal keys, equal regions.
        std::string key() const
        {
            std::string k;
            k.reserve(begin.size() * 4 + runs.size() * 5 + 4);
            k.append(reinterpret_cast<const char*>(&start), sizeof start);
            for (const std::uint32_t b : begin)
            {
                k.append(reinterpret_cast<const char*>(&b), sizeof b);
            }
            for (const run& r : runs)
            {
                k += char(r.last);
                k.append(reinterpret_cast<const char*>(&r.to), sizeof r.to);
            }
            return k;
        }
    };

    /// What walking the trie through a byte_region from its state 0 finds.
    struct region_walk
    {
        static constexpr std::uint16_t outside = 0xFFFF;
        std::vector<std::uint64_t> inside;  // token bits: every byte stays in the region
        struct exit
        {
            std::uint32_t node;  // its byte leaves the region
            std::uint32_t from;  // the region's state before that byte
            std::uint32_t ends;  // iterations ended before it (counted)
        };
        std::vector<exit> exits;  // in preorder
        /// A counted region's: by token id, the iterations a token inside
        /// needs (those it ends, plus one if it stops inside one), `outside`
        /// for the others; `most`, the largest.
        std::vector<std::uint16_t> need;
        std::uint16_t most = 0;
        /// By token id, the state a token inside ends in (0 for the others).
        std::vector<std::uint16_t> last;
        /// A counted region's: where a byte dies after an iteration ended
        /// (node, state before, iterations ended before it), in preorder; and
        /// by iterations ended e, the nodes with children that end the e-th
        /// iteration (at_start[at_begin[e] .. at_begin[e + 1]), in preorder).
        std::vector<exit> stops;
        std::vector<std::uint32_t> at_begin, at_start;
    };

    /// The trie read through a byte class C (vocabulary_index::runs_of).
    struct class_runs
    {
        static constexpr std::uint8_t deepest = 255;
        /// By token, in the trie's order (the positions mark_run reads): the
        /// depth of its last byte outside C, 0 for none, `deepest` for that
        /// depth or more.
        std::vector<std::uint8_t> last_out;
        /// By node, and one past the last: the first node from it on, in
        /// preorder, whose byte is outside C (nodes() for none).
        std::vector<std::uint32_t> next_out;
    };

    /// The vocabulary's non-special tokens as a byte trie in preorder.
    class vocabulary_index
    {
    public:
        /// Regions kept by walk_region (each a bitset and one or two 16-bit
        /// numbers per token of the vocabulary).
        static constexpr std::size_t region_cache_limit = 128;

        explicit vocabulary_index(std::shared_ptr<const vocabulary> vocab) : m_vocab(std::move(vocab))
        {
            if (!m_vocab)
            {
                throw invalid_parameter("vocabulary_index: no vocabulary");
            }
            const vocabulary& v = *m_vocab;
            std::vector<token_id> order;
            order.reserve(v.size());
            for (std::size_t id = 0; id < v.size(); ++id)
            {
                if (!v.special(token_id(id)))
                {
                    if (v.bytes(token_id(id)).size() > 65535)
                    {
                        throw invalid_parameter("vocabulary_index: token " + std::to_string(id) +
                                                " is longer than 65535 bytes");
                    }
                    order.push_back(token_id(id));
                }
            }
            std::sort(order.begin(), order.end(),
                      [&](token_id a, token_id b) { return v.bytes(a) < v.bytes(b) || (v.bytes(a) == v.bytes(b) && a < b); });
            std::vector<std::uint32_t> path;  // the open nodes, by depth - 1
            std::string prev;
            for (const token_id id : order)
            {
                const std::string& b = v.bytes(id);
                std::size_t common = 0;
                while (common < b.size() && common < prev.size() && common < path.size() && b[common] == prev[common])
                {
                    ++common;
                }
                while (path.size() > common)
                {
                    m_end[path.back()] = std::uint32_t(m_byte.size());
                    path.pop_back();
                }
                for (std::size_t d = common; d < b.size(); ++d)
                {
                    m_parent.push_back(path.empty() ? none : path.back());
                    path.push_back(std::uint32_t(m_byte.size()));
                    m_byte.push_back(static_cast<unsigned char>(b[d]));
                    m_depth.push_back(std::uint16_t(d + 1));
                    m_end.push_back(0);
                    m_first.push_back(std::uint32_t(m_ids.size()));
                    m_count.push_back(0);
                }
                const std::uint32_t at = path.back();
                if (m_count[at] == 0)
                {
                    m_first[at] = std::uint32_t(m_ids.size());
                }
                m_ids.push_back(id);
                ++m_count[at];
                m_longest = std::max(m_longest, b.size());
                prev = b;
            }
            while (!path.empty())
            {
                m_end[path.back()] = std::uint32_t(m_byte.size());
                path.pop_back();
            }
            m_root.fill(-1);
            for (std::uint32_t i = 0; i < m_byte.size(); i = m_end[i])
            {
                m_root[m_byte[i]] = std::int32_t(i);
            }
            m_all_bytes = std::all_of(m_root.begin(), m_root.end(), [&](std::int32_t r) { return r >= 0 && m_count[std::size_t(r)] > 0; });
            // the nodes by depth (each depth in preorder): a counting sort
            m_level_begin.assign(m_longest + 2, 0);
            for (const std::uint16_t d : m_depth)
            {
                ++m_level_begin[d];
            }
            for (std::size_t d = 1; d < m_level_begin.size(); ++d)
            {
                m_level_begin[d] += m_level_begin[d - 1];
            }
            m_by_level.resize(m_byte.size());
            std::vector<std::uint32_t> next(m_level_begin.begin(), m_level_begin.end() - 1);
            for (std::uint32_t i = 0; i < m_byte.size(); ++i)
            {
                m_by_level[next[m_depth[i] - 1]++] = i;
            }
            for (const unsigned char b : m_byte)
            {
                ++m_reading[b];
            }
            m_node_of.assign(v.size(), std::uint32_t(m_byte.size()));  // (special tokens: past the last node)
            m_marks.assign(m_byte.size(), 0);
            for (std::uint32_t i = 0; i < m_byte.size(); ++i)
            {
                m_marks[i] = m_count[i] == 0 ? 0 : m_count[i] > 1 ? several : std::uint32_t(m_ids[m_first[i]]) * 2 + 1;
                for (std::uint32_t k = m_first[i]; k < m_first[i] + m_count[i]; ++k)
                {
                    m_node_of[std::size_t(m_ids[k])] = i;
                }
            }
        }

        const vocabulary& vocab() const noexcept { return *m_vocab; }
        std::shared_ptr<const vocabulary> shared_vocab() const noexcept { return m_vocab; }
        std::size_t nodes() const noexcept { return m_byte.size(); }
        /// The longest token, in bytes.
        std::size_t longest() const noexcept { return m_longest; }
        /// Whether every single byte is a token (then any text can be spelt).
        bool all_bytes() const noexcept { return m_all_bytes; }

        // The trie, in preorder: node i reads byte(i) at depth(i) (1 for the
        // root's children), its subtree is [i, end(i)), and the tokens whose
        // bytes end there are ids [first(i), first(i) + count(i)).
        unsigned char byte(std::uint32_t i) const noexcept { return m_byte[i]; }
        std::size_t depth(std::uint32_t i) const noexcept { return m_depth[i]; }
        std::uint32_t end(std::uint32_t i) const noexcept { return m_end[i]; }
        std::uint32_t parent(std::uint32_t i) const noexcept { return m_parent[i]; }
        /// The node where token t's bytes end (nodes() for a special token):
        /// in preorder, so by node the tokens are in their bytes' order.
        std::uint32_t node_of(token_id t) const noexcept { return m_node_of[std::size_t(t)]; }
        template <class F>
        void for_each_token(std::uint32_t i, F&& f) const
        {
            for (std::uint32_t k = 0; k < m_count[i]; ++k)
            {
                f(m_ids[m_first[i] + k]);
            }
        }
        /// Sets the bits of node i's tokens in `words` (a bitset of the
        /// vocabulary): for_each_token without a branch on whether there is
        /// one (a walk's nodes hold one or none, unpredictably).
        void mark_tokens(std::uint32_t i, std::uint64_t* words) const noexcept
        {
            const std::uint32_t m = m_marks[i];
            if (m != several)
            {
                const std::size_t t = m >> 1;
                words[t / 64] |= std::uint64_t(m & 1) << (t % 64);  // (none: 0 or-ed into word 0)
                return;
            }
            for_each_token(i, [&](token_id t) { words[std::size_t(t) / 64] |= std::uint64_t(1) << (t % 64); });
        }
        static constexpr std::uint32_t none = ~std::uint32_t(0);

        /// The trie read through the byte class `bytes`, or nullptr where
        /// fewer than an eighth of the nodes read one of its bytes (a run of
        /// the class is then short: its nodes are read as fast).
        std::shared_ptr<const class_runs> runs_of(const std::bitset<256>& bytes) const
        {
            std::size_t reading = 0;
            for (unsigned b = 0; b < 256; ++b)
            {
                reading += bytes[b] ? m_reading[b] : 0;
            }
            if (reading * 8 < m_byte.size() || reading == 0)
            {
                return nullptr;
            }
            std::string key = bytes.to_string();
            {
                const std::lock_guard<std::mutex> lock(m_regions->mutex);
                const auto it = m_regions->runs.find(key);
                if (it != m_regions->runs.end())
                {
                    return it->second;
                }
            }
            auto out = std::make_shared<class_runs>();
            std::array<std::uint8_t, 256> in{};
            for (unsigned b = 0; b < 256; ++b)
            {
                in[b] = bytes[b];
            }
            const auto nodes = std::uint32_t(m_byte.size());
            std::vector<std::uint8_t> by_node(nodes);  // the depth of the last byte outside, on the way to each node
            for (std::uint32_t i = 0; i < nodes; ++i)  // (a parent comes before its children)
            {
                const std::uint8_t above = m_depth[i] == 1 ? 0 : by_node[m_parent[i]];
                by_node[i] = in[m_byte[i]] ? above : std::uint8_t(std::min<std::size_t>(m_depth[i], class_runs::deepest));
            }
            out->last_out.resize(m_ids.size());
            for (std::size_t k = 0; k < m_ids.size(); ++k)
            {
                out->last_out[k] = by_node[m_node_of[std::size_t(m_ids[k])]];
            }
            out->next_out.resize(std::size_t(nodes) + 1);
            std::uint32_t next = nodes;
            out->next_out[nodes] = next;
            for (std::uint32_t i = nodes; i-- > 0;)
            {
                next = in[m_byte[i]] ? next : i;
                out->next_out[i] = next;
            }
            const std::lock_guard<std::mutex> lock(m_regions->mutex);
            if (m_regions->runs.size() >= region_cache_limit)
            {
                m_regions->runs.clear();  // (held ones stay alive through their holders)
            }
            return m_regions->runs.emplace(std::move(key), std::move(out)).first->second;
        }
        /// By token id, a bit for each token with a byte of `bytes` past its
        /// first (what a budgeted step reads again: tokens that go on after a
        /// rule's end only by such a byte), cached like runs_of.
        std::shared_ptr<const std::vector<std::uint64_t>> later_bytes(const std::bitset<256>& bytes) const
        {
            std::string key = bytes.to_string();
            {
                const std::lock_guard<std::mutex> lock(m_regions->mutex);
                const auto it = m_regions->later.find(key);
                if (it != m_regions->later.end())
                {
                    return it->second;
                }
            }
            const auto nodes = std::uint32_t(m_byte.size());
            std::vector<std::uint8_t> by_node(nodes);  // such a byte on the way to each node, past the first
            for (std::uint32_t i = 0; i < nodes; ++i)  // (a parent comes before its children)
            {
                by_node[i] = std::uint8_t(m_depth[i] > 1 && (by_node[m_parent[i]] || bytes[m_byte[i]]));
            }
            auto out = std::make_shared<std::vector<std::uint64_t>>((m_vocab->size() + 63) / 64, 0);
            for (std::uint32_t i = 0; i < nodes; ++i)
            {
                if (by_node[i])
                {
                    mark_tokens(i, out->data());
                }
            }
            const std::lock_guard<std::mutex> lock(m_regions->mutex);
            if (m_regions->later.size() >= region_cache_limit)
            {
                m_regions->later.clear();
            }
            return m_regions->later.emplace(std::move(key), std::move(out)).first->second;
        }
        /// Sets the bits of the tokens in the subtrees [first, last) (a
        /// node's next siblings and their subtrees) whose bytes from `depth`
        /// on are all in runs' class; depth at most class_runs::deepest.
        /// Without a branch on the tokens: a run of a name's letters holds
        /// tens of thousands.
        void mark_run(const class_runs& runs, std::uint32_t first, std::uint32_t last, std::size_t depth,
                      std::uint64_t* words) const noexcept
        {
            if (first >= last)
            {
                return;
            }
            const std::size_t from = m_first[first];
            const std::size_t to = last == m_byte.size() ? m_ids.size() : m_first[last];
            const std::uint8_t* out = runs.last_out.data();
            const token_id* ids = m_ids.data();
            for (std::size_t k = from; k < to; ++k)
            {
                const auto t = std::size_t(ids[k]);
                words[t / 64] |= std::uint64_t(out[k] < depth) << (t % 64);
            }
        }

        /// The fewest tokens that spell `text` (each a substring of it), or
        /// ~0 if none do.
        std::size_t fewest_tokens(std::string_view text, std::vector<std::size_t>& best) const
        {
            const std::size_t unset = ~std::size_t(0);
            best.assign(text.size() + 1, unset);
            best[0] = 0;
            for (std::size_t i = 0; i < text.size(); ++i)
            {
                if (best[i] == unset)
                {
                    continue;
                }
                std::int32_t at = m_root[static_cast<unsigned char>(text[i])];
                std::size_t j = i + 1;
                while (at >= 0)
                {
                    if (m_count[std::size_t(at)] > 0)
                    {
                        best[j] = std::min(best[j], best[i] + 1);
                    }
                    if (j == text.size())
                    {
                        break;
                    }
                    at = child(std::uint32_t(at), static_cast<unsigned char>(text[j]));
                    ++j;
                }
            }
            return best[text.size()];
        }

        /// The node below `at` by byte b (at == none: a root), or -1.
        std::int32_t child(std::uint32_t at, unsigned char b) const noexcept
        {
            if (at == none)
            {
                return m_root[b];
            }
            for (std::uint32_t c = at + 1; c < m_end[at]; c = m_end[c])
            {
                if (m_byte[c] == b)
                {
                    return std::int32_t(c);
                }
                if (m_byte[c] > b)
                {
                    break;
                }
            }
            return -1;
        }
        /// Whether some token's bytes end at node i.
        bool has_token(std::uint32_t i) const noexcept { return m_count[i] > 0; }

        /// The trie walked through `region` (see the top of this file); a
        /// region with no states, a run past a state, or runs not ending at
        /// 255: invalid_parameter.
        std::shared_ptr<const region_walk> walk_region(const byte_region& region) const
        {
            std::string key = region.key();
            {
                const std::lock_guard<std::mutex> lock(m_regions->mutex);
                const auto it = m_regions->walks.find(key);
                if (it != m_regions->walks.end())
                {
                    it->second.used = ++m_regions->uses;
                    return it->second.walk;
                }
            }
            auto walked = std::make_shared<const region_walk>(walk_through(region));
            const std::lock_guard<std::mutex> lock(m_regions->mutex);
            auto& walks = m_regions->walks;
            if (walks.size() >= region_cache_limit && walks.find(key) == walks.end())
            {
                // the least recently used goes (a walk in use stays alive through its holders): a string's
                // text, used by every grammar, stays
                walks.erase(std::min_element(walks.begin(), walks.end(), [](const auto& a, const auto& b) {
                    return a.second.used < b.second.used;
                }));
            }
            walks[std::move(key)] = {walked, ++m_regions->uses};
            return walked;
        }
        /// Regions walk_region holds.
        std::size_t regions_cached() const
        {
            const std::lock_guard<std::mutex> lock(m_regions->mutex);
            return m_regions->walks.size();
        }

    private:
        region_walk walk_through(const byte_region& region) const
        {
            const std::size_t n = region.states();
            if (n == 0 || n > 65535 || region.begin.front() != 0 || region.begin.back() != region.runs.size())
            {
                throw invalid_parameter("walk_region: a region needs states (at most 65,535), and runs for each");
            }
            const bool counted = region.start >= 0;
            if (region.start >= std::int32_t(n) || region.start < -1)
            {
                throw invalid_parameter("walk_region: its start is no state");
            }
            std::vector<std::int32_t> table(n * 256);  // (state, byte) -> to
            for (std::size_t s = 0; s < n; ++s)
            {
                std::size_t b = 0;
                for (std::uint32_t r = region.begin[s]; r < region.begin[s + 1]; ++r)
                {
                    const auto& run = region.runs[r];
                    if (run.last < b || run.to < byte_region::end || (run.to == byte_region::end && !counted) ||
                        (run.to >= 0 && std::size_t(run.to) >= n))
                    {
                        throw invalid_parameter("walk_region: state " + std::to_string(s) + ": a run out of order or to no state");
                    }
                    for (; b <= run.last; ++b)
                    {
                        table[s * 256 + b] = run.to;
                    }
                }
                if (b != 256)
                {
                    throw invalid_parameter("walk_region: state " + std::to_string(s) + ": its runs end before byte 255");
                }
            }
            region_walk out;
            out.inside.assign((m_vocab->size() + 63) / 64, 0);
            out.last.assign(m_vocab->size(), 0);
            if (counted)
            {
                out.need.assign(m_vocab->size(), region_walk::outside);
            }
            std::vector<std::pair<std::uint16_t, std::uint32_t>> by_ends;  // (iterations, node at the start)
            if (!counted && wide(table))
            {
                walk_levels(table, out);
            }
            else
            {
                walk_nodes(table, region.start, out, by_ends);
            }
            if (counted)  // by_ends grouped by iterations, each group in preorder (a counting sort)
            {
                std::size_t most_ends = 0;
                for (const auto& p : by_ends)
                {
                    most_ends = std::max<std::size_t>(most_ends, p.first);
                }
                out.at_begin.assign(most_ends + 2, 0);
                for (const auto& p : by_ends)
                {
                    ++out.at_begin[std::size_t(p.first) + 1];
                }
                for (std::size_t k = 1; k < out.at_begin.size(); ++k)
                {
                    out.at_begin[k] += out.at_begin[k - 1];
                }
                out.at_start.resize(by_ends.size());
                std::vector<std::uint32_t> next(out.at_begin.begin(), out.at_begin.end() - 1);
                for (const auto& [e, node] : by_ends)
                {
                    out.at_start[next[e]++] = node;
                }
            }
            return out;
        }

        /// Whether the bytes state 0 keeps or leaves by hold a quarter of the
        /// trie's nodes below them: walking the trie whole costs what the walk does.
        bool wide(const std::vector<std::int32_t>& table) const noexcept
        {
            std::size_t below = 0;
            for (std::uint32_t i = 0; i < m_byte.size(); i = m_end[i])
            {
                below += table[m_byte[i]] != byte_region::dead ? m_end[i] - i : 0;
            }
            return below >= m_byte.size() / 4;
        }
        /// walk_through's walk when the region is narrow: node by node in
        /// preorder, skipping the subtrees where it dies or is left (start:
        /// where an iteration ends, counted; -1 otherwise).
        void walk_nodes(const std::vector<std::int32_t>& table, std::int32_t start, region_walk& out,
                        std::vector<std::pair<std::uint16_t, std::uint32_t>>& by_ends) const
        {
            const bool counted = start >= 0;
            std::vector<std::int32_t> at(m_longest + 1, 0);     // the region's state at each depth
            std::vector<std::uint16_t> ends(m_longest + 1, 0);  // iterations ended (at most the depth)
            const auto nodes = std::uint32_t(m_byte.size());
            for (std::uint32_t i = 0; i < nodes;)
            {
                const std::size_t d = m_depth[i];
                const std::int32_t from = at[d - 1];
                std::uint16_t e = ends[d - 1];
                std::int32_t to = table[std::size_t(from) * 256 + m_byte[i]];
                if (to == byte_region::end)
                {
                    to = start;
                    ++e;
                }
                if (to < 0)
                {
                    if (to == byte_region::exit)
                    {
                        out.exits.push_back({i, std::uint32_t(from), e});
                    }
                    else if (counted && e > 0)
                    {
                        out.stops.push_back({i, std::uint32_t(from), e});
                    }
                    i = m_end[i];
                    continue;
                }
                at[d] = to;
                ends[d] = e;
                if (counted && to == start && e > 0 && m_end[i] > i + 1)
                {
                    by_ends.emplace_back(e, i);
                }
                const auto need = std::uint16_t(e + std::uint16_t(to != start));
                for (std::uint32_t k = m_first[i], last = m_first[i] + m_count[i]; k < last; ++k)
                {
                    const auto t = std::size_t(m_ids[k]);
                    out.inside[t / 64] |= std::uint64_t(1) << (t % 64);
                    out.last[t] = std::uint16_t(to);
                    if (counted)
                    {
                        out.need[t] = need;
                        out.most = std::max(out.most, need);
                    }
                }
                ++i;
            }
        }
        /// walk_through's walk when the region is wide (its first bytes hold
        /// a quarter of the trie) and not counted: without branches on the
        /// trie's shape, each node's state from its parent's, depth by depth
        /// (the nodes of a depth are independent); then the tokens in id
        /// order, and where it is left, in preorder. (A counted region's walk
        /// lists most nodes anyway, by the iterations they end: walk_nodes.)
        void walk_levels(const std::vector<std::int32_t>& table, region_walk& out) const
        {
            constexpr std::int32_t below = -4;  // under a node where it died or was left (and no node's)
            const auto nodes = std::uint32_t(m_byte.size());
            std::vector<std::int32_t> state(std::size_t(nodes) + 1, below);
            for (std::size_t d = 1; d < m_level_begin.size(); ++d)
            {
                for (std::uint32_t k = m_level_begin[d - 1]; k < m_level_begin[d]; ++k)
                {
                    const std::uint32_t i = m_by_level[k];
                    const std::int32_t from = d == 1 ? 0 : state[m_parent[i]];
                    state[i] = from >= 0 ? table[std::size_t(from) * 256 + m_byte[i]] : below;
                }
            }
            const std::size_t n = m_node_of.size();
            for (std::size_t w = 0; w < out.inside.size(); ++w)
            {
                std::uint64_t bits = 0;
                for (std::size_t t = w * 64; t < std::min(n, w * 64 + 64); ++t)
                {
                    const std::int32_t to = state[m_node_of[t]];
                    bits |= std::uint64_t(to >= 0) << (t % 64);
                    out.last[t] = std::uint16_t(to >= 0 ? to : 0);
                }
                out.inside[w] = bits;
            }
            for (std::uint32_t i = 0; i < nodes;)
            {
                const std::int32_t to = state[i];
                if (to == byte_region::exit)
                {
                    out.exits.push_back({i, m_depth[i] == 1 ? 0 : std::uint32_t(state[m_parent[i]]), 0});
                }
                i = to < 0 ? m_end[i] : i + 1;
            }
        }
        struct region_cache
        {
            std::mutex mutex;
            struct kept
            {
                std::shared_ptr<const region_walk> walk;
                std::uint64_t used;  // the uses' count when last used
            };
            std::unordered_map<std::string, kept> walks;
            std::uint64_t uses = 0;
            std::unordered_map<std::string, std::shared_ptr<const class_runs>> runs;  // by the class's bits
            std::unordered_map<std::string, std::shared_ptr<const std::vector<std::uint64_t>>> later;  // likewise
        };

        std::shared_ptr<const vocabulary> m_vocab;
        std::vector<unsigned char> m_byte;
        std::vector<std::uint16_t> m_depth;
        std::vector<std::uint32_t> m_end;
        std::vector<std::uint32_t> m_parent;
        std::vector<std::uint32_t> m_first;
        std::vector<std::uint32_t> m_count;
        std::vector<token_id> m_ids;
        // by node: its one token t as 2t + 1, 0 for none, `several` for more (mark_tokens)
        std::vector<std::uint32_t> m_marks;
        static constexpr std::uint32_t several = 2;
        std::array<std::int32_t, 256> m_root{};
        std::array<std::size_t, 256> m_reading{};  // by byte: the nodes that read it
        std::vector<std::uint32_t> m_by_level;     // the nodes by depth, each depth in preorder
        std::vector<std::uint32_t> m_level_begin;  // depth d's are m_by_level[m_level_begin[d - 1], m_level_begin[d])
        std::vector<std::uint32_t> m_node_of;      // by token id: the node its bytes end at (nodes() for a special one)
        std::size_t m_longest = 0;
        bool m_all_bytes = false;
        std::shared_ptr<region_cache> m_regions = std::make_shared<region_cache>();  // shared by copies
    };

}

#endif
