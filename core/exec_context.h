// Where work runs (docs/architecture.md "Execution"): a device, the stream its work is queued on, the memory pool it
// allocates from, and the library handles (cuBLAS). It is an argument of whatever allocates or launches — no
// global or thread-local state. Copies share the same resources (pool, stream, handles), which the last copy
// frees; tensors allocated from the pool keep the pool alive.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/caching_allocator.h"
#include "core/tensor.h"

namespace rlcpp {

class ExecContext {
 public:
  // How much freed memory a host pool keeps for reuse by default (above it, freed blocks go back to the system).
  static constexpr size_t kDefaultHostCacheBytes = size_t{1} << 30;

  // What a context holds. The stream and handle are CUDA's (cudaStream_t, cublasHandle_t), opaque here so that
  // core/ compiles without the CUDA headers; both are null on the CPU.
  struct Resources {
    Device device = Device::kCPU;
    int index = 0;
    std::shared_ptr<CachingAllocator> pool;
    void* stream = nullptr;
    void* blas = nullptr;
    std::function<void()> destroy;  // frees the stream and handles
    ~Resources();
  };

  // The host: no stream, a pool of 64-byte-aligned blocks keeping up to `max_cached_bytes` of freed memory.
  static ExecContext cpu(size_t max_cached_bytes = kDefaultHostCacheBytes);
  // CUDA device `index`: a stream of its own, a cuBLAS handle on that stream, a pool of device memory. Throws
  // "rlcpp was built without CUDA" in a CPU-only build, and names the device and the CUDA error when it cannot
  // be used (no driver, no such device).
  static ExecContext cuda(int index = 0);
  // How many CUDA devices this process can use; 0 with the reason in *why (built without CUDA, no driver, none).
  static int cuda_devices(std::string* why = nullptr);
  // What this process sees of CUDA: the runtime's and the driver's versions and each device, a line each
  // (`rlcpp devices`); "rlcpp was built without CUDA" in a CPU-only build.
  static std::string describe_cuda();

  // The same resources with ops dispatched to another backend of the same device (kernels/backend.h): e.g.
  // "reference" on the host, the readable definitions the op matrix test compares the fast kernels with.
  ExecContext on_backend(std::string name) const;
  // The backend ops on this context run on: "cpu" or "cuda" unless on_backend chose another.
  const std::string& backend() const { return backend_; }

  Device device() const { return res_->device; }
  // What the context's memory can do, asked instead of naming a device by the algorithm, loop and channel
  // folders (docs/architecture.md "Folders"; scripts/check_device_neutral.py keeps them to it).
  // Host memory: the CPU reads this context's tensors in place, and host tensors are already its own.
  bool is_host() const { return device() == Device::kCPU; }
  // GPU memory: what cuda-ipc exports to another process of the host and NCCL moves between ranks.
  bool is_gpu() const { return device() == Device::kCUDA; }
  // t lives in this context's kind of memory (a tensor records host or GPU, not which GPU).
  bool holds(const Tensor& t) const { return t.device() == device(); }
  // `other` is this context's kind of device: ops there run the same kernels, summing in the same orders.
  bool runs_on(Device other) const { return other == device(); }
  int device_index() const { return res_->index; }
  std::string name() const;  // "cpu", "cuda:0"
  CachingAllocator& pool() const { return *res_->pool; }
  void* stream() const { return res_->stream; }
  void* blas_handle() const { return res_->blas; }
  // Waits until the stream's queued work is done (nothing to wait for on the CPU).
  void synchronize() const;

  // Tensors on this context's device, from its pool (uninitialised, or zeroed).
  Tensor empty(Shape shape, DType dtype = DType::kF32) const;
  Tensor zeros(Shape shape, DType dtype = DType::kF32) const;
  // t (on this context's device, contiguous) = 0, queued on the stream.
  void fill_zero(Tensor& t) const;
  // dst = src (same shape and dtype; either may be on the host or on this context's device), queued on this
  // context's stream and finished before returning.
  void copy(const Tensor& src, Tensor& dst) const;
  // A copy of src on this context's device.
  Tensor copy_of(const Tensor& src) const;

 private:
  explicit ExecContext(std::shared_ptr<Resources> res)
      : res_(std::move(res)), backend_(res_->device == Device::kCPU ? "cpu" : "cuda") {}
  std::shared_ptr<Resources> res_;
  std::string backend_;
};

// A device named in a config key or option: "cpu", "cuda" (device 0) or "cuda:N". parse_device_spec checks the
// spelling only (a config's check before any work), naming `key`; context_for_device makes the context, and
// names `key` and the device when it cannot (built without CUDA, no driver, no such device).
struct DeviceSpec {
  Device device = Device::kCPU;
  int index = 0;
  bool is_host() const { return device == Device::kCPU; }  // a context on it would be ExecContext::is_host()
  bool is_gpu() const { return device == Device::kCUDA; }   // ... ExecContext::is_gpu()
};
DeviceSpec parse_device_spec(const std::string& spec, const std::string& key);
ExecContext context_for_device(const std::string& spec, const std::string& key);
// A config's check before any work that `spec` is spelt right and present on this machine (the host always is; a
// GPU index past the visible ones, or none visible, is named with `key` and the reason), without making a context.
void check_device_available(const std::string& spec, const std::string& key);

// `values` as an int32 tensor on ctx's device (the index tensors of a step: token ids, positions, tables), from
// its pool on the host, through a host buffer elsewhere.
Tensor i32_on(const ExecContext& ctx, const std::vector<int32_t>& values);

}  // namespace rlcpp
