// One GRPO step of `rlcpp train` through its phases (DESIGN.md "one RL step"): rollout, reward, old_logprob,
// ref_logprob (kl_coef > 0), advantage, update_actor, weight_sync, probe. Eval and checkpoint belong to the
// controller. Each phase is timed on the step's PhaseTimer.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/philox.h"
#include "loop/phase_timer.h"
#include "loop/train_config.h"
#include "model/tokenizer.h"
#include "reward/reward_function.h"
#include "loop/rollout_backend.h"
#include "trainer/update_step.h"

namespace rlcpp {

// What a step works with; owned by the controller, mutated by the step (weights, version, RNG streams).
struct RlContext {
  const TrainConfig& config;
  const Task& task;
  RewardFunction& reward;
  const CharTokenizer& tokenizer;
  const Transformer& model;
  ParameterStore& params;             // the policy the trainer updates
  const ParameterStore* reference;    // frozen initial policy; null without a KL term
  PolicyUpdater& actor;
  RolloutBackend& rollout;            // colocated engine or split worker
  PhiloxStream& data_rng;
  PhiloxStream& update_rng;
  int64_t version = 0;                // the policy version the engine samples with
};

struct StepResult {
  std::map<std::string, double> metrics;  // reward/*, mismatch/*, actor/*, rollout/* (timing added by the caller)
  std::vector<Json> samples;              // the first samples_per_step samples, for samples.jsonl
  double mean_reward = 0;
  int64_t tokens = 0;                     // prompt + response tokens of the batch
};

StepResult grpo_step(RlContext& ctx, int64_t step, PhaseTimer& timer);

}  // namespace rlcpp
