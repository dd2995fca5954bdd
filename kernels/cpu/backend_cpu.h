// The CPU backend (kernels/cpu/): declared for backend_registry.cpp.
#pragma once

#include "kernels/backend.h"

namespace rlcpp::ops {
const Backend& cpu_backend();
}  // namespace rlcpp::ops
