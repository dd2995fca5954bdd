// Rollout/trainer mismatch corrections of the PPO-clip loss (algorithm.policy_loss.rollout_correction): one
// constant factor per token that multiplies that token's PPO-clip loss. It is a constant in logp (no gradient
// flows through it: verl detaches its weights), computed from old_logp (the trainer's recomputation, which the
// step started from) and rollout_logp (the engine's, as sampled).
//
// With lr_t = old_logp_t - rollout_logp_t, bexp(x) = exp(clamp(x, -20, 20)) (verl's SAFETY_BOUND), and for
// sequence i: S_i = sum_{t in i} m_t lr_t, n_i = sum_{t in i} m_t (m the loss mask, 0/1 in practice):
//   is "token"        w_t = min(bexp(lr_t), is_threshold)                  (token TIS)
//   is "sequence"     w_t = min(bexp(S_i), is_threshold), every t in i     (sequence TIS)
//   mask "token"      keep_t = [mask_low <= bexp(lr_t) <= mask_high]
//   mask "sequence"   keep_t = [mask_low <= bexp(S_i) <= mask_high], every t in i
//   mask "geometric"  keep_t = [mask_low <= bexp(S_i / n_i) <= mask_high], every t in i (n_i = 0: ratio 1)
//   icepop            w_t = bexp(lr_t), keep_t = [icepop_low <= w_t <= icepop_high]
//   factor_t = w_t * keep_t   (w = 1, keep = 1 for an option that is off; a NaN ratio is never kept)
// These follow verl's compute_rollout_correction_weights and compute_rollout_rejection_mask
// (verl/trainer/ppo/rollout_corr_helper.py: rollout_is token/sequence, rollout_rs token/sequence/geometric with
// the bounds [rollout_rs_threshold_lower, rollout_rs_threshold]); icepop is IcePop as the Ring-1T report defines
// it: the token's term is multiplied by M(k) = k for k = pi_train / pi_infer in [alpha, beta], 0 elsewhere.
//
// The loss normaliser is NOT changed: a masked token keeps its place in the aggregation's denominator (N or
// n_i), its PPO-clip term is 0, and the KL and entropy terms keep every token. That is IcePop's 1/|y| and
// masked IS read as an importance weight of 0. verl differs for rollout_rs: it writes the rejection into
// response_mask before the update (compute_rollout_correction_and_add_to_batch), so there the rejected tokens
// also leave the denominator and the KL/entropy terms.
//
// Sequence quantities need each sequence whole in the batch given; micro-batches are cut between sequences,
// so the factors, and the loss, do not depend on the cut.
//
// Metrics (mergeable partial sums; the caller adds "actor/"):
//   rollout_corr/is_weight_mean   mean over valid tokens (mask-weighted) of factor_t, the weight applied
//   rollout_corr/masked_frac      share of valid tokens with keep_t = 0 (mask or icepop on)
//   rollout_corr/seq_masked_frac  share of the sequences with n_i > 0 that mask rejected ("sequence", "geometric")
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "trainer/algorithm_config.h"
#include "trainer/loss_metrics.h"

namespace rlcpp {

struct RolloutCorrection {
  std::vector<double> factor;  // (T) multiplies token t's PPO-clip loss
  // Metric partial sums over this batch.
  double factor_sum = 0;     // sum_t m_t factor_t
  double masked = 0;         // sum_t m_t [keep_t = 0]
  double valid = 0;          // sum_t m_t
  double seqs_rejected = 0;  // sequences with n_i > 0 rejected by a sequence/geometric mask
  double seqs = 0;           // sequences with n_i > 0

  void add_metrics(const RolloutCorrectionConfig& cfg, LossMetrics& metrics) const;
};

// cu (B+1) offsets of whole sequences; old_logp, rollout_logp, mask (T). cfg must be active() and valid.
RolloutCorrection rollout_correction(const RolloutCorrectionConfig& cfg, std::span<const int64_t> cu,
                                     std::span<const float> old_logp, std::span<const float> rollout_logp,
                                     std::span<const float> mask);

}  // namespace rlcpp
