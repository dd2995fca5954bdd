#pragma once

#include <string>
#include <vector>

#include "bench/real_peers.h"
#include "model/model_config.h"
#include "model/packed_batch.h"
#include "trainer/update_step.h"

namespace rlcpp::bench {

struct TrainBenchOptions {
  std::string preset = "tiny";
  int64_t batch = 512;
  int64_t seq = 18;
  int iters = 10;
  bool peer = true;
  std::string peers = "torch";  // torch (Debian's PyTorch 1.13 peer), pytorch2 (eager and torch.compile);
                                // on a GPU: pytorch-gpu (the machine's PyTorch on that GPU, autocast for bf16)
  std::string device = "cpu";   // cpu, cuda or cuda:N
  std::string dtype = "fp32";   // the trainer's compute dtype on a GPU: fp32 or bf16 (tensor cores)
};

// The benchmark's step: `batch` sequences of `seq` random tokens of `config`'s vocabulary (seeded) as one
// micro-batch, and the loss, the token mean of -log p over every scored position (what both peers compute).
struct TrainBenchBatch {
  std::vector<PackedBatch> micro;
  int64_t scored = 0;  // positions with a target
  MicroLossFn token_mean() const;
};
TrainBenchBatch random_train_batch(const ModelConfig& config, int64_t batch, int64_t seq);
// A PyTorch training peer's two rows (eager, torch.compile), each noting its MFU against `peak_flops` (FLOP/s).
std::vector<PeerFigure> train_peer_figures(const PeerRun& run, double flops_per_token, double peak_flops);

// fwd+bwd+AdamW tokens/s on random tokens, the sgemm peak and MFU, next to the peers of `peers`; on a GPU
// (device_train_bench.cpp) against that GPU's measured cuBLAS peak in the dtype. Returns 0.
int run_train_bench(const TrainBenchOptions& options);
int run_device_train_bench(const TrainBenchOptions& options);

}  // namespace rlcpp::bench
