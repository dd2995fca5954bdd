// The packed matmul: y (M,N) = x (M,K) @ w^T against weights packed into panels of 16 output columns
// (kernels/ops.h, PackedWeight). OpenBLAS repacks both operands on every sgemm call and zeroes C first when
// beta = 0: at decode sizes (M = 1..512 rows, K and N a few hundred) the repacking costs as much as a tenth of
// the product, and at training sizes (M = thousands of rows, K = 128..704) copying the activations and zeroing
// the output cost a fifth of the step. Here the panels are ready (a few hundred KB, they stay in cache), x is
// read in place, and one register tile of kRows rows x kPanels panels streams them — or, for a decode step of
// a few rows against weights in DRAM, one thin tile of all its rows x 1 panel (thin_product).
//
// Each output is one fused multiply-add chain: acc = 0; acc = fma(x[m][k], w[n][k], acc) for k = 0..K-1 in
// order; then y = acc (or y + acc). Tiling only decides which chains run side by side, never their order, so a
// row's result is the same bits whatever M, the row's place in the batch, the tile it falls in or the thread
// count. The AVX2 and portable arms (builds without AVX-512) compute the same chains with their own FMA (one
// rounding each), so every arm gives the same bits.
//
// Weight formats (ops.h DType): the panels hold fp32, bf16, fp16, int8 or fp8 e4m3 values, converted to
// fp32 exactly as they are loaded (bf16: a mask or a shift; fp16 and e4m3: one fp16 conversion; int8: an integer
// conversion), so a 16-bit or 8-bit panel is the same chain over the values it stores, at half or a quarter of
// the bytes a bandwidth-bound decode reads. Quantised panels carry one scale per output, applied to the finished
// chain: y = scale[n] * chain. The epilogue then rounds to the compute dtype when asked: y = round(acc), or
// y = round(residual + round(acc)) into a residual stream, the two roundings a bf16 GPU model makes.
//
// bf16 panels are a bf16 matrix product, as a GPU's: both operands are bf16 (x rounded to bf16 on the way in;
// the activations of a bf16 model already are), subnormals read as zero (dtype_round.h bf16_operand). Their
// panels store the weights of k = 2p and 2p + 1 side by side in one 32-bit word per output (2p in the upper
// half), AVX512-BF16's layout: there each vdpbf16ps adds both products of a word to the accumulator, 2p's
// first, each with one rounding — the same fma chain (a product of two bf16 values is exact in fp32) at twice
// the products per instruction. The one difference: vdpbf16ps flushes a partial sum below 2^-126 to zero, which
// the fma arms (a mask and a shift split each word into two fp32 registers) keep.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dtype_round.h"
#include "kernels/cpu/panel_layout.h"

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif
#if defined(__AVX512BF16__)
#define RLCPP_DPBF16 1
#endif

