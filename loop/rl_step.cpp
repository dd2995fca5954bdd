#include "loop/rl_step.h"

#include <cmath>
#include <limits>
#include <cstdio>

#include "core/error.h"
#include "loop/consistency_probe.h"
#include "loop/data_parallel_step.h"
#include "loop/group_filter.h"
#include "loop/mismatch.h"
#include "loop/rollout_metrics.h"
#include "model/forward_comparison.h"
#include "model/weight_error.h"
#include "trainer/algorithm.h"
#include "trainer/rollout_batch.h"
#include "reward/reward_result.h"
#include "trainer/rollout_corr_metrics.h"

namespace rlcpp {

namespace {

// Mean of every reward component over the batch (reward/<name>), plus the mean and std of the total.
void add_reward_metrics(const std::vector<RewardResult>& results, std::map<std::string, double>& out) {
  if (results.empty()) return;  // an agent step whose episodes all run on into the next draw: no reward yet
  double sum = 0, sum_sq = 0;
  for (const RewardResult& r : results) {
    sum += r.total;
    sum_sq += r.total * r.total;
  }
  const double n = static_cast<double>(results.size());
  out["reward/mean"] = sum / n;
  out["reward/std"] = std::sqrt(std::max(0.0, sum_sq / n - (sum / n) * (sum / n)));
  for (const auto& [name, mean] : mean_reward_components(results))
    if (name != "total") out["reward/" + name] = mean;
}

// Phases 3-6 on the batch that is trained on: old log-probs (and their mismatch against the engine's), reference
// log-probs, each as the algorithm needs them, then the algorithm's advantages and updates.
void learn_from_batch(RlContext& ctx, ScoredBatch& batch, PhaseTimer& timer, StepResult& out) {
  const TrainConfig& cfg = ctx.config;
  const int64_t micro = cfg.ppo.micro_batch_size;
  // Forward-only log-probs of the batch's samples under a model's weights (split over the ranks, data-parallel).
  const auto response_logp = [&](const Transformer& model, const ParameterStore& params) {
    if (ctx.comm == nullptr)
      return compute_response_logp(ctx.actor.context(), model, params, batch.samples, micro, batch.temperature,
                                   batch.truncation);
    return response_logp_over_ranks(ctx.actor.context(), *ctx.comm, model, params, batch.samples, micro,
                                    batch.temperature, batch.truncation);
  };
  const Algorithm& algorithm = find_algorithm(cfg.algorithm.name);
  const AlgorithmNeeds needs = algorithm.needs(cfg.algorithm);

  // 3 old log-probs (the policy the update starts from) and the mismatch against the engine's: mismatch/* and
  // verl's rollout_corr/* figures. In bypass mode the rollout's own log-probs are the old ones (no phase 3).
  const bool bypass = cfg.algorithm.policy_loss.rollout_correction.bypass;
  if (needs.old_logp && bypass) {
    for (RolloutSample& s : batch.samples) s.old_logp = s.rollout_logp;
  } else if (needs.old_logp) {
    std::vector<std::vector<float>> old_logp =
        timer.time(Phase::kOldLogprob, [&] { return response_logp(ctx.model, ctx.params); });
    std::vector<std::vector<float>> rollout_logp, trainer_logp;
    // An agent run's tokens sampled by the version the update starts from (episodes spanning syncs hold older
    // ones too): mismatch/current_version/* is the numerics' own, without the policy's lag.
    std::vector<std::vector<float>> current_rollout, current_trainer;
    for (size_t i = 0; i < batch.samples.size(); ++i) {
      const RolloutSample& s = batch.samples[i];
      if (ctx.agent == nullptr) {
        rollout_logp.push_back(s.rollout_logp);
        trainer_logp.push_back(old_logp[i]);
        continue;
      }
      // An episode's environment tokens (mask 0) were appended, not sampled: no engine log-prob to compare.
      std::vector<float> sampled, recomputed, current_sampled, current_recomputed;
      for (size_t t = 0; t < s.mask.size(); ++t)
        if (s.mask[t] > 0) {
          sampled.push_back(s.rollout_logp[t]);
          recomputed.push_back(old_logp[i][t]);
          if (t < s.versions.size() && s.versions[t] == ctx.version) {
            current_sampled.push_back(s.rollout_logp[t]);
            current_recomputed.push_back(old_logp[i][t]);
          }
        }
      rollout_logp.push_back(std::move(sampled));
      trainer_logp.push_back(std::move(recomputed));
      current_rollout.push_back(std::move(current_sampled));
      current_trainer.push_back(std::move(current_recomputed));
    }
    for (const auto& [k, v] : logprob_mismatch(rollout_logp, trainer_logp).metrics()) out.metrics[k] = v;
    if (ctx.agent) {
      const Mismatch current = logprob_mismatch(current_rollout, current_trainer);
      if (current.tokens > 0)
        for (const auto& [k, v] : current.metrics("mismatch/current_version/")) out.metrics[k] = v;
    }
    for (const auto& [k, v] : rollout_corr_metrics(rollout_logp, trainer_logp, cfg.mismatch.ratio_bound))
      out.metrics[k] = v;
    // The whole next-token distributions of the two numerics on the step's first samples (the same forward
    // numerics give the same bits: nothing to compare).
    if (ctx.rollout_model && !ctx.rollout_model->numerics().same_forward(ctx.model.numerics()) &&
        cfg.mismatch.full_vocab_samples > 0) {
      std::vector<size_t> first(static_cast<size_t>(
          std::min<int64_t>(cfg.mismatch.full_vocab_samples, static_cast<int64_t>(batch.samples.size()))));
      for (size_t i = 0; i < first.size(); ++i) first[i] = i;
      // Measurement, not training: a phase of its own (mismatch), so the update's figures stay the update's.
      const ForwardComparison full = timer.time(Phase::kMismatch, [&] {
        return compare_forward(ctx.actor.context(), *ctx.rollout_model, ctx.params, ctx.model, ctx.params,
                               pack_rollout(batch.samples, first).batch, batch.temperature,
                               cfg.probe.layer_threshold);
      });
      out.metrics["rollout_corr/full_kl"] = full.full_kl_mean;
      out.metrics["rollout_corr/full_kl_max"] = full.full_kl_max;
      out.metrics["rollout_corr/full_tv"] = full.full_tv_mean;
      out.metrics["rollout_corr/full_tv_max"] = full.full_tv_max;
    }
    for (size_t i = 0; i < batch.samples.size(); ++i) batch.samples[i].old_logp = std::move(old_logp[i]);
  }

  // 4 reference log-probs, only when a KL term needs them; the teacher's, for distillation
  if (needs.teacher_logp) {
    RLCPP_CHECK(ctx.teacher != nullptr && ctx.teacher_model != nullptr,
                "rl_step: " << cfg.algorithm.name << " needs the teacher (algorithm.distill.teacher)");
    std::vector<std::vector<float>> teacher =
        timer.time(Phase::kRefLogprob, [&] { return response_logp(*ctx.teacher_model, *ctx.teacher); });
    for (size_t i = 0; i < batch.samples.size(); ++i) batch.samples[i].ref_logp = std::move(teacher[i]);
  } else if (needs.ref_logp) {
    RLCPP_CHECK(ctx.reference != nullptr, "rl_step: " << cfg.algorithm.name << " needs the reference policy");
    std::vector<std::vector<float>> ref =
        timer.time(Phase::kRefLogprob, [&] { return response_logp(ctx.model, *ctx.reference); });
    for (size_t i = 0; i < batch.samples.size(); ++i) batch.samples[i].ref_logp = std::move(ref[i]);
  }

  // 5-6 the algorithm: advantages (values), updates
  UpdateContext update{cfg.algorithm,       cfg.ppo,    cfg.rollout.group_size, cfg.run_optimizer_steps(),
                       ctx.actor,           ctx.critic, ctx.reference,          ctx.update_rng};
  algorithm.update(update, batch, timer, out.metrics);
}

}  // namespace

StepResult learn_step(RlContext& ctx, StepDraws&& drawn, PhaseTimer& timer) {
  const TrainConfig& cfg = ctx.config;
  const int64_t group = cfg.rollout.group_size;
  const int64_t step = drawn.step;
  StepResult out;
  if (cfg.filter_groups.enabled && cfg.filter_groups.max_draws > 1) {
    out.metrics["filter/draws"] = static_cast<double>(drawn.draws);
    out.metrics["filter/cap_reached"] = drawn.cap_reached ? 1.0 : 0.0;
  }
  std::vector<Problem>& problems = drawn.drawn.problems;
  const RolloutResult& rollout = drawn.drawn.rollout;
  std::vector<RewardResult>& rewards = drawn.drawn.rewards;
  ScoredBatch batch;
  int64_t sequence_tokens = 0;
  batch.samples = std::move(drawn.drawn.samples);
  // Scored as the engine drew them (each sample carries it), not as the config says now.
  const LogprobScoring scoring = common_logprob_scoring(batch.samples, LogprobScoring{});
  batch.temperature = scoring.temperature;
  batch.truncation = scoring.truncation;
  for (const auto& [k, v] : rollout_metrics(rollout)) out.metrics[k] = v;
  // The engine's wall time for these draws (in this step, or ahead of it in the async pipeline; 0 for draws a
  // resume read back from a checkpoint): what rollout tokens/s divides by.
  out.metrics["timing_s/rollout_draws"] = drawn.rollout_s;
  out.metrics["tokens/sampled"] = static_cast<double>(rollout.stats.generated_tokens);
  out.metrics["rollout/policy_version"] = static_cast<double>(drawn.policy_version);
  // Off-policy (the async pipeline): how many versions older than the policy the update starts from the
  // samples are. Every sample of a step comes from one version, so mean and max agree; samples older than
  // async.max_staleness are dropped (only a pending rollout resumed under a lower bound can be).
  const int64_t staleness = ctx.version - drawn.policy_version;
  const bool too_stale = staleness > cfg.async.max_staleness;
  out.metrics["training/off_policy/staleness_mean"] = static_cast<double>(staleness);
  out.metrics["training/off_policy/staleness_max"] = static_cast<double>(staleness);
  out.metrics["training/off_policy/dropped_samples"] = too_stale ? static_cast<double>(rollout.samples.size()) : 0;
  // Episodes span versions (agent.turns_per_draw): each sampled token's own staleness; its rollout_logp is of the
  // version that sampled it, so the rollout corrections (TIS, MIS) weigh it against that behaviour policy.
  double token_staleness = 0, token_staleness_max = 0, sampled_tokens = 0;
  for (const RolloutSample& s : batch.samples)
    for (int64_t v : s.versions)
      if (v >= 0) {
        token_staleness += static_cast<double>(ctx.version - v);
        token_staleness_max = std::max(token_staleness_max, static_cast<double>(ctx.version - v));
        sampled_tokens += 1;
      }
  if (sampled_tokens > 0) {
    out.metrics["training/off_policy/token_staleness_mean"] = token_staleness / sampled_tokens;
    out.metrics["training/off_policy/token_staleness_max"] = token_staleness_max;
  }
  for (const auto& [k, v] : drawn.drawn.agent_metrics) out.metrics[k] = v;
  add_reward_metrics(rewards, out.metrics);
  const auto mean = out.metrics.find("reward/mean");
  out.mean_reward = mean == out.metrics.end() ? std::numeric_limits<double>::quiet_NaN() : mean->second;
  for (size_t i = 0; i < batch.samples.size(); ++i) {
    batch.scores.push_back(static_cast<float>(rewards[i].total));
    batch.group_ids.push_back(rollout.samples[i].prompt_index);
    batch.rollout_index.push_back(static_cast<int64_t>(i));
    const RolloutSample& s = batch.samples[i];
    batch.max_response = std::max<int64_t>(batch.max_response, static_cast<int64_t>(s.response.size()));
    sequence_tokens += static_cast<int64_t>(s.prompt.size() + s.response.size());
  }
  out.metrics["tokens/sequences"] = static_cast<double>(sequence_tokens);

  // 2b dynamic sampling: only groups with a reward spread go on to the old log-probs and the update
  if (too_stale) {
    batch = ScoredBatch{};
    std::printf("train: step %lld drops its %zu samples: policy version %lld is %lld versions old, "
                "async.max_staleness is %lld\n", static_cast<long long>(step), rollout.samples.size(),
                static_cast<long long>(drawn.policy_version), static_cast<long long>(staleness),
                static_cast<long long>(cfg.async.max_staleness));
  } else if (cfg.filter_groups.enabled) {
    filter_informative_groups(batch, group, cfg.filter_groups, out.metrics);
    if (batch.samples.empty()) out.metrics["filter/skipped_update"] = 1;  // every group tied: nothing to learn
  }
  // Trained tokens: what went through the policy's forward + backward (the groups dynamic sampling kept, every
  // epoch's pass, DPO's pairs), counted by the updater itself.
  const int64_t trained_before = ctx.actor.tokens_trained();
  if (!batch.samples.empty()) learn_from_batch(ctx, batch, timer, out);
  out.metrics["tokens/trained"] = static_cast<double>(ctx.actor.tokens_trained() - trained_before);

  std::vector<int64_t> trained_position(rollout.samples.size(), -1);  // -1: dropped by filter_groups
  for (size_t i = 0; i < batch.rollout_index.size(); ++i)
    trained_position[static_cast<size_t>(batch.rollout_index[i])] = static_cast<int64_t>(i);
  for (int64_t i = 0; i < cfg.samples_per_step && i < static_cast<int64_t>(rollout.samples.size()); ++i) {
    const Sample& s = rollout.samples[static_cast<size_t>(i)];
    const std::vector<Episode>& episodes = drawn.drawn.episodes;
    Json line = {{"step", step},
                 {"prompt", problems[static_cast<size_t>(s.prompt_index)].prompt},
                 {"response", ctx.agent && !episodes.empty() ? ctx.agent->protocol().display(s.tokens)
                                                             : ctx.tokenizer.decode(s.tokens)},
                 {"response_tokens", s.tokens.size()},
                 {"finish_reason", finish_reason_name(s.finish_reason)},
                 {"reward", reward_to_json(rewards[static_cast<size_t>(i)])},
                 {"policy_version", s.policy_version}};
    if (!episodes.empty()) {
      const Episode& e = episodes[static_cast<size_t>(i)];
      line["turns"] = e.turns();
      line["end_reason"] = e.end_reason;
      line["tool_calls"] = e.tool_calls;
      line["tool_errors"] = e.tool_errors;
      if (!e.failure.empty()) line["failure"] = e.failure;
    }
    // GRPO: the sample's advantage; PPO: its first token's. DPO has none.
    const int64_t at = trained_position[static_cast<size_t>(i)];
    if (at >= 0 && !batch.samples[static_cast<size_t>(at)].advantages.empty())
      line["advantage"] = batch.samples[static_cast<size_t>(at)].advantages.front();
    out.samples.push_back(std::move(line));
  }
  return out;
}


void sync_and_probe(RlContext& ctx, PhaseTimer& timer, StepResult& out) {
  const TrainConfig& cfg = ctx.config;
  // 7 weight sync: the engine side acknowledges the new version before the next rollout. A rollout in other
  // numerics computes with rounded or quantised weights: their error against the master weights, per sync.
  const Transformer& rollout_model = ctx.rollout_model ? *ctx.rollout_model : ctx.model;
  timer.time(Phase::kWeightSync, [&] {
    ctx.rollout.sync(ctx.params, ctx.version + 1);
    if (rollout_model.numerics().compute != DType::kF32 || is_quantized(rollout_model.numerics().linear_weights)) {
      if (ctx.unmerged.base && ctx.unmerged_base_error.empty())  // the engine's base, prepared once
        ctx.unmerged_base_error = prepared_weight_error(rollout_model, *ctx.unmerged.base).metrics("weight_sync/");
      const std::map<std::string, double> error =
          ctx.unmerged.base ? ctx.unmerged_base_error
                            : prepared_weight_error(rollout_model, ctx.params).metrics("weight_sync/");
      for (const auto& [k, v] : error) out.metrics[k] = v;
    }
    return 0;
  });
  ctx.version += 1;

  // 8 probe: the engine must now sample with exactly the trainer's weights (in its own numerics)
  if (cfg.probe.prompts > 0) {
    const ProbeResult probe = timer.time(Phase::kProbe, [&] {
      return run_consistency_probe(ctx.actor.context(), ctx.rollout, rollout_model, ctx.params, ctx.task, ctx.tokenizer,
                                   cfg.rollout.sampling.max_new_tokens, cfg.probe, ctx.version, &ctx.model,
                                   parse_device_spec(cfg.rollout_device(), "config key 'rollout.device'").device,
                                   ctx.unmerged);
    });
    for (const auto& [k, v] : probe.engine.metrics("probe/")) out.metrics[k] = v;
    if (probe.trainer)
      for (const auto& [k, v] : probe.trainer->metrics("probe_trainer/")) out.metrics[k] = v;
    if (probe.where)
      for (const auto& [k, v] : probe.where->metrics("probe_trainer/")) out.metrics[k] = v;
  }
}

void add_throughput_metrics(const PhaseTimer& timer, std::map<std::string, double>& metrics) {
  const auto rate = [&](const char* tokens_key, double seconds, const char* rate_key) {
    const auto it = metrics.find(tokens_key);
    if (it != metrics.end() && it->second > 0 && seconds > 0) metrics[rate_key] = it->second / seconds;
  };
  const auto draws = metrics.find("timing_s/rollout_draws");
  rate("tokens/sampled", draws == metrics.end() ? 0.0 : draws->second, "tokens_per_s/sampled");
  rate("tokens/trained", timer.seconds(Phase::kUpdateActor), "tokens_per_s/trained");
}

}  // namespace rlcpp
