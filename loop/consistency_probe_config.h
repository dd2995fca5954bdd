// The `probe` section of a train config (loop/consistency_probe.h runs it).
#pragma once

#include <cstdint>

namespace rlcpp {

struct ProbeConfig {
  int64_t prompts = 8;           // 0 = no probe
  double max_abs_dlogp = 1e-4;       // batch-invariant engine: it must equal the trainer's forward in its numerics
  double max_abs_dlogp_blas = 0.1;   // numerics.batch_invariant = false: sum orders differ by design
  uint64_t seed = 12345;
  double layer_threshold = 1e-3;     // the "where it enters" locator: first stage whose max |difference| passes

  template <class V> void visit(V& v) {
    v("prompts", prompts, "prompts of the consistency probe after each sync (0 = off)");
    v("max_abs_dlogp", max_abs_dlogp,
      "the run stops when the probe's max |logp engine - logp of the trainer's forward in the rollout's numerics| "
      "exceeds this (batch-invariant engine: it is exactly 0 when the sync landed)");
    v("max_abs_dlogp_blas", max_abs_dlogp_blas,
      "the same bound when numerics.batch_invariant is false (the engine's OpenBLAS products sum in another "
      "order than the trainer's forward)");
    v("seed", seed, "sampling seed of the probe batch");
    v("layer_threshold", layer_threshold,
      "mixed numerics: probe_trainer/first_stage names the first stage (0 embedding, l+1 layer l, L+1 final "
      "norm, L+2 logits) whose max |hidden(rollout numerics) - hidden(trainer numerics)| exceeds this");
  }
};

}  // namespace rlcpp
