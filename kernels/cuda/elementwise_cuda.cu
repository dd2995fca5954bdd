// The element-wise ops and whole-tensor reductions on CUDA (kernels/cpu/elementwise_cpu.cpp mirrored): bias
// add and its backward, add, scale, the L2 norm, finiteness and the keyed checksum. No atomics in any sum.
#include <algorithm>
#include <initializer_list>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/keyed_checksum.h"

namespace rlcpp::cuda {
namespace {

// ---------------------------------------------------------------- elementwise

__global__ void add_bias_kernel(float* y, const float* bias, int64_t rows, int64_t cols) {
  for (int64_t i = thread_index(); i < rows * cols; i += thread_stride()) y[i] += bias[i % cols];
}

// One thread per column, rows in order: deterministic, no atomics.
__global__ void column_sum_kernel(const float* dy, float* dbias, int64_t rows, int64_t cols) {
  for (int64_t c = thread_index(); c < cols; c += thread_stride()) {
    float acc = 0.0f;
    for (int64_t r = 0; r < rows; ++r) acc += dy[r * cols + c];
    dbias[c] += acc;
  }
}

__global__ void add_kernel(float* x, const float* y, int64_t n) {
  for (int64_t i = thread_index(); i < n; i += thread_stride()) x[i] += y[i];
}

__global__ void scale_kernel(float* x, float s, int64_t n) {
  for (int64_t i = thread_index(); i < n; i += thread_stride()) x[i] *= s;
}

// Partial sums of squares in double, one per block; the grid size depends only on n, so the order is fixed.
__global__ void sum_squares_kernel(const float* x, int64_t n, double* partial) {
  __shared__ double smem[kThreads];
  double acc = 0.0;
  for (int64_t i = thread_index(); i < n; i += thread_stride()) acc += static_cast<double>(x[i]) * x[i];
  const double total = block_sum(acc, smem);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

template <class T>
__global__ void sum_partials_kernel(const T* partial, int64_t count, T* result) {
  __shared__ T smem[kThreads];
  T acc = 0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) acc += partial[i];
  const T total = block_sum(acc, smem);
  if (threadIdx.x == 0) *result = total;
}

// *total (host) = the sum of the per-block partial sums that `launch(blocks, partial)` writes for n elements
// (~8 a thread before the tree), summed by one block in a fixed order; synchronises the stream. 0 for n = 0.
template <class T, class Launch>
cudaError_t block_partials_total(int64_t n, Launch launch, T* total, cudaStream_t stream) {
  *total = 0;
  if (n == 0) return cudaSuccess;
  const unsigned blocks = grid_for((n + 7) / 8);
  T* scratch = nullptr;  // blocks partial sums, then the total
  cudaError_t err = cudaMallocAsync(&scratch, (blocks + 1) * sizeof(T), stream);
  if (err != cudaSuccess) return err;
  launch(blocks, scratch);
  sum_partials_kernel<T><<<1, kThreads, 0, stream>>>(scratch, blocks, scratch + blocks);
  err = cudaGetLastError();
  if (err == cudaSuccess) err = cudaMemcpyAsync(total, scratch + blocks, sizeof(T), cudaMemcpyDeviceToHost, stream);
  const cudaError_t free_err = cudaFreeAsync(scratch, stream);
  if (err == cudaSuccess) err = free_err;
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  return err;
}

__global__ void non_finite_kernel(const float* x, int64_t n, int* any_bad) {
  for (int64_t i = thread_index(); i < n; i += thread_stride())
    if (!isfinite(x[i])) *any_bad = 1;  // every writer stores the same value, so the race is benign
}

// Partial keyed checksums (kernels/keyed_checksum.h), one per block: sums modulo 2^64, so any order gives the bits.
__global__ void keyed_checksum_kernel(const float* x, int64_t n, unsigned long long* partial) {
  __shared__ unsigned long long smem[kThreads];
  unsigned long long acc = 0;
  for (int64_t i = thread_index(); i < n; i += thread_stride())
    acc += keyed_checksum_term(i, __float_as_uint(x[i]));
  const unsigned long long total = block_sum(acc, smem);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

}  // namespace

cudaError_t add_bias(float* y, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows * cols == 0) return cudaSuccess;
  add_bias_kernel<<<grid_for(rows * cols), kThreads, 0, stream>>>(y, bias, rows, cols);
  return cudaGetLastError();
}

cudaError_t bias_backward(const float* dy, float* dbias, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (cols == 0) return cudaSuccess;
  column_sum_kernel<<<grid_for(cols), kThreads, 0, stream>>>(dy, dbias, rows, cols);
  return cudaGetLastError();
}

cudaError_t add_inplace(float* x, const float* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  add_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t scale_inplace(float* x, float s, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  scale_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, s, n);
  return cudaGetLastError();
}

cudaError_t l2_norm(const float* x, int64_t n, double* result, cudaStream_t stream) {
  double total = 0.0;
  const cudaError_t err = block_partials_total<double>(
      n, [&](unsigned blocks, double* partial) { sum_squares_kernel<<<blocks, kThreads, 0, stream>>>(x, n, partial); },
      &total, stream);
  *result = std::sqrt(total);
  return err;
}

cudaError_t all_finite(const float* x, int64_t n, bool* result, cudaStream_t stream) {
  *result = true;
  if (n == 0) return cudaSuccess;
  int* flag = nullptr;
  cudaError_t err = cudaMallocAsync(&flag, sizeof(int), stream);
  if (err != cudaSuccess) return err;
  int any_bad = 0;
  err = cudaMemsetAsync(flag, 0, sizeof(int), stream);
  if (err == cudaSuccess) {
    non_finite_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, n, flag);
    err = cudaGetLastError();
  }
  if (err == cudaSuccess) err = cudaMemcpyAsync(&any_bad, flag, sizeof(int), cudaMemcpyDeviceToHost, stream);
  const cudaError_t free_err = cudaFreeAsync(flag, stream);
  if (err == cudaSuccess) err = free_err;
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  *result = any_bad == 0;
  return err;
}

cudaError_t keyed_checksum(const float* x, int64_t n, uint64_t* result, cudaStream_t stream) {
  unsigned long long total = 0;
  const cudaError_t err = block_partials_total<unsigned long long>(
      n,
      [&](unsigned blocks, unsigned long long* partial) {
        keyed_checksum_kernel<<<blocks, kThreads, 0, stream>>>(x, n, partial);
      },
      &total, stream);
  *result = total;
  return err;
}

}  // namespace rlcpp::cuda
