// The CLI as users meet it: bad input gets an error that names what is wrong and where, and exits non-zero;
// the subcommands run end to end on a small checkpoint.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "model/safetensors.h"
#include "tests/app_test_support.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

using Cli = CliTest;

TEST(CliDevices, NamesTheCpuAndCudaAndRequireGpuSaysWhyThereIsNone) {
  // What a machine offers (the GPU check's first question): the CPU line always, CUDA's runtime line in a CUDA
  // build; --require-gpu exits 1 with the reason where no GPU is usable, 0 where one is.
  const CliResult r = run_cli("devices");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.rfind("cpu: ", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("hardware threads"), std::string::npos) << r.output;
#ifdef RLCPP_WITH_CUDA
  EXPECT_NE(r.output.find("CUDA runtime "), std::string::npos) << r.output;
#else
  EXPECT_NE(r.output.find("rlcpp was built without CUDA"), std::string::npos) << r.output;
#endif
  const CliResult required = run_cli("devices --require-gpu");
  if (r.output.find("cuda:0 ") != std::string::npos) {
    EXPECT_EQ(required.status, 0) << required.output;
  } else {
    EXPECT_TRUE(WIFEXITED(required.status) && WEXITSTATUS(required.status) == 1) << required.output;
    EXPECT_NE(required.output.find("devices --require-gpu: "), std::string::npos) << required.output;
  }
}

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

// A user error: "rlcpp: error: ..." and status 1. An exception thrown inside an OpenMP region used to abort
// (signal 6, or 134 through the shell) with no message.
void expect_error_exit(const CliResult& r, const std::string& message, const std::string& what) {
  EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 1) << what << ": status " << r.status << "\n" << r.output;
  EXPECT_NE(r.output.find("rlcpp: error: "), std::string::npos) << what << ":\n" << r.output;
  EXPECT_NE(r.output.find(message), std::string::npos) << what << ":\n" << r.output;
}

class NonFiniteCli : public CliTest {
 protected:
  // A copy of ckpt/ at NAME/ with `edit` applied to its tensors.
  std::string edited_checkpoint(const std::string& name, const std::function<void(SafetensorsFile&)>& edit) {
    fs::copy(dir_ / "ckpt", dir_ / name, fs::copy_options::recursive);
    const std::string weights = (dir_ / name / "model.safetensors").string();
    SafetensorsFile f = read_safetensors(weights);
    edit(f);
    write_safetensors(weights, std::vector<std::pair<std::string, Tensor>>(f.tensors.begin(), f.tensors.end()),
                      f.metadata);
    return (dir_ / name).string();
  }
};

TEST_F(NonFiniteCli, CheckpointWithANanWeightIsRefusedAtLoadNamingTheTensor) {
  const std::string ckpt = edited_checkpoint("nan", [](SafetensorsFile& f) {
    f.tensors.at("model.layers.0.mlp.up_proj.weight").data<float>()[9] = NAN;
  });
  const std::string message = (dir_ / "nan" / "model.safetensors").string() +
                              ": tensor 'model.layers.0.mlp.up_proj.weight' holds nan at element 9";
  const std::string in = write("in.jsonl", "{\"text\": \"1+2=3\"}\n");
  expect_error_exit(run_cli("eval " + ckpt + " --task add3 --n 5"), message, "eval");
  expect_error_exit(run_cli("generate " + ckpt + " --prompt 1+2="), message, "generate");
  expect_error_exit(run_cli("score " + ckpt + " --input " + in), message, "score");
}

