#pragma once

#include <string>

namespace rlcpp::bench {

struct TrainBenchOptions {
  std::string preset = "tiny";
  int64_t batch = 512;
  int64_t seq = 18;
  int iters = 10;
  bool peer = true;
  std::string peers = "torch";  // torch (Debian's PyTorch 1.13 peer), pytorch2 (eager and torch.compile)
};

// fwd+bwd+AdamW tokens/s on random tokens, the sgemm peak and MFU, next to the peers of `peers`. Returns 0.
int run_train_bench(const TrainBenchOptions& options);

}  // namespace rlcpp::bench
