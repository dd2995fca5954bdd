// Advantages, computed once over the GLOBAL batch before the update (group statistics and whitening are
// global, so they are never recomputed per micro-batch). verl's formulas (core_algos.py).
//
// GRPO family, from one scalar score per sequence:
//   rewards = token_level_rewards(...)            (score at the last trained token, minus a KL if in reward)
//   seq     = sum_per_sequence(cu, rewards)       (verl sums the token-level rewards)
//   adv     = group_advantages(seq, group_ids, cfg)
//   tokens  = broadcast_to_tokens(cu, mask, adv)
// PPO:
//   rewards = token_level_rewards(...);  gae(cu, mask, rewards, values, gamma, lambda, whiten)
// REINFORCE++:
//   rewards = token_level_rewards(...);  adv = discounted_returns(cu, mask, rewards, gamma), whiten_masked(adv)
// REINFORCE++-baseline:
//   seq = sum_per_sequence(...) - group mean;  adv = broadcast_to_tokens(...), whiten_masked(adv)
//
// Layout: see loss_normalizer.h (cu offsets, per-token arrays of T floats).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "trainer/algorithm_config.h"
#include "trainer/kl.h"
#include "trainer/loss_metrics.h"

namespace rlcpp {

// Per-sequence advantages within groups of sequences sharing a group id (any integers, groups need not be
// contiguous). scores, group_ids: (B). With n the group size, mean and std (unbiased) over the group:
//   grpo   : (r - mean) / (std + eps) if cfg.norm_by_std, else r - mean
//   drgrpo : r - mean
//   rloo   : (r - mean) n / (n - 1) = r - (mean of the other n - 1)
// A group of one keeps verl's behaviour: grpo r / (1 + eps), drgrpo and rloo r. A group whose rewards are all
// equal gets 0. Throws for estimator "gae" (use gae()).
std::vector<float> group_advantages(std::span<const float> scores, std::span<const int64_t> group_ids,
                                    const AdvantageConfig& cfg);

// (T) per_seq[i] * mask[t] for the tokens of sequence i.
std::vector<float> broadcast_to_tokens(std::span<const int64_t> cu, std::span<const float> mask,
                                       std::span<const float> per_seq);

// (B) sum over each sequence's tokens.
std::vector<float> sum_per_sequence(std::span<const int64_t> cu, std::span<const float> per_token);

struct TokenRewards {
  std::vector<float> rewards;  // (T)
  LossMetrics metrics;         // reward_kl_penalty, reward_kl_penalty_coeff (when a KL is applied)
};

// verl apply_kl_penalty: scores[i] (one per sequence) placed on the last token of sequence i with mask > 0
// (a sequence with none drops its score), minus kl_coef * kl(old_logp, ref_logp) * mask on every token.
// kl_coef = 0 (or empty ref_logp) adds no KL. reward_kl_penalty is the mean over sequences (with mask sum > 0)
// of the masked per-token mean KL, as verl reports it.
TokenRewards token_level_rewards(std::span<const int64_t> cu, std::span<const float> mask,
                                 std::span<const float> scores, std::span<const float> old_logp,
                                 std::span<const float> ref_logp, double kl_coef, KlEstimator estimator);

struct GaeResult {
  std::vector<float> advantages;  // (T) whitened over the batch when asked; 0 where mask = 0
  std::vector<float> returns;     // (T) advantages before whitening + values; 0 where mask = 0
};

// verl compute_gae_advantage_return, per sequence from its last token backwards:
//   delta_t = r_t + gamma next_value - v_t,   gae_t = delta_t + gamma lambda gae_{t+1}
// where tokens with mask 0 (e.g. tool outputs) are skipped: they carry next_value and gae through unchanged.
GaeResult gae(std::span<const int64_t> cu, std::span<const float> mask, std::span<const float> rewards,
              std::span<const float> values, double gamma, double lambda, bool whiten);

// verl compute_reinforce_plus_plus_outcome_advantage's returns, per sequence from its last token backwards:
//   G_t = r_t + gamma G,  then G = G_t mask[t]
// (so a token with mask 0, e.g. a tool output, keeps its own return but passes none to the tokens before it).
std::vector<float> discounted_returns(std::span<const int64_t> cu, std::span<const float> mask,
                                      std::span<const float> rewards, double gamma);

// verl masked_whiten: (x - mean) / sqrt(var + 1e-8) with the masked mean and unbiased (Bessel) variance over
// the whole array; shift_mean = false adds the mean back. Entries with mask 0 become 0. With a mask sum of 1
// or less the variance is taken as 0 (verl raises there).
void whiten_masked(std::span<float> values, std::span<const float> mask, bool shift_mean = true);

}  // namespace rlcpp
