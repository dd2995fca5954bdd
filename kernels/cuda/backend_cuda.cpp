// The "cuda" backend (kernels/backend.h): the launchers of kernels/cuda/*.cu, one file per op family, behind the
// table every backend fills. Each launcher returns its status (flashinfer's way); this layer checks it and throws
// naming the op, the CUDA or cuBLAS error and file:line. Products on cuBLAS in fp32, or with tf32/bf16/fp16 operand
// math on tensor cores (matmul_cuda.cu); the packed product in every format (the quantised ones packed
// on the host, the CPU's codes and scales, and moved); fp32 activations. Not here (refused by name): the transposed
// packing, 16-bit storage of a tensor, and the truncated log-probs.
#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/backend_cuda.h"
#include "kernels/cuda/cuda_kernels.h"

namespace rlcpp::ops {
namespace {

void check(cudaError_t status, const char* op, const char* file, int line) {
  if (status != cudaSuccess)
    detail::throw_error(file, line, std::string("op ") + op + ": CUDA error " + cudaGetErrorName(status) + ": " +
                                        cudaGetErrorString(status));
}
void check(cublasStatus_t status, const char* op, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS)
    detail::throw_error(file, line, std::string("op ") + op + ": cuBLAS error " + cublasGetStatusString(status));
}
#define RLCPP_LAUNCH(op, call) check((call), (op), __FILE__, __LINE__)

cudaStream_t stream(const KernelContext& k) { return static_cast<cudaStream_t>(k.stream); }
cublasHandle_t blas(const KernelContext& k) { return static_cast<cublasHandle_t>(k.blas); }

void check_head_dim(const char* op, int64_t d) {
  RLCPP_CHECK(d <= cuda::kMaxAttentionHeadDim,
              op << ": head_dim " << d << " above the CUDA kernel's " << cuda::kMaxAttentionHeadDim);
}

bool float_16(DType d) { return d == DType::kBF16 || d == DType::kF16; }

bool cuda_supports(Op op, DType dtype) {
  switch (op) {
    case Op::kMatmul:
    case Op::kLinearWeightGrad: return dtype == DType::kF32 || dtype == DType::kTF32 || float_16(dtype);
    case Op::kPackWeight:
    case Op::kMatmulPacked: return dtype == DType::kF32 || float_16(dtype) || is_quantized(dtype);
    case Op::kRoundTo:
    case Op::kConvert:
    case Op::kEmbeddingForward:
    case Op::kPagedKvWrite:
    case Op::kPagedAttention: return dtype == DType::kF32 || float_16(dtype);
    case Op::kPackWeightTransposed:
    case Op::kLogprobTruncatedForward:
    case Op::kLogprobTruncatedBackward: return false;
    default: return dtype == DType::kF32;
  }
}

// A rollout's quantisation, once per policy version: the CPU's channel scales and codes, packed on the host from
// the device's weights and moved back.
void pack_quantized_through_host(const KernelContext& k, const float* w, void* panels, float* scales, int64_t n,
                                 int64_t kk, int64_t depth, DType format) {
  const int64_t padded = (n + cpu::kPackedPanel - 1) / cpu::kPackedPanel * cpu::kPackedPanel;
  std::vector<float> w_host(static_cast<size_t>(n * kk)), scales_host(static_cast<size_t>(padded), 1.0f);
  std::vector<char> panels_host(static_cast<size_t>(padded * depth) * dtype_size(format));
  RLCPP_LAUNCH("pack_weight", cudaMemcpyAsync(w_host.data(), w, w_host.size() * sizeof(float),
                                              cudaMemcpyDeviceToHost, stream(k)));
  RLCPP_LAUNCH("pack_weight", cudaStreamSynchronize(stream(k)));
  cpu::pack_weight(w_host.data(), DType::kF32, panels_host.data(), scales_host.data(), n, kk, format);
  RLCPP_LAUNCH("pack_weight", cudaMemcpyAsync(panels, panels_host.data(), panels_host.size(), cudaMemcpyHostToDevice,
                                              stream(k)));
  RLCPP_LAUNCH("pack_weight", cudaMemcpyAsync(scales, scales_host.data(), scales_host.size() * sizeof(float),
                                              cudaMemcpyHostToDevice, stream(k)));
  RLCPP_LAUNCH("pack_weight", cudaStreamSynchronize(stream(k)));  // the host buffers end here
}

[[noreturn]] void not_here(const char* op) { RLCPP_FAIL("op " << op << " has no CUDA kernel"); }

using K = KernelContext;

}  // namespace

