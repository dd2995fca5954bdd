// `rlcpp bench step` end to end on the CPU: its options reach the recipe (--dtype, --new-tokens), the step peer of
// a GPU (hf-pytorch, bench/peers/hf_grpo_step.py) is given the shapes rlcpp ran, and the peer's JSON becomes the
// row and the ratio — checked with a stand-in for the peer's Python that prints a fixed step (the script itself
// runs in bench_peers_test, label `peers`), and with one that fails, which is a row saying so.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/config.h"
#include "tests/app_test_support.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

using BenchStep = CliTest;

// The last line of the output that is a JSON object (the bench's summary).
Json summary_of(const std::string& output) {
  std::stringstream s(output);
  Json last;
  for (std::string line; std::getline(s, line);)
    if (!line.empty() && line.front() == '{') last = Json::parse(line);
  return last;
}

TEST_F(BenchStep, TheGpuPeersStepIsGivenRlcppsShapesAndSetBesideItAsARatio) {
  const fs::path args = dir_ / "peer_args.txt";
  const std::string python = write("peer_python.sh",
                                   "#!/bin/sh\necho \"$@\" > '" + args.string() +
                                       "'\necho '{\"peer\": \"hf-pytorch\", \"torch\": \"9.9\", \"step_ms\": 5000, "
                                       "\"ms\": 5000, \"rollout_share\": 0.6, \"reward_share\": 0.01, "
                                       "\"old_logprob_share\": 0.1, \"update_share\": 0.28, \"sync_share\": 0.01}'\n");
  fs::permissions(python, fs::perms::owner_all);
  const CliResult run = run_shell("RLCPP_PEER_PYTHON='" + python + "' " + RLCPP_BINARY_DIR + "/rlcpp bench step --iters 1 --warmup 0 "
                                  "--no-colocated --peers hf-pytorch --dtype bf16 --new-tokens 4 "
                                  "--set rollout.prompts_per_step=16 --set ppo.mini_batch_size=64 --set ppo.micro_batch_size=32");
  ASSERT_EQ(run.status, 0) << run.output;
  const Json out = summary_of(run.output);
  ASSERT_TRUE(out.contains("split") && out.contains("hf_pytorch")) << run.output;
  EXPECT_EQ(out["dtype"], "bf16");
  EXPECT_EQ(out["new_tokens"], 4);
  EXPECT_EQ(out["minibatches"], 2);  // 16 x 8 sequences in mini-batches of 64
  // The run's own shapes went to the peer: its prompt length is the one rlcpp's tokens imply.
  const std::string given = read_text(args);
  const int64_t prompt_len = std::lround(out["split"]["tokens"].get<double>() / (16.0 * 8)) - 4;
  for (const std::string& option : {std::string("--prompts 16 --group 8 --new-tokens 4 --minibatches 2"),
                                    "--prompt-len " + std::to_string(prompt_len), std::string("--dtype bfloat16"),
                                    std::string("--device cpu")})
    EXPECT_NE(given.find(option), std::string::npos) << option << " not in: " << given;
  // The ratio is the peer's step over rlcpp's, printed and in the summary (no goal on the CPU: it is the GPU's).
  const double ratio = 5000.0 / out["split"]["step_ms"].get<double>();
  EXPECT_NEAR(out["hf_pytorch"]["ratio_split"].get<double>(), ratio, 1e-9 * ratio);
  char line[128];
  std::snprintf(line, sizeof line, "ratio HF+PyTorch (torch 9.9) / rlcpp step time: split %.2fx\n",
                ratio);
  EXPECT_NE(run.output.find(line), std::string::npos) << line << "\n" << run.output;
  // Its row: the step, the tokens rlcpp's step had, its shares (its sync column is its weight copy); no probe.
  char row[160];
  std::snprintf(row, sizeof row, "  %-32s %9.1f %7.0f %10.1f%% %10.1f%% %10.1f%% %10.1f%% %10.1f%% %11s",
                "HF+PyTorch (torch 9.9)", 5000.0, 16.0 * 8 * static_cast<double>(prompt_len + 4), 60.0, 1.0, 10.0, 28.0, 1.0,
                "-");
  EXPECT_NE(run.output.find(row), std::string::npos) << row << "\n" << run.output;

  // A peer that fails is a row with its error, and the bench still ends well.
  const std::string failing = write("failing_python.sh", "#!/bin/sh\necho 'CUDA out of memory' >&2\nexit 3\n");
  fs::permissions(failing, fs::perms::owner_all);
  const CliResult failed = run_shell("RLCPP_PEER_PYTHON='" + failing + "' " + RLCPP_BINARY_DIR +
                                     "/rlcpp bench step --iters 1 --warmup 0 --no-colocated --peers hf-pytorch "
                                     "--set rollout.prompts_per_step=16 --set ppo.mini_batch_size=64 --set ppo.micro_batch_size=32");
  ASSERT_EQ(failed.status, 0) << failed.output;
  EXPECT_NE(failed.output.find("HF+PyTorch peer did not run: failed (exit status 3): CUDA out of memory"),
            std::string::npos)
      << failed.output;
  EXPECT_EQ(summary_of(failed.output)["hf_pytorch"]["skipped"], "failed (exit status 3): CUDA out of memory");
}

// A LoRA recipe (--set trainer.lora.*): rlcpp trains the adapters, TRL's GRPOTrainer is given the same ones (peft's
// rank, alpha and modules), and the HF+PyTorch peer, which trains every weight, is left out saying so.
TEST_F(BenchStep, ALoraRecipeGivesTrlTheSameAdapters) {
  // A stand-in for the peers' virtual environment (RLCPP_PEERS_DIR): its python records its arguments.
  const fs::path args = dir_ / "trl_args.txt";
  fs::create_directories(dir_ / "peers/venv/bin");
  const std::string python = write("peers/venv/bin/python",
                                   "#!/bin/sh\necho \"$@\" > '" + args.string() +
                                       "'\necho '{\"peer\": \"trl\", \"trl\": \"9.9\", \"step_ms\": 4000, "
                                       "\"ms\": 4000}'\n");
  fs::permissions(python, fs::perms::owner_all);
  write("peers/venv/.done", "");
  const CliResult run = run_shell("RLCPP_PEERS_DIR='" + (dir_ / "peers").string() + "' " + RLCPP_BINARY_DIR +
                                  "/rlcpp bench step --iters 1 "
                                  "--warmup 0 --no-colocated --peers trl,hf-pytorch --set rollout.prompts_per_step=16 "
                                  "--set ppo.mini_batch_size=64 --set ppo.micro_batch_size=32 --set trainer.lora.rank=4 "
                                  "--set trainer.lora.alpha=8 --set 'trainer.lora.targets=[\"v_proj\", \"q_proj\"]'");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("LoRA rank 4 on 2 modules a layer"), std::string::npos) << run.output;
  const std::string given = read_text(args);
  EXPECT_NE(given.find("--lora-rank 4 --lora-alpha 8 --lora-targets q_proj,v_proj"), std::string::npos) << given;
  EXPECT_NE(run.output.find("the hf-pytorch peer trains every weight: not run with trainer.lora"), std::string::npos)
      << run.output;
  EXPECT_TRUE(summary_of(run.output).contains("trl")) << run.output;
}

}  // namespace
}  // namespace rlcpp
