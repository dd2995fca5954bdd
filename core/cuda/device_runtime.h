// The CUDA runtime calls of core/ (exec_context.cpp), behind plain pointers so that their caller compiles
// without the CUDA headers. Built only with CUDA (RLCPP_WITH_CUDA). Each throws naming the device and the CUDA
// (or cuBLAS) error.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "core/exec_context.h"

namespace rlcpp::cuda_runtime {

// Usable devices; 0 with the CUDA error (no driver, no device) in *why.
int device_count(std::string* why);
// Device `index`'s resources: a stream, a cuBLAS handle bound to it, a pool of cudaMalloc'ed memory.
std::shared_ptr<ExecContext::Resources> make_resources(int index);
// `bytes` from src to dst, host or device either way (unified addressing), on `stream`; done when it returns.
void copy(void* dst, const void* src, size_t bytes, void* stream, int index);
// `bytes` zero bytes at device pointer p, on `stream`; done when it returns.
void zero(void* p, size_t bytes, void* stream, int index);
void synchronize(void* stream, int index);
// The runtime's and the driver's CUDA versions and each visible device (name, compute capability,
// multiprocessors, memory), one line each; the CUDA error instead of the devices when there are none.
std::string describe();

}  // namespace rlcpp::cuda_runtime
