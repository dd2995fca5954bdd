// rlcpp train with the split placement (two worker processes over ipc://, weights over the zmq channel) gives the
// same samples and metrics as the colocated placement with the same seed: the worker samples with exactly
// the trainer's weights after every sync. So does an async run whose workers run at different speeds.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "loop/controller.h"
#include "model/checkpoint.h"
#include "model/init.h"
#include "model/lora.h"
#include "tests/app_test_support.h"
#include "tests/train_test_support.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

// Runs a and b wrote the same samples and, but for run-dependent keys (timing, layout, per-worker figures), the
// same metrics, `steps` records each; returns b's records.
std::vector<Json> expect_same_samples_and_metrics(const TrainSummary& a, const TrainSummary& b, size_t steps) {
  EXPECT_EQ(read_jsonl(fs::path(a.run_dir) / "samples.jsonl"), read_jsonl(fs::path(b.run_dir) / "samples.jsonl"));
  const std::vector<Json> ma = read_jsonl(fs::path(a.run_dir) / "metrics.jsonl");
  const std::vector<Json> mb = read_jsonl(fs::path(b.run_dir) / "metrics.jsonl");
  EXPECT_EQ(ma.size(), steps);
  EXPECT_EQ(mb.size(), steps);
  for (size_t i = 0; i < std::min(ma.size(), mb.size()); ++i)
    for (const auto& [key, value] : ma[i].items())
      if (!run_dependent_key(key)) EXPECT_EQ(value, mb[i][key]) << "step " << i + 1 << " key " << key;
  return mb;
}

// An async (staleness 1) run of small_grpo_run colocated, and split over `workers` workers started by `wrapper`
// (a script around rlcpp that slows or kills one), both under `root`; checks that the split run ends with the
// colocated run's weights and wrote its samples and metrics, and returns its records.
std::vector<Json> async_split_equals_colocated(const fs::path& root, const fs::path& wrapper, int64_t workers,
                                               int64_t chunk_prompts) {
  TrainConfig c = small_grpo_run(small_train_checkpoint(root / "init"), 5);
  c.async.max_staleness = 1;
  TrainConfig colocated = c;
  colocated.run_dir = (root / "colocated").string();
  TrainConfig split = c;
  split.run_dir = (root / "split").string();
  split.rollout.placement = "split";
  split.rollout.num_workers = workers;
  split.rollout.chunk_prompts = chunk_prompts;
  split.rollout.worker_binary = wrapper.string();
  const TrainSummary a = run_train(colocated, config_to_json(colocated));
  const TrainSummary b = run_train(split, config_to_json(split));
  EXPECT_TRUE(same_weights(a.checkpoint, b.checkpoint));
  return expect_same_samples_and_metrics(a, b, 5);
}

TEST(TrainSplit, SplitAndColocatedRunsGiveTheSameSamplesAndMetrics) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_split_test";
  fs::remove_all(root);
  small_train_checkpoint(root / "init");

  TrainConfig c;
  c.init_checkpoint = (root / "init").string();
  c.rollout.prompts_per_step = 8;
  c.rollout.group_size = 8;
  c.rollout.worker_binary = RLCPP_BINARY_DIR "/rlcpp";
  c.ppo.mini_batch_size = 32;
  c.ppo.micro_batch_size = 32;
  c.optim.lr = 3e-3;
  c.steps = 4;
  c.eval_every = 0;
  c.eval_size = 10;

  TrainConfig colocated = c;
  colocated.run_dir = (root / "colocated").string();
  colocated.rollout.placement = "colocated";
  TrainConfig split = c;
  split.run_dir = (root / "split").string();
  split.rollout.placement = "split";
  split.rollout.num_workers = 2;  // prompts divided between two processes: samples are keyed, not placed
  const TrainSummary a = run_train(colocated, config_to_json(colocated));
  const TrainSummary b = run_train(split, config_to_json(split));

  for (const Json& m : expect_same_samples_and_metrics(a, b, 4)) {
    EXPECT_GT(m["timing_s/weight_sync"].get<double>(), 0);
    EXPECT_EQ(m["probe/max_abs_dlogp"].get<double>(), 0.0);  // engine and trainer agree bit for bit
  }
  // The split run's worker got step_0 as its initial weights and removed its sockets on exit.
  EXPECT_TRUE(fs::exists(fs::path(b.run_dir) / "checkpoints/step_0/model.safetensors"));
  EXPECT_FALSE(fs::exists(fs::path(b.run_dir) / "worker0.ipc"));
  EXPECT_FALSE(fs::exists(fs::path(b.run_dir) / "worker1_weights.ipc"));
}

