// AdamW on CUDA (kernels/cpu/adamw_cpu.cpp mirrored).
#include <cmath>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"

namespace rlcpp::cuda {
namespace {

// torch.optim.AdamW single-tensor order; the scalars come from the host, computed in double as torch does.
__global__ void adamw_kernel(float* param, const float* grad, float* m, float* v, int64_t n, float decay,
                             float beta1, float beta2, float one_minus_b1, float one_minus_b2, float neg_step_size,
                             float bc2_sqrt, float eps) {
  for (int64_t i = thread_index(); i < n; i += thread_stride()) {
    const float g = grad[i];
    const float p = param[i] * decay;
    const float mi = m[i] * beta1 + one_minus_b1 * g;
    const float vi = v[i] * beta2 + one_minus_b2 * g * g;
    const float denom = sqrtf(vi) / bc2_sqrt + eps;
    param[i] = p + neg_step_size * (mi / denom);
    m[i] = mi;
    v[i] = vi;
  }
}

}  // namespace

cudaError_t adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, float lr, float beta1,
                       float beta2, float eps, float weight_decay, int64_t step, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const double lr_d = lr;
  const double bias_correction1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(step));
  adamw_kernel<<<grid_for(n), kThreads, 0, stream>>>(
      param, grad, m, v, n, static_cast<float>(1.0 - lr_d * weight_decay), beta1, beta2,
      static_cast<float>(1.0 - static_cast<double>(beta1)), static_cast<float>(1.0 - static_cast<double>(beta2)),
      static_cast<float>(-(lr_d / bias_correction1)), static_cast<float>(std::sqrt(bias_correction2)), eps);
  return cudaGetLastError();
}

}  // namespace rlcpp::cuda
