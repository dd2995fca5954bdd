// Where rollouts run (rollout.placement): `colocated`, an Engine inside the trainer process reading the
// trainer's own weights (sync = an inproc version bump), or `split`, one `rlcpp worker` child process over
// ipc:// in the run directory per `rollout.num_workers` (the request's prompts split among them), each fed by
// the zmq weight-sync channel after every update.
#pragma once

#include <memory>
#include <string>

#include "loop/train_config.h"
#include "model/transformer.h"
#include "rollout/engine.h"

namespace rlcpp {

class RolloutBackend {
 public:
  virtual ~RolloutBackend() = default;
  virtual RolloutResult generate(const Request& request) = 0;
  // `params` now hold `version`; returns once the engine side samples with them (acknowledged).
  virtual void sync(const ParameterStore& params, int64_t version) = 0;
};

// The engine reads `params` (which must outlive it), which hold policy `version`.
std::unique_ptr<RolloutBackend> make_colocated_rollout(const Transformer& model, const ParameterStore& params,
                                                       const EngineConfig& engine, int64_t version = 0);

// Starts rollout.num_workers workers on `checkpoint` (the policy at `version`), worker i serving at
// ipc://RUN_DIR/worker<i>.ipc and taking weights at ipc://RUN_DIR/worker<i>_weights.ipc;
// rollout.worker_binary "" = this executable.
std::unique_ptr<RolloutBackend> make_split_rollout(const RolloutSection& rollout, const std::string& run_dir,
                                                   const std::string& checkpoint, const ParameterStore& params,
                                                   int64_t version);

}  // namespace rlcpp
