// A backend: one device's raw kernels for every op of ops.h, behind one table whose signatures are the same on
// every backend (ggml's backend interface, CTranslate2's primitives<Device>). ops.cpp checks an op's arguments
// once and calls the table of its context's backend; a backend says which (op, dtype) pairs it supports and
// ops.cpp refuses any other pair, naming both. The backends: "cpu" (kernels/cpu/), "cuda" (kernels/cuda/, in a CUDA
// build) and "reference" (kernels/reference/: the readable definition of each op, llm.c's naive loops, which the
// op matrix test holds the others to). Adding a device is a folder of kernels with one backend_<name>.cpp filling a
// Backend, and one line in backend_registry.cpp; adding a dtype is its cases in the kernels and in `supports`.
//
// Raw kernels take device (or host) pointers, sizes and the KernelContext; ops.cpp has checked shapes, dtypes and,
// on a backend that reads host memory, the contents of index tensors. They throw rlcpp::Error on a device error
// (a CUDA backend checks each launch's status and names the op). Shapes are ops.h's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/exec_context.h"
#include "core/tensor.h"
#include "kernels/truncation.h"

namespace rlcpp::ops {

// Every op a backend implements (ops.h documents each).
enum class Op {
  kMatmul,
  kPackWeight,
  kPackWeightTransposed,
  kMatmulPacked,
  kRoundTo,
  kConvert,
  kLinearWeightGrad,
  kAddBias,
  kBiasBackward,
  kAddInplace,
  kScaleInplace,
  kEmbeddingForward,
  kEmbeddingBackward,
  kRmsnormForward,
  kRmsnormBackward,
  kRopeForward,
  kRopeBackward,
  kRopeSplitQkv,
  kRopeBackwardMergeQkv,
  kSplitQkv,
  kMergeQkv,
  kAttentionForward,
  kAttentionBackward,
  kPagedKvWrite,
  kPagedAttention,
  kSwigluForward,
  kSwigluBackward,
  kLogprobForward,
  kLogprobBackward,
  kLogprobTruncatedForward,
  kLogprobTruncatedBackward,
  kAdamwStep,
  kL2Norm,
  kAllFinite,
  kKeyedChecksum,
  kCount
};
const char* op_name(Op op);

// What a raw kernel gets besides its operands: the context's stream and cuBLAS handle (null on the host).
struct KernelContext {
  void* stream = nullptr;
  void* blas = nullptr;
  int device_index = 0;
};

// The dtype an op is asked in, which `supports` answers for: a product's math (matmul, linear_weight_grad), a
// packed weight's format (pack_weight, matmul_packed), the dtype rounded to (round_to), each of the two dtypes a
// convert reads and writes (asked once for each), the KV cache's (paged ops), the table's (embedding_forward);
// every other op, its float operands' (F32 today).
struct Backend {
  const char* name;
  Device device;            // where the tensors of its ops live
  bool reads_host_memory;   // ops.cpp range-checks index tensors before calling it
  bool (*supports)(Op op, DType dtype);

  void (*matmul)(const KernelContext&, const float* a, bool trans_a, const float* b, bool trans_b, float* c,
                 int64_t m, int64_t n, int64_t k, float alpha, float beta, DType math);
  // panels (ceil(n/16), depth, 16) of `format`, scales (ceil(n/16)*16) for the quantised formats, from w of
  // `source` (F32; BF16 on a backend that reads host memory: widened exactly as it is read).
  void (*pack_weight)(const KernelContext&, const void* w, DType source, void* panels, float* scales, int64_t n,
                      int64_t k, int64_t depth, DType format);
  // panels (ceil(k/16), depth of n, 16) of `format` (F32 or BF16): the panels of pack_weight(w^T, format).
  void (*pack_weight_transposed)(const KernelContext&, const void* w, DType source, void* panels, int64_t n,
                                 int64_t k, DType format);
  void (*matmul_packed)(const KernelContext&, const float* x, const void* panels, const float* scales, DType format,
                        float* y, int64_t m, int64_t n, int64_t k, int64_t depth, const float* residual, DType round);
  void (*round_to)(const KernelContext&, float* x, int64_t n, DType dtype);
  // n elements of src (F32, BF16 or F16) into dst of `to`: widened exactly, rounded to nearest even, or copied.
  void (*convert)(const KernelContext&, const void* src, DType from, void* dst, DType to, int64_t n);
  void (*linear_weight_grad)(const KernelContext&, const float* dy, const float* x, float* dw, int64_t rows,
                             int64_t out, int64_t in, DType math);

  void (*add_bias)(const KernelContext&, float* y, const float* bias, int64_t rows, int64_t cols);
  void (*bias_backward)(const KernelContext&, const float* dy, float* dbias, int64_t rows, int64_t cols);
  void (*add_inplace)(const KernelContext&, float* x, const float* y, int64_t n);
  void (*scale_inplace)(const KernelContext&, float* x, float s, int64_t n);
  double (*l2_norm)(const KernelContext&, const float* x, int64_t n);
  bool (*all_finite)(const KernelContext&, const float* x, int64_t n);
  uint64_t (*keyed_checksum)(const KernelContext&, const float* x, int64_t n);

