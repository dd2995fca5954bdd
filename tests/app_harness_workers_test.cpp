// Harness mode (agent.env "http") on worker processes: the harness's requests are turns of sessions on the split
// workers' engines (loop/session_turn_loop.h over loop/worker_turns.h, the turn engine in-process episodes use).
// The samples the trainer reads and the weights it ends with equal the colocated run's bit for bit, for a harness
// run once per draw and for one harness for the run whose episodes span weight syncs (agent.turns_per_draw).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "loop/controller.h"
#include "tests/python_env.h"
#include "tests/train_test_support.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

fs::path root() { return fs::temp_directory_path() / ("rlcpp_harness_workers_" + std::to_string(getpid())); }

// 3 steps of 8 task items x 8 episodes played by the example harness (`harness_args`), on `placement`.
TrainConfig harness_run(const std::string& name, const std::string& placement, const std::string& harness_args,
                        int64_t turns_per_draw) {
  TrainConfig c = small_grpo_run(small_train_checkpoint(root() / "init"), 3);
  c.run_dir = (root() / name).string();
  c.task.name = "add3";
  c.agent.env = "http";
  c.agent.max_turns = 3;
  c.agent.max_turn_tokens = 6;
  c.agent.turns_per_draw = turns_per_draw;
  c.agent.harness = "'" + venv_python() + "' '" + std::string(RLCPP_SOURCE_DIR) +
                    "/scripts/agent_harness_example.py' --reward digits " + harness_args;
  c.rollout.sampling.max_new_tokens = 6;
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

TEST(HarnessWorkers, AHarnessOnSplitWorkersTrainsOnTheColocatedRunsTokensBitForBit) {
  fs::remove_all(root());
  const TrainConfig c = harness_run("colocated", "colocated", "--attempts 2", 0);
  const TrainConfig s = harness_run("split", "split", "--attempts 2", 0);
  const TrainSummary colocated = run_train(c, config_to_json(c));
  const TrainSummary split = run_train(s, config_to_json(s));
  expect_same_run(colocated, split);
  EXPECT_EQ(read_jsonl(fs::path(split.run_dir) / "metrics.jsonl").at(0).at("layout/workers"), 2);
  fs::remove_all(root());
}

// Three turns an episode, two a draw: every episode's third turn waits for the next draw, run under the next
// version on whichever worker its session is opened again (with its history); the last step's draw lets them end.
TEST(HarnessWorkers, EpisodesSpanningSyncsOnSplitWorkersEqualTheColocatedRunBitForBit) {
  fs::remove_all(root());
  const TrainConfig c = harness_run("colocated_span", "colocated", "--attempts 3", 2);
  const TrainConfig s = harness_run("split_span", "split", "--attempts 3", 2);
  const TrainSummary colocated = run_train(c, config_to_json(c));
  const TrainSummary split = run_train(s, config_to_json(s));
  expect_same_run(colocated, split);
  const std::vector<Json> m = read_jsonl(fs::path(split.run_dir) / "metrics.jsonl");
  EXPECT_EQ(m.at(0).at("agent/in_flight"), 64);  // all on their third turn
  EXPECT_EQ(m.at(1).at("training/off_policy/token_staleness_max"), 1.0);
  EXPECT_EQ(m.at(1).at("mismatch/current_version/max_abs_dlogp"), 0.0);
  fs::remove_all(root());
}

}  // namespace
}  // namespace rlcpp
