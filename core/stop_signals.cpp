#include "core/stop_signals.h"

#include <pthread.h>

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

}  // namespace rlcpp
