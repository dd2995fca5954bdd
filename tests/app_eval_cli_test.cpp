// `rlcpp eval` and `rlcpp generate` run the rollout engine in the numerics the user picks (--dtype,
// --quantization, --batch-invariant), and a bad choice is an error naming the option and the choices.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/config.h"
#include "tests/app_test_support.h"

namespace rlcpp {
namespace {

using EvalCli = CliTest;

// The JSON object `rlcpp eval` prints last.
Json last_json_line(const std::string& output) {
  const size_t end = output.find_last_not_of('\n');
  const size_t begin = output.rfind('\n', end);
  return Json::parse(output.substr(begin == std::string::npos ? 0 : begin + 1, end - begin));
}

TEST_F(EvalCli, EvalRunsInTheChosenNumerics) {
  const std::string ckpt = (dir_ / "ckpt").string();
  CliResult fp32 = run_cli("eval " + ckpt + " --task add3 --n 30");
  ASSERT_EQ(fp32.status, 0) << fp32.output;
  EXPECT_NE(fp32.output.find("(greedy, fp32)"), std::string::npos) << fp32.output;
  CliResult again =
      run_cli("eval " + ckpt + " --task add3 --n 30 --dtype fp32 --quantization none --batch-invariant true");
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_EQ(last_json_line(again.output), last_json_line(fp32.output));  // the defaults, spelled out
  CliResult low = run_cli("eval " + ckpt + " --task add3 --n 30 --samples 4 --temperature 1 --dtype bf16 "
                          "--quantization int8 --batch-invariant false");
  ASSERT_EQ(low.status, 0) << low.output;
  EXPECT_NE(low.output.find("(sampled, bf16+int8 (not batch-invariant))"), std::string::npos) << low.output;
  const Json j = last_json_line(low.output);
  EXPECT_EQ(j["problems"], 30);
  EXPECT_EQ(j["samples_per_problem"], 4);
  EXPECT_TRUE(j.contains("pass@4")) << j.dump();
}

TEST_F(EvalCli, GenerateRunsInTheChosenNumerics) {
  const std::string ckpt = (dir_ / "ckpt").string();
  CliResult one = run_cli("generate " + ckpt + " --prompt 12+34= --dtype bf16");
  ASSERT_EQ(one.status, 0) << one.output;
  EXPECT_EQ(std::count(one.output.begin(), one.output.end(), '\n'), 1) << one.output;
  EXPECT_EQ(one.output.rfind("12+34=", 0), 0u) << one.output;
  const std::string prompts = write("p.jsonl", "{\"prompt\": \"1+2=\"}\n{\"prompt\": \"3+4=\"}\n");
  const std::string out = (dir_ / "s.jsonl").string();
  CliResult many = run_cli("generate " + ckpt + " --prompts " + prompts + " --n 2 --temperature 1 --seed 2 "
                           "--dtype fp16 --quantization fp8_e4m3 --out " + out);
  ASSERT_EQ(many.status, 0) << many.output;
  EXPECT_NE(many.output.find("fp16+fp8_e4m3"), std::string::npos) << many.output;
  EXPECT_NE(many.output.find("KV 1024 bytes/token"), std::string::npos) << many.output;  // an fp16 cache
  std::ifstream in(out);
  int lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    const Json s = Json::parse(line);
    EXPECT_EQ(s["tokens"].size(), s["logprobs"].size());
    for (const Json& lp : s["logprobs"]) EXPECT_LE(lp.get<double>(), 0.0);
  }
  EXPECT_EQ(lines, 4);
}

TEST_F(EvalCli, BadNumericsNameTheOptionAndTheChoices) {
  const std::string ckpt = (dir_ / "ckpt").string();
  CliResult r = run_cli("eval " + ckpt + " --n 5 --dtype fp64");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("'--dtype'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("fp32, tf32, bf16, fp16"), std::string::npos) << r.output;
  r = run_cli("generate " + ckpt + " --prompt 1+2= --quantization int4");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("'--quantization'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("none, int8, fp8_e4m3"), std::string::npos) << r.output;
  // A response limit of 0 or below used to fall back to the task's without a word.
  for (const char* bad : {"0", "-5"}) {
    r = run_cli("eval " + ckpt + " --task add3 --n 5 --max-new-tokens " + bad);
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.output.find("--max-new-tokens must be >= 1"), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace rlcpp
