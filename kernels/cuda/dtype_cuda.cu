// Rounding fp32 activations to the compute dtype in place on the device (ops::round_to), the op boundaries of a
// bf16 or fp16 model: the bits of cpu::round_to (dtype_round.cuh).
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/dtype_round.cuh"
#include "kernels/cuda/launch.cuh"

namespace rlcpp::cuda {
namespace {

template <DType kDtype>
__global__ void round_kernel(float* x, int64_t n) {
  for (int64_t i = thread_index(); i < n; i += thread_stride())
    x[i] = kDtype == DType::kBF16 ? bf16_value(bf16_bits(x[i])) : f16_value(f16_bits(x[i]));
}

}  // namespace

cudaError_t round_to(float* x, int64_t n, DType dtype, cudaStream_t stream) {
  if (n == 0 || dtype == DType::kF32) return cudaSuccess;
  if (dtype == DType::kBF16)
    round_kernel<DType::kBF16><<<grid_for(n), kThreads, 0, stream>>>(x, n);
  else
    round_kernel<DType::kF16><<<grid_for(n), kThreads, 0, stream>>>(x, n);
  return cudaGetLastError();
}

}  // namespace rlcpp::cuda
