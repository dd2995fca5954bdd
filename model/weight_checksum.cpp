#include "model/weight_checksum.h"

#include "kernels/ops.h"

namespace rlcpp {

uint64_t weights_keyed_checksum(const ExecContext& ctx, const Tensor& flat) { return ops::keyed_checksum(ctx, flat); }

}  // namespace rlcpp
