// xsampler/candidates.hpp — the working set of a chain and the verbs that change it. (xsampler, BSD-3-Clause)
//
// The working set a chain of stages passes along, and the only verbs that
// change it. Stages (processors and filters, stage.hpp) see it through these
// verbs, so every stage, the library's or a user's, keeps its invariants.
//
// Invariants (hold after every verb)
// - The set is a set of tokens of the row, each with its current logit: the
//   caller's logit, or the value a processor set. The caller's row is never
//   written: edits live in copies of the 64-token blocks they touch.
// - Tokens are ranked by (current logit descending, id ascending); a
//   temperature T > 0 does not change this rank, and in exact arithmetic it is
//   the rank by (probability descending, id ascending). Ties always break
//   toward the lower id.
// - max_logit() and argmax() are the kept set's best token (ties: the lowest
//   id), whatever the last verb removed or edited. The kept set is never
//   empty once a row is loaded: a verb that would empty it throws instead
//   (invalid_logits naming who asked), and the set stays as it was.
// - Dense: every unmasked token of the row is kept and no ids are stored (the
//   state before any filter truncates). Sparse: an explicit list of
//   (logit, id), after keep_top, keep_log_weight_at_least,
//   keep_logit_at_least, keep_monotone, keep_argmax, retain_if, keep_subset
//   or a keep_in that keeps less than a sixteenth of the row.
// - The temperature is deferred: a scale s (the product of 1/T over the
//   divide_scale calls so far) that the weights fold into the exp
//   (detail/exp2.hpp), so temperature is never a pass over the row.
// - A candidates object is a reusable workspace: its buffers grow to the
//   vocabulary once and are reused after, with no allocation per token. Any
//   throw leaves it loadable again; load() starts afresh.
// - Fused top-k (load(row, k)): a keep_top(k) selected in the validation
//   pass is pending (detail/pending_top_k.hpp: what runs on the list, and
//   when the set first "unfuses" into the dense set of the edited row,
//   exactly as if the row had been loaded unfused and then edited). So the
//   readers of its shape (size, dense, items, the walks) are not const; the
//   max, argmax, logits and weights are.
// The verbs' contracts, with their errors, are docs/semantics.md's table
// ("Stages, processors and chains"); each is briefly documented below.
//
// The kernel view: a stage whose algorithm the verbs cannot express fast
// (filters/top_p.hpp, filters/typical.hpp) reads the set through
// for_each_run, items(), weight(), total_weight_stored() with weights(),
// reduce (its own kernel, detail/reduce.hpp) and exact_scale(), keeps its buffers in scratch<S>(), and
// commits through keep_top, keep_monotone or keep_subset, which check what
// they are given: no stage can break the invariants above. The row's values
// and edits live in detail/edited_row.hpp, the check of a stage's list in
// detail/subset_check.hpp.
#ifndef XSAMPLER_CANDIDATES_HPP
#define XSAMPLER_CANDIDATES_HPP

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "row.hpp"
#include "detail/edited_row.hpp"
#include "detail/exact.hpp"
#include "detail/reduce.hpp"
#include "detail/kept_list.hpp"
#include "detail/pending_top_k.hpp"
#include "detail/scratch_store.hpp"
#include "detail/subset_check.hpp"
#include "detail/top_select.hpp"

namespace xsampler
{
    template <class T>
    class candidates
    {
    public:
        static_assert(std::is_same<T, float>::value || std::is_same<T, double>::value,
                      "xsampler: logits must be float or double");
        using value_type = T;

        // --- intake ---

        /// Start from the whole row: validates it (one pass) and keeps every
        /// unmasked token at scale 1. With top_k_first = k > 0 (for chains
        /// whose stages before a top_k{k} only rescale or edit a few logits)
        /// the same pass selects the k + margin best tokens or more, and a
        /// keep_top(k) is pending (detail/pending_top_k.hpp: exact; only the
        /// speed differs). The selection's own slack (up to about k, at no
        /// cost) is the usual margin; `margin` forces a larger one.
        template <class E>
        void load(const xt::xexpression<E>& logits, std::size_t top_k_first = 0, std::size_t margin = 0)
        {
            m_pending.end(m_list.tokens());  // a throw may have left a fused load pending
            m_row.load(logits);  // (checks the size)
            if (top_k_first > 0 && top_k_first < m_row.size() && load_top_k(top_k_first, margin))
            {
                return;
            }
            const auto stats = detail::scan_row(m_row.loaded());
            reset(stats.max, stats.argmax);
            m_list.tokens().clear();
        }

        // --- reading ---

