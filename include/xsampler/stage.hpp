// xsampler/stage.hpp — what a stage is, and custom_stage for a user's. (xsampler, BSD-3-Clause)
//
// What a stage is, so that a user's stage plugs into both kinds of chain the
// way the library's own do.
//
// A stage is a value type with one of
//   template <class T> void apply(candidates<T>& c);                 a filter
//   template <class T> void apply(candidates<T>& c,
//                                 const token_history& history);     a processor
//   template <class T> void apply(candidates<T>& c, double u);       a random filter
// (const or not: a stage may keep state across calls, and a chain owns its
// stages). It changes the set only through the verbs of candidates.hpp, so
// the set's invariants hold whatever it does:
// - a processor sees the history (the prompt and the tokens generated so
//   far, and where the prompt ends) and edits a few logits with set_logit or
//   mask. Its cost should be what it touches (the history, a bias map, a
//   mask's words), never a pass over the row; the caller's row is never
//   written. After it runs, a processor that left every token masked is an
//   error naming it: invalid_logits("<name>: every token is masked").
// - a filter reshapes or truncates: divide_scale, keep_argmax, keep_top,
//   keep_log_weight_at_least, keep_logit_at_least, keep_monotone,
//   keep_subset, retain_if; an algorithm the verbs cannot express reads the
//   set through candidates' kernel view and commits through them
//   (filters/top_p.hpp, filters/levels.hpp, filters/typical.hpp). A user's
//   filter may also apply a built-in one (top_p{0.9}.apply(c)).
// - a random filter (xtc) is a filter that also gets u, one uniform01 drawn
//   for this call from the engine the caller passed (sample's, or the one
//   given to filter / final_distribution), in chain order, before the draw's
//   own uniform: a seed still fixes every token. Without an engine it is an
//   error naming the stage.
// Optional members, read at compile time:
//   static constexpr const char* name;           for messages (else "stage")
//   static constexpr bool keeps_rank_prefix;     documentation and tests
//   static constexpr bool rescales_only;         true if the stage only
//       divides the scale or keeps the argmax: a top_k after it may then be
//       fused into the row's validation pass (candidates::load)
//       (or a member `bool rescales_only() const noexcept` where that depends
//       on the parameters: temperature is rescales_only unless its dynamic
//       range is positive)
//   std::size_t fused_top_k() const noexcept;    a filter that keeps the k
//       best-ranked tokens (ties to the lowest id) and nothing else returns
//       k (0: not now): when every stage before it rescales only or is a
//       processor, the chain selects them in the row's validation pass
//       (candidates::load) and its apply's keep_top(k) takes that list
//   static constexpr bool kept_with_mirostat;    a filter the run-time
//       sampler keeps when mirostat replaces the filters (temperature)
//   static constexpr bool restricts_set;         true for a processor that
//       keeps a set (keep_in, retain_if) rather than editing a few logits:
//       a top_k after it is then not fused (the fused selection would be
//       dropped at once; exact either way, only slower)
//   void observe(const sampled_token& t);        called after each draw a
//       chain makes with its draw(c, rng) or sample() (never after filter or
//       final_distribution): a stage that learns from the tokens drawn
//       (mirostat) updates its state there, so a throwing call leaves it as
//       it was
//   void reset();                                forgets that state (chain
//       and sampler reset())
// Processors run where the order puts them; by convention before the
// filters. A chain whose stages before its first top_k all rescale only or
// are processors (not restricts_set) gets the fused top-k pass: the
// processors' edits run on the pending selection (candidates.hpp), exactly,
// and cost what they touch as long as few of them lower the best tokens of
// the row.
//
// custom_stage wraps any stage (with a run-time name) for the run-time
// sampler, which places it by name in its order like a built-in one; it
// tells whether it wraps a processor (processor()), so that a custom
// processor keeps the fused pass and a custom filter does not.
#ifndef XSAMPLER_STAGE_HPP
#define XSAMPLER_STAGE_HPP

#include <algorithm>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "candidates.hpp"
#include "random.hpp"

namespace xsampler
{
    class custom_stage;

    namespace detail
    {
        /// Where a random filter's uniforms come from: the caller's engine,
        /// by reference and type-erased (no allocation), or none.
        class uniform_source
        {
        public:
            uniform_source() = default;
            template <class URBG>
            explicit uniform_source(URBG& rng) noexcept
                : m_rng(&rng), m_next([](void* r) { return uniform01(*static_cast<URBG*>(r)); })
            {
            }
            /// One uniform01 from the engine; without one, invalid_parameter naming `who`.
            double next(const std::string& who) const
            {
                if (m_rng == nullptr)
                {
                    throw invalid_parameter(who +
                                            ": draws a uniform per call: pass an engine (sample, or filter and "
                                            "final_distribution with an rng)");
                }
                return m_next(m_rng);
            }

