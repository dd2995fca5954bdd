// Picks the next token from a row of logits: greedy, or a draw from softmax(logits / T) restricted to the
// top-k tokens and then to the top-p nucleus (renormalised). The draw is Philox keyed by (seed, prompt id,
// sample index, position): one 53-bit uniform per sampled token, used for nothing else, so a sample's
// tokens do not depend on batch composition, scheduling, preemption or which worker runs it.
// The returned log-prob is of the chosen token under softmax(logits / T) over the WHOLE vocabulary, before
// truncation (T = 1 for greedy): what the trainer scores.
#pragma once

#include <cstdint>
#include <vector>

#include "rollout/request.h"

namespace rlcpp {

struct SampleKey {
  uint64_t seed = 0;
  uint64_t prompt_id = 0;
  uint32_t sample_index = 0;
  uint32_t position = 0;  // position of the token being sampled in its sequence
};

struct SampledToken {
  int32_t token = 0;
  // log p(token) under the whole tempered distribution (untempered when greedy), top-k / top-p aside:
  // ops::row_logprob, the bits the trainer's forward computes from the same logits.
  float logprob = 0;
};

// The uniform in [0, 1) that picks the token at `key` (Philox counter: prompt id low and high words,
// sample index, position).
double sample_uniform(const SampleKey& key);

// Holds scratch sized to the vocabulary: use one per thread.
class Sampler {
 public:
  explicit Sampler(int64_t vocab_size);

  SampledToken sample(const float* logits, const SamplingParams& params, const SampleKey& key);
  // The distribution `sample` draws from (V probabilities summing to 1; 0 outside top-k / top-p; greedy puts
  // 1 on the argmax). For tests and diagnostics.
  std::vector<double> target_distribution(const float* logits, const SamplingParams& params);

 private:
  // Fills weights_ (exp((l - max) / T)) and order_ with the kept tokens in walk order; returns their mass.
  double prepare(const float* logits, const SamplingParams& params);

  int64_t vocab_size_;
  std::vector<double> weights_;
  std::vector<int32_t> order_;
  int64_t kept_ = 0;
  int32_t argmax_ = 0;
  double max_logit_ = 0, total_weight_ = 0, inv_temperature_ = 1;
};

}  // namespace rlcpp
