// A caching allocator: the memory pool of one device (docs/architecture.md "Execution"). A buffer released by a
// step goes back to the pool and the next step of a like shape gets it again, instead of the system allocator: on
// the CPU that spares the mmap, page faults and zeroing of every large step buffer; on CUDA, cudaMalloc's and
// cudaFree's device-wide synchronisation. An ExecContext owns one; the tensors it allocates keep it alive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace rlcpp {

// Where the pool gets memory from and gives it back to. allocate returns nullptr when the system has none.
struct SystemMemory {
  std::string name;  // "host", "cuda:0": named in out-of-memory errors
  std::function<void*(size_t bytes)> allocate;
  std::function<void(void* p)> release;
};

class CachingAllocator : public std::enable_shared_from_this<CachingAllocator> {
 public:
  struct Stats {
    int64_t system_allocations = 0;  // blocks taken from the system
    int64_t system_releases = 0;     // blocks given back to it
    int64_t reuses = 0;              // allocations served from the cache
    size_t reserved_bytes = 0;       // held from the system: in use + cached
    size_t in_use_bytes = 0;
    size_t peak_reserved_bytes = 0;
  };

  // Blocks are rounded up to kGranule bytes; a cached block serves a request it exceeds by at most
  // kMaxSlack (so one huge block does not serve a small request); at most max_cached_bytes stay cached.
  static constexpr size_t kGranule = 4096;
  static constexpr double kMaxSlack = 2.0;

  static std::shared_ptr<CachingAllocator> make(SystemMemory system, size_t max_cached_bytes);

  // A block of at least `bytes` (aligned as the system's, 64 bytes on the host); released to the cache when
  // the last owner drops it. Throws naming the pool and the size when the system has no memory left, after
  // giving the cache back to it and trying once more.
  std::shared_ptr<void> allocate(size_t bytes);
  // Gives every cached (unused) block back to the system.
  void release_cached();
  Stats stats() const;
  const std::string& name() const { return system_.name; }

  ~CachingAllocator();

 private:
  CachingAllocator(SystemMemory system, size_t max_cached_bytes);
  void give_back(void* p, size_t bytes);
  void release_cached_locked();

  SystemMemory system_;
  size_t max_cached_bytes_;
  mutable std::mutex mutex_;
  std::multimap<size_t, void*> cached_;  // free blocks by size
  size_t cached_bytes_ = 0;
  Stats stats_;
};

}  // namespace rlcpp
