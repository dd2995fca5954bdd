#pragma once
// SIGINT and SIGTERM as events a process handles where it chooses (a signalfd it polls, a thread in sigwait),
// not as interruptions anywhere. Call before any thread starts: threads inherit the mask.
#include <signal.h>

namespace rlcpp {

// Blocks SIGINT and SIGTERM in the calling thread and returns that set; `who` names the caller in the error.
sigset_t block_stop_signals(const char* who);

}  // namespace rlcpp
