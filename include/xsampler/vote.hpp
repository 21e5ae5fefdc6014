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
//   i) — independent, reproducible streams — and votes over the answers.
//   Memory grows with the answers sampled, never reserved for n up front.
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

    template <class Answer>
    vote_result<Answer> majority_vote(const std::vector<Answer>& answers)
    {
        if (answers.empty())
        {
            throw invalid_parameter("majority_vote: no answers to vote on");
        }
        // Distinct answers in order of first appearance, with their counts.
        std::vector<std::size_t> first;
        std::vector<std::size_t> count;
        for (std::size_t i = 0; i < answers.size(); ++i)
        {
            std::size_t g = 0;
            while (g < first.size() && !(answers[first[g]] == answers[i]))
            {
                ++g;
            }
            if (g == first.size())
            {
                first.push_back(i);
                count.push_back(0);
            }
            ++count[g];
        }
        std::size_t best = 0;
        for (std::size_t g = 1; g < count.size(); ++g)
        {
            if (count[g] > count[best])
            {
                best = g;
            }
        }
        vote_result<Answer> r{answers[first[best]], count[best], answers.size(),
                              double(count[best]) / double(answers.size()), count.size(), std::nullopt, 0};
        for (std::size_t g = 0; g < count.size(); ++g)
        {
            if (g != best && (!r.runner_up || count[g] > r.runner_up_votes))
            {
                r.runner_up = answers[first[g]];
                r.runner_up_votes = count[g];
            }
        }
        return r;
    }

    /// n answers from sample(rng), each with its own stream philox4x32(seed, i),
    /// and their majority vote.
    template <class Sample>
    auto self_consistency(std::size_t n, std::uint64_t seed, Sample&& sample)
    {
        using Answer = std::decay_t<decltype(sample(std::declval<philox4x32&>()))>;
        if (n == 0)
        {
            throw invalid_parameter("self_consistency: n must be >= 1, got 0");
        }
        std::vector<Answer> answers;
        answers.reserve(std::min<std::size_t>(n, 1024));  // n comes from outside: grow with what is sampled
        for (std::size_t i = 0; i < n; ++i)
        {
            philox4x32 rng(seed, i);
            answers.push_back(sample(rng));
        }
        return majority_vote(answers);
    }
}

#endif