  // table (vocab, c) of `table_dtype` (F32, or an engine's BF16/F16 copy); out F32, the rows widened exactly.
  void (*embedding_forward)(const KernelContext&, const void* table, DType table_dtype, const int32_t* ids,
                            float* out, int64_t n, int64_t vocab, int64_t c);
  void (*embedding_backward)(const KernelContext&, const float* dout, const int32_t* ids, float* dtable, int64_t n,
                             int64_t vocab, int64_t c);

  void (*rmsnorm_forward)(const KernelContext&, const float* x, const float* weight, float eps, float* out,
                          float* rstd, int64_t n, int64_t c, DType round);
  void (*rmsnorm_backward)(const KernelContext&, const float* dout, const float* x, const float* weight,
                           const float* rstd, float* dx, float* dweight, int64_t n, int64_t c);

  void (*rope_forward)(const KernelContext&, float* x, const int32_t* positions, const float* table, int64_t n,
                       int64_t heads, int64_t head_dim);
  void (*rope_backward)(const KernelContext&, float* dx, const int32_t* positions, const float* table, int64_t n,
                        int64_t heads, int64_t head_dim);
  void (*rope_split_qkv)(const KernelContext&, const float* qkv, const int32_t* positions, const float* table,
                         float* q, float* k, float* v, int64_t n, int64_t hq, int64_t hkv, int64_t head_dim);
  void (*rope_backward_merge_qkv)(const KernelContext&, const float* dq, const float* dk, const float* dv,
                                  const int32_t* positions, const float* table, float* dqkv, int64_t n, int64_t hq,
                                  int64_t hkv, int64_t head_dim);
  void (*split_qkv)(const KernelContext&, const float* qkv, float* q, float* k, float* v, int64_t n, int64_t hq,
                    int64_t hkv, int64_t head_dim);
  void (*merge_qkv)(const KernelContext&, const float* dq, const float* dk, const float* dv, float* dqkv, int64_t n,
                    int64_t hq, int64_t hkv, int64_t head_dim);

  void (*attention_forward)(const KernelContext&, const float* q, const float* k, const float* v,
                            const int32_t* cu_seqlens, int64_t num_seqs, int64_t n, int64_t hq, int64_t hkv,
                            int64_t d, float scale, float* out, float* lse);
  void (*attention_backward)(const KernelContext&, const float* dout, const float* q, const float* k,
                             const float* v, const float* out, const float* lse, const int32_t* cu_seqlens,
                             int64_t num_seqs, int64_t n, int64_t hq, int64_t hkv, int64_t d, float scale, float* dq,
                             float* dk, float* dv);
  void (*paged_kv_write)(const KernelContext&, const float* k, const float* v, const int32_t* slot_mapping,
                         int64_t n, int64_t row, void* k_cache, void* v_cache, DType cache_dtype);
  void (*paged_attention)(const KernelContext&, const float* q, const void* k_cache, const void* v_cache,
                          DType cache_dtype, const int32_t* query_seq, const int32_t* query_pos,
                          const int32_t* block_indptr, const int32_t* block_indices, int64_t block_size, int64_t n,
                          int64_t hq, int64_t hkv, int64_t d, float scale, float* out);

  void (*swiglu_forward)(const KernelContext&, const float* gate_up, float* out, int64_t n, int64_t f);
  // act (n,f), when not null, gets swiglu_forward's output as well.
  void (*swiglu_backward)(const KernelContext&, const float* dout, const float* gate_up, float* dgate_up,
                          float* act, int64_t n, int64_t f);

  void (*logprob_forward)(const KernelContext&, const float* logits, const int32_t* targets, float temperature,
                          float* logp, float* lse, float* entropy, int64_t n, int64_t v);
  void (*logprob_backward)(const KernelContext&, const float* dlogp, const float* dentropy, const float* logits,
                           const int32_t* targets, float temperature, const float* lse, float* dlogits, int64_t n,
                           int64_t v);
  void (*logprob_truncated_forward)(const KernelContext&, const float* logits, const int32_t* targets,
                                    float temperature, const Truncation& t, float* logp, float* lse, int64_t n,
                                    int64_t v);
  void (*logprob_truncated_backward)(const KernelContext&, const float* dlogp, const float* logits,
                                     const int32_t* targets, float temperature, const Truncation& t,
                                     const float* lse, float* dlogits, int64_t n, int64_t v);

  void (*adamw_step)(const KernelContext&, float* param, const float* grad, float* m, float* v, int64_t n, float lr,
                     float beta1, float beta2, float eps, float weight_decay, int64_t step);
};

// The backend ops run on for `ctx` (its backend name: "cpu" and "reference" on the host, "cuda" on a GPU).
const Backend& backend_of(const ExecContext& ctx);
// Every backend this build has, by name (the op matrix test runs each that a context can be made for).
std::vector<std::string> backend_names();
// The backend of that name; an error naming the ones there are otherwise.
const Backend& backend_named(const std::string& name);

}  // namespace rlcpp::ops
