// The preference losses against a frozen reference (TRL DPOTrainer loss_type) and without one (SimPO, TRL
// CPOTrainer), for pairs (chosen c, rejected j) of sequences in the batch. Per sequence i:
//   sum:  s_i = sum_t mask_t (logp_t - ref_logp_t)                        (sigmoid, robust)
//   mean: s_i = sum_t mask_t (logp_t - ref_logp_t) / sum_t mask_t         (ipo)
//         s_i = sum_t mask_t logp_t / sum_t mask_t                        (simpo: no reference)
// z = s_c - s_j, eps = label_smoothing, and per pair
//   sigmoid (DPO; cDPO with eps > 0):  -(1 - eps) log sigmoid(beta z) - eps log sigmoid(-beta z)
//   robust (rDPO):                     (-(1 - eps) log sigmoid(beta z) + eps log sigmoid(-beta z)) / (1 - 2 eps)
//   ipo:                               (z - 1 / (2 beta))^2
//   simpo:                             as sigmoid, on u = beta z - simpo_gamma
// loss = the micro-batch's pairs' sum divided by the pairs of the GLOBAL batch; dL/dlogp_t = dL/dz ds/dlogp_t
// (mask_t, or mask_t / sum mask for the means) on the chosen tokens, the opposite on the rejected ones.
// Metrics (TRL's quantities): dpo_loss, dpo_reward_chosen (beta s_c), dpo_reward_rejected,
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
  std::span<const float> ref_logp;  // (T) frozen reference; empty for simpo (cfg.uses_reference() false)
  std::span<const float> mask;      // (T)
  std::span<const DpoPair> pairs;   // pairs among this micro-batch's sequences
};

// global_num_pairs: pairs in the global batch (all micro-batches and ranks).
LossOutput dpo_loss(const DpoInputs& in, const DpoConfig& cfg, double global_num_pairs);

}  // namespace rlcpp
