// `rlcpp generate --prompts/--out` and `rlcpp worker` as users meet them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/config.h"
#include "tests/app_test_support.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

class RolloutCli : public CliTest {
 protected:
  std::vector<Json> read_jsonl(const std::string& name) {
    std::ifstream in(dir_ / name);
    std::vector<Json> out;
    for (std::string line; std::getline(in, line);) out.push_back(Json::parse(line));
    return out;
  }
};

TEST_F(RolloutCli, GenerateWritesOneLinePerSamplePromptMajor) {
  const std::string prompts = write("p.jsonl", "{\"prompt\": \"12+34=\"}\n\n{\"tokens\": [1, 4, 13], \"id\": 9}\n");
  const std::string args = "generate " + (dir_ / "ckpt").string() + " --prompts " + prompts +
                           " --n 3 --temperature 1.0 --top-p 0.95 --seed 1 --max-new-tokens 5 --out ";
  CliResult r = run_cli(args + (dir_ / "a.jsonl").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("KV 2048 bytes/token"), std::string::npos) << r.output;
  const std::vector<Json> a = read_jsonl("a.jsonl");
  ASSERT_EQ(a.size(), 6u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i]["prompt_index"], i / 3);
    EXPECT_EQ(a[i]["sample_index"], i % 3);
    EXPECT_EQ(a[i]["tokens"].size(), a[i]["logprobs"].size());
    EXPECT_GE(a[i]["tokens"].size(), 1u);
    for (const Json& lp : a[i]["logprobs"]) EXPECT_LE(lp.get<double>(), 0.0);
    const std::string reason = a[i]["finish_reason"];
    EXPECT_TRUE(reason == "eos" || reason == "length") << reason;
  }
  EXPECT_EQ(a[0]["prompt"], "12+34=");
  EXPECT_EQ(a[3]["prompt_id"], 9);
  // Same seed, same samples, also with a batch limit of 1.
  r = run_cli(args + (dir_ / "b.jsonl").string() + " --max-num-seqs 1");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::vector<Json> b = read_jsonl("b.jsonl");
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i]["tokens"], b[i]["tokens"]) << i;
}

// A model of 2^22 positions (the largest config.json allowed): a 4-token prompt took 4.5 GB (a KV cache for one
// whole-context sequence, a RoPE row per position) and refused a smaller cache or step budget. The engine's context
// now follows the prompts (longest + --max-new-tokens): under a 3 GB address-space limit it runs, with the cache
// and budget asked for.
TEST_F(RolloutCli, AFourMillionPositionModelGeneratesAShortPromptInTheMemoryItUses) {
  fs::copy(dir_ / "ckpt", dir_ / "long", fs::copy_options::recursive);
  Json hf = Json::parse(std::ifstream(dir_ / "long" / "config.json"));
  hf["max_position_embeddings"] = 4194304;
  std::ofstream(dir_ / "long" / "config.json") << hf.dump();
  const std::string generate = "ulimit -v 3000000; " RLCPP_BINARY_DIR "/rlcpp generate " + (dir_ / "long").string() +
                               " --prompt 1+2= --max-new-tokens 8 --out ";
  CliResult small = run_shell(generate + (dir_ / "small.jsonl").string() + " --num-blocks 4 --max-batched-tokens 64");
  ASSERT_EQ(small.status, 0) << small.output;
  EXPECT_NE(small.output.find(" of 4 blocks"), std::string::npos) << small.output;
  CliResult automatic = run_shell(generate + (dir_ / "auto.jsonl").string());
  ASSERT_EQ(automatic.status, 0) << automatic.output;
  // The same weights in their own 64-token context sample the same tokens, with the same log-probs.
  CliResult base = run_shell(RLCPP_BINARY_DIR "/rlcpp generate " + (dir_ / "ckpt").string() +
                             " --prompt 1+2= --max-new-tokens 8 --out " + (dir_ / "base.jsonl").string());
  ASSERT_EQ(base.status, 0) << base.output;
  for (const char* run : {"small.jsonl", "auto.jsonl"}) {
    ASSERT_EQ(read_jsonl(run).size(), 1u) << run;
    for (const char* key : {"tokens", "logprobs"}) EXPECT_EQ(read_jsonl("base.jsonl")[0][key], read_jsonl(run)[0][key]);
  }
}

TEST_F(RolloutCli, BadPromptsFileNamesFileAndLine) {
  const std::string prompts = write("bad.jsonl", "{\"prompt\": \"1+2=\"}\n{\"text\": \"1+2=\"}\n");
  CliResult r = run_cli("generate " + (dir_ / "ckpt").string() + " --prompts " + prompts);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("bad.jsonl:2"), std::string::npos) << r.output;
}

TEST_F(RolloutCli, WorkerRefusesRemoteEndpointsWithoutCurveKeys) {
  CliResult r = run_cli("worker --preset tiny --bind tcp://0.0.0.0:5999");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("tcp://0.0.0.0:5999"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--curve-key"), std::string::npos) << r.output;  // how to make and pass keys: app_keys_test
  r = run_cli("worker --preset tiny --bind ipc://" + (dir_ / "w.ipc").string() + " --connect ipc://x");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("not both"), std::string::npos) << r.output;
  // A port outside 1..65535, or "any port" to connect to, is refused at once naming the option.
  r = run_cli("worker --preset tiny --connect tcp://127.0.0.1:0");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("worker --connect: endpoint 'tcp://127.0.0.1:0': port '0' is not a port to connect to"),
            std::string::npos)
      << r.output;
  r = run_cli("worker --preset tiny --weights tcp://127.0.0.1:70000");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("worker --weights: endpoint 'tcp://127.0.0.1:70000': port '70000' is not a port"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace rlcpp
