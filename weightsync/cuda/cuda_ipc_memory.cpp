// weightsync/cuda_ipc_memory.h with the CUDA runtime.
#include "weightsync/cuda_ipc_memory.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace rlcpp::cuda_ipc {

namespace {

void check(cudaError_t status, int index, const char* what) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // clears it, so the next call does not report it again
  RLCPP_FAIL("cuda-ipc weight sync on cuda:" << index << ": " << what << ": CUDA error " << cudaGetErrorName(status)
                                             << ": " << cudaGetErrorString(status));
}

// Makes device `index` current for its scope and then restores the caller's: the context's ops launch into
// their stream without setting the device, so a call here must not leave another one current.
class OnDevice {
 public:
  explicit OnDevice(int index) {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      cudaGetLastError();
      previous_ = -1;
    }
    check(cudaSetDevice(index), index, "cudaSetDevice");
  }
  ~OnDevice() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;

 private:
  int previous_ = -1;
};

// f() with device `index` current, then the caller's again; for the deleters, which must not throw.
template <class F>
void quietly_on_device(int index, F f) {
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
  cudaSetDevice(index);
  f();
  if (previous >= 0) cudaSetDevice(previous);
  cudaGetLastError();
}

// CUDA may sub-allocate small cudaMalloc requests, and an IPC handle maps the whole underlying block: the CUDA
// programming guide's advice is to share 2 MiB-aligned sizes only, so nothing beside the weights is mapped.
constexpr size_t kIpcGranularity = size_t{2} << 20;

}  // namespace

std::shared_ptr<void> allocate_exportable(size_t bytes, int index) {
  OnDevice on(index);
  void* p = nullptr;
  const size_t rounded = (std::max<size_t>(bytes, 1) + kIpcGranularity - 1) / kIpcGranularity * kIpcGranularity;
  check(cudaMalloc(&p, rounded), index, "cudaMalloc of the export buffer");
  return std::shared_ptr<void>(p, [index](void* q) { quietly_on_device(index, [q] { cudaFree(q); }); });
}

std::string export_handle(const void* allocation, int index) {
  OnDevice on(index);
  cudaIpcMemHandle_t handle;
  check(cudaIpcGetMemHandle(&handle, const_cast<void*>(allocation)), index, "cudaIpcGetMemHandle");
  return std::string(reinterpret_cast<const char*>(&handle), sizeof handle);
}

std::shared_ptr<void> open_handle(const std::string& handle, int index) {
  RLCPP_CHECK(handle.size() == sizeof(cudaIpcMemHandle_t),
              "cuda-ipc weight sync: an IPC handle of " << handle.size() << " bytes, expected "
                                                        << sizeof(cudaIpcMemHandle_t));
  OnDevice on(index);
  cudaIpcMemHandle_t h;
  std::memcpy(&h, handle.data(), sizeof h);
  void* p = nullptr;
  check(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess), index,
        "cudaIpcOpenMemHandle (the publisher's export buffer)");
  return std::shared_ptr<void>(p, [index](void* q) { quietly_on_device(index, [q] { cudaIpcCloseMemHandle(q); }); });
}

std::string device_uuid(int index) {
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, index), index, "cudaGetDeviceProperties");
  std::string hex;
  for (unsigned char byte : prop.uuid.bytes) {
    char two[3];
    std::snprintf(two, sizeof two, "%02x", byte);
    hex += two;
  }
  return hex;
}

int device_with_uuid(const std::string& uuid) {
  int count = 0;
  check(cudaGetDeviceCount(&count), 0, "cudaGetDeviceCount");
  for (int i = 0; i < count; ++i)
    if (device_uuid(i) == uuid) return i;
  return -1;
}

bool can_access_peer(int index, int peer) {
  if (index == peer) return true;
  int ok = 0;
  check(cudaDeviceCanAccessPeer(&ok, index, peer), index, "cudaDeviceCanAccessPeer");
  return ok != 0;
}

void copy_device_to_device(void* dst, const void* src, size_t bytes, void* stream, int index) {
  OnDevice on(index);
  const auto s = static_cast<cudaStream_t>(stream);
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s), index, "cudaMemcpyAsync (device to device)");
  check(cudaStreamSynchronize(s), index, "cudaStreamSynchronize after the copy");
}

}  // namespace rlcpp::cuda_ipc
