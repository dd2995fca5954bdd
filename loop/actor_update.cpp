// The PPO-clip actor update shared by GRPO and PPO (loop/algorithm_update.h).
#include "loop/algorithm_update.h"

namespace rlcpp {

int64_t run_optimizer_steps(const TrainConfig& cfg) {
  const int64_t batch_size = cfg.update_batch_size();
  const int64_t mini = cfg.ppo.mini_batch_size > 0 ? cfg.ppo.mini_batch_size : batch_size;
  return cfg.steps * cfg.ppo.epochs * ((batch_size + mini - 1) / mini);
}

void ppo_clip_update(RlContext& ctx, const ScoredBatch& batch, PhaseTimer& timer, StepResult& out) {
  const TrainConfig& cfg = ctx.config;
  const EpochsResult update = timer.time(Phase::kUpdateActor, [&] {
    ActorUpdateOptions options;
    options.loss = cfg.algorithm.policy_loss;
    options.temperature = batch.temperature;
    options.truncation = batch.truncation;
    options.max_response_length = batch.max_response;
    options.total_steps = run_optimizer_steps(cfg);
    return update_actor(ctx.actor, batch.samples, options, cfg.ppo, ctx.update_rng);
  });
  for (const auto& [k, v] : update.metrics("actor/")) out.metrics[k] = v;
}

}  // namespace rlcpp
