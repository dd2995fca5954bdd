#include "rollout/worker_service.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>

#include "core/metrics.h"

namespace rlcpp {

WorkerService::WorkerService(const Transformer& model, const ParameterStore& params, const WorkerOptions& options,
                             int64_t policy_version)
    : options_(options),
      engine_(model, params, options.engine, policy_version, context_for_device(options.device, "worker --device")) {
  RLCPP_CHECK(options_.heartbeat_interval_s > 0,
              "worker: heartbeat_interval_s must be positive, got " << options_.heartbeat_interval_s);
}

WorkerService::~WorkerService() {
  if (!socket_) return;
  const int linger_ms = 0;  // the C call: a destructor must not throw, whatever state the context is in
  zmq_setsockopt(socket_.handle(), ZMQ_LINGER, &linger_ms, sizeof linger_ms);
  socket_.close();
}

void WorkerService::open(zmq::context_t& context, zmq::socket_type type, const std::string& endpoint) {
  RLCPP_CHECK(!socket_, "worker: already bound or connected");
  socket_ = zmq::socket_t(context, type);
  router_ = type == zmq::socket_type::router;
  endpoint_ = endpoint;
  if (router_) {
    secure_bind(context, socket_, endpoint, options_.curve, "worker");
  } else {
    const bool curve = secure_connect(socket_, endpoint, options_.curve, "worker");
    handshakes_ = HandshakeMonitor(context, socket_, curve);
  }
  socket_.set(zmq::sockopt::linger, 1000);  // flush the last reply on exit, but never hang on a dead peer
  // A hard guard: ZeroMQ drops a single frame past this without telling us; everything up to it is read and
  // answered with an error when it breaks limits.max_message_bytes.
  socket_.set(zmq::sockopt::maxmsgsize, 2 * options_.limits.max_message_bytes);
}

std::string WorkerService::bind(zmq::context_t& context, const std::string& endpoint) {
  open(context, zmq::socket_type::router, endpoint);
  bind_endpoint(socket_, endpoint, "worker");
  return socket_.get(zmq::sockopt::last_endpoint);
}

void WorkerService::connect(zmq::context_t& context, const std::string& endpoint) {
  open(context, zmq::socket_type::dealer, endpoint);
  socket_.set(zmq::sockopt::immediate, 1);  // heartbeats are dropped, not queued, until the client is there
  try {
    socket_.connect(endpoint);
  } catch (const zmq::error_t& e) {
    RLCPP_FAIL("worker: cannot connect to '" << endpoint << "': " << e.what());
  }
}

bool WorkerService::stop_requested(const ServeControl& control) const {
  if (control.stop && control.stop->load()) return true;
  if (control.parent > 0 && ::getppid() != control.parent) return true;
  if (control.stop_fd >= 0) {
    pollfd p{control.stop_fd, POLLIN, 0};
    if (::poll(&p, 1, 0) > 0 && (p.revents & POLLIN)) return true;
  }
  return false;
}

void WorkerService::reply(const WireMessage& message) {
  // A router drops a reply to a peer that has gone; a connected worker's dealer would block until its client is
  // back, so it waits in ticks, stopping when asked to and giving up after reply_send_timeout_s.
  if (router_) {
    send_wire_message(socket_, envelope_, message);
    return;
  }
  Stopwatch waited;
  while (!send_wire_message(socket_, envelope_, message, /*dont_wait=*/true)) {
    const bool stop = control_ && stop_requested(*control_);
    if (stop || waited.seconds() >= options_.reply_send_timeout_s) {
      std::fprintf(stderr, "worker '%s': dropped a '%s' reply: the client at '%s' %s\n", options_.name.c_str(),
                   message.type().c_str(), endpoint_.c_str(),
                   stop ? "was away when the worker was told to stop" : "stayed away past reply_send_timeout_s");
      return;
    }
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLOUT, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(50));
  }
}

