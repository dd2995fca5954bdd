// Reference AdamW: torch.optim.AdamW's update (decoupled weight decay, bias-corrected moments), written out.
#include <cmath>

#include "kernels/reference/reference_kernels.h"

namespace rlcpp::ref {

void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, float lr, float beta1, float beta2,
                float eps, float weight_decay, int64_t step) {
  const double bias_correction1 = 1.0 - std::pow(double(beta1), double(step));
  const double bias_correction2 = 1.0 - std::pow(double(beta2), double(step));
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    m[i] = beta1 * m[i] + (1.0f - beta1) * g;
    v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
    const float denom = static_cast<float>(std::sqrt(double(v[i])) / std::sqrt(bias_correction2)) + eps;
    param[i] = param[i] * (1.0f - lr * weight_decay) - static_cast<float>(lr / bias_correction1) * m[i] / denom;
  }
}

}  // namespace rlcpp::ref
