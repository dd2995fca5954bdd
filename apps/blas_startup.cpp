#include "apps/blas_startup.h"

#include <unistd.h>

#include <cstdlib>

namespace rlcpp::cli {

void ensure_blas_core_type(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr || std::getenv("RLCPP_BLAS_REEXEC") != nullptr) return;
  const char* core = nullptr;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) core = "SkylakeX";
  else if (__builtin_cpu_supports("avx2")) core = "Haswell";
#endif
  if (core == nullptr) return;
  setenv("OPENBLAS_CORETYPE", core, 1);
  setenv("RLCPP_BLAS_REEXEC", "1", 1);  // never loop, even if exec fails half way
  // Idle OpenMP threads sleep instead of spinning against the other core's work.
  setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
  execv("/proc/self/exe", argv);
  // exec failed: carry on with the default kernels.
}

}  // namespace rlcpp::cli
