// Rounding fp32 activations to the compute dtype in place (ops::round_to): the op boundaries of a bf16 or fp16
// model; and fp32 values stored as bf16 or fp16 bits (ops::stored_as, a checkpoint in that dtype). The loops are
// the fast forms of dtype_round.h, which vectorise.
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dtype_round.h"

namespace rlcpp::cpu {

void round_to(float* x, int64_t n, DType dtype) {
  if (dtype == DType::kBF16) {
#pragma omp parallel for simd if (n > 4 * kParallelMinWork)
    for (int64_t i = 0; i < n; ++i) x[i] = bf16_round(x[i]);
  } else if (dtype == DType::kF16) {
#pragma omp parallel for simd if (n > 4 * kParallelMinWork)
    for (int64_t i = 0; i < n; ++i) x[i] = f16_round(x[i]);
  }
}

void store_as(const float* x, int64_t n, DType dtype, uint16_t* out) {
  if (dtype == DType::kBF16) {
#pragma omp parallel for simd if (n > 4 * kParallelMinWork)
    for (int64_t i = 0; i < n; ++i) out[i] = bf16_bits(x[i]);
  } else {
#pragma omp parallel for simd if (n > 4 * kParallelMinWork)
    for (int64_t i = 0; i < n; ++i) out[i] = f16_bits(x[i]);
  }
}

}  // namespace rlcpp::cpu