// `c` at async.max_staleness `staleness`, colocated and split over two workers (under root/colocatedS and
// root/splitS): checks that both end with the same weights and wrote the same samples and metrics, and returns the
// split run's records.
std::vector<Json> colocated_and_split_agree(TrainConfig c, const fs::path& root, int64_t staleness) {
  c.async.max_staleness = staleness;
  TrainConfig colocated = c;
  colocated.run_dir = (root / ("colocated" + std::to_string(staleness))).string();
  TrainConfig split = c;
  split.run_dir = (root / ("split" + std::to_string(staleness))).string();
  split.rollout.placement = "split";
  split.rollout.num_workers = 2;
  const TrainSummary a = run_train(colocated, config_to_json(colocated));
  const TrainSummary b = run_train(split, config_to_json(split));
  EXPECT_TRUE(same_weights(a.checkpoint, b.checkpoint)) << "staleness " << staleness;
  return expect_same_samples_and_metrics(a, b, static_cast<size_t>(c.steps));
}

// A LoRA run (trainer.lora) split over two workers: each worker merges the adapters a sync carries into the run's
// frozen base (checkpoints/reference) itself, so the run gives the colocated LoRA run's samples, metrics and weights
// bit for bit — synchronous, and async with the backend's snapshot of the adapters — while a sync moves the
// adapters' bytes alone (rank 4 on q_proj and v_proj: 1,792 floats, not the model's ~100 k).
TEST(TrainSplit, LoraRunSyncsItsAdaptersAloneAndEqualsTheColocatedOne) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_split_lora_test";
  fs::remove_all(root);
  TrainConfig c = small_grpo_run(small_train_checkpoint(root / "init"), 3);
  c.rollout.worker_binary = RLCPP_BINARY_DIR "/rlcpp";
  c.trainer.lora.rank = 4;
  c.trainer.lora.alpha = 8;
  c.trainer.lora.targets = {"q_proj", "v_proj"};
  c.optim.lr = 1e-2;
  const ParameterStore init = load_model_checkpoint(c.init_checkpoint);
  const int64_t adapter_floats = LoraAdapters(init.config(), c.trainer.lora).weights().numel();
  for (const int64_t staleness : {0, 1}) {
    for (const Json& m : colocated_and_split_agree(c, root, staleness)) {
      EXPECT_EQ(m["probe/max_abs_dlogp"].get<double>(), 0.0) << "staleness " << staleness;
      const double bytes = m["weight_sync/bytes"].get<double>();
      EXPECT_GT(bytes, 4.0 * static_cast<double>(adapter_floats));
      EXPECT_LT(bytes, 4.0 * static_cast<double>(adapter_floats) + 65536) << "the adapters and their layout only";
    }
  }
  EXPECT_LT(4 * adapter_floats, init.numel() / 10);
  fs::remove_all(root);
}

