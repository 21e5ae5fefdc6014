// xsampler/sequence.hpp — one request, one token at a time: stops, log-probs, text. (xsampler, BSD-3-Clause)
//
// basic_sequence<Sampler>(sampler, prompt, options): one request's sampler
// (a sampler, a chain, or a reference to one: generate borrows its caller's)
// with its stop conditions, log-prob settings and text. The engine calls
// step(row) with the model's row for history().tokens(); each step draws
// one token and returns a step_result:
//   id, logprob     the token, its log-probability under the distribution it
//                   was drawn from (filtered and renormalised);
//   raw_logprob, entropy   under the model's raw softmax, when asked
//                   (options.raw_logprob, entropy; NaN otherwise);
//   top             the options.top_logprobs most probable tokens with their
//                   log-probabilities, of the raw softmax or (top_source
//                   processed) of the distribution drawn from, where only
//                   kept tokens count (fewer if fewer are kept); empty when
//                   not asked;
//   text            the text that is safe to show now (with options.vocab):
//                   the deltas of all steps concatenated are text();
//   finish          why the sequence ended at this token, or none.
// The result's views last until the next call on the sequence.
//
// Stops, checked after each token once more than min_tokens were generated,
// in this order (the first decides):
//   eos           the token is one of options.eos (eos_policy::stop; kept
//                 in the tokens, its text left out: a special token has none);
//   stop_token    the token is one of options.stop_token_ids (vLLM's: kept
//                 in the tokens, its text left out unless
//                 include_stop_str_in_output);
//   stop_sequence the generated tokens end with one of
//                 options.stop_sequences (their text kept);
//   stop_string   the text contains one of options.stop_strings (needs
//                 options.vocab): found across token boundaries, the first
//                 to complete wins (ties: the lower index); the text is cut
//                 where it starts, or where it ends with
//                 include_stop_str_in_output; stop_at() indexes text();
//   length        max_tokens tokens were generated.
// min_tokens: until that many tokens were generated, the eos ids (policy
// stop) and stop_token_ids are masked and no stop counts. eos_policy::mask
// masks eos at every step (llama.cpp's ignore_eos); eos_policy::pass lets
// eos be drawn and carries on (vLLM's ignore_eos).
//
// Text (detail/text_stream.hpp): valid UTF-8, U+FFFD for invalid bytes;
// text that may still become a stop string or complete a character is held
// back and released when it cannot; a finish other than a stop string
// flushes an incomplete character as U+FFFD.
//
// Workspaces: step(row) filters in the sampler's own workspace, step(row,
// ws) in the caller's (one per thread serves many sequences: sample_batch's
// slots form, batch.hpp); the token is the same.
//
// Randomness: step(row) and step(row, ws) draw from the sequence's own engine,
// philox4x32(seed, stream) (seed: options.seed, else the sampler's
// params().seed, else 0), so a sequence over a sampler draws what the
// sampler's sample() would; step(row, rng) draws from the caller's. Each
// step draws what the sampler's sample() draws.
//
// fork(stream): a copy drawing from philox4x32(seed, stream), for n samples
// of one prompt; cumulative_logprob() ranks them (best_of: set
// options.raw_logprob to rank by the model's log-probabilities, as sample_n
// does).
//
// Errors: options out of range, at construction (invalid_parameter,
// "sequence: ..."); a bad row: invalid_logits("step 3: logits: ..."), and
// the sequence is as before the call (its own engine included); a drawn
// token outside options.vocab: invalid_parameter, the sequence as before
// but for a stage that learns from the draw (mirostat), which saw it;
// step() after the end: invalid_use. After the first steps nothing is
// allocated per token within min(max_tokens, 4096) tokens and 8 bytes of
// text a token on average (top_logprobs: its list is reused).
// Not thread-safe: one sequence per request.
#ifndef XSAMPLER_SEQUENCE_HPP
#define XSAMPLER_SEQUENCE_HPP

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "detail/text_stream.hpp"
#include "random.hpp"
#include "sampler.hpp"
#include "softmax.hpp"
#include "speculative.hpp"
#include "vocabulary.hpp"

