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
//
// BF16 math (a bf16 model's backward, as a GPU's bf16 GEMM with fp32 accumulation): the same chains over dy and x
// rounded to bf16 operands. On AVX512-BF16 both are first converted into words of row pairs (rows 2p and 2p + 1
// of a column in one 32-bit word, 2p in the upper half: packed_matmul_cpu.cpp's layout), and one vdpbf16ps adds
// a pair's two products to 16 accumulators, 2p's first, each rounded once — the fma chain at twice the products
// per instruction (a product of two bf16 values is exact in fp32); an odd n's last row is one more fma. Elsewhere
// the fp32 tile runs on rounded copies of the operands.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/cpu/bf16_operands.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dtype_round.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace rlcpp::cpu {
namespace {

constexpr int64_t kRowBlock = 64;

#if defined(__AVX512F__)
constexpr int kRows = 6;
constexpr int kVecs = 4;  // 24 accumulators, 4 x registers, 1 broadcast

// What a tile does with one row of the chain: fp32 math takes row t of dy and x (broadcast dy[t][r], an fma with
// x[t]'s vectors); bf16 math a pair of rows as pair words (broadcast dy's word, one vdpbf16ps with x's words).
struct Fp32Fma {
  using Operand = float;
  using Vec = __m512;
  static Vec load(const float* p, __mmask16 mask) { return _mm512_maskz_loadu_ps(mask, p); }
  static Vec broadcast(float v) { return _mm512_set1_ps(v); }
  static __m512 accumulate(__m512 acc, Vec x, Vec dy) { return _mm512_fmadd_ps(dy, x, acc); }
};
#if defined(__AVX512BF16__)
struct Bf16PairDot {
  using Operand = uint32_t;
  using Vec = __m512bh;
  static Vec load(const uint32_t* p, __mmask16 mask) { return (__m512bh)_mm512_maskz_loadu_epi32(mask, p); }
  static Vec broadcast(uint32_t v) { return (__m512bh)_mm512_set1_epi32(static_cast<int>(v)); }
  static __m512 accumulate(__m512 acc, Vec x, Vec dy) { return _mm512_dpbf16_ps(acc, x, dy); }
};
#endif

// ROWS rows of dw from `dw` on, VECS vectors of columns from `x`'s column 0 on, the last vector masked by
// `last_mask`; rows [0, n) of dy and x (bf16: row pairs).
template <class Op, int ROWS, int VECS>
void tile(const typename Op::Operand* dy, int64_t ldy, const typename Op::Operand* x, int64_t ldx, float* dw,
          int64_t ldw, int64_t n, __mmask16 last_mask) {
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
    typename Op::Vec w[VECS];
#pragma GCC unroll 8
    for (int v = 0; v < VECS; ++v) w[v] = Op::load(x + t * ldx + 16 * v, v + 1 < VECS ? 0xFFFF : last_mask);
#pragma GCC unroll 8
    for (int r = 0; r < ROWS; ++r) {
      const typename Op::Vec b = Op::broadcast(dy[t * ldy + r]);
#pragma GCC unroll 8
      for (int v = 0; v < VECS; ++v) acc[r][v] = Op::accumulate(acc[r][v], w[v], b);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < ROWS; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < VECS; ++v)
      _mm512_mask_storeu_ps(dw + r * ldw + 16 * v, v + 1 < VECS ? 0xFFFF : last_mask, acc[r][v]);
  }
}

template <class Op>
using TileFn = void (*)(const typename Op::Operand*, int64_t, const typename Op::Operand*, int64_t, float*, int64_t,
                        int64_t, __mmask16);
template <class Op, int ROWS, int... V>
constexpr std::array<TileFn<Op>, sizeof...(V)> row_of_tiles(std::integer_sequence<int, V...>) {
  return {&tile<Op, ROWS, V + 1>...};
}
template <class Op, int... R>
constexpr std::array<std::array<TileFn<Op>, kVecs>, sizeof...(R)> tile_table(std::integer_sequence<int, R...>) {
  return {row_of_tiles<Op, R + 1>(std::make_integer_sequence<int, kVecs>{})...};
}
template <class Op>
constexpr auto kTiles = tile_table<Op>(std::make_integer_sequence<int, kRows>{});

