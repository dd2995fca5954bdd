// The layout of a packed weight's panels (kernels/ops.h PackedWeight), shared by the packing
// (pack_weight_cpu.cpp) and the product (packed_matmul_cpu.cpp): one element type per panel format, where weight
// (kk, j) of a panel lives, and a dispatch from a format to its element type. Private to kernels/cpu/.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/tensor.h"
#include "kernels/cpu/cpu_kernels.h"

namespace rlcpp::cpu::panels {

// Panel element types, one per DType: what a panel stores per weight.
struct Bf16 {
  uint16_t bits;
};
struct F16 {
  uint16_t bits;
};
struct Fp8 {
  uint8_t bits;
};

// Where a panel of W values keeps weight (kk, j) — kk along K, j the output within the panel — and how many
// rows of K it has: bf16 panels pair k = 2p and 2p + 1 in word j of pair row p (2p in the upper half, a zero
// lower half after an odd K's last k); the other formats are (K, 16) row-major.
template <class W>
constexpr bool kPairPanel = std::is_same_v<W, Bf16>;
template <class W>
inline int64_t panel_depth_of(int64_t k) {
  return kPairPanel<W> ? (k + 1) / 2 * 2 : k;
}
template <class W>
inline int64_t panel_offset(int64_t kk, int64_t j) {
  if constexpr (kPairPanel<W>) return (kk / 2) * 2 * kPackedPanel + 2 * j + (kk % 2 == 0 ? 1 : 0);
  return kk * kPackedPanel + j;
}

// Calls fn(typed panel pointer) for the format's element type.
template <class Fn>
void with_panel_type(DType format, const void* panels, Fn fn) {
  switch (format) {
    case DType::kF32: fn(static_cast<const float*>(panels)); return;
    case DType::kBF16: fn(static_cast<const Bf16*>(panels)); return;
    case DType::kF16: fn(static_cast<const F16*>(panels)); return;
    case DType::kInt8: fn(static_cast<const int8_t*>(panels)); return;
    case DType::kFp8E4M3: fn(static_cast<const Fp8*>(panels)); return;
  }
}

}  // namespace rlcpp::cpu::panels
