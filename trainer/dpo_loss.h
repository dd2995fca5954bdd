// Direct Preference Optimization, sigmoid loss, against a frozen reference:
//   s_i    = sum_{t in i} mask_t logp_t   (and r_i likewise from ref_logp)
//   z      = beta ((s_c - r_c) - (s_j - r_j))    for a pair (chosen c, rejected j)
//   loss   = sum over the micro-batch's pairs of -log sigmoid(z), divided by the pairs of the GLOBAL batch
//   dL/dlogp_t = -beta sigmoid(-z) mask_t / num_pairs on the chosen tokens, the opposite on the rejected ones
// Metrics (TRL's quantities): dpo_loss, dpo_reward_chosen (beta (s_c - r_c)), dpo_reward_rejected,
// dpo_reward_margin (chosen - rejected), dpo_accuracy (share of pairs with chosen reward > rejected reward).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "trainer/algorithm_config.h"
#include "trainer/loss_output.h"

namespace rlcpp {

struct DpoPair {
  int64_t chosen = 0;    // sequence index in the batch
  int64_t rejected = 0;  // sequence index in the batch
  bool operator==(const DpoPair&) const = default;
};

// Online pairs from rollout groups: in each group (sequences sharing a group id; groups in order of first
// appearance) the highest reward is chosen and the lowest rejected, the first in batch order on ties; a group
// whose highest and lowest rewards are equal (including a group of one) gives no pair.
std::vector<DpoPair> pair_by_reward(std::span<const float> rewards, std::span<const int64_t> group_ids);

struct DpoInputs {
  std::span<const int64_t> cu;      // (B+1) sequence offsets
  std::span<const float> logp;      // (T) current policy: the differentiated input
  std::span<const float> ref_logp;  // (T) frozen reference
  std::span<const float> mask;      // (T)
  std::span<const DpoPair> pairs;   // pairs among this micro-batch's sequences
};

// global_num_pairs: pairs in the global batch (all micro-batches and ranks).
LossOutput dpo_loss(const DpoInputs& in, const DpoConfig& cfg, double global_num_pairs);

}  // namespace rlcpp
