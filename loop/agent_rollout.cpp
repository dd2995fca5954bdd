#include "loop/agent_rollout.h"

#include <algorithm>
#include <cstdio>

#include "agent/retokenize.h"
#include "core/error.h"
#include "core/metrics.h"
#include "loop/engine_turns.h"
#include "loop/harness_rollout.h"
#include "tokenizer/hf_tokenizer.h"

namespace rlcpp {

namespace {

// Environments a round steps side by side when they wait on a server.
constexpr int64_t kRemoteEnvThreads = 16;

bool same_group(const Episode& a, const Episode& b) { return a.first_step == b.first_step && a.group == b.group; }

}  // namespace

RolloutSample episode_sample(const Episode& e, const LogprobScoring& scoring) {
  RolloutSample s;
  s.scoring = scoring;
  s.prompt = e.prompt;
  s.response = e.tokens;
  s.mask = e.loss_mask();
  s.rollout_logp = e.logprobs;
  s.versions = e.versions;
  return s;
}

Sample episode_engine_sample(const Episode& e, int64_t prompt_index, const LogprobScoring& scoring) {
  Sample s;
  s.scoring = scoring;
  s.prompt_index = prompt_index;
  s.sample_index = e.sample_index;
  s.tokens = e.tokens;
  s.logprobs = e.logprobs;
  s.finish_reason = e.done ? FinishReason::kEos : FinishReason::kLength;
  int64_t first = -1, last = -1;
  for (size_t t = 0; t < e.tokens.size(); ++t)
    if (e.sources[t] == TokenSource::kModel) {
      if (first < 0) first = e.versions[t];
      last = e.versions[t];
    }
  s.policy_version = first;
  s.last_policy_version = last;
  return s;
}

RewardResult episode_reward(const Episode& e) {
  RewardResult r;
  r.total = e.reward;
  r.correct = e.success.value_or(false);
  r.components = {{"turns", static_cast<double>(e.turns())},
                  {"tool_calls", static_cast<double>(e.tool_calls)},
                  {"tool_errors", static_cast<double>(e.tool_errors)},
                  {"env_tokens", static_cast<double>(e.env_tokens)},
                  {"truncated", e.truncated ? 1.0 : 0.0},
                  {"success", e.success.value_or(false) ? 1.0 : 0.0}};
  return r;
}

std::map<std::string, double> agent_metrics(const std::vector<Episode>& episodes) {
  std::map<std::string, double> m;
  const double n = static_cast<double>(episodes.size());
  m["agent/episodes"] = n;
  if (episodes.empty()) return m;
  double turns = 0, calls = 0, errors = 0, env_tokens = 0, truncated = 0, success = 0, failures = 0, prefilled = 0,
         recomputed = 0;
  for (const Episode& e : episodes) {
    turns += static_cast<double>(e.turns());
    calls += static_cast<double>(e.tool_calls);
    errors += static_cast<double>(e.tool_errors);
    env_tokens += static_cast<double>(e.env_tokens);
    truncated += e.truncated ? 1 : 0;
    success += e.success.value_or(false) ? 1 : 0;
    failures += e.end_reason == "env_error" || e.end_reason == "env_timeout" ? 1 : 0;
    prefilled += static_cast<double>(e.prefilled_tokens);
    recomputed += static_cast<double>(e.recomputed_tokens);
  }
  m["agent/turns_mean"] = turns / n;
  m["agent/tool_calls"] = calls / n;
  m["agent/tool_errors"] = errors / n;
  m["agent/tool_success"] = calls > 0 ? (calls - errors) / calls : 0.0;
  m["agent/env_tokens"] = env_tokens / n;
  m["agent/truncated"] = truncated / n;
  m["agent/success"] = success / n;
  m["agent/env_failures"] = failures / n;
  m["agent/prefilled_tokens"] = prefilled / n;
  m["agent/recomputed_tokens"] = recomputed / n;
  return m;
}

AgentRollout::AgentRollout(const TrainConfig& config, const Task& task, const Tokenizer& tokenizer)
    : config_(config),
      task_(task),
      tokenizer_(tokenizer),
      protocol_(make_turn_protocol(tokenizer, config.chat.enable_thinking, config.chat.system)),
      envs_(std::make_unique<EnvMaker>(config.agent, task)) {
  RLCPP_CHECK(config.agent.tokenization != "retokenize" || dynamic_cast<const HfTokenizer*>(&tokenizer) != nullptr,
              "config key 'agent.tokenization': \"retokenize\" re-renders conversations with a chat template; "
                  << tokenizer.describe() << " has none (it needs a tokenizer.json with Qwen3's template)");
}

AgentRollout::~AgentRollout() = default;

EpisodeDraw AgentRollout::draw(RolloutBackend& backend, PhiloxStream& data_rng, int64_t step, uint64_t seed,
                               int64_t version) {
  const TrainConfig& cfg = config_;
  std::vector<Episode> episodes = std::move(in_flight_);
  in_flight_.clear();
  const int64_t group = cfg.rollout.group_size;
  for (int64_t g = 0; g < cfg.rollout.prompts_per_step; ++g) {
    const Problem problem = task_.sample_train(data_rng);
    for (int64_t i = 0; i < group; ++i) {
      Episode e;
      e.problem = problem;
      e.group = g;
      e.sample_index = i;
      e.seed = seed;
      e.first_step = step;
      episodes.push_back(std::move(e));
    }
  }
  SamplingParams base = cfg.rollout.sampling;
  base.logprob_space = cfg.algorithm.logprob_space;
  // Every turn samples with `base` (loop/engine_turns.h; a harness's sessions too), so every episode's log-probs
  // are of its scoring.
  const LogprobScoring scoring = base.scoring();
  EpisodeDraw out;
  if (cfg.agent.harness_mode()) {
    // The placement's turn engine serves the harness's sessions (in-process, split or remote workers).
    const std::unique_ptr<RolloutTurnEngine> engine = backend.turn_engine(base);
    SamplingParams sampling = base;
    sampling.seed = seed;
    if (served_vocab_size_ == 0)  // token-id prompts are checked against the served model's vocabulary
      served_vocab_size_ = engine_model_config(cfg.policy_model_config(), cfg.rollout.engine).vocab_size;
    const int64_t vocab_size = served_vocab_size_;
    HarnessDraw h;
    if (cfg.agent.spans_draws()) {  // one harness for the run; its episodes span syncs
      if (!harness_run_)
        harness_run_ = std::make_unique<HarnessRun>(tokenizer_, *protocol_, cfg, sampling, engine->context(), vocab_size);
      h = harness_run_->play(episodes, *engine, harness_draw_ends_episodes(step));
    } else {
      h = play_with_harness(episodes, *engine, tokenizer_, *protocol_, cfg, sampling, vocab_size);
    }
    out.env_s = h.env_s;
    out.rollout.stats = h.stats;
    out.metrics["agent/harness_dropped_items"] = static_cast<double>(h.dropped_groups);
    out.metrics["agent/harness_requests"] = static_cast<double>(h.requests);
  } else {
    const std::unique_ptr<RolloutTurnEngine> engine = backend.turn_engine(base);
    std::vector<Episode*> run;
    for (Episode& e : episodes) run.push_back(&e);
    const RunnerTotals totals = run_episodes(run, *engine, envs_->factory(), *protocol_, cfg.agent,
                                             envs_->remote() ? kRemoteEnvThreads : 1);
    out.env_s = totals.env_seconds;
    out.rollout.stats = engine->stats();
  }
  int64_t differs = 0;
  const auto* hf = dynamic_cast<const HfTokenizer*>(&tokenizer_);
  for (size_t begin = 0; begin < episodes.size();) {
    size_t end = begin + 1;
    while (end < episodes.size() && same_group(episodes[end], episodes[begin])) ++end;
    const bool complete = std::all_of(episodes.begin() + begin, episodes.begin() + end,
                                      [](const Episode& e) { return e.finished(); });
    // A harness that wrote an episode's reward without a turn of it: its task item is left out of the step.
    const bool unplayed = std::any_of(episodes.begin() + begin, episodes.begin() + end,
                                      [](const Episode& e) { return e.end_reason == kUnplayed; });
    if (!complete) {
      for (size_t i = begin; i < end; ++i) in_flight_.push_back(std::move(episodes[i]));
    } else if (unplayed) {
      out.metrics["agent/harness_dropped_items"] += 1;
    } else {
      const int64_t prompt_index = static_cast<int64_t>(out.problems.size());
      out.problems.push_back(episodes[begin].problem);
      for (size_t i = begin; i < end; ++i) {
        Episode& e = episodes[i];
        for (size_t t = 0; t < e.tokens.size(); ++t)
          RLCPP_CHECK(e.sources[t] != TokenSource::kModel || (e.versions[t] >= 0 && e.versions[t] <= version),
                      "agent: episode " << episode_key(e) << " token " << t << " carries policy version "
                                        << e.versions[t] << ", the engine holds " << version);
        out.rollout.samples.push_back(episode_engine_sample(e, prompt_index, scoring));
        if (cfg.agent.tokenization == "retokenize") {
          const Retokenized r = retokenize(e, *hf, *protocol_, cfg.chat.system, cfg.chat.enable_thinking);
          RolloutSample s;
          s.prompt = r.prompt;
          s.response = r.response;
          s.mask = r.mask;
          s.rollout_logp = r.rollout_logp;
          s.scoring = scoring;
          out.samples.push_back(std::move(s));
          differs += r.differs ? 1 : 0;
        } else {
          out.samples.push_back(episode_sample(e, scoring));
        }
        out.rewards.push_back(episode_reward(e));
        out.episodes.push_back(std::move(e));
      }
    }
    begin = end;
  }
  for (const auto& [k, v] : agent_metrics(out.episodes)) out.metrics[k] = v;
  out.metrics["agent/in_flight"] = static_cast<double>(in_flight_.size());
  out.metrics["agent/env_s"] = out.env_s;
  // The share of episodes whose trained token ids are not the engine's (tito: exactly 0).
  out.metrics["agent/retokenized_frac"] =
      out.episodes.empty() ? 0.0 : static_cast<double>(differs) / static_cast<double>(out.episodes.size());
  return out;
}

Json AgentRollout::in_flight_to_json() const {
  if (in_flight_.empty()) return nullptr;
  Json out = Json::array();
  for (const Episode& e : in_flight_) out.push_back(episode_to_json(e));
  return out;
}

void AgentRollout::restore_in_flight(const Json& saved, const std::string& where) {
  in_flight_.clear();
  if (saved.is_null()) return;
  RLCPP_CHECK(saved.is_array(), where << ": must be an array of episodes in flight");
  std::vector<Episode> restored;
  for (size_t i = 0; i < saved.size(); ++i) {
    Episode e = episode_from_json(saved[i], where + " [" + std::to_string(i) + "]");
    if (!e.finished() && !config_.agent.harness_mode()) replay_episode(e, envs_->factory(), *protocol_);
    restored.push_back(std::move(e));
  }
  if (!config_.agent.harness_mode()) {
    in_flight_ = std::move(restored);
    return;
  }
  // A harness's episode still running went with the harness that played it: its group is left out.
  int64_t dropped = 0;
  for (size_t begin = 0; begin < restored.size();) {
    size_t end = begin + 1;
    while (end < restored.size() && same_group(restored[end], restored[begin])) ++end;
    const bool ended = std::all_of(restored.begin() + begin, restored.begin() + end,
                                   [](const Episode& e) { return e.finished(); });
    for (size_t i = begin; ended && i < end; ++i) in_flight_.push_back(std::move(restored[i]));
    dropped += ended ? 0 : 1;
    begin = end;
  }
  if (dropped > 0)
    std::fprintf(stderr, "%s: %lld task items had harness episodes still running when the run was stopped; a "
                         "harness's conversations are its own, so they are left out of the resumed run\n",
                 where.c_str(), static_cast<long long>(dropped));
}

bool AgentRollout::harness_draw_ends_episodes(int64_t step) const {
  // With async.max_staleness N, the draws held when step s writes its checkpoint reach step s + N.
  const int64_t checkpoint_step = step - config_.async.max_staleness;
  return step >= config_.steps ||
         (config_.checkpoint_every > 0 && checkpoint_step > 0 && checkpoint_step % config_.checkpoint_every == 0);
}

}  // namespace rlcpp
