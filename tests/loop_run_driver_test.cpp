// The step loop train, sft and dpo share (loop/run_driver.h), driven with toy steps: a requested stop ends the run
// after that step's checkpoint is committed, a step's records are written before its checkpoint is committed, a
// resume from the newest checkpoint continues at the next step, and the cadences of evaluation, checkpoints,
// pruning and step lines.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "loop/run_driver.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

// The `step` of every line of RUN/metrics.jsonl, in order.
std::vector<int64_t> recorded_steps(const std::string& run_dir) {
  std::vector<int64_t> steps;
  std::ifstream in(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) steps.push_back(Json::parse(line).at("step").get<int64_t>());
  return steps;
}

// The step directories in RUN/checkpoints, sorted by name.
std::vector<std::string> checkpoint_names(const std::string& run_dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(run_dir + "/checkpoints"))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// A toy command: its state is a counter of steps run; its checkpoint holds that count in its config.json, beside the
// (empty) weights file a complete checkpoint is recognised by.
struct ToyRun {
  int64_t state = 0;
  std::vector<int64_t> ran, evaluated, lines;

  RunSteps steps() {
    RunSteps s;
    s.run = [this](const StepPlan& plan) {
      ++state;
      ran.push_back(plan.step);
      if (plan.evaluate) evaluated.push_back(plan.step);
    };
    s.write_checkpoint = [this](const StepPlan& plan) {
      const std::string partial = plan.checkpoint + ".partial";
      fs::create_directories(partial);
      std::ofstream(partial + "/config.json") << state;
      std::ofstream(partial + "/model.safetensors");
    };
    s.records = [this](const StepPlan&) {
      StepRecords r;
      r.record["state"] = state;
      r.samples.push_back(Json{{"state", state}});
      return r;
    };
    s.print_step_line = [this](const StepPlan& plan, double eta_s) {
      EXPECT_GE(eta_s, 0.0);
      lines.push_back(plan.step);
    };
    return s;
  }
};

