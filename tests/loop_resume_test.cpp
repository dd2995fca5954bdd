// rlcpp train --resume: a run interrupted after a checkpoint and resumed writes the same metrics and samples
// as the uninterrupted run, bit for bit (weights, AdamW moments and step count, RNG positions restored).
#include <gtest/gtest.h>

#include <filesystem>
#include <cstring>
#include <fstream>

#include "loop/controller.h"
#include "model/checkpoint.h"
#include "model/init.h"
#include "tests/train_test_support.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

// Every figure but wall-clock ones and the process's memory.
Json without_timing(Json j) {
  for (auto it = j.begin(); it != j.end();) {
    if (it.key().rfind("timing", 0) == 0 || it.key() == "elapsed_s" || it.key() == "tokens_per_s" ||
        it.key() == "checkpoint" || it.key().rfind("engine/", 0) == 0 || it.key().rfind("memory/", 0) == 0)
      it = j.erase(it);
    else
      ++it;
  }
  return j;
}

TEST(LoopResume, ResumedRunMatchesTheUninterruptedOneBitForBit) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_resume_test";
  fs::remove_all(root);
  small_train_checkpoint(root / "init");

  TrainConfig c;
  c.init_checkpoint = (root / "init").string();
  c.rollout.placement = "colocated";
  c.rollout.prompts_per_step = 8;
  c.rollout.group_size = 8;
  c.ppo.mini_batch_size = 32;
  c.ppo.micro_batch_size = 32;
  c.ppo.shuffle = true;  // the update RNG must be restored too
  c.optim.lr = 3e-3;
  c.steps = 5;
  c.eval_every = 0;
  c.eval_size = 10;
  c.checkpoint_every = 2;

  TrainConfig whole = c;
  whole.run_dir = (root / "whole").string();
  const TrainSummary a = run_train(whole, config_to_json(whole));

  TrainConfig cut = c;
  cut.run_dir = (root / "cut").string();
  const TrainSummary b = run_train(cut, config_to_json(cut));
  // Interrupt after step 3: checkpoints 4 and 5 never happened, metrics of steps 4-5 are lost; step 3's
  // records (past the last checkpoint, step 2) are there and must be replaced.
  fs::remove_all(fs::path(b.run_dir) / "checkpoints/step_4");
  fs::remove_all(fs::path(b.run_dir) / "checkpoints/step_5");
  {
    std::vector<Json> m = read_jsonl(fs::path(b.run_dir) / "metrics.jsonl");
    std::ofstream out(fs::path(b.run_dir) / "metrics.jsonl", std::ios::trunc);
    for (size_t i = 0; i < 3; ++i) out << m[i].dump() << "\n";
  }
  const TrainSummary resumed = resume_train(b.run_dir);
  EXPECT_EQ(resumed.mean_rewards.size(), 3u);  // steps 3, 4, 5

  const std::vector<Json> ma = read_jsonl(fs::path(a.run_dir) / "metrics.jsonl");
  const std::vector<Json> mb = read_jsonl(fs::path(b.run_dir) / "metrics.jsonl");
  ASSERT_EQ(ma.size(), 5u);
  ASSERT_EQ(mb.size(), 5u);
  for (size_t i = 0; i < ma.size(); ++i) EXPECT_EQ(without_timing(ma[i]), without_timing(mb[i])) << "step " << i + 1;
  EXPECT_EQ(read_jsonl(fs::path(a.run_dir) / "samples.jsonl"), read_jsonl(fs::path(b.run_dir) / "samples.jsonl"));
  const ParameterStore wa = load_model_checkpoint(a.checkpoint);
  const ParameterStore wb = load_model_checkpoint(resumed.checkpoint);
  EXPECT_EQ(std::memcmp(wa.flat().data<float>(), wb.flat().data<float>(), wa.flat().nbytes()), 0);
  EXPECT_TRUE(fs::exists(fs::path(resumed.checkpoint) / "state.json"));
  EXPECT_TRUE(fs::exists(fs::path(resumed.checkpoint) / "trainer_state.safetensors"));
}

}  // namespace
}  // namespace rlcpp
