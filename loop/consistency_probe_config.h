// The `probe` section of a train config (loop/consistency_probe.h runs it).
#pragma once

#include <cstdint>

namespace rlcpp {

struct ProbeConfig {
  int64_t prompts = 8;           // 0 = no probe
  double max_abs_dlogp = 1e-4;   // fp32 bound (kernels differ by float rounding only)
  uint64_t seed = 12345;

  template <class V> void visit(V& v) {
    v("prompts", prompts, "prompts of the consistency probe after each sync (0 = off)");
    v("max_abs_dlogp", max_abs_dlogp, "the run stops when the probe's max |logp engine - logp trainer| exceeds this");
    v("seed", seed, "sampling seed of the probe batch");
  }
};

}  // namespace rlcpp