namespace xsampler
{
    /// Why a sequence ended (none: it has not).
    enum class finish_reason
    {
        none,
        eos,
        stop_token,
        stop_sequence,
        stop_string,
        length,
        cancelled
    };

    inline const char* to_string(finish_reason r) noexcept
    {
        switch (r)
        {
        case finish_reason::none: return "none";
        case finish_reason::eos: return "eos";
        case finish_reason::stop_token: return "stop_token";
        case finish_reason::stop_sequence: return "stop_sequence";
        case finish_reason::stop_string: return "stop_string";
        case finish_reason::length: return "length";
        case finish_reason::cancelled: return "cancelled";
        }
        return "?";
    }

    /// What eos does: ends the sequence, is masked at every step (llama.cpp's
    /// ignore_eos), or is drawn like any token (vLLM's ignore_eos).
    enum class eos_policy
    {
        stop,
        mask,
        pass
    };

    /// Which distribution the top-n log-probabilities come from: the model's
    /// raw softmax, or the one the token was drawn from (after every stage,
    /// renormalised over the kept tokens: vLLM's processed_logprobs).
    enum class logprob_source
    {
        raw,
        processed
    };

    struct sequence_options
    {
        std::size_t max_tokens = 256;
        std::size_t min_tokens = 0;  ///< at most max_tokens
        std::vector<token_id> eos;
        eos_policy eos_mode = eos_policy::stop;
        std::vector<token_id> stop_token_ids;
        std::vector<std::vector<token_id>> stop_sequences;  ///< each non-empty
        std::vector<std::string> stop_strings;              ///< each non-empty UTF-8; 64 KiB in all; needs vocab
        bool include_stop_str_in_output = false;
        const vocabulary* vocab = nullptr;  ///< decodes the text; not owned, outlives the sequence
        bool raw_logprob = false;           ///< the token's log-probability under the raw softmax
        bool entropy = false;               ///< the raw softmax's entropy, nats
        std::size_t top_logprobs = 0;       ///< the n most probable tokens of top_source
        logprob_source top_source = logprob_source::raw;
        std::optional<std::uint64_t> seed;  ///< the own engine's key (default: the sampler's seed, else 0)
        std::uint64_t stream = 0;           ///< the own engine's stream: philox4x32(seed, stream)
    };

    struct step_result
    {
        token_id id = -1;
        double logprob = 0;
        double raw_logprob = std::numeric_limits<double>::quiet_NaN();
        double entropy = std::numeric_limits<double>::quiet_NaN();
        span<const sampled_token> top;  ///< rank order: logit desc, id asc
        std::string_view text;          ///< safe to show now
        finish_reason finish = finish_reason::none;
    };

    namespace detail
    {
        struct slot_marks;  // batch.hpp: sample_batch's check that no sequence is listed twice

        inline std::ptrdiff_t index_of(const std::vector<token_id>& ids, token_id id)
        {
            const auto at = std::find(ids.begin(), ids.end(), id);
            return at == ids.end() ? -1 : at - ids.begin();
        }

        template <class S>
        auto seed_of(const S& s, int) -> decltype(std::uint64_t(s.params().seed))
        {
            return s.params().seed;
        }
        template <class S>
        std::uint64_t seed_of(const S&, long)
        {
            return 0;
        }

        /// The processor a sequence runs before its sampler's stages: the
        /// `always` ids at every step, the `early` ones while fewer than n
        /// tokens were generated.
        class stop_mask
        {
        public:
            static constexpr const char* name = "min_tokens";

            stop_mask() = default;
            stop_mask(std::vector<token_id> always, std::vector<token_id> early, std::size_t n)
                : m_always(std::move(always)), m_early(std::move(early)), m_n(n)
            {
            }

            template <class T>
            void apply(candidates<T>& c, const token_history& history) const
            {
                const bool early = history.generated().size() < m_n;
                check_ids(m_always, c.vocab(), name, "eos id");
                check_ids(early ? token_span(m_early) : token_span(), c.vocab(), name, "eos or stop token id");
                for (const token_id id : m_always)
                {
                    c.mask(id);
                }
                for (const token_id id : early ? token_span(m_early) : token_span())
                {
                    c.mask(id);
                }
            }

