// The client side of the worker protocol (rollout/worker_service.h): spreads a request's prompts over N
// workers in contiguous chunks, keeping each prompt's id, and merges the results back in prompt order.
// Sampling is keyed by (seed, prompt id, sample index, position), so the samples equal one worker's.
// While it waits, a worker that sends neither a result nor a heartbeat for heartbeat_timeout_s, or no result
// within result_timeout_s, is declared dead; so is one whose process its WorkerSupervisor reports ended.
// Without a supervisor that is an error naming the worker; with one, the supervisor replaces the worker on
// the same endpoint, or retires it for good (a remote worker the trainer cannot restart), and its unfinished
// part is sent again with the same prompt ids (so the same samples) to an idle survivor, else the replacement,
// while the other workers' results are kept. When every worker is retired, generate fails. An error reply from a worker is rethrown with the worker named.
// A tcp endpoint beyond this machine needs CURVE keys (options.curve, core/curve.h); a worker that refuses the
// client's key (or disagrees on CURVE) is an error naming the worker and the reason at once, not a timeout.
#pragma once

#include <zmq.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/curve.h"
#include "core/wire.h"
#include "rollout/request.h"

namespace rlcpp {

struct WorkerClientOptions {
  WireLimits limits;
  double heartbeat_timeout_s = 30;  // silence from a busy worker that counts as death
  double result_timeout_s = 0;      // longest wait for one worker's result to a generate; 0 = no limit
  double reply_timeout_s = 10;      // for ping and shutdown replies, and for workers to announce themselves
  // Keys for CURVE (needed on a tcp endpoint beyond this machine): connecting, the client's pair and the workers'
  // public key; listening, the pair, the workers' public keys admitted and the ZAP handler of the context.
  CurveOptions curve;
  // connect(): each worker's own public key, in endpoint order, when the workers have key pairs of their own
  // (empty: curve.server_public for all).
  std::vector<std::string> server_publics;
  // generate hands prompts out in chunks of this many, each to the next idle worker (a fast worker takes more;
  // a failed worker's chunk goes to an idle survivor, else to its replacement); 0 = automatic: one chunk with one worker, else about four
  // chunks a worker (ceil(prompts / (4 workers))) but at least min(4, a worker's even share).
  int64_t chunk_prompts = 0;
  // listen(): workers that announce themselves serve at once (true), or only once admit()ted (false: the
  // trainer first sends a joining worker its weights).
  bool admit_on_join = true;
};

// A worker that failed while it owed a generate result.
struct WorkerFailure {
  int worker = -1;
  std::string name;            // the client's name for it (its endpoint)
  std::string what;            // "was killed by signal 9 (Killed)", "sent no result or heartbeat for 2.1 s ..."
  int64_t unfinished_prompts = 0;  // of the chunk it owed; sent again to an idle survivor, else the replacement
  std::string unit = "prompts";    // what unfinished_prompts counts: "prompts", or "session turns" (WorkerJob)
};

// What a supervisor did with a failed worker.
enum class Replacement {
  kReplaced,  // a fresh worker serves its endpoint
  kRetired,   // gone for good: generate sends it nothing more
};

// Whoever runs the workers (loop/rollout_backend.cpp for `rlcpp train`), consulted by generate.
class WorkerSupervisor {
 public:
  virtual ~WorkerSupervisor() = default;
  // "" while worker `worker`'s process runs; otherwise how it ended. Polled (every ~50 ms) while it is busy.
  virtual std::string exit_reason(int worker) = 0;
  // The worker failed: end it if it still runs and start a fresh one serving the same endpoint with the
  // weights the request is for (kReplaced), or give it up (kRetired), or throw (the generate call then fails
  // with that error).
  virtual Replacement replace(const WorkerFailure& failure) = 0;
  // The worker delivered a chunk: whatever failed before, it serves now.
  virtual void served(int worker) {}
};

// A unit of work WorkerClient::run_jobs hands to one worker at a time: a chunk of a generate, or the session turns
// of an episode runner's call (loop/worker_turns.h).
struct WorkerJob {
  int home = -1;  // the worker it goes to (its sessions live there); -1: whichever is idle first
  int64_t size = 0;  // its prompts or turns, for the failure a supervisor is told of
  std::string unit = "prompts";  // what `size` counts
  std::string reply_type;  // "result", "turns_result"
  // Its request to `worker` (each send builds it anew: after a failure it may go to another worker).
  std::function<WireMessage(int worker, uint64_t request_id)> message;
  // Its reply from `worker` (of reply_type, for this send); throws (WireError: a bad reply) to fail the call.
  std::function<void(int worker, const WireMessage& reply)> done;
  // Its worker `worker` failed before replying (optional): the job goes to another worker, or the replacement.
  std::function<void(int worker)> lost;
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
  // Whether worker `w` is retired (by retire, or by the supervisor in generate): it gets no more requests.
  bool retired(int w) const { return workers_[static_cast<size_t>(w)].retired; }
  void retire(int w) { workers_[static_cast<size_t>(w)].retired = true; }
  // Whether worker `w` may be sent requests (admitted and not retired).
  bool serving(int w) const { return workers_[static_cast<size_t>(w)].admitted && !retired(w); }
  // listen() with admit_on_join false: the workers that have announced themselves (during listen, or since, in
  // any call that receives) and are not admitted yet; admit one to let it serve.
  std::vector<int> joined() const;
  void admit(int w) { workers_[static_cast<size_t>(w)].admitted = true; }
  // What a connected worker's first message said (its heartbeat header: name, policy_version, what it
  // advertises) and the address it connected from (tcp: its IP; "" when the transport has none).
  const Json& hello(int w) const { return workers_[static_cast<size_t>(w)].hello; }
  const std::string& peer_address(int w) const { return workers_[static_cast<size_t>(w)].peer_address; }

