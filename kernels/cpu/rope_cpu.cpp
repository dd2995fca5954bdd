// Rotary position embedding (Hugging Face Llama, rotate-half convention) on the CPU.
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"

namespace rlcpp::cpu {
namespace {

// dst = each (src[i], src[i + D/2]) pair of every head of every row rotated by +angle (sign = 1) or -angle
// (sign = -1); src and dst rows are `src_stride` and `dst_stride` floats apart (dst may be src).
void rotate(const float* src, int64_t src_stride, float* dst, int64_t dst_stride, const int32_t* positions,
            const float* table, int64_t n, int64_t heads, int64_t head_dim, float sign) {
  const int64_t half = head_dim / 2;
#pragma omp parallel for if (n * heads * head_dim > kParallelMinWork)
  for (int64_t i = 0; i < n; ++i) {
    const float* cos_row = table + static_cast<int64_t>(positions[i]) * head_dim;
    const float* sin_row = cos_row + half;
    for (int64_t h = 0; h < heads; ++h) {
      const float* lo = src + i * src_stride + h * head_dim;
      const float* hi = lo + half;
      float* out_lo = dst + i * dst_stride + h * head_dim;
      float* out_hi = out_lo + half;
      for (int64_t j = 0; j < half; ++j) {
        const float c = cos_row[j];
        const float s = sign * sin_row[j];
        const float a = lo[j];
        const float b = hi[j];
        // Hugging Face: q * cos + rotate_half(q) * sin, rotate_half(q) = [-q2, q1].
        out_lo[j] = a * c - b * s;
        out_hi[j] = b * c + a * s;
      }
    }
  }
}

void copy_rows(const float* src, int64_t src_stride, float* dst, int64_t dst_stride, int64_t n, int64_t width) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * dst_stride, src + i * src_stride, width * sizeof(float));
}

}  // namespace

void rope_table(float* table, int64_t max_positions, int64_t head_dim, float theta) {
  const int64_t half = head_dim / 2;
  // As transformers' LlamaRotaryEmbedding: inv_freq = 1 / theta^(arange(0, D, 2) / D), all in float32, and the
  // angle is the float product position * inv_freq. The frequencies once, not per position: a model of 2^22
  // positions took seconds of pow calls.
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    inv_freq[i] = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
  for (int64_t p = 0; p < max_positions; ++p) {
    float* row = table + p * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(p) * inv_freq[i];
      row[i] = std::cos(angle);
      row[half + i] = std::sin(angle);
    }
  }
}

void rope_forward(float* x, const int32_t* positions, const float* table, int64_t n, int64_t heads,
                  int64_t head_dim) {
  rotate(x, heads * head_dim, x, heads * head_dim, positions, table, n, heads, head_dim, 1.0f);
}

void rope_backward(float* dx, const int32_t* positions, const float* table, int64_t n, int64_t heads,
                   int64_t head_dim) {
  // The rotation is orthogonal, so its transpose (the backward) is the rotation by -angle.
  rotate(dx, heads * head_dim, dx, heads * head_dim, positions, table, n, heads, head_dim, -1.0f);
}

void rope_split_qkv(const float* qkv, const int32_t* positions, const float* table, float* q, float* k, float* v,
                    int64_t n, int64_t hq, int64_t hkv, int64_t head_dim) {
  const int64_t qd = hq * head_dim, kd = hkv * head_dim, row = qd + 2 * kd;
  rotate(qkv, row, q, qd, positions, table, n, hq, head_dim, 1.0f);
  rotate(qkv + qd, row, k, kd, positions, table, n, hkv, head_dim, 1.0f);
  copy_rows(qkv + qd + kd, row, v, kd, n, kd);
}

void rope_backward_merge_qkv(const float* dq, const float* dk, const float* dv, const int32_t* positions,
                             const float* table, float* dqkv, int64_t n, int64_t hq, int64_t hkv, int64_t head_dim) {
  const int64_t qd = hq * head_dim, kd = hkv * head_dim, row = qd + 2 * kd;
  rotate(dq, qd, dqkv, row, positions, table, n, hq, head_dim, -1.0f);
  rotate(dk, kd, dqkv + qd, row, positions, table, n, hkv, head_dim, -1.0f);
  copy_rows(dv, kd, dqkv + qd + kd, row, n, kd);
}

void split_qkv(const float* qkv, float* q, float* k, float* v, int64_t n, int64_t hq, int64_t hkv, int64_t head_dim) {
  const int64_t qd = hq * head_dim, kd = hkv * head_dim, row = qd + 2 * kd;
  copy_rows(qkv, row, q, qd, n, qd);
  copy_rows(qkv + qd, row, k, kd, n, kd);
  copy_rows(qkv + qd + kd, row, v, kd, n, kd);
}

void merge_qkv(const float* dq, const float* dk, const float* dv, float* dqkv, int64_t n, int64_t hq, int64_t hkv,
               int64_t head_dim) {
  const int64_t qd = hq * head_dim, kd = hkv * head_dim, row = qd + 2 * kd;
  copy_rows(dq, qd, dqkv, row, n, qd);
  copy_rows(dk, kd, dqkv + qd, row, n, kd);
  copy_rows(dv, kd, dqkv + qd + kd, row, n, kd);
}

}  // namespace rlcpp::cpu
