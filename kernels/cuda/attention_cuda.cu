// Causal attention on CUDA: the training/prefill forward over packed sequences and its backward, the paged
// KV cache's write, and attention of query rows against that cache. One warp per (query row, query head) runs an online softmax over
// the row's keys in position order (no scores materialised), each lane holding head_dim / 32 of the dims and
// the dot products summed by the warp's xor butterfly (every lane gets the same bits). The same device function
// serves the packed forward and the paged decode: a query's result depends only on its own keys, never on the
// batch. The cache stores F32, or BF16 / F16 bits (dtype_round.cuh: the CPU cache's bits; read back exactly).
#include <cmath>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/dtype_round.cuh"
#include "kernels/cuda/launch.cuh"

namespace rlcpp::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 4;
constexpr int kDimsPerLane = kMaxAttentionHeadDim / kWarp;

struct F32Kv {
  using T = float;
  __device__ static float load(float x) { return x; }
  __device__ static float store(float x) { return x; }
};
struct Bf16Kv {
  using T = uint16_t;
  __device__ static float load(uint16_t x) { return bf16_value(x); }
  __device__ static uint16_t store(float x) { return bf16_bits(x); }
};
struct F16Kv {
  using T = uint16_t;
  __device__ static float load(uint16_t x) { return f16_value(x); }
  __device__ static uint16_t store(float x) { return f16_bits(x); }
};

__device__ float warp_sum(float x) {
  for (int offset = kWarp / 2; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

// out (d) = softmax(scale * q . k_j) v_j over keys j = 0..keys-1, key j in row row_of(j) of k and v (rows of
// kv_stride elements, this kv head's d values at kv_head * d); *lse = logsumexp of the scaled scores when given.
template <class Kv, class RowOf>
__device__ void attend(const float* q, const typename Kv::T* k, const typename Kv::T* v, int64_t kv_stride,
                       int64_t kv_head, int64_t d, int64_t keys, RowOf row_of, float scale, float* out, float* lse) {
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  float qv[kDimsPerLane], acc[kDimsPerLane];
  for (int c = 0; c < kDimsPerLane; ++c) {
    const int64_t e = lane + c * kWarp;
    qv[c] = e < d ? q[e] : 0.0f;
    acc[c] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int64_t j = 0; j < keys; ++j) {
    const int64_t base = row_of(j) * kv_stride + kv_head * d;
    float dot = 0.0f;
    for (int c = 0; c < kDimsPerLane; ++c) {
      const int64_t e = lane + c * kWarp;
      if (e < d) dot += qv[c] * Kv::load(k[base + e]);
    }
    const float s = warp_sum(dot) * scale;
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new);  // 0 for the first key (m = -inf)
    const float p = expf(s - m_new);
    l = l * correction + p;
    for (int c = 0; c < kDimsPerLane; ++c) {
      const int64_t e = lane + c * kWarp;
      if (e < d) acc[c] = acc[c] * correction + p * Kv::load(v[base + e]);
    }
    m = m_new;
  }
  for (int c = 0; c < kDimsPerLane; ++c) {
    const int64_t e = lane + c * kWarp;
    if (e < d) out[e] = acc[c] / l;
  }
  if (lse != nullptr && lane == 0) *lse = m + logf(l);
}

// The (query row, head) of this warp, or false past the last.
__device__ bool warp_task(int64_t n, int64_t hq, int64_t* row, int64_t* head) {
  const int64_t task = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (task >= n * hq) return false;
  *row = task / hq;
  *head = task % hq;
  return true;
}

unsigned warp_blocks(int64_t tasks) { return static_cast<unsigned>((tasks + kWarpsPerBlock - 1) / kWarpsPerBlock); }

// The sequence b of row i: cu[b] <= i < cu[b + 1].
__device__ int64_t sequence_of(const int32_t* cu_seqlens, int64_t num_seqs, int64_t i) {
  int64_t lo = 0, hi = num_seqs;
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    (cu_seqlens[mid] <= i ? lo : hi) = mid;
  }
  return lo;
}

__global__ void attention_forward_kernel(const float* q, const float* k, const float* v, const int32_t* cu_seqlens,
                                         int64_t num_seqs, int64_t n, int64_t hq, int64_t hkv, int64_t d, float scale,
                                         float* out, float* lse) {
  int64_t i, h;
  if (!warp_task(n, hq, &i, &h)) return;
  const int64_t start = cu_seqlens[sequence_of(cu_seqlens, num_seqs, i)];
  attend<F32Kv>(q + (i * hq + h) * d, k, v, hkv * d, h / (hq / hkv), d, i - start + 1,
                [start](int64_t j) { return start + j; }, scale, out + (i * hq + h) * d, lse + i * hq + h);
}

// ---- backward (FlashAttention's recurrences, p recomputed from the forward's lse; every sum in a fixed order)

