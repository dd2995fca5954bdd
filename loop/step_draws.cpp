#include "loop/step_draws.h"

#include <cmath>
#include <iterator>

#include "core/error.h"
#include "core/json_input.h"
#include "core/metrics.h"
#include "loop/group_filter.h"
#include "loop/rollout_samples.h"
#include "loop/train_checkpoint.h"
#include "reward/overlong_penalty.h"
#include "reward/reward_result.h"

namespace rlcpp {

namespace {

// Sampling seed of a step: distinct per step and run seed, so no two steps reuse Philox draws.
uint64_t step_sampling_seed(uint64_t run_seed, int64_t step) {
  return run_seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(step);
}

// The seed of a step's refill draw (draw >= 1; draw 0 uses the step's seed): its prompt ids restart at 0, so
// its seed must differ from every step's.
uint64_t draw_sampling_seed(uint64_t run_seed, int64_t step, int64_t draw) {
  return step_sampling_seed(run_seed, step) ^ (0xD1B54A32D192ED03ull * static_cast<uint64_t>(draw));
}

// One draw: phases 1 (rollout) and 2 (reward) on rollout.prompts_per_step fresh problems; their wall seconds
// are added to `d`'s.
// The reward of every sample must be finite and within kMaxRewardMagnitude: named here, with the sample, rather
// than as a non-finite loss steps later.
void check_rewards(const DrawContext& ctx, const std::vector<RewardResult>& rewards,
                   const std::vector<std::string>& prompts, const std::vector<std::string>& responses, int64_t step) {
  const TrainConfig& cfg = ctx.config;
  for (size_t i = 0; i < rewards.size(); ++i) {
    const double total = rewards[i].total;
    RLCPP_CHECK(std::isfinite(total) && std::fabs(total) <= kMaxRewardMagnitude,
                "step " << step << ": the reward of sample " << i << " (task " << ctx.task.name() << ", prompt "
                        << json_excerpt(prompts[i], 80) << ", response " << json_excerpt(responses[i], 80)
                        << (cfg.agent.enabled() ? ", agent.env \"" + cfg.agent.env : ", reward.type \"" + cfg.reward.type)
                        << "\") is " << (std::isfinite(total) ? Json(total).dump() : std::to_string(total))
                        << ": a reward must be finite and within +-"
                        << kMaxRewardMagnitude << " (the trainer holds rewards in fp32); check the reward function");
  }
}

// An agent run's draw: episodes, their returns the rewards (loop/agent_rollout.h).
Draw draw_episodes(const DrawContext& ctx, uint64_t seed, int64_t version, StepDraws& d) {
  Stopwatch watch;
  EpisodeDraw e = ctx.agent->draw(ctx.rollout, ctx.data_rng, d.step, seed, version);
  d.rollout_s += watch.seconds() - e.env_s;
  d.env_s += e.env_s;
  Draw draw;
  draw.problems = std::move(e.problems);
  draw.rollout = std::move(e.rollout);
  draw.samples = std::move(e.samples);
  draw.rewards = std::move(e.rewards);
  draw.episodes = std::move(e.episodes);
  draw.agent_metrics = std::move(e.metrics);
  std::vector<std::string> prompts, responses;
  for (const Episode& ep : draw.episodes) {
    prompts.push_back(ep.problem.prompt);
    responses.push_back(ctx.agent->protocol().display(ep.tokens));
  }
  check_rewards(ctx, draw.rewards, prompts, responses, d.step);
  return draw;
}

// One draw: phases 1 (rollout) and 2 (reward) on rollout.prompts_per_step fresh problems; their wall seconds
// are added to `d`'s.
Draw draw_and_score(const DrawContext& ctx, uint64_t seed, int64_t version, StepDraws& d) {
  if (ctx.agent) return draw_episodes(ctx, seed, version, d);
  const TrainConfig& cfg = ctx.config;
  Draw draw;
  // 1 rollout
  Stopwatch rollout_watch;
  for (int64_t p = 0; p < cfg.rollout.prompts_per_step; ++p)
    draw.problems.push_back(ctx.task.sample_train(ctx.data_rng));
  SamplingParams sampling = cfg.rollout.sampling;
  sampling.seed = seed;
  sampling.logprob_space = cfg.algorithm.logprob_space;
  const Request request = make_rollout_request(draw.problems, ctx.tokenizer, cfg.rollout.group_size, sampling);
  draw.rollout = ctx.rollout.generate(request);
  d.rollout_s += rollout_watch.seconds();
  check_sample_versions(draw.rollout.samples, version);
  draw.samples = to_rollout_samples(request, draw.rollout);

  // 2 reward
  Stopwatch reward_watch;
  std::vector<RewardQuery> queries;
  for (const Sample& s : draw.rollout.samples)
    queries.push_back({&draw.problems[static_cast<size_t>(s.prompt_index)], ctx.tokenizer.decode(s.tokens),
                       s.finish_reason == FinishReason::kEos});
  draw.rewards = ctx.reward.score(queries);
  RLCPP_CHECK(draw.rewards.size() == draw.samples.size(),
              "reward: " << draw.rewards.size() << " results for " << draw.samples.size() << " samples");
  if (cfg.reward.overlong_buffer.enabled) {  // DAPO's soft overlong punishment, on either reward's results
    std::vector<int64_t> lengths;
    for (const Sample& s : draw.rollout.samples) lengths.push_back(static_cast<int64_t>(s.tokens.size()));
    apply_overlong_penalty(draw.rewards, lengths, cfg.rollout.sampling.max_new_tokens, cfg.reward.overlong_buffer);
  }
  std::vector<std::string> prompts, responses;
  for (const RewardQuery& q : queries) {
    prompts.push_back(q.problem->prompt);
    responses.push_back(q.response);
  }
  check_rewards(ctx, draw.rewards, prompts, responses, d.step);
  d.reward_s += reward_watch.seconds();
  return draw;
}

// Appends a later draw to the step's first: its prompt indices follow the earlier ones; counters and times add
// up (the draws ran one after another).
void append_draw(Draw& all, Draw&& more) {
  const int64_t offset = static_cast<int64_t>(all.problems.size());
  for (Sample& s : more.rollout.samples) s.prompt_index += offset;
  std::move(more.problems.begin(), more.problems.end(), std::back_inserter(all.problems));
  std::move(more.rollout.samples.begin(), more.rollout.samples.end(), std::back_inserter(all.rollout.samples));
  std::move(more.samples.begin(), more.samples.end(), std::back_inserter(all.samples));
  std::move(more.rewards.begin(), more.rewards.end(), std::back_inserter(all.rewards));
  std::move(more.episodes.begin(), more.episodes.end(), std::back_inserter(all.episodes));
  if (!more.episodes.empty()) all.agent_metrics = agent_metrics(all.episodes);  // over the step's episodes
  for (const char* key : {"agent/in_flight", "agent/retokenized_frac", "agent/env_s"})
    if (more.agent_metrics.count(key)) all.agent_metrics[key] = more.agent_metrics[key];
  all.rollout.stats.then(more.rollout.stats);
}

std::vector<float> reward_totals(const Draw& d) {
  std::vector<float> scores;
  for (const RewardResult& r : d.rewards) scores.push_back(static_cast<float>(r.total));
  return scores;
}


Json problem_to_json(const Problem& p) {
  return {{"prompt", p.prompt}, {"answer", p.answer}, {"meta", p.meta}, {"id", p.id}};
}
Problem problem_from_json(const Json& j, const std::string& where) {
  return {json_get<std::string>(j, "prompt", where), json_get<std::string>(j, "answer", where), json_field(j, "meta", where),
          json_get<uint64_t>(j, "id", where)};
}

Json scoring_to_json(const LogprobScoring& s) {
  return {{"temperature", s.temperature}, {"top_k", s.truncation.top_k}, {"top_p", s.truncation.top_p}};
}
// Files written before samples carried their scoring have none: refused, since the config it would be re-derived
// from may have changed since the draw.
LogprobScoring scoring_from_json(const Json& j, const std::string& where) {
  RLCPP_CHECK(j.contains("scoring"),
              where << ": no key 'scoring' (the temperature and truncation the sample was drawn with; files "
                       "written before samples carried it lack it): resume from a checkpoint without "
                    << kPendingRolloutsFile << ", or from a newer one");
  const Json& s = json_field(j, "scoring", where);
  const std::string at = where + " scoring";
  LogprobScoring scoring{json_get<float>(s, "temperature", at),
                         Truncation{json_get<int64_t>(s, "top_k", at), json_get<float>(s, "top_p", at)}};
  check_logprob_scoring(scoring, at);
  return scoring;
}

Json sample_to_json(const Sample& s) {
  return {{"prompt_index", s.prompt_index},
          {"sample_index", s.sample_index},
          {"tokens", s.tokens},
          {"logprobs", s.logprobs},
          {"finish_reason", finish_reason_name(s.finish_reason)},
          {"policy_version", s.policy_version},
          {"last_policy_version", s.last_policy_version},
          {"num_preemptions", s.num_preemptions},
          {"times", {s.scheduled_s, s.first_token_s, s.finished_s}},
          {"scoring", scoring_to_json(s.scoring)}};
}
Sample sample_from_json(const Json& j, const std::string& where) {
  Sample s;
  s.prompt_index = json_get<int64_t>(j, "prompt_index", where);
  s.sample_index = json_get<int64_t>(j, "sample_index", where);
  s.tokens = json_get<std::vector<int32_t>>(j, "tokens", where);
  s.logprobs = json_get<std::vector<float>>(j, "logprobs", where);
  try {
    s.finish_reason = finish_reason_from_name(json_get<std::string>(j, "finish_reason", where));
  } catch (const Error& e) {
    throw Error(where + ": key 'finish_reason': " + e.what());
  }
  s.policy_version = json_get<int64_t>(j, "policy_version", where);
  s.last_policy_version = json_get<int64_t>(j, "last_policy_version", where);
  s.num_preemptions = json_get<int64_t>(j, "num_preemptions", where);
  const std::vector<double> times = json_get<std::vector<double>>(j, "times", where);
  RLCPP_CHECK(times.size() == 3, where << ": key 'times' must hold 3 seconds, has " << times.size());
  s.scheduled_s = times[0], s.first_token_s = times[1], s.finished_s = times[2];
  s.scoring = scoring_from_json(j, where);
  return s;
}

Json trainer_sample_to_json(const RolloutSample& s) {
  Json j = {{"prompt", s.prompt}, {"response", s.response}, {"mask", s.mask}, {"rollout_logp", s.rollout_logp},
            {"scoring", scoring_to_json(s.scoring)}};
  if (!s.versions.empty()) j["versions"] = s.versions;
  return j;
}
RolloutSample trainer_sample_from_json(const Json& j, const std::string& where) {
  RolloutSample s;
  s.prompt = json_get<std::vector<int32_t>>(j, "prompt", where);
  s.response = json_get<std::vector<int32_t>>(j, "response", where);
  s.mask = json_get<std::vector<float>>(j, "mask", where);
  s.rollout_logp = json_get<std::vector<float>>(j, "rollout_logp", where);
  if (j.contains("versions")) s.versions = json_get<std::vector<int64_t>>(j, "versions", where);
  s.scoring = scoring_from_json(j, where);
  return s;
}

Json reward_result_to_json(const RewardResult& r) {
  Json components = Json::array();  // in order: the step's reward/* means are taken in it
  for (const auto& [name, value] : r.components) components.push_back({name, value});
  return {{"total", r.total}, {"correct", r.correct}, {"components", components}};
}
RewardResult reward_result_from_json(const Json& j, const std::string& where) {
  RewardResult r;
  r.total = json_get<double>(j, "total", where);
  r.correct = json_get<bool>(j, "correct", where);
  r.components = json_get<std::vector<std::pair<std::string, double>>>(j, "components", where);
  return r;
}

template <class T, class F> Json array_of(const std::vector<T>& items, F&& to_json) {
  Json out = Json::array();
  for (const T& item : items) out.push_back(to_json(item));
  return out;
}
template <class T, class F> std::vector<T> vector_of(const Json& j, const char* key, const std::string& where,
                                                     F&& from_json) {
  const Json& items = json_field(j, key, where);
  RLCPP_CHECK(items.is_array(), where << ": key '" << key << "' must be an array");
  std::vector<T> out;
  for (size_t i = 0; i < items.size(); ++i)
    out.push_back(from_json(items[i], where + " " + key + "[" + std::to_string(i) + "]"));
  return out;
}

}  // namespace

StepDraws draw_step(const DrawContext& ctx, int64_t step, int64_t version) {
  const TrainConfig& cfg = ctx.config;
  StepDraws d;
  d.step = step;
  d.policy_version = version;
  d.drawn = draw_and_score(ctx, step_sampling_seed(cfg.seed, step), version, d);
  const FilterGroupsConfig& filter = cfg.filter_groups;
  if (filter.enabled && filter.max_draws > 1) {
    while (count_informative_groups(reward_totals(d.drawn), cfg.rollout.group_size) < filter.max_groups &&
           d.draws < filter.max_draws) {
      append_draw(d.drawn, draw_and_score(ctx, draw_sampling_seed(cfg.seed, step, d.draws), version, d));
      ++d.draws;
    }
    d.cap_reached = count_informative_groups(reward_totals(d.drawn), cfg.rollout.group_size) < filter.max_groups;
  }
  return d;
}

Json step_draws_to_json(const StepDraws& d) {
  return {{"step", d.step},
          {"policy_version", d.policy_version},
          {"draws", d.draws},
          {"cap_reached", d.cap_reached},
          {"problems", array_of(d.drawn.problems, problem_to_json)},
          {"samples", array_of(d.drawn.rollout.samples, sample_to_json)},
          {"stats", d.drawn.rollout.stats.to_json()},
          {"trainer_samples", array_of(d.drawn.samples, trainer_sample_to_json)},
          {"rewards", array_of(d.drawn.rewards, reward_result_to_json)},
          {"episodes", array_of(d.drawn.episodes, episode_to_json)},
          {"agent_metrics", d.drawn.agent_metrics}};
}

StepDraws step_draws_from_json(const Json& j, const std::string& where) {
  StepDraws d;
  d.step = json_get<int64_t>(j, "step", where);
  d.policy_version = json_get<int64_t>(j, "policy_version", where);
  d.draws = json_get<int64_t>(j, "draws", where);
  d.cap_reached = json_get<bool>(j, "cap_reached", where);
  d.drawn.problems = vector_of<Problem>(j, "problems", where, problem_from_json);
  d.drawn.rollout.samples = vector_of<Sample>(j, "samples", where, sample_from_json);
  try {
    d.drawn.rollout.stats = RolloutStats::from_json(json_field(j, "stats", where));
  } catch (const Error& e) {
    throw Error(where + ": key 'stats': " + e.what());
  }
  d.drawn.samples = vector_of<RolloutSample>(j, "trainer_samples", where, trainer_sample_from_json);
  d.drawn.rewards = vector_of<RewardResult>(j, "rewards", where, reward_result_from_json);
  if (j.contains("episodes")) {  // an agent run's (older checkpoints have none)
    d.drawn.episodes = vector_of<Episode>(j, "episodes", where, episode_from_json);
    d.drawn.agent_metrics = json_get<std::map<std::string, double>>(j, "agent_metrics", where);
  }
  const bool episodes = !d.drawn.episodes.empty();
  const size_t n = d.drawn.rollout.samples.size();
  RLCPP_CHECK(d.drawn.samples.size() == n && d.drawn.rewards.size() == n && (!episodes || d.drawn.episodes.size() == n),
              where << ": " << n << " samples but " << d.drawn.samples.size() << " trainer samples, "
                    << d.drawn.rewards.size() << " rewards and " << d.drawn.episodes.size() << " episodes");
  for (size_t i = 0; i < n; ++i) {
    const Sample& s = d.drawn.rollout.samples[i];
    RLCPP_CHECK(s.prompt_index >= 0 && s.prompt_index < static_cast<int64_t>(d.drawn.problems.size()),
                where << ": samples[" << i << "] has prompt_index " << s.prompt_index << " of "
                      << d.drawn.problems.size() << " problems");
    // An episode may have started in an earlier draw (agent.turns_per_draw): its first tokens are older.
    const bool versions_ok = episodes ? s.policy_version <= s.last_policy_version && s.last_policy_version <= d.policy_version
                                      : s.policy_version == d.policy_version && s.last_policy_version == d.policy_version;
    RLCPP_CHECK(versions_ok,
                where << ": samples[" << i << "] was sampled by policy version " << s.policy_version
                      << (s.last_policy_version != s.policy_version ? ".." + std::to_string(s.last_policy_version) : "")
                      << ", the draws by " << d.policy_version);
    // Re-tokenized episodes (agent.tokenization) train on other tokens than were sampled, by design.
    RLCPP_CHECK(s.logprobs.size() == s.tokens.size() &&
                    (episodes || (d.drawn.samples[i].response == s.tokens && d.drawn.samples[i].rollout_logp == s.logprobs)),
                where << ": samples[" << i << "] and trainer_samples[" << i << "] disagree");
    RLCPP_CHECK(d.drawn.samples[i].scoring == s.scoring,
                where << ": samples[" << i << "] was drawn at " << s.scoring.describe() << " but trainer_samples[" << i
                      << "] is to be scored at " << d.drawn.samples[i].scoring.describe());
    if (episodes)
      RLCPP_CHECK(d.drawn.episodes[i].tokens == s.tokens,
                  where << ": samples[" << i << "] and episodes[" << i << "] disagree");
  }
  return d;
}

}  // namespace rlcpp
