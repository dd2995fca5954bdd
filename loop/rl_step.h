// One RL step of `rlcpp train` through its phases (docs/architecture.md "one RL step"): the step's draws (rollout and
// reward, loop/step_draws.h, handed over by the rollout pipeline), then old_logprob and ref_logprob as the
// algorithm needs them and the algorithm's own part (trainer/algorithm.h: values, advantage, update_critic,
// update_actor) in learn_step, then weight_sync and probe in sync_and_probe. Eval and checkpoint belong to the
// controller. Each phase is timed on the step's PhaseTimer.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/philox.h"
#include "core/phase_timer.h"
#include "loop/train_config.h"
#include "tokenizer/tokenizer.h"
#include "reward/reward_function.h"
#include "loop/rollout_backend.h"
#include "loop/step_draws.h"
#include "trainer/communicator.h"
#include "trainer/update_step.h"

namespace rlcpp {

// What a step works with; owned by the controller, mutated by the step (weights, version, RNG streams).
struct RlContext {
  const TrainConfig& config;
  const Task& task;
  RewardFunction& reward;
  const Tokenizer& tokenizer;
  const Transformer& model;
  ParameterStore& params;             // the policy the trainer updates
  const ParameterStore* reference;    // frozen initial policy; null unless the algorithm needs it (a KL, DPO)
  PolicyUpdater& actor;
  RolloutBackend& rollout;            // colocated engine or split worker
  PhiloxStream& data_rng;
  PhiloxStream& update_rng;
  int64_t version = 0;                // the policy's version before the update (the engine holds it since the last sync)
  PolicyUpdater* critic = nullptr;    // an algorithm with a critic (PPO): the value-head model's updater; else null
  // The policy's model in the rollout engine's numerics (dtype, quantisation): the probe scores with it. Null
  // when the roles' numerics are the same (then `model` serves).
  const Transformer* rollout_model = nullptr;
  // On-policy distillation (needs().teacher_logp): the teacher's model and weights (algorithm.distill.teacher).
  const Transformer* teacher_model = nullptr;
  const ParameterStore* teacher = nullptr;
  // Data parallelism (loop/data_parallel_step.h): the log-prob passes are split over its ranks. Null: one process.
  Communicator* comm = nullptr;
  // An agent run's episodes (their turn protocol writes samples.jsonl's text). Null: single-turn.
  const AgentRollout* agent = nullptr;
  // A LoRA run with rollout.lora_merge false: the base and adapters the engine decodes unmerged (the probe
  // scores with them). Empty otherwise.
  UnmergedRollout unmerged;
  // Its weight_sync/* figures: the error of the base as the engine prepared it, which never changes (taken once).
  std::map<std::string, double> unmerged_base_error;
};

struct StepResult {
  // reward/*, mismatch/*, actor/*, critic/*, dpo/*, rollout/* (the phase timing added by the caller), and the
  // step's token counts: tokens/sequences (prompt + response tokens of every sequence sampled, before dynamic
  // sampling), tokens/sampled (response tokens the engine sampled), tokens/trained (tokens through the
  // policy's forward + backward in the update: the kept groups, every epoch; 0 without an update), with
  // timing_s/rollout_draws (the engine's wall time for the step's draws).
  std::map<std::string, double> metrics;
  std::vector<Json> samples;              // the first samples_per_step samples, for samples.jsonl
  double mean_reward = 0;
};

// Learns from a step's draws with the algorithm config.algorithm.name (trainer/algorithm.h): dynamic sampling,
// old and reference log-probs, the algorithm's phases. Draws more than async.max_staleness versions older than
// ctx.version are dropped (training/off_policy/dropped_samples) and the policy stays.
StepResult learn_step(RlContext& ctx, StepDraws&& drawn, PhaseTimer& timer);

// Phases 7-8: pushes the updated policy to the engine as version ctx.version + 1 (ctx.version becomes it) and
// probes that the engine computes what the trainer does.
void sync_and_probe(RlContext& ctx, PhaseTimer& timer, StepResult& out);

// After the step's timer finished: tokens_per_s/sampled (rollout tokens/s: tokens/sampled over
// timing_s/rollout_draws) and tokens_per_s/trained (training tokens/s: tokens/trained over the update_actor
// phase), each only where both are > 0.
void add_throughput_metrics(const PhaseTimer& timer, std::map<std::string, double>& metrics);

}  // namespace rlcpp
