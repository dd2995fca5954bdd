// `rlcpp bench rollout --numerics fp32,bf16,...`: the same rollout shape through engines in several numerics
// (model/numerics.h), timed in alternating rounds on this shared machine, with each one's KV bytes per token,
// the weight bytes a decode step reads, its distance from that step's bandwidth floor, and the mismatch of its
// samples against the first entry's numerics (the training forward on the same tokens).
#pragma once

#include <string>

#include "bench/rollout_bench.h"

namespace rlcpp::bench {

// `numerics`: comma-separated specs DTYPE[+QUANT][/blas], e.g. "fp32,bf16,bf16+int8,fp32+fp8_e4m3,fp32/blas"
// (blas: numerics.batch_invariant = false). The first is the baseline of the ratios. Returns 0.
int run_rollout_numerics_bench(const RolloutBenchOptions& options, const std::string& numerics);

}  // namespace rlcpp::bench
