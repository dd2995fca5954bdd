// The checksum the weight syncs between devices carry (cuda-ipc, nccl): ops::keyed_checksum of the flat weights,
// the same 64 bits whether the CPU or a GPU computes it, in any summation order. weightsync/ reaches kernels
// through here (docs/architecture.md: it may include core and model only).
#pragma once

#include <cstdint>

#include "core/exec_context.h"
#include "core/tensor.h"

namespace rlcpp {

// The keyed checksum of `flat` (f32) on ctx's device.
uint64_t weights_keyed_checksum(const ExecContext& ctx, const Tensor& flat);

}  // namespace rlcpp
