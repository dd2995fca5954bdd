// Rounding fp32 activations to the compute dtype in place on the device (ops::round_to), the op boundaries of a
// bf16 or fp16 model, and the conversions between fp32 and the 16-bit storage dtypes (ops::convert): the bits of
// cpu::round_to and cpu::convert (dtype_round.cuh).
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

template <DType To>
__device__ inline void store(void* dst, int64_t i, float x) {
  if constexpr (To == DType::kF32) static_cast<float*>(dst)[i] = x;
  else if constexpr (To == DType::kBF16) static_cast<uint16_t*>(dst)[i] = bf16_bits(x);
  else static_cast<uint16_t*>(dst)[i] = f16_bits(x);
}

template <DType From, DType To>
__global__ void convert_kernel(const void* src, void* dst, int64_t n) {
  for (int64_t i = thread_index(); i < n; i += thread_stride()) store<To>(dst, i, widened<From>(src, i));
}

template <DType From>
void launch_convert_from(const void* src, void* dst, DType to, int64_t n, cudaStream_t stream) {
  if (to == DType::kF32)
    convert_kernel<From, DType::kF32><<<grid_for(n), kThreads, 0, stream>>>(src, dst, n);
  else if (to == DType::kBF16)
    convert_kernel<From, DType::kBF16><<<grid_for(n), kThreads, 0, stream>>>(src, dst, n);
  else
    convert_kernel<From, DType::kF16><<<grid_for(n), kThreads, 0, stream>>>(src, dst, n);
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

cudaError_t convert(const void* src, DType from, void* dst, DType to, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (from == to)
    return cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * dtype_size(from), cudaMemcpyDeviceToDevice, stream);
  if (from == DType::kF32)
    launch_convert_from<DType::kF32>(src, dst, to, n, stream);
  else if (from == DType::kBF16)
    launch_convert_from<DType::kBF16>(src, dst, to, n, stream);
  else
    launch_convert_from<DType::kF16>(src, dst, to, n, stream);
  return cudaGetLastError();
}

}  // namespace rlcpp::cuda