        private:
            std::vector<token_id> m_always, m_early;
            std::size_t m_n = 0;
        };
    }

    template <class Sampler>
    class basic_sequence
    {
    public:
        /// who: how errors begin ("sequence: stop sequence 0 is empty").
        basic_sequence(Sampler sampler, token_span prompt, sequence_options options, const std::string& who = "sequence")
            : m_sampler(std::forward<Sampler>(sampler)),
              m_options(std::move(options)),
              m_text(m_options.stop_strings, m_options.include_stop_str_in_output, who),
              m_who(who)
        {
            const auto& o = m_options;
            if (o.min_tokens > o.max_tokens)
            {
                throw invalid_parameter(who + ": min_tokens " + std::to_string(o.min_tokens) + " exceeds max_tokens " +
                                        std::to_string(o.max_tokens));
            }
            for (std::size_t k = 0; k < o.stop_sequences.size(); ++k)
            {
                if (o.stop_sequences[k].empty())
                {
                    throw invalid_parameter(who + ": stop sequence " + std::to_string(k) + " is empty");
                }
                detail::check_not_negative(o.stop_sequences[k], who + ": stop sequence token");
            }
            detail::check_not_negative(o.eos, who + ": eos id");
            detail::check_not_negative(o.stop_token_ids, who + ": stop token id");
            if (!o.stop_strings.empty() && o.vocab == nullptr)
            {
                throw invalid_parameter(who + ": stop strings need a vocabulary (options.vocab)");
            }
            std::vector<token_id> early = o.stop_token_ids;
            if (o.eos_mode == eos_policy::stop)
            {
                early.insert(early.end(), o.eos.begin(), o.eos.end());
            }
            m_mask = detail::stop_mask(o.eos_mode == eos_policy::mask ? o.eos : std::vector<token_id>{},
                                       std::move(early), o.min_tokens);
            const std::size_t reserved = detail::tokens_to_reserve(o.max_tokens);
            m_history.reserve(prompt.size() + reserved);
            m_text.reserve(o.vocab != nullptr ? 8 * reserved : 0);
            m_top.reserve(o.top_logprobs);
            start(prompt);
        }

        /// One token from the model's row for history().tokens(), drawn from
        /// the sequence's own engine.
        template <class E>
        const step_result& step(const xt::xexpression<E>& row)
        {
            return own_step(row, nullptr);
        }

        /// One token, drawn from the own engine, in the caller's workspace ws
        /// (many sequences sharing a few workspaces, as sample_batch does).
        template <class E>
        const step_result& step(const xt::xexpression<E>& row, workspace& ws)
        {
            return own_step(row, &ws);
        }

        /// One token, drawn from rng.
        template <class E, class URBG, std::enable_if_t<detail::is_urbg<URBG>::value, int> = 0>
        const step_result& step(const xt::xexpression<E>& row, URBG& rng)
        {
            return run_step(row, rng, nullptr);
        }

