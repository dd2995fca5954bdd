#include "bench/train_bench.h"

#include <cstdio>

#include "bench/bench_common.h"
#include "core/philox.h"
#include "model/init.h"
#include "trainer/update_step.h"

namespace rlcpp::bench {

int run_train_bench(const TrainBenchOptions& o) {
  const ModelConfig mc = model_preset(o.preset);
  ParameterStore params = init_random(mc, 1);
  Transformer model(mc);
  PhiloxStream rng(7, 0);
  std::vector<std::vector<int32_t>> seqs(o.batch, std::vector<int32_t>(o.seq));
  for (auto& s : seqs)
    for (auto& t : s) t = static_cast<int32_t>(rng.below(mc.vocab_size));
  const std::vector<PackedBatch> micro = {PackedBatch::from_sequences(seqs)};
  int64_t scored = 0;
  for (int32_t t : micro[0].targets) scored += t >= 0;

  OptimConfig oc;
  PolicyUpdater updater(model, params, oc);
  ForwardOptions fwd;
  auto token_mean = [&](size_t, const Activations& acts) {
    LossOutput out;
    out.dlogp.assign(static_cast<size_t>(acts.num_tokens), 0.0f);
    for (int64_t i = 0; i < acts.num_tokens; ++i)
      if (micro[0].targets[i] >= 0) {
        out.loss -= acts.logp.data<float>()[i] / scored;
        out.dlogp[i] = -1.0f / static_cast<float>(scored);
      }
    return out;
  };
  const double tokens = static_cast<double>(o.batch * o.seq);
  const double step_s = median_seconds([&] { updater.step(micro, fwd, token_mean, 1000); }, 2, o.iters);
  Activations acts;
  ParameterStore grads(mc);
  std::vector<float> dlogp(micro[0].num_tokens(), -1.0f / static_cast<float>(scored));
  const double fwd_bwd_s = median_seconds(
      [&] {
        model.forward(params, micro[0], fwd, acts);
        model.backward(params, acts, dlogp.data(), nullptr, grads);
      },
      1, o.iters);
  const double fwd_s = median_seconds([&] { model.forward(params, micro[0], fwd, acts); }, 1, o.iters);

  const double peak_big = sgemm_gflops(2048, 2048, 2048);
  const double peak_w1 = sgemm_gflops(o.batch * o.seq, mc.intermediate_size, mc.hidden_size);
  const double flops_per_token = 6.0 * static_cast<double>(mc.num_parameters());
  const double achieved = flops_per_token * tokens / step_s / 1e9;

  std::printf("train bench: preset %s (%lld params), %lld x %lld tokens, fp32, CPU\n", o.preset.c_str(),
              static_cast<long long>(mc.num_parameters()), static_cast<long long>(o.batch),
              static_cast<long long>(o.seq));
  std::printf("  rlcpp fwd           %8.1f ms  %9.0f tok/s\n", 1e3 * fwd_s, tokens / fwd_s);
  std::printf("  rlcpp fwd+bwd       %8.1f ms  %9.0f tok/s\n", 1e3 * fwd_bwd_s, tokens / fwd_bwd_s);
  std::printf("  rlcpp fwd+bwd+AdamW %8.1f ms  %9.0f tok/s  %6.1f GFLOP/s (6N per token)\n", 1e3 * step_s,
              tokens / step_s, achieved);
  std::printf("  sgemm peak: %.1f GFLOP/s at 2048^3, %.1f at W1 shape (%lld x %lld x %lld); MFU %.0f%% / %.0f%%\n",
              peak_big, peak_w1, static_cast<long long>(o.batch * o.seq), static_cast<long long>(mc.intermediate_size),
              static_cast<long long>(mc.hidden_size), 100 * achieved / peak_big, 100 * achieved / peak_w1);
  if (o.peer && o.preset == "tiny") {
    Json peer = run_torch_peer(source_dir(), "train --batch " + std::to_string(o.batch) + " --seq " +
                                                 std::to_string(o.seq) + " --threads best");
    if (!peer.is_null() && peer.contains("step_ms")) {
      const double peer_ms = peer["step_ms"].get<double>();
      std::printf("  PyTorch peer (%s threads) fwd+bwd+AdamW %8.1f ms  %9.0f tok/s\n",
                  peer.value("threads", Json("?")).dump().c_str(), peer_ms, tokens / (peer_ms / 1e3));
      std::printf("  ratio rlcpp / peer: %.2fx faster\n", peer_ms / (1e3 * step_s));
    }
  }
  return 0;
}

}  // namespace rlcpp::bench
