// xsampler/detail/edited_row.hpp — the loaded row with a processor's edits and a deferred mask, owned by candidates. (xsampler, BSD-3-Clause)
//
// The current logits of a chain's row: the caller's row (never written, read
// in place when contiguous), the edits processors made (copies of the 64-token
// blocks they touch, the rest still read from the caller's memory), and at
// most one mask not yet written (a keep_in that keeps a sixteenth of the row
// or more: its words are read where they matter, so a chain without a top-k
// does not copy the row to apply a grammar's mask).
//
// - logit(i), find_max and read_block see the deferred mask (a token outside
//   it reads -inf); the draw's sum reads its words itself (deferred_words()).
// - The mask outlives its writing: keeps(i) answers until the next load, so
//   an edit can tell a token outside a keep_in from one masked in the row.
//   Masks given one after another intersect.
// - for_each_run writes the mask first (every later pass sees one row);
//   for_each_raw_run passes the patched row with the masked tokens still in
//   it, for those readers that apply the words themselves.
// - Runs come in id order; every run but the last starts and ends on a block
//   boundary. Writing a mask that touches a quarter of the blocks or more
//   copies the whole row, which is then passed on as one run.
// - A copy reads the row where the original does, except a row evaluated
//   into the original's own buffer: the copy's buffer is read instead.
// The kept set, its max and its size are candidates' (candidates.hpp): this
// class only holds values.
#ifndef XSAMPLER_DETAIL_EDITED_ROW_HPP
#define XSAMPLER_DETAIL_EDITED_ROW_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "../row.hpp"
#include "../types.hpp"
#include "blocked_sum.hpp"
#include "simd.hpp"

namespace xsampler
{
    namespace detail
    {
        template <class T>
        class edited_row
        {
        public:
            edited_row() = default;
            edited_row(const edited_row& o)
                : m_row(o.m_row), m_copy(o.m_copy), m_patch_at(o.m_patch_at), m_patch(o.m_patch),
                  m_patched(o.m_patched), m_whole(o.m_whole), m_masked(o.m_masked), m_deferred(o.m_deferred),
                  m_words(o.m_words), m_copy_f16(o.m_copy_f16), m_copy_bf16(o.m_copy_bf16)
            {
                rebase(o);
            }
            edited_row(edited_row&&) noexcept = default;
            edited_row& operator=(const edited_row& o)
            {
                if (this != &o)
                {
                    edited_row c(o);
                    *this = std::move(c);
                }
                return *this;
            }
            edited_row& operator=(edited_row&&) noexcept = default;

            /// The row behind `logits` (contiguous_row: checked, read in
            /// place or copied once), with no edit and no mask.
            template <class E>
            void load(const xt::xexpression<E>& logits)
            {
                m_row = contiguous_row(logits, copy_for(stored_type<E>{}));
                for (const std::size_t b : m_patched)
                {
                    m_patch_at[b] = no_patch;
                }
                m_patched.clear();
                reset_direct();
                m_patch.clear();
                m_whole = false;
                m_masked = false;
                m_deferred = false;
            }

            std::size_t size() const noexcept { return m_row.size; }
            /// The row as loaded, before any edit.
            const stored_row<T>& loaded() const noexcept { return m_row; }
            /// Whether an edit or a deferred mask changed a logit since load.
            bool edited() const noexcept { return !m_patched.empty() || m_deferred; }

            /// The current logit of token i < size(): -inf outside a deferred mask.
            T logit(std::size_t i) const noexcept
            {
                if (m_deferred && !keeps(i))
                {
                    return -inf;
                }
                if (m_direct != nullptr)
                {
                    return m_direct[i];
                }
                const T* x = patched_block(i / block_size);
                return x != nullptr ? x[i % block_size] : m_row[i];
            }

            /// The writable current logit of token i (its block copied on
            /// first use; a deferred mask is written first).
            T& patch(std::size_t i)
            {
                write_deferred();
                const std::size_t b = i / block_size;
                const std::size_t blocks = m_row.size / block_size + 1;
                if (m_patch_at.size() < blocks)
                {
                    m_patch_at.resize(blocks, no_patch);
                }
                if (m_patch_at[b] == no_patch)
                {
                    if (m_patch.capacity() < blocks * block_size)
                    {
                        m_patch.reserve(blocks * block_size);  // once per vocabulary size
                        m_patched.reserve(blocks);
                    }
                    const std::size_t lo = b * block_size;
                    const std::size_t n = std::min(block_size, m_row.size - lo);
                    m_patch_at[b] = m_patch.size();
                    m_row.visit([&](const auto* x) { append(m_patch, x + lo, n); });
                    m_patch.resize(m_patch_at[b] + block_size, -inf);
                    m_patched.push_back(b);
                    reset_direct();
                }
                return m_patch[m_patch_at[b] + i % block_size];
            }

