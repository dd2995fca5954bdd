#include "loop/worker_process.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "core/config.h"
#include "core/error.h"
#include "core/json_input.h"

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
  // The worker starts in a process group of its own, so that a Ctrl-C at the terminal reaches the trainer alone:
  // the trainer finishes its step with the workers and then stops them (they also end with it, --exit-with-parent).
  // It starts with no signal blocked and SIGINT/SIGTERM at their defaults, whatever the trainer has blocked
  // (core/stop_signals.h).
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, stop_signals;
  sigemptyset(&none);
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &stop_signals);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  const int rc = posix_spawn(&pid_, binary.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  stdout_fd_ = pipe_fds[0];
  RLCPP_CHECK(rc == 0, "worker: cannot start '" << binary << "' (posix_spawn error " << rc << ")");

  // Read lines until the JSON "listening" (or "connected") line. A worker that cannot serve prints an "error" line instead and
  // exits; one that ends its output (exits) or stays silent is reported as such, with what it printed.
  std::string output, printed;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(startup_timeout_s);
  while (true) {
    const size_t nl = output.find('\n');
    if (nl != std::string::npos) {
      const std::string line = output.substr(0, nl);
      output.erase(0, nl + 1);
      Json j = parse_json_limited(line, /*allow_exceptions=*/false);
      const std::string event = j.is_object() ? j.value("event", std::string()) : std::string();
      if (event == "listening" || event == "connected") {  // bound, or (--connect) connected to a trainer
        endpoint_ = j.value("endpoint", std::string());
        weights_endpoint_ = j.value("weights_endpoint", std::string());
        return;
      }
      if (event == "error")
        fail_startup("worker '" + binary + "' could not start: " + j.value("message", std::string("(no message)")),
                     /*exit_wait_s=*/5);
      printed += line + "\n";
      continue;
    }
    const double left =
        std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    pollfd p{stdout_fd_, POLLIN, 0};
    char buf[4096];
    ssize_t n = -1;  // stays -1 when nothing arrived before the deadline
    if (left > 0) {
      const int ready = poll(&p, 1, static_cast<int>(left * 1000) + 1);
      if (ready < 0 && errno == EINTR) continue;
      if (ready > 0) n = read(stdout_fd_, buf, sizeof buf);
    }
    if (n == 0)  // end of its output: it exited (or closed stdout) before listening
      fail_startup("worker '" + binary + "' stopped before listening; its output: " + printed + output,
                   /*exit_wait_s=*/5);
    if (n < 0) {
      std::ostringstream what;
      what << "worker '" << binary << "' did not start listening within " << startup_timeout_s
           << " s; its output: " << printed << output;
      fail_startup(what.str(), /*exit_wait_s=*/0);
    }
    output.append(buf, static_cast<size_t>(n));
  }
}

void WorkerProcess::fail_startup(const std::string& what, double exit_wait_s) {
  // A worker that reported a failure is on its way out: give it `exit_wait_s` to say how it ended, then
  // SIGKILL, since one stuck before its serve loop reads no SIGTERM.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(exit_wait_s);
  int status = 0;
  pid_t waited = waitpid(pid_, &status, WNOHANG);
  while (waited == 0 && std::chrono::steady_clock::now() < deadline) {
    usleep(10000);
    waited = waitpid(pid_, &status, WNOHANG);
  }
  std::string ended;
  if (waited == pid_) {
    ended = describe_exit_status(status);
  } else {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    ended = "still ran and was killed (SIGKILL)";
  }
  pid_ = -1;
  close(stdout_fd_);  // no destructor runs for a constructor that throws
  stdout_fd_ = -1;
  RLCPP_FAIL(what << " (the worker " << ended << ")");
}

std::string describe_exit_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + (name ? std::string(" (") + name + ")" : "");
  }
  return "ended with wait status " + std::to_string(status);
}

void WorkerProcess::reaped(int status) {
  pid_ = -1;
  exit_reason_ = describe_exit_status(status);
}

std::string WorkerProcess::exit_reason() {
  if (pid_ > 0) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) reaped(status);
  }
  return exit_reason_;
}

void WorkerProcess::kill_now() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  if (waitpid(pid_, &status, 0) == pid_) reaped(status);
  pid_ = -1;
}

WorkerProcess::~WorkerProcess() {
  if (pid_ > 0) {
    // A worker ends cleanly on SIGTERM between requests; SIGCONT lets a stopped one see it. One that has not
    // ended after the grace period (hung) is killed, so the trainer never waits on it forever.
    kill(pid_, SIGTERM);
    kill(pid_, SIGCONT);
    constexpr double kGraceSeconds = 10;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kGraceSeconds);
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill_now();
        break;
      }
      usleep(10000);
    }
  }
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

}  // namespace rlcpp
