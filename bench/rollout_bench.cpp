#include "bench/rollout_bench.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <optional>

#include "bench/bench_common.h"
#include "bench/real_peers.h"
#include "core/error.h"
#include "model/checkpoint.h"
#include "core/metrics.h"
#include "core/philox.h"
#include "kernels/machine_peaks.h"
#include "model/init.h"
#include "rollout/engine.h"
#include "rollout/kv_utilisation.h"

namespace rlcpp::bench {

namespace {

Request make_request(const ModelConfig& mc, int64_t prompts, int64_t group, int64_t prompt_len, int64_t new_tokens) {
  PhiloxStream rng(11, static_cast<uint64_t>(prompt_len));
  Request r;
  for (int64_t p = 0; p < prompts; ++p) {
    std::vector<int32_t> t(static_cast<size_t>(prompt_len));
    for (auto& x : t) x = static_cast<int32_t>(rng.below(mc.vocab_size));
    r.prompts.push_back(std::move(t));
  }
  r.n = group;
  r.sampling.temperature = 1.0f;
  r.sampling.max_new_tokens = new_tokens;
  r.sampling.ignore_eos = true;  // fixed length, as the peer
  r.sampling.seed = 1;
  return r;
}

struct ShapeResult {
  double seconds = 0;  // median over every timed run
  double tokens_per_s = 0;
  RolloutStats stats;  // of the last run (its phase times are that run's)
  std::vector<double> times;
};

// Adds `iters` timed runs (after one warm-up) to r.times. The bench times each shape before and after its
// peer, so a burst of load on this shared machine does not land on one side only.
void time_shape(Engine& engine, const Request& req, int iters, ShapeResult& r) {
  r.stats = engine.generate(req).stats;
  for (int i = 0; i < iters; ++i) {
    Stopwatch w;
    r.stats = engine.generate(req).stats;
    r.times.push_back(w.seconds());
  }
  std::vector<double> sorted = r.times;
  std::sort(sorted.begin(), sorted.end());
  r.seconds = sorted[sorted.size() / 2];
  r.tokens_per_s = static_cast<double>(r.stats.generated_tokens) / r.seconds;
}

// The Debian PyTorch peer's figures for one shape, or nulls.
Json peer_shape(bool enabled, int64_t prompts, int64_t group, int64_t prompt_len, int64_t new_tokens) {
  if (!enabled) return nullptr;
  return run_torch_peer(source_dir(), "rollout --prompts " + std::to_string(prompts) + " --group " +
                                          std::to_string(group) + " --prompt-len " + std::to_string(prompt_len) +
                                          " --new-tokens " + std::to_string(new_tokens) + " --threads best");
}

// The real peers (llama.cpp, vLLM) on one shape, each loading the bench's weights from `checkpoint`.
std::vector<PeerFigure> real_peers_shape(const std::vector<std::string>& peers, const std::string& checkpoint,
                                         const std::string& dtype, const std::string& device, int64_t prompts,
                                         int64_t group,
                                         int64_t prompt_len, int64_t new_tokens, int iters) {
  std::vector<PeerFigure> out;
  const std::string shape = " --prompts " + std::to_string(prompts) + " --group " + std::to_string(group) +
                            " --prompt-len " + std::to_string(prompt_len) + " --new-tokens " +
                            std::to_string(new_tokens) + " --iters " + std::to_string(std::max(1, iters / 3)) +
                            " --warmup 1 --threads " + std::to_string(omp_get_max_threads());
  auto run = [&](const std::string& peer, const std::string& args, const std::string& label) {
    const PeerRun r = run_real_peer(peer, "rollout --checkpoint '" + checkpoint + "'" + args + shape);
    out.push_back(peer_figure(r, "tokens_per_s"));
    out.back().name += label;
    if (!r.result.is_null()) std::printf("    %s peer: %s\n", peer.c_str(), r.result.dump().c_str());
  };
  for (const std::string& peer : peers) {
    if (peer == "hf") {
      run(peer, std::string(" --dtype ") + (dtype == "bf16" ? "bfloat16" : "float32") + " --device " + device, "");
    } else if (peer == "vllm") {
      run(peer, std::string(" --dtype ") + (dtype == "bf16" ? "bfloat16" : "float32"), "");
    } else {
      // llama.cpp twice: its KV cache in the compute dtype (rlcpp's arithmetic), and in f16, its default.
      const std::string d = dtype == "bf16" ? "bf16" : "f32";
      run(peer, " --dtype " + d + " --kv-type " + d, " KV " + d);
      run(peer, " --dtype " + d + " --kv-type f16", " KV f16 (its default)");
    }
  }
  return out;
}

void print_shape(const char* name, const ShapeResult& r, const Json& peer) {
  const RolloutStats& s = r.stats;
  std::printf("  %-34s rlcpp %8.1f ms %10.0f tok/s  (median of %zu; last run: forward %.1f ms, sample %.1f ms, "
              "schedule %.1f ms, %lld steps)\n",
              name, 1e3 * r.seconds, r.tokens_per_s, r.times.size(), 1e3 * s.forward_s, 1e3 * s.sample_s,
              1e3 * s.schedule_s, static_cast<long long>(s.steps));
  if (!peer.is_null() && peer.contains("ms") && peer.contains("tokens_per_s")) {
    std::printf("  %-34s peer  %8.1f ms %10.0f tok/s  (PyTorch %s, %s threads; prefill %.1f ms, decode %.1f ms)\n", "",
                peer["ms"].get<double>(), peer["tokens_per_s"].get<double>(),
                peer.value("torch", Json("?")).get<std::string>().c_str(), peer.value("threads", Json("?")).dump().c_str(),
                peer.value("prefill_ms", 0.0), peer.value("decode_ms", 0.0));
    std::printf("  %-34s ratio %.2fx the peer's tokens/s\n", "", r.tokens_per_s / peer["tokens_per_s"].get<double>());
  }
}

// At batch 1 a decode step reads every weight once (the tied embedding as lm_head): weight bytes over the read
// bandwidth of this machine is the floor of a token. Each engine's time per generated token (its whole rollout
// over the tokens generated, so the prompt's prefill is included) against it.
void print_decode_floor(const ParameterStore& params, const std::string& dtype, const ShapeResult& rlcpp,
                        const std::vector<PeerFigure>& peers) {
  const double bytes = static_cast<double>(params.numel()) * (dtype == "bf16" ? 2 : 4);
  // The floor must not be above what an engine reached: the best of several measurements (this shared
  // machine's bandwidth varies by 2x between minutes).
  double bandwidth = 0;
  for (int i = 0; i < 3; ++i) bandwidth = std::max(bandwidth, measure_read_bandwidth(int64_t{1} << 30, 5));
  const double floor_ms = 1e3 * bytes / bandwidth;
  std::printf("  decode floor: %.2f GB of %s weights / %.1f GB/s read bandwidth (best of 3 now) = %.1f ms a step; "
              "ms per generated token (whole rollout / its tokens, the prompt's prefill included) and distance from "
              "it:\n",
              bytes / 1e9, dtype.c_str(), bandwidth / 1e9, floor_ms);
  auto row = [&](const std::string& name, double tokens_per_s) {
    const double step_ms = 1e3 / tokens_per_s;
    std::printf("    %-54s %8.1f ms  %.2fx the floor\n", name.c_str(), step_ms, step_ms / floor_ms);
  };
  row("rlcpp (" + dtype + ")", rlcpp.tokens_per_s);
  for (const PeerFigure& p : peers)
    if (p.measured()) row(p.name, p.value);
}

void print_memory(const char* name, const RolloutStats& s, int64_t sequences, int64_t context) {
  const double mib = 1.0 / (1 << 20);
  std::printf("  %-34s peak %lld blocks of %lld tokens = %.2f MiB; without prefix sharing %lld blocks = %.2f MiB; "
              "saved %.2f MiB (%.0f%%); prefill %lld tokens, %lld not recomputed; a dense cache (peer) holds %.2f MiB\n",
              name, static_cast<long long>(s.peak_blocks_in_use), static_cast<long long>(s.block_size),
              s.peak_blocks_in_use * s.block_bytes() * mib, static_cast<long long>(s.peak_blocks_unshared),
              s.peak_blocks_unshared * s.block_bytes() * mib, s.bytes_saved_by_sharing() * mib,
              s.peak_blocks_unshared > 0 ? 100.0 * (s.peak_blocks_unshared - s.peak_blocks_in_use) / s.peak_blocks_unshared
                                         : 0.0,
              static_cast<long long>(s.prefill_tokens), static_cast<long long>(s.prefill_tokens_saved),
              static_cast<double>(sequences * context * s.kv_bytes_per_token) * mib);
}

// Continuous against static batching of the same requests (EngineConfig::static_batching): single samples that
// end at EOS (the random model draws it about once in V tokens) or at o.batching_new_tokens, at most
// o.batching_max_seqs at a time, so their lengths differ and a static batch waits for its longest. Keyed sampling
// gives both the same tokens. With the KV slots each layout fills (rollout/kv_utilisation.h).
void print_batching(const Transformer& model, const ParameterStore& params, const RolloutBenchOptions& o,
                    const ExecContext& context) {
  const ModelConfig& mc = model.config();
  Request req = make_request(mc, o.batching_prompts, 1, o.prompt_len, o.batching_new_tokens);
  req.sampling.ignore_eos = false;
  struct Mode {
    const char* name;
    bool static_batching;
    ShapeResult result;
  };
  std::vector<Mode> modes = {{"continuous", false, {}}, {"static", true, {}}};
  const int64_t reserved = std::min(o.prompt_len + o.batching_new_tokens, mc.max_position_embeddings);
  KvUtilisation utilisation(reserved);
  for (Mode& m : modes) {
    EngineConfig ec;
    ec.block_size = o.block_size;
    ec.max_num_seqs = o.batching_max_seqs;
    ec.max_num_batched_tokens = std::max<int64_t>(8192, mc.max_position_embeddings);
    ec.static_batching = m.static_batching;
    ec.prefix_cache = false;  // each iteration prefills its prompts, as the peers' do
    Engine engine(model, params, ec, 0, context);
    time_shape(engine, req, o.iters, m.result);
    if (!m.static_batching) engine.generate(req, [&](const StepView& v) { utilisation.add_step(v); });
  }
  std::printf("  batching (%lld prompts x 1, prompt %lld, ending at EOS or after %lld new tokens, %lld sequences at a "
              "time; the same samples both ways):\n",
              static_cast<long long>(o.batching_prompts), static_cast<long long>(o.prompt_len),
              static_cast<long long>(o.batching_new_tokens), static_cast<long long>(o.batching_max_seqs));
  for (const Mode& m : modes) {
    const RolloutStats& s = m.result.stats;
    std::printf("    %-10s %10.0f tok/s  %5lld engine steps, %.1f sequences a step on average\n", m.name,
                m.result.tokens_per_s, static_cast<long long>(s.steps),
                static_cast<double>(s.generated_tokens) / static_cast<double>(std::max<int64_t>(1, s.steps)));
  }
  std::printf("    continuous / static: %.2fx the tokens/s\n",
              modes[0].result.tokens_per_s / modes[1].result.tokens_per_s);
  std::printf("  KV slots holding a token (continuous, averaged over steps): paged (blocks of %lld) %.0f%%; "
              "a contiguous cache reserving prompt + max new tokens (%lld) per sequence %.0f%%\n",
              static_cast<long long>(o.block_size), 100 * utilisation.paged(), static_cast<long long>(reserved),
              100 * utilisation.contiguous());
}

}  // namespace

int run_rollout_bench(const RolloutBenchOptions& o) {
  RLCPP_CHECK(o.dtype == "fp32" || o.dtype == "bf16", "bench rollout --dtype: fp32 or bf16, got '" << o.dtype << "'");
  const std::vector<std::string> real = o.peer ? real_peers_in(o.peers, {"llama.cpp", "vllm", "hf"})
                                               : std::vector<std::string>{};
  const bool torch_peer = o.peer && list_has(o.peers, "torch") && o.preset == "tiny" && o.dtype == "fp32";
  const ExecContext context = context_for_device(o.device, "bench rollout --device");
  const ModelConfig mc = model_shapes(o.preset);
  const ParameterStore params = init_random(mc, 1);
  const ModelNumerics numerics = make_numerics(o.dtype, "none", o.batch_invariant, "bench rollout --dtype", "");
  check_numerics_device(numerics, context.device(), "bench rollout --dtype", "bench rollout --batch-invariant");
  const Transformer model(mc, numerics);
  // The same weights for the real peers, as a Hugging Face directory.
  std::optional<TempDir> checkpoint;
  if (!real.empty()) {
    checkpoint.emplace("rollout_bench_ckpt");
    save_model_checkpoint(checkpoint->path() + "/model", params);
  }
  auto compare = [&](const ShapeResult& r, int64_t prompts, int64_t group, int64_t new_tokens) {
    if (real.empty()) return std::vector<PeerFigure>{};
    const std::vector<PeerFigure> figures =
        real_peers_shape(real, checkpoint->path() + "/model", o.dtype, o.device == "cpu" ? "cuda:0" : o.device,
                         prompts, group, o.prompt_len, new_tokens, o.iters);
    for (const std::string& row : comparison_rows("rlcpp (" + o.dtype + ")", r.tokens_per_s, figures, "tok/s", true))
      std::printf("%s\n", row.c_str());
    return figures;
  };
  EngineConfig ec;
  ec.block_size = o.block_size;
  ec.max_num_seqs = std::max<int64_t>(o.prompts * o.group, o.long_tail_sequences);
  // Any prefill of the model's context fits (the engine requires it; buffers grow only to the rows run).
  ec.max_num_batched_tokens =
      std::max<int64_t>({8192, mc.max_position_embeddings, o.prompts * o.group * o.prompt_len});
  ec.prefix_cache = false;  // each iteration prefills its prompts, as the peers' do
  Engine engine(model, params, ec, 0, context);

  std::printf("rollout bench: preset %s (%lld params), %s on %s, %d threads, temperature 1, fixed length; KV %lld "
              "bytes/token, cache %lld blocks of %lld\n",
              o.preset.c_str(), static_cast<long long>(mc.num_parameters()), model.numerics().describe().c_str(),
              context.name().c_str(), omp_get_max_threads(),
              static_cast<long long>(engine.kv_bytes_per_token()), static_cast<long long>(engine.num_blocks()),
              static_cast<long long>(o.block_size));
  const Request main_req = make_request(mc, o.prompts, o.group, o.prompt_len, o.new_tokens);
  ShapeResult main_shape;
  time_shape(engine, main_req, o.iters, main_shape);
  const Json main_peer = peer_shape(torch_peer, o.prompts, o.group, o.prompt_len, o.new_tokens);
  time_shape(engine, main_req, o.iters, main_shape);
  char name[128];
  std::snprintf(name, sizeof name, "%lld x %lld seqs, prompt %lld, %lld new", static_cast<long long>(o.prompts),
                static_cast<long long>(o.group), static_cast<long long>(o.prompt_len),
                static_cast<long long>(o.new_tokens));
  print_shape(name, main_shape, main_peer);
  const std::vector<PeerFigure> main_figures = compare(main_shape, o.prompts, o.group, o.new_tokens);
  if (o.preset != "tiny" && o.prompts * o.group == 1 && context.is_host())
    print_decode_floor(params, o.dtype, main_shape, main_figures);
  if (o.long_tail_sequences == 0) return 0;

  const Request tail_req = make_request(mc, o.long_tail_sequences, 1, o.prompt_len, o.long_tail_new_tokens);
  ShapeResult tail;
  time_shape(engine, tail_req, o.iters, tail);
  const Json tail_peer = peer_shape(torch_peer, o.long_tail_sequences, 1, o.prompt_len, o.long_tail_new_tokens);
  time_shape(engine, tail_req, o.iters, tail);
  std::snprintf(name, sizeof name, "long tail: %lld seqs, %lld new", static_cast<long long>(o.long_tail_sequences),
                static_cast<long long>(o.long_tail_new_tokens));
  print_shape(name, tail, tail_peer);
  compare(tail, o.long_tail_sequences, 1, o.long_tail_new_tokens);
  if (o.preset != "tiny") return 0;

  std::printf("  memory (KV cache, %s):\n", o.dtype.c_str());
  print_memory("main shape", main_shape.stats, o.prompts * o.group, o.prompt_len + o.new_tokens);
  const Request shared_req = make_request(mc, o.prompts, o.group, o.shared_prompt_len, o.new_tokens);
  const RolloutStats shared = engine.generate(shared_req).stats;
  std::snprintf(name, sizeof name, "prompt %lld (same groups)", static_cast<long long>(o.shared_prompt_len));
  print_memory(name, shared, o.prompts * o.group, o.shared_prompt_len + o.new_tokens);
  if (o.batching_prompts > 0) print_batching(model, params, o, context);
  return 0;
}

}  // namespace rlcpp::bench
