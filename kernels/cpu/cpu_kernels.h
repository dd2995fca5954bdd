// Raw-pointer CPU fp32 kernels behind kernels/ops.h, one file per op family (kernels/cpu/<family>_cpu.cpp).
// Shapes are in the comments, row-major; sizes are element counts. ops.cpp has already checked shapes, dtypes
// and index ranges, so these do no checking. Gradient conventions are those of ops.h.
//
// Determinism: every reduction runs in an order fixed by the row (or column) being reduced, and parallel loops
// only split independent outputs between threads, so results never depend on the thread count.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/tensor.h"
#include "kernels/truncation.h"
#include "core/tensor.h"

namespace rlcpp::cpu {

// Elements (or multiply-adds) below which a loop stays on one thread: opening a parallel region costs a few
// microseconds, as much as ~30k simple float operations.
// A `parallel for simd` names it `if (parallel : ...)`: a bare if clause also binds the simd part (OpenMP 5), and
// GCC then runs the loop a scalar element at a time whenever it stays on one thread.
inline constexpr int64_t kParallelMinWork = int64_t{1} << 15;

// Multiply-adds below which a matrix product stays on one thread: waking the second thread costs a few
// microseconds, the time of ~200k multiply-adds.
inline constexpr int64_t kParallelMinMacs = int64_t{1} << 18;

// Width of the column blocks a column reduction (dbias, dweight, dtable) is split into between threads: up to 256
// floats so rows stay long and vectorised, narrow enough that every thread gets a block. Each column is summed
// over rows in row order whatever the width, so the width never changes a result.
int64_t column_block_width(int64_t cols);
// The largest width column_block_width returns: callers size their stack accumulators with it.
inline constexpr int64_t kMaxColumnBlock = 256;

// c (m,n) = alpha * op(a) @ op(b) + beta * c; a is (m,k), or (k,m) when trans_a; b is (k,n), or (n,k).
void matmul(const float* a, bool trans_a, const float* b, bool trans_b, float* c, int64_t m, int64_t n, int64_t k,
            float alpha, float beta);

// Matmul against packed weights (ops.h, PackedWeight). panels (ceil(n/16), panel_depth, 16) hold w (n,k) with
// panels[p][kk][j] = w[16p + j][kk] in `format` (zero past n; bf16 panels interleave pairs of kk, see
// packed_matmul_cpu.cpp); quantised formats also fill scales (ceil(n/16) * 16), the multiplier of each output
// channel's decoded values (for e4m3 times 2^8, see dtype_round.h).
inline constexpr int64_t kPackedPanel = 16;
size_t panel_element_bytes(DType format);
// The panels' second dimension for k inputs: k, or for bf16 k rounded up to even (pairs of k).
int64_t panel_depth(DType format, int64_t k);
// w of `source` dtype: F32, or BF16 (a weight held in bf16, widened exactly as it is read: the panels of the
// widened matrix).
void pack_weight(const void* w, DType source, void* panels, float* scales, int64_t n, int64_t k, DType format);
// w (n,k) = the values a product with the panels multiplies by (dequantised, rounded): the reference of what a
// packed weight holds.
void unpack_weight(const void* panels, const float* scales, float* w, int64_t n, int64_t k, DType format);
// Packs the transpose of w (n,k) the same way in `format` (F32 or BF16): panels (ceil(k/16), depth of n, 16)
// with element (i, j) of panel p = w[i][16p + j], zero past k — the panels of pack_weight(w^T, format) without
// forming w^T.
void pack_weight_transposed(const void* w, DType source, void* panels, int64_t n, int64_t k, DType format);
// y (m,n) = x (m,k) @ w^T, or y = residual + x @ w^T when residual (m,n) is given (it may be y itself); each
// product one fma chain over k in order, times the channel scale (quantised formats), rounded to `round` (kF32:
// not rounded), then the residual added and rounded again.
void matmul_packed(const float* x, const void* panels, const float* scales, DType format, float* y,
                   int64_t m, int64_t n, int64_t k, const float* residual, DType round);
// x (n) rounded in place to `dtype` (kBF16, kF16; kF32 leaves it).
void round_to(float* x, int64_t n, DType dtype);
// dst (n) of `to` = src (n) of `from` (each F32, BF16 or F16): widened exactly, rounded to nearest even as
// round_to rounds, or copied when the dtypes are the same.
void convert(const void* src, DType from, void* dst, DType to, int64_t n);

// dw (out,in) += dy (n,out)^T @ x (n,in); each output one fma chain over t = 0..n-1 in order. F32 math reads
// the operands in place; BF16 math multiplies them rounded to bf16 operands (dtype_round.h bf16_operand).
void linear_weight_grad(const float* dy, const float* x, float* dw, int64_t n, int64_t out, int64_t in, DType math);

// y (rows,cols) += bias (cols) on every row.
void add_bias(float* y, const float* bias, int64_t rows, int64_t cols);
// dbias (cols) += column sums of dy (rows,cols).
void bias_backward(const float* dy, float* dbias, int64_t rows, int64_t cols);
// x (n) += y (n).
void add_inplace(float* x, const float* y, int64_t n);
// x (n) *= s.
void scale_inplace(float* x, float s, int64_t n);
// sqrt(sum x^2), accumulated in double in fixed chunks.
double l2_norm(const float* x, int64_t n);
bool all_finite(const float* x, int64_t n);
uint64_t keyed_checksum(const float* x, int64_t n);

// out (n,c) = table[ids (n)]; dtable (v,c) += dout rows scattered by ids.
void embedding_forward(const void* table, DType dtype, const int32_t* ids, float* out, int64_t n, int64_t c);
void embedding_backward(const float* dout, const int32_t* ids, float* dtable, int64_t n, int64_t c);

// out (n,c) = x * rstd * weight, rstd (n) = 1/sqrt(mean(x^2) + eps); with round BF16/F16,
// out = round(round(weight) * round(x * rstd)) (ops.h).
void rmsnorm_forward(const float* x, const float* weight, float eps, float* out, float* rstd, int64_t n, int64_t c,
                     DType round);
// dx (n,c) += dL/dx; dweight (c) += dL/dweight.
void rmsnorm_backward(const float* dout, const float* x, const float* weight, const float* rstd, float* dx,
                      float* dweight, int64_t n, int64_t c);

// table (max_positions, head_dim): [cos | sin] of pos * inv_freq, Hugging Face Llama's float arithmetic.
void rope_table(float* table, int64_t max_positions, int64_t head_dim, float theta);
// In place on x (n, heads, head_dim); positions (n) index rows of table.
void rope_forward(float* x, const int32_t* positions, const float* table, int64_t n, int64_t heads,
                  int64_t head_dim);
void rope_backward(float* dx, const int32_t* positions, const float* table, int64_t n, int64_t heads,
                   int64_t head_dim);
// q (n,hq,D), k (n,hkv,D) = RoPE of qkv's (n, (hq + 2 hkv) D) first two column blocks, v = its third block: the
// split of a fused qkv product and rope_forward in one pass (the same bits).
void rope_split_qkv(const float* qkv, const int32_t* positions, const float* table, float* q, float* k, float* v,
                    int64_t n, int64_t hq, int64_t hkv, int64_t head_dim);
// dqkv (n, (hq + 2 hkv) D) = [rope_backward(dq) | rope_backward(dk) | dv] in one pass (the same bits).
void rope_backward_merge_qkv(const float* dq, const float* dk, const float* dv, const int32_t* positions,
                             const float* table, float* dqkv, int64_t n, int64_t hq, int64_t hkv, int64_t head_dim);
// The split and merge alone (no rotation): q, k, v = the blocks of qkv; dqkv = [dq | dk | dv].
void split_qkv(const float* qkv, float* q, float* k, float* v, int64_t n, int64_t hq, int64_t hkv, int64_t head_dim);
void merge_qkv(const float* dq, const float* dk, const float* dv, float* dqkv, int64_t n, int64_t hq, int64_t hkv,
               int64_t head_dim);

// Packed causal GQA attention. q (n,hq,d), k and v (n,hkv,d), cu_seqlens (num_seqs+1) with cu[num_seqs] = n.
// out (n,hq,d), lse (n,hq).
void attention_forward(const float* q, const float* k, const float* v, const int32_t* cu_seqlens,
                       int64_t num_seqs, int64_t hq, int64_t hkv, int64_t d, float scale, float* out, float* lse);
// dq (n,hq,d), dk and dv (n,hkv,d), overwritten.
void attention_backward(const float* dout, const float* q, const float* k, const float* v, const float* out,
                        const float* lse, const int32_t* cu_seqlens, int64_t num_seqs, int64_t hq, int64_t hkv,
                        int64_t d, float scale, float* dq, float* dk, float* dv);

// k, v (n, row) with row = hkv*d copied to slots slot_mapping (n) of k_cache, v_cache (num_slots, row) of
// `cache_dtype` (F32, or BF16/F16 rounded to nearest even); -1 skips.
void paged_kv_write(const float* k, const float* v, const int32_t* slot_mapping, int64_t n, int64_t row,
                    void* k_cache, void* v_cache, DType cache_dtype);
// q (n,hq,d) against the cache (F32, BF16 or F16, converted exactly); see ops.h for query_seq, query_pos and
// the CSR block tables.
void paged_attention(const float* q, const void* k_cache, const void* v_cache, DType cache_dtype,
                     const int32_t* query_seq, const int32_t* query_pos, const int32_t* block_indptr,
                     const int32_t* block_indices, int64_t block_size, int64_t n, int64_t hq, int64_t hkv, int64_t d,
                     float scale, float* out);

// gate_up (n,2f) -> out (n,f) = silu(gate) * up; dgate_up (n,2f) overwritten.
void swiglu_forward(const float* gate_up, float* out, int64_t n, int64_t f);
// act (n,f), when non-null, gets swiglu_forward's output recomputed (the same bits).
void swiglu_backward(const float* dout, const float* gate_up, float* dgate_up, float* act, int64_t n, int64_t f);

// logits (n,v), targets (n) in [0,v) or -1. logp, lse (n); entropy (n) when non-null.
// log softmax(row / temperature)[target]: the expression logprob_forward computes for each row.
float row_logprob(const float* row, int32_t target, float temperature, int64_t v);
void logprob_forward(const float* logits, const int32_t* targets, float temperature, float* logp, float* lse,
                     float* entropy, int64_t n, int64_t v);
// logprob_space "sampled" (kernels/truncation.h): log softmax over the row's kept set (the target counted in) at
// the target; lse (when non-null) = logsumexp over that set.
float row_logprob_truncated(const float* row, int32_t target, float temperature, const Truncation& t,
                            TruncationScratch& s, int64_t v, float* lse);
// Rows with target -1: logp = lse = 0 (forward), dlogits 0 (backward).
void logprob_truncated_forward(const float* logits, const int32_t* targets, float temperature, const Truncation& t,
                               float* logp, float* lse, int64_t n, int64_t v);
void logprob_truncated_backward(const float* dlogp, const float* logits, const int32_t* targets, float temperature,
                                const Truncation& t, const float* lse, float* dlogits, int64_t n, int64_t v);
// dlogits (n,v) overwritten; dentropy may be null.
void logprob_backward(const float* dlogp, const float* dentropy, const float* logits, const int32_t* targets,
                      float temperature, const float* lse, float* dlogits, int64_t n, int64_t v);

// torch.optim.AdamW single-tensor step on n elements; step counts from 1.
void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, float lr, float beta1, float beta2,
                float eps, float weight_decay, int64_t step);

}  // namespace rlcpp::cpu
