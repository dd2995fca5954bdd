#pragma once

#include <cstdint>
#include <string>

namespace rlcpp::bench {

struct RolloutBenchOptions {
  std::string preset = "tiny";
  int64_t prompts = 64;
  int64_t group = 8;
  int64_t prompt_len = 10;
  int64_t new_tokens = 8;
  int64_t long_tail_sequences = 64;  // the long-tail shape: few sequences, long responses
  int64_t long_tail_new_tokens = 54;
  int64_t shared_prompt_len = 40;    // the memory figure with a prompt longer than a block
  // W1: continuous against static batching of the same single-sample requests, ending at EOS (0 = skip)
  int64_t batching_prompts = 256;
  int64_t batching_max_seqs = 64;
  int64_t batching_new_tokens = 54;
  int64_t block_size = 16;
  int iters = 10;  // timed runs per shape on each side of the peer
  bool peer = true;
  std::string peers = "torch";  // torch (Debian's PyTorch 1.13 peer, W1 fp32), llama.cpp, vllm, hf (GPU)
  std::string dtype = "fp32";   // rlcpp's compute dtype and the peers' (fp32 or bf16)
  std::string device = "cpu";   // rlcpp's engine: cpu, cuda or cuda:N (the hf peer runs on the same GPU)
  bool batch_invariant = true;  // rlcpp's numerics.batch_invariant (false: cuBLAS / OpenBLAS products)
};

// Rollout tokens/s (fixed-length sampling at temperature 1) on the W1 shapes of docs/benchmarks.md (the long tail
// skipped when long_tail_sequences is 0) next to the peers of `peers` on the same weights, plus the KV-cache
// memory report and continuous against static batching with the KV slots each layout fills (W1, with the long
// tail). Returns 0.
int run_rollout_bench(const RolloutBenchOptions& options);

}  // namespace rlcpp::bench
