// A Python example server (scripts/reward_server_example.py, scripts/env_server_example.py) as a child process
// bound to a free port, for the tests of the remote reward and the remote environment.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"

namespace rlcpp {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A Python that imports zmq: /usr/bin/python3 (python3-zmq), else the shared venv's ($RLCPP_VENV/bin/python);
// "" when neither does.
inline std::string python_with_zmq() {
  const auto has_zmq = [](const std::string& python) {
    return std::system(("'" + python + "' -c 'import zmq' >/dev/null 2>&1").c_str()) == 0;
  };
  if (has_zmq("/usr/bin/python3")) return "/usr/bin/python3";
  const char* venv = std::getenv("RLCPP_VENV");
  if (venv != nullptr && has_zmq(std::string(venv) + "/bin/python")) return std::string(venv) + "/bin/python";
  return "";
}

inline bool python_has_zmq() { return !python_with_zmq().empty(); }

// The server `script` (under scripts/) with `flags`; the destructor kills it.
class ServerProcess {
 public:
  ServerProcess(const std::string& script, const std::vector<std::string>& flags) {
    int fds[2];
    if (pipe(fds) != 0) throw Error("pipe failed");
    std::vector<std::string> args = {python_with_zmq(), RLCPP_SOURCE_DIR "/scripts/" + script, "--endpoint",
                                     "tcp://127.0.0.1:*"};
    args.insert(args.end(), flags.begin(), flags.end());
    // Built before fork: the child of a threaded process (ZeroMQ's) may only make async-signal-safe calls.
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);
      close(fds[0]);
      close(fds[1]);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(fds[1]);
    // The server prints "READY tcp://127.0.0.1:PORT" once bound.
    std::string line;
    auto start = Clock::now();
    while (line.find('\n') == std::string::npos && seconds_since(start) < 10.0) {
      pollfd p{fds[0], POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char buf[256];
      ssize_t got = read(fds[0], buf, sizeof buf);
      if (got <= 0) break;
      line.append(buf, got);
    }
    close(fds[0]);
    if (line.rfind("READY ", 0) != 0 || line.find('\n') == std::string::npos) {
      stop();
      throw Error(script + " did not start; it printed \"" + line + "\"");
    }
    endpoint_ = line.substr(6, line.find('\n') - 6);
  }
  ~ServerProcess() { stop(); }
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  const std::string& endpoint() const { return endpoint_; }

 private:
  pid_t pid_ = -1;
  std::string endpoint_;
};

}  // namespace rlcpp
