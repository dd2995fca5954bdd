// AdamW on the CPU, in the order of torch.optim.AdamW's single-tensor path (torch 1.13 _single_tensor_adamw).
#include <cmath>

#include "kernels/cpu/cpu_kernels.h"

namespace rlcpp::cpu {

void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, float lr, float beta1, float beta2,
                float eps, float weight_decay, int64_t step) {
  // torch computes these scalars in Python double and casts each to float when it meets a float tensor.
  const double lr_d = lr;
  const float decay = static_cast<float>(1.0 - lr_d * weight_decay);
  const float one_minus_b1 = static_cast<float>(1.0 - static_cast<double>(beta1));
  const float one_minus_b2 = static_cast<float>(1.0 - static_cast<double>(beta2));
  const double bias_correction1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(step));
  const float neg_step_size = static_cast<float>(-(lr_d / bias_correction1));
  const float bc2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
#pragma omp parallel for simd if (n > kParallelMinWork)
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    const float p = param[i] * decay;                              // param.mul_(1 - lr * wd)
    const float mi = m[i] * beta1 + one_minus_b1 * g;              // exp_avg.mul_(b1).add_(g, alpha=1-b1)
    const float vi = v[i] * beta2 + one_minus_b2 * g * g;          // exp_avg_sq.mul_(b2).addcmul_(g, g, 1-b2)
    const float denom = std::sqrt(vi) / bc2_sqrt + eps;            // (exp_avg_sq.sqrt() / bc2_sqrt).add_(eps)
    param[i] = p + neg_step_size * (mi / denom);                   // param.addcdiv_(exp_avg, denom, -step_size)
    m[i] = mi;
    v[i] = vi;
  }
}

}  // namespace rlcpp::cpu
