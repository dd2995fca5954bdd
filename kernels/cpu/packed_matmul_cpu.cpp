// The decode matmul: y (M,N) = x (M,K) @ w^T against weights packed once into panels of 16 output columns
// (kernels/ops.h, PackedWeight). OpenBLAS repacks w on every sgemm call, which at decode sizes (M = 1..512 rows,
// K and N a few hundred) costs as much as a tenth of the product; here the panels are ready and one register
// tile of kRows rows x kPanels panels streams them.
//
// Each output is one fused multiply-add chain: acc = 0; acc = fma(x[m][k], w[n][k], acc) for k = 0..K-1 in
// order; then y = acc (or y + acc). Tiling only decides which chains run side by side, never their order, so a
// row's result is the same bits whatever M, the row's place in the batch, the tile it falls in or the thread
// count. The portable path computes the same chains with std::fma (one rounding each), so it gives the same
// bits as the AVX-512 one.
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

static_assert(kPackedPanel == 16, "the AVX-512 tile holds one panel per 16-float register");

// The register tile: kRows x kPanels accumulators (24 of AVX-512's 32 registers), plus kPanels weight
// registers and one broadcast. Per k it loads kPanels + kRows values for kRows * kPanels multiply-adds.
constexpr int kRows = 6;
constexpr int kPanels = 4;

// Multiply-adds below which a product stays on one thread: waking the second thread costs a few
// microseconds, the time of ~200k multiply-adds here.
constexpr int64_t kParallelMinMacs = int64_t{1} << 18;

#if defined(__AVX512F__)
// ROWS rows of x times PANELS panels into y; `cols` (<= PANELS * 16) columns of y exist from `y` on.
template <int ROWS, int PANELS>
void tile(const float* x, int64_t ldx, const float* panel, int64_t k, float* y, int64_t ldy, int64_t cols,
          bool accumulate) {
  __m512 acc[ROWS][PANELS];
  for (int r = 0; r < ROWS; ++r)
    for (int p = 0; p < PANELS; ++p) acc[r][p] = _mm512_setzero_ps();
  const int64_t panel_stride = k * kPackedPanel;
  for (int64_t kk = 0; kk < k; ++kk) {
    __m512 w[PANELS];
    for (int p = 0; p < PANELS; ++p) w[p] = _mm512_load_ps(panel + p * panel_stride + kk * kPackedPanel);
    for (int r = 0; r < ROWS; ++r) {
      const __m512 xr = _mm512_set1_ps(x[r * ldx + kk]);
      for (int p = 0; p < PANELS; ++p) acc[r][p] = _mm512_fmadd_ps(xr, w[p], acc[r][p]);
    }
  }
  for (int p = 0; p < PANELS; ++p) {
    const int64_t c = std::min<int64_t>(kPackedPanel, cols - p * kPackedPanel);
    const __mmask16 mask = static_cast<__mmask16>((1u << c) - 1u);
    for (int r = 0; r < ROWS; ++r) {
      float* out = y + r * ldy + p * kPackedPanel;
      __m512 v = acc[r][p];
      if (accumulate) v = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, out), v);
      _mm512_mask_storeu_ps(out, mask, v);
    }
  }
}
#else
template <int ROWS, int PANELS>
void tile(const float* x, int64_t ldx, const float* panel, int64_t k, float* y, int64_t ldy, int64_t cols,
          bool accumulate) {
  float acc[ROWS][PANELS * kPackedPanel] = {};
  const int64_t panel_stride = k * kPackedPanel;
  for (int64_t kk = 0; kk < k; ++kk)
    for (int r = 0; r < ROWS; ++r) {
      const float xr = x[r * ldx + kk];
      for (int p = 0; p < PANELS; ++p) {
        const float* w = panel + p * panel_stride + kk * kPackedPanel;
        for (int j = 0; j < kPackedPanel; ++j)
          acc[r][p * kPackedPanel + j] = std::fma(xr, w[j], acc[r][p * kPackedPanel + j]);
      }
    }
  for (int r = 0; r < ROWS; ++r)
    for (int64_t j = 0; j < cols; ++j) y[r * ldy + j] = accumulate ? y[r * ldy + j] + acc[r][j] : acc[r][j];
}
#endif

using TileFn = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t, bool);

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

void matmul_packed(const float* x, const float* panels, float* y, int64_t m, int64_t n, int64_t k, bool accumulate) {
  if (m == 0 || n == 0) return;
  const int64_t num_panels = (n + kPackedPanel - 1) / kPackedPanel;
  const int64_t groups = (num_panels + kPanels - 1) / kPanels;
  const int64_t row_blocks = (m + kRows - 1) / kRows;
  // Tiles in panel-group-major order: a thread's contiguous share is whole panel groups (their weights stay
  // in that core's cache from one call to the next) unless there are fewer groups than threads.
  const int64_t tiles = groups * row_blocks;
  const bool parallel = m * n * k >= kParallelMinMacs && tiles > 1;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t g = t / row_blocks, rb = t % row_blocks;
    const int64_t p0 = g * kPanels, row0 = rb * kRows;
    const int64_t np = std::min<int64_t>(kPanels, num_panels - p0), nr = std::min<int64_t>(kRows, m - row0);
    const int64_t col0 = p0 * kPackedPanel;
    kTiles[nr - 1][np - 1](x + row0 * k, k, panels + p0 * k * kPackedPanel, k, y + row0 * n + col0, n,
                           std::min<int64_t>(np * kPackedPanel, n - col0), accumulate);
  }
}

}  // namespace rlcpp::cpu
