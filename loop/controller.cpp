#include "loop/controller.h"

#include <omp.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <memory>
#include <filesystem>
#include <optional>
#include <thread>

#include "core/error.h"
#include "core/input_file.h"
#include "core/output_file.h"
#include "core/tensorboard.h"
#include "core/json_input.h"
#include "core/metrics.h"
#include "core/process_memory.h"
#include "loop/agent_eval.h"
#include "loop/agent_rollout.h"
#include "loop/data_parallel_step.h"
#include "loop/evaluation.h"
#include "loop/rl_step.h"
#include "loop/rollout_pipeline.h"
#include "loop/run_dir.h"
#include "loop/run_driver.h"
#include "loop/start_ledger.h"
#include "loop/sft_run.h"
#include "loop/train_checkpoint.h"
#include "model/checkpoint.h"
#include "model/critic.h"
#include "tokenizer/hf_tokenizer.h"
#include "model/init.h"
#include "reward/task_registry.h"
#include "trainer/algorithm.h"

namespace rlcpp {

namespace {

// The policy a fresh run starts from. A warm start's SFT runs on the lead (rank 0); the other ranks load its
// final checkpoint.
ParameterStore initial_policy(const TrainConfig& config, const RunDir& run, Communicator& world) {
  if (!config.init_checkpoint.empty()) return load_model_checkpoint(config.init_checkpoint);
  if (!config.warm_start.enabled) return init_random(model_preset(config.model_preset), config.seed);
  std::string checkpoint;
  if (world.rank() == 0) {
    SftConfig sft = config.warm_start.sft;
    sft.run_dir = run.file("sft");
    if (sft.tokenizer.empty()) sft.tokenizer = config.tokenizer;
    sft.chat = config.chat;  // SFT and RL see the same prompts
    // An agent run's warm start trains on its environment's demonstrations; a harness's (agent.env "http", no
    // environment in reach) on the task's answers, one turn.
    if (!config.agent.harness_mode()) sft.agent = config.agent;
    std::printf("train: SFT warm start in %s\n", sft.run_dir.c_str());
    checkpoint = run_sft(sft, config_to_json(sft)).checkpoint;
  }
  // The SFT takes as long as it takes: the other ranks wait for it without the collectives' deadline.
  const double deadline_s = world.timeout_s();
  world.set_timeout_s(0);
  world.broadcast(checkpoint, 0);
  world.set_timeout_s(deadline_s);
  return load_model_checkpoint(checkpoint);
}

// "rollout 33% old_logprob 17% update_actor 45% weight_sync 2% other 3%": every phase that took a whole
// percent of the step or more, in phase order, and `other`, as whole percents that add up to exactly 100
// (PhaseTimer::whole_percents); `hidden` follows the rollout's share (async).
std::string phase_share_text(const PhaseTimer& t, const std::string& hidden) {
  const std::array<int, kNumPhases> percent = t.whole_percents();
  std::string out;
  for (int p = 0; p < kNumPhases; ++p) {
    const Phase phase = static_cast<Phase>(p);
    if (percent[p] == 0 && phase != Phase::kOther) continue;
    out += (out.empty() ? "" : " ") + std::string(phase_name(phase)) + " " + std::to_string(percent[p]) + "%";
    if (phase == Phase::kRollout) out += hidden;
  }
  return out;
}

// "54.6k" of a metric, or "—" when the step has none (no update, or draws read back from a checkpoint).
std::string rate_text(const std::map<std::string, double>& metrics, const std::string& key) {
  const auto it = metrics.find(key);
  return it == metrics.end() ? "—" : format_rate(it->second);
}

// Where the policy comes from, for the run's first line: "tiny after an SFT warm start", a checkpoint, or a
// random preset.
std::string policy_origin(const TrainConfig& config) {
  if (!config.init_checkpoint.empty()) return config.init_checkpoint;
  if (config.warm_start.enabled) return config.warm_start.sft.model_preset + " after an SFT warm start";
  return "random " + config.model_preset;
}

void print_step_line(const TrainConfig& cfg, int64_t step, const StepResult& r, const PhaseTimer& t,
                     const std::optional<double>& accuracy, double eta) {
  char acc[32] = "";
  if (accuracy) std::snprintf(acc, sizeof acc, " | held-out %5.1f%%", 100.0 * *accuracy);
  // Async: the share of the step's wall time the background draws ran behind the trainer's work.
  char hidden[32] = "";
  if (const auto it = r.metrics.find("timing_s/rollout_overlapped"); it != r.metrics.end() && t.step_seconds() > 0)
    std::snprintf(hidden, sizeof hidden, " (+%.0f%% hidden)", 100 * it->second / t.step_seconds());
  // An agent run: the episodes' mean turns and tool calls (the env phase is among the shares).
  char agent[64] = "";
  if (const auto it = r.metrics.find("agent/turns_mean"); it != r.metrics.end())
    std::snprintf(agent, sizeof agent, " | turns %.2f calls %.2f", it->second, r.metrics.at("agent/tool_calls"));
  // "—": a step without a sample to score (an agent run's episodes all running on into the next draw).
  char reward[16] = "—";
  if (std::isfinite(r.mean_reward)) std::snprintf(reward, sizeof reward, "%.3f", r.mean_reward);
  std::printf("step %4lld/%lld | reward %s%s%s | %s | sampled %s tok/s | trained %s tok/s | ETA %s\n",
              static_cast<long long>(step), static_cast<long long>(cfg.steps), reward, acc, agent,
              phase_share_text(t, hidden).c_str(), rate_text(r.metrics, "tokens_per_s/sampled").c_str(),
              rate_text(r.metrics, "tokens_per_s/trained").c_str(), format_duration(eta).c_str());
  std::fflush(stdout);
}

// A figure of the rollout backend's fault_metrics (0 when it has none).
double fault_metric(const RolloutBackend& rollout, const std::string& key) {
  const std::map<std::string, double> m = rollout.fault_metrics();
  const auto it = m.find(key);
  return it == m.end() ? 0.0 : it->second;
}

// Drops the records of steps after `step` (written by an interrupted run past its last checkpoint), and a last
// line cut short by the interruption (no newline). Any other line that is not a record of a later step is kept
// as it is: it is not the resume's to judge. The file is replaced atomically (a crash here loses nothing).
void truncate_jsonl_after_step(const std::string& path, int64_t step) {
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec))) return;  // nothing recorded yet
  // A directory or device in its place, or an unreadable file, is an error naming it (InputFile).
  const std::string text = read_input_file(path, kRunRecordsInput);
  std::string kept;
  int64_t dropped = 0;
  for (size_t begin = 0; begin < text.size();) {
    const size_t end = text.find('\n', begin);
    if (end == std::string::npos) {  // cut short mid-write
      std::printf("train: %s: dropping a last line cut short (%zu bytes, no newline)\n", path.c_str(),
                  text.size() - begin);
      break;
    }
    const std::string_view line(text.data() + begin, end - begin);
    const Json j = parse_json_limited(line, /*allow_exceptions=*/false);
    const bool later = j.is_object() && j.contains("step") && j["step"].is_number_integer() &&
                       j["step"].get<int64_t>() > step;
    if (later)
      ++dropped;
    else
      kept.append(line).push_back('\n');
    begin = end + 1;
  }
  if (dropped == 0 && kept.size() == text.size()) return;
  const std::string tmp = path + ".tmp";
  OutputFile out(tmp, OutputFile::Mode::kReplace);
  out.write(kept);
  out.close();
  RLCPP_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "resume: cannot rename '" << tmp << "' to '" << path << "'");
}

