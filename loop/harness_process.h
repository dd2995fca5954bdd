// The user's agent harness as a child process (loop/harness_rollout.h): a shell command run with extra
// environment variables, fed a text on stdin, its stdout collected, its stderr the run's own (the harness's logs
// show beside the step lines); killed with its whole process group when it outlives its deadline.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace rlcpp {

struct HarnessExit {
  std::string stdout_text;
  bool ok = false;       // exited with status 0
  bool timed_out = false;
  std::string how;       // "exited with status 1", "was killed by signal 9 (Killed)", "timed out after 600 s"
  double wall_s = 0;
};

// Runs `/bin/sh -c command` in its own process group with `env` added to this process's environment; throws when
// it cannot be started.
HarnessExit run_harness_command(const std::string& command, const std::vector<std::pair<std::string, std::string>>& env,
                                const std::string& stdin_text, double timeout_s);

}  // namespace rlcpp
