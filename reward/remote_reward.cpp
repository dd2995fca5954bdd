#include "reward/remote_reward.h"

#include <chrono>
#include <cmath>
#include <optional>
#include <zmq.hpp>

#include "core/endpoint.h"
#include "core/error.h"
#include "core/json_input.h"

namespace rlcpp {
namespace {

// A reply larger than this is refused by ZeroMQ (and then times out) instead of exhausting memory.
constexpr int64_t kMaxReplyBytes = int64_t(1) << 30;

RewardResult parse_one_reward(const Json& r, size_t i, double correct_threshold) {
  auto finite_number = [](const Json& x) { return x.is_number() && std::isfinite(x.get<double>()); };
  RewardResult out;
  if (r.is_number()) {
    RLCPP_CHECK(finite_number(r), "rewards[" << i << "] is " << r.dump() << ", not a finite number");
    out.total = r.get<double>();
  } else {
    RLCPP_CHECK(r.is_object(), "rewards[" << i << "] is " << r.dump()
                                          << ", expected a number or {\"total\": number, \"components\": {...}}");
    for (auto it = r.begin(); it != r.end(); ++it) {
      RLCPP_CHECK(it.key() == "total" || it.key() == "components" || it.key() == "correct",
                  "rewards[" << i << "] has unknown key '" << it.key() << "' (valid: total, components, correct)");
    }
    RLCPP_CHECK(r.contains("total") && finite_number(r["total"]),
                "rewards[" << i << "].total is " << (r.contains("total") ? r["total"].dump() : "missing")
                           << ", expected a finite number");
    out.total = r["total"].get<double>();
    if (r.contains("components")) {
      const Json& c = r["components"];
      RLCPP_CHECK(c.is_object(), "rewards[" << i << "].components is " << c.dump() << ", expected an object");
      for (auto it = c.begin(); it != c.end(); ++it) {
        RLCPP_CHECK(finite_number(it.value()), "rewards[" << i << "].components." << it.key() << " is "
                                                          << it.value().dump() << ", expected a finite number");
        out.components.emplace_back(it.key(), it.value().get<double>());
      }
    }
    if (r.contains("correct")) {
      RLCPP_CHECK(r["correct"].is_boolean(),
                  "rewards[" << i << "].correct is " << r["correct"].dump() << ", expected true or false");
      out.correct = r["correct"].get<bool>();
      return out;
    }
  }
  out.correct = out.total >= correct_threshold;
  return out;
}

}  // namespace

struct RemoteRewardClient::Connection {
  zmq::context_t context{1};
  std::optional<zmq::socket_t> socket;