namespace rlcpp::cpu {

using namespace panels;

namespace {

// One register of the tile: 16 floats (AVX-512), 8 (AVX2 + FMA), or 1 (portable). Every arm multiplies and
// adds with one rounding (an FMA), converts panel values exactly and rounds to bf16/fp16 to nearest even, so
// they all compute the same bits.
#if defined(__AVX512F__)
struct Vec {
  static constexpr int kWidth = 16;
  __m512 v;
  static Vec zero() { return {_mm512_setzero_ps()}; }
  static Vec load(const float* p) { return {_mm512_loadu_ps(p)}; }
  static Vec load(const Bf16* p) {
    const __m512i u = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return {_mm512_castsi512_ps(_mm512_slli_epi32(u, 16))};
  }
  static Vec load(const F16* p) { return {_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))}; }
  // Sixteen words of a bf16 pair panel: the upper halves (the first k of each pair) and the lower halves.
  static void load_pair(const Bf16* p, Vec& first, Vec& second) {
    const __m512i u = _mm512_loadu_si512(p);
    first = {_mm512_castsi512_ps(_mm512_and_si512(u, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))))};
    second = {_mm512_castsi512_ps(_mm512_slli_epi32(u, 16))};
  }
  static Vec load(const int8_t* p) {
    return {_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))))};
  }
  static Vec load(const Fp8* p) {  // e4m3_to_f16_bits_scaled on 16 bytes, then one fp16 conversion
    const __m256i b = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m256i sign = _mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x80)), 8);
    const __m256i rest = _mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x7F)), 7);
    return {_mm512_cvtph_ps(_mm256_or_si256(sign, rest))};
  }
  static Vec broadcast(float x) { return {_mm512_set1_ps(x)}; }
  static Vec fma(Vec a, Vec b, Vec c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
  static Vec add(Vec a, Vec b) { return {_mm512_add_ps(a.v, b.v)}; }
  static Vec mul(Vec a, Vec b) { return {_mm512_mul_ps(a.v, b.v)}; }
  static Vec round_bf16(Vec a) {  // bf16_round, sixteen lanes
    const __m512i u = _mm512_castps_si512(a.v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i up = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), lsb));
    const __m512i hi = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
    const __m512i rounded = _mm512_and_si512(up, hi);
    const __m512i nan = _mm512_and_si512(_mm512_or_si512(u, _mm512_set1_epi32(0x00400000)), hi);
    const __mmask16 is_nan = _mm512_cmp_ps_mask(a.v, a.v, _CMP_UNORD_Q);
    return {_mm512_castsi512_ps(_mm512_mask_mov_epi32(rounded, is_nan, nan))};
  }
  static Vec round_f16(Vec a) {
    return {_mm512_cvtph_ps(_mm512_cvtps_ph(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))};
  }
  void store(float* p) const { _mm512_storeu_ps(p, v); }
};
// The register tile: kRows x kPanels accumulators (24 of the 32 registers) plus kPanels weight registers and
// one broadcast. Per k it loads kPanels + kRows values for kRows * kPanels multiply-adds.
constexpr int kRows = 6;
constexpr int kPanels = 4;
// The thin tile of a decode step's few rows (more than kRows, at most kThinRows): all of them x 1 panel, 16
// accumulators, so that one pass over a panel serves every row (see thin_product).
constexpr int kThinRows = 16;
#elif defined(__AVX2__) && defined(__FMA__)
struct Vec {
  static constexpr int kWidth = 8;
  __m256 v;
  static Vec zero() { return {_mm256_setzero_ps()}; }
  static Vec load(const float* p) { return {_mm256_loadu_ps(p)}; }
  static Vec load(const Bf16* p) {
    const __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return {_mm256_castsi256_ps(_mm256_slli_epi32(u, 16))};
  }
  static Vec load(const F16* p) { return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))}; }
  static void load_pair(const Bf16* p, Vec& first, Vec& second) {
    const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    first = {_mm256_castsi256_ps(_mm256_and_si256(u, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))))};
    second = {_mm256_castsi256_ps(_mm256_slli_epi32(u, 16))};
  }
  static Vec load(const int8_t* p) {
    return {_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))))};
  }
  static Vec load(const Fp8* p) {
    const __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    const __m128i sign = _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x80)), 8);
    const __m128i rest = _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x7F)), 7);
    return {_mm256_cvtph_ps(_mm_or_si128(sign, rest))};
  }
  static Vec broadcast(float x) { return {_mm256_set1_ps(x)}; }
  static Vec fma(Vec a, Vec b, Vec c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
  static Vec add(Vec a, Vec b) { return {_mm256_add_ps(a.v, b.v)}; }
  static Vec mul(Vec a, Vec b) { return {_mm256_mul_ps(a.v, b.v)}; }
  static Vec round_bf16(Vec a) {
    const __m256i u = _mm256_castps_si256(a.v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i up = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), lsb));
    const __m256i hi = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
    const __m256 rounded = _mm256_castsi256_ps(_mm256_and_si256(up, hi));
    const __m256 nan =
        _mm256_castsi256_ps(_mm256_and_si256(_mm256_or_si256(u, _mm256_set1_epi32(0x00400000)), hi));
    return {_mm256_blendv_ps(rounded, nan, _mm256_cmp_ps(a.v, a.v, _CMP_UNORD_Q))};
  }
  static Vec round_f16(Vec a) {
    return {_mm256_cvtph_ps(_mm256_cvtps_ph(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))};
  }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
};
// 6 x 1 panels = 12 accumulators of the 16 registers, 2 weight registers, one broadcast.
constexpr int kRows = 6;
constexpr int kPanels = 1;
constexpr int kThinRows = kRows;  // no registers for more rows: no thin tile
#else
struct Vec {
  static constexpr int kWidth = 1;
  float v;
  static Vec zero() { return {0.0f}; }
  static Vec load(const float* p) { return {*p}; }
  static Vec load(const Bf16* p) { return {bf16_value(p->bits)}; }
  static Vec load(const F16* p) { return {f16_value(p->bits)}; }
  static void load_pair(const Bf16* p, Vec& first, Vec& second) {
    first = {bf16_value(p[1].bits)};
    second = {bf16_value(p[0].bits)};
  }
  static Vec load(const int8_t* p) { return {static_cast<float>(*p)}; }
  static Vec load(const Fp8* p) { return {f16_value(e4m3_to_f16_bits_scaled(p->bits))}; }
  static Vec broadcast(float x) { return {x}; }
  static Vec fma(Vec a, Vec b, Vec c) { return {std::fma(a.v, b.v, c.v)}; }
  static Vec add(Vec a, Vec b) { return {a.v + b.v}; }
  static Vec mul(Vec a, Vec b) { return {a.v * b.v}; }
  static Vec round_bf16(Vec a) { return {bf16_round(a.v)}; }
  static Vec round_f16(Vec a) { return {f16_round(a.v)}; }
  void store(float* p) const { *p = v; }
};
constexpr int kRows = 4;
constexpr int kPanels = 1;
constexpr int kThinRows = kRows;
#endif
constexpr int kVecsPerPanel = static_cast<int>(kPackedPanel) / Vec::kWidth;
static_assert(kVecsPerPanel * Vec::kWidth == kPackedPanel, "a panel is a whole number of registers");