void WorkerService::reply_error(int64_t request_id, const std::string& message) {
  WireMessage m("error");
  m.header["request_id"] = request_id;
  m.header["message"] = message;
  m.header["worker"] = options_.name;
  reply(m);
}

void WorkerService::send_heartbeat(int64_t request_id, int64_t step, int64_t running) {
  WireMessage m("heartbeat");
  m.header["request_id"] = request_id;
  m.header["step"] = step;
  m.header["running"] = running;
  m.header["worker"] = options_.name;
  m.header["policy_version"] = engine_.policy_version();
  for (const auto& [key, value] : advertised_.items()) m.header[key] = value;
  send_wire_message(socket_, envelope_, m, /*dont_wait=*/true);
}

StepObserver WorkerService::step_observer(int64_t request_id, const ServeControl& control) {
  const int64_t number = ++requests_;
  auto beat = std::make_shared<Stopwatch>();
  return [this, number, beat, request_id, &control](const StepView& v) {
    if (options_.fault_hook) options_.fault_hook(number, v.step);
    if (stop_requested(control)) throw StopRequested{};
    if (beat->seconds() >= options_.heartbeat_interval_s) {
      send_heartbeat(request_id, v.step, v.scheduler.num_running());
      beat->reset();
    }
  };
}

TurnsResult WorkerService::run_turns(const TurnsCall& call, int64_t request_id, const ServeControl& control) {
  // Every id checked before anything changes: a refused call leaves the sessions as they were.
  std::map<int64_t, int64_t> after = call.reset ? std::map<int64_t, int64_t>{} : client_sessions_;
  for (int64_t id : call.closes) after.erase(id);  // closing one this worker no longer has is no error
  for (const TurnsCall::Open& o : call.opens)
    if (!after.emplace(o.session, -1).second)
      throw WireError("turns: session " + std::to_string(o.session) + " is open already");
  for (const TurnsCall::Append& a : call.appends)
    if (!after.count(a.session))
      throw WireError("turns: tokens appended to session " + std::to_string(a.session) + ", which is not open here");
  for (const TurnsCall::Turn& t : call.turns)
    if (!after.count(t.session))
      throw WireError("turns: a turn of session " + std::to_string(t.session) + ", which is not open here");

  if (call.reset) {
    for (const auto& [client, engine_session] : client_sessions_) engine_.close_session(engine_session);
    client_sessions_.clear();
  }
  for (int64_t id : call.closes) {
    const auto it = client_sessions_.find(id);
    if (it == client_sessions_.end()) continue;
    engine_.close_session(it->second);
    client_sessions_.erase(it);
  }
  for (const TurnsCall::Open& o : call.opens) client_sessions_[o.session] = engine_.open_session(o.spec);
  for (const TurnsCall::Append& a : call.appends) engine_.append(client_sessions_.at(a.session), a.tokens);
  std::vector<TurnRequest> turns;
  for (const TurnsCall::Turn& t : call.turns)
    turns.push_back({client_sessions_.at(t.session), turn_sampling(call.sampling, t.max_new_tokens, t.seed,
                                                                   call.stop_tokens)});
  TurnsResult out;
  out.turns = engine_.run_turns(turns, step_observer(request_id, control), &out.stats);
  for (size_t i = 0; i < out.turns.size(); ++i) out.turns[i].session = call.turns[i].session;
  return out;
}

