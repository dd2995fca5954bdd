// A scaling model of `rlcpp train` (docs/scaling.md): from one run's measured step — how long its rollout side
// (generation + reward), its learning (log-prob passes + updates), weight sync, probe and the rest took, on the
// layout it ran on (rollout workers, trainer ranks, threads, cores) — predicts the step time and the rollout's
// share as workers and trainer ranks grow, and says when the weight sync or the gradient all-reduce dominates.
//
// The model: the rollout and the learning are core-seconds, spread over the cores their processes can use
// (workers x threads, ranks x threads, capped by the machine's cores when they share one); the sync publishes
// the weights to each worker in turn (so it grows with the workers); the all-reduce of the 4N gradient bytes is
// a ring's: 2 (R-1)/R x bytes / bandwidth + a latency per bucket (one bucket a layer, plus one). Synchronous,
// a step is their sum; async, the rollout runs behind the learning, so a step is the longer of the two sides,
// and never shorter than all the core-seconds over the cores they share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"

namespace rlcpp {

// Where a run ran.
struct ScalingLayout {
  int64_t workers = 1;         // rollout worker processes (0: the colocated engine, in the lead rank)
  int64_t ranks = 1;           // trainer ranks
  int64_t worker_threads = 1;  // OpenMP threads of each worker (of the colocated engine)
  int64_t rank_threads = 1;    // OpenMP threads of each trainer rank
  int64_t cores = 0;           // cores shared by all of them; 0 = each process on cores of its own (a cluster)
  bool async = false;          // async.max_staleness >= 1
};

// One run's step, in seconds: each part's mean over the middle half of its timed steps (by step time).
struct ScalingBase {
  ScalingLayout layout;
  double rollout_s = 0;  // the rollout side: generation + reward (an async run's background draws)
  double learn_s = 0;    // old/ref log-probs, values, advantages, updates, without the all-reduce wait
  double sync_s = 0;     // weight sync, all workers
  double fixed_s = 0;    // probe and the rest (the mismatch forward too), not split over ranks
  double step_s = 0;     // measured
  double parameters = 0;
  int64_t layers = 1;
};

struct ScalingLinks {
  double bandwidth_bytes_per_s = 10e9;  // the all-reduce's and a weight publish's link
  double latency_s = 20e-6;             // per all-reduce bucket
};

struct ScalingPrediction {
  ScalingLayout layout;
  double rollout_s = 0, learn_s = 0, allreduce_s = 0, sync_s = 0, fixed_s = 0;
  double step_s = 0;
  double rollout_share = 0;  // rollout_s / step_s (synchronous: the rollout's share of the step; async: how busy
                             // the rollout side is)
  std::string dominant;      // the largest part: "rollout", "learning", "weight sync" or "all-reduce"
};

// The base of a run's metrics records (the middle half of the records after `skip_steps` by step time, eval
// and checkpoint left out); `parameters` and `layers` from its ledger and config. Throws naming the key a record
// lacks.
ScalingBase scaling_base_from_records(const std::vector<Json>& metrics, int64_t skip_steps, double parameters,
                                      int64_t layers, bool async);

ScalingPrediction predict_step(const ScalingBase& base, const ScalingLayout& layout, const ScalingLinks& links);

}  // namespace rlcpp