// Row blocks (of kRows rows) from which a product walks its tiles row block by row block (see matmul_packed).
constexpr int64_t kRowsOuterMinBlocks = 128;

// How far ahead of its reads the thin tile asks for its panel (one panel row is 64 bytes in fp32 and bf16): the
// hardware prefetcher alone leaves a 16-row pass over weights in DRAM at ~22 GB/s on this machine's two cores,
// 4-32 KiB ahead reaches 36-42 GB/s, the 1-row pass's rate (bench/RESULTS.md, session 14).
constexpr int64_t kPrefetchBytes = 8192;

// Where a tile finds operand kk (a k; a pair word for bf16 pair panels) of its row r in x.
struct RowMajorX {  // x read in place, row r at r * ld
  int64_t ld;
  int64_t at(int64_t r, int64_t kk) const { return r * ld + kk; }
  static constexpr bool kStreamsPanels = false;
};
struct ThinX {  // the thin tile's copy of x: operand kk of every row side by side (one cache line)
  int64_t at(int64_t r, int64_t kk) const { return kk * kThinRows + r; }
  static constexpr bool kStreamsPanels = true;  // one pass over each panel, ahead of which it prefetches
};

template <class XL, class W>
void prefetch_ahead(const W* panel_row) {
  if constexpr (XL::kStreamsPanels) __builtin_prefetch(reinterpret_cast<const char*>(panel_row) + kPrefetchBytes, 0, 3);
}

// What happens to a finished chain: times the channel's scale (quantised panels; `scales` from the tile's
// first column, already times 2^8 for e4m3), rounded to the compute dtype, added to the residual and rounded
// again.
struct Epilogue {
  const float* scales = nullptr;
  DType round = DType::kF32;
  Vec apply(Vec acc, int c, const float* residual) const {
    if (scales) acc = Vec::mul(acc, Vec::load(scales + c * Vec::kWidth));
    acc = rounded(acc);
    if (residual) acc = rounded(Vec::add(Vec::load(residual + c * Vec::kWidth), acc));
    return acc;
  }
  Vec rounded(Vec a) const {
    if (round == DType::kBF16) return Vec::round_bf16(a);
    if (round == DType::kF16) return Vec::round_f16(a);
    return a;
  }
};

