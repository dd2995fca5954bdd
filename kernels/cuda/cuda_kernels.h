// CUDA fp32 kernels behind kernels/ops.h, flashinfer style: device pointers, sizes and a stream in, a status out.
// ops.cpp has checked shapes and dtypes; it checks the returned status and throws with file:line. Launchers
// return cudaGetLastError() after their launches so a bad launch surfaces at its op. Shapes as in ops.h.
//
// Determinism: no atomics in any sum. Row reductions (rmsnorm) use one block per row with a fixed tree, column
// reductions (dbias, dweight, dtable) one thread per column walking rows in order, so results do not depend on
// the batch or on scheduling. Index tensors are not range-checked on the device: an embedding id outside
// [0, V) yields a NaN row (and no gradient), so the error shows up in all_finite instead of reading stray memory.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/tensor.h"

namespace rlcpp::cuda {

// A kernel that stores or rounds to a float dtype takes core/tensor.h's DType (F32, BF16 or F16: dtype_round.cuh,
// the CPU's bits, NaN included).

// c (m,n) = alpha * op(a) @ op(b) + beta * c, row-major fp32 matrices, on `handle` (the execution context's,
// bound to `stream`), in `math`: F32 plain fp32; TF32 on tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32); BF16 and F16
// on operands rounded to that dtype (to nearest even, in stream-ordered scratch) and multiplied on tensor cores,
// accumulated and returned in fp32 (matmul_cuda.cu says why not the _FAST_16BF/_16F kinds).
cublasStatus_t matmul(cublasHandle_t handle, const float* a, bool trans_a, const float* b, bool trans_b, float* c,
                      int64_t m, int64_t n, int64_t k, float alpha, float beta, DType math, cudaStream_t stream);

// The packed matmul (packed_matmul_cuda.cu): y (m,n) = x (m,k) @ w^T against the CPU's panels
// (ceil(n/16), depth, 16) in `format` (scales for the quantised ones), or y = round(residual + round(x @ w^T))
// when residual (may be y) is given: each output the CPU's fma chain over k in order, the same bits.
cudaError_t matmul_packed(const float* x, const void* panels, const float* scales, DType format, float* y,
                          int64_t m, int64_t n, int64_t k, int64_t depth, const float* residual, DType round,
                          cudaStream_t stream);
// w (n,k) fp32 into panels of `format` (F32, BF16 or F16; the quantised ones are packed on the host), the CPU's
// pack_weight bits.
cudaError_t pack_weight(const float* w, void* panels, DType format, int64_t n, int64_t k, int64_t depth,
                        cudaStream_t stream);

cudaError_t add_bias(float* y, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream);
cudaError_t bias_backward(const float* dy, float* dbias, int64_t rows, int64_t cols, cudaStream_t stream);
cudaError_t add_inplace(float* x, const float* y, int64_t n, cudaStream_t stream);
cudaError_t scale_inplace(float* x, float s, int64_t n, cudaStream_t stream);
// *result (host) = sqrt(sum x^2) accumulated in double; synchronises the stream.
cudaError_t l2_norm(const float* x, int64_t n, double* result, cudaStream_t stream);
// *result (host) = every element finite; synchronises the stream.
cudaError_t all_finite(const float* x, int64_t n, bool* result, cudaStream_t stream);
// *result (host) = ops::keyed_checksum of x; synchronises the stream.
cudaError_t keyed_checksum(const float* x, int64_t n, uint64_t* result, cudaStream_t stream);

// table of `dtype` (F32, BF16, F16); out F32.
cudaError_t embedding_forward(const void* table, DType dtype, const int32_t* ids, float* out, int64_t n,
                              int64_t vocab, int64_t c, cudaStream_t stream);
cudaError_t embedding_backward(const float* dout, const int32_t* ids, float* dtable, int64_t n, int64_t vocab,
                               int64_t c, cudaStream_t stream);

// round: F32, or the 16-bit dtype whose Hugging Face expression out = round(round(w) * round(x * rstd)) is computed.
cudaError_t rmsnorm_forward(const float* x, const float* weight, float eps, float* out, float* rstd, int64_t n,
                            int64_t c, DType round, cudaStream_t stream);
cudaError_t rmsnorm_backward(const float* dout, const float* x, const float* weight, const float* rstd, float* dx,
                             float* dweight, int64_t n, int64_t c, cudaStream_t stream);

// x rounded to dtype in place, element by element (ops::round_to); F32 leaves x as it is.
cudaError_t round_to(float* x, int64_t n, DType dtype, cudaStream_t stream);
// dst (n) of `to` = src (n) of `from` (each F32, BF16 or F16), the bits of cpu::convert (ops::convert).
cudaError_t convert(const void* src, DType from, void* dst, DType to, int64_t n, cudaStream_t stream);

cudaError_t rope_forward(float* x, const int32_t* positions, const float* table, int64_t n, int64_t heads,
                         int64_t head_dim, cudaStream_t stream);
cudaError_t rope_backward(float* dx, const int32_t* positions, const float* table, int64_t n, int64_t heads,
                          int64_t head_dim, cudaStream_t stream);

// The fused qkv product's columns (N, (Hq + 2 Hkv) D) into q (N,Hq,D), k and v (N,Hkv,D), and back; the rope_
// forms rotate q and k on the way (by +angle) and dq, dk on the way back (by -angle), as ops.h says.
cudaError_t rope_split_qkv(const float* qkv, const int32_t* positions, const float* table, float* q, float* k,
                           float* v, int64_t n, int64_t hq, int64_t hkv, int64_t head_dim, cudaStream_t stream);
cudaError_t rope_backward_merge_qkv(const float* dq, const float* dk, const float* dv, const int32_t* positions,
                                    const float* table, float* dqkv, int64_t n, int64_t hq, int64_t hkv,
                                    int64_t head_dim, cudaStream_t stream);
cudaError_t split_qkv(const float* qkv, float* q, float* k, float* v, int64_t n, int64_t hq, int64_t hkv,
                      int64_t head_dim, cudaStream_t stream);
cudaError_t merge_qkv(const float* dq, const float* dk, const float* dv, float* dqkv, int64_t n, int64_t hq,
                      int64_t hkv, int64_t head_dim, cudaStream_t stream);

cudaError_t swiglu_forward(const float* gate_up, float* out, int64_t n, int64_t f, cudaStream_t stream);
cudaError_t swiglu_backward(const float* dout, const float* gate_up, float* dgate_up, int64_t n, int64_t f,
                            cudaStream_t stream);

// Attention (attention_cuda.cu), shapes and conventions of ops::attention_forward, attention_backward,
// paged_kv_write and paged_attention; head_dim at most kMaxAttentionHeadDim (ops.cpp checks). Indices are not range-checked on the
// device: ops.cpp checks cu_seqlens' shape only, the paged tables not at all (they live on the device).
constexpr int64_t kMaxAttentionHeadDim = 256;
cudaError_t attention_forward(const float* q, const float* k, const float* v, const int32_t* cu_seqlens,
                              int64_t num_seqs, int64_t n, int64_t hq, int64_t hkv, int64_t d, float scale, float* out,
                              float* lse, cudaStream_t stream);
cudaError_t attention_backward(const float* dout, const float* q, const float* k, const float* v, const float* out,
                               const float* lse, const int32_t* cu_seqlens, int64_t num_seqs, int64_t n, int64_t hq,
                               int64_t hkv, int64_t d, float scale, float* dq, float* dk, float* dv,
                               cudaStream_t stream);
cudaError_t paged_kv_write(const float* k, const float* v, const int32_t* slot_mapping, int64_t n, int64_t row,
                           void* k_cache, void* v_cache, DType dtype, cudaStream_t stream);
cudaError_t paged_attention(const float* q, const void* k_cache, const void* v_cache, DType dtype,
                            const int32_t* query_seq, const int32_t* query_pos, const int32_t* block_indptr,
                            const int32_t* block_indices, int64_t block_size, int64_t n, int64_t hq, int64_t hkv,
                            int64_t d, float scale, float* out, cudaStream_t stream);

// Shapes and conventions of ops::logprob_forward / logprob_backward; entropy and dentropy may be null.
cudaError_t logprob_forward(const float* logits, const int32_t* targets, float temperature, float* logp, float* lse,
                            float* entropy, int64_t n, int64_t v, cudaStream_t stream);
cudaError_t logprob_backward(const float* dlogp, const float* dentropy, const float* logits, const int32_t* targets,
                             float temperature, const float* lse, float* dlogits, int64_t n, int64_t v,
                             cudaStream_t stream);

cudaError_t adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, float lr, float beta1,
                       float beta2, float eps, float weight_decay, int64_t step, cudaStream_t stream);

}  // namespace rlcpp::cuda