const Backend& cuda_backend() {
  static const Backend backend = {
      .name = "cuda",
      .device = Device::kCUDA,
      .reads_host_memory = false,
      .supports = cuda_supports,
      .matmul =
          [](const K& k, const float* a, bool ta, const float* b, bool tb, float* c, int64_t m, int64_t n, int64_t kk,
             float alpha, float beta, DType math) {
            RLCPP_LAUNCH("matmul", cuda::matmul(blas(k), a, ta, b, tb, c, m, n, kk, alpha, beta, math, stream(k)));
          },
      .pack_weight =
          [](const K& k, const void* source_w, DType source, void* panels, float* scales, int64_t n, int64_t kk,
             int64_t depth, DType format) {
            RLCPP_CHECK(source == DType::kF32, "pack_weight: a " << dtype_name(source) << " weight on cuda");
            const float* w = static_cast<const float*>(source_w);
            if (is_quantized(format)) return pack_quantized_through_host(k, w, panels, scales, n, kk, depth, format);
            RLCPP_LAUNCH("pack_weight", cuda::pack_weight(w, panels, format, n, kk, depth, stream(k)));
          },
      .pack_weight_transposed = [](const K&, const void*, DType, void*, int64_t, int64_t,
                                   DType) { not_here("pack_weight_transposed"); },
      .matmul_packed =
          [](const K& k, const float* x, const void* panels, const float* scales, DType format, float* y, int64_t m,
             int64_t n, int64_t kk, int64_t depth, const float* residual, DType round) {
            RLCPP_LAUNCH("matmul_packed", cuda::matmul_packed(x, panels, scales, format, y, m, n, kk, depth, residual,
                                                              round, stream(k)));
          },
      .round_to = [](const K& k, float* x, int64_t n,
                     DType dtype) { RLCPP_LAUNCH("round_to", cuda::round_to(x, n, dtype, stream(k))); },
      .convert = [](const K& k, const void* src, DType from, void* dst, DType to,
                    int64_t n) { RLCPP_LAUNCH("convert", cuda::convert(src, from, dst, to, n, stream(k))); },
      .linear_weight_grad =
          [](const K& k, const float* dy, const float* x, float* dw, int64_t rows, int64_t out, int64_t in,
             DType math) {
            // dw (out,in) += dy^T (out,rows) @ x (rows,in)
            RLCPP_LAUNCH("linear_weight_grad",
                         cuda::matmul(blas(k), dy, true, x, false, dw, out, in, rows, 1.0f, 1.0f, math, stream(k)));
          },
      .add_bias = [](const K& k, float* y, const float* bias, int64_t rows,
                     int64_t cols) { RLCPP_LAUNCH("add_bias", cuda::add_bias(y, bias, rows, cols, stream(k))); },
      .bias_backward =
          [](const K& k, const float* dy, float* dbias, int64_t rows, int64_t cols) {
            RLCPP_LAUNCH("bias_backward", cuda::bias_backward(dy, dbias, rows, cols, stream(k)));
          },
      .add_inplace = [](const K& k, float* x, const float* y,
                        int64_t n) { RLCPP_LAUNCH("add_inplace", cuda::add_inplace(x, y, n, stream(k))); },
      .scale_inplace = [](const K& k, float* x, float s,
                          int64_t n) { RLCPP_LAUNCH("scale_inplace", cuda::scale_inplace(x, s, n, stream(k))); },
      .l2_norm =
          [](const K& k, const float* x, int64_t n) {
            double norm = 0.0;
            RLCPP_LAUNCH("l2_norm", cuda::l2_norm(x, n, &norm, stream(k)));
            return norm;
          },
      .all_finite =
          [](const K& k, const float* x, int64_t n) {
            bool finite = false;
            RLCPP_LAUNCH("all_finite", cuda::all_finite(x, n, &finite, stream(k)));
            return finite;
          },
      .keyed_checksum =
          [](const K& k, const float* x, int64_t n) {
            uint64_t sum = 0;
            RLCPP_LAUNCH("keyed_checksum", cuda::keyed_checksum(x, n, &sum, stream(k)));
            return sum;
          },
      .embedding_forward =
          [](const K& k, const void* table, DType dtype, const int32_t* ids, float* out, int64_t n, int64_t vocab,
             int64_t c) {
            RLCPP_LAUNCH("embedding_forward", cuda::embedding_forward(table, dtype, ids, out, n, vocab, c, stream(k)));
          },
      .embedding_backward =
          [](const K& k, const float* dout, const int32_t* ids, float* dtable, int64_t n, int64_t vocab, int64_t c) {
            RLCPP_LAUNCH("embedding_backward", cuda::embedding_backward(dout, ids, dtable, n, vocab, c, stream(k)));
          },
      .rmsnorm_forward =
          [](const K& k, const float* x, const float* weight, float eps, float* out, float* rstd, int64_t n, int64_t c,
             DType round) {
            RLCPP_LAUNCH("rmsnorm_forward", cuda::rmsnorm_forward(x, weight, eps, out, rstd, n, c, round, stream(k)));
          },
      .rmsnorm_backward =
          [](const K& k, const float* dout, const float* x, const float* weight, const float* rstd, float* dx,
             float* dweight, int64_t n, int64_t c) {
            RLCPP_LAUNCH("rmsnorm_backward",
                         cuda::rmsnorm_backward(dout, x, weight, rstd, dx, dweight, n, c, stream(k)));
          },
      .rope_forward =
          [](const K& k, float* x, const int32_t* positions, const float* table, int64_t n, int64_t heads,
             int64_t head_dim) {
            RLCPP_LAUNCH("rope_forward", cuda::rope_forward(x, positions, table, n, heads, head_dim, stream(k)));
          },
      .rope_backward =
          [](const K& k, float* dx, const int32_t* positions, const float* table, int64_t n, int64_t heads,
             int64_t head_dim) {
            RLCPP_LAUNCH("rope_backward", cuda::rope_backward(dx, positions, table, n, heads, head_dim, stream(k)));
          },
      .rope_split_qkv =
          [](const K& k, const float* qkv, const int32_t* positions, const float* table, float* q, float* kk,
             float* v, int64_t n, int64_t hq, int64_t hkv, int64_t head_dim) {
            RLCPP_LAUNCH("rope_split_qkv",
                         cuda::rope_split_qkv(qkv, positions, table, q, kk, v, n, hq, hkv, head_dim, stream(k)));
          },
      .rope_backward_merge_qkv =
          [](const K& k, const float* dq, const float* dk, const float* dv, const int32_t* positions,
             const float* table, float* dqkv, int64_t n, int64_t hq, int64_t hkv, int64_t head_dim) {
            RLCPP_LAUNCH("rope_backward_merge_qkv", cuda::rope_backward_merge_qkv(dq, dk, dv, positions, table, dqkv, n,
                                                                                  hq, hkv, head_dim, stream(k)));
          },
      .split_qkv =
          [](const K& k, const float* qkv, float* q, float* kk, float* v, int64_t n, int64_t hq, int64_t hkv,
             int64_t head_dim) {
            RLCPP_LAUNCH("split_qkv", cuda::split_qkv(qkv, q, kk, v, n, hq, hkv, head_dim, stream(k)));
          },
      .merge_qkv =
          [](const K& k, const float* dq, const float* dk, const float* dv, float* dqkv, int64_t n, int64_t hq,
             int64_t hkv, int64_t head_dim) {
            RLCPP_LAUNCH("merge_qkv", cuda::merge_qkv(dq, dk, dv, dqkv, n, hq, hkv, head_dim, stream(k)));
          },
      .attention_forward =
          [](const K& k, const float* q, const float* kk, const float* v, const int32_t* cu_seqlens, int64_t num_seqs,
             int64_t n, int64_t hq, int64_t hkv, int64_t d, float scale, float* out, float* lse) {
            check_head_dim("attention_forward", d);
            RLCPP_LAUNCH("attention_forward", cuda::attention_forward(q, kk, v, cu_seqlens, num_seqs, n, hq, hkv, d,
                                                                      scale, out, lse, stream(k)));
          },
      .attention_backward =
          [](const K& k, const float* dout, const float* q, const float* kk, const float* v, const float* out,
             const float* lse, const int32_t* cu_seqlens, int64_t num_seqs, int64_t n, int64_t hq, int64_t hkv,
             int64_t d, float scale, float* dq, float* dk, float* dv) {
            check_head_dim("attention_backward", d);
            RLCPP_LAUNCH("attention_backward",
                         cuda::attention_backward(dout, q, kk, v, out, lse, cu_seqlens, num_seqs, n, hq, hkv, d, scale,
                                                  dq, dk, dv, stream(k)));
          },
      .paged_kv_write =
          [](const K& k, const float* kk, const float* v, const int32_t* slot_mapping, int64_t n, int64_t row,
             void* k_cache, void* v_cache, DType cache_dtype) {
            RLCPP_LAUNCH("paged_kv_write", cuda::paged_kv_write(kk, v, slot_mapping, n, row, k_cache, v_cache,
                                                                cache_dtype, stream(k)));
          },
      .paged_attention =
          [](const K& k, const float* q, const void* k_cache, const void* v_cache, DType cache_dtype,
             const int32_t* query_seq, const int32_t* query_pos, const int32_t* block_indptr,
             const int32_t* block_indices, int64_t block_size, int64_t n, int64_t hq, int64_t hkv, int64_t d,
             float scale, float* out) {
            check_head_dim("paged_attention", d);
            RLCPP_LAUNCH("paged_attention",
                         cuda::paged_attention(q, k_cache, v_cache, cache_dtype, query_seq, query_pos, block_indptr,
                                               block_indices, block_size, n, hq, hkv, d, scale, out, stream(k)));
          },
      .swiglu_forward = [](const K& k, const float* gate_up, float* out, int64_t n,
                           int64_t f) { RLCPP_LAUNCH("swiglu_forward", cuda::swiglu_forward(gate_up, out, n, f, stream(k))); },
      .swiglu_backward =
          [](const K& k, const float* dout, const float* gate_up, float* dgate_up, float* act, int64_t n, int64_t f) {
            RLCPP_LAUNCH("swiglu_backward", cuda::swiglu_backward(dout, gate_up, dgate_up, n, f, stream(k)));
            if (act) RLCPP_LAUNCH("swiglu_backward", cuda::swiglu_forward(gate_up, act, n, f, stream(k)));
          },
      .logprob_forward =
          [](const K& k, const float* logits, const int32_t* targets, float temperature, float* logp, float* lse,
             float* entropy, int64_t n, int64_t v) {
            RLCPP_LAUNCH("logprob_forward",
                         cuda::logprob_forward(logits, targets, temperature, logp, lse, entropy, n, v, stream(k)));
          },
      .logprob_backward =
          [](const K& k, const float* dlogp, const float* dentropy, const float* logits, const int32_t* targets,
             float temperature, const float* lse, float* dlogits, int64_t n, int64_t v) {
            RLCPP_LAUNCH("logprob_backward", cuda::logprob_backward(dlogp, dentropy, logits, targets, temperature, lse,
                                                                    dlogits, n, v, stream(k)));
          },
      .logprob_truncated_forward = [](const K&, const float*, const int32_t*, float, const Truncation&, float*,
                                      float*, int64_t, int64_t) { not_here("logprob_truncated_forward"); },
      .logprob_truncated_backward = [](const K&, const float*, const float*, const int32_t*, float, const Truncation&,
                                       const float*, float*, int64_t, int64_t) { not_here("logprob_truncated_backward"); },
      .adamw_step =
          [](const K& k, float* param, const float* grad, float* m, float* v, int64_t n, float lr, float beta1,
             float beta2, float eps, float weight_decay, int64_t step) {
            RLCPP_LAUNCH("adamw_step", cuda::adamw_step(param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay,
                                                        step, stream(k)));
          },
  };
  return backend;
}

}  // namespace rlcpp::ops
