// An RL algorithm of `rlcpp train` (algorithm.name), one file each (trainer/algorithm_<name>.cpp), looked up in
// one registry. The controller (loop/rl_step.cpp) runs the shared phases — rollout, reward, and the scoring the
// algorithm asks for in needs() — then hands the scored batch to update(), which computes the algorithm's
// advantages (or preference pairs), trains (the critic first where there is one, then the policy) and reports
// its metrics. An algorithm never sees the rollout engine, the reward or the run directory.
//
// | name                  | advantage                                  | policy update                       |
// | grpo                  | group-normalised score (grpo/drgrpo/rloo)  | PPO-clip (policy_loss.loss_mode)     |
// | gspo                  | as grpo                                    | sequence-level ratio and clip        |
// | cispo                 | as grpo                                    | clipped IS weight, stop-gradient     |
// | reinforce_pp          | discounted token returns, batch-whitened   | PPO-clip                             |
// | reinforce_pp_baseline | score - group mean, batch-whitened         | PPO-clip                             |
// | ppo                   | GAE on a critic's values                   | critic, then PPO-clip                |
// | dpo                   | one chosen/rejected pair per prompt group  | DPO against the frozen reference     |
// | distill               | -(logp - teacher logp) per token           | PPO-clip, or the reverse KL as a loss |
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/philox.h"
#include "core/phase_timer.h"
#include "trainer/advantages.h"
#include "trainer/algorithm_config.h"
#include "trainer/loss_layout.h"
#include "trainer/ppo_epochs.h"
#include "trainer/scored_batch.h"
#include "trainer/update_step.h"

namespace rlcpp {

using StepMetrics = std::map<std::string, double>;

// What the controller must provide before update().
struct AlgorithmNeeds {
  bool old_logp = true;        // phase old_logprob: the batch scored by the policy the update starts from
  bool reference = false;      // a frozen copy of the initial policy (saved at the start, read back on resume)
  bool ref_logp = false;       // phase ref_logprob: the batch scored by the reference (a KL term)
  bool teacher_logp = false;   // phase ref_logprob by algorithm.distill.teacher instead, into ref_logp
  bool critic = false;         // a value-head model trained beside the policy
  bool group_advantages = false;  // its advantages are relative to the prompt's group (filter_groups applies)
  int64_t min_group_size = 1;  // rollout.group_size must be at least this
};

// What update() works with: the trainer's side of the step, nothing of the rollout's.
struct UpdateContext {
  const AlgorithmConfig& algo;
  const PpoEpochsConfig& plan;     // epochs, mini-batches, micro-batches (the `ppo` section)
  int64_t group_size = 1;          // samples per prompt
  int64_t total_optimizer_steps = 1;  // of the whole run, for the LR schedule
  PolicyUpdater& actor;
  PolicyUpdater* critic = nullptr;            // when needs().critic
  const ParameterStore* reference = nullptr;  // when needs().reference
  PhiloxStream& rng;                          // mini-batch shuffles
};

class Algorithm {
 public:
  virtual ~Algorithm() = default;
  virtual const char* name() const = 0;
  // The starting values of the `algorithm` section (the config file's keys apply on top).
  virtual void set_defaults(AlgorithmConfig& cfg) const {}
  // Checks that depend on the algorithm; `where` prefixes the key paths in errors (e.g. "algorithm").
  virtual void validate(const AlgorithmConfig& cfg, const std::string& where) const {}
  virtual AlgorithmNeeds needs(const AlgorithmConfig& cfg) const = 0;
  // Advantages (or pairs), values, update_critic and update_actor, each timed on `timer`; metrics into `out`.
  // batch.samples carry old_logp and ref_logp as needs() asked.
  virtual void update(UpdateContext& ctx, ScoredBatch& batch, PhaseTimer& timer, StepMetrics& out) const = 0;
};

// The algorithm called `name`; the error names `key`, the value and every registered name.
const Algorithm& find_algorithm(const std::string& name, const std::string& key = "algorithm.name");

// Pieces the algorithms share (trainer/algorithm.cpp):
// Classic RLHF's KL: k1 per token in the reward, coefficient 0.001 (verl's algorithm.kl_ctrl.kl_coef default).
void set_kl_in_reward_defaults(AlgorithmConfig& cfg);
// The token rewards of the batch in `layout` (the score on each response's last token, minus kl_coef x
// KL(old, ref) per token when the KL is in the reward); the KL penalty's metrics go to `out` under actor/.
TokenRewards kl_penalised_token_rewards(const ScoredBatch& batch, const ResponseLayout& layout,
                                        const PolicyLossConfig& loss, StepMetrics& out);
// Their sum per sample: the score minus its summed KL (verl sums the token-level rewards of a sequence).
std::vector<float> kl_penalised_scores(const ScoredBatch& batch, const PolicyLossConfig& loss, StepMetrics& out);
// Sets every response token's advantage to its sample's entry of `per_sample`.
void set_sequence_advantages(ScoredBatch& batch, const std::vector<float>& per_sample);
// Sets the advantages from one value per response token of `layout` (the batch's response_layout).
void set_token_advantages(ScoredBatch& batch, const ResponseLayout& layout, std::span<const float> per_token);
// The policy's update (phase update_actor): plan.epochs passes of mini-batches over the batch with
// algo.policy_loss; samples need advantages. Metrics under actor/.
void policy_update(UpdateContext& ctx, const ScoredBatch& batch, PhaseTimer& timer, StepMetrics& out);

// The GRPO family's (grpo, gspo, cispo): advantage.estimator must be grpo, drgrpo or rloo (error names the
// algorithm); old log-probs always, the reference for a KL term; advantages from the group statistics of the
// (KL-penalised) scores (phase advantage), then policy_update.
void check_group_estimator(const AlgorithmConfig& cfg, const std::string& where, const char* algorithm);
AlgorithmNeeds group_algorithm_needs(const AlgorithmConfig& cfg);
void group_advantage_update(UpdateContext& ctx, ScoredBatch& batch, PhaseTimer& timer, StepMetrics& out);
// An algorithm of the GRPO family whose policy loss is its own (gspo, cispo): it sets policy_loss.loss_mode and
// the mode's clip range and aggregation as defaults, and requires that loss mode.
struct LossPreset {
  const char* name;
  const char* loss_mode;
  double clip_low, clip_high;
  const char* agg;
};
class GroupLossAlgorithm final : public Algorithm {
 public:
  explicit GroupLossAlgorithm(const LossPreset& preset) : preset_(preset) {}
  const char* name() const override { return preset_.name; }
  void set_defaults(AlgorithmConfig& cfg) const override;
  void validate(const AlgorithmConfig& cfg, const std::string& where) const override;
  AlgorithmNeeds needs(const AlgorithmConfig& cfg) const override { return group_algorithm_needs(cfg); }
  void update(UpdateContext& ctx, ScoredBatch& batch, PhaseTimer& timer, StepMetrics& out) const override {
    group_advantage_update(ctx, batch, timer, out);
  }

 private:
  LossPreset preset_;
};

// A KL to the reference is needed (in the loss or in the reward).
inline bool needs_reference_for_kl(const AlgorithmConfig& cfg) { return cfg.policy_loss.kl_coef > 0; }

}  // namespace rlcpp
