#pragma once
// SIGINT and SIGTERM as events a process handles where it chooses (a signalfd it polls, a thread in sigwait),
// not as interruptions anywhere. Call before any thread starts: threads inherit the mask.
#include <signal.h>

#include <atomic>
#include <string>
#include <thread>

namespace rlcpp {

// Blocks SIGINT and SIGTERM in the calling thread and returns that set; `who` names the caller in the error.
sigset_t block_stop_signals(const char* who);

// A long run's stop on request (Ctrl-C, or a scheduler's SIGTERM): SIGINT and SIGTERM are blocked (construct it
// before any thread starts) and a thread watches them. The first sets requested() and prints `notice` to stderr
// with the signal's name; the run answers it at its next safe point (a step's end, with a checkpoint). A second
// ends the process at once with status 128 + the signal, as the signal's default action would: what the run has
// committed stays complete (its checkpoints are renamed into place whole), the step in progress is lost.
class StopSignalWatch {
 public:
  StopSignalWatch(const char* who, std::string notice);
  ~StopSignalWatch();
  StopSignalWatch(const StopSignalWatch&) = delete;
  StopSignalWatch& operator=(const StopSignalWatch&) = delete;

  bool requested() const { return signal_.load() != 0; }
  int signal() const { return signal_.load(); }  // the first signal received, 0 before one

 private:
  std::atomic<int> signal_{0};
  int signal_fd_ = -1;
  int done_fd_ = -1;  // written by the destructor to end the watching thread
  std::thread thread_;
};

}  // namespace rlcpp
