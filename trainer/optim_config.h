// Optimizer and schedule settings shared by every trainer recipe.
#pragma once

#include <cstdint>
#include <string>

#include "core/config.h"

namespace rlcpp {

struct OptimConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double grad_clip = 1.0;  // global-norm clip; 0 disables
  std::string schedule = "constant";  // constant | linear_warmup | cosine
  int64_t warmup_steps = 0;
  double min_lr_ratio = 0.0;  // cosine floor as a fraction of lr
  int64_t max_bad_steps = 5;  // the run stops at the max_bad_steps-th non-finite (skipped) step in a row

  void validate() const;
  // Learning rate for optimizer step `step` (0-based) of `total_steps`.
  double lr_at(int64_t step, int64_t total_steps) const;

  template <class V> void visit(V& v) {
    v("lr", lr, "peak learning rate");
    v("beta1", beta1, "AdamW beta1");
    v("beta2", beta2, "AdamW beta2");
    v("eps", eps, "AdamW epsilon");
    v("weight_decay", weight_decay, "decoupled weight decay");
    v("grad_clip", grad_clip, "max global gradient norm (0 = off)");
    v("schedule", schedule, "constant | linear_warmup | cosine (cosine also warms up for warmup_steps)");
    v("warmup_steps", warmup_steps, "linear warm-up steps from 0 to lr");
    v("min_lr_ratio", min_lr_ratio, "cosine floor as a fraction of lr");
    v("max_bad_steps", max_bad_steps, "the run stops at this many non-finite (skipped) steps in a row");
  }
};

}  // namespace rlcpp
