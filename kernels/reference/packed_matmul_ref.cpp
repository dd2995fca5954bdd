// Reference packed weights and their product: the layout and the arithmetic kernels/ops.h promises, one output at
// a time — the definition the CPU's tiles and the CUDA kernel must equal bit for bit.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/dtype_round.h"
#include "kernels/reference/reference_kernels.h"

namespace rlcpp::ref {
namespace {

constexpr int64_t kPanel = 16;

// Where panel element (kk, j) lives: bf16 pairs k = 2p (upper half of word j of pair row p) and 2p + 1 (lower).
int64_t offset(DType format, int64_t kk, int64_t j) {
  if (format == DType::kBF16) return (kk / 2) * 2 * kPanel + 2 * j + (kk % 2 == 0 ? 1 : 0);
  return kk * kPanel + j;
}

// The code a weight (already divided by its channel scale) is stored as, and the value a product multiplies by.
void store(DType format, void* panels, int64_t index, float w) {
  switch (format) {
    case DType::kF32: static_cast<float*>(panels)[index] = w; break;
    case DType::kBF16: static_cast<uint16_t*>(panels)[index] = cpu::bf16_operand_bits(w); break;
    case DType::kF16: static_cast<uint16_t*>(panels)[index] = cpu::f16_bits_reference(w); break;
    case DType::kInt8:
      static_cast<int8_t*>(panels)[index] = static_cast<int8_t>(std::clamp(std::nearbyint(w), -127.0f, 127.0f));
      break;
    case DType::kFp8E4M3: static_cast<uint8_t*>(panels)[index] = cpu::e4m3_bits_reference(w); break;
    default: break;
  }
}
float load(DType format, const void* panels, int64_t index) {
  switch (format) {
    case DType::kF32: return static_cast<const float*>(panels)[index];
    case DType::kBF16: return cpu::bf16_value(static_cast<const uint16_t*>(panels)[index]);
    case DType::kF16: return cpu::f16_value_reference(static_cast<const uint16_t*>(panels)[index]);
    case DType::kInt8: return static_cast<float>(static_cast<const int8_t*>(panels)[index]);
    case DType::kFp8E4M3:  // the e4m3 value times 2^-8, as its fp16 decoding gives it
      return cpu::f16_value_reference(cpu::e4m3_to_f16_bits_scaled(static_cast<const uint8_t*>(panels)[index]));
    default: return 0.0f;
  }
}

float rounded(float x, DType round) {
  if (round == DType::kBF16) return cpu::bf16_round_reference(x);
  if (round == DType::kF16) return cpu::f16_round_reference(x);
  return x;
}

}  // namespace

void pack_weight(const float* w, void* panels, float* scales, int64_t n, int64_t k, int64_t depth, DType format) {
  const int64_t num_panels = (n + kPanel - 1) / kPanel;
  std::memset(panels, 0, static_cast<size_t>(num_panels * depth * kPanel) * dtype_size(format));
  const bool quantized = is_quantized(format);
  for (int64_t col = 0; col < num_panels * kPanel && quantized; ++col) {
    float largest = 0.0f;
    for (int64_t kk = 0; col < n && kk < k; ++kk) largest = std::max(largest, std::fabs(w[col * k + kk]));
    const float code_max = format == DType::kInt8 ? 127.0f : cpu::kE4m3Max;
    scales[col] = largest > 0.0f ? largest / code_max : 1.0f;  // 1 for an all-zero or a padding channel
  }
  for (int64_t col = 0; col < n; ++col) {
    char* panel = static_cast<char*>(panels) + (col / kPanel) * depth * kPanel * dtype_size(format);
    const float inverse = quantized ? 1.0f / scales[col] : 1.0f;
    for (int64_t kk = 0; kk < k; ++kk)
      store(format, panel, offset(format, kk, col % kPanel), quantized ? w[col * k + kk] * inverse : w[col * k + kk]);
  }
  if (format == DType::kFp8E4M3)
    for (int64_t col = 0; col < n; ++col) scales[col] *= cpu::kE4m3F16Scale;
}

void pack_weight_transposed(const float* w, void* panels, int64_t n, int64_t k, DType format) {
  std::vector<float> transposed(static_cast<size_t>(n * k));  // w^T (k,n)
  for (int64_t i = 0; i < n; ++i)
    for (int64_t col = 0; col < k; ++col) transposed[static_cast<size_t>(col * n + i)] = w[i * k + col];
  const int64_t depth = format == DType::kBF16 ? (n + 1) / 2 * 2 : n;  // bf16: pairs of rows of w
  pack_weight(transposed.data(), panels, nullptr, k, n, depth, format);
}

void matmul_packed(const float* x, const void* panels, const float* scales, DType format, float* y, int64_t m,
                   int64_t n, int64_t k, int64_t depth, const float* residual, DType round) {
  const size_t bytes = dtype_size(format);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t col = 0; col < n; ++col) {
      const char* panel = static_cast<const char*>(panels) + (col / kPanel) * depth * kPanel * bytes;
      float acc = 0.0f;
      for (int64_t kk = 0; kk < k; ++kk) {
        const float operand = format == DType::kBF16 ? cpu::bf16_operand_reference(x[i * k + kk]) : x[i * k + kk];
        acc = std::fma(operand, load(format, panel, offset(format, kk, col % kPanel)), acc);
      }
      float value = is_quantized(format) ? acc * scales[col] : acc;
      value = rounded(value, round);
      if (residual) value = rounded(residual[i * n + col] + value, round);
      y[i * n + col] = value;
    }
}

}  // namespace rlcpp::ref