// The PPO critic: a value-head model started from the policy's body (value head drawn from the run seed), with
// its own AdamW (config.critic.optim). Held by pointer: the updater refers to the model and the weights.
struct Critic {
  Transformer model;
  ParameterStore params;
  PolicyUpdater updater;

  Critic(const ParameterStore& policy, const TrainConfig& config, const ExecContext& context)
      : model(critic_config(engine_model_config(policy.config(), config.rollout.engine))),
        params(critic_from_policy(policy, config.seed)),
        updater(model, params, config.critic.optim, context) {}
  CriticState state{params, updater.optimizer()};  // what checkpoints save and restore
};

// The frozen initial policy, for a KL term or DPO: saved once at the start, read back on resume. A LoRA run
// (trainer.lora) trains adapters on it (model/lora.h): it is then always kept, as the base the adapters are
// merged into (`params` becomes the merged model), and serves as the reference too: one copy, not two. A base
// held in bf16 (trainer.lora.base_dtype) is the initial policy rounded to bf16 (in `params`), and no fp32 copy
// stays: the reference's forward reads the bf16 base.
struct FrozenPolicy {
  std::optional<ParameterStore> reference;  // a KL term's or DPO's reference (a LoRA run's base, as held)
  std::optional<LoraBase> lora_base;        // a LoRA run's base
};

