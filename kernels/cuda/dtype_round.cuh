// The compute dtypes' roundings on the device, to the bits of kernels/cpu/dtype_round.h's fast forms — NaN
// included — so that a CUDA op rounds exactly as its CPU reference does (the GPU tests hold them to it): round to
// nearest, ties to even; overflow to +-inf; a NaN stays a quiet NaN with its sign and the upper bits of its
// payload (the CPU's bf16 integer trick, x86's vcvtps2ph for fp16). The intrinsics alone would turn every NaN into
// the canonical one.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "core/tensor.h"

namespace rlcpp::cuda {

__device__ inline bool is_nan_bits(uint32_t u) { return (u & 0x7FFFFFFFu) > 0x7F800000u; }

__device__ inline uint16_t bf16_bits(float x) {
  const uint32_t u = __float_as_uint(x);
  if (is_nan_bits(u)) return static_cast<uint16_t>((u | 0x00400000u) >> 16);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);  // cpu::bf16_round
}
__device__ inline float bf16_value(uint16_t bits) { return __uint_as_float(static_cast<uint32_t>(bits) << 16); }

__device__ inline uint16_t f16_bits(float x) {
  const uint32_t u = __float_as_uint(x);
  if (is_nan_bits(u)) return static_cast<uint16_t>(((u >> 16) & 0x8000u) | 0x7E00u | ((u >> 13) & 0x3FFu));
  return __half_as_ushort(__float2half_rn(x));
}
__device__ inline float f16_value(uint16_t bits) {
  if ((bits & 0x7C00u) == 0x7C00u && (bits & 0x3FFu) != 0)  // NaN: the payload back in place, as vcvtph2ps
    return __uint_as_float((static_cast<uint32_t>(bits & 0x8000u) << 16) | 0x7F800000u |
                           (static_cast<uint32_t>(bits & 0x3FFu) << 13));
  return __half2float(__ushort_as_half(bits));
}

// Element i of an array of `From` (F32, BF16, F16) as a float: exact (every bf16 and fp16 value is a float).
template <DType From>
__device__ inline float widened(const void* src, int64_t i) {
  if constexpr (From == DType::kF32) return static_cast<const float*>(src)[i];
  else if constexpr (From == DType::kBF16) return bf16_value(static_cast<const uint16_t*>(src)[i]);
  else return f16_value(static_cast<const uint16_t*>(src)[i]);
}

}  // namespace rlcpp::cuda