        /// Speculative decoding (speculative.hpp): verifies the draft tokens
        /// against the model's rows for history() followed by them (rows
        /// [k + 1, V], row i after the first i draft tokens), as verify_draft
        /// does with this sequence's sampler, stop mask and engine, and
        /// appends the tokens it emits, each a step as step() makes it
        /// (log-probs, text, stops). A stop among them ends the sequence
        /// there and drops the tokens after it; an eos or stop token id ends
        /// the verification. At most max_tokens tokens in all: a draft
        /// longer than the room left is verified only as far as it fits.
        /// Returns the steps (views valid until the next call). Errors:
        /// verify_draft's ("sequence: step_draft: ..."), rows not k + 1, a
        /// bad row ("step 7: logits: ..."); the sequence is then as before,
        /// but for a stage that learns from draws (mirostat): it has observed
        /// the positions verified before the failing one (docs/semantics.md).
        template <class E>
        span<const step_result> step_draft(const xt::xexpression<E>& rows, token_span draft,
                                           const verify_options& options = {}, workspace* ws = nullptr)
        {
            return draft_step(rows, draft, detail::draft_rows<double>(), 0, 0, options, ws);
        }
        /// The same for a draft drawn from draft_probs ([k, V]). With ws, the
        /// rows are filtered in the caller's workspace (step_draft_batch).
        template <class E, class Q>
        span<const step_result> step_draft(const xt::xexpression<E>& rows, token_span draft,
                                           const xt::xexpression<Q>& draft_probs, const verify_options& options = {},
                                           workspace* ws = nullptr)
        {
            const Q& q = draft_probs.derived_cast();
            std::vector<std::decay_t<typename Q::value_type>> copy;
            const auto rows_q = detail::rows_of(q, copy, detail::who_name{"step_draft", &m_who});
            return draft_step(rows, draft, rows_q, q.shape()[0], q.shape()[1], options, ws);
        }

        /// Ends the sequence from outside: cancelled, or length (the context
        /// is full); the result carries the rest of the text.
        const step_result& finish(finish_reason why)
        {
            if (finished())
            {
                throw invalid_use(m_who + ": finish after the end");
            }
            if (why != finish_reason::cancelled && why != finish_reason::length)
            {
                throw invalid_use(m_who + ": finish(" + to_string(why) + "): only cancelled or length end it from outside");
            }
            end(why);
            m_result = step_result();
            m_result.finish = why;
            m_result.text = m_text.take();
            return m_result;
        }

        /// A copy that draws from stream `stream` of the same seed, its engine
        /// at the stream's start: n samples of one prompt are fork(1), ...,
        /// fork(n - 1) beside the original, before the first step (or from
        /// a shared prefix). The sampler is copied, its constraints forked.
        basic_sequence fork(std::uint64_t stream) const
        {
            static_assert(!std::is_reference<Sampler>::value, "fork copies the sampler; this sequence borrows it");
            basic_sequence copy(*this);
            copy.m_options.stream = stream;
            copy.m_engine = philox4x32(copy.seed(), stream);
            copy.m_result = step_result();  // the original's views are not the copy's
            copy.m_steps.clear();
            return copy;
        }

        /// A new request in this sequence: the prompt, the engine at its start,
        /// the sampler's learnt state forgotten; options and capacity kept.
        void reset(token_span prompt)
        {
            m_sampler.reset();
            start(prompt);
        }

        bool finished() const noexcept { return m_reason != finish_reason::none; }
        finish_reason reason() const noexcept { return m_reason; }
        /// Prompt and generated tokens, the prompt's length marked: the model's input.
        token_history history() const noexcept { return token_history(token_span(m_history), m_prompt); }
        token_span generated() const noexcept { return token_span(m_history).subspan(m_prompt); }
        /// The text so far (with options.vocab); the final text once finished.
        const std::string& text() const noexcept { return m_text.text(); }
        /// Where the stop string starts in text(); npos.
        std::size_t stop_at() const noexcept { return m_text.stop_at(); }
        /// Which eos id, stop token id, stop sequence or stop string ended it; -1.
        std::ptrdiff_t stop_index() const noexcept { return m_stop_index; }
        /// The sum of the tokens' raw log-probabilities (options.raw_logprob),
        /// else of their log-probabilities under the distributions drawn from.
        double cumulative_logprob() const noexcept { return m_cumulative; }
        /// The own engine's key: options.seed, else the sampler's seed, else 0.
        std::uint64_t seed() const { return m_options.seed ? *m_options.seed : detail::seed_of(m_sampler, 0); }
        const sequence_options& options() const noexcept { return m_options; }
        std::remove_reference_t<Sampler>& sampler() noexcept { return m_sampler; }
        philox4x32& engine() noexcept { return m_engine; }

    private:
        friend struct detail::slot_marks;

