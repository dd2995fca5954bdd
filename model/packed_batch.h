// A training batch of whole sequences packed back to back (no padding): tokens, the next-token target of each
// position (-1 where there is none or it is not scored), and sequence boundaries.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace rlcpp {

struct PackedBatch {
  std::vector<int32_t> tokens;      // (N)
  std::vector<int32_t> targets;     // (N): token predicted at each position, -1 for none
  std::vector<int32_t> positions;   // (N): position within its sequence
  std::vector<int32_t> cu_seqlens;  // (B+1): sequence b is rows [cu[b], cu[b+1])

  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int64_t num_sequences() const { return static_cast<int64_t>(cu_seqlens.size()) - 1; }

  // Targets are the next token; the last position of each sequence has none. `score_from[b]`, when given,
  // is the first position whose prediction is scored (e.g. the prompt length - 1): earlier targets become -1.
  static PackedBatch from_sequences(const std::vector<std::vector<int32_t>>& sequences,
                                    const std::vector<int32_t>& score_from = {});
  // Checks ids against the vocabulary and lengths against the context; errors name the sequence.
  void validate(int64_t vocab_size, int64_t max_positions) const;
};

}  // namespace rlcpp
