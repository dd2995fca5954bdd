// RMSNorm (Hugging Face Llama) on the CPU: out = weight * (x * rsqrt(mean(x^2) + eps)).
#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dtype_round.h"
#include "kernels/cpu/lanes8.h"

namespace rlcpp::cpu {
namespace {

// Rows are processed eight at a time: their reductions over c run as eight independent vector chains (one
// lane-8 vector per row, reduced by one transposing tree) instead of one latency-bound chain per row. Each row's
// sum is still its own: lane l adds the products of columns l, l + 8, ... in increasing order (fused
// multiply-adds), then the lanes combine as ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)).
constexpr int64_t kRowGroup = 8;

// s[t] = sum_j a[t][j] * b[t][j] * (w ? w[j] : 1) over j < c, for the kRowGroup rows a[t], b[t].
inline void row_sums(const float* const* a, const float* const* b, const float* w, int64_t c, float* s) {
  F8 acc[kRowGroup];
  for (int t = 0; t < kRowGroup; ++t) acc[t] = f8_zero();
  const int64_t c8 = c / 8 * 8, tail = c - c8;
  for (int64_t j = 0; j < c8; j += 8) {
    const F8 wj = w ? f8_load(w + j) : f8_zero();
    for (int t = 0; t < kRowGroup; ++t) {
      const F8 at = w ? f8_mul(f8_load(a[t] + j), wj) : f8_load(a[t] + j);
      acc[t] = f8_fma(at, f8_load(b[t] + j), acc[t]);
    }
  }
  if (tail) {
    const F8 wj = w ? f8_load_partial(w + c8, tail) : f8_zero();
    for (int t = 0; t < kRowGroup; ++t) {
      const F8 at = w ? f8_mul(f8_load_partial(a[t] + c8, tail), wj) : f8_load_partial(a[t] + c8, tail);
      acc[t] = f8_fma(at, f8_load_partial(b[t] + c8, tail), acc[t]);
    }
  }
  f8_reduce8(acc, s);
}

// The kRowGroup row pointers of group i0 (rows past n repeat the last row; their sums are ignored).
inline void group_rows(const float* base, int64_t i0, int64_t n, int64_t c, const float** rows) {
  for (int64_t t = 0; t < kRowGroup; ++t) rows[t] = base + std::min(i0 + t, n - 1) * c;
}

}  // namespace

void rmsnorm_forward(const float* x, const float* weight, float eps, float* out, float* rstd, int64_t n, int64_t c,
                     DType round) {
  const int64_t groups = (n + kRowGroup - 1) / kRowGroup;
#pragma omp parallel for if (n * c > kParallelMinWork)
  for (int64_t gi = 0; gi < groups; ++gi) {
    const int64_t i0 = gi * kRowGroup;
    const float* rows[kRowGroup];
    group_rows(x, i0, n, c, rows);
    float sum_sq[kRowGroup];
    row_sums(rows, rows, nullptr, c, sum_sq);
    for (int64_t i = i0; i < std::min(n, i0 + kRowGroup); ++i) {
      const float* xi = x + i * c;
      float* oi = out + i * c;
      const float r = 1.0f / std::sqrt(sum_sq[i - i0] / static_cast<float>(c) + eps);
      rstd[i] = r;
      if (round == DType::kBF16) {
        for (int64_t j = 0; j < c; ++j) oi[j] = bf16_round(bf16_round(weight[j]) * bf16_round(xi[j] * r));
      } else if (round == DType::kF16) {
        for (int64_t j = 0; j < c; ++j) oi[j] = f16_round(f16_round(weight[j]) * f16_round(xi[j] * r));
      } else {
        for (int64_t j = 0; j < c; ++j) oi[j] = weight[j] * (xi[j] * r);
      }
    }
  }
}

void rmsnorm_backward(const float* dout, const float* x, const float* weight, const float* rstd, float* dx,
                      float* dweight, int64_t n, int64_t c) {
  // y_j = w_j x_j r with r = (mean(x^2) + eps)^(-1/2), so
  // dx_j = r w_j g_j - (r^3 / c) x_j sum_k(g_k w_k x_k), dw_j = sum_rows g_j x_j r.
  const float inv_c = 1.0f / static_cast<float>(c);
  const int64_t block_width = column_block_width(c);
  const int64_t blocks = (c + block_width - 1) / block_width;
  const int64_t groups = (n + kRowGroup - 1) / kRowGroup;
#pragma omp parallel if (n * c > kParallelMinWork)
  {
#pragma omp for
    for (int64_t gi = 0; gi < groups; ++gi) {
      const int64_t i0 = gi * kRowGroup;
      const float *g_rows[kRowGroup], *x_rows[kRowGroup];
      group_rows(dout, i0, n, c, g_rows);
      group_rows(x, i0, n, c, x_rows);
      float gwx[kRowGroup];
      row_sums(g_rows, x_rows, weight, c, gwx);
      for (int64_t i = i0; i < std::min(n, i0 + kRowGroup); ++i) {
        const float* gi_row = dout + i * c;
        const float* xi = x + i * c;
        float* dxi = dx + i * c;
        const float r = rstd[i];
        const float coef = r * r * r * inv_c * gwx[i - i0];
        for (int64_t k = 0; k < c; ++k) dxi[k] += r * weight[k] * gi_row[k] - coef * xi[k];
      }
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
