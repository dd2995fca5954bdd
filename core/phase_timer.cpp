#include "core/phase_timer.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace rlcpp {

const char* phase_name(Phase phase) {
  static constexpr const char* kNames[kNumPhases] = {
      "rollout", "env", "reward", "old_logprob", "mismatch", "ref_logprob", "values", "advantage", "update_actor",
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

std::array<int, kNumPhases> PhaseTimer::whole_percents() const {
  std::array<int, kNumPhases> out{};
  // `other` can come out a rounding below 0 (finish()); no share is negative.
  std::array<double, kNumPhases> seconds{};
  for (int p = 0; p < kNumPhases; ++p) seconds[p] = std::max(0.0, seconds_[p]);
  const double total = std::accumulate(seconds.begin(), seconds.end(), 0.0);
  if (!(total > 0)) {
    out[static_cast<int>(Phase::kOther)] = 100;
    return out;
  }
  std::array<double, kNumPhases> remainder{};
  int given = 0;
  for (int p = 0; p < kNumPhases; ++p) {
    const double exact = 100.0 * seconds[p] / total;
    out[p] = static_cast<int>(std::floor(exact));
    remainder[p] = exact - out[p];
    given += out[p];
  }
  std::array<int, kNumPhases> order{};
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return remainder[a] > remainder[b]; });
  for (int i = 0; given < 100; i = (i + 1) % kNumPhases, ++given) ++out[order[i]];
  return out;
}

}  // namespace rlcpp
