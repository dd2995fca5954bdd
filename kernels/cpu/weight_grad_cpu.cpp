// The weight gradient of a Linear layer on the CPU: dw (out,in) += dy (n,out)^T @ x (n,in), both operands read
// in place. OpenBLAS copies both into its packed layouts on every call, which in the chunked training backward
// (model/transformer_layers.cpp: n = a chunk of ~128 rows, called 4 times per layer and chunk) cost about a
// quarter of the product's time (6 % of the step); here the chunk is already in L2, so the tile reads it where
// it is, at the same rate as OpenBLAS's kernel.
//
// A register tile holds kRows rows of dw x kVecs vectors of 16 columns; per row t of the chunk it loads kVecs
// vectors of x[t] and broadcasts kRows values of dy[t]. The rows are walked in blocks of kRowBlock so that the
// block of x one tile column reads (kRowBlock x 64 floats) stays in L1 while every tile row passes over it.
//
// Each output is one fused multiply-add chain over t = 0..n-1 in order, starting from dw's value: the blocking
// and the thread split never change a result.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "kernels/cpu/cpu_kernels.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace rlcpp::cpu {
namespace {

constexpr int64_t kRowBlock = 64;

#if defined(__AVX512F__)
constexpr int kRows = 6;
constexpr int kVecs = 4;  // 24 accumulators, 4 x registers, 1 broadcast

// ROWS rows of dw from `dw` on, VECS vectors of columns from `x`'s column 0 on, the last vector masked by
// `last_mask`; rows [0, n) of dy and x.
template <int ROWS, int VECS>
void tile(const float* dy, int64_t ldy, const float* x, int64_t ldx, float* dw, int64_t ldw, int64_t n,
          __mmask16 last_mask) {
  // The unroll pragmas keep the accumulators in registers: without them GCC stores the whole tile to the stack
  // on every t (measured 1.4x slower).
  __m512 acc[ROWS][VECS];
#pragma GCC unroll 8
  for (int r = 0; r < ROWS; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < VECS; ++v)
      acc[r][v] = _mm512_maskz_loadu_ps(v + 1 < VECS ? 0xFFFF : last_mask, dw + r * ldw + 16 * v);
  }
  for (int64_t t = 0; t < n; ++t) {
    __m512 w[VECS];
#pragma GCC unroll 8
    for (int v = 0; v < VECS; ++v) w[v] = _mm512_maskz_loadu_ps(v + 1 < VECS ? 0xFFFF : last_mask, x + t * ldx + 16 * v);
#pragma GCC unroll 8
    for (int r = 0; r < ROWS; ++r) {
      const __m512 b = _mm512_set1_ps(dy[t * ldy + r]);
#pragma GCC unroll 8
      for (int v = 0; v < VECS; ++v) acc[r][v] = _mm512_fmadd_ps(b, w[v], acc[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < ROWS; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < VECS; ++v)
      _mm512_mask_storeu_ps(dw + r * ldw + 16 * v, v + 1 < VECS ? 0xFFFF : last_mask, acc[r][v]);
  }
}

using TileFn = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t, __mmask16);
template <int ROWS, int... V>
constexpr std::array<TileFn, sizeof...(V)> row_of_tiles(std::integer_sequence<int, V...>) {
  return {&tile<ROWS, V + 1>...};
}
template <int... R>
constexpr std::array<std::array<TileFn, kVecs>, sizeof...(R)> tile_table(std::integer_sequence<int, R...>) {
  return {row_of_tiles<R + 1>(std::make_integer_sequence<int, kVecs>{})...};
}
constexpr auto kTiles = tile_table(std::make_integer_sequence<int, kRows>{});

// Rows [o0, o1) of dw, columns [i0, i0 + width), chunk rows [t0, t1).
void block(const float* dy, const float* x, float* dw, int64_t out, int64_t in, int64_t o0, int64_t o1, int64_t i0,
           int64_t width, int64_t t0, int64_t t1) {
  const int vecs = static_cast<int>((width + 15) / 16);
  const int tail = static_cast<int>(width - 16 * (vecs - 1));
  const __mmask16 last_mask = static_cast<__mmask16>((1u << tail) - 1u);
  for (int64_t o = o0; o < o1; o += kRows) {
    const int rows = static_cast<int>(std::min<int64_t>(kRows, o1 - o));
    kTiles[rows - 1][vecs - 1](dy + t0 * out + o, out, x + t0 * in + i0, in, dw + o * in + i0, in, t1 - t0,
                               last_mask);
  }
}
#else
constexpr int kRows = 4;
constexpr int kVecs = 1;
void block(const float* dy, const float* x, float* dw, int64_t out, int64_t in, int64_t o0, int64_t o1, int64_t i0,
           int64_t width, int64_t t0, int64_t t1) {
  for (int64_t o = o0; o < o1; ++o)
    for (int64_t i = i0; i < i0 + width; ++i) {
      float acc = dw[o * in + i];
      for (int64_t t = t0; t < t1; ++t) acc = std::fma(dy[t * out + o], x[t * in + i], acc);
      dw[o * in + i] = acc;
    }
}
#endif

constexpr int64_t kColumnTile = 16 * kVecs;

}  // namespace

void linear_weight_grad(const float* dy, const float* x, float* dw, int64_t n, int64_t out, int64_t in) {
  if (n == 0 || out == 0 || in == 0) return;
  // Threads split the rows of dw (whole tiles); each output's chain runs on one thread, in t order.
  const int64_t row_tiles = (out + kRows - 1) / kRows;
  const bool parallel = n * out * in >= kParallelMinMacs && row_tiles > 1;
  auto run = [&](int64_t o0, int64_t o1) {
    for (int64_t t0 = 0; t0 < n; t0 += kRowBlock)
      for (int64_t i0 = 0; i0 < in; i0 += kColumnTile)
        block(dy, x, dw, out, in, o0, o1, i0, std::min(kColumnTile, in - i0), t0, std::min(n, t0 + kRowBlock));
  };
  if (!parallel) {
    run(0, out);
    return;
  }
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t first = row_tiles * t / threads, last = row_tiles * (t + 1) / threads;
    run(std::min(out, first * kRows), std::min(out, last * kRows));
  }
}

}  // namespace rlcpp::cpu
