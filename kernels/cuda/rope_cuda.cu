// RoPE and the fused qkv product's split and merge on CUDA (kernels/cpu/rope_cpu.cpp mirrored).
#include <initializer_list>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"

namespace rlcpp::cuda {
namespace {

// dst = each (src[j], src[j + D/2]) pair of every head of every row rotated by +angle (sign 1) or -angle
// (sign -1), the rows of src and dst `src_stride` and `dst_stride` floats apart (dst may be src): cpu::rotate.
__global__ void rope_kernel(const float* src, int64_t src_stride, float* dst, int64_t dst_stride,
                            const int32_t* positions, const float* table, int64_t n, int64_t heads, int64_t head_dim,
                            float sign) {
  const int64_t half = head_dim / 2;
  for (int64_t i = thread_index(); i < n * heads * half; i += thread_stride()) {
    const int64_t j = i % half;
    const int64_t head = i / half % heads;
    const int64_t row = i / half / heads;
    const float* cos_row = table + static_cast<int64_t>(positions[row]) * head_dim;
    const float c = cos_row[j];
    const float s = sign * cos_row[half + j];
    const float* lo = src + row * src_stride + head * head_dim;
    float* out = dst + row * dst_stride + head * head_dim;
    const float a = lo[j];
    const float b = lo[j + half];
    // Hugging Face: q * cos + rotate_half(q) * sin, rotate_half(q) = [-q2, q1].
    out[j] = a * c - b * s;
    out[j + half] = b * c + a * s;
  }
}

cudaError_t rotate(const float* src, int64_t src_stride, float* dst, int64_t dst_stride, const int32_t* positions,
                   const float* table, int64_t n, int64_t heads, int64_t head_dim, float sign, cudaStream_t stream) {
  const int64_t work = n * heads * (head_dim / 2);
  if (work == 0) return cudaSuccess;
  rope_kernel<<<grid_for(work), kThreads, 0, stream>>>(src, src_stride, dst, dst_stride, positions, table, n, heads,
                                                       head_dim, sign);
  return cudaGetLastError();
}

// n rows of `width` floats from src (src_stride apart) to dst (dst_stride apart).
cudaError_t copy_rows(const float* src, int64_t src_stride, float* dst, int64_t dst_stride, int64_t n, int64_t width,
                      cudaStream_t stream) {
  if (n == 0 || width == 0) return cudaSuccess;
  return cudaMemcpy2DAsync(dst, dst_stride * sizeof(float), src, src_stride * sizeof(float), width * sizeof(float), n,
                           cudaMemcpyDeviceToDevice, stream);
}

// The first failure of a sequence of launches, or success.
cudaError_t first_error(std::initializer_list<cudaError_t> statuses) {
  for (cudaError_t s : statuses)
    if (s != cudaSuccess) return s;
  return cudaSuccess;
}

}  // namespace

cudaError_t rope_forward(float* x, const int32_t* positions, const float* table, int64_t n, int64_t heads,
                         int64_t head_dim, cudaStream_t stream) {
  const int64_t row = heads * head_dim;
  return rotate(x, row, x, row, positions, table, n, heads, head_dim, 1.0f, stream);
}

cudaError_t rope_backward(float* dx, const int32_t* positions, const float* table, int64_t n, int64_t heads,
                          int64_t head_dim, cudaStream_t stream) {
  // The rotation is orthogonal, so its transpose (the backward) is the rotation by -angle.
  const int64_t row = heads * head_dim;
  return rotate(dx, row, dx, row, positions, table, n, heads, head_dim, -1.0f, stream);
}

cudaError_t rope_split_qkv(const float* qkv, const int32_t* positions, const float* table, float* q, float* k,
                           float* v, int64_t n, int64_t hq, int64_t hkv, int64_t head_dim, cudaStream_t stream) {
  const int64_t qd = hq * head_dim, kd = hkv * head_dim, row = qd + 2 * kd;
  return first_error({rotate(qkv, row, q, qd, positions, table, n, hq, head_dim, 1.0f, stream),
                      rotate(qkv + qd, row, k, kd, positions, table, n, hkv, head_dim, 1.0f, stream),
                      copy_rows(qkv + qd + kd, row, v, kd, n, kd, stream)});
}

cudaError_t rope_backward_merge_qkv(const float* dq, const float* dk, const float* dv, const int32_t* positions,
                                    const float* table, float* dqkv, int64_t n, int64_t hq, int64_t hkv,
                                    int64_t head_dim, cudaStream_t stream) {
  const int64_t qd = hq * head_dim, kd = hkv * head_dim, row = qd + 2 * kd;
  return first_error({rotate(dq, qd, dqkv, row, positions, table, n, hq, head_dim, -1.0f, stream),
                      rotate(dk, kd, dqkv + qd, row, positions, table, n, hkv, head_dim, -1.0f, stream),
                      copy_rows(dv, kd, dqkv + qd + kd, row, n, kd, stream)});
}

cudaError_t split_qkv(const float* qkv, float* q, float* k, float* v, int64_t n, int64_t hq, int64_t hkv,
                      int64_t head_dim, cudaStream_t stream) {
  const int64_t qd = hq * head_dim, kd = hkv * head_dim, row = qd + 2 * kd;
  return first_error({copy_rows(qkv, row, q, qd, n, qd, stream), copy_rows(qkv + qd, row, k, kd, n, kd, stream),
                      copy_rows(qkv + qd + kd, row, v, kd, n, kd, stream)});
}

cudaError_t merge_qkv(const float* dq, const float* dk, const float* dv, float* dqkv, int64_t n, int64_t hq,
                      int64_t hkv, int64_t head_dim, cudaStream_t stream) {
  const int64_t qd = hq * head_dim, kd = hkv * head_dim, row = qd + 2 * kd;
  return first_error({copy_rows(dq, qd, dqkv, row, n, qd, stream), copy_rows(dk, kd, dqkv + qd, row, n, kd, stream),
                      copy_rows(dv, kd, dqkv + qd + kd, row, n, kd, stream)});
}

}  // namespace rlcpp::cuda
