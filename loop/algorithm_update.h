// The algorithm-specific part of an RL step (loop/rl_step.h), between the shared phases (rollout, reward,
// old_logprob, ref_logprob) and the weight sync. Each function times its phases on the step's timer and adds
// its metrics to the step's result:
//   grpo_update  advantage (group-normalised score per sample) -> update_actor (PPO-clip)
//   ppo_update   values (critic) -> advantage (token rewards, GAE, whitening) -> update_critic -> update_actor
//   dpo_update   advantage (one chosen/rejected pair per prompt group) -> update_actor (DPO vs the reference)
#pragma once

#include <cstdint>
#include <vector>

#include "loop/phase_timer.h"
#include "loop/rl_step.h"
#include "trainer/ppo_epochs.h"
#include "trainer/rollout_batch.h"

namespace rlcpp {

// A step's rollout batch once scored: samples with old_logp (GRPO, PPO) and ref_logp (a KL term) filled in.
struct ScoredBatch {
  std::vector<RolloutSample> samples;  // prompt-major: group_size samples per prompt
  std::vector<float> scores;           // (B) total reward of each sample
  std::vector<int64_t> group_ids;      // (B) prompt index of each sample
  std::vector<int64_t> rollout_index;  // (B) each sample's index in the step's rollout (filter_groups drops some)
  int64_t max_response = 0;            // longest response in tokens
  float temperature = 1.0f;            // the rollout's sampling temperature (logp of softmax(logits / T))
  Truncation truncation;               // algorithm.logprob_space "sampled": the sampler's top-k / top-p
};

void grpo_update(RlContext& ctx, ScoredBatch& batch, PhaseTimer& timer, StepResult& out);
void ppo_update(RlContext& ctx, ScoredBatch& batch, PhaseTimer& timer, StepResult& out);
void dpo_update(RlContext& ctx, ScoredBatch& batch, PhaseTimer& timer, StepResult& out);

// The PPO-clip update of GRPO and PPO (samples need advantages): ppo.epochs passes of mini-batches over the
// batch, the LR schedule sized for the whole run; metrics under actor/.
void ppo_clip_update(RlContext& ctx, const ScoredBatch& batch, PhaseTimer& timer, StepResult& out);

// Optimizer steps of the whole run for the LR schedule: steps x epochs x mini-batches of the planned update
// batch (TrainConfig::update_batch_size(); with filter_groups a step may train on fewer samples).
int64_t run_optimizer_steps(const TrainConfig& cfg);

}  // namespace rlcpp
