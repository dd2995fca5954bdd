// Rotary position embedding (Hugging Face Llama, rotate-half convention) on the CPU.
#include <cmath>

#include "kernels/cpu/cpu_kernels.h"

namespace rlcpp::cpu {
namespace {

// Rotates each (x[i], x[i + D/2]) pair of every head of every row by +angle (sign = 1) or -angle (sign = -1).
void rotate(float* x, const int32_t* positions, const float* table, int64_t n, int64_t heads, int64_t head_dim,
            float sign) {
  const int64_t half = head_dim / 2;
#pragma omp parallel for if (n * heads * head_dim > kParallelMinWork)
  for (int64_t i = 0; i < n; ++i) {
    const float* cos_row = table + static_cast<int64_t>(positions[i]) * head_dim;
    const float* sin_row = cos_row + half;
    for (int64_t h = 0; h < heads; ++h) {
      float* lo = x + (i * heads + h) * head_dim;
      float* hi = lo + half;
      for (int64_t j = 0; j < half; ++j) {
        const float c = cos_row[j];
        const float s = sign * sin_row[j];
        const float a = lo[j];
        const float b = hi[j];
        // Hugging Face: q * cos + rotate_half(q) * sin, rotate_half(q) = [-q2, q1].
        lo[j] = a * c - b * s;
        hi[j] = b * c + a * s;
      }
    }
  }
}

}  // namespace

void rope_table(float* table, int64_t max_positions, int64_t head_dim, float theta) {
  const int64_t half = head_dim / 2;
  for (int64_t p = 0; p < max_positions; ++p) {
    float* row = table + p * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      // As transformers' LlamaRotaryEmbedding: inv_freq = 1 / theta^(arange(0, D, 2) / D), all in float32,
      // and the angle is the float product position * inv_freq.
      const float inv_freq = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
      const float angle = static_cast<float>(p) * inv_freq;
      row[i] = std::cos(angle);
      row[half + i] = std::sin(angle);
    }
  }
}

void rope_forward(float* x, const int32_t* positions, const float* table, int64_t n, int64_t heads,
                  int64_t head_dim) {
  rotate(x, positions, table, n, heads, head_dim, 1.0f);
}

void rope_backward(float* dx, const int32_t* positions, const float* table, int64_t n, int64_t heads,
                   int64_t head_dim) {
  // The rotation is orthogonal, so its transpose (the backward) is the rotation by -angle.
  rotate(dx, positions, table, n, heads, head_dim, -1.0f);
}

}  // namespace rlcpp::cpu
