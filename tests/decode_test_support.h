// The cached decode driven one sequence at a time, for the decode tests on the host (model_decode_test) and on
// a GPU (model_cuda_test).
#pragma once

#include <algorithm>
#include <vector>

#include "core/exec_context.h"
#include "model/kv_cache.h"
#include "model/transformer.h"

namespace rlcpp::testing {

// Feeds `seq` through a KV cache on ctx (blocks of `block_size`, scattered) and returns the logits after each
// token, on the host; the first `prefill` tokens go in as one prefill step, the rest one a step. `packed` as
// forward_cached takes it (weights prepared on ctx's device; null: the parameters themselves, host fp32 only).
inline std::vector<std::vector<float>> cached_logits(const ExecContext& ctx, const Transformer& model,
                                                     const ParameterStore& params, const std::vector<int32_t>& seq,
                                                     int64_t block_size, size_t prefill, const PackedWeights* packed) {
  const int64_t blocks = (static_cast<int64_t>(seq.size()) + block_size - 1) / block_size;
  KVCache cache(model.config(), blocks + 2, block_size, storage_dtype(model.numerics().compute), ctx);
  std::vector<int32_t> table;
  for (int64_t b = 0; b < blocks; ++b) table.push_back(static_cast<int32_t>(blocks + 1 - b));  // scattered blocks
  std::vector<std::vector<float>> out;
  const int64_t V = model.config().vocab_size;
  Tensor host;
  size_t done = 0;
  while (done < seq.size()) {
    const size_t take = done == 0 ? std::max<size_t>(1, prefill) : 1;
    CachedStep step;
    step.block_indptr = {0, static_cast<int32_t>(table.size())};
    step.block_indices = table;
    for (size_t t = done; t < done + take; ++t) {
      step.tokens.push_back(seq[t]);
      step.positions.push_back(static_cast<int32_t>(t));
      step.query_seq.push_back(0);
      step.slot_mapping.push_back(static_cast<int32_t>(table[t / block_size] * block_size + t % block_size));
      step.logits_rows.push_back(static_cast<int32_t>(t - done));
    }
    const Tensor& logits = host_tensor(ctx, model.forward_cached(ctx, params, step, cache, packed), host);
    for (size_t r = 0; r < take; ++r)
      out.emplace_back(logits.data<float>() + r * V, logits.data<float>() + (r + 1) * V);
    done += take;
  }
  return out;
}

// A step of one row: token `token` at position 0 of one sequence in block 0, its logits asked for.
inline CachedStep single_token_step(int32_t token) {
  CachedStep step;
  step.tokens = {token};
  step.positions = {0};
  step.query_seq = {0};
  step.slot_mapping = {0};
  step.block_indptr = {0, 1};
  step.block_indices = {0};
  step.logits_rows = {0};
  return step;
}

}  // namespace rlcpp::testing
