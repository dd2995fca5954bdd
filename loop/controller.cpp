#include "loop/controller.h"

#include <cstdio>
#include <memory>
#include <optional>

#include "core/error.h"
#include "core/metrics.h"
#include "loop/evaluation.h"
#include "loop/grpo_step.h"
#include "loop/run_dir.h"
#include "loop/sft_run.h"
#include "model/checkpoint.h"
#include "model/init.h"
#include "reward/task_registry.h"

namespace rlcpp {

namespace {

ParameterStore initial_policy(const TrainConfig& config, const RunDir& run) {
  if (!config.init_checkpoint.empty()) return load_model_checkpoint(config.init_checkpoint);
  if (!config.warm_start.enabled) return init_random(model_preset(config.model_preset), config.seed);
  SftConfig sft = config.warm_start.sft;
  sft.run_dir = run.file("sft");
  std::printf("train: SFT warm start in %s\n", sft.run_dir.c_str());
  const SftSummary s = run_sft(sft, config_to_json(sft));
  return load_model_checkpoint(s.checkpoint);
}

void print_step_line(const TrainConfig& cfg, int64_t step, const StepResult& r, const PhaseTimer& t,
                     const std::optional<double>& accuracy, double seconds_so_far) {
  char acc[32] = "";
  if (accuracy) std::snprintf(acc, sizeof acc, " | held-out %5.1f%%", 100.0 * *accuracy);
  const double eta = seconds_so_far / step * static_cast<double>(cfg.steps - step);
  std::printf("step %4lld/%lld | reward %.3f%s | rollout %2.0f%% update %2.0f%% sync %2.0f%% | %s tok/s | ETA %s\n",
              static_cast<long long>(step), static_cast<long long>(cfg.steps), r.mean_reward, acc,
              100 * t.share(Phase::kRollout), 100 * (t.share(Phase::kUpdateActor) + t.share(Phase::kUpdateCritic)),
              100 * t.share(Phase::kWeightSync), format_rate(r.tokens / t.step_seconds()).c_str(),
              format_duration(eta).c_str());
  std::fflush(stdout);
}

}  // namespace

TrainSummary run_train(const TrainConfig& config, const Json& resolved_config) {
  config.validate();
  RunDir run = RunDir::create_fresh(config.run_dir);
  Json resolved = resolved_config;
  resolved["run_dir"] = run.path();
  run.write_config(resolved);
  JsonlWriter metrics_log(run.file("metrics.jsonl"));
  JsonlWriter samples_log(run.file("samples.jsonl"));

  ParameterStore params = initial_policy(config, run);
  const ModelConfig& mc = params.config();
  CharTokenizer tok;
  RLCPP_CHECK(mc.vocab_size >= tok.vocab_size(), "train: the model's vocabulary (" << mc.vocab_size
                                                   << ") is smaller than the character tokenizer's ("
                                                   << tok.vocab_size() << ")");
  Transformer model(mc);
  std::unique_ptr<Task> task = make_task(config.task);
  std::unique_ptr<RewardFunction> reward = make_reward_function(config.reward, *task);
  std::optional<ParameterStore> reference;
  if (config.algorithm.policy_loss.kl_coef > 0) reference = params.clone();
  PolicyUpdater actor(model, params, config.optim);
  std::unique_ptr<RolloutBackend> rollout = config.rollout.placement == "split"
                                                ? make_split_rollout(config.rollout, run.path(), params)
                                                : make_colocated_rollout(model, params, config.rollout.engine);
  PhiloxStream data_rng(config.seed, /*stream=*/1);
  PhiloxStream update_rng(config.seed, /*stream=*/2);
  RlContext ctx{config, *task, *reward, tok, model, params, reference ? &*reference : nullptr,
                actor, *rollout, data_rng, update_rng, 0};

  std::printf("train: %s, %lld parameters, task %s, %lld steps of %lld prompts x %lld, placement %s, run %s\n",
              config.init_checkpoint.empty() ? config.model_preset.c_str() : config.init_checkpoint.c_str(),
              static_cast<long long>(mc.num_parameters()), task->name().c_str(),
              static_cast<long long>(config.steps), static_cast<long long>(config.rollout.prompts_per_step),
              static_cast<long long>(config.rollout.group_size), config.rollout.placement.c_str(), run.path().c_str());
  std::fflush(stdout);

  EvalOptions eval_opts;
  eval_opts.problems = config.eval_size;
  eval_opts.max_new_tokens = task->max_new_tokens();
  TrainSummary summary;
  summary.run_dir = run.path();
  Stopwatch wall;
  double step_seconds_total = 0;
  for (int64_t step = 1; step <= config.steps; ++step) {
    PhaseTimer timer;
    StepResult r = grpo_step(ctx, step, timer);
    const bool last = step == config.steps;
    std::optional<double> accuracy;
    if (last || (config.eval_every > 0 && step % config.eval_every == 0)) {
      const EvalStats ev = timer.time(Phase::kEval, [&] { return evaluate(model, params, *task, tok, eval_opts); });
      accuracy = ev.accuracy;
      summary.final_accuracy = ev.accuracy;
      r.metrics["eval/accuracy"] = ev.accuracy;
      r.metrics["eval/mean_reward"] = ev.mean_reward;
    }
    std::string checkpoint;
    if (last || (config.checkpoint_every > 0 && step % config.checkpoint_every == 0)) {
      checkpoint = run.checkpoint_dir(step);
      timer.time(Phase::kCheckpoint, [&] {
        save_model_checkpoint(checkpoint, params);
        return 0;
      });
      summary.checkpoint = checkpoint;
    }
    timer.finish();
    step_seconds_total += timer.step_seconds();
    summary.mean_rewards.push_back(r.mean_reward);

    Json record = {{"step", step}, {"policy_version", ctx.version}, {"tokens", r.tokens},
                   {"tokens_per_s", r.tokens / timer.step_seconds()}, {"elapsed_s", wall.seconds()}};
    for (const auto& [k, v] : r.metrics) record[k] = v;
    for (const auto& [k, v] : timer.metrics()) record[k] = v;
    const Json counters = reward->counters();
    for (const auto& [k, v] : counters.items()) record["reward_server/" + k] = v;
    if (!checkpoint.empty()) record["checkpoint"] = checkpoint;
    metrics_log.write(record);
    for (const Json& s : r.samples) samples_log.write(s);
    if (step % config.log_every == 0 || step == 1 || last)
      print_step_line(config, step, r, timer, accuracy, step_seconds_total);
  }
  summary.seconds = wall.seconds();
  std::printf("train done in %s: held-out accuracy %.1f%%, checkpoint %s\n", format_duration(summary.seconds).c_str(),
              100.0 * summary.final_accuracy, summary.checkpoint.c_str());
  return summary;
}

}  // namespace rlcpp