// rollout.lora_merge false: each worker keeps the frozen base as prepared and applies every version's adapters
// unmerged (model/lora_unmerged.h), as the colocated engine does: on two workers the run equals the colocated one
// bit for bit (synchronous, and async with the backend's snapshot of the adapters), the probe (the engine against the unmerged forward) reads 0, and the merged trainer's log-probs
// differ from the engine's by rounding alone (mismatch/*). With the base held in bf16 too.
TEST(TrainSplit, AnUnmergedLoraRunOnWorkersEqualsTheColocatedOne) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_split_lora_unmerged_test";
  fs::remove_all(root);
  TrainConfig c = small_grpo_run(small_train_checkpoint(root / "init"), 3);
  c.rollout.worker_binary = RLCPP_BINARY_DIR "/rlcpp";
  c.trainer.lora.rank = 4;
  c.trainer.lora.alpha = 8;
  c.optim.lr = 1e-2;
  c.rollout.lora_merge = false;
  for (const int64_t staleness : {0, 1}) {
    double mismatch = 0;
    for (const Json& m : colocated_and_split_agree(c, root, staleness)) {
      EXPECT_EQ(m["probe/max_abs_dlogp"].get<double>(), 0.0) << "staleness " << staleness;
      mismatch = std::max(mismatch, m["mismatch/max_abs_dlogp"].get<double>());
    }
    if (staleness > 0) continue;  // then mismatch/* holds the policy's lag too
    EXPECT_GT(mismatch, 0.0) << "the merged trainer and the unmerged engine sum in other orders";
    EXPECT_LT(mismatch, 1e-4) << "fp32 rounding of the same policy summed in two orders";
  }
  // The base held in bf16 (the colocated engine reads it as held, the workers its values from the run's
  // checkpoints/reference), with dropout in the update and a KL term whose reference is that base: the same bits.
  c.trainer.lora.base_dtype = "bf16";
  c.trainer.lora.dropout = 0.1;
  c.algorithm.policy_loss.kl_coef = 0.1;
  for (const Json& m : colocated_and_split_agree(c, root / "bf16_base", 0))
    EXPECT_EQ(m["probe/max_abs_dlogp"].get<double>(), 0.0) << "bf16 base";
  fs::remove_all(root);
}

// A worker whose logits overflow (finite weights, a final norm of 3e38) used to abort in its engine's OpenMP
// region, three times over its restarts, and the run reported only "killed by signal 6". The worker answers
// with the engine's error and the run stops with it.
TEST(TrainSplit, AWorkersSamplingErrorReachesTheRunNotASignal) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_split_overflow_test";
  fs::remove_all(root);
  ParameterStore init = load_model_checkpoint(small_train_checkpoint(root / "good"));
  Tensor norm = init.get("model.norm.weight");
  for (int64_t i = 0; i < norm.numel(); ++i) norm.data<float>()[i] = 3e38f;
  save_model_checkpoint((root / "init").string(), init);

  TrainConfig c;
  c.init_checkpoint = (root / "init").string();
  c.run_dir = (root / "run").string();
  c.rollout.placement = "split";
  c.rollout.num_workers = 1;
  c.rollout.prompts_per_step = 4;
  c.rollout.group_size = 4;
  c.rollout.worker_binary = RLCPP_BINARY_DIR "/rlcpp";
  c.samples_per_step = 16;
  c.ppo.mini_batch_size = 16;
  c.ppo.micro_batch_size = 16;
  c.filter_groups.max_groups = 4;
  c.steps = 1;
  c.eval_every = 0;
  c.eval_size = 4;
  std::string error = "<no error>";
  try {
    run_train(c, config_to_json(c));
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("worker ipc://"), std::string::npos) << error;
  EXPECT_NE(error.find("engine: sampling token"), std::string::npos) << error;
  EXPECT_NE(error.find("non-finite logits"), std::string::npos) << error;
  EXPECT_EQ(error.find("signal"), std::string::npos) << error;
  fs::remove_all(root);
}

// Two worker processes, the first slowed by 3 ms an engine step so that it serves fewer chunks and the draws
// finish in another order: the async run is still the colocated async run, sample for sample.
TEST(TrainSplit, AsyncRunWithAThrottledWorkerEqualsTheColocatedOne) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_async_throttle_test";
  fs::remove_all(root);
  fs::create_directories(root);
  const fs::path wrapper = root / "slow_worker0.sh";
  {
    std::ofstream out(wrapper);
    out << "#!/bin/sh\ncase \"$*\" in *\"--name worker0 \"*) exec " RLCPP_BINARY_DIR "/rlcpp \"$@\" --throttle-ms 3;; "
           "esac\nexec " RLCPP_BINARY_DIR "/rlcpp \"$@\"\n";
  }
  fs::permissions(wrapper, fs::perms::owner_all);
  const std::vector<Json> mb = async_split_equals_colocated(root, wrapper, 2, 1);
  double overlapped = 0;
  for (const Json& m : mb) overlapped += m["timing_s/rollout_overlapped"].get<double>();
  EXPECT_GT(overlapped, 0);  // the slowed draws ran behind the updates
}

