// A PPO critic started from a policy: the policy's body (embeddings, blocks, final norm) with a fresh scalar
// value head in place of lm_head, saved and loaded as Hugging Face *ForTokenClassification (num_labels 1).
#pragma once

#include <cstdint>

#include "model/parameters.h"

namespace rlcpp {

// The policy's config with value_head set (tie_word_embeddings is kept: it has no effect without lm_head).
ModelConfig critic_config(const ModelConfig& policy);

// Every body parameter copied from `policy` (a causal LM: value_head false); score.weight drawn from
// normal(0, 0.02) (Hugging Face's initializer_range, as init_random) from PhiloxStream(seed, 0); score.bias 0.
ParameterStore critic_from_policy(const ParameterStore& policy, uint64_t seed);

}  // namespace rlcpp