            /// patch(i) for every i of `ids` (each < size()): each block
            /// copied once, so that patched(i) may be used for them.
            void patch_blocks(span<const token_id> ids)
            {
                for (std::size_t j = 0; j < ids.size(); ++j)
                {
                    const auto i = std::size_t(ids[j]);
                    if (j == 0 || m_patch_at[i / block_size] == no_patch)
                    {
                        patch(i);  // (the first sizes the table and writes a deferred mask)
                    }
                }
            }
            /// The writable current logit of token i, whose block is patched.
            T& patched(std::size_t i) noexcept { return m_patch[m_patch_at[i / block_size] + i % block_size]; }

            /// Calls f(x, first, n) with the current logits of tokens [first,
            /// first + n), in runs covering the row (see the top of this file);
            /// x is the row's own pointer (a row of f16 or bf16: const f16*
            /// or const bf16*) or, in an edited block, const T*.
            template <class F>
            void for_each_run(F&& f)
            {
                write_deferred();
                for_each_raw_run(f);
            }
            /// The same without writing a deferred mask: its tokens are still
            /// in the runs, for a reader that applies deferred_words() itself.
            template <class F>
            void for_each_raw_run(F&& f) const
            {
                const auto base = [&](std::size_t first, std::size_t n) {
                    m_row.visit([&](const auto* x) { f(x + first, first, n); });
                };
                if (m_whole)
                {
                    f(static_cast<const T*>(m_patch.data()), std::size_t(0), m_row.size);
                    return;
                }
                if (m_patched.empty())
                {
                    base(0, m_row.size);
                    return;
                }
                if (!std::is_sorted(m_patched.begin(), m_patched.end()))
                {
                    std::sort(m_patched.begin(), m_patched.end());
                }
                std::size_t next = 0;  // the first id not yet passed on
                for (const std::size_t b : m_patched)
                {
                    const std::size_t lo = b * block_size;
                    if (lo > next)
                    {
                        base(next, lo - next);
                    }
                    const std::size_t hi = std::min(lo + block_size, m_row.size);
                    f(patched_block(b), lo, hi - lo);
                    next = hi;
                }
                if (next < m_row.size)
                {
                    base(next, m_row.size - next);
                }
            }

            /// The number of tokens with a finite current logit (a pass; a
            /// deferred mask is written first).
            std::size_t count_finite()
            {
                std::size_t count = 0;
                for_each_run([&](const auto* x, std::size_t, std::size_t n) {
                    count += std::size_t(std::count_if(x, x + n, [](T v) { return v != -inf; }));
                });
                return count;
            }
            /// Calls f(id, x) for every token with a finite current logit x,
            /// in id order (a deferred mask is written first).
            template <class F>
            void for_each_finite(F& f)
            {
                for_each_run([&](const auto* x, std::size_t first, std::size_t n) { finite_in(x, first, n, f); });
            }
            /// The same for the tokens of block b (a deferred mask read, not written).
            template <class F>
            void for_each_finite_in_block(std::size_t b, F& f) const
            {
                T masked[block_size];
                const std::size_t lo = b * block_size;
                finite_in(read_block(b, masked), lo, std::min(lo + block_size, m_row.size) - lo, f);
            }
            /// The same for the tokens of `allowed` (ids past the row are
            /// skipped; a deferred mask read, not written).
            template <class F>
            void for_each_finite_in(const token_set& allowed, F&& f) const
            {
                const auto& words = allowed.words();
                const std::size_t n_words = std::min(words.size(), (m_row.size + 63) / 64);
                for (std::size_t w = 0; w < n_words; ++w)
                {
                    for_each_bit(words[w], w * 64, [&](std::size_t i) {
                        const T x = i < m_row.size ? logit(i) : -inf;
                        if (x != -inf)
                        {
                            f(token_id(i), x);
                        }
                    });
                }
            }

            /// Block b's current logits (ids [64b, 64b + 64) within the row),
            /// a deferred mask's tokens at -inf (copied into `masked` then, as
            /// a block of a row of f16 or bf16 is, widened).
            const T* read_block(std::size_t b, T (&masked)[block_size]) const noexcept
            {
                const std::size_t lo = b * block_size;
                const std::size_t n = std::min(lo + block_size, m_row.size) - lo;
                const T* x = patched_block(b);
                if (x == nullptr && m_row.native())
                {
                    x = static_cast<const T*>(m_row.data) + lo;
                }
                else if (x == nullptr)
                {
                    m_row.visit([&](const auto* r) { std::copy(r + lo, r + lo + n, masked); });
                    x = masked;
                }
                if (!m_deferred)
                {
                    return x;
                }
                for (std::size_t j = 0; j < n; ++j)
                {
                    masked[j] = keeps(lo + j) ? x[j] : -inf;
                }
                return masked;
            }

