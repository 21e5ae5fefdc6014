// xsampler/detail/constraint_state.hpp — one request over a compiled grammar: the text read, its mask, its budget. (xsampler, BSD-3-Clause)
//
// class constraint (constraint.hpp states the contract): its interface
// (mask, advance, rollback, fork, budgets, apply as a processor) and state
// (a matcher, the tokens read, the current masks' holders, the cache keys'
// scratch). Its walks are defined beside it: the cache keys
// (constraint_keys.hpp), the masks (constraint_masks.hpp), the trie walk
// (constraint_walk.hpp) and its regions (constraint_regions.hpp), the
// budgets (constraint_budgets.hpp); include constraint.hpp.
#ifndef XSAMPLER_DETAIL_CONSTRAINT_STATE_HPP
#define XSAMPLER_DETAIL_CONSTRAINT_STATE_HPP

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../candidates.hpp"
#include "../matcher.hpp"
#include "../types.hpp"
#include "../vocabulary.hpp"
#include "compiled_grammar.hpp"
#include "token_costs.hpp"

namespace xsampler
{
    namespace detail
    {
        /// A text for a message: at most 200 bytes, its end (tail) or start, "..." for the rest.
        inline std::string shortened(const std::string& s, bool tail = false)
        {
            if (s.size() <= 200)
            {
                return s;
            }
            return tail ? "..." + s.substr(s.size() - 200) : s.substr(0, 200) + "...";
        }
    }

    class constraint
    {
        friend class compiled_grammar;

    public:
        // Not restricts_set: keep_in keeps a fused top-k pending when that is
        // exact (candidates.hpp), so a chain's top_k after a constraint still
        // runs in the row's validation pass.

        explicit constraint(std::shared_ptr<const compiled_grammar> g) : m_g(std::move(g)), m_matcher(check(m_g))
        {
            reset();
        }

        const std::string& name() const noexcept { return m_g->name(); }
        const vocabulary& vocab() const noexcept { return m_g->vocab(); }
        const compiled_grammar& compiled() const noexcept { return *m_g; }
        std::shared_ptr<const compiled_grammar> shared_compiled() const noexcept { return m_g; }

        /// Back to the empty text (the budget stays).
        void reset()
        {
            m_matcher.reset();
            m_starts.clear();
            m_ids.clear();
            m_ended = false;
        }
        /// A copy that diverges from here.
        constraint fork() const { return *this; }

        /// The tokens read so far (eos included).
        std::size_t tokens() const noexcept { return m_ids.size(); }
        const std::vector<token_id>& read() const noexcept { return m_ids; }
        bool ended() const noexcept { return m_ended; }
        bool complete() const { return m_ended || m_matcher.complete(); }
        bool can_complete() const { return m_ended || m_budget == 0 || shortest_completion() <= left(); }

        /// The shortest completion's text from here (no eos), least in byte order.
        std::string completion() const { return m_ended ? std::string() : m_matcher.completion(); }
        /// Tokens to complete from here, eos included (0 after eos): the
        /// completion spelt segment by segment (detail/token_costs.hpp), the
        /// count budgets keep; without byte fallback, or over counted lexemes
        /// (which refuse budgets), the fewest tokens that spell completion().
        std::size_t shortest_completion() const
        {
            if (m_ended)
            {
                return 0;
            }
            if (!m_g->index().all_bytes() || m_g->rules()->has_units())
            {
                return fewest(completion()) + 1;  // (token_costs knows no counted lexeme)
            }
            return std::size_t(m_matcher.cheapest(m_g->token_costs())) + 1;
        }

