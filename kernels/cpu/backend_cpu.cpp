// The "cpu" backend (kernels/backend.h): the fast host kernels of kernels/cpu/, one file per op family, behind
// the table every backend fills. fp32 activations; packed weights in fp32, bf16, fp16, int8 and fp8_e4m3; KV
// caches, roundings and conversions in fp32, bf16 and fp16. Products of other math (tf32, or bf16/fp16 operands
// without packing) are tensor-core modes of CUDA: refused here by name.
#include <algorithm>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/backend_cpu.h"

namespace rlcpp::ops {

namespace {

bool float_16(DType d) { return d == DType::kBF16 || d == DType::kF16; }

bool cpu_supports(Op op, DType dtype) {
  switch (op) {
    case Op::kPackWeight:
    case Op::kMatmulPacked:
      return dtype == DType::kF32 || float_16(dtype) || is_quantized(dtype);
    case Op::kRoundTo:
    case Op::kConvert:
    case Op::kEmbeddingForward:
      return float_16(dtype) || dtype == DType::kF32;
    case Op::kPagedKvWrite:
    case Op::kPagedAttention:
      return dtype == DType::kF32 || float_16(dtype);
    case Op::kPackWeightTransposed:
    case Op::kLinearWeightGrad:  // a bf16 model's backward products
      return dtype == DType::kF32 || dtype == DType::kBF16;
    default:
      return dtype == DType::kF32;
  }
}

using K = KernelContext;

}  // namespace

const Backend& cpu_backend() {
  static const Backend backend = {
      .name = "cpu",
      .device = Device::kCPU,
      .reads_host_memory = true,
      .supports = cpu_supports,
      .matmul = [](const K&, const float* a, bool ta, const float* b, bool tb, float* c, int64_t m, int64_t n,
                   int64_t k, float alpha, float beta, DType) { cpu::matmul(a, ta, b, tb, c, m, n, k, alpha, beta); },
      .pack_weight =
          [](const K&, const void* w, DType source, void* panels, float* scales, int64_t n, int64_t k, int64_t,
             DType format) {
            if (scales) {  // the padding columns' scales (their panels are zero)
              const int64_t padded = (n + cpu::kPackedPanel - 1) / cpu::kPackedPanel * cpu::kPackedPanel;
              std::fill(scales + n, scales + padded, 1.0f);
            }
            cpu::pack_weight(w, source, panels, scales, n, k, format);
          },
      .pack_weight_transposed = [](const K&, const void* w, DType source, void* panels, int64_t n, int64_t k,
                                   DType format) { cpu::pack_weight_transposed(w, source, panels, n, k, format); },
      .matmul_packed =
          [](const K&, const float* x, const void* panels, const float* scales, DType format, float* y, int64_t m,
             int64_t n, int64_t k, int64_t, const float* residual, DType round) {
            cpu::matmul_packed(x, panels, scales, format, y, m, n, k, residual, round);
          },
      .round_to = [](const K&, float* x, int64_t n, DType dtype) { cpu::round_to(x, n, dtype); },
      .convert = [](const K&, const void* src, DType from, void* dst, DType to,
                    int64_t n) { cpu::convert(src, from, dst, to, n); },
      .linear_weight_grad = [](const K&, const float* dy, const float* x, float* dw, int64_t rows, int64_t out,
                               int64_t in, DType math) { cpu::linear_weight_grad(dy, x, dw, rows, out, in, math); },
      .add_bias = [](const K&, float* y, const float* bias, int64_t rows,
                     int64_t cols) { cpu::add_bias(y, bias, rows, cols); },
      .bias_backward = [](const K&, const float* dy, float* dbias, int64_t rows,
                          int64_t cols) { cpu::bias_backward(dy, dbias, rows, cols); },
      .add_inplace = [](const K&, float* x, const float* y, int64_t n) { cpu::add_inplace(x, y, n); },
      .scale_inplace = [](const K&, float* x, float s, int64_t n) { cpu::scale_inplace(x, s, n); },
      .l2_norm = [](const K&, const float* x, int64_t n) { return cpu::l2_norm(x, n); },
      .all_finite = [](const K&, const float* x, int64_t n) { return cpu::all_finite(x, n); },
      .keyed_checksum = [](const K&, const float* x, int64_t n) { return cpu::keyed_checksum(x, n); },
      .embedding_forward = [](const K&, const void* table, DType dtype, const int32_t* ids, float* out, int64_t n,
                              int64_t, int64_t c) { cpu::embedding_forward(table, dtype, ids, out, n, c); },
      .embedding_backward = [](const K&, const float* dout, const int32_t* ids, float* dtable, int64_t n, int64_t,
                               int64_t c) { cpu::embedding_backward(dout, ids, dtable, n, c); },
      .rmsnorm_forward = [](const K&, const float* x, const float* weight, float eps, float* out, float* rstd,
                            int64_t n, int64_t c,
                            DType round) { cpu::rmsnorm_forward(x, weight, eps, out, rstd, n, c, round); },
      .rmsnorm_backward = [](const K&, const float* dout, const float* x, const float* weight, const float* rstd,
                             float* dx, float* dweight, int64_t n,
                             int64_t c) { cpu::rmsnorm_backward(dout, x, weight, rstd, dx, dweight, n, c); },
      .rope_forward = [](const K&, float* x, const int32_t* positions, const float* table, int64_t n, int64_t heads,
                         int64_t head_dim) { cpu::rope_forward(x, positions, table, n, heads, head_dim); },
      .rope_backward = [](const K&, float* dx, const int32_t* positions, const float* table, int64_t n,
                          int64_t heads,
                          int64_t head_dim) { cpu::rope_backward(dx, positions, table, n, heads, head_dim); },
      .rope_split_qkv =
          [](const K&, const float* qkv, const int32_t* positions, const float* table, float* q, float* k, float* v,
             int64_t n, int64_t hq, int64_t hkv,
             int64_t head_dim) { cpu::rope_split_qkv(qkv, positions, table, q, k, v, n, hq, hkv, head_dim); },
      .rope_backward_merge_qkv =
          [](const K&, const float* dq, const float* dk, const float* dv, const int32_t* positions,
             const float* table, float* dqkv, int64_t n, int64_t hq, int64_t hkv, int64_t head_dim) {
            cpu::rope_backward_merge_qkv(dq, dk, dv, positions, table, dqkv, n, hq, hkv, head_dim);
          },
      .split_qkv = [](const K&, const float* qkv, float* q, float* k, float* v, int64_t n, int64_t hq, int64_t hkv,
                      int64_t head_dim) { cpu::split_qkv(qkv, q, k, v, n, hq, hkv, head_dim); },
      .merge_qkv = [](const K&, const float* dq, const float* dk, const float* dv, float* dqkv, int64_t n, int64_t hq,
                      int64_t hkv, int64_t head_dim) { cpu::merge_qkv(dq, dk, dv, dqkv, n, hq, hkv, head_dim); },
      .attention_forward =
          [](const K&, const float* q, const float* k, const float* v, const int32_t* cu_seqlens, int64_t num_seqs,
             int64_t, int64_t hq, int64_t hkv, int64_t d, float scale, float* out, float* lse) {
            cpu::attention_forward(q, k, v, cu_seqlens, num_seqs, hq, hkv, d, scale, out, lse);
          },
      .attention_backward =
          [](const K&, const float* dout, const float* q, const float* k, const float* v, const float* out,
             const float* lse, const int32_t* cu_seqlens, int64_t num_seqs, int64_t, int64_t hq, int64_t hkv,
             int64_t d, float scale, float* dq, float* dk, float* dv) {
            cpu::attention_backward(dout, q, k, v, out, lse, cu_seqlens, num_seqs, hq, hkv, d, scale, dq, dk, dv);
          },
      .paged_kv_write = [](const K&, const float* k, const float* v, const int32_t* slot_mapping, int64_t n,
                           int64_t row, void* k_cache, void* v_cache, DType cache_dtype) {
        cpu::paged_kv_write(k, v, slot_mapping, n, row, k_cache, v_cache, cache_dtype);
      },
      .paged_attention =
          [](const K&, const float* q, const void* k_cache, const void* v_cache, DType cache_dtype,
             const int32_t* query_seq, const int32_t* query_pos, const int32_t* block_indptr,
             const int32_t* block_indices, int64_t block_size, int64_t n, int64_t hq, int64_t hkv, int64_t d,
             float scale, float* out) {
            cpu::paged_attention(q, k_cache, v_cache, cache_dtype, query_seq, query_pos, block_indptr, block_indices,
                                 block_size, n, hq, hkv, d, scale, out);
          },
      .swiglu_forward = [](const K&, const float* gate_up, float* out, int64_t n,
                           int64_t f) { cpu::swiglu_forward(gate_up, out, n, f); },
      .swiglu_backward = [](const K&, const float* dout, const float* gate_up, float* dgate_up, float* act,
                            int64_t n, int64_t f) { cpu::swiglu_backward(dout, gate_up, dgate_up, act, n, f); },
      .logprob_forward = [](const K&, const float* logits, const int32_t* targets, float temperature, float* logp,
                            float* lse, float* entropy, int64_t n, int64_t v) {
        cpu::logprob_forward(logits, targets, temperature, logp, lse, entropy, n, v);
      },
      .logprob_backward = [](const K&, const float* dlogp, const float* dentropy, const float* logits,
                             const int32_t* targets, float temperature, const float* lse, float* dlogits, int64_t n,
                             int64_t v) {
        cpu::logprob_backward(dlogp, dentropy, logits, targets, temperature, lse, dlogits, n, v);
      },
      .logprob_truncated_forward = [](const K&, const float* logits, const int32_t* targets, float temperature,
                                      const Truncation& t, float* logp, float* lse, int64_t n, int64_t v) {
        cpu::logprob_truncated_forward(logits, targets, temperature, t, logp, lse, n, v);
      },
      .logprob_truncated_backward = [](const K&, const float* dlogp, const float* logits, const int32_t* targets,
                                       float temperature, const Truncation& t, const float* lse, float* dlogits,
                                       int64_t n, int64_t v) {
        cpu::logprob_truncated_backward(dlogp, logits, targets, temperature, t, lse, dlogits, n, v);
      },
      .adamw_step = [](const K&, float* param, const float* grad, float* m, float* v, int64_t n, float lr,
                       float beta1, float beta2, float eps, float weight_decay, int64_t step) {
        cpu::adamw_step(param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, step);
      },
  };
  return backend;
}

}  // namespace rlcpp::ops
