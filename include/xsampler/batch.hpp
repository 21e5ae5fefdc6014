// xsampler — token samplers for language-model inference. BSD-3-Clause.
//
// One token per row of a [batch, vocab] tensor.
//
// sample_batch(logits, rows, pool, out [, histories])
//   Row r is sampled by rows[r]: its own parameters and its own engine (give
//   each request its own seed or philox4x32 stream), so a request's tokens
//   never depend on what else is in the batch, nor on the number of threads.
//   The rows are split into pool.size() contiguous ranges, one per
//   workspace; each range after the first runs on a thread started for this
//   call (the caller asks for threads by the size of the pool; the library
//   starts none otherwise), the first on the calling thread. Workspaces grow
//   to the vocabulary once and are reused across calls.
//   Errors: logits not 2-D, a number of samplers or histories that is not the
//   number of rows, an empty pool: invalid_parameter / invalid_logits before
//   any row is sampled. An error in a row (NaN, all masked, ...) is rethrown
//   on the calling thread after every thread has finished; `out` then holds
//   unspecified tokens.
#ifndef XSAMPLER_BATCH_HPP
#define XSAMPLER_BATCH_HPP

#include <exception>
#include <string>
#include <thread>
#include <vector>

#include <xtensor/xview.hpp>

#include "sampler.hpp"

namespace xsampler
{
    template <class E>
    void sample_batch(const xt::xexpression<E>& logits, std::vector<sampler>& rows, std::vector<workspace>& pool,
                      std::vector<sampled_token>& out, const std::vector<token_span>& histories = {})
    {
        const E& e = logits.derived_cast();
        if (e.dimension() != 2)
        {
            throw invalid_logits("sample_batch: logits must be 2-D [batch, vocab], got " +
                                 std::to_string(e.dimension()) + "-D");
        }
        const std::size_t batch = e.shape()[0];
        if (rows.size() != batch)
        {
            throw invalid_parameter("sample_batch: " + std::to_string(rows.size()) + " samplers for " +
                                    std::to_string(batch) + " rows");
        }
        if (!histories.empty() && histories.size() != batch)
        {
            throw invalid_parameter("sample_batch: " + std::to_string(histories.size()) + " histories for " +
                                    std::to_string(batch) + " rows");
        }
        if (pool.empty())
        {
            throw invalid_parameter("sample_batch: the workspace pool is empty (give one per thread)");
        }
        out.resize(batch);
        const std::size_t parts = std::min(pool.size(), std::max<std::size_t>(batch, 1));
        const auto rows_of = [&](std::size_t part) {
            for (std::size_t r = part * batch / parts; r < (part + 1) * batch / parts; ++r)
            {
                const token_history history = histories.empty() ? token_history{} : token_history(histories[r]);
                out[r] = rows[r].sample(xt::view(e, r, xt::all()), history, pool[part]);
            }
        };
        if (parts == 1)
        {
            rows_of(0);  // no thread, no allocation once the workspace has grown
            return;
        }
        std::vector<std::exception_ptr> errors(parts);
        const auto run = [&](std::size_t part) {
            try
            {
                rows_of(part);
            }
            catch (...)
            {
                errors[part] = std::current_exception();
            }
        };
        std::vector<std::thread> threads;
        threads.reserve(parts - 1);
        for (std::size_t part = 1; part < parts; ++part)
        {
            threads.emplace_back(run, part);
        }
        run(0);
        for (auto& t : threads)
        {
            t.join();
        }
        for (const auto& error : errors)
        {
            if (error)
            {
                std::rethrow_exception(error);
            }
        }
    }
}

#endif