        std::size_t vocab() const noexcept { return m_row.size(); }
        /// The best kept token's logit and id (ties: the lowest id).
        T max_logit() const noexcept
        {
            settle();
            return m_max;
        }
        token_id argmax() const noexcept
        {
            settle();
            return m_argmax;
        }
        /// The row as loaded, before any edit (of T, or of f16 or bf16: its
        /// visit(f) gives the typed pointer), with its own max and argmax.
        const detail::stored_row<T>& loaded_row() const noexcept { return m_row.loaded(); }
        T loaded_max() const noexcept { return m_row_max; }
        token_id loaded_argmax() const noexcept { return m_row_argmax; }

        /// The current logit of any token of the row (kept or not): the
        /// loaded value or the one a processor set.
        T logit(token_id id) const noexcept { return m_row.logit(std::size_t(id)); }
        /// Whether a processor has edited a logit since the load.
        bool edited() const noexcept { return m_row.edited(); }

        /// Calls f(x, first, n) with the current logits of tokens
        /// [first, first + n), for consecutive runs covering the row in id
        /// order: one run when nothing is edited, and every run but the last
        /// starts and ends on a 64-token block boundary.
        template <class F>
        void for_each_run(F&& f)
        {
            m_row.for_each_run([&](const auto* x, std::size_t first, std::size_t n) {
                if constexpr (std::is_same<std::decay_t<decltype(*x)>, T>::value)
                {
                    f(x, first, n);
                }
                else
                {
                    // A row of f16 or bf16: widened 1,024 tokens at a time.
                    detail::for_each_widened(x, n, [&](const T* wide, std::size_t at, std::size_t len) {
                        f(wide, first + at, len);
                    });
                }
            });
        }
        /// The same runs with x the row's own pointer where a run is not
        /// edited: const T*, or for a row of f16 or bf16 const f16* or const
        /// bf16* (an edited block is const T*); for kernels that widen as
        /// they load (detail::load_logits).
        template <class F>
        void for_each_stored_run(F&& f)
        {
            m_row.for_each_run(f);
        }

        /// Number of kept tokens (always >= 1); counted on first use for a
        /// dense set (a pass over the row).
        std::size_t size()
        {
            unfuse();
            if (m_size == unknown)
            {
                m_size = m_row.count_finite();
            }
            return m_size;
        }
        /// Dense: every unmasked token of the row is kept, no ids stored.
        /// A pending fused top-k is first dropped (unfused): the pending list
        /// is not the kept set.
        bool dense() noexcept
        {
            unfuse();
            return m_dense;
        }
        /// Sparse sets: the kept tokens, in rank order when rank_sorted()
        /// (a pending fused top-k is first dropped, as for dense()).
        const std::vector<scored<T>>& items() noexcept
        {
            unfuse();
            return m_list.tokens();
        }
        /// Whether load(row, k) left a keep_top(k) pending.
        bool top_k_pending() const noexcept { return m_pending.active(); }
        bool rank_sorted() const noexcept { return m_list.rank_sorted(); }

        /// The scale s in T (the contract of detail/exp2.hpp).
        T scale() const noexcept { return T(std::min(m_scale, double(std::numeric_limits<T>::max()))); }
        /// s2 = s log2(e) in T: weights are 2^((x - m) s2).
        T scale2() const noexcept
        {
            return T(std::min(scale2_double(), double(std::numeric_limits<T>::max())));
        }
        /// s2 in double, at most its largest finite value (a temperature near
        /// 0 makes s that large: s log2(e) would overflow to inf, and 0 inf
        /// is NaN for the argmax).
        double scale2_double() const noexcept { return std::min(m_scale * detail::log2e, std::numeric_limits<double>::max()); }
        /// d = (x - m) * s in T (natural-log units); 0 for the argmax, <= 0 always.
        T log_weight(T logit) const noexcept { return detail::exponent(logit, max_logit(), scale()); }
        /// The contract's weight w = 2^((x - m) s2); 1 for the argmax.
        T weight(T logit) const noexcept { return detail::weight(logit, max_logit(), scale2()); }
        /// The same, read from the weights a dense pass kept while they are
        /// current (the same bits: the kernels compute what weight() does).
        T weight(token_id id, T logit) const noexcept { return m_weights_current ? m_weights[std::size_t(id)] : weight(logit); }

        /// Calls f(id, logit) for every kept token in increasing id order. A
        /// short sparse list is sorted by id; a long one is walked through a
        /// bitmap of its ids (O(n + V/64), no sort).
        template <class F>
        void for_each_by_id(F&& f)
        {
            unfuse();
            if (m_dense)
            {
                m_row.for_each_finite(f);
                return;
            }
            m_list.for_each_by_id(m_row, f);
        }

