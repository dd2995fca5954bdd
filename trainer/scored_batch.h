// A step's rollout batch once scored, as an Algorithm (trainer/algorithm.h) receives it: samples with old_logp
// (when the algorithm needs it) and ref_logp (a KL term) filled in, and one total reward per sample.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/truncation.h"
#include "trainer/rollout_batch.h"

namespace rlcpp {

struct ScoredBatch {
  std::vector<RolloutSample> samples;  // prompt-major: group_size samples per prompt
  std::vector<float> scores;           // (B) total reward of each sample
  std::vector<int64_t> group_ids;      // (B) prompt index of each sample
  std::vector<int64_t> rollout_index;  // (B) each sample's index in the step's rollout (filter_groups drops some)
  int64_t max_response = 0;            // longest response in tokens
  float temperature = 1.0f;            // the rollout's sampling temperature (logp of softmax(logits / T))
  Truncation truncation;               // algorithm.logprob_space "sampled": the sampler's top-k / top-p
};

}  // namespace rlcpp
