#include "bench/rollout_numerics_bench.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>

#include "bench/bench_common.h"
#include "core/error.h"
#include "core/metrics.h"
#include "core/philox.h"
#include "kernels/machine_peaks.h"
#include "loop/mismatch.h"
#include "model/forward_comparison.h"
#include "model/init.h"
#include "rollout/engine.h"

namespace rlcpp::bench {

namespace {

ModelNumerics parse_spec(const std::string& spec) {
  std::string rest = spec;
  bool invariant = true;
  if (const size_t slash = rest.find('/'); slash != std::string::npos) {
    RLCPP_CHECK(rest.substr(slash + 1) == "blas", "bench --numerics '" << spec << "': after / only 'blas'");
    invariant = false;
    rest = rest.substr(0, slash);
  }
  std::string quant = "none";
  if (const size_t plus = rest.find('+'); plus != std::string::npos) {
    quant = rest.substr(plus + 1);
    rest = rest.substr(0, plus);
  }
  return make_numerics(rest, quant, invariant, "bench --numerics (dtype)", "bench --numerics (quantization)");
}

// Bytes of weights a decode step reads: every packed matrix (panels and scales), or the fp32 matrices OpenBLAS
// multiplies by.
int64_t decode_weight_bytes(const Transformer& model, const ParameterStore& params) {
  PackedWeights w;
  model.prepare_decode_weights(ExecContext::cpu(), params, w);
  const ModelConfig& c = model.config();
  if (w.for_blas) {
    const int64_t per_layer = (c.q_dim() + 2 * c.kv_dim()) * c.hidden_size + c.hidden_size * c.q_dim() +
                              3 * c.hidden_size * c.intermediate_size;
    return 4 * (c.num_hidden_layers * per_layer + c.vocab_size * c.hidden_size);
  }
  auto bytes = [](const ops::PackedWeight& p) {
    return static_cast<int64_t>(p.panels.nbytes() + (p.scales.defined() ? p.scales.nbytes() : 0));
  };
  int64_t total = bytes(w.lm_head);
  for (const auto& l : w.layers) total += bytes(l.qkv) + bytes(l.o) + bytes(l.gate_up) + bytes(l.down);
  return total;
}

Request make_request(const ModelConfig& mc, const RolloutBenchOptions& o) {
  PhiloxStream rng(11, static_cast<uint64_t>(o.prompt_len));
  Request r;
  for (int64_t p = 0; p < o.prompts; ++p) {
    std::vector<int32_t> t(static_cast<size_t>(o.prompt_len));
    for (auto& x : t) x = static_cast<int32_t>(rng.below(mc.vocab_size));
    r.prompts.push_back(std::move(t));
  }
  r.n = o.group;
  r.sampling.temperature = 1.0f;
  r.sampling.max_new_tokens = o.new_tokens;
  r.sampling.ignore_eos = true;  // fixed length
  r.sampling.seed = 1;
  return r;
}

struct Entry {
  std::string spec;
  std::unique_ptr<Transformer> model;
  std::unique_ptr<Engine> engine;
  int64_t weight_bytes = 0;
  std::vector<double> seconds;
  RolloutStats stats;
  RolloutResult last;  // the last timed run's samples (every run of a request gives the same ones)
};

// The mismatch of an entry's samples against the baseline numerics' training forward on the same tokens: the
// sampled tokens' max |dlogp| and k3 (loop/mismatch.h) and the whole distributions' total variation.
struct NumericsGap {
  Mismatch sampled;
  double full_tv = 0;
};

NumericsGap numerics_gap(const Entry& e, const Transformer& baseline, const ParameterStore& params,
                         const Request& req) {
  std::vector<std::vector<int32_t>> sequences;
  std::vector<int32_t> score_from;
  std::vector<std::vector<float>> engine_logp;
  for (const Sample& s : e.last.samples) {
    std::vector<int32_t> seq = req.prompts[static_cast<size_t>(s.prompt_index)];
    score_from.push_back(static_cast<int32_t>(seq.size()) - 1);
    seq.insert(seq.end(), s.tokens.begin(), s.tokens.end());
    sequences.push_back(std::move(seq));
    engine_logp.push_back(s.logprobs);
  }
  const PackedBatch batch = PackedBatch::from_sequences(sequences, score_from);
  const ExecContext host = ExecContext::cpu();  // the trainer's passes run on the host
  Activations acts;
  baseline.forward(host, params, batch, ForwardOptions{req.sampling.temperature}, acts);
  std::vector<std::vector<float>> trainer_logp;
  for (size_t b = 0; b < sequences.size(); ++b) {
    const int32_t first = batch.cu_seqlens[b] + score_from[b];
    trainer_logp.emplace_back(acts.logp.data<float>() + first,
                              acts.logp.data<float>() + first + e.last.samples[b].tokens.size());
  }
  NumericsGap g;
  g.sampled = logprob_mismatch(engine_logp, trainer_logp);
  g.full_tv =
      compare_forward(host, *e.model, params, baseline, params, batch, req.sampling.temperature, 0.0).full_tv_mean;
  return g;
}

}  // namespace

int run_rollout_numerics_bench(const RolloutBenchOptions& o, const std::string& numerics) {
  ModelConfig mc = model_shapes(o.preset);
  // The context only sizes the RoPE table and the KV cache's per-sequence limit: the shape's own is enough.
  mc.max_position_embeddings = std::max<int64_t>(64, (o.prompt_len + o.new_tokens + 15) / 16 * 16);
  const ParameterStore params = init_random(mc, 1);
  EngineConfig ec;
  ec.block_size = o.block_size;
  ec.max_num_seqs = o.prompts * o.group;
  ec.max_num_batched_tokens = std::max<int64_t>(mc.max_position_embeddings, o.prompts * o.group * o.prompt_len);
  ec.prefix_cache = false;  // every timed run prefills its prompts
  const Request req = make_request(mc, o);

  std::vector<Entry> entries;
  std::stringstream list(numerics);
  for (std::string spec; std::getline(list, spec, ',');) {
    Entry e;
    e.spec = spec;
    e.model = std::make_unique<Transformer>(mc, parse_spec(spec));
    e.engine = std::make_unique<Engine>(*e.model, params, ec);
    e.weight_bytes = decode_weight_bytes(*e.model, params);
    e.stats = e.engine->generate(req).stats;  // warm-up: packs the weights, faults the cache in
    entries.push_back(std::move(e));
  }
  RLCPP_CHECK(!entries.empty(), "bench --numerics: no numerics given");
  const double bandwidth = measure_read_bandwidth(int64_t{512} << 20, 5);
  std::printf("rollout numerics bench: preset %s (%lld params), %d threads, %lld x %lld seqs, prompt %lld, %lld new "
              "tokens, temperature 1, fixed length; read bandwidth %.1f GB/s\n",
              o.preset.c_str(), static_cast<long long>(mc.num_parameters()), omp_get_max_threads(),
              static_cast<long long>(o.prompts), static_cast<long long>(o.group),
              static_cast<long long>(o.prompt_len), static_cast<long long>(o.new_tokens), bandwidth / 1e9);
  // Alternating rounds: a burst of load on the shared machine lands on every entry alike.
  for (int round = 0; round < o.iters; ++round)
    for (Entry& e : entries) {
      Stopwatch w;
      e.last = e.engine->generate(req);
      e.seconds.push_back(w.seconds());
      e.stats = e.last.stats;
    }
  const double base = median_of(entries.front().seconds);
  std::printf("  %-18s %10s %10s %9s %10s %12s %10s %8s %12s %10s %10s\n", "numerics", "tok/s", "ms/step", "speed",
              "KV B/tok", "weights MB", "floor ms", "x floor", "max|dlogp|", "k3", "full TV");
  for (const Entry& e : entries) {
    const double s = median_of(e.seconds);
    const double per_step = s / static_cast<double>(e.stats.steps);
    // A decode step reads every weight once: its bytes over the read bandwidth.
    const double floor_s = static_cast<double>(e.weight_bytes) / bandwidth;
    // Against the first entry's numerics (batch invariance aside: the training forward is invariant).
    const NumericsGap gap = numerics_gap(e, *entries.front().model, params, req);
    std::printf("  %-18s %10.0f %10.2f %8.2fx %10lld %12.1f %10.2f %8.1f %12.3g %10.3g %10.3g\n", e.spec.c_str(),
                static_cast<double>(e.stats.generated_tokens) / s, 1e3 * per_step, base / s,
                static_cast<long long>(e.engine->kv_bytes_per_token()), e.weight_bytes / 1e6, 1e3 * floor_s,
                per_step / floor_s, gap.sampled.max_abs_dlogp, gap.sampled.k3, gap.full_tv);
  }
  std::printf("  (median of %d rounds; speed = the first entry's time over this one's; floor = weight bytes a step "
              "reads over the measured read bandwidth; ms/step = a run's wall over its engine steps, prefill "
              "included; max|dlogp|, k3 (sampled tokens) and full TV (whole distributions) against the first "
              "entry's numerics on the same tokens)\n",
              o.iters);
  return 0;
}

}  // namespace rlcpp::bench
