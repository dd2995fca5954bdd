#include "rollout/worker_client.h"

#include <algorithm>
#include <map>

#include "core/metrics.h"
#include "rollout/request_wire.h"

namespace rlcpp {

namespace {

std::string printable(const std::string& identity) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : identity) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out;
}

}  // namespace

WorkerClient WorkerClient::connect(zmq::context_t& context, const std::vector<std::string>& endpoints,
                                   const WorkerClientOptions& options) {
  RLCPP_CHECK(!endpoints.empty(), "worker client: no worker endpoints given");
  WorkerClient c(options);
  for (const std::string& e : endpoints) {
    check_local_endpoint(e, options.allow_remote);
    zmq::socket_t s(context, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 1000);
    s.set(zmq::sockopt::maxmsgsize, 2 * options.limits.max_message_bytes);
    try {
      s.connect(e);
    } catch (const zmq::error_t& err) {
      RLCPP_FAIL("worker client: cannot connect to '" << e << "': " << err.what());
    }
    c.workers_.push_back({c.sockets_.size(), "", e});
    c.sockets_.push_back(std::move(s));
  }
  return c;
}

WorkerClient WorkerClient::listen(zmq::context_t& context, const std::string& endpoint, int expected,
                                  const WorkerClientOptions& options, std::string* bound) {
  RLCPP_CHECK(expected >= 1, "worker client: expected workers must be >= 1, got " << expected);
  check_local_endpoint(endpoint, options.allow_remote);
  WorkerClient c(options);
  c.router_ = true;
  zmq::socket_t s(context, zmq::socket_type::router);
  s.set(zmq::sockopt::linger, 1000);
  s.set(zmq::sockopt::maxmsgsize, 2 * options.limits.max_message_bytes);
  try {
    s.bind(endpoint);
  } catch (const zmq::error_t& err) {
    RLCPP_FAIL("worker client: cannot bind '" << endpoint << "': " << err.what());
  }
  if (bound) *bound = s.get(zmq::sockopt::last_endpoint);
  c.sockets_.push_back(std::move(s));
  Stopwatch waited;
  Incoming in;
  while (c.num_workers() < expected) {
    const double left = options.reply_timeout_s - waited.seconds();
    RLCPP_CHECK(left > 0, "worker client: " << c.num_workers() << " of " << expected << " workers connected to '"
                                            << endpoint << "' within " << options.reply_timeout_s << " s");
    c.receive(static_cast<long>(left * 1000) + 1, in);  // a worker's first message registers it
  }
  return c;
}

void WorkerClient::send(int worker, const WireMessage& message) {
  const Worker& w = workers_[worker];
  std::vector<zmq::message_t> envelope;
  if (router_) envelope.emplace_back(w.identity.data(), w.identity.size());
  send_wire_message(sockets_[w.socket], envelope, message);
}

bool WorkerClient::receive(long timeout_ms, Incoming& in) {
  std::vector<zmq::pollitem_t> items;
  for (auto& s : sockets_) items.push_back({s.handle(), 0, ZMQ_POLLIN, 0});
  if (zmq::poll(items, std::chrono::milliseconds(std::max<long>(timeout_ms, 0))) == 0) return false;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!(items[i].revents & ZMQ_POLLIN)) continue;
    ReceivedFrames got;
    if (!receive_frames(sockets_[i], router_ ? 1 : 0, options_.limits, 0, got)) continue;
    in.worker = -1;
    if (router_) {
      const std::string identity = got.envelope.empty() ? std::string() : got.envelope[0].to_string();
      for (size_t w = 0; w < workers_.size(); ++w)
        if (workers_[w].identity == identity) in.worker = static_cast<int>(w);
      if (in.worker < 0) {
        workers_.push_back({i, identity, "worker@" + printable(identity)});
        in.worker = num_workers() - 1;
      }
    } else {
      in.worker = static_cast<int>(i);
    }
    const std::string& name = workers_[in.worker].name;
    RLCPP_CHECK(got.error.empty(), "worker client: bad message from " << name << ": " << got.error);
    try {
      in.message = decode_wire_message(got.frames, options_.limits);
    } catch (const WireError& e) {
      RLCPP_FAIL("worker client: bad message from " << name << ": " << e.what());
    }
    return true;
  }
  return false;
}

std::vector<Json> WorkerClient::round_trip(const std::string& type, const std::string& reply_type) {
  std::map<int64_t, int> pending;  // request id -> worker
  for (int w = 0; w < num_workers(); ++w) {
    WireMessage m(type);
    const int64_t id = static_cast<int64_t>(next_request_id_++);
    m.header["request_id"] = id;
    pending[id] = w;
    send(w, m);
  }
  std::vector<Json> replies(static_cast<size_t>(num_workers()));
  Stopwatch waited;
  Incoming in;
  while (!pending.empty()) {
    const double left = options_.reply_timeout_s - waited.seconds();
    if (left <= 0) {
      std::string missing;
      for (const auto& [id, w] : pending) missing += (missing.empty() ? "" : ", ") + workers_[w].name;
      RLCPP_FAIL("worker client: no '" << reply_type << "' within " << options_.reply_timeout_s << " s from "
                                       << missing);
    }
    if (!receive(static_cast<long>(left * 1000) + 1, in)) continue;
    const int64_t id = header_request_id(in.message.header);
    auto it = pending.find(id);
    if (it == pending.end() || it->second != in.worker) continue;  // heartbeats, stale replies
    RLCPP_CHECK(in.message.type() == reply_type, "worker client: " << workers_[in.worker].name << " answered '"
                                                                   << type << "' with '" << in.message.type()
                                                                   << "': " << in.message.header.dump());
    replies[in.worker] = in.message.header;
    pending.erase(it);
  }
  return replies;
}

