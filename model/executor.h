// How a model pass runs on its context's device (docs/architecture.md "Execution"). The Transformer's math —
// the layer body, forward, backward, forward_cached (transformer.cpp, transformer_layers.cpp) — reads the same on
// every device and never asks which device it is on; an executor owns what differs:
//   - how a training pass's rows are cut into chunks and spread over threads (the CPU's cache-sized chunks side
//     by side on OpenMP threads, summing per-thread gradients in thread order; a GPU's one chunk of all rows),
//   - whether the training products run through the packed (batch-invariant) kernel,
//   - how a cached step's rows are split between threads,
//   - how host arrays and the model's constants reach the device, and how the decode weights are prepared per
//     policy version (the CPU's panels or OpenBLAS copy; a GPU's device copy).
// executor_of(ctx) is the one place in model/ that looks at which device a context is on. Adding a device is
// its kernels (kernels/<device>/ and a backend), an ExecContext for it, and one executor here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/exec_context.h"
#include "core/tensor.h"
#include "model/numerics.h"
#include "model/row_chunks.h"

namespace rlcpp {

class Transformer;
class ParameterStore;
struct PackedWeights;
struct ChunkScratch;
struct CachedStep;

class Executor {
 public:
  virtual ~Executor() = default;
  virtual const char* name() const = 0;

  // ---- training passes
  // The row chunks a training pass of `num_tokens` rows (cu_seqlens of the whole batch) runs its layers in, each
  // chunk's cu_seqlens on ctx's device.
  virtual std::vector<RowChunk> plan_chunks(const ExecContext& ctx, const std::vector<int32_t>& cu_seqlens,
                                            int64_t num_tokens) const = 0;
  // How many threads a layer's chunks are spread over (one ChunkScratch each).
  virtual int chunk_threads() const = 0;
  // body(chunk, thread) for every chunk of one layer's forward.
  virtual void run_forward_chunks(int64_t num_chunks, const std::function<void(int64_t, int)>& body) const = 0;
  // body(chunk, thread, grads) for every chunk of one layer's backward, where `grads` is the `span` floats that
  // thread's chunks accumulate the layer's parameter gradients into; when the executor gives threads buffers of
  // their own (scratch[t].layer_grads, from ctx) it adds them into layer_grads in thread order afterwards.
  virtual void run_backward_chunks(const ExecContext& ctx, int64_t num_chunks, std::vector<ChunkScratch>& scratch,
                                   float* layer_grads, int64_t span,
                                   const std::function<void(int64_t, int, float*)>& body) const = 0;
  // Whether the training forward multiplies through the packed kernel (else ops::matmul: cuBLAS), and whether
  // the backward's input gradients multiply by the weights packed transposed.
  virtual bool packs_forward(const ModelNumerics& numerics) const = 0;
  virtual bool packs_backward() const = 0;
  // job(i) for i in [0, n): independent jobs (packing matrices), side by side where the executor has threads.
  virtual void run_jobs(size_t n, const std::function<void(size_t)>& job) const = 0;

  // The arithmetic of a product in ops::matmul (no packed weights) for a role computing in `compute`.
  virtual DType product_math(DType compute) const = 0;
  // The arithmetic of the backward's products (the input gradients' and the weight gradients') for a model
  // computing in `compute`: a bf16 model's multiply bf16 operands with fp32 accumulation on every executor, as
  // PyTorch's autocast does (the CPU's packed panels and weight gradient, CUDA's tensor cores).
  virtual DType backward_math(DType compute) const = 0;

  // ---- the cached decode
  // Runs rows [0, N) of a cached step, as run_rows(r0, r1) over ranges that each own whole sequences: one range,
  // or (CPU) one per thread side by side when the step is large enough to gain by it. `weight_bytes`: what one
  // pass of all layers and the head reads; `macs`: N times the model's parameters.
  virtual void run_cached_step(const CachedStep& step, int64_t macs, int64_t weight_bytes,
                               const std::function<void(int64_t, int64_t)>& run_rows) const = 0;
  // The decode weights of `params` for forward_cached, prepared per policy version (Transformer::
  // prepare_decode_weights documents them).
  virtual void prepare_decode_weights(const Transformer& model, const ExecContext& ctx, const ParameterStore& params,
                                      PackedWeights& out) const = 0;

  // ---- data movement
  // n host floats as a tensor on ctx's device: borrowed where the device reads host memory, else a copy.
  virtual Tensor host_floats(const ExecContext& ctx, const float* values, Shape shape) const = 0;
  // A host constant (the RoPE table) on ctx's device: itself where the device reads host memory, else `copy`,
  // made once and kept by the caller.
  virtual const Tensor& resident(const ExecContext& ctx, const Tensor& host, Tensor& copy) const = 0;
};

// The executor of ctx's device.
const Executor& executor_of(const ExecContext& ctx);
// The executor a role on `device` will run with (a config's checks, before any context is made).
const Executor& executor_for(Device device);

}  // namespace rlcpp
