// Inputs that used to be accepted silently or found late (issue 14): each is now an error naming what is wrong
// and where, given before any work — duplicate prompt ids, unknown or conflicting keys in input lines, counts
// past a rollout's limits, negative seeds, a config.json that does not match its weights. And (issue 32) files
// in and out: inputs that are no regular file or too large, outputs onto inputs, writes that fail, score's
// bounded memory, resumes over bad run files.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/exec_context.h"
#include "tests/app_test_support.h"
#include "tests/test_fixtures.h"

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

namespace rlcpp {
namespace {

// The second sweep of bad inputs (issue 14, session 10): each used to be accepted, misreported or destructive.
TEST_F(InputChecks, OutputOntoTheInputAndEmptyInputsAreRefusedAndTheInputIsKept) {
  const std::string ckpt = (dir_ / "ckpt").string();
  const std::string lines = "{\"text\": \"1+2=3\"}\n";
  const std::string in = write("in.jsonl", lines);
  expect_error(run_cli("score " + ckpt + " --input " + in + " --out " + in), "is the input file", "score --out = input");
  const std::string prompts = write("prompts.jsonl", "{\"prompt\": \"1+2=\"}\n");
  expect_error(run_cli("generate " + ckpt + " --prompts " + prompts + " --out " + prompts), "is the input file",
               "generate --out = --prompts");
  const std::string tok = qwen3_fixture_dir() + "/tokenizer.json";
  expect_error(run_cli("tokenize " + tok + " --input " + in + " --out " + in), "is the input file",
               "tokenize --out = input");
  std::ifstream kept(in);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(kept), {}), lines);
  const std::string empty = write("empty.jsonl", "\n");
  expect_error(run_cli("score " + ckpt + " --input " + empty), empty + ": no input lines", "score of nothing");
  expect_error(run_cli("tokenize " + tok + " --input " + empty), empty + ": no input lines", "tokenize of nothing");
}

TEST_F(InputChecks, OutOfRangeOptionsNameTheOption) {
  const std::string ckpt = (dir_ / "ckpt").string();
  expect_error(run_cli("generate " + ckpt + " --prompt 1+2= --seed 99999999999999999999"),
               "must be an integer in [0, 18446744073709551615]", "seed past 2^64");
  expect_error(run_cli("generate " + ckpt + " --prompt 1+2= --block-size 100000000"),
               "block_size must be in [1, 1048576], got 100000000", "huge KV block");
  for (const char* mib : {"1e-9", "1e30", "8796093022208"})
    expect_error(run_cli("worker " + ckpt + " --bind tcp://127.0.0.1:0 --max-message-mib " + mib),
                 "--max-message-mib must be in [1, 65536]", std::string("--max-message-mib ") + mib);
  const std::string file = write("a_file", "x");
  expect_error(run_cli("worker " + ckpt + " --run-dir " + file), "--run-dir '" + file + "' cannot be made a directory",
               "worker --run-dir onto a file");
  // export never writes into an existing directory, and says what to do instead of naming a flag it lacks.
  const CliResult r = run_cli("export " + ckpt + " " + ckpt);
  expect_error(r, "already exists; nothing was written", "export onto a checkpoint");
  EXPECT_EQ(r.output.find("pass overwrite"), std::string::npos) << r.output;
}

