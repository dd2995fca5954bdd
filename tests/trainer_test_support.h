// Shared by the trainer tests: a small model and random rollout batches.
#pragma once

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/philox.h"
#include "model/init.h"
#include "trainer/rollout_batch.h"
#include "tests/error_test_support.h"

namespace rlcpp::test {

// Small enough that a forward/backward of a dozen sequences takes about a millisecond.
inline ModelConfig small_model_config() {
  ModelConfig c;
  c.vocab_size = 32;
  c.hidden_size = 32;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.intermediate_size = 48;
  c.max_position_embeddings = 32;
  return c;
}

// Random tokens (ids 3..31) after BOS; prompts of 1..4 tokens, responses of 0..max_response tokens, sample 1
// with an empty response and sample 3 fully masked; about 1 response token in 8 masked elsewhere.
inline std::vector<RolloutSample> random_samples(uint64_t seed, size_t n, int64_t max_response = 9) {
  PhiloxStream rng(seed, 0);
  std::vector<RolloutSample> out(n);
  for (size_t i = 0; i < n; ++i) {
    RolloutSample& s = out[i];
    s.prompt.push_back(1);
    const int64_t p = static_cast<int64_t>(rng.below(4));
    for (int64_t t = 0; t < p; ++t) s.prompt.push_back(3 + static_cast<int32_t>(rng.below(29)));
    const int64_t r = i == 1 ? 0 : 1 + static_cast<int64_t>(rng.below(max_response));
    for (int64_t t = 0; t < r; ++t) {
      s.response.push_back(3 + static_cast<int32_t>(rng.below(29)));
      s.mask.push_back(i == 3 ? 0.0f : (rng.uniform() < 0.125f ? 0.0f : 1.0f));
      s.advantages.push_back(rng.normal());
    }
  }
  return out;
}

inline bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// max |a - b| / max |a| over two buffers of the same size; 1 when a is all zero and b is not.
inline double max_rel_diff(const float* a, const float* b, int64_t n) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(a[i])));
  }
  return scale > 0 ? diff / scale : (diff > 0 ? 1.0 : 0.0);
}

}  // namespace rlcpp::test
