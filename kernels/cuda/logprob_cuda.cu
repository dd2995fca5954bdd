// Per-token log-probability and entropy of softmax(logits / T) on CUDA, and their backward: one block per row,
// each row's max and sums in the block's fixed tree (kernels/cuda/launch.cuh), the CPU's formulas
// (kernels/cpu/logprob_cpu.cpp) with CUDA's expf/logf. A target >= V (not range-checked on the device) gives a
// NaN log-prob and a NaN gradient row, so the error shows in all_finite instead of reading stray memory.
#include <cmath>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"

namespace rlcpp::cuda {
namespace {

// logsumexp of z = row / temperature over the block.
__device__ float row_lse(const float* row, float temperature, int64_t v, float* smem) {
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) m = fmaxf(m, row[j] / temperature);
  m = block_max(m, smem);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) sum += expf(row[j] / temperature - m);
  return m + logf(block_sum(sum, smem));
}

// H = -sum p log p with log p = z - lse.
__device__ float row_entropy(const float* row, float temperature, float lse, int64_t v, float* smem) {
  float acc = 0.0f;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) {
    const float logp = row[j] / temperature - lse;
    acc += expf(logp) * logp;
  }
  return -block_sum(acc, smem);
}

__global__ void logprob_forward_kernel(const float* logits, const int32_t* targets, float temperature, float* logp,
                                       float* lse, float* entropy, int64_t v) {
  __shared__ float smem[kThreads];
  const int64_t i = blockIdx.x;
  const float* row = logits + i * v;
  const float l = row_lse(row, temperature, v, smem);
  const float h = entropy ? row_entropy(row, temperature, l, v, smem) : 0.0f;
  if (threadIdx.x != 0) return;
  lse[i] = l;
  const int32_t t = targets[i];
  logp[i] = t < 0 ? 0.0f : t >= v ? nanf("") : row[t] / temperature - l;
  if (entropy) entropy[i] = h;
}

// d logp / dz = onehot - p; dH/dz = -p (log p + H); dz/dlogits = 1/T.
__global__ void logprob_backward_kernel(const float* dlogp, const float* dentropy, const float* logits,
                                        const int32_t* targets, float temperature, const float* lse, float* dlogits,
                                        int64_t v) {
  __shared__ float smem[kThreads];
  const int64_t i = blockIdx.x;
  const float* row = logits + i * v;
  float* drow = dlogits + i * v;
  const float l = lse[i];
  const int32_t t = targets[i];
  const float g_logp = t < 0 ? 0.0f : dlogp[i];
  const float g_ent = dentropy ? dentropy[i] : 0.0f;
  // g_ent is the same for the whole block, so every thread takes this branch or none does.
  const float h = g_ent != 0.0f ? row_entropy(row, temperature, l, v, smem) : 0.0f;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) {
    const float logp_j = row[j] / temperature - l;
    const float p = expf(logp_j);
    float d = (-g_logp * p - g_ent * p * (logp_j + h)) / temperature;
    if (j == t) d += g_logp / temperature;
    drow[j] = t >= v ? nanf("") : d;
  }
}

}  // namespace

cudaError_t logprob_forward(const float* logits, const int32_t* targets, float temperature, float* logp, float* lse,
                            float* entropy, int64_t n, int64_t v, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  logprob_forward_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(logits, targets, temperature, logp, lse,
                                                                           entropy, v);
  return cudaGetLastError();
}

cudaError_t logprob_backward(const float* dlogp, const float* dentropy, const float* logits, const int32_t* targets,
                             float temperature, const float* lse, float* dlogits, int64_t n, int64_t v,
                             cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  logprob_backward_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(dlogp, dentropy, logits, targets,
                                                                            temperature, lse, dlogits, v);
  return cudaGetLastError();
}

}  // namespace rlcpp::cuda