        /// Calls f(id, logit) for every kept token of block `b` (ids
        /// [64b, 64b + 64)) in increasing id order.
        template <class F>
        void for_each_in_block(std::size_t b, F&& f)
        {
            unfuse();
            if (m_dense)
            {
                m_row.for_each_finite_in_block(b, f);
                return;
            }
            m_list.for_each_in_block(b, m_row, f);
        }

        /// The j best-ranked kept tokens (all of them if fewer), in rank
        /// order, into `out`; the set is unchanged. A selection (one SIMD
        /// pass on a dense set), then a sort of the j.
        void top_items(std::size_t j, std::vector<scored<T>>& out)
        {
            unfuse();
            if (m_dense)
            {
                detail::top_selector<T> select(j, out);
                for_each_stored_run([&](const auto* x, std::size_t first, std::size_t n) { select.feed(x, n, first); });
                select.finish();
            }
            else
            {
                m_list.best_into(j, out);
            }
            std::sort(out.begin(), out.end(), ranks_before<T>);
        }

        /// Z over the kept set at the current scale, in the contract's order.
        double total_weight() { return sum_weights(nullptr); }

        /// Z, also keeping each block's positive share (block_totals()).
        double total_weight_by_block()
        {
            detail::block_record record{m_blocks.data()};
            const double z = sum_weights(&record);
            m_block_count = record.size;
            return z;
        }
        detail::block_record block_totals() noexcept { return {m_blocks.data(), m_block_count}; }

        // --- the kernel view: what a stage's own algorithm reads (the
        //     nucleus of filters/top_p.hpp) beside for_each_run, items(),
        //     weight() and the verbs; none of it changes the set ---

        /// Z as total_weight() sums it; on a dense set each token's weight is
        /// also stored by id (weights()) until the set or its scale changes.
        double total_weight_stored() { return sum_weights(nullptr, true); }
        /// The weights total_weight_stored() stored, indexed by token id.
        const T* weights() const noexcept { return m_weights.data(); }
        /// S, the scale in double: d_i = (x_i - m)·S exactly (scale(): S in T).
        double exact_scale() const noexcept { return m_scale; }

        /// Adds a kernel's terms (detail/reduce.hpp) over the kept set to sums
        /// in Z's order (a dense set's deferred mask read, not written); a
        /// kernel gets each token's weight (stored first if it reads them).
        /// With `store`, channel 0 (the weights) is stored as weights().
        /// Returns the kept count when the kernel counts, else 0.
        template <class Kernel>
        std::size_t reduce(const Kernel& k, detail::blocked_sum<T> (&sums)[Kernel::channels], bool store = false)
        {
            unfuse();
            std::size_t count = 0;
            if (!m_dense)
            {
                for_each_by_id([&](token_id id, T x) { count += detail::reduce_one(k, std::size_t(id), x, weight(id, x), sums); });
                return Kernel::counts ? count : 0;
            }
            if (Kernel::reads_weights && !m_weights_current)
            {
                total_weight_stored();
            }
            if (store)
            {
                m_weights.resize(m_row.size());
            }
            const std::uint64_t* outside = m_row.deferred_words();
            m_row.for_each_raw_run([&](const auto* x, std::size_t first, std::size_t n) {
                count += detail::reduce_run(k, x, n, first, sums, outside == nullptr ? nullptr : outside + first / 64,
                                   Kernel::reads_weights ? m_weights.data() + first : nullptr,
                                   store ? m_weights.data() + first : nullptr);
            });
            m_weights_current = m_weights_current || store;
            return count;
        }

        // --- verbs: processors ---

        /// Sets token id's logit to x (-inf masks it); a token not kept stays
        /// dropped. NaN, +inf or an id outside the row: an error, nothing
        /// changed. O(1) amortised, O(kept) on a sparse set (docs/semantics.md).
        void set_logit(token_id id, T x)
        {
            if (id < 0 || std::size_t(id) >= m_row.size())
            {
                throw invalid_parameter("set_logit: token id " + std::to_string(id) + " is outside the vocabulary of " +
                                        std::to_string(m_row.size()));
            }
            checked(id, x);
            const auto i = std::size_t(id);
            if (m_pending.active())
            {
                pending_edit(i, x);
                return;
            }
            if (m_dense)
            {
                if (!m_row.masked() || m_row.keeps(i))  // (outside a keep_in mask: dropped)
                {
                    edit_row(i, x);
                }
                return;
            }
            T old = T(0);
            if (!m_list.set(id, x, old))
            {
                return;
            }
            m_row.patch(i) = x;  // logit(id) agrees with the list
            m_weights_current = false;
            m_size = m_list.size();
            note_edit(id, old, x);
        }
        void mask(token_id id) { set_logit(id, -inf); }

