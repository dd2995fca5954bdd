// The CUDA arm of kernels/ops.h: cuBLAS for matmul (on the execution context's handle), simple fp32 kernels for
// the elementwise ops, RMSNorm, RoPE and the qkv split/merge, SwiGLU, embedding and AdamW (rounding:
// dtype_cuda.cu; log-probs: logprob_cuda.cu; attention and the paged cache: attention_cuda.cu). The packed
// products (CPU panels), stored_as and the truncated log-probs have no CUDA kernel (ops.cpp throws).
#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/dtype_round.cuh"
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

// ---------------------------------------------------------------- embedding

__global__ void embedding_forward_kernel(const float* table, const int32_t* ids, float* out, int64_t n,
                                         int64_t vocab, int64_t c) {
  for (int64_t i = thread_index(); i < n * c; i += thread_stride()) {
    const int64_t row = i / c;
    const int32_t id = ids[row];
    out[i] = (id >= 0 && id < vocab) ? table[static_cast<int64_t>(id) * c + i % c] : nanf("");
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

// ---------------------------------------------------------------- rope, swiglu, adamw

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

// torch.optim.AdamW single-tensor order; the scalars come from the host, computed in double as torch does.
__global__ void adamw_kernel(float* param, const float* grad, float* m, float* v, int64_t n, float decay,
                             float beta1, float beta2, float one_minus_b1, float one_minus_b2, float neg_step_size,
                             float bc2_sqrt, float eps) {
  for (int64_t i = thread_index(); i < n; i += thread_stride()) {
    const float g = grad[i];
    const float p = param[i] * decay;
    const float mi = m[i] * beta1 + one_minus_b1 * g;
    const float vi = v[i] * beta2 + one_minus_b2 * g * g;
    const float denom = sqrtf(vi) / bc2_sqrt + eps;
    param[i] = p + neg_step_size * (mi / denom);
    m[i] = mi;
    v[i] = vi;
  }
}

}  // namespace

cublasStatus_t matmul(cublasHandle_t handle, const float* a, bool trans_a, const float* b, bool trans_b, float* c,
                      int64_t m, int64_t n, int64_t k, float alpha, float beta, cublasComputeType_t compute,
                      cudaStream_t stream) {
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX) return CUBLAS_STATUS_INVALID_VALUE;
  const cublasStatus_t status = cublasSetStream(handle, stream);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands, keep the row-major
  // leading dimensions (the stored width of each matrix).
  const int lda = static_cast<int>(std::max<int64_t>(1, trans_a ? m : k));
  const int ldb = static_cast<int>(std::max<int64_t>(1, trans_b ? k : n));
  return cublasGemmEx(handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                      static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b, CUDA_R_32F, ldb, a,
                      CUDA_R_32F, lda, &beta, c, CUDA_R_32F, static_cast<int>(n), compute, CUBLAS_GEMM_DEFAULT);
}

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

cudaError_t embedding_forward(const float* table, const int32_t* ids, float* out, int64_t n, int64_t vocab,
                              int64_t c, cudaStream_t stream) {
  if (n * c == 0) return cudaSuccess;
  embedding_forward_kernel<<<grid_for(n * c), kThreads, 0, stream>>>(table, ids, out, n, vocab, c);
  return cudaGetLastError();
}

cudaError_t embedding_backward(const float* dout, const int32_t* ids, float* dtable, int64_t n, int64_t vocab,
                               int64_t c, cudaStream_t stream) {
  if (c == 0) return cudaSuccess;
  embedding_backward_kernel<<<grid_for(c), kThreads, 0, stream>>>(dout, ids, dtable, n, vocab, c);
  return cudaGetLastError();
}

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

cudaError_t adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, float lr, float beta1,
                       float beta2, float eps, float weight_decay, int64_t step, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const double lr_d = lr;
  const double bias_correction1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(step));
  adamw_kernel<<<grid_for(n), kThreads, 0, stream>>>(
      param, grad, m, v, n, static_cast<float>(1.0 - lr_d * weight_decay), beta1, beta2,
      static_cast<float>(1.0 - static_cast<double>(beta1)), static_cast<float>(1.0 - static_cast<double>(beta2)),
      static_cast<float>(-(lr_d / bias_correction1)), static_cast<float>(std::sqrt(bias_correction2)), eps);
  return cudaGetLastError();
}

}  // namespace rlcpp::cuda
