// Batched autoregressive generation over the paged KV cache, each sequence given a contiguous run of blocks.
// Used by `rlcpp generate` and `rlcpp eval`; the rollout engine (rollout/) adds continuous batching, shared
// prompt blocks and preemption on top of the same Transformer::forward_cached.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/transformer.h"

namespace rlcpp {

struct GenerateOptions {
  int64_t max_new_tokens = 6;
  float temperature = 0.0f;  // 0 = greedy (argmax, lowest id on ties)
  uint64_t seed = 0;         // Philox key; draws are keyed by (seed, sequence index, position)
  int64_t max_batch = 1024;  // sequences decoded together
  int64_t block_size = 16;
};

struct Generation {
  std::vector<int32_t> tokens;   // generated tokens, including the EOS when it was produced
  std::vector<float> logprobs;   // log p(token) under softmax(logits / temperature) (greedy: temperature 1)
  bool finished_by_eos = false;
};

// prompts: token ids (BOS included by the caller). Stops a sequence at eos_id or max_new_tokens, or when the
// context is full.
std::vector<Generation> generate(const Transformer& model, const ParameterStore& params,
                                 const std::vector<std::vector<int32_t>>& prompts, const GenerateOptions& options);

}  // namespace rlcpp
