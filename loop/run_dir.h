// The run directory of DESIGN.md: runs/NAME/{config.json, metrics.jsonl, samples.jsonl, checkpoints/step_N/}.
#pragma once

#include <string>

#include "core/config.h"

namespace rlcpp {

class RunDir {
 public:
  // Creates `path`. Refuses an existing directory that already holds a run (config.json), so nothing saved
  // is overwritten, unless `allow_existing` (resume).
  RunDir(const std::string& path, bool allow_existing);

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  std::string checkpoint_dir(int64_t step) const;
  // Newest complete checkpoint directory, or "" when there is none.
  std::string latest_checkpoint() const;
  void write_config(const Json& resolved) const;

 private:
  std::string path_;
};

}  // namespace rlcpp