        // A step from the own engine, restored if the step throws.
        template <class E>
        const step_result& own_step(const xt::xexpression<E>& row, workspace* ws)
        {
            const philox4x32 saved = m_engine;
            try
            {
                return run_step(row, m_engine, ws);
            }
            catch (...)
            {
                m_engine = saved;
                throw;
            }
        }

        // A step in ws (the sampler's own workspace when null).
        template <class E, class URBG>
        const step_result& run_step(const xt::xexpression<E>& row, URBG& rng, workspace* ws)
        {
            if (finished())
            {
                throw invalid_use(m_who + ": step after the end (" + to_string(m_reason) + ")");
            }
            const std::size_t g = generated().size();
            step_result r;
            try
            {
                auto& c = ws != nullptr ? m_sampler.filter(*ws, row, history(), rng, m_mask)
                                        : m_sampler.filter(row, history(), rng, m_mask);
                diagnose(c, m_sampler.draw(c, rng), r, m_top);
            }
            catch (const invalid_logits& e)
            {
                throw invalid_logits("step " + std::to_string(g) + ": " + e.what());
            }
            check_in_vocabulary(r.id);
            m_history.push_back(r.id);
            m_cumulative += m_options.raw_logprob ? r.raw_logprob : r.logprob;
            r.finish = after(r.id);
            r.text = m_text.take();
            m_result = r;
            return m_result;
        }

        // Token t drawn (or verified) from c, with the diagnostics the options
        // ask for: the raw log-probability, the entropy, the top list (into top).
        template <class T>
        void diagnose(candidates<T>& c, const sampled_token& t, step_result& r, std::vector<sampled_token>& top)
        {
            r.id = t.id;
            r.logprob = t.logprob;
            const auto& o = m_options;
            const bool raw_top = o.top_logprobs > 0 && o.top_source == logprob_source::raw;
            if (o.raw_logprob || o.entropy || raw_top)
            {
                const detail::raw_softmax<T> raw(c);
                r.raw_logprob = o.raw_logprob ? raw.logprob(std::size_t(t.id)) : r.raw_logprob;
                r.entropy = o.entropy ? raw.entropy() : r.entropy;
                if (raw_top)
                {
                    raw.top(std::min(o.top_logprobs, c.vocab()), m_scratch.get(T()), top);
                    r.top = top;
                }
            }
            if (o.top_logprobs > 0 && !raw_top)
            {
                processed_top(c, top);
                r.top = top;
            }
        }

        // The top_logprobs best kept tokens of c, with their log-probabilities
        // as the draw computes its token's (the same bits for the same token).
        template <class T>
        void processed_top(candidates<T>& c, std::vector<sampled_token>& top)
        {
            auto& best = m_scratch.get(T());
            c.top_items(m_options.top_logprobs, best);
            const double z = c.total_weight();
            top.clear();
            for (const auto& s : best)
            {
                if (s.logit != -std::numeric_limits<T>::infinity())  // a dense set's masked tokens fill a short list
                {
                    top.push_back({s.id, std::log(double(c.weight(s.logit)) / z)});
                }
            }
        }

        // The draft's walk as the sequence sees it: its sampler with its
        // stop mask, the history a view of m_history (the draft appended for
        // the call), each emitted token diagnosed into a step.
        struct draft_walk
        {
            basic_sequence* s;
            workspace* ws;
            token_span draft;
            std::size_t first = 0;  // where the draft starts in m_history
            std::size_t at = 0;
            const detail::draft_rows<double>* q64 = nullptr;
            const detail::draft_rows<float>* q32 = nullptr;

            template <class E, class URBG>
            auto& filter(const E& row, const token_history& h, URBG& rng)
            {
                return ws != nullptr ? s->m_sampler.filter(*ws, row, h, rng, s->m_mask)
                                     : s->m_sampler.filter(row, h, rng, s->m_mask);
            }
            void observe(const sampled_token& t) { s->m_sampler.observe(t); }

