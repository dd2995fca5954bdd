// weightsync/nccl_broadcast.h in a build without CUDA or NCCL: refused, saying why (weightsync/cuda/
// nccl_broadcast.cpp is the transport itself).
#if !defined(RLCPP_WITH_NCCL)

#include "core/error.h"
#include "weightsync/nccl_broadcast.h"

namespace rlcpp {

namespace {
constexpr const char* kMissing = "this build has no NCCL (built without CUDA, or NCCL not found with the CUDA "
                                 "toolkit); use the zmq or cuda-ipc weight sync";
}  // namespace

struct NcclWeightBroadcast::Comm {};

bool nccl_weight_sync_available(std::string* why) {
  if (why) *why = kMissing;
  return false;
}

std::string NcclWeightBroadcast::unique_id() { RLCPP_FAIL("nccl weight sync: " << kMissing); }

NcclWeightBroadcast::NcclWeightBroadcast(const ExecContext&, const std::string&, int, int, double,
                                         const WhileWaiting&) {
  RLCPP_FAIL("nccl weight sync: " << kMissing);
}

NcclWeightBroadcast::~NcclWeightBroadcast() = default;

void NcclWeightBroadcast::broadcast(float*, int64_t, int64_t, const std::string&, const WhileWaiting&) {
  RLCPP_FAIL("nccl weight sync: " << kMissing);
}

}  // namespace rlcpp

#endif  // !RLCPP_WITH_NCCL
