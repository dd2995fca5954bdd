#include "loop/run_dir.h"

#include <filesystem>

#include "core/error.h"

namespace rlcpp {

namespace fs = std::filesystem;

RunDir RunDir::create_fresh(const std::string& path) {
  RLCPP_CHECK(!path.empty(), "run directory: empty path");
  std::string chosen = path;
  for (int i = 2; fs::exists(fs::path(chosen) / "config.json"); ++i) chosen = path + "-" + std::to_string(i);
  std::error_code ec;
  fs::create_directories(fs::path(chosen) / "checkpoints", ec);
  RLCPP_CHECK(!ec, "cannot create run directory '" << chosen << "': " << ec.message());
  return RunDir(chosen);
}

RunDir RunDir::create_with_config(const std::string& path, const Json& resolved_config) {
  RunDir run = create_fresh(path);
  Json resolved = resolved_config;
  resolved["run_dir"] = run.path();
  run.write_config(resolved);
  return run;
}

RunDir RunDir::open_existing(const std::string& path) {
  RLCPP_CHECK(fs::exists(fs::path(path) / "config.json"),
              "'" << path << "' is not a run directory (it has no config.json)");
  return RunDir(path);
}

std::string RunDir::checkpoint_dir(int64_t step) const {
  return path_ + "/checkpoints/step_" + std::to_string(step);
}

std::string RunDir::latest_checkpoint() const {
  int64_t best = -1;
  std::string best_path;
  for (const auto& entry : fs::directory_iterator(fs::path(path_) / "checkpoints")) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || name.rfind("step_", 0) != 0) continue;
    if (!fs::exists(entry.path() / "model.safetensors") || !fs::exists(entry.path() / "config.json")) continue;
    try {
      size_t used = 0;
      int64_t step = std::stoll(name.substr(5), &used);
      if (used != name.size() - 5) continue;  // step_12.tmp-... is an unfinished write
      if (step > best) best = step, best_path = entry.path().string();
    } catch (const std::exception&) {
    }
  }
  return best_path;
}

void RunDir::write_config(const Json& resolved) const { write_json_file_atomic(file("config.json"), resolved); }

}  // namespace rlcpp
