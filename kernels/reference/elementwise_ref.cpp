// Reference element-wise ops and reductions.
#include <bit>
#include <cmath>

#include "kernels/keyed_checksum.h"
#include "kernels/reference/reference_kernels.h"

namespace rlcpp::ref {

void add_bias(float* y, const float* bias, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) y[i * cols + j] += bias[j];
}

void bias_backward(const float* dy, float* dbias, int64_t rows, int64_t cols) {
  for (int64_t j = 0; j < cols; ++j) {
    float sum = 0.0f;
    for (int64_t i = 0; i < rows; ++i) sum += dy[i * cols + j];
    dbias[j] += sum;
  }
}

void add_inplace(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void scale_inplace(float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

double l2_norm(const float* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += double(x[i]) * double(x[i]);
  return std::sqrt(sum);
}

bool all_finite(const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) return false;
  return true;
}

uint64_t keyed_checksum(const float* x, int64_t n) {
  uint64_t sum = 0;  // modulo 2^64
  for (int64_t i = 0; i < n; ++i) sum += keyed_checksum_term(i, std::bit_cast<uint32_t>(x[i]));
  return sum;
}

// Row ids[i] of the table, widened to F32 element by element (ref::convert's definition).
void embedding_forward(const void* table, DType dtype, const int32_t* ids, float* out, int64_t n, int64_t c) {
  const size_t element = dtype_size(dtype);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j)
      convert(static_cast<const char*>(table) + (static_cast<size_t>(ids[i]) * c + j) * element, dtype,
              &out[i * c + j], DType::kF32, 1);
}

void embedding_backward(const float* dout, const int32_t* ids, float* dtable, int64_t n, int64_t c) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j) dtable[static_cast<int64_t>(ids[i]) * c + j] += dout[i * c + j];
}

}  // namespace rlcpp::ref
