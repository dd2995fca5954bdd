// Elementwise and whole-tensor ops on the CPU: bias add and its backward, x += y, x *= s, L2 norm, finiteness,
// the keyed checksum.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/keyed_checksum.h"

namespace rlcpp::cpu {
namespace {

// Elements per partial sum of l2_norm: fixed, so the summation order does not depend on the thread count.
constexpr int64_t kNormChunk = 4096;

}  // namespace

int64_t column_block_width(int64_t cols) {
  const int64_t threads = std::max(1, omp_get_max_threads());
  const int64_t per_thread = (cols + threads - 1) / threads;
  return std::clamp<int64_t>((per_thread + 15) / 16 * 16, 16, kMaxColumnBlock);
}

void add_bias(float* y, const float* bias, int64_t rows, int64_t cols) {
#pragma omp parallel for if (rows * cols > kParallelMinWork)
  for (int64_t r = 0; r < rows; ++r) {
    float* yr = y + r * cols;
    for (int64_t c = 0; c < cols; ++c) yr[c] += bias[c];
  }
}

void bias_backward(const float* dy, float* dbias, int64_t rows, int64_t cols) {
  // Each task owns a block of columns and sums every row into it in row order.
  const int64_t block_width = column_block_width(cols);
  const int64_t blocks = (cols + block_width - 1) / block_width;
#pragma omp parallel for if (rows * cols > kParallelMinWork)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t c0 = blk * block_width;
    const int64_t width = std::min(block_width, cols - c0);
    float acc[kMaxColumnBlock] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = dy + r * cols + c0;
      for (int64_t j = 0; j < width; ++j) acc[j] += row[j];
    }
    for (int64_t j = 0; j < width; ++j) dbias[c0 + j] += acc[j];
  }
}

void add_inplace(float* x, const float* y, int64_t n) {
#pragma omp parallel for simd if (parallel : n > kParallelMinWork)
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void scale_inplace(float* x, float s, int64_t n) {
#pragma omp parallel for simd if (parallel : n > kParallelMinWork)
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

double l2_norm(const float* x, int64_t n) {
  const int64_t chunks = (n + kNormChunk - 1) / kNormChunk;
  std::vector<double> partial(static_cast<size_t>(chunks));
#pragma omp parallel for if (n > kParallelMinWork)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const int64_t begin = ch * kNormChunk;
    const int64_t end = std::min(n, begin + kNormChunk);
    // Four independent accumulators so the loop vectorises without reassociation flags.
    double lane[4] = {};
    int64_t i = begin;
    for (; i + 4 <= end; i += 4)
      for (int j = 0; j < 4; ++j) lane[j] += static_cast<double>(x[i + j]) * static_cast<double>(x[i + j]);
    for (; i < end; ++i) lane[0] += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    partial[static_cast<size_t>(ch)] = (lane[0] + lane[1]) + (lane[2] + lane[3]);
  }
  double total = 0.0;
  for (double p : partial) total += p;
  return std::sqrt(total);
}

bool all_finite(const float* x, int64_t n) {
  // A float is inf or NaN exactly when its exponent bits are all ones; OR-ing a flag keeps the loop branch-free.
  int bad = 0;
#pragma omp parallel for reduction(| : bad) if (n > kParallelMinWork)
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, sizeof bits);
    bad |= (bits & 0x7f800000u) == 0x7f800000u;
  }
  return bad == 0;
}

uint64_t keyed_checksum(const float* x, int64_t n) {
  uint64_t sum = 0;  // modulo 2^64: the same bits whatever the threads' shares
#pragma omp parallel for reduction(+ : sum) if (n > kParallelMinWork)
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, sizeof bits);
    sum += keyed_checksum_term(i, bits);
  }
  return sum;
}

}  // namespace rlcpp::cpu