// This lane's dims of a head's d values (0 past d).
__device__ void load_lane(const float* x, int64_t d, float (&r)[kDimsPerLane]) {
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  for (int c = 0; c < kDimsPerLane; ++c) {
    const int64_t e = lane + c * kWarp;
    r[c] = e < d ? x[e] : 0.0f;
  }
}
__device__ float warp_dot(const float (&a)[kDimsPerLane], const float (&b)[kDimsPerLane]) {
  float acc = 0.0f;
  for (int c = 0; c < kDimsPerLane; ++c) acc += a[c] * b[c];
  return warp_sum(acc);
}
__device__ void store_lane(const float (&r)[kDimsPerLane], int64_t d, float* x) {
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  for (int c = 0; c < kDimsPerLane; ++c) {
    const int64_t e = lane + c * kWarp;
    if (e < d) x[e] = r[c];
  }
}

// dq (i, h) = scale * sum_j ds_ij k_j over the keys j <= i of i's sequence, ds_ij = p_ij (dout_i . v_j - D_i),
// D_i = dout_i . out_i.
__global__ void attention_dq_kernel(const float* dout, const float* q, const float* k, const float* v,
                                    const float* out, const float* lse, const int32_t* cu_seqlens, int64_t num_seqs,
                                    int64_t n, int64_t hq, int64_t hkv, int64_t d, float scale, float* dq) {
  int64_t i, h;
  if (!warp_task(n, hq, &i, &h)) return;
  const int64_t start = cu_seqlens[sequence_of(cu_seqlens, num_seqs, i)], g = h / (hq / hkv);
  float qi[kDimsPerLane], doi[kDimsPerLane], oi[kDimsPerLane], kj[kDimsPerLane], vj[kDimsPerLane];
  float acc[kDimsPerLane] = {};
  load_lane(q + (i * hq + h) * d, d, qi);
  load_lane(dout + (i * hq + h) * d, d, doi);
  load_lane(out + (i * hq + h) * d, d, oi);
  const float D = warp_dot(doi, oi), l = lse[i * hq + h];
  for (int64_t j = start; j <= i; ++j) {
    load_lane(k + (j * hkv + g) * d, d, kj);
    load_lane(v + (j * hkv + g) * d, d, vj);
    const float p = expf(warp_dot(qi, kj) * scale - l);
    const float ds = p * (warp_dot(doi, vj) - D);
    for (int c = 0; c < kDimsPerLane; ++c) acc[c] += ds * kj[c];
  }
  for (float& a : acc) a *= scale;
  store_lane(acc, d, dq + (i * hq + h) * d);
}

// dv (j, g) = sum p_ij dout_i and dk (j, g) = scale * sum ds_ij q_i over the query heads h of kv head g (in
// order) and the rows i >= j of j's sequence (in order).
__global__ void attention_dkv_kernel(const float* dout, const float* q, const float* k, const float* v,
                                     const float* out, const float* lse, const int32_t* cu_seqlens, int64_t num_seqs,
                                     int64_t n, int64_t hq, int64_t hkv, int64_t d, float scale, float* dk,
                                     float* dv) {
  int64_t j, g;
  if (!warp_task(n, hkv, &j, &g)) return;
  const int64_t end = cu_seqlens[sequence_of(cu_seqlens, num_seqs, j) + 1], group = hq / hkv;
  float kj[kDimsPerLane], vj[kDimsPerLane], qi[kDimsPerLane], doi[kDimsPerLane], oi[kDimsPerLane];
  float dk_acc[kDimsPerLane] = {}, dv_acc[kDimsPerLane] = {};
  load_lane(k + (j * hkv + g) * d, d, kj);
  load_lane(v + (j * hkv + g) * d, d, vj);
  for (int64_t h = g * group; h < (g + 1) * group; ++h) {
    for (int64_t i = j; i < end; ++i) {
      load_lane(q + (i * hq + h) * d, d, qi);
      load_lane(dout + (i * hq + h) * d, d, doi);
      load_lane(out + (i * hq + h) * d, d, oi);
      const float p = expf(warp_dot(qi, kj) * scale - lse[i * hq + h]);
      const float ds = p * (warp_dot(doi, vj) - warp_dot(doi, oi));
      for (int c = 0; c < kDimsPerLane; ++c) {
        dv_acc[c] += p * doi[c];
        dk_acc[c] += ds * qi[c];
      }
    }
  }
  for (float& a : dk_acc) a *= scale;
  store_lane(dk_acc, d, dk + (j * hkv + g) * d);
  store_lane(dv_acc, d, dv + (j * hkv + g) * d);
}

template <class Kv>
__global__ void paged_kv_write_kernel(const float* k, const float* v, const int32_t* slot_mapping, int64_t n,
                                      int64_t row, typename Kv::T* k_cache, typename Kv::T* v_cache) {
  for (int64_t x = thread_index(); x < n * row; x += thread_stride()) {
    const int32_t slot = slot_mapping[x / row];
    if (slot < 0) continue;
    const int64_t at = static_cast<int64_t>(slot) * row + x % row;
    k_cache[at] = Kv::store(k[x]);
    v_cache[at] = Kv::store(v[x]);
  }
}