            /// The best current logit and its id (ties: the lowest id); -inf
            /// and 0 when every token is masked. A deferred mask is read, not
            /// written.
            void find_max(T& max, token_id& argmax) const
            {
                max = -inf;
                argmax = 0;
                // Runs come in id order: a strictly greater max keeps ties at the lowest id.
                const auto better = [&](const auto* x, std::size_t first, std::size_t n) {
                    const T best = max_of(x, n);
                    if (best > max)
                    {
                        max = best;
                        argmax = token_id(first + first_index_of(x, n, best));
                    }
                };
                if (!m_deferred)
                {
                    for_each_raw_run(better);
                    return;
                }
                // A block's kept lanes only (runs start on block boundaries,
                // one word of the mask a block).
                for_each_raw_run([&](const auto* x, std::size_t first, std::size_t n) {
                    const auto whole = [&](std::size_t b) { return m_words[(first + b) / 64] == ~std::uint64_t(0); };
                    for (std::size_t b = 0; b < n;)
                    {
                        const std::size_t len = std::min(block_size, n - b);
                        const std::uint64_t bits = m_words[(first + b) / 64];
                        if (bits == ~std::uint64_t(0))
                        {
                            std::size_t end = b + len;  // (a run of whole blocks in one pass)
                            while (end < n && whole(end))
                            {
                                end = std::min(end + block_size, n);
                            }
                            better(x + b, first + b, end - b);
                            b = end;
                            continue;
                        }
                        // (a block none of whose lanes, kept or not, beats the max so far is skipped)
                        if (bits != 0 && max_of(x + b, len) > max)
                        {
                            for_each_bit(bits, 0, [&](std::size_t j) {
                                if (j < len && x[b + j] > max)
                                {
                                    max = x[b + j];
                                    argmax = token_id(first + b + j);
                                }
                            });
                        }
                        b += len;
                    }
                });
            }

            // --- the deferred mask ---

            /// Whether some token of `allowed` has a finite current logit.
            bool any_finite_in(const token_set& allowed) const noexcept
            {
                const auto& words = allowed.words();
                const std::size_t n_words = std::min(words.size(), (m_row.size + 63) / 64);
                bool any = false;
                for (std::size_t w = 0; w < n_words && !any; ++w)
                {
                    for_each_bit(words[w], w * 64, [&](std::size_t i) { any = any || (i < m_row.size && logit(i) != -inf); });
                }
                return any;
            }
            /// Masks every token outside `allowed`, not yet written (a copy
            /// of its words, intersected with any mask before: the caller's
            /// set may go; ids past its words are out).
            void defer_mask(const token_set& allowed)
            {
                const auto& words = allowed.words();
                const std::size_t n_words = (m_row.size + 63) / 64;
                if (!m_masked)
                {
                    m_words.assign(n_words, ~std::uint64_t(0));
                }
                for (std::size_t w = 0; w < n_words; ++w)
                {
                    m_words[w] &= w < words.size() ? words[w] : 0;
                }
                m_masked = true;
                m_deferred = true;
            }
            bool deferred() const noexcept { return m_deferred; }
            /// Whether a mask (deferred or written) applies since the load.
            bool masked() const noexcept { return m_masked; }
            /// The deferred mask's words (one a block), or null when none is.
            const std::uint64_t* deferred_words() const noexcept { return m_deferred ? m_words.data() : nullptr; }
            /// Whether the mask keeps token i (i < size(); masked()).
            bool keeps(std::size_t i) const noexcept { return (m_words[i / 64] >> (i % 64) & 1) != 0; }

            /// Writes a deferred mask to the row's copy, block by block,
            /// reading its words once (a full word is skipped); when a quarter
            /// of the blocks or more hold a masked token, the whole row is
            /// copied at once, which later passes read as one run.
            void write_deferred()
            {
                if (!m_deferred)
                {
                    return;
                }
                m_deferred = false;  // (patch() below would write it first)
                const std::size_t n = m_row.size;
                const std::size_t n_words = m_words.size();  // (one a block)
                const auto word = [&](std::size_t w) {
                    std::uint64_t bits = m_words[w];
                    if (w + 1 == n_words && n % 64 != 0)
                    {
                        bits |= ~std::uint64_t(0) << (n % 64);  // past the row: nothing to mask
                    }
                    return bits;
                };
                std::size_t touched = 0;
                for (std::size_t w = 0; w < n_words; ++w)
                {
                    touched += std::size_t(~word(w) != 0);
                }
                if (touched * 4 >= n_words)
                {
                    patch_whole();  // (a block copied alone costs more, and splits every later pass)
                }
                for (std::size_t w = 0; w < n_words; ++w)
                {
                    const std::uint64_t out = ~word(w);
                    if (out == 0)
                    {
                        continue;
                    }
                    T* x = m_whole ? &m_patch[w * 64] : &patch(w * 64);  // the block's copy (one word a block)
                    const std::size_t len = std::min<std::size_t>(64, n - w * 64);
                    for (std::size_t j = 0; j < len; ++j)
                    {
                        x[j] = (out >> j & 1) != 0 ? -inf : x[j];  // (no branch: most lanes may go)
                    }
                }
            }

