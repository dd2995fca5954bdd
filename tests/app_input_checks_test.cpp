// Inputs that used to be accepted silently or found late (issue 14): each is now an error naming what is wrong
// and where, given before any work — duplicate prompt ids, unknown or conflicting keys in input lines, counts
// past a rollout's limits, negative seeds, a config.json that does not match its weights.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>

#include "tests/app_test_support.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

using InputChecks = CliTest;

void expect_error(const CliResult& r, const std::string& message, const std::string& what) {
  EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) != 0) << what << ": status " << r.status << "\n" << r.output;
  EXPECT_NE(r.output.find(message), std::string::npos) << what << ":\n" << r.output;
}

TEST_F(InputChecks, GeneratePromptLinesWithOneIdOrBadKeysAreRefused) {
  const std::string ckpt = (dir_ / "ckpt").string();
  const std::string dup = write("dup.jsonl", "{\"prompt\": \"1+2=\", \"id\": 7}\n{\"prompt\": \"3+4=\", \"id\": 7}\n");
  expect_error(run_cli("generate " + ckpt + " --prompts " + dup + " --temperature 1"),
               dup + ":2: prompt id 7 is already used by " + dup + ":1", "duplicate id");
  // Default ids are the line's index among prompts: an explicit id equal to one is a duplicate too.
  const std::string implicit = write("implicit.jsonl", "{\"prompt\": \"1+2=\"}\n{\"prompt\": \"3+4=\", \"id\": 0}\n");
  expect_error(run_cli("generate " + ckpt + " --prompts " + implicit), "prompt id 0 is already used", "implicit id");
  const std::string unknown = write("unknown.jsonl", "{\"prompt\": \"1+2=\", \"n\": 4}\n");
  expect_error(run_cli("generate " + ckpt + " --prompts " + unknown), unknown + ":1: unknown key \"n\"", "unknown key");
  const std::string both = write("both.jsonl", "{\"prompt\": \"1+2=\", \"tokens\": [1, 4]}\n");
  expect_error(run_cli("generate " + ckpt + " --prompts " + both), both + ":1: gives more than one of", "prompt and tokens");
  // Distinct ids run.
  const std::string ok = write("ok.jsonl", "{\"prompt\": \"1+2=\", \"id\": 7}\n{\"prompt\": \"3+4=\", \"id\": 8}\n");
  const CliResult r = run_cli("generate " + ckpt + " --prompts " + ok + " --temperature 1");
  EXPECT_EQ(r.status, 0) << r.output;
}

TEST_F(InputChecks, CountsPastARolloutsLimitsAndNegativeSeedsAreRefusedUpFront) {
  const std::string ckpt = (dir_ / "ckpt").string();
  expect_error(run_cli("generate " + ckpt + " --prompt 1+2= --n 100000000"), "--n", "generate --n");
  expect_error(run_cli("eval " + ckpt + " --samples 100000 --temperature 1"), "--samples", "eval --samples");
  expect_error(run_cli("eval " + ckpt + " --n 100000000"), "--n", "eval --n");
  expect_error(run_cli("eval " + ckpt + " --n 60000 --samples 4000 --temperature 1"), "sequences", "eval n x samples");
  expect_error(run_cli("eval " + ckpt + " --n 5 --seed -1"), "--seed", "eval --seed -1");
  expect_error(run_cli("generate " + ckpt + " --prompt 1+2= --seed -1"), "--seed", "generate --seed -1");
}

TEST_F(InputChecks, ScoreLineKeysAreCheckedNamingFileAndLine) {
  const std::string ckpt = (dir_ / "ckpt").string();
  const std::string eos = write("eos.jsonl", "{\"text\": \"1+2=3\"}\n{\"text\": \"1+2=3\", \"eos\": \"yes\"}\n");
  expect_error(run_cli("score " + ckpt + " --input " + eos), eos + ":2: \"eos\" must be true or false", "eos type");
  const std::string unknown = write("unknown.jsonl", "{\"text\": \"1+2=3\", \"weight\": 2}\n");
  expect_error(run_cli("score " + ckpt + " --input " + unknown), unknown + ":1: unknown key \"weight\"", "unknown key");
  const std::string both = write("both.jsonl", "{\"text\": \"1+2=3\", \"tokens\": [1, 4, 13]}\n");
  expect_error(run_cli("score " + ckpt + " --input " + both), both + ":1: gives both", "text and tokens");
}

TEST_F(InputChecks, ConfigJsonThatDoesNotMatchItsWeightsFailsBeforeAllocating) {
  fs::copy(dir_ / "ckpt", dir_ / "huge", fs::copy_options::recursive);
  Json j;
  {
    std::ifstream in(dir_ / "huge" / "config.json");
    j = Json::parse(in);
  }
  j["vocab_size"] = 10000000;  // 1.3 G parameters: a 5 GB allocation for weight files of a few hundred kB
  std::ofstream(dir_ / "huge" / "config.json") << j.dump();
  CliResult r = run_cli("eval " + (dir_ / "huge").string() + " --n 5");
  expect_error(r, (dir_ / "huge" / "config.json").string() + ": describes a model of", "vocab_size 1e7");
  EXPECT_NE(r.output.find("vocab_size 10000000"), std::string::npos) << r.output;
  j["vocab_size"] = 1000000000;  // past any real vocabulary: refused by the config check itself
  std::ofstream(dir_ / "huge" / "config.json") << j.dump();
  r = run_cli("eval " + (dir_ / "huge").string() + " --n 5");
  expect_error(r, (dir_ / "huge" / "config.json").string() + ": vocab_size 1000000000 is past the largest supported",
               "vocab_size 1e9");
}

}  // namespace
}  // namespace rlcpp
