// The user's agent harness as a child process (loop/harness_rollout.h): a shell command run in its own process
// group with extra environment variables, its stdin fed by the run, its stdout read by the run, its stderr the
// run's own (the harness's logs show beside the step lines); killed with its whole group when it outlives its
// deadline or the run no longer needs it.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "core/metrics.h"

namespace rlcpp {

// A running harness. Input queued with send() goes out as the harness reads it (pump), never blocking the run on a
// harness that reads slowly; its stdout comes back through pump() as whole lines or as one text.
class HarnessChild {
 public:
  // Starts `/bin/sh -c command` with `env` added to this process's environment; throws when it cannot.
  HarnessChild(const std::string& command, const std::vector<std::pair<std::string, std::string>>& env);
  ~HarnessChild();  // a harness still running is killed, with what it started
  HarnessChild(const HarnessChild&) = delete;
  HarnessChild& operator=(const HarnessChild&) = delete;

  void send(const std::string& text);
  // Its stdin ends once what is queued has gone out (a per-draw harness then finishes its draw; a run's harness
  // its run).
  void close_input();
  // Sends queued input and reads its stdout for up to `timeout_s` (returning early once something was read);
  // false once its stdout has closed.
  bool pump(double timeout_s);
  // The whole lines read so far, taken (without their newlines); and everything read so far, taken.
  std::vector<std::string> take_lines();
  std::string take_output();
  // Whether it has exited (reaped here); its status then in `how()`.
  bool exited();
  // Waits up to `timeout_s` for it to exit, then kills its group; returns whether it exited by itself.
  bool finish(double timeout_s);
  bool ok() const { return exited_ && exit_ok_; }  // exited with status 0
  // "exited with status 1", "was killed by signal 9 (Killed)", "is running".
  const std::string& how() const { return how_; }
  double seconds() const { return clock_.seconds(); }

 private:
  void close_stdin();
  void reap(int status);

  pid_t pid_ = -1;
  int to_child_ = -1, from_child_ = -1;
  std::string queued_;   // input not yet written
  bool close_after_queued_ = false;
  std::string read_;     // output not yet taken
  bool exited_ = false, exit_ok_ = false;
  std::string how_ = "is running";
  Stopwatch clock_;
};

struct HarnessExit {
  std::string stdout_text;
  bool ok = false;       // exited with status 0
  bool timed_out = false;
  std::string how;       // "exited with status 1", "was killed by signal 9 (Killed)", "timed out after 600 s"
  double wall_s = 0;
};

// Runs `command` to its end: `stdin_text` its whole input, its stdout collected; killed past `timeout_s`.
HarnessExit run_harness_command(const std::string& command, const std::vector<std::pair<std::string, std::string>>& env,
                                const std::string& stdin_text, double timeout_s);

}  // namespace rlcpp