        /// Sets each token ids[j] (in order) whose current logit x is finite
        /// to f(j, x), as set_logit(ids[j], f(j, x)) one after another would
        /// (a result equal to x changes no logit; edited() may still turn
        /// true): a processor's edits in one call, the set's bookkeeping
        /// done once rather than per token. Every
        /// id is checked first (invalid_parameter naming it, nothing
        /// changed); a NaN or +inf result throws as set_logit does, the edits
        /// before it made.
        template <class F>
        void edit_each(span<const token_id> ids, F&& f)
        {
            const std::size_t vocab = m_row.size();
            const std::size_t n = ids.size();
            detail::check_ids(ids, vocab, "edit_each", "token id");
            std::size_t j = 0;
            const bool pending = m_pending.active();
            if ((pending && m_pending.mask() == nullptr) || (!pending && m_dense && !m_row.masked()))
            {
                // set_logit's pending or dense path with its checks hoisted
                // (every id's block copied first: edited() turns true even if
                // no logit changes), until an edit unfuses the set.
                m_row.patch_blocks(ids);
                auto& items = m_list.tokens();
                if (pending)
                {
                    m_pending.index(items, vocab);
                }
                for (; j < n; ++j)
                {
                    const auto i = std::size_t(ids[j]);
                    T& slot = m_row.patched(i);
                    const T old = slot;
                    if (old == -inf)
                    {
                        continue;
                    }
                    const T x = checked(ids[j], f(j, old));
                    if (same_bits(x, old))
                    {
                        continue;
                    }
                    write(slot, x);
                    if (pending && !(x > old) && !m_pending.listed(i))
                    {
                        continue;  // lowered outside L: below the max, no change to the list
                    }
                    note_edit(ids[j], old, x);
                    if (pending && m_pending.edited(i, old, x, items, vocab))
                    {
                        unfuse();  // the top k may now lie outside the list
                        ++j;
                        break;
                    }
                }
            }
            for (; j < n; ++j)
            {
                const T old = m_row.logit(std::size_t(ids[j]));
                if (old == -inf)
                {
                    continue;
                }
                const T x = f(j, old);
                if (!same_bits(x, old))
                {
                    set_logit(ids[j], x);
                }
            }
        }

        /// Throws invalid_logits("<who>: every token is masked") when the
        /// edits so far left no token; a processor's runner calls it.
        void require_some(const std::string& who)
        {
            if (max_logit() == -inf)
            {
                throw invalid_logits(who + ": every token is masked");
            }
        }

        // --- verbs: filters ---

        /// Divide the logits by t > 0 (deferred).
        void divide_scale(double t) noexcept
        {
            m_scale = std::min(m_scale / t, std::numeric_limits<double>::max());
            m_weights_current = false;
        }

        /// Keep only the best token (temperature 0).
        void keep_argmax()
        {
            settle();  // pending: the argmax is in the list (see the top of this file)
            m_pending.end(m_list.tokens());
            const scored<T> best{m_max, m_argmax};
            m_list.assign(&best, 1, true, true);
            become_sparse();
        }

        /// Keep the k best-ranked tokens, by selection: on a dense set one
        /// SIMD pass with a rising threshold, on a list std::nth_element.
        /// k == 0 or k >= the number kept keeps all. The set stays unordered.
        /// After a fused load(row, k'), for 0 < k <= k': selection on the
        /// pending list (its masked items dropped first).
        void keep_top(std::size_t k)
        {
            if (m_pending.active())
            {
                if (k == 0 || k > m_pending.k())
                {
                    unfuse();
                }
                else
                {
                    // The pending list, its masked items dropped, is a list
                    // that holds the top k: selected below like any list.
                    m_pending.end(m_list.tokens());
                    auto& l = m_list.tokens();
                    l.erase(std::remove_if(l.begin(), l.end(), [](const scored<T>& s) { return s.logit == -inf; }), l.end());
                    m_list.changed(false, false);
                    become_sparse();
                }
            }
            if (k == 0 || k >= (m_dense ? m_row.size() : size()))
            {
                return;  // a dense set with fewer than k unmasked tokens is kept whole below
            }
            if (m_dense)
            {
                detail::top_selector<T> select(k, m_list.tokens());
                for_each_stored_run([&](const auto* x, std::size_t first, std::size_t n) { select.feed(x, n, first); });
                select.finish();
                m_list.changed(false, false);
            }
            else
            {
                m_list.keep_best(k);
            }
            become_sparse();
        }

