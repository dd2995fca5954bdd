#include "model/kv_cache.h"

#include <cstring>

#include "core/error.h"

namespace rlcpp {

KVCache::KVCache(const ModelConfig& config, int64_t blocks, int64_t block, DType cache_dtype)
    : block_size(block), dtype(cache_dtype), num_blocks(blocks) {
  RLCPP_CHECK(block_size > 0 && num_blocks > 0,
              "KVCache: block_size " << block_size << " and num_blocks " << num_blocks << " must be positive");
  RLCPP_CHECK(dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16,
              "KVCache: dtype " << dtype_name(dtype) << " is not F32, BF16 or F16");
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    k.push_back(Tensor::zeros({num_slots(), config.num_key_value_heads, config.head_dim()}, dtype));
    v.push_back(Tensor::zeros({num_slots(), config.num_key_value_heads, config.head_dim()}, dtype));
  }
}

void KVCache::copy_block(int64_t src, int64_t dst, int64_t tokens) {
  for (size_t l = 0; l < k.size(); ++l) {
    const size_t slot_bytes = k[l].nbytes() / static_cast<size_t>(num_slots());
    const size_t bytes = static_cast<size_t>(tokens) * slot_bytes;
    auto* kb = static_cast<char*>(k[l].raw());
    auto* vb = static_cast<char*>(v[l].raw());
    std::memcpy(kb + dst * block_size * slot_bytes, kb + src * block_size * slot_bytes, bytes);
    std::memcpy(vb + dst * block_size * slot_bytes, vb + src * block_size * slot_bytes, bytes);
  }
}

int64_t KVCache::bytes() const {
  int64_t total = 0;
  for (size_t l = 0; l < k.size(); ++l) total += static_cast<int64_t>(k[l].nbytes() + v[l].nbytes());
  return total;
}

}  // namespace rlcpp
