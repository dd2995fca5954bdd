// The CPU executor (model/executor.h): the training passes' layers run chunk by chunk, the chunks side by side on
// the OpenMP threads; every product goes through the packed kernel; a large cached step is split between threads
// by sequence; the decode weights are the packed panels (batch-invariant) or OpenBLAS's prepared copy.
#pragma once

#include "model/executor.h"

namespace rlcpp {

class CpuExecutor final : public Executor {
 public:
  const char* name() const override { return "cpu"; }
  std::vector<RowChunk> plan_chunks(const ExecContext& ctx, const std::vector<int32_t>& cu_seqlens,
                                    int64_t num_tokens) const override;
  int chunk_threads() const override;
  void run_forward_chunks(int64_t num_chunks, const std::function<void(int64_t, int)>& body) const override;
  void run_backward_chunks(const ExecContext& ctx, int64_t num_chunks, std::vector<ChunkScratch>& scratch,
                           float* layer_grads, int64_t span,
                           const std::function<void(int64_t, int, float*)>& body) const override;
  bool packs_forward(const ModelNumerics&) const override { return true; }
  bool packs_backward() const override { return true; }
  void run_jobs(size_t n, const std::function<void(size_t)>& job) const override;
  // OpenBLAS (the not-batch-invariant decode) multiplies its prepared weights, already rounded, in fp32.
  DType product_math(DType) const override { return DType::kF32; }
  // bf16: AVX512-BF16 dot products (vdpbf16ps) where the CPU has them. fp16 (no such instruction) stays fp32.
  DType backward_math(DType compute) const override {
    return compute == DType::kBF16 ? DType::kBF16 : DType::kF32;
  }
  void run_cached_step(const CachedStep& step, int64_t macs, int64_t weight_bytes,
                       const std::function<void(int64_t, int64_t)>& run_rows) const override;
  void prepare_decode_weights(const Transformer& model, const ExecContext& ctx, const ParameterStore& params,
                              PackedWeights& out) const override;
  Tensor host_floats(const ExecContext& ctx, const float* values, Shape shape) const override;
  const Tensor& resident(const ExecContext& ctx, const Tensor& host, Tensor& copy) const override;
};

}  // namespace rlcpp
