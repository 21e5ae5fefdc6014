// engine_loop: the README's engine loop — requests with their own settings
// come and go in the rows of one batch, each a sequence stepped in a slot,
// streaming its text (a test checks the output against tests/engine_loop.txt).
#include <cstdio>
#include <deque>
#include <memory>
#include <string>
#include <vector>
#include <xtensor/xtensor.hpp>
#include <xtensor/xview.hpp>
#include <xsampler/xsampler.hpp>

int main()
{
    // A stand-in model over 6 tokens: after token t it likes t % 5 + 1.
    const xsampler::vocabulary vocab({"<eos>", " The", " cat", " sat", ".", " on"}, /*special*/ {0});
    auto model = [](xsampler::token_span tokens, auto&& row) {
        row.fill(0.0f);
        row(tokens[tokens.size() - 1] % 5 + 1) = 3.0f;
    };
    struct request
    {
        const char* name;
        xsampler::token_id prompt;
        double temperature;
        std::size_t max_tokens;
    };
    std::deque<request> waiting = {{"A", 1, 0.0, 5}, {"B", 2, 1.0, 8}, {"C", 3, 0.7, 4}, {"D", 4, 0.0, 3}};

    auto start = [&vocab](const request& q) {               // one request's sampler and stops
        xsampler::sampling_params p;
        p.temperature = q.temperature;
        p.seed = 7;
        xsampler::sequence_options o;
        o.max_tokens = q.max_tokens;
        o.eos = {0};
        o.stop_strings = {"."};
        o.vocab = &vocab;
        const std::vector<xsampler::token_id> prompt = {q.prompt};
        return std::make_unique<xsampler::sequence>(xsampler::sampler(p), prompt, o);
    };

    const std::size_t rows = 2;                             // the batch the model runs
    xt::xtensor<float, 2> logits = xt::zeros<float>({rows, std::size_t(6)});
    std::vector<const char*> names(rows);
    std::vector<std::unique_ptr<xsampler::sequence>> in_row(rows);  // each row's request, or none
    xsampler::thread_pool threads(2);                       // started once
    std::vector<xsampler::workspace> pool(2);               // one per thread
    std::vector<xsampler::slot> slots;
    std::vector<xsampler::step_result> out;
    for (int step = 0;; ++step) {
        slots.clear();
        for (std::size_t r = 0; r < rows; ++r) {
            if (!in_row[r] && !waiting.empty()) {           // a free row takes the next request
                in_row[r] = start(waiting.front());         // sampling_params + sequence_options
                names[r] = waiting.front().name;
                waiting.pop_front();
            }
            if (in_row[r]) {                                // the model fills the row
                model(in_row[r]->history().tokens(), xt::view(logits, r, xt::all()));
                slots.push_back({r, in_row[r].get()});
            }
        }
        if (slots.empty()) break;
        xsampler::sample_batch(logits, slots, pool, out, /*errors*/ nullptr, threads);
        std::printf("step %d:", step);
        for (std::size_t i = 0; i < slots.size(); ++i) {    // stream each request's safe text
            const xsampler::step_result& s = out[i];
            std::printf("  %s[%.*s]", names[slots[i].row], int(s.text.size()), s.text.data());
            if (s.finish != xsampler::finish_reason::none) {
                std::printf(" %s \"%s\"", xsampler::to_string(s.finish), in_row[slots[i].row]->text().c_str());
                in_row[slots[i].row].reset();              // the row is free for the next request
            }
        }
        std::printf("\n");
    }
}
