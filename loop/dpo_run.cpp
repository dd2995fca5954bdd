#include "loop/dpo_run.h"

#include <cstdio>
#include <optional>
#include <memory>
#include <numeric>

#include "core/error.h"
#include "core/tensorboard.h"
#include "core/metrics.h"
#include "core/philox.h"
#include "loop/evaluation.h"
#include "loop/preference_data.h"
#include "loop/run_dir.h"
#include "loop/run_driver.h"
#include "model/checkpoint.h"
#include "model/init.h"
#include "tokenizer/hf_tokenizer.h"
#include "reward/task_registry.h"
#include "trainer/dpo_step.h"

namespace rlcpp {

void DpoRunConfig::validate() const {
  RLCPP_CHECK(!pairs.empty(), "config key 'pairs': a JSONL file of preference pairs is required");
  // 1e6 passes: far past any use, and epochs x batches per epoch cannot overflow.
  RLCPP_CHECK(epochs >= 1 && epochs <= 1000000, "config key 'epochs': must be in [1, 1000000], got " << epochs);
  RLCPP_CHECK(steps >= 0, "config key 'steps': must be >= 0 (0 = from epochs), got " << steps);
  RLCPP_CHECK(batch_size >= 1, "config key 'batch_size': must be >= 1, got " << batch_size);
  RLCPP_CHECK(micro_batch_size >= 1 && micro_batch_size <= batch_size,
              "config key 'micro_batch_size': must be in [1, batch_size " << batch_size << "], got "
                                                                           << micro_batch_size);
  RLCPP_CHECK(eval_size >= 0 && eval_every >= 0 && checkpoint_every >= 0 && log_every >= 1,
              "config keys 'eval_size', 'eval_every', 'checkpoint_every' must be >= 0 and 'log_every' >= 1");
  dpo.validate("dpo");
  optim.validate();
  lora.validate("lora.");
}

namespace {

// Pair indices in epochs: each epoch a fresh permutation from the seeded stream; batches straddle epochs.
class PairSampler {
 public:
  PairSampler(size_t num_pairs, uint64_t seed) : order_(num_pairs), rng_(seed, /*stream=*/2) { reshuffle(); }

  std::vector<size_t> next(size_t n) {
    std::vector<size_t> out;
    while (out.size() < n) {
      if (pos_ == order_.size()) reshuffle();
      out.push_back(order_[pos_++]);
    }
    return out;
  }

