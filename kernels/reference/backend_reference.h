// The readable-reference backend (kernels/reference/): declared for backend_registry.cpp.
#pragma once

#include "kernels/backend.h"

namespace rlcpp::ops {
const Backend& reference_backend();
}  // namespace rlcpp::ops