class LoopRunDriver : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("rlcpp_run_driver_test_" + std::to_string(::getpid()))).string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(LoopRunDriver, StopsAfterTheStepWhoseCheckpointItCommitsAndAResumeContinuesAtTheNextStep) {
  // Checkpoints at the end only: the stop alone asks for step 2's.
  RunSchedule schedule{.last_step = 5, .checkpoint_every = 0};
  ToyRun first;
  {
    RunDir run = RunDir::create_with_config(dir_, Json{{"steps", 5}});
    MetricsLog metrics(run.path(), LoggingConfig{});
    JsonlWriter samples(run.file("samples.jsonl"));
    RunOutputs out;
    out.metrics = &metrics;
    out.samples = &samples;
    out.stop_requested = [&] { return first.state == 2; };
    const DriveResult r = drive_steps(run, schedule, first.steps(), out);
    EXPECT_TRUE(r.stopped);
    EXPECT_EQ(r.steps_run, 2);
    EXPECT_EQ(r.last_step_run, 2);
    EXPECT_EQ(r.checkpoint, run.checkpoint_dir(2));
  }
  EXPECT_EQ(first.ran, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(checkpoint_names(dir_), (std::vector<std::string>{"step_2"}));  // committed: no step_2.partial
  EXPECT_EQ(recorded_steps(dir_), (std::vector<int64_t>{1, 2}));

  // The resume: the newest checkpoint's state, from the step after it.
  RunDir run = RunDir::open_to_resume(dir_);
  const std::string checkpoint = run.latest_checkpoint();
  ASSERT_EQ(checkpoint, run.checkpoint_dir(2));
  ToyRun resumed;
  std::ifstream(checkpoint + "/config.json") >> resumed.state;
  EXPECT_EQ(resumed.state, 2);
  schedule.first_step = resumed.state + 1;
  MetricsLog metrics(run.path(), LoggingConfig{});
  RunOutputs out;
  out.metrics = &metrics;
  const DriveResult r = drive_steps(run, schedule, resumed.steps(), out);
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(resumed.ran, (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(r.checkpoint, run.checkpoint_dir(5));
  EXPECT_EQ(recorded_steps(dir_), (std::vector<int64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(checkpoint_names(dir_), (std::vector<std::string>{"step_2", "step_5"}));
}

TEST_F(LoopRunDriver, AStepsRecordsAreWrittenBeforeItsCheckpointIsCommitted) {
  RunDir run = RunDir::create_fresh(dir_);
  MetricsLog metrics(run.path(), LoggingConfig{});
  const RunSchedule schedule{.last_step = 3, .checkpoint_every = 2};
  ToyRun toy;
  RunSteps steps = toy.steps();
  std::vector<std::vector<int64_t>> recorded_at_commit;
  RunOutputs out;
  out.metrics = &metrics;
  out.checkpoint_committed = [&](int64_t step) {
    EXPECT_TRUE(fs::is_directory(run.checkpoint_dir(step)));
    EXPECT_FALSE(fs::exists(run.checkpoint_dir(step) + ".partial"));
    recorded_at_commit.push_back(recorded_steps(run.path()));
  };
  drive_steps(run, schedule, steps, out);
  EXPECT_EQ(recorded_at_commit, (std::vector<std::vector<int64_t>>{{1, 2}, {1, 2, 3}}));

  // A commit that fails (its step_N.partial is missing) finds step N's record already written.
  RunDir other = RunDir::create_fresh(dir_ + "/other");
  MetricsLog other_metrics(other.path(), LoggingConfig{});
  ToyRun failing;
  steps = failing.steps();
  steps.write_checkpoint = [](const StepPlan&) {};  // writes nothing: the rename has nothing to rename
  out.metrics = &other_metrics;
  out.checkpoint_committed = nullptr;
  EXPECT_ANY_THROW(drive_steps(other, schedule, steps, out));
  EXPECT_EQ(recorded_steps(other.path()), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(fs::is_empty(other.path() + "/checkpoints"));
}

TEST_F(LoopRunDriver, EvaluatesCheckpointsPrunesAndPrintsAtTheirPeriodsAndAtTheLastStep) {
  RunDir run = RunDir::create_fresh(dir_);
  MetricsLog metrics(run.path(), LoggingConfig{});
  const RunSchedule schedule{
      .last_step = 7, .eval_every = 3, .checkpoint_every = 2, .checkpoint_keep_last = 2, .log_every = 4};
  ToyRun toy;
  RunOutputs out;
  out.metrics = &metrics;
  std::vector<int64_t> committed;
  out.checkpoint_committed = [&](int64_t step) { committed.push_back(step); };
  drive_steps(run, schedule, toy.steps(), out);
  EXPECT_EQ(toy.evaluated, (std::vector<int64_t>{3, 6, 7}));
  EXPECT_EQ(committed, (std::vector<int64_t>{2, 4, 6, 7}));
  EXPECT_EQ(checkpoint_names(dir_), (std::vector<std::string>{"step_6", "step_7"}));  // the newest two kept
  EXPECT_EQ(toy.lines, (std::vector<int64_t>{1, 4, 7}));
  // Each record carries the step, its elapsed time and, with a checkpoint, that checkpoint.
  std::ifstream in(run.file("metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const Json j = Json::parse(line);
    const int64_t step = j.at("step").get<int64_t>();
    EXPECT_EQ(j.at("state").get<int64_t>(), step);
    EXPECT_TRUE(j.contains("elapsed_s"));
    EXPECT_EQ(j.contains("checkpoint"), step % 2 == 0 || step == 7) << line;
  }
}

TEST_F(LoopRunDriver, ARankThatWritesNothingRunsEveryStepWithoutCheckpointsOrRecords) {
  RunDir run = RunDir::create_fresh(dir_);
  const RunSchedule schedule{.last_step = 3, .checkpoint_every = 1};
  ToyRun toy;
  const DriveResult r = drive_steps(run, schedule, toy.steps(), RunOutputs{});
  EXPECT_EQ(toy.ran, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_TRUE(toy.lines.empty());
  EXPECT_TRUE(r.checkpoint.empty());
  EXPECT_TRUE(fs::is_empty(run.path() + "/checkpoints"));
  EXPECT_FALSE(fs::exists(run.file("metrics.jsonl")));
}

}  // namespace
}  // namespace rlcpp
