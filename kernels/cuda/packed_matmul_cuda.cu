// The packed matmul on the device (ops::matmul_packed, ops::pack_weight): the CPU's panels (kernels/ops.h
// PackedWeight, the same layout and bits, so a weight packed on the host is copied here as it is) and the CPU's
// arithmetic. Every output is one fused multiply-add chain, acc = fma(x[m][k], w[n][k], acc) for k = 0..K-1 in
// order from +0, over the values the panels store (bf16 panels: x rounded to bf16 operands first), then times the
// channel scale, rounded to the compute dtype, added to the residual and rounded again — each step one IEEE
// operation (__fmaf_rn, __fmul_rn, __fadd_rn: nothing for the compiler to contract). Tiling decides only which
// chains run side by side, never their order: a row's result is the same bits whatever M, the row's place, the
// tile size or the GPU, and the same bits as the CPU's fma arms (AVX512-BF16's vdpbf16ps aside, which flushes
// partial sums below 2^-126 to zero). This is the batch-invariant product of numerics.batch_invariant on CUDA.
//
// A block computes a BM x 64 tile of y with 256 threads (16 x 16), each thread TM = BM / 16 rows x 4 columns
// (rows ty + 16 i, columns tx + 16 j: neighbouring threads read neighbouring shared-memory words). Per k tile of
// kTileK the block stages x (as operands) and the weights (decoded to fp32) in shared memory; each thread then
// extends its chains by the tile's k in order. No split over K (it would cut the chain).
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/dtype_round.cuh"

