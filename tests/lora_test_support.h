// LoRA adapters for the tests that compute with them (model/lora.h).
#pragma once

#include <cstdint>

#include "core/philox.h"
#include "model/lora.h"

namespace rlcpp {

// Adapters with A drawn as PEFT draws it and B random too, of size `b_scale` (PEFT starts B at zero, which would
// leave A's gradient zero and the merged model equal to the base: nothing tested).
inline LoraAdapters random_lora_adapters(const ModelConfig& cfg, const LoraConfig& lc, uint64_t seed,
                                         float b_scale = 0.05f) {
  LoraAdapters a(cfg, lc);
  a.init(seed);
  PhiloxStream rng(seed, 7);
  for (const LoraTarget& t : a.targets()) {
    float* b = a.weights().flat().data<float>() + t.b;
    for (int64_t k = 0; k < t.out * lc.rank; ++k) b[k] = b_scale * rng.normal();
  }
  return a;
}

// Rank 4, alpha 8 on every Linear layer.
inline LoraConfig small_lora_config() {
  LoraConfig lc;
  lc.rank = 4;
  lc.alpha = 8;
  return lc;
}

}  // namespace rlcpp
