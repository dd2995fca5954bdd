// Where rollouts run (rollout.placement): `colocated`, an Engine inside the trainer process reading the
// trainer's own weights (sync = an inproc version bump), or `split`, one `rlcpp worker` child process over
// ipc:// in the run directory per `rollout.num_workers` (the request's prompts split among them), each fed by
// the zmq weight-sync channel after every update (or GPU to GPU by cuda-ipc, announced over zmq). A split worker that exits, is killed or stops answering is
// restarted and its unfinished prompts re-issued (loop/README.md "Fault handling"); or `remote`, `rlcpp worker`
// processes the user started (other hosts, CURVE-authenticated; bound at given endpoints, or joining a trainer
// that listens), fed like split ones but never restarted by the trainer: a failed one is dropped and the others
// carry on; the last one failing stops the run, to be resumed once the workers serve again.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "loop/engine_turns.h"
#include "loop/train_config.h"
#include "model/transformer.h"
#include "rollout/engine.h"
#include "weightsync/zmq_channel.h"

namespace rlcpp {

class RolloutBackend {
 public:
  virtual ~RolloutBackend() = default;
  virtual RolloutResult generate(const Request& request) = 0;
  // `params` now hold `version`; returns once the engine side samples with them (acknowledged).
  virtual void sync(const ParameterStore& params, int64_t version) = 0;
  // The engine's sessions for multi-turn episodes (loop/engine_turns.h), each turn sampling with `base` (its
  // temperature, top-k/p, log-prob space) under its own limit, stops and seed. Throws naming rollout.placement
  // where the placement cannot run them.
  virtual std::unique_ptr<RolloutTurnEngine> turn_engine(const SamplingParams& base);
  // Step `step` of the run begins: faults are reported under it and the per-step restart limit starts over.
  virtual void begin_step(int64_t step) {}
  // Worker faults handled, as step metrics: rollout/worker_failures_step and rollout/reissued_prompts (since
  // begin_step), rollout/worker_restarts (since the backend started). Empty where nothing can fail (colocated).
  virtual std::map<std::string, double> fault_metrics() const { return {}; }
};

// The engine reads `params` (which must outlive it), which hold policy `version`, with `model` (the policy in the
// rollout's numerics). With `own_weights` it reads a copy instead, which each sync overwrites with `params`: the
// async pipeline's engine generates while the trainer updates its weights. The engine runs on `context` (a
// GPU's: KV cache and prepared weights there, each sync re-preparing them).
// `unmerged` (a LoRA run with rollout.lora_merge false): the engine decodes the frozen base `unmerged->base`
// (prepared once) with the adapters `unmerged->adapters` applied unmerged, a snapshot of them taken at each sync.
struct UnmergedRollout {
  const ParameterStore* base = nullptr;
  const LoraAdapters* adapters = nullptr;
};
std::unique_ptr<RolloutBackend> make_colocated_rollout(const Transformer& model, const ParameterStore& params,
                                                       const EngineConfig& engine, int64_t version = 0,
                                                       bool own_weights = false,
                                                       const ExecContext& context = ExecContext::cpu(),
                                                       UnmergedRollout unmerged = {});

// The weights a trainer updates where it computes, and its context there: what a cuda-ipc sync exports.
struct TrainerDeviceWeights {
  const ParameterStore* weights = nullptr;  // PolicyUpdater::device_weights()
  const ExecContext* context = nullptr;
};

// Starts rollout.num_workers workers on `checkpoint` (the policy at `version`), worker i serving at
// ipc://RUN_DIR/worker<i>.ipc and taking weights at ipc://RUN_DIR/worker<i>_weights.ipc;
// rollout.worker_binary "" = this executable. A worker restarted during generate is brought to the weights
// last passed to sync (or `params` before any), so those must hold that version whenever generate runs.
// The workers compute in `numerics` (rlcpp worker --dtype/--quantization/--batch-invariant) on rollout.device
// (--device; "" is the CPU here: TrainConfig::rollout_device resolves a run's). With `own_weights`
// (the async pipeline, whose draws run while the trainer updates `params`) the backend keeps a copy of the
// weights of each sync, and a restarted worker is brought to that copy.
// rollout.weight_sync "cuda-ipc": each sync exports `device` (on the GPU the workers use; required then) instead
// of sending `params`' bytes; a restarted worker is brought to the last export.
// `adapters` (a LoRA run, model/lora.h): each worker starts from the run's frozen base (checkpoints/reference) and
// the checkpoint's adapter/, and a weight sync carries the adapters alone (over zmq), which it merges into the base.
std::unique_ptr<RolloutBackend> make_split_rollout(const RolloutSection& rollout, const std::string& run_dir,
                                                   const std::string& checkpoint, const ParameterStore& params,
                                                   int64_t version, const ModelNumerics& numerics = {},
                                                   bool own_weights = false, TrainerDeviceWeights device = {},
                                                   const LoraAdapters* adapters = nullptr);

// Connects to the workers of rollout.remote (bound at its endpoints, started by the user), or listens at
// rollout.remote.listen for workers that join (min_workers before it returns), checks that each answers and
// computes in `numerics`, and brings every one to `params` at `version` (whatever it held).
// `run_dir` is named in the failure messages (the run to resume). A LoRA run (`adapters` and its frozen `base`)
// sends each worker that takes them (its pong says "lora_sync") the base once, in a LoRA base message, and then
// every version's adapters alone; the worker merges them as the trainer does.
std::unique_ptr<RolloutBackend> make_remote_rollout(const RolloutSection& rollout, const std::string& run_dir,
                                                    const ParameterStore& params, int64_t version,
                                                    const ModelNumerics& numerics = {},
                                                    const LoraAdapters* adapters = nullptr,
                                                    const LoraBase* base = nullptr);

// How split and remote rollouts publish `params`: chunks no larger than the model, acknowledgement within
// rollout.worker_timeout_s.
ZmqPublisherOptions worker_publisher_options(const RolloutSection& rollout, const ParameterStore& params);

}  // namespace rlcpp
