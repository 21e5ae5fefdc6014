// fuzz_request: a completion request from fuzzed bytes (request.hpp), read in
// either dialect against a small vocabulary, then run a few steps.
//
// Input: a mode byte (bit 0: llama.cpp's dialect, else OpenAI's / vLLM's;
// bit 1: a bare context — a vocabulary size and eos, no index, no encoder),
// then the request's text (the rest of the input).
//
// Reading either throws invalid_parameter with a message (anything else
// crashes) or gives a request whose every part holds what the contract says:
// a prompt of ids inside the vocabulary, 1 <= max_tokens <= the context's,
// min_tokens <= max_tokens, 1 <= n <= best_of <= 128, stop strings non-empty;
// then its sequence steps over uniform rows until it ends or 6 tokens are
// drawn, every token inside the vocabulary; a step may only fail with
// invalid_logits (every token masked: min_tokens longer than a constraint's
// texts, say).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <xtensor/xtensor.hpp>

#include <xsampler/request.hpp>
#include <xsampler/xsampler.hpp>

#include "fuzz_input.hpp"

namespace
{
    using namespace xsampler;

    std::shared_ptr<const vocabulary_index> small_index()
    {
        static const auto index = fuzz::small_index({"cat", " cat", "yes", "{\"", "\":", "12"});
        return index;
    }

    /// Longest match over the vocabulary's words, else the byte.
    std::vector<token_id> encode(const std::string& text)
    {
        const auto& v = small_index()->vocab();
        std::vector<token_id> ids;
        for (std::size_t i = 0; i < text.size();)
        {
            token_id best = token_id(static_cast<unsigned char>(text[i]));
            std::size_t length = 1;
            for (std::size_t id = 256; id + 1 < v.size(); ++id)
            {
                const std::string& w = v.bytes(token_id(id));
                if (w.size() > length && text.compare(i, w.size(), w) == 0)
                {
                    best = token_id(id);
                    length = w.size();
                }
            }
            ids.push_back(best);
            i += length;
        }
        return ids;
    }
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    if (size < 1)
    {
        return 0;
    }
    const std::uint8_t mode = data[0];
    const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
    request_context context;
    context.max_tokens = 64;
    context.seed = 3;
    std::size_t vocab = 0;
    if (mode & 2)
    {
        context.vocab_size = vocab = 40;
        context.eos = {39};
    }
    else
    {
        context.index = small_index();
        context.encode = encode;
        vocab = small_index()->vocab().size();
    }
    const auto dialect = (mode & 1) ? request_dialect::llama : request_dialect::openai;
    completion_request r;
    try
    {
        r = parse_request(text, context, dialect);
    }
    catch (const invalid_parameter& e)
    {
        FUZZ_REQUIRE(std::string(e.what()).rfind("request: ", 0) == 0, e.what());
        fuzz::trace(e.what());
        return 0;
    }
    FUZZ_REQUIRE(!r.prompt.empty(), "a prompt");
    for (const auto id : r.prompt)
    {
        FUZZ_REQUIRE(id >= 0 && std::size_t(id) < vocab, "a prompt id inside the vocabulary");
    }
    FUZZ_REQUIRE(r.options.max_tokens >= 1 && r.options.max_tokens <= context.max_tokens, "max_tokens in range");
    FUZZ_REQUIRE(r.options.min_tokens <= r.options.max_tokens, "min_tokens <= max_tokens");
    FUZZ_REQUIRE(r.n >= 1 && r.n <= r.best_of && r.best_of <= 128, "1 <= n <= best_of <= 128");
    for (const auto& s : r.options.stop_strings)
    {
        FUZZ_REQUIRE(!s.empty(), "stop strings are not empty");
    }
    fuzz::trace("parsed: " + std::to_string(r.prompt.size()) + " prompt tokens, constraint '" + r.constraint + "'");
    sequence seq(sampler(r.params), r.prompt, r.options);
    const xt::xtensor<float, 1> row = xt::zeros<float>({vocab});
    try
    {
        for (int t = 0; t < 6 && !seq.finished(); ++t)
        {
            const auto& s = seq.step(row);
            FUZZ_REQUIRE(s.id >= 0 && std::size_t(s.id) < vocab, "a drawn id inside the vocabulary");
        }
    }
    catch (const invalid_logits& e)
    {
        fuzz::trace(e.what());
    }
    return 0;
}
