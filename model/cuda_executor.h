// The CUDA executor (model/executor.h): a training pass runs each layer over all its rows at once (one chunk, one
// thread: the parallelism is the GPU's), through the packed kernel in batch-invariant numerics and through cuBLAS
// otherwise; a cached step is one range; the decode weights are a device copy of the parameters as the numerics
// compute with them (and the packed panels in batch-invariant numerics), with the RoPE table there.
#pragma once

#include "model/executor.h"

namespace rlcpp {

class CudaExecutor final : public Executor {
 public:
  const char* name() const override { return "cuda"; }
  std::vector<RowChunk> plan_chunks(const ExecContext& ctx, const std::vector<int32_t>& cu_seqlens,
                                    int64_t num_tokens) const override;
  int chunk_threads() const override { return 1; }
  void run_forward_chunks(int64_t num_chunks, const std::function<void(int64_t, int)>& body) const override;
  void run_backward_chunks(const ExecContext& ctx, int64_t num_chunks, std::vector<ChunkScratch>& scratch,
                           float* layer_grads, int64_t span,
                           const std::function<void(int64_t, int, float*)>& body) const override;
  bool packs_forward(const ModelNumerics& numerics) const override { return numerics.batch_invariant; }
  bool packs_backward() const override { return false; }
  void run_jobs(size_t n, const std::function<void(size_t)>& job) const override;
  // A bf16 or fp16 role multiplies operands of its dtype on tensor cores, accumulating in fp32 (as the CPU's
  // packed bf16/fp16 panels do), a tf32 role its fp32 values as TF32 operands.
  DType product_math(DType compute) const override;
  DType backward_math(DType compute) const override { return product_math(compute); }
  void run_cached_step(const CachedStep& step, int64_t macs, int64_t weight_bytes,
                       const std::function<void(int64_t, int64_t)>& run_rows) const override;
  void prepare_decode_weights(const Transformer& model, const ExecContext& ctx, const ParameterStore& params,
                              PackedWeights& out) const override;
  Tensor host_floats(const ExecContext& ctx, const float* values, Shape shape) const override;
  const Tensor& resident(const ExecContext& ctx, const Tensor& host, Tensor& copy) const override;
};

}  // namespace rlcpp
