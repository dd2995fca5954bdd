#include "loop/rollout_pipeline.h"

#include <algorithm>

#include "core/error.h"

namespace rlcpp {

RolloutPipeline::RolloutPipeline(const DrawContext& ctx, int64_t max_staleness, int64_t last_step)
    : ctx_(ctx), max_staleness_(max_staleness), last_step_(last_step) {}

RolloutPipeline::~RolloutPipeline() {
  if (thread_.joinable()) thread_.join();
}

StepDraws RolloutPipeline::take(int64_t step, int64_t version, PhaseTimer& timer) {
  RLCPP_CHECK(!thread_.joinable(), "rollout pipeline: step " << step << " taken while draws are in flight");
  const int64_t ahead = std::min(step + std::max<int64_t>(max_staleness_ - 1, 0), last_step_);
  for (int64_t s = step; s <= ahead; ++s) {
    if (pending_.count(s)) continue;
    StepDraws d = draw_step(ctx_, s, version);
    timer.add(Phase::kRollout, d.rollout_s);
    timer.add(Phase::kEnv, d.env_s);
    timer.add(Phase::kReward, d.reward_s);
    pending_.emplace(s, std::move(d));
  }
  const int64_t next = step + max_staleness_;
  if (max_staleness_ > 0 && next <= last_step_ && !pending_.count(next)) {
    drawn_.reset();
    failure_ = nullptr;
    thread_ = std::thread([this, next, version] {
      try {
        drawn_ = draw_step(ctx_, next, version);
      } catch (...) {
        failure_ = std::current_exception();
      }
    });
  }
  auto it = pending_.find(step);
  StepDraws d = std::move(it->second);
  pending_.erase(it);
  return d;
}

void RolloutPipeline::join(PhaseTimer& timer, std::map<std::string, double>& metrics) {
  if (max_staleness_ == 0) return;
  double wait_s = 0, rollout_s = 0, env_s = 0, reward_s = 0;
  if (thread_.joinable()) {
    wait_s = timer.time(Phase::kRollout, [&] {
      Stopwatch watch;
      thread_.join();
      return watch.seconds();
    });
    if (failure_) std::rethrow_exception(failure_);
    rollout_s = drawn_->rollout_s;
    env_s = drawn_->env_s;
    reward_s = drawn_->reward_s;
    const int64_t step = drawn_->step;
    pending_.emplace(step, std::move(*drawn_));
    drawn_.reset();
  }
  metrics["timing_s/rollout_wall"] = rollout_s;
  metrics["timing_s/reward_wall"] = reward_s;
  metrics["timing_s/env_wall"] = env_s;
  metrics["timing_s/rollout_exposed"] = wait_s;
  metrics["timing_s/rollout_overlapped"] = std::max(0.0, rollout_s + env_s + reward_s - wait_s);
}

Json RolloutPipeline::pending_to_json() const {
  RLCPP_CHECK(!thread_.joinable(), "rollout pipeline: pending draws saved while draws are in flight");
  if (pending_.empty()) return nullptr;
  Json out = Json::array();
  for (const auto& [step, d] : pending_) out.push_back(step_draws_to_json(d));
  return out;
}

void RolloutPipeline::restore(const Json& pending, const std::string& where) {
  RLCPP_CHECK(!thread_.joinable(), "rollout pipeline: pending draws restored while draws are in flight");
  if (pending.is_null()) return;
  RLCPP_CHECK(pending.is_array(), where << ": must be an array of pending steps' draws");
  const int64_t group = ctx_.config.rollout.group_size, prompts = ctx_.config.rollout.prompts_per_step;
  for (size_t i = 0; i < pending.size(); ++i) {
    StepDraws d = step_draws_from_json(pending[i], where + " [" + std::to_string(i) + "]");
    const int64_t step = d.step;
    // Drawn under the config the checkpoint was trained with: a resume under another group size or batch
    // (--allow-config-change) would learn from groups the step does not expect.
    const int64_t drawn_prompts = static_cast<int64_t>(d.drawn.problems.size());
    const int64_t drawn_samples = static_cast<int64_t>(d.drawn.rollout.samples.size());
    // An agent run's draws hold the groups that ended in them: with turns_per_draw, fewer or more than drawn.
    const bool partial = ctx_.config.agent.enabled() && ctx_.config.agent.spans_draws();
    RLCPP_CHECK(drawn_samples == drawn_prompts * group && (partial || drawn_prompts == prompts * d.draws),
                where << ": step " << step << " was drawn ahead (async.max_staleness) as " << drawn_prompts
                      << " prompts x " << (drawn_prompts > 0 ? drawn_samples / drawn_prompts : 0)
                      << " samples in " << d.draws << " draw(s), but the run's config asks for "
                      << "rollout.prompts_per_step " << prompts << " x rollout.group_size " << group
                      << ": those keys cannot change while draws made under the old ones are pending; restore "
                         "them, or resume from a checkpoint without pending_rollouts.json");
    RLCPP_CHECK(pending_.emplace(step, std::move(d)).second, where << ": step " << step << " appears twice");
  }
}

}  // namespace rlcpp
