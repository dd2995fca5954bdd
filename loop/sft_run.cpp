#include "loop/sft_run.h"

#include <cstdio>
#include <filesystem>
#include <optional>

#include "agent/demonstration.h"
#include "agent/env_maker.h"
#include "core/error.h"
#include "core/tensorboard.h"
#include "core/metrics.h"
#include "core/philox.h"
#include "loop/agent_eval.h"
#include "loop/evaluation.h"
#include "loop/run_dir.h"
#include "loop/run_driver.h"
#include "model/checkpoint.h"
#include "model/init.h"
#include "tokenizer/hf_tokenizer.h"
#include "reward/task_registry.h"
#include "trainer/loss_layout.h"
#include "trainer/sft_loss.h"
#include "trainer/update_step.h"

namespace rlcpp {

void SftConfig::validate() const {
  RLCPP_CHECK(steps >= 1, "config key 'steps': must be >= 1, got " << steps);
  lora.validate("lora.");
  RLCPP_CHECK(batch_size >= 1, "config key 'batch_size': must be >= 1, got " << batch_size);
  RLCPP_CHECK(micro_batch_size >= 1 && batch_size % micro_batch_size == 0,
              "config key 'micro_batch_size': must divide batch_size " << batch_size << ", got " << micro_batch_size);
  RLCPP_CHECK(eval_every >= 0 && checkpoint_every >= 0 && log_every >= 1 && eval_size >= 1,
              "config keys 'eval_every', 'checkpoint_every' must be >= 0, 'log_every' and 'eval_size' >= 1");
  optim.validate();
  agent.validate("agent");
}

namespace {

// One global batch of SFT sequences: BOS + prompt + answer + EOS, scored from the last prompt token on.
std::vector<PackedBatch> sample_sft_batch(const Task& task, const Tokenizer& tok, PhiloxStream& rng,
                                          int64_t batch_size, int64_t micro_batch_size) {
  std::vector<PackedBatch> micro;
  for (int64_t begin = 0; begin < batch_size; begin += micro_batch_size) {
    std::vector<std::vector<int32_t>> seqs;
    std::vector<int32_t> score_from;
    for (int64_t i = begin; i < begin + micro_batch_size; ++i) {
      Problem p = task.sample_train(rng);
      std::vector<int32_t> ids = encode_prompt(tok, p);
      score_from.push_back(static_cast<int32_t>(ids.size()) - 1);
      for (int32_t id : tok.encode(p.answer)) ids.push_back(id);
      ids.push_back(tok.eos_id());
      seqs.push_back(std::move(ids));
    }
    micro.push_back(PackedBatch::from_sequences(seqs, score_from));
  }
  return micro;
}

// One global batch of an expert's episodes: the prompt, then every turn and observation; only the assistant's
// tokens are scored (a target whose token the environment appended is -1).
std::vector<PackedBatch> sample_demonstration_batch(const Task& task, const EnvMaker& envs,
                                                    const TurnProtocol& protocol, const AgentConfig& agent,
                                                    int64_t context, PhiloxStream& rng, int64_t batch_size,
                                                    int64_t micro_batch_size) {
  std::vector<PackedBatch> micro;
  for (int64_t begin = 0; begin < batch_size; begin += micro_batch_size) {
    std::vector<std::vector<int32_t>> seqs;
    std::vector<std::vector<float>> masks;
    for (int64_t i = begin; i < begin + micro_batch_size; ++i) {
      const std::unique_ptr<ExpertEnvironment> env = envs.make_expert();
      const Episode e = demonstrate(task.sample_train(rng), *env, protocol, agent, context, rng);
      std::vector<int32_t> ids = e.prompt;
      ids.insert(ids.end(), e.tokens.begin(), e.tokens.end());
      seqs.push_back(std::move(ids));
      masks.push_back(e.loss_mask());
    }
    PackedBatch b = PackedBatch::from_sequences(seqs);
    for (size_t k = 0; k < seqs.size(); ++k) {
      const int64_t prompt = static_cast<int64_t>(seqs[k].size() - masks[k].size());
      // Position p predicts token p + 1: scored when that token is one of the assistant's.
      for (int64_t p = b.cu_seqlens[k]; p < b.cu_seqlens[k + 1] - 1; ++p) {
        const int64_t next = p + 1 - b.cu_seqlens[k] - prompt;
        if (next < 0 || masks[k][static_cast<size_t>(next)] == 0.0f) b.targets[p] = -1;
      }
    }
    micro.push_back(std::move(b));
  }
  return micro;
}

}  // namespace

SftSummary run_sft(const SftConfig& config, const Json& resolved_config,
                   const std::function<bool()>& stop_requested) {
  config.validate();
  ParameterStore params = config.init_checkpoint.empty()
                              ? init_random(model_preset(config.model_preset), config.seed)
                              : load_model_checkpoint(config.init_checkpoint);
  const ModelConfig& mc = params.config();
  const std::unique_ptr<Tokenizer> tokenizer = run_tokenizer(choose_tokenizer(config.tokenizer, config.init_checkpoint), config.tokenizer, mc, config.chat);
  const Tokenizer& tok = *tokenizer;
  const std::vector<std::string> tokenizer_files_saved = tokenizer_files(tok);
  Transformer model(mc);
  std::unique_ptr<Task> task = make_task_for(config.task, tok);
  // The run directory only once the model, its tokenizer and the task are known to be good.
  RunDir run = RunDir::create_with_config(config.run_dir, resolved_config);
  MetricsLog metrics(run.path(), config.logging);
  // LoRA: the adapters train on a frozen copy of the initial weights; `params` is the merged model.
  std::optional<LoraBase> base;
  std::optional<LoraAdapters> adapters;
  if (config.lora.enabled()) {
    base = LoraBase::frozen_from(params, config.lora.base_storage());
    adapters.emplace(mc, config.lora);
    adapters->init(config.seed);
  }
  PolicyUpdater updater(model, params, config.optim, ExecContext::cpu(),
                        adapters ? LoraTraining{&*base, &*adapters, config.seed} : LoraTraining{});
  PhiloxStream data_rng(config.seed, /*stream=*/1);

  std::printf("sft: %s, %lld parameters, task %s, %lld steps of %lld sequences (%lld per micro-batch), run %s\n",
              config.init_checkpoint.empty() ? config.model_preset.c_str() : config.init_checkpoint.c_str(),
              static_cast<long long>(mc.num_parameters()), task->name().c_str(), static_cast<long long>(config.steps),
              static_cast<long long>(config.batch_size), static_cast<long long>(config.micro_batch_size),
              run.path().c_str());
  std::fflush(stdout);

  EvalOptions eval_opts;
  eval_opts.problems = config.eval_size;
  eval_opts.max_new_tokens = task->max_new_tokens();
  // An agent's warm start: the environment's expert writes the demonstrations.
  std::unique_ptr<EnvMaker> envs;
  std::unique_ptr<TurnProtocol> protocol;
  if (config.agent.enabled()) {
    envs = std::make_unique<EnvMaker>(config.agent, *task);
    protocol = make_turn_protocol(tok, config.chat.enable_thinking, config.chat.system);
  }
  SftSummary summary;
  double train_seconds = 0, window_tokens = 0, window_seconds = 0;
  int64_t steps_trained = 0;
  ForwardOptions fwd;
  // The step in progress, from its update to its record and step line.
  UpdateResult r;
  double dt = 0;  // the step's sampling and update, seconds (not its evaluation or checkpoint)
  Json eval_record;
  RunSteps steps;
  steps.run = [&](const StepPlan& plan) {
    Stopwatch step_watch;
    std::vector<PackedBatch> micro =
        envs ? sample_demonstration_batch(*task, *envs, *protocol, config.agent, mc.max_position_embeddings, data_rng,
                                          config.batch_size, config.micro_batch_size)
             : sample_sft_batch(*task, tok, data_rng, config.batch_size, config.micro_batch_size);
    std::vector<std::vector<int64_t>> offsets;
    std::vector<std::vector<float>> masks;
    LossNormalizer norm;  // token-mean over the whole global batch
    for (const PackedBatch& b : micro) {
      offsets.push_back(loss_offsets(b));
      masks.push_back(target_mask(b));
      norm.merge(LossNormalizer::over_batch(LossAgg::kTokenMean, offsets.back(), masks.back()));
    }
    r = updater.step(
        micro, fwd,
        [&](size_t m, const Activations& acts) {
          return sft_loss(offsets[m], {acts.logp.data<float>(), static_cast<size_t>(acts.num_tokens)}, masks[m],
                          norm);
        },
        config.steps);
    dt = step_watch.seconds();
    train_seconds += dt;
    window_seconds += dt;
    window_tokens += static_cast<double>(r.tokens);
    ++steps_trained;
    summary.final_loss = r.loss;

    eval_record = Json::object();
    if (plan.last) updater.check_some_step_applied("sft " + run.path());
    if (plan.evaluate) {
      Stopwatch eval_watch;
      EvalStats ev;
      if (envs) {
        const AgentEvalResult a = evaluate_episodes(model, params, *task, tok, config.agent, config.chat, eval_opts,
                                                    mc.max_position_embeddings);
        ev = a.stats;
        for (const auto& [k, v] : a.metrics) eval_record[k] = v;
      } else {
        ev = evaluate(model, params, *task, tok, eval_opts);
      }
      summary.final_accuracy = ev.accuracy;
      eval_record["eval/accuracy"] = ev.accuracy;
      eval_record["eval/mean_reward"] = ev.mean_reward;
      for (const ClassStats& c : ev.classes) eval_record["eval/class/" + c.label] = c.accuracy;
      eval_record["eval/seconds"] = eval_watch.seconds();
      std::printf("eval  step %5lld | held-out accuracy %5.1f%% | mean reward %.3f | %d problems in %.1fs\n",
                  static_cast<long long>(plan.step), 100.0 * ev.accuracy, ev.mean_reward,
                  static_cast<int>(config.eval_size), eval_watch.seconds());
    }
  };
  steps.write_checkpoint = model_checkpoint_writer(params, tokenizer_files_saved, adapters ? &*adapters : nullptr);
  steps.records = [&](const StepPlan&) {
    StepRecords out;
    out.record = {{"loss", r.loss},     {"grad_norm", r.grad_norm},   {"lr", r.lr},
                  {"skipped", r.skipped}, {"tokens/trained", r.tokens}, {"step_s", dt}};
    out.record.update(eval_record);
    return out;
  };
  steps.print_step_line = [&](const StepPlan& plan, double eta_s) {
    std::printf("step %5lld/%lld | loss %.4f | grad %.3f | lr %.2e | %s trained tok/s | %.0f ms/step | ETA %s\n",
                static_cast<long long>(plan.step), static_cast<long long>(config.steps), r.loss, r.grad_norm, r.lr,
                format_rate(window_tokens / window_seconds).c_str(),
                1000.0 * train_seconds / static_cast<double>(steps_trained), format_duration(eta_s).c_str());
    window_tokens = window_seconds = 0;
  };
  const DriveResult driven = drive_steps(
      run, {.last_step = config.steps, .eval_every = config.eval_every, .checkpoint_every = config.checkpoint_every,
            .log_every = config.log_every},
      steps, {.command = "sft", .metrics = &metrics, .stop_requested = stop_requested});
  summary.checkpoint = driven.checkpoint;
  summary.seconds = driven.seconds;
  summary.stopped = driven.stopped;
  std::printf("sft %s in %s: held-out accuracy %.1f%%, checkpoint %s\n", driven.stopped ? "stopped" : "done",
              format_duration(summary.seconds).c_str(), 100.0 * summary.final_accuracy, summary.checkpoint.c_str());
  return summary;
}

}  // namespace rlcpp
