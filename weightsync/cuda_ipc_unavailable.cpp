// weightsync/cuda_ipc_memory.h in a build without CUDA: every call refused, saying so
// (weightsync/cuda/cuda_ipc_memory.cpp is the transport itself).
#if !defined(RLCPP_WITH_CUDA)

#include "core/error.h"
#include "weightsync/cuda_ipc_memory.h"

namespace rlcpp::cuda_ipc {

namespace {
[[noreturn]] void unavailable() {
  RLCPP_FAIL("cuda-ipc weight sync: this build has no CUDA (built without the CUDA toolkit); use the zmq channel");
}
}  // namespace

std::shared_ptr<void> allocate_exportable(size_t, int) { unavailable(); }
std::string export_handle(const void*, int) { unavailable(); }
std::shared_ptr<void> open_handle(const std::string&, int) { unavailable(); }
std::string device_uuid(int) { unavailable(); }
int device_with_uuid(const std::string&) { unavailable(); }
bool can_access_peer(int, int) { unavailable(); }
void copy_device_to_device(void*, const void*, size_t, void*, int) { unavailable(); }

}  // namespace rlcpp::cuda_ipc

#endif  // !RLCPP_WITH_CUDA