        /// Keep the tokens with (x - m) * s >= d <= 0 (the product in T, not
        /// exact: min_p is), at least min_keep (0 counts as 1); d == -inf
        /// keeps all. One SIMD pass on a dense set, no exp.
        void keep_log_weight_at_least(T d, std::size_t min_keep = 1)
        {
            unfuse();
            if (!(d <= T(0)))
            {
                throw invalid_parameter("keep_log_weight_at_least: d must be <= 0, got " +
                                        detail::format_value(double(d)));
            }
            if (d == -inf)
            {
                return;  // -inf >= -inf would keep masked tokens
            }
            const T m = max_logit();
            const T s = scale();
            const auto keep = [&](T logit) { return detail::exponent(logit, m, s) >= d; };
            const T low = detail::least_logit_where(m, keep);
            keep_monotone(low, low, never, min_keep);
        }

        /// Keep the tokens for which keep(id, logit) is true: any subset, not
        /// only a rank prefix (the max and argmax follow). If it keeps none,
        /// throws invalid_logits("<who>: kept no token") and the set is as it
        /// was. Visits every kept token in id order (a scalar pass on a dense
        /// set).
        template <class Keep>
        void retain_if(Keep&& keep, const std::string& who)
        {
            unfuse();
            scored<T>* out = detail::grown(m_spare, m_dense ? m_row.size() : m_list.size());
            std::size_t count = 0;
            for_each_by_id([&](token_id id, T logit) {
                if (keep(id, logit))
                {
                    out[count++] = {logit, id};
                }
            });
            if (count == 0)
            {
                throw invalid_logits(who + ": kept no token");
            }
            m_list.assign(out, count, false, true);
            become_sparse();
            m_max_stale = true;
            m_weights_current = false;  // stored relative to a max that may be gone
        }

        /// Keep the kept tokens that are in `allowed` (a mask over the
        /// vocabulary, types.hpp): read word by word, O(V/64 + kept) on a
        /// dense set, O(kept) on a sparse one; never a pass over the row.
        /// While a fused top-k is pending it stays pending on the list's
        /// allowed tokens when that is exact (detail/pending_top_k.hpp);
        /// `allowed` must then outlive the step, unchanged. On a dense set a
        /// mask keeping a sixteenth of it or more is deferred (mask_outside).
        /// Throws invalid_logits("<who>: every token is masked") if none is
        /// left, and the set is as it was.
        void keep_in(const token_set& allowed, const std::string& who)
        {
            if (m_pending.active() && pending_keep_in(allowed))
            {
                return;
            }
            unfuse();
            if (m_dense && mask_outside(allowed, who))
            {
                return;
            }
            if (retain_allowed(allowed) == 0)
            {
                throw invalid_logits(who + ": every token is masked");
            }
        }

        // --- readers and verbs of the entropy and level filters ---

        /// Z, the mean log weight E[t] = (sum_i w_i t_i) / Z, t_i = (x_i - m) s
        /// (nats; the entropy is log Z - E[t]), summed as Z is, and size():
        /// one pass of detail::moments_kernel over the kept set.
        detail::moments log_weight_moments()
        {
            unfuse();
            detail::blocked_sum<T> sums[2];
            const std::size_t n = reduce(detail::moments_kernel<T>(max_logit(), scale(), scale2()), sums);
            if (m_dense)
            {
                m_size = n;
            }
            const double z = sums[0].total();
            return {z, sums[1].total() / z, m_size};
        }

