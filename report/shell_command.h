// Running a helper program from a run (the plotting scripts of `rlcpp report` and `rlcpp mismatch`).
#pragma once

#include <string>
#include <utility>

namespace rlcpp {

// `s` single-quoted for /bin/sh.
std::string shell_quote(const std::string& s);

// Runs `command` with /bin/sh, returning its exit status (128 + signal when killed) and what it printed
// (stdout and stderr together). Throws when it cannot be started.
std::pair<int, std::string> run_command(const std::string& command);

}  // namespace rlcpp
