// Every op, forward and backward. This header declares and documents; ops.cpp checks shapes and dispatches
// (device x dtype) to kernels/cpu/*.cpp or kernels/cuda/*.cu. Shapes are in the comments, row-major.
//
// Conventions:
// - Every op's first argument is the execution context it runs on (core/exec_context.h, docs/architecture.md
//   "Execution"): its tensors must live on the context's device; on CUDA the op's work is queued on the
//   context's stream, its products on the context's cuBLAS handle, and what it allocates comes from the
//   context's pool. No op keeps state of its own (no thread-local handles, no global streams).
// - Parameter gradients (dweight, dbias, dtable) ACCUMULATE (+=), so micro-batches add up.
// - Input gradients OVERWRITE, except rmsnorm_backward's dx which accumulates because it feeds a residual stream.
// - Batch invariance: every reduction runs in an order that depends only on the row being reduced, never on
//   how many rows share the call, where the row sits, or whether the call is a prefill or a decode. In
//   particular attention_forward and paged_attention run the same per-query code, so a cached decode returns
//   the training forward's values bit for bit. matmul (OpenBLAS) is the exception: its sum order depends on M;
//   matmul_packed is the row-invariant one.
#pragma once

#include <cstdint>

#include "core/exec_context.h"
#include "core/tensor.h"
#include "kernels/truncation.h"
#include "core/tensor.h"