        /// Keep x iff x >= low and (x >= sure or decide(x)), low <= sure:
        /// decide, a stage's exact re-decision near its threshold, is asked
        /// once per unmasked token in [low, sure) and may read the set; at
        /// least min_keep (0 counts as 1) are kept. One SIMD pass on a dense
        /// set (docs/semantics.md: -inf and NaN bounds).
        template <class Decide>
        void keep_monotone(T low, T sure, Decide&& decide, std::size_t min_keep)
        {
            unfuse();
            if (low != low || sure != sure)
            {
                throw invalid_parameter("keep_monotone: low and sure must not be NaN");
            }
            // x >= -inf would take in the masked tokens
            low = std::max(low, std::numeric_limits<T>::lowest());
            sure = std::max(sure, std::numeric_limits<T>::lowest());
            min_keep = std::max<std::size_t>(min_keep, 1);
            const token_id best = argmax();
            bool best_kept = false;
            const auto keep = [&](T x, token_id id) {
                const bool k = x >= low && (x >= sure || decide(x));
                best_kept = best_kept || (k && id == best);
                return k;
            };
            std::size_t kept = 0;
            if (!m_dense)
            {
                // A copy is walked: decide may read the set, and a read may
                // order the list by id (detail/kept_list.hpp).
                const bool rank_sorted = m_list.rank_sorted();
                const bool id_sorted = m_list.id_sorted();
                const std::size_t n = m_list.size();
                scored<T>* out = detail::grown(m_spare, n);
                std::copy(m_list.tokens().begin(), m_list.tokens().end(), out);
                for (std::size_t j = 0; j < n; ++j)
                {
                    const scored<T> item = out[j];
                    if (keep(item.logit, item.id))
                    {
                        out[kept++] = item;
                    }
                }
                if (kept < min_keep)
                {
                    keep_top(min_keep);
                    return;
                }
                m_list.assign(out, kept, rank_sorted, id_sorted);
                become_sparse();
            }
            else
            {
                using B = detail::batch<T>;
                const B vlow(low);
                auto& l = m_list.tokens();
                l.clear();
                for_each_stored_run([&](const auto* x, std::size_t first, std::size_t n) {
                    detail::for_each_passing(
                        x, n, [&](const B& v) { return v >= vlow; }, [&](T v) { return v >= low; },
                        [&](std::size_t j) {
                            const T xj = x[j];
                            if (keep(xj, token_id(first + j)))
                            {
                                l.push_back({xj, token_id(first + j)});
                            }
                        });
                });
                if (l.size() < min_keep)
                {
                    keep_top(min_keep);  // still dense: selects from the row
                    return;
                }
                m_list.changed(false, true);
                become_sparse();
            }
            if (!best_kept)
            {
                m_max_stale = true;
                m_weights_current = false;  // stored relative to a max that is gone
            }
        }

        /// Keep the tokens whose current logit is >= x: a rank prefix that
        /// holds the argmax (x <= max_logit() required, else
        /// invalid_parameter and nothing changes; x == -inf keeps all). One
        /// SIMD pass on a dense set.
        void keep_logit_at_least(T x)
        {
            unfuse();
            if (!(x <= max_logit()))
            {
                throw invalid_parameter("keep_logit_at_least: x must be <= the best logit " +
                                        detail::format_value(double(max_logit())) + ", got " +
                                        detail::format_value(double(x)));
            }
            if (x == -inf)
            {
                return;
            }
            keep_monotone(x, x, never, 1);  // x <= the max: the argmax passes
        }

        /// The workspace's scratch object of type S (default-constructed on
        /// first use, then reused): where a stage's own algorithm keeps its
        /// buffers (filters/typical.hpp), so they grow once per workspace.
        template <class S>
        S& scratch()
        {
            return m_stage_scratch.get<S>();
        }

        /// Keeps exactly the tokens of `kept`, a subset of the set a stage
        /// computed (each token with the set's logit, once, in any order;
        /// checked: detail/subset_check.hpp), swapped in as the set's list
        /// (`kept` is scratch after). The max follows; weights stored by a
        /// dense pass stay current while the best token stays.
        void keep_subset(std::vector<scored<T>>& kept, const std::string& who)
        {
            unfuse();
            if (kept.empty())
            {
                throw invalid_logits(who + ": kept no token");
            }
            const auto v = m_subset_check(kept, m_row, m_dense ? nullptr : &m_list.tokens(), argmax());
            if (v.bad != kept.size())
            {
                throw invalid_parameter(who + ": keep_subset: token " + std::to_string(kept[v.bad].id) +
                                        " is not a token of the set with its logit, or is listed twice");
            }
            auto& l = m_list.tokens();
            l.swap(kept);
            m_list.changed(std::is_sorted(l.begin(), l.end(), ranks_before<T>),
                           v.by_id || std::is_sorted(l.begin(), l.end(), [](const scored<T>& a, const scored<T>& b) {
                               return a.id < b.id;
                           }));
            become_sparse();
            if (!v.has_best)
            {
                m_max_stale = true;
                m_weights_current = false;  // stored relative to a max that is gone
            }
        }

    private:
        static constexpr T inf = std::numeric_limits<T>::infinity();
        static constexpr bool never(T) noexcept { return false; }
        static constexpr std::size_t unknown = ~std::size_t(0);

