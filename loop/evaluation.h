// Held-out evaluation of a model on a task: n samples per problem (greedy when temperature is 0), each scored
// by the task's scorer.
#pragma once

#include <cstdint>
#include <vector>

#include "model/tokenizer.h"
#include "model/transformer.h"
#include "reward/eval_stats.h"
#include "reward/task.h"

namespace rlcpp {

struct EvalOptions {
  int64_t problems = 1000;
  int64_t samples = 1;        // per problem; pass@k is reported for k <= samples
  float temperature = 0.0f;   // 0 = greedy
  int64_t max_new_tokens = 6;
  uint64_t seed = 0;
};

EvalStats evaluate(const Transformer& model, const ParameterStore& params, const Task& task,
                   const CharTokenizer& tokenizer, const EvalOptions& options);

// BOS + prompt characters.
std::vector<int32_t> encode_prompt(const CharTokenizer& tokenizer, const std::string& prompt);

}  // namespace rlcpp
