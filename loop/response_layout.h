// A rollout batch's responses back to back, without prompt positions: the layout trainer/advantages.h's
// sequence-level functions (token_level_rewards, gae, data_metrics) take. Sequence i owns positions
// [cu[i], cu[i+1]) of every per-token array; mask is RolloutSample::mask (all 1 when empty).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "trainer/rollout_batch.h"

namespace rlcpp {

struct ResponseLayout {
  std::vector<int64_t> cu;  // (B+1)
  std::vector<float> mask;  // (T) T = total response tokens

  // (T) every sample's `field` back to back; throws naming `name` and the sample when its array does not have
  // one entry per response token.
  std::vector<float> flatten(const std::vector<RolloutSample>& samples, RolloutField field, const char* name) const;
  // (T) -> one array of R entries per sample.
  std::vector<std::vector<float>> split(std::span<const float> per_token) const;
};

ResponseLayout response_layout(const std::vector<RolloutSample>& samples);

}  // namespace rlcpp
