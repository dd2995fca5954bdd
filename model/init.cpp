#include "model/init.h"

#include "core/philox.h"

namespace rlcpp {

namespace {
constexpr float kInitializerRange = 0.02f;  // Hugging Face LlamaConfig.initializer_range default
}  // namespace

ParameterStore init_random(const ModelConfig& cfg, uint64_t seed) {
  cfg.validate("init_random");
  ParameterStore store(cfg);
  const auto& infos = store.infos();
  for (size_t i = 0; i < infos.size(); ++i) {
    const ParameterInfo& info = infos[i];
    float* w = store.flat().data<float>() + info.offset;
    const int64_t n = info.numel();
    if (info.shape.size() == 2) {
      PhiloxStream rng(seed, i);
      for (int64_t k = 0; k < n; ++k) w[k] = kInitializerRange * rng.normal();
    } else if (info.name.ends_with(".bias")) {
      for (int64_t k = 0; k < n; ++k) w[k] = 0.0f;
    } else {  // RMSNorm weights (the layers' two, Qwen3's q_norm and k_norm, the final), the only other 1-D parameters
      for (int64_t k = 0; k < n; ++k) w[k] = 1.0f;
    }
  }
  // The pad row of the embedding is zero, as nn.Embedding(padding_idx=pad_token_id) leaves it.
  const int64_t C = cfg.hidden_size;
  float* pad_row = store.flat().data<float>() + store.offset_of("model.embed_tokens.weight") + cfg.pad_token_id * C;
  for (int64_t k = 0; k < C; ++k) pad_row[k] = 0.0f;
  return store;
}

}  // namespace rlcpp
