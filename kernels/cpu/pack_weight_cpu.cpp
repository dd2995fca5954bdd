// Packing weights into the panels of the packed product (kernels/ops.h pack_weight, pack_weight_transposed,
// unpack_weight; the layout: panel_layout.h): each format's values as the product reads them (bf16 rounded to
// nearest even with subnormals to zero, fp16, int8 and e4m3 with one scale per output channel), sixteen weights at
// a time where the layout allows (fp32 and bf16, the trainer's and a bf16 engine's formats, packed at every
// forward or sync).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/cpu/bf16_operands.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dtype_round.h"
#include "kernels/cpu/panel_layout.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace rlcpp::cpu {

using namespace panels;

namespace {

// One weight in a panel's format, and back (the value the product multiplies by, before the channel scale).
template <class W>
W encode(float w);
template <>
float encode<float>(float w) { return w; }
template <>
Bf16 encode<Bf16>(float w) { return {bf16_operand_bits(w)}; }
template <>
F16 encode<F16>(float w) { return {f16_bits(w)}; }
template <>
int8_t encode<int8_t>(float w) { return static_cast<int8_t>(std::clamp(std::nearbyint(w), -127.0f, 127.0f)); }
template <>
Fp8 encode<Fp8>(float w) { return {e4m3_bits_reference(w)}; }

float decode(float w) { return w; }
float decode(Bf16 w) { return bf16_value(w.bits); }
float decode(F16 w) { return f16_value(w.bits); }
float decode(int8_t w) { return static_cast<float>(w); }
float decode(Fp8 w) { return f16_value(e4m3_to_f16_bits_scaled(w.bits)); }  // the e4m3 value times 2^-8

// The largest code of a quantised format (w / scale spans [-max, max]).
float quant_max(DType f) { return f == DType::kInt8 ? 127.0f : kE4m3Max; }

// scales (n) per output channel: max |w[j][.]| / quant_max, 1 for an all-zero channel.
void channel_scales(const float* w, int64_t n, int64_t k, DType format, float* scales) {
  for (int64_t j = 0; j < n; ++j) {
    float mx = 0.0f;
    for (int64_t kk = 0; kk < k; ++kk) mx = std::max(mx, std::fabs(w[j * k + kk]));
    scales[j] = mx > 0.0f ? mx / quant_max(format) : 1.0f;
  }
}

template <class W>
void pack_panels(const float* w, W* panels, const float* scales, int64_t n, int64_t k) {
  const int64_t num_panels = (n + kPackedPanel - 1) / kPackedPanel, depth = panel_depth_of<W>(k);
  std::fill(panels, panels + num_panels * depth * kPackedPanel, encode<W>(0.0f));  // past n, past an odd k
  for (int64_t p = 0; p < num_panels; ++p) {
    W* dst = panels + p * depth * kPackedPanel;
    for (int64_t j = 0; j < kPackedPanel && p * kPackedPanel + j < n; ++j) {
      const int64_t col = p * kPackedPanel + j;
      const float* src = w + col * k;
      const float inv = scales ? 1.0f / scales[col] : 1.0f;
      for (int64_t kk = 0; kk < k; ++kk) dst[panel_offset<W>(kk, j)] = encode<W>(scales ? src[kk] * inv : src[kk]);
    }
  }
}

#if defined(__AVX512F__)
// Lane j of sixteen: j * stride (the offsets of a gather from sixteen rows `stride` apart).
__m512i lane_times(int64_t stride) {
  return _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                            _mm512_set1_epi32(static_cast<int>(stride)));
}
#endif

// bf16 panels (panel_offset<Bf16>'s layout), a panel at a time: its 16 rows of w rounded to bf16 operands into a
// buffer (contiguous loops that vectorise), then each pair word formed from two neighbouring values of a row.
// pack_panels places one weight at a time, and a bf16 trainer packs every layer in every forward (W2: 0.3 s of
// a 3.6 s step that way).
void pack_bf16_panels(const float* w, Bf16* panels, int64_t n, int64_t k) {
  const int64_t num_panels = (n + kPackedPanel - 1) / kPackedPanel, depth = panel_depth_of<Bf16>(k);
  thread_local std::vector<uint16_t> rows;
  rows.resize(static_cast<size_t>(kPackedPanel * depth));
  for (int64_t p = 0; p < num_panels; ++p) {
    for (int64_t j = 0; j < kPackedPanel; ++j) {
      uint16_t* row = rows.data() + j * depth;
      const int64_t col = p * kPackedPanel + j;
      if (col < n) {
        bf16_operand_row(w + col * k, k, row);
        if (depth > k) row[k] = 0;
      } else {
        std::fill(row, row + depth, uint16_t{0});
      }
    }
    uint32_t* out = reinterpret_cast<uint32_t*>(panels + p * depth * kPackedPanel);
    int64_t pair = 0;
#if defined(__AVX512F__)
    // Word j of a pair row: the 32 bits at rows[j][2 pair], its halves swapped (2 pair goes in the upper half).
    const __m512i row_starts = lane_times(2 * depth);
    for (; pair < depth / 2; ++pair) {
      const __m512i words = _mm512_i32gather_epi32(row_starts, rows.data() + 2 * pair, 1);
      _mm512_storeu_si512(out + pair * kPackedPanel, _mm512_ror_epi32(words, 16));
    }
#endif
    for (; pair < depth / 2; ++pair)
      for (int64_t j = 0; j < kPackedPanel; ++j) {
        const uint16_t* row = rows.data() + j * depth + 2 * pair;
        out[pair * kPackedPanel + j] = uint32_t{row[0]} << 16 | row[1];
      }
  }
}

