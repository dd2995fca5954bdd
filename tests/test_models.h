// The small model the model and rollout tests share: GQA, two layers, odd vocabulary, fast to run.
#pragma once

#include <string>

#include <cstdint>
#include <vector>

#include "core/philox.h"
#include "model/init.h"
#include "model/numerics.h"
#include "model/model_config.h"

namespace rlcpp {

inline ModelConfig small_test_config(const std::string& model_type = "qwen2") {
  ModelConfig c;
  c.model_type = model_type;  // qwen2: q/k/v biases exercised too
  c.vocab_size = 23;
  c.hidden_size = 32;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.intermediate_size = 40;
  c.max_position_embeddings = 64;
  if (model_type == "qwen3") c.explicit_head_dim = 12;  // q_norm / k_norm, and head_dim != 32 / 4
  return c;
}

// The families the family-parameterised tests run over (INSTANTIATE_TEST_SUITE_P(..., ValuesIn(kTestFamilies))).
inline const std::vector<std::string> kTestFamilies = {"llama", "qwen2", "qwen3"};

// n token ids below `vocab`, drawn from Philox stream (seed, 0).
inline std::vector<int32_t> random_test_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  PhiloxStream rng(seed, 0);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng.below(vocab));
  return t;
}

// Random weights times `scale`: wider than the 0.02 init, so logits vary between positions and samples differ.
inline ParameterStore scaled_test_params(const ModelConfig& c, float scale = 3.0f, uint64_t seed = 3) {
  ParameterStore p = init_random(c, seed);
  for (int64_t i = 0; i < p.numel(); ++i) p.flat().data<float>()[i] *= scale;
  return p;
}

// A role's numerics as the GPU tests vary them: fp32 or bf16 (its Linear weights in that dtype), batch-invariant
// (the packed kernel, also on a GPU) or not (OpenBLAS / cuBLAS).
inline ModelNumerics test_numerics(DType compute, bool batch_invariant) {
  ModelNumerics n;
  n.compute = compute;
  n.linear_weights = compute == DType::kBF16 ? DType::kBF16 : DType::kF32;
  n.batch_invariant = batch_invariant;
  return n;
}

}  // namespace rlcpp
