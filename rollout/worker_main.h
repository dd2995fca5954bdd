// The `rlcpp worker` process around a WorkerService (rollout/worker_service.h): loads the model, listens or
// connects, serves until `shutdown`, SIGTERM/SIGINT or its parent's death, and tells its launcher what happened
// in one JSON line each — {"event": "listening" | "connected", "endpoint", "weights_endpoint", "pid",
// "kv_bytes_per_token", "num_blocks"}, {"event": "stopped", "served"} or {"event": "error", "message"}
// (loop/worker_process.h reads them). Signals are read from a signalfd the serve loop polls, so a stop ends the
// loop between messages; a stop during start-up ends the process at once. The ipc socket files it bound are
// removed on the way out.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/curve.h"
#include "model/parameters.h"
#include "rollout/worker_service.h"

namespace rlcpp {

// What `rlcpp worker`'s options set (apps/cmd_worker.cpp documents each).
struct WorkerProcessConfig {
  std::string checkpoint, preset, bind, connect, weights, run_dir = "runs/worker", inject_fault;
  // A LoRA run's worker: the frozen base (a checkpoint directory) that the adapters in checkpoint/adapter, and
  // those each weight sync carries, are merged into (model/lora.h).
  std::string lora_base;
  // With lora_base (or a remote trainer's LoRA base message that asks for it): the engine keeps the base and
  // applies each version's adapters unmerged (model/lora_unmerged.h) instead of merging them.
  bool lora_unmerged = false;
  std::string curve_key, curve_server;      // a .key and a .pub file (core/curve.h)
  std::vector<std::string> curve_clients;  // .pub files
  uint64_t init_seed = 1;
  int64_t policy_version = 0;
  double throttle_ms = 0;  // a test and benchmark tool: sleep this long after every engine step (a slow worker)
  double max_message_mib = 1024;
  std::string dtype = "fp32", quantization = "none";
  bool batch_invariant = true;
  bool exit_with_parent = false;
  WorkerOptions worker;
};

// New weights the serve loop polls together with its request socket: the trainer's weight-sync subscriber.
// rollout/ does not include weightsync/ (docs/architecture.md's table), so the caller adapts its subscriber to this.
class WeightFeed {
 public:
  virtual ~WeightFeed() = default;
  virtual zmq::socket_t& socket() = 0;
  virtual std::string endpoint() const = 0;
  // Serves what arrived without waiting; calls install(weights, version) for each complete, verified version
  // (on the host, or on the engine's GPU).
  virtual void receive(const std::function<void(ParameterStore, int64_t)>& install) = 0;
  // From now on a LoRA base message (a remote trainer's rebase of a LoRA run: the frozen base, then the adapters)
  // is taken: `hook` reads its "lora" header field and returns the adapters' layout; install then receives the
  // base's parameters followed by the adapters', and every later version the adapters alone.
  virtual void take_lora_bases(std::function<std::vector<ParameterInfo>(const Json&)> hook) = 0;
};
// Binds a feed at `endpoint` for a model of `config` now at `version`, with the worker's CURVE keys, for an engine
// on `device` (a GPU's engine also takes weights that arrive on that GPU: cuda-ipc). `layout`, when not empty, is
// what every version carries instead of the model's parameters: a LoRA worker's adapters.
using WeightFeedFactory = std::function<std::unique_ptr<WeightFeed>(
    zmq::context_t& context, const std::string& endpoint, const ModelConfig& config, int64_t version,
    const CurveOptions& curve, const ExecContext& device, const std::vector<ParameterInfo>& layout)>;

// The process: returns its exit status (0 after a clean stop). Any error is printed as the "error" event line and
// rethrown. `weights` is called when config.weights names an endpoint.
int run_worker_process(WorkerProcessConfig& config, const WeightFeedFactory& weights);

// `--inject-fault ACTION:REQUEST:STEP` (tests of the trainer's fault handling): after engine step STEP of the
// REQUEST-th generate request the process ends abruptly (kill: SIGKILL to itself; exit: _exit(3), no cleanup)
// or hangs alive (stop: SIGSTOP to itself, until someone sends SIGCONT or SIGKILL).
std::function<void(int64_t, int64_t)> parse_fault(const std::string& spec);

}  // namespace rlcpp
