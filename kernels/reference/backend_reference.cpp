// The "reference" backend (kernels/backend.h): the readable definitions of kernels/reference/ behind the table
// every backend fills, on the host. Slow on purpose; selected by ExecContext::on_backend("reference"), which the op
// matrix test does to hold the other backends to it. It runs fp32 math, every packed format, every rounding and
// KV-cache dtype.
#include "kernels/backend.h"
#include "kernels/reference/backend_reference.h"
#include "kernels/reference/reference_kernels.h"

namespace rlcpp::ops {

namespace {

bool reference_supports(Op op, DType dtype) {
  const bool float_16 = dtype == DType::kBF16 || dtype == DType::kF16;
  switch (op) {
    case Op::kPackWeight:
    case Op::kMatmulPacked: return dtype == DType::kF32 || float_16 || is_quantized(dtype);
    case Op::kRoundTo:
    case Op::kConvert:
    case Op::kEmbeddingForward:
    case Op::kPagedKvWrite:
    case Op::kPagedAttention: return dtype == DType::kF32 || float_16;
    case Op::kPackWeightTransposed:
    case Op::kLinearWeightGrad: return dtype == DType::kF32 || dtype == DType::kBF16;
    default: return dtype == DType::kF32;
  }
}

using K = KernelContext;

}  // namespace

const Backend& reference_backend() {
  static const Backend backend = {
      .name = "reference",
      .device = Device::kCPU,
      .reads_host_memory = true,
      .supports = reference_supports,
      .matmul = [](const K&, const float* a, bool ta, const float* b, bool tb, float* c, int64_t m, int64_t n,
                   int64_t k, float alpha, float beta, DType) { ref::matmul(a, ta, b, tb, c, m, n, k, alpha, beta); },
      .pack_weight = [](const K&, const void* w, DType source, void* panels, float* scales, int64_t n, int64_t k,
                        int64_t depth, DType format) {
        ref::pack_weight(ref::widened(w, source, n * k).data(), panels, scales, n, k, depth, format);
      },
      .pack_weight_transposed = [](const K&, const void* w, DType source, void* panels, int64_t n, int64_t k,
                                   DType format) {
        ref::pack_weight_transposed(ref::widened(w, source, n * k).data(), panels, n, k, format);
      },
      .matmul_packed =
          [](const K&, const float* x, const void* panels, const float* scales, DType format, float* y, int64_t m,
             int64_t n, int64_t k, int64_t depth, const float* residual, DType round) {
            ref::matmul_packed(x, panels, scales, format, y, m, n, k, depth, residual, round);
          },
      .round_to = [](const K&, float* x, int64_t n, DType dtype) { ref::round_to(x, n, dtype); },
      .convert = [](const K&, const void* src, DType from, void* dst, DType to,
                    int64_t n) { ref::convert(src, from, dst, to, n); },
      .linear_weight_grad = [](const K&, const float* dy, const float* x, float* dw, int64_t rows, int64_t out,
                               int64_t in, DType math) { ref::linear_weight_grad(dy, x, dw, rows, out, in, math); },
      .add_bias = [](const K&, float* y, const float* bias, int64_t rows,
                     int64_t cols) { ref::add_bias(y, bias, rows, cols); },
      .bias_backward = [](const K&, const float* dy, float* dbias, int64_t rows,
                          int64_t cols) { ref::bias_backward(dy, dbias, rows, cols); },
      .add_inplace = [](const K&, float* x, const float* y, int64_t n) { ref::add_inplace(x, y, n); },
      .scale_inplace = [](const K&, float* x, float s, int64_t n) { ref::scale_inplace(x, s, n); },
      .l2_norm = [](const K&, const float* x, int64_t n) { return ref::l2_norm(x, n); },
      .all_finite = [](const K&, const float* x, int64_t n) { return ref::all_finite(x, n); },
      .keyed_checksum = [](const K&, const float* x, int64_t n) { return ref::keyed_checksum(x, n); },
      .embedding_forward = [](const K&, const void* table, DType dtype, const int32_t* ids, float* out, int64_t n,
                              int64_t, int64_t c) { ref::embedding_forward(table, dtype, ids, out, n, c); },
      .embedding_backward = [](const K&, const float* dout, const int32_t* ids, float* dtable, int64_t n, int64_t,
                               int64_t c) { ref::embedding_backward(dout, ids, dtable, n, c); },
      .rmsnorm_forward = [](const K&, const float* x, const float* weight, float eps, float* out, float* rstd,
                            int64_t n, int64_t c,
                            DType round) { ref::rmsnorm_forward(x, weight, eps, out, rstd, n, c, round); },
      .rmsnorm_backward = [](const K&, const float* dout, const float* x, const float* weight, const float* rstd,
                             float* dx, float* dweight, int64_t n,
                             int64_t c) { ref::rmsnorm_backward(dout, x, weight, rstd, dx, dweight, n, c); },
      .rope_forward = [](const K&, float* x, const int32_t* positions, const float* table, int64_t n, int64_t heads,
                         int64_t head_dim) {
        ref::rope_rotate(x, heads * head_dim, x, heads * head_dim, positions, table, n, heads, head_dim, 1.0f);
      },
      .rope_backward = [](const K&, float* dx, const int32_t* positions, const float* table, int64_t n,
                          int64_t heads, int64_t head_dim) {
        ref::rope_rotate(dx, heads * head_dim, dx, heads * head_dim, positions, table, n, heads, head_dim, -1.0f);
      },
      .rope_split_qkv = [](const K&, const float* qkv, const int32_t* positions, const float* table, float* q,
                           float* k, float* v, int64_t n, int64_t hq, int64_t hkv, int64_t head_dim) {
        ref::split_qkv(qkv, q, k, v, n, hq, hkv, head_dim);
        ref::rope_rotate(q, hq * head_dim, q, hq * head_dim, positions, table, n, hq, head_dim, 1.0f);
        ref::rope_rotate(k, hkv * head_dim, k, hkv * head_dim, positions, table, n, hkv, head_dim, 1.0f);
      },
      .rope_backward_merge_qkv =
          [](const K&, const float* dq, const float* dk, const float* dv, const int32_t* positions,
             const float* table, float* dqkv, int64_t n, int64_t hq, int64_t hkv, int64_t head_dim) {
            const int64_t row = (hq + 2 * hkv) * head_dim;
            ref::merge_qkv(dq, dk, dv, dqkv, n, hq, hkv, head_dim);
            ref::rope_rotate(dqkv, row, dqkv, row, positions, table, n, hq, head_dim, -1.0f);
            ref::rope_rotate(dqkv + hq * head_dim, row, dqkv + hq * head_dim, row, positions, table, n, hkv,
                             head_dim, -1.0f);
          },
      .split_qkv = [](const K&, const float* qkv, float* q, float* k, float* v, int64_t n, int64_t hq, int64_t hkv,
                      int64_t head_dim) { ref::split_qkv(qkv, q, k, v, n, hq, hkv, head_dim); },
      .merge_qkv = [](const K&, const float* dq, const float* dk, const float* dv, float* dqkv, int64_t n, int64_t hq,
                      int64_t hkv, int64_t head_dim) { ref::merge_qkv(dq, dk, dv, dqkv, n, hq, hkv, head_dim); },
      .attention_forward =
          [](const K&, const float* q, const float* k, const float* v, const int32_t* cu_seqlens, int64_t num_seqs,
             int64_t, int64_t hq, int64_t hkv, int64_t d, float scale, float* out, float* lse) {
            ref::attention_forward(q, k, v, cu_seqlens, num_seqs, hq, hkv, d, scale, out, lse);
          },
      .attention_backward =
          [](const K&, const float* dout, const float* q, const float* k, const float* v, const float* out,
             const float* lse, const int32_t* cu_seqlens, int64_t num_seqs, int64_t, int64_t hq, int64_t hkv,
             int64_t d, float scale, float* dq, float* dk, float* dv) {
            ref::attention_backward(dout, q, k, v, out, lse, cu_seqlens, num_seqs, hq, hkv, d, scale, dq, dk, dv);
          },
      .paged_kv_write = [](const K&, const float* k, const float* v, const int32_t* slot_mapping, int64_t n,
                           int64_t row, void* k_cache, void* v_cache, DType cache_dtype) {
        ref::paged_kv_write(k, v, slot_mapping, n, row, k_cache, v_cache, cache_dtype);
      },
      .paged_attention =
          [](const K&, const float* q, const void* k_cache, const void* v_cache, DType cache_dtype,
             const int32_t* query_seq, const int32_t* query_pos, const int32_t* block_indptr,
             const int32_t* block_indices, int64_t block_size, int64_t n, int64_t hq, int64_t hkv, int64_t d,
             float scale, float* out) {
            ref::paged_attention(q, k_cache, v_cache, cache_dtype, query_seq, query_pos, block_indptr, block_indices,
                                 block_size, n, hq, hkv, d, scale, out);
          },
      .swiglu_forward = [](const K&, const float* gate_up, float* out, int64_t n,
                           int64_t f) { ref::swiglu_forward(gate_up, out, n, f); },
      .swiglu_backward = [](const K&, const float* dout, const float* gate_up, float* dgate_up, float* act,
                            int64_t n, int64_t f) { ref::swiglu_backward(dout, gate_up, dgate_up, act, n, f); },
      .logprob_forward = [](const K&, const float* logits, const int32_t* targets, float temperature, float* logp,
                            float* lse, float* entropy, int64_t n, int64_t v) {
        ref::logprob_forward(logits, targets, temperature, logp, lse, entropy, n, v);
      },
      .logprob_backward = [](const K&, const float* dlogp, const float* dentropy, const float* logits,
                             const int32_t* targets, float temperature, const float* lse, float* dlogits, int64_t n,
                             int64_t v) {
        ref::logprob_backward(dlogp, dentropy, logits, targets, temperature, lse, dlogits, n, v);
      },
      .logprob_truncated_forward = [](const K&, const float* logits, const int32_t* targets, float temperature,
                                      const Truncation& t, float* logp, float* lse, int64_t n, int64_t v) {
        ref::logprob_truncated_forward(logits, targets, temperature, t, logp, lse, n, v);
      },
      .logprob_truncated_backward = [](const K&, const float* dlogp, const float* logits, const int32_t* targets,
                                       float temperature, const Truncation& t, const float* lse, float* dlogits,
                                       int64_t n, int64_t v) {
        ref::logprob_truncated_backward(dlogp, logits, targets, temperature, t, lse, dlogits, n, v);
      },
      .adamw_step = [](const K&, float* param, const float* grad, float* m, float* v, int64_t n, float lr,
                       float beta1, float beta2, float eps, float weight_decay, int64_t step) {
        ref::adamw_step(param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, step);
      },
  };
  return backend;
}

}  // namespace rlcpp::ops
