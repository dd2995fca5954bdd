// The two layouts trainer/'s losses take (loss_normalizer.h: sequence i owns positions [cu[i], cu[i+1]) of every
// per-token array, mask weighs each position):
// - over a packed model batch (loss_offsets, target_mask): every position is a token, and positions without a
//   target (-1: prompt tokens but the last, each sequence's last position) have mask 0. SFT and the update's
//   micro-batches use it.
// - over a rollout batch's responses back to back, without prompt positions (ResponseLayout): what the
//   sequence-level functions of advantages.h (token_level_rewards, gae, data_metrics) take; mask is
//   RolloutSample::mask (all 1 when empty).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/packed_batch.h"
#include "trainer/rollout_batch.h"

namespace rlcpp {

std::vector<int64_t> loss_offsets(const PackedBatch& batch);
std::vector<float> target_mask(const PackedBatch& batch);

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