        /// Budget-aware completion: at most max_tokens tokens in all, eos
        /// included, counted from the empty text (0: no budget). Fails if
        /// the shortest completion from the text read so far does not fit.
        void set_budget(std::size_t max_tokens)
        {
            if (max_tokens != 0)
            {
                if (m_g->rules()->has_distinct())
                {
                    // the costs the budget keeps are the grammar's without the marks: a cheapest completion may repeat an item
                    throw invalid_parameter(name() + ": a budget over a grammar with distinct items (uniqueItems over "
                                                     "strings, integers or objects; minProperties over keys a schema does not list) is not supported");
                }
                if (m_g->rules()->has_units())
                {
                    // the token costs are by state; a counted lexeme's depend on its count too
                    throw invalid_parameter(name() + ": a budget over a grammar with counted lexemes (a pattern with "
                                                     "minLength/maxLength, or integers' digits, past the product limit) is not supported");
                }
                if (!m_g->index().all_bytes())
                {
                    // the budget's checks follow the completion byte by byte where they must
                    throw invalid_parameter(name() + ": a budget needs every single byte to be a token of the "
                                                     "vocabulary (byte fallback); this one lacks some");
                }
                // from the text read so far (all of it, at the start)
                const std::size_t need = m_ended ? 0 : std::size_t(m_matcher.cheapest(m_g->token_costs())) + 1;
                if (need + m_ids.size() > max_tokens)
                {
                    throw invalid_parameter(name() + ": no completion fits in " + std::to_string(max_tokens) +
                                            " tokens: the shortest takes " + std::to_string(need) +
                                            (m_ids.empty() ? std::string() : " after the " + std::to_string(m_ids.size()) + " read") +
                                            " (eos included), \"" + detail::shortened(m_matcher.completion()) + "\"");
                }
            }
            m_budget = max_tokens;
        }
        std::size_t budget() const noexcept { return m_budget; }

        /// The allowed next tokens (see the top of this file).
        const token_set& mask()
        {
            if (m_ended || (m_budget != 0 && left() == 0))
            {
                static const token_set none;
                return none;
            }
            position_key(m_key);
            const auto found = m_g->positions(m_key, [&] { return positions_of_kernel(); });
            const bool done = m_matcher.complete();
            m_current = found;
            const token_set* out = &found->allowed;
            if (!found->roots.empty())
            {
                m_ctx_key = m_key;
                context_key(m_ctx_key);
                m_extras = m_g->contexts(m_ctx_key, [&] {
                    compiled_grammar::context_tokens c = walk_context(*found);
                    if (!c.words.empty())  // many: the mask itself kept, not or-ed at every step
                    {
                        std::vector<std::uint64_t> words = found->allowed.words();
                        for (std::size_t w = 0; w < words.size(); ++w)
                        {
                            words[w] |= c.words[w];
                        }
                        c.joined = token_set(std::move(words));
                    }
                    return c;
                });
                if (!m_extras->words.empty())
                {
                    out = &m_extras->joined;
                }
                else if (!m_extras->ids.empty() || done)
                {
                    m_scratch = found->allowed;
                    for (const token_id t : m_extras->ids)
                    {
                        m_scratch.insert(t);
                    }
                    out = &m_scratch;
                }
            }
            if (done)
            {
                if (out != &m_scratch)
                {
                    m_scratch = *out;
                    out = &m_scratch;
                }
                for (const token_id e : vocab().eos())
                {
                    m_scratch.insert(e);
                }
            }
            if (!m_g->distinct_tokens().empty())
            {
                out = &without_repeats(*out, in_distinct_array() ? m_g->distinct_tokens() : m_g->distinct_opening_tokens());
                out = &without_dead_ends(*out);
            }
            if (m_budget != 0)
            {
                return budgeted(*out);
            }
            return *out;
        }