  // `supervisor` (optional) replaces failed workers, or retires them; see the top of this file. Workers from
  // listen() can only be retired (nothing can restart a worker that connected from elsewhere).
  RolloutResult generate(const Request& request, WorkerSupervisor* supervisor = nullptr);
  // Runs `jobs` on the workers, each job on its home worker (or the first idle one), one job a worker at a time;
  // with the same fault handling as generate (a failed worker's job goes, homeless, to an idle survivor, else to
  // its replacement). An error reply is rethrown naming the worker.
  void run_jobs(std::vector<WorkerJob>& jobs, WorkerSupervisor* supervisor = nullptr);
  // One pong header per worker, in worker order.
  std::vector<Json> ping();
  // Asks every worker to exit and waits for each "bye".
  void shutdown();

 private:
  struct Worker {
    size_t socket = 0;         // index into sockets_
    std::string identity;      // routing id on a ROUTER socket; empty on a DEALER
    std::string name;          // a DEALER's endpoint
    bool retired = false;      // given up by the supervisor
    bool admitted = true;      // may be sent requests (listen without admit_on_join: once admitted)
    Json hello;                // a connected worker's first message header
    std::string peer_address;  // the address a connected worker's first message came from
  };
  struct Incoming {
    int worker = -1;
    WireMessage message;
  };

  WorkerClient(zmq::context_t& context, const WorkerClientOptions& options) : context_(&context), options_(options) {}
  // A fresh DEALER to a bound worker's endpoint, watched by a fresh `monitor`: what the replaced worker was sent
  // or had queued is dropped.
  zmq::socket_t open_dealer(int worker, HandshakeMonitor& monitor) const;
  // " (the last handshake failure)" of the worker's connection, or "": for a timeout's message.
  std::string handshake_note(int worker) const;
  void send(int worker, const WireMessage& message);
  // Throws naming the worker when the peer of sockets_[socket] refused our handshake (monitors_).
  void check_refused(size_t socket);
  // Waits up to timeout_ms for one message from any worker; false on timeout.
  bool receive(long timeout_ms, Incoming& in);
  // Sends `type` to every worker and collects the reply of that type from each.
  std::vector<Json> round_trip(const std::string& type, const std::string& reply_type);

  zmq::context_t* context_;
  WorkerClientOptions options_;
  std::vector<zmq::socket_t> sockets_;
  std::vector<HandshakeMonitor> monitors_;  // one per socket; watching only DEALERs
  bool router_ = false;
  std::vector<Worker> workers_;
  uint64_t next_request_id_ = 1;
};

}  // namespace rlcpp
