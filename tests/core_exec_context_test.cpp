// The execution context and its memory pool: blocks come back to the pool and serve the next like request,
// the pool keeps what it must and no more, runs out of memory with a clear error, outlives its context while
// its tensors live; host tensors and copies; CUDA contexts where a device is present.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "core/caching_allocator.h"
#include "core/exec_context.h"
#include "tests/error_test_support.h"

namespace rlcpp {
namespace {

// A system allocator that counts, with a capacity in bytes.
struct FakeSystem {
  size_t capacity = SIZE_MAX, used = 0;
  int64_t allocations = 0, releases = 0;
  std::vector<std::pair<void*, size_t>> live;

  SystemMemory memory() {
    SystemMemory m;
    m.name = "fake";
    m.allocate = [this](size_t bytes) -> void* {
      if (used + bytes > capacity) return nullptr;
      used += bytes;
      ++allocations;
      void* p = ::operator new(bytes);
      live.emplace_back(p, bytes);
      return p;
    };
    m.release = [this](void* p) {
      for (size_t i = 0; i < live.size(); ++i)
        if (live[i].first == p) {
          used -= live[i].second;
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
          ++releases;
          ::operator delete(p);
          return;
        }
      ADD_FAILURE() << "released a pointer the system never gave";
    };
    return m;
  }
};

TEST(CachingAllocator, AReleasedBlockServesTheNextRequestOfItsSize) {
  FakeSystem sys;
  auto pool = CachingAllocator::make(sys.memory(), SIZE_MAX);
  void* first = nullptr;
  {
    auto a = pool->allocate(10000);
    first = a.get();
    EXPECT_EQ(pool->stats().in_use_bytes, 12288u);  // three granules
  }
  EXPECT_EQ(pool->stats().in_use_bytes, 0u);
  EXPECT_EQ(pool->stats().reserved_bytes, 12288u);
  auto b = pool->allocate(9000);  // rounds to the same three granules
  EXPECT_EQ(b.get(), first);
  EXPECT_EQ(sys.allocations, 1);
  EXPECT_EQ(pool->stats().reuses, 1);
  EXPECT_EQ(pool->stats().system_allocations, 1);
}

TEST(CachingAllocator, ABlockMoreThanTwiceTheRequestStaysCached) {
  FakeSystem sys;
  auto pool = CachingAllocator::make(sys.memory(), SIZE_MAX);
  pool->allocate(1 << 20).reset();
  auto small = pool->allocate(4096);
  EXPECT_EQ(sys.allocations, 2);
  EXPECT_EQ(pool->stats().reuses, 0);
  auto half = pool->allocate((1 << 19) + 1);  // the 1 MiB block is under twice this
  EXPECT_EQ(sys.allocations, 2);
  EXPECT_EQ(pool->stats().reuses, 1);
}

TEST(CachingAllocator, FreedMemoryAboveTheCacheLimitGoesBackToTheSystem) {
  FakeSystem sys;
  auto pool = CachingAllocator::make(sys.memory(), 8192);
  {
    auto a = pool->allocate(8192), b = pool->allocate(8192);
  }
  EXPECT_EQ(sys.releases, 1);  // one block kept, the other over the limit
  EXPECT_EQ(pool->stats().reserved_bytes, 8192u);
  pool->release_cached();
  EXPECT_EQ(sys.releases, 2);
  EXPECT_EQ(sys.used, 0u);
  EXPECT_EQ(pool->stats().reserved_bytes, 0u);
}

TEST(CachingAllocator, OutOfMemoryGivesTheCacheBackFirstThenNamesThePool) {
  FakeSystem sys;
  sys.capacity = 3 * 4096;
  auto pool = CachingAllocator::make(sys.memory(), SIZE_MAX);
  pool->allocate(2 * 4096).reset();          // cached, too small for the next request
  auto big = pool->allocate(3 * 4096);        // fits only once the cache is given back
  EXPECT_EQ(sys.releases, 1);
  EXPECT_NE(big, nullptr);
  expect_error([&] { pool->allocate(100); }, {"out of memory on fake", "allocating 100 bytes", "12288 bytes in use"});
}

TEST(CachingAllocator, ItsBlocksKeepItAliveAndItsEndFreesTheCache) {
  FakeSystem sys;
  auto pool = CachingAllocator::make(sys.memory(), SIZE_MAX);
  auto kept = pool->allocate(100);
  pool->allocate(100).reset();  // cached
  pool.reset();
  std::memset(kept.get(), 7, 100);  // still valid
  EXPECT_EQ(sys.releases, 0);
  kept.reset();  // the last owner: the pool ends, both blocks go back
  EXPECT_EQ(sys.releases, 2);
  EXPECT_EQ(sys.used, 0u);
}

TEST(ExecContext, HostTensorsComeFromThePoolAligned) {
  const ExecContext ctx = ExecContext::cpu();
  EXPECT_EQ(ctx.device(), Device::kCPU);
  EXPECT_EQ(ctx.name(), "cpu");
  EXPECT_EQ(ctx.stream(), nullptr);
  const void* first = nullptr;
  {
    Tensor t = ctx.empty({17, 33});
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 64, 0u);
    EXPECT_EQ(t.shape(), (Shape{17, 33}));
    std::memset(t.raw(), 0xFF, t.nbytes());
    first = t.raw();
  }
  Tensor z = ctx.zeros({33, 17});  // the same block, zeroed
  EXPECT_EQ(z.raw(), first);
  for (int64_t i = 0; i < z.numel(); ++i) ASSERT_EQ(z.data<float>()[i], 0.0f) << i;
  EXPECT_EQ(ctx.pool().stats().system_allocations, 1);
  EXPECT_EQ(ctx.pool().stats().reuses, 1);
}

TEST(ExecContext, HostCopiesAreExactAndCheckTheirShapes) {
  const ExecContext ctx = ExecContext::cpu();
  Tensor src = Tensor::empty({5, 7}, DType::kI32);
  for (int64_t i = 0; i < src.numel(); ++i) src.data<int32_t>()[i] = static_cast<int32_t>(i * 2654435761u);
  const Tensor dst = ctx.copy_of(src);
  EXPECT_EQ(std::memcmp(dst.raw(), src.raw(), src.nbytes()), 0);
  Tensor wrong = ctx.empty({7, 5}, DType::kI32);
  expect_error([&] { ctx.copy(src, wrong); }, {"copy: src (5, 7) I32 and dst (7, 5) I32 differ"});
  float dummy[4];
  Tensor on_device = Tensor::borrow(dummy, {4}, DType::kF32, Device::kCUDA);
  Tensor host = ctx.empty({4});
  expect_error([&] { ctx.copy(host, on_device); }, {"a cpu -> cuda copy on the cpu context"});
}

TEST(ExecContext, FillZeroZeroesItsDevicesTensorsAndNamesAnother) {
  const ExecContext ctx = ExecContext::cpu();
  Tensor t = ctx.empty({6, 5});
  std::memset(t.raw(), 0xFF, t.nbytes());
  Tensor rows = t.slice_rows(2, 4);
  ctx.fill_zero(rows);
  for (int64_t i = 0; i < t.numel(); ++i)
    ASSERT_EQ(std::isnan(t.data<float>()[i]), i < 10 || i >= 20) << "only rows 2 and 3 are zeroed, element " << i;
  float dummy[4];
  Tensor on_device = Tensor::borrow(dummy, {4}, DType::kF32, Device::kCUDA);
  expect_error([&] { ctx.fill_zero(on_device); }, {"fill_zero: the tensor is on cuda, the context is cpu"});
}

TEST(ExecContext, AHostContextSaysItsMemoryIsTheHostsAndHoldsOnlyHostTensors) {
  // What rollout/, trainer/, loop/ and weightsync/ ask instead of naming a device (scripts/check_device_neutral.py).
  const ExecContext ctx = ExecContext::cpu();
  EXPECT_TRUE(ctx.is_host());
  EXPECT_FALSE(ctx.is_gpu());
  const Tensor host = ctx.empty({3});
  float dummy[3];
  const Tensor on_device = Tensor::borrow(dummy, {3}, DType::kF32, Device::kCUDA);
  EXPECT_TRUE(host.on_host());
  EXPECT_FALSE(on_device.on_host());
  EXPECT_TRUE(ctx.holds(host));
  EXPECT_TRUE(ctx.holds(Tensor::empty({2})));  // host memory not from its pool is the host context's too
  EXPECT_FALSE(ctx.holds(on_device));
  EXPECT_TRUE(ctx.runs_on(Device::kCPU));
  EXPECT_FALSE(ctx.runs_on(Device::kCUDA));
}

TEST(ExecContext, ACudaContextOnADeviceThatIsNotThereSaysWhy) {
  // Runs on every machine: without a GPU (or in a CPU-only build) cuda:0 is refused with the reason; with N GPUs,
  // cuda:N is refused naming the device and how many are visible.
  std::string why;
  const int devices = ExecContext::cuda_devices(&why);
  if (devices > 0) {
    expect_error([&] { ExecContext::cuda(devices); },
                 {"cuda:" + std::to_string(devices), "no such device", std::to_string(devices) + " visible"});
    expect_error([] { ExecContext::cuda(-1); }, {"cuda:-1", "no such device"});
    return;
  }
  EXPECT_FALSE(why.empty());
#ifdef RLCPP_WITH_CUDA
  expect_error([] { ExecContext::cuda(0); }, {"cuda:0"});
#else
  expect_error([] { ExecContext::cuda(0); }, {"rlcpp was built without CUDA"});
#endif
}

TEST(ExecContext, DeviceCopiesRoundTripBitForBit) {
  std::string why;
  if (ExecContext::cuda_devices(&why) == 0) GTEST_SKIP() << why;
  const ExecContext gpu = ExecContext::cuda(0);
  EXPECT_EQ(gpu.name(), "cuda:0");
  EXPECT_NE(gpu.stream(), nullptr);
  EXPECT_NE(gpu.blas_handle(), nullptr);
  for (const int64_t n : {int64_t{1}, int64_t{17}, int64_t{97 * 54}}) {
    Tensor host = Tensor::empty({n});
    for (int64_t i = 0; i < n; ++i) host.data<float>()[i] = static_cast<float>(i) * 0.37f - 3.0f;
    const Tensor dev = gpu.copy_of(host);
    EXPECT_EQ(dev.device(), Device::kCUDA);
    Tensor back = Tensor::empty({n});
    std::memset(back.raw(), 0xFF, back.nbytes());  // poisoned
    gpu.copy(dev, back);
    EXPECT_EQ(std::memcmp(back.raw(), host.raw(), host.nbytes()), 0) << n;
    const Tensor z = gpu.zeros({n});
    gpu.copy(z, back);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(back.data<float>()[i], 0.0f) << i;
  }
  const int64_t before = gpu.pool().stats().system_allocations;
  const Tensor again = gpu.empty({97 * 54});
  EXPECT_EQ(gpu.pool().stats().system_allocations, before);  // served from the pool
}

TEST(DeviceSpec, CpuCudaAndCudaNParseAndAnythingElseNamesTheKey) {
  EXPECT_EQ(parse_device_spec("cpu", "k").device, Device::kCPU);
  const DeviceSpec cuda = parse_device_spec("cuda", "k");
  EXPECT_EQ(cuda.device, Device::kCUDA);
  EXPECT_EQ(cuda.index, 0);
  EXPECT_EQ(parse_device_spec("cuda:3", "k").index, 3);
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "CPU", "cuda:123456789", ""})
    expect_error([&] { parse_device_spec(bad, "config key 'rollout.device'"); },
                 {"config key 'rollout.device'", std::string("'") + bad + "'", "cpu, cuda or cuda:N"});
  EXPECT_EQ(context_for_device("cpu", "k").device(), Device::kCPU);
}

