// xsampler/request.hpp — a completion request as the engines spell it. (xsampler, BSD-3-Clause)
//
// parse_request(json, context[, dialect]) reads one completion request (a JSON
// object, or its text) into what the library runs: the prompt ids, the
// sampling_params (a constraint, when asked, is the custom stage "constraint"
// first in the order), the sequence_options (lengths, stops, eos, log-probs,
// seed), n and best_of, stream, prompt log-probs. This header needs
// nlohmann-json, as json_schema.hpp does; the rest of the library does not.
//
//   request_dialect::openai  OpenAI's /v1/completions fields with vLLM's
//                            extensions, each with vLLM's default and
//                            meaning (temperature 1, top_k 0, max_tokens 16,
//                            penalties over the generated tokens, ignore_eos
//                            samples eos and carries on)
//   request_dialect::llama   llama.cpp server's /completion fields and
//                            defaults (temperature 0.8, top_k 40, top_p 0.95,
//                            min_p 0.05, n_predict -1, repeat_last_n 64,
//                            ignore_eos masks eos, llama.cpp's stage order)
// docs/semantics.md ("Requests") has every field: what it maps to, where the
// engines disagree, which one we follow.
//
// request_context: what the request cannot say — the vocabulary (ids are
// checked against its size; stop strings and response text need its bytes;
// constraints need its index), the eos ids, an encoder for text (string
// prompts, bad_words, llama.cpp's text logit_bias and DRY breakers; the
// library never tokenizes by itself), the longest generation allowed, and the
// seed of a request that gives none (never a hidden random one).
//
// Errors: invalid_parameter("request: <field>: ..."), naming the field and
// the value; an unknown field, a field of the other dialect, and a field given
// twice under two names are errors (vLLM's server ignores unknown fields,
// guided_* since they were removed, and then runs unconstrained). JSON null
// is the field's default. Integers must be written as integers (5.0 is not
// one). A request that parses is complete: its sampler and sequence were
// built once to check them.
#ifndef XSAMPLER_REQUEST_HPP
#define XSAMPLER_REQUEST_HPP

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "constraint.hpp"
#include "gbnf.hpp"
#include "json_schema.hpp"
#include "sampler.hpp"
#include "sequence.hpp"

namespace xsampler
{
    enum class request_dialect
    {
        openai,  ///< OpenAI /v1/completions with vLLM's extensions and defaults
        llama    ///< llama.cpp server /completion
    };

    struct request_context
    {
        /// The model's vocabulary as an index: its size bounds every id, its bytes decode the
        /// text (stop strings), and constraints are compiled over it (its eos ids end a
        /// constrained text, so they must be `eos`). Without it, give vocab_size.
        std::shared_ptr<const vocabulary_index> index;
        std::size_t vocab_size = 0;  ///< without an index: the model's vocabulary size
        std::vector<token_id> eos;   ///< the model's end ids; empty: the index's vocabulary's
        /// Text to ids (no special tokens): string prompts, bad_words, llama.cpp's text
        /// logit_bias keys and DRY breakers. Empty: those are errors.
        std::function<std::vector<token_id>(const std::string&)> encode;
        std::size_t max_tokens = 4096;  ///< the most one request may generate ("to the end of the context")
        std::uint64_t seed = 0;         ///< the seed of a request that gives none (or -1)
    };

    struct completion_request
    {
        std::vector<token_id> prompt;
        sampling_params params;    ///< with the constraint, if any, as custom stage "constraint"
        sequence_options options;  ///< vocab, eos, stops, lengths, log-prob settings, seed
        /// The context's index, held: options.vocab points into it, so the request outlives
        /// the context.
        std::shared_ptr<const vocabulary_index> index;
        std::size_t n = 1;         ///< samples returned
        std::size_t best_of = 1;   ///< samples drawn (>= n): the n best by cumulative raw log-prob
        bool stream = false;
        bool include_usage = false;  ///< stream_options.include_usage
        /// The response carries log-probs: each token's (options.raw_logprob, or the drawn
        /// distribution's when options.top_source is processed) and options.top_logprobs
        /// alternatives.
        bool logprobs = false;
        std::optional<std::size_t> prompt_logprobs;  ///< top-n of each prompt token (prompt_logprobs())
        std::string model;                           ///< echoed in the response
        std::string constraint;                      ///< "", "json", "json_schema", "regex", "grammar", "choice"
        std::vector<std::string> ignored;            ///< llama.cpp server fields accepted and ignored
    };

    namespace detail
    {
        using request_json = nlohmann::ordered_json;

        [[noreturn]] inline void request_error(const std::string& field, const std::string& what)
        {
            throw invalid_parameter("request: " + field + ": " + what);
        }

        /// A value as the request wrote it, for an error (cut at 60 bytes).
        inline std::string request_shown(const request_json& v)
        {
            std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
            return s.size() > 60 ? s.substr(0, 57) + "..." : s;
        }

        /// A text from the request, for an error (cut at 40 bytes, on a character boundary).
        inline std::string request_cut(const std::string& text)
        {
            if (text.size() <= 40)
            {
                return text;
            }
            std::size_t end = 37;
            while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80)
            {
                --end;
            }
            return text.substr(0, end) + "...";
        }

        /// A member of an object, or nullptr where it is absent or null (its default).
        inline const request_json* request_member(const request_json& v, const char* name)
        {
            const auto it = v.find(name);
            return it == v.end() || it->is_null() ? nullptr : &*it;
        }

        inline double request_number(const request_json& v, const std::string& field)
        {
            if (!v.is_number())
            {
                request_error(field, "must be a number, got " + request_shown(v));
            }
            const double x = v.get<double>();
            if (!std::isfinite(x))
            {
                request_error(field, "must be finite, got " + request_shown(v));
            }
            return x;
        }

        /// x in [lo, hi] (lo excluded when open_lo), else "must be in <range>, got x".
        inline double request_number(const request_json& v, const std::string& field, double lo, double hi,
                                     const char* range, bool open_lo = false)
        {
            const double x = request_number(v, field);
            if (x < lo || x > hi || (open_lo && x == lo))
            {
                request_error(field, std::string("must be in ") + range + ", got " + request_shown(v));
            }
            return x;
        }