        /// Reads one token (see the top of this file).
        void advance(token_id id)
        {
            const vocabulary& v = vocab();
            if (id < 0 || std::size_t(id) >= v.size())
            {
                throw invalid_parameter(name() + ": token id " + std::to_string(id) + " is outside the vocabulary of " +
                                        std::to_string(v.size()));
            }
            if (m_ended)
            {
                throw invalid_parameter(name() + ": token " + std::to_string(id) + " after eos");
            }
            if (v.special(id))
            {
                if (std::find(v.eos().begin(), v.eos().end(), id) == v.eos().end())
                {
                    throw invalid_parameter(name() + ": token " + std::to_string(id) + " is special and not eos");
                }
                if (!m_matcher.complete())
                {
                    throw invalid_parameter(name() + ": eos (token " + std::to_string(id) +
                                            ") before the text is complete: \"" + detail::shortened(text(), true) + "\"");
                }
                m_starts.push_back(m_matcher.position());
                m_ids.push_back(id);
                m_ended = true;
                return;
            }
            m_starts.reserve(m_starts.size() + 1);
            m_ids.reserve(m_ids.size() + 1);
            const std::size_t before = m_matcher.position();
            rewind undo{m_matcher, before};
            const std::string& b = v.bytes(id);
            if (m_matcher.feed(b) != b.size())
            {
                throw invalid_parameter(name() + ": token " + std::to_string(id) + " (\"" + detail::shortened(b) +
                                        "\") does not continue the text \"" + detail::shortened(text(), true) + "\"");
            }
            // under a budget, as the mask: a completion and eos must fit in the tokens after it
            if (m_budget != 0 && (left() < 2 || m_matcher.cheapest(m_g->token_costs()) > left() - 2))
            {
                throw invalid_parameter(name() + ": token " + std::to_string(id) + " (\"" + detail::shortened(b) +
                                        "\") leaves no completion within the budget (" + std::to_string(left()) +
                                        " tokens left, eos included)");
            }
            undo.keep();
            m_starts.push_back(before);
            m_ids.push_back(id);
        }

        void rollback(std::size_t k)
        {
            if (k > m_ids.size())
            {
                throw invalid_parameter(name() + ": rollback of " + std::to_string(k) + " tokens, only " +
                                        std::to_string(m_ids.size()) + " read");
            }
            if (k == 0)
            {
                return;
            }
            const std::size_t to = m_starts[m_ids.size() - k];
            m_matcher.pop(m_matcher.position() - to);
            m_starts.resize(m_ids.size() - k);
            m_ids.resize(m_ids.size() - k);
            m_ended = false;
        }

        /// The text read so far.
        std::string text() const { return vocab().decode(m_ids); }

        /// The processor: sync with the history, then keep the mask's tokens.
        template <class T>
        void apply(candidates<T>& c, const token_history& history)
        {
            if (c.vocab() < vocab().size())
            {
                throw invalid_parameter(name() + ": the row has " + std::to_string(c.vocab()) +
                                        " tokens, fewer than the vocabulary's " + std::to_string(vocab().size()));
            }
            sync(history.generated());
            c.keep_in(mask(), name());
        }

    private:
        static std::shared_ptr<const grammar_automaton> check(const std::shared_ptr<const compiled_grammar>& g)
        {
            if (!g)
            {
                throw invalid_parameter("constraint: no compiled grammar");
            }
            return g->rules();
        }

        std::size_t left() const noexcept { return m_budget > m_ids.size() ? m_budget - m_ids.size() : 0; }

        bool in_distinct_array() const;
        static constexpr std::size_t max_looked = 256;
        const token_set& without_repeats(const token_set& in, const std::vector<token_id>& suspects);

        const token_set& without_dead_ends(const token_set& in);

        void sync(span<const token_id> generated)
        {
            std::size_t common = 0;
            const std::size_t n = std::min(generated.size(), m_ids.size());
            while (common < n && generated[common] == m_ids[common])
            {
                ++common;
            }
            rollback(m_ids.size() - common);
            for (std::size_t i = common; i < generated.size(); ++i)
            {
                advance(generated[i]);
            }
        }

        std::uint32_t clamped(std::size_t bound, std::uint32_t count) const noexcept;
        void put_item(std::string& key, const earley_item& x) const;

        void position_key(std::string& key);

        void context_key(std::string& key);

        std::vector<earley_item> kernel_reps() const;
        /// A matcher from the kernel's positions alone: one item per group.
        matcher local_chart() const { return local_chart(kernel_reps()); }
        matcher local_chart(const std::vector<earley_item>& reps) const;

        static bool plain(const grammar_automaton& a, const earley_item& x) noexcept;
        static bool plain_step(const grammar_automaton& a, const earley_item& x, unsigned char b, earley_item& y,
                               bool& dead) noexcept;

        struct set_classes;

