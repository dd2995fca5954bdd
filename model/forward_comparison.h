// Where two computations of the same model part ways (the mismatch lab's "where it enters" and full-vocabulary
// view): the same packed batch through two (model, weights) pairs — the rollout's numerics and the trainer's,
// or an engine copy of the weights and the trainer's — comparing the residual stream after every stage and the
// whole next-token distributions at every scored position.
//
// Stages: 0 = the embedding output (layer 0's input), l + 1 = the output of layer l, L + 1 = the final norm's
// output, L + 2 = the logits. max_abs[s] = max |a - b| over the stage's elements; the first stage whose
// difference passes `threshold` is where the mismatch enters (-1: none does).
//
// The full-vocabulary figures, per scored position (targets >= 0) with p = softmax(logits_a / T) (the engine's
// side) and q = softmax(logits_b / T): KL(p || q) = sum_v p_v (log p_v - log q_v) and total variation
// TV = 1/2 sum_v |p_v - q_v|, in double; their mean and max over positions. The sampled-token figures look at
// one entry of these distributions; these see the whole of them (mass moved between tokens never sampled).
//
// Both sides run the training forward (model/transformer.h), each in its own numerics: for a batch-invariant
// engine that is the engine's own computation bit for bit (the probe checks it), so the comparison stands for
// the engine's decode. Batch dependence (numerics.batch_invariant = false) is the one source it cannot show:
// the training forward's products are the invariant ones.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/packed_batch.h"
#include "model/transformer.h"

namespace rlcpp {

struct ForwardComparison {
  std::vector<double> max_abs;  // per stage (see above)
  int64_t first_stage = -1;     // first stage with max_abs > threshold, -1 for none
  double full_kl_mean = 0, full_kl_max = 0;
  double full_tv_mean = 0, full_tv_max = 0;
  int64_t positions = 0;

  // PREFIX full_kl, full_kl_max, full_tv, full_tv_max, first_stage, stage/<name>/max_abs (embed, layer_<l>,
  // final_norm, logits).
  std::map<std::string, double> metrics(const std::string& prefix) const;
};

// The name of stage s of a model with `layers` layers: "embed", "layer_<l>", "final_norm", "logits".
std::string stage_name(int64_t stage, int64_t layers);

ForwardComparison compare_forward(const ExecContext& exec, const Transformer& a, const ParameterStore& a_params,
                                  const Transformer& b, const ParameterStore& b_params, const PackedBatch& batch,
                                  float temperature, double threshold);

}  // namespace rlcpp