bool WorkerService::handle(ReceivedFrames& received, const ServeControl& control) {
  if (!received.error.empty()) {
    reply_error(-1, received.error);
    return true;
  }
  int64_t request_id = -1;
  try {
    const WireMessage m = decode_wire_message(received.frames, options_.limits);
    request_id = header_request_id(m.header);
    const std::string type = m.type();
    if (type == "generate") {
      uint64_t id = 0;
      const Request request = decode_generate_request(m, engine_.model_config(), options_.request_limits, id);
      const RolloutResult result = engine_.generate(request, step_observer(static_cast<int64_t>(id), control));
      reply(encode_generate_result(result, id));
      ++served_;
    } else if (type == "turns") {
      uint64_t id = 0;
      const TurnsCall call = decode_turns_request(m, engine_.model_config(), options_.request_limits, id);
      reply(encode_turns_result(run_turns(call, static_cast<int64_t>(id), control), id));
    } else if (type == "ping") {
      WireMessage pong("pong");
      for (const auto& [key, value] : advertised_.items()) pong.header[key] = value;  // what it takes ("lora_sync")
      pong.header["request_id"] = request_id;
      pong.header["policy_version"] = engine_.policy_version();
      pong.header["served"] = served_;
      pong.header["worker"] = options_.name;
      pong.header["kv_bytes_per_token"] = engine_.kv_bytes_per_token();
      pong.header["num_blocks"] = engine_.num_blocks();
      pong.header["numerics"] = engine_.numerics().describe();
      reply(pong);
    } else if (type == "shutdown") {
      WireMessage bye("bye");
      bye.header["request_id"] = request_id;
      bye.header["served"] = served_;
      reply(bye);
      return false;
    } else {
      reply_error(request_id, "unknown message type '" + type + "' (expected generate, turns, ping or shutdown)");
    }
  } catch (const StopRequested&) {
    reply_error(request_id, "worker '" + options_.name + "' is shutting down; the request was not finished");
    return false;
  } catch (const std::exception& e) {
    reply_error(request_id, e.what());
  }
  return true;
}

int64_t WorkerService::serve(const ServeControl& control) {
  RLCPP_CHECK(socket_, "worker: serve before bind or connect");
  RLCPP_CHECK(options_.reply_send_timeout_s >= 0,
              "worker: reply_send_timeout_s must not be negative, got " << options_.reply_send_timeout_s);
  control_ = &control;
  struct ClearControl {
    const ServeControl*& control;
    ~ClearControl() { control = nullptr; }
  } clear_control{control_};
  const long tick_ms = std::clamp<long>(static_cast<long>(options_.heartbeat_interval_s * 1000), 1, 100);
  Stopwatch since_beat;
  if (!router_) send_heartbeat(-1, 0, 0);  // hello: a connected worker announces itself
  ReceivedFrames received;
  while (!stop_requested(control)) {
    std::vector<zmq::pollitem_t> items = {{socket_.handle(), 0, ZMQ_POLLIN, 0}};
    const size_t extra_item = control.extra_socket ? items.size() : 0;
    if (control.extra_socket) items.push_back({control.extra_socket->handle(), 0, ZMQ_POLLIN, 0});
    const size_t stop_item = control.stop_fd >= 0 ? items.size() : 0;
    if (control.stop_fd >= 0) items.push_back({nullptr, control.stop_fd, ZMQ_POLLIN, 0});
    const size_t handshake_item = handshakes_.handle() ? items.size() : 0;
    if (handshakes_.handle()) items.push_back({handshakes_.handle(), 0, ZMQ_POLLIN, 0});
    zmq::poll(items.data(), items.size(), std::chrono::milliseconds(tick_ms));
    if (stop_item > 0 && (items[stop_item].revents & ZMQ_POLLIN)) break;
    if (handshake_item > 0 && (items[handshake_item].revents & ZMQ_POLLIN)) {
      const std::string refused = handshakes_.refusal();
      RLCPP_CHECK(refused.empty(), "worker: the client at '" << endpoint_ << "' refused this worker: " << refused);
    }
    if (extra_item > 0 && (items[extra_item].revents & ZMQ_POLLIN)) control.on_extra();
    if (!(items[0].revents & ZMQ_POLLIN)) {
      if (!router_ && since_beat.seconds() >= options_.heartbeat_interval_s) {
        envelope_.clear();
        send_heartbeat(-1, 0, 0);
        since_beat.reset();
      }
      continue;
    }
    if (!receive_frames(socket_, router_ ? 1 : 0, options_.limits, 0, received)) continue;
    envelope_ = std::move(received.envelope);
    if (!handle(received, control)) break;
  }
  socket_.close();
  return served_;
}

}  // namespace rlcpp
