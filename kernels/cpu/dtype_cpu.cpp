// Rounding fp32 activations to the compute dtype in place (ops::round_to): the op boundaries of a bf16 or fp16
// model; and the conversions between fp32 and the 16-bit storage dtypes (ops::convert: activations kept in the
// compute dtype, a checkpoint in that dtype). The loops are the fast forms of dtype_round.h, which vectorise.
#include <cstring>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dtype_round.h"

namespace rlcpp::cpu {

void round_to(float* x, int64_t n, DType dtype) {
  if (dtype == DType::kBF16) {
#pragma omp parallel for simd if (parallel : n > 4 * kParallelMinWork)
    for (int64_t i = 0; i < n; ++i) x[i] = bf16_round(x[i]);
  } else if (dtype == DType::kF16) {
#pragma omp parallel for simd if (parallel : n > 4 * kParallelMinWork)
    for (int64_t i = 0; i < n; ++i) x[i] = f16_round(x[i]);
  }
}

namespace {

// Element i of a `From` array as a float: exact (every bf16 and fp16 value is a float).
template <DType From>
inline float widened(const void* src, int64_t i) {
  if constexpr (From == DType::kF32) return static_cast<const float*>(src)[i];
  else if constexpr (From == DType::kBF16) return bf16_value(static_cast<const uint16_t*>(src)[i]);
  else return f16_value(static_cast<const uint16_t*>(src)[i]);
}

// x stored as element i of a `To` array, rounded to nearest even.
template <DType To>
inline void store(void* dst, int64_t i, float x) {
  if constexpr (To == DType::kF32) static_cast<float*>(dst)[i] = x;
  else if constexpr (To == DType::kBF16) static_cast<uint16_t*>(dst)[i] = bf16_bits(x);
  else static_cast<uint16_t*>(dst)[i] = f16_bits(x);
}

template <DType From, DType To>
void convert_as(const void* src, void* dst, int64_t n) {
#pragma omp parallel for simd if (parallel : n > 4 * kParallelMinWork)
  for (int64_t i = 0; i < n; ++i) store<To>(dst, i, widened<From>(src, i));
}

template <DType From>
void convert_from(const void* src, void* dst, DType to, int64_t n) {
  if (to == DType::kF32) return convert_as<From, DType::kF32>(src, dst, n);
  if (to == DType::kBF16) return convert_as<From, DType::kBF16>(src, dst, n);
  convert_as<From, DType::kF16>(src, dst, n);
}

}  // namespace

void convert(const void* src, DType from, void* dst, DType to, int64_t n) {
  if (from == to) {
    std::memcpy(dst, src, static_cast<size_t>(n) * dtype_size(from));
    return;
  }
  if (from == DType::kF32) return convert_from<DType::kF32>(src, dst, to, n);
  if (from == DType::kBF16) return convert_from<DType::kBF16>(src, dst, to, n);
  convert_from<DType::kF16>(src, dst, to, n);
}

}  // namespace rlcpp::cpu
