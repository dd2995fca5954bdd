// The embedding lookup and its scatter-add backward on CUDA (kernels/cpu/embedding_cpu.cpp mirrored).
#include <cmath>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/dtype_round.cuh"
#include "kernels/cuda/launch.cuh"

namespace rlcpp::cuda {
namespace {

// ---------------------------------------------------------------- embedding

template <DType T>
__global__ void embedding_forward_kernel(const void* table, const int32_t* ids, float* out, int64_t n,
                                         int64_t vocab, int64_t c) {
  for (int64_t i = thread_index(); i < n * c; i += thread_stride()) {
    const int64_t row = i / c;
    const int32_t id = ids[row];
    out[i] = (id >= 0 && id < vocab) ? widened<T>(table, static_cast<int64_t>(id) * c + i % c) : nanf("");
  }
}

// One thread per column walks the rows in order, so repeated ids add up deterministically.
__global__ void embedding_backward_kernel(const float* dout, const int32_t* ids, float* dtable, int64_t n,
                                          int64_t vocab, int64_t c) {
  for (int64_t col = thread_index(); col < c; col += thread_stride()) {
    for (int64_t row = 0; row < n; ++row) {
      const int32_t id = ids[row];
      if (id >= 0 && id < vocab) dtable[static_cast<int64_t>(id) * c + col] += dout[row * c + col];
    }
  }
}

}  // namespace

cudaError_t embedding_forward(const void* table, DType dtype, const int32_t* ids, float* out, int64_t n,
                              int64_t vocab, int64_t c, cudaStream_t stream) {
  if (n * c == 0) return cudaSuccess;
  if (dtype == DType::kBF16)
    embedding_forward_kernel<DType::kBF16><<<grid_for(n * c), kThreads, 0, stream>>>(table, ids, out, n, vocab, c);
  else if (dtype == DType::kF16)
    embedding_forward_kernel<DType::kF16><<<grid_for(n * c), kThreads, 0, stream>>>(table, ids, out, n, vocab, c);
  else
    embedding_forward_kernel<DType::kF32><<<grid_for(n * c), kThreads, 0, stream>>>(table, ids, out, n, vocab, c);
  return cudaGetLastError();
}

cudaError_t embedding_backward(const float* dout, const int32_t* ids, float* dtable, int64_t n, int64_t vocab,
                               int64_t c, cudaStream_t stream) {
  if (c == 0) return cudaSuccess;
  embedding_backward_kernel<<<grid_for(c), kThreads, 0, stream>>>(dout, ids, dtable, n, vocab, c);
  return cudaGetLastError();
}

}  // namespace rlcpp::cuda
