#include "model/cpu_executor.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "core/parallel_errors.h"
#include "kernels/ops.h"
#include "model/transformer.h"
#include "model/transformer_weights.h"

namespace rlcpp {

namespace {

// Rows x parameters (about the multiply-adds of a cached forward) from which a cached step splits its rows
// between threads: below, one fork and join costs more than the second thread gains.
constexpr int64_t kRowSplitMinMacs = int64_t{1} << 21;
// Each row range of a split step reads every weight itself, so splitting multiplies the weight bytes a step
// reads by the threads. That is free while the weights stay in cache (W1: 3 MB), or when each range has rows
// enough to keep its core busy between weight reads (prefill); a decode of a few rows of a model read from
// DRAM (W2: 1-2 GB a step) is bandwidth-bound, and is faster with the threads sharing each product's columns.
constexpr int64_t kCacheResidentWeightBytes = int64_t{32} << 20;
constexpr int64_t kRowSplitMinRowsPerRange = 64;

// The threads a parallel region may use here: all of them, or one inside another region.
int available_threads() { return omp_in_parallel() ? 1 : std::max(1, omp_get_max_threads()); }

// Cuts rows [0, N) of a cached step into at most `parts` ranges of about equal rows, cutting only where one
// sequence's rows end and the next begin. Returns {0, cut.., N}; just {0, N} when some sequence's rows are not
// contiguous or name no sequence of the block tables (the ops then report it).
std::vector<int64_t> split_at_sequences(const CachedStep& step, int64_t parts) {
  const std::vector<int32_t>& seq = step.query_seq;
  const int64_t n = static_cast<int64_t>(seq.size());
  const int64_t num_seqs = static_cast<int64_t>(step.block_indptr.size()) - 1;
  std::vector<char> done(static_cast<size_t>(std::max<int64_t>(num_seqs, 0)), 0);
  for (int64_t i = 0; i < n; ++i) {
    if (seq[i] < 0 || seq[i] >= num_seqs) return {0, n};
    if (i > 0 && seq[i] != seq[i - 1]) {
      done[static_cast<size_t>(seq[i - 1])] = 1;
      if (done[static_cast<size_t>(seq[i])]) return {0, n};
    }
  }
  std::vector<int64_t> cuts{0};
  for (int64_t t = 1; t < parts; ++t) {
    int64_t i = std::max(n * t / parts, cuts.back() + 1);
    while (i < n && seq[i] == seq[i - 1]) ++i;
    if (i >= n) break;
    cuts.push_back(i);
  }
  cuts.push_back(n);
  return cuts;
}

}  // namespace

std::vector<RowChunk> CpuExecutor::plan_chunks(const ExecContext&, const std::vector<int32_t>& cu_seqlens,
                                               int64_t) const {
  return plan_row_chunks(cu_seqlens, kChunkRows);
}

int CpuExecutor::chunk_threads() const { return available_threads(); }

void CpuExecutor::run_forward_chunks(int64_t num_chunks, const std::function<void(int64_t, int)>& body) const {
  // The chunks in contiguous shares (schedule static: which thread takes which chunk depends only on the counts).
  // The first exception a body throws is rethrown after the region (a worksharing loop cannot be left early).
  const int threads = available_threads();
  ParallelErrors errors(static_cast<size_t>(threads));
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t c = 0; c < num_chunks; ++c) {
    const int t = omp_get_thread_num();
    errors.run(static_cast<size_t>(t), [&] { body(c, t); });
  }
  errors.rethrow_first();
}

void CpuExecutor::run_backward_chunks(const ExecContext& ctx, int64_t num_chunks, std::vector<ChunkScratch>& scratch,
                                      float* layer_grads, int64_t span,
                                      const std::function<void(int64_t, int, float*)>& body) const {
  // Each thread accumulates its chunks' gradients of the layer in its own buffer, the chunks in contiguous
  // shares; then, after a barrier and in the same region, the threads sum the buffers into layer_grads, each a
  // share of the entries, in thread order: the sum's order depends only on the batch and the thread count.
  const int threads = std::min(available_threads(), static_cast<int>(scratch.size()));
  for (int t = 0; t < threads; ++t) {
    Tensor& g = scratch[static_cast<size_t>(t)].layer_grads;
    if (!g.defined() || g.numel() != span) g = ctx.empty({span});
  }
  ParallelErrors errors(static_cast<size_t>(threads));
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    float* mine = scratch[static_cast<size_t>(t)].layer_grads.data<float>();
    std::memset(mine, 0, static_cast<size_t>(span) * sizeof(float));
#pragma omp for schedule(static)
    for (int64_t c = 0; c < num_chunks; ++c) errors.run(static_cast<size_t>(t), [&] { body(c, t, mine); });
    const int team = omp_get_num_threads();
#pragma omp for schedule(static)
    for (int64_t i = 0; i < span; ++i) {
      float sum = scratch[0].layer_grads.data<float>()[i];
      for (int u = 1; u < team; ++u) sum += scratch[static_cast<size_t>(u)].layer_grads.data<float>()[i];
      layer_grads[i] += sum;
    }
  }
  errors.rethrow_first();
}

