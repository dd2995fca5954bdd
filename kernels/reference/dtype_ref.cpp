// Reference roundings and conversions between fp32 and the 16-bit storage dtypes: each element to the nearest
// value of the dtype, ties to even; from 16 bits, the value the bits denote.
#include <bit>
#include <cstring>

#include "kernels/cpu/dtype_round.h"
#include "kernels/reference/reference_kernels.h"

namespace rlcpp::ref {

void round_to(float* x, int64_t n, DType dtype) {
  for (int64_t i = 0; i < n; ++i)
    x[i] = dtype == DType::kBF16 ? cpu::bf16_round_reference(x[i])
           : dtype == DType::kF16 ? cpu::f16_round_reference(x[i])
                                  : x[i];
}

namespace {

float value_of(const void* src, DType from, int64_t i) {
  if (from == DType::kF32) return static_cast<const float*>(src)[i];
  const uint16_t bits = static_cast<const uint16_t*>(src)[i];
  return from == DType::kBF16 ? std::bit_cast<float>(static_cast<uint32_t>(bits) << 16)
                              : cpu::f16_value_reference(bits);
}

void store(void* dst, DType to, int64_t i, float x) {
  if (to == DType::kF32) {
    static_cast<float*>(dst)[i] = x;
    return;
  }
  static_cast<uint16_t*>(dst)[i] =
      to == DType::kBF16 ? static_cast<uint16_t>(std::bit_cast<uint32_t>(cpu::bf16_round_reference(x)) >> 16)
                         : cpu::f16_bits_reference(x);
}

}  // namespace

void convert(const void* src, DType from, void* dst, DType to, int64_t n) {
  for (int64_t i = 0; i < n; ++i) store(dst, to, i, value_of(src, from, i));
}

std::vector<float> widened(const void* src, DType from, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = value_of(src, from, i);
  return out;
}

}  // namespace rlcpp::ref
