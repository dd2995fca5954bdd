// Reference roundings and 16-bit storage: each element to the nearest value of the dtype, ties to even.
#include <bit>

#include "kernels/cpu/dtype_round.h"
#include "kernels/reference/reference_kernels.h"

namespace rlcpp::ref {

void round_to(float* x, int64_t n, DType dtype) {
  for (int64_t i = 0; i < n; ++i)
    x[i] = dtype == DType::kBF16 ? cpu::bf16_round_reference(x[i])
           : dtype == DType::kF16 ? cpu::f16_round_reference(x[i])
                                  : x[i];
}

void stored_as(const float* x, int64_t n, DType dtype, void* out) {
  uint16_t* bits = static_cast<uint16_t*>(out);
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == DType::kBF16) {
      const float r = cpu::bf16_round_reference(x[i]);
      bits[i] = static_cast<uint16_t>(std::bit_cast<uint32_t>(r) >> 16);
    } else {
      bits[i] = cpu::f16_bits_reference(x[i]);
    }
  }
}

}  // namespace rlcpp::ref
