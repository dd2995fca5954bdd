// DPO from a JSONL file: a CI-sized run on the example add3 preferences starts at log 2 and raises the pair
// accuracy (also on held-out pairs), writes its run directory; bad files fail naming file:line and field;
// the example data keeps add3's train/test split.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "core/error.h"
#include "loop/dpo_run.h"
#include "loop/preference_data.h"
#include "model/checkpoint.h"
#include "model/init.h"
#include "reward/task_registry.h"
#include "tests/error_test_support.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

const std::string kTrainPairs = std::string(RLCPP_SOURCE_DIR) + "/configs/data/add3_prefs.jsonl";
const std::string kEvalPairs = std::string(RLCPP_SOURCE_DIR) + "/configs/data/add3_prefs_eval.jsonl";

DpoRunConfig ci_config(const std::string& dir) {
  DpoRunConfig c;
  c.run_dir = dir;
  c.pairs = kTrainPairs;
  c.eval_pairs = kEvalPairs;
  c.dpo.beta = 0.5;
  c.steps = 40;
  c.batch_size = 32;
  c.micro_batch_size = 16;  // two micro-batches: accumulation is on the path
  c.optim.lr = 2e-3;
  c.log_every = 20;
  return c;
}

// A model smaller than the tiny preset, so the run takes a few seconds on a shared core.
std::string write_small_checkpoint(const fs::path& dir) {
  ModelConfig mc;
  mc.hidden_size = 64;
  mc.num_hidden_layers = 2;
  mc.intermediate_size = 176;
  mc.max_position_embeddings = 32;
  const std::string path = (dir / "init").string();
  save_model_checkpoint(path, init_random(mc, 5));
  return path;
}

TEST(LoopDpo, ShortRunStartsAtLogTwoRaisesPairAccuracyAndWritesItsRunDirectory) {
  const fs::path dir = fs::temp_directory_path() / "rlcpp_dpo_test";
  fs::remove_all(dir);
  DpoRunConfig cfg = ci_config((dir / "run").string());
  cfg.init_checkpoint = write_small_checkpoint(dir);
  const DpoSummary s = run_dpo(cfg, config_to_json(cfg));
  EXPECT_NEAR(s.first_loss, std::log(2.0), 1e-6) << "the policy starts at its reference";
  // Measured at this seed: last batch accuracy 0.72, margin 0.66; held-out accuracy 0.61, margin 0.55 (from
  // random weights, 40 steps; telling a right sum from a near miss needs arithmetic the model lacks so far).
  EXPECT_GE(s.final_accuracy, 0.6);
  EXPECT_GT(s.final_margin, 0.3);
  EXPECT_GE(s.eval_accuracy, 0.55) << "held-out pairs from add3's test split";
  EXPECT_GT(s.eval_margin, 0.25);
  ASSERT_TRUE(fs::exists(dir / "run/config.json"));
  std::ifstream metrics(dir / "run/metrics.jsonl");
  int lines = 0;
  for (std::string line; std::getline(metrics, line);) {
    const Json j = Json::parse(line);
    EXPECT_EQ(j["step"].get<int>(), ++lines);
    for (const char* key : {"actor/dpo_loss", "actor/dpo_reward_margin", "actor/dpo_accuracy",
                            "actor/dpo_reward_chosen", "actor/dpo_reward_rejected", "actor/grad_norm", "actor/lr"})
      EXPECT_TRUE(j.contains(key)) << key << " in line " << lines;
  }
  EXPECT_EQ(lines, cfg.steps);
  const ParameterStore reloaded = load_model_checkpoint(s.checkpoint);
  EXPECT_FALSE(reloaded.config().value_head);
  fs::remove_all(dir);
}

// LoRA DPO (lora.rank > 0): the adapters start at zero, so the policy is its reference (the frozen base, one copy)
// and the loss log 2; training them separates the pairs; the checkpoint carries them (adapter/, PEFT's files).
TEST(LoopDpo, LoraRunStartsAtLogTwoAndSeparatesThePairs) {
  const fs::path dir = fs::temp_directory_path() / "rlcpp_dpo_lora_test";
  fs::remove_all(dir);
  DpoRunConfig cfg = ci_config((dir / "run").string());
  cfg.init_checkpoint = write_small_checkpoint(dir);
  cfg.lora.rank = 8;
  cfg.lora.alpha = 16;
  cfg.optim.lr = 5e-3;
  DpoRunConfig bf16_base = cfg;  // a base held in bf16 is the reference too: its forward, the policy's at B = 0
  bf16_base.lora.base_dtype = "bf16";
  bf16_base.steps = 2;
  bf16_base.run_dir = (dir / "bf16_base").string();
  const DpoSummary b = run_dpo(bf16_base, config_to_json(bf16_base));
  EXPECT_NEAR(b.first_loss, std::log(2.0), 1e-6) << "the policy starts at its bf16 reference";
  const DpoSummary s = run_dpo(cfg, config_to_json(cfg));
  EXPECT_NEAR(s.first_loss, std::log(2.0), 1e-6) << "the policy starts at its reference";
  // Measured at this seed (AMD EPYC): last batch margin 0.28 (accuracy 0.63), held-out margin 0.21 (accuracy 0.59);
  // adapters that do not train stay at 0. (lr 2e-2 overshoots: margin -0.01.)
  EXPECT_GT(s.final_margin, 0.1) << "accuracy " << s.final_accuracy;
  EXPECT_GT(s.eval_margin, 0.1) << "held-out accuracy " << s.eval_accuracy;
  EXPECT_TRUE(fs::exists(s.checkpoint + "/adapter/adapter_config.json"));
  fs::remove_all(dir);
}

class PreferenceFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / "rlcpp_prefs_test";
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  std::string error_reading(const std::string& text) {
    const std::string path = write("pairs.jsonl", text);
    return error_of([&] { encode_preferences(read_preference_jsonl(path), CharTokenizer{}, 16, path); });
  }
  fs::path dir_;
};

TEST_F(PreferenceFiles, EveryBadLineIsNamedWithItsField) {
  const std::string good = R"({"prompt": "1+2=", "chosen": "3", "rejected": "4"})";
  const std::string path = (dir_ / "pairs.jsonl").string();
  struct Case {
    std::string text, expect1, expect2;
  };
  const std::vector<Case> cases = {
      {good + "\n{\"prompt\": \"1+2=\", \"chosen\": \"3\"\n", path + ":2", "invalid JSON"},
      {good + "\n\n" + R"({"prompt": "1+2=", "chosen": "3"})", path + ":3", "missing field 'rejected'"},
      {R"({"prompt": "1+2=", "chosen": 3, "rejected": "4"})", path + ":1", "field 'chosen' must be a string"},
      {R"(["1+2=", "3", "4"])", path + ":1", "expected a JSON object"},
      {good + "\n" + R"({"prompt": "1+2=", "chosen": "3", "rejected": "3"})", path + ":2", "the same"},
      {good + "\n" + R"({"prompt": "1+2=", "chosen": "3", "rejected": "x4"})", path + ":2",
       "field 'rejected': tokenizer: character 'x' (U+0078) at byte 0"},
      {R"({"prompt": "1+2=\t", "chosen": "3", "rejected": "4"})", path + ":1", "character '\\t' (U+0009) at byte 4"},
      {R"({"prompt": "1234567890+1234=", "chosen": "3", "rejected": "4"})", path + ":1", "context of 16"},
      {"\n\n", path, "no preference pairs"},
  };
  for (const Case& c : cases) {
    const std::string e = error_reading(c.text);
    EXPECT_NE(e.find(c.expect1), std::string::npos) << e;
    EXPECT_NE(e.find(c.expect2), std::string::npos) << e;
  }
  EXPECT_EQ(error_reading(good + "\n\n" + good + "\n"), "<no error>") << "blank lines are skipped";
}

TEST_F(PreferenceFiles, ARunWithBadDataFailsBeforeCreatingItsDirectory) {
  DpoRunConfig cfg = ci_config((dir_ / "run").string());
  cfg.pairs = write("bad.jsonl", R"({"prompt": "1+2=", "chosen": "three", "rejected": "4"})");
  const std::string e = error_of([&] { run_dpo(cfg, config_to_json(cfg)); });
  EXPECT_NE(e.find("bad.jsonl:1: field 'chosen': tokenizer: character 't'"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(dir_ / "run"));
}

TEST(ExampleData, PairsKeepAdd3sSplitAndPreferTheCorrectSum) {
  TaskConfig tc;
  const std::unique_ptr<Task> add3 = make_task(tc);
  for (const auto& [path, test_split] : {std::pair{kTrainPairs, false}, {kEvalPairs, true}}) {
    const auto records = read_preference_jsonl(path);
    EXPECT_GE(records.size(), test_split ? 100u : 500u);
    for (const auto& r : records) {
      const size_t plus = r.prompt.find('+');
      ASSERT_NE(plus, std::string::npos) << r.prompt;
      const uint64_t a = std::stoull(r.prompt.substr(0, plus)), b = std::stoull(r.prompt.substr(plus + 1));
      Problem p;
      p.meta = {{"a", a}, {"b", b}, {"op", "+"}};
      EXPECT_EQ(add3->is_test(p), test_split) << path << ":" << r.line;
      EXPECT_EQ(r.chosen, std::to_string(a + b)) << path << ":" << r.line;
    }
  }
}

}  // namespace
}  // namespace rlcpp
