#include "trainer/optim_config.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace rlcpp {

void OptimConfig::validate() const {
  RLCPP_CHECK(lr > 0, "config key 'optim.lr': must be positive, got " << lr);
  RLCPP_CHECK(beta1 >= 0 && beta1 < 1, "config key 'optim.beta1': must be in [0, 1), got " << beta1);
  RLCPP_CHECK(beta2 >= 0 && beta2 < 1, "config key 'optim.beta2': must be in [0, 1), got " << beta2);
  RLCPP_CHECK(eps > 0, "config key 'optim.eps': must be positive, got " << eps);
  RLCPP_CHECK(grad_clip >= 0, "config key 'optim.grad_clip': must be >= 0, got " << grad_clip);
  RLCPP_CHECK(schedule == "constant" || schedule == "linear_warmup" || schedule == "cosine",
              "config key 'optim.schedule': '" << schedule << "' is not one of constant, linear_warmup, cosine");
  RLCPP_CHECK(warmup_steps >= 0, "config key 'optim.warmup_steps': must be >= 0, got " << warmup_steps);
  RLCPP_CHECK(min_lr_ratio >= 0 && min_lr_ratio <= 1,
              "config key 'optim.min_lr_ratio': the cosine schedule's floor as a fraction of lr must be in [0, 1], "
              "got " << min_lr_ratio);
  RLCPP_CHECK(weight_decay >= 0, "config key 'optim.weight_decay': must be >= 0, got " << weight_decay);
  RLCPP_CHECK(max_bad_steps >= 1, "config key 'optim.max_bad_steps': must be >= 1, got " << max_bad_steps);
}

double OptimConfig::lr_at(int64_t step, int64_t total_steps) const {
  if (schedule == "constant") return lr;
  if (step < warmup_steps) return lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  if (schedule == "linear_warmup") return lr;
  const double span = std::max<int64_t>(1, total_steps - warmup_steps);
  const double progress = std::clamp(static_cast<double>(step - warmup_steps) / span, 0.0, 1.0);
  return lr * (min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + std::cos(M_PI * progress)));
}

}  // namespace rlcpp
