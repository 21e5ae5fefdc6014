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
// sample_batch(logits, slots, pool, out [, errors [, exec]])
//   The engine's form: slot i = {row, seq} steps request *seq on logits row
//   `row` (seq->step(row, ws), sequence.hpp) into out[i], a step_result whose
//   views point into that sequence. Slots come in any order and may leave
//   rows out (those rows are never read), so requests finish and start (a
//   new sequence, or reset()) without moving the others; each sequence owns
//   its engine, so its tokens are those it draws alone. The slots are split
//   into min(pool.size(), slots) contiguous parts as above; a sequence needs
//   no workspace of its own. Checked before any row (nothing is sampled):
//   logits 2-D, a pool, and for each slot a sequence (invalid_parameter), a
//   row inside the batch (invalid_parameter), a sequence not ended
//   (invalid_use), and not listed by an earlier slot (invalid_parameter
//   "sample_batch: slot 5 repeats the sequence of slot 2"). A failing slot
//   does not stop its part: every other slot steps, the failing sequence is
//   as before the call and out[i] is an empty step_result (id -1). With
//   `errors`, (*errors)[i] holds slot i's exception (null if it stepped)
//   and nothing is thrown; without, the lowest failing slot's error is
//   rethrown, the slot and its row in front ("slot 2 (row 17): step 4:
//   logits: NaN at index 3"). The
//   sequences of one call must not share a sampler (basic_sequence<S&>).
//
// step_draft_batch(rows, [draft_probs,] slots, pool, out [, errors [, exec]])
//   Speculative decoding for the slots: slot i = {row, seq, draft, options}
//   verifies its draft (k tokens) against rows [row, 0 .. k] of the target's
//   [batch, K + 1, vocab] tensor (seq->step_draft, sequence.hpp, in the
//   part's workspace), with draft_probs [batch, K, vocab] when given (rows
//   [row, 0 .. k - 1]); out[i] = its steps. Drafts of any length up to K;
//   the rest as the slots form above (checks, parts, errors: "slot 2 (row
//   5): step 4: logits: ...").
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
//   - thread_pool(t): t - 1 worker threads started once, which take parts
//     with the calling thread from a shared counter; nothing allocated per
//     call. One per engine, reused step after step.
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

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <xtensor/xview.hpp>

