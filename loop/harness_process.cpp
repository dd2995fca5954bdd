#include "loop/harness_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <thread>

#include "core/error.h"
#include "core/metrics.h"
#include "loop/worker_process.h"

extern char** environ;

namespace rlcpp {

namespace {

// This process's environment with `extra` set over it, as execve takes it (built before fork: the child of a
// threaded process may only call async-signal-safe functions).
std::vector<std::string> child_environment(const std::vector<std::pair<std::string, std::string>>& extra) {
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) vars[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [k, v] : extra) vars[k] = v;
  std::vector<std::string> out;
  for (const auto& [k, v] : vars) out.push_back(k + "=" + v);
  return out;
}

// Blocks SIGPIPE in this thread while it lives (a harness that closes its stdin early must not end the run);
// a SIGPIPE raised meanwhile is consumed.
class NoSigpipe {
 public:
  NoSigpipe() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~NoSigpipe() {
    const timespec zero{0, 0};
    while (sigtimedwait(&pipe_, nullptr, &zero) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t pipe_, old_;
};

}  // namespace

HarnessExit run_harness_command(const std::string& command, const std::vector<std::pair<std::string, std::string>>& env,
                                const std::string& stdin_text, double timeout_s) {
  const std::vector<std::string> env_strings = child_environment(env);
  std::vector<char*> envp;
  for (const std::string& s : env_strings) envp.push_back(const_cast<char*>(s.c_str()));
  envp.push_back(nullptr);
  const char* argv[] = {"sh", "-c", command.c_str(), nullptr};

  int in[2], out[2];
  RLCPP_CHECK(pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0,
              "agent.harness: cannot make pipes: " << std::strerror(errno));
  const NoSigpipe no_sigpipe;
  const Stopwatch clock;
  const pid_t pid = fork();
  RLCPP_CHECK(pid >= 0, "agent.harness: cannot fork: " << std::strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    close_range(3, ~0U, 0);  // the server's sockets and the run's files stay the run's
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execve("/bin/sh", const_cast<char* const*>(argv), envp.data());
    _exit(127);
  }
  setpgid(pid, pid);  // also here: the group exists before a kill could need it
  close(in[0]);
  close(out[1]);
  int to_child = in[1];
  fcntl(to_child, F_SETFL, O_NONBLOCK);
  size_t written = 0;
  if (stdin_text.empty()) {
    close(to_child);
    to_child = -1;
  }

  HarnessExit r;
  char buffer[1 << 16];
  bool open = true;
  while (open) {
    const double left_s = timeout_s - clock.seconds();
    if (left_s <= 0) {
      r.timed_out = true;
      break;
    }
    pollfd fds[2] = {{out[0], POLLIN, 0}, {to_child, POLLOUT, 0}};
    const int n = poll(fds, to_child >= 0 ? 2 : 1, static_cast<int>(std::min(left_s * 1000 + 1, 1000.0)));
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      const ssize_t got = read(out[0], buffer, sizeof buffer);
      if (got > 0)
        r.stdout_text.append(buffer, static_cast<size_t>(got));
      else if (got == 0 || (errno != EINTR && errno != EAGAIN))
        open = false;
    }
    if (to_child >= 0 && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t put = write(to_child, stdin_text.data() + written, stdin_text.size() - written);
      if (put > 0) written += static_cast<size_t>(put);
      if ((put < 0 && errno != EAGAIN && errno != EINTR) || written == stdin_text.size()) {
        close(to_child);  // all of it sent, or the harness stopped reading: it sees the end of its input
        to_child = -1;
      }
    }
  }
  if (to_child >= 0) close(to_child);
  close(out[0]);
  // Its stdout closed (or the deadline passed): it exits, or is made to.
  int status = 0;
  while (true) {
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) break;
    if (clock.seconds() >= timeout_s) {
      r.timed_out = true;
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (r.timed_out) kill(-pid, SIGKILL);  // what it started goes with it
  r.wall_s = clock.seconds();
  r.ok = !r.timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  r.how = r.timed_out ? "timed out after " + std::to_string(static_cast<int64_t>(timeout_s)) + " s"
                      : describe_exit_status(status);
  return r;
}

}  // namespace rlcpp