TEST(DeviceSpec, TheHostIsAlwaysAvailableAndAMissingGpuIsNamedWithTheKeyBeforeAnyContext) {
  EXPECT_TRUE(parse_device_spec("cpu", "k").is_host());
  EXPECT_FALSE(parse_device_spec("cpu", "k").is_gpu());
  EXPECT_TRUE(parse_device_spec("cuda:1", "k").is_gpu());
  EXPECT_FALSE(parse_device_spec("cuda:1", "k").is_host());
  EXPECT_NO_THROW(check_device_available("cpu", "config key 'device'"));
  expect_error([] { check_device_available("gpu", "config key 'device'"); },
               {"config key 'device'", "'gpu'", "cpu, cuda or cuda:N"});
  std::string why;
  const int devices = ExecContext::cuda_devices(&why);
  if (devices > 0) {
    EXPECT_NO_THROW(check_device_available("cuda", "config key 'device'"));
    expect_error([&] { check_device_available("cuda:" + std::to_string(devices), "config key 'rollout.device'"); },
                 {"config key 'rollout.device' = 'cuda:" + std::to_string(devices) + "'", "no such device",
                  std::to_string(devices) + " visible"});
    return;
  }
  expect_error([] { check_device_available("cuda", "config key 'device'"); }, {"config key 'device' = 'cuda'", why});
}

TEST(DeviceSpec, ACudaDeviceThatCannotBeUsedIsNamedWithTheKey) {
  // Without a GPU (or in a CPU-only build) asking for one is an error naming the key, the device and the reason.
  std::string why;
  if (ExecContext::cuda_devices(&why) > 0) {
    expect_error([] { context_for_device("cuda:99", "generate --device"); },
                 {"generate --device = 'cuda:99'", "no such device"});
    return;
  }
  expect_error([] { context_for_device("cuda", "generate --device"); }, {"generate --device = 'cuda'"});
}

}  // namespace
}  // namespace rlcpp
