// What the RL-loop tests share: a small init checkpoint (random, or after a short SFT), reading a run's JSONL
// files and comparing its checkpoints.
#pragma once

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/config.h"
#include "loop/sft_run.h"
#include "loop/train_config.h"
#include "model/checkpoint.h"
#include "model/init.h"
#include "tests/python_env.h"

namespace rlcpp {

// A 2-layer, 64-wide model (seed 5) saved at `dir`, replacing what was there; returns the path.
inline std::string small_train_checkpoint(const std::filesystem::path& dir) {
  ModelConfig mc = model_preset("tiny");
  mc.num_hidden_layers = 2;
  mc.hidden_size = 64;
  mc.num_attention_heads = 4;
  mc.num_key_value_heads = 2;
  mc.intermediate_size = 176;
  std::filesystem::remove_all(dir);
  save_model_checkpoint(dir.string(), init_random(mc, 5));
  return dir.string();
}

// A short GRPO run of small_train_checkpoint's model at `init`, colocated: 8 prompts x 8 per step, two
// mini-batches of 32, lr 3e-3, `steps` steps, evaluated on 10 problems at the end only.
inline TrainConfig small_grpo_run(const std::string& init, int64_t steps) {
  TrainConfig c;
  c.init_checkpoint = init;
  c.rollout.placement = "colocated";
  c.rollout.prompts_per_step = 8;
  c.rollout.group_size = 8;
  c.ppo.mini_batch_size = 32;
  c.ppo.micro_batch_size = 32;
  c.optim.lr = 3e-3;
  c.steps = steps;
  c.eval_every = 0;
  c.eval_size = 10;
  return c;
}

// small_train_checkpoint's model (at dir/init) after `steps` seeded SFT steps on `task` (batch 64, lr 3e-3),
// so that an RL run starts with a reward signal (well-formed answers, some right). Returns its final checkpoint.
inline std::string small_sft_checkpoint(const std::filesystem::path& dir, const TaskConfig& task, int64_t steps,
                                        int64_t eval_size = 100) {
  std::filesystem::remove_all(dir);
  SftConfig c;
  c.run_dir = (dir / "sft").string();
  c.init_checkpoint = small_train_checkpoint(dir / "init");
  c.task = task;
  c.steps = steps;
  c.batch_size = 64;
  c.micro_batch_size = 64;
  c.optim.lr = 3e-3;
  c.optim.schedule = "linear_warmup";
  c.optim.warmup_steps = 20;
  c.eval_every = 0;
  c.eval_size = eval_size;
  c.log_every = 1000;
  return run_sft(c, config_to_json(c)).checkpoint;
}

inline std::vector<Json> read_jsonl(const std::filesystem::path& path) {
  std::vector<Json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(Json::parse(line));
  return out;
}

// The whole (newline-ended) lines of a JSONL file that a running process may be writing: a poll for "step N is
// logged" that parses the file can meet a half-written line (0 when there is no file yet).
inline size_t complete_lines(const std::filesystem::path& path) {
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

// Whether two checkpoints hold the same weights, bit for bit.
inline bool same_weights(const std::string& a, const std::string& b) {
  const ParameterStore wa = load_model_checkpoint(a);
  const ParameterStore wb = load_model_checkpoint(b);
  return wa.numel() == wb.numel() &&
         std::memcmp(wa.flat().data<float>(), wb.flat().data<float>(), wa.flat().nbytes()) == 0;
}

// metrics.jsonl keys that differ between two runs of the same computation: wall-clock figures, checkpoint
// paths, the engine's step counts and forward time (per worker), the process's memory and the layout it ran on
// (workers, threads, cores).
// Harness mode (agent.env "http"): scripts/agent_harness_example.py with `args` (in the test venv) plays the
// episodes, turns of up to 6 tokens.
inline void use_example_harness(TrainConfig& c, const std::string& args) {
  c.agent.env = "http";
  c.agent.max_turn_tokens = 6;
  c.agent.harness = "'" + venv_python() + "' '" + std::string(RLCPP_SOURCE_DIR) + "/scripts/agent_harness_example.py' " + args;
  c.rollout.sampling.max_new_tokens = 6;
}

inline bool run_dependent_key(const std::string& key) {
  return key.rfind("timing", 0) == 0 || key == "elapsed_s" || key.rfind("tokens_per_s/", 0) == 0 ||
         key == "checkpoint" || key.rfind("engine/", 0) == 0 || key.rfind("memory/", 0) == 0 ||
         key.rfind("layout/", 0) == 0 || key == "agent/env_s";
}

}  // namespace rlcpp
