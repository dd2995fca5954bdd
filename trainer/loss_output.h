// What every loss in trainer/ returns for one micro-batch: its contribution to the step's loss (already divided
// by the global normaliser, so micro-batch losses add up), the gradients the model backpropagates, and metrics.
#pragma once

#include <vector>

#include "trainer/loss_metrics.h"

namespace rlcpp {

struct LossOutput {
  double loss = 0;
  std::vector<float> dlogp;     // (T) dL/dlogp per response token; empty for the value loss
  std::vector<float> dentropy;  // (T) dL/dentropy; empty unless an entropy bonus is in the loss
  std::vector<float> dvalue;    // (T) dL/dvalue; value loss only
  LossMetrics metrics;
};

}  // namespace rlcpp
