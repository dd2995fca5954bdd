#include "core/stop_signals.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace rlcpp {

sigset_t block_stop_signals(const char* who) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  RLCPP_CHECK(pthread_sigmask(SIG_BLOCK, &set, nullptr) == 0, who << ": cannot block SIGINT/SIGTERM");
  return set;
}

StopSignalWatch::StopSignalWatch(const char* who, std::string notice) {
  const sigset_t set = block_stop_signals(who);
  signal_fd_ = signalfd(-1, &set, SFD_CLOEXEC);
  RLCPP_CHECK(signal_fd_ >= 0, who << ": signalfd failed: " << std::strerror(errno));
  done_fd_ = eventfd(0, EFD_CLOEXEC);
  RLCPP_CHECK(done_fd_ >= 0, who << ": eventfd failed: " << std::strerror(errno));
  thread_ = std::thread([this, who = std::string(who), notice = std::move(notice)] {
    while (true) {
      pollfd fds[2] = {{signal_fd_, POLLIN, 0}, {done_fd_, POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[1].revents & POLLIN) return;
      signalfd_siginfo info{};
      if (::read(signal_fd_, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) continue;
      const int sig = static_cast<int>(info.ssi_signo);
      int none = 0;
      if (signal_.compare_exchange_strong(none, sig)) {
        std::fprintf(stderr, "%s: SIG%s received: %s\n", who.c_str(), sigabbrev_np(sig) ? sigabbrev_np(sig) : "?",
                     notice.c_str());
        std::fflush(stderr);
        continue;
      }
      std::fprintf(stderr, "%s: a second stop signal (SIG%s): stopping now; the step in progress is lost\n",
                   who.c_str(), sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
      std::fflush(stderr);
      std::fflush(stdout);
      std::_Exit(128 + sig);
    }
  });
}

StopSignalWatch::~StopSignalWatch() {
  const uint64_t one = 1;
  (void)!::write(done_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  ::close(signal_fd_);
  ::close(done_fd_);
}

}  // namespace rlcpp
