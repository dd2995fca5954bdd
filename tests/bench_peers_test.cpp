// Label `peers`: each real peer's script (bench/peers/) on a tiny shape, through run_real_peer as the benches run
// it, when its environment is installed (scripts/install_peers.sh); skipped with the reason otherwise (CI has
// none). Checks what the benches read: the figure, its version, and for llama.cpp that the converted weights
// give Hugging Face's logits.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <filesystem>
#include <optional>

#include "bench/bench_common.h"
#include "bench/real_peers.h"
#include "model/checkpoint.h"
#include "model/init.h"

namespace rlcpp::bench {
namespace {

class Peers : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.emplace("peers_test");
    checkpoint_ = dir_->path() + "/w1";
    save_model_checkpoint(checkpoint_, init_random(model_preset("tiny"), 3));
  }
  // The peer's result, or a skip naming why it did not run when it is not installed.
  Json run_or_skip(const std::string& peer, const std::string& args) {
    const PeerRun run = run_real_peer(peer, args);
    if (run.result.is_null() && run.skipped.rfind("not installed", 0) == 0) {
      skipped_ = run.skipped;
      return nullptr;
    }
    EXPECT_FALSE(run.result.is_null()) << peer << ": " << run.skipped;
    return run.result;
  }
  std::optional<TempDir> dir_;
  std::string checkpoint_, skipped_;
};

#define RUN_OR_SKIP(var, peer, args)               \
  const Json var = run_or_skip(peer, args);        \
  if (var.is_null() && !skipped_.empty()) GTEST_SKIP() << skipped_; \
  ASSERT_FALSE(var.is_null())

TEST_F(Peers, PyTorch2TrainsEagerAndCompiled) {
  RUN_OR_SKIP(r, "pytorch2", "train --checkpoint " + checkpoint_ +
                                 " --batch 4 --seq 8 --iters 1 --warmup 1 --threads 1 --modes eager,compile");
  EXPECT_EQ(r["parameters"], model_preset("tiny").num_parameters());
  for (const char* mode : {"eager", "compile"}) {
    const PeerFigure f = peer_figure({"pytorch2", r, ""}, std::string("modes.") + mode + ".tokens_per_s");
    EXPECT_TRUE(f.measured()) << mode << ": " << f.note;
  }
}

TEST_F(Peers, LlamaCppGivesHuggingFacesLogitsAndSamples) {
  RUN_OR_SKIP(check, "llama.cpp", "check --checkpoint " + checkpoint_ + " --threads 1");
  ASSERT_TRUE(check.contains("max_abs_diff")) << check.dump();
  EXPECT_LT(check["max_abs_diff"].get<double>(), 1e-4) << check.dump();
  RUN_OR_SKIP(r, "llama.cpp", "rollout --checkpoint " + checkpoint_ +
                                  " --prompts 2 --group 4 --prompt-len 5 --new-tokens 4 --iters 1 --warmup 0 "
                                  "--threads 1");
  EXPECT_EQ(r["sequences"], 8);
  EXPECT_TRUE(peer_figure({"llama.cpp", r, ""}, "tokens_per_s").measured()) << r.dump();
}

TEST_F(Peers, VllmSamplesTheRequestedTokens) {
  RUN_OR_SKIP(r, "vllm", "rollout --checkpoint " + checkpoint_ +
                             " --prompts 2 --group 4 --prompt-len 5 --new-tokens 4 --iters 1 --warmup 0 --threads 1");
  EXPECT_EQ(r["generated_tokens"], 2 * 4 * 4) << r.dump();
  EXPECT_TRUE(peer_figure({"vllm", r, ""}, "tokens_per_s").measured()) << r.dump();
}

TEST_F(Peers, TrlRunsAGrpoStep) {
  RUN_OR_SKIP(r, "trl", "step --checkpoint " + checkpoint_ +
                            " --prompts 2 --group 4 --new-tokens 6 --minibatches 2 --iters 1 --warmup 1 --threads 1");
  EXPECT_EQ(r["prompts"], 2);
  EXPECT_TRUE(peer_figure({"trl", r, ""}, "step_ms").measured()) << r.dump();
  EXPECT_TRUE(r.contains("phases_ms")) << r.dump();
}

TEST_F(Peers, HfPyTorchRunsAGrpoStepThatMovesThePolicyAndSyncsItsRolloutCopy) {
  // The GPU's step peer runs the machine's python3 there; here it runs on the CPU in the peers' environment
  // (torch 2 and transformers), set as that python the way a user points the bench at one.
  const std::string venv = peers_dir() + "/venv";
  if (!std::filesystem::exists(venv + "/.done"))
    GTEST_SKIP() << "not installed (" << venv << " is missing or unfinished: run scripts/install_peers.sh)";
  ASSERT_EQ(setenv("RLCPP_PEER_PYTHON", (venv + "/bin/python").c_str(), 1), 0);
  for (const char* dtype : {"float32", "bfloat16"}) {
    RUN_OR_SKIP(r, "hf-pytorch", "step --checkpoint " + checkpoint_ + " --device cpu --dtype " + dtype +
                                     " --prompts 2 --group 4 --prompt-len 5 --new-tokens 3 --minibatches 2 "
                                     "--iters 1 --warmup 1");
    EXPECT_EQ(r["generated_tokens"], 2 * 4 * 3) << r.dump();
    EXPECT_TRUE(peer_figure({"hf-pytorch", r, ""}, "step_ms").measured()) << r.dump();
    double shares = 0;
    for (const char* phase : {"rollout", "reward", "old_logprob", "update", "sync"})
      shares += r[std::string(phase) + "_share"].get<double>();
    EXPECT_NEAR(shares, 1.0, 1e-9) << r.dump();
    EXPECT_GT(r["update_max_abs_change"].get<double>(), 0) << dtype << ": the updates did not move the policy";
    EXPECT_EQ(r["rollout_copy_max_abs_diff"].get<double>(), 0) << dtype << ": the rollout copy is not the policy's";
  }
  unsetenv("RLCPP_PEER_PYTHON");
}

}  // namespace
}  // namespace rlcpp::bench
