#include "bench/step_bench.h"

#include <omp.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <vector>

#include "bench/bench_common.h"
#include "bench/real_peers.h"
#include "model/checkpoint.h"
#include "model/init.h"
#include "core/error.h"
#include "loop/controller.h"
#include "loop/worker_process.h"
#include "model/model_config.h"
#include "trainer/algorithm.h"

namespace rlcpp::bench {

namespace {

// The columns of the table: each rlcpp phase belongs to one (advantage, ref_logprob, values and the
// controller's own remainder are "other"; eval and checkpoint are left out of the step).
const std::vector<std::string> kColumns = {"rollout", "reward", "old_logprob", "update", "sync", "probe", "other"};
const std::map<std::string, std::vector<std::string>> kPhasesOfColumn = {
    {"rollout", {"rollout"}},
    {"reward", {"reward"}},
    {"old_logprob", {"old_logprob"}},
    {"update", {"update_actor", "update_critic"}},
    {"sync", {"weight_sync"}},
    {"probe", {"probe"}},
    {"other", {"advantage", "ref_logprob", "values", "other"}},
};

struct StepFigures {
  double step_s = 0;                      // median over the timed steps, eval and checkpoint excluded
  std::map<std::string, double> column_s;  // median per column
  double tokens = 0;                      // prompt + response tokens of a step
  double generated_tokens = 0;            // response tokens of a step
  int64_t timed_steps = 0;
  // Async only (medians): the background draws' wall time and the part of it the trainer's work hid.
  double rollout_wall_s = 0, rollout_overlapped_s = 0;
  double allreduce_wait_s = 0;  // data-parallel only (median): the wait for the gradient all-reduce
};

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
  std::ifstream in(run_dir + "/metrics.jsonl");
  RLCPP_CHECK(in, "bench step: " << run_dir << "/metrics.jsonl is missing");
  std::vector<double> steps, tokens, generated, rollout_wall, overlapped, allreduce;
  std::map<std::string, std::vector<double>> columns;
  for (std::string line; std::getline(in, line);) {
    const Json j = Json::parse(line);
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
    tokens.push_back(j.at("tokens").get<double>());
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
  std::printf("  %-26s %9.1f %7.0f", name, step_ms, tokens);
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

}  // namespace

static int run_step_bench_in(const StepBenchOptions& o, const TempDir& dir);

int run_step_bench(const StepBenchOptions& o) {
  RLCPP_CHECK(o.warmup >= 0 && o.iters >= 1, "bench step: --warmup must be >= 0 and --iters >= 1, got "
                                                  << o.warmup << " and " << o.iters);
  const ModelConfig mc = model_preset(o.preset);
  TempDir dir("step_bench");
  RLCPP_CHECK(o.throttle_ms >= 0, "bench step: --throttle-ms must be >= 0, got " << o.throttle_ms);
  RLCPP_CHECK(o.ranks >= 1 && o.ranks <= 64, "bench step: --ranks must be in [1, 64], got " << o.ranks);
  if (o.throttle_ms > 0) {  // every split run's worker goes through a wrapper that slows it down
    const std::string wrapper = dir.path() + "/throttled_worker.sh";
    std::ofstream(wrapper) << "#!/bin/sh\nexec '" << current_executable() << "' \"$@\" --throttle-ms "
                           << o.throttle_ms << "\n";
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
  std::printf("step bench: one GRPO step of configs/grpo_add3_benchmark.json (RL part) on preset %s (%lld params), "
              "random init, fixed-length responses, CPU, %d threads; median of %d steps after %d\n",
              o.preset.c_str(), static_cast<long long>(mc.num_parameters()), omp_get_max_threads(), o.iters,
              o.warmup);
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
  if (o.peer && list_has(o.peers, "torch") && o.preset == "tiny")
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
  // TRL's own GRPOTrainer, the same recipe on a random model of the same shape.
  std::optional<PeerRun> trl;
  if (o.peer && !real_peers_in(o.peers, {"trl"}).empty()) {
    const std::string checkpoint = dir.path() + "/trl_init";
    save_model_checkpoint(checkpoint, init_random(mc, 1));
    trl = run_real_peer("trl", "step --checkpoint '" + checkpoint + "' --prompts " +
                                   std::to_string(cfg.rollout.prompts_per_step) + " --group " +
                                   std::to_string(cfg.rollout.group_size) + " --new-tokens " +
                                   std::to_string(new_tokens) + " --minibatches " + std::to_string(minibatches) +
                                   " --iters " + std::to_string(o.iters) + " --warmup 1 --threads " +
                                   std::to_string(omp_get_max_threads()));
  }

  std::printf("\nstep bench: %lld prompts x %lld, %lld new tokens, %lld mini-batches; step excludes eval and "
              "checkpoint\n",
              static_cast<long long>(cfg.rollout.prompts_per_step), static_cast<long long>(cfg.rollout.group_size),
              static_cast<long long>(new_tokens), static_cast<long long>(minibatches));
  std::printf("  %-26s %9s %7s", "", "step ms", "tokens");
  for (const std::string& c : kColumns) std::printf(" %11s", c.c_str());
  std::printf("\n");
  std::map<std::string, bool> all_present;
  for (const std::string& c : kColumns) all_present[c] = true;
  Json out = {{"bench", "step"}, {"preset", o.preset}, {"warmup", o.warmup}, {"iters", o.iters},
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
  const bool have_peer = !peer.is_null() && peer.contains("step_ms");
  if (have_peer) {
    // The peer has no weight sync or probe, and its phases cover its whole step ("other" is 0).
    std::map<std::string, double> share;
    std::map<std::string, bool> present;
    for (const std::string& c : kColumns) {
      present[c] = peer.contains(c + "_share");
      share[c] = peer.value(c + "_share", 0.0);
    }
    char name[64];
    std::snprintf(name, sizeof name, "PyTorch peer (%s thr)", peer.value("threads", Json("?")).dump().c_str());
    const double peer_tokens = static_cast<double>(sequences * (prompt_len + new_tokens));
    print_row(name, peer["step_ms"].get<double>(), peer_tokens, share, present);
    out["peer"] = peer;
    const double peer_s = peer["step_ms"].get<double>() / 1e3;
    std::printf("  ratio peer / rlcpp step time: split %.2fx", peer_s / split.step_s);
    out["ratio_split"] = peer_s / split.step_s;
    if (o.colocated) {
      std::printf(", colocated %.2fx", peer_s / rows[1].second.step_s);
      out["ratio_colocated"] = peer_s / rows[1].second.step_s;
    }
    std::printf("  (goal >= 2x)\n");
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
  std::printf("  weight sync (split, zmq over ipc://): %.1f ms = %.2f%% of the step (goal < 2%%)\n",
              1e3 * split.column_s.at("sync"), 100 * sync_share);
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace rlcpp::bench
