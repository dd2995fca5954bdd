#pragma once

#include <string>

namespace rlcpp::bench {

struct TrainBenchOptions {
  std::string preset = "tiny";
  int64_t batch = 512;
  int64_t seq = 18;
  int iters = 10;
  bool peer = true;
};

// fwd+bwd+AdamW tokens/s on random tokens, the sgemm peak and MFU, next to the PyTorch peer. Returns 0.
int run_train_bench(const TrainBenchOptions& options);

}  // namespace rlcpp::bench