        private:
            void* m_rng = nullptr;
            double (*m_next)(void*) = nullptr;
        };

        template <class S, class T, class = void>
        struct is_random_stage : std::false_type
        {
        };
        template <class S, class T>
        struct is_random_stage<
            S, T, std::void_t<decltype(std::declval<S&>().apply(std::declval<candidates<T>&>(), 0.0))>>
            : std::true_type
        {
        };

        template <class S, class = void>
        struct observes : std::false_type
        {
        };
        template <class S>
        struct observes<S, std::void_t<decltype(std::declval<S&>().observe(std::declval<const sampled_token&>()))>>
            : std::true_type
        {
        };

        /// Calls s.observe(t) if the stage has it.
        template <class S>
        void observe_stage(S& s, const sampled_token& t)
        {
            if constexpr (observes<S>::value)
            {
                s.observe(t);
            }
        }

        template <class S, class = void>
        struct resets : std::false_type
        {
        };
        template <class S>
        struct resets<S, std::void_t<decltype(std::declval<S&>().reset())>> : std::true_type
        {
        };

        /// Calls s.reset() if the stage has it.
        template <class S>
        void reset_stage(S& s)
        {
            if constexpr (resets<S>::value)
            {
                s.reset();
            }
        }

        template <class S, class T, class = void>
        struct is_processor : std::false_type
        {
        };
        template <class S, class T>
        struct is_processor<S, T,
                            std::void_t<decltype(std::declval<S&>().apply(std::declval<candidates<T>&>(),
                                                                          std::declval<const token_history&>()))>>
            : std::true_type
        {
        };

        /// A processor's new logit v, rounded to T and kept finite (clamped
        /// to T's largest magnitude): a penalty or bias never masks by
        /// overflowing.
        template <class T>
        T finite_logit(double v) noexcept
        {
            const double big = double(std::numeric_limits<T>::max());
            return T(std::min(std::max(v, -big), big));
        }

        template <class S, class = void>
        struct restricts_set : std::false_type
        {
        };
        template <class S>
        struct restricts_set<S, std::enable_if_t<S::restricts_set>> : std::true_type
        {
        };

        /// A processor for float or double rows (is_processor for either)
        /// that does not declare restricts_set: what a chain may fuse a
        /// top_k through.
        template <class S>
        struct is_processor_stage
            : std::integral_constant<bool, (is_processor<S, float>::value || is_processor<S, double>::value) &&
                                               !restricts_set<S>::value>
        {
        };

        /// min_keep as the filters take it: 0 counts as 1.
        inline std::size_t min_keep_of(std::size_t min_keep) noexcept { return min_keep == 0 ? 1 : min_keep; }

        template <class S, class = void>
        struct kept_with_mirostat : std::false_type
        {
        };
        template <class S>
        struct kept_with_mirostat<S, std::enable_if_t<S::kept_with_mirostat>> : std::true_type
        {
        };

        template <class S, class = void>
        struct rescales_only : std::false_type
        {
        };
        template <class S>
        struct rescales_only<S, std::enable_if_t<S::rescales_only>> : std::true_type
        {
        };

        /// Whether this stage only rescales: its rescales_only() when that
        /// depends on its parameters (temperature's dynamic form), else the
        /// static rescales_only.
        template <class S>
        auto rescales_now(const S& s, int) noexcept -> decltype(bool(s.rescales_only()))
        {
            return s.rescales_only();
        }
        template <class S>
        bool rescales_now(const S&, long) noexcept
        {
            return rescales_only<S>::value;
        }
        template <class S>
        bool rescales_now(const S& s) noexcept
        {
            return rescales_now(s, 0);
        }

        // A stage's name: name() if it has one, else its static name, else "stage".
        template <class S>
        auto stage_name(const S& s, int) -> decltype(std::string(s.name()))
        {
            return s.name();
        }
        template <class S>
        auto stage_name(const S&, long) -> decltype(std::string(S::name))
        {
            return S::name;
        }
        template <class S>
        std::string stage_name(const S&, ...)
        {
            return "stage";
        }
        template <class S>
        std::string name_of(const S& s)
        {
            return stage_name(s, 0);
        }

        // A stage in words: describe() if it has one ("top_p 0.9"), else its name.
        template <class S>
        auto stage_words(const S& s, int) -> decltype(std::string(s.describe()))
        {
            return s.describe();
        }
        template <class S>
        std::string stage_words(const S& s, long)
        {
            return name_of(s);
        }