// A tile's ROWS x kVecs finished chains through the epilogue into y (added to `res` when given, the same
// layout as y, may be y); `cols` (<= kVecs * kWidth) columns of y exist from `y` on.
template <int ROWS, int kVecs>
void store_tile(const Vec (&acc)[ROWS][kVecs], float* y, int64_t ldy, int64_t cols, const float* res,
                const Epilogue& epilogue) {
  for (int r = 0; r < ROWS; ++r) {
    float* out = y + r * ldy;
    const float* add = res ? res + r * ldy : nullptr;
    if (cols == kVecs * Vec::kWidth) {
      for (int c = 0; c < kVecs; ++c) epilogue.apply(acc[r][c], c, add).store(out + c * Vec::kWidth);
    } else {  // the last columns of y: through buffers, the same operations
      float buf[kVecs * Vec::kWidth], res_buf[kVecs * Vec::kWidth] = {};
      if (add) std::copy(add, add + cols, res_buf);
      for (int c = 0; c < kVecs; ++c) epilogue.apply(acc[r][c], c, add ? res_buf : nullptr).store(buf + c * Vec::kWidth);
      std::copy(buf, buf + cols, out);
    }
  }
}

// ROWS rows of x (fp32, ldx floats apart) times PANELS panels of W values (`depth` rows of K each) into y, one
// fma per weight. For bf16 pair panels x holds bf16 operands already (bf16_operand).
template <class W>
struct FmaTile {
  template <int ROWS, int PANELS, class XL>
  static void run(const float* x, XL xl, const W* panel, int64_t depth, int64_t k, float* y, int64_t ldy,
                  int64_t cols, const float* res, const Epilogue& epilogue) {
    constexpr int kVecs = PANELS * kVecsPerPanel;  // registers across the tile's columns
    Vec acc[ROWS][kVecs];
    for (int r = 0; r < ROWS; ++r)
      for (int c = 0; c < kVecs; ++c) acc[r][c] = Vec::zero();
    const int64_t panel_stride = depth * kPackedPanel;
    if constexpr (kPairPanel<W>) {
      // Per pair row and register: split the words, then both of each row's fmas, 2p first.
      for (int64_t kk = 0; kk < k; kk += 2) {
        prefetch_ahead<XL>(panel + kk * kPackedPanel);
        const bool second_k = kk + 1 < k;
        for (int c = 0; c < kVecs; ++c) {
          Vec first, second;
          Vec::load_pair(panel + (c / kVecsPerPanel) * panel_stride + kk * kPackedPanel +
                             (c % kVecsPerPanel) * 2 * Vec::kWidth,
                         first, second);
          for (int r = 0; r < ROWS; ++r) acc[r][c] = Vec::fma(Vec::broadcast(x[xl.at(r, kk)]), first, acc[r][c]);
          if (second_k)
            for (int r = 0; r < ROWS; ++r)
              acc[r][c] = Vec::fma(Vec::broadcast(x[xl.at(r, kk + 1)]), second, acc[r][c]);
        }
      }
    } else {
      for (int64_t kk = 0; kk < k; ++kk) {
        prefetch_ahead<XL>(panel + kk * kPackedPanel);
        Vec w[kVecs];
        for (int c = 0; c < kVecs; ++c)
          w[c] = Vec::load(panel + (c / kVecsPerPanel) * panel_stride + kk * kPackedPanel +
                           (c % kVecsPerPanel) * Vec::kWidth);
        for (int r = 0; r < ROWS; ++r) {
          const Vec xr = Vec::broadcast(x[xl.at(r, kk)]);
          for (int c = 0; c < kVecs; ++c) acc[r][c] = Vec::fma(xr, w[c], acc[r][c]);
        }
      }
    }
    store_tile(acc, y, ldy, cols, res, epilogue);
  }
};

