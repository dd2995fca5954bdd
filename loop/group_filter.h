// Dynamic sampling (DAPO; verl `algorithm.filter_groups`): a GRPO group whose samples all scored the same has
// zero advantage everywhere and, without a KL or entropy term, adds nothing to the gradient but its share of the
// token-mean denominator — it only costs a forward and a backward. With filter_groups enabled the rollout
// samples rollout.prompts_per_step prompts (over-sampling is cheap: the rollout is a small share of a CPU step)
// and only groups with a reward spread are kept for the old log-probs and the update, at most max_groups of
// them (the first ones, in prompt order), so every trained token carries signal.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>

#include "core/config.h"

namespace rlcpp {

struct ScoredBatch;

struct FilterGroupsConfig {
  bool enabled = false;
  int64_t max_groups = 0;  // groups kept for the update at most; 0 = every informative group
  int64_t max_draws = 1;   // draws of prompts_per_step prompts a step may make to fill max_groups (1 = no refill)

  template <class V> void visit(V& v) {
    v("enabled", enabled,
      "GRPO: drop groups whose samples all have the same reward (zero advantage) before old_logprob and the "
      "update (DAPO dynamic sampling; verl algorithm.filter_groups)");
    v("max_groups", max_groups, "at most this many informative groups are trained on per step; 0 = all of them");
    v("max_draws", max_draws,
      "refill: while fewer than max_groups groups have a reward spread, draw rollout.prompts_per_step more "
      "prompts (fresh problems, a seed of their own), at most this many draws a step; 1 = one draw (verl "
      "max_num_gen_batches). A step that reaches the cap trains on what it has (filter/cap_reached 1)");
  }
};

// Groups (prompt-major, group_size consecutive scores each) whose scores are not all equal.
int64_t count_informative_groups(std::span<const float> scores, int64_t group_size);

// Keeps the groups of `batch` (prompt-major, `group_size` samples per group) whose scores are not all equal,
// the first `cfg.max_groups` of them when > 0; adds filter/{informative_groups, kept_groups, kept_fraction}
// (the fraction of the groups drawn, over every draw of the step).
void filter_informative_groups(ScoredBatch& batch, int64_t group_size, const FilterGroupsConfig& cfg,
                               std::map<std::string, double>& metrics);

}  // namespace rlcpp
