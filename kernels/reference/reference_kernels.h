// The readable definition of every op of kernels/ops.h on the host, llm.c's way: plain loops in the order the
// math is written, fp32 arithmetic (double where an op's definition sums in double), nothing vectorised, threaded
// or tiled. They are the "reference" backend (backend_reference.cpp): the op matrix test
// (tests/kernels_op_matrix_test.cpp) holds the fast kernels of every backend to them — to the bit where the
// design promises bits (the packed product's fma chains, roundings, copies, index ops), to a tolerance of the
// dtype elsewhere. Shapes and conventions are ops.h's; arguments are checked by ops.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/truncation.h"

namespace rlcpp::ref {

// c (m,n) = alpha * op(a) @ op(b) + beta * c, one fp32 fma chain per output over k in order (fp32 math only).
void matmul(const float* a, bool trans_a, const float* b, bool trans_b, float* c, int64_t m, int64_t n, int64_t k,
            float alpha, float beta);
// dw (out,in) += dy (rows,out)^T @ x (rows,in): per output, an fma chain over the rows in order from dw's value;
// BF16 math: over the operands rounded to bf16 (cpu::bf16_operand_reference, subnormals to zero), as a bf16 GEMM
// with fp32 accumulation takes them.
void linear_weight_grad(const float* dy, const float* x, float* dw, int64_t rows, int64_t out, int64_t in,
                        DType math);

// The packed weight's layout (ops.h PackedWeight): panels of 16 outputs, (K, 16) row-major; bf16 panels pair
// k = 2p, 2p + 1 in one 32-bit word of pair row p (2p in the upper half). Quantised panels hold codes of w / s with
// s = max |w of the channel| / (127 or 448); e4m3 codes decode to the value times 2^-8 and s carries the 2^8.
void pack_weight(const float* w, void* panels, float* scales, int64_t n, int64_t k, int64_t depth, DType format);
// The panels of pack_weight(w^T, format) for w (n,k), format F32 or BF16.
void pack_weight_transposed(const float* w, void* panels, int64_t n, int64_t k, DType format);
// n values of src (F32, BF16 or F16) as fp32 (a weight held in bf16, read as the value its bits denote).
std::vector<float> widened(const void* src, DType from, int64_t n);
// Each output: acc = +0; acc = fma(operand(x[m][kk]), panel value (n,kk), acc) for kk = 0..k-1 (bf16 panels:
// x rounded to a bf16 operand first); then times the channel scale (quantised), rounded to `round`, and when
// residual is given added to it and rounded again.
void matmul_packed(const float* x, const void* panels, const float* scales, DType format, float* y, int64_t m,
                   int64_t n, int64_t k, int64_t depth, const float* residual, DType round);

void round_to(float* x, int64_t n, DType dtype);
void convert(const void* src, DType from, void* dst, DType to, int64_t n);

void add_bias(float* y, const float* bias, int64_t rows, int64_t cols);
void bias_backward(const float* dy, float* dbias, int64_t rows, int64_t cols);
void add_inplace(float* x, const float* y, int64_t n);
void scale_inplace(float* x, float s, int64_t n);
double l2_norm(const float* x, int64_t n);
bool all_finite(const float* x, int64_t n);
uint64_t keyed_checksum(const float* x, int64_t n);

void embedding_forward(const void* table, DType dtype, const int32_t* ids, float* out, int64_t n, int64_t c);
void embedding_backward(const float* dout, const int32_t* ids, float* dtable, int64_t n, int64_t c);

void rmsnorm_forward(const float* x, const float* weight, float eps, float* out, float* rstd, int64_t n, int64_t c,
                     DType round);
void rmsnorm_backward(const float* dout, const float* x, const float* weight, const float* rstd, float* dx,
                      float* dweight, int64_t n, int64_t c);

// RoPE by +angle (sign 1) or -angle (sign -1) of src (n, heads, D) rows `src_stride` apart into dst rows
// `dst_stride` apart: out_lo = a cos - b sin, out_hi = b cos + a sin.
void rope_rotate(const float* src, int64_t src_stride, float* dst, int64_t dst_stride, const int32_t* positions,
                 const float* table, int64_t n, int64_t heads, int64_t head_dim, float sign);
// The blocks of qkv (n, (hq + 2 hkv) D) and back, no rotation.
void split_qkv(const float* qkv, float* q, float* k, float* v, int64_t n, int64_t hq, int64_t hkv, int64_t head_dim);
void merge_qkv(const float* dq, const float* dk, const float* dv, float* dqkv, int64_t n, int64_t hq, int64_t hkv,
               int64_t head_dim);

// Causal softmax attention in fp32 per (row, head): s_j = scale q.k_j, p = softmax(s), out = sum p_j v_j.
void attention_forward(const float* q, const float* k, const float* v, const int32_t* cu_seqlens, int64_t num_seqs,
                       int64_t hq, int64_t hkv, int64_t d, float scale, float* out, float* lse);
void attention_backward(const float* dout, const float* q, const float* k, const float* v, const float* out,
                        const float* lse, const int32_t* cu_seqlens, int64_t num_seqs, int64_t hq, int64_t hkv,
                        int64_t d, float scale, float* dq, float* dk, float* dv);
void paged_kv_write(const float* k, const float* v, const int32_t* slot_mapping, int64_t n, int64_t row,
                    void* k_cache, void* v_cache, DType cache_dtype);
void paged_attention(const float* q, const void* k_cache, const void* v_cache, DType cache_dtype,
                     const int32_t* query_seq, const int32_t* query_pos, const int32_t* block_indptr,
                     const int32_t* block_indices, int64_t block_size, int64_t n, int64_t hq, int64_t hkv, int64_t d,
                     float scale, float* out);

void swiglu_forward(const float* gate_up, float* out, int64_t n, int64_t f);
void swiglu_backward(const float* dout, const float* gate_up, float* dgate_up, float* act, int64_t n, int64_t f);

void logprob_forward(const float* logits, const int32_t* targets, float temperature, float* logp, float* lse,
                     float* entropy, int64_t n, int64_t v);
void logprob_backward(const float* dlogp, const float* dentropy, const float* logits, const int32_t* targets,
                      float temperature, const float* lse, float* dlogits, int64_t n, int64_t v);
void logprob_truncated_forward(const float* logits, const int32_t* targets, float temperature, const Truncation& t,
                               float* logp, float* lse, int64_t n, int64_t v);
void logprob_truncated_backward(const float* dlogp, const float* logits, const int32_t* targets, float temperature,
                                const Truncation& t, const float* lse, float* dlogits, int64_t n, int64_t v);

void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, float lr, float beta1, float beta2,
                float eps, float weight_decay, int64_t step);

}  // namespace rlcpp::ref
