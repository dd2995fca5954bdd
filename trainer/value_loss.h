// The critic's clipped value loss (verl compute_value_loss):
//   v_clip = clip(v, old_v - value_clip, old_v + value_clip)   (verl's clip_by_value: max(min(v, hi), lo))
//   l      = max((v - R)^2, (v_clip - R)^2)
//   loss   = 0.5 agg(l)                                           (value_clip = 0: l = (v - R)^2)
// with R the returns and agg the LossNormalizer over the global batch. dL/dvalue follows torch autograd (ties
// between the two branches, or at a clip bound, split the gradient in half).
// Metrics: vf_loss, vf_clipfrac (share of tokens where the clipped branch is larger), vpred_mean.
#pragma once

#include <cstdint>
#include <span>

#include "trainer/loss_normalizer.h"
#include "trainer/loss_output.h"

namespace rlcpp {

struct ValueLossInputs {
  std::span<const int64_t> cu;        // (B+1) sequence offsets
  std::span<const float> values;      // (T) the critic's current predictions: the differentiated input
  std::span<const float> old_values;  // (T) predictions the step started from
  std::span<const float> returns;     // (T) GAE returns
  std::span<const float> mask;        // (T)
};

LossOutput value_loss(const ValueLossInputs& in, double value_clip, const LossNormalizer& norm);

}  // namespace rlcpp
