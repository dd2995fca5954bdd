// Reference RMSNorm (Hugging Face LlamaRMSNorm): out = weight * (x * rsqrt(mean(x^2) + eps)); in bf16 or fp16,
// out = round(round(weight) * round(x * rstd)).
#include <cmath>

#include "kernels/cpu/dtype_round.h"
#include "kernels/reference/reference_kernels.h"

namespace rlcpp::ref {
namespace {

float rounded(float x, DType round) {
  if (round == DType::kBF16) return cpu::bf16_round_reference(x);
  if (round == DType::kF16) return cpu::f16_round_reference(x);
  return x;
}

}  // namespace

void rmsnorm_forward(const float* x, const float* weight, float eps, float* out, float* rstd, int64_t n, int64_t c,
                     DType round) {
  for (int64_t i = 0; i < n; ++i) {
    const float* xi = x + i * c;
    float sum_sq = 0.0f;
    for (int64_t j = 0; j < c; ++j) sum_sq += xi[j] * xi[j];
    const float r = 1.0f / std::sqrt(sum_sq / static_cast<float>(c) + eps);
    rstd[i] = r;
    for (int64_t j = 0; j < c; ++j)
      out[i * c + j] = round == DType::kF32 ? weight[j] * (xi[j] * r)
                                            : rounded(rounded(weight[j], round) * rounded(xi[j] * r, round), round);
  }
}

void rmsnorm_backward(const float* dout, const float* x, const float* weight, const float* rstd, float* dx,
                      float* dweight, int64_t n, int64_t c) {
  // y_j = w_j x_j r, r = (mean(x^2) + eps)^(-1/2): dx_j = r w_j g_j - (r^3 / c) x_j sum_k g_k w_k x_k,
  // dw_j = sum over rows of g_j x_j r.
  for (int64_t i = 0; i < n; ++i) {
    const float* g = dout + i * c;
    const float* xi = x + i * c;
    const float r = rstd[i];
    float gwx = 0.0f;
    for (int64_t k = 0; k < c; ++k) gwx += g[k] * weight[k] * xi[k];
    for (int64_t j = 0; j < c; ++j) dx[i * c + j] += r * weight[j] * g[j] - r * r * r / static_cast<float>(c) * gwx * xi[j];
  }
  for (int64_t j = 0; j < c; ++j) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += dout[i * c + j] * x[i * c + j] * rstd[i];
    dweight[j] += sum;
  }
}

}  // namespace rlcpp::ref