        /// x, if it may be a logit (not NaN, not +inf); else invalid_logits naming token id.
        static T checked(token_id id, T x)
        {
            if (!(x < inf))
            {
                not_a_logit(id, x);
            }
            return x;
        }
        [[noreturn]] static void not_a_logit(token_id id, T x)
        {
            throw invalid_logits(std::string("set_logit: token ") + std::to_string(id) + " set to " +
                                 (x != x ? "NaN" : "+inf"));
        }
        static bool same_bits(T a, T b) noexcept
        {
            typename detail::exp_constants<T>::bits ua, ub;
            std::memcpy(&ua, &a, sizeof a);
            std::memcpy(&ub, &b, sizeof b);
            return ua == ub;
        }

        /// A dense set's edit of token i (also a pending fused top-k's):
        /// patches the row, and the size and the max follow. Returns the old
        /// logit.
        T edit_row(std::size_t i, T x)
        {
            const T old = write(m_row.patch(i), x);
            note_edit(token_id(i), old, x);
            return old;
        }
        /// Writes x into a token's slot of the patched row; the size
        /// follows (the max is the caller's: note_edit). Returns the old logit.
        T write(T& slot, T x) noexcept
        {
            const T old = slot;
            slot = x;
            m_weights_current = false;
            if ((old == -inf) != (x == -inf))
            {
                m_size = unknown;
            }
            return old;
        }

        // --- a pending fused top-k (detail/pending_top_k.hpp) ---

        /// An edit while a fused top-k is pending: the row is patched and the
        /// max follows as on a dense set; the list follows the edit.
        void pending_edit(std::size_t i, T x)
        {
            if (m_pending.masks_out(i))
            {
                // Masked by a pending keep_in: not in the set, so neither the max nor
                // the list may see it; the patch only matters if the set unfuses
                // (which applies the mask again).
                m_row.patch(i) = x;
                m_weights_current = false;
                return;
            }
            const T old = edit_row(i, x);
            if (m_pending.edited(i, old, x, m_list.tokens(), m_row.size()))
            {
                unfuse();  // the top k may now lie outside the list
            }
        }

        /// keep_in on a dense set when the mask keeps a sixteenth of the row
        /// or more (a grammar's string, a class of characters): the set
        /// stays dense and the mask is deferred (detail/edited_row.hpp), so
        /// a chain without a top-k neither copies the row nor lists the
        /// tokens kept (at 128,256 tokens a list of a quarter of them cost
        /// 5x the draw). False (nothing changed) for a smaller mask. Throws
        /// as keep_in when no token is left, the set unchanged.
        bool mask_outside(const token_set& allowed, const std::string& who)
        {
            if (allowed.size() * 16 < m_row.size())
            {
                return false;
            }
            if (!m_row.any_finite_in(allowed))
            {
                throw invalid_logits(who + ": every token is masked");
            }
            m_row.defer_mask(allowed);
            if (!m_row.keeps(std::size_t(m_argmax)))
            {
                m_max_stale = true;  // as an edit that lowers the max does
            }
            m_size = unknown;
            m_weights_current = false;
            return true;
        }

        /// Keeps the kept tokens in `allowed` (keep_in); returns how many are
        /// left, and leaves the set as it was when none is.
        std::size_t retain_allowed(const token_set& allowed)
        {
            scored<T>* out = detail::grown(m_spare, m_dense ? std::min(m_row.size(), allowed.size()) : m_list.size());
            std::size_t count = 0;
            if (m_dense)
            {
                m_row.for_each_finite_in(allowed, [&](token_id id, T x) { out[count++] = {x, id}; });
            }
            else
            {
                for (const auto& item : m_list.tokens())
                {
                    if (allowed.contains(item.id))
                    {
                        out[count++] = item;
                    }
                }
            }
            if (count == 0)
            {
                return 0;
            }
            m_list.assign(out, count, !m_dense && m_list.rank_sorted(), m_dense || m_list.id_sorted());
            become_sparse();
            m_max_stale = true;
            m_weights_current = false;
            return count;
        }

        /// keep_in on a pending fused top-k: L becomes L ∩ allowed when the
        /// edited, masked row's top k still lies in it (see keep_in); false
        /// (nothing changed) otherwise.
        bool pending_keep_in(const token_set& allowed)
        {
            if (!m_pending.keep_in(allowed, m_list.tokens()))
            {
                return false;
            }
            m_size = m_list.size();
            m_max_stale = true;
            m_weights_current = false;
            return true;
        }

