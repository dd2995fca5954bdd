// PPO-style updates over one rollout batch: E epochs, each a (seeded) shuffle of the batch cut into
// mini-batches, one optimizer step per mini-batch (PolicyUpdater::step, split into micro-batches). The loss of
// each step is normalised over its mini-batch (the global batch of that optimizer step), so the split into
// micro-batches does not change the update. With 1 epoch and 1 mini-batch every ratio is exactly 1 (the
// on-policy case of GRPO); later mini-batches and epochs see the policy the earlier steps moved.
//
// update_actor trains the policy with policy_loss (trainer/policy_loss.h), update_critic a value-head model with
// value_loss (trainer/value_loss.h). Inputs are a rollout batch (trainer/rollout_batch.h) with old_logp and
// advantages (actor), or old_values and returns (critic), filled in.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/philox.h"
#include "trainer/algorithm_config.h"
#include "trainer/rollout_batch.h"
#include "trainer/update_step.h"

namespace rlcpp {

struct PpoEpochsConfig {
  int64_t epochs = 1;            // passes over the rollout batch (verl ppo_epochs)
  int64_t mini_batch_size = 0;   // sequences per optimizer step; 0 = the whole batch (verl ppo_mini_batch_size)
  int64_t micro_batch_size = 8;  // sequences per forward/backward (gradients accumulate)
  bool shuffle = true;           // a fresh seeded permutation of the batch every epoch

  void validate(const std::string& where) const;
  template <class V> void visit(V& v) {
    v("epochs", epochs, "passes over each rollout batch (verl ppo_epochs)");
    v("mini_batch_size", mini_batch_size,
      "sequences per optimizer step; 0 = the whole rollout batch (the last mini-batch may be smaller)");
    v("micro_batch_size", micro_batch_size, "sequences per forward/backward; gradients accumulate");
    v("shuffle", shuffle, "shuffle the rollout batch every epoch (seeded)");
  }
};

// The samples of each optimizer step, in order: per epoch a permutation of [0, num_samples) (identity without
// shuffle; drawn from rng) cut into mini-batches of mini_batch_size.
std::vector<std::vector<size_t>> mini_batch_plan(size_t num_samples, const PpoEpochsConfig& cfg, PhiloxStream& rng);

struct EpochsResult {
  std::vector<UpdateResult> steps;  // one per optimizer step, in order
  int64_t skipped = 0;              // steps the NaN guard skipped

  // What a run logs for this update, under `prefix` ("actor/" or "critic/"): each loss metric and grad_norm
  // averaged over the optimizer steps (verl averages its per-mini-batch metrics), lr of the last step, and
  // skipped_steps.
  std::map<std::string, double> metrics(const std::string& prefix) const;
};

struct ActorUpdateOptions {
  PolicyLossConfig loss;
  float temperature = 1.0f;         // the rollout's sampling temperature: logp of softmax(logits / T)
  Truncation truncation;            // logprob_space "sampled": the rollout's top-k / top-p, replayed
  int64_t max_response_length = 0;  // seq-mean-token-sum-norm with loss.token_sum_norm 0 divides by this
  bool entropy = true;              // compute the entropy (the "entropy" metric; needed for entropy_coef > 0)
  int64_t total_steps = 1;          // optimizer steps of the whole run, for the LR schedule
};

// Samples need old_logp and advantages; ref_logp when a KL is in the loss; rollout_logp when a rollout
// correction is on (loss.rollout_correction, or loss.tis_cap > 0). Ends with the actor's host weights refreshed
// (PolicyUpdater::refresh_host_weights), as update_critic ends with the critic's.
EpochsResult update_actor(PolicyUpdater& actor, const std::vector<RolloutSample>& samples,
                          const ActorUpdateOptions& options, const PpoEpochsConfig& cfg, PhiloxStream& rng);

struct CriticUpdateOptions {
  double value_clip = 0.2;           // 0 = no clipping
  std::string agg = "token-mean";    // loss aggregation (loss_normalizer.h)
  int64_t total_steps = 1;
};

// Samples need old_values and returns. `critic` must update a value-head model.
EpochsResult update_critic(PolicyUpdater& critic, const std::vector<RolloutSample>& samples,
                           const CriticUpdateOptions& options, const PpoEpochsConfig& cfg, PhiloxStream& rng);

}  // namespace rlcpp
