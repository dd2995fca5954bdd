// The rollout side of `rlcpp train` running ahead of the trainer (async.max_staleness = N, docs/architecture.md "Async
// pipeline"). Step k takes its draws (loop/step_draws.h) and, when N >= 1, starts the draws of step k + N on a
// thread of their own with the policy the engine holds then (version k - 1, synced at the end of step k - 1);
// the trainer learns from step k's draws meanwhile and joins before it syncs version k. So every step trains on
// samples exactly N versions old (fewer in the first N steps, whose draws all use version 0), and which samples
// enter a step is fixed by the schedule, never by timing: a seeded async run is reproducible whatever the
// workers' speed. N = 0 is the synchronous loop: a step draws its own samples with the policy it updates.
//
// Between take and join the draws own the DrawContext (the engine, the data stream, the reward function): the
// trainer must not use them, and the colocated engine reads a copy of the weights (make_colocated_rollout's
// own_weights). Draws done but not yet trained on are pending: a checkpoint saves them (pending_to_json) and a
// resumed run restores them, so it continues exactly as the uninterrupted run.
#pragma once

#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "core/phase_timer.h"
#include "loop/step_draws.h"

namespace rlcpp {

class RolloutPipeline {
 public:
  RolloutPipeline(const DrawContext& ctx, int64_t max_staleness, int64_t last_step);
  ~RolloutPipeline();  // waits for draws in flight
  RolloutPipeline(const RolloutPipeline&) = delete;
  RolloutPipeline& operator=(const RolloutPipeline&) = delete;

  // The draws of `step`: pending ones, else drawn now by the engine at `version` (timed as the step's rollout
  // and reward). With N >= 1 the draws of steps up to step + N - 1 are made now if they are missing (the first
  // steps), and those of step + N start in the background with `version`.
  StepDraws take(int64_t step, int64_t version, PhaseTimer& timer);
  // Waits for the background draws and keeps them pending; the wait is the step's exposed rollout
  // (Phase::kRollout). With N >= 1 adds timing_s/rollout_wall and reward_wall (the background draws' phases),
  // rollout_exposed (the wait) and rollout_overlapped (the rest, hidden behind the trainer's work). Rethrows
  // what made the draws fail.
  void join(PhaseTimer& timer, std::map<std::string, double>& metrics);

  // The pending draws (nothing in flight) as a checkpoint keeps them: null when there are none.
  Json pending_to_json() const;
  // Restores what pending_to_json saved; `where` names its file in errors.
  void restore(const Json& pending, const std::string& where);

 private:
  DrawContext ctx_;
  int64_t max_staleness_;
  int64_t last_step_;
  std::map<int64_t, StepDraws> pending_;  // by step
  std::thread thread_;                    // the background draws, while joinable
  std::optional<StepDraws> drawn_;        // what it drew
  std::exception_ptr failure_;            // or why it failed
};

}  // namespace rlcpp
