// DAPO's overlong reward shaping (verl reward_model.overlong_buffer; Yu et al. 2025, "soft overlong
// punishment"): a response that runs into the last `len` tokens before the length limit loses reward in
// proportion to how far it went, down to -penalty_factor at the limit itself:
//   expected = max_new_tokens - len
//   penalty  = min(0, -(response_tokens - expected) / len * penalty_factor)
// added to the task's reward. Responses of at most `expected` tokens are untouched.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "reward/reward_result.h"

namespace rlcpp {

struct OverlongBufferConfig {
  bool enabled = false;
  int64_t len = 0;              // the buffer before the limit, in tokens; required when enabled (DAPO: 4096 of 20480)
  double penalty_factor = 1.0;  // the penalty at the limit

  // Checks against the rollout's response limit; `where` names the section (e.g. "reward.overlong_buffer").
  void validate(const std::string& where, int64_t max_new_tokens) const;

  template <class V> void visit(V& v) {
    v("enabled", enabled, "DAPO's soft overlong punishment of responses that reach into the buffer before the limit");
    v("len", len, "buffer length in tokens before rollout.sampling.max_new_tokens, in [1, max_new_tokens]");
    v("penalty_factor", penalty_factor, "the penalty at the limit (>= 0); it grows linearly over the buffer");
  }
};

// The penalty (<= 0) of one response of `response_tokens` tokens.
double overlong_penalty(int64_t response_tokens, int64_t max_new_tokens, const OverlongBufferConfig& cfg);

// Adds each response's penalty to its result's total, with the components "overlong_penalty" and "overlong"
// (1 when penalised), as verl logs them. response_tokens: one per result.
void apply_overlong_penalty(std::vector<RewardResult>& results, std::span<const int64_t> response_tokens,
                            int64_t max_new_tokens, const OverlongBufferConfig& cfg);

}  // namespace rlcpp
