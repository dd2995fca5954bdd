// `rlcpp bench train --device cuda`: the trainer's fwd+bwd+AdamW on a GPU (master weights, gradients and AdamW
// moments there; a bf16 model's products on tensor cores, forward and backward), next to the machine's own
// PyTorch training the same Hugging Face model on the same GPU (peer "pytorch-gpu": eager and torch.compile,
// autocast for bf16), with MFU against the cuBLAS peak this run measures in the same math.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <vector>

#include "bench/bench_common.h"
#include "bench/real_peers.h"
#include "bench/train_bench.h"
#include "core/metrics.h"
#include "core/philox.h"
#include "kernels/ops.h"
#include "model/init.h"
#include "model/numerics.h"
#include "trainer/update_step.h"

namespace rlcpp::bench {

namespace {

// TFLOP/s of an n^3 ops::matmul on ctx in `math` (fp32 matrices; the _FAST_ math rounds the operands): the
// median of a few calls after one untimed one.
double device_matmul_tflops(const ExecContext& ctx, int64_t n, DType math) {
  Tensor values = Tensor::empty({n, n});
  PhiloxStream rng(3, 0);
  for (int64_t i = 0; i < values.numel(); ++i) values.data<float>()[i] = rng.uniform() - 0.5f;
  const Tensor a = ctx.copy_of(values), b = ctx.copy_of(values);
  Tensor c = ctx.empty({n, n});
  const double s = median_seconds(
      [&] {
        ops::matmul(ctx, a, false, b, true, c, 1.0f, 0.0f, math);
        ctx.synchronize();
      },
      1, 5);
  return 2.0 * static_cast<double>(n) * n * n / s / 1e12;
}

}  // namespace

int run_device_train_bench(const TrainBenchOptions& o) {
  const ExecContext ctx = context_for_device(o.device, "bench train --device");
  RLCPP_CHECK(o.dtype == "fp32" || o.dtype == "bf16", "bench train --dtype: fp32 or bf16, got '" << o.dtype << "'");
  // The peer first, before this process holds the model: both on one GPU's memory at once is not what either
  // measures.
  std::optional<PeerRun> peer;
  if (o.peer && !real_peers_in(o.peers, {"pytorch-gpu"}).empty())
    peer = run_real_peer("pytorch-gpu", "train --preset " + o.preset + " --batch " + std::to_string(o.batch) +
                                            " --seq " + std::to_string(o.seq) + " --device " + o.device +
                                            " --dtype " + o.dtype + " --threads 1 --iters " +
                                            std::to_string(std::max(3, o.iters)) + " --warmup 3");
  const ModelConfig mc = model_preset(o.preset);
  ParameterStore params = init_random(mc, 1);
  // The fast mode (cuBLAS, not batch-invariant), as a PyTorch trainer computes.
  const Transformer model(mc, make_numerics(o.dtype, "none", /*batch_invariant=*/false, "bench train --dtype",
                                            "bench train --quantization"));
  const TrainBenchBatch data = random_train_batch(mc, o.batch, o.seq);
  const std::vector<PackedBatch>& micro = data.micro;
  const int64_t scored = data.scored;
  const MicroLossFn token_mean = data.token_mean();
  OptimConfig oc;
  PolicyUpdater updater(model, params, oc, ctx);
  ForwardOptions fwd;
  const int iters = std::max(3, o.iters);
  // The updater's step: forward, the loss on the host, backward, clipping, AdamW and the finiteness check of the
  // new weights. Their copy to host memory (what checkpoints, the zmq sync and evaluation read) happens once per
  // update, not per optimizer step: timed apart below.
  const double step_s = median_seconds(
      [&] {
        updater.step(micro, fwd, token_mean, 1000);
        ctx.synchronize();
      },
      2, iters);
  const ParameterStore& weights = updater.device_weights();
  Activations acts;
  ParameterStore grads = ParameterStore::allocate(mc, ctx);
  ctx.fill_zero(grads.flat());
  std::vector<float> dlogp(micro[0].num_tokens(), -1.0f / static_cast<float>(scored));
  const double fwd_s = median_seconds(
      [&] {
        model.forward(ctx, weights, micro[0], fwd, acts);
        ctx.synchronize();
      },
      1, iters);
  const double fwd_bwd_s = median_seconds(
      [&] {
        model.forward(ctx, weights, micro[0], fwd, acts);
        model.backward(ctx, weights, acts, dlogp.data(), nullptr, grads);
        ctx.synchronize();
      },
      1, iters);
  Tensor host_copy = Tensor::empty({params.numel()});
  const double to_host_s = median_seconds([&] { ctx.copy(weights.flat(), host_copy); }, 1, iters);
  const DType math = o.dtype == "bf16" ? DType::kBF16 : DType::kF32;
  const double peak = device_matmul_tflops(ctx, 8192, math);

  const double tokens = static_cast<double>(o.batch * o.seq);
  const double flops_per_token = 6.0 * static_cast<double>(mc.num_parameters());
  auto tflops = [&](double s) { return flops_per_token * tokens / s / 1e12; };
  std::printf("train bench: preset %s (%lld params), %lld x %lld tokens, %s on %s (cuBLAS, not batch-invariant)\n",
              o.preset.c_str(), static_cast<long long>(mc.num_parameters()), static_cast<long long>(o.batch),
              static_cast<long long>(o.seq), o.dtype.c_str(), ctx.name().c_str());
  std::printf("  rlcpp fwd           %8.2f ms  %9.0f tok/s\n", 1e3 * fwd_s, tokens / fwd_s);
  std::printf("  rlcpp fwd+bwd       %8.2f ms  %9.0f tok/s\n", 1e3 * fwd_bwd_s, tokens / fwd_bwd_s);
  std::printf("  rlcpp updater step  %8.2f ms  %9.0f tok/s  %6.1f TFLOP/s (6N per token; fwd+bwd+AdamW; the "
              "weights' copy to the host, once per update, %.2f ms more)\n",
              1e3 * step_s, tokens / step_s, tflops(step_s), 1e3 * to_host_s);
  std::printf("  cuBLAS peak, 8192^3 in %s math: %.1f TFLOP/s; MFU of the step %.0f%%\n", precision_name(math),
              peak, 100 * tflops(step_s) / peak);
  if (peer) {
    const std::vector<PeerFigure> figures = train_peer_figures(*peer, flops_per_token, peak * 1e12);
    char name[96];
    std::snprintf(name, sizeof name, "rlcpp updater step (MFU %.0f%%)", 100 * tflops(step_s) / peak);
    std::printf("  fwd+bwd+AdamW, tokens/s (%s%s):\n", o.dtype.c_str(), o.dtype == "bf16" ? ", the peer under autocast" : "");
    for (const std::string& row : comparison_rows(name, tokens / step_s, figures, "tok/s", true))
      std::printf("%s\n", row.c_str());
    if (!peer->result.is_null()) std::printf("  pytorch-gpu peer: %s\n", peer->result.dump().c_str());
    else std::printf("  pytorch-gpu peer did not run: %s\n", peer->skipped.c_str());
  }
  return 0;
}

}  // namespace rlcpp::bench
