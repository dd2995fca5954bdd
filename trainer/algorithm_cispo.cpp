// CISPO (algorithm.name "cispo"; MiniMax-M1, "Clipped IS-weight Policy Optimization"): GRPO's group advantages
// and, in place of PPO's clipped surrogate, the REINFORCE-style loss -sg(clip(ratio)) A logp: the importance
// weight is clipped and detached, so no token, least of all a rare low-probability one, loses its gradient to the
// clip (the formula: policy_loss.h). Defaults as the paper: no lower bound on the weight (clip_low 1), its cap at
// 1 + 0.28, token-mean over the batch.
#include "trainer/algorithm.h"

namespace rlcpp {

const Algorithm& cispo_algorithm() {
  static const GroupLossAlgorithm algorithm({"cispo", "cispo", 1.0, 0.28, "token-mean"});
  return algorithm;
}

}  // namespace rlcpp
