// xsampler/batch.hpp — one token per row of a [batch, vocab] tensor. (xsampler, BSD-3-Clause)
//
// One token per row of a [batch, vocab] tensor, the rows split into parts
// that an executor runs.
//
// sample_batch(logits, rows, pool, out [, histories [, exec]])
//   Row r is sampled by rows[r] (its own parameters and its own engine: give
//   each request its own seed) with history histories[r] (none given: every
//   row has an empty history), so a request's tokens never depend on what
//   else is in the batch, nor on the executor or the number of parts.
//   rows, pool and histories are spans: a std::vector binds to them, and so
//   does {pointer, count}.
//   The rows are split into n = min(pool.size(), batch) contiguous parts;
//   part p samples its rows in order, in workspace pool[p]. sample_batch
//   calls exec(n, task) once (not at all for an empty batch). Workspaces grow
//   to the vocabulary once and are reused across calls.
//
// Executors
//   Any callable exec(std::size_t n, F task) that calls task(p) exactly once
//   for each p in [0, n), on any threads, possibly concurrently, and returns
//   when every call has returned (an engine's thread pool, say). task is
//   copyable and never throws: sample_batch catches a row's error inside it.
//   - thread_executor (the default): task(0) on the calling thread, and a
//     thread started for each other part for this call, joined before it
//     returns. If a thread cannot be started (std::system_error when the
//     process can start no more), that part and the ones after it run on the
//     calling thread instead, so the call still succeeds.
//   - serial_executor: every part on the calling thread, in order.
//   With an executor of the caller's, the library starts no thread. With one
//   part, or with serial_executor, nothing is allocated once the workspaces
//   have grown.
//
// Concurrency
//   - A sampler is not thread-safe: one per sequence. Within a call, rows[r]
//     is used only by the part that holds row r.
//   - A workspace is used by one thread at a time: one per part that may run
//     concurrently.
//   - sample_batch with any executor is safe as long as its parts use
//     distinct workspaces, which the library ensures by giving part p
//     pool[p]. Two sample_batch calls that may overlap need distinct
//     samplers and distinct pools.
//
// Errors
//   - Before any row is sampled: logits not 2-D (invalid_logits); a number of
//     samplers or histories that is not the number of rows, or an empty pool
//     (invalid_parameter).
//   - In a row (NaN, every token masked, ...): its part stops at that row;
//     once every part has finished, the error of the lowest failing row is
//     rethrown on the calling thread, whatever the thread timing.
//     invalid_logits and invalid_parameter are rethrown as the same type with
//     the row in front of the message ("row 17: logits: NaN at index 3");
//     any other exception is rethrown unchanged. `out` then holds unspecified
//     tokens.
//   - An exception from the executor itself propagates unchanged.
#ifndef XSAMPLER_BATCH_HPP
#define XSAMPLER_BATCH_HPP

#include <cstddef>
#include <exception>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <xtensor/xview.hpp>

#include "sampler.hpp"

namespace xsampler
{
    namespace detail
    {
        // Starts a thread the ordinary way.
        struct start_thread
        {
            template <class F>
            std::thread operator()(F&& f) const
            {
                return std::thread(std::forward<F>(f));
            }
        };

        // The first error of one part of a batch, and the row that threw it.
        struct row_error
        {
            std::size_t row = 0;
            std::exception_ptr error;
        };

        // Rethrows `error`, an exception thrown while sampling `row`: the
        // library's exception types with "row N: " in front of the message,
        // anything else unchanged.
        [[noreturn]] inline void rethrow_for_row(std::size_t row, const std::exception_ptr& error)
        {
            try
            {
                std::rethrow_exception(error);
            }
            catch (const invalid_logits& e)
            {
                throw invalid_logits("row " + std::to_string(row) + ": " + e.what());
            }
            catch (const invalid_parameter& e)
            {
                throw invalid_parameter("row " + std::to_string(row) + ": " + e.what());
            }
            catch (const invalid_data& e)
            {
                throw invalid_data("row " + std::to_string(row) + ": " + e.what());
            }
            catch (const invalid_use& e)
            {
                throw invalid_use("row " + std::to_string(row) + ": " + e.what());
            }
        }
    }