// A worker killed while it draws a later step in the background (async) is restarted with the weights those
// draws sample with — the backend's copy of the last sync, not the trainer's weights it is updating meanwhile —
// so the run still equals the colocated async run.
TEST(TrainSplit, AsyncWorkerKilledMidDrawIsRestartedOnTheDrawsWeights) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_async_kill_test";
  fs::remove_all(root);
  fs::create_directories(root);
  const fs::path wrapper = root / "killed_once.sh", marker = root / "killed";
  std::ofstream(wrapper) << "#!/bin/sh\nif [ ! -e '" << marker.string() << "' ]; then touch '" << marker.string()
                         << "'; exec " RLCPP_BINARY_DIR "/rlcpp \"$@\" --inject-fault kill:4:2; fi\nexec "
                            RLCPP_BINARY_DIR "/rlcpp \"$@\"\n";
  fs::permissions(wrapper, fs::perms::owner_all);
  const std::vector<Json> mb = async_split_equals_colocated(root, wrapper, 1, 0);
  EXPECT_EQ(mb.back()["rollout/worker_restarts"], 1.0);  // its 4th request (step 3's draws, during step 2)
}

// A trainer killed (SIGKILL) right after step 2's checkpoint is complete lost step 2's metrics and samples for good
// (resumed: steps 1, 3). A checkpoint and its step's records are committed together: resumed, each of steps 1..3
// is in metrics.jsonl and samples.jsonl once, equal to the uninterrupted run's, synchronous and async.
TEST(TrainSplit, AKillRightAfterACheckpointLosesNoneOfItsStepsRecords) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_kill_after_checkpoint_test";
  fs::remove_all(root);
  const std::string init = small_train_checkpoint(root / "init");
  const std::string rlcpp = RLCPP_BINARY_DIR "/rlcpp train ";
  for (const int64_t staleness : {0, 1}) {
    SCOPED_TRACE("async.max_staleness " + std::to_string(staleness));
    const Json c = {{"init_checkpoint", init},
                    {"rollout", {{"placement", "colocated"}, {"prompts_per_step", 4}, {"group_size", 4}}},
                    {"ppo", {{"mini_batch_size", 16}, {"micro_batch_size", 16}}},
                    {"async", {{"max_staleness", staleness}}},
                    {"steps", 3},
                    {"eval_every", 0},
                    {"eval_size", 4},
                    {"checkpoint_every", 1}};
    const fs::path config = root / ("config_" + std::to_string(staleness) + ".json");
    std::ofstream(config) << c.dump();
    const std::string whole = (root / ("whole_" + std::to_string(staleness))).string();
    const std::string cut = (root / ("cut_" + std::to_string(staleness))).string();
    const CliResult a = run_shell(rlcpp + config.string() + " --set run_dir=" + whole);
    ASSERT_EQ(a.status, 0) << a.output;
    const CliResult killed =
        run_shell(rlcpp + config.string() + " --set run_dir=" + cut + " --inject-fault kill-after-checkpoint:2");
    const bool by_sigkill = (WIFSIGNALED(killed.status) && WTERMSIG(killed.status) == SIGKILL) ||
                            (WIFEXITED(killed.status) && WEXITSTATUS(killed.status) == 128 + SIGKILL);  // via sh
    ASSERT_TRUE(by_sigkill) << "status " << killed.status << "\n" << killed.output;
    ASSERT_TRUE(fs::exists(cut + "/checkpoints/step_2/state.json"));
    ASSERT_FALSE(fs::exists(cut + "/checkpoints/step_3"));
    const CliResult resumed = run_shell(rlcpp + "--resume " + cut);
    ASSERT_EQ(resumed.status, 0) << resumed.output;
    const std::vector<Json> ma = read_jsonl(whole + "/metrics.jsonl"), mb = read_jsonl(cut + "/metrics.jsonl");
    ASSERT_EQ(mb.size(), 3u);
    for (size_t i = 0; i < mb.size(); ++i) {
      EXPECT_EQ(mb[i]["step"], i + 1);
      for (const auto& [key, value] : ma[i].items())
        if (!run_dependent_key(key)) EXPECT_EQ(value, mb[i][key]) << "step " << i + 1 << " key " << key;
    }
    EXPECT_EQ(read_jsonl(whole + "/samples.jsonl"), read_jsonl(cut + "/samples.jsonl"));
  }
  fs::remove_all(root);
}

}  // namespace
}  // namespace rlcpp
