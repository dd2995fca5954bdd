// Eight-float vectors for the CPU attention kernels: AVX2+FMA intrinsics where the build targets them, else a
// plain array with the same arithmetic (one rounding per multiply-add, the same reduction tree), so a given
// binary computes every attention value with one fixed sequence of operations.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define RLCPP_LANES8_AVX2 1
#endif

namespace rlcpp::cpu {

#if defined(RLCPP_LANES8_AVX2)
struct F8 {
  __m256 v;
};
inline F8 f8_zero() { return {_mm256_setzero_ps()}; }
inline F8 f8_set1(float x) { return {_mm256_set1_ps(x)}; }
inline F8 f8_load(const float* p) { return {_mm256_loadu_ps(p)}; }
inline void f8_store(float* p, F8 a) { _mm256_storeu_ps(p, a.v); }
inline F8 f8_fma(F8 a, F8 b, F8 c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
inline F8 f8_mul(F8 a, F8 b) { return {_mm256_mul_ps(a.v, b.v)}; }
inline F8 f8_add(F8 a, F8 b) { return {_mm256_add_ps(a.v, b.v)}; }
// s[t] = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)) of acc[t], for t < 8.
inline void f8_reduce8(const F8* acc, float* s) {
  const __m256 h01 = _mm256_hadd_ps(acc[0].v, acc[1].v);  // a01 a23 b01 b23 | a45 a67 b45 b67
  const __m256 h23 = _mm256_hadd_ps(acc[2].v, acc[3].v);
  const __m256 h45 = _mm256_hadd_ps(acc[4].v, acc[5].v);
  const __m256 h67 = _mm256_hadd_ps(acc[6].v, acc[7].v);
  const __m256 h0123 = _mm256_hadd_ps(h01, h23);  // a0123 b0123 c0123 d0123 | a4567 b4567 c4567 d4567
  const __m256 h4567 = _mm256_hadd_ps(h45, h67);
  const __m256 lo = _mm256_permute2f128_ps(h0123, h4567, 0x20);
  const __m256 hi = _mm256_permute2f128_ps(h0123, h4567, 0x31);
  _mm256_storeu_ps(s, _mm256_add_ps(lo, hi));
}
#else
struct F8 {
  float v[8];
};
inline F8 f8_zero() { return {}; }
inline F8 f8_set1(float x) {
  F8 r;
  for (int l = 0; l < 8; ++l) r.v[l] = x;
  return r;
}
inline F8 f8_load(const float* p) {
  F8 r;
  std::memcpy(r.v, p, sizeof r.v);
  return r;
}
inline void f8_store(float* p, F8 a) { std::memcpy(p, a.v, sizeof a.v); }
inline F8 f8_fma(F8 a, F8 b, F8 c) {
  F8 r;
  for (int l = 0; l < 8; ++l) r.v[l] = std::fma(a.v[l], b.v[l], c.v[l]);
  return r;
}
inline F8 f8_mul(F8 a, F8 b) {
  F8 r;
  for (int l = 0; l < 8; ++l) r.v[l] = a.v[l] * b.v[l];
  return r;
}
inline F8 f8_add(F8 a, F8 b) {
  F8 r;
  for (int l = 0; l < 8; ++l) r.v[l] = a.v[l] + b.v[l];
  return r;
}
inline void f8_reduce8(const F8* acc, float* s) {
  for (int t = 0; t < 8; ++t) {
    const float* a = acc[t].v;
    s[t] = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
  }
}
#endif

// Vector widths for kernels whose every element gets the same operations whatever the width: a template over
// these runs the same code eight floats (F8) or, with AVX-512, sixteen at a time, and gives the same bits.
struct Lanes8 {
  using V = F8;
  static constexpr int64_t kWidth = 8;
  static V zero() { return f8_zero(); }
  static V set1(float x) { return f8_set1(x); }
  static V load(const float* p) { return f8_load(p); }
  static void store(float* p, V a) { f8_store(p, a); }
  static V fma(V a, V b, V c) { return f8_fma(a, b, c); }
  static V mul(V a, V b) { return f8_mul(a, b); }
};
#if defined(__AVX512F__)
struct Lanes16 {
  using V = __m512;
  static constexpr int64_t kWidth = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V a) { _mm512_storeu_ps(p, a); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
};
#endif

// The first n < 8 floats of p, zeros after.
inline F8 f8_load_partial(const float* p, int64_t n) {
  float tmp[8] = {};
  std::memcpy(tmp, p, static_cast<size_t>(n) * sizeof(float));
  return f8_load(tmp);
}

// s[t] = a . rows[t] (d floats each) for t < 8, each in dot_fixed_order's order: eight lanes over d (the
// partial last chunk zero-padded), then the lane tree. a is loaded once for all eight rows.
inline void dot8(const float* a, const float* const* rows, int64_t d, float* s) {
  const int64_t d8 = d / 8 * 8, tail = d - d8;
  F8 acc[8];
  for (int t = 0; t < 8; ++t) acc[t] = f8_zero();
  for (int64_t c = 0; c < d8; c += 8) {
    const F8 av = f8_load(a + c);
    for (int t = 0; t < 8; ++t) acc[t] = f8_fma(av, f8_load(rows[t] + c), acc[t]);
  }
  if (tail) {
    const F8 av = f8_load_partial(a + d8, tail);
    for (int t = 0; t < 8; ++t) acc[t] = f8_fma(av, f8_load_partial(rows[t] + d8, tail), acc[t]);
  }
  f8_reduce8(acc, s);
}

}  // namespace rlcpp::cpu