namespace rlcpp::cuda {

namespace {

constexpr int kPanel = 16;      // outputs per panel (cpu::kPackedPanel)
constexpr int kTileN = 64;      // four panels per block
constexpr int kTileK = 16;      // even: a bf16 pair word never straddles two tiles
constexpr int kTileThreads = 256;

// Where weight (n, kk) of a panel set lives, and its value (before the channel scale), per format. depth is
// the panels' second dimension (K, or K rounded up to even for bf16 pairs).
struct PanelF32 {
  const float* p;
  __device__ float at(int64_t n, int64_t kk, int64_t depth) const {
    return p[((n / kPanel) * depth + kk) * kPanel + n % kPanel];
  }
};
struct PanelBf16 {  // pairs of k in one word per output, k = 2q in the upper half (cpu panel_offset)
  const uint16_t* p;
  __device__ float at(int64_t n, int64_t kk, int64_t depth) const {
    const int64_t word = ((n / kPanel) * (depth / 2) + kk / 2) * kPanel + n % kPanel;
    return bf16_value(p[2 * word + (kk % 2 == 0 ? 1 : 0)]);
  }
};
struct PanelF16 {
  const uint16_t* p;
  __device__ float at(int64_t n, int64_t kk, int64_t depth) const {
    return f16_value(p[((n / kPanel) * depth + kk) * kPanel + n % kPanel]);
  }
};
struct PanelInt8 {
  const int8_t* p;
  __device__ float at(int64_t n, int64_t kk, int64_t depth) const {
    return static_cast<float>(p[((n / kPanel) * depth + kk) * kPanel + n % kPanel]);
  }
};
struct PanelFp8 {  // the e4m3 value times 2^-8 through one fp16 conversion (cpu e4m3_to_f16_bits_scaled)
  const uint8_t* p;
  __device__ float at(int64_t n, int64_t kk, int64_t depth) const {
    const uint32_t b = p[((n / kPanel) * depth + kk) * kPanel + n % kPanel];
    return f16_value(static_cast<uint16_t>(((b & 0x80u) << 8) | ((b & 0x7Fu) << 7)));
  }
};

// cpu::bf16_operand: x rounded to bf16, a bf16 subnormal flushed to a zero of its sign.
__device__ inline float bf16_operand(float x) {
  uint16_t b = bf16_bits(x);
  if ((b & 0x7F80u) == 0) b &= 0x8000u;
  return bf16_value(b);
}

__device__ inline float rounded(float v, DType round) {
  if (round == DType::kBF16) return bf16_value(bf16_bits(v));
  if (round == DType::kF16) return f16_value(f16_bits(v));
  return v;
}

template <int BM, class Panels>
__global__ void __launch_bounds__(kTileThreads)
    packed_matmul_kernel(const float* __restrict__ x, Panels w, const float* __restrict__ scales, float* y,
                         const float* residual, int64_t m, int64_t n, int64_t k, int64_t depth, bool bf16_x,
                         DType round) {
  constexpr int TM = BM / 16;
  __shared__ float xs[kTileK][BM + 1];
  __shared__ float ws[kTileK][kTileN + 1];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * BM, col0 = static_cast<int64_t>(blockIdx.x) * kTileN;
  float acc[TM][4];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;

  for (int64_t k0 = 0; k0 < k; k0 += kTileK) {
    for (int e = threadIdx.x; e < BM * kTileK; e += kTileThreads) {  // x: along k, coalesced
      const int r = e / kTileK, kk = e % kTileK;
      const int64_t gm = row0 + r, gk = k0 + kk;
      float v = gm < m && gk < k ? x[gm * k + gk] : 0.0f;
      xs[kk][r] = bf16_x ? bf16_operand(v) : v;
    }
    for (int e = threadIdx.x; e < kTileN * kTileK; e += kTileThreads) {  // weights: along n within a panel row
      const int c = e % kTileN, kk = e / kTileN;
      const int64_t gn = col0 + c, gk = k0 + kk;
      ws[kk][c] = gn < n && gk < k ? w.at(gn, gk, depth) : 0.0f;
    }
    __syncthreads();
    // Only the k that exist: fma(0, 0, acc) would turn a -0 chain into +0.
    const int kmax = static_cast<int>(k - k0 < kTileK ? k - k0 : kTileK);
    for (int kk = 0; kk < kmax; ++kk) {
      float a[TM], b[4];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = xs[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = ws[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int64_t gm = row0 + ty + 16 * i;
    if (gm >= m) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t gn = col0 + tx + 16 * j;
      if (gn >= n) continue;
      float v = acc[i][j];
      if (scales) v = __fmul_rn(v, scales[gn]);
      v = rounded(v, round);
      if (residual) v = rounded(__fadd_rn(residual[gm * n + gn], v), round);
      y[gm * n + gn] = v;
    }
  }
}

template <class Panels>
cudaError_t launch_packed(const float* x, Panels w, const float* scales, float* y, const float* residual, int64_t m,
                          int64_t n, int64_t k, int64_t depth, bool bf16_x, DType round, cudaStream_t stream) {
  const unsigned cols = static_cast<unsigned>((n + kTileN - 1) / kTileN);
  // A decode step's few rows take the 16-row tile (fewer idle threads); the bits are the same either way.
  if (m <= 16) {
    packed_matmul_kernel<16><<<dim3(cols, static_cast<unsigned>((m + 15) / 16)), kTileThreads, 0, stream>>>(
        x, w, scales, y, residual, m, n, k, depth, bf16_x, round);
  } else {
    packed_matmul_kernel<64><<<dim3(cols, static_cast<unsigned>((m + 63) / 64)), kTileThreads, 0, stream>>>(
        x, w, scales, y, residual, m, n, k, depth, bf16_x, round);
  }
  return cudaGetLastError();
}

// Panel element e of panels (ceil(n/16), depth, 16) in `format` from w (n,k) fp32: cpu::pack_panels's encode,
// zero past n and past an odd k. For bf16 the elements are the uint16 halves of the pair words.
template <class Store>
__global__ void pack_kernel(const float* __restrict__ w, Store out, int64_t n, int64_t k, int64_t depth,
                            int64_t elements) {
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < elements;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t col, kk;
    if (Store::kPairs) {
      const int64_t word = e / 2, j = word % kPanel, q = (word / kPanel) % (depth / 2), p = word / (kPanel * (depth / 2));
      col = p * kPanel + j;
      kk = 2 * q + (e % 2 == 1 ? 0 : 1);  // the upper half (element 2 word + 1) holds k = 2q
    } else {
      const int64_t j = e % kPanel, p = e / (kPanel * depth);
      kk = (e / kPanel) % depth;
      col = p * kPanel + j;
    }
    out.store(e, col < n && kk < k ? w[col * k + kk] : 0.0f);
  }
}
struct StoreF32 {
  static constexpr bool kPairs = false;
  float* p;
  __device__ void store(int64_t e, float v) const { p[e] = v; }
};
struct StoreBf16 {
  static constexpr bool kPairs = true;
  uint16_t* p;
  __device__ void store(int64_t e, float v) const {
    uint16_t b = bf16_bits(v);
    if ((b & 0x7F80u) == 0) b &= 0x8000u;  // cpu::bf16_operand_bits
    p[e] = b;
  }
};
struct StoreF16 {
  static constexpr bool kPairs = false;
  uint16_t* p;
  __device__ void store(int64_t e, float v) const { p[e] = f16_bits(v); }
};

}  // namespace

cudaError_t matmul_packed(const float* x, const void* panels, const float* scales, DType format, float* y,
                          int64_t m, int64_t n, int64_t k, int64_t depth, const float* residual, DType round,
                          cudaStream_t stream) {
  if (m == 0 || n == 0) return cudaSuccess;
  switch (format) {
    case DType::kF32:
      return launch_packed(x, PanelF32{static_cast<const float*>(panels)}, nullptr, y, residual, m, n, k, depth, false,
                           round, stream);
    case DType::kBF16:
      return launch_packed(x, PanelBf16{static_cast<const uint16_t*>(panels)}, nullptr, y, residual, m, n, k, depth,
                           true, round, stream);
    case DType::kF16:
      return launch_packed(x, PanelF16{static_cast<const uint16_t*>(panels)}, nullptr, y, residual, m, n, k, depth,
                           false, round, stream);
    case DType::kInt8:
      return launch_packed(x, PanelInt8{static_cast<const int8_t*>(panels)}, scales, y, residual, m, n, k, depth,
                           false, round, stream);
    case DType::kFp8E4M3:
      return launch_packed(x, PanelFp8{static_cast<const uint8_t*>(panels)}, scales, y, residual, m, n, k, depth,
                           false, round, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t pack_weight(const float* w, void* panels, DType format, int64_t n, int64_t k, int64_t depth,
                        cudaStream_t stream) {
  const int64_t elements = (n + kPanel - 1) / kPanel * depth * kPanel;
  const unsigned grid = static_cast<unsigned>((elements + kTileThreads - 1) / kTileThreads > 4096
                                                  ? 4096
                                                  : (elements + kTileThreads - 1) / kTileThreads);
  if (elements == 0) return cudaSuccess;
  switch (format) {
    case DType::kF32:
      pack_kernel<<<grid, kTileThreads, 0, stream>>>(w, StoreF32{static_cast<float*>(panels)}, n, k, depth, elements);
      break;
    case DType::kBF16:
      pack_kernel<<<grid, kTileThreads, 0, stream>>>(w, StoreBf16{static_cast<uint16_t*>(panels)}, n, k, depth,
                                                     elements);
      break;
    case DType::kF16:
      pack_kernel<<<grid, kTileThreads, 0, stream>>>(w, StoreF16{static_cast<uint16_t*>(panels)}, n, k, depth,
                                                     elements);
      break;
    default: return cudaErrorInvalidValue;  // quantised formats are packed on the host (ops.cpp)
  }
  return cudaGetLastError();
}

}  // namespace rlcpp::cuda
