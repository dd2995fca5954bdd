// How a sampled token's log-prob is scored: the distribution the rollout engine reports it under and the
// trainer replays. The rule that turns sampling parameters into it lives here, once, for the sampler, the
// engine and every sample the trainer receives (rollout/request.h's Sample, trainer/rollout_batch.h's
// RolloutSample carry the result, so the trainer never re-derives it from a config).
#pragma once

#include <cstdint>
#include <string>

#include "kernels/truncation.h"

namespace rlcpp {

struct LogprobScoring {
  float temperature = 1.0f;  // > 0: log softmax(logits / T)
  Truncation truncation;     // off: the whole vocabulary; on: the top-k / top-p kept set the token was drawn from

  bool operator==(const LogprobScoring&) const = default;
  std::string describe() const;  // "temperature 0.7, top_k 5, top_p 1"
};

// The rule: greedy decoding (sampling temperature 0) is scored at temperature 1; a sampled token at its sampling
// temperature. Only `truncated_space` (logprob_space "sampled") with a temperature > 0 scores under the kept set
// of top_k / top_p (greedy keeps one token, whose truncated log-prob would be 0 whatever the policy).
LogprobScoring logprob_scoring(float sampling_temperature, int64_t top_k, float top_p, bool truncated_space);

// Throws "WHAT: temperature T is not ..." (or names top_k / top_p) unless the temperature is finite and
// >= kMinTemperature, top_k >= 0 and top_p in (0, 1]: for values read back from a wire message or a file.
void check_logprob_scoring(const LogprobScoring& scoring, const std::string& what);

}  // namespace rlcpp
