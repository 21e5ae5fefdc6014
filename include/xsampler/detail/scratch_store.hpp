// xsampler/detail/scratch_store.hpp — buffers a workspace grows once and reuses. (xsampler, BSD-3-Clause)
//
// grown(v, n): a vector as a buffer of at least n elements (it only grows).
// scratch_store: one object of each type a stage asks for, made on first use
// and kept by the workspace (candidates::scratch<S>()), so a stage's buffers
// grow to the vocabulary once per workspace, not once per sampler or step.
#ifndef XSAMPLER_DETAIL_SCRATCH_STORE_HPP
#define XSAMPLER_DETAIL_SCRATCH_STORE_HPP

#include <cstddef>
#include <memory>
#include <vector>

namespace xsampler
{
    namespace detail
    {
        /// v with at least n elements (it only ever grows), as a pointer.
        template <class U>
        U* grown(std::vector<U>& v, std::size_t n)
        {
            if (v.size() < n)
            {
                v.resize(n);
            }
            return v.data();
        }

        /// Scratch objects of the stages that run on a workspace, one of
        /// each type, made on first use and reused (a stage's buffers grow
        /// to the vocabulary once per workspace, not once per sampler). A
        /// copy starts empty: scratch is never state.
        class scratch_store
        {
        public:
            scratch_store() = default;
            scratch_store(const scratch_store&) noexcept {}
            scratch_store(scratch_store&&) noexcept = default;
            scratch_store& operator=(const scratch_store&) noexcept { return *this; }
            scratch_store& operator=(scratch_store&&) noexcept = default;

            template <class S>
            S& get()
            {
                for (auto& e : m_entries)
                {
                    if (e.tag == &tag<S>)
                    {
                        return *static_cast<S*>(e.object.get());
                    }
                }
                m_entries.push_back({&tag<S>, holder(new S(), [](void* o) { delete static_cast<S*>(o); })});
                return *static_cast<S*>(m_entries.back().object.get());
            }

        private:
            template <class S>
            static constexpr char tag = 0;
            using holder = std::unique_ptr<void, void (*)(void*)>;
            struct entry
            {
                const char* tag;
                holder object;
            };
            std::vector<entry> m_entries;
        };
    }
}

#endif
