// Picks the next token from a row of logits: greedy, or a draw from softmax(logits / T) restricted to the
// top-k tokens and then to the top-p nucleus (renormalised). The draw is Philox keyed by (seed, prompt id,
// sample index, position): one 53-bit uniform per sampled token, used for nothing else, so a sample's
// tokens do not depend on batch composition, scheduling, preemption or which worker runs it.
// The returned log-prob is of the chosen token under softmax(logits / T) over the WHOLE vocabulary, before
// truncation (T = 1 for greedy), or with logprob_space "sampled" over the kept set it was drawn from: what the
// trainer scores. The kept set is kernels/truncation.h's rule, which the trainer replays.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/truncation.h"
#include "rollout/request.h"

namespace rlcpp {

struct SampleKey {
  uint64_t seed = 0;
  uint64_t prompt_id = 0;
  uint32_t sample_index = 0;
  uint32_t position = 0;  // position of the token being sampled in its sequence
};

// One token of a row's distribution and its log-prob (the sampled token's space: softmax(logits / T)).
struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
};

struct SampledToken {
  int32_t token = 0;
  // log p(token) under the whole tempered distribution (untempered when greedy), top-k / top-p aside:
  // ops::row_logprob, the bits the trainer's forward computes from the same logits; or ("sampled") under the
  // kept set: ops::row_logprob_truncated, the bits of the trainer's logprob_truncated_forward.
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
  // The `count` most likely tokens of the row, most likely first (the lower id first among equals), each with
  // its log-prob under softmax(logits / T) over the whole vocabulary (T = 1 for greedy): the value `sample`
  // reports for that token in logprob_space "full".
  std::vector<TokenLogprob> top_logprobs(const float* logits, const SamplingParams& params, int64_t count);
  // The distribution `sample` draws from (V probabilities summing to 1; 0 outside top-k / top-p; greedy puts
  // 1 on the argmax). For tests and diagnostics.
  std::vector<double> target_distribution(const float* logits, const SamplingParams& params);

 private:
  // The kept set of `logits` (truncation_kept_set; temperature 1 for greedy; min_p as a cap on top_k) in
  // scratch_.
  KeptSet prepare(const float* logits, const SamplingParams& params);

  int64_t vocab_size_;
  TruncationScratch scratch_;
};

}  // namespace rlcpp
