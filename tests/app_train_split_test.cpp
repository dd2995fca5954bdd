// rlcpp train with the split placement (two worker processes over ipc://, weights over the zmq channel) gives the
// same samples and metrics as the colocated placement with the same seed: the worker samples with exactly
// the trainer's weights after every sync.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "loop/controller.h"
#include "model/checkpoint.h"
#include "model/init.h"
#include "tests/train_test_support.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

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

  EXPECT_EQ(read_jsonl(fs::path(a.run_dir) / "samples.jsonl"), read_jsonl(fs::path(b.run_dir) / "samples.jsonl"));
  const std::vector<Json> ma = read_jsonl(fs::path(a.run_dir) / "metrics.jsonl");
  const std::vector<Json> mb = read_jsonl(fs::path(b.run_dir) / "metrics.jsonl");
  ASSERT_EQ(ma.size(), 4u);
  ASSERT_EQ(mb.size(), 4u);
  for (size_t i = 0; i < ma.size(); ++i) {
    for (const auto& [key, value] : ma[i].items()) {
      if (run_dependent_key(key)) continue;
      EXPECT_EQ(value, mb[i][key]) << "step " << i + 1 << " key " << key;
    }
    EXPECT_GT(mb[i]["timing_s/weight_sync"].get<double>(), 0);
    EXPECT_EQ(mb[i]["probe/max_abs_dlogp"].get<double>(), 0.0);  // engine and trainer agree bit for bit
  }
  // The split run's worker got step_0 as its initial weights and removed its sockets on exit.
  EXPECT_TRUE(fs::exists(fs::path(b.run_dir) / "checkpoints/step_0/model.safetensors"));
  EXPECT_FALSE(fs::exists(fs::path(b.run_dir) / "worker0.ipc"));
  EXPECT_FALSE(fs::exists(fs::path(b.run_dir) / "worker1_weights.ipc"));
}

}  // namespace
}  // namespace rlcpp
