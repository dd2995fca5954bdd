// The CLI as users meet it: bad input gets an error that names what is wrong and where, and exits non-zero;
// the subcommands run end to end on a small checkpoint.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "tests/app_test_support.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

using Cli = CliTest;

TEST_F(Cli, UnknownConfigKeyNamesFileAndKeyPath) {
  std::string cfg = write("bad.json", R"({"optim": {"lrr": 1e-3}})");
  CliResult r = run_cli("sft " + cfg);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("bad.json"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("'optim.lrr'"), std::string::npos) << r.output;
}

TEST_F(Cli, WrongTypeFromSetNamesKeyPath) {
  std::string cfg = write("ok.json", "{}");
  CliResult r = run_cli("sft " + cfg + " --set steps=many");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("'steps': expected an integer"), std::string::npos) << r.output;
}

TEST_F(Cli, MissingCheckpointTensorNamesFileAndTensor) {
  fs::copy(dir_ / "ckpt", dir_ / "broken", fs::copy_options::recursive);
  // Rewrite config.json with one more layer than the tensors have.
  std::ifstream in(dir_ / "broken" / "config.json");
  Json j = Json::parse(in);
  j["num_hidden_layers"] = 5;
  std::ofstream(dir_ / "broken" / "config.json") << j.dump();
  CliResult r = run_cli("eval " + (dir_ / "broken").string() + " --n 5");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("model.layers.4."), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("model.safetensors"), std::string::npos) << r.output;
}

TEST_F(Cli, EvalGenerateAndScoreRun) {
  const std::string ckpt = (dir_ / "ckpt").string();
  CliResult e = run_cli("eval " + ckpt + " --task add3 --n 20");
  ASSERT_EQ(e.status, 0) << e.output;
  EXPECT_NE(e.output.find("accuracy"), std::string::npos);
  CliResult g = run_cli("generate " + ckpt + " --prompt 12+34= --n 2 --temperature 1 --seed 3");
  ASSERT_EQ(g.status, 0) << g.output;
  EXPECT_EQ(std::count(g.output.begin(), g.output.end(), '\n'), 2) << g.output;
  std::string in = write("in.jsonl", "{\"text\": \"1+2=3\", \"eos\": true}\n\n{\"tokens\": [1, 4, 13]}\n");
  CliResult s = run_cli("score " + ckpt + " --input " + in + " --out " + (dir_ / "out.jsonl").string());
  ASSERT_EQ(s.status, 0) << s.output;
  std::ifstream out(dir_ / "out.jsonl");
  std::string l1, l2;
  std::getline(out, l1);
  std::getline(out, l2);
  Json a = Json::parse(l1), b = Json::parse(l2);
  EXPECT_EQ(a["logprobs"].size(), 6u);  // BOS 1 + 2 = 3 EOS: 7 tokens, 6 predictions
  EXPECT_EQ(b["logprobs"].size(), 2u);
  // The shared prefix (BOS, '1', '+') gets the same log-probs in both.
  EXPECT_FLOAT_EQ(a["logprobs"][0].get<float>(), b["logprobs"][0].get<float>());
  EXPECT_FLOAT_EQ(a["logprobs"][1].get<float>(), b["logprobs"][1].get<float>());
}

TEST_F(Cli, BadScoreLineNamesFileAndLine) {
  std::string in = write("bad.jsonl", "{\"text\": \"1+2=3\"}\n{\"text\": \"1+x\"}\n");
  CliResult r = run_cli("score " + (dir_ / "ckpt").string() + " --input " + in);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("bad.jsonl:2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("'x'"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace rlcpp