#if defined(RLCPP_DPBF16)
// The bf16 tile on AVX512-BF16: x as words of bf16 operand pairs (x[2p] in the upper half, operand p of the
// layout), one vdpbf16ps per pair row, register and row; an odd K's last k by one fma.
struct DpBf16Tile {
  template <int ROWS, int PANELS, class XL>
  static void run(const uint32_t* x, XL xl, const Bf16* panel, int64_t depth, int64_t k, float* y,
                  int64_t ldy, int64_t cols, const float* res, const Epilogue& epilogue) {
    Vec acc[ROWS][PANELS];
    for (int r = 0; r < ROWS; ++r)
      for (int c = 0; c < PANELS; ++c) acc[r][c] = Vec::zero();
    const int64_t panel_stride = depth * kPackedPanel, pairs = k / 2;
    for (int64_t p = 0; p < pairs; ++p) {
      prefetch_ahead<XL>(panel + p * 2 * kPackedPanel);
      __m512bh w[PANELS];
      for (int c = 0; c < PANELS; ++c)
        w[c] = (__m512bh)_mm512_loadu_si512(panel + c * panel_stride + p * 2 * kPackedPanel);
      for (int r = 0; r < ROWS; ++r) {
        const __m512bh xr = (__m512bh)_mm512_set1_epi32(static_cast<int>(x[xl.at(r, p)]));
        for (int c = 0; c < PANELS; ++c) acc[r][c].v = _mm512_dpbf16_ps(acc[r][c].v, w[c], xr);
      }
    }
    if (k % 2 != 0) {
      for (int c = 0; c < PANELS; ++c) {
        Vec first, second;
        Vec::load_pair(panel + c * panel_stride + pairs * 2 * kPackedPanel, first, second);
        for (int r = 0; r < ROWS; ++r) {
          const float xr = std::bit_cast<float>(x[xl.at(r, pairs)] & 0xFFFF0000u);
          acc[r][c] = Vec::fma(Vec::broadcast(xr), first, acc[r][c]);
        }
      }
    }
    store_tile(acc, y, ldy, cols, res, epilogue);
  }
};
#endif

// tiles[rows - 1][panels - 1]: every remainder shape of a ROWS x PANELS tile reading x through XL, for one
// Tile kind.
template <class Tile, class XL, int ROWS, int... P>
constexpr auto row_of_tiles(std::integer_sequence<int, P...>) {
  return std::array{&Tile::template run<ROWS, P + 1, XL>...};
}
template <class Tile, class XL, int PANELS, int... R>
constexpr auto tile_table(std::integer_sequence<int, R...>) {
  return std::array{row_of_tiles<Tile, XL, R + 1>(std::make_integer_sequence<int, PANELS>{})...};
}
template <class Tile, class XL, int ROWS, int PANELS>
constexpr auto kTiles = tile_table<Tile, XL, PANELS>(std::make_integer_sequence<int, ROWS>{});

// y = x @ W^T over the ROWS x PANELS tiles of one Tile kind; x's m rows are where xl says.
template <class Tile, int ROWS, int PANELS, class X, class XL, class W>
void run_tiles(const X* x, XL xl, const W* panels, const float* scales, float* y, int64_t m, int64_t n, int64_t k,
               const float* residual, DType round) {
  const int64_t depth = panel_depth_of<W>(k);
  const int64_t num_panels = (n + kPackedPanel - 1) / kPackedPanel;
  const int64_t groups = (num_panels + PANELS - 1) / PANELS;
  // Row blocks of near-equal size (32 rows: blocks of 5 and 6 rather than five of 6 and one of 2): a short tile
  // leaves the FMA units waiting on its few accumulators.
  const int64_t row_blocks = (m + ROWS - 1) / ROWS;
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
    const int64_t p0 = g * PANELS, row0 = rb * m / row_blocks;
    const int64_t np = std::min<int64_t>(PANELS, num_panels - p0), nr = (rb + 1) * m / row_blocks - row0;
    const int64_t col0 = p0 * kPackedPanel;
    const Epilogue epilogue{scales ? scales + col0 : nullptr, round};
    kTiles<Tile, XL, ROWS, PANELS>[nr - 1][np - 1](x + xl.at(row0, 0), xl, panels + p0 * depth * kPackedPanel, depth,
                                                   k, y + row0 * n + col0, n,
                                                   std::min<int64_t>(np * kPackedPanel, n - col0),
                                                   residual ? residual + row0 * n + col0 : nullptr, epilogue);
  }
}

// Whether a product of m rows runs as thin tiles (all rows against one panel at a time, kThinRows x 1) rather
// than kRows x kPanels ones. A decode step of a batch (7..16 rows) against a model larger than the cache: the
// wide tile passes over each panel group once per row block, the first pass reading it from DRAM while the FMA
// units do a third of the work they could, so memory and arithmetic take turns (W2 bf16, 16 rows: 35-45 ms a
// step where either alone takes ~22). One streaming pass with the panel prefetched ahead overlaps them
// (26-29 ms). At 1..kRows rows the wide tile is one pass already, and the thin one is no faster.
bool thin_product(int64_t m) { return kThinRows > kRows && m > kRows && m <= kThinRows; }