// An agent run's config (issue 34): a bad agent key is named before any work, with what was expected.
TEST_F(InputChecks, AgentConfigKeysAreCheckedNamingTheKey) {
  const std::string calc = std::string(RLCPP_SOURCE_DIR) + "/configs/agent_calc.json";
  expect_error(run_cli("train " + calc + " --set agent.env=chess"),
               "agent.env': \"chess\", expected \"calc\", \"guess\", \"remote\"", "unknown environment");
  expect_error(run_cli("train " + calc + " --set agent.tokenization=retokenize"),
               "agent.tokenization': \"retokenize\" re-renders conversations with a chat template",
               "retokenize with the character tokenizer");
  expect_error(run_cli("train " + calc + " --set agent.env=remote --set agent.endpoint=nowhere"),
               "agent.endpoint': the environment server", "remote without an endpoint");
  expect_error(run_cli("train " + calc + " --set agent.env=remote --set agent.endpoint=tcp://127.0.0.1:5557"),
               "a remote environment has no in-process expert", "remote with an SFT warm start");
  expect_error(run_cli("train " + calc + " --set agent.guess_feedback=loud"),
               "agent.guess_feedback': \"loud\", expected \"sign\" or \"interval\"", "guess feedback");
  expect_error(run_cli("train " + calc + " --set agent.max_tokens=100000"),
               "agent.max_tokens': 100000 is past the engine's context", "episode past the context");
  // Harness mode (issue 35): its command, token in/token out, whole episodes per draw.
  const std::string harness = std::string(RLCPP_SOURCE_DIR) + "/configs/agent_harness.json";
  expect_error(run_cli("train " + harness + " --set agent.harness="), "agent.harness': agent.env \"http\" needs",
               "harness without a command");
  expect_error(run_cli("train " + harness + " --set agent.turns_per_draw=1 --set agent.max_turns=9"),
               "(agent.max_turns, turns_per_draw, max_turn_tokens, tokens_per_draw): a harness may be playing 4608 episodes",
               "harness episodes across too many draws");
  expect_error(run_cli("train " + std::string(RLCPP_SOURCE_DIR) + "/configs/agent_calc.json --set agent.tokens_per_draw=4"),
               "agent.tokens_per_draw': cuts a harness's turns", "tokens_per_draw in-process");
  expect_error(run_cli("train " + harness + " --set agent.tokens_per_draw=-1"), "agent.tokens_per_draw': must be >= 0",
               "negative tokens_per_draw");
}

TEST_F(InputChecks, InputsLongerThanTheContextNameTheirLine) {
  const std::string ckpt = (dir_ / "ckpt").string();
  std::string sum = "1";
  for (int i = 0; i < 100; ++i) sum += "+1";  // 201 characters, past the tiny model's context of 64
  const std::string score_in = write("long.jsonl", "{\"text\": \"1+2=3\"}\n{\"text\": \"" + sum + "\"}\n");
  expect_error(run_cli("score " + ckpt + " --input " + score_in), score_in + ":2: 202 tokens, more than the model's "
               "context of 64", "score of a long line");
  const std::string prompts = write("longp.jsonl", "{\"prompt\": \"" + sum + "\"}\n");
  expect_error(run_cli("generate " + ckpt + " --prompts " + prompts), prompts + ":1: the prompt has 202 tokens",
               "generate of a long prompt");
  expect_error(run_cli("generate " + ckpt + " --prompt " + sum), "--prompt: the prompt has 202 tokens",
               "generate --prompt long");
}

TEST_F(InputChecks, CheckpointFilesThatAreDirectoriesAreNamed) {
  fs::copy(dir_ / "ckpt", dir_ / "weights_dir", fs::copy_options::recursive);
  fs::remove(dir_ / "weights_dir" / "model.safetensors");
  fs::create_directory(dir_ / "weights_dir" / "model.safetensors");
  expect_error(run_cli("eval " + (dir_ / "weights_dir").string() + " --n 2"),
               (dir_ / "weights_dir" / "model.safetensors").string() + ": is a directory", "weights as a directory");
  fs::copy(dir_ / "ckpt", dir_ / "config_dir", fs::copy_options::recursive);
  fs::remove(dir_ / "config_dir" / "config.json");
  fs::create_directory(dir_ / "config_dir" / "config.json");
  expect_error(run_cli("eval " + (dir_ / "config_dir").string() + " --n 2"),
               (dir_ / "config_dir" / "config.json").string() + ": is a directory, not the model's config.json", "config.json as a directory");
}