  void open(const std::string& endpoint) {
    socket.emplace(context, zmq::socket_type::req);
    socket->set(zmq::sockopt::linger, 0);  // an unanswered request must not block close or shutdown
    socket->set(zmq::sockopt::maxmsgsize, kMaxReplyBytes);
    socket->connect(endpoint);
  }
};

RemoteRequest make_remote_request(const Problem& problem, const std::string& response, bool terminated) {
  RemoteRequest r;
  r.prompt = problem.prompt;
  r.response = response;
  r.terminated = terminated;
  r.meta = problem.meta.is_object() ? problem.meta : Json::object();
  r.meta["answer"] = problem.answer;
  return r;
}

std::string encode_remote_requests(const std::vector<RemoteRequest>& requests, size_t begin, size_t end) {
  Json list = Json::array();
  for (size_t i = begin; i < end; ++i) {
    const RemoteRequest& r = requests[i];
    list.push_back({{"prompt", r.prompt}, {"response", r.response}, {"terminated", r.terminated}, {"meta", r.meta}});
  }
  // A response can hold any bytes; replace (rather than throw on) invalid UTF-8.
  return Json{{"requests", list}}.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::vector<RewardResult> parse_remote_reply(const std::string& reply, size_t expected, double correct_threshold) {
  Json j;
  try {
    j = parse_json_limited(reply);
  } catch (const Json::exception& e) {  // parse_error, or out_of_range for a number like 1e400
    std::string head = reply.substr(0, 80);
    RLCPP_FAIL("reply is not JSON (" << e.what() << "); it starts with \"" << head << "\"");
  }
  RLCPP_CHECK(j.is_object(), "reply is " << j.dump().substr(0, 80) << ", expected an object {\"rewards\": [...]}");
  if (j.contains("error")) RLCPP_FAIL("the server reported an error: " << j["error"].dump());
  RLCPP_CHECK(j.contains("rewards") && j["rewards"].is_array(),
              "reply has no \"rewards\" array (keys: " << j.dump().substr(0, 80) << ")");
  const Json& rewards = j["rewards"];
  RLCPP_CHECK(rewards.size() == expected,
              "expected " << expected << " rewards, one per request, got " << rewards.size());
  std::vector<RewardResult> out;
  out.reserve(expected);
  for (size_t i = 0; i < expected; ++i) out.push_back(parse_one_reward(rewards[i], i, correct_threshold));
  return out;
}

void RemoteRewardConfig::validate(const std::string& prefix) const {
  const std::string key = "config key '" + prefix + ".";
  RLCPP_CHECK(on_failure == "fail" || on_failure == "zero",
              key << "on_failure': \"" << on_failure << "\", expected \"fail\" or \"zero\"");
  RLCPP_CHECK(timeout_ms >= 1 && timeout_ms <= kMaxRemoteTimeoutMs,
              key << "timeout_ms': " << timeout_ms << " is not in [1, " << kMaxRemoteTimeoutMs
                  << "] (milliseconds per reply, at most an hour)");
  RLCPP_CHECK(retries >= 0 && retries <= 100, key << "retries': " << retries << " is not in [0, 100]");
  RLCPP_CHECK(batch_size >= 1, key << "batch_size': " << batch_size << " is not >= 1");
  Endpoint server;
  try {
    server = parse_endpoint(endpoint, EndpointUse::kConnect);
  } catch (const Error& e) {
    RLCPP_FAIL(key << "endpoint' (expected tcp://HOST:PORT or ipc://PATH): " << e.what());
  }
  RLCPP_CHECK(server.transport != "inproc", key << "endpoint': \"" << endpoint
                                                << "\" is inproc://, which no reward server can reach; expected "
                                                   "tcp://HOST:PORT or ipc://PATH");
}

RemoteRewardClient::RemoteRewardClient(const RemoteRewardConfig& cfg)
    : cfg_(cfg), connection_(std::make_unique<Connection>()) {
  cfg.validate("reward.remote");
  zero_on_failure_ = cfg.on_failure == "zero";
  // Connecting needs no server; it only fails for an endpoint ZeroMQ cannot parse, which is a config error.
  try {
    connection_->open(cfg.endpoint);
  } catch (const zmq::error_t& e) {
    RLCPP_FAIL("config key 'reward.remote.endpoint': cannot connect to \"" << cfg.endpoint << "\" (" << e.what()
                                                                           << "); expected tcp://HOST:PORT or "
                                                                              "ipc://PATH");
  }
}

RemoteRewardClient::~RemoteRewardClient() = default;

std::vector<RewardResult> RemoteRewardClient::exchange(const std::string& payload, size_t expected) {
  std::string last_failure;
  for (int64_t attempt = 0; attempt <= cfg_.retries; ++attempt) {
    try {
      if (!connection_->socket) connection_->open(cfg_.endpoint);
      zmq::socket_t& socket = *connection_->socket;
      ++counters_.attempts;
      // A fresh REQ socket queues the message even before the server is up, so this does not block.
      if (socket.send(zmq::buffer(payload), zmq::send_flags::dontwait)) {
        zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
        zmq::poll(&item, 1, std::chrono::milliseconds(cfg_.timeout_ms));
        if (item.revents & ZMQ_POLLIN) {
          zmq::message_t reply;
          (void)socket.recv(reply, zmq::recv_flags::none);
          bool multipart = reply.more();
          while (reply.more()) (void)socket.recv(reply, zmq::recv_flags::none);
          try {
            RLCPP_CHECK(!multipart, "reply has several message parts, expected one");
            return parse_remote_reply(reply.to_string(), expected, cfg_.correct_threshold);
          } catch (const Error& e) {
            ++counters_.malformed;
            RLCPP_FAIL("remote reward server at " << cfg_.endpoint << " sent a malformed reply: " << e.what());
          }
        }
        last_failure = "no reply within " + std::to_string(cfg_.timeout_ms) + " ms";
      } else {
        last_failure = "the request could not be queued";
      }
    } catch (const zmq::error_t& e) {
      last_failure = std::string("ZeroMQ error: ") + e.what();
    }
    ++counters_.timeouts;
    // The REQ socket still waits for the lost reply; only a new socket can send again (lazy pirate).
    connection_->socket.reset();
  }
  RLCPP_FAIL("remote reward server at " << cfg_.endpoint << " did not answer: " << last_failure << " on each of "
                                        << cfg_.retries + 1 << " attempts (reward.remote.timeout_ms "
                                        << cfg_.timeout_ms << ", reward.remote.retries " << cfg_.retries
                                        << "); is the server running?");
}

std::vector<RewardResult> RemoteRewardClient::score(const std::vector<RemoteRequest>& requests) {
  std::vector<RewardResult> out;
  out.reserve(requests.size());
  for (size_t begin = 0; begin < requests.size(); begin += cfg_.batch_size) {
    size_t end = std::min(requests.size(), begin + static_cast<size_t>(cfg_.batch_size));
    ++counters_.batches;
    std::vector<RewardResult> batch;
    try {
      batch = exchange(encode_remote_requests(requests, begin, end), end - begin);
    } catch (const Error& e) {
      ++counters_.failed_batches;
      if (!zero_on_failure_) {
        throw Error(std::string(e.what()) +
                    " (reward.remote.on_failure = \"fail\"; \"zero\" would score the batch 0 and go on)");
      }
      counters_.zeroed_samples += static_cast<int64_t>(end - begin);
      RewardResult zero;
      zero.components = {{"remote_failed", 1.0}};
      batch.assign(end - begin, zero);
    }
    for (RewardResult& r : batch) out.push_back(std::move(r));
  }
  return out;
}

Json RemoteRewardClient::counters_json() const {
  return Json{{"batches", counters_.batches},           {"attempts", counters_.attempts},
              {"timeouts", counters_.timeouts},         {"malformed", counters_.malformed},
              {"failed_batches", counters_.failed_batches}, {"zeroed_samples", counters_.zeroed_samples}};
}

}  // namespace rlcpp
