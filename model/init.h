// Random initialisation of a fresh model, following Hugging Face Llama's _init_weights (initializer_range 0.02).
#pragma once

#include <cstdint>

#include "model/parameters.h"

namespace rlcpp {

// Matrices and the embedding: normal(0, 0.02), the embedding's pad_token_id row zeroed (nn.Embedding's
// padding_idx); RMSNorm weights (Qwen3's q_norm and k_norm too): ones; biases: zeros. Parameter i draws from
// PhiloxStream(seed, i), so a parameter's values depend only on the seed and its place in parameter_layout.
ParameterStore init_random(const ModelConfig& cfg, uint64_t seed);

}  // namespace rlcpp
