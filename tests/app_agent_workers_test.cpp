// Agent runs on worker processes (rollout.placement "split", loop/worker_turns.h): each episode a session of one
// worker's engine, kept there between turns. The episodes, the samples the trainer reads and the weights it ends
// with equal a colocated run's bit for bit, also when the episodes span draws (agent.turns_per_draw: their
// sessions closed and opened again with their histories) and when a worker is killed mid-episode (restarted,
// its sessions opened again with their histories: they sample the same tokens).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "loop/controller.h"
#include "loop/sft_run.h"
#include "tests/train_test_support.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

class AgentWorkers : public ::testing::Test {
 protected:
  static fs::path root() { return fs::temp_directory_path() / ("rlcpp_agent_workers_" + std::to_string(getpid())); }

  static void SetUpTestSuite() {
    fs::remove_all(root());
    // A short SFT warm start on the calc expert's demonstrations: some episodes call the calculator and answer
    // right, so the rewards vary, the policy moves every step and the episodes carried into the next draw go on
    // under a new version.
    SftConfig sft;
    sft.run_dir = (root() / "sft").string();
    sft.init_checkpoint = small_train_checkpoint(root() / "init");
    sft.task = calc_task();
    sft.agent = calc_agent();
    sft.steps = 60;
    sft.batch_size = 64;
    sft.micro_batch_size = 64;
    sft.optim.lr = 3e-3;
    sft.eval_every = 0;
    sft.eval_size = 10;
    sft.log_every = 1000;
    init_ = new std::string(run_sft(sft, config_to_json(sft)).checkpoint);
    const TrainConfig c = config("colocated", "colocated");
    colocated_ = new TrainSummary(run_train(c, config_to_json(c)));
  }
  static void TearDownTestSuite() {
    delete colocated_;
    delete init_;
    colocated_ = nullptr;
    init_ = nullptr;
    fs::remove_all(root());
  }

  static TaskConfig calc_task() {
    TaskConfig t;
    t.name = "mul";
    t.digits = 3;
    return t;
  }
  // Up to 3 turns of up to 12 tokens, one turn a draw: every episode that calls the calculator runs on into the
  // next step, its session closed and opened again with its history.
  static AgentConfig calc_agent() {
    AgentConfig a;
    a.env = "calc";
    a.max_turns = 3;
    a.max_turn_tokens = 12;
    a.turns_per_draw = 1;
    a.demo_tool_share = 0.5;
    return a;
  }

  // 4 steps of 8 task items x 8 episodes.
  static TrainConfig config(const std::string& name, const std::string& placement) {
    TrainConfig c = small_grpo_run(*init_, 4);
    c.run_dir = (root() / name).string();
    c.task = calc_task();
    c.agent = calc_agent();
    c.rollout.sampling.max_new_tokens = 12;
    c.optim.lr = 1e-3;
    c.rollout.placement = placement;
    c.rollout.num_workers = 2;
    c.rollout.worker_binary = RLCPP_BINARY_DIR "/rlcpp";
    return c;
  }

  // The run's samples, rewards and final weights are the colocated run's.
  static void expect_same_as_colocated(const TrainSummary& run) {
    const std::vector<Json> want = read_jsonl(fs::path(colocated_->run_dir) / "samples.jsonl");
    const std::vector<Json> got = read_jsonl(fs::path(run.run_dir) / "samples.jsonl");
    ASSERT_FALSE(want.empty());
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "sample line " << i;
    const std::vector<Json> mw = read_jsonl(fs::path(colocated_->run_dir) / "metrics.jsonl");
    const std::vector<Json> mg = read_jsonl(fs::path(run.run_dir) / "metrics.jsonl");
    ASSERT_EQ(mg.size(), mw.size());
    for (size_t s = 0; s < mw.size(); ++s)
      for (const char* key : {"agent/episodes", "agent/turns_mean", "agent/env_tokens", "agent/in_flight",
                              "agent/success", "agent/tool_calls", "reward/mean", "mismatch/max_abs_dlogp"})
        EXPECT_EQ(mg[s].value(key, Json()), mw[s].value(key, Json())) << "step " << s + 1 << " key " << key;
    EXPECT_TRUE(same_weights(colocated_->checkpoint, run.checkpoint));
  }

  static std::string* init_;
  static TrainSummary* colocated_;
};

std::string* AgentWorkers::init_ = nullptr;
TrainSummary* AgentWorkers::colocated_ = nullptr;

TEST_F(AgentWorkers, EpisodesOnSplitWorkersEqualTheColocatedRunBitForBit) {
  const TrainConfig c = config("split", "split");
  const TrainSummary run = run_train(c, config_to_json(c));
  expect_same_as_colocated(run);
  const std::vector<Json> m = read_jsonl(fs::path(run.run_dir) / "metrics.jsonl");
  double in_flight = 0, rewarded = 0;
  for (const Json& step : m) {
    in_flight += step.at("agent/in_flight").get<double>();
    rewarded += step.value("reward/mean", 0.0);
  }
  EXPECT_GT(in_flight, 0.0) << "no episode ran on past its draw";
  EXPECT_GT(rewarded, 0.0) << "no episode was rewarded: the policy never moved";
  EXPECT_FALSE(same_weights(*init_, run.checkpoint));
}

// worker1 is killed at the second engine step of its third request (a round of turns of step 2): it is
// restarted, its sessions are opened on the new process with their histories and the run goes on as if nothing
// had happened.
TEST_F(AgentWorkers, AWorkerKilledMidEpisodeIsRestartedAndItsEpisodesSampleTheSameTokens) {
  TrainConfig c = config("killed", "split");
  const fs::path script = root() / "killed_worker.sh";
  std::ofstream(script) << "#!/bin/sh\n"
                        << "for a in \"$@\"; do [ \"$a\" = worker1 ] && faulty=1; done\n"
                        << "if [ -n \"$faulty\" ] && mkdir '" << (root() / "killed_once").string()
                        << "' 2>/dev/null; then exec '" RLCPP_BINARY_DIR "/rlcpp' \"$@\" --inject-fault kill:3:2; fi\n"
                        << "exec '" RLCPP_BINARY_DIR "/rlcpp' \"$@\"\n";
  fs::permissions(script, fs::perms::owner_all);
  c.rollout.worker_binary = script.string();
  ::testing::internal::CaptureStdout();
  TrainSummary run;
  try {
    run = run_train(c, config_to_json(c));
  } catch (...) {
    std::printf("%s", ::testing::internal::GetCapturedStdout().c_str());
    throw;
  }
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("train: worker1 was killed by signal 9"), std::string::npos) << out;
  EXPECT_NE(out.find("session turns re-issued"), std::string::npos) << out;
  expect_same_as_colocated(run);
  const std::vector<Json> m = read_jsonl(fs::path(run.run_dir) / "metrics.jsonl");
  EXPECT_EQ(m.back().at("rollout/worker_restarts").get<double>(), 1.0);
}

}  // namespace
}  // namespace rlcpp