std::vector<Json> WorkerClient::ping() { return round_trip("ping", "pong"); }

void WorkerClient::shutdown() { round_trip("shutdown", "bye"); }

RolloutResult WorkerClient::generate(const Request& request) {
  RLCPP_CHECK(num_workers() > 0, "worker client: no workers");
  RLCPP_CHECK(request.prompt_ids.empty() || request.prompt_ids.size() == request.prompts.size(),
              "request: " << request.prompt_ids.size() << " prompt ids for " << request.prompts.size() << " prompts");
  const int64_t P = static_cast<int64_t>(request.prompts.size()), W = num_workers();
  struct Chunk {
    int64_t begin = 0, end = 0;
    int worker = 0;
    bool done = false;
    RolloutResult result;
  };
  std::vector<Chunk> chunks;
  std::map<uint64_t, size_t> by_id;  // request id -> chunk
  for (int64_t w = 0; w < W; ++w) {
    Chunk c;
    c.begin = P * w / W;
    c.end = P * (w + 1) / W;
    c.worker = static_cast<int>(w);
    if (c.begin == c.end) continue;
    Request part;
    part.n = request.n;
    part.sampling = request.sampling;
    for (int64_t p = c.begin; p < c.end; ++p) {
      part.prompts.push_back(request.prompts[p]);
      part.prompt_ids.push_back(request.prompt_id(static_cast<size_t>(p)));
    }
    const uint64_t id = next_request_id_++;
    by_id[id] = chunks.size();
    send(c.worker, encode_generate_request(part, id));
    chunks.push_back(std::move(c));
  }

  std::vector<Stopwatch> last_heard(static_cast<size_t>(W));
  size_t remaining = chunks.size();
  Incoming in;
  while (remaining > 0) {
    double wait = options_.heartbeat_timeout_s;
    for (const Chunk& c : chunks) {
      if (c.done) continue;
      const double silent = last_heard[c.worker].seconds();
      RLCPP_CHECK(silent < options_.heartbeat_timeout_s,
                  "worker client: " << workers_[c.worker].name << " sent no result or heartbeat for " << silent
                                    << " s (heartbeat_timeout_s " << options_.heartbeat_timeout_s << ")");
      wait = std::min(wait, options_.heartbeat_timeout_s - silent);
    }
    if (!receive(static_cast<long>(wait * 1000) + 1, in)) continue;
    if (in.worker < W) last_heard[in.worker].reset();
    const std::string type = in.message.type();
    const int64_t rid = header_request_id(in.message.header);
    auto it = rid >= 0 ? by_id.find(static_cast<uint64_t>(rid)) : by_id.end();
    const bool ours = it != by_id.end() && chunks[it->second].worker == in.worker && !chunks[it->second].done;
    if (type == "error") {
      // An error naming no request can only be about something we sent to a worker still working for us.
      bool busy = false;
      for (const Chunk& c : chunks) busy = busy || (!c.done && c.worker == in.worker);
      if (ours || (rid < 0 && busy))
        RLCPP_FAIL("worker " << workers_[in.worker].name << ": "
                             << in.message.header.value("message", std::string("(no message)")));
      continue;
    }
    if (type != "result" || !ours) continue;  // heartbeats, pongs, stale replies
    uint64_t id = 0;
    Chunk& c = chunks[it->second];
    try {
      c.result = decode_generate_result(in.message, id);
    } catch (const WireError& e) {
      RLCPP_FAIL("worker client: bad result from " << workers_[in.worker].name << ": " << e.what());
    }
    RLCPP_CHECK(static_cast<int64_t>(c.result.samples.size()) == (c.end - c.begin) * request.n,
                "worker client: " << workers_[in.worker].name << " returned " << c.result.samples.size()
                                  << " samples for " << (c.end - c.begin) << " prompts x " << request.n);
    c.done = true;
    --remaining;
  }

  RolloutResult merged;
  merged.samples.reserve(static_cast<size_t>(P * request.n));
  bool first = true;
  for (Chunk& c : chunks) {
    for (Sample& s : c.result.samples) {
      s.prompt_index += c.begin;
      merged.samples.push_back(std::move(s));
    }
    if (first) {
      merged.stats = c.result.stats;
      first = false;
    } else {
      merged.stats.merge(c.result.stats);
    }
  }
  return merged;
}

}  // namespace rlcpp
