// The policy losses of the PPO-clip family, plus the KL to a frozen reference and the entropy bonus, as in verl's
// actor update. cfg.loss_mode picks the per-token term l:
//   vanilla (GRPO / DAPO / Dr.GRPO / PPO; verl compute_policy_loss_vanilla):
//     d    = clamp(logp - old_logp, -20, 20),  r = exp(d)
//     l1   = -A r,  l2 = -A clamp(r, 1 - clip_low, 1 + clip_high),  l = max(l1, l2)
//     dual clip (clip_c > 1, A < 0 only): l = min(l, -A clip_c)
//   gspo (Zheng et al. 2025; verl compute_policy_loss_gspo): the sequence's ratio in place of the token's,
//     s_i  = exp(min(sum_t m (logp - old_logp) / max(sum_t m, 1), 10)), carried by every token as
//            s_{i,t} = sg(s_i) exp(logp_t - sg(logp_t)), so d s_{i,t} / d logp_t = s_i
//     l    = max(-A s_{i,t}, -A clamp(s_{i,t}, 1 - clip_low, 1 + clip_high))
//   cispo (MiniMax-M1): l = -sg(clamp(r, 1 - clip_low, 1 + clip_high)) A logp, so dl/dlogp = -A clamp(r, ...)
//     for every token (none loses its gradient to the clip); clip_low 1 means no lower bound
// and then, for every mode:
//   rollout correction: l *= factor (trainer/rollout_correction.h: truncated IS, masked IS, IcePop; tis_cap C
//                       is its "token" IS with threshold C: min(exp(old_logp - rollout_logp), C))
//   loss   = agg(l) - entropy_coef agg(entropy) + kl_coef agg(kl(logp, ref_logp))   (KL only if not in reward)
// with agg the LossNormalizer over the global batch. Gradients are those of torch autograd: where the max/min
// selects a clipped branch the token's gradient is 0; on an exact tie each branch gets half.
//
// Metrics (verl's names): pg_loss, pg_clipfrac (share of tokens where l2 > l1; cispo: whose weight was clamped),
// pg_clipfrac_lower (A < 0 and
// the dual clip binds), ppo_kl (mean of old_logp - logp), entropy (agg of entropy, if given), kl_loss (agg of
// the KL, if ref_logp is given), rollout_corr/* (when a rollout correction is on; rollout_correction.h),
// tis_ratio (mean TIS weight, when tis_cap is on; the same value as rollout_corr/is_weight_mean).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "trainer/algorithm_config.h"
#include "trainer/loss_normalizer.h"
#include "trainer/loss_output.h"

namespace rlcpp {

struct PolicyLossInputs {
  std::span<const int64_t> cu;          // (B+1) sequence offsets
  std::span<const float> logp;          // (T) current policy: the differentiated input
  std::span<const float> old_logp;      // (T) policy that the step started from
  std::span<const float> advantages;    // (T)
  std::span<const float> mask;          // (T)
  // Optional inputs: absent (nullopt) is distinct from present with T = 0 (a micro-batch of empty responses).
  std::optional<std::span<const float>> ref_logp;      // (T) frozen reference; needed for a KL in the loss
  std::optional<std::span<const float>> entropy;       // (T) per-token entropy; needed for entropy_coef > 0
  std::optional<std::span<const float>> rollout_logp;  // (T) as sampled by the rollout engine; for a rollout
                                                       // correction (or tis_cap > 0)
};

// The normaliser of cfg.agg counted over the global batch (cu, mask); cfg.token_sum_norm = 0 resolves to
// max_response_length (the rollout's maximum new tokens), as Dr.GRPO divides by the generation budget.
LossNormalizer policy_loss_normalizer(const PolicyLossConfig& cfg, std::span<const int64_t> cu,
                                      std::span<const float> mask, int64_t max_response_length);

// cfg.agg is not read here: `norm` carries the aggregation (see policy_loss_normalizer).
LossOutput policy_loss(const PolicyLossInputs& in, const PolicyLossConfig& cfg, const LossNormalizer& norm);

}  // namespace rlcpp