// Rows [o0, o1) of dw, columns [i0, i0 + width), chain rows [t0, t1) (bf16: row pairs).
template <class Op = Fp32Fma>
void block(const typename Op::Operand* dy, const typename Op::Operand* x, float* dw, int64_t out, int64_t in,
           int64_t o0, int64_t o1, int64_t i0, int64_t width, int64_t t0, int64_t t1) {
  const int vecs = static_cast<int>((width + 15) / 16);
  const int tail = static_cast<int>(width - 16 * (vecs - 1));
  const __mmask16 last_mask = static_cast<__mmask16>((1u << tail) - 1u);
  for (int64_t o = o0; o < o1; o += kRows) {
    const int rows = static_cast<int>(std::min<int64_t>(kRows, o1 - o));
    kTiles<Op>[rows - 1][vecs - 1](dy + t0 * out + o, out, x + t0 * in + i0, in, dw + o * in + i0, in, t1 - t0,
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

// Calls run(o0, o1) over the rows of dw: all of them, or each thread its share of whole tiles of kRows rows.
template <class Run>
void split_rows(int64_t macs, int64_t out, const Run& run) {
  const int64_t row_tiles = (out + kRows - 1) / kRows;
  if (macs < kParallelMinMacs || row_tiles < 2) {
    run(int64_t{0}, out);
    return;
  }
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t first = row_tiles * t / threads, last = row_tiles * (t + 1) / threads;
    run(std::min(out, first * kRows), std::min(out, last * kRows));
  }
}

// The bf16 operands of rows [0, n) of a (n, cols) matrix, in a buffer of the calling thread (slot 0 or 1): fp32
// values, or (pairs) words of rows 2p and 2p + 1 for p < n / 2.
template <class T>
T* operand_buffer(int slot, int64_t count) {
  thread_local std::vector<T> buffers[2];
  buffers[slot].resize(static_cast<size_t>(count));
  return buffers[slot].data();
}
const float* rounded_operands(const float* a, int64_t n, int64_t cols, int slot, bool parallel) {
  float* out = operand_buffer<float>(slot, n * cols);
#pragma omp parallel for schedule(static) if (parallel : parallel)
  for (int64_t t = 0; t < n; ++t)
    for (int64_t c = 0; c < cols; ++c) out[t * cols + c] = bf16_operand(a[t * cols + c]);
  return out;
}

#if defined(__AVX512BF16__)
const uint32_t* pair_words(const float* a, int64_t n, int64_t cols, int slot, bool parallel) {
  uint32_t* out = operand_buffer<uint32_t>(slot, n / 2 * cols);
#pragma omp parallel for schedule(static) if (parallel : parallel)
  for (int64_t p = 0; p < n / 2; ++p)
    bf16_operand_pair_words(a + 2 * p * cols, a + (2 * p + 1) * cols, cols, out + p * cols);
  return out;
}

// A chain block of 64 pairs (128 rows, a training chunk's rows whole): dw passes through the cache once per call
// (x's block, 64 pairs x 64 columns, 16 KB, stays in L1). At bf16's rate dw's traffic is what bounds a
// large layer's product (W2 gate_up: 35 MB read and written per pass).
constexpr int64_t kPairBlock = 64;

// dw += over the n / 2 row pairs of dy and x, then an odd n's last row by the fp32 tile on its rounded operands.
void weight_grad_bf16(const float* dy, const float* x, float* dw, int64_t n, int64_t out, int64_t in) {
  const bool parallel = n * out * in >= kParallelMinMacs;
  const uint32_t* dy_pairs = pair_words(dy, n, out, 0, parallel);
  const uint32_t* x_pairs = pair_words(x, n, in, 1, parallel);
  const int64_t pairs = n / 2;
  split_rows(n * out * in, out, [&](int64_t o0, int64_t o1) {
    for (int64_t p0 = 0; p0 < pairs; p0 += kPairBlock)
      for (int64_t i0 = 0; i0 < in; i0 += kColumnTile)
        block<Bf16PairDot>(dy_pairs, x_pairs, dw, out, in, o0, o1, i0, std::min(kColumnTile, in - i0), p0,
                           std::min(pairs, p0 + kPairBlock));
  });
  if (n % 2 != 0)
    linear_weight_grad(rounded_operands(dy + (n - 1) * out, 1, out, 0, false),
                       rounded_operands(x + (n - 1) * in, 1, in, 1, false), dw, 1, out, in, DType::kF32);
}
#else
void weight_grad_bf16(const float* dy, const float* x, float* dw, int64_t n, int64_t out, int64_t in) {
  const bool parallel = n * out * in >= kParallelMinMacs;
  linear_weight_grad(rounded_operands(dy, n, out, 0, parallel), rounded_operands(x, n, in, 1, parallel), dw, n, out,
                     in, DType::kF32);
}
#endif

}  // namespace

void linear_weight_grad(const float* dy, const float* x, float* dw, int64_t n, int64_t out, int64_t in, DType math) {
  if (n == 0 || out == 0 || in == 0) return;
  if (math == DType::kBF16) return weight_grad_bf16(dy, x, dw, n, out, in);
  // Threads split the rows of dw (whole tiles); each output's chain runs on one thread, in t order.
  split_rows(n * out * in, out, [&](int64_t o0, int64_t o1) {
    for (int64_t t0 = 0; t0 < n; t0 += kRowBlock)
      for (int64_t i0 = 0; i0 < in; i0 += kColumnTile)
        block(dy, x, dw, out, in, o0, o1, i0, std::min(kColumnTile, in - i0), t0, std::min(n, t0 + kRowBlock));
  });
}

}  // namespace rlcpp::cpu
