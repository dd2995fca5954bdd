// The run directory of docs/architecture.md: runs/NAME/{config.json, metrics.jsonl, samples.jsonl,
// checkpoints/step_N/}.
#pragma once

#include <memory>
#include <string>

#include "core/config.h"

namespace rlcpp {

// A process's exclusive hold on a run directory: RUN_DIR/run.lock, locked with flock(2) for as long as the
// object lives (the kernel releases it when the process dies, however it dies) and holding the owner's pid.
class RunLock;

class RunDir {
 public:
  // A new run at `path`; when `path` already holds a run (config.json), or another process holds it, the
  // first free `path-2`, `path-3`, ... is used instead, so nothing saved is ever overwritten. The returned
  // RunDir holds the directory's lock.
  static RunDir create_fresh(const std::string& path);
  // create_fresh, then saves the resolved config with its "run_dir" set to the directory actually used.
  static RunDir create_with_config(const std::string& path, const Json& resolved_config);
  // An existing run, for reading (rlcpp report, the ledger): no lock.
  static RunDir open_existing(const std::string& path);
  // An existing run, to resume: takes the lock, or fails naming the process that holds it.
  static RunDir open_to_resume(const std::string& path);

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  std::string checkpoint_dir(int64_t step) const;
  // Newest complete checkpoint directory, or "" when there is none.
  std::string latest_checkpoint() const;
  void write_config(const Json& resolved) const;

 private:
  explicit RunDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
  std::shared_ptr<RunLock> lock_;
};

}  // namespace rlcpp
