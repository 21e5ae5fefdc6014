// xsampler_maskbench — MaskBench's method (github.com/guidance-ai/jsonschemabench,
// maskbench/) over real JSON schemas and llama.cpp's GBNF grammars: does a
// constraint accept exactly its language, and what does it cost per token?
// A measurement tool: it asserts nothing about time, it reports.
//
// Data, read at run time and never copied into the repository:
//   --schemas FILE.jsonl  one line per schema file, as scripts/maskbench
//                         prepares it: {"group", "name", "schema",
//                         "tests": [{"text", "valid"}]}, text being
//                         json.dumps(instance) (separators ", " and ": ")
//   --gbnf DIR            *.gbnf grammars; their texts are made here: random
//                         walks of the grammar's matcher (random live bytes,
//                         ASCII ones preferred, then the shortest completion)
//                         and a few hand-written texts, valid and invalid, for
//                         the grammars named json, arithmetic, chess, list,
//                         c, english and japanese
//   --vocab gpt2|llama3   GPT-2's 50,257 tokens, texts encoded by the
//                         library's GPT-2 BPE (tokenizer.hpp); or Llama 3's
//                         128,256, texts tokenized greedily by the longest
//                         vocabulary match (the library has no Llama 3
//                         encoder; a valid tokenization, not Llama 3's own)
//
// Per grammar (a schema file, or a .gbnf file):
//   compile   json_schema_grammar (or parse_gbnf) and compiled_grammar, timed
//             together; an exception is a compile error, ranked by reason
//             (the message's "unsupported keyword 'X'", or its text without
//             the location)
//   walk      each test text: a fresh constraint on the compiled grammar;
//             per token mask() is timed, the token looked up in it, then
//             advance(token) timed; eos last. A valid text with a token (or
//             eos) outside the mask is a validation error, an invalid text
//             read to the end with eos allowed an invalidation error. The
//             first text of the freshly compiled grammar is the cold pass
//             (empty caches); all texts are then walked again, each with a
//             new constraint on the same compiled grammar: the warm pass.
//             Before it, one constraint's creation on the compiled grammar
//             is timed (the least of 5) and its allocations counted
//             Consistency is checked as it goes: a token outside the mask
//             must make advance() throw, eos in the mask exactly when
//             complete()
//   generate  N times per chain (temperature 1; top_k 40, top_p 0.95,
//             temperature 0.8), each once without a budget and once
//             budget-aware (set_budget(max_tokens) when shortest_completion()
//             fits), through xsampler::generate over a random-logits model
//             (a fixed N(0, 3^2) row from a seeded philox4x32, rotated by the
//             step and the last token, as tests/test_constraints.cpp's
//             rotating_model). The constraint's own cost per step is timed
//             inside the chain: it runs wrapped in a processor that, at each
//             step, times advance() by the token just drawn and mask() (the
//             step cost is their sum), and keep_in() of the mask on the row
//             apart; the model, the other stages and the draw are outside
//             the timed spans. Then each step is replayed on its row: the
//             whole chain's call with the step's mask first and without it,
//             twice each, interleaved, least times: what applying the mask
//             adds to the chain (it may be negative: a mask that keeps few
//             tokens leaves the filters little to do), and with the mask and
//             advance the constraint's whole cost per step. Every eos-ended
//             output goes to --out (JSONL)
//             for scripts/maskbench to validate with jsonschema; a GBNF
//             output is checked here (a fresh matcher reads all its bytes and
//             is complete). A budget-aware run that does not end with eos is
//             an engine failure.
// Times are steady_clock spans around single calls (each includes one clock
// read, ~20 ns); a call that takes over 50 µs is read as the thread's CPU time
// over it instead (CLOCK_THREAD_CPUTIME_ID), so that a preemption on a shared
// machine (a whole 4 ms scheduler slice) is not counted as the engine's; the
// report says how many calls that was and how much time it removed.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <time.h>

#include <new>

#include <nlohmann/json.hpp>
#include <xtensor/xtensor.hpp>

#include <xsampler/gbnf.hpp>
#include <xsampler/json_schema.hpp>
#include "../tool/tokenizer.hpp"
#include <xsampler/xsampler.hpp>

// Bytes requested from operator new (the matcher's creation is weighed by it;
// one thread measures at a time, so a plain counter).
static std::size_t g_allocated = 0;

