#include "model/kv_cache.h"

#include "core/error.h"

namespace rlcpp {

KVCache::KVCache(const ModelConfig& config, int64_t blocks, int64_t block) : block_size(block), num_blocks(blocks) {
  RLCPP_CHECK(block_size > 0 && num_blocks > 0,
              "KVCache: block_size " << block_size << " and num_blocks " << num_blocks << " must be positive");
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    k.push_back(Tensor::zeros({num_slots(), config.num_key_value_heads, config.head_dim()}));
    v.push_back(Tensor::zeros({num_slots(), config.num_key_value_heads, config.head_dim()}));
  }
}

int64_t KVCache::bytes() const {
  int64_t total = 0;
  for (size_t l = 0; l < k.size(); ++l) total += static_cast<int64_t>(k[l].nbytes() + v[l].nbytes());
  return total;
}

}  // namespace rlcpp