        inline std::int64_t request_integer(const request_json& v, const std::string& field)
        {
            if (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
            {
                request_error(field, "is too large, got " + request_shown(v));
            }
            if (!v.is_number_integer())
            {
                request_error(field, "must be an integer, got " + request_shown(v));
            }
            return v.get<std::int64_t>();
        }

        inline std::int64_t request_integer(const request_json& v, const std::string& field, std::int64_t lo,
                                            std::int64_t hi)
        {
            const std::int64_t x = request_integer(v, field);
            if (x < lo || x > hi)
            {
                request_error(field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                                         request_shown(v));
            }
            return x;
        }

        inline bool request_bool(const request_json& v, const std::string& field)
        {
            if (!v.is_boolean())
            {
                request_error(field, "must be true or false, got " + request_shown(v));
            }
            return v.get<bool>();
        }

        inline const std::string& request_string(const request_json& v, const std::string& field)
        {
            if (!v.is_string())
            {
                request_error(field, "must be a string, got " + request_shown(v));
            }
            return v.get_ref<const std::string&>();
        }

        inline const request_json& request_array(const request_json& v, const std::string& field)
        {
            if (!v.is_array())
            {
                request_error(field, "must be an array, got " + request_shown(v));
            }
            return v;
        }

        /// Each key of an object is one of `known` (none: any key).
        inline void request_keys(const request_json& v, const std::string& field,
                                 std::initializer_list<const char*> known)
        {
            if (!v.is_object())
            {
                request_error(field, "must be an object, got " + request_shown(v));
            }
            for (const auto& item : v.items())
            {
                if (known.size() > 0 &&
                    std::none_of(known.begin(), known.end(), [&](const char* k) { return item.key() == k; }))
                {
                    request_error(field + "." + request_cut(item.key()), "unknown field");
                }
            }
        }

        /// The fields of each dialect; `hint` names this dialect's field for the other's.
        struct request_field
        {
            const char* name;
            const char* hint;  ///< the other dialect's spelling, or nullptr
        };

        inline const std::vector<request_field>& openai_fields()
        {
            static const std::vector<request_field> fields = {
                {"model", nullptr}, {"prompt", nullptr}, {"max_tokens", "n_predict"},
                {"max_completion_tokens", "n_predict"}, {"min_tokens", nullptr}, {"temperature", nullptr},
                {"top_p", nullptr}, {"top_k", nullptr}, {"min_p", nullptr}, {"n", nullptr}, {"best_of", nullptr},
                {"seed", nullptr}, {"stop", nullptr}, {"stop_token_ids", nullptr},
                {"include_stop_str_in_output", nullptr}, {"ignore_eos", nullptr}, {"logprobs", "n_probs"},
                {"top_logprobs", "n_probs"}, {"logprobs_mode", "post_sampling_probs"}, {"prompt_logprobs", nullptr},
                {"presence_penalty", nullptr}, {"frequency_penalty", nullptr}, {"repetition_penalty", "repeat_penalty"},
                {"logit_bias", nullptr}, {"allowed_token_ids", nullptr}, {"bad_words", nullptr},
                {"sequence_bias", nullptr}, {"response_format", "json_schema"}, {"structured_outputs", "grammar"},
                {"guided_json", "json_schema"}, {"guided_regex", nullptr}, {"guided_grammar", "grammar"},
                {"guided_choice", nullptr}, {"stream", nullptr}, {"stream_options", nullptr}, {"user", nullptr}};
            return fields;
        }

        inline const std::vector<request_field>& llama_fields()
        {
            static const std::vector<request_field> fields = {
                {"model", nullptr}, {"prompt", nullptr}, {"n_predict", "max_tokens"}, {"temperature", nullptr},
                {"dynatemp_range", nullptr}, {"dynatemp_exponent", nullptr}, {"top_k", nullptr}, {"top_p", nullptr},
                {"min_p", nullptr}, {"typical_p", nullptr}, {"top_n_sigma", nullptr}, {"min_keep", nullptr},
                {"repeat_penalty", "repetition_penalty"}, {"repeat_last_n", nullptr}, {"presence_penalty", nullptr},
                {"frequency_penalty", nullptr}, {"dry_multiplier", nullptr}, {"dry_base", nullptr},
                {"dry_allowed_length", nullptr}, {"dry_penalty_last_n", nullptr}, {"dry_sequence_breakers", nullptr},
                {"xtc_probability", nullptr}, {"xtc_threshold", nullptr}, {"mirostat", nullptr},
                {"mirostat_tau", nullptr}, {"mirostat_eta", nullptr}, {"samplers", nullptr}, {"seed", nullptr},
                {"stop", nullptr}, {"ignore_eos", nullptr}, {"logit_bias", nullptr}, {"n_probs", "logprobs"},
                {"post_sampling_probs", "logprobs_mode"}, {"grammar", "guided_grammar"},
                {"json_schema", "response_format"}, {"stream", nullptr},
                // server fields about its cache and slots: accepted and ignored (completion_request::ignored)
                {"cache_prompt", nullptr}, {"id_slot", nullptr}, {"n_keep", nullptr}};
            return fields;
        }

        inline const request_field* find_field(const std::vector<request_field>& fields, const std::string& name)
        {
            const auto it = std::find_if(fields.begin(), fields.end(),
                                         [&](const request_field& f) { return name == f.name; });
            return it == fields.end() ? nullptr : &*it;
        }

        /// Every key of the request is a field of its dialect.
        inline void check_request_fields(const request_json& j, request_dialect dialect)
        {
            const bool openai = dialect == request_dialect::openai;
            const auto& own = openai ? openai_fields() : llama_fields();
            const auto& other = openai ? llama_fields() : openai_fields();
            for (const auto& item : j.items())
            {
                const std::string& key = item.key();
                if (find_field(own, key) != nullptr)
                {
                    continue;
                }
                if (openai && key == "messages")
                {
                    throw invalid_parameter("request: messages: a chat request needs a chat template, which the "
                                            "library does not apply; send the templated text as 'prompt'");
                }
                if (const auto* f = find_field(other, key))
                {
                    std::string use = f->hint ? std::string(" (use '") + f->hint + "')" : std::string();
                    throw invalid_parameter("request: '" + key + "' is " + (openai ? "llama.cpp's" : "OpenAI's / vLLM's") +
                                            "; this request is read as " + (openai ? "OpenAI's / vLLM's" : "llama.cpp's") +
                                            use);
                }
                throw invalid_parameter("request: unknown field '" + request_cut(key) + "'");
            }
        }

        /// A stage list as llama.cpp's `samplers` gives it, after the processors it does not name
        /// (in the default order): llama.cpp applies its logit bias before its list too.
        inline std::vector<std::string> with_processors(const std::vector<std::string>& listed)
        {
            std::vector<std::string> order;
            for (const char* name : {"logit_bias", "sequence_bias", "no_repeat_ngram", "bad_words", "token_mask"})
            {
                if (std::find(listed.begin(), listed.end(), name) == listed.end())
                {
                    order.emplace_back(name);
                }
            }
            order.insert(order.end(), listed.begin(), listed.end());
            return order;
        }

        /// Reads one request: each field once, in the order of the table in docs/semantics.md.
        class request_reader
        {
        public:
            request_reader(const request_json& j, const request_context& ctx, request_dialect dialect)
                : m_j(j), m_ctx(ctx), m_llama(dialect == request_dialect::llama)
            {
                m_vocab = ctx.index ? &ctx.index->vocab() : nullptr;
                m_size = m_vocab ? m_vocab->size() : ctx.vocab_size;
                if (ctx.max_tokens == 0)
                {
                    throw invalid_parameter("request: the context's max_tokens is 0");
                }
                if (m_size == 0)
                {
                    throw invalid_parameter("request: the context has no vocabulary (give index or vocab_size)");
                }
                if (m_size > std::size_t(std::numeric_limits<token_id>::max()))
                {
                    throw invalid_parameter("request: the context's vocabulary is larger than token ids allow");
                }
                m_eos = !ctx.eos.empty() || m_vocab == nullptr ? ctx.eos : m_vocab->eos();
                for (const auto id : m_eos)
                {
                    if (id < 0 || std::size_t(id) >= m_size)
                    {
                        throw invalid_parameter("request: the context's eos id " + std::to_string(id) +
                                                " is outside the vocabulary");
                    }
                }
            }

            completion_request read()
            {
                completion_request r;
                r.options.vocab = m_vocab;
                r.index = m_ctx.index;
                r.options.eos = m_eos;
                r.params.order.clear();  // set below, per dialect
                if (const auto* v = get("model"))
                {
                    r.model = request_string(*v, "model");
                }
                read_prompt(r);
                if (m_llama)
                {
                    read_llama(r);
                }
                else
                {
                    read_openai(r);
                }
                read_constraint(r);
                if (const auto* v = get("stream"))
                {
                    r.stream = request_bool(*v, "stream");
                }
                if (const auto* v = get("stream_options"))
                {
                    request_keys(*v, "stream_options", {"include_usage"});
                    if (!r.stream)
                    {
                        request_error("stream_options", "goes with stream: true");
                    }
                    r.include_usage = true;  // vLLM's default once stream_options is given
                    if (const auto* usage = request_member(*v, "include_usage"))
                    {
                        r.include_usage = request_bool(*usage, "stream_options.include_usage");
                    }
                }
                if (r.stream && r.prompt_logprobs)
                {
                    request_error("prompt_logprobs", "cannot be streamed (vLLM refuses it too)");
                }
                if (const auto* v = get("user"))
                {
                    request_string(*v, "user");
                }
                if (r.stream && r.best_of > r.n)
                {
                    request_error("best_of", "cannot be streamed (best_of " + std::to_string(r.best_of) + " > n " +
                                                 std::to_string(r.n) + ")");
                }
                return r;
            }

        private:
            const request_json* get(const char* name) const
            {
                const auto it = m_j.find(name);
                return it == m_j.end() || it->is_null() ? nullptr : &*it;
            }

            token_id id_of(const request_json& v, const std::string& field) const
            {
                const std::int64_t id = request_integer(v, field);
                if (id < 0 || std::uint64_t(id) >= m_size)
                {
                    request_error(field, "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                             std::to_string(m_size) + ")");
                }
                return token_id(id);
            }

            std::vector<token_id> ids_of(const request_json& v, const std::string& field) const
            {
                std::vector<token_id> ids;
                for (const auto& item : request_array(v, field))
                {
                    ids.push_back(id_of(item, field));
                }
                return ids;
            }

            std::vector<token_id> encoded(const std::string& text, const std::string& field) const
            {
                if (!m_ctx.encode)
                {
                    request_error(field, "text needs the context's encode (request_context::encode)");
                }
                std::vector<token_id> ids;
                try
                {
                    ids = m_ctx.encode(text);
                }
                catch (const std::exception& e)  // the encoder's own words: an unknown word, say
                {
                    request_error(field, e.what());
                }
                for (const auto id : ids)
                {
                    if (id < 0 || std::size_t(id) >= m_size)
                    {
                        request_error(field, "the context's encode returned token id " + std::to_string(id) +
                                                 ", outside the vocabulary");
                    }
                }
                return ids;
            }

            // prompt: ids, or text through encode; llama.cpp also takes ids and text mixed.
            void read_prompt(completion_request& r) const
            {
                const auto* v = get("prompt");
                if (v == nullptr)
                {
                    request_error("prompt", "is required");
                }
                read_prompt_of(*v, r);
            }

            /// outer: the prompt field itself (a list of one prompt is that prompt, as vLLM's batch of one).
            void read_prompt_of(const request_json& value, completion_request& r, bool outer = true) const
            {
                const auto* v = &value;
                if (v->is_string())
                {
                    r.prompt = encoded(v->get_ref<const std::string&>(), "prompt");
                }
                else
                {
                    for (const auto& item : request_array(*v, "prompt"))
                    {
                        if (item.is_string() && m_llama)
                        {
                            const auto part = encoded(item.get_ref<const std::string&>(), "prompt");
                            r.prompt.insert(r.prompt.end(), part.begin(), part.end());
                        }
                        else if ((item.is_string() || item.is_array()) && v->size() == 1 && outer && !m_llama)
                        {
                            read_prompt_of(item, r, false);  // a batch of one prompt
                            return;
                        }
                        else if (item.is_string() || item.is_array())
                        {
                            request_error("prompt", "one prompt per request (a list of prompts is a batch: send "
                                                    "each as its own request)");
                        }
                        else
                        {
                            r.prompt.push_back(id_of(item, "prompt"));
                        }
                    }
                }
                if (r.prompt.empty())
                {
                    request_error("prompt", "is empty");
                }
            }

            // stop: a string or a list of them; "" is an error (vLLM), skipped (llama.cpp).
            void read_stop(completion_request& r) const
            {
                const auto* v = get("stop");
                if (v == nullptr)
                {
                    return;
                }
                std::unordered_set<std::string> seen;
                std::size_t total = 0;
                const auto add = [&](const request_json& s) {
                    const std::string& text = request_string(s, "stop");
                    if (text.empty() && m_llama)
                    {
                        return;
                    }
                    if (text.empty())
                    {
                        request_error("stop", "cannot contain an empty string");
                    }
                    if (m_vocab == nullptr)
                    {
                        request_error("stop", "stop strings need the vocabulary's bytes (request_context::index)");
                    }
                    total += text.size();
                    if (total > text_stream::max_stop_bytes)  // checked as read: a long list costs no more
                    {
                        request_error("stop", "the stop strings have more than " +
                                                  std::to_string(text_stream::max_stop_bytes) + " bytes");
                    }
                    if (seen.insert(text).second)
                    {
                        r.options.stop_strings.push_back(text);
                    }
                };
                if (v->is_string())
                {
                    add(*v);
                    return;
                }
                for (const auto& s : request_array(*v, "stop"))
                {
                    add(s);
                }
            }

            // max_tokens (n_predict), min_tokens
            void read_lengths(completion_request& r) const
            {
                const std::int64_t cap = std::int64_t(std::min<std::size_t>(m_ctx.max_tokens, std::size_t(1) << 40));
                if (m_llama)
                {
                    r.options.max_tokens = std::size_t(cap);
                    if (const auto* v = get("n_predict"))
                    {
                        const std::int64_t n = request_integer(*v, "n_predict", -1, cap);
                        if (n == 0)
                        {
                            request_error("n_predict", "0 generates nothing (give -1 or at least 1)");
                        }
                        r.options.max_tokens = n < 0 ? std::size_t(cap) : std::size_t(n);
                    }
                    return;
                }
                const auto* max = get("max_tokens");
                const auto* completion = get("max_completion_tokens");
                if (max && completion)
                {
                    request_error("max_tokens", "and max_completion_tokens are the same field; give one");
                }
                r.options.max_tokens = std::size_t(std::min<std::int64_t>(16, cap));
                if (max || completion)
                {
                    const char* name = max ? "max_tokens" : "max_completion_tokens";
                    r.options.max_tokens = std::size_t(request_integer(max ? *max : *completion, name, 1, cap));
                }
                if (const auto* v = get("min_tokens"))
                {
                    r.options.min_tokens = std::size_t(request_integer(*v, "min_tokens", 0, std::int64_t(r.options.max_tokens)));
                }
            }

            // seed: absent, null or -1: the context's
            void read_seed(completion_request& r) const
            {
                std::uint64_t seed = m_ctx.seed;
                if (const auto* v = get("seed"))
                {
                    if (v->is_number_unsigned())
                    {
                        seed = v->get<std::uint64_t>();
                    }
                    else if (const std::int64_t given = request_integer(*v, "seed"); given != -1)
                    {
                        seed = std::uint64_t(given);  // vLLM takes any integer: a negative one as its 64 bits
                    }
                }
                r.params.seed = seed;
                r.options.seed = seed;
            }

            std::size_t logprob_count(const request_json& v, const std::string& field) const
            {
                return std::size_t(request_integer(v, field, 0, std::int64_t(std::min<std::size_t>(20, m_size))));
            }

            void read_openai(completion_request& r) const
            {
                sampling_params& p = r.params;
                p.order = default_stage_order();
                read_lengths(r);
                if (const auto* v = get("temperature"))
                {
                    p.temperature = request_number(*v, "temperature", 0, 2, "[0, 2]");
                }
                if (const auto* v = get("top_p"))
                {
                    p.top_p = request_number(*v, "top_p", 0, 1, "(0, 1]", true);
                }
                if (const auto* v = get("top_k"))
                {
                    const std::int64_t k = request_integer(*v, "top_k");
                    if (k < -1)
                    {
                        request_error("top_k", "must be -1 or 0 (off) or at least 1, got " + std::to_string(k));
                    }
                    if (k > 0 && std::size_t(k) > m_size)
                    {
                        request_error("top_k", "must be <= the vocabulary size " + std::to_string(m_size) + ", got " +
                                                   std::to_string(k));
                    }
                    p.top_k = std::max<std::int64_t>(k, 0);
                }
                if (const auto* v = get("min_p"))
                {
                    p.min_p = request_number(*v, "min_p", 0, 1, "[0, 1]");
                }
                const bool greedy = p.temperature == 0.0;
                if (const auto* v = get("n"))
                {
                    r.n = std::size_t(request_integer(*v, "n", 1, 128));
                }
                r.best_of = r.n;
                if (const auto* v = get("best_of"))
                {
                    r.best_of = std::size_t(request_integer(*v, "best_of", std::int64_t(r.n), 128));
                }
                if (greedy && r.best_of > 1)
                {
                    request_error(r.n > 1 ? "n" : "best_of", "must be 1 when using greedy sampling (temperature 0)");
                }
                read_seed(r);
                read_stop(r);
                if (const auto* v = get("stop_token_ids"))
                {
                    std::unordered_set<token_id> seen;
                    for (const auto id : ids_of(*v, "stop_token_ids"))
                    {
                        if (seen.insert(id).second)
                        {
                            r.options.stop_token_ids.push_back(id);
                        }
                    }
                }
                if (const auto* v = get("include_stop_str_in_output"))
                {
                    r.options.include_stop_str_in_output = request_bool(*v, "include_stop_str_in_output");
                }
                if (const auto* v = get("ignore_eos"); v && request_bool(*v, "ignore_eos"))
                {
                    r.options.eos_mode = eos_policy::pass;
                }
                read_openai_logprobs(r);
                p.penalty_scope = penalty_scope::output;
                if (const auto* v = get("presence_penalty"))
                {
                    p.presence_penalty = request_number(*v, "presence_penalty", -2, 2, "[-2, 2]");
                }
                if (const auto* v = get("frequency_penalty"))
                {
                    p.frequency_penalty = request_number(*v, "frequency_penalty", -2, 2, "[-2, 2]");
                }
                if (const auto* v = get("repetition_penalty"))
                {
                    p.repeat_penalty = request_number(*v, "repetition_penalty");
                    if (p.repeat_penalty <= 0)
                    {
                        request_error("repetition_penalty", "must be > 0, got " + request_shown(*v));
                    }
                }
                if (const auto* v = get("logit_bias"))
                {
                    request_keys(*v, "logit_bias", {});
                    std::unordered_set<token_id> seen;
                    for (const auto& item : v->items())
                    {
                        const std::string field = "logit_bias[\"" + request_cut(item.key()) + "\"]";
                        const double bias = request_number(item.value(), field, -100, 100, "[-100, 100]");
                        const token_id id = id_of(integer_key(item.key(), field), field);
                        if (!seen.insert(id).second)
                        {
                            request_error(field, "token id " + std::to_string(id) + " is given twice");
                        }
                        p.logit_bias.emplace_back(id, bias);
                    }
                }
                if (const auto* v = get("allowed_token_ids"))
                {
                    p.allowed_token_ids = ids_of(*v, "allowed_token_ids");
                    if (p.allowed_token_ids.empty())
                    {
                        request_error("allowed_token_ids", "is empty (it would allow no token)");
                    }
                }
                if (const auto* v = get("bad_words"))
                {
                    read_bad_words(*v, p);
                }
                if (const auto* v = get("sequence_bias"))
                {
                    for (const auto& pair : request_array(*v, "sequence_bias"))
                    {
                        if (!pair.is_array() || pair.size() != 2)
                        {
                            request_error("sequence_bias", "each entry is [[ids...], bias], got " + request_shown(pair));
                        }
                        auto ids = ids_of(pair[0], "sequence_bias");
                        if (ids.empty())
                        {
                            request_error("sequence_bias", "a sequence is empty");
                        }
                        p.sequence_bias.emplace_back(std::move(ids), request_number(pair[1], "sequence_bias"));
                    }
                }
            }

            /// A logit_bias key: the decimal text of an id ("50256").
            static request_json integer_key(const std::string& key, const std::string& field)
            {
                const bool digits = !key.empty() && key.size() <= 18 &&
                                    std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
                if (!digits)
                {
                    request_error(field, "the key must be a token id, got \"" + request_cut(key) + "\"");
                }
                return std::stoll(key);
            }

            // logprobs (completions: an integer k; chat: true with top_logprobs k), logprobs_mode
            void read_openai_logprobs(completion_request& r) const
            {
                const auto* v = get("logprobs");
                const auto* top = get("top_logprobs");
                if (v != nullptr && v->is_boolean())
                {
                    r.logprobs = v->get<bool>();
                    if (top != nullptr)
                    {
                        if (!r.logprobs)
                        {
                            request_error("top_logprobs", "needs logprobs: true");
                        }
                        r.options.top_logprobs = logprob_count(*top, "top_logprobs");
                    }
                }
                else if (v != nullptr)
                {
                    r.logprobs = true;
                    r.options.top_logprobs = logprob_count(*v, "logprobs");
                    if (top != nullptr)
                    {
                        request_error("top_logprobs", "goes with logprobs: true (an integer logprobs is the count)");
                    }
                }
                else if (top != nullptr)
                {
                    request_error("top_logprobs", "needs logprobs: true");
                }
                if (const auto* mode = get("logprobs_mode"))
                {
                    const std::string& m = request_string(*mode, "logprobs_mode");
                    if (m != "raw_logprobs" && m != "processed_logprobs")
                    {
                        request_error("logprobs_mode", "must be \"raw_logprobs\" or \"processed_logprobs\", got " +
                                                           request_shown(*mode));
                    }
                    r.options.top_source = m == "raw_logprobs" ? logprob_source::raw : logprob_source::processed;
                }
                r.options.raw_logprob = r.logprobs && r.options.top_source == logprob_source::raw;
                if (const auto* p = get("prompt_logprobs"))
                {
                    r.prompt_logprobs = p->is_boolean() ? std::optional<std::size_t>(p->get<bool>() ? 1 : 0)
                                                        : std::optional<std::size_t>(logprob_count(*p, "prompt_logprobs"));
                    if (p->is_boolean() && !p->get<bool>())
                    {
                        r.prompt_logprobs.reset();
                    }
                }
            }

            // bad_words (vLLM): each word encoded as it is (leading spaces stripped) and with one
            // leading space, the second kept when it starts with another token and is as long.
            void read_bad_words(const request_json& v, sampling_params& p) const
            {
                std::vector<std::string> words;
                std::unordered_set<std::string> seen;
                for (const auto& w : request_array(v, "bad_words"))
                {
                    const std::string& word = request_string(w, "bad_words");
                    if (word.empty())
                    {
                        request_error("bad_words", "cannot contain an empty string");
                    }
                    if (seen.insert(word).second)
                    {
                        words.push_back(word);
                    }
                }
                for (const auto& word : words)
                {
                    const auto start = word.find_first_not_of(" \t\n\r\f\v");
                    const std::string bare = start == std::string::npos ? std::string() : word.substr(start);
                    auto plain = encoded(bare, "bad_words");
                    if (plain.empty())
                    {
                        request_error("bad_words", "\"" + request_cut(word) + "\" encodes to no token");
                    }
                    auto spaced = encoded(" " + bare, "bad_words");
                    const bool keep_spaced =
                        !spaced.empty() && spaced.front() != plain.front() && spaced.size() == plain.size();
                    p.bad_words.push_back(std::move(plain));
                    if (keep_spaced)
                    {
                        p.bad_words.push_back(std::move(spaced));
                    }
                }
            }

            void read_llama(completion_request& r) const
            {
                sampling_params& p = r.params;
                // llama.cpp's defaults (common/common.h) and its stage order
                p.temperature = 0.8;
                p.top_k = 40;
                p.top_p = 0.95;
                p.min_p = 0.05;
                p.top_n_sigma = -1;
                p.repeat_last_n = 64;
                p.penalty_scope = penalty_scope::window;
                read_lengths(r);
                std::vector<std::string> order = {"penalties", "dry", "top_n_sigma", "top_k", "typical",
                                                  "top_p", "min_p", "xtc", "temperature"};
                if (const auto* v = get("samplers"))
                {
                    order = llama_order(*v);
                }
                if (const auto* v = get("temperature"))
                {
                    p.temperature = std::max(0.0, request_number(*v, "temperature"));  // <= 0: greedy
                }
                const auto number = [&](const char* name, double& to) {
                    if (const auto* v = get(name))
                    {
                        to = request_number(*v, name);
                    }
                };
                number("dynatemp_range", p.dynatemp_range);
                number("dynatemp_exponent", p.dynatemp_exponent);
                if (const auto* v = get("top_k"))
                {
                    const std::int64_t k = request_integer(*v, "top_k");
                    p.top_k = k <= 0 || std::size_t(k) >= m_size ? 0 : k;  // <= 0: the whole vocabulary
                }
                if (const auto* v = get("top_p"))
                {
                    p.top_p = std::min(1.0, request_number(*v, "top_p"));
                    if (p.top_p <= 0)
                    {
                        request_error("top_p", "must be > 0 (llama.cpp keeps one token at 0: use top_k 1), got " +
                                                   request_shown(*v));
                    }
                }
                if (const auto* v = get("min_p"))
                {
                    p.min_p = std::max(0.0, request_number(*v, "min_p"));
                }
                if (const auto* v = get("typical_p"))
                {
                    p.typical_p = std::min(1.0, request_number(*v, "typical_p"));
                }
                number("top_n_sigma", p.top_n_sigma);
                if (const auto* v = get("min_keep"))
                {
                    p.min_keep = std::max<std::size_t>(1, std::size_t(request_integer(*v, "min_keep", 0, std::int64_t(m_size))));
                }
                number("repeat_penalty", p.repeat_penalty);
                if (const auto* v = get("repeat_last_n"))
                {
                    p.repeat_last_n = request_integer(*v, "repeat_last_n", -1, std::numeric_limits<std::int32_t>::max());
                }
                number("presence_penalty", p.presence_penalty);
                number("frequency_penalty", p.frequency_penalty);
                number("dry_multiplier", p.dry_multiplier);
                number("dry_base", p.dry_base);
                if (const auto* v = get("dry_allowed_length"))
                {
                    p.dry_allowed_length = request_integer(*v, "dry_allowed_length");
                }
                if (const auto* v = get("dry_penalty_last_n"))
                {
                    p.dry_penalty_last_n = request_integer(*v, "dry_penalty_last_n");
                }
                number("xtc_probability", p.xtc_probability);
                number("xtc_threshold", p.xtc_threshold);
                if (const auto* v = get("mirostat"))
                {
                    p.mirostat = int(request_integer(*v, "mirostat", 0, 2));
                }
                number("mirostat_tau", p.mirostat_tau);
                number("mirostat_eta", p.mirostat_eta);
                if (p.dry_base < 1)
                {
                    p.dry_base = 1.75;  // llama.cpp's: a base below 1 is its default
                }
                if (p.mirostat != 0)
                {
                    order = {"temperature"};  // llama.cpp: plain temperature then mirostat, none of the list
                    p.dynatemp_range = 0;
                }
                neutral_unless_listed(order, p);
                read_breakers(p);
                p.order = with_processors(order);
                read_seed(r);
                read_stop(r);
                if (const auto* v = get("ignore_eos"); v && request_bool(*v, "ignore_eos"))
                {
                    r.options.eos_mode = eos_policy::mask;
                }
                if (const auto* v = get("logit_bias"))
                {
                    read_llama_bias(*v, p);
                }
                if (const auto* v = get("n_probs"))
                {
                    r.options.top_logprobs = std::size_t(request_integer(*v, "n_probs", 0, std::int64_t(m_size)));
                    r.logprobs = r.options.top_logprobs > 0;
                }
                if (const auto* v = get("post_sampling_probs"); v && request_bool(*v, "post_sampling_probs"))
                {
                    r.options.top_source = logprob_source::processed;
                }
                r.options.raw_logprob = r.logprobs && r.options.top_source == logprob_source::raw;
                if (const auto* v = get("cache_prompt"))
                {
                    request_bool(*v, "cache_prompt");
                }
                for (const char* name : {"id_slot", "n_keep"})
                {
                    if (const auto* v = get(name))
                    {
                        request_integer(*v, name);
                    }
                }
                for (const char* name : {"cache_prompt", "id_slot", "n_keep"})
                {
                    if (m_j.contains(name))
                    {
                        r.ignored.emplace_back(name);
                    }
                }
            }

            /// llama.cpp's `samplers`: stage names (its alternative names too, any case) or its letters
            /// ("edskypmxt" is the default order), each stage once.
            static std::vector<std::string> llama_order(const request_json& v)
            {
                static const std::vector<std::pair<const char*, const char*>> names = {
                    {"penalties", "penalties"}, {"dry", "dry"},         {"top_n_sigma", "top_n_sigma"},
                    {"top-n-sigma", "top_n_sigma"}, {"top_k", "top_k"}, {"top-k", "top_k"},
                    {"typ_p", "typical"},       {"typ-p", "typical"},   {"typical-p", "typical"},
                    {"typical", "typical"},     {"typ", "typical"},     {"top_p", "top_p"},
                    {"top-p", "top_p"},         {"nucleus", "top_p"},   {"min_p", "min_p"},
                    {"min-p", "min_p"},         {"xtc", "xtc"},         {"temperature", "temperature"},
                    {"temp", "temperature"},    {"e", "penalties"},     {"d", "dry"},
                    {"s", "top_n_sigma"},       {"k", "top_k"},         {"y", "typical"},
                    {"p", "top_p"},             {"m", "min_p"},         {"x", "xtc"},
                    {"t", "temperature"}};
                std::vector<std::string> listed;
                if (v.is_string())
                {
                    for (const char c : v.get_ref<const std::string&>())
                    {
                        listed.emplace_back(1, c);
                    }
                }
                else
                {
                    for (const auto& item : request_array(v, "samplers"))
                    {
                        listed.push_back(request_string(item, "samplers"));
                        if (listed.back().size() == 1)
                        {
                            request_error("samplers", "unknown stage \"" + listed.back() + "\" (letters go in a string)");
                        }
                    }
                }
                std::vector<std::string> order;
                for (const auto& name : listed)
                {
                    std::string lower = name;
                    std::transform(lower.begin(), lower.end(), lower.begin(),
                                   [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; });
                    const auto it = std::find_if(names.begin(), names.end(), [&](const auto& n) { return lower == n.first; });
                    if (it == names.end())
                    {
                        const bool known = lower == "infill" || lower == "adaptive_p" || lower == "adaptive-p" ||
                                           lower == "i" || lower == "a";
                        request_error("samplers", "\"" + request_cut(name) + "\" " +
                                                      (known ? "is not supported" : "is not a stage"));
                    }
                    if (std::find(order.begin(), order.end(), it->second) != order.end())
                    {
                        request_error("samplers", "\"" + request_cut(name) + "\" is listed twice");
                    }
                    order.emplace_back(it->second);
                }
                return order;
            }

            // dry_sequence_breakers: strings, each one token here; llama.cpp's four by default. Read
            // through encode only where DRY runs (its multiplier set and the stage listed).
            void read_breakers(sampling_params& p) const
            {
                const auto* v = get("dry_sequence_breakers");
                if (v != nullptr)
                {
                    if (request_array(*v, "dry_sequence_breakers").empty())
                    {
                        request_error("dry_sequence_breakers", "is empty (llama.cpp refuses it too)");
                    }
                    for (const auto& item : *v)
                    {
                        request_string(item, "dry_sequence_breakers");
                    }
                }
                if (p.dry_multiplier == 0)
                {
                    return;
                }
                if (v == nullptr && !m_ctx.encode)
                {
                    request_error("dry_multiplier", "llama.cpp's default sequence breakers are text: they need "
                                                    "the context's encode (or give dry_sequence_breakers)");
                }
                const request_json defaults = {"\n", ":", "\"", "*"};
                for (const auto& item : v ? *v : defaults)
                {
                    const std::string& text = item.get_ref<const std::string&>();
                    const auto ids = encoded(text, "dry_sequence_breakers");
                    if (ids.size() != 1)
                    {
                        request_error("dry_sequence_breakers", "\"" + request_cut(text) + "\" is " +
                                                                   std::to_string(ids.size()) +
                                                                   " tokens; a breaker is one token here");
                    }
                    p.dry_sequence_breakers.push_back(ids.front());
                }
            }

            // llama.cpp's logit_bias: [[id or text, bias or false], ...] or {"id or text": bias or false};
            // false bans; a text's every token gets the bias.
            void read_llama_bias(const request_json& v, sampling_params& p) const
            {
                const auto add = [&](const request_json& key, const request_json& value, const std::string& field) {
                    const double bias = value.is_boolean() && !value.get<bool>()
                                            ? -std::numeric_limits<double>::infinity()
                                            : request_number(value, field);
                    if (key.is_string())
                    {
                        for (const auto id : encoded(key.get_ref<const std::string&>(), field))
                        {
                            p.logit_bias.emplace_back(id, bias);
                        }
                        return;
                    }
                    p.logit_bias.emplace_back(id_of(key, field), bias);
                };
                if (v.is_object())
                {
                    for (const auto& item : v.items())
                    {
                        const std::string& key = item.key();
                        const std::string field = "logit_bias[\"" + request_cut(key) + "\"]";
                        const std::size_t sign = !key.empty() && key[0] == '-' ? 1 : 0;
                        const bool number = key.size() > sign && key.size() <= 18 &&
                                            std::all_of(key.begin() + sign, key.end(), [](char c) { return c >= '0' && c <= '9'; });
                        if (key.empty())
                        {
                            request_error(field, "the key is empty (a token id or a text)");
                        }
                        add(number ? request_json(std::stoll(key)) : request_json(key), item.value(), field);
                    }
                    return;
                }
                for (const auto& pair : request_array(v, "logit_bias"))
                {
                    if (!pair.is_array() || pair.size() != 2)
                    {
                        request_error("logit_bias", "each entry is [id or text, bias or false], got " + request_shown(pair));
                    }
                    add(pair[0], pair[1], "logit_bias");
                }
            }

            /// llama.cpp runs only the stages its list names: the others' parameters do nothing.
            static void neutral_unless_listed(const std::vector<std::string>& order, sampling_params& p)
            {
                const auto off = [&](const char* name) { return std::find(order.begin(), order.end(), name) == order.end(); };
                if (off("penalties"))
                {
                    p.repeat_penalty = 1;
                    p.presence_penalty = p.frequency_penalty = 0;
                }
                if (off("dry") || p.dry_multiplier == 0)
                {
                    const sampling_params defaults;
                    p.dry_multiplier = 0;
                    p.dry_base = defaults.dry_base;
                    p.dry_allowed_length = defaults.dry_allowed_length;
                    p.dry_penalty_last_n = defaults.dry_penalty_last_n;
                }
                if (off("top_n_sigma"))
                {
                    p.top_n_sigma = -1;
                }
                if (off("top_k"))
                {
                    p.top_k = 0;
                }
                if (off("typical"))
                {
                    p.typical_p = 1;
                }
                if (off("top_p"))
                {
                    p.top_p = 1;
                }
                if (off("min_p"))
                {
                    p.min_p = 0;
                }
                if (off("xtc") || p.xtc_probability == 0)
                {
                    p.xtc_probability = 0;
                    p.xtc_threshold = sampling_params().xtc_threshold;
                }
                if (p.mirostat == 0)
                {
                    p.mirostat_tau = sampling_params().mirostat_tau;
                    p.mirostat_eta = sampling_params().mirostat_eta;
                }
                if (off("temperature"))
                {
                    p.temperature = 1;
                    p.dynatemp_range = 0;
                }
            }

            // The constraint fields: at most one of them (and one kind in structured_outputs).
            void read_constraint(completion_request& r) const
            {
                std::vector<std::pair<std::string, const request_json*>> given;
                const auto* own = m_llama ? &llama_constraint_fields() : &openai_constraint_fields();
                for (const char* name : *own)
                {
                    if (const auto* v = get(name))
                    {
                        given.emplace_back(name, v);
                    }
                }
                if (given.empty())
                {
                    return;
                }
                if (given.size() > 1)
                {
                    request_error(given[0].first, "and " + given[1].first + " are both constraints; give one");
                }
                const std::string& field = given[0].first;
                const request_json& v = *given[0].second;
                std::optional<std::pair<grammar, std::string>> wanted;
                std::shared_ptr<const compiled_grammar> compiled;
                try
                {
                    wanted = constraint_grammar(field, v);
                    if (wanted && m_ctx.index)
                    {
                        compiled = std::make_shared<const compiled_grammar>(m_ctx.index, wanted->first, wanted->second);
                    }
                }
                catch (const invalid_parameter& e)
                {
                    const std::string what = e.what();
                    if (what.rfind("request: ", 0) == 0)
                    {
                        throw;
                    }
                    request_error(field, what);
                }
                if (!wanted)
                {
                    return;  // response_format text: no constraint
                }
                if (!m_ctx.index)
                {
                    request_error(field, "a constraint needs the vocabulary's index (request_context::index)");
                }
                auto index_eos = m_ctx.index->vocab().eos();
                auto eos = m_eos;
                std::sort(index_eos.begin(), index_eos.end());
                std::sort(eos.begin(), eos.end());
                if (eos.empty() || index_eos != eos)
                {
                    request_error(field, "a constrained text ends with the index's eos ids, which must be the "
                                         "context's eos ids (and there must be some)");
                }
                if (r.options.eos_mode != eos_policy::stop)
                {
                    request_error(field, "a constrained text ends with eos; ignore_eos would not let it end");
                }
                r.constraint = wanted->second;
                constraint c(std::move(compiled));
                r.params.order.insert(r.params.order.begin(), "constraint");
                r.params.custom.emplace_back("constraint", std::move(c));
            }

            static const std::vector<const char*>& openai_constraint_fields()
            {
                static const std::vector<const char*> f = {"response_format", "structured_outputs", "guided_json",
                                                           "guided_regex", "guided_grammar", "guided_choice"};
                return f;
            }

            static const std::vector<const char*>& llama_constraint_fields()
            {
                static const std::vector<const char*> f = {"grammar", "json_schema"};
                return f;
            }

            /// The grammar a constraint field asks for, and its kind; none for response_format text.
            static std::optional<std::pair<grammar, std::string>> constraint_grammar(const std::string& field,
                                                                                     const request_json& v)
            {
                if (field == "response_format")
                {
                    request_keys(v, field, {"type", "json_schema"});
                    const auto* type_value = request_member(v, "type");
                    if (type_value == nullptr)
                    {
                        request_error(field + ".type", "is required");
                    }
                    const std::string type = request_string(*type_value, field + ".type");
                    const auto* js = request_member(v, "json_schema");
                    if (type == "text" || type == "json_object")
                    {
                        if (js != nullptr)
                        {
                            request_error(field + ".json_schema", "goes with type \"json_schema\"");
                        }
                        if (type == "text")
                        {
                            return std::nullopt;
                        }
                        return std::make_pair(json_schema_grammar(request_json{{"type", "object"}}), std::string("json"));
                    }
                    if (type != "json_schema")
                    {
                        request_error(field + ".type", "must be \"text\", \"json_object\" or \"json_schema\", got \"" +
                                                           request_cut(type) + "\"");
                    }
                    if (js == nullptr)
                    {
                        request_error(field + ".json_schema", "is required with type \"json_schema\"");
                    }
                    request_keys(*js, field + ".json_schema", {"name", "description", "schema", "strict"});
                    const auto* name = request_member(*js, "name");
                    if (name == nullptr)
                    {
                        request_error(field + ".json_schema.name", "is required");
                    }
                    request_string(*name, field + ".json_schema.name");
                    if (const auto* description = request_member(*js, "description"))
                    {
                        request_string(*description, field + ".json_schema.description");
                    }
                    if (const auto* strict = request_member(*js, "strict"))
                    {
                        request_bool(*strict, field + ".json_schema.strict");  // enforced exactly either way
                    }
                    const auto* schema = request_member(*js, "schema");
                    if (schema == nullptr)
                    {
                        request_error(field + ".json_schema.schema", "is required");
                    }
                    return schema_grammar(*schema, field + ".json_schema.schema");
                }
                if (field == "structured_outputs")
                {
                    request_keys(v, field, {"json", "regex", "choice", "grammar", "json_object"});
                    std::vector<std::string> kinds;
                    for (const auto& item : v.items())
                    {
                        if (!item.value().is_null() && !(item.key() == "json_object" && item.value() == false))
                        {
                            kinds.push_back(item.key());
                        }
                    }
                    if (kinds.size() != 1)
                    {
                        request_error(field, "give exactly one of json, regex, choice, grammar, json_object");
                    }
                    const std::string& kind = kinds.front();
                    const std::string sub = field + "." + kind;
                    if (kind == "json_object")
                    {
                        request_bool(v[kind], sub);
                        return std::make_pair(json_schema_grammar(request_json{{"type", "object"}}), std::string("json"));
                    }
                    return kind_grammar(kind, v[kind], sub);
                }
                if (field == "json_schema")  // llama.cpp
                {
                    return schema_grammar(v, field);
                }
                if (field == "grammar")  // llama.cpp: GBNF
                {
                    return kind_grammar("grammar", v, field);
                }
                return kind_grammar(field.substr(std::string("guided_").size()), v, field);
            }

            /// json, regex, choice or grammar (GBNF) from its value.
            static std::pair<grammar, std::string> kind_grammar(const std::string& kind, const request_json& v,
                                                                const std::string& field)
            {
                if (kind == "json")
                {
                    // vLLM takes the schema as an object or as its text
                    if (v.is_string())
                    {
                        return std::make_pair(json_schema_grammar(v.get_ref<const std::string&>()), std::string("json_schema"));
                    }
                    return schema_grammar(v, field);
                }
                if (kind == "regex")
                {
                    return std::make_pair(regex_grammar(request_string(v, field)), std::string("regex"));
                }
                if (kind == "grammar")
                {
                    return std::make_pair(parse_gbnf(request_string(v, field)), std::string("grammar"));
                }
                // choice: one of the strings, exactly
                grammar g;
                std::vector<grammar::expr_id> items;
                for (const auto& s : request_array(v, field))
                {
                    items.push_back(g.bytes(request_string(s, field)));
                }
                if (items.empty())
                {
                    request_error(field, "is empty (it would allow no text)");
                }
                const auto root = g.rule("choice");
                g.define(root, g.choice(std::move(items)));
                g.set_root(root);
                return std::make_pair(std::move(g), std::string("choice"));
            }

            static std::pair<grammar, std::string> schema_grammar(const request_json& schema, const std::string& field)
            {
                if (!schema.is_object() && !schema.is_boolean())
                {
                    request_error(field, "must be a JSON Schema (an object or a boolean), got " + request_shown(schema));
                }
                return std::make_pair(json_schema_grammar(schema), std::string("json_schema"));
            }

            const request_json& m_j;
            const request_context& m_ctx;
            bool m_llama;
            const vocabulary* m_vocab = nullptr;
            std::size_t m_size = 0;
            std::vector<token_id> m_eos;
        };
    }

