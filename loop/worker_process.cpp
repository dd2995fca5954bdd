#include "loop/worker_process.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "core/config.h"
#include "core/error.h"

extern char** environ;

namespace rlcpp {

std::string current_executable() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

WorkerProcess::WorkerProcess(const std::string& binary, const std::vector<std::string>& args,
                             double startup_timeout_s) {
  int pipe_fds[2];
  RLCPP_CHECK(pipe(pipe_fds) == 0, "worker: pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  std::vector<std::string> argv_text = {binary, "worker"};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int rc = posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  stdout_fd_ = pipe_fds[0];
  RLCPP_CHECK(rc == 0, "worker: cannot start '" << binary << "' (posix_spawn error " << rc << ")");

  // Read lines until the JSON "listening" line.
  std::string output;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(startup_timeout_s);
  while (true) {
    const size_t nl = output.find('\n');
    if (nl != std::string::npos) {
      const std::string line = output.substr(0, nl);
      output.erase(0, nl + 1);
      Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_object() && j.value("event", std::string()) == "listening") {
        endpoint_ = j.value("endpoint", std::string());
        weights_endpoint_ = j.value("weights_endpoint", std::string());
        return;
      }
      continue;
    }
    const double left =
        std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    pollfd p{stdout_fd_, POLLIN, 0};
    char buf[4096];
    ssize_t n = 0;
    if (left > 0 && poll(&p, 1, static_cast<int>(left * 1000) + 1) > 0) n = read(stdout_fd_, buf, sizeof buf);
    if (n <= 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
      RLCPP_FAIL("worker '" << binary << "' did not start listening within " << startup_timeout_s
                            << " s (exited or silent); its output: " << output);
    }
    output.append(buf, static_cast<size_t>(n));
  }
}

WorkerProcess::~WorkerProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);  // a worker ends cleanly on SIGTERM between requests
    waitpid(pid_, nullptr, 0);
  }
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

}  // namespace rlcpp