// fp32 panels: each panel row (16 weights, one per output) gathered from 16 rows of w at once. pack_panels'
// element at a time ran at 1.1 ns a weight (W2's layers: 0.3 s of an fp32 training step's forward).
void pack_f32_panels(const float* w, float* panels, int64_t n, int64_t k) {
#if defined(__AVX512F__)
  const int64_t num_panels = (n + kPackedPanel - 1) / kPackedPanel;
  if (k * kPackedPanel * static_cast<int64_t>(sizeof(float)) < (int64_t{1} << 31)) {  // the gather's offsets fit
    const __m512i row_starts = lane_times(k);
    for (int64_t p = 0; p < num_panels; ++p) {
      const int64_t rows = std::min<int64_t>(kPackedPanel, n - p * kPackedPanel);
      const __mmask16 present = static_cast<__mmask16>((1u << rows) - 1u);  // zero past n
      const float* src = w + p * kPackedPanel * k;
      float* dst = panels + p * k * kPackedPanel;
      for (int64_t kk = 0; kk < k; ++kk)
        _mm512_storeu_ps(dst + kk * kPackedPanel,
                         _mm512_mask_i32gather_ps(_mm512_setzero_ps(), present, row_starts, src + kk, 4));
    }
    return;
  }
#endif
  pack_panels<float>(w, panels, nullptr, n, k);
}

template <class W>
void unpack_panels(const W* panels, const float* scales, float* w, int64_t n, int64_t k) {
  const int64_t depth = panel_depth_of<W>(k);
  for (int64_t col = 0; col < n; ++col) {
    const W* src = panels + (col / kPackedPanel) * depth * kPackedPanel;
    for (int64_t kk = 0; kk < k; ++kk) {
      const float v = decode(src[panel_offset<W>(kk, col % kPackedPanel)]);
      w[col * k + kk] = scales ? v * scales[col] : v;
    }
  }
}

}  // namespace

int64_t panel_depth(DType format, int64_t k) {
  return format == DType::kBF16 ? panel_depth_of<Bf16>(k) : k;
}

size_t panel_element_bytes(DType format) {
  switch (format) {
    case DType::kF32: return 4;
    case DType::kBF16:
    case DType::kF16: return 2;
    case DType::kInt8:
    case DType::kFp8E4M3: return 1;
  }
  return 4;
}