TEST_F(InputChecks, TrainResumeOfAnSftRunSaysWhatTheRunIs) {
  const std::string run = (dir_ / "sft").string();
  const CliResult sft = run_cli("sft " + std::string(RLCPP_SOURCE_DIR) + "/configs/sft_add3.json --set steps=1 "
                                "--set eval_size=5 --set eval_every=0 --set run_dir=" + run);
  ASSERT_EQ(sft.status, 0) << sft.output;
  expect_error(run_cli("train --resume " + run), "is the run of `rlcpp sft` or `rlcpp dpo`", "resume of an sft run");
  const std::string missing = (dir_ / "nonexistent").string();
  expect_error(run_cli("train " + std::string(RLCPP_SOURCE_DIR) + "/configs/grpo_add3.json --set init_checkpoint=" +
                       missing + " --set run_dir=" + (dir_ / "x").string()),
               "config key 'init_checkpoint': '" + missing + "' is not a checkpoint directory", "no init checkpoint");
  EXPECT_FALSE(fs::exists(dir_ / "x"));
  fs::create_directory(dir_ / "pairs_dir");
  expect_error(run_cli("dpo " + std::string(RLCPP_SOURCE_DIR) + "/configs/dpo_pairs_example.json --set pairs=" +
                       (dir_ / "pairs_dir").string() + " --set run_dir=" + (dir_ / "d").string()),
               (dir_ / "pairs_dir").string() + ": is a directory, not a JSONL file of preference pairs", "pairs=DIR");
}

TEST_F(InputChecks, LedgerModelsAndDtypesAreNamed) {
  expect_error(run_cli("ledger tiny2"), "'tiny2' is neither a Hugging Face config.json (or a checkpoint directory "
               "holding one) nor a preset: unknown model preset 'tiny2'", "ledger tiny2");
  expect_error(run_cli("ledger tiny --dtype fp64 --measure"), "ledger --dtype: expected fp32, bf16, fp16 or int8, got "
               "'fp64'", "ledger --dtype fp64");
  const std::string bad = write("config.json", "{\"model_type\": \"llama\", \"hidden_size\": 100, "
                                               "\"num_attention_heads\": 3}");
  expect_error(run_cli("ledger " + bad), bad, "ledger of a config.json whose heads do not divide its width");
  const CliResult ok = run_cli("ledger " + (dir_ / "ckpt").string());
  EXPECT_EQ(ok.status, 0) << ok.output;
  EXPECT_NE(ok.output.find("parameters N = 742,528"), std::string::npos) << ok.output;
}

TEST_F(InputChecks, DevicesAreCheckedNamingTheKeyOrOption) {
  // A misspelt device is refused before any work; a GPU where there is none (CI, this CPU machine) is refused
  // naming the key and why, with nothing written.
  const std::string config = std::string(RLCPP_SOURCE_DIR) + "/configs/grpo_add3.json";
  const std::string run = (dir_ / "gpu_run").string();
  expect_error(run_cli("train " + config + " --set device=gpu --set run_dir=" + run),
               "config key 'device': unknown device 'gpu' (expected cpu, cuda or cuda:N)", "device=gpu");
  expect_error(run_cli("train " + config + " --set rollout.device=cuda:x --set run_dir=" + run),
               "config key 'rollout.device': unknown device 'cuda:x'", "rollout.device=cuda:x");
  EXPECT_FALSE(fs::exists(run));
  const std::string ckpt = (dir_ / "ckpt").string();
  expect_error(run_cli("generate " + ckpt + " --prompt 1+2= --device tpu"), "generate --device: unknown device 'tpu'",
               "generate --device tpu");
  expect_error(run_cli("eval " + ckpt + " --n 5 --device cuda:"), "eval --device: unknown device 'cuda:'",
               "eval --device cuda:");
  expect_error(run_cli("bench train --device npu --no-peer"), "bench train --device: unknown device 'npu'",
               "bench train --device npu");
  expect_error(run_cli("bench train --dtype fp16 --no-peer"), "bench train --dtype: fp32 or bf16, got 'fp16'",
               "bench train --dtype fp16 on the CPU");
  expect_error(run_cli("bench train --peers pytorch-gpu"), "'pytorch-gpu' is not a peer of this bench",
               "the GPU peer on the CPU");
  expect_error(run_cli("bench step --device npu --no-peer"), "bench step --device: unknown device 'npu'",
               "bench step --device npu");
  expect_error(run_cli("bench step --dtype int4 --no-peer"), "bench step --dtype: fp32, bf16 or fp16, got 'int4'",
               "bench step --dtype int4");
  expect_error(run_cli("bench step --peers pytorch-gpu"), "'pytorch-gpu' is not a peer of this bench",
               "the GPU training peer in the step bench");
  std::string why;
  if (ExecContext::cuda_devices(&why) > 0) return;  // the rest is about a machine without a GPU
  expect_error(run_cli("generate " + ckpt + " --prompt 1+2= --device cuda"), "generate --device = 'cuda'",
               "generate --device cuda without a GPU");
  expect_error(run_cli("train " + config + " --set device=cuda --set run_dir=" + run), "config key 'device' = 'cuda'",
               "device=cuda without a GPU");
  expect_error(run_cli("train " + config + " --set rollout.device=cuda:1 --set run_dir=" + run),
               "config key 'rollout.device' = 'cuda:1'", "rollout.device=cuda:1 without a GPU");
  expect_error(run_cli("bench train --device cuda --dtype bf16 --no-peer"), "bench train --device = 'cuda'",
               "bench train --device cuda without a GPU");
  expect_error(run_cli("bench step --device cuda --dtype bf16"), "bench step --device = 'cuda'",
               "bench step --device cuda without a GPU");
  EXPECT_FALSE(fs::exists(run));  // refused before the run directory was made
}