// The operands of a bf16 product, converted once per call into a buffer of the calling thread (x is small next
// to the product: m x k against m x k x n), on both cores when the product runs on both.
template <class T, class Convert>
const T* bf16_operands(const float* x, int64_t m, int64_t row_len, bool parallel, const Convert& convert) {
  thread_local std::vector<T> buffer;
  buffer.resize(static_cast<size_t>(m * row_len));
  T* out = buffer.data();
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t i = 0; i < m; ++i) convert(i, out + i * row_len);
  return out;
}

// A thin product's x (m <= kThinRows rows of row_len operands, row-major) copied into ThinX's layout, in a
// buffer of the calling thread.
template <class T>
const T* thin_operands(const T* rows, int64_t m, int64_t row_len) {
  thread_local std::vector<T> buffer;
  buffer.resize(static_cast<size_t>(kThinRows * row_len));
  for (int64_t kk = 0; kk < row_len; ++kk)
    for (int64_t i = 0; i < m; ++i) buffer[ThinX{}.at(i, kk)] = rows[i * row_len + kk];
  return buffer.data();
}

// y = x @ W^T through one Tile kind, with x's operands at x (row-major, ld apart) or in ThinX's layout.
template <class Tile, class X, class W>
void run_product(const X* x, int64_t ld, bool thin, const W* panels, const float* scales, float* y, int64_t m,
                 int64_t n, int64_t k, const float* residual, DType round) {
  if constexpr (kThinRows > kRows) {
    if (thin) return run_tiles<Tile, kThinRows, 1>(x, ThinX{}, panels, scales, y, m, n, k, residual, round);
  }
  run_tiles<Tile, kRows, kPanels>(x, RowMajorX{ld}, panels, scales, y, m, n, k, residual, round);
}

template <class W>
void matmul_panels(const float* x, const W* panels, const float* scales, float* y, int64_t m, int64_t n, int64_t k,
                   const float* residual, DType round) {
  const bool thin = thin_product(m);
  if constexpr (kPairPanel<W>) {
    const bool parallel = m * n * k >= kParallelMinMacs && m > 1;
#if defined(RLCPP_DPBF16)
    const int64_t words = (k + 1) / 2;
    const uint32_t* pairs = bf16_operands<uint32_t>(x, m, words, parallel, [&](int64_t i, uint32_t* row) {
      const float* xi = x + i * k;
      for (int64_t p = 0; p < k / 2; ++p)
        row[p] = uint32_t{bf16_operand_bits(xi[2 * p])} << 16 | bf16_operand_bits(xi[2 * p + 1]);
      if (k % 2 != 0) row[k / 2] = uint32_t{bf16_operand_bits(xi[k - 1])} << 16;
    });
    run_product<DpBf16Tile>(thin ? thin_operands(pairs, m, words) : pairs, words, thin, panels, scales, y, m, n, k,
                            residual, round);
#else
    const float* operands = bf16_operands<float>(x, m, k, parallel, [&](int64_t i, float* row) {
      for (int64_t kk = 0; kk < k; ++kk) row[kk] = bf16_operand(x[i * k + kk]);
    });
    run_product<FmaTile<W>>(thin ? thin_operands(operands, m, k) : operands, k, thin, panels, scales, y, m, n, k,
                            residual, round);
#endif
  } else {
    run_product<FmaTile<W>>(thin ? thin_operands(x, m, k) : x, k, thin, panels, scales, y, m, n, k, residual, round);
  }
}

}  // namespace

void matmul_packed(const float* x, const void* panels, const float* scales, DType format, float* y,
                   int64_t m, int64_t n, int64_t k, const float* residual, DType round) {
  if (m == 0 || n == 0) return;
  with_panel_type(format, panels, [&](auto typed) {
    matmul_panels(x, typed, is_quantized(format) ? scales : nullptr, y, m, n, k, residual, round);
  });
}

}  // namespace rlcpp::cpu
