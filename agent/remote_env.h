// An environment served by another process (agent.env "remote"), gym-style reset and step over ZeroMQ, one JSON
// message each way, like the remote reward (agent/README.md "External environments"):
//   {"type": "reset", "request": n, "episode": "KEY", "item": {"prompt", "answer", "meta", "id"}}
//     -> {"request": n, "observation": str, "tools": [{"name", "description", "parameters"}, ...]}  (tools optional)
//   {"type": "step", "request": n, "episode": "KEY",
//    "turn": {"text": str, "tool_calls": [{"name", "arguments"}], "parse_error": str, "ended": bool}}
//     -> {"request": n, "observation": str, "reward": number, "done": bool, "success": bool, "tool_output": bool,
//         "error": bool, "tool_calls": int, "tool_errors": int}       (all but observation, reward, done optional)
//   {"type": "close", "request": n, "episode": "KEY"}  (not waited for)
//   any reply may be {"request": n, "error": str} instead.
// Each episode has its own DEALER socket; a reply must echo its request's number (a late reply to an earlier one
// is dropped). A reply that does not come within the deadline, or does not parse, throws EnvCallError: the
// episode ends as failed and the run goes on.
#pragma once

#include <memory>
#include <string>

#include "agent/environment.h"
#include "core/error.h"

namespace zmq {
class context_t;
}

namespace rlcpp {

// An environment's call failed: `timeout` when no reply came in time.
class EnvCallError : public Error {
 public:
  EnvCallError(const std::string& what, bool timeout) : Error(what), timeout_(timeout) {}
  bool timeout() const { return timeout_; }

 private:
  bool timeout_;
};

class RemoteEnvironment final : public Environment {
 public:
  // `context` must outlive it. `episode`: the key the server tells episodes apart by.
  RemoteEnvironment(zmq::context_t& context, const std::string& endpoint, double timeout_s, std::string episode);
  ~RemoteEnvironment() override;
  std::string reset(const Problem& item) override;
  EnvStep step(const AssistantTurn& turn) override;
  std::vector<ToolSpec> tools() const override { return tools_; }

 private:
  Json call(Json request, const char* what);

  struct Socket;
  std::unique_ptr<Socket> socket_;
  std::string endpoint_;
  double timeout_s_;
  std::string episode_;
  int64_t next_request_ = 0;
  std::vector<ToolSpec> tools_;
};

}  // namespace rlcpp
