// Between the rollout engine and the trainer: a step's problems become a Request, the engine's Samples
// become trainer RolloutSamples (prompt with BOS, response with its EOS, the engine's log-probs kept as
// rollout_logp). Every sample carries the policy version that produced it; a sample of any other version
// than the one the step expects is refused, since its log-probs would be of the wrong policy.
#pragma once

#include <cstdint>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "reward/task.h"
#include "rollout/request.h"
#include "trainer/rollout_batch.h"

namespace rlcpp {

// One prompt per problem (BOS + prompt characters), prompt ids from the problems, `group` samples each.
Request make_rollout_request(const std::vector<Problem>& problems, const Tokenizer& tokenizer, int64_t group,
                             const SamplingParams& sampling);

// Throws naming the first sample (prompt, index) whose first or last token came from a version other than
// `expected`.
void check_sample_versions(const std::vector<Sample>& samples, int64_t expected);

// The trainer's view of the result (same order, prompt-major): prompt, response, rollout_logp.
std::vector<RolloutSample> to_rollout_samples(const Request& request, const RolloutResult& result);

}  // namespace rlcpp
