// The CUDA backend (kernels/cuda/): declared for backend_registry.cpp.
#pragma once

#include "kernels/backend.h"

namespace rlcpp::ops {
const Backend& cuda_backend();
}  // namespace rlcpp::ops
