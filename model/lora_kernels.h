// The rank-r products of LoRA adapters (model/lora.cpp: the gradients; model/lora_unmerged.cpp: the unmerged
// forward and its input gradient). Private to model/.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace rlcpp::lora_kernels {

// The rank-r products of the adapters' gradients, register-blocked: 4 rows (or 4 entries of k) at a time against
// 16 columns of r held in one vector each (GCC/Clang vector extensions: one AVX-512 register, or two AVX2 ones),
// each output an fma chain in a fixed order (over k, or over the rows), so the same bits whatever the thread count.
// r's tail past a multiple of 16 runs the same chains one column at a time.
constexpr int64_t kCols = 16, kRows = 4;
typedef float Cols __attribute__((vector_size(kCols * sizeof(float))));

inline Cols load_cols(const float* p) {
  Cols v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void store_cols(float* p, const Cols& v) { std::memcpy(p, &v, sizeof v); }

// y (n, r) = s·(x (n, k) · m (k, r)); x's rows have stride ldx.
inline void times_rows(const float* __restrict x, int64_t ldx, const float* __restrict m, int64_t n, int64_t k, int64_t r,
                float s, float* __restrict y) {
  const int64_t full = r / kCols * kCols;
  for (int64_t row0 = 0; row0 < n; row0 += kRows) {
    const int64_t rows = std::min(kRows, n - row0);
    for (int64_t j0 = 0; j0 < full; j0 += kCols) {
      Cols acc[kRows] = {};
      for (int64_t i = 0; i < k; ++i) {
        const Cols mi = load_cols(m + i * r + j0);
        for (int64_t q = 0; q < rows; ++q) acc[q] += x[(row0 + q) * ldx + i] * mi;
      }
      for (int64_t q = 0; q < rows; ++q) store_cols(y + (row0 + q) * r + j0, s * acc[q]);
    }
    for (int64_t q = 0; q < rows; ++q)
      for (int64_t j = full; j < r; ++j) {
        float acc = 0;
        for (int64_t i = 0; i < k; ++i) acc += x[(row0 + q) * ldx + i] * m[i * r + j];
        y[(row0 + q) * r + j] = s * acc;
      }
  }
}

// g (k, r) += a (n, k)ᵀ · b (n, r), summed over the n rows in order; a's rows have stride lda.
inline void add_outer_rows(const float* __restrict a, int64_t lda, const float* __restrict b, int64_t n, int64_t k,
                    int64_t r, float* __restrict g) {
  const int64_t full = r / kCols * kCols;
  for (int64_t i0 = 0; i0 < k; i0 += kRows) {
    const int64_t is = std::min(kRows, k - i0);
    for (int64_t j0 = 0; j0 < full; j0 += kCols) {
      Cols acc[kRows];
      for (int64_t q = 0; q < is; ++q) acc[q] = load_cols(g + (i0 + q) * r + j0);
      for (int64_t row = 0; row < n; ++row) {
        const Cols br = load_cols(b + row * r + j0);
        for (int64_t q = 0; q < is; ++q) acc[q] += a[row * lda + i0 + q] * br;
      }
      for (int64_t q = 0; q < is; ++q) store_cols(g + (i0 + q) * r + j0, acc[q]);
    }
    for (int64_t q = 0; q < is; ++q)
      for (int64_t j = full; j < r; ++j) {
        float acc = g[(i0 + q) * r + j];
        for (int64_t row = 0; row < n; ++row) acc += a[row * lda + i0 + q] * b[row * r + j];
        g[(i0 + q) * r + j] = acc;
      }
  }
}

}  // namespace rlcpp::lora_kernels