    /// Runs task(0) on the calling thread and task(1) ... task(n - 1) each on
    /// a thread started for the call, and joins them before returning. A part
    /// whose thread cannot be started (Start throws a std::exception, such as
    /// std::system_error) runs on the calling thread, with every part after
    /// it: no error, no std::terminate. If a task throws on the calling
    /// thread, the threads are joined before the exception propagates; a task
    /// that throws on a thread of its own ends in std::terminate, as with
    /// std::thread (sample_batch's tasks never throw).
    ///
    /// Start is how a thread is started: start(f), called on a const Start,
    /// returns a std::thread running the nullary callable f. The default calls std::thread's
    /// constructor; a test passes one that fails.
    template <class Start = detail::start_thread>
    class basic_thread_executor
    {
    public:
        basic_thread_executor() = default;
        explicit basic_thread_executor(Start start) : m_start(std::move(start)) {}

        template <class F>
        void operator()(std::size_t n, F task) const
        {
            if (n == 0)
            {
                return;
            }
            std::vector<std::thread> threads;
            const joiner join_all{threads};  // also when a task below throws
            std::size_t started = 1;         // parts [1, started) have a thread
            if (n > 1)
            {
                try
                {
                    threads.reserve(n - 1);
                    for (; started < n; ++started)
                    {
                        threads.push_back(m_start([task, part = started]() mutable { task(part); }));
                    }
                }
                catch (const std::exception&)
                {
                    // No thread for parts [started, n): they run here, below.
                }
            }
            task(0);
            for (std::size_t part = started; part < n; ++part)
            {
                task(part);
            }
        }

    private:
        struct joiner
        {
            std::vector<std::thread>& threads;
            ~joiner()
            {
                for (auto& t : threads)
                {
                    if (t.joinable())
                    {
                        t.join();
                    }
                }
            }
        };

        Start m_start;
    };

    /// sample_batch's default executor: the calling thread and a thread per
    /// other part, started for each call.
    using thread_executor = basic_thread_executor<>;

    /// Runs task(0) ... task(n - 1) in order on the calling thread.
    struct serial_executor
    {
        template <class F>
        void operator()(std::size_t n, F&& task) const
        {
            for (std::size_t part = 0; part < n; ++part)
            {
                task(part);
            }
        }
    };

    /// One token per row of `logits` ([batch, vocab]) into out[row]; see the
    /// top of this header.
    template <class E, class Executor = thread_executor>
    void sample_batch(const xt::xexpression<E>& logits, span<sampler> rows, span<workspace> pool,
                      std::vector<sampled_token>& out, span<const token_history> histories = {},
                      Executor&& exec = Executor{})
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
        if (batch == 0)
        {
            return;
        }
        const std::size_t parts = std::min(pool.size(), batch);
        // One error record per part; a single part needs no allocation.
        detail::row_error single;
        std::vector<detail::row_error> several(parts > 1 ? parts : 0);
        detail::row_error* const errors = parts > 1 ? several.data() : &single;
        const auto task = [&](std::size_t part) noexcept {
            for (std::size_t r = part * batch / parts; r < (part + 1) * batch / parts; ++r)
            {
                try
                {
                    const token_history history = histories.empty() ? token_history{} : histories[r];
                    out[r] = rows[r].sample(xt::view(e, r, xt::all()), history, pool[part]);
                }
                catch (...)
                {
                    errors[part] = {r, std::current_exception()};
                    return;  // the part's first error is the lowest row it could report
                }
            }
        };
        exec(parts, task);
        // Parts hold increasing rows: the first part that failed has the lowest failing row.
        for (std::size_t part = 0; part < parts; ++part)
        {
            if (errors[part].error)
            {
                detail::rethrow_for_row(errors[part].row, errors[part].error);
            }
        }
    }

    /// The same, with the histories as a std::vector<token_span> (each one
    /// all prompt), as sample_batch took them before token_history; copies
    /// them into token_history values first (one allocation per call).
    template <class E, class H, class Executor = thread_executor,
              class = std::enable_if_t<std::is_same<H, token_span>::value>>
    void sample_batch(const xt::xexpression<E>& logits, span<sampler> rows, span<workspace> pool,
                      std::vector<sampled_token>& out, const std::vector<H>& histories, Executor&& exec = Executor{})
    {
        const std::vector<token_history> converted(histories.begin(), histories.end());
        sample_batch(logits, rows, pool, out, span<const token_history>(converted), std::forward<Executor>(exec));
    }
}

#endif
