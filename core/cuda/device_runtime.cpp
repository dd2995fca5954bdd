#include "core/cuda/device_runtime.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <string>

#include "core/error.h"

namespace rlcpp::cuda_runtime {

namespace {

void check(cudaError_t status, int index, const char* what, const char* file, int line) {
  if (status != cudaSuccess)
    detail::throw_error(file, line, std::string("cuda:") + std::to_string(index) + ": " + what + ": CUDA error " +
                                        cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
}
#define RLCPP_CUDA_CALL(index, call) check((call), (index), #call, __FILE__, __LINE__)

void set_device(int index) { RLCPP_CUDA_CALL(index, cudaSetDevice(index)); }

}  // namespace

int device_count(std::string* why) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    if (why)
      *why = std::string("no usable CUDA device: ") + cudaGetErrorName(status) + ": " + cudaGetErrorString(status);
    return 0;
  }
  if (count == 0 && why) *why = "no CUDA device";
  return count;
}

std::string describe() {
  auto version = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  std::string out = "CUDA runtime " + version(runtime) + " (built with " + version(CUDART_VERSION) +
                    "), driver " + (driver ? "for CUDA " + version(driver) : std::string("not found")) + "\n";
  std::string why;
  const int count = device_count(&why);
  if (count == 0) return out + why + "\n";
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    const cudaError_t status = cudaGetDeviceProperties(&prop, i);
    if (status != cudaSuccess) {
      out += "cuda:" + std::to_string(i) + ": " + cudaGetErrorString(status) + "\n";
      continue;
    }
    char line[256];
    std::snprintf(line, sizeof line, "cuda:%d %s, compute capability %d.%d, %d multiprocessors, %.1f GiB\n", i,
                  prop.name, prop.major, prop.minor, prop.multiProcessorCount,
                  static_cast<double>(prop.totalGlobalMem) / (1 << 30));
    out += line;
  }
  return out;
}

std::shared_ptr<ExecContext::Resources> make_resources(int index) {
  int count = 0;
  RLCPP_CUDA_CALL(index, cudaGetDeviceCount(&count));
  RLCPP_CHECK(index >= 0 && index < count, "cuda:" << index << ": no such device (" << count << " visible)");
  set_device(index);
  auto res = std::make_shared<ExecContext::Resources>();
  res->device = Device::kCUDA;
  res->index = index;
  cudaStream_t stream = nullptr;
  // The context's stream: its ops (kernels/ops.cpp) and copies queue on it in order. A blocking one, so that it
  // is also ordered with anything a library still launches on the legacy default stream.
  RLCPP_CUDA_CALL(index, cudaStreamCreate(&stream));
  cublasHandle_t blas = nullptr;
  const cublasStatus_t made = cublasCreate(&blas);
  if (made != CUBLAS_STATUS_SUCCESS) {
    cudaStreamDestroy(stream);
    RLCPP_FAIL("cuda:" << index << ": cublasCreate: " << cublasGetStatusString(made));
  }
  cublasSetStream(blas, stream);
  res->stream = stream;
  res->blas = blas;
  res->destroy = [index, stream, blas] {
    cudaSetDevice(index);
    cublasDestroy(blas);
    cudaStreamDestroy(stream);
  };
  SystemMemory memory;
  memory.name = "cuda:" + std::to_string(index);
  memory.allocate = [index](size_t bytes) -> void* {
    void* p = nullptr;
    if (cudaSetDevice(index) != cudaSuccess || cudaMalloc(&p, bytes) != cudaSuccess) {
      cudaGetLastError();  // an out-of-memory is reported by the pool, not left sticky here
      return nullptr;
    }
    return p;
  };
  memory.release = [index](void* p) {
    cudaSetDevice(index);
    cudaFree(p);
  };
  res->pool = CachingAllocator::make(std::move(memory), static_cast<size_t>(-1));
  return res;
}

void copy(void* dst, const void* src, size_t bytes, void* stream, int index) {
  set_device(index);
  auto s = static_cast<cudaStream_t>(stream);
  RLCPP_CUDA_CALL(index, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
  RLCPP_CUDA_CALL(index, cudaStreamSynchronize(s));
}

void zero(void* p, size_t bytes, void* stream, int index) {
  set_device(index);
  auto s = static_cast<cudaStream_t>(stream);
  RLCPP_CUDA_CALL(index, cudaMemsetAsync(p, 0, bytes, s));
  RLCPP_CUDA_CALL(index, cudaStreamSynchronize(s));
}

void synchronize(void* stream, int index) {
  set_device(index);
  RLCPP_CUDA_CALL(index, cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
}

}  // namespace rlcpp::cuda_runtime
