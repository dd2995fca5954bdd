// The loss layout of trainer/ (int64 offsets, a float mask) seen over a model PackedBatch: every position is a
// token of the loss arrays, and positions without a target (-1) have mask 0.
#pragma once

#include <cstdint>
#include <vector>

#include "model/packed_batch.h"

namespace rlcpp {

std::vector<int64_t> loss_offsets(const PackedBatch& batch);
std::vector<float> target_mask(const PackedBatch& batch);

}  // namespace rlcpp
