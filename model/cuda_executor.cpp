#include "model/cuda_executor.h"

#include <algorithm>
#include <utility>

#include "kernels/ops.h"
#include "model/transformer.h"

namespace rlcpp {

std::vector<RowChunk> CudaExecutor::plan_chunks(const ExecContext& ctx, const std::vector<int32_t>& cu_seqlens,
                                                int64_t num_tokens) const {
  std::vector<RowChunk> chunks = plan_row_chunks(cu_seqlens, std::max<int64_t>(num_tokens, 1));
  for (RowChunk& chunk : chunks) chunk.cu_seqlens = ctx.copy_of(chunk.cu_seqlens);
  return chunks;
}

void CudaExecutor::run_forward_chunks(int64_t num_chunks, const std::function<void(int64_t, int)>& body) const {
  for (int64_t c = 0; c < num_chunks; ++c) body(c, 0);
}

void CudaExecutor::run_backward_chunks(const ExecContext&, int64_t num_chunks, std::vector<ChunkScratch>&,
                                       float* layer_grads, int64_t,
                                       const std::function<void(int64_t, int, float*)>& body) const {
  for (int64_t c = 0; c < num_chunks; ++c) body(c, 0, layer_grads);  // straight into the gradients
}

void CudaExecutor::run_jobs(size_t n, const std::function<void(size_t)>& job) const {
  for (size_t j = 0; j < n; ++j) job(j);  // each a kernel on the context's stream, in turn
}

DType CudaExecutor::product_math(DType compute) const {
  return compute == DType::kBF16   ? DType::kBF16
         : compute == DType::kF16  ? DType::kF16
         : compute == DType::kTF32 ? DType::kTF32
                                   : DType::kF32;
}

void CudaExecutor::run_cached_step(const CachedStep& step, int64_t, int64_t,
                                   const std::function<void(int64_t, int64_t)>& run_rows) const {
  run_rows(0, static_cast<int64_t>(step.tokens.size()));
}

void CudaExecutor::prepare_decode_weights(const Transformer& model, const ExecContext& ctx,
                                          const ParameterStore& params, PackedWeights& out) const {
  const ModelNumerics& numerics = model.numerics();
  // The fp32 parameters on the device (the buffer kept from one policy version to the next).
  if (out.blas.flat().defined() && out.blas.flat().device() == ctx.device() && out.blas.numel() == params.numel())
    ctx.copy(params.flat(), out.blas.flat());
  else
    out.blas = params.on(ctx);
  if (numerics.batch_invariant) {
    // The CPU's panels, packed on the device from the fp32 values (a quantised format through the host), for
    // the packed kernel's chains: the bits of the CPU's decode and of this device's training forward.
    const ParameterStore device = out.blas;
    model.pack_weights(ctx, device, out);
    out.blas = device;
    ops::round_to(ctx, out.blas.flat(), numerics.compute);  // embeddings and norms, rounded as the body rounds them
  } else {
    out.layers.clear();
    out.lm_head = ops::PackedWeight();
    out.for_blas = true;
    if (is_quantized(numerics.linear_weights)) {
      // A quantised format's values come from its CPU pack and unpack (the host's prepared copy).
      ParameterStore on_host;
      PackedWeights host;
      model.prepare_decode_weights(ExecContext::cpu(), params_on(ExecContext::cpu(), params, on_host), host);
      ctx.copy(host.blas.flat(), out.blas.flat());
    } else {
      ops::round_to(ctx, out.blas.flat(), numerics.compute);  // round_to on the device gives the CPU's bits
    }
  }
  out.source = params.flat().raw();
  out.transposed = false;
  resident(ctx, model.rope_, out.rope);
}

Tensor CudaExecutor::host_floats(const ExecContext& ctx, const float* values, Shape shape) const {
  return ctx.copy_of(Tensor::borrow(const_cast<float*>(values), std::move(shape)));
}

const Tensor& CudaExecutor::resident(const ExecContext& ctx, const Tensor& host, Tensor& copy) const {
  if (!copy.defined() || copy.device() != ctx.device()) copy = ctx.copy_of(host);
  return copy;
}

}  // namespace rlcpp
