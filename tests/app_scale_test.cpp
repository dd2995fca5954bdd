// `rlcpp scale RUN`: fed by a real run's step, the model reproduces that step on the run's own layout (its parts
// add up to the measured step), prints the workers x ranks table, and compares another run (--check).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/app_test_support.h"
#include "tests/train_test_support.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

TEST(Scale, PredictsTheRunItIsFedAndTabulatesOtherLayouts) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_scale_test";
  fs::remove_all(root);
  const std::string init = small_train_checkpoint(root / "init");
  const std::string run = (root / "run").string();
  const CliResult train = run_cli("train " RLCPP_SOURCE_DIR "/configs/grpo_add3_benchmark.json --set warm_start.enabled=false "
                                  "--set init_checkpoint=" + init + " --set rollout.placement=colocated --set steps=8 "
                                  "--set eval_every=0 --set eval_size=1 --set checkpoint_every=0 --set run_dir=" + run);
  ASSERT_EQ(train.status, 0) << train.output;
  const CliResult scale = run_cli("scale " + run + " --check " + run + " --workers 1,4 --ranks 1,2 --cores 0");
  ASSERT_EQ(scale.status, 0) << scale.output;
  EXPECT_NE(scale.output.find("predicted step ms (rollout share) — each process on cores of its own"),
            std::string::npos)
      << scale.output;
  // Its own layout: the measured step. The parts are averaged over the same steps, so they add up to it as each
  // record's phases add up to its step, however loaded the machine (medians taken part by part moved apart: 0.84
  // once in a full ctest, 0.64 once in CI).
  const size_t at = scale.output.find("x); rollout share");
  ASSERT_NE(at, std::string::npos) << scale.output;
  const double ratio = std::stod(scale.output.substr(scale.output.rfind('(', at) + 1));
  EXPECT_GT(ratio, 0.98) << scale.output;
  EXPECT_LT(ratio, 1.02) << scale.output;
  const CliResult bad = run_cli("scale " + (root / "nothing").string());
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.output.find("metrics.jsonl"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace rlcpp
