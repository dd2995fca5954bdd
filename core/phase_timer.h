// Wall time of a step's phases (docs/architecture.md "Step timing"): rollout, env (an episode's environment calls,
// apart from the engine's turns), reward, old_logprob, mismatch (the full-vocabulary comparison of mixed numerics),
// ref_logprob, values, advantage, update_actor, update_critic, weight_sync, probe, eval, checkpoint, and `other`,
// the remainder of the step's wall time, so the phases add up to it exactly.
#pragma once

#include <array>
#include <map>
#include <string>

#include "core/metrics.h"

namespace rlcpp {

enum class Phase {
  kRollout, kEnv, kReward, kOldLogprob, kMismatch, kRefLogprob, kValues, kAdvantage, kUpdateActor, kUpdateCritic,
  kWeightSync, kProbe, kEval, kCheckpoint, kOther
};
constexpr int kNumPhases = 15;
const char* phase_name(Phase phase);

class PhaseTimer {
 public:
  // Starts the step's wall clock.
  PhaseTimer() = default;
  // Runs `fn` and adds its wall time to `phase`; returns what fn returns.
  template <class F> auto time(Phase phase, F&& fn) {
    Stopwatch watch;
    struct Add {
      PhaseTimer* self; Phase phase; Stopwatch* watch;
      ~Add() { self->seconds_[static_cast<int>(phase)] += watch->seconds(); }
    } add{this, phase, &watch};
    return fn();
  }
  // Adds `seconds` measured elsewhere (a Stopwatch around work done in the step) to `phase`.
  void add(Phase phase, double seconds) { seconds_[static_cast<int>(phase)] += seconds; }
  // Ends the step: `other` becomes the step's wall time minus the timed phases.
  void finish();
  double step_seconds() const { return step_seconds_; }
  double seconds(Phase phase) const { return seconds_[static_cast<int>(phase)]; }
  double share(Phase phase) const { return step_seconds_ > 0 ? seconds(phase) / step_seconds_ : 0.0; }
  // timing_s/<phase> and timing_share/<phase> for every phase, plus timing_s/step.
  std::map<std::string, double> metrics() const;
  // The shares as whole percents that add up to exactly 100 (each share rounded down, the points left over
  // given to the largest remainders), in phase order; a finished step of 0 s is all `other`.
  std::array<int, kNumPhases> whole_percents() const;

 private:
  Stopwatch wall_;
  std::array<double, kNumPhases> seconds_{};
  double step_seconds_ = 0;
};

}  // namespace rlcpp