 private:
  void reshuffle() {
    std::iota(order_.begin(), order_.end(), size_t{0});
    for (size_t i = order_.size() - 1; i > 0; --i) std::swap(order_[i], order_[rng_.below(i + 1)]);
    pos_ = 0;
  }
  std::vector<size_t> order_;
  PhiloxStream rng_;
  size_t pos_ = 0;
};

std::vector<PreferencePair> load_pairs(const std::string& path, const Tokenizer& tok, const ModelConfig& mc) {
  return encode_preferences(read_preference_jsonl(path), tok, mc.max_position_embeddings, path);
}

}  // namespace

DpoSummary run_dpo(const DpoRunConfig& config, const Json& resolved_config,
                   const std::function<bool()>& stop_requested) {
  config.validate();
  ParameterStore params = config.init_checkpoint.empty() ? init_random(model_preset(config.model_preset), config.seed)
                                                         : load_model_checkpoint(config.init_checkpoint);
  const ModelConfig& mc = params.config();
  RLCPP_CHECK(!mc.value_head, "dpo: init_checkpoint " << config.init_checkpoint
                                                      << " is a critic (value head), not a policy");
  const std::unique_ptr<Tokenizer> tokenizer = run_tokenizer(choose_tokenizer(config.tokenizer, config.init_checkpoint), config.tokenizer, mc, {});
  const Tokenizer& tok = *tokenizer;
  // Data errors surface before the run directory is created.
  const std::vector<PreferencePair> pairs = load_pairs(config.pairs, tok, mc);
  std::vector<PreferencePair> eval_pairs;
  if (!config.eval_pairs.empty()) eval_pairs = load_pairs(config.eval_pairs, tok, mc);
  std::unique_ptr<Task> task;
  if (config.eval_size > 0) task = make_task_for(config.task, tok);

  const int64_t batches_per_epoch =
      (static_cast<int64_t>(pairs.size()) + config.batch_size - 1) / config.batch_size;
  const int64_t total_steps = config.steps > 0 ? config.steps : config.epochs * batches_per_epoch;

  RunDir run = RunDir::create_with_config(config.run_dir, resolved_config);
  MetricsLog metrics(run.path(), config.logging);

  Transformer model(mc);
  // The initial weights, frozen: the reference (none for SimPO), and a LoRA run's base (`params` then the merged
  // model): one copy for both. A bf16 base (lora.base_dtype) is the initial weights rounded, and the reference
  // is its forward.
  std::optional<ParameterStore> frozen;
  std::optional<LoraBase> base;
  if (config.lora.enabled())
    base = LoraBase::frozen_from(params, config.lora.base_storage());
  else if (config.dpo.uses_reference())
    frozen = params.clone();
  const ParameterStore* reference = !config.dpo.uses_reference() ? nullptr : base ? &base->weights() : &*frozen;
  std::optional<LoraAdapters> adapters;
  if (config.lora.enabled()) {
    adapters.emplace(mc, config.lora);
    adapters->init(config.seed);
  }
  PolicyUpdater updater(model, params, config.optim, ExecContext::cpu(),
                        adapters ? LoraTraining{&*base, &*adapters, config.seed} : LoraTraining{});
  PairSampler sampler(pairs.size(), config.seed);

  std::printf("dpo: %s, %lld parameters, %zu pairs from %s, loss %s, beta %g, %lld steps of %lld pairs (%lld per "
              "micro-batch), run %s\n",
              config.init_checkpoint.empty() ? config.model_preset.c_str() : config.init_checkpoint.c_str(),
              static_cast<long long>(mc.num_parameters()), pairs.size(), config.pairs.c_str(),
              config.dpo.loss_type.c_str(), config.dpo.beta,
              static_cast<long long>(total_steps), static_cast<long long>(config.batch_size),
              static_cast<long long>(config.micro_batch_size), run.path().c_str());
  std::fflush(stdout);

  DpoSummary summary;
  summary.steps = total_steps;
  double train_seconds = 0, window_tokens = 0, window_seconds = 0;
  int64_t steps_trained = 0;
  std::vector<PreferencePair> batch;
  // The step in progress, from its update to its record and step line.
  UpdateResult r;
  double dt = 0;  // the step's update, seconds (not its evaluation or checkpoint)
  Json eval_record;
  RunSteps steps;
  steps.run = [&](const StepPlan& plan) {
    Stopwatch step_watch;
    batch.clear();
    for (size_t i : sampler.next(static_cast<size_t>(config.batch_size))) batch.push_back(pairs[i]);
    r = dpo_step(updater, reference, batch, config.dpo, config.micro_batch_size, total_steps);
    dt = step_watch.seconds();
    train_seconds += dt;
    window_seconds += dt;
    window_tokens += static_cast<double>(r.tokens);
    ++steps_trained;
    if (plan.step == 1) summary.first_loss = r.loss;
    summary.final_loss = r.loss;
    summary.final_margin = r.metrics.value("dpo_reward_margin");
    summary.final_accuracy = r.metrics.value("dpo_accuracy");

    eval_record = Json::object();
    if (plan.last) updater.check_some_step_applied("dpo " + run.path());
    if (!plan.evaluate) return;
    Stopwatch eval_watch;
    if (!eval_pairs.empty()) {
      const LossMetrics ev =
          dpo_evaluate(updater.context(), model, params, reference, eval_pairs, config.dpo, config.micro_batch_size);
      for (const auto& [name, value] : ev.values("eval/")) eval_record[name] = value;
      summary.eval_accuracy = ev.value("dpo_accuracy");
      summary.eval_margin = ev.value("dpo_reward_margin");
      std::printf("eval  step %5lld | held-out pairs: loss %.4f | margin %.3f | accuracy %5.1f%%\n",
                  static_cast<long long>(plan.step), ev.value("dpo_loss"), summary.eval_margin,
                  100.0 * summary.eval_accuracy);
    }
    if (task) {
      EvalOptions opts;
      opts.problems = config.eval_size;
      opts.max_new_tokens = task->max_new_tokens();
      const EvalStats ev = evaluate(model, params, *task, tok, opts);
      summary.task_accuracy = ev.accuracy;
      eval_record["eval/accuracy"] = ev.accuracy;
      eval_record["eval/mean_reward"] = ev.mean_reward;
      std::printf("eval  step %5lld | %s held-out accuracy %5.1f%% | mean reward %.3f\n",
                  static_cast<long long>(plan.step), task->name().c_str(), 100.0 * ev.accuracy, ev.mean_reward);
    }
    eval_record["eval/seconds"] = eval_watch.seconds();
  };
  steps.write_checkpoint = model_checkpoint_writer(params, tokenizer_files(tok), adapters ? &*adapters : nullptr);
  steps.records = [&](const StepPlan&) {
    StepRecords out;
    out.record = {{"skipped", r.skipped}, {"tokens/trained", r.tokens}, {"step_s", dt}};
    for (const auto& [name, value] : step_metrics(r, "actor/")) out.record[name] = value;
    out.record.update(eval_record);
    return out;
  };
  steps.print_step_line = [&](const StepPlan& plan, double eta_s) {
    std::printf("step %5lld/%lld | loss %.4f | margin %.3f | acc %5.1f%% | grad %.3f | lr %.2e | %s trained tok/s | "
                "%.0f ms/step | ETA %s%s\n",
                static_cast<long long>(plan.step), static_cast<long long>(total_steps), r.loss,
                r.metrics.value("dpo_reward_margin"), 100.0 * r.metrics.value("dpo_accuracy"), r.grad_norm, r.lr,
                format_rate(window_tokens / window_seconds).c_str(),
                1000.0 * train_seconds / static_cast<double>(steps_trained), format_duration(eta_s).c_str(),
                r.skipped ? " | SKIPPED (non-finite)" : "");
    window_tokens = window_seconds = 0;
  };
  const DriveResult driven = drive_steps(
      run, {.last_step = total_steps, .eval_every = config.eval_every, .checkpoint_every = config.checkpoint_every,
            .log_every = config.log_every},
      steps, {.command = "dpo", .metrics = &metrics, .stop_requested = stop_requested});
  summary.checkpoint = driven.checkpoint;
  summary.seconds = driven.seconds;
  summary.stopped = driven.stopped;
  std::printf("dpo %s in %s: pair accuracy %.1f%%, margin %.3f, checkpoint %s\n",
              driven.stopped ? "stopped" : "done", format_duration(summary.seconds).c_str(),
              100.0 * summary.final_accuracy, summary.final_margin,
              summary.checkpoint.c_str());
  return summary;
}

}  // namespace rlcpp
