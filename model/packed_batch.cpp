#include "model/packed_batch.h"

#include "core/error.h"

namespace rlcpp {

PackedBatch PackedBatch::from_sequences(const std::vector<std::vector<int32_t>>& sequences,
                                        const std::vector<int32_t>& score_from) {
  RLCPP_CHECK(score_from.empty() || score_from.size() == sequences.size(),
              "PackedBatch: score_from has " << score_from.size() << " entries for " << sequences.size()
                                             << " sequences");
  PackedBatch b;
  b.cu_seqlens.push_back(0);
  for (size_t s = 0; s < sequences.size(); ++s) {
    const auto& seq = sequences[s];
    RLCPP_CHECK(!seq.empty(), "PackedBatch: sequence " << s << " is empty");
    int32_t first = score_from.empty() ? 0 : score_from[s];
    for (size_t t = 0; t < seq.size(); ++t) {
      b.tokens.push_back(seq[t]);
      b.positions.push_back(static_cast<int32_t>(t));
      bool scored = t + 1 < seq.size() && static_cast<int32_t>(t) >= first;
      b.targets.push_back(scored ? seq[t + 1] : -1);
    }
    b.cu_seqlens.push_back(static_cast<int32_t>(b.tokens.size()));
  }
  return b;
}

void PackedBatch::validate(int64_t vocab_size, int64_t max_positions) const {
  RLCPP_CHECK(targets.size() == tokens.size() && positions.size() == tokens.size(),
              "PackedBatch: tokens, targets and positions differ in length");
  RLCPP_CHECK(!cu_seqlens.empty() && cu_seqlens.front() == 0 && cu_seqlens.back() == num_tokens(),
              "PackedBatch: cu_seqlens must run from 0 to the token count " << num_tokens());
  for (int64_t s = 0; s < num_sequences(); ++s) {
    int32_t begin = cu_seqlens[s], end = cu_seqlens[s + 1];
    RLCPP_CHECK(begin < end, "PackedBatch: sequence " << s << " is empty");
    RLCPP_CHECK(end - begin <= max_positions, "PackedBatch: sequence " << s << " has " << end - begin
                                                                        << " tokens, more than the context of "
                                                                        << max_positions);
    for (int32_t i = begin; i < end; ++i) {
      RLCPP_CHECK(tokens[i] >= 0 && tokens[i] < vocab_size,
                  "PackedBatch: sequence " << s << " token " << i - begin << " has id " << tokens[i]
                                           << " outside the vocabulary of " << vocab_size);
      RLCPP_CHECK(targets[i] >= -1 && targets[i] < vocab_size,
                  "PackedBatch: sequence " << s << " target " << i - begin << " has id " << targets[i]);
      RLCPP_CHECK(positions[i] == i - begin, "PackedBatch: sequence " << s << " position " << i - begin
                                                                      << " is " << positions[i]);
    }
  }
}

}  // namespace rlcpp