            token_history history() const
            {
                return token_history(token_span(s->m_history).subspan(0, first + at), s->m_prompt);
            }
            std::size_t row() const noexcept { return at; }
            std::ptrdiff_t first_child() const noexcept { return at < draft.size() ? std::ptrdiff_t(at) : -1; }
            std::ptrdiff_t next(std::ptrdiff_t) const noexcept { return -1; }
            token_id token(std::ptrdiff_t j) const noexcept { return draft[std::size_t(j)]; }
            detail::draft_row q(std::ptrdiff_t j) const noexcept
            {
                return q64 != nullptr ? q64->row(std::size_t(j), token(j)) : q32->row(std::size_t(j), token(j));
            }
            template <class C>
            void accept(std::ptrdiff_t, const sampled_token& t, C& c)
            {
                end(t, c);
                ++at;
            }
            template <class C>
            void end(const sampled_token& t, C& c)
            {
                const std::size_t i = s->m_steps.size();
                s->m_steps.emplace_back();
                if (s->m_tops.size() <= i)
                {
                    s->m_tops.emplace_back();
                    s->m_tops.back().reserve(s->m_options.top_logprobs);
                }
                s->diagnose(c, t, s->m_steps.back(), s->m_tops[i]);
            }
            token_id last() const noexcept { return s->m_steps.back().id; }
            std::string where(std::size_t depth) const { return "step " + std::to_string(first - s->m_prompt + depth); }
        };

        // step_draft's work over draft probabilities as rows (none: one-hot).
        template <class E, class V>
        span<const step_result> draft_step(const xt::xexpression<E>& rows_expr, token_span draft,
                                           const detail::draft_rows<V>& q, std::size_t q_rows, std::size_t q_cols,
                                           const verify_options& options, workspace* ws)
        {
            const detail::who_name who{"step_draft", &m_who};
            if (finished())
            {
                throw invalid_use(who.str() + " after the end (" + to_string(m_reason) + ")");
            }
            const E& rows = rows_expr.derived_cast();
            detail::check_verify_input(rows, draft, q, q_rows, q_cols, options, who, "k");
            if (rows.shape()[0] != draft.size() + 1)
            {
                throw invalid_parameter(who.str() + ": " + std::to_string(draft.size()) + " draft tokens need " +
                                        std::to_string(draft.size() + 1) + " target rows, got " +
                                        std::to_string(rows.shape()[0]));
            }
            const auto& o = m_options;
            const std::size_t room = o.max_tokens - generated().size();  // >= 1: not finished
            const std::size_t k = std::min(draft.size(), room - 1);
            const std::size_t n0 = m_history.size();
            const philox4x32 saved = m_engine;
            m_draft.assign(draft.begin(), draft.begin() + std::ptrdiff_t(k));  // the draft may be a view of m_history
            draft_walk walk{this, ws, token_span(), n0};
            if constexpr (std::is_same<V, float>::value)
            {
                walk.q32 = &q;
            }
            else
            {
                walk.q64 = &q;
            }
            const auto ends = [&o](token_id id) {
                return (o.eos_mode == eos_policy::stop && detail::index_of(o.eos, id) >= 0) ||
                       detail::index_of(o.stop_token_ids, id) >= 0;
            };
            m_steps.clear();
            m_history.insert(m_history.end(), m_draft.begin(), m_draft.end());
            walk.draft = token_span(m_history).subspan(n0, k);
            try
            {
                detail::draft_row rejected[1];
                double sums[2];
                detail::walk_draft(walk, rows, walk, options, ends, rejected, sums, m_engine);
                m_history.resize(n0);
                for (const auto& r : m_steps)
                {
                    check_in_vocabulary(r.id);
                }
            }
            catch (...)
            {
                m_history.resize(n0);
                m_engine = saved;
                m_steps.clear();
                throw;
            }
            // Each token as a step of its own; a stop drops the rest.
            std::size_t kept = 0;
            for (auto& r : m_steps)
            {
                m_history.push_back(r.id);
                m_cumulative += o.raw_logprob ? r.raw_logprob : r.logprob;
                r.finish = after(r.id);
                const std::string_view delta = m_text.take();
                r.text = std::string_view(nullptr, delta.size());
                m_offsets.resize(std::max(m_offsets.size(), kept + 1));
                m_offsets[kept] = std::size_t(delta.data() - m_text.text().data());  // never past a stop's cut
                ++kept;
                if (finished())
                {
                    break;
                }
            }
            m_steps.resize(kept);
            for (std::size_t i = 0; i < kept; ++i)  // the text's views once it is written
            {
                m_steps[i].text = std::string_view(m_text.text().data() + m_offsets[i], m_steps[i].text.size());
            }
            return span<const step_result>(m_steps.data(), m_steps.size());
        }