namespace {

void pack_f32_source(const float* w, void* panels, float* scales, int64_t n, int64_t k, DType format) {
  if (is_quantized(format)) channel_scales(w, n, k, format, scales);
  with_panel_type(format, panels, [&](auto typed) {
    using W = std::remove_const_t<std::remove_pointer_t<decltype(typed)>>;
    if constexpr (std::is_same_v<W, Bf16>)
      pack_bf16_panels(w, const_cast<W*>(typed), n, k);
    else if constexpr (std::is_same_v<W, float>)
      pack_f32_panels(w, const_cast<W*>(typed), n, k);
    else
      pack_panels(w, const_cast<W*>(typed), is_quantized(format) ? scales : nullptr, n, k);
  });
  // e4m3 panels decode to the value times 2^-8 (one fp16 conversion); the channel's multiplier takes the 2^8
  // back, exactly (a power of two).
  if (format == DType::kFp8E4M3)
    for (int64_t j = 0; j < n; ++j) scales[j] *= kE4m3F16Scale;
}

void pack_transposed_f32_source(const float* w, void* panels, int64_t n, int64_t k, DType format) {
  const int64_t num_panels = (k + kPackedPanel - 1) / kPackedPanel;
  if (format == DType::kBF16) {
    // Pair row p of a panel: word j holds rows 2p (upper half) and 2p + 1 (lower; zero past an odd n) of w at
    // column 16 panel + j, each a contiguous run of w.
    const int64_t depth = panel_depth_of<Bf16>(n);
    uint32_t* words = static_cast<uint32_t*>(panels);
    for (int64_t p = 0; p < num_panels; ++p) {
      const int64_t col0 = p * kPackedPanel, width = std::min<int64_t>(kPackedPanel, k - col0);
      for (int64_t pair = 0; pair < depth / 2; ++pair) {
        const float* upper = w + 2 * pair * k + col0;
        uint32_t* out = words + (p * depth / 2 + pair) * kPackedPanel;
        if (width == kPackedPanel && 2 * pair + 1 < n) {  // the common case
          bf16_operand_pair_words(upper, upper + k, kPackedPanel, out);
          continue;
        }
        for (int64_t j = 0; j < kPackedPanel; ++j)
          out[j] = j >= width ? 0u
                              : uint32_t{bf16_operand_bits(upper[j])} << 16 |
                                    (2 * pair + 1 < n ? bf16_operand_bits(upper[k + j]) : uint16_t{0});
      }
    }
    return;
  }
  for (int64_t p = 0; p < num_panels; ++p) {
    float* dst = static_cast<float*>(panels) + p * n * kPackedPanel;
    const int64_t col0 = p * kPackedPanel, width = std::min<int64_t>(kPackedPanel, k - col0);
    for (int64_t i = 0; i < n; ++i) {  // row i of w, columns [col0, col0 + width): one contiguous run
      const float* src = w + i * k + col0;
      float* out = dst + i * kPackedPanel;
      std::copy(src, src + width, out);
      std::fill(out + width, out + kPackedPanel, 0.0f);
    }
  }
}

// The bytes of one panel of `format` over `depth_of` inputs (a panel's first byte is p times this).
size_t panel_bytes(DType format, int64_t depth_of) {
  return static_cast<size_t>(panel_depth(format, depth_of) * kPackedPanel) * panel_element_bytes(format);
}

}  // namespace

// A bf16 source (a frozen LoRA base held in bf16) is packed panel by panel: the slice of w that one panel holds
// (16 rows; for the transposed panels 16 columns) widened exactly into a thread's fp32 buffer, then packed as an
// fp32 weight of that many rows (columns) — one panel, the same bits as packing the whole matrix widened, without
// a widened copy of it (lm_head's would be 545 MB at 0.5B).
void pack_weight(const void* w, DType source, void* panels, float* scales, int64_t n, int64_t k, DType format) {
  if (source == DType::kF32) return pack_f32_source(static_cast<const float*>(w), panels, scales, n, k, format);
  const uint16_t* bits = static_cast<const uint16_t*>(w);
  thread_local std::vector<float> rows;
  rows.resize(static_cast<size_t>(kPackedPanel * k));
  for (int64_t p = 0; p * kPackedPanel < n; ++p) {
    const int64_t row0 = p * kPackedPanel, count = std::min<int64_t>(kPackedPanel, n - row0);
    for (int64_t i = 0; i < count * k; ++i) rows[static_cast<size_t>(i)] = bf16_value(bits[row0 * k + i]);
    pack_f32_source(rows.data(), static_cast<char*>(panels) + p * panel_bytes(format, k),
                    scales ? scales + row0 : nullptr, count, k, format);
  }
}

void unpack_weight(const void* panels, const float* scales, float* w, int64_t n, int64_t k, DType format) {
  with_panel_type(format, panels, [&](auto typed) { unpack_panels(typed, is_quantized(format) ? scales : nullptr, w, n, k); });
}

void pack_weight_transposed(const void* w, DType source, void* panels, int64_t n, int64_t k, DType format) {
  if (source == DType::kF32) return pack_transposed_f32_source(static_cast<const float*>(w), panels, n, k, format);
  const uint16_t* bits = static_cast<const uint16_t*>(w);
  thread_local std::vector<float> columns;
  columns.resize(static_cast<size_t>(n * kPackedPanel));
  for (int64_t p = 0; p * kPackedPanel < k; ++p) {
    const int64_t col0 = p * kPackedPanel, width = std::min<int64_t>(kPackedPanel, k - col0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < width; ++j) columns[static_cast<size_t>(i * width + j)] = bf16_value(bits[i * k + col0 + j]);
    pack_transposed_f32_source(columns.data(), static_cast<char*>(panels) + p * panel_bytes(format, n), n, width,
                               format);
  }
}

}  // namespace rlcpp::cpu
