// SFT on add3 learns: a CI-sized seeded run lifts held-out accuracy from 0 well above chance, writes its run
// directory, and a second run never overwrites the first.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/error.h"
#include "loop/sft_run.h"
#include "model/checkpoint.h"
#include "model/init.h"
#include "model/lora.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

SftConfig ci_config(const std::string& dir) {
  SftConfig c;
  c.run_dir = dir;
  c.steps = 500;
  c.batch_size = 256;
  c.micro_batch_size = 128;  // two micro-batches: accumulation is on the path
  c.optim.lr = 1.5e-3;
  c.optim.weight_decay = 0.1;
  c.optim.schedule = "linear_warmup";
  c.optim.warmup_steps = 50;
  c.eval_every = 0;
  c.eval_size = 300;
  c.log_every = 100;
  return c;
}

TEST(LoopSft, ShortRunLearnsAdd3AndWritesItsRunDirectory) {
  const fs::path dir = fs::temp_directory_path() / "rlcpp_sft_test";
  fs::remove_all(dir);
  fs::remove_all(dir.string() + "-2");
  const SftConfig cfg = ci_config(dir.string());
  const SftSummary s = run_sft(cfg, config_to_json(cfg));
  // Measured at this seed: held-out accuracy 0.0% at step 100, 7.3% at 400, 46.0% at 500 (the model
  // finds the carry rule around step 400); a broken gradient or optimizer stays near 0.
  EXPECT_GE(s.final_accuracy, 0.25);
  EXPECT_LT(s.final_loss, 0.7);  // 0.41 measured; 3.49 at the start
  ASSERT_TRUE(fs::exists(dir / "config.json"));
  ASSERT_TRUE(fs::exists(dir / "metrics.jsonl"));
  std::ifstream metrics(dir / "metrics.jsonl");
  int lines = 0;
  for (std::string line; std::getline(metrics, line);) {
    Json j = Json::parse(line);
    EXPECT_EQ(j["step"].get<int>(), ++lines);
  }
  EXPECT_EQ(lines, cfg.steps);
  ParameterStore reloaded = load_model_checkpoint(s.checkpoint);
  EXPECT_EQ(reloaded.config().hidden_size, 128);

  // The same run dir again goes to NAME-2; the first run's files are untouched.
  const auto before = fs::last_write_time(dir / "metrics.jsonl");
  SftConfig tiny = cfg;
  tiny.steps = 2;
  tiny.eval_size = 10;
  run_sft(tiny, config_to_json(tiny));
  EXPECT_TRUE(fs::exists(dir.string() + "-2/config.json"));
  EXPECT_EQ(fs::last_write_time(dir / "metrics.jsonl"), before);
  fs::remove_all(dir);
  fs::remove_all(dir.string() + "-2");
}

// An SFT whose weights overflow (optim.lr 1e308 is inf in fp32) in fewer steps than optim.max_bad_steps used to
// finish "sft done" with an all-NaN checkpoint. It stops at the step that made them non-finite, writes no
// checkpoint, and an earlier run's checkpoint stays as it was.
TEST(LoopSft, DivergedWeightsStopTheRunWithoutACheckpoint) {
  const fs::path dir = fs::temp_directory_path() / "rlcpp_sft_diverge_test";
  fs::remove_all(dir);
  SftConfig cfg = ci_config((dir / "good").string());
  cfg.steps = 2;
  cfg.batch_size = 16;
  cfg.micro_batch_size = 8;  // two micro-batches
  cfg.checkpoint_every = 1;
  cfg.eval_size = 10;
  const SftSummary good = run_sft(cfg, config_to_json(cfg));
  const ParameterStore before = load_model_checkpoint(good.checkpoint);

  cfg.run_dir = (dir / "diverged").string();
  cfg.init_checkpoint = good.checkpoint;
  cfg.optim.lr = 1e308;
  cfg.optim.schedule = "constant";
  cfg.steps = 3;
  std::string error = "<no error>";
  try {
    run_sft(cfg, config_to_json(cfg));
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("the weights became non-finite at optimizer step 1"), std::string::npos) << error;
  EXPECT_NE(error.find("tensor '"), std::string::npos) << error;
  EXPECT_TRUE(fs::is_empty(dir / "diverged" / "checkpoints"));
  const ParameterStore after = load_model_checkpoint(good.checkpoint);
  EXPECT_EQ(std::memcmp(before.flat().raw(), after.flat().raw(), before.flat().nbytes()), 0);
  fs::remove_all(dir);
}

// LoRA SFT (lora.rank > 0): rank-16 adapters on every Linear layer of the random tiny model lower its loss; the
// checkpoint holds the merged model and, in adapter/, the adapters as PEFT saves them: the random init with them
// merged is the checkpoint's model, bit for bit.
TEST(LoopSft, LoraRunLowersTheLossAndSavesItsAdapters) {
  const fs::path dir = fs::temp_directory_path() / "rlcpp_sft_lora_test";
  fs::remove_all(dir);
  SftConfig cfg = ci_config(dir.string());
  cfg.steps = 40;
  cfg.batch_size = 64;
  cfg.micro_batch_size = 32;  // two micro-batches
  cfg.lora.rank = 16;
  cfg.lora.alpha = 32;
  cfg.optim.lr = 1e-2;
  cfg.optim.warmup_steps = 5;
  cfg.eval_size = 10;
  cfg.log_every = 10;
  const SftSummary s = run_sft(cfg, config_to_json(cfg));
  std::ifstream metrics(dir / "metrics.jsonl");
  std::vector<double> losses;
  for (std::string line; std::getline(metrics, line);) losses.push_back(Json::parse(line)["loss"].get<double>());
  ASSERT_EQ(losses.size(), 40u);
  // Measured: 3.49 at step 1, 2.5-2.8 over the last steps (the frozen random embeddings and head bound what the
  // adapters can do); frozen adapters (a broken gradient) stay at 3.49.
  const double last5 = (losses[35] + losses[36] + losses[37] + losses[38] + losses[39]) / 5;
  EXPECT_LT(last5, losses.front() - 0.5) << "loss " << losses.front() << " -> " << last5 << " (last 5 steps)";
  const ParameterStore base = init_random(model_preset(cfg.model_preset), cfg.seed);
  const LoraAdapters adapters = LoraAdapters::load_peft(s.checkpoint + "/adapter", base.config());
  EXPECT_EQ(adapters.config().rank, 16);
  ParameterStore merged = base.clone();
  adapters.merge(ExecContext::cpu(), base, merged);
  const ParameterStore saved = load_model_checkpoint(s.checkpoint);
  EXPECT_EQ(std::memcmp(merged.flat().raw(), saved.flat().raw(), saved.flat().nbytes()), 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rlcpp
