// Exceptions out of OpenMP regions. An exception that leaves a parallel region's block ends the process
// (std::terminate, signal 6: GCC compiles the region as must-not-throw), so a body that may throw records the
// exception in a slot of its own, one per thread (or per task), and the caller rethrows after the region.
//
//   ParallelErrors errors(threads);
//   #pragma omp parallel num_threads(threads)
//   {
//     const size_t t = omp_get_thread_num();
//   #pragma omp for
//     for (int64_t i = 0; i < n; ++i) errors.run(t, [&] { work(i); });
//   }
//   errors.rethrow_first();
//
// A worksharing loop cannot be left early, so a thread that failed skips its remaining iterations (run does
// nothing for a failed slot) while the others finish theirs.
#pragma once

#include <cstddef>
#include <exception>
#include <vector>

namespace rlcpp {

class ParallelErrors {
 public:
  explicit ParallelErrors(size_t slots) : errors_(slots) {}

  // Runs body() unless `slot` has already failed, keeping what it throws. Each slot has one writer (its
  // thread or task), so no two threads touch the same element.
  template <class Body> void run(size_t slot, const Body& body) noexcept {
    if (errors_[slot]) return;
    try {
      body();
    } catch (...) {
      errors_[slot] = std::current_exception();
    }
  }
  bool failed(size_t slot) const { return static_cast<bool>(errors_[slot]); }

  // After the region: rethrows the exception of the lowest failed slot, a choice that does not depend on timing
  // (with a slot per thread and a static schedule: the earliest failing iteration's).
  void rethrow_first() const {
    for (const std::exception_ptr& e : errors_)
      if (e) std::rethrow_exception(e);
  }

 private:
  std::vector<std::exception_ptr> errors_;
};

}  // namespace rlcpp
