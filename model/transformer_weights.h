// The views of a Transformer's parameters, per layer (private to model/transformer*.cpp).
#pragma once

#include <vector>

#include "model/transformer.h"

namespace rlcpp {

struct Transformer::LayerWeights {
  Tensor ln1, qkv_w, qkv_b, o_w, o_b, ln2, gate_up, down;
  Tensor q_norm, k_norm;  // Qwen3: (D) each, undefined otherwise
};

struct Transformer::Weights {
  Tensor embed, final_norm, lm_head;
  Tensor score_w, score_b;  // value head: (1,C), (1)
  std::vector<LayerWeights> layers;
};

}  // namespace rlcpp
