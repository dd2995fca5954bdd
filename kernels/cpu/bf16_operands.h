// Rows of floats as bf16 operands (dtype_round.h bf16_operand_bits: rounded to nearest even, subnormals to zero),
// sixteen at a time on AVX-512: what packing bf16 panels and the bf16 products' operand conversions run on. The
// scalar form does not vectorise (GCC keeps its 16-bit select per element: 1.2 ns a weight when packing W2's
// layers). Tests hold these to the scalar form (the op matrix's packing and products, bit for bit).
#pragma once

#include <cstdint>

#include "kernels/cpu/dtype_round.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace rlcpp::cpu {

#if defined(__AVX512F__)
// bf16_operand_bits of 16 floats, each in the upper half of its 32-bit lane (the lower half zero).
inline __m512i bf16_operand_upper_halves(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_and_si512(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb), high);
  const __mmask16 nan =
      _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)), _mm512_set1_epi32(0x7F800000));
  r = _mm512_mask_mov_epi32(r, nan, _mm512_and_si512(_mm512_or_si512(u, _mm512_set1_epi32(0x00400000)), high));
  const __mmask16 subnormal = _mm512_testn_epi32_mask(r, _mm512_set1_epi32(0x7F800000));  // exponent zero
  return _mm512_mask_and_epi32(r, subnormal, r, _mm512_set1_epi32(static_cast<int>(0x80000000u)));
}
#endif

// dst[i] = bf16_operand_bits(src[i]) for i < n.
inline void bf16_operand_row(const float* src, int64_t n, uint16_t* dst) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    const __m512i r = bf16_operand_upper_halves(_mm512_loadu_ps(src + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
  }
#endif
  for (; i < n; ++i) dst[i] = bf16_operand_bits(src[i]);
}

// The pair words of two rows: out[i] = bf16_operand_bits(upper[i]) << 16 | bf16_operand_bits(lower[i]), i < n.
inline void bf16_operand_pair_words(const float* upper, const float* lower, int64_t n, uint32_t* out) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    const __m512i hi = bf16_operand_upper_halves(_mm512_loadu_ps(upper + i));
    const __m512i lo = _mm512_srli_epi32(bf16_operand_upper_halves(_mm512_loadu_ps(lower + i)), 16);
    _mm512_storeu_si512(out + i, _mm512_or_si512(hi, lo));
  }
#endif
  for (; i < n; ++i) out[i] = uint32_t{bf16_operand_bits(upper[i])} << 16 | bf16_operand_bits(lower[i]);
}

}  // namespace rlcpp::cpu