    namespace detail
    {
        /// Refuses a request nested deeper than a schema may be (walked without recursion: the
        /// reader and its error messages recurse).
        template <class Json>
        void check_request_nesting(const Json& request)
        {
            try
            {
                check_nesting(request);
            }
            catch (const invalid_parameter&)
            {
                throw invalid_parameter("request: the request nests objects and arrays deeper than " +
                                        std::to_string(max_schema_nesting));
            }
        }

        /// The request field a stage's own check speaks for ("typical: p must be ..." is typical_p's).
        inline std::string field_of_stage(const std::string& message, request_dialect dialect)
        {
            const bool llama = dialect == request_dialect::llama;
            static const std::vector<std::pair<std::string, std::string>> fields = {
                {"typical", "typical_p"},        {"top_n_sigma", "top_n_sigma"},   {"dry", "dry_*"},
                {"xtc", "xtc_*"},                {"mirostat", "mirostat_*"},       {"temperature", "temperature"},
                {"top_k", "top_k"},              {"top_p", "top_p"},               {"min_p", "min_p"},
                {"logit_bias", "logit_bias"},    {"sequence_bias", "sequence_bias"}, {"bad_words", "bad_words"},
                {"token_mask", "allowed_token_ids"}, {"sequence", "stop"}};
            const std::string stage = message.substr(0, message.find(':'));
            if (stage == "penalties")
            {
                return llama ? "repeat_penalty" : "repetition_penalty";
            }
            for (const auto& [name, field] : fields)
            {
                if (stage == name)
                {
                    return field;
                }
            }
            return stage;
        }
    }