        void check_in_vocabulary(token_id id) const
        {
            if (m_options.vocab != nullptr && std::size_t(id) >= m_options.vocab->size())
            {
                throw invalid_parameter(m_who + ": token " + std::to_string(id) + " is outside the vocabulary of " +
                                        std::to_string(m_options.vocab->size()));
            }
        }

        /// The stops after token id was appended.
        finish_reason after(token_id id)
        {
            const auto& o = m_options;
            const std::size_t g = generated().size();
            const bool may_stop = g > o.min_tokens;
            finish_reason why = finish_reason::none;
            if (may_stop)
            {
                std::ptrdiff_t k = -1;
                if (o.eos_mode == eos_policy::stop && (k = detail::index_of(o.eos, id)) >= 0)
                {
                    why = finish_reason::eos;
                }
                else if ((k = detail::index_of(o.stop_token_ids, id)) >= 0)
                {
                    why = finish_reason::stop_token;
                }
                for (std::size_t s = 0; s < o.stop_sequences.size() && why == finish_reason::none; ++s)
                {
                    if (detail::ends_with(generated(), o.stop_sequences[s].data(),
                                          o.stop_sequences[s].data() + o.stop_sequences[s].size()))
                    {
                        why = finish_reason::stop_sequence;
                        k = std::ptrdiff_t(s);
                    }
                }
                m_stop_index = k;
            }
            const bool ends_by_id = why == finish_reason::eos || why == finish_reason::stop_token;
            if (o.vocab != nullptr && !(ends_by_id && !o.include_stop_str_in_output))
            {
                m_text.append(o.vocab->bytes(id), may_stop && why == finish_reason::none);
                if (m_text.stopped())
                {
                    why = finish_reason::stop_string;
                    m_stop_index = std::ptrdiff_t(m_text.stop_index());
                }
            }
            if (why == finish_reason::none && g == o.max_tokens)
            {
                why = finish_reason::length;
            }
            if (why != finish_reason::none)
            {
                end(why);
            }
            return why;
        }

        void start(token_span prompt)
        {
            m_history.assign(prompt.begin(), prompt.end());
            m_prompt = prompt.size();
            m_text.clear();
            m_reason = finish_reason::none;
            m_stop_index = -1;
            m_cumulative = 0;
            m_engine = philox4x32(seed(), m_options.stream);
            if (m_options.max_tokens == 0)
            {
                end(finish_reason::length);
            }
        }

        void end(finish_reason why)
        {
            m_reason = why;
            if (!m_text.stopped())
            {
                m_text.finish();
            }
        }

        Sampler m_sampler;
        sequence_options m_options;
        detail::text_stream m_text;
        detail::stop_mask m_mask;
        philox4x32 m_engine{0, 0};
        std::vector<token_id> m_history;
        std::size_t m_prompt = 0;
        std::vector<sampled_token> m_top;
        std::vector<step_result> m_steps;                // step_draft's
        std::vector<std::vector<sampled_token>> m_tops;  // and their top lists
        std::vector<std::size_t> m_offsets;              // and where their texts start
        std::vector<token_id> m_draft;                   // step_draft's copy of the draft
        detail::scored_lists m_scratch;
        step_result m_result;
        finish_reason m_reason = finish_reason::none;
        std::ptrdiff_t m_stop_index = -1;
        double m_cumulative = 0;
        std::string m_who;
        bool m_listed = false;  // set by sample_batch's check while it runs
    };

    /// A request over a run-time sampler, which it owns.
    using sequence = basic_sequence<xsampler::sampler>;
}

#endif