namespace rlcpp::ops {

// c (M,N) = alpha * op(a) @ op(b) + beta * c, op(x) = x or x^T. a is (M,K) or (K,M) when trans_a. `math` is the
// product's arithmetic: F32, fp32 products (OpenBLAS; cuBLAS without tensor-op math); on CUDA also TF32, BF16 or
// F16: tensor cores with fp32 inputs, output and accumulation, each operand rounded first to that precision
// (TF32: cuBLAS's CUBLAS_COMPUTE_32F_FAST_TF32; BF16, F16: rounded to nearest even into scratch and multiplied as
// 16-bit matrices, as PyTorch's autocast does), a GPU's mixed-precision product. The CPU backend runs F32 only
// (its bf16 and fp16 products are matmul_packed's).
void matmul(const ExecContext& ctx, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c,
            float alpha = 1.0f, float beta = 0.0f, DType math = DType::kF32);

// A weight w (N,K) in Hugging Face Linear layout, repacked once for matmul_packed: panels of 16 output columns,
// panels (ceil(N/16), K, 16) with panels[p][k][j] = w[16p + j][k] (zero past N), so 16 outputs read one
// contiguous K x 16 panel (bf16: (K rounded up to even) x 16, pairs of k interleaved for vdpbf16ps). The panels
// are a tensor of dtype `format` (F32, BF16, F16, or the one-byte codes of INT8 and FP8_E4M3);
// a quantised format also has scales (ceil(N/16) * 16): output channel n's values are multiplied by scales[n]
// (for e4m3 that multiplier includes the 2^8 of its fp16 decoding, kernels/cpu/dtype_round.h). It is a copy:
// pack again whenever w changes.
struct PackedWeight {
  Tensor panels;
  Tensor scales;
  int64_t n = 0, k = 0;
  DType format = DType::kF32;
};
// Packs w (N,K) into `packed` in `format`, reusing its buffers when the shape and format are unchanged: bf16 and
// fp16 round every weight to nearest even (bf16 subnormals to zero, dtype_round.h bf16_operand); int8 and
// fp8_e4m3 quantise it with one scale per output channel (core/tensor.h DType). On a CUDA context w and the panels are
// on the device, the same bits (the quantised formats through the host). w is F32, or on the host BF16 (a weight
// held in bf16, a frozen LoRA base): packed as its values widened to fp32 (exactly), the same panels.
void pack_weight(const ExecContext& ctx, const Tensor& w, PackedWeight& packed,
                 DType format = DType::kF32);
// dst = src on ctx's device (panels and scales; dst's buffers reused when they fit): a weight packed on the host
// moved to the device whose matmul_packed reads the same layout.
void copy_packed(const ExecContext& ctx, const PackedWeight& src, PackedWeight& dst);
// The (N,K) fp32 values the packed weight multiplies by: w rounded or dequantised (scale * code). The reference
// of pack_weight, and how a sync measures its quantisation error.
Tensor unpack_weight(const ExecContext& ctx, const PackedWeight& packed);
// Packs w^T (K,N) of w (N,K) into `packed` (packed.n = K, packed.k = N), for products with w itself:
// matmul_packed(dy, packed, dx) is dx (M,K) = dy (M,N) @ w, the input gradient of a Linear layer. `format` F32,
// or BF16 (a bf16 model's backward: dy rounded to bf16 operands against bf16 weights, fp32 chains): the panels of
// pack_weight(w^T, format) without forming w^T. w F32, or BF16 on the host, as pack_weight.
void pack_weight_transposed(const ExecContext& ctx, const Tensor& w, PackedWeight& packed,
                            DType format = DType::kF32);
// y (M,N) = x (M,K) @ w^T, or y += x @ w^T when accumulate: the CPU model's Linear product, decode and training
// alike (weights packed once per version instead of on every call, activations read in place). Batch-invariant
// bit for bit: every output is one fused multiply-add chain over k = 0..K-1 in order, from 0, over the values the
// panels store (exactly converted to fp32; against bf16 panels x is rounded to bf16 operands first, as a bf16
// GEMM takes bf16 inputs), times the channel scale when quantised, then rounded to `round`
// (F32: kept; BF16, F16: to nearest even) and stored, or added to y and rounded again — whatever M, the row's
// place, or the thread count. On a CUDA context (panels on the device, copy_packed or pack_weight there) the same
// chains in the same order: the same bits as the CPU (kernels/cuda/packed_matmul_cuda.cu).
void matmul_packed(const ExecContext& ctx, const Tensor& x, const PackedWeight& w, Tensor& y, bool accumulate = false,
                   DType round = DType::kF32);
// y = residual + x @ w^T (residual (M,N), may be y): a Linear layer and its residual connection in one pass,
// the same bits as copying residual into y and accumulating: round(residual + round(product)).
void matmul_packed_residual(const ExecContext& ctx, const Tensor& x, const PackedWeight& w, const Tensor& residual,
                            Tensor& y, DType round = DType::kF32);

// x (F32, any shape) rounded in place to `dtype`'s nearest value, ties to even (F32: unchanged; BF16, F16). The
// kernels compute a bf16 or fp16 model's activations on fp32 tensors holding such values: they are rounded at the
// op boundaries a GPU model of that dtype rounds them, and computed on in fp32 in between (what the model keeps
// for its backward is stored in the dtype itself, through convert).
void round_to(const ExecContext& ctx, Tensor& x, DType dtype);
// dst = src converted to dst's dtype (same shape; each F32, BF16 or F16), the one named conversion between fp32
// and the 16-bit storage dtypes: to 16 bits rounded to nearest even (round_to's values, stored in 16 bits), from
// 16 bits widened exactly, same dtype copied. A bf16/fp16 model's kept activations are stored and read back
// through it.
void convert(const ExecContext& ctx, const Tensor& src, Tensor& dst);
// x (F32) as a new tensor of `dtype` from ctx's pool: convert into BF16 or F16, or a copy for F32.
Tensor stored_as(const ExecContext& ctx, const Tensor& x, DType dtype);

// dw (N,K) += dy (M,N)^T @ x (M,K), the weight gradient of a Linear layer. On the CPU every output is one fma
// chain over the rows in order from dw's value, whatever the thread count: F32 math reads the operands in place (no
// copies; for a chunk of rows that is already in cache); BF16 math (a bf16 model's backward) over both operands
// rounded to bf16 (subnormals to zero), two rows' products per AVX512-BF16 vdpbf16ps where the CPU has it (which
// flushes a partial sum below 2^-126 to zero, as matmul_packed's bf16 tiles). On CUDA it is matmul (cuBLAS) in
// `math`.
void linear_weight_grad(const ExecContext& ctx, const Tensor& dy, const Tensor& x, Tensor& dw,
                        DType math = DType::kF32);

// y (M,N) += bias (N) on every row.
void add_bias(const ExecContext& ctx, Tensor& y, const Tensor& bias);
// dbias (N) += sum over rows of dy (M,N).
void bias_backward(const ExecContext& ctx, const Tensor& dy, Tensor& dbias);

// x += y, same shape.
void add_inplace(const ExecContext& ctx, Tensor& x, const Tensor& y);
// x *= s.
void scale_inplace(const ExecContext& ctx, Tensor& x, float s);

// out (N,C) F32 = table (V,C)[ids (N) int32], the table F32 or BF16/F16 (a 16-bit engine's copy: its rows widened
// exactly). An id outside [0, V) is an error naming the id and its index.
void embedding_forward(const ExecContext& ctx, const Tensor& table, const Tensor& ids, Tensor& out);
// dtable (V,C) += scatter of dout (N,C) by ids.
void embedding_backward(const ExecContext& ctx, const Tensor& dout, const Tensor& ids, Tensor& dtable);

// out (N,C) = x * rsqrt(mean(x^2) + eps) * weight (C); rstd (N) saved for backward. With round = BF16 or F16,
// Hugging Face's LlamaRMSNorm in that dtype: out = round(round(weight) * round(x * rstd)), the normalised row
// rounded back to the dtype before the (rounded) weight multiplies it; rstd and its sum stay fp32.
void rmsnorm_forward(const ExecContext& ctx, const Tensor& x, const Tensor& weight, float eps, Tensor& out,
                     Tensor& rstd, DType round = DType::kF32);
// dx (N,C) += d/dx; dweight (C) += d/dweight.
void rmsnorm_backward(const ExecContext& ctx, const Tensor& dout, const Tensor& x, const Tensor& weight,
                      const Tensor& rstd, Tensor& dx, Tensor& dweight);

// RoPE table (max_positions, head_dim): columns [0, D/2) hold cos(pos * inv_freq[i]), [D/2, D) sin, with
// inv_freq[i] = 1 / theta^(2i/D) computed in float as Hugging Face Llama does.
Tensor rope_table(const ExecContext& ctx, int64_t max_positions, int64_t head_dim, float theta);
// In place on x (N, H, D) with positions (N) int32, rotate-half convention (Hugging Face Llama):
// out[i] = x[i] cos - x[i + D/2] sin, out[i + D/2] = x[i + D/2] cos + x[i] sin, i < D/2.
void rope_forward(const ExecContext& ctx, Tensor& x, const Tensor& positions, const Tensor& table);
// In place on dx (N, H, D): the transpose rotation (by -angle).
void rope_backward(const ExecContext& ctx, Tensor& dx, const Tensor& positions, const Tensor& table);
// The fused qkv product's output (N, (Hq + 2 Hkv) D) split into q (N,Hq,D) and k (N,Hkv,D) with RoPE applied,
// and v (N,Hkv,D): the same bits as copying the three blocks out and calling rope_forward on q and k.
void rope_split_qkv(const ExecContext& ctx, const Tensor& qkv, const Tensor& positions, const Tensor& table, Tensor& q,
                    Tensor& k, Tensor& v);
// Its backward: dqkv (N, (Hq + 2 Hkv) D) = [rope_backward(dq) | rope_backward(dk) | dv], the same bits as
// rope_backward in place and copying the blocks in.
void rope_backward_merge_qkv(const ExecContext& ctx, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                             const Tensor& positions, const Tensor& table, Tensor& dqkv);
// The fused qkv product's output (N, (Hq + 2 Hkv) D) split into q (N,Hq,D), k and v (N,Hkv,D) as they are, no
// RoPE: Qwen3 normalises each head of q and k (q_norm, k_norm: rmsnorm_forward over (N*H, D)) before
// rope_forward.
void split_qkv(const ExecContext& ctx, const Tensor& qkv, Tensor& q, Tensor& k, Tensor& v);
// Its backward: dqkv (N, (Hq + 2 Hkv) D) = [dq | dk | dv] row by row.
void merge_qkv(const ExecContext& ctx, const Tensor& dq, const Tensor& dk, const Tensor& dv, Tensor& dqkv);

// Causal attention over packed sequences. q (N,Hq,D), k and v (N,Hkv,D), Hq a multiple of Hkv (GQA: query
// head h reads kv head h / (Hq/Hkv)). cu_seqlens (B+1) int32: sequence b is rows [cu[b], cu[b+1]); a row
// attends to rows of its own sequence up to and including itself. out (N,Hq,D); lse (N,Hq) = logsumexp of the
// scaled scores, saved for backward.
void attention_forward(const ExecContext& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& cu_seqlens, float scale, Tensor& out, Tensor& lse);
// dq (N,Hq,D), dk and dv (N,Hkv,D), all overwritten.
void attention_backward(const ExecContext& ctx, const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& out, const Tensor& lse, const Tensor& cu_seqlens, float scale, Tensor& dq,
                        Tensor& dk, Tensor& dv);

// Paged KV cache: one layer's cache is k_cache and v_cache (num_slots, Hkv, D), num_slots = num_blocks *
// block_size; token t of a sequence lives in slot block_table[t / block_size] * block_size + t % block_size.
// The cache is F32, BF16 or F16 (the rollout dtype's storage: half the bytes per token); writing rounds k and v
// to it, reading converts back exactly, so a 16-bit cache holding a bf16 model's (already rounded) k and v gives
// attention the very values the training forward sees.
// Writes k, v (N,Hkv,D) to slots slot_mapping (N) int32; a slot of -1 is skipped.
void paged_kv_write(const ExecContext& ctx, const Tensor& k, const Tensor& v, const Tensor& slot_mapping,
                    Tensor& k_cache, Tensor& v_cache);
// Attention of N query rows against the cache (prefill and decode alike). Query row i belongs to sequence
// query_seq[i] and sits at position query_pos[i]; it attends to that sequence's positions 0..query_pos[i]
// (which must already be written). Block tables in CSR form (flashinfer): sequence b owns blocks
// block_indices[block_indptr[b] .. block_indptr[b+1]). q (N,Hq,D) -> out (N,Hq,D).
void paged_attention(const ExecContext& ctx, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                     const Tensor& query_seq, const Tensor& query_pos, const Tensor& block_indptr,
                     const Tensor& block_indices, int64_t block_size, float scale, Tensor& out);

// gate_up (N, 2F): gate in columns [0, F), up in [F, 2F). out (N,F) = silu(gate) * up.
void swiglu_forward(const ExecContext& ctx, const Tensor& gate_up, Tensor& out);
// dgate_up (N, 2F) overwritten.
void swiglu_backward(const ExecContext& ctx, const Tensor& dout, const Tensor& gate_up, Tensor& dgate_up);
// The same, and act (N,F) = swiglu_forward's output recomputed in the same pass (the bits swiglu_forward gives):
// the training backward needs it for the down projection's weight gradient, and recomputing it from gate_up
// costs less than storing it in the forward and reading it back from memory.
void swiglu_backward(const ExecContext& ctx, const Tensor& dout, const Tensor& gate_up, Tensor& dgate_up, Tensor& act);

// Per-row log-probability of targets under softmax(logits / temperature). logits (N,V), targets (N) int32;
// a target of -1 marks a row with no target: logp 0 there. Every log-prob op takes a temperature in
// [kMinTemperature, inf) (kernels/temperature.h). logp (N); lse (N) = logsumexp(logits / T) saved
// for backward; entropy (N) of the tempered distribution when `entropy` is non-null.
void logprob_forward(const ExecContext& ctx, const Tensor& logits, const Tensor& targets, float temperature,
                     Tensor& logp, Tensor& lse, Tensor* entropy);
// log softmax(row / temperature)[target] of one row of V logits on the CPU, the same bits as logprob_forward
// gives that row: the rollout sampler reports it, so a sample's log-probs equal the trainer's recomputation.
float row_logprob(const float* row, int64_t vocab_size, int32_t target, float temperature);
// dlogits (N,V) overwritten from dlogp (N) and, when non-null, dentropy (N). Rows with target -1 get only
// the entropy term.
void logprob_backward(const ExecContext& ctx, const Tensor& dlogp, const Tensor* dentropy, const Tensor& logits,
                      const Tensor& targets, float temperature, const Tensor& lse, Tensor& dlogits);

// logprob_space "sampled": the log-prob of each target under softmax(logits / T) restricted to its row's
// top-k / top-p kept set (kernels/truncation.h: the sampler's rule, replayed on these logits; the target always
// counts as kept), so the trainer scores the truncated distribution the rollout drew the token from. logp (N),
// lse (N) = logsumexp over the kept set (0 for a row with target -1). CPU.
void logprob_truncated_forward(const ExecContext& ctx, const Tensor& logits, const Tensor& targets, float temperature,
                               const Truncation& t, Tensor& logp, Tensor& lse);
// dlogits (N,V) overwritten: dlogp * ([j = target] - p_j) / T over the kept set, 0 outside it (the set is a
// constant of the sampling, not differentiated).
void logprob_truncated_backward(const ExecContext& ctx, const Tensor& dlogp, const Tensor& logits,
                                const Tensor& targets, float temperature, const Truncation& t, const Tensor& lse,
                                Tensor& dlogits);
// One row, as the rollout sampler reports it: the bits logprob_truncated_forward gives that row.
float row_logprob_truncated(const float* row, int64_t vocab_size, int32_t target, float temperature,
                            const Truncation& t, TruncationScratch& scratch);

struct AdamWParams {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
};
// One step of AdamW exactly as torch.optim.AdamW (decoupled decay, bias correction); step counts from 1.
// param, grad, m, v have the same shape.
void adamw_step(const ExecContext& ctx, Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWParams& p,
                int64_t step);

// L2 norm of all elements (accumulated in double).
double l2_norm(const ExecContext& ctx, const Tensor& x);
// true when every element is finite.
bool all_finite(const ExecContext& ctx, const Tensor& x);
// The sum modulo 2^64 of one keyed Philox draw per element (kernels/keyed_checksum.h: keyed by the index, counting
// the element's bits): the checksum of weights that move between devices (the cuda-ipc weight sync), computed
// where they are, with the same 64 bits on every device and whatever the threads or blocks.
uint64_t keyed_checksum(const ExecContext& ctx, const Tensor& x);

}  // namespace rlcpp::ops
