// RMSNorm on CUDA (kernels/cpu/rmsnorm_cpu.cpp mirrored), one block per row in a fixed tree.
#include <cmath>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/dtype_round.cuh"
#include "kernels/cuda/launch.cuh"

namespace rlcpp::cuda {
namespace {

// ---------------------------------------------------------------- rmsnorm (one block per row)

// x rounded to dtype, as a float (dtype_round.cuh).
__device__ inline float rounded(float x, DType dtype) {
  if (dtype == DType::kBF16) return bf16_value(bf16_bits(x));
  if (dtype == DType::kF16) return f16_value(f16_bits(x));
  return x;
}

// out = weight * (x * rstd); in a 16-bit dtype Hugging Face's expression round(round(w) * round(x * rstd)).
__global__ void rmsnorm_forward_kernel(const float* x, const float* weight, float eps, float* out, float* rstd,
                                       int64_t c, DType round) {
  __shared__ float smem[kThreads];
  const float* xr = x + blockIdx.x * c;
  float* orow = out + blockIdx.x * c;
  float acc = 0.0f;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) acc += xr[j] * xr[j];
  const float r = 1.0f / sqrtf(block_sum(acc, smem) / static_cast<float>(c) + eps);
  if (threadIdx.x == 0) rstd[blockIdx.x] = r;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
    orow[j] = round == DType::kF32 ? weight[j] * (xr[j] * r)
                                        : rounded(rounded(weight[j], round) * rounded(xr[j] * r, round), round);
}

__global__ void rmsnorm_dx_kernel(const float* dout, const float* x, const float* weight, const float* rstd,
                                  float* dx, int64_t c) {
  __shared__ float smem[kThreads];
  const int64_t off = static_cast<int64_t>(blockIdx.x) * c;
  const float r = rstd[blockIdx.x];
  float acc = 0.0f;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) acc += dout[off + j] * weight[j] * x[off + j];
  const float coef = r * r * r / static_cast<float>(c) * block_sum(acc, smem);
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) dx[off + j] += r * weight[j] * dout[off + j] - coef * x[off + j];
}

__global__ void rmsnorm_dweight_kernel(const float* dout, const float* x, const float* rstd, float* dweight,
                                       int64_t n, int64_t c) {
  for (int64_t col = thread_index(); col < c; col += thread_stride()) {
    float acc = 0.0f;
    for (int64_t row = 0; row < n; ++row) acc += dout[row * c + col] * x[row * c + col] * rstd[row];
    dweight[col] += acc;
  }
}

}  // namespace

cudaError_t rmsnorm_forward(const float* x, const float* weight, float eps, float* out, float* rstd, int64_t n,
                            int64_t c, DType round, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (n > INT32_MAX) return cudaErrorInvalidValue;
  rmsnorm_forward_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(x, weight, eps, out, rstd, c, round);
  return cudaGetLastError();
}

cudaError_t rmsnorm_backward(const float* dout, const float* x, const float* weight, const float* rstd, float* dx,
                             float* dweight, int64_t n, int64_t c, cudaStream_t stream) {
  if (n == 0 || c == 0) return cudaSuccess;
  if (n > INT32_MAX) return cudaErrorInvalidValue;
  rmsnorm_dx_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(dout, x, weight, rstd, dx, c);
  rmsnorm_dweight_kernel<<<grid_for(c), kThreads, 0, stream>>>(dout, x, rstd, dweight, n, c);
  return cudaGetLastError();
}

}  // namespace rlcpp::cuda