        /// Walks the trie through `local`: on_token(node, popped before its
        /// last byte, items, generation, set) where it lives (generation[k]: a
        /// number for the chart's set at depth k, new each time it is built;
        /// set: the generation of the set the items are, or no_set); returns
        /// the subtrees where it dies after a kernel rule finished (decided by
        /// the context). While a set is one plain item, its children are a
        /// table look-up each and the chart is filled in only when the walk
        /// reaches something else. A byte that leads a set to its own class
        /// (set_classes: a name's next letter) is not stepped: the node is the
        /// set again ("virtual"), its items the chart's top, until a byte of
        /// another class makes the chart repeat() the set down to the node.
        ///
        /// With `starts`, only the subtrees below those nodes are walked (the
        /// walk resumed where a region left: walk_positions), each from the
        /// plain item given for the set before the node's byte, or (chart)
        /// from the chart stepped along the bytes above it.
        struct resume
        {
            std::uint32_t node;
            earley_item before;
            bool chart;
        };
        /// on_token's last argument: the generation of the chart's set that
        /// the items are (equal for every node that reads the same set), or
        /// this for a plain item outside the chart.
        static constexpr std::uint32_t no_set = ~std::uint32_t(0);
        /// With `on_run` (not no_runs), on_token only marks tokens, and a run
        /// of a class whose bytes hold a class_runs index (the bytes of a
        /// looping state's own, every one leading the set to itself) is read
        /// by its tokens: on_run(items, set) gives the bitset to mark them in
        /// (nullptr: none of them), then the nodes where a byte leaves the
        /// index's class are read one by one.
        struct no_runs
        {
        };
        template <class OnToken, class OnRun = no_runs>
        std::vector<std::uint32_t> walk_local(matcher& local, OnToken&& on_token,
                                              const std::vector<resume>* starts = nullptr, OnRun&& on_run = {}) const;

        void prime_items(std::size_t most) const;
        compiled_grammar::position_masks positions_of_kernel() const;
        compiled_grammar::position_masks walk_positions(const std::vector<earley_item>& reps) const;

        /// A position that is a region (region_of: one plain item x; frame_of:
        /// x a counted rule's item just begun, whose iterations may number
        /// min..most): the index's walk of it, its states, and where the walk
        /// resumes below its exits (through the chart for a frame, where the
        /// tail reads: an iteration's end with the minimum done, or the first
        /// byte, where kernel items in the tail's states read too).
        struct region_view
        {
            std::shared_ptr<const region_walk> walked;
            std::vector<std::uint32_t> state_of;
            earley_item x{};
            bool frame = false, counted = false;  // counted: x a counted kernel item at an iteration's start
            std::size_t min = 0, most = 0, left = 0;  // left: iterations x may still read
            std::array<bool, 256> leaves{};           // counted: the bytes that may follow x's rule (counted_roots)
            std::vector<resume> resumes;

            /// Whether inside token t is read from x (counted: at most `left` iterations).
            bool reads(token_id t) const noexcept
            {
                const auto k = std::size_t(t);
                return (walked->inside[k / 64] >> (k % 64) & 1) != 0 && (!(frame || counted) || walked->need[k] <= left);
            }
            /// The item after inside token t, and whether x could end before its
            /// last byte (a counted kernel item whose minimum was met: a pop).
            earley_item after(token_id t, bool& popped) const noexcept
            {
                const auto k = std::size_t(t);
                earley_item y{state_of[walked->last[k]], x.origin, x.count};
                popped = false;
                if (frame || counted)
                {
                    const std::size_t ended = walked->need[k] - std::size_t(walked->last[k] != 0);
                    const std::size_t count = std::size_t(x.count) + ended;
                    y.count = std::uint32_t(most == ~std::size_t(0) ? std::min(count, min) : count);
                    const std::size_t before = ended - std::size_t(walked->last[k] == 0);  // ended before its last byte
                    popped = counted && before > 0 && x.count + before >= min;
                }
                return y;
            }
        };
        bool as_region(const matcher& local, region_view& v) const;

        static bool counted_kernel(const matcher& local, earley_item& x, std::array<bool, 256>& leaves);
        static std::vector<std::uint32_t> counted_roots(const vocabulary_index& ix, const region_view& v);

        static bool in_region(const grammar_automaton& a, std::uint32_t s) noexcept;
        static bool region_of(const grammar_automaton& a, std::uint32_t start, byte_region& region,
                              std::vector<std::uint32_t>& state_of);

