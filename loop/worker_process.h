// A child `rlcpp worker` process for the split placement: spawned with a checkpoint, a request endpoint and a
// weight-sync endpoint (both ipc:// in the run directory), waited for until it prints its "listening" line,
// and on destruction asked to stop (SIGTERM) and reaped.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace rlcpp {

class WorkerProcess {
 public:
  // `binary` is the rlcpp executable; `args` follow "worker". Throws with the worker's output when it exits
  // or stays silent for `startup_timeout_s` before listening.
  WorkerProcess(const std::string& binary, const std::vector<std::string>& args, double startup_timeout_s = 60);
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  const std::string& endpoint() const { return endpoint_; }
  const std::string& weights_endpoint() const { return weights_endpoint_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string endpoint_, weights_endpoint_;
};

// The running executable (/proc/self/exe), the default worker binary.
std::string current_executable();

}  // namespace rlcpp
