#include "core/phase_timer.h"

namespace rlcpp {

const char* phase_name(Phase phase) {
  static constexpr const char* kNames[kNumPhases] = {
      "rollout", "env", "reward", "old_logprob", "ref_logprob", "values", "advantage", "update_actor",
      "update_critic", "weight_sync", "probe", "eval", "checkpoint", "other"};
  return kNames[static_cast<int>(phase)];
}

void PhaseTimer::finish() {
  step_seconds_ = wall_.seconds();
  double timed = 0;
  for (int p = 0; p < kNumPhases; ++p)
    if (p != static_cast<int>(Phase::kOther)) timed += seconds_[p];
  // Clock reads are monotonic and the phases nest inside the step, so the remainder is >= 0 up to rounding.
  seconds_[static_cast<int>(Phase::kOther)] = step_seconds_ - timed;
}

std::map<std::string, double> PhaseTimer::metrics() const {
  std::map<std::string, double> out;
  out["timing_s/step"] = step_seconds_;
  for (int p = 0; p < kNumPhases; ++p) {
    const Phase phase = static_cast<Phase>(p);
    out[std::string("timing_s/") + phase_name(phase)] = seconds(phase);
    out[std::string("timing_share/") + phase_name(phase)] = share(phase);
  }
  return out;
}

}  // namespace rlcpp
