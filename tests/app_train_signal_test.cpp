// Ctrl-C (SIGINT to the terminal's process group) or a scheduler's SIGTERM during `rlcpp train`: the run ends after
// the step in progress with that step's checkpoint and records (exit status 128 + the signal), its split workers
// untouched by the terminal's signal until then, and `rlcpp train --resume` finishes it. A second signal stops the
// process at once and loses nothing committed before it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/config.h"
#include "tests/app_test_support.h"
#include "tests/train_test_support.h"

extern char** environ;

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

// `rlcpp train ARGS` started in a process group of its own (as a shell starts a foreground job), stdout and stderr
// into `log`.
pid_t start_train(const std::vector<std::string>& args, const fs::path& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  std::vector<std::string> text = {RLCPP_BINARY_DIR "/rlcpp", "train"};
  text.insert(text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : text) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  EXPECT_EQ(rc, 0);
  return pid;
}

size_t lines_in(const fs::path& file) {
  std::ifstream in(file);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) n += !line.empty();
  return n;
}

// Waits up to `seconds` for `pid`; its wait status, or -1 (then it is killed).
int wait_for(pid_t pid, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(-pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

// Waits until the run's metrics.jsonl holds `records` records (or the process ended).
void wait_for_records(pid_t pid, const fs::path& run, size_t records) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (lines_in(run / "metrics.jsonl") < records && std::chrono::steady_clock::now() < deadline) {
    ASSERT_EQ(waitpid(pid, nullptr, WNOHANG), 0) << "train ended before step " << records;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GE(lines_in(run / "metrics.jsonl"), records) << "train logged fewer than " << records << " steps in 120 s";
}

class TrainSignal : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("rlcpp_train_signal_test_" + std::to_string(getpid()));
    fs::remove_all(root_);
    // A split run over one worker, slowed (--throttle-ms) so that a step lasts long enough to be interrupted.
    const fs::path wrapper = root_ / "slow_worker.sh";
    fs::create_directories(root_);
    std::ofstream(wrapper) << "#!/bin/sh\nexec " RLCPP_BINARY_DIR "/rlcpp \"$@\" --throttle-ms 15\n";
    fs::permissions(wrapper, fs::perms::owner_all);
    const Json c = {{"init_checkpoint", small_train_checkpoint(root_ / "init")},
                    {"rollout",
                     {{"placement", "split"},
                      {"num_workers", 1},
                      {"worker_binary", wrapper.string()},
                      {"prompts_per_step", 4},
                      {"group_size", 4}}},
                    {"ppo", {{"mini_batch_size", 8}, {"micro_batch_size", 8}}},
                    {"steps", kSteps},
                    {"eval_every", 0},
                    {"eval_size", 4},
                    {"checkpoint_every", 0}};  // at the last step only: a stop writes its own
    config_ = root_ / "config.json";
    std::ofstream(config_) << c.dump();
  }
  void TearDown() override { fs::remove_all(root_); }

  // Resumes the run, which must then finish with one record per step.
  void expect_resume_finishes(const fs::path& run) {
    const CliResult resumed = run_cli("train --resume " + run.string());
    ASSERT_EQ(resumed.status, 0) << resumed.output;
    const std::vector<Json> records = read_jsonl(run / "metrics.jsonl");
    ASSERT_EQ(records.size(), static_cast<size_t>(kSteps));
    for (size_t i = 0; i < records.size(); ++i) EXPECT_EQ(records[i]["step"], i + 1);
    EXPECT_TRUE(fs::exists(run / "checkpoints" / ("step_" + std::to_string(kSteps)) / "state.json"));
  }

  static constexpr int kSteps = 8;
  fs::path root_, config_;
};

TEST_F(TrainSignal, CtrlCEndsTheRunAfterItsStepWithACheckpointAndResumeFinishesIt) {
  const fs::path run = root_ / "run", log = root_ / "train.log";
  const pid_t pid = start_train({config_.string(), "--set", "run_dir=" + run.string()}, log);
  ASSERT_NO_FATAL_FAILURE(wait_for_records(pid, run, 2));
  ASSERT_EQ(kill(-pid, SIGINT), 0);  // the whole group, as the terminal does: the worker has a group of its own
  const int status = wait_for(pid, 120);
  const std::string out = read_text(log);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGINT) << "status " << status << "\n" << out;
  EXPECT_NE(out.find("train: SIGINT received: stopping after this step"), std::string::npos) << out;
  const size_t step = lines_in(run / "metrics.jsonl");
  ASSERT_GE(step, 2u);
  ASSERT_LT(step, static_cast<size_t>(kSteps)) << out;
  EXPECT_NE(out.find("train: stopped on request after step " + std::to_string(step) + " of " +
                     std::to_string(kSteps)),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("`rlcpp train --resume " + run.string() + "` continues the run from step " +
                     std::to_string(step + 1)),
            std::string::npos)
      << out;
  // The step's checkpoint, though none was due, complete; no later step began.
  EXPECT_TRUE(fs::exists(run / "checkpoints" / ("step_" + std::to_string(step)) / "state.json"));
  EXPECT_EQ(read_jsonl(run / "metrics.jsonl").back()["checkpoint"],
            (run / "checkpoints" / ("step_" + std::to_string(step))).string());
  expect_resume_finishes(run);
}

TEST_F(TrainSignal, ASecondSignalStopsAtOnceAndLosesNothingCommitted) {
  const fs::path run = root_ / "run", log = root_ / "train.log";
  const pid_t pid = start_train({config_.string(), "--set", "run_dir=" + run.string(), "--set", "checkpoint_every=1"},
                                log);
  ASSERT_NO_FATAL_FAILURE(wait_for_records(pid, run, 2));
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  // The second once the first is taken (two pending signals of one kind are one).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (read_text(log).find("SIGTERM received") == std::string::npos && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  const int status = wait_for(pid, 60);
  const std::string out = read_text(log);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM) << "status " << status << "\n" << out;
  EXPECT_NE(out.find("train: a second stop signal (SIGTERM): stopping now"), std::string::npos) << out;
  EXPECT_EQ(out.find("stopped on request"), std::string::npos) << out;
  expect_resume_finishes(run);
}

}  // namespace
}  // namespace rlcpp
