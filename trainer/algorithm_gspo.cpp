// GSPO (algorithm.name "gspo"; Zheng et al. 2025, "Group Sequence Policy Optimization"; verl loss_mode "gspo"):
// GRPO's group advantages with the importance ratio and its clip taken per sequence — the geometric mean of the
// token ratios, exp(mean of logp - old_logp) — instead of per token (the formula: policy_loss.h). Defaults as
// the paper: a clip range of (3e-4, 4e-4) around 1, since a sequence's ratio moves far less than a token's, and
// seq-mean-token-mean aggregation.
#include "trainer/algorithm.h"

namespace rlcpp {

const Algorithm& gspo_algorithm() {
  static const GroupLossAlgorithm algorithm({"gspo", "gspo", 3e-4, 4e-4, "seq-mean-token-mean"});
  return algorithm;
}

}  // namespace rlcpp
