// Harness mode (agent.env "http") on worker processes: the harness's requests are turns of sessions on the split
// workers' engines (loop/session_turn_loop.h over loop/worker_turns.h, the turn engine in-process episodes use).
// The samples the trainer reads and the weights it ends with equal the colocated run's bit for bit, for a harness
// run once per draw and for one harness for the run whose episodes span weight syncs (agent.turns_per_draw, and
// agent.tokens_per_draw: turns kept across a sync).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "loop/controller.h"
#include "tests/train_test_support.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

fs::path root() { return fs::temp_directory_path() / ("rlcpp_harness_workers_" + std::to_string(getpid())); }

// 3 steps of 8 task items x 8 episodes played by the example harness (`harness_args`), on `placement`.
TrainConfig harness_run(const std::string& name, const std::string& placement, const std::string& harness_args,
                        int64_t turns_per_draw, int64_t tokens_per_draw) {
  TrainConfig c = small_grpo_run(small_train_checkpoint(root() / "init"), 3);
  c.run_dir = (root() / name).string();
  c.task.name = "add3";
  use_example_harness(c, "--reward digits " + harness_args);
  c.agent.max_turns = 3;
  c.agent.turns_per_draw = turns_per_draw;
  c.agent.tokens_per_draw = tokens_per_draw;
  c.rollout.placement = placement;
  c.rollout.num_workers = 2;
  c.rollout.worker_binary = RLCPP_BINARY_DIR "/rlcpp";
  return c;
}

void expect_same_run(const TrainSummary& want, const TrainSummary& got) {
  const std::vector<Json> a = read_jsonl(fs::path(want.run_dir) / "samples.jsonl");
  const std::vector<Json> b = read_jsonl(fs::path(got.run_dir) / "samples.jsonl");
  ASSERT_FALSE(a.empty());
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(b[i], a[i]) << "sample line " << i;
  const std::vector<Json> ma = read_jsonl(fs::path(want.run_dir) / "metrics.jsonl");
  const std::vector<Json> mb = read_jsonl(fs::path(got.run_dir) / "metrics.jsonl");
  ASSERT_EQ(mb.size(), ma.size());
  for (size_t s = 0; s < ma.size(); ++s)
    for (const char* key : {"agent/episodes", "agent/turns_mean", "agent/env_tokens", "agent/in_flight",
                            "agent/harness_requests", "reward/mean", "mismatch/max_abs_dlogp",
                            "training/off_policy/token_staleness_max"})
      EXPECT_EQ(mb[s].value(key, Json()), ma[s].value(key, Json())) << "step " << s + 1 << " key " << key;
  EXPECT_TRUE(same_weights(want.checkpoint, got.checkpoint));
}

// The same run colocated and on split workers; returns the split one's metrics.
std::vector<Json> split_run_equals_colocated(const std::string& name, const std::string& harness_args,
                                             int64_t turns_per_draw, int64_t tokens_per_draw = 0) {
  fs::remove_all(root());
  const TrainConfig c = harness_run(name + "_colocated", "colocated", harness_args, turns_per_draw, tokens_per_draw);
  const TrainConfig s = harness_run(name + "_split", "split", harness_args, turns_per_draw, tokens_per_draw);
  const TrainSummary colocated = run_train(c, config_to_json(c));
  const TrainSummary split = run_train(s, config_to_json(s));
  expect_same_run(colocated, split);
  std::vector<Json> m = read_jsonl(fs::path(split.run_dir) / "metrics.jsonl");
  fs::remove_all(root());
  return m;
}

TEST(HarnessWorkers, AHarnessOnSplitWorkersTrainsOnTheColocatedRunsTokensBitForBit) {
  const std::vector<Json> m = split_run_equals_colocated("draws", "--attempts 2", 0);
  EXPECT_EQ(m.at(0).at("layout/workers"), 2);
}

// Three turns an episode, two a draw: every episode's third turn waits for the next draw, run under the next
// version on whichever worker its session is opened again (with its history); the last step's draw lets them end.
TEST(HarnessWorkers, EpisodesSpanningSyncsOnSplitWorkersEqualTheColocatedRunBitForBit) {
  const std::vector<Json> m = split_run_equals_colocated("spanning", "--attempts 3", 2);
  EXPECT_EQ(m.at(0).at("agent/in_flight"), 64);  // all on their third turn
  EXPECT_EQ(m.at(1).at("training/off_policy/token_staleness_max"), 1.0);
  EXPECT_EQ(m.at(1).at("mismatch/current_version/max_abs_dlogp"), 0.0);
}

// Turns cut at 3 tokens a draw (agent.tokens_per_draw): a turn's rest goes on in the next draw under the next
// version, on whichever worker its session is opened again.
TEST(HarnessWorkers, TurnsKeptAcrossSyncsOnSplitWorkersEqualTheColocatedRunBitForBit) {
  const std::vector<Json> m = split_run_equals_colocated("keep", "--attempts 2", 0, 3);
  EXPECT_GT(m.at(0).at("agent/in_flight").get<double>(), 0.0);
  double staleness = 0;  // over the steps that trained (the last one lets every turn end)
  for (const Json& step : m) staleness = std::max(staleness, step.value("training/off_policy/token_staleness_max", 0.0));
  EXPECT_GE(staleness, 1.0) << "no trained turn spanned a sync";
}

}  // namespace
}  // namespace rlcpp
