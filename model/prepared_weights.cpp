// The weights prepared for the products (docs/architecture.md "Execution": prepared once per policy version for the
// backend and dtype that uses them): the packed panels of the CPU's kernel (and of the batch-invariant CUDA one),
// biases rounded to the compute dtype, the OpenBLAS decode's rounded or dequantised copy, and a GPU engine's device
// copy. The training passes pack one layer at a time just before it runs (pack_layer); the engine prepares all of
// them at each sync (prepare_decode_weights).
#include <omp.h>

#include <cstring>
#include <utility>

#include "core/error.h"
#include "core/parallel_errors.h"
#include "kernels/ops.h"
#include "model/transformer.h"
#include "model/transformer_weights.h"

namespace rlcpp {

void Transformer::run_pack_jobs(const ExecContext& ctx, const std::vector<PackJob>& jobs, bool transposed) const {
  // The matrices are packed side by side on the threads (each is a strided copy, ~0.1 ms for W1's largest); on a
  // device one after the other, each a kernel on the context's stream.
  ParallelErrors errors(jobs.size());  // one slot per job
#pragma omp parallel for schedule(dynamic) if (!omp_in_parallel() && ctx.device() == Device::kCPU)
  for (size_t j = 0; j < jobs.size(); ++j) {
    errors.run(j, [&] {
      if (transposed)
        ops::pack_weight_transposed(ctx, *jobs[j].weight, *jobs[j].out);
      else
        ops::pack_weight(ctx, *jobs[j].weight, *jobs[j].out, jobs[j].format);
    });
  }
  errors.rethrow_first();
}

namespace {

// The forward's panels are in the numerics' formats (the Linear layers possibly quantised, lm_head in the
// compute dtype); the backward's transposes are the fp32 master weights.
DType linear_pack_format(const ModelNumerics& n, bool transposed) {
  return transposed ? DType::kF32 : n.linear_weights;
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
  const DType f = linear_pack_format(numerics_, transposed);
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
  const DType linear_format = linear_pack_format(numerics_, transposed);
  std::vector<PackJob> jobs;
  for (size_t l = 0; l < w.layers.size(); ++l) {
    jobs.push_back({&w.layers[l].qkv_w, &out.layers[l].qkv, linear_format});
    jobs.push_back({&w.layers[l].o_w, &out.layers[l].o, linear_format});
    jobs.push_back({&w.layers[l].gate_up, &out.layers[l].gate_up, linear_format});
    jobs.push_back({&w.layers[l].down, &out.layers[l].down, linear_format});
  }
  if (!config_.value_head)  // a critic has a score head
    jobs.push_back({&w.lm_head, &out.lm_head, transposed ? DType::kF32 : numerics_.compute_format()});
  run_pack_jobs(ctx, jobs, transposed);
  for (size_t l = 0; l < w.layers.size(); ++l)
    round_biases(ctx, w.layers[l].qkv_b, w.layers[l].o_b, numerics_, transposed, out.layers[l]);
  out.source = params.flat().data<float>();
  out.transposed = transposed;
}

void Transformer::prepare_decode_weights(const ExecContext& ctx, const ParameterStore& params,
                                         PackedWeights& out) const {
  RLCPP_CHECK(params.flat().device() == Device::kCPU || params.flat().device() == ctx.device(),
              "prepare_decode_weights: the parameters must be on the host or on " << ctx.name() << " (they are on "
                  << device_name(params.flat().device()) << ")");
  if (ctx.device() != Device::kCPU) {
    prepare_device_decode_weights(ctx, params, out);
    return;
  }
  if (numerics_.batch_invariant) {
    pack_weights(ctx, params, out);
    return;
  }
  out.layers.clear();
  out.lm_head = ops::PackedWeight();
  out.for_blas = true;
  out.transposed = false;
  out.source = params.flat().data<float>();
  if (numerics_.compute == DType::kF32 && !is_quantized(numerics_.linear_weights)) {
    out.blas = ParameterStore();  // fp32: the parameters themselves
    return;
  }
  // Every parameter as these numerics compute with it: the Linear matrices through their packed format and
  // back (rounded or dequantised, the values the panels would hold), the rest rounded to the compute dtype.
  ParameterStore prepared = params.clone();
  ops::round_to(ctx, prepared.flat(), numerics_.compute);
  const Weights src = views(params);
  Weights dst = views(prepared);
  ops::PackedWeight scratch;
  for (size_t l = 0; l < src.layers.size(); ++l) {
    const std::pair<const Tensor*, Tensor*> mats[] = {{&src.layers[l].qkv_w, &dst.layers[l].qkv_w},
                                                      {&src.layers[l].o_w, &dst.layers[l].o_w},
                                                      {&src.layers[l].gate_up, &dst.layers[l].gate_up},
                                                      {&src.layers[l].down, &dst.layers[l].down}};
    for (const auto& [from, to] : mats) {
      ops::pack_weight(ctx, *from, scratch, numerics_.linear_weights);
      const Tensor values = ops::unpack_weight(ctx, scratch);
      std::memcpy(to->data<float>(), values.data<float>(), values.nbytes());
    }
  }
  out.blas = std::move(prepared);
}

void Transformer::prepare_device_decode_weights(const ExecContext& ctx, const ParameterStore& params,
                                                PackedWeights& out) const {
  // The fp32 parameters on the device (the buffer kept from one policy version to the next).
  if (out.blas.flat().defined() && out.blas.flat().device() == ctx.device() && out.blas.numel() == params.numel())
    ctx.copy(params.flat(), out.blas.flat());
  else
    out.blas = params.on(ctx);
  const bool quantized = is_quantized(numerics_.linear_weights);
  if (numerics_.batch_invariant) {
    // The CPU's panels, packed on the device from the fp32 values (a quantised format through the host), for
    // the packed kernel's chains: the bits of the CPU's decode and of this device's training forward.
    const ParameterStore device = out.blas;
    pack_weights(ctx, device, out);
    out.blas = device;
    ops::round_to(ctx, out.blas.flat(), numerics_.compute);  // embeddings and norms, rounded as the body rounds them
  } else {
    out.layers.clear();
    out.lm_head = ops::PackedWeight();
    out.for_blas = true;
    if (quantized) {
      // A quantised format's values come from its CPU pack and unpack (the host's prepared copy).
      ParameterStore on_host;
      PackedWeights host;
      prepare_decode_weights(ExecContext::cpu(), params_on(ExecContext::cpu(), params, on_host), host);
      ctx.copy(host.blas.flat(), out.blas.flat());
    } else {
      ops::round_to(ctx, out.blas.flat(), numerics_.compute);  // round_to on the device gives the CPU's bits
    }
  }
  out.source = params.flat().data<float>();
  out.transposed = false;
  if (!out.rope.defined() || out.rope.device() != ctx.device()) out.rope = ctx.copy_of(rope_);
}

}  // namespace rlcpp
