// The rollout worker: an Engine behind a ZeroMQ socket (`rlcpp worker`). Protocol (core/wire.h framing,
// payloads in rollout/request_wire.h):
//   client -> worker   generate {request_id, n, sampling} + prompts   -> result {request_id, stats} + samples
//                      turns {request_id, reset, sampling, ...}        -> turns_result {request_id, stats} + turns
//                        (the sessions of multi-turn episodes, kept between calls: rollout/turns_wire.h)
//                      ping                                           -> pong {policy_version, served, name}
//                      shutdown                                       -> bye, then the worker exits
//   worker -> client   heartbeat {request_id, step, running} every heartbeat_interval_s while generating;
//                      when connected (--connect) also hello on start and heartbeats while idle
//                      error {request_id (-1 when unknown), message} for any message it cannot serve
// Bound (--bind) the worker is a ROUTER, so any number of clients' DEALERs may connect; connected
// (--connect) it is a DEALER that a client's ROUTER load-balances over. An invalid message gets an error
// reply and the worker keeps serving. It stops on shutdown, when `stop` is set or `stop_fd` (a signalfd for
// SIGTERM) becomes readable; a request in flight then gets an error reply.
// A tcp endpoint beyond this machine needs CURVE keys (core/curve.h): bound, the worker admits only the client
// public keys it was given (a peer without one gets no reply, its messages never reach the worker); connected, it
// must know the client's public key, and a client that refuses its key ends serve with an error saying so.
#pragma once

#include <sys/types.h>
#include <zmq.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "core/curve.h"
#include "core/wire.h"
#include "rollout/engine.h"
#include "rollout/request_wire.h"
#include "rollout/turns_wire.h"

namespace rlcpp {

struct WorkerOptions {
  EngineConfig engine;
  std::string device = "cpu";  // where the engine runs: cpu, cuda or cuda:N (--device)
  WireLimits limits;
  RequestLimits request_limits;
  double heartbeat_interval_s = 1.0;
  // A connected worker (--connect) whose client has gone away cannot send: it waits this long for the client to
  // come back before it drops the reply (the client, if it returns, asks again), and keeps serving.
  double reply_send_timeout_s = 30.0;
  // Keys for CURVE (needed on a tcp endpoint beyond this machine); when binding with them, curve.zap must be the
  // ZAP handler of the context bound in.
  CurveOptions curve;
  std::string name = "worker";
  // Fault injection for tests (`rlcpp worker --inject-fault`, loop/README.md "Fault handling"): called after
  // every engine step with the number of the generate or turns request being served (from 1) and the step within
  // it.
  std::function<void(int64_t request, int64_t step)> fault_hook;
};

struct ServeControl {
  const std::atomic<bool>* stop = nullptr;
  int stop_fd = -1;  // readable = stop (e.g. a signalfd)
  // When > 0: stop once the process's parent is no longer this pid (the controller that spawned the worker
  // died, even by SIGKILL, and the worker was re-parented), instead of serving nobody forever.
  pid_t parent = 0;
  // A second ZeroMQ socket polled with the worker's own (e.g. a weight-sync subscriber); on_extra runs when it
  // is readable, between requests, so what it does (a weight swap) never lands inside a generate call.
  zmq::socket_t* extra_socket = nullptr;
  std::function<void()> on_extra;
};

class WorkerService {
 public:
  WorkerService(const Transformer& model, const ParameterStore& params, const WorkerOptions& options,
                int64_t policy_version = 0);
  // Closes a socket that serve did not (bind failed, serve threw) without waiting to flush it, so that the
  // context it belongs to can terminate: destroy the service before its context.
  ~WorkerService();
  WorkerService(const WorkerService&) = delete;
  WorkerService& operator=(const WorkerService&) = delete;

  // Exactly one of bind / connect, before serve. bind returns the endpoint actually bound (a tcp port of
  // '*' resolved), which clients connect to.
  std::string bind(zmq::context_t& context, const std::string& endpoint);
  void connect(zmq::context_t& context, const std::string& endpoint);

  // Serves until shutdown or stop; returns the number of generate requests answered with a result.
  int64_t serve(const ServeControl& control = {});
  // Adds `key: value` to every heartbeat and pong (before serve): a connected worker tells the trainer that listens
  // where it takes weights ("weights_endpoint") and its CURVE public key ("curve_public"); any worker that it takes
  // a LoRA run's base and then adapters alone ("lora_sync").
  void advertise(const std::string& key, const Json& value) { advertised_[key] = value; }

  Engine& engine() { return engine_; }

 private:
  struct StopRequested {};
  bool stop_requested(const ServeControl& control) const;
  void open(zmq::context_t& context, zmq::socket_type type, const std::string& endpoint);
  void reply(const WireMessage& message);
  void reply_error(int64_t request_id, const std::string& message);
  void send_heartbeat(int64_t request_id, int64_t step, int64_t running);
  // Handles one received message; returns false on shutdown.
  bool handle(ReceivedFrames& received, const ServeControl& control);
  // The engine's per-step callback while it serves request `request_id` (the next one counted): the fault hook,
  // stop requests, heartbeats.
  StepObserver step_observer(int64_t request_id, const ServeControl& control);
  // A turns call on the client's sessions (client_sessions_); throws WireError, changing nothing, for an id
  // that is not (or already) open.
  TurnsResult run_turns(const TurnsCall& call, int64_t request_id, const ServeControl& control);

  WorkerOptions options_;
  Json advertised_ = Json::object();
  Engine engine_;
  zmq::socket_t socket_;
  bool router_ = false;  // bound: replies go to the sender's identity
  std::string endpoint_;
  HandshakeMonitor handshakes_;  // connected: a client that refuses our CURVE key
  std::vector<zmq::message_t> envelope_;  // of the message being handled
  int64_t served_ = 0;
  int64_t requests_ = 0;  // generate and turns requests received, answered or not
  std::map<int64_t, int64_t> client_sessions_;  // a client's session id -> the engine's
  const ServeControl* control_ = nullptr;  // of the serve call in progress
};

}  // namespace rlcpp