FrozenPolicy frozen_policy(const TrainConfig& config, bool needs_reference, const RunDir& run,
                           const std::string& resume_checkpoint, bool lead, ParameterStore& params) {
  FrozenPolicy out;
  if (config.trainer.lora.enabled()) {
    const DType base_dtype = config.trainer.lora.base_storage();
    if (resume_checkpoint.empty()) {
      out.lora_base = LoraBase::frozen_from(params, base_dtype);
      if (lead) save_reference_checkpoint(run.path(), params);  // B = 0: the policy is the base
    } else {
      out.lora_base.emplace(load_reference_checkpoint(run.path()), base_dtype);
    }
    if (needs_reference) out.reference = out.lora_base->weights();  // the same buffer
    return out;
  }
  if (!needs_reference) return out;
  out.reference = resume_checkpoint.empty() ? params.clone() : load_reference_checkpoint(run.path());
  if (lead && resume_checkpoint.empty()) save_reference_checkpoint(run.path(), *out.reference);
  return out;
}

// The run from `resume_checkpoint` on ("" = a fresh run from the initial policy), as rank world.rank() of
// world.size() (loop/data_parallel_step.h: the lead, rank 0, alone writes the run directory and runs the
// rollout).
TrainSummary train_loop(const TrainConfig& config, const RunDir& run, const std::string& resume_checkpoint,
                        Communicator& world, const TrainHooks& hooks) {
  const bool lead = world.rank() == 0;
  ParameterStore params =
      resume_checkpoint.empty() ? initial_policy(config, run, world) : load_model_checkpoint(resume_checkpoint);
  check_ranks_agree(world, params, 0);
  // The run's models serve what the engine makes: sequences within its context (rollout.engine.max_context).
  const ModelConfig mc = engine_model_config(params.config(), config.rollout.engine);
  const std::unique_ptr<Tokenizer> tokenizer = run_tokenizer(config.tokenizer_path(), config.tokenizer, mc, config.chat);
  const Tokenizer& tok = *tokenizer;
  const std::vector<std::string> tokenizer_files_saved = tokenizer_files(tok);  // in every checkpoint
  // The policy's model in each role's numerics (model/numerics.h): the trainer's, and the engine's (the probe
  // scores with it; a colocated engine decodes with it).
  const Transformer model(mc, config.trainer_numerics());
  const Transformer rollout_model(mc, config.rollout_numerics());
  const bool same_numerics = config.trainer_numerics() == config.rollout_numerics();
  std::unique_ptr<Task> task = make_task_for(config.task, tok);
  std::unique_ptr<RewardFunction> reward = make_reward_function(config.reward, *task);
  const AlgorithmNeeds needs = find_algorithm(config.algorithm.name).needs(config.algorithm);
  FrozenPolicy frozen = frozen_policy(config, needs.reference, run, resume_checkpoint, lead, params);
  std::optional<ParameterStore>& reference = frozen.reference;
  std::optional<LoraBase>& lora_base = frozen.lora_base;
  const bool lora = config.trainer.lora.enabled();
  std::optional<LoraAdapters> adapters;
  if (lora) {
    adapters.emplace(params.config(), config.trainer.lora);
    adapters->init(config.seed);  // B = 0: the merged model is the base (a resume loads the saved adapters)
  }
  // On-policy distillation's teacher, in the trainer's numerics (its vocabulary and context were checked with the
  // config).
  std::optional<ParameterStore> teacher;
  std::unique_ptr<Transformer> teacher_model;
  if (needs.teacher_logp) {
    teacher = load_model_checkpoint(config.algorithm.distill.teacher);
    teacher_model = std::make_unique<Transformer>(engine_model_config(teacher->config(), config.rollout.engine),
                                                  config.trainer_numerics());
  }
  // The trainer's device (config key 'device'): the actor's and the critic's updates, old and reference log-probs,
  // the probe's scoring.
  const ExecContext trainer_context = context_for_device(config.device, "config key 'device'");
  std::unique_ptr<Critic> critic;
  if (needs.critic) critic = std::make_unique<Critic>(params, config, trainer_context);
  const CriticState* critic_ckpt = critic ? &critic->state : nullptr;
  PolicyUpdater actor(model, params, config.optim, trainer_context,
                      lora ? LoraTraining{&*lora_base, &*adapters, config.seed} : LoraTraining{});
  actor.set_communicator(&world);
  actor.set_grad_shards(config.trainer.grad_shards);
  if (critic) {
    critic->updater.set_communicator(&world);
    critic->updater.set_grad_shards(config.trainer.grad_shards);
  }
  PhiloxStream data_rng(config.seed, /*stream=*/1);
  PhiloxStream update_rng(config.seed, /*stream=*/2);
  TrainState state{0, 0, &data_rng, &update_rng, config_to_json(config), Json()};
  state.adapters = adapters ? &*adapters : nullptr;
  if (lead) remove_unfinished_checkpoints(run.path());
  std::string rollout_checkpoint = resume_checkpoint;
  if (!resume_checkpoint.empty()) {
    load_train_checkpoint(resume_checkpoint, params, actor.optimizer(), state, critic_ckpt);
    actor.host_weights_changed();
    if (critic) critic->updater.host_weights_changed();
    if (lead) {
      truncate_jsonl_after_step(run.file("metrics.jsonl"), state.step);
      truncate_jsonl_after_step(run.file("samples.jsonl"), state.step);
    }
    std::printf("train: resuming %s from %s (step %lld, policy version %lld)\n", run.path().c_str(),
                resume_checkpoint.c_str(), static_cast<long long>(state.step),
                static_cast<long long>(state.policy_version));
  } else if (config.rollout.placement == "split" && lead) {
    rollout_checkpoint = run.checkpoint_dir(0);  // the worker starts from it; also a resume point
    save_train_checkpoint(rollout_checkpoint, params, actor.optimizer(), state, critic_ckpt, tokenizer_files_saved);
  }
  std::optional<MetricsLog> metrics_log;
  std::optional<JsonlWriter> samples_log;
  if (lead) {
    metrics_log.emplace(run.path(), config.logging);
    samples_log.emplace(run.file("samples.jsonl"));
  }
  RolloutSection rollout_section = config.rollout;  // its device resolved ("" follows the trainer's)
  rollout_section.device = config.rollout_device();
  // An engine of this process on the host shares the trainer's context: one memory pool, whose blocks freed by
  // one phase (the update's activations) serve the next (the engine's panels, an evaluation's cache) instead of
  // each pool keeping its own. A GPU engine gets a context (a stream) of its own.
  const auto engine_context_for_rollout = [&] {
    return parse_device_spec(rollout_section.device, "config key 'rollout.device'").is_host() &&
                   trainer_context.is_host()
               ? trainer_context
               : context_for_device(rollout_section.device, "config key 'rollout.device'");
  };
  // rollout.lora_merge false: the engine decodes the frozen base with the adapters unmerged.
  const UnmergedRollout unmerged =
      lora && !config.rollout.lora_merge ? UnmergedRollout{&lora_base->weights(), &*adapters} : UnmergedRollout{};
  std::unique_ptr<RolloutBackend> rollout;
  if (!lead)
    rollout = make_absent_rollout(world.rank());
  else if (config.rollout.placement == "split")
    rollout = make_split_rollout(rollout_section, run.path(), rollout_checkpoint, params, state.policy_version,
                                 config.rollout_numerics(), /*own_weights=*/config.async.max_staleness > 0,
                                 {&actor.device_weights(), &actor.context()}, adapters ? &*adapters : nullptr);
  else if (config.rollout.placement == "remote")
    rollout = make_remote_rollout(config.rollout, run.path(), params, state.policy_version, config.rollout_numerics(),
                                  adapters ? &*adapters : nullptr, adapters ? &*lora_base : nullptr);
  else
    rollout = make_colocated_rollout(rollout_model, params, config.rollout.engine_config(), state.policy_version,
                                     /*own_weights=*/config.async.max_staleness > 0, engine_context_for_rollout(),
                                     unmerged);
  RlContext ctx{config, *task, *reward, tok, model, params, needs.reference ? &*reference : nullptr,
                actor, *rollout, data_rng, update_rng, state.policy_version, critic ? &critic->updater : nullptr,
                same_numerics ? nullptr : &rollout_model, teacher_model.get(), teacher ? &*teacher : nullptr,
                &world, nullptr, unmerged, {}};
  // An agent run's episodes (the lead draws them): environments, turn protocol, the episodes in flight.
  std::unique_ptr<AgentRollout> agent;
  if (config.agent.enabled() && lead) agent = std::make_unique<AgentRollout>(config, *task, tok);
  ctx.agent = agent.get();
  RolloutPipeline pipeline({config, *task, *reward, tok, *rollout, data_rng, agent.get()}, config.async.max_staleness,
                           config.steps);
  if (!resume_checkpoint.empty()) {
    pipeline.restore(state.pending_rollouts, resume_checkpoint + "/" + kPendingRolloutsFile);
    if (agent) agent->restore_in_flight(state.episodes_in_flight, resume_checkpoint + "/" + kEpisodesInFlightFile);
  }

  std::string trained;  // LoRA: what trains
  if (adapters)
    trained = " (LoRA rank " + std::to_string(config.trainer.lora.rank) + " on " +
              std::to_string(adapters->targets().size() / static_cast<size_t>(mc.num_hidden_layers)) +
              " modules a layer: " + std::to_string(adapters->weights().numel()) + " trained)";
  std::printf("train: %s, %s, %lld parameters%s, task %s, %lld steps of %lld prompts x %lld, placement %s%s%s%s, "
              "numerics rollout %s / trainer %s, run %s\n",
              config.algorithm.name.c_str(),
              policy_origin(config).c_str(),
              static_cast<long long>(mc.num_parameters()), trained.c_str(), task->name().c_str(),
              static_cast<long long>(config.steps), static_cast<long long>(config.rollout.prompts_per_step),
              static_cast<long long>(config.rollout.group_size), config.rollout.placement.c_str(),
              config.rollout.placement == "split" ? (" (weights over " + config.rollout.weight_sync + ")").c_str() : "",
              config.async.max_staleness > 0
                  ? (", async (staleness " + std::to_string(config.async.max_staleness) + ")").c_str()
                  : "",
              world.size() > 1
                  ? (", " + std::to_string(world.size()) + " data-parallel ranks (" + world.backend() + ")").c_str()
                  : "",
              rollout_model.numerics().describe().c_str(), model.numerics().describe().c_str(), run.path().c_str());
  std::fflush(stdout);
  const ModelNumerics& rn = rollout_model.numerics();
  const int64_t compute_bytes = static_cast<int64_t>(dtype_size(rn.compute));
  if (lead) {
    LedgerDtypes dtypes{compute_bytes, is_quantized(rn.linear_weights) ? 1 : compute_bytes,
                        adapters ? adapters->weights().numel() : 0,
                        lora_base ? static_cast<int64_t>(dtype_size(lora_base->dtype())) : 4};
    dtypes.trainer_bf16 = model.numerics().compute == DType::kBF16;
    dtypes.rollout_bf16 = rn.compute == DType::kBF16 && rn.linear_weights == DType::kBF16;
    start_run_ledger(run.path(), params, dtypes);
  }

  EvalOptions eval_opts;
  eval_opts.problems = config.eval_size;
  eval_opts.max_new_tokens = task->max_new_tokens();
  eval_opts.device = rollout_section.device;  // evaluated by an engine where the rollout runs
  if (lead && parse_device_spec(eval_opts.device, "config key 'rollout.device'").is_host())
    eval_opts.context = engine_context_for_rollout();
  TrainSummary summary;
  summary.run_dir = run.path();
  // The step in progress, from its work to its record and step line.
  std::optional<PhaseTimer> timer;
  StepResult r;
  std::optional<double> accuracy;
  RunSteps steps;
  steps.run = [&](const StepPlan& plan) {
    timer.emplace();
    rollout->begin_step(plan.step);
    StepDraws drawn;
    if (lead) drawn = pipeline.take(plan.step, ctx.version, *timer);  // with async, the draws of step + N start
    timer->time(Phase::kRollout, [&] { share_draws(world, drawn); return 0; });
    r = learn_step(ctx, std::move(drawn), *timer);
    check_ranks_agree(world, params, plan.step);
    if (lead) {
      pipeline.join(*timer, r.metrics);
      sync_and_probe(ctx, *timer, r);
    } else {
      ctx.version += 1;  // the lead's engine now holds it
    }
    if (plan.last) actor.check_some_step_applied("train " + run.path());
    accuracy.reset();
    if (lead && plan.evaluate) {
      // Greedy held-out generation in the rollout numerics: the policy as the engine runs it.
      const EvalStats ev = timer->time(Phase::kEval, [&] {
        // Evaluation builds an engine of its own (panels, KV cache): the blocks the step left cached in the shared
        // pool are of other sizes, so they go back to the system first instead of adding to the run's peak.
        if (eval_opts.context) eval_opts.context->pool().release_cached();
        // A harness's run is evaluated on the task's held-out answers, one turn (its episodes are the harness's).
        if (!agent || config.agent.harness_mode()) return evaluate(rollout_model, params, *task, tok, eval_opts);
        const AgentEvalResult a = evaluate_episodes(rollout_model, params, *task, tok, config.agent, config.chat,
                                                    eval_opts, mc.max_position_embeddings);
        for (const auto& [k, v] : a.metrics) r.metrics[k] = v;
        return a.stats;
      });
      accuracy = ev.accuracy;
      summary.final_accuracy = ev.accuracy;
      r.metrics["eval/accuracy"] = ev.accuracy;
      r.metrics["eval/mean_reward"] = ev.mean_reward;
      // Per problem class (add3: operand digit counts): where a plateau's errors are.
      for (const ClassStats& c : ev.classes) r.metrics["eval/class/" + c.label] = c.accuracy;
    }
  };
  steps.write_checkpoint = [&](const StepPlan& plan) {
    timer->time(Phase::kCheckpoint, [&] {
      write_train_checkpoint(plan.checkpoint, params, actor.optimizer(),
                             {plan.step, ctx.version, &data_rng, &update_rng, state.run_config,
                              pipeline.pending_to_json(), agent ? agent->in_flight_to_json() : Json(),
                              state.adapters},
                             critic_ckpt, tokenizer_files_saved);
      return 0;
    });
  };
  steps.records = [&](const StepPlan&) {
    timer->finish();
    add_throughput_metrics(*timer, r.metrics);
    summary.mean_rewards.push_back(r.mean_reward);
    StepRecords out;
    Json& record = out.record;
    record["policy_version"] = ctx.version;
    for (const auto& [k, v] : r.metrics) record[k] = v;
    // Taken here, not in the step: a worker can also fail in the step's weight sync or probe.
    for (const auto& [k, v] : rollout->fault_metrics()) record[k] = v;
    for (const auto& [k, v] : timer->metrics()) record[k] = v;
    for (const auto& [k, v] : process_memory_metrics()) record[k] = v;
    const Json counters = reward->counters();
    for (const auto& [k, v] : counters.items()) record["reward_server/" + k] = v;
    // The layout the timings were measured on (`rlcpp scale` models other layouts from it): trainer ranks, the
    // lead's OpenMP threads (split workers inherit them), rollout worker processes, the machine's cores.
    record["dp/ranks"] = world.size();
    record["layout/threads"] = omp_get_max_threads();
    record["layout/workers"] = config.rollout.placement == "colocated" ? 0
                               : config.rollout.placement == "remote"
                                   ? (config.rollout.remote.listen.empty()
                                          ? static_cast<int64_t>(config.rollout.remote.endpoints.size())
                                          : static_cast<int64_t>(fault_metric(*rollout, "rollout/workers")))
                                   : config.rollout.num_workers;
    record["layout/cores"] = static_cast<int64_t>(std::thread::hardware_concurrency());
    out.samples = std::move(r.samples);
    return out;
  };
  steps.print_step_line = [&](const StepPlan& plan, double eta_s) {
    print_step_line(config, plan.step, r, *timer, accuracy, eta_s);
  };
  const RunSchedule schedule{.first_step = state.step + 1,
                             .last_step = config.steps,
                             .eval_every = config.eval_every,
                             .checkpoint_every = config.checkpoint_every,
                             .checkpoint_keep_last = config.checkpoint_keep_last,
                             .log_every = config.log_every};
  // Records, checkpoints and step lines are the lead's.
  const RunOutputs outputs{.command = "train",
                           .metrics = lead ? &*metrics_log : nullptr,
                           .samples = lead ? &*samples_log : nullptr,
                           .pinned_checkpoint = rollout_checkpoint,
                           .checkpoint_committed = hooks.checkpoint_committed,
                           .stop_requested = hooks.stop_requested};
  const DriveResult driven = drive_steps(run, schedule, steps, outputs);
  if (!driven.checkpoint.empty()) summary.checkpoint = driven.checkpoint;
  summary.seconds = driven.seconds;
  summary.stopped = driven.stopped;
  if (lead && state.step < config.steps) end_run_ledger(run.path());  // the peak MFU divides by, measured again
  if (state.step >= config.steps) {  // resumed at its last step: nothing was left to run
    summary.checkpoint = resume_checkpoint;
    std::printf("train: %s had already finished its %lld steps; nothing to do\n", run.path().c_str(),
                static_cast<long long>(config.steps));
  }
  std::printf("train %s in %s: held-out accuracy %.1f%%, checkpoint %s\n", driven.stopped ? "stopped" : "done",
              format_duration(summary.seconds).c_str(), 100.0 * summary.final_accuracy, summary.checkpoint.c_str());
  if (driven.stopped)
    std::printf("train: `rlcpp train --resume %s` continues the run from step %lld\n", run.path().c_str(),
                static_cast<long long>(driven.last_step_run + 1));
  return summary;
}

}  // namespace