        /// Numbers a region's states breadth first from `start` (state_of)
        /// and writes their runs: state k's byte b (t the automaton's next
        /// state, or -1) goes where to(k, s, b, t) says: dead, exit, end,
        /// `keep` (t, a state of the region) or `fail` (not a region: false,
        /// as past 4,096 states).
        static constexpr std::int32_t keep = -10, fail = -11;
        template <class To>
        static bool number_region(const grammar_automaton& a, std::uint32_t start, byte_region& region,
                                  std::vector<std::uint32_t>& state_of, To&& to);

        static bool frame_of(const matcher& local, byte_region& region, std::vector<std::uint32_t>& state_of, earley_item& x);

        static bool counted_body(const grammar_automaton& a, std::uint32_t rule, const std::array<bool, 256>& leaves,
                                 byte_region& region, std::vector<std::uint32_t>& state_of);

        compiled_grammar::position_costs walk_costs() const;

        template <class Cost>
        static void sort_by_cost(std::vector<std::pair<Cost, token_id>>& v);

        /// walk_context's on_token when only the tokens are wanted.
        struct no_tokens
        {
        };
        compiled_grammar::context_tokens walk_context(const compiled_grammar::position_masks& p) const;
        template <class OnToken>
        compiled_grammar::context_tokens walk_context(const compiled_grammar::position_masks& p, OnToken&& on_token) const;

        /// The least cost in tokens of finishing after one of a set's items
        /// (walk_local's on_token arguments), kept for the set last asked: a
        /// walk reads one set at many nodes (no_set: a plain item, computed).
        struct cheapest
        {
            const detail::token_costs& tc;
            std::uint32_t set = no_set;
            std::uint64_t best = detail::automaton::infinite;
            std::uint64_t operator()(const earley_item* first, const earley_item* last, std::uint32_t of, matcher& m)
            {
                if (of == no_set || of != set)
                {
                    best = detail::automaton::infinite;
                    for (const earley_item* x = first; x != last; ++x)
                    {
                        best = std::min(best, m.cost(*x, tc));
                    }
                    set = of;
                }
                return best;
            }
        };

        std::vector<std::uint64_t> walk_exact(std::uint64_t target) const;

        const token_set& exact(std::uint64_t target, bool done);
        /// Tokens a budgeted step reads through the chart as they are: the
        /// context's rather than walking their subtrees for costs the context
        /// keeps; the popping ones without first looking for a later byte the
        /// context may read.
        static constexpr std::size_t max_checks = 64;
        /// Whether a budgeted step reads n tokens through the chart one by one
        /// (max_checks, or up to 1/32 of the vocabulary) rather than walking
        /// the whole trie through it.
        bool few_checks(std::size_t n) const noexcept { return n <= max_checks || n * 32 <= vocab().size(); }

        template <class Fit>
        std::size_t fits_after(std::vector<token_id> tokens, std::uint64_t target, Fit&& fit) const;

        const token_set& budgeted(const token_set& allowed);

        std::size_t fewest(const std::string& text) const;

        std::shared_ptr<const compiled_grammar> m_g;
        mutable matcher m_matcher;
        /// Back to a position when the scope ends (however it ends), unless kept.
        struct rewind
        {
            matcher& m;
            std::size_t to;
            bool kept = false;
            void keep() noexcept { kept = true; }
            ~rewind()
            {
                if (!kept)
                {
                    m.pop(m.position() - to);
                }
            }
        };
        std::vector<std::size_t> m_starts;  // the matcher's position before each token read
        std::vector<token_id> m_ids;
        bool m_ended = false;
        std::size_t m_budget = 0;
        std::shared_ptr<const compiled_grammar::position_masks> m_current;  // alive while a step uses it
        std::shared_ptr<const compiled_grammar::context_tokens> m_extras;
        token_set m_scratch, m_budgeted;
        std::vector<std::string> m_rests;  // without_dead_ends' scratch
        bool m_unfinished = false, m_quoted = false;
        std::string m_key, m_ctx_key;
        std::vector<earley_item> m_kernel;
        std::vector<std::uint32_t> m_group, m_rep;
        bool m_ctx_count_free = false;  // context_key's: every count in the key has met its minimum
        std::vector<std::string> m_parts;
    };
}

#endif
