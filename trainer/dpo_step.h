// DPO optimizer steps on preference pairs against a frozen reference (the same architecture with other
// weights, usually the initial ones): dpo_loss (trainer/dpo_loss.h) over the global batch of pairs.
//
// Each pair is two sequences, prompt + chosen and prompt + rejected; the completion tokens (EOS included) are
// the scored ones, as in SFT. A micro-batch of k pairs packs 2k sequences (chosen, rejected, chosen, ...).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "trainer/algorithm_config.h"
#include "trainer/rollout_batch.h"
#include "trainer/update_step.h"

namespace rlcpp {

struct PreferencePair {
  std::vector<int32_t> prompt;    // BOS + prompt, >= 1 token
  std::vector<int32_t> chosen;    // preferred completion (EOS included)
  std::vector<int32_t> rejected;  // dispreferred completion (EOS included)
};

// Online DPO: one pair per rollout group of samples sharing a prompt (pair_by_reward of dpo_loss.h: the
// highest reward chosen, the lowest rejected; groups without a reward gap give none). rewards, group_ids: one
// per sample.
std::vector<PreferencePair> pairs_from_rollout(const std::vector<RolloutSample>& samples,
                                               std::span<const float> rewards, std::span<const int64_t> group_ids);

// One optimizer step on `pairs` (the step's global batch), micro_batch_pairs pairs per forward/backward. The
// step's metrics are dpo_loss, dpo_reward_chosen, dpo_reward_rejected, dpo_reward_margin, dpo_accuracy, all
// measured before the update (at the policy the step starts from).
// reference: the frozen policy; null when the loss has none (cfg.uses_reference() false: SimPO).
UpdateResult dpo_step(PolicyUpdater& policy, const ParameterStore* reference, std::span<const PreferencePair> pairs,
                      const DpoConfig& cfg, int64_t micro_batch_pairs, int64_t total_steps);

// The same metrics for `params` without an update (a held-out preference set), the forwards on `exec`.
LossMetrics dpo_evaluate(const ExecContext& exec, const Transformer& model, const ParameterStore& params,
                         const ParameterStore* reference, std::span<const PreferencePair> pairs, const DpoConfig& cfg,
                         int64_t micro_batch_pairs);

}  // namespace rlcpp