TrainSummary run_train(const TrainConfig& config, const Json& resolved_config, Communicator* comm,
                       const TrainHooks& hooks) {
  const std::unique_ptr<Communicator> single = comm ? nullptr : make_single_communicator();
  Communicator& world = comm ? *comm : *single;
  config.validate();
  world.set_timeout_s(config.trainer.collective_timeout_s);
  config.check_data_parallel(world.size());
  check_ranks_share_config(world, config_to_json(config));
  // The lead creates the run directory (maybe NAME-2); every rank works in the one it chose.
  std::string path;
  std::optional<RunDir> run;
  if (world.rank() == 0) {
    run = RunDir::create_with_config(config.run_dir, resolved_config);
    path = run->path();
  }
  world.broadcast(path, 0);
  if (!run) run = RunDir::open_existing(path);
  return train_loop(config, *run, "", world, hooks);
}

TrainSummary resume_train(const std::string& run_dir, bool allow_config_change, Communicator* comm,
                          const TrainHooks& hooks) {
  const std::unique_ptr<Communicator> single = comm ? nullptr : make_single_communicator();
  Communicator& world = comm ? *comm : *single;
  if (world.rank() != 0) {  // the lead checks the run and picks the checkpoint; the others follow it
    std::string path, checkpoint, config_text;
    world.broadcast(path, 0);
    world.broadcast(checkpoint, 0);
    world.broadcast(config_text, 0);
    TrainConfig config;
    config_from_json(Json::parse(config_text), config);
    world.set_timeout_s(config.trainer.collective_timeout_s);
    return train_loop(config, RunDir::open_existing(path), checkpoint, world, hooks);
  }
  RunDir run = RunDir::open_to_resume(run_dir);
  TrainConfig config;
  const Json saved = load_json_file(run.file("config.json"));
  RLCPP_CHECK(!saved.is_object() || saved.contains("rollout") || !saved.contains("batch_size"),
              "resume: " << run.path() << " is the run of `rlcpp sft` or `rlcpp dpo` (its config.json has "
                         << "batch_size and no rollout section); train --resume continues `rlcpp train` runs only");
  try {
    config_from_json(saved, config);
  } catch (const Error& e) {
    throw Error(run.file("config.json") + ": " + e.what());
  }
  config.validate();
  const std::string checkpoint = run.latest_checkpoint();
  RLCPP_CHECK(!checkpoint.empty(), "resume: " << run.path() << "/checkpoints holds no complete checkpoint");
  if (const Json trained_under = checkpoint_run_config(checkpoint); !trained_under.is_null()) {
    std::string changes;
    for (const std::string& d : config_differences(trained_under, config_to_json(config)))
      if (d.rfind("run_dir:", 0) != 0) changes += "\n  " + d;  // the directory may have been moved
    RLCPP_CHECK(changes.empty() || allow_config_change,
                "resume: " << run.file("config.json") << " differs from the config " << checkpoint
                           << " was trained under:" << changes
                           << "\nrestore those keys, or resume with --allow-config-change to continue under the "
                              "edited config");
    if (!changes.empty())
      std::printf("train: warning: resuming under an edited config (--allow-config-change):%s\n", changes.c_str());
  }
  config.check_data_parallel(world.size());
  world.set_timeout_s(config.trainer.collective_timeout_s);
  if (world.size() > 1) {
    std::string path = run.path(), chosen = checkpoint, config_text = config_to_json(config).dump();
    world.broadcast(path, 0);
    world.broadcast(chosen, 0);
    world.broadcast(config_text, 0);
  }
  return train_loop(config, run, checkpoint, world, hooks);
}

}  // namespace rlcpp
