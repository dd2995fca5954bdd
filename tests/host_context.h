// The host execution context the tests run their CPU ops and model passes on (core/exec_context.h); a GPU test
// makes its own ExecContext::cuda(0).
#pragma once

#include "core/exec_context.h"

namespace rlcpp::testing {

inline const ExecContext& host() {
  static const ExecContext context = ExecContext::cpu();
  return context;
}

}  // namespace rlcpp::testing
