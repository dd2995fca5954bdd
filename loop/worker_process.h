// A child `rlcpp worker` process for the split placement: spawned with a checkpoint, a request endpoint and a
// weight-sync endpoint (both ipc:// in the run directory), waited for until it prints its "listening" line,
// and on destruction asked to stop (SIGTERM, SIGKILL after a grace period) and reaped. The fault handling of
// the split placement asks it whether the child still runs (waitpid WNOHANG) and kills a hung one.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace rlcpp {

class WorkerProcess {
 public:
  // `binary` is the rlcpp executable; `args` follow "worker". Throws when the worker cannot start: with the
  // error it reports (its {"event": "error", "message"} line), or with its output when it exits or stays silent
  // for `startup_timeout_s` before listening; either way with how it ended.
  WorkerProcess(const std::string& binary, const std::vector<std::string>& args, double startup_timeout_s = 60);
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  const std::string& endpoint() const { return endpoint_; }
  const std::string& weights_endpoint() const { return weights_endpoint_; }
  pid_t pid() const { return pid_; }

  // "" while the child runs; once it has ended (reaped here, without blocking) how: "exited with status 1",
  // "was killed by signal 9 (Killed)". Stays set after that.
  std::string exit_reason();
  // Ends the child now, SIGKILL (which also ends a stopped one), and reaps it; nothing when already reaped.
  void kill_now();

 private:
  void reaped(int status);
  // Ends a child that failed to start (waits up to exit_wait_s for it to exit, then SIGKILL), reaps it and
  // throws `what` and how it ended.
  [[noreturn]] void fail_startup(const std::string& what, double exit_wait_s);

  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string endpoint_, weights_endpoint_;
  std::string exit_reason_;
};

// How a waitpid status ended a process, in words.
std::string describe_exit_status(int status);

// The running executable (/proc/self/exe), the default worker binary.
std::string current_executable();

}  // namespace rlcpp
