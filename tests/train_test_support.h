// What the RL-loop tests share: a small init checkpoint and reading a run's JSONL files.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/config.h"
#include "model/checkpoint.h"
#include "model/init.h"

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

inline std::vector<Json> read_jsonl(const std::filesystem::path& path) {
  std::vector<Json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(Json::parse(line));
  return out;
}

}  // namespace rlcpp
