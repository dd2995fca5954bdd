// What the CUDA kernel files share: the block size, grid sizing for grid-stride loops, and block reductions in a
// fixed tree (so a reduction's order depends only on the block size, never on scheduling: no atomics).
#pragma once

#include <algorithm>
#include <cstdint>

namespace rlcpp::cuda {

constexpr int kThreads = 256;
// Grid-stride loops cap the grid here; more blocks than this only add scheduling work.
constexpr int64_t kMaxBlocks = 4096;

inline unsigned grid_for(int64_t work) {
  return static_cast<unsigned>(std::clamp<int64_t>((work + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

__device__ inline int64_t thread_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t thread_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// Combines `value` over the block in a fixed tree with `op` (blockDim.x a power of two, smem of blockDim.x
// entries); every thread gets the result. Every thread of the block must call it.
template <class T, class Op>
__device__ T block_reduce(T value, T* smem, Op op) {
  smem[threadIdx.x] = value;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) smem[threadIdx.x] = op(smem[threadIdx.x], smem[threadIdx.x + s]);
    __syncthreads();
  }
  const T total = smem[0];
  __syncthreads();
  return total;
}

template <class T>
__device__ T block_sum(T value, T* smem) {
  return block_reduce(value, smem, [](T a, T b) { return a + b; });
}

__device__ inline float block_max(float value, float* smem) {
  return block_reduce(value, smem, [](float a, float b) { return fmaxf(a, b); });
}

}  // namespace rlcpp::cuda
