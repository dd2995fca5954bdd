// Reference RoPE (rotate-half, Hugging Face Llama) and the fused qkv product's split and merge.
#include <cstring>

#include "kernels/reference/reference_kernels.h"

namespace rlcpp::ref {

void rope_rotate(const float* src, int64_t src_stride, float* dst, int64_t dst_stride, const int32_t* positions,
                 const float* table, int64_t n, int64_t heads, int64_t head_dim, float sign) {
  const int64_t half = head_dim / 2;
  for (int64_t i = 0; i < n; ++i) {
    const float* cos_row = table + static_cast<int64_t>(positions[i]) * head_dim;
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t j = 0; j < half; ++j) {
        const float c = cos_row[j], s = sign * cos_row[half + j];
        const float a = src[i * src_stride + h * head_dim + j], b = src[i * src_stride + h * head_dim + half + j];
        dst[i * dst_stride + h * head_dim + j] = a * c - b * s;
        dst[i * dst_stride + h * head_dim + half + j] = b * c + a * s;
      }
  }
}

void split_qkv(const float* qkv, float* q, float* k, float* v, int64_t n, int64_t hq, int64_t hkv, int64_t head_dim) {
  const int64_t qw = hq * head_dim, kw = hkv * head_dim, row = qw + 2 * kw;
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(q + i * qw, qkv + i * row, qw * sizeof(float));
    std::memcpy(k + i * kw, qkv + i * row + qw, kw * sizeof(float));
    std::memcpy(v + i * kw, qkv + i * row + qw + kw, kw * sizeof(float));
  }
}

void merge_qkv(const float* dq, const float* dk, const float* dv, float* dqkv, int64_t n, int64_t hq, int64_t hkv,
               int64_t head_dim) {
  const int64_t qw = hq * head_dim, kw = hkv * head_dim, row = qw + 2 * kw;
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(dqkv + i * row, dq + i * qw, qw * sizeof(float));
    std::memcpy(dqkv + i * row + qw, dk + i * kw, kw * sizeof(float));
    std::memcpy(dqkv + i * row + qw + kw, dv + i * kw, kw * sizeof(float));
  }
}

}  // namespace rlcpp::ref