        /// A pending fused top-k becomes the dense set of the edited row, as
        /// if the row had been loaded unfused and then edited: the patches
        /// and the max bookkeeping are already a dense set's; a pending
        /// keep_in's mask is then applied (an empty result is left for
        /// require_some to report).
        void unfuse() noexcept
        {
            if (!m_pending.active())
            {
                return;
            }
            const token_set* mask = m_pending.mask();
            m_pending.end(m_list.tokens());
            m_list.tokens().clear();
            m_list.changed(false, false);
            m_dense = true;
            m_size = unknown;
            m_weights_current = false;
            if (mask != nullptr && retain_allowed(*mask) == 0)
            {
                m_list.changed(true, true);  // (empty)
                become_sparse();
                m_max_stale = true;
            }
        }

        /// Validation and the selection of the top k + margin in one pass
        /// (see load), leaving keep_top(k) pending; false if the row is
        /// invalid, to be reported by scan_row.
        bool load_top_k(std::size_t k, std::size_t margin)
        {
            if (!m_pending.select(m_row.loaded(), k, margin, m_list.tokens()))
            {
                return false;
            }
            // The argmax ranks first among the k best (ties: the lowest id).
            const auto best = m_list.best();
            reset(best.logit, best.id);
            m_list.changed(false, false);
            become_sparse();
            return true;
        }

        /// The state of a freshly validated row, at scale 1 (dense; the items
        /// are the caller's to set).
        void reset(T max, token_id argmax)
        {
            m_list.reserve(m_row.size());  // grow once to the vocabulary: no allocation per token
            m_weights.reserve(m_row.size());
            detail::grown(m_blocks, m_row.size() / detail::block_size + 1);
            m_row_max = m_max = max;
            m_row_argmax = m_argmax = argmax;
            m_max_stale = false;
            m_size = unknown;
            m_scale = 1.0;
            m_weights_current = false;
            m_dense = true;
            m_list.changed(false, false);
        }

        /// The set is the list (its order told to it by the caller).
        void become_sparse() noexcept
        {
            m_dense = false;
            m_size = m_list.size();
        }

        // Keeps the max and argmax true after token id went from old to x:
        // a better token takes over; the best token made worse leaves them to
        // be found again when next asked (settle).
        void note_edit(token_id id, T old, T x) noexcept
        {
            if (m_max_stale)
            {
                return;
            }
            if (x > m_max || (x == m_max && id < m_argmax))
            {
                m_max = x;
                m_argmax = id;
            }
            else if (id == m_argmax && x < old)
            {
                m_max_stale = true;
            }
        }

        // Finds the max and argmax of the kept set again after an edit or a
        // retain_if made them stale (-inf with id 0 if nothing is left).
        void settle() const
        {
            if (!m_max_stale)
            {
                return;
            }
            m_max_stale = false;
            m_max = -inf;
            m_argmax = 0;
            if (!m_dense)
            {
                if (m_list.size() != 0)
                {
                    const auto best = m_list.best();
                    m_max = best.logit;
                    m_argmax = best.id;
                }
                return;
            }
            m_row.find_max(m_max, m_argmax);
        }

        // The blocked sum of the kept weights; on a dense set, with every
        // weight also stored in m_weights when store.
        double sum_weights(detail::block_record* record, bool store = false)
        {
            unfuse();  // (the max after it)
            detail::blocked_sum<T> sum[1]{detail::blocked_sum<T>(record)};
            reduce(detail::weight_kernel<T>(max_logit(), scale2()), sum, store);
            return sum[0].total();
        }

        detail::edited_row<T> m_row;     // the current logits: the loaded row, its edits and a deferred mask
        T m_row_max = 0;                 // the loaded row's, before any edit
        token_id m_row_argmax = 0;
        detail::kept_list<T> m_list;     // a sparse set's tokens (and a pending top-k's list)
        std::vector<detail::block_total> m_blocks;  // one per block of the row
        std::size_t m_block_count = 0;  // blocks recorded by total_weight_by_block
        std::vector<T> m_weights;
        bool m_weights_current = false;  // m_weights hold the weights at the current scale
        std::vector<scored<T>> m_spare;  // retain_if's, keep_in's and keep_monotone's list
        detail::subset_check<T> m_subset_check;  // keep_subset's
        detail::scratch_store m_stage_scratch;
        mutable T m_max = 0;  // the best kept token: a cache, so max_logit() and argmax() are const
        mutable token_id m_argmax = 0;
        mutable bool m_max_stale = false;  // an edit or retain_if may have removed the best token
        detail::pending_top_k<T> m_pending;  // a fused top-k's keep_top(k), owed while active()
        std::size_t m_size = 0;
        double m_scale = 1.0;
        bool m_dense = true;
    };
}

#endif
