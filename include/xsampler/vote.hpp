// xsampler/vote.hpp — self-consistency: majority vote. (xsampler, BSD-3-Clause)
//
// Self-consistency: sample several answers to one question and take the most
// common.
//
// majority_vote(answers)
//   Groups equal answers (operator== only: any equality-comparable type) and
//   returns the majority answer, its votes, agreement = votes / n, the number
//   of distinct answers, and the runner-up with its votes. Ties between
//   answers with equal votes go to the one that appeared first, so the result
//   is a pure function of the sequence. No answers: invalid_parameter.
// self_consistency(n, seed, sample)
//   Calls sample(rng) n times, sample i with its own engine philox4x32(seed,
//   i) — independent, reproducible streams — and votes over the answers,
//   tallied as they arrive (vote_tally): memory grows with the distinct
//   answers, not with n.
//
// Why agreement, not a token probability, is the confidence to show a user:
// a model's token probabilities measure how sure it is of the next token of
// one phrasing, not whether the answer is right; independent errors rarely
// agree, so when several samples agree the answer is more likely right, and
// when they split the model is uncertain on this input — route those cases to
// a person or a stronger model instead of trusting the majority. It costs one
// generation per sample, so it suits questions with a single correct answer
// that are worth it. It does not apply to open-ended writing: there is no
// single answer to vote on, and two good essays never compare equal; choosing
// between samples there needs a judge, a different technique.
#ifndef XSAMPLER_VOTE_HPP
#define XSAMPLER_VOTE_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "random.hpp"
#include "types.hpp"

namespace xsampler
{
    template <class Answer>
    struct vote_result
    {
        Answer answer;                     ///< the majority answer
        std::size_t votes = 0;             ///< how many samples gave it
        std::size_t total = 0;             ///< how many samples there were
        double agreement = 0.0;            ///< votes / total
        std::size_t distinct = 0;          ///< how many different answers
        std::optional<Answer> runner_up;   ///< the second most common, if any
        std::size_t runner_up_votes = 0;
    };

    /// Votes counted as answers arrive: the distinct answers (compared with
    /// operator== only) in order of first appearance, each with its count.
    /// Memory grows with the distinct answers, not with the votes.
    template <class Answer>
    class vote_tally
    {
    public:
        void add(const Answer& answer)
        {
            ++m_total;
            for (std::size_t g = 0; g < m_distinct.size(); ++g)
            {
                if (m_distinct[g] == answer)
                {
                    ++m_count[g];
                    return;
                }
            }
            m_distinct.push_back(answer);
            m_count.push_back(1);
        }

        std::size_t total() const noexcept { return m_total; }

        /// The majority (ties: the answer that appeared first) and the runner-up.
        vote_result<Answer> result() const
        {
            if (m_total == 0)
            {
                throw invalid_parameter("majority_vote: no answers to vote on");
            }
            std::size_t best = 0;
            for (std::size_t g = 1; g < m_count.size(); ++g)
            {
                if (m_count[g] > m_count[best])
                {
                    best = g;
                }
            }
            vote_result<Answer> r{m_distinct[best], m_count[best], m_total, double(m_count[best]) / double(m_total),
                                  m_distinct.size(), std::nullopt, 0};
            for (std::size_t g = 0; g < m_count.size(); ++g)
            {
                if (g != best && (!r.runner_up || m_count[g] > r.runner_up_votes))
                {
                    r.runner_up = m_distinct[g];
                    r.runner_up_votes = m_count[g];
                }
            }
            return r;
        }

    private:
        std::vector<Answer> m_distinct;
        std::vector<std::size_t> m_count;
        std::size_t m_total = 0;
    };

    template <class Answer>
    vote_result<Answer> majority_vote(const std::vector<Answer>& answers)
    {
        vote_tally<Answer> tally;
        for (const Answer& a : answers)
        {
            tally.add(a);
        }
        return tally.result();
    }

    /// n answers from sample(rng), each with its own stream philox4x32(seed, i),
    /// and their majority vote, tallied as they arrive.
    template <class Sample>
    auto self_consistency(std::size_t n, std::uint64_t seed, Sample&& sample)
    {
        using Answer = std::decay_t<decltype(sample(std::declval<philox4x32&>()))>;
        if (n == 0)
        {
            throw invalid_parameter("self_consistency: n must be >= 1, got 0");
        }
        vote_tally<Answer> tally;
        for (std::size_t i = 0; i < n; ++i)
        {
            philox4x32 rng(seed, i);
            tally.add(sample(rng));
        }
        return tally.result();
    }
}

#endif
