// SwiGLU on the fused gate_up projection on CUDA (kernels/cpu/swiglu_cpu.cpp mirrored).
#include <cmath>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"

namespace rlcpp::cuda {
namespace {

__global__ void swiglu_forward_kernel(const float* gate_up, float* out, int64_t n, int64_t f) {
  for (int64_t i = thread_index(); i < n * f; i += thread_stride()) {
    const int64_t row = i / f, j = i % f;
    const float g = gate_up[row * 2 * f + j];
    out[i] = g / (1.0f + expf(-g)) * gate_up[row * 2 * f + f + j];
  }
}

__global__ void swiglu_backward_kernel(const float* dout, const float* gate_up, float* dgate_up, int64_t n,
                                       int64_t f) {
  for (int64_t i = thread_index(); i < n * f; i += thread_stride()) {
    const int64_t row = i / f, j = i % f;
    const float g = gate_up[row * 2 * f + j];
    const float u = gate_up[row * 2 * f + f + j];
    const float s = 1.0f / (1.0f + expf(-g));
    dgate_up[row * 2 * f + f + j] = dout[i] * (g * s);
    dgate_up[row * 2 * f + j] = dout[i] * u * (s * (1.0f + g * (1.0f - s)));
  }
}

}  // namespace

cudaError_t swiglu_forward(const float* gate_up, float* out, int64_t n, int64_t f, cudaStream_t stream) {
  if (n * f == 0) return cudaSuccess;
  swiglu_forward_kernel<<<grid_for(n * f), kThreads, 0, stream>>>(gate_up, out, n, f);
  return cudaGetLastError();
}

cudaError_t swiglu_backward(const float* dout, const float* gate_up, float* dgate_up, int64_t n, int64_t f,
                            cudaStream_t stream) {
  if (n * f == 0) return cudaSuccess;
  swiglu_backward_kernel<<<grid_for(n * f), kThreads, 0, stream>>>(dout, gate_up, dgate_up, n, f);
  return cudaGetLastError();
}

}  // namespace rlcpp::cuda
