#include "rollout/worker_client.h"

#include <algorithm>
#include <deque>
#include <iomanip>
#include <optional>
#include <map>
#include <sstream>

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
  RLCPP_CHECK(options.server_publics.empty() || options.server_publics.size() == endpoints.size(),
              "worker client: " << options.server_publics.size() << " worker public keys for " << endpoints.size()
                                << " endpoints");
  WorkerClient c(context, options);
  for (const std::string& e : endpoints) {
    c.workers_.push_back({c.sockets_.size(), "", e});
    c.monitors_.emplace_back();
    c.sockets_.push_back(c.open_dealer(c.num_workers() - 1, c.monitors_.back()));
  }
  return c;
}

zmq::socket_t WorkerClient::open_dealer(int worker, HandshakeMonitor& monitor) const {
  const std::string& endpoint = workers_[worker].name;
  zmq::socket_t s(*context_, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 1000);
  s.set(zmq::sockopt::maxmsgsize, 2 * options_.limits.max_message_bytes);
  CurveOptions curve_options = options_.curve;
  if (!options_.server_publics.empty()) curve_options.server_public = options_.server_publics[worker];
  const bool curve = secure_connect(s, endpoint, curve_options, "worker client");
  monitor = HandshakeMonitor(*context_, s, curve);  // before connecting: no event is missed
  try {
    s.connect(endpoint);
  } catch (const zmq::error_t& err) {
    RLCPP_FAIL("worker client: cannot connect to '" << endpoint << "': " << err.what());
  }
  return s;
}

