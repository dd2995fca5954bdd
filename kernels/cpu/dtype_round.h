// The number formats of the compute dtypes and rollout weight quantisations, element by element: the readable
// reference definitions (`*_reference`, bit by bit, what the formats are) and the fast forms the kernels use
// (they vectorise). Tests hold the two against each other over every float class; the CUDA kernels will be held
// against the same references.
//
// Every rounding is round-to-nearest, ties to even, as PyTorch's .to(torch.bfloat16 / float16 / float8_e4m3fn)
// rounds. Overflow: bf16 and fp16 round to +-inf like the hardware; e4m3 (OCP E4M3FN: bias 7, no inf, max 448)
// saturates at +-448 because a per-channel scale maps the largest weight to 448 and nothing should exceed it.
// NaN stays NaN.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#if !defined(__FLT16_MAX__) && defined(__F16C__)
#include <immintrin.h>
#endif

namespace rlcpp::cpu {

// ---- bf16: the upper 16 bits of a float (8 exponent bits, 7 mantissa bits) ----

// x rounded to the nearest bf16, as a float.
inline float bf16_round_reference(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if (std::isnan(x)) return std::bit_cast<float>((u | 0x00400000u) & 0xFFFF0000u);  // quiet NaN, kept
  const uint32_t dropped = u & 0xFFFFu, kept = u & 0xFFFF0000u;
  const uint32_t half = 0x8000u, lsb = (u >> 16) & 1u;
  // Past halfway, or exactly halfway with an odd kept part: round the magnitude up (a carry into the exponent
  // is right, up to inf).
  const bool up = dropped > half || (dropped == half && lsb == 1u);
  return std::bit_cast<float>(up ? kept + 0x10000u : kept);
}

// The same value by the usual integer trick (adding 0x7FFF plus the kept part's lowest bit carries exactly when
// the reference rounds up); branch-free, so loops of it vectorise.
inline float bf16_round(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  const uint32_t nan = (u | 0x00400000u) & 0xFFFF0000u;
  return std::bit_cast<float>((u & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded);
}

inline uint16_t bf16_bits(float x) { return static_cast<uint16_t>(std::bit_cast<uint32_t>(bf16_round(x)) >> 16); }
inline float bf16_value(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

// An operand of a bf16 matrix product (kernels/cpu/packed_matmul_cpu.cpp): x rounded to bf16, and a bf16
// subnormal (|x| < 2^-126 after rounding) flushed to a zero of its sign, as AVX512-BF16's vdpbf16ps reads its
// inputs (DAZ). Every arm of the product rounds its operands this way, so they read the same values.
inline float bf16_operand_reference(float x) {
  const float r = bf16_round_reference(x);
  return std::fpclassify(r) == FP_SUBNORMAL ? std::copysign(0.0f, r) : r;
}
inline uint16_t bf16_operand_bits(float x) {
  const uint32_t b = std::bit_cast<uint32_t>(bf16_round(x)) >> 16;
  return static_cast<uint16_t>((b & 0x7F80u) == 0 ? b & 0x8000u : b);
}
inline float bf16_operand(float x) { return bf16_value(bf16_operand_bits(x)); }

// ---- fp16: IEEE binary16 (5 exponent bits, bias 15, 10 mantissa bits, subnormals from 2^-24) ----

inline uint16_t f16_bits_reference(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t mag = u & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return sign | 0x7E00u;  // NaN
  if (mag >= 0x477FF000u) return sign | 0x7C00u;  // >= 65520 (halfway past 65504, ties to the even inf): inf
  if (mag < 0x38800000u) {
    // Below 2^-14, the smallest normal: a multiple of 2^-24. |x| * 2^24 is exact (a power-of-two scale), and
    // nearbyint rounds it to nearest even; 1024 lands on the smallest normal's bits, as it should.
    const float scaled = std::bit_cast<float>(mag) * 16777216.0f;
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  // Normal: rebias the exponent (127 -> 15) and keep 10 of the 23 mantissa bits, to nearest even.
  uint32_t r = mag - ((127u - 15u) << 23);
  const uint32_t dropped = r & 0x1FFFu, half = 0x1000u, lsb = (r >> 13) & 1u;
  r >>= 13;
  if (dropped > half || (dropped == half && lsb == 1u)) ++r;  // a carry into the exponent is right
  return sign | static_cast<uint16_t>(r);
}

inline float f16_value_reference(uint16_t h) {
  const float sign = (h & 0x8000u) ? -1.0f : 1.0f;
  const uint32_t exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -24);
  if (exponent == 31) return mantissa ? std::bit_cast<float>(0x7FC00000u) * sign : sign * INFINITY;
  return sign * std::ldexp(static_cast<float>(mantissa | 0x400u), static_cast<int>(exponent) - 25);
}

inline float f16_round_reference(float x) { return f16_value_reference(f16_bits_reference(x)); }

#if defined(__FLT16_MAX__)
// The compiler's _Float16 conversions (F16C vcvtps2ph / vcvtph2ps, or software), which round to nearest even
// (GCC 12+, clang 15+; loops of them vectorise).
inline float f16_round(float x) { return static_cast<float>(static_cast<_Float16>(x)); }
inline uint16_t f16_bits(float x) { return std::bit_cast<uint16_t>(static_cast<_Float16>(x)); }
inline float f16_value(uint16_t bits) { return static_cast<float>(std::bit_cast<_Float16>(bits)); }
#elif defined(__F16C__)
// A compiler without x86 _Float16 (clang 14, the fuzzing build): F16C's scalar conversions, to nearest even.
inline uint16_t f16_bits(float x) { return static_cast<uint16_t>(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT)); }
inline float f16_value(uint16_t bits) { return _cvtsh_ss(bits); }
inline float f16_round(float x) { return f16_value(f16_bits(x)); }
#else
inline uint16_t f16_bits(float x) { return f16_bits_reference(x); }
inline float f16_value(uint16_t bits) { return f16_value_reference(bits); }
inline float f16_round(float x) { return f16_round_reference(x); }
#endif

// ---- fp8 e4m3 (OCP E4M3FN: 4 exponent bits, bias 7, 3 mantissa bits, subnormals from 2^-9, max 448) ----

inline constexpr float kE4m3Max = 448.0f;

inline uint8_t e4m3_bits_reference(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  if (std::isnan(x)) return sign | 0x7Fu;
  const float a = std::fabs(x);
  if (a >= kE4m3Max) return sign | 0x7Eu;  // saturate
  if (a < 0.015625f) {  // below 2^-6, the smallest normal: a multiple of 2^-9 (8 lands on 2^-6's bits)
    return sign | static_cast<uint8_t>(std::nearbyint(a * 512.0f));
  }
  uint32_t r = std::bit_cast<uint32_t>(a) - ((127u - 7u) << 23);
  const uint32_t dropped = r & 0xFFFFFu, half = 0x80000u, lsb = (r >> 20) & 1u;
  r >>= 20;
  if (dropped > half || (dropped == half && lsb == 1u)) ++r;
  if (r > 0x7Eu) r = 0x7Eu;  // 448 < a < 464 rounds to 448 anyway; 0x7F would be NaN
  return sign | static_cast<uint8_t>(r);
}

inline float e4m3_value_reference(uint8_t b) {
  const float sign = (b & 0x80u) ? -1.0f : 1.0f;
  const uint32_t exponent = (b >> 3) & 0xFu, mantissa = b & 0x7u;
  if (exponent == 15 && mantissa == 7) return std::bit_cast<float>(0x7FC00000u);
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -9);
  return sign * std::ldexp(static_cast<float>(mantissa | 0x8u), static_cast<int>(exponent) - 10);
}

// The e4m3 byte's fields placed in an fp16's (sign to bit 15, exponent and mantissa to bits 13..7): that fp16
// is the e4m3 value times 2^-8, normal or subnormal alike (both exponent biases and subnormal units differ by
// exactly 8 binades). The packed product decodes fp8 weights this way with one fp16 conversion and folds the
// 2^8 into the channel's scale.
inline uint16_t e4m3_to_f16_bits_scaled(uint8_t b) {
  return static_cast<uint16_t>(((b & 0x80u) << 8) | ((b & 0x7Fu) << 7));
}
inline constexpr float kE4m3F16Scale = 256.0f;

}  // namespace rlcpp::cpu
