// weightsync/cuda_ipc_memory.h with the CUDA runtime.
#include "weightsync/cuda_ipc_memory.h"

#include <cuda_runtime.h>

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

}  // namespace

std::shared_ptr<void> allocate_exportable(size_t bytes, int index) {
  check(cudaSetDevice(index), index, "cudaSetDevice");
  void* p = nullptr;
  check(cudaMalloc(&p, bytes > 0 ? bytes : 1), index, "cudaMalloc of the export buffer");
  return std::shared_ptr<void>(p, [index](void* q) {
    cudaSetDevice(index);
    cudaFree(q);
  });
}

std::string export_handle(const void* allocation, int index) {
  check(cudaSetDevice(index), index, "cudaSetDevice");
  cudaIpcMemHandle_t handle;
  check(cudaIpcGetMemHandle(&handle, const_cast<void*>(allocation)), index, "cudaIpcGetMemHandle");
  return std::string(reinterpret_cast<const char*>(&handle), sizeof handle);
}

std::shared_ptr<void> open_handle(const std::string& handle, int index) {
  RLCPP_CHECK(handle.size() == sizeof(cudaIpcMemHandle_t),
              "cuda-ipc weight sync: an IPC handle of " << handle.size() << " bytes, expected "
                                                        << sizeof(cudaIpcMemHandle_t));
  check(cudaSetDevice(index), index, "cudaSetDevice");
  cudaIpcMemHandle_t h;
  std::memcpy(&h, handle.data(), sizeof h);
  void* p = nullptr;
  check(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess), index,
        "cudaIpcOpenMemHandle (the publisher's export buffer)");
  return std::shared_ptr<void>(p, [index](void* q) {
    cudaSetDevice(index);
    cudaIpcCloseMemHandle(q);
  });
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

void copy_device_to_device(void* dst, const void* src, size_t bytes, void* stream, int index) {
  check(cudaSetDevice(index), index, "cudaSetDevice");
  const auto s = static_cast<cudaStream_t>(stream);
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s), index, "cudaMemcpyAsync (device to device)");
  check(cudaStreamSynchronize(s), index, "cudaStreamSynchronize after the copy");
}

}  // namespace rlcpp::cuda_ipc
