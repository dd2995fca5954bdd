// The gradient all-reduce of one data-parallel optimizer step (trainer/communicator.h), in buckets overlapped
// with the backward: each decoder layer's span is started as the backward of the rank's last micro-batch
// completes it (last layer first), then the rest of the buffer (embeddings, final norm, head) — the same buckets
// in the same order on every rank, so the sums are the same bits on all of them.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "model/parameters.h"
#include "model/transformer.h"
#include "trainer/communicator.h"
#include "trainer/loss_metrics.h"

namespace rlcpp {

class GradientBuckets {
 public:
  // `gathered` non-null (ordered): instead of an all-reduce, every rank's buckets are gathered into it and added
  // up here in rank order — the sum a single process makes of the same shards (trainer.grad_shards), so N ranks
  // give its bits. It is resized to the ranks' copies of the whole gradient (size() x the model) and may be
  // kept from step to step. `layer_spans`: each layer's span of `grads`, layer 0 first (the model's,
  // Transformer::layer_param_spans, or a LoRA run's adapters', LoraAdapters::layer_spans), the buckets that start as
  // the backward completes them; the rest of the buffer goes at the end.
  GradientBuckets(Communicator& comm, std::vector<std::pair<int64_t, int64_t>> layer_spans, ParameterStore& grads,
                  std::vector<float>* gathered = nullptr);
  // For the backward of the rank's last micro-batch: starts each layer's bucket as it completes.
  Transformer::GradsReadyFn on_ready();
  // Starts the buckets not started yet (every one on a rank without micro-batches), then the rest of the
  // buffer, and waits for all: `grads` then holds the sum over the ranks. Returns the seconds waited.
  double finish();

 private:
  Communicator& comm_;
  ParameterStore& grads_;
  std::vector<std::pair<int64_t, int64_t>> layers_;  // layer spans, layer 0 first
  std::vector<std::pair<int64_t, int64_t>> rest_;    // the buffer outside every layer, in order
  int64_t started_layers_ = 0;                       // from the last layer down
  std::vector<float>* gathered_;                     // ordered: bucket [b, e) of rank r at size * b + r * (e - b)

  void start(int64_t begin, int64_t end);
};

// The micro-batches [begin, end) of `count` that rank `rank` of `size` runs: contiguous shards, the first
// ranks one larger when the count does not divide.
std::pair<size_t, size_t> rank_shard(size_t count, int rank, int size);

// Sums the ranks' loss, token count and loss metrics (merged in rank order): every rank gets the same values.
void reduce_loss_over_ranks(Communicator& comm, double& loss, int64_t& tokens, LossMetrics& metrics);

}  // namespace rlcpp
