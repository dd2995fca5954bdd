// AdamW on the CPU, in the order of torch.optim.AdamW's single-tensor path (torch 1.13 _single_tensor_adamw).
#include <charconv>
#include <cmath>

#include "kernels/cpu/cpu_kernels.h"

namespace rlcpp::cpu {
namespace {

// The double a Python config would hold for a hyperparameter that reached us as a float: the shortest decimal
// that round-trips the float (0.9f -> "0.9" -> 0.9). torch computes 1 - beta1, lr * wd, lr / bc1 ... from the
// Python double; from (double)0.9f = 0.8999999761... they round to different floats and m drifts ~1e-7 per step.
double typed_value(float x) {
  char buf[32];
  const auto printed = std::to_chars(buf, buf + sizeof buf, x);
  double value = x;
  std::from_chars(buf, printed.ptr, value);
  return value;
}

}  // namespace

void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, float lr, float beta1, float beta2,
                float eps, float weight_decay, int64_t step) {
  // torch computes these scalars in Python double and casts each to float when it meets a float tensor.
  const double lr_d = typed_value(lr), b1 = typed_value(beta1), b2 = typed_value(beta2);
  const float decay = static_cast<float>(1.0 - lr_d * typed_value(weight_decay));
  const float one_minus_b1 = static_cast<float>(1.0 - b1);
  const float one_minus_b2 = static_cast<float>(1.0 - b2);
  const double bias_correction1 = 1.0 - std::pow(b1, static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(b2, static_cast<double>(step));
  const float neg_step_size = static_cast<float>(-(lr_d / bias_correction1));
  const float bc2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  // The loop stays scalar: with math-errno (GCC's default) each sqrt keeps an errno branch. -fno-math-errno on
  // this target would vectorise it (measured 4x, 2.5 -> 0.6 ms for 742k parameters on one core).
#pragma omp parallel for simd if (parallel : n > kParallelMinWork)
  for (int64_t i = 0; i < n; ++i) {
    // One line per torch op. Where ATen's CPU kernel fuses (add_ with alpha and addcmul_ run a vectorised
    // fmadd), std::fma does too; everywhere else each op rounds on its own. This reproduces torch 1.13 bit for
    // bit on x86 (checked on 5 steps of 1000 parameters).
    const float g = grad[i];
    const float p = param[i] * decay;                                // param.mul_(1 - lr * wd)
    const float mi = std::fma(g, one_minus_b1, m[i] * beta1);        // exp_avg.mul_(b1).add_(g, alpha=1-b1)
    const float vi = std::fma(one_minus_b2 * g, g, v[i] * beta2);    // exp_avg_sq.mul_(b2).addcmul_(g, g, 1-b2)
    const float denom = std::sqrt(vi) / bc2_sqrt + eps;              // (exp_avg_sq.sqrt() / bc2_sqrt).add_(eps)
    param[i] = p + neg_step_size * mi / denom;                       // param.addcdiv_(exp_avg, denom, -step_size)
    m[i] = mi;
    v[i] = vi;
  }
}

}  // namespace rlcpp::cpu