// `rlcpp serve` refuses, before loading anything, to listen beyond loopback without a key, and bad limits.
TEST_F(InputChecks, ServeBeyondLoopbackNeedsAnApiKeyAndSaneLimits) {
  expect_error(run_cli("serve --preset tiny --host 0.0.0.0"), "serve --host 0.0.0.0: binding beyond loopback needs "
                                                               "--api-key", "serve on 0.0.0.0 without a key");
  expect_error(run_cli("serve --preset tiny --max-n 0"), "serve --max-n 0", "serve --max-n 0");
  expect_error(run_cli("serve --preset tiny --max-concurrency 0"), "serve --max-concurrency 0", "concurrency 0");
  expect_error(run_cli("serve --preset tiny --port 70000"), "serve --port 70000", "port out of range");
  expect_error(run_cli("serve"), "serve: give a checkpoint directory or --preset", "no model");
}

}  // namespace
}  // namespace rlcpp

namespace rlcpp {
namespace {

// The third sweep of bad inputs (issue 32): files that are not regular files or are too large, outputs onto
// inputs, writes that fail, resumes over bad run files, impossible records.

// `rlcpp ARGS` with a time limit: a command that waits on a FIFO fails the test instead of hanging it.
CliResult run_cli_bounded(const std::string& args) {
  return run_shell("timeout 30 " + std::string(RLCPP_BINARY_DIR) + "/rlcpp " + args);
}

// `train` of configs/grpo_add3.json cut to a few seconds: the tiny model at `init`, colocated, 4 prompts x 4.
std::string tiny_train(const std::string& init, const std::string& run_dir, const std::string& more) {
  return "train " + std::string(RLCPP_SOURCE_DIR) + "/configs/grpo_add3.json --set init_checkpoint=" + init +
         " --set warm_start.enabled=false --set rollout.placement=colocated --set rollout.prompts_per_step=4 "
         "--set rollout.group_size=4 --set filter_groups.enabled=false --set filter_groups.max_groups=4 "
         "--set ppo.mini_batch_size=16 --set ppo.micro_batch_size=16 --set eval_every=0 --set eval_size=1 --set run_dir=" + run_dir + " " + more;
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST_F(InputChecks, InputsThatAreNotRegularFilesOrTooLargeAreNamedNotRead) {
  const std::string ckpt = (dir_ / "ckpt").string();
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string is_fifo = fifo + ": is a FIFO (named pipe), not ";
  expect_error(run_cli_bounded("generate " + ckpt + " --prompts " + fifo), is_fifo + "a JSONL file of prompts",
               "--prompts FIFO");
  expect_error(run_cli_bounded("score " + ckpt + " --input " + fifo), is_fifo + "a JSONL file of sequences to score",
               "score --input FIFO");
  expect_error(run_cli_bounded("train " + fifo), is_fifo + "a JSON config file", "train CONFIG FIFO");
  expect_error(run_cli_bounded("eval " + ckpt + " --n 2 --task dataset --set path=" + fifo),
               is_fifo + "a JSONL dataset file", "task.path FIFO");
  const std::string sweep = write("sweep.json", "{\"base\": \"fifo\", \"points\": []}");
  expect_error(run_cli_bounded("mismatch " + sweep), is_fifo + "a JSON config file", "a sweep's base FIFO");
  // /dev/zero never ends: read, it grew until the process was killed.
  const fs::path zero = dir_ / "zero.json";
  fs::create_symlink("/dev/zero", zero);
  expect_error(run_cli_bounded("generate " + ckpt + " --prompt 1+2= --tokenizer " + zero.string()),
               zero.string() + " (a symbolic link to /dev/zero): is a character device, not a tokenizer.json",
               "tokenizer.json -> /dev/zero");
  fs::copy(dir_ / "ckpt", dir_ / "zero_config", fs::copy_options::recursive);
  fs::remove(dir_ / "zero_config" / "config.json");
  fs::create_symlink("/dev/zero", dir_ / "zero_config" / "config.json");
  expect_error(run_cli_bounded("eval " + (dir_ / "zero_config").string() + " --n 2"),
               "config.json (a symbolic link to /dev/zero): is a character device, not the model's config.json",
               "config.json -> /dev/zero");
  fs::copy(dir_ / "ckpt", dir_ / "fifo_index", fs::copy_options::recursive);
  fs::remove(dir_ / "fifo_index" / "model.safetensors");
  ASSERT_EQ(::mkfifo((dir_ / "fifo_index" / "model.safetensors.index.json").c_str(), 0600), 0);
  expect_error(run_cli_bounded("eval " + (dir_ / "fifo_index").string() + " --n 2"),
               "model.safetensors.index.json: is a FIFO (named pipe), not a safetensors index", "shard index FIFO");
  // Past the size limit of its kind (a sparse file: nothing is written to disk).
  const std::string huge = write("huge.json", "{}");
  fs::resize_file(huge, (64 << 20) + 1);
  expect_error(run_cli_bounded("train " + huge), huge + ": is 67108865 bytes, more than the 64 MiB allowed for a JSON "
               "config file", "a 64 MiB train config");
}

TEST_F(InputChecks, OutputsOntoOrInsideAnInputAreRefusedBeforeAnyWork) {
  fs::copy(dir_ / "ckpt", dir_ / "v", fs::copy_options::recursive);
  const fs::path v = dir_ / "v";
  const std::string weights = file_bytes(v / "model.safetensors"), config = file_bytes(v / "config.json");
  const std::string inside = "is inside the input directory '" + v.string() + "'";
  expect_error(run_cli("generate " + v.string() + " --prompt 1+2= --out " + (v / "model.safetensors").string()),
               "generate --out '" + (v / "model.safetensors").string() + "' " + inside, "generate --out CK/weights");
  const std::string in = write("in.jsonl", "{\"text\": \"1+2=3\"}\n");
  expect_error(run_cli("score " + v.string() + " --input " + in + " --out " + (v / "config.json").string()), inside,
               "score --out CK/config.json");
  // Spelt with ./ and .., or through a symbolic link, it is the same place.
  expect_error(run_cli("generate " + (dir_ / "." / "v").string() + "/ --prompt 1+2= --out " +
                       (dir_ / "v" / ".." / "v" / "new.jsonl").string()),
               "is inside the input directory", "generate --out CK/../CK/new.jsonl");
  fs::create_directory_symlink(v, dir_ / "link");
  expect_error(run_cli("generate " + v.string() + " --prompt 1+2= --out " + (dir_ / "link" / "config.json").string()),
               "is inside the input directory", "generate --out LINK/config.json");
  // A tokenizer's directory is an input too, and export never writes into the checkpoint it reads.
  fs::create_directory(dir_ / "tok");
  fs::copy_file(qwen3_fixture_dir() + "/tokenizer.json", dir_ / "tok" / "tokenizer.json");
  expect_error(run_cli("tokenize " + (dir_ / "tok").string() + " --input " + in + " --out " +
                       (dir_ / "tok" / "tokenizer.json").string()),
               "is inside the input directory '" + (dir_ / "tok").string() + "'", "tokenize --out TOK/tokenizer.json");
  expect_error(run_cli("export " + v.string() + " " + (v / "exported").string()),
               "export OUT '" + (v / "exported").string() + "' " + inside, "export CK CK/exported");
  EXPECT_FALSE(fs::exists(v / "exported"));
  EXPECT_FALSE(fs::exists(v / "new.jsonl"));
  EXPECT_TRUE(file_bytes(v / "model.safetensors") == weights) << "the checkpoint's weights were changed";
  EXPECT_TRUE(file_bytes(v / "config.json") == config) << "the checkpoint's config.json was changed";
  const CliResult ok = run_cli("generate " + v.string() + " --prompt 1+2= --out " + (dir_ / "out.jsonl").string());
  EXPECT_EQ(ok.status, 0) << ok.output;
}

TEST_F(InputChecks, AWriteThatFailsIsAnErrorNamingTheFile) {
  const std::string ckpt = (dir_ / "ckpt").string();
  const std::string in = write("in.jsonl", "{\"text\": \"1+2=3\"}\n");
  const std::string tok = qwen3_fixture_dir() + "/tokenizer.json";
  const std::string text = write("text.jsonl", "{\"text\": \"hello\"}\n");
  // Standard output on a full device; what the command prints on stderr comes back.
  const auto to_full = [](const std::string& args) {
    return run_shell("{ " + std::string(RLCPP_BINARY_DIR) + "/rlcpp " + args + " >/dev/full; }");
  };
  const std::string stdout_full = "writing standard output failed: No space left on device";
  const std::string file_full = "'/dev/full' failed: No space left on device";
  expect_error(to_full("generate " + ckpt + " --prompt 1+2="), stdout_full, "generate > /dev/full");
  expect_error(run_cli("generate " + ckpt + " --prompt 1+2= --out /dev/full"), file_full, "generate --out /dev/full");
  expect_error(to_full("score " + ckpt + " --input " + in), stdout_full, "score > /dev/full");
  expect_error(run_cli("score " + ckpt + " --input " + in + " --out /dev/full"), file_full, "score --out /dev/full");
  expect_error(to_full("tokenize " + tok + " --input " + text), stdout_full, "tokenize > /dev/full");
  expect_error(run_cli("tokenize " + tok + " --input " + text + " --out /dev/full"), file_full,
               "tokenize --out /dev/full");
  expect_error(to_full("config train"), stdout_full, "config > /dev/full");
  // A run's metrics on a full disk stop the run naming the file.
  fs::create_directory(dir_ / "run");
  fs::create_symlink("/dev/full", dir_ / "run" / "metrics.jsonl");
  expect_error(run_cli(tiny_train(ckpt, (dir_ / "run").string(), "--set steps=1 --set checkpoint_every=0")),
               "writing '" + (dir_ / "run" / "metrics.jsonl").string() + "' failed: No space left on device",
               "train with metrics.jsonl on a full disk");
}

// The largest resident set of any child this process has waited for, in bytes.
int64_t peak_child_rss_bytes() {
  rusage usage{};
  ::getrusage(RUSAGE_CHILDREN, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

TEST_F(InputChecks, ScoreStreamsItsInputWithMemoryThatDoesNotGrowWithItsLines) {
  const std::string ckpt = (dir_ / "ckpt").string();
  std::string many, tail;
  for (int i = 0; i < 4000; ++i) {
    const std::string line = "{\"text\": \"" + std::to_string(i % 1000) + "+" + std::to_string(i % 1000 * 7) + "=" +
                             std::to_string(i % 1000 * 8) + "\"}\n";
    many += line;
    if (i >= 3800) tail += line;
  }
  const std::string tail_out = (dir_ / "tail_out.jsonl").string(), many_out = (dir_ / "many_out.jsonl").string();
  const CliResult few = run_cli("score " + ckpt + " --input " + write("tail.jsonl", tail) + " --out " + tail_out);
  ASSERT_EQ(few.status, 0) << few.output;
  const int64_t rss_of_200 = peak_child_rss_bytes();
  const CliResult all = run_cli("score " + ckpt + " --input " + write("many.jsonl", many) + " --out " + many_out);
  ASSERT_EQ(all.status, 0) << all.output;
  // 4000 lines (60k tokens) in one forward took 1.4 GB, 1.15 GB more than 200 lines; in batches of 4096 tokens,
  // 80 MB more (allocator warm-up, flat from there: 100k lines take 340 MB).
  EXPECT_LT(peak_child_rss_bytes() - rss_of_200, int64_t{400} << 20) << "200 lines: " << rss_of_200 << " bytes";
  // Every line, in input order, scored as it is alone (the numerics are batch-invariant).
  const std::string scored = file_bytes(many_out);
  EXPECT_EQ(std::count(scored.begin(), scored.end(), '\n'), 4000);
  const std::string alone = file_bytes(tail_out);
  ASSERT_GE(scored.size(), alone.size());
  EXPECT_EQ(scored.substr(scored.size() - alone.size()), alone);
}

TEST_F(InputChecks, AnEmptyPromptIsAPromptAndAMissingCharacterIsNamedWhole) {
  const std::string ckpt = (dir_ / "ckpt").string();
  const std::string one = (dir_ / "one.jsonl").string(), file = (dir_ / "file.jsonl").string();
  const CliResult empty = run_cli("generate " + ckpt + " --prompt '' --out " + one);
  ASSERT_EQ(empty.status, 0) << empty.output;
  const CliResult from_file =
      run_cli("generate " + ckpt + " --prompts " + write("empty.jsonl", "{\"prompt\": \"\"}\n") + " --out " + file);
  ASSERT_EQ(from_file.status, 0) << from_file.output;
  const Json a = Json::parse(file_bytes(one)), b = Json::parse(file_bytes(file));
  EXPECT_EQ(a["tokens"], b["tokens"]);
  EXPECT_EQ(a["logprobs"], b["logprobs"]);
  expect_error(run_cli("generate " + ckpt + " --prompt '1+\u00e9='"), "character '\u00e9' (U+00E9) at byte 2",
               "a character outside the charset");
}

TEST_F(InputChecks, ResumeNamesARecordFileThatIsNotOneAndIgnoresCheckpointsNamedNoStep) {
  const std::string run = (dir_ / "run").string();
  const fs::path checkpoints = dir_ / "run" / "checkpoints";
  const CliResult trained = run_cli(tiny_train((dir_ / "ckpt").string(), run,
                                              "--set steps=2 --set checkpoint_every=1 --set checkpoint_keep_last=5"));
  ASSERT_EQ(trained.status, 0) << trained.output;
  // Step 2 again from step 1, beside folders whose names are no step number: they are not checkpoints (the
  // resume, and the pruning after its checkpoint, pass them by).
  fs::remove_all(checkpoints / "step_2");
  for (const char* name : {"step_99999999999999999999", "step_x", "step_-1"})
    fs::copy(checkpoints / "step_1", checkpoints / name, fs::copy_options::recursive);
  const CliResult resumed = run_cli("train --resume " + run);
  EXPECT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("from " + (checkpoints / "step_1").string()), std::string::npos) << resumed.output;
  EXPECT_TRUE(fs::exists(checkpoints / "step_2"));
  // A record file replaced by a directory is named, not "unexpected error: basic_filebuf::underflow".
  for (const char* name : {"metrics.jsonl", "samples.jsonl"}) {
    const fs::path records = dir_ / "run" / name;
    fs::rename(records, dir_ / "kept");
    fs::create_directory(records);
    const CliResult r = run_cli("train --resume " + run);
    expect_error(r, records.string() + ": is a directory, not a run's JSONL record file", name);
    EXPECT_EQ(r.output.find("unexpected error"), std::string::npos) << r.output;
    fs::remove(records);
    fs::rename(dir_ / "kept", records);
  }
}

}  // namespace
}  // namespace rlcpp