    /// The request, read as its dialect reads it; its sampler and sequence checked by building
    /// them once (their errors as "request: <field>: <stage's message>").
    inline completion_request parse_request(const nlohmann::ordered_json& request, const request_context& context,
                                            request_dialect dialect = request_dialect::openai)
    {
        detail::check_request_nesting(request);
        if (!request.is_object())
        {
            throw invalid_parameter("request: must be a JSON object, got " + detail::request_shown(request));
        }
        detail::check_request_fields(request, dialect);
        completion_request r = detail::request_reader(request, context, dialect).read();
        try
        {
            sampler s(r.params);
            const basic_sequence<sampler&> check(s, r.prompt, r.options);
        }
        catch (const invalid_parameter& e)
        {
            const std::string what = e.what();
            throw invalid_parameter("request: " + detail::field_of_stage(what, dialect) + ": " + what);
        }
        return r;
    }

    /// A request as nlohmann::json (its objects' order is lost: a schema's properties come
    /// out sorted by name; pass nlohmann::ordered_json or the text to keep it).
    inline completion_request parse_request(const nlohmann::json& request, const request_context& context,
                                            request_dialect dialect = request_dialect::openai)
    {
        detail::check_request_nesting(request);  // before the recursive copy
        return parse_request(nlohmann::ordered_json(request), context, dialect);
    }

    namespace detail
    {
        /// A request's text as JSON: exactly (parse_exact_json), and no key given twice in an object.
        inline nlohmann::ordered_json parse_request_text(std::string_view text)
        {
            return parse_exact_json(text, "request", "the request", true);
        }
    }

    /// The request's text (an integer past 64 bits or a key given twice is an error:
    /// nlohmann would read another number, or keep the last silently; objects keep their
    /// order, as a schema's properties need).
    inline completion_request parse_request(std::string_view text, const request_context& context,
                                            request_dialect dialect = request_dialect::openai)
    {
        return parse_request(detail::parse_request_text(text), context, dialect);
    }

    inline completion_request parse_request(const std::string& text, const request_context& context,
                                            request_dialect dialect = request_dialect::openai)
    {
        return parse_request(std::string_view(text), context, dialect);
    }

    inline completion_request parse_request(const char* text, const request_context& context,
                                            request_dialect dialect = request_dialect::openai)
    {
        return parse_request(std::string_view(text), context, dialect);
    }
}

#endif
