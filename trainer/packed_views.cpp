#include "trainer/packed_views.h"

namespace rlcpp {

std::vector<int64_t> loss_offsets(const PackedBatch& batch) {
  return std::vector<int64_t>(batch.cu_seqlens.begin(), batch.cu_seqlens.end());
}

std::vector<float> target_mask(const PackedBatch& batch) {
  std::vector<float> mask(batch.targets.size());
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = batch.targets[i] >= 0 ? 1.0f : 0.0f;
  return mask;
}

}  // namespace rlcpp