#include "sampler.hpp"
#include "sequence.hpp"

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

        // Rethrows `error`: the library's exception types with `where` in
        // front of the message, anything else unchanged.
        [[noreturn]] inline void rethrow_at(const std::string& where, const std::exception_ptr& error)
        {
            try
            {
                std::rethrow_exception(error);
            }
            catch (const invalid_logits& e)
            {
                throw invalid_logits(where + e.what());
            }
            catch (const invalid_parameter& e)
            {
                throw invalid_parameter(where + e.what());
            }
            catch (const invalid_data& e)
            {
                throw invalid_data(where + e.what());
            }
            catch (const invalid_use& e)
            {
                throw invalid_use(where + e.what());
            }
        }

        // sample_batch's checks before any row: logits [batch, vocab], a pool.
        template <class E>
        void check_batch_logits(const E& e)
        {
            if (e.dimension() != 2)
            {
                throw invalid_logits("sample_batch: logits must be 2-D [batch, vocab], got " +
                                     std::to_string(e.dimension()) + "-D");
            }
        }
        inline void check_pool(span<workspace> pool, const char* who = "sample_batch")
        {
            if (pool.empty())
            {
                throw invalid_parameter(std::string(who) + ": the workspace pool is empty (give one per thread)");
            }
        }

        // Rethrows `error`, an exception thrown while sampling `row`, with
        // "row N: " in front.
        [[noreturn]] inline void rethrow_for_row(std::size_t row, const std::exception_ptr& error)
        {
            rethrow_at("row " + std::to_string(row) + ": ", error);
        }
    }

    /// One slot of a batch: logits row `row`, sampled by the request `seq`.
    template <class S>
    struct basic_slot
    {
        using sampler_type = S;
        std::size_t row = 0;
        basic_sequence<S>* seq = nullptr;
    };
    using slot = basic_slot<sampler>;

    /// One slot of a speculative batch (step_draft_batch): the target's rows
    /// [row, 0 .. k] verify `draft` (k tokens) for the request `seq`, by
    /// `options` (null: the defaults); its draft probabilities, when given,
    /// are rows [row, 0 .. k - 1] of the batch's.
    template <class S>
    struct basic_draft_slot
    {
        using sampler_type = S;
        std::size_t row = 0;
        basic_sequence<S>* seq = nullptr;
        token_span draft;
        const verify_options* options = nullptr;
    };
    using draft_slot = basic_draft_slot<sampler>;

    namespace detail
    {
        // The slots' checks before any row is sampled: no allocation, a
        // sequence listed twice found through a mark set on each in turn.
        struct slot_marks
        {
            template <class Slot>
            static void check(span<const Slot> slots, std::size_t batch)
            {
                std::size_t i = 0;
                try
                {
                    for (; i < slots.size(); ++i)
                    {
                        check_one(slots, i, batch);
                        slots[i].seq->m_listed = true;
                    }
                }
                catch (...)
                {
                    clear(slots, i);
                    throw;
                }
                clear(slots, i);
            }

        private:
            template <class Slot>
            static void check_one(span<const Slot> slots, std::size_t i, std::size_t batch)
            {
                const auto who = [i] {  // built on error only
                    return std::string(std::is_same<Slot, basic_slot<typename Slot::sampler_type>>::value
                                           ? "sample_batch"
                                           : "step_draft_batch") +
                           ": slot " + std::to_string(i);
                };
                const Slot& s = slots[i];
                if (s.seq == nullptr)
                {
                    throw invalid_parameter(who() + " has no sequence");
                }
                if (s.row >= batch)
                {
                    throw invalid_parameter(who() + " reads row " + std::to_string(s.row) + " of a batch of " +
                                            std::to_string(batch));
                }
                if (s.seq->finished())
                {
                    throw invalid_use(who() + "'s sequence has ended (" + to_string(s.seq->reason()) + ")");
                }
                if (s.seq->m_listed)
                {
                    std::size_t j = 0;
                    while (slots[j].seq != s.seq)
                    {
                        ++j;
                    }
                    throw invalid_parameter(who() + " repeats the sequence of slot " + std::to_string(j));
                }
            }

            template <class Slot>
            static void clear(span<const Slot> slots, std::size_t n) noexcept
            {
                for (std::size_t i = 0; i < n; ++i)
                {
                    slots[i].seq->m_listed = false;
                }
            }
        };
    }

    namespace detail
    {
        // The slots form's loop: the slots split into min(pool, n) parts run
        // by exec, step(slot, workspace, i) for each; a failing slot does not
        // stop its part: its error goes to (*errors)[i], or the lowest failing
        // slot's is rethrown, the slot and its row in front.
        template <class Slot, class Executor, class Step>
        void run_slots(span<const Slot> slots, span<workspace> pool, std::vector<std::exception_ptr>* errors,
                       Executor& exec, Step&& step)
        {
            const std::size_t n = slots.size();
            if (n == 0)
            {
                return;
            }
            const std::size_t parts = std::min(pool.size(), n);
            row_error first{n, nullptr};  // the lowest failing slot (errors == nullptr)
            std::mutex first_mutex;
            const auto task = [&](std::size_t part) noexcept {
                for (std::size_t i = part * n / parts; i < (part + 1) * n / parts; ++i)
                {
                    try
                    {
                        step(slots[i], pool[part], i);
                    }
                    catch (...)
                    {
                        if (errors != nullptr)
                        {
                            (*errors)[i] = std::current_exception();
                            continue;
                        }
                        const std::lock_guard<std::mutex> lock(first_mutex);
                        if (i < first.row)
                        {
                            first = {i, std::current_exception()};
                        }
                    }
                }
            };
            exec(parts, task);
            if (first.error)
            {
                rethrow_at("slot " + std::to_string(first.row) + " (row " + std::to_string(slots[first.row].row) + "): ",
                           first.error);
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

    /// An executor whose threads start once: thread_pool(t) starts t - 1
    /// workers (fewer if a start fails: their parts run on the others), and
    /// each call runs task(0) ... task(n - 1) on the calling thread and the
    /// workers, which take parts from a shared counter, and returns when all
    /// have returned. Nothing is allocated per call (the task is passed by
    /// address). One call at a time: a second concurrent call waits for the
    /// first; a task must not call its own pool with n >= 2 (that waits for
    /// itself). Tasks must not throw on a worker (std::terminate, as with
    /// std::thread); one that throws on the calling thread propagates once
    /// no worker runs a part (parts nobody had taken are skipped). The
    /// destructor joins the workers (call it while no call runs).
    class thread_pool
    {
    public:
        explicit thread_pool(std::size_t threads)
        {
            if (threads == 0)
            {
                throw invalid_parameter("thread_pool: threads must be at least 1 (the calling thread)");
            }
            try
            {
                m_workers.reserve(threads - 1);
                while (m_workers.size() + 1 < threads)
                {
                    m_workers.emplace_back([this] { work(); });
                }
            }
            catch (const std::exception&)
            {
                // Fewer workers: the calling thread and those started run every part.
            }
        }
        thread_pool(const thread_pool&) = delete;
        thread_pool& operator=(const thread_pool&) = delete;
        ~thread_pool()
        {
            {
                const std::lock_guard<std::mutex> lock(m_mutex);
                m_stop = true;
            }
            m_wake.notify_all();
            for (auto& t : m_workers)
            {
                t.join();
            }
        }

        /// The threads that run parts: the workers and the caller.
        std::size_t size() const noexcept { return m_workers.size() + 1; }

        template <class F>
        void operator()(std::size_t n, F&& task)
        {
            using Task = std::remove_reference_t<F>;
            if (n <= 1 || m_workers.empty())
            {
                for (std::size_t part = 0; part < n; ++part)
                {
                    task(part);
                }
                return;
            }
            const std::lock_guard<std::mutex> call(m_call);
            const job j{[](void* t, std::size_t part) { (*static_cast<Task*>(t))(part); },
                        const_cast<void*>(static_cast<const void*>(&task)), n};
            {
                const std::lock_guard<std::mutex> lock(m_mutex);
                m_job = j;
                m_next.store(0, std::memory_order_relaxed);
                m_finished = 0;
                ++m_generation;
            }
            m_wake.notify_all();
            std::exception_ptr error;
            std::size_t done = 0;
            try
            {
                done = take_parts(j);
            }
            catch (...)
            {
                error = std::current_exception();
            }
            std::unique_lock<std::mutex> lock(m_mutex);
            m_finished += done;
            // Wait for every part, and for every worker that took the job to
            // leave it, so that none can touch `task` once this returns.
            m_done.wait(lock, [&] { return (m_finished == n || error) && m_inside == 0; });
            m_job.n = 0;  // a worker waking late finds no job
            lock.unlock();
            if (error)
            {
                std::rethrow_exception(error);
            }
        }

    private:
        struct job
        {
            void (*run)(void*, std::size_t) = nullptr;
            void* task = nullptr;
            std::size_t n = 0;
        };

        // Runs parts while some are left; how many it ran.
        std::size_t take_parts(const job& j)
        {
            std::size_t done = 0;
            for (std::size_t part; (part = m_next.fetch_add(1, std::memory_order_relaxed)) < j.n; ++done)
            {
                j.run(j.task, part);
            }
            return done;
        }

        void work()
        {
            std::uint64_t seen = 0;
            std::unique_lock<std::mutex> lock(m_mutex);
            for (;;)
            {
                m_wake.wait(lock, [&] { return m_stop || m_generation != seen; });
                if (m_stop)
                {
                    return;
                }
                seen = m_generation;
                if (m_job.n == 0)
                {
                    continue;  // the call already ended
                }
                const job j = m_job;
                ++m_inside;
                lock.unlock();
                const std::size_t done = take_parts(j);
                lock.lock();
                m_finished += done;
                --m_inside;
                if (m_inside == 0)
                {
                    m_done.notify_all();
                }
            }
        }

        std::vector<std::thread> m_workers;
        std::mutex m_call;   // one call at a time
        std::mutex m_mutex;  // guards everything below but m_next
        std::condition_variable m_wake, m_done;
        job m_job;
        std::atomic<std::size_t> m_next{0};
        std::size_t m_finished = 0;
        std::size_t m_inside = 0;  // workers running parts of the current job
        std::uint64_t m_generation = 0;
        bool m_stop = false;
    };

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
        detail::check_batch_logits(e);
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
        detail::check_pool(pool);
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

    /// One step of each slot's sequence on its row of `logits` ([batch,
    /// vocab]) into out[i]; see the top of this header.
    template <class E, class S, class Executor = thread_executor>
    void sample_batch(const xt::xexpression<E>& logits, span<const basic_slot<S>> slots, span<workspace> pool,
                      std::vector<step_result>& out, std::vector<std::exception_ptr>* errors = nullptr,
                      Executor&& exec = Executor{})
    {
        const E& e = logits.derived_cast();
        detail::check_batch_logits(e);
        detail::check_pool(pool);
        detail::slot_marks::check(slots, e.shape()[0]);
        const std::size_t n = slots.size();
        out.resize(n);
        if (errors != nullptr)
        {
            errors->assign(n, nullptr);
        }
        if (n == 0)
        {
            return;
        }
        detail::run_slots(slots, pool, errors, exec, [&](const basic_slot<S>& s, workspace& ws, std::size_t i) {
            out[i] = step_result();
            out[i] = s.seq->step(xt::view(e, s.row, xt::all()), ws);
        });
    }

    namespace detail
    {
        // step_draft_batch's work; q_of(slot) gives none (one-hot) or the
        // slot's draft probabilities.
        template <class E, class S, class Executor, class QOf>
        void draft_batch(const E& e, span<const basic_draft_slot<S>> slots, span<workspace> pool,
                         std::vector<span<const step_result>>& out, std::vector<std::exception_ptr>* errors,
                         Executor& exec, QOf&& q_of)
        {
            if (e.dimension() != 3 || e.shape()[1] == 0)
            {
                throw invalid_logits("step_draft_batch: target rows must be 3-D [batch, k + 1, vocab], got " +
                                     std::to_string(e.dimension()) + "-D" + (e.dimension() == 3 ? " with no row" : ""));
            }
            check_pool(pool, "step_draft_batch");
            const std::size_t most = e.shape()[1] - 1;
            for (std::size_t i = 0; i < slots.size(); ++i)
            {
                if (slots[i].draft.size() > most)
                {
                    throw invalid_parameter("step_draft_batch: slot " + std::to_string(i) + "'s draft has " +
                                            std::to_string(slots[i].draft.size()) + " tokens, more than the " +
                                            std::to_string(most) + " the rows hold");
                }
            }
            slot_marks::check(slots, e.shape()[0]);
            const std::size_t n = slots.size();
            out.assign(n, span<const step_result>());
            if (errors != nullptr)
            {
                errors->assign(n, nullptr);
            }
            run_slots(slots, pool, errors, exec, [&](const basic_draft_slot<S>& s, workspace& ws, std::size_t i) {
                const std::size_t k = s.draft.size();
                const verify_options none;
                const verify_options& o = s.options != nullptr ? *s.options : none;
                const auto rows = xt::view(e, s.row, xt::range(0, k + 1), xt::all());
                out[i] = q_of(s, [&](const auto* q) {
                    if (q == nullptr)
                    {
                        return s.seq->step_draft(rows, s.draft, o, &ws);
                    }
                    return s.seq->step_draft(rows, s.draft, xt::view(*q, s.row, xt::range(0, k), xt::all()), o, &ws);
                });
            });
        }
    }

    /// Speculative decoding for a batch of sequences (the engine's form):
    /// slot i verifies its draft (k tokens) against rows [slot.row, 0 .. k]
    /// of the target's [B, K + 1, V] tensor, as slot.seq->step_draft does,
    /// in workspace pool[part]; out[i] holds its steps (views into its
    /// sequence, valid until that sequence's next call). With draft_probs
    /// ([B, K, V]) each slot's are rows [slot.row, 0 .. k - 1]. As
    /// sample_batch's slots form otherwise (parts, executors, errors, each
    /// sequence drawing from its own engine, so its tokens are those it
    /// draws alone); checked first: rows 3-D, a pool, each draft at most K
    /// tokens, each slot's sequence as sample_batch checks it.
    template <class E, class S, class Executor = thread_executor>
    void step_draft_batch(const xt::xexpression<E>& rows, span<const basic_draft_slot<S>> slots, span<workspace> pool,
                          std::vector<span<const step_result>>& out, std::vector<std::exception_ptr>* errors = nullptr,
                          Executor&& exec = Executor{})
    {
        detail::draft_batch(rows.derived_cast(), slots, pool, out, errors, exec,
                            [](const basic_draft_slot<S>&, auto&& step) { return step(static_cast<const E*>(nullptr)); });
    }
    template <class E, class Q, class S, class Executor = thread_executor>
    void step_draft_batch(const xt::xexpression<E>& rows, const xt::xexpression<Q>& draft_probs,
                          span<const basic_draft_slot<S>> slots, span<workspace> pool,
                          std::vector<span<const step_result>>& out, std::vector<std::exception_ptr>* errors = nullptr,
                          Executor&& exec = Executor{})
    {
        const E& e = rows.derived_cast();
        const Q& q = draft_probs.derived_cast();
        if (q.dimension() != 3 || (e.dimension() == 3 && (q.shape()[0] != e.shape()[0] || q.shape()[1] + 1 != e.shape()[1] ||
                                                           q.shape()[2] != e.shape()[2])))
        {
            std::string shape;
            for (std::size_t d = 0; d < q.dimension(); ++d)
            {
                shape += (d == 0 ? "" : ", ") + std::to_string(q.shape()[d]);
            }
            throw invalid_parameter("step_draft_batch: draft_probs must be [batch, k, vocab] beside rows [batch, k + 1, "
                                    "vocab], got [" + shape + "]");
        }
        detail::draft_batch(e, slots, pool, out, errors, exec,
                            [&q](const basic_draft_slot<S>&, auto&& step) { return step(&q); });
    }

    /// The same over a std::vector of slots (a span does not deduce S).
    template <class E, class S, class Executor = thread_executor>
    void step_draft_batch(const xt::xexpression<E>& rows, const std::vector<basic_draft_slot<S>>& slots,
                          span<workspace> pool, std::vector<span<const step_result>>& out,
                          std::vector<std::exception_ptr>* errors = nullptr, Executor&& exec = Executor{})
    {
        step_draft_batch(rows, span<const basic_draft_slot<S>>(slots), pool, out, errors, std::forward<Executor>(exec));
    }
    template <class E, class Q, class S, class Executor = thread_executor>
    void step_draft_batch(const xt::xexpression<E>& rows, const xt::xexpression<Q>& draft_probs,
                          const std::vector<basic_draft_slot<S>>& slots, span<workspace> pool,
                          std::vector<span<const step_result>>& out, std::vector<std::exception_ptr>* errors = nullptr,
                          Executor&& exec = Executor{})
    {
        step_draft_batch(rows, draft_probs, span<const basic_draft_slot<S>>(slots), pool, out, errors,
                         std::forward<Executor>(exec));
    }

    /// The same over a std::vector of slots (a span does not deduce S).
    template <class E, class S, class Executor = thread_executor>
    void sample_batch(const xt::xexpression<E>& logits, const std::vector<basic_slot<S>>& slots, span<workspace> pool,
                      std::vector<step_result>& out, std::vector<std::exception_ptr>* errors = nullptr,
                      Executor&& exec = Executor{})
    {
        sample_batch(logits, span<const basic_slot<S>>(slots), pool, out, errors, std::forward<Executor>(exec));
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
