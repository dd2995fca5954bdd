#include "bench/agent_bench.h"

#include <algorithm>
#include <cstdio>

#include "bench/bench_common.h"
#include "core/error.h"
#include "core/philox.h"
#include "model/init.h"
#include "model/model_config.h"
#include "rollout/engine.h"

namespace rlcpp::bench {

namespace {

struct EpisodeCost {
  double prefilled_tokens = 0;  // per episode
  double seconds = 0;           // wall time of all episodes side by side, per episode
};

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  PhiloxStream rng(seed, 0);
  std::vector<int32_t> out;
  // Ids 3.. (past PAD, BOS, EOS): an observation never ends the episode's sequence by accident.
  for (int64_t i = 0; i < n; ++i) out.push_back(3 + static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab - 3))));
  return out;
}

SamplingParams turn_sampling(const AgentBenchOptions& o) {
  SamplingParams s;
  s.max_new_tokens = o.turn_tokens;
  s.ignore_eos = true;  // every turn samples exactly turn_tokens: both sides do the same decoding work
  s.seed = 5;
  return s;
}

// Sessions: the history's K/V kept between turns.
EpisodeCost run_kept(Engine& engine, const AgentBenchOptions& o, int64_t turns, int64_t vocab) {
  Stopwatch watch;
  std::vector<int64_t> ids;
  for (int64_t e = 0; e < o.episodes; ++e)
    ids.push_back(engine.open_session({random_tokens(o.prompt_len, vocab, 100 + e), static_cast<uint64_t>(e), 0}));
  int64_t prefilled = 0;
  for (int64_t t = 0; t < turns; ++t) {
    if (t > 0)
      for (int64_t e = 0; e < o.episodes; ++e) engine.append(ids[e], random_tokens(o.observation_len, vocab, 1000 * t + e));
    std::vector<TurnRequest> requests;
    for (int64_t id : ids) requests.push_back({id, turn_sampling(o)});
    RolloutStats stats;
    engine.run_turns(requests, {}, &stats);
    prefilled += stats.prefill_tokens;
  }
  for (int64_t id : ids) engine.close_session(id);
  const double n = static_cast<double>(o.episodes);
  return {static_cast<double>(prefilled) / n, watch.seconds() / n};
}

// Stateless: every turn sends the whole history as a new prompt.
EpisodeCost run_reprefilled(Engine& engine, const AgentBenchOptions& o, int64_t turns, int64_t vocab) {
  Stopwatch watch;
  std::vector<std::vector<int32_t>> history;
  for (int64_t e = 0; e < o.episodes; ++e) history.push_back(random_tokens(o.prompt_len, vocab, 100 + e));
  int64_t prefilled = 0;
  for (int64_t t = 0; t < turns; ++t) {
    if (t > 0)
      for (int64_t e = 0; e < o.episodes; ++e) {
        const std::vector<int32_t> obs = random_tokens(o.observation_len, vocab, 1000 * t + e);
        history[e].insert(history[e].end(), obs.begin(), obs.end());
      }
    Request r;
    r.prompts = history;
    for (int64_t e = 0; e < o.episodes; ++e) r.prompt_ids.push_back(static_cast<uint64_t>(e));
    r.sampling = turn_sampling(o);
    const RolloutResult result = engine.generate(r);
    prefilled += result.stats.prefill_tokens;
    for (const Sample& s : result.samples)
      history[s.prompt_index].insert(history[s.prompt_index].end(), s.tokens.begin(), s.tokens.end());
  }
  const double n = static_cast<double>(o.episodes);
  return {static_cast<double>(prefilled) / n, watch.seconds() / n};
}

// The median run of `fn` (by wall time) of o.iters after one warm-up.
template <class F> EpisodeCost median_run(const AgentBenchOptions& o, F&& fn) {
  fn();
  std::vector<EpisodeCost> runs;
  for (int i = 0; i < o.iters; ++i) runs.push_back(fn());
  std::sort(runs.begin(), runs.end(), [](const EpisodeCost& a, const EpisodeCost& b) { return a.seconds < b.seconds; });
  return runs[runs.size() / 2];
}

}  // namespace

int run_agent_bench(const AgentBenchOptions& o) {
  RLCPP_CHECK(!o.turns.empty() && o.episodes >= 1 && o.prompt_len >= 1 && o.turn_tokens >= 1 &&
                  o.observation_len >= 0 && o.iters >= 1,
              "bench agent: --turns, --episodes, --prompt-len, --new-tokens and --iters must be >= 1");
  const int64_t longest = *std::max_element(o.turns.begin(), o.turns.end());
  RLCPP_CHECK(longest >= 1, "bench agent: --turns must be >= 1, got " << longest);
  ModelConfig mc = model_shapes(o.preset);
  // Room for the longest episode (a random-weight model: its context is only a cap).
  const int64_t need = o.prompt_len + longest * (o.turn_tokens + o.observation_len);
  mc.max_position_embeddings = std::max(mc.max_position_embeddings, need);
  const ParameterStore params = init_random(mc, 7);
  const Transformer model(mc);
  EngineConfig ec;
  ec.max_num_seqs = o.episodes;
  ec.max_context = need;  // W2's 32,768 positions would size the batch limits for nothing
  ec.max_num_batched_tokens = std::max<int64_t>(ec.max_num_batched_tokens, o.episodes * need);
  Engine engine(model, params, ec);
  std::printf("bench agent: %s, %lld episodes side by side, prompt %lld, %lld tokens sampled per turn, observations "
              "of %lld, median of %d\n",
              o.preset.c_str(), static_cast<long long>(o.episodes), static_cast<long long>(o.prompt_len),
              static_cast<long long>(o.turn_tokens), static_cast<long long>(o.observation_len), o.iters);
  std::printf("%6s | %22s | %22s | %14s | %10s\n", "turns", "prefilled/episode kept", "re-prefilled", "prefill ratio",
              "time ratio");
  for (int64_t turns : o.turns) {
    RLCPP_CHECK(turns >= 1, "bench agent: --turns must be >= 1, got " << turns);
    const EpisodeCost kept = median_run(o, [&] { return run_kept(engine, o, turns, mc.vocab_size); });
    const EpisodeCost again = median_run(o, [&] { return run_reprefilled(engine, o, turns, mc.vocab_size); });
    std::printf("%6lld | %10.0f (%7.1f ms) | %10.0f (%7.1f ms) | %13.2fx | %9.2fx\n", static_cast<long long>(turns),
                kept.prefilled_tokens, 1e3 * kept.seconds, again.prefilled_tokens, 1e3 * again.seconds,
                again.prefilled_tokens / kept.prefilled_tokens, again.seconds / kept.seconds);
  }
  return 0;
}

}  // namespace rlcpp::bench
