// The client side of the worker protocol (rollout/worker_service.h): spreads a request's prompts over N
// workers in contiguous chunks, keeping each prompt's id, and merges the results back in prompt order.
// Sampling is keyed by (seed, prompt id, sample index, position), so the samples equal one worker's.
// While it waits, a worker that sends neither a result nor a heartbeat for heartbeat_timeout_s is declared
// dead (an error naming it); an error reply from a worker is rethrown with the worker named.
#pragma once

#include <zmq.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "core/wire.h"
#include "rollout/request.h"

namespace rlcpp {

struct WorkerClientOptions {
  WireLimits limits;
  double heartbeat_timeout_s = 30;  // silence from a busy worker that counts as death
  double reply_timeout_s = 10;      // for ping and shutdown replies, and for workers to announce themselves
  bool allow_remote = false;
};

class WorkerClient {
 public:
  // Workers that bound their endpoints (`rlcpp worker --bind E`): one DEALER per endpoint.
  static WorkerClient connect(zmq::context_t& context, const std::vector<std::string>& endpoints,
                              const WorkerClientOptions& options = {});
  // Workers that connect to us (`rlcpp worker --connect E`): binds a ROUTER at `endpoint` and waits until
  // `expected` workers have announced themselves. Returns the bound endpoint through `bound` when non-null.
  static WorkerClient listen(zmq::context_t& context, const std::string& endpoint, int expected,
                             const WorkerClientOptions& options = {}, std::string* bound = nullptr);

  int num_workers() const { return static_cast<int>(workers_.size()); }

  RolloutResult generate(const Request& request);
  // One pong header per worker, in worker order.
  std::vector<Json> ping();
  // Asks every worker to exit and waits for each "bye".
  void shutdown();

 private:
  struct Worker {
    size_t socket = 0;         // index into sockets_
    std::string identity;      // routing id on a ROUTER socket; empty on a DEALER
    std::string name;
  };
  struct Incoming {
    int worker = -1;
    WireMessage message;
  };

  explicit WorkerClient(const WorkerClientOptions& options) : options_(options) {}
  void send(int worker, const WireMessage& message);
  // Waits up to timeout_ms for one message from any worker; false on timeout.
  bool receive(long timeout_ms, Incoming& in);
  // Sends `type` to every worker and collects the reply of that type from each.
  std::vector<Json> round_trip(const std::string& type, const std::string& reply_type);

  WorkerClientOptions options_;
  std::vector<zmq::socket_t> sockets_;
  bool router_ = false;
  std::vector<Worker> workers_;
  uint64_t next_request_id_ = 1;
};

}  // namespace rlcpp
