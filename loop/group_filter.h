// Dynamic sampling (DAPO; verl `algorithm.filter_groups`): a GRPO group whose samples all scored the same has
// zero advantage everywhere and, without a KL or entropy term, adds nothing to the gradient but its share of the
// token-mean denominator — it only costs a forward and a backward. With filter_groups enabled the rollout
// samples rollout.prompts_per_step prompts (over-sampling is cheap: the rollout is a small share of a CPU step)
// and only groups with a reward spread are kept for the old log-probs and the update, at most max_groups of
// them (the first ones, in prompt order), so every trained token carries signal.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/config.h"

namespace rlcpp {

struct ScoredBatch;

struct FilterGroupsConfig {
  bool enabled = false;
  int64_t max_groups = 0;  // groups kept for the update at most; 0 = every informative group

  template <class V> void visit(V& v) {
    v("enabled", enabled,
      "GRPO: drop groups whose samples all have the same reward (zero advantage) before old_logprob and the "
      "update (DAPO dynamic sampling; verl algorithm.filter_groups)");
    v("max_groups", max_groups, "at most this many informative groups are trained on per step; 0 = all of them");
  }
};

// Keeps the groups of `batch` (prompt-major, `group_size` samples per group) whose scores are not all equal,
// the first `cfg.max_groups` of them when > 0; adds filter/{informative_groups, kept_groups, kept_fraction}.
void filter_informative_groups(ScoredBatch& batch, int64_t group_size, const FilterGroupsConfig& cfg,
                               std::map<std::string, double>& metrics);

}  // namespace rlcpp