void CpuExecutor::run_jobs(size_t n, const std::function<void(size_t)>& job) const {
  ParallelErrors errors(n);  // one slot per job
#pragma omp parallel for schedule(dynamic) if (!omp_in_parallel())
  for (size_t j = 0; j < n; ++j) errors.run(j, [&] { job(j); });
  errors.rethrow_first();
}

void CpuExecutor::run_cached_step(const CachedStep& step, int64_t macs, int64_t weight_bytes,
                                  const std::function<void(int64_t, int64_t)>& run_rows) const {
  // A large enough step runs as one range per thread, split between sequences: a range writes and reads only
  // its own sequences' cache blocks, so the ranges run side by side through all layers with one fork and one
  // join per step (op by op, the second thread would wait at ~6 joins per layer and the element-wise ops would
  // run on one thread). A step of one sequence, a small one, or a few rows of a large model (see
  // kCacheResidentWeightBytes) runs as one range with each op parallel inside.
  const int64_t n = static_cast<int64_t>(step.tokens.size());
  const int64_t threads = available_threads();
  const bool split = macs >= kRowSplitMinMacs &&
                     (weight_bytes <= kCacheResidentWeightBytes || n >= kRowSplitMinRowsPerRange * threads);
  const std::vector<int64_t> cuts = split ? split_at_sequences(step, threads) : std::vector<int64_t>{0, n};
  const int64_t parts = static_cast<int64_t>(cuts.size()) - 1;
  if (parts <= 1) {
    run_rows(0, n);
    return;
  }
  ParallelErrors errors(static_cast<size_t>(parts));
#pragma omp parallel for num_threads(static_cast<int>(parts)) schedule(static, 1)
  for (int64_t t = 0; t < parts; ++t) errors.run(static_cast<size_t>(t), [&] { run_rows(cuts[t], cuts[t + 1]); });
  errors.rethrow_first();
}

void CpuExecutor::prepare_decode_weights(const Transformer& model, const ExecContext& ctx,
                                         const ParameterStore& params, PackedWeights& out) const {
  const ModelNumerics& numerics = model.numerics();
  if (numerics.batch_invariant) {
    model.pack_weights(ctx, params, out);
    return;
  }
  out.layers.clear();
  out.lm_head = ops::PackedWeight();
  out.for_blas = true;
  out.transposed = false;
  out.source = params.flat().raw();
  if (numerics.compute == DType::kF32 && !is_quantized(numerics.linear_weights) && params.dtype() == DType::kF32) {
    out.blas = ParameterStore();  // fp32: the parameters themselves
    return;
  }
  // Every parameter as these numerics compute with it: the Linear matrices through their packed format and
  // back (rounded or dequantised, the values the panels would hold), the rest rounded to the compute dtype.
  // Parameters held in bf16 are widened first (OpenBLAS multiplies fp32).
  ParameterStore prepared = params.converted(ctx, DType::kF32);
  ops::round_to(ctx, prepared.flat(), numerics.compute);
  const Transformer::Weights src = model.views(params);
  Transformer::Weights dst = model.views(prepared);
  ops::PackedWeight scratch;
  for (size_t l = 0; l < src.layers.size(); ++l) {
    const std::pair<const Tensor*, Tensor*> mats[] = {{&src.layers[l].qkv_w, &dst.layers[l].qkv_w},
                                                      {&src.layers[l].o_w, &dst.layers[l].o_w},
                                                      {&src.layers[l].gate_up, &dst.layers[l].gate_up},
                                                      {&src.layers[l].down, &dst.layers[l].down}};
    for (const auto& [from, to] : mats) {
      ops::pack_weight(ctx, *from, scratch, numerics.linear_weights);
      const Tensor values = ops::unpack_weight(ctx, scratch);
      std::memcpy(to->data<float>(), values.data<float>(), values.nbytes());
    }
  }
  out.blas = std::move(prepared);
}

Tensor CpuExecutor::host_floats(const ExecContext&, const float* values, Shape shape) const {
  return Tensor::borrow(const_cast<float*>(values), std::move(shape));
}

const Tensor& CpuExecutor::resident(const ExecContext&, const Tensor& host, Tensor&) const { return host; }

}  // namespace rlcpp
