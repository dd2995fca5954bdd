#include "model/kv_cache.h"

#include "core/error.h"

namespace rlcpp {

KVCache::KVCache(const ModelConfig& config, int64_t blocks, int64_t block, DType cache_dtype, const ExecContext& ctx)
    : block_size(block), dtype(cache_dtype), num_blocks(blocks) {
  RLCPP_CHECK(block_size > 0 && num_blocks > 0,
              "KVCache: block_size " << block_size << " and num_blocks " << num_blocks << " must be positive");
  RLCPP_CHECK(is_float_storage(dtype),
              "KVCache: dtype " << dtype_name(dtype) << " is not F32, BF16 or F16");
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    k.push_back(ctx.zeros({num_slots(), config.num_key_value_heads, config.head_dim()}, dtype));
    v.push_back(ctx.zeros({num_slots(), config.num_key_value_heads, config.head_dim()}, dtype));
  }
}

void KVCache::copy_block(const ExecContext& ctx, int64_t src, int64_t dst, int64_t tokens) {
  RLCPP_CHECK(src >= 0 && src < num_blocks && dst >= 0 && dst < num_blocks && tokens >= 0 && tokens <= block_size,
              "KVCache::copy_block: block " << src << " -> " << dst << " (" << tokens << " tokens) outside "
                                            << num_blocks << " blocks of " << block_size);
  if (tokens == 0) return;
  for (size_t l = 0; l < k.size(); ++l) {
    for (Tensor* t : {&k[l], &v[l]}) {
      Tensor to = t->slice_rows(dst * block_size, dst * block_size + tokens);
      ctx.copy(t->slice_rows(src * block_size, src * block_size + tokens), to);
    }
  }
}

int64_t KVCache::bytes() const {
  int64_t total = 0;
  for (size_t l = 0; l < k.size(); ++l) total += static_cast<int64_t>(k[l].nbytes() + v[l].nbytes());
  return total;
}

}  // namespace rlcpp
