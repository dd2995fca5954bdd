// The paged KV cache's storage: per layer, K and V of shape (num_blocks * block_size, Hkv, D). Which block
// belongs to which sequence is the caller's business (a BlockManager in rollout/, or contiguous ranges).
#pragma once

#include <vector>

#include "core/tensor.h"
#include "model/model_config.h"

namespace rlcpp {

struct KVCache {
  int64_t block_size = 16;
  int64_t num_blocks = 0;
  std::vector<Tensor> k;  // per layer (num_blocks * block_size, Hkv, D)
  std::vector<Tensor> v;

  KVCache() = default;
  KVCache(const ModelConfig& config, int64_t num_blocks, int64_t block_size);
  int64_t num_slots() const { return num_blocks * block_size; }
  int64_t bytes() const;
};

}  // namespace rlcpp
