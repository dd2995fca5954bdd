#include "bench/step_bench.h"

#include <omp.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include "bench/bench_common.h"
#include "bench/real_peers.h"
#include "core/error.h"
#include "core/exec_context.h"
#include "core/output_file.h"
#include "loop/controller.h"
#include "loop/worker_process.h"
#include "model/checkpoint.h"
#include "model/init.h"
#include "model/model_config.h"
#include "report/run_records.h"
#include "trainer/algorithm.h"

namespace rlcpp::bench {

namespace {

// The columns of the table: each rlcpp phase belongs to one (mismatch, advantage, ref_logprob, values and the
// controller's own remainder are "other"; eval and checkpoint are left out of the step).
const std::vector<std::string> kColumns = {"rollout", "reward", "old_logprob", "update", "sync", "probe", "other"};
const std::map<std::string, std::vector<std::string>> kPhasesOfColumn = {
    {"rollout", {"rollout"}},
    {"reward", {"reward"}},
    {"old_logprob", {"old_logprob"}},
    {"update", {"update_actor", "update_critic"}},
    {"sync", {"weight_sync"}},
    {"probe", {"probe"}},
    {"other", {"mismatch", "advantage", "ref_logprob", "values", "other"}},
};

struct StepFigures {
  double step_s = 0;                      // median over the timed steps, eval and checkpoint excluded
  std::map<std::string, double> column_s;  // median per column
  double tokens = 0;                      // prompt + response tokens of a step's sequences (tokens/sequences)
  double generated_tokens = 0;            // response tokens of a step
  int64_t timed_steps = 0;
  // Async only (medians): the background draws' wall time and the part of it the trainer's work hid.
  double rollout_wall_s = 0, rollout_overlapped_s = 0;
  double allreduce_wait_s = 0;  // data-parallel only (median): the wait for the gradient all-reduce
};

// What --device, --dtype and --new-tokens set, applied before the user's --set (which wins). On a GPU the engine
// runs cuBLAS (the batch-invariant products are the CPU's fma chains, not what a GPU step should time) and the
// split worker shares the trainer's GPU over cuda-ipc.
std::vector<std::string> option_overrides(const StepBenchOptions& o, const std::string& placement) {
  std::vector<std::string> out;
  if (o.device != "cpu") {
    out.push_back("device=" + o.device);
    out.push_back("numerics.batch_invariant=false");
    if (placement == "split") out.push_back("rollout.weight_sync=cuda-ipc");
  }
  if (o.dtype != "fp32") {
    out.push_back("rollout.dtype=" + o.dtype);
    out.push_back("trainer.dtype=" + o.dtype);
  }
  if (o.new_tokens > 0) out.push_back("rollout.sampling.max_new_tokens=" + std::to_string(o.new_tokens));
  return out;
}

// The recipe of configs/grpo_add3_benchmark.json, RL part only: random init (no warm start), `steps` steps, eval and
// checkpoint only at the last step (kept out of the figures), fixed-length responses.
// `algorithm` ("" = the recipe's GRPO): another algorithm of trainer/algorithm.h with its own defaults.
TrainConfig step_config(const StepBenchOptions& o, const std::string& placement, const std::string& run_dir,
                        const std::string& algorithm = "") {
  const std::string recipe = source_dir() + "/configs/grpo_add3_benchmark.json";
  TrainConfig c;
  try {
    Json j = load_json_file(recipe);
    // Another algorithm starts from its own defaults (the recipe's algorithm section is GRPO's).
    if (!algorithm.empty()) j["algorithm"] = Json{{"name", algorithm}};
    for (const std::string& assignment : option_overrides(o, placement)) apply_override(j, assignment);
    for (const std::string& assignment : o.overrides) apply_override(j, assignment);
    config_from_json(j, c);
  } catch (const Error& e) {
    throw Error(recipe + ": " + e.what());
  }
  c.run_dir = run_dir;
  // Distillation's teacher: a random model of the policy's shape (the step costs the same as a trained one's).
  if (!algorithm.empty() && find_algorithm(algorithm).needs(c.algorithm).teacher_logp) {
    c.algorithm.distill.teacher = run_dir + "_teacher";
    save_model_checkpoint(c.algorithm.distill.teacher, init_random(model_preset(o.preset), 2), /*overwrite=*/true);
  }
  c.init_checkpoint.clear();
  c.warm_start.enabled = false;
  c.model_preset = o.preset;
  c.rollout.placement = placement;
  c.rollout.num_workers = 1;
  // A random model ends 1 response in ~6 early at EOS; the peer samples exactly max_new_tokens, so both
  // run the same shapes. (The reward is then 0 everywhere; scoring and the update cost the same.)
  c.rollout.sampling.ignore_eos = true;
  c.steps = o.warmup + o.iters;
  c.eval_every = 0;  // = only after the last step, which then is not timed
  c.eval_size = 1;
  c.checkpoint_every = 0;
  c.log_every = c.steps;
  return c;
}

// The figures of the timed steps (after the warm-up) of a run's metrics.jsonl.
StepFigures read_step_figures(const StepBenchOptions& o, const std::string& run_dir) {
  std::vector<double> steps, tokens, generated, rollout_wall, overlapped, allreduce;
  std::map<std::string, std::vector<double>> columns;
  for (const Json& j : read_metrics_records(run_dir + "/metrics.jsonl")) {
    const int64_t step = j.at("step").get<int64_t>();
    // The last step also ran eval and wrote the checkpoint; its figure without them is still a step.
    if (step <= o.warmup) continue;
    auto t = [&](const std::string& phase) { return j.at("timing_s/" + phase).get<double>(); };
    steps.push_back(t("step") - t("eval") - t("checkpoint"));
    for (const auto& [column, phases] : kPhasesOfColumn) {
      double s = 0;
      for (const std::string& p : phases) s += t(p);
      columns[column].push_back(s);
    }
    tokens.push_back(j.at("tokens/sequences").get<double>());
    generated.push_back(j.at("rollout/generated_tokens").get<double>());
    if (j.contains("timing_s/rollout_wall")) {
      rollout_wall.push_back(t("rollout_wall") + t("reward_wall"));
      overlapped.push_back(t("rollout_overlapped"));
    }
    if (j.contains("actor/allreduce_wait_s")) allreduce.push_back(j.at("actor/allreduce_wait_s").get<double>());
  }
  RLCPP_CHECK(!steps.empty(), "bench step: no timed step in " << run_dir << "/metrics.jsonl");
  StepFigures f;
  f.step_s = median_of(steps);
  for (const auto& [column, values] : columns) f.column_s[column] = median_of(values);
  f.tokens = median_of(tokens);
  f.generated_tokens = median_of(generated);
  f.timed_steps = static_cast<int64_t>(steps.size());
  if (!rollout_wall.empty()) {
    f.rollout_wall_s = median_of(rollout_wall);
    f.rollout_overlapped_s = median_of(overlapped);
  }
  if (!allreduce.empty()) f.allreduce_wait_s = median_of(allreduce);
  return f;
}

StepFigures run_placement(const StepBenchOptions& o, const std::string& placement, const std::string& dir,
                          const std::string& algorithm = "", const std::string& label = "") {
  const TrainConfig cfg = step_config(o, placement, dir + "/" + placement + algorithm + label, algorithm);
  const TrainSummary summary = run_train(cfg, config_to_json(cfg));
  return read_step_figures(o, summary.run_dir);
}

// The split placement as `o.ranks` data-parallel ranks of one OpenMP thread each: `mpirun -np N rlcpp train`.
StepFigures run_data_parallel(const StepBenchOptions& o, const std::string& dir) {
  const std::string run_dir = dir + "/split_ranks" + std::to_string(o.ranks);
  const TrainConfig cfg = step_config(o, "split", run_dir);
  const std::string config_file = dir + "/ranks_config.json";
  write_json_file_atomic(config_file, config_to_json(cfg));
  const std::string command = "mpirun --allow-run-as-root --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -np " +
                              std::to_string(o.ranks) + " '" + current_executable() + "' train '" + config_file +
                              "' > '" + dir + "/ranks.log' 2>&1";
  std::printf("step bench: %s\n", command.c_str());
  std::fflush(stdout);
  RLCPP_CHECK(std::system(command.c_str()) == 0,
              "bench step: `" << command << "` failed; its output is in " << dir << "/ranks.log");
  return read_step_figures(o, run_dir);
}

// Shares as the peer computes them: each column's median over the sum of the column medians.
std::map<std::string, double> shares(const StepFigures& f) {
  double total = 0;
  for (const auto& [c, s] : f.column_s) total += s;
  std::map<std::string, double> out;
  for (const auto& [c, s] : f.column_s) out[c] = total > 0 ? s / total : 0.0;
  return out;
}

void print_row(const char* name, double step_ms, double tokens, const std::map<std::string, double>& share,
               const std::map<std::string, bool>& present) {
  std::printf("  %-32s %9.1f %7.0f", name, step_ms, tokens);
  for (const std::string& c : kColumns) {
    if (present.at(c))
      std::printf(" %10.1f%%", 100 * share.at(c));
    else
      std::printf(" %11s", "-");
  }
  std::printf("\n");
}

Json figures_json(const StepFigures& f) {
  Json j = {{"step_ms", 1e3 * f.step_s}, {"tokens", f.tokens}, {"generated_tokens", f.generated_tokens},
            {"timed_steps", f.timed_steps}};
  const auto share = shares(f);
  for (const std::string& c : kColumns) {
    j[c + "_ms"] = 1e3 * f.column_s.at(c);
    j[c + "_share"] = share.at(c);
  }
  return j;
}

// A step peer's row (the torch peer's or hf-pytorch's JSON: step_ms and a `_share` per column it has; the
// columns it lacks are "-"), then its step time over rlcpp's split and colocated ones, with the goal when there
// is one (> 0). Returns the ratios.
Json print_peer_step(const std::string& name, const Json& peer, double tokens,
                     const std::vector<std::pair<std::string, StepFigures>>& rows, double goal) {
  std::map<std::string, double> share;
  std::map<std::string, bool> present;
  for (const std::string& c : kColumns) {
    present[c] = peer.contains(c + "_share");
    share[c] = peer.value(c + "_share", 0.0);
  }
  print_row(name.c_str(), peer["step_ms"].get<double>(), tokens, share, present);
  const double peer_s = peer["step_ms"].get<double>() / 1e3;
  Json ratios = Json::object();
  std::printf("  ratio %s / rlcpp step time:", name.c_str());
  for (const auto& [row, f] : rows) {
    if (row != "rlcpp split" && row != "rlcpp colocated") continue;
    const std::string key = row == "rlcpp split" ? "split" : "colocated";
    std::printf(" %s %.2fx", key.c_str(), peer_s / f.step_s);
    ratios["ratio_" + key] = peer_s / f.step_s;
  }
  if (goal > 0) std::printf("  (goal >= %gx)", goal);
  std::printf("\n");
  return ratios;
}

}  // namespace

static int run_step_bench_in(const StepBenchOptions& o, const TempDir& dir);

int run_step_bench(const StepBenchOptions& o) {
  RLCPP_CHECK(o.warmup >= 0 && o.iters >= 1, "bench step: --warmup must be >= 0 and --iters >= 1, got "
                                                  << o.warmup << " and " << o.iters);
  const ModelConfig mc = model_preset(o.preset);
  TempDir dir("step_bench");
  RLCPP_CHECK(o.throttle_ms >= 0, "bench step: --throttle-ms must be >= 0, got " << o.throttle_ms);
  RLCPP_CHECK(o.ranks >= 1 && o.ranks <= 64, "bench step: --ranks must be in [1, 64], got " << o.ranks);
  RLCPP_CHECK(o.dtype == "fp32" || o.dtype == "bf16" || o.dtype == "fp16",
              "bench step --dtype: fp32, bf16 or fp16, got '" << o.dtype << "'");
  RLCPP_CHECK(o.new_tokens >= 0, "bench step --new-tokens must be >= 1 (0 = the recipe's), got " << o.new_tokens);
  if (o.device != "cpu") {
    context_for_device(o.device, "bench step --device");  // a GPU that is not there is refused before any work
    RLCPP_CHECK(o.ranks == 1, "bench step --ranks: the data-parallel ranks run on the CPU (mpirun), not with --device "
                                  << o.device);
  }
  if (o.throttle_ms > 0) {  // every split run's worker goes through a wrapper that slows it down
    const std::string wrapper = dir.path() + "/throttled_worker.sh";
    std::ostringstream text;
    text << "#!/bin/sh\nexec '" << current_executable() << "' \"$@\" --throttle-ms " << o.throttle_ms << "\n";
    OutputFile script(wrapper, OutputFile::Mode::kReplace);
    script.write(text.str());
    script.close();
    std::filesystem::permissions(wrapper, std::filesystem::perms::owner_all);
    StepBenchOptions throttled = o;
    throttled.overrides.push_back("rollout.worker_binary=" + wrapper);
    throttled.colocated = false;
    throttled.throttle_ms = 0;
    std::printf("step bench: the split worker sleeps %g ms after every engine step (rlcpp worker --throttle-ms)\n",
                o.throttle_ms);
    return run_step_bench_in(throttled, dir);
  }
  return run_step_bench_in(o, dir);
}

static int run_step_bench_in(const StepBenchOptions& o, const TempDir& dir) {
  const ModelConfig mc = model_preset(o.preset);
  const bool on_gpu = o.device != "cpu";
  // The step peers of the device: Debian's PyTorch 1.13 for W1 fp32 on the CPU, Hugging Face + PyTorch on a GPU.
  const std::string peers = on_gpu && o.peers == "torch" ? "hf-pytorch" : o.peers;
  const std::vector<std::string> real = o.peer ? real_peers_in(peers, {"trl", "hf-pytorch"}) : std::vector<std::string>{};
  const bool torch_peer = o.peer && list_has(peers, "torch") && o.preset == "tiny" && !on_gpu && o.dtype == "fp32";
  if (o.peer && list_has(peers, "torch") && !torch_peer)
    std::printf("step bench: the PyTorch 1.13 peer (torch) times W1 in fp32 on the CPU only: not run here\n");
  std::printf("step bench: one GRPO step of configs/grpo_add3_benchmark.json (RL part) on preset %s (%lld params), "
              "random init, fixed-length responses, %s on %s, %d threads; median of %d steps after %d\n",
              o.preset.c_str(), static_cast<long long>(mc.num_parameters()), o.dtype.c_str(), o.device.c_str(),
              omp_get_max_threads(), o.iters, o.warmup);
  for (const std::string& s : option_overrides(o, "split")) std::printf("  by the options: %s\n", s.c_str());
  for (const std::string& s : o.overrides) std::printf("  --set %s\n", s.c_str());
  std::fflush(stdout);
  const StepFigures split = run_placement(o, "split", dir.path());
  std::vector<std::pair<std::string, StepFigures>> rows = {{"rlcpp split", split}};

  // The peer runs the same shapes: the mean prompt (BOS + "a+b=", 7..9 tokens) rounded, 6 new tokens.
  const TrainConfig cfg = step_config(o, "split", "");
  const int64_t sequences = cfg.rollout.prompts_per_step * cfg.rollout.group_size;
  const int64_t new_tokens = cfg.rollout.sampling.max_new_tokens;
  const int64_t prompt_len = std::lround(split.tokens / static_cast<double>(sequences)) - new_tokens;
  const int64_t minibatches = cfg.ppo.mini_batch_size > 0 ? sequences / cfg.ppo.mini_batch_size : 1;
  Json peer = nullptr;
  if (torch_peer)
    peer = run_torch_peer(source_dir(), "grpo-step --prompts " + std::to_string(cfg.rollout.prompts_per_step) +
                                            " --group " + std::to_string(cfg.rollout.group_size) + " --prompt-len " +
                                            std::to_string(prompt_len) + " --new-tokens " +
                                            std::to_string(new_tokens) + " --minibatches " +
                                            std::to_string(minibatches) + " --iters " + std::to_string(o.iters) +
                                            " --warmup 1 --threads best");
  if (o.colocated) rows.emplace_back("rlcpp colocated", run_placement(o, "colocated", dir.path()));
  std::optional<StepFigures> ranks;
  if (o.ranks > 1) {
    ranks = run_data_parallel(o, dir.path());
    rows.emplace_back("rlcpp split " + std::to_string(o.ranks) + " ranks x 1 thr", *ranks);
  }
  std::optional<StepFigures> async;
  if (o.async) {
    StepBenchOptions a = o;
    a.overrides.push_back("async.max_staleness=1");
    async = run_placement(a, "split", dir.path(), "", "_async");
    rows.emplace_back("rlcpp split async", *async);
  }
  // The real peers (TRL's own GRPOTrainer; Hugging Face generate + a PyTorch update on the GPU): the same recipe on
  // a random model of the same shape, as a Hugging Face directory.
  const std::string peer_checkpoint = dir.path() + "/peer_init";
  if (!real.empty()) save_model_checkpoint(peer_checkpoint, init_random(mc, 1));
  const std::string peer_shape = "--prompts " + std::to_string(cfg.rollout.prompts_per_step) + " --group " +
                                 std::to_string(cfg.rollout.group_size) + " --new-tokens " +
                                 std::to_string(new_tokens) + " --minibatches " + std::to_string(minibatches) +
                                 " --iters " + std::to_string(o.iters) + " --warmup 1";
  std::optional<PeerRun> trl, hf;
  auto wanted = [&](const std::string& name) { return std::find(real.begin(), real.end(), name) != real.end(); };
  // A LoRA recipe (--set trainer.lora.rank=R): TRL trains the same adapters through peft.
  std::string peer_lora;
  if (cfg.trainer.lora.enabled()) {
    std::string targets;
    for (const std::string& t : cfg.trainer.lora.resolved_targets()) targets += (targets.empty() ? "" : ",") + t;
    char alpha[32];
    std::snprintf(alpha, sizeof alpha, "%g", cfg.trainer.lora.alpha);
    peer_lora = " --lora-rank " + std::to_string(cfg.trainer.lora.rank) + " --lora-alpha " + alpha +
                " --lora-targets " + targets;
  }
  if (wanted("trl"))
    trl = run_real_peer("trl", "step --checkpoint '" + peer_checkpoint + "' " + peer_shape + " --threads " +
                                   std::to_string(omp_get_max_threads()) + peer_lora);
  if (wanted("hf-pytorch") && cfg.trainer.lora.enabled())
    std::printf("step bench: the hf-pytorch peer trains every weight: not run with trainer.lora\n");
  else if (wanted("hf-pytorch")) {
    const std::string torch_dtype = o.dtype == "bf16" ? "bfloat16" : o.dtype == "fp16" ? "float16" : "float32";
    hf = run_real_peer("hf-pytorch", "step --checkpoint '" + peer_checkpoint + "' " + peer_shape + " --prompt-len " +
                                         std::to_string(prompt_len) + " --dtype " + torch_dtype + " --device " +
                                         o.device);
  }

  std::printf("\nstep bench: %lld prompts x %lld, %lld new tokens, %lld mini-batches; step excludes eval and "
              "checkpoint\n",
              static_cast<long long>(cfg.rollout.prompts_per_step), static_cast<long long>(cfg.rollout.group_size),
              static_cast<long long>(new_tokens), static_cast<long long>(minibatches));
  std::printf("  %-32s %9s %7s", "", "step ms", "tokens");
  for (const std::string& c : kColumns) std::printf(" %11s", c.c_str());
  std::printf("\n");
  std::map<std::string, bool> all_present;
  for (const std::string& c : kColumns) all_present[c] = true;
  Json out = {{"bench", "step"}, {"preset", o.preset}, {"device", o.device}, {"dtype", o.dtype},
              {"weight_sync", cfg.rollout.weight_sync}, {"warmup", o.warmup}, {"iters", o.iters},
              {"prompts", cfg.rollout.prompts_per_step}, {"group", cfg.rollout.group_size},
              {"new_tokens", new_tokens}, {"minibatches", minibatches}, {"threads", omp_get_max_threads()}};
  for (const auto& [name, f] : rows) {
    print_row(name.c_str(), 1e3 * f.step_s, f.tokens, shares(f), all_present);
    const std::string key = name == "rlcpp split"       ? "split"
                            : name == "rlcpp colocated" ? "colocated"
                            : name == "rlcpp split async" ? "split_async"
                                                          : "split_ranks";
    out[key] = figures_json(f);
  }
  const double peer_tokens = static_cast<double>(sequences * (prompt_len + new_tokens));
  if (!peer.is_null() && peer.contains("step_ms")) {
    // The peer has no weight sync or probe, and its phases cover its whole step ("other" is 0).
    char name[64];
    std::snprintf(name, sizeof name, "PyTorch peer (%s thr)", peer.value("threads", Json("?")).dump().c_str());
    out["peer"] = peer;
    out.update(print_peer_step(name, peer, peer_tokens, rows, 2));
  }
  if (hf) {
    // Its sync is the weight copy from the policy to its rollout model; it has no probe.
    if (!hf->result.is_null() && hf->result.contains("step_ms")) {
      const std::string name = "HF+PyTorch (torch " + hf->result.value("torch", std::string("?")) + ")";
      Json result = hf->result;
      // docs/benchmarks.md's goal is for the GPU (rlcpp >= 3x); on the CPU the row is for reference.
      result.update(print_peer_step(name, hf->result, peer_tokens, rows, on_gpu ? 3 : 0));
      out["hf_pytorch"] = result;
    } else {
      std::printf("  HF+PyTorch peer did not run: %s\n", hf->skipped.c_str());
      out["hf_pytorch"] = {{"skipped", hf->skipped}};
    }
  }
  if (trl) {
    std::printf("  step time against TRL's GRPOTrainer (its responses end at EOS, rlcpp's are fixed-length):\n");
    const PeerFigure figure = peer_figure(*trl, "step_ms");
    for (const auto& [name, f] : rows)
      for (const std::string& row : comparison_rows(name, 1e3 * f.step_s, {figure}, "ms", false))
        std::printf("%s\n", row.c_str());
    if (!trl->result.is_null()) {
      std::printf("  trl peer: %s\n", trl->result.dump().c_str());
      out["trl"] = trl->result;
    } else {
      out["trl"] = {{"skipped", trl->skipped}};
    }
  }
  if (!o.algorithms.empty()) {
    // Each algorithm's step from the same recipe (its own defaults for the algorithm section), split placement.
    // advantage, ref_logprob (a KL to the reference) and values (PPO's critic) are in "other".
    Json algos = Json::object();
    std::vector<std::pair<std::string, StepFigures>> figures;  // all runs first: their logs would split the table
    for (const std::string& name : o.algorithms) figures.emplace_back(name, run_placement(o, "split", dir.path(), name));
    std::printf("\n  algorithms (split; the ratio is the step time over GRPO's above; with the random model every "
                "reward is 0, so dpo finds no pair and makes no update):\n");
    for (const auto& [name, f] : figures) {
      char label[64];
      std::snprintf(label, sizeof label, "%s (%.2fx)", name.c_str(), f.step_s / split.step_s);
      print_row(label, 1e3 * f.step_s, f.tokens, shares(f), all_present);
      algos[name] = figures_json(f);
      algos[name]["ratio_to_grpo"] = f.step_s / split.step_s;
    }
    out["algorithms"] = algos;
  }
  if (async) {
    // The synchronous split step's rollout side (rollout + reward) against the rest: overlapped perfectly, a
    // step takes the longer of the two.
    const double rollout_side = split.column_s.at("rollout") + split.column_s.at("reward");
    const double bound = std::max(rollout_side, split.step_s - rollout_side);
    std::printf("  async (staleness 1): step %.1f ms = %.2fx the synchronous split step; max(rollout %.1f, rest "
                "%.1f) = %.1f ms, async / max = %.2f (goal <= 1.10); background draws %.1f ms, %.1f ms of it "
                "hidden\n",
                1e3 * async->step_s, async->step_s / split.step_s, 1e3 * rollout_side,
                1e3 * (split.step_s - rollout_side), 1e3 * bound, async->step_s / bound, 1e3 * async->rollout_wall_s,
                1e3 * async->rollout_overlapped_s);
    out["async"] = {{"step_ms", 1e3 * async->step_s}, {"sync_step_ms", 1e3 * split.step_s},
                    {"max_rollout_rest_ms", 1e3 * bound}, {"ratio_to_max", async->step_s / bound},
                    {"background_ms", 1e3 * async->rollout_wall_s},
                    {"hidden_ms", 1e3 * async->rollout_overlapped_s}};
  }
  if (ranks) {
    std::printf("  %d ranks x 1 thread: step %.1f ms = %.2fx the one-rank %d-thread step; gradient all-reduce wait "
                "%.1f ms = %.1f%% of the step\n",
                o.ranks, 1e3 * ranks->step_s, ranks->step_s / split.step_s, omp_get_max_threads(),
                1e3 * ranks->allreduce_wait_s, 100 * ranks->allreduce_wait_s / ranks->step_s);
    out["ranks"] = {{"ranks", o.ranks}, {"step_ms", 1e3 * ranks->step_s}, {"one_rank_step_ms", 1e3 * split.step_s},
                    {"allreduce_wait_ms", 1e3 * ranks->allreduce_wait_s},
                    {"allreduce_share", ranks->allreduce_wait_s / ranks->step_s}};
  }
  const double sync_share = shares(split).at("sync");
  std::printf("  weight sync (split, %s): %.1f ms = %.2f%% of the step (goal < 2%%)\n",
              cfg.rollout.weight_sync == "zmq" ? "zmq over ipc://" : cfg.rollout.weight_sync.c_str(),
              1e3 * split.column_s.at("sync"), 100 * sync_share);
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace rlcpp::bench