// Finite weights whose final norm overflows fp32: every logit is inf or NaN. The engine's sampler throws inside
// its OpenMP region; generate and eval must exit with the message, score must not print NaN log-probs.
TEST_F(NonFiniteCli, OverflowingLogitsAreAnErrorNotASignalOrANanOutput) {
  const std::string ckpt = edited_checkpoint("overflow", [](SafetensorsFile& f) {
    Tensor& norm = f.tensors.at("model.norm.weight");
    for (int64_t i = 0; i < norm.numel(); ++i) norm.data<float>()[i] = 3e38f;
  });
  expect_error_exit(run_cli("generate " + ckpt + " --prompt 12+34="), "non-finite logits", "generate greedy");
  const std::string prompts = write("p.jsonl", "{\"prompt\": \"1+2=\"}\n{\"prompt\": \"3+4=\"}\n");
  expect_error_exit(run_cli("generate " + ckpt + " --prompts " + prompts + " --n 4 --temperature 1 --out " +
                            (dir_ / "s.jsonl").string()),
                    "engine: sampling token", "generate sampled");
  expect_error_exit(run_cli("eval " + ckpt + " --task add3 --n 8"), "non-finite logits", "eval");
  const std::string in = write("in.jsonl", "\n{\"text\": \"1+2=3\"}\n");
  const std::string out = (dir_ / "scores.jsonl").string();
  expect_error_exit(run_cli("score " + ckpt + " --input " + in + " --out " + out),
                    in + ":2: the log-prob of token 1 is", "score");
  EXPECT_FALSE(fs::exists(out)) << "nothing is written before the check";
}

TEST_F(NonFiniteCli, SubnormalTemperatureIsRefusedNamingTheOption) {
  const std::string ckpt = (dir_ / "ckpt").string();
  const std::string in = write("in.jsonl", "{\"text\": \"1+2=3\"}\n");
  for (const std::string& command : {"generate " + ckpt + " --prompt 1+2=", "score " + ckpt + " --input " + in,
                                     "eval " + ckpt + " --n 5"}) {
    const std::string name = command.substr(0, command.find(' '));
    for (const char* t : {"1e-45", "1e-4", "nan", "-1"})
      expect_error_exit(run_cli(command + " --temperature=" + t), name + " --temperature: temperature ",
                        command + " --temperature=" + t);
  }
  CliResult ok = run_cli("score " + ckpt + " --input " + in + " --temperature 1e-3");
  EXPECT_EQ(ok.status, 0) << ok.output;  // the documented minimum itself is accepted
}

// A number is reported as written, not as what a 32-bit float made of it (1e308 -> "inf", 1e-300 -> "got 0"), nor an
// integer as what it wrapped to: options, config keys and a checkpoint's config.json.
TEST_F(NonFiniteCli, NumbersPastTheirTypeAreReportedAsWritten) {
  const std::string ckpt = (dir_ / "ckpt").string();
  const std::string in = write("in.jsonl", "{\"text\": \"1+2=3\"}\n");
  const auto refused = [](const CliResult& r, const std::string& message) {
    EXPECT_NE(r.status, 0) << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
  };
  const std::string past = " is outside the range of a 32-bit float (it would be stored as ";
  refused(run_cli("generate " + ckpt + " --prompt 1+2= --top-p 1e-300"), "--top-p: 1e-300" + past + "0)");
  refused(run_cli("generate " + ckpt + " --prompt 1+2= --temperature 1e308"), "--temperature: 1e308" + past + "inf)");
  refused(run_cli("score " + ckpt + " --input " + in + " --temperature 1e308"), "--temperature: 1e308" + past + "inf)");
  refused(run_cli("eval " + ckpt + " --n 5 --temperature -1e39"), "--temperature: -1e39" + past + "-inf)");
  const std::string config = write("train.json", "{}");
  const std::string run = " --set run_dir=" + (dir_ / "run").string();
  refused(run_cli("train " + config + run + " --set rollout.sampling.temperature=1e308"),
          "config key 'rollout.sampling.temperature': 1e+308" + past + "inf)");
  refused(run_cli("train " + config + run + " --set rollout.sampling.top_p=1e-300"),
          "config key 'rollout.sampling.top_p': 1e-300" + past + "0)");
  refused(run_cli("train " + config + run + " --set steps=18446744073709551615"),
          "config key 'steps': 18446744073709551615 is outside the range of this key's 64-bit integers");
  EXPECT_FALSE(fs::exists(dir_ / "run"));
  fs::copy(dir_ / "ckpt", dir_ / "theta", fs::copy_options::recursive);
  Json hf = Json::parse(std::ifstream(dir_ / "theta" / "config.json"));
  hf["rope_theta"] = 1e-300;
  std::ofstream(dir_ / "theta" / "config.json") << hf.dump();
  refused(run_cli("generate " + (dir_ / "theta").string() + " --prompt 1+2="),
          (dir_ / "theta" / "config.json").string() +
              ": rope_theta 1e-300 is not a positive number a 32-bit float holds");
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
