// The CUDA runtime calls of the cuda-ipc weight sync (weightsync/cuda_ipc_channel.h), behind plain pointers so
// that their callers compile without the CUDA headers: weightsync/cuda/cuda_ipc_memory.cpp with CUDA, and in a
// build without it weightsync/cuda_ipc_unavailable.cpp, where each call throws saying so. Each error names the
// device and CUDA's message.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace rlcpp::cuda_ipc {

// `bytes` on device `index` in an allocation of its own (an IPC handle names a whole cudaMalloc allocation;
// rounded up to 2 MiB, so that the mapping holds nothing else), freed with the last reference. Every call here
// leaves the caller's current device as it found it.
std::shared_ptr<void> allocate_exportable(size_t bytes, int index);
// The IPC handle of such an allocation: CUDA_IPC_HANDLE_SIZE opaque bytes another process on this host opens.
std::string export_handle(const void* allocation, int index);
// The allocation `handle` names (exported by another process of this host), mapped for device `index` (an
// allocation on another GPU through peer access); unmapped with the last reference.
std::shared_ptr<void> open_handle(const std::string& handle, int index);
// Device `index`'s UUID as 32 hex digits: how the two sides of a sync name a GPU (their device indices differ
// under different CUDA_VISIBLE_DEVICES).
std::string device_uuid(int index);
// The index of the visible device with UUID `uuid`, or -1 when this process does not see it.
int device_with_uuid(const std::string& uuid);
// Whether device `index` can map memory of device `peer` (cudaDeviceCanAccessPeer; true for the same device):
// an export on another GPU is opened through peer access, which PCIe GPUs across sockets and many VMs lack.
bool can_access_peer(int index, int peer);
// `bytes` from device memory src to dst (any device of this process), on `stream` (the context's), waited for.
void copy_device_to_device(void* dst, const void* src, size_t bytes, void* stream, int index);

}  // namespace rlcpp::cuda_ipc
