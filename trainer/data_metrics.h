// Statistics of a global batch before the update, as verl's compute_data_metrics reports them (without the
// "critic/" prefix, which the caller adds): score/{mean,max,min} and rewards/{mean,max,min} per sequence;
// advantages, returns and values /{mean,max,min} over tokens with mask > 0; vf_explained_var
// = 1 - var(returns - values) / (var(returns) + 1e-5), unbiased variances over those tokens.
#pragma once

#include <cstdint>
#include <span>

#include "trainer/loss_metrics.h"

namespace rlcpp {

struct DataMetricsInputs {
  std::span<const int64_t> cu;          // (B+1) sequence offsets
  std::span<const float> mask;          // (T)
  std::span<const float> scores;        // (B) task scores; empty to skip
  std::span<const float> seq_rewards;   // (B) sequence rewards after any KL penalty; empty to skip
  std::span<const float> advantages;    // (T); empty to skip
  std::span<const float> returns;       // (T); empty to skip
  std::span<const float> values;        // (T) critic values; empty to skip (vf_explained_var needs returns too)
};

LossMetrics data_metrics(const DataMetricsInputs& in);

}  // namespace rlcpp
