// RMSNorm (Hugging Face Llama) on the CPU: out = weight * (x * rsqrt(mean(x^2) + eps)).
#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu_kernels.h"

namespace rlcpp::cpu {
namespace {


// Sum of a[i]*b[i] with eight lanes combined in a fixed tree: vectorises, and the order depends only on c.
inline float dot8(const float* a, const float* b, int64_t c) {
  float lane[8] = {};
  int64_t i = 0;
  for (; i + 8 <= c; i += 8)
    for (int j = 0; j < 8; ++j) lane[j] += a[i + j] * b[i + j];
  for (int j = 0; i < c; ++i, ++j) lane[j] += a[i] * b[i];
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

}  // namespace

void rmsnorm_forward(const float* x, const float* weight, float eps, float* out, float* rstd, int64_t n, int64_t c) {
#pragma omp parallel for if (n * c > kParallelMinWork)
  for (int64_t i = 0; i < n; ++i) {
    const float* xi = x + i * c;
    float* oi = out + i * c;
    const float mean_sq = dot8(xi, xi, c) / static_cast<float>(c);
    const float r = 1.0f / std::sqrt(mean_sq + eps);
    rstd[i] = r;
    for (int64_t j = 0; j < c; ++j) oi[j] = weight[j] * (xi[j] * r);
  }
}

void rmsnorm_backward(const float* dout, const float* x, const float* weight, const float* rstd, float* dx,
                      float* dweight, int64_t n, int64_t c) {
  // y_j = w_j x_j r with r = (mean(x^2) + eps)^(-1/2), so
  // dx_j = r w_j g_j - (r^3 / c) x_j sum_k(g_k w_k x_k), dw_j = sum_rows g_j x_j r.
  const float inv_c = 1.0f / static_cast<float>(c);
  const int64_t block_width = column_block_width(c);
  const int64_t blocks = (c + block_width - 1) / block_width;
#pragma omp parallel if (n * c > kParallelMinWork)
  {
#pragma omp for
    for (int64_t i = 0; i < n; ++i) {
      const float* gi = dout + i * c;
      const float* xi = x + i * c;
      float* dxi = dx + i * c;
      const float r = rstd[i];
      float gwx_lane[8] = {};
      int64_t j = 0;
      for (; j + 8 <= c; j += 8)
        for (int l = 0; l < 8; ++l) gwx_lane[l] += gi[j + l] * weight[j + l] * xi[j + l];
      for (int l = 0; j < c; ++j, ++l) gwx_lane[l] += gi[j] * weight[j] * xi[j];
      const float gwx = ((gwx_lane[0] + gwx_lane[1]) + (gwx_lane[2] + gwx_lane[3])) +
                        ((gwx_lane[4] + gwx_lane[5]) + (gwx_lane[6] + gwx_lane[7]));
      const float coef = r * r * r * inv_c * gwx;
      for (int64_t k = 0; k < c; ++k) dxi[k] += r * weight[k] * gi[k] - coef * xi[k];
    }
    // dweight: each task owns a block of columns and adds rows in order.
#pragma omp for
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t c0 = blk * block_width;
      const int64_t width = std::min(block_width, c - c0);
      float acc[kMaxColumnBlock] = {};
      for (int64_t i = 0; i < n; ++i) {
        const float* gi = dout + i * c + c0;
        const float* xi = x + i * c + c0;
        const float r = rstd[i];
        for (int64_t k = 0; k < width; ++k) acc[k] += gi[k] * xi[k] * r;
      }
      for (int64_t k = 0; k < width; ++k) dweight[c0 + k] += acc[k];
    }
  }
}

}  // namespace rlcpp::cpu
