#include "core/exec_context.h"

#include <cstdlib>
#include <cstring>

#include "core/error.h"
#ifdef RLCPP_WITH_CUDA
#include "core/cuda/device_runtime.h"
#endif

namespace rlcpp {

namespace {

[[noreturn]] void built_without_cuda(const char* what) {
  RLCPP_FAIL("rlcpp was built without CUDA (" << what << "): rebuild with the CUDA toolkit (cmake -DRLCPP_CUDA=ON)");
}

}  // namespace

ExecContext::Resources::~Resources() {
  if (destroy) destroy();
}

ExecContext ExecContext::cpu(size_t max_cached_bytes) {
  auto res = std::make_shared<Resources>();
  SystemMemory memory;
  memory.name = "host";
  // 64-byte alignment for vector loads (the pool's sizes are whole granules, so aligned_alloc's rule holds).
  memory.allocate = [](size_t bytes) { return std::aligned_alloc(64, bytes); };
  memory.release = [](void* p) { std::free(p); };
  res->pool = CachingAllocator::make(std::move(memory), max_cached_bytes);
  return ExecContext(std::move(res));
}

ExecContext ExecContext::cuda(int index) {
#ifdef RLCPP_WITH_CUDA
  return ExecContext(cuda_runtime::make_resources(index));
#else
  (void)index;
  built_without_cuda("ExecContext::cuda");
#endif
}

int ExecContext::cuda_devices(std::string* why) {
#ifdef RLCPP_WITH_CUDA
  return cuda_runtime::device_count(why);
#else
  if (why) *why = "rlcpp was built without CUDA";
  return 0;
#endif
}

ExecContext ExecContext::on_backend(std::string name) const {
  ExecContext other(*this);
  other.backend_ = std::move(name);
  return other;
}

std::string ExecContext::describe_cuda() {
#ifdef RLCPP_WITH_CUDA
  return cuda_runtime::describe();
#else
  return "rlcpp was built without CUDA\n";
#endif
}

std::string ExecContext::name() const {
  return device() == Device::kCPU ? "cpu" : "cuda:" + std::to_string(device_index());
}

void ExecContext::synchronize() const {
  if (device() == Device::kCPU) return;
#ifdef RLCPP_WITH_CUDA
  cuda_runtime::synchronize(stream(), device_index());
#endif
}

Tensor ExecContext::empty(Shape shape, DType dtype) const {
  const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  return Tensor::from_storage(res_->pool->allocate(bytes), std::move(shape), dtype, device());
}

Tensor ExecContext::zeros(Shape shape, DType dtype) const {
  Tensor t = empty(std::move(shape), dtype);
  fill_zero(t);
  return t;
}

void ExecContext::fill_zero(Tensor& t) const {
  RLCPP_CHECK(t.device() == device(),
              "fill_zero: the tensor is on " << device_name(t.device()) << ", the context is " << name());
  if (device() == Device::kCPU) {
    t.fill_zero();
  } else {
#ifdef RLCPP_WITH_CUDA
    if (t.nbytes()) cuda_runtime::zero(t.raw(), t.nbytes(), stream(), device_index());
#endif
  }
}

void ExecContext::copy(const Tensor& src, Tensor& dst) const {
  RLCPP_CHECK(src.shape() == dst.shape() && src.dtype() == dst.dtype(),
              "copy: src " << shape_str(src.shape()) << " " << dtype_name(src.dtype()) << " and dst "
                           << shape_str(dst.shape()) << " " << dtype_name(dst.dtype()) << " differ");
  if (src.nbytes() == 0) return;
  if (src.device() == Device::kCPU && dst.device() == Device::kCPU) {
    std::memcpy(dst.raw(), src.raw(), src.nbytes());
    return;
  }
  RLCPP_CHECK(device() == Device::kCUDA, "copy: a " << device_name(src.device()) << " -> "
                                                    << device_name(dst.device()) << " copy on the " << name()
                                                    << " context (device copies run on a CUDA context)");
#ifdef RLCPP_WITH_CUDA
  cuda_runtime::copy(dst.raw(), src.raw(), src.nbytes(), stream(), device_index());
#else
  built_without_cuda("copy");
#endif
}

Tensor ExecContext::copy_of(const Tensor& src) const {
  Tensor dst = empty(src.shape(), src.dtype());
  copy(src, dst);
  return dst;
}

DeviceSpec parse_device_spec(const std::string& spec, const std::string& key) {
  if (spec == "cpu") return {Device::kCPU, 0};
  if (spec == "cuda") return {Device::kCUDA, 0};
  if (spec.rfind("cuda:", 0) == 0 && spec.size() > 5 && spec.size() <= 9 &&
      spec.find_first_not_of("0123456789", 5) == std::string::npos)
    return {Device::kCUDA, std::stoi(spec.substr(5))};
  RLCPP_FAIL(key << ": unknown device '" << spec << "' (expected cpu, cuda or cuda:N)");
}

ExecContext context_for_device(const std::string& spec, const std::string& key) {
  const DeviceSpec d = parse_device_spec(spec, key);
  if (d.device == Device::kCPU) return ExecContext::cpu();
  try {
    return ExecContext::cuda(d.index);
  } catch (const Error& e) {
    RLCPP_FAIL(key << " = '" << spec << "': " << e.what());
  }
}

void check_device_available(const std::string& spec, const std::string& key) {
  const DeviceSpec d = parse_device_spec(spec, key);
  if (d.is_host()) return;
  std::string why;
  const int count = ExecContext::cuda_devices(&why);
  RLCPP_CHECK(d.index < count, key << " = '" << spec << "': "
                                   << (count == 0 ? why
                                                  : "no such device (" + std::to_string(count) + " visible)"));
}

Tensor i32_on(const ExecContext& ctx, const std::vector<int32_t>& values) {
  const int64_t n = static_cast<int64_t>(values.size());
  Tensor t = ctx.device() == Device::kCPU ? ctx.empty({n}, DType::kI32) : Tensor::empty({n}, DType::kI32);
  if (n > 0) std::memcpy(t.data<int32_t>(), values.data(), values.size() * sizeof(int32_t));
  return ctx.device() == Device::kCPU ? t : ctx.copy_of(t);
}

}  // namespace rlcpp
