// One optimizer step over a global batch split into micro-batches: forward, loss gradient, backward and
// gradient accumulation per micro-batch, then clipping and AdamW. The loss callback normalises by the GLOBAL
// batch (token count or sequence count of all micro-batches), so the sum over micro-batches is the global loss
// and the update does not depend on how the batch was split.
#pragma once

#include <functional>
#include <vector>

#include "model/adamw.h"
#include "model/transformer.h"
#include "trainer/optim_config.h"

namespace rlcpp {

// Fills dlogp (N) (and dentropy (N) when non-null) for micro-batch `micro` from its forward outputs and returns
// that micro-batch's contribution to the loss.
using MicroLossFn =
    std::function<double(size_t micro, const Activations& acts, std::vector<float>& dlogp, std::vector<float>* dentropy)>;

struct UpdateResult {
  double loss = 0;
  double grad_norm = 0;  // before clipping
  double lr = 0;
  bool skipped = false;  // non-finite loss or gradient: weights and optimizer state untouched
  int64_t tokens = 0;
};

class PolicyUpdater {
 public:
  PolicyUpdater(const Transformer& model, ParameterStore& params, const OptimConfig& config);

  // total_steps sizes the LR schedule. Throws when max_bad_steps non-finite steps come in a row.
  UpdateResult step(const std::vector<PackedBatch>& micro_batches, const ForwardOptions& options,
                    const MicroLossFn& loss_fn, int64_t total_steps);

  AdamW& optimizer() { return adamw_; }
  const ParameterStore& grads() const { return grads_; }
  int64_t bad_steps_in_a_row() const { return bad_in_a_row_; }
  int64_t bad_steps_total() const { return bad_total_; }

 private:
  const Transformer& model_;
  ParameterStore& params_;
  OptimConfig config_;
  ParameterStore grads_;
  AdamW adamw_;
  Activations acts_;
  int64_t bad_in_a_row_ = 0;
  int64_t bad_total_ = 0;
};

}  // namespace rlcpp
