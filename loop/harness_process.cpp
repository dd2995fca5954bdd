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

HarnessChild::HarnessChild(const std::string& command, const std::vector<std::pair<std::string, std::string>>& env) {
  const std::vector<std::string> env_strings = child_environment(env);
  std::vector<char*> envp;
  for (const std::string& s : env_strings) envp.push_back(const_cast<char*>(s.c_str()));
  envp.push_back(nullptr);
  const char* argv[] = {"sh", "-c", command.c_str(), nullptr};

  int in[2], out[2];
  RLCPP_CHECK(pipe2(in, O_CLOEXEC) == 0, "agent.harness: cannot make pipes: " << std::strerror(errno));
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    RLCPP_FAIL("agent.harness: cannot make pipes: " << std::strerror(errno));
  }
  pid_ = fork();
  if (pid_ == 0) {
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
  close(in[0]);
  close(out[1]);
  if (pid_ < 0) {
    close(in[1]);
    close(out[0]);
    RLCPP_FAIL("agent.harness: cannot fork: " << std::strerror(errno));
  }
  setpgid(pid_, pid_);  // also here: the group exists before a kill could need it
  to_child_ = in[1];
  from_child_ = out[0];
  fcntl(to_child_, F_SETFL, O_NONBLOCK);
}

HarnessChild::~HarnessChild() {
  close_stdin();
  if (from_child_ >= 0) close(from_child_);
  if (!exited_) {
    kill(-pid_, SIGKILL);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

void HarnessChild::close_stdin() {
  if (to_child_ >= 0) close(to_child_);
  to_child_ = -1;
  queued_.clear();
}

void HarnessChild::send(const std::string& text) {
  RLCPP_CHECK(!close_after_queued_, "agent.harness: input sent after its end");
  if (to_child_ >= 0) queued_ += text;  // else it stopped reading: what it would not take is dropped
}

void HarnessChild::close_input() {
  close_after_queued_ = true;
  if (queued_.empty()) close_stdin();
}

bool HarnessChild::pump(double timeout_s) {
  if (from_child_ < 0) return false;
  const NoSigpipe no_sigpipe;
  const Stopwatch clock;
  char buffer[1 << 16];
  while (true) {
    const double left_s = timeout_s - clock.seconds();
    const bool writing = to_child_ >= 0 && !queued_.empty();
    pollfd fds[2] = {{from_child_, POLLIN, 0}, {to_child_, POLLOUT, 0}};
    const int n = poll(fds, writing ? 2 : 1, static_cast<int>(std::clamp(left_s * 1000 + 1, 0.0, 1000.0)));
    if (n < 0 && errno != EINTR) return true;
    bool got_output = false;
    if (n > 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
      const ssize_t got = read(from_child_, buffer, sizeof buffer);
      if (got > 0) {
        read_.append(buffer, static_cast<size_t>(got));
        got_output = true;
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        close(from_child_);
        from_child_ = -1;
        return false;
      }
    }
    if (n > 0 && writing && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t put = write(to_child_, queued_.data(), queued_.size());
      if (put > 0) queued_.erase(0, static_cast<size_t>(put));
      if (put < 0 && errno != EAGAIN && errno != EINTR) close_stdin();  // it stopped reading
    }
    if (to_child_ >= 0 && queued_.empty() && close_after_queued_) close_stdin();  // it sees the end of its input
    if (got_output || clock.seconds() >= timeout_s) return true;
  }
}

std::vector<std::string> HarnessChild::take_lines() {
  std::vector<std::string> lines;
  size_t begin = 0;
  for (size_t nl; (nl = read_.find('\n', begin)) != std::string::npos; begin = nl + 1)
    lines.push_back(read_.substr(begin, nl - begin));
  read_.erase(0, begin);
  return lines;
}

std::string HarnessChild::take_output() { return std::exchange(read_, std::string()); }

void HarnessChild::reap(int status) {
  exited_ = true;
  exit_ok_ = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  how_ = describe_exit_status(status);
  kill(-pid_, SIGKILL);  // what it started goes with it
}

bool HarnessChild::exited() {
  if (exited_) return true;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) reap(status);
  return exited_;
}

bool HarnessChild::finish(double timeout_s) {
  const Stopwatch clock;
  while (!exited()) {
    if (clock.seconds() >= timeout_s) {
      kill(-pid_, SIGKILL);
      int status = 0;
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      reap(status);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

HarnessExit run_harness_command(const std::string& command, const std::vector<std::pair<std::string, std::string>>& env,
                                const std::string& stdin_text, double timeout_s) {
  HarnessChild child(command, env);
  child.send(stdin_text);
  child.close_input();
  HarnessExit r;
  while (child.pump(std::max(0.0, timeout_s - child.seconds())))
    if (child.seconds() >= timeout_s) break;
  r.stdout_text = child.take_output();
  // Its stdout closed (or the deadline passed): it exits, or is made to.
  r.timed_out = !child.finish(std::max(0.0, timeout_s - child.seconds()));
  r.wall_s = child.seconds();
  r.ok = !r.timed_out && child.ok();
  r.how = r.timed_out ? "timed out after " + std::to_string(static_cast<int64_t>(timeout_s)) + " s" : child.how();
  return r;
}

}  // namespace rlcpp