void* operator new(std::size_t n)
{
    g_allocated += n;
    if (void* p = std::malloc(n == 0 ? 1 : n))
    {
        return p;
    }
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace
{
    using json = nlohmann::ordered_json;
    using clock_type = std::chrono::steady_clock;
    using xsampler::token_id;

    double micros(clock_type::time_point a, clock_type::time_point b)
    {
        return std::chrono::duration<double, std::micro>(b - a).count();
    }

    /// Keeps a result the optimiser might otherwise drop.
    void benchmark_sink(token_id id)
    {
        static volatile token_id sink;
        sink = id;
    }

    double thread_cpu_us()
    {
        timespec ts{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return double(ts.tv_sec) * 1e6 + double(ts.tv_nsec) / 1e3;
    }

    /// How many spans were long enough to be read as CPU time, and the wall
    /// time that removed (another process running in the span).
    struct span_counters
    {
        std::size_t long_spans = 0;
        double removed_us = 0;
    };
    span_counters& spans()
    {
        static span_counters c;
        return c;
    }

    /// One call's time: wall time (steady_clock) for a short span; a span of
    /// more than `long_us` is read as the thread's CPU time over it instead
    /// (CLOCK_THREAD_CPUTIME_ID, read just outside the wall span, ~0.3 µs),
    /// so that a preemption on a shared machine (a 4 ms scheduler slice) is
    /// not counted as the engine's.
    class span_timer
    {
    public:
        static constexpr double long_us = 50.0;
        void start()
        {
            m_cpu = thread_cpu_us();
            m_t0 = clock_type::now();
        }
        double stop() const
        {
            const double wall = micros(m_t0, clock_type::now());
            if (wall < long_us)
            {
                return wall;
            }
            const double cpu = thread_cpu_us() - m_cpu;
            spans().long_spans += 1;
            if (cpu < wall)
            {
                spans().removed_us += wall - cpu;
                return cpu;
            }
            return wall;
        }

    private:
        double m_cpu = 0;
        clock_type::time_point m_t0;
    };

    /// The text with each byte that is not part of a well-formed UTF-8
    /// sequence written as \xNN (a token may end inside a character).
    std::string utf8_or_escaped(const std::string& s)
    {
        std::string out;
        for (std::size_t i = 0; i < s.size();)
        {
            const auto b = static_cast<unsigned char>(s[i]);
            std::size_t n = b < 0x80 ? 1 : b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
            bool ok = n != 0 && i + n <= s.size();
            for (std::size_t k = 1; ok && k < n; ++k)
            {
                const auto c = static_cast<unsigned char>(s[i + k]);
                ok = (c & 0xC0) == 0x80;
                if (ok && k == 1)  // overlong forms, surrogates, past U+10FFFF
                {
                    ok = !(b == 0xE0 && c < 0xA0) && !(b == 0xED && c >= 0xA0) && !(b == 0xF0 && c < 0x90) &&
                         !(b == 0xF4 && c >= 0x90);
                }
            }
            if (ok)
            {
                out.append(s, i, n);
                i += n;
            }
            else
            {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\x%02X", b);
                out += buf;
                ++i;
            }
        }
        return out;
    }

    /// Bytes for a message: printable ASCII as is, the rest escaped; at most
    /// `keep` bytes, the end of the text when `tail`.
    std::string shown(const std::string& s, std::size_t keep = 60, bool tail = true)
    {
        std::string part = s;
        std::string pre, post;
        if (part.size() > keep)
        {
            if (tail)
            {
                part = part.substr(part.size() - keep);
                pre = "...";
            }
            else
            {
                part = part.substr(0, keep);
                post = "...";
            }
        }
        std::string out = pre;
        for (const char ch : part)
        {
            const auto b = static_cast<unsigned char>(ch);
            if (b == '\n')
            {
                out += "\\n";
            }
            else if (b == '\t')
            {
                out += "\\t";
            }
            else if (b == '\\')
            {
                out += "\\\\";
            }
            else if (b < 0x20 || b == 0x7F)
            {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\x%02X", b);
                out += buf;
            }
            else
            {
                out += ch;  // bytes from 0x80: kept where they are well-formed UTF-8 (below)
            }
        }
        return utf8_or_escaped(out) + post;
    }

    // ---------------------------------------------------------------- statistics

    /// A set of times (µs), and the slowest few with where they happened.
    class timings
    {
    public:
        static constexpr std::size_t kept = 8;

        /// where() is called only for a time that enters the slowest few.
        template <class Where>
        void add(double us, Where&& where)
        {
            m_values.push_back(us);
            if (m_worst.size() < kept || us > m_worst.back().first)
            {
                m_worst.emplace_back(us, where());
                std::sort(m_worst.begin(), m_worst.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
                if (m_worst.size() > kept)
                {
                    m_worst.pop_back();
                }
            }
        }
        void add(double us)
        {
            add(us, [] { return std::string(); });
        }

        std::size_t size() const noexcept { return m_values.size(); }
        const std::vector<std::pair<double, std::string>>& worst() const noexcept { return m_worst; }

        /// Nearest-rank percentile, p in (0, 1]; 0 for no values.
        double percentile(double p) const
        {
            if (m_values.empty())
            {
                return 0.0;
            }
            sort();
            const auto rank = std::size_t(std::ceil(p * double(m_sorted.size())));
            return m_sorted[std::min(m_sorted.size(), std::max<std::size_t>(rank, 1)) - 1];
        }
        double mean() const
        {
            double s = 0;
            for (const double v : m_values)
            {
                s += v;
            }
            return m_values.empty() ? 0.0 : s / double(m_values.size());
        }

    private:
        void sort() const
        {
            if (m_sorted.size() != m_values.size())
            {
                m_sorted = m_values;
                std::sort(m_sorted.begin(), m_sorted.end());
            }
        }
        std::vector<double> m_values;
        mutable std::vector<double> m_sorted;
        std::vector<std::pair<double, std::string>> m_worst;
    };

    /// The times of one kind of step: mask(), advance(), both.
    struct step_timings
    {
        timings mask, advance, step;
    };

    /// What one suite (schemas, or GBNF grammars) measured.
    struct suite_timings
    {
        timings compile;
        step_timings cold;        // the first text of each freshly compiled grammar
        step_timings first_pass;  // every text of the first pass (the cold one included)
        step_timings warm;        // the second pass, new constraints on the same compiled grammar
        step_timings gen_plain;   // generation without a budget: advance + mask per step
        step_timings gen_budget;  // budget-aware generation
        timings keep_in[2];       // applying the mask to the row (keep_in), per chain: temperature 1, top-k chain
        timings applied[2];       // what the mask adds to the chain's call (with it − without, the step's row)
        timings step_applied[2];  // mask + advance + what applying the mask adds: the constraint's whole cost
        timings budget_setup;     // shortest_completion() + set_budget() on a fresh constraint
        timings create;           // a constraint (its matcher) made on the compiled grammar, warm
        timings create_bytes;     // the bytes that creation allocates
        timings gen_total;        // a whole generation's wall time per token (model and sampler included)
    };

    /// Counts per group (a schema directory, or "gbnf").
    struct group_counts
    {
        std::size_t files = 0, compiled = 0, compile_errors = 0;
        std::size_t passed = 0;  // compiled, and every text decided right (MaskBench's "passes")
        std::size_t valid_accepted = 0, valid_rejected = 0, invalid_accepted = 0, invalid_rejected = 0;
        std::size_t generations = 0, eos_ended = 0;
        std::size_t budget_runs = 0, budget_eos = 0, budget_refused = 0;
        std::size_t failures = 0;  // engine errors: exceptions, inconsistencies, bad outputs
    };

    /// Something to report one by one.
    struct finding
    {
        std::string kind;  // validation_error, invalidation_error, inconsistency, engine_error, ...
        std::string group, name;
        std::string detail;
    };

    // ---------------------------------------------------------------- tokenizers

    class text_tokenizer
    {
    public:
        virtual ~text_tokenizer() = default;
        virtual std::vector<token_id> encode(const std::string& text) = 0;
    };

    class gpt2_text_tokenizer : public text_tokenizer
    {
    public:
        explicit gpt2_text_tokenizer(const std::string& dir) : m_bpe(dir) {}
        std::vector<token_id> encode(const std::string& text) override { return m_bpe.encode(text); }

    private:
        xsampler::gpt2_tokenizer m_bpe;
    };

    /// Greedy longest match over the vocabulary's trie: a valid tokenization
    /// (its tokens' bytes are the text), not the model's own BPE.
    class longest_match_tokenizer : public text_tokenizer
    {
    public:
        explicit longest_match_tokenizer(std::shared_ptr<const xsampler::vocabulary_index> index)
            : m_index(std::move(index))
        {
        }
        std::vector<token_id> encode(const std::string& text) override
        {
            const xsampler::vocabulary_index& ix = *m_index;
            std::vector<token_id> ids;
            for (std::size_t i = 0; i < text.size();)
            {
                std::int32_t at = ix.child(xsampler::vocabulary_index::none, static_cast<unsigned char>(text[i]));
                std::int32_t best = -1;
                std::size_t best_end = i;
                for (std::size_t j = i + 1; at >= 0; ++j)
                {
                    if (ix.has_token(std::uint32_t(at)))
                    {
                        best = at;
                        best_end = j;
                    }
                    if (j == text.size())
                    {
                        break;
                    }
                    at = ix.child(std::uint32_t(at), static_cast<unsigned char>(text[j]));
                }
                if (best < 0)
                {
                    throw std::runtime_error("longest match: no token starts with byte " +
                                             std::to_string(static_cast<unsigned char>(text[i])));
                }
                token_id id = -1;
                ix.for_each_token(std::uint32_t(best), [&](token_id t) {
                    if (id < 0)
                    {
                        id = t;
                    }
                });
                ids.push_back(id);
                i = best_end;
            }
            return ids;
        }

    private:
        std::shared_ptr<const xsampler::vocabulary_index> m_index;
    };

    // ---------------------------------------------------------------- the model

    /// A fixed random row (N(0, 3^2) from philox4x32(seed, 3)), rotated by an
    /// amount that depends on the step and the last token.
    struct rotating_model
    {
        std::vector<float> base;
        xt::xtensor<float, 1> row;

        rotating_model(std::size_t vocab, std::uint64_t seed) : base(vocab)
        {
            xsampler::philox4x32 rng(seed, 3);
            for (auto& x : base)
            {
                x = float(xsampler::normal(3.0, rng));
            }
            row.resize({vocab});
        }
        xt::xtensor<float, 1>& operator()(xsampler::token_span prefix)
        {
            const std::size_t n = base.size();
            const std::size_t shift =
                (prefix.size() * 7919 + (prefix.empty() ? 0 : std::size_t(prefix[prefix.size() - 1])) * 104729) % n;
            std::copy(base.begin() + std::ptrdiff_t(shift), base.end(), row.begin());
            std::copy(base.begin(), base.begin() + std::ptrdiff_t(shift), row.begin() + std::ptrdiff_t(n - shift));
            return row;
        }
    };

    /// Where a generation's constraint time goes, step by step.
    struct generation_times
    {
        std::vector<double> mask, advance, keep_in, applied;
        std::vector<std::size_t> allowed;  // the mask's size
        std::vector<xsampler::token_set> masks;
    };

    /// A step's mask, replayed on the chain (the set the pointer names).
    struct replayed_mask
    {
        const xsampler::token_set* const* mask;
        template <class T>
        void apply(xsampler::candidates<T>& cand, const xsampler::token_history&) const
        {
            cand.keep_in(**mask, "mask");
        }
    };

    /// The constraint as the chain's first stage, with its calls timed: at
    /// each step advance() by the token the loop appended (generate adds one
    /// per step), then mask(), then keep_in on the row. What
    /// constraint::apply does, split so that each call is timed alone.
    struct timed_constraint
    {
        static constexpr const char* name = "constraint";
        xsampler::constraint c;
        generation_times* times;

        template <class T>
        void apply(xsampler::candidates<T>& cand, const xsampler::token_history& history)
        {
            const auto generated = history.generated();
            span_timer t;
            double advanced = -1.0;
            if (generated.size() == c.tokens() + 1)
            {
                t.start();
                c.advance(generated[generated.size() - 1]);
                advanced = t.stop();
            }
            else if (generated.size() != c.tokens())
            {
                throw std::logic_error("timed_constraint: the history moved by more than one token");
            }
            t.start();
            const xsampler::token_set& m = c.mask();
            const double masked = t.stop();
            t.start();
            cand.keep_in(m, c.name());
            const double kept = t.stop();
            times->advance.push_back(advanced);
            times->mask.push_back(masked);
            times->keep_in.push_back(kept);
            times->allowed.push_back(m.size());
            times->masks.push_back(m);
        }
    };

    // ---------------------------------------------------------------- hand-written texts

    struct hand_texts
    {
        std::vector<std::string> valid, invalid;
    };

    /// A few texts per grammar, written for this harness.
    hand_texts hand_written(const std::string& grammar)
    {
        if (grammar == "json")
        {
            return {{"{}", "{\"a\": 1}", "{\"name\": \"Ada\", \"tags\": [\"x\", \"y\"], \"n\": -1.5e3, \"ok\": true}",
                     "{\"nested\": {\"list\": [1, 2, {\"k\": null}], \"s\": \"tab\\tquote\\\"\"}}",
                     "{\"unicode\": \"caf\xC3\xA9 \\u00e9\"}", "{\n  \"pretty\": [\n    false\n  ]\n}"},
                    {"[1, 2]", "{\"a\": }", "{\"a\" 1}", "{'a': 1}", "{\"a\": 01}", "{\"a\": tru}"}};
        }
        if (grammar == "arithmetic")
        {
            return {{"1+2=3\n", "2*3=6\n", "(x1 +y)/2=z\n", "a=b\nc=d\n", "(1)*(2)=2\n"},
                    {"1+=2\n", "=3\n", "1+2=3", "A=1\n", "(1=1\n"}};
        }
        if (grammar == "chess")
        {
            return {{"1. e4 e5\n2. Nf3 Nc6\n", "1. d4 d5\n2. c4 e6\n3. Nc3 Nf6\n",
                     "1. e4 c5\n2. Nf3 d6\n3. d4 cxd4\n4. Nxd4 Nf6\n5. Nc3 a6\n", "1. e4 e5\n2. O-O Qh4+\n",
                     "1. f3 e5\n2. g4 Qh4#\n"},
                    {"1. e4 e5\n", "1. e9 e5\n2. d4 d5\n", "1 e4 e5\n2. d4 d5\n", "1. Ze4 e5\n2. d4 d5\n"}};
        }
        if (grammar == "list")
        {
            return {{"- milk\n", "- milk\n- eggs\n- bread\n", "- a list item with spaces, commas; and more\n"},
                    {"milk\n", "- \n", "- milk", "* milk\n"}};
        }
        if (grammar == "c")
        {
            return {{"int main(){x = 1;return x;}", "float f(int n){while(n<10){n = n+1;}return n*2;}",
                     "int g(){for(i = 0; i<3; i = i+1){s = s+i;}if(s==3){return 1;}else{return 0;}}",
                     "char c(){// a comment\nreturn 0;}", "int h(){/* two\nlines */print (a, b);}"},
                    {"int main() {}", "main(){}", "int main(){x=1;}", "int main(){return x}"}};
        }
        if (grammar == "english")
        {
            return {{"Hello, world!", "This is a test.", "Two lines\nof text; with (punctuation)."},
                    {"two  spaces", " leading", "trailing ", "caf\xC3\xA9"}};
        }
        if (grammar == "japanese")
        {
            return {{"\xE3\x81\x93\xE3\x82\x93\xE3\x81\xAB\xE3\x81\xA1\xE3\x81\xAF\xE3\x80\x81\xE4\xB8\x96\xE7\x95\x8C"
                     "\xE3\x80\x82",                                       // こんにちは、世界。
                     "\xE3\x82\xAB\xE3\x82\xBF\xE3\x82\xAB\xE3\x83\x8A \xE3\x81\xB2\xE3\x82\x89\xE3\x81\x8C\xE3\x81\xAA",  // カタカナ ひらがな
                     "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\n\xE3\x81\xA7\xE3\x81\x99"},  // 日本語\nです
                    {"abc", "\xE6\x97\xA5\xE6\x9C\xAC  \xE8\xAA\x9E", "\xE6\x97\xA5 "}};
        }
        return {};
    }

    /// A random text of the grammar: random live bytes (ASCII ones when there
    /// are, with probability 0.9), then the shortest completion.
    std::string random_walk(const std::shared_ptr<const xsampler::grammar_automaton>& rules, std::size_t length,
                            xsampler::philox4x32& rng)
    {
        xsampler::matcher m(rules);
        std::string text;
        std::vector<unsigned char> live, ascii;
        for (std::size_t k = 0; k < length; ++k)
        {
            live.clear();
            ascii.clear();
            for (int b = 0; b < 256; ++b)
            {
                if (m.step(static_cast<unsigned char>(b)))
                {
                    m.pop();
                    live.push_back(static_cast<unsigned char>(b));
                    if (b < 0x80)
                    {
                        ascii.push_back(static_cast<unsigned char>(b));
                    }
                }
            }
            if (live.empty())
            {
                break;
            }
            const auto& from = (!ascii.empty() && xsampler::uniform01(rng) < 0.9) ? ascii : live;
            const auto b = from[std::min(from.size() - 1, std::size_t(xsampler::uniform01(rng) * double(from.size())))];
            m.step(b);
            text += char(b);
        }
        return text + m.completion();
    }

    // ---------------------------------------------------------------- the harness

    struct options
    {
        std::string schemas, gbnf, vocab = "gpt2", out;
        std::string gpt2_dir = XSAMPLER_GPT2_DIR, llama3_dir = XSAMPLER_LLAMA3_DIR;
        std::size_t generate = 2, gbnf_generate = 8, gbnf_walks = 24, max_tokens = 256, limit = 0, every = 1;
        bool json = false, no_generate = false, listed_keys = false;
    };

    struct test_text
    {
        std::string text;
        bool valid;
        std::vector<token_id> ids;
    };

    /// One walk's outcome.
    struct walk_outcome
    {
        bool accepted = false;   // every token and eos in the masks
        std::size_t at = 0;      // the token refused (ids.size(): eos)
        std::string problem;     // an inconsistency or an engine error, if any
    };

    class harness
    {
    public:
        xsampler::json_options schema_options() const
        {
            xsampler::json_options jo;
            jo.additional_properties = !m_o.listed_keys;
            return jo;
        }

        explicit harness(options o) : m_o(std::move(o))
        {
            const auto t0 = clock_type::now();
            if (m_o.vocab == "gpt2")
            {
                auto v = std::make_shared<const xsampler::vocabulary>(xsampler::load_gpt2_vocabulary(m_o.gpt2_dir));
                m_index = std::make_shared<const xsampler::vocabulary_index>(v);
                m_tokenizer = std::make_unique<gpt2_text_tokenizer>(m_o.gpt2_dir);
                m_tokenization = "GPT-2 BPE (tokenizer.hpp's gpt2_tokenizer)";
            }
            else if (m_o.vocab == "llama3")
            {
                auto v = std::make_shared<const xsampler::vocabulary>(xsampler::load_llama3_vocabulary(m_o.llama3_dir));
                m_index = std::make_shared<const xsampler::vocabulary_index>(v);
                m_tokenizer = std::make_unique<longest_match_tokenizer>(m_index);
                m_tokenization = "greedy longest vocabulary match (a valid tokenization, not Llama 3's BPE)";
            }
            else
            {
                throw std::invalid_argument("--vocab: gpt2 or llama3, got '" + m_o.vocab + "'");
            }
            m_setup_ms = micros(t0, clock_type::now()) / 1000.0;
            if (!m_o.out.empty())
            {
                m_out.open(m_o.out);
                if (!m_out)
                {
                    throw std::runtime_error("--out: cannot write '" + m_o.out + "'");
                }
            }
        }

        void run()
        {
            const auto t0 = clock_type::now();
            if (!m_o.schemas.empty())
            {
                run_schemas();
            }
            if (!m_o.gbnf.empty())
            {
                run_gbnf();
            }
            m_wall_s = micros(t0, clock_type::now()) / 1e6;
            report();
        }

    private:
        const xsampler::vocabulary& vocab() const { return m_index->vocab(); }

        // ------------------------------------------------------------ schemas

        void run_schemas()
        {
            std::ifstream in(m_o.schemas);
            if (!in)
            {
                throw std::runtime_error("--schemas: cannot read '" + m_o.schemas + "'");
            }
            std::string line;
            std::size_t line_no = 0, done = 0;
            const auto t0 = clock_type::now();
            while (std::getline(in, line))
            {
                ++line_no;
                if (line.empty() || (line_no - 1) % m_o.every != 0)
                {
                    continue;
                }
                if (m_o.limit != 0 && done >= m_o.limit)
                {
                    break;
                }
                json record;
                try
                {
                    record = json::parse(line);
                }
                catch (const json::exception& e)
                {
                    throw std::runtime_error("--schemas: line " + std::to_string(line_no) + ": " + e.what());
                }
                run_schema(record);
                ++done;
                if (done % 50 == 0)
                {
                    std::fprintf(stderr, "maskbench: %zu schema files, %.0f s\n", done, micros(t0, clock_type::now()) / 1e6);
                }
            }
        }

        void run_schema(const json& record)
        {
            const std::string group = record.at("group").get<std::string>();
            const std::string name = record.at("name").get<std::string>();
            const std::string schema_text = record.at("schema").dump();
            group_counts& counts = m_groups[group];
            ++counts.files;
            std::vector<test_text> tests;
            for (const auto& t : record.at("tests"))
            {
                test_text x{t.at("text").get<std::string>(), t.at("valid").get<bool>(), {}};
                x.ids = m_tokenizer->encode(x.text);
                tests.push_back(std::move(x));
            }
            std::shared_ptr<const xsampler::compiled_grammar> compiled;
            span_timer timer;
            timer.start();
            try
            {
                compiled = std::make_shared<const xsampler::compiled_grammar>(
                    m_index, xsampler::json_schema_grammar(schema_text, schema_options()), group + "/" + name);
            }
            catch (const std::exception& e)
            {
                m_schemas.compile.add(timer.stop(), [&] { return group + "/" + name + " (a compile error)"; });
                ++counts.compile_errors;
                ++m_compile_reasons[compile_reason(e.what())];
                m_compile_messages.push_back({"compile_error", group, name, e.what()});
                return;
            }
            m_schemas.compile.add(timer.stop(), [&] { return group + "/" + name; });
            ++counts.compiled;
            const std::size_t wrong = counts.valid_rejected + counts.invalid_accepted + counts.failures;
            walk_tests(compiled, tests, group, name, counts, m_schemas);
            counts.passed += counts.valid_rejected + counts.invalid_accepted + counts.failures == wrong ? 1 : 0;
            if (!m_o.no_generate)
            {
                generate_all(compiled, m_o.generate, "schema", group, name, counts, m_schemas);
            }
        }

        /// "unsupported keyword 'X'" when the message names one, else the
        /// message without its location and the library's prefix.
        static std::string compile_reason(const std::string& what)
        {
            const std::string key = "unsupported keyword '";
            const auto k = what.find(key);
            if (k != std::string::npos)
            {
                const auto end = what.find('\'', k + key.size());
                return what.substr(k, end == std::string::npos ? std::string::npos : end + 1 - k);
            }
            std::string r = what;
            const auto colon = r.find(": ");
            if (colon != std::string::npos && r.compare(0, 12, "json_schema:") != 0)
            {
                r = r.substr(colon + 2);  // the compiled grammar's name
            }
            if (r.compare(0, 13, "json_schema: ") == 0)
            {
                r = r.substr(13);
            }
            const auto at = r.rfind(" at /");
            if (at != std::string::npos)
            {
                r = r.substr(0, at);
            }
            else if (r.size() >= 5 && r.compare(r.size() - 5, 5, " at /") == 0)
            {
                r = r.substr(0, r.size() - 5);
            }
            return shown(r, 100, false);
        }

        // ------------------------------------------------------------ walks

        void walk_tests(const std::shared_ptr<const xsampler::compiled_grammar>& compiled,
                        const std::vector<test_text>& tests, const std::string& group, const std::string& name,
                        group_counts& counts, suite_timings& st)
        {
            for (int pass = 0; pass < 2; ++pass)
            {
                for (std::size_t i = 0; i < tests.size(); ++i)
                {
                    const test_text& t = tests[i];
                    std::vector<step_timings*> into;
                    if (pass == 0)
                    {
                        if (i == 0)
                        {
                            into.push_back(&st.cold);
                        }
                        into.push_back(&st.first_pass);
                    }
                    else
                    {
                        into.push_back(&st.warm);
                        if (i == 0)
                        {
                            time_creation(compiled, st, group + "/" + name);
                        }
                    }
                    const walk_outcome w = walk(compiled, t, into, group + "/" + name + " text " + std::to_string(i));
                    if (!w.problem.empty())
                    {
                        ++counts.failures;
                        m_findings.push_back({"inconsistency", group, name, "text " + std::to_string(i) + ": " + w.problem});
                    }
                    if (pass == 1)
                    {
                        continue;  // the counts are the first pass's; the second must agree
                    }
                    if (t.valid && w.accepted)
                    {
                        ++counts.valid_accepted;
                    }
                    else if (t.valid)
                    {
                        ++counts.valid_rejected;
                        m_findings.push_back({"validation_error", group, name, describe_refusal(t, w, i)});
                    }
                    else if (w.accepted)
                    {
                        ++counts.invalid_accepted;
                        m_findings.push_back({"invalidation_error", group, name,
                                              "text " + std::to_string(i) + ": \"" + shown(t.text, 300, false) + "\""});
                    }
                    else
                    {
                        ++counts.invalid_rejected;
                    }
                }
            }
        }

        /// A request's start on a compiled grammar already in use: the
        /// constraint's construction (its matcher at the empty text), timed
        /// and weighed; the least of a few tries (the first also reads the
        /// compiled grammar's memory into the cache).
        static void time_creation(const std::shared_ptr<const xsampler::compiled_grammar>& compiled,
                                  suite_timings& st, const std::string& where)
        {
            double least = 0;
            std::size_t bytes = 0;
            for (int k = 0; k < 5; ++k)
            {
                const std::size_t before = g_allocated;
                span_timer timer;
                timer.start();
                xsampler::constraint c(compiled);
                const double us = timer.stop();
                bytes = g_allocated - before;
                least = k == 0 ? us : std::min(least, us);
            }
            st.create.add(least, [&] { return where; });
            st.create_bytes.add(double(bytes), [&] { return where; });
        }

        std::string describe_refusal(const test_text& t, const walk_outcome& w, std::size_t i) const
        {
            std::string before;
            for (std::size_t k = 0; k < w.at && k < t.ids.size(); ++k)
            {
                before += vocab().bytes(t.ids[k]);
            }
            const std::string tok = w.at < t.ids.size() ? "token " + std::to_string(t.ids[w.at]) + " \"" +
                                                              shown(vocab().bytes(t.ids[w.at])) + "\""
                                                        : std::string("eos (the text is not complete)");
            return "text " + std::to_string(i) + ": " + tok + " refused at byte " + std::to_string(before.size()) +
                   " after \"" + shown(before, 80) + "\"; text \"" + shown(t.text, 200, false) + "\"";
        }

        /// Walks one text through a fresh constraint (see the top of this file).
        walk_outcome walk(const std::shared_ptr<const xsampler::compiled_grammar>& compiled, const test_text& t,
                          const std::vector<step_timings*>& into, const std::string& where)
        {
            walk_outcome out;
            const token_id eos = vocab().eos()[0];
            try
            {
                xsampler::constraint c(compiled);
                std::size_t bytes = 0;
                for (std::size_t k = 0; k <= t.ids.size(); ++k)
                {
                    const token_id tok = k < t.ids.size() ? t.ids[k] : eos;
                    span_timer timer;
                    timer.start();
                    const xsampler::token_set& m = c.mask();
                    const double masked = timer.stop();
                    const bool in = m.contains(tok);
                    const std::size_t allowed = m.size();
                    if (tok == eos && in != c.complete())
                    {
                        out.problem = std::string("eos ") + (in ? "in" : "not in") + " the mask but complete() is " +
                                      (c.complete() ? "true" : "false");
                    }
                    if (!in)
                    {
                        for (auto* s : into)
                        {
                            s->mask.add(masked);
                        }
                        xsampler::constraint f = c.fork();
                        try
                        {
                            f.advance(tok);
                            out.problem = "token " + std::to_string(tok) + " outside the mask, but advance() reads it";
                        }
                        catch (const xsampler::invalid_parameter&)
                        {
                        }
                        out.at = k;
                        return out;
                    }
                    timer.start();
                    c.advance(tok);
                    const double advanced = timer.stop();
                    const std::size_t at_byte = bytes;
                    const auto here = [&] {
                        std::string before;
                        for (std::size_t j = 0; j < k; ++j)
                        {
                            before += vocab().bytes(t.ids[j]);
                        }
                        return where + " token " + std::to_string(k) + " (byte " + std::to_string(at_byte) + ", " +
                               std::to_string(allowed) + " tokens allowed) after \"" + shown(before, 50) +
                               "\", next \"" + shown(vocab().bytes(tok), 20, false) + "\"";
                    };
                    for (auto* s : into)
                    {
                        s->mask.add(masked, here);
                        s->advance.add(advanced, here);
                        s->step.add(masked + advanced, here);
                    }
                    bytes += vocab().bytes(tok).size();
                }
                out.accepted = true;
            }
            catch (const std::exception& e)
            {
                out.problem = std::string("exception: ") + e.what();
            }
            return out;
        }

        // ------------------------------------------------------------ generation

        void generate_all(const std::shared_ptr<const xsampler::compiled_grammar>& compiled, std::size_t n,
                          const std::string& kind, const std::string& group, const std::string& name,
                          group_counts& counts, suite_timings& st)
        {
            for (std::size_t g = 0; g < n; ++g)
            {
                for (int chain_kind = 0; chain_kind < 2; ++chain_kind)
                {
                    for (int budgeted = 0; budgeted < 2; ++budgeted)
                    {
                        const std::uint64_t seed = 1000003 * m_generation_seed + 97 * g + 2 * std::uint64_t(chain_kind) +
                                                   std::uint64_t(budgeted);
                        generate_one(compiled, seed, chain_kind, budgeted != 0, kind, group, name, counts, st);
                    }
                }
            }
            ++m_generation_seed;
        }

        /// Each step of g again on its row, the chain's call with the step's
        /// mask (`with`, reading `mask`) and without it: the least of two
        /// each, interleaved; their difference to times.applied.
        template <class With, class Without>
        void replay(With& with, Without& without, const xsampler::token_set*& mask, generation_times& times,
                    const xsampler::generation& g, std::uint64_t seed)
        {
            rotating_model model(vocab().size(), seed);
            const std::size_t steps = std::min(times.masks.size(), g.tokens.size());
            std::vector<token_id> prefix;
            for (std::size_t k = 0; k < steps; ++k)
            {
                mask = &times.masks[k];
                const auto& row = model(prefix);
                double a = 0, b = 0;
                for (int r = 0; r < 2; ++r)
                {
                    xsampler::philox4x32 r1(seed, 100 + k), r2(seed, 100 + k);
                    span_timer t;
                    t.start();
                    benchmark_sink(with.sample(row, xsampler::token_history{}, r1).id);
                    const double x = t.stop();
                    t.start();
                    benchmark_sink(without.sample(row, xsampler::token_history{}, r2).id);
                    const double y = t.stop();
                    a = r == 0 ? x : std::min(a, x);
                    b = r == 0 ? y : std::min(b, y);
                }
                times.applied.push_back(a - b);
                prefix.push_back(g.tokens[k]);
            }
            times.masks.clear();
        }

        template <class Chain>
        xsampler::generation run_chain(Chain& ch, std::uint64_t seed)
        {
            rotating_model model(vocab().size(), seed);
            xsampler::generate_options o;
            o.eos.assign(vocab().eos().begin(), vocab().eos().end());
            o.max_tokens = m_o.max_tokens;
            xsampler::philox4x32 rng(seed, 7);
            return xsampler::generate(model, {}, ch, o, rng);
        }

        void generate_one(const std::shared_ptr<const xsampler::compiled_grammar>& compiled, std::uint64_t seed,
                          int chain_kind, bool budgeted, const std::string& kind, const std::string& group,
                          const std::string& name, group_counts& counts, suite_timings& st)
        {
            const char* chain_name = chain_kind == 0 ? "temperature_1" : "top_k40_top_p0.95_t0.8";
            const std::string where = group + "/" + name + " " + chain_name + (budgeted ? " budget" : "") + " seed " +
                                      std::to_string(seed);
            generation_times times;
            xsampler::generation g;
            std::size_t need = 0;
            try
            {
                xsampler::constraint c(compiled);
                if (budgeted)
                {
                    span_timer timer;
                    timer.start();
                    if (compiled->rules()->has_distinct() || compiled->rules()->has_units())
                    {
                        // (uniqueItems, minProperties over unlisted keys, counted lexemes: set_budget refuses a grammar
                        // with distinct marks or counted lexemes)
                        st.budget_setup.add(timer.stop(), [&] { return where + " (refused)"; });
                        ++counts.budget_refused;
                        m_findings.push_back({"budget_refused", group, name,
                                              compiled->rules()->has_distinct()
                                                  ? "distinct items or keys (uniqueItems, minProperties over unlisted keys)"
                                                  : "counted lexemes (lengths or digits past the product limit)"});
                        return;
                    }
                    need = c.shortest_completion();
                    if (need > m_o.max_tokens)
                    {
                        st.budget_setup.add(timer.stop(), [&] { return where + " (refused)"; });
                        ++counts.budget_refused;
                        m_findings.push_back({"budget_refused", group, name,
                                              "shortest completion " + std::to_string(need) + " tokens > " +
                                                  std::to_string(m_o.max_tokens)});
                        return;
                    }
                    c.set_budget(m_o.max_tokens);
                    st.budget_setup.add(timer.stop(), [&] { return where; });
                }
                const auto t0 = clock_type::now();
                // the chain's stages after the constraint: generated, then replayed with and without the masks
                const auto run = [&](auto... stages) {
                    xsampler::chain ch{timed_constraint{std::move(c), &times}, stages...};
                    g = run_chain(ch, seed);
                    if (!g.tokens.empty())
                    {
                        st.gen_total.add(micros(t0, clock_type::now()) / double(g.tokens.size()));
                    }
                    const xsampler::token_set* mask = nullptr;
                    xsampler::chain with{replayed_mask{&mask}, stages...};
                    xsampler::chain without{stages...};
                    replay(with, without, mask, times, g, seed);
                };
                if (chain_kind == 0)
                {
                    run(xsampler::temperature{1.0});
                }
                else
                {
                    run(xsampler::top_k{40}, xsampler::top_p{0.95}, xsampler::temperature{0.8});
                }
            }
            catch (const std::exception& e)
            {
                ++counts.failures;
                ++(budgeted ? counts.budget_runs : counts.generations);
                m_findings.push_back({"engine_error", group, name, std::string(chain_name) + (budgeted ? " budget" : "") +
                                                                       " seed " + std::to_string(seed) + ": " + e.what()});
                return;
            }
            // the times, with where the slowest steps were
            step_timings& s = budgeted ? st.gen_budget : st.gen_plain;
            timings& keep = st.keep_in[chain_kind];
            for (std::size_t k = 0; k < times.mask.size(); ++k)
            {
                const auto here = [&] {
                    const std::vector<token_id> before(g.tokens.begin(),
                                                       g.tokens.begin() + std::ptrdiff_t(std::min(k, g.tokens.size())));
                    return where + " step " + std::to_string(k) + " (" + std::to_string(times.allowed[k]) +
                           " tokens allowed" +
                           (budgeted ? ", " + std::to_string(m_o.max_tokens - k) + " left in the budget" : "") +
                           ") after \"" + shown(vocab().decode(before), 50) + "\"";
                };
                const double adv = std::max(times.advance[k], 0.0);
                s.mask.add(times.mask[k], here);
                if (times.advance[k] >= 0)
                {
                    s.advance.add(adv, here);
                }
                s.step.add(times.mask[k] + adv, here);
                keep.add(times.keep_in[k]);
                if (k < times.applied.size())
                {
                    st.applied[chain_kind].add(times.applied[k], here);
                    st.step_applied[chain_kind].add(times.mask[k] + adv + times.applied[k], here);
                }
            }
            const bool eos = g.reason == xsampler::stop_reason::eos;
            if (budgeted)
            {
                ++counts.budget_runs;
                counts.budget_eos += eos ? 1 : 0;
                if (!eos)
                {
                    ++counts.failures;
                    m_findings.push_back({"budget_not_ended", group, name,
                                          where + ": stop reason " + xsampler::to_string(g.reason) + " after " +
                                              std::to_string(g.tokens.size()) + " tokens (shortest completion " +
                                              std::to_string(need) + ")"});
                }
            }
            else
            {
                ++counts.generations;
                counts.eos_ended += eos ? 1 : 0;
            }
            if (!eos)
            {
                return;
            }
            const std::string text = vocab().decode(g.tokens);
            if (kind == "gbnf")
            {
                xsampler::matcher m(compiled->rules());
                const std::size_t read = m.feed(text);
                if (read != text.size() || !m.complete())
                {
                    ++counts.failures;
                    m_findings.push_back({"gbnf_output_invalid", group, name,
                                          where + ": " + (read != text.size() ? "refused at byte " + std::to_string(read)
                                                                              : std::string("not complete")) +
                                              ": \"" + shown(text, 300, false) + "\""});
                }
                else
                {
                    ++m_gbnf_outputs_valid;
                }
            }
            if (m_out)
            {
                json line;
                line["kind"] = kind;
                line["group"] = group;
                line["name"] = name;
                line["vocab"] = m_o.vocab;
                line["chain"] = chain_name;
                line["budget"] = budgeted;
                line["seed"] = seed;
                line["tokens"] = g.tokens.size();
                line["text"] = text;
                m_out << line.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
            }
            ++m_outputs;
        }

        // ------------------------------------------------------------ GBNF

        void run_gbnf()
        {
            std::vector<std::filesystem::path> files;
            for (const auto& e : std::filesystem::directory_iterator(m_o.gbnf))
            {
                if (e.path().extension() == ".gbnf")
                {
                    files.push_back(e.path());
                }
            }
            std::sort(files.begin(), files.end());
            if (files.empty())
            {
                throw std::runtime_error("--gbnf: no .gbnf files in '" + m_o.gbnf + "'");
            }
            for (const auto& path : files)
            {
                run_gbnf_file(path);
            }
        }

        void run_gbnf_file(const std::filesystem::path& path)
        {
            const std::string name = path.stem().string();
            const std::string group = "gbnf";
            group_counts& counts = m_gbnf[name];
            ++counts.files;
            std::ifstream in(path, std::ios::binary);
            std::stringstream ss;
            ss << in.rdbuf();
            std::shared_ptr<const xsampler::compiled_grammar> compiled;
            span_timer timer;
            timer.start();
            try
            {
                compiled = std::make_shared<const xsampler::compiled_grammar>(m_index, xsampler::parse_gbnf(ss.str()),
                                                                              "gbnf/" + name);
            }
            catch (const std::exception& e)
            {
                m_gbnf_timings.compile.add(timer.stop(), [&] { return name + " (a compile error)"; });
                ++counts.compile_errors;
                m_findings.push_back({"gbnf_compile_error", group, name, e.what()});
                return;
            }
            m_gbnf_timings.compile.add(timer.stop(), [&] { return name; });
            ++counts.compiled;
            const std::size_t wrong = counts.valid_rejected + counts.invalid_accepted + counts.failures;
            // texts: the hand-written valid ones, random walks, the hand-written invalid ones
            std::vector<test_text> tests;
            const hand_texts hand = hand_written(name);
            for (const auto& t : hand.valid)
            {
                // a hand-written text the matcher itself refuses is this file's mistake, not the engine's
                xsampler::matcher m(compiled->rules());
                if (m.feed(t) != t.size() || !m.complete())
                {
                    m_findings.push_back({"hand_text_not_in_grammar", group, name, "\"" + shown(t, 200, false) + "\""});
                    continue;
                }
                tests.push_back({t, true, {}});
            }
            xsampler::philox4x32 rng(20261201, std::hash<std::string>{}(name) & 0xFFFF);
            std::vector<std::string> seen;
            for (std::size_t k = 0; k < m_o.gbnf_walks; ++k)
            {
                const std::size_t length = 1 + std::size_t(xsampler::uniform01(rng) * 160.0);
                std::string t = random_walk(compiled->rules(), length, rng);
                if (std::find(seen.begin(), seen.end(), t) == seen.end())
                {
                    seen.push_back(t);
                    tests.push_back({std::move(t), true, {}});
                    ++m_gbnf_walk_texts;
                }
            }
            for (const auto& t : hand.invalid)
            {
                xsampler::matcher m(compiled->rules());
                if (m.feed(t) == t.size() && m.complete())
                {
                    m_findings.push_back({"hand_text_in_grammar", group, name, "\"" + shown(t, 200, false) + "\""});
                    continue;
                }
                tests.push_back({t, false, {}});
            }
            for (auto& t : tests)
            {
                t.ids = m_tokenizer->encode(t.text);
            }
            m_gbnf_texts[name] = tests.size();
            walk_tests(compiled, tests, group, name, counts, m_gbnf_timings);
            counts.passed += counts.valid_rejected + counts.invalid_accepted + counts.failures == wrong ? 1 : 0;
            if (!m_o.no_generate)
            {
                generate_all(compiled, m_o.gbnf_generate, "gbnf", group, name, counts, m_gbnf_timings);
            }
        }

        // ------------------------------------------------------------ the report

        static std::string fmt(double v)
        {
            char buf[32];
            if (v >= 1000)
            {
                std::snprintf(buf, sizeof buf, "%.0f", v);
            }
            else if (v >= 10)
            {
                std::snprintf(buf, sizeof buf, "%.1f", v);
            }
            else
            {
                std::snprintf(buf, sizeof buf, "%.2f", v);
            }
            return buf;
        }

        void counts_table(const std::map<std::string, group_counts>& groups, const char* first) const
        {
            std::printf("| %s | files | compiled | compile errors | passed | valid accepted | valid rejected | invalid "
                        "accepted | invalid rejected | generations | eos-ended | budget-aware | budget eos-ended | budget "
                        "refused | engine failures |\n",
                        first);
            std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
            group_counts total;
            const auto row = [](const std::string& g, const group_counts& c) {
                std::printf("| %s | %zu | %zu | %zu | %zu | %zu | %zu | %zu | %zu | %zu | %zu | %zu | %zu | %zu | %zu |\n",
                            g.c_str(), c.files, c.compiled, c.compile_errors, c.passed, c.valid_accepted, c.valid_rejected,
                            c.invalid_accepted, c.invalid_rejected, c.generations, c.eos_ended, c.budget_runs,
                            c.budget_eos, c.budget_refused, c.failures);
            };
            for (const auto& [g, c] : groups)
            {
                row(g, c);
                total.files += c.files;
                total.compiled += c.compiled;
                total.compile_errors += c.compile_errors;
                total.passed += c.passed;
                total.valid_accepted += c.valid_accepted;
                total.valid_rejected += c.valid_rejected;
                total.invalid_accepted += c.invalid_accepted;
                total.invalid_rejected += c.invalid_rejected;
                total.generations += c.generations;
                total.eos_ended += c.eos_ended;
                total.budget_runs += c.budget_runs;
                total.budget_eos += c.budget_eos;
                total.budget_refused += c.budget_refused;
                total.failures += c.failures;
            }
            row("**all**", total);
        }

        static void percentile_row(const char* what, const timings& t)
        {
            std::printf("| %s | %zu | %s | %s | %s | %s | %s |\n", what, t.size(), fmt(t.percentile(0.5)).c_str(),
                        fmt(t.percentile(0.9)).c_str(), fmt(t.percentile(0.99)).c_str(), fmt(t.percentile(1.0)).c_str(),
                        fmt(t.mean()).c_str());
        }

        void percentile_table(const suite_timings& st) const
        {
            std::printf("| µs (%s) | n | median | p90 | p99 | max | mean |\n", m_o.vocab.c_str());
            std::printf("|---|---|---|---|---|---|---|\n");
            percentile_row("compile", st.compile);
            percentile_row("cold: mask", st.cold.mask);
            percentile_row("cold: advance", st.cold.advance);
            percentile_row("cold: step (mask + advance)", st.cold.step);
            percentile_row("first pass, all texts: step", st.first_pass.step);
            percentile_row("warm: mask", st.warm.mask);
            percentile_row("warm: advance", st.warm.advance);
            percentile_row("warm: step (mask + advance)", st.warm.step);
            percentile_row("generation: mask", st.gen_plain.mask);
            percentile_row("generation: advance", st.gen_plain.advance);
            percentile_row("generation: step (mask + advance)", st.gen_plain.step);
            percentile_row("generation: keep_in, temperature 1 chain", st.keep_in[0]);
            percentile_row("generation: keep_in, top_k 40 chain", st.keep_in[1]);
            percentile_row("replayed: what the mask adds to the call, temperature 1 chain", st.applied[0]);
            percentile_row("replayed: what the mask adds to the call, top_k 40 chain", st.applied[1]);
            percentile_row("replayed: step + what the mask adds, temperature 1 chain", st.step_applied[0]);
            percentile_row("replayed: step + what the mask adds, top_k 40 chain", st.step_applied[1]);
            percentile_row("budget-aware: set-up (shortest_completion + set_budget)", st.budget_setup);
            percentile_row("a request's constraint created on the compiled grammar", st.create);
            percentile_row("the bytes that creation allocates (not µs)", st.create_bytes);
            percentile_row("budget-aware: mask", st.gen_budget.mask);
            percentile_row("budget-aware: advance", st.gen_budget.advance);
            percentile_row("budget-aware: step (mask + advance)", st.gen_budget.step);
            percentile_row("generation, whole loop per token (model, chain, constraint)", st.gen_total);
        }

        static void worst_list(const char* what, const timings& t)
        {
            std::printf("- %s:\n", what);
            for (const auto& [us, where] : t.worst())
            {
                std::printf("  - %s µs: %s\n", fmt(us).c_str(), where.c_str());
            }
        }

        void worst_lists(const suite_timings& st) const
        {
            worst_list("compile", st.compile);
            worst_list("cold step", st.cold.step);
            worst_list("warm step", st.warm.step);
            worst_list("generation step", st.gen_plain.step);
            worst_list("budget-aware step", st.gen_budget.step);
            worst_list("step + what the mask adds, temperature 1 chain", st.step_applied[0]);
            worst_list("step + what the mask adds, top_k 40 chain", st.step_applied[1]);
            worst_list("budget-aware set-up", st.budget_setup);
            worst_list("creation", st.create);
            worst_list("creation's bytes (not µs)", st.create_bytes);
        }

        void findings(const char* kind, std::size_t max_shown) const
        {
            std::size_t n = 0;
            for (const auto& f : m_findings)
            {
                n += f.kind == kind ? 1 : 0;
            }
            std::printf("\n### %s: %zu\n\n", kind, n);
            std::size_t k = 0;
            for (const auto& f : m_findings)
            {
                if (f.kind == kind && k++ < max_shown)
                {
                    std::printf("- %s/%s: %s\n", f.group.c_str(), f.name.c_str(), f.detail.c_str());
                }
            }
            if (k > max_shown)
            {
                std::printf("- ... %zu more (--json has them all)\n", k - max_shown);
            }
        }

        void report() const
        {
            std::printf("# xsampler_maskbench: %s (%zu tokens), tokenized by %s\n\n", m_o.vocab.c_str(), vocab().size(),
                        m_tokenization.c_str());
            std::printf("max_tokens %zu; %zu generations per schema per chain and budget mode; vocabulary and index "
                        "%.0f ms; run %.0f s; %zu eos-ended outputs%s%s\n",
                        m_o.max_tokens, m_o.no_generate ? 0 : m_o.generate, m_setup_ms, m_wall_s, m_outputs,
                        m_o.out.empty() ? "" : " written to ", m_o.out.c_str());
            std::printf("Times: wall time per call; the %zu calls that took over %.0f µs are read as the thread's CPU "
                        "time instead (%.1f s of other processes' time removed from them)\n",
                        spans().long_spans, span_timer::long_us, spans().removed_us / 1e6);
            std::printf("Trie regions walked and kept by the index: %zu (of at most %zu)\n", m_index->regions_cached(),
                        xsampler::vocabulary_index::region_cache_limit);
            if (!m_groups.empty())
            {
                std::printf("\n## JSON schemas\n\n");
                counts_table(m_groups, "group");
                std::printf("\n### Compile errors by reason (%zu files)\n\n| reason | files |\n|---|---|\n",
                            m_compile_messages.size());
                std::vector<std::pair<std::string, std::size_t>> reasons(m_compile_reasons.begin(), m_compile_reasons.end());
                std::stable_sort(reasons.begin(), reasons.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
                for (const auto& [r, n] : reasons)
                {
                    std::printf("| %s | %zu |\n", r.c_str(), n);
                }
                std::printf("\n### Times, JSON schemas\n\n");
                percentile_table(m_schemas);
                std::printf("\n### Slowest, JSON schemas\n\n");
                worst_lists(m_schemas);
            }
            if (!m_gbnf.empty())
            {
                std::printf("\n## GBNF grammars (%zu random-walk texts; the hand-written valid texts, then the walks, then "
                            "the hand-written invalid texts; %zu generations per grammar per chain and budget mode; %zu "
                            "eos-ended outputs read whole by a fresh matcher)\n\n",
                            m_gbnf_walk_texts, m_o.no_generate ? 0 : m_o.gbnf_generate, m_gbnf_outputs_valid);
                counts_table(m_gbnf, "grammar");
                std::printf("\n### Times, GBNF grammars\n\n");
                percentile_table(m_gbnf_timings);
                std::printf("\n### Slowest, GBNF grammars\n\n");
                worst_lists(m_gbnf_timings);
            }
            std::printf("\n## Findings\n");
            findings("validation_error", 40);
            findings("invalidation_error", 40);
            findings("inconsistency", 40);
            findings("engine_error", 40);
            findings("budget_not_ended", 40);
            findings("budget_refused", 40);
            findings("gbnf_output_invalid", 40);
            findings("gbnf_compile_error", 40);
            findings("hand_text_not_in_grammar", 40);
            findings("hand_text_in_grammar", 40);
            if (m_o.json)
            {
                std::printf("\n%s\n", summary().dump(-1, ' ', false, json::error_handler_t::replace).c_str());
            }
        }

        static json timings_json(const timings& t)
        {
            json j;
            j["n"] = t.size();
            j["median"] = t.percentile(0.5);
            j["p90"] = t.percentile(0.9);
            j["p99"] = t.percentile(0.99);
            j["max"] = t.percentile(1.0);
            j["mean"] = t.mean();
            j["worst"] = json::array();
            for (const auto& [us, where] : t.worst())
            {
                j["worst"].push_back({{"us", us}, {"where", where}});
            }
            return j;
        }
        static json suite_json(const suite_timings& st)
        {
            json j;
            j["compile"] = timings_json(st.compile);
            const auto steps = [](const step_timings& s) {
                return json{{"mask", timings_json(s.mask)}, {"advance", timings_json(s.advance)}, {"step", timings_json(s.step)}};
            };
            j["cold"] = steps(st.cold);
            j["first_pass"] = steps(st.first_pass);
            j["warm"] = steps(st.warm);
            j["generation"] = steps(st.gen_plain);
            j["keep_in"] = {{"temperature_1", timings_json(st.keep_in[0])}, {"top_k40_top_p0.95_t0.8", timings_json(st.keep_in[1])}};
            j["applied"] = {{"temperature_1", timings_json(st.applied[0])}, {"top_k40_top_p0.95_t0.8", timings_json(st.applied[1])}};
            j["step_applied"] = {{"temperature_1", timings_json(st.step_applied[0])},
                                 {"top_k40_top_p0.95_t0.8", timings_json(st.step_applied[1])}};
            j["budget_aware"] = steps(st.gen_budget);
            j["budget_aware"]["setup"] = timings_json(st.budget_setup);
            j["create"] = timings_json(st.create);
            j["create_bytes"] = timings_json(st.create_bytes);
            j["generation_loop_per_token"] = timings_json(st.gen_total);
            return j;
        }
        static json counts_json(const std::map<std::string, group_counts>& groups)
        {
            json j = json::object();
            for (const auto& [g, c] : groups)
            {
                j[g] = {{"files", c.files},
                        {"compiled", c.compiled},
                        {"compile_errors", c.compile_errors},
                        {"passed", c.passed},
                        {"valid_accepted", c.valid_accepted},
                        {"valid_rejected", c.valid_rejected},
                        {"invalid_accepted", c.invalid_accepted},
                        {"invalid_rejected", c.invalid_rejected},
                        {"generations", c.generations},
                        {"eos_ended", c.eos_ended},
                        {"budget_runs", c.budget_runs},
                        {"budget_eos", c.budget_eos},
                        {"budget_refused", c.budget_refused},
                        {"failures", c.failures}};
            }
            return j;
        }
        json summary() const
        {
            json j;
            j["vocab"] = m_o.vocab;
            j["vocab_size"] = vocab().size();
            j["tokenization"] = m_tokenization;
            j["max_tokens"] = m_o.max_tokens;
            j["wall_s"] = m_wall_s;
            j["outputs"] = m_outputs;
            j["long_spans"] = spans().long_spans;
            j["long_spans_removed_us"] = spans().removed_us;
            j["schemas"] = {{"groups", counts_json(m_groups)}, {"times_us", suite_json(m_schemas)}};
            j["schemas"]["compile_reasons"] = json::object();
            for (const auto& [r, n] : m_compile_reasons)
            {
                j["schemas"]["compile_reasons"][r] = n;
            }
            j["gbnf"] = {{"grammars", counts_json(m_gbnf)}, {"times_us", suite_json(m_gbnf_timings)}};
            j["findings"] = json::array();
            for (const auto& list : {&m_findings, &m_compile_messages})
            {
                for (const auto& f : *list)
                {
                    j["findings"].push_back({{"kind", f.kind}, {"group", f.group}, {"name", f.name}, {"detail", f.detail}});
                }
            }
            return j;
        }

        options m_o;
        std::shared_ptr<const xsampler::vocabulary_index> m_index;
        std::unique_ptr<text_tokenizer> m_tokenizer;
        std::string m_tokenization;
        std::ofstream m_out;
        double m_setup_ms = 0, m_wall_s = 0;
        std::map<std::string, group_counts> m_groups, m_gbnf;
        std::map<std::string, std::size_t> m_compile_reasons, m_gbnf_texts;
        std::vector<finding> m_findings, m_compile_messages;
        suite_timings m_schemas, m_gbnf_timings;
        std::size_t m_outputs = 0, m_gbnf_outputs_valid = 0, m_gbnf_walk_texts = 0;
        std::uint64_t m_generation_seed = 1;
    };

    const char* usage =
        "usage: xsampler_maskbench [--schemas FILE.jsonl] [--gbnf DIR] [--vocab gpt2|llama3]\n"
        "                          [--generate N] [--gbnf-generate N] [--gbnf-walks N] [--max-tokens N]\n"
        "                          [--out FILE.jsonl] [--limit N] [--every K] [--no-generate] [--json]\n"
        "                          [--listed-keys]\n"
        "                          [--gpt2-dir DIR] [--llama3-dir DIR]\n"
        "  --schemas      scripts/maskbench's JSONL of schema files and test texts\n"
        "  --gbnf         a directory of .gbnf grammars\n"
        "  --generate     generations per schema, per chain and budget mode (default 2)\n"
        "  --gbnf-generate  the same per GBNF grammar (default 8); --gbnf-walks random texts per grammar (24)\n"
        "  --max-tokens   generation length and budget (default 256)\n"
        "  --out          the eos-ended outputs, one JSON line each\n"
        "  --limit N      at most N schema files; --every K every K-th line of the file\n"
        "  --json         the summary as one JSON line after the tables\n"
        "  --listed-keys  schemas: only the keys they list (json_options::additional_properties false)\n";

    std::size_t number(const std::string& flag, const char* text, std::size_t lo)
    {
        char* end = nullptr;
        errno = 0;
        const unsigned long long v = std::strtoull(text, &end, 10);
        if (*text == '\0' || *end != '\0' || *text == '-' || errno != 0 || v < lo || v > 1000000000ull)
        {
            throw std::invalid_argument(flag + ": a number >= " + std::to_string(lo) + " expected, got '" + text + "'");
        }
        return std::size_t(v);
    }

    options parse(int argc, char** argv)
    {
        options o;
        for (int i = 1; i < argc; ++i)
        {
            const std::string a = argv[i];
            const auto value = [&]() -> const char* {
                if (i + 1 >= argc)
                {
                    throw std::invalid_argument(a + ": a value expected");
                }
                return argv[++i];
            };
            if (a == "--schemas") o.schemas = value();
            else if (a == "--gbnf") o.gbnf = value();
            else if (a == "--vocab") o.vocab = value();
            else if (a == "--generate") o.generate = number(a, value(), 0);
            else if (a == "--gbnf-generate") o.gbnf_generate = number(a, value(), 0);
            else if (a == "--gbnf-walks") o.gbnf_walks = number(a, value(), 0);
            else if (a == "--max-tokens") o.max_tokens = number(a, value(), 1);
            else if (a == "--out") o.out = value();
            else if (a == "--limit") o.limit = number(a, value(), 1);
            else if (a == "--every") o.every = number(a, value(), 1);
            else if (a == "--no-generate") o.no_generate = true;
            else if (a == "--listed-keys") o.listed_keys = true;
            else if (a == "--json") o.json = true;
            else if (a == "--gpt2-dir") o.gpt2_dir = value();
            else if (a == "--llama3-dir") o.llama3_dir = value();
            else if (a == "--help" || a == "-h")
            {
                std::fputs(usage, stdout);
                std::exit(0);
            }
            else
            {
                throw std::invalid_argument("unknown flag '" + a + "'");
            }
        }
        if (o.schemas.empty() && o.gbnf.empty())
        {
            throw std::invalid_argument("nothing to do: give --schemas FILE.jsonl and/or --gbnf DIR");
        }
        return o;
    }
}

int main(int argc, char** argv)
{
    try
    {
        harness h(parse(argc, argv));
        h.run();
    }
    catch (const std::invalid_argument& e)  // a flag
    {
        std::fprintf(stderr, "xsampler_maskbench: error: %s\n%s", e.what(), usage);
        return 2;
    }
    catch (const std::exception& e)
    {
        std::fprintf(stderr, "xsampler_maskbench: error: %s\n", e.what());
        return 1;
    }
    return 0;
}
