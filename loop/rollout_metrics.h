// One rollout's figures for metrics.jsonl: what the engine did (tokens, KV bytes per token by its own count)
// and the distribution of response lengths. Keys under rollout/ are the same whatever the placement and
// timing; engine/ holds the wall-clock figures and engine steps (of the slowest worker when there are several).
#pragma once

#include <map>
#include <string>

#include "rollout/request.h"

namespace rlcpp {

// rollout/generated_tokens, rollout/prefill_tokens, rollout/kv_bytes_per_token,
// rollout/response_length/{mean,min,max,p50,p90} (tokens, EOS included), rollout/response_clip_ratio (share of
// responses stopped by the length limit), engine/steps, engine/forward_s.
std::map<std::string, double> rollout_metrics(const RolloutResult& rollout);

}  // namespace rlcpp
