#include "bench/train_bench.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <vector>

#include "bench/bench_common.h"
#include "bench/real_peers.h"
#include "core/philox.h"
#include "kernels/machine_peaks.h"
#include "model/init.h"
#include "model/numerics.h"
#include "trainer/update_step.h"

namespace rlcpp::bench {

TrainBenchBatch random_train_batch(const ModelConfig& config, int64_t batch, int64_t seq) {
  PhiloxStream rng(7, 0);
  std::vector<std::vector<int32_t>> seqs(static_cast<size_t>(batch), std::vector<int32_t>(static_cast<size_t>(seq)));
  for (auto& s : seqs)
    for (auto& t : s) t = static_cast<int32_t>(rng.below(config.vocab_size));
  TrainBenchBatch out;
  out.micro = {PackedBatch::from_sequences(seqs)};
  for (int32_t t : out.micro[0].targets) out.scored += t >= 0;
  return out;
}

MicroLossFn TrainBenchBatch::token_mean() const {
  return [targets = micro[0].targets, scored = scored](size_t, const Activations& acts) {
    LossOutput out;
    out.dlogp.assign(static_cast<size_t>(acts.num_tokens), 0.0f);
    for (int64_t i = 0; i < acts.num_tokens; ++i)
      if (targets[static_cast<size_t>(i)] >= 0) {
        out.loss -= acts.logp.data<float>()[i] / scored;
        out.dlogp[static_cast<size_t>(i)] = -1.0f / static_cast<float>(scored);
      }
    return out;
  };
}

std::vector<PeerFigure> train_peer_figures(const PeerRun& run, double flops_per_token, double peak_flops) {
  std::vector<PeerFigure> figures = {peer_figure(run, "modes.eager.tokens_per_s"),
                                     peer_figure(run, "modes.compile.tokens_per_s")};
  figures[0].name += " eager";
  figures[1].name += " torch.compile";
  for (PeerFigure& f : figures)
    if (f.measured()) {
      char mfu[64];
      std::snprintf(mfu, sizeof mfu, "MFU %.0f%%", 100 * flops_per_token * f.value / peak_flops);
      f.note = mfu;
    }
  return figures;
}

int run_train_bench(const TrainBenchOptions& o) {
  if (!parse_device_spec(o.device, "bench train --device").is_host()) return run_device_train_bench(o);
  RLCPP_CHECK(o.dtype == "fp32" || o.dtype == "bf16", "bench train --dtype: fp32 or bf16, got '" << o.dtype << "'");
  const bool bf16 = o.dtype == "bf16";
  // The real peer first, before this process holds a model: a W2 model with AdamW here and one in the peer do
  // not fit in memory together.
  const std::vector<std::string> real = o.peer ? real_peers_in(o.peers, {"pytorch2"}) : std::vector<std::string>{};
  std::optional<PeerRun> pytorch2;
  if (!real.empty()) {
    // Hugging Face's own model class under PyTorch 2, eager and compiled, on the same shape.
    // W1: 1 and 2 threads, the better kept; a W2 step takes tens of seconds: this process's threads, fewer steps.
    const std::string timing = o.preset == "tiny" ? " --threads best"
                                                  : " --threads " + std::to_string(omp_get_max_threads()) +
                                                        " --iters 2 --warmup 1";
    pytorch2 = run_real_peer("pytorch2", "train --preset " + o.preset + " --batch " + std::to_string(o.batch) +
                                                      " --seq " + std::to_string(o.seq) + " --dtype " + o.dtype +
                                                      timing);
  }
  const ModelConfig mc = model_shapes(o.preset);
  ParameterStore params = init_random(mc, 1);
  // bf16: the forward's products on bf16 panels, the backward's in bf16 math (AVX512-BF16 where the CPU has it),
  // fp32 master weights and AdamW; the peer runs under torch.autocast(bfloat16).
  const Transformer model(mc, make_numerics(o.dtype, "none", /*batch_invariant=*/true, "bench train --dtype",
                                            "bench train --quantization"));
  const TrainBenchBatch data = random_train_batch(mc, o.batch, o.seq);
  const std::vector<PackedBatch>& micro = data.micro;
  const int64_t scored = data.scored;
  const MicroLossFn token_mean = data.token_mean();

  OptimConfig oc;
  PolicyUpdater updater(model, params, oc);
  ForwardOptions fwd;
  const double tokens = static_cast<double>(o.batch * o.seq);
  const double flops_per_token = 6.0 * static_cast<double>(mc.num_parameters());
  // The step and the peaks are measured in alternating rounds, and each round's MFU is against that round's
  // peak: this shared machine's speed drifts by tens of percent within minutes (the 2048^3 sgemm measured
  // 120-240 GFLOP/s in one session), so a peak measured once, apart from the step, makes the ratio noise. The peak
  // is the product of the dtype: OpenBLAS sgemm for fp32, the packed bf16 kernel (vdpbf16ps) for bf16.
  auto peak_gflops = [&](int64_t m, int64_t n, int64_t k) {
    if (!bf16) return sgemm_gflops(m, n, k);
    const double flops = 2.0 * m * n * k;
    return measure_packed_bf16_flops(m, n, k, std::max(3, static_cast<int>(std::min<double>(20, 2e10 / flops)))) /
           1e9;
  };
  const int rounds = std::max(3, o.iters / 2);
  std::vector<double> step_times, peaks_big, peaks_w1, mfu_big, mfu_w1;
  for (int i = 0; i < 2; ++i) updater.step(micro, fwd, token_mean, 1000);  // warm-up
  for (int r = 0; r < rounds; ++r) {
    const double step_s = median_seconds([&] { updater.step(micro, fwd, token_mean, 1000); }, 0, 3);
    const double achieved = flops_per_token * tokens / step_s / 1e9;
    step_times.push_back(step_s);
    peaks_big.push_back(peak_gflops(2048, 2048, 2048));
    peaks_w1.push_back(peak_gflops(o.batch * o.seq, mc.intermediate_size, mc.hidden_size));
    mfu_big.push_back(achieved / peaks_big.back());
    mfu_w1.push_back(achieved / peaks_w1.back());
  }
  const double step_s = median_of(step_times);
  const double achieved = flops_per_token * tokens / step_s / 1e9;
  const ExecContext& exec = updater.context();
  Activations acts;
  ParameterStore grads(mc);
  std::vector<float> dlogp(micro[0].num_tokens(), -1.0f / static_cast<float>(scored));
  const double fwd_bwd_s = median_seconds(
      [&] {
        model.forward(exec, params, micro[0], fwd, acts);
        model.backward(exec, params, acts, dlogp.data(), nullptr, grads);
      },
      1, o.iters);
  const double fwd_s = median_seconds([&] { model.forward(exec, params, micro[0], fwd, acts); }, 1, o.iters);

  std::printf("train bench: preset %s (%lld params), %lld x %lld tokens, %s, CPU\n", o.preset.c_str(),
              static_cast<long long>(mc.num_parameters()), static_cast<long long>(o.batch),
              static_cast<long long>(o.seq), bf16 ? "bf16 (fp32 master weights and AdamW)" : "fp32");
  std::printf("  rlcpp fwd           %8.1f ms  %9.0f tok/s\n", 1e3 * fwd_s, tokens / fwd_s);
  std::printf("  rlcpp fwd+bwd       %8.1f ms  %9.0f tok/s\n", 1e3 * fwd_bwd_s, tokens / fwd_bwd_s);
  std::printf("  rlcpp fwd+bwd+AdamW %8.1f ms  %9.0f tok/s  %6.1f GFLOP/s (6N per token)\n", 1e3 * step_s,
              tokens / step_s, achieved);
  std::printf("  %s peak (median of %d rounds alternating with the step): %.1f GFLOP/s at 2048^3 (%.1f-%.1f), "
              "%.1f at W1 shape (%lld x %lld x %lld)\n",
              bf16 ? "bf16 packed-product" : "sgemm", rounds, median_of(peaks_big),
              *std::min_element(peaks_big.begin(), peaks_big.end()),
              *std::max_element(peaks_big.begin(), peaks_big.end()), median_of(peaks_w1),
              static_cast<long long>(o.batch * o.seq), static_cast<long long>(mc.intermediate_size),
              static_cast<long long>(mc.hidden_size));
  std::printf("  MFU (median of the rounds' step / peak): %.0f%% of the 2048^3 peak (rounds %.0f-%.0f%%), %.0f%% of "
              "the W1-shape peak\n",
              100 * median_of(mfu_big), 100 * *std::min_element(mfu_big.begin(), mfu_big.end()),
              100 * *std::max_element(mfu_big.begin(), mfu_big.end()), 100 * median_of(mfu_w1));
  if (o.peer && list_has(o.peers, "torch") && o.preset == "tiny" && !bf16) {
    Json peer = run_torch_peer(source_dir(), "train --batch " + std::to_string(o.batch) + " --seq " +
                                                 std::to_string(o.seq) + " --threads best");
    if (!peer.is_null() && peer.contains("step_ms")) {
      const double peer_ms = peer["step_ms"].get<double>();
      std::printf("  PyTorch peer (%s threads) fwd+bwd+AdamW %8.1f ms  %9.0f tok/s\n",
                  peer.value("threads", Json("?")).dump().c_str(), peer_ms, tokens / (peer_ms / 1e3));
      std::printf("  ratio rlcpp / peer: %.2fx faster\n", peer_ms / (1e3 * step_s));
    }
  }
  if (pytorch2) {
    const PeerRun& run = *pytorch2;
    const double peak = median_of(peaks_big);
    const std::vector<PeerFigure> figures = train_peer_figures(run, flops_per_token, peak * 1e9);
    char name[96];
    std::snprintf(name, sizeof name, "rlcpp fwd+bwd+AdamW (MFU %.0f%%)", 100 * achieved / peak);
    std::printf("  fwd+bwd+AdamW, tokens/s (%s; MFU against the 2048^3 %s peak, %.1f GFLOP/s):\n",
                bf16 ? "bf16, the peer under autocast" : "fp32", bf16 ? "bf16 packed-product" : "sgemm", peak);
    for (const std::string& row : comparison_rows(name, tokens / step_s, figures, "tok/s", true))
      std::printf("%s\n", row.c_str());
    if (!run.result.is_null()) std::printf("  pytorch2 peer: %s\n", run.result.dump().c_str());
  }
  return 0;
}

}  // namespace rlcpp::bench
