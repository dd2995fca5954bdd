// The PyTorch peer's add3 (bench/peers/add3_task.py) is rlcpp's add3: the same held-out set problem by problem,
// the same training stream as `rlcpp train` draws (run seed, stream 1), and the same format scores. The peer's
// `grpo-run` accuracy curve is only comparable with rlcpp's when these agree.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "reward/task_registry.h"

namespace rlcpp {
namespace {

const char* kPython = "/usr/bin/python3";

std::string peer_task_script() { return std::string(RLCPP_SOURCE_DIR) + "/bench/peers/add3_task.py"; }

// Runs `add3_task.py ARGS` and returns its stdout lines parsed as JSON.
std::vector<Json> run_peer_task(const std::string& args) {
  const std::string cmd = std::string(kPython) + " " + peer_task_script() + " " + args;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  EXPECT_TRUE(pipe) << cmd;
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = std::fread(buf.data(), 1, buf.size(), pipe.get())) out.append(buf.data(), n);
  EXPECT_EQ(pclose(pipe.release()), 0) << cmd;
  std::vector<Json> lines;
  size_t start = 0;
  for (size_t end; (end = out.find('\n', start)) != std::string::npos; start = end + 1)
    lines.push_back(Json::parse(out.substr(start, end - start)));
  return lines;
}

void expect_same_problems(const std::vector<Problem>& ours, const std::vector<Json>& peer) {
  ASSERT_EQ(peer.size(), ours.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    ASSERT_EQ(peer[i].at("prompt").get<std::string>(), ours[i].prompt) << "problem " << i;
    ASSERT_EQ(peer[i].at("answer").get<std::string>(), ours[i].answer) << "problem " << i;
    ASSERT_EQ(peer[i].at("a").get<uint64_t>(), ours[i].meta.at("a").get<uint64_t>()) << "problem " << i;
    ASSERT_EQ(peer[i].at("b").get<uint64_t>(), ours[i].meta.at("b").get<uint64_t>()) << "problem " << i;
  }
}

class PeerTaskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kPython)) GTEST_SKIP() << kPython << " is missing (the peer needs it)";
  }
};

TEST_F(PeerTaskTest, HeldOutSetIsRlcppsProblemByProblem) {
  const std::unique_ptr<Task> task = make_task(TaskConfig{});  // add3, the default eval seed
  expect_same_problems(task->eval_set(1000), run_peer_task("eval-set --n 1000"));
}

TEST_F(PeerTaskTest, HeldOutSetFollowsTheEvalSeed) {
  TaskConfig cfg;
  cfg.eval_seed = 7;
  const std::vector<Problem> other_seed = make_task(cfg)->eval_set(50);
  expect_same_problems(other_seed, run_peer_task("eval-set --n 50 --eval-seed 7"));
  EXPECT_NE(other_seed.front().prompt, make_task(TaskConfig{})->eval_set(1).front().prompt);
}

TEST_F(PeerTaskTest, TrainingStreamIsTheControllersDataStream) {
  const std::unique_ptr<Task> task = make_task(TaskConfig{});
  for (uint64_t seed : {1, 3}) {
    PhiloxStream rng(seed, /*stream=*/1);  // loop/controller.cpp: data_rng(config.seed, 1)
    std::vector<Problem> ours;
    for (int i = 0; i < 300; ++i) ours.push_back(task->sample_train(rng));
    SCOPED_TRACE("seed " + std::to_string(seed));
    expect_same_problems(ours, run_peer_task("train --n 300 --seed " + std::to_string(seed)));
  }
}

TEST_F(PeerTaskTest, FormatScoresMatch) {
  const std::unique_ptr<Task> task = make_task(TaskConfig{});
  const Problem p = task->eval_set(1).front();
  const std::vector<std::pair<std::string, bool>> cases = {
      {p.answer, true}, {p.answer, false}, {"7", true},  {"0", true},    {"007", true}, {"", true},
      {"12a", true},    {"-5", true},      {"7", false}, {" 7", true},   {"1+2", true}, {p.answer + "0", true},
      {"?", true},      {"10", true},      {"", false},  {"0123", true},
  };
  const std::filesystem::path input = std::filesystem::path(RLCPP_BINARY_DIR) / "peer_task_score_input.jsonl";
  {
    std::ofstream out(input);
    for (const auto& [response, terminated] : cases)
      out << Json{{"answer", p.answer}, {"response", response}, {"terminated", terminated}}.dump() << "\n";
  }
  const std::vector<Json> peer = run_peer_task("score < " + input.string());
  ASSERT_EQ(peer.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const RewardResult r = task->score(p, cases[i].first, cases[i].second);
    SCOPED_TRACE("response '" + cases[i].first + "' terminated " + std::to_string(cases[i].second));
    EXPECT_EQ(peer[i].at("total").get<double>(), r.total);
    EXPECT_EQ(peer[i].at("correct").get<bool>(), r.correct);
    double well_formed = -1;
    for (const auto& [name, value] : r.components)
      if (name == "well_formed") well_formed = value;
    EXPECT_EQ(peer[i].at("well_formed").get<bool>(), well_formed == 1.0);
  }
  std::filesystem::remove(input);
}

}  // namespace
}  // namespace rlcpp
