#include "core/caching_allocator.h"

#include <algorithm>

#include "core/error.h"

namespace rlcpp {

std::shared_ptr<CachingAllocator> CachingAllocator::make(SystemMemory system, size_t max_cached_bytes) {
  RLCPP_CHECK(system.allocate && system.release, "CachingAllocator " << system.name << ": no system allocator");
  return std::shared_ptr<CachingAllocator>(new CachingAllocator(std::move(system), max_cached_bytes));
}

CachingAllocator::CachingAllocator(SystemMemory system, size_t max_cached_bytes)
    : system_(std::move(system)), max_cached_bytes_(max_cached_bytes) {}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

std::shared_ptr<void> CachingAllocator::allocate(size_t bytes) {
  const size_t size = std::max<size_t>(kGranule, (bytes + kGranule - 1) / kGranule * kGranule);
  void* p = nullptr;
  size_t block = size;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = cached_.lower_bound(size);
    if (it != cached_.end() && static_cast<double>(it->first) <= kMaxSlack * static_cast<double>(size)) {
      block = it->first;
      p = it->second;
      cached_.erase(it);
      cached_bytes_ -= block;
      ++stats_.reuses;
    } else {
      p = system_.allocate(size);
      if (p == nullptr && cached_bytes_ > 0) {  // the cache may hold what the system lacks
        release_cached_locked();
        p = system_.allocate(size);
      }
      RLCPP_CHECK(p != nullptr, "out of memory on " << system_.name << ": allocating " << bytes << " bytes ("
                                                    << stats_.in_use_bytes << " bytes in use by this pool)");
      ++stats_.system_allocations;
      stats_.reserved_bytes += size;
      stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
    }
    stats_.in_use_bytes += block;
  }
  std::shared_ptr<CachingAllocator> self = shared_from_this();
  return std::shared_ptr<void>(p, [self, block](void* q) { self->give_back(q, block); });
}

void CachingAllocator::give_back(void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.in_use_bytes -= bytes;
  if (cached_bytes_ + bytes > max_cached_bytes_) {
    system_.release(p);
    ++stats_.system_releases;
    stats_.reserved_bytes -= bytes;
    return;
  }
  cached_.emplace(bytes, p);
  cached_bytes_ += bytes;
}

void CachingAllocator::release_cached() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

void CachingAllocator::release_cached_locked() {
  for (const auto& [bytes, p] : cached_) {
    system_.release(p);
    ++stats_.system_releases;
    stats_.reserved_bytes -= bytes;
  }
  cached_.clear();
  cached_bytes_ = 0;
}

CachingAllocator::Stats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace rlcpp
