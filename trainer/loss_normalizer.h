// How per-token losses become one number, over the GLOBAL batch.
//
// Layout shared by every loss in trainer/: a batch of B sequences' response tokens, flattened. Sequence i owns
// tokens [cu[i], cu[i+1]) of every per-token array (cu has B+1 entries, cu[0] = 0, non-decreasing); mask[t] >= 0
// weighs token t (0 = not trained on, e.g. a tool output or padding).
//
// A step's global batch is cut into micro-batches (and data-parallel shards) of whole sequences. The loss of
// the step is the sum of the micro-batch losses, each computed with a LossNormalizer counted ONCE over the
// global batch, so the result (and every gradient) does not depend on the cut. Gradients from several ranks
// must therefore be SUMMED, not averaged (verl multiplies by dp_size to undo FSDP's averaging instead).
//
// Modes (verl's agg_loss with global batch_num_tokens / global_batch_size / loss_scale_factor), with l the
// per-token loss, m the mask, N = num_tokens = sum of m over the global batch, S = num_seqs = sequences of the
// global batch whose mask sums to > 0, n_i = sum of m over sequence i, K = token_sum_norm:
//   token-mean              : sum_t m_t l_t / N
//   seq-mean-token-sum      : sum_i (sum_{t in i} m_t l_t) / S
//   seq-mean-token-mean     : sum_i (sum_{t in i} m_t l_t / n_i) / S      (sequences with n_i = 0 are skipped;
//                                                                          verl adds 1e-8 to n_i, we do not)
//   seq-mean-token-sum-norm : sum_i (sum_{t in i} m_t l_t) / (S K)        (Dr.GRPO; K constant, e.g. the
//                                                                          maximum response length)
// A normaliser with N = 0 or S = 0 gives weight 0 to every token (an empty batch has loss 0, not NaN).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace rlcpp {

enum class LossAgg { kTokenMean, kSeqMeanTokenSum, kSeqMeanTokenMean, kSeqMeanTokenSumNorm };

// Parses "token-mean" | "seq-mean-token-sum" | "seq-mean-token-mean" | "seq-mean-token-sum-norm"; the error
// names `key`, the bad value and the valid choices.
LossAgg parse_loss_agg(const std::string& text, const std::string& key);
const char* loss_agg_name(LossAgg agg);

// Throws unless cu is a valid offset array (B+1 entries, starts at 0, non-decreasing, ends at num_tokens).
void check_offsets(std::span<const int64_t> cu, size_t num_tokens, const char* what);
// Throws unless `array` has num_tokens entries (or is empty when `optional`).
void check_token_array(std::span<const float> array, size_t num_tokens, const char* name, bool optional = false);

struct LossNormalizer {
  LossAgg agg = LossAgg::kTokenMean;
  double num_tokens = 0;      // N: sum of the mask over the global batch
  double num_seqs = 0;        // S: sequences of the global batch with mask sum > 0
  double token_sum_norm = 1;  // K: seq-mean-token-sum-norm divisor

  // Counts N and S over a batch (the whole global batch, or one shard to merge()). token_sum_norm must be > 0
  // for seq-mean-token-sum-norm and is ignored otherwise.
  static LossNormalizer over_batch(LossAgg agg, std::span<const int64_t> cu, std::span<const float> mask,
                                   double token_sum_norm = 1);
  // Adds the counts of another shard of the same global batch (e.g. after an all-reduce of N and S).
  void merge(const LossNormalizer& shard);

  // Per-token weights w (size T of this micro-batch, whole sequences) with loss = sum_t w[t] * l[t];
  // w[t] = 0 where mask[t] = 0.
  std::vector<double> token_weights(std::span<const int64_t> cu, std::span<const float> mask) const;
};

}  // namespace rlcpp