        /// Applies one stage to c: a processor with the history, a random
        /// filter with a uniform from `uniforms`, a filter with neither.
        template <class S, class T>
        void apply_stage(S& stage, candidates<T>& c, const token_history& history, const uniform_source& uniforms)
        {
            if constexpr (std::is_same<S, custom_stage>::value)
            {
                stage.apply(c, history, uniforms);
            }
            else if constexpr (is_processor<S, T>::value)
            {
                stage.apply(c, history);
            }
            else if constexpr (is_random_stage<S, T>::value)
            {
                stage.apply(c, uniforms.next(name_of(stage)));
            }
            else
            {
                stage.apply(c);
            }
        }

        /// apply_stage, then, if logits were edited, checks a token is left.
        template <class S, class T>
        void run_stage(S& stage, candidates<T>& c, const token_history& history,
                       const uniform_source& uniforms = uniform_source())
        {
            apply_stage(stage, c, history, uniforms);
            if (c.edited())
            {
                c.require_some(name_of(stage));
            }
        }
    }

    /// Any stage, processor or filter, behind a run-time name: the run-time
    /// sampler's slot for a user's stage. Copies copy the stage.
    class custom_stage
    {
    public:
        template <class S>
        custom_stage(std::string name, S stage)
            : m_name(std::move(name)), m_stage(std::make_unique<model<S>>(std::move(stage)))
        {
            if (m_name.empty() || m_name.find(';') != std::string::npos)
            {
                throw invalid_parameter("custom_stage: the name must be non-empty and without ';', got '" + m_name +
                                        "'");
            }
        }
        custom_stage(const custom_stage& other)
            : m_name(other.m_name), m_stage(other.m_stage ? other.m_stage->clone() : nullptr)
        {
        }
        custom_stage(custom_stage&& other) noexcept : m_name(std::move(other.m_name)), m_stage(std::move(other.m_stage)) {}
        custom_stage& operator=(custom_stage other) noexcept
        {
            std::swap(m_name, other.m_name);
            std::swap(m_stage, other.m_stage);
            return *this;
        }

        const std::string& name() const noexcept { return m_name; }
        /// Whether the wrapped stage is a processor (not a filter).
        bool processor() const noexcept { return m_stage && m_stage->processor(); }

        /// Runs the wrapped stage (a filter ignores the history; a random
        /// filter takes one uniform from `uniforms`).
        template <class T>
        void apply(candidates<T>& c, const token_history& history,
                   const detail::uniform_source& uniforms = detail::uniform_source())
        {
            live().apply(c, history, uniforms);
        }
        /// The wrapped stage's observe and reset, where it has them.
        void observe(const sampled_token& t) { live().observe(t); }
        void reset() { live().reset(); }

    private:
        struct base
        {
            virtual ~base() = default;
            virtual void apply(candidates<float>& c, const token_history& history,
                               const detail::uniform_source& uniforms) = 0;
            virtual void apply(candidates<double>& c, const token_history& history,
                               const detail::uniform_source& uniforms) = 0;
            virtual void observe(const sampled_token& t) = 0;
            virtual void reset() = 0;
            virtual std::unique_ptr<base> clone() const = 0;
            virtual bool processor() const noexcept = 0;
        };

        base& live() const
        {
            if (!m_stage)
            {
                throw invalid_use("custom_stage '" + m_name + "': used after being moved from");
            }
            return *m_stage;
        }

        template <class S>
        struct model final : base
        {
            explicit model(S s) : stage(std::move(s)) {}
            void apply(candidates<float>& c, const token_history& history,
                       const detail::uniform_source& uniforms) override
            {
                run(c, history, uniforms);
            }
            void apply(candidates<double>& c, const token_history& history,
                       const detail::uniform_source& uniforms) override
            {
                run(c, history, uniforms);
            }
            void observe(const sampled_token& t) override { detail::observe_stage(stage, t); }
            void reset() override { detail::reset_stage(stage); }
            std::unique_ptr<base> clone() const override { return std::make_unique<model>(stage); }
            bool processor() const noexcept override
            {
                if constexpr (std::is_same<S, custom_stage>::value)
                {
                    return stage.processor();
                }
                else
                {
                    return detail::is_processor_stage<S>::value;
                }
            }

            template <class T>
            void run(candidates<T>& c, const token_history& history, const detail::uniform_source& uniforms)
            {
                detail::apply_stage(stage, c, history, uniforms);
            }

            S stage;
        };

        std::string m_name;
        std::unique_ptr<base> m_stage;
    };
}

#endif
