// The weights prepared for the products (docs/architecture.md "Execution": prepared once per policy version for the
// backend and dtype that uses them): the packed panels of the CPU's kernel (and of the batch-invariant CUDA one),
// biases rounded to the compute dtype, the OpenBLAS decode's rounded or dequantised copy, and a GPU engine's device
// copy. The training passes pack one layer at a time just before it runs (pack_layer); the engine prepares all of
// them at each sync (prepare_decode_weights, which the executor of the engine's device carries out:
// model/cpu_executor.cpp, model/cuda_executor.cpp).
#include "core/error.h"
#include "kernels/ops.h"
#include "model/transformer.h"
#include "model/transformer_weights.h"

namespace rlcpp {

void Transformer::run_pack_jobs(const ExecContext& ctx, const std::vector<PackJob>& jobs, bool transposed) const {
  // The matrices are packed side by side on the CPU's threads (each is a strided copy, ~0.1 ms for W1's largest);
  // on a device one after the other, each a kernel on the context's stream.
  executor_of(ctx).run_jobs(jobs.size(), [&](size_t j) {
    if (transposed)
      ops::pack_weight_transposed(ctx, *jobs[j].weight, *jobs[j].out, jobs[j].format);
    else
      ops::pack_weight(ctx, *jobs[j].weight, *jobs[j].out, jobs[j].format);
  });
}

namespace {

// The forward's panels are in the numerics' formats (the Linear layers possibly quantised, lm_head in the
// compute dtype); the backward's transposes are the master weights in the backward's math (Executor::
// backward_math: bf16 for a bf16 model, else fp32).
DType linear_pack_format(const ExecContext& ctx, const ModelNumerics& n, bool transposed) {
  return transposed ? executor_of(ctx).backward_math(n.compute) : n.linear_weights;
}

// A forward layer's biases rounded to the compute dtype (fp32, and the backward, use the parameters' own).
void round_biases(const ExecContext& ctx, const Tensor& qkv_b, const Tensor& o_b, const ModelNumerics& n,
                  bool transposed, PackedWeights::Layer& out) {
  const bool round = !transposed && n.compute != DType::kF32;
  auto rounded = [&](const Tensor& b) {
    if (!round || !b.defined()) return Tensor();
    Tensor r = ctx.copy_of(b);
    ops::round_to(ctx, r, n.compute);
    return r;
  };
  out.qkv_b = rounded(qkv_b);
  out.o_b = rounded(o_b);
}

}  // namespace

void Transformer::pack_layer(const ExecContext& ctx, const LayerWeights& W, PackedWeights::Layer& out,
                             bool transposed) const {
  const DType f = linear_pack_format(ctx, numerics_, transposed);
  run_pack_jobs(ctx,
                {{&W.qkv_w, &out.qkv, f}, {&W.o_w, &out.o, f}, {&W.gate_up, &out.gate_up, f}, {&W.down, &out.down, f}},
                transposed);
  round_biases(ctx, W.qkv_b, W.o_b, numerics_, transposed, out);
}

void Transformer::pack_weights(const ExecContext& ctx, const ParameterStore& params, PackedWeights& out,
                               bool transposed) const {
  const Weights w = views(params);
  out.layers.resize(w.layers.size());
  out.for_blas = false;
  out.blas = ParameterStore();
  const DType linear_format = linear_pack_format(ctx, numerics_, transposed);
  std::vector<PackJob> jobs;
  for (size_t l = 0; l < w.layers.size(); ++l) {
    jobs.push_back({&w.layers[l].qkv_w, &out.layers[l].qkv, linear_format});
    jobs.push_back({&w.layers[l].o_w, &out.layers[l].o, linear_format});
    jobs.push_back({&w.layers[l].gate_up, &out.layers[l].gate_up, linear_format});
    jobs.push_back({&w.layers[l].down, &out.layers[l].down, linear_format});
  }
  if (!config_.value_head)  // a critic has a score head
    jobs.push_back({&w.lm_head, &out.lm_head, transposed ? linear_format : numerics_.compute_format()});
  run_pack_jobs(ctx, jobs, transposed);
  for (size_t l = 0; l < w.layers.size(); ++l)
    round_biases(ctx, w.layers[l].qkv_b, w.layers[l].o_b, numerics_, transposed, out.layers[l]);
  out.source = params.flat().raw();
  out.transposed = transposed;
}

void Transformer::prepare_decode_weights(const ExecContext& ctx, const ParameterStore& params, PackedWeights& out,
                                         bool self_contained) const {
  RLCPP_CHECK(params.flat().on_host() || ctx.holds(params.flat()),
              "prepare_decode_weights: the parameters must be on the host or on " << ctx.name() << " (they are on "
                  << device_name(params.flat().device()) << ")");
  executor_of(ctx).prepare_decode_weights(*this, ctx, params, out);
  out.embed = out.final_norm = Tensor();
  for (PackedWeights::Layer& l : out.layers) l.ln1 = l.ln2 = l.q_norm = l.k_norm = Tensor();
  // A prepared copy (blas: a device's, a rounded or dequantised one) is whole already; the fp32 OpenBLAS decode's
  // weights are the parameters themselves.
  if (!self_contained || out.for_blas || out.blas.flat().defined()) return;
  // The rest of what the panels' decode reads. The table in the compute dtype's storage: its rows are what the
  // decode's embedding rounded to that dtype gives (round to nearest even either way).
  const Weights w = views(params);
  out.embed = ctx.empty(w.embed.shape(), storage_dtype(numerics_.compute));
  ops::convert(ctx, w.embed, out.embed);
  out.final_norm = ctx.copy_of(w.final_norm);
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& W = w.layers[l];
    PackedWeights::Layer& P = out.layers[l];
    P.ln1 = ctx.copy_of(W.ln1);
    P.ln2 = ctx.copy_of(W.ln2);
    if (W.q_norm.defined()) P.q_norm = ctx.copy_of(W.q_norm);
    if (W.k_norm.defined()) P.k_norm = ctx.copy_of(W.k_norm);
    // fp32 reads the parameters' biases (round_biases left them undefined): copies of them.
    if (W.qkv_b.defined() && !P.qkv_b.defined()) P.qkv_b = ctx.copy_of(W.qkv_b);
    if (W.o_b.defined() && !P.o_b.defined()) P.o_b = ctx.copy_of(W.o_b);
  }
}

Transformer::Weights Transformer::prepared_views(const PackedWeights& packed) const {
  Weights w;
  w.embed = packed.embed;
  w.final_norm = packed.final_norm;
  w.layers.resize(packed.layers.size());
  for (size_t l = 0; l < packed.layers.size(); ++l) {
    const PackedWeights::Layer& P = packed.layers[l];
    LayerWeights& W = w.layers[l];
    W.ln1 = P.ln1;
    W.ln2 = P.ln2;
    W.q_norm = P.q_norm;
    W.k_norm = P.k_norm;
    W.qkv_b = P.qkv_b;
    W.o_b = P.o_b;
  }
  return w;  // the products' weights are the panels
}

}  // namespace rlcpp