WorkerClient WorkerClient::listen(zmq::context_t& context, const std::string& endpoint, int expected,
                                  const WorkerClientOptions& options, std::string* bound) {
  RLCPP_CHECK(expected >= 1, "worker client: expected workers must be >= 1, got " << expected);
  WorkerClient c(context, options);
  c.router_ = true;
  zmq::socket_t s(context, zmq::socket_type::router);
  s.set(zmq::sockopt::linger, 1000);
  s.set(zmq::sockopt::maxmsgsize, 2 * options.limits.max_message_bytes);
  secure_bind(context, s, endpoint, options.curve, "worker client");
  bind_endpoint(s, endpoint, "worker client");
  if (bound) *bound = s.get(zmq::sockopt::last_endpoint);
  c.sockets_.push_back(std::move(s));
  c.monitors_.emplace_back();
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

std::vector<int> WorkerClient::joined() const {
  std::vector<int> out;
  for (int w = 0; w < num_workers(); ++w)
    if (!workers_[static_cast<size_t>(w)].admitted && !workers_[static_cast<size_t>(w)].retired) out.push_back(w);
  return out;
}

void WorkerClient::send(int worker, const WireMessage& message) {
  const Worker& w = workers_[worker];
  std::vector<zmq::message_t> envelope;
  if (router_) envelope.emplace_back(w.identity.data(), w.identity.size());
  // A refused connection is closed for good and a DEALER without one would block this send forever; the refusal
  // is reported before the connection goes, so asking first is enough.
  check_refused(w.socket);
  send_wire_message(sockets_[w.socket], envelope, message);
}

void WorkerClient::check_refused(size_t socket) {
  const std::string refused = monitors_[socket].refusal();
  if (refused.empty()) return;
  sockets_[socket].set(zmq::sockopt::linger, 0);  // what it queued can never be delivered: nothing to flush
  for (const Worker& w : workers_)  // a DEALER serves one worker: the one with that socket
    RLCPP_CHECK(w.socket != socket, "worker client: " << w.name << " refused us: " << refused);
}

std::string WorkerClient::handshake_note(int worker) const {
  const std::string& failure = monitors_[workers_[worker].socket].last_failure();
  return failure.empty() ? "" : " (" + failure + ")";
}

bool WorkerClient::receive(long timeout_ms, Incoming& in) {
  std::vector<zmq::pollitem_t> items;
  for (auto& s : sockets_) items.push_back({s.handle(), 0, ZMQ_POLLIN, 0});
  std::vector<size_t> watched;  // sockets whose monitor is polled, after the sockets
  for (size_t i = 0; i < monitors_.size(); ++i)
    if (monitors_[i].handle()) {
      items.push_back({monitors_[i].handle(), 0, ZMQ_POLLIN, 0});
      watched.push_back(i);
    }
  // A refusal does not go away by waiting: one found fails at once.
  for (size_t socket : watched) check_refused(socket);
  const bool ready = zmq::poll(items, std::chrono::milliseconds(std::max<long>(timeout_ms, 0))) > 0;
  for (size_t socket : watched) check_refused(socket);
  if (!ready) return false;
  for (size_t i = 0; i < sockets_.size(); ++i) {
    if (!(items[i].revents & ZMQ_POLLIN)) continue;
    ReceivedFrames got;
    if (!receive_frames(sockets_[i], router_ ? 1 : 0, options_.limits, 0, got)) continue;
    in.worker = -1;
    if (router_) {
      const std::string identity = got.envelope.empty() ? std::string() : got.envelope[0].to_string();
      for (size_t w = 0; w < workers_.size(); ++w)
        if (workers_[w].identity == identity) in.worker = static_cast<int>(w);
      if (in.worker < 0) {
        Worker joined{i, identity, "worker@" + printable(identity)};
        joined.admitted = options_.admit_on_join;
        if (!got.frames.empty())
          if (const char* peer = zmq_msg_gets(got.frames[0].handle(), "Peer-Address")) joined.peer_address = peer;
        workers_.push_back(std::move(joined));
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
    Worker& from = workers_[static_cast<size_t>(in.worker)];
    if (router_ && from.hello.is_null()) from.hello = in.message.header;
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
      for (const auto& [id, w] : pending)
        missing += (missing.empty() ? "" : ", ") + workers_[w].name + handshake_note(w);
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

void WorkerClient::run_jobs(std::vector<WorkerJob>& jobs, WorkerSupervisor* supervisor) {
  RLCPP_CHECK(num_workers() > 0, "worker client: no workers");
  bool serving = false;
  for (const Worker& w : workers_) serving = serving || (w.admitted && !w.retired);
  RLCPP_CHECK(serving, "worker client: no worker can serve (each one retired, or joined and not admitted yet)");
  const int W = num_workers();
  struct Sent {
    int worker = -1;
    uint64_t request_id = 0;
    Stopwatch since;  // since the last send, against result_timeout_s
  };
  std::vector<Sent> sent(jobs.size());
  std::deque<size_t> waiting;  // jobs not sent, or taken back from a failed worker (those first)
  for (size_t i = 0; i < jobs.size(); ++i) waiting.push_back(i);
  std::vector<int64_t> running(static_cast<size_t>(W), -1);  // the job each worker owes, or -1
  std::map<uint64_t, size_t> by_id;                           // request id -> job
  // Since each worker's last message; a worker's silence counts from when it was given its job (an idle worker
  // owes nothing, so it need not be heard from).
  std::vector<Stopwatch> last_heard(static_cast<size_t>(W));
  auto dispatch = [&](int w) {
    if (running[w] >= 0 || workers_[w].retired || !workers_[w].admitted) return;
    // The first waiting job that may go to w: one homed there, or one free to go anywhere.
    const auto pick = std::find_if(waiting.begin(), waiting.end(), [&](size_t j) {
      const int home = jobs[j].home;
      return home == w || home < 0 || workers_[home].retired || !workers_[home].admitted;
    });
    if (pick == waiting.end()) return;
    const size_t index = *pick;
    waiting.erase(pick);
    Sent& c = sent[index];
    by_id.erase(c.request_id);  // a late reply to an earlier send is stale
    c.worker = w;
    c.request_id = next_request_id_++;
    by_id[c.request_id] = index;
    running[w] = static_cast<int64_t>(index);
    send(w, jobs[index].message(w, c.request_id));
    c.since.reset();
    last_heard[w].reset();
  };
  for (int w = 0; w < W; ++w) dispatch(w);

  // Why job c's worker can no longer deliver, or "".
  auto failure_of = [&](const Sent& c) -> std::string {
    if (supervisor) {
      const std::string ended = supervisor->exit_reason(c.worker);
      if (!ended.empty()) return ended;
    }
    const double silent = last_heard[c.worker].seconds();
    if (silent >= options_.heartbeat_timeout_s) {
      std::ostringstream os;
      os << std::fixed << std::setprecision(1) << "sent no result or heartbeat for " << silent
         << " s (heartbeat_timeout_s " << options_.heartbeat_timeout_s << ")" << handshake_note(c.worker);
      return os.str();
    }
    if (options_.result_timeout_s > 0 && c.since.seconds() >= options_.result_timeout_s) {
      std::ostringstream os;
      os << std::fixed << std::setprecision(1) << "sent no result within " << c.since.seconds()
         << " s (result_timeout_s " << options_.result_timeout_s << ")" << handshake_note(c.worker);
      return os.str();
    }
    return "";
  };
  constexpr double kExitPollSeconds = 0.05;  // how often a supervisor is asked whether busy workers still run
  size_t remaining = jobs.size();
  Incoming in;
  while (remaining > 0) {
    double wait = options_.heartbeat_timeout_s;
    for (int w = 0; w < W; ++w) {
      if (running[w] < 0) continue;
      const size_t index = static_cast<size_t>(running[w]);
      Sent& c = sent[index];
      const std::string failure = failure_of(c);
      if (!failure.empty()) {
        RLCPP_CHECK(supervisor != nullptr, "worker client: " << workers_[w].name << " " << failure);
        const Replacement what = supervisor->replace({w, workers_[w].name, failure, jobs[index].size, jobs[index].unit});
        // Nobody listened while the replacement started (seconds on a loaded machine: a process, its checkpoint,
        // the current weights): the other workers' heartbeats wait unread in their sockets, so their silence
        // counts again from now — else a busy, healthy worker would be found silent and killed next.
        for (int other = 0; other < W; ++other)
          if (other != w) last_heard[other].reset();
        // The old socket may hold the request or a half-read reply; a fresh one starts clean. Linger 0: what
        // the old one still queues must not reach the new worker after all.
        zmq::socket_t& old = sockets_[workers_[w].socket];
        if (!router_) old.set(zmq::sockopt::linger, 0);
        if (what == Replacement::kRetired) {
          workers_[w].retired = true;
          bool any = false;
          for (int other = 0; other < W; ++other) any = any || (!workers_[other].retired && workers_[other].admitted);
          RLCPP_CHECK(any, "worker client: every worker has failed (the last, " << workers_[w].name << ", "
                                                                            << failure << ")");
        } else {
          RLCPP_CHECK(!router_, "worker client: " << workers_[w].name << " connected to us and cannot be replaced");
        }
        if (!router_) old = open_dealer(w, monitors_[workers_[w].socket]);  // a ROUTER is everyone's: kept
        last_heard[w].reset();
        // Its job goes first in line: to an idle survivor now, else to the replacement. (A worker that keeps
        // dying without serving is the supervisor's to give up on.)
        by_id.erase(c.request_id);
        running[w] = -1;
        jobs[index].home = -1;
        if (jobs[index].lost) jobs[index].lost(w);
        waiting.push_front(index);
        for (int other = 0; other < W; ++other)
          if (other != w) dispatch(other);
        dispatch(w);
        continue;
      }
      wait = std::min(wait, options_.heartbeat_timeout_s - last_heard[w].seconds());
      if (options_.result_timeout_s > 0) wait = std::min(wait, options_.result_timeout_s - c.since.seconds());
    }
    if (supervisor) wait = std::min(wait, kExitPollSeconds);
    if (!receive(static_cast<long>(std::max(0.0, wait) * 1000) + 1, in)) continue;
    if (in.worker < W) last_heard[in.worker].reset();
    const std::string type = in.message.type();
    const int64_t rid = header_request_id(in.message.header);
    auto it = rid >= 0 ? by_id.find(static_cast<uint64_t>(rid)) : by_id.end();
    const bool ours = it != by_id.end() && in.worker < W && running[in.worker] == static_cast<int64_t>(it->second);
    if (type == "error") {
      // An error naming no request can only be about something we sent to a worker still working for us.
      const bool busy = in.worker < W && running[in.worker] >= 0;
      if (ours || (rid < 0 && busy))
        RLCPP_FAIL("worker " << workers_[in.worker].name << ": "
                             << in.message.header.value("message", std::string("(no message)")));
      continue;
    }
    if (!ours || type != jobs[it->second].reply_type) continue;  // heartbeats, pongs, stale replies
    try {
      jobs[it->second].done(in.worker, in.message);
    } catch (const WireError& e) {
      RLCPP_FAIL("worker client: bad " << type << " from " << workers_[in.worker].name << ": " << e.what());
    }
    --remaining;
    by_id.erase(it);
    running[in.worker] = -1;
    if (supervisor) supervisor->served(in.worker);
    dispatch(in.worker);
  }
}

RolloutResult WorkerClient::generate(const Request& request, WorkerSupervisor* supervisor) {
  RLCPP_CHECK(request.prompt_ids.empty() || request.prompt_ids.size() == request.prompts.size(),
              "request: " << request.prompt_ids.size() << " prompt ids for " << request.prompts.size() << " prompts");
  const int64_t P = static_cast<int64_t>(request.prompts.size()), W = num_workers();
  // Chunks of consecutive prompts, handed to workers as they become idle. Each chunk is a request of its own
  // whichever worker runs it, and samples are keyed by prompt id: the result does not depend on who ran what.
  // Automatic: about four chunks a worker, but none under 4 prompts unless a worker's share is smaller (a tiny
  // chunk costs a round trip more than it saves in balance); one chunk for one worker.
  const int64_t per_chunk =
      options_.chunk_prompts > 0 ? options_.chunk_prompts
      : W == 1                   ? std::max<int64_t>(P, 1)
                                 : std::max({int64_t{1}, (P + 4 * W - 1) / (4 * W), std::min<int64_t>(4, (P + W - 1) / W)});
  struct Chunk {
    int64_t begin = 0, end = 0;
    Request part;  // kept to send again, with its prompt ids, when its worker fails
    int worker = -1;
    RolloutResult result;
  };
  std::vector<Chunk> chunks;
  for (int64_t begin = 0; begin < P; begin += per_chunk) {
    Chunk c;
    c.begin = begin;
    c.end = std::min(P, begin + per_chunk);
    c.part.n = request.n;
    c.part.sampling = request.sampling;
    for (int64_t p = c.begin; p < c.end; ++p) {
      c.part.prompts.push_back(request.prompts[p]);
      c.part.prompt_ids.push_back(request.prompt_id(static_cast<size_t>(p)));
    }
    chunks.push_back(std::move(c));
  }
  std::vector<WorkerJob> jobs;
  for (Chunk& c : chunks) {
    WorkerJob job;
    job.size = c.end - c.begin;
    job.reply_type = "result";
    job.message = [&c](int, uint64_t request_id) { return encode_generate_request(c.part, request_id); };
    job.done = [&c, &request, this](int worker, const WireMessage& reply) {
      uint64_t id = 0;
      c.result = decode_generate_result(reply, id);
      c.worker = worker;
      RLCPP_CHECK(static_cast<int64_t>(c.result.samples.size()) == (c.end - c.begin) * request.n,
                  "worker client: " << workers_[worker].name << " returned " << c.result.samples.size()
                                    << " samples for " << (c.end - c.begin) << " prompts x " << request.n);
    };
    jobs.push_back(std::move(job));
  }
  run_jobs(jobs, supervisor);

  // Samples in prompt order; stats: a worker's chunks one after another, the workers side by side.
  RolloutResult merged;
  merged.samples.reserve(static_cast<size_t>(P * request.n));
  std::vector<std::optional<RolloutStats>> per_worker(static_cast<size_t>(W));
  for (Chunk& c : chunks) {
    for (Sample& s : c.result.samples) {
      s.prompt_index += c.begin;
      merged.samples.push_back(std::move(s));
    }
    std::optional<RolloutStats>& w = per_worker[static_cast<size_t>(c.worker)];
    if (w)
      w->then(c.result.stats);
    else
      w = c.result.stats;
  }
  bool first = true;
  for (const std::optional<RolloutStats>& w : per_worker) {
    if (!w) continue;
    if (first)
      merged.stats = *w;
    else
      merged.stats.merge(*w);
    first = false;
  }
  return merged;
}

}  // namespace rlcpp
