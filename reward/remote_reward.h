// Rewards computed by a server the user runs (reward.type = "remote"). Protocol, one ZeroMQ REQ/REP exchange
// per batch, UTF-8 JSON both ways:
//   request: {"requests": [{"prompt": str, "response": str, "terminated": bool, "meta": object}, ...]}
//   reply:   {"rewards": [r, ...]} with one r per request, in order; r is a number (the total) or
//            {"total": number, "components": {name: number, ...}, "correct": bool} (components and correct
//            optional; without "correct" a sample is correct iff total >= correct_threshold)
//            or {"error": str} to reject the whole batch.
// Bytes of a response that are not UTF-8 are sent as U+FFFD. A reply that does not come within timeout_ms is
// retried up to `retries` times on a fresh socket (the lazy pirate pattern: a REQ socket that missed its reply
// cannot send again). A malformed reply is not retried: the server would most likely repeat it. When a batch
// still fails, on_failure decides: "fail" throws with what happened, "zero" scores the batch 0 and counts it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "reward/reward_result.h"
#include "reward/task.h"

namespace rlcpp {

// The longest wait for one reply (reward.remote.timeout_ms): a judge that takes longer than an hour per batch is
// no working server, and a dead one must not stall the run for longer than timeout x (retries + 1).
constexpr int64_t kMaxRemoteTimeoutMs = int64_t{3600} * 1000;

struct RemoteRewardConfig {
  std::string endpoint = "tcp://127.0.0.1:5555";
  int64_t timeout_ms = 10000;
  int64_t retries = 2;
  std::string on_failure = "fail";
  int64_t batch_size = 256;
  double correct_threshold = 1.0;

  template <class V> void visit(V& v) {
    v("endpoint", endpoint, "ZeroMQ endpoint of the reward server (tcp://host:port or ipc://path)");
    v("timeout_ms", timeout_ms, "milliseconds to wait for one reply before retrying (1 to 3600000, an hour)");
    v("retries", retries, "attempts after the first when a reply times out (0 to 100)");
    v("on_failure", on_failure,
      "when a batch gets no valid reply: \"fail\" stops the step with the reason, \"zero\" scores it 0 and "
      "counts it");
    v("batch_size", batch_size, "requests per message");
    v("correct_threshold", correct_threshold,
      "a reward without an explicit \"correct\" counts as correct when its total is at least this");
  }
  // What the client would refuse (an endpoint that is not tcp://HOST:PORT with a port in 1..65535 or ipc://PATH,
  // a timeout outside [1, kMaxRemoteTimeoutMs], retries outside [0, 100], batch_size < 1, on_failure other than
  // fail or zero), named by its key under `prefix`: checked with the run's config, before any work.
  void validate(const std::string& prefix) const;
};

struct RemoteRequest {
  std::string prompt;
  std::string response;  // text before EOS, arbitrary bytes
  bool terminated = false;
  Json meta = Json::object();
};

// The problem's meta plus its reference answer under "answer".
RemoteRequest make_remote_request(const Problem& problem, const std::string& response, bool terminated);

// The request message for requests[begin, end).
std::string encode_remote_requests(const std::vector<RemoteRequest>& requests, size_t begin, size_t end);

// Parses and validates a reply to `expected` requests; throws rlcpp::Error naming what is wrong (not JSON,
// an "error" from the server, a wrong count, a reward of the wrong type).
std::vector<RewardResult> parse_remote_reply(const std::string& reply, size_t expected, double correct_threshold);

struct RemoteRewardCounters {
  int64_t batches = 0;         // batches sent
  int64_t attempts = 0;        // messages sent, retries included
  int64_t timeouts = 0;        // attempts that got no reply in time
  int64_t malformed = 0;       // replies that failed validation
  int64_t failed_batches = 0;  // batches with no valid reply after all attempts
  int64_t zeroed_samples = 0;  // samples scored 0 under on_failure = "zero"
};

class RemoteRewardClient {
 public:
  explicit RemoteRewardClient(const RemoteRewardConfig& cfg);
  ~RemoteRewardClient();
  RemoteRewardClient(const RemoteRewardClient&) = delete;
  RemoteRewardClient& operator=(const RemoteRewardClient&) = delete;

  // One result per request, in order. A failed batch under on_failure = "zero" gives results with total 0
  // and the component {"remote_failed", 1}.
  std::vector<RewardResult> score(const std::vector<RemoteRequest>& requests);

  const RemoteRewardCounters& counters() const { return counters_; }
  Json counters_json() const;

 private:
  struct Connection;
  // Sends one batch and returns its validated rewards, retrying timeouts; throws rlcpp::Error on failure.
  std::vector<RewardResult> exchange(const std::string& payload, size_t expected);

  RemoteRewardConfig cfg_;
  bool zero_on_failure_;
  std::unique_ptr<Connection> connection_;
  RemoteRewardCounters counters_;
};

}  // namespace rlcpp
