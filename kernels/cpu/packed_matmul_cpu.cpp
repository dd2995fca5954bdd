// The packed matmul: y (M,N) = x (M,K) @ w^T against weights packed into panels of 16 output columns
// (kernels/ops.h, PackedWeight). OpenBLAS repacks both operands on every sgemm call and zeroes C first when
// beta = 0: at decode sizes (M = 1..512 rows, K and N a few hundred) the repacking costs as much as a tenth of
// the product, and at training sizes (M = thousands of rows, K = 128..704) copying the activations and zeroing
// the output cost a fifth of the step. Here the panels are ready (a few hundred KB, they stay in cache), x is
// read in place, and one register tile of kRows rows x kPanels panels streams them.
//
// Each output is one fused multiply-add chain: acc = 0; acc = fma(x[m][k], w[n][k], acc) for k = 0..K-1 in
// order; then y = acc (or y + acc). Tiling only decides which chains run side by side, never their order, so a
// row's result is the same bits whatever M, the row's place in the batch, the tile it falls in or the thread
// count. The AVX2 and portable arms (builds without AVX-512) compute the same chains with their own FMA (one
// rounding each), so every arm gives the same bits.
#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "kernels/cpu/cpu_kernels.h"

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

namespace rlcpp::cpu {

namespace {

// One register of the tile: 16 floats (AVX-512), 8 (AVX2 + FMA), or 1 (portable). Every arm multiplies and
// adds with one rounding (an FMA), so they all compute the same bits.
#if defined(__AVX512F__)
struct Vec {
  static constexpr int kWidth = 16;
  __m512 v;
  static Vec zero() { return {_mm512_setzero_ps()}; }
  static Vec load(const float* p) { return {_mm512_loadu_ps(p)}; }
  static Vec broadcast(float x) { return {_mm512_set1_ps(x)}; }
  static Vec fma(Vec a, Vec b, Vec c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
  static Vec add(Vec a, Vec b) { return {_mm512_add_ps(a.v, b.v)}; }
  void store(float* p) const { _mm512_storeu_ps(p, v); }
};
// The register tile: kRows x kPanels accumulators (24 of the 32 registers) plus kPanels weight registers and
// one broadcast. Per k it loads kPanels + kRows values for kRows * kPanels multiply-adds.
constexpr int kRows = 6;
constexpr int kPanels = 4;
#elif defined(__AVX2__) && defined(__FMA__)
struct Vec {
  static constexpr int kWidth = 8;
  __m256 v;
  static Vec zero() { return {_mm256_setzero_ps()}; }
  static Vec load(const float* p) { return {_mm256_loadu_ps(p)}; }
  static Vec broadcast(float x) { return {_mm256_set1_ps(x)}; }
  static Vec fma(Vec a, Vec b, Vec c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
  static Vec add(Vec a, Vec b) { return {_mm256_add_ps(a.v, b.v)}; }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
};
// 6 x 1 panels = 12 accumulators of the 16 registers, 2 weight registers, one broadcast.
constexpr int kRows = 6;
constexpr int kPanels = 1;
#else
struct Vec {
  static constexpr int kWidth = 1;
  float v;
  static Vec zero() { return {0.0f}; }
  static Vec load(const float* p) { return {*p}; }
  static Vec broadcast(float x) { return {x}; }
  static Vec fma(Vec a, Vec b, Vec c) { return {std::fma(a.v, b.v, c.v)}; }
  static Vec add(Vec a, Vec b) { return {a.v + b.v}; }
  void store(float* p) const { *p = v; }
};
constexpr int kRows = 4;
constexpr int kPanels = 1;
#endif
constexpr int kVecsPerPanel = static_cast<int>(kPackedPanel) / Vec::kWidth;
static_assert(kVecsPerPanel * Vec::kWidth == kPackedPanel, "a panel is a whole number of registers");

// Row blocks (of kRows rows) from which a product walks its tiles row block by row block (see matmul_packed).
constexpr int64_t kRowsOuterMinBlocks = 128;

// ROWS rows of x times PANELS panels into y, added to `res` (same layout as y; may be y) when given; `cols`
// (<= PANELS * 16) columns of y exist from `y` on.
template <int ROWS, int PANELS>
void tile(const float* x, int64_t ldx, const float* panel, int64_t k, float* y, int64_t ldy, int64_t cols,
          const float* res) {
  constexpr int kVecs = PANELS * kVecsPerPanel;  // registers across the tile's columns
  Vec acc[ROWS][kVecs];
  for (int r = 0; r < ROWS; ++r)
    for (int c = 0; c < kVecs; ++c) acc[r][c] = Vec::zero();
  const int64_t panel_stride = k * kPackedPanel;
  for (int64_t kk = 0; kk < k; ++kk) {
    Vec w[kVecs];
    for (int c = 0; c < kVecs; ++c)
      w[c] = Vec::load(panel + (c / kVecsPerPanel) * panel_stride + kk * kPackedPanel +
                       (c % kVecsPerPanel) * Vec::kWidth);
    for (int r = 0; r < ROWS; ++r) {
      const Vec xr = Vec::broadcast(x[r * ldx + kk]);
      for (int c = 0; c < kVecs; ++c) acc[r][c] = Vec::fma(xr, w[c], acc[r][c]);
    }
  }
  for (int r = 0; r < ROWS; ++r) {
    float* out = y + r * ldy;
    const float* add = res ? res + r * ldy : nullptr;
    if (cols == PANELS * kPackedPanel) {
      for (int c = 0; c < kVecs; ++c) {
        Vec v = acc[r][c];
        if (add) v = Vec::add(Vec::load(add + c * Vec::kWidth), v);
        v.store(out + c * Vec::kWidth);
      }
    } else {  // the last columns of y: through a buffer, the same additions
      float buf[kVecs * Vec::kWidth];
      for (int c = 0; c < kVecs; ++c) acc[r][c].store(buf + c * Vec::kWidth);
      for (int64_t j = 0; j < cols; ++j) out[j] = add ? add[j] + buf[j] : buf[j];
    }
  }
}

using TileFn = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t, const float*);

// tiles[rows - 1][panels - 1]: every remainder shape of the kRows x kPanels tile.
template <int ROWS, int... P>
constexpr std::array<TileFn, sizeof...(P)> row_of_tiles(std::integer_sequence<int, P...>) {
  return {&tile<ROWS, P + 1>...};
}
template <int... R>
constexpr std::array<std::array<TileFn, kPanels>, sizeof...(R)> tile_table(std::integer_sequence<int, R...>) {
  return {row_of_tiles<R + 1>(std::make_integer_sequence<int, kPanels>{})...};
}
constexpr auto kTiles = tile_table(std::make_integer_sequence<int, kRows>{});

}  // namespace

void pack_weight(const float* w, float* panels, int64_t n, int64_t k) {
  const int64_t num_panels = (n + kPackedPanel - 1) / kPackedPanel;
  for (int64_t p = 0; p < num_panels; ++p) {
    float* dst = panels + p * k * kPackedPanel;
    for (int64_t j = 0; j < kPackedPanel; ++j) {
      const int64_t col = p * kPackedPanel + j;
      if (col < n) {
        const float* src = w + col * k;
        for (int64_t kk = 0; kk < k; ++kk) dst[kk * kPackedPanel + j] = src[kk];
      } else {
        for (int64_t kk = 0; kk < k; ++kk) dst[kk * kPackedPanel + j] = 0.0f;
      }
    }
  }
}

void pack_weight_transposed(const float* w, float* panels, int64_t n, int64_t k) {
  const int64_t num_panels = (k + kPackedPanel - 1) / kPackedPanel;
  for (int64_t p = 0; p < num_panels; ++p) {
    float* dst = panels + p * n * kPackedPanel;
    const int64_t col0 = p * kPackedPanel, width = std::min<int64_t>(kPackedPanel, k - col0);
    for (int64_t i = 0; i < n; ++i) {  // row i of w, columns [col0, col0 + width): one contiguous run
      const float* src = w + i * k + col0;
      float* out = dst + i * kPackedPanel;
      std::copy(src, src + width, out);
      std::fill(out + width, out + kPackedPanel, 0.0f);
    }
  }
}

void matmul_packed(const float* x, const float* panels, float* y, int64_t m, int64_t n, int64_t k,
                   const float* residual) {
  if (m == 0 || n == 0) return;
  const int64_t num_panels = (n + kPackedPanel - 1) / kPackedPanel;
  const int64_t groups = (num_panels + kPanels - 1) / kPanels;
  // Row blocks of near-equal size (32 rows: blocks of 5 and 6 rather than five of 6 and one of 2): a short tile
  // leaves the FMA units waiting on its few accumulators.
  const int64_t row_blocks = (m + kRows - 1) / kRows;
  // Which tiles a thread gets (its contiguous share of the tile order below). Few rows (decode): panel-group-
  // major, so a thread's share is whole panel groups whose weights stay in that core's cache from one call to
  // the next. Many rows (prefill, training): row-block-major, so a thread's share is whole row blocks and
  // each block of x, read in place, stays in L1 while every panel group (in L2) passes over it; in group-major
  // order every thread would stream all of x from L3 once per group it owns.
  const int64_t tiles = groups * row_blocks;
  const bool rows_outer = row_blocks >= kRowsOuterMinBlocks;
  const bool parallel = m * n * k >= kParallelMinMacs && tiles > 1;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t g = rows_outer ? t % groups : t / row_blocks, rb = rows_outer ? t / groups : t % row_blocks;
    const int64_t p0 = g * kPanels, row0 = rb * m / row_blocks;
    const int64_t np = std::min<int64_t>(kPanels, num_panels - p0), nr = (rb + 1) * m / row_blocks - row0;
    const int64_t col0 = p0 * kPackedPanel;
    kTiles[nr - 1][np - 1](x + row0 * k, k, panels + p0 * k * kPackedPanel, k, y + row0 * n + col0, n,
                           std::min<int64_t>(np * kPackedPanel, n - col0),
                           residual ? residual + row0 * n + col0 : nullptr);
  }
}

}  // namespace rlcpp::cpu
