// Rollout/trainer mismatch: the engine's log-probs of the sampled tokens against the trainer's recomputed
// old log-probs of the same tokens (same weights, same temperature). With r = trainer - rollout per token:
//   max_abs_dlogp = max |r|, mean_abs_dp = mean |exp(trainer) - exp(rollout)|,
//   k1 = mean(-r) (KL(rollout || trainer), sampled from the rollout), k3 = mean(exp(r) - 1 - r) (>= 0).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace rlcpp {

struct Mismatch {
  double max_abs_dlogp = 0;
  double mean_abs_dp = 0;
  double k1 = 0;
  double k3 = 0;
  int64_t tokens = 0;

  // mismatch/max_abs_dlogp, mismatch/mean_abs_dp, mismatch/k1, mismatch/k3.
  std::map<std::string, double> metrics(const std::string& prefix = "mismatch/") const;
};

// Per sample, one entry per response token in each; throws naming the sample when lengths differ.
Mismatch logprob_mismatch(const std::vector<std::vector<float>>& rollout_logp,
                          const std::vector<std::vector<float>>& trainer_logp);

}  // namespace rlcpp
