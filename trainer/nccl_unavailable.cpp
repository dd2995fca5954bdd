// The "nccl" backend in a build without CUDA or NCCL: refused, saying why (trainer/cuda/nccl_communicator.cpp
// is the backend itself).
#if !defined(RLCPP_WITH_NCCL)

#include "core/error.h"
#include "trainer/nccl_communicator.h"

namespace rlcpp {

int nccl_devices(std::string* why) {
  if (why) *why = "this build has no NCCL (built without CUDA, or NCCL not found with the CUDA toolkit)";
  return 0;
}

std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator>, int, double) {
  std::string why;
  nccl_devices(&why);
  RLCPP_FAIL("launch: data-parallel backend nccl: " << why);
}

}  // namespace rlcpp

#endif  // !RLCPP_WITH_NCCL
