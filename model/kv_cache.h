// The paged KV cache's storage: per layer, K and V of shape (num_blocks * block_size, Hkv, D) in the rollout's
// compute dtype (F32, BF16 or F16: bytes per token 2 * layers * Hkv * D * 4 or 2), on the device of the
// context that made it (the engine's). Which block belongs to which sequence is the caller's business (a
// BlockManager in rollout/, or contiguous ranges).
#pragma once

#include <vector>

#include "core/exec_context.h"
#include "core/tensor.h"
#include "model/model_config.h"

namespace rlcpp {

struct KVCache {
  int64_t block_size = 16;
  DType dtype = DType::kF32;
  int64_t num_blocks = 0;
  std::vector<Tensor> k;  // per layer (num_blocks * block_size, Hkv, D)
  std::vector<Tensor> v;

  KVCache() = default;
  // Zeroed blocks on ctx's device, from its pool.
  KVCache(const ModelConfig& config, int64_t num_blocks, int64_t block_size, DType dtype = DType::kF32,
          const ExecContext& ctx = ExecContext::cpu());
  int64_t num_slots() const { return num_blocks * block_size; }
  int64_t bytes() const;
  // Copies the first `tokens` slots of block `src` to block `dst` in every layer (copy-on-write), on ctx (the
  // context the cache was made on: a device cache copies on its device).
  void copy_block(const ExecContext& ctx, int64_t src, int64_t dst, int64_t tokens);
};

}  // namespace rlcpp
