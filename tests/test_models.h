// The small model the model and rollout tests share: GQA, two layers, odd vocabulary, fast to run.
#pragma once

#include <string>

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
  return c;
}

}  // namespace rlcpp
