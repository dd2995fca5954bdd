#include "agent/remote_env.h"

#include <chrono>
#include <cmath>
#include <zmq.hpp>

#include "core/json_input.h"

namespace rlcpp {

namespace {

// A reply larger than this is refused by ZeroMQ (and then times out) instead of exhausting memory.
constexpr int64_t kMaxReplyBytes = int64_t(1) << 26;

// The reply's field, of the JSON type `ok` checks; errors name the field and what came.
template <class Check> const Json& reply_field(const Json& j, const char* key, const char* type, Check ok,
                                               const std::string& where) {
  if (!j.contains(key)) throw EnvCallError(where + ": the reply has no \"" + key + "\"", false);
  if (!ok(j[key]))
    throw EnvCallError(where + ": \"" + key + "\" must be " + type + ", got " + json_excerpt(j[key], 60), false);
  return j[key];
}

bool is_finite_number(const Json& x) { return x.is_number() && std::isfinite(x.get<double>()); }

}  // namespace

struct RemoteEnvironment::Socket {
  zmq::socket_t socket;
  Socket(zmq::context_t& context, const std::string& endpoint) : socket(context, zmq::socket_type::dealer) {
    socket.set(zmq::sockopt::linger, 0);
    socket.set(zmq::sockopt::maxmsgsize, kMaxReplyBytes);
    socket.connect(endpoint);
  }
};

RemoteEnvironment::RemoteEnvironment(zmq::context_t& context, const std::string& endpoint, double timeout_s,
                                     std::string episode)
    : endpoint_(endpoint), timeout_s_(timeout_s), episode_(std::move(episode)) {
  try {
    socket_ = std::make_unique<Socket>(context, endpoint);
  } catch (const zmq::error_t& e) {
    RLCPP_FAIL("config key 'agent.endpoint': cannot connect to \"" << endpoint << "\": " << e.what());
  }
}

RemoteEnvironment::~RemoteEnvironment() {
  // Best effort: the server may forget the episode. Not waited for.
  try {
    const std::string msg = Json{{"type", "close"}, {"request", next_request_++}, {"episode", episode_}}.dump();
    (void)socket_->socket.send(zmq::buffer(msg), zmq::send_flags::dontwait);
  } catch (...) {
  }
}

Json RemoteEnvironment::call(Json request, const char* what) {
  const int64_t id = next_request_++;
  request["request"] = id;
  request["episode"] = episode_;
  const std::string where = "environment server " + endpoint_ + " (" + what + " of episode " + episode_ + ")";
  const std::string payload = request.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (!socket_->socket.send(zmq::buffer(payload), zmq::send_flags::dontwait))
    throw EnvCallError(where + ": cannot send (its queue is full)", true);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    zmq::pollitem_t item{static_cast<void*>(socket_->socket), 0, ZMQ_POLLIN, 0};
    if (left.count() <= 0 || zmq::poll(&item, 1, left) == 0 || !(item.revents & ZMQ_POLLIN))
      throw EnvCallError(where + ": no reply within " + json_excerpt(Json(timeout_s_)) + " s (agent.call_timeout_s)",
                         true);
    zmq::message_t reply;
    if (!socket_->socket.recv(reply, zmq::recv_flags::dontwait)) continue;
    Json j;
    try {
      j = parse_json_limited(reply.to_string_view());
    } catch (const Json::exception& e) {
      throw EnvCallError(where + ": the reply is not JSON (" + e.what() + "): " +
                             std::string(reply.to_string_view().substr(0, 80)),
                         false);
    }
    if (!j.is_object()) throw EnvCallError(where + ": the reply is " + json_excerpt(j, 60) + ", not an object", false);
    if (!j.contains("request") || !j["request"].is_number_integer() || j["request"].get<int64_t>() != id)
      continue;  // a late reply to an earlier request
    if (j.contains("error")) throw EnvCallError(where + ": the server reported: " + json_excerpt(j["error"], 200), false);
    return j;
  }
}

std::string RemoteEnvironment::reset(const Problem& item) {
  const std::string where = "environment server " + endpoint_ + " (reset of episode " + episode_ + ")";
  const Json j = call({{"type", "reset"},
                       {"item", {{"prompt", item.prompt}, {"answer", item.answer}, {"meta", item.meta}, {"id", item.id}}}},
                      "reset");
  const std::string observation =
      reply_field(j, "observation", "a string", [](const Json& x) { return x.is_string(); }, where).get<std::string>();
  tools_.clear();
  if (j.contains("tools")) {
    if (!j["tools"].is_array()) throw EnvCallError(where + ": \"tools\" must be a list", false);
    for (const Json& t : j["tools"]) {
      if (!t.is_object() || !t.contains("name") || !t["name"].is_string())
        throw EnvCallError(where + ": a tool must be {\"name\": string, ...}, got " + json_excerpt(t, 60), false);
      ToolSpec spec;
      spec.name = t["name"].get<std::string>();
      if (t.contains("description") && t["description"].is_string()) spec.description = t["description"];
      // Key order as the server wrote it cannot be recovered from a parsed Json: the schema is re-read ordered.
      if (t.contains("parameters")) spec.parameters = OrderedJson::parse(t["parameters"].dump());
      tools_.push_back(std::move(spec));
    }
  }
  return observation;
}

EnvStep RemoteEnvironment::step(const AssistantTurn& turn) {
  const std::string where = "environment server " + endpoint_ + " (step of episode " + episode_ + ")";
  Json calls = Json::array();
  for (const ToolCall& c : turn.tool_calls) calls.push_back({{"name", c.name}, {"arguments", Json::parse(c.arguments.dump())}});
  const Json j = call({{"type", "step"},
                       {"turn", {{"text", turn.text}, {"tool_calls", calls}, {"parse_error", turn.parse_error},
                                 {"ended", turn.ended}}}},
                      "step");
  EnvStep s;
  s.observation =
      reply_field(j, "observation", "a string", [](const Json& x) { return x.is_string(); }, where).get<std::string>();
  s.reward = reply_field(j, "reward", "a finite number", is_finite_number, where).get<double>();
  s.done = reply_field(j, "done", "true or false", [](const Json& x) { return x.is_boolean(); }, where).get<bool>();
  const auto flag = [&](const char* key, bool& out) {
    if (j.contains(key)) out = reply_field(j, key, "true or false", [](const Json& x) { return x.is_boolean(); }, where);
  };
  const auto count = [&](const char* key, int64_t& out) {
    if (j.contains(key))
      out = reply_field(j, key, "a count >= 0", [](const Json& x) { return x.is_number_integer() && x.get<int64_t>() >= 0; },
                        where);
  };
  flag("tool_output", s.tool_output);
  flag("error", s.error);
  if (j.contains("success")) {
    bool ok = false;
    flag("success", ok);
    s.success = ok;
  }
  count("tool_calls", s.tool_calls);
  count("tool_errors", s.tool_errors);
  return s;
}

}  // namespace rlcpp