        private:
            static_assert(block_size == 64, "one mask word per block");

            template <class S, class F>
            static void finite_in(const S* x, std::size_t first, std::size_t n, F& f)
            {
                for (std::size_t i = 0; i < n; ++i)
                {
                    const T xi = x[i];
                    if (xi != -inf)
                    {
                        f(token_id(first + i), xi);
                    }
                }
            }

            std::vector<T>& copy_for(T) noexcept { return m_copy; }
            std::vector<f16>& copy_for(f16) noexcept { return m_copy_f16; }
            std::vector<bf16>& copy_for(bf16) noexcept { return m_copy_bf16; }

            // A row evaluated into o's buffer is read from this one's copy.
            void rebase(const edited_row& o) noexcept
            {
                const auto move = [&](const auto& theirs, const auto& mine) {
                    if (!theirs.empty() && m_row.data == theirs.data())
                    {
                        m_row.data = mine.data();
                    }
                };
                move(o.m_copy, m_copy);
                move(o.m_copy_f16, m_copy_f16);
                move(o.m_copy_bf16, m_copy_bf16);
                reset_direct();
            }
            // logit's fast path: the row's own Ts while no block is patched
            // (called wherever the row or the patched blocks change).
            void reset_direct() noexcept
            {
                m_direct = m_patched.empty() && m_row.native() ? static_cast<const T*>(m_row.data) : nullptr;
            }
            // Appends logits x[0, n) to `to`, widened (a 16-bit row's a
            // chunk at a time in SIMD, as the kernels load it).
            template <class S>
            static void append(std::vector<T>& to, const S* x, std::size_t n)
            {
                if constexpr (std::is_same<S, T>::value)
                {
                    to.insert(to.end(), x, x + n);
                }
                else
                {
                    for_each_widened(x, n, [&](const T* w, std::size_t, std::size_t len) { to.insert(to.end(), w, w + len); });
                }
            }
            static constexpr T inf = std::numeric_limits<T>::infinity();
            static constexpr std::size_t no_patch = ~std::size_t(0);

            // Block b's copy, or null when it is not edited.
            const T* patched_block(std::size_t b) const noexcept
            {
                const std::size_t at = m_patched.empty() ? no_patch : m_patch_at[b];
                return at == no_patch ? nullptr : m_patch.data() + at;
            }

            /// Every block patched, in order: the copy is then the whole row.
            void patch_whole()
            {
                if (m_whole)
                {
                    return;
                }
                const std::size_t n = m_row.size;
                const std::size_t blocks = (n + block_size - 1) / block_size;
                if (m_patch_at.size() < n / block_size + 1)
                {
                    m_patch_at.resize(n / block_size + 1, no_patch);
                }
                m_spare.clear();  // (its buffer kept from the last row)
                for_each_raw_run([&](const auto* x, std::size_t, std::size_t len) { append(m_spare, x, len); });
                m_patch.swap(m_spare);
                m_patch.resize(blocks * block_size, -inf);
                m_patched.resize(blocks);
                for (std::size_t b = 0; b < blocks; ++b)
                {
                    m_patched[b] = b;
                    m_patch_at[b] = b * block_size;
                }
                m_whole = true;
                reset_direct();
            }

            stored_row<T> m_row;
            const T* m_direct = nullptr;            // reset_direct()
            std::vector<T> m_copy;                  // a row not contiguous, evaluated
            std::vector<std::size_t> m_patch_at;    // per block: its copy's offset in m_patch, or no_patch
            std::vector<T> m_patch;                 // copies of the edited blocks, 64 logits each
            mutable std::vector<std::size_t> m_patched;  // the edited blocks (sorted when first walked)
            bool m_whole = false;                   // every block, in order (patch_whole)
            std::vector<T> m_spare;                 // patch_whole's second buffer
            bool m_masked = false;                  // a mask applies (its words: m_words)
            bool m_deferred = false;                // and is not yet written (defer_mask)
            std::vector<std::uint64_t> m_words;     // the mask's words, one a block
            std::vector<f16> m_copy_f16;            // a row of f16 not contiguous, evaluated
            std::vector<bf16> m_copy_bf16;          // the same for bf16
        };
    }
}

#endif
