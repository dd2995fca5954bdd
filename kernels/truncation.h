// The top-k / top-p kept set of one row of logits: the rollout sampler's truncation rule (rollout/sampler.h),
// here so that the trainer can replay it. With logprob_space "sampled" the engine reports, and the trainer
// scores, log p(token) under the TRUNCATED distribution the token was drawn from (softmax over the kept set)
// instead of the whole vocabulary's: without it every framework's importance ratio is off by the kept mass.
//
// The rule: w_j = exp_fixed((l_j - max_l) / T) in float (kernels/cpu/vec_math.h: vectorised, the value every
// kernel uses), summed in double in a fixed order; order = tokens by w descending, the lower id first among
// equals; top_k > 0 keeps the first min(top_k, V); top_p < 1 then keeps the shortest prefix of those whose mass
// reaches top_p times their total (at least one token; only that prefix is ever sorted). Both sides call this
// function on their own logits, so when the logits agree bit for bit the kept sets do.
#pragma once

#include <cstdint>
#include <vector>

namespace rlcpp {

struct Truncation {
  int64_t top_k = 0;   // 0 = off
  float top_p = 1.0f;  // 1 = off
  bool active(int64_t vocab_size) const { return (top_k > 0 && top_k < vocab_size) || top_p < 1.0f; }
  bool operator==(const Truncation&) const = default;
};

// Per-thread buffers sized to the vocabulary.
struct TruncationScratch {
  std::vector<double> weights;  // (V) exp_fixed((l - max) / T)
  std::vector<int32_t> order;   // (V) the kept tokens first, in walk order
  std::vector<uint8_t> in_set;  // (V) 1 for a kept token (kept_mask fills it)
};

struct KeptSet {
  int64_t kept = 0;      // order[0 .. kept) are the kept tokens
  double mass = 0;       // their sum of weights
  double total = 0;      // the sum of all weights
  int32_t argmax = 0;    // the most likely token (lowest id on ties)
  float max_logit = 0;
};

// Fills s.weights and s.order for `logits` (V) at temperature T > 0. Throws on non-finite logits.
KeptSet truncation_kept_set(const float* logits, int64_t vocab_size, float temperature, const Truncation& t,
                            TruncationScratch& s);

// s.in_set (V) = 1 for the kept tokens of `set` (s.order as truncation_kept_set left it) and for `also` (>= 0:
// a token that must count as kept, e.g. the one the engine sampled when the trainer's replay disagrees).
void kept_mask(const KeptSet& set, int32_t also, TruncationScratch& s, int64_t vocab_size);

}  // namespace rlcpp