template <class Kv>
__global__ void paged_attention_kernel(const float* q, const typename Kv::T* k_cache, const typename Kv::T* v_cache,
                                       const int32_t* query_seq, const int32_t* query_pos,
                                       const int32_t* block_indptr, const int32_t* block_indices, int64_t block_size,
                                       int64_t n, int64_t hq, int64_t hkv, int64_t d, float scale, float* out) {
  int64_t i, h;
  if (!warp_task(n, hq, &i, &h)) return;
  const int32_t* blocks = block_indices + block_indptr[query_seq[i]];
  attend<Kv>(q + (i * hq + h) * d, k_cache, v_cache, hkv * d, h / (hq / hkv), d, query_pos[i] + 1,
             [blocks, block_size](int64_t j) { return blocks[j / block_size] * block_size + j % block_size; }, scale,
             out + (i * hq + h) * d, nullptr);
}

template <class Kv>
cudaError_t launch_paged_kv_write(const float* k, const float* v, const int32_t* slot_mapping, int64_t n, int64_t row,
                                  void* k_cache, void* v_cache, cudaStream_t stream) {
  paged_kv_write_kernel<Kv><<<grid_for(n * row), kThreads, 0, stream>>>(
      k, v, slot_mapping, n, row, static_cast<typename Kv::T*>(k_cache), static_cast<typename Kv::T*>(v_cache));
  return cudaGetLastError();
}

template <class Kv>
cudaError_t launch_paged_attention(const float* q, const void* k_cache, const void* v_cache, const int32_t* query_seq,
                                   const int32_t* query_pos, const int32_t* block_indptr,
                                   const int32_t* block_indices, int64_t block_size, int64_t n, int64_t hq,
                                   int64_t hkv, int64_t d, float scale, float* out, cudaStream_t stream) {
  paged_attention_kernel<Kv><<<warp_blocks(n * hq), kWarpsPerBlock * kWarp, 0, stream>>>(
      q, static_cast<const typename Kv::T*>(k_cache), static_cast<const typename Kv::T*>(v_cache), query_seq,
      query_pos, block_indptr, block_indices, block_size, n, hq, hkv, d, scale, out);
  return cudaGetLastError();
}

}  // namespace

cudaError_t attention_forward(const float* q, const float* k, const float* v, const int32_t* cu_seqlens,
                              int64_t num_seqs, int64_t n, int64_t hq, int64_t hkv, int64_t d, float scale, float* out,
                              float* lse, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  attention_forward_kernel<<<warp_blocks(n * hq), kWarpsPerBlock * kWarp, 0, stream>>>(
      q, k, v, cu_seqlens, num_seqs, n, hq, hkv, d, scale, out, lse);
  return cudaGetLastError();
}

cudaError_t attention_backward(const float* dout, const float* q, const float* k, const float* v, const float* out,
                               const float* lse, const int32_t* cu_seqlens, int64_t num_seqs, int64_t n, int64_t hq,
                               int64_t hkv, int64_t d, float scale, float* dq, float* dk, float* dv,
                               cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  attention_dq_kernel<<<warp_blocks(n * hq), kWarpsPerBlock * kWarp, 0, stream>>>(
      dout, q, k, v, out, lse, cu_seqlens, num_seqs, n, hq, hkv, d, scale, dq);
  attention_dkv_kernel<<<warp_blocks(n * hkv), kWarpsPerBlock * kWarp, 0, stream>>>(
      dout, q, k, v, out, lse, cu_seqlens, num_seqs, n, hq, hkv, d, scale, dk, dv);
  return cudaGetLastError();
}

cudaError_t paged_kv_write(const float* k, const float* v, const int32_t* slot_mapping, int64_t n, int64_t row,
                           void* k_cache, void* v_cache, DType dtype, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (dtype) {
    case DType::kF32: return launch_paged_kv_write<F32Kv>(k, v, slot_mapping, n, row, k_cache, v_cache, stream);
    case DType::kBF16:
      return launch_paged_kv_write<Bf16Kv>(k, v, slot_mapping, n, row, k_cache, v_cache, stream);
    case DType::kF16: return launch_paged_kv_write<F16Kv>(k, v, slot_mapping, n, row, k_cache, v_cache, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t paged_attention(const float* q, const void* k_cache, const void* v_cache, DType dtype,
                            const int32_t* query_seq, const int32_t* query_pos, const int32_t* block_indptr,
                            const int32_t* block_indices, int64_t block_size, int64_t n, int64_t hq, int64_t hkv,
                            int64_t d, float scale, float* out, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (dtype) {
    case DType::kF32:
      return launch_paged_attention<F32Kv>(q, k_cache, v_cache, query_seq, query_pos, block_indptr, block_indices,
                                           block_size, n, hq, hkv, d, scale, out, stream);
    case DType::kBF16:
      return launch_paged_attention<Bf16Kv>(q, k_cache, v_cache, query_seq, query_pos, block_indptr, block_indices,
                                            block_size, n, hq, hkv, d, scale, out, stream);
    case DType::kF16:
      return launch_paged_attention<F16Kv>(q, k_cache, v_cache, query_seq, query_pos, block_indptr, block_indices,
                                           block_size, n, hq, hkv, d, scale, out, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace rlcpp::cuda
