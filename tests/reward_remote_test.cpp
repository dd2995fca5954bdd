// Remote reward against scripts/reward_server_example.py: normal, slow (timeout), dead (refused) and
// malformed servers each behave as configured, and none hangs.
#include <gtest/gtest.h>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "reward/arithmetic_task.h"
#include "reward/remote_reward.h"
#include "reward/reward_function.h"
#include "tests/server_process.h"

namespace rlcpp {
namespace {

RemoteRequest request(const std::string& prompt, const std::string& response, bool terminated) {
  RemoteRequest r;
  r.prompt = prompt;
  r.response = response;
  r.terminated = terminated;
  return r;
}

// Five add3 responses: correct, wrong integer, not an integer, unterminated, bytes outside the vocabulary.
std::vector<RemoteRequest> add_requests() {
  return {request("12+30=", "42", true), request("12+30=", "41", true), request("12+30=", "4 2", true),
          request("12+30=", "42", false), request("12+30=", "\xff\xfe", true)};
}

RemoteRewardConfig fast_config(const std::string& endpoint, const std::string& on_failure = "fail") {
  RemoteRewardConfig cfg;
  cfg.endpoint = endpoint;
  cfg.timeout_ms = 300;
  cfg.retries = 1;
  cfg.on_failure = on_failure;
  return cfg;
}

std::string error_of(RemoteRewardClient& client, const std::vector<RemoteRequest>& requests) {
  try {
    client.score(requests);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// ---- protocol pieces, no server needed ----

TEST(RemoteReply, AcceptsNumbersAndObjects) {
  std::vector<RewardResult> r = parse_remote_reply(
      R"({"rewards": [1, 0.1, {"total": 0.5, "components": {"style": 0.25}, "correct": true}, {"total": 2}]})", 4,
      1.0);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].total, 1.0);
  EXPECT_TRUE(r[0].correct);  // total >= correct_threshold
  EXPECT_DOUBLE_EQ(r[1].total, 0.1);
  EXPECT_FALSE(r[1].correct);
  EXPECT_TRUE(r[2].correct);  // explicit
  ASSERT_EQ(r[2].components.size(), 1u);
  EXPECT_EQ(r[2].components[0].first, "style");
  EXPECT_EQ(r[2].components[0].second, 0.25);
  EXPECT_TRUE(r[3].correct);
  EXPECT_FALSE(parse_remote_reply(R"({"rewards": [1]})", 1, 1.5)[0].correct);
}

TEST(RemoteReply, MalformedRepliesSayWhatIsWrong) {
  auto error = [](const std::string& reply, size_t expected) {
    try {
      parse_remote_reply(reply, expected, 1.0);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_TRUE(contains(error("not json", 1), "not JSON"));
  EXPECT_TRUE(contains(error("", 1), "not JSON"));
  EXPECT_TRUE(contains(error("[1]", 1), "expected an object"));
  EXPECT_TRUE(contains(error(R"({"error": "db down"})", 1), "db down"));
  EXPECT_TRUE(contains(error(R"({"reward": [1]})", 1), "no \"rewards\" array"));
  EXPECT_TRUE(contains(error(R"({"rewards": [1, 1]})", 3), "expected 3 rewards"));
  EXPECT_TRUE(contains(error(R"({"rewards": ["1"]})", 1), "rewards[0]"));
  EXPECT_TRUE(contains(error(R"({"rewards": [null]})", 1), "rewards[0]"));
  EXPECT_TRUE(contains(error(R"({"rewards": [1e400]})", 1), "1e400"));
  EXPECT_TRUE(contains(error(R"({"rewards": [{"components": {}}]})", 1), "rewards[0].total"));
  EXPECT_TRUE(contains(error(R"({"rewards": [1, {"total": 1, "components": {"a": "x"}}]})", 2),
                       "rewards[1].components.a"));
  EXPECT_TRUE(contains(error(R"({"rewards": [{"total": 1, "score": 2}]})", 1), "unknown key 'score'"));
  EXPECT_TRUE(contains(error(R"({"rewards": [{"total": 1, "correct": 1}]})", 1), "rewards[0].correct"));
  // Nested past the depth limit (it used to overflow the stack when the message dumped it).
  const std::string deep = R"({"error": )" + std::string(1000000, '[') + std::string(1000000, ']') + "}";
  EXPECT_TRUE(contains(error(deep, 1), "nesting deeper than the limit of 128 levels")) << error(deep, 1).substr(0, 300);
}

TEST(RemoteRequest, CarriesTheAnswerAndReplacesInvalidUtf8) {
  ArithmeticTask task(ArithmeticOp::kAdd, 3, 1, ScorerSpec{});
  RemoteRequest r = make_remote_request(task.make_problem(12, 30), "4\xff", true);
  EXPECT_EQ(r.meta["answer"], "42");
  EXPECT_EQ(r.meta["a"], 12);
  std::string message = encode_remote_requests({r, r}, 1, 2);
  Json j = Json::parse(message);
  ASSERT_EQ(j["requests"].size(), 1u);
  EXPECT_EQ(j["requests"][0]["prompt"], "12+30=");
  EXPECT_EQ(j["requests"][0]["response"], "4\xef\xbf\xbd");  // U+FFFD
  EXPECT_EQ(j["requests"][0]["terminated"], true);
}

TEST(RemoteRewardConfig, InvalidSettingsNameTheKey) {
  auto error = [](RemoteRewardConfig cfg) {
    try {
      RemoteRewardClient client(cfg);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  RemoteRewardConfig cfg;
  cfg.on_failure = "retry";
  EXPECT_TRUE(contains(error(cfg), "reward.remote.on_failure"));
  cfg = RemoteRewardConfig{};
  cfg.timeout_ms = 0;
  EXPECT_TRUE(contains(error(cfg), "reward.remote.timeout_ms"));
  cfg = RemoteRewardConfig{};
  cfg.batch_size = 0;
  EXPECT_TRUE(contains(error(cfg), "reward.remote.batch_size"));
  cfg = RemoteRewardConfig{};
  cfg.retries = -1;
  EXPECT_TRUE(contains(error(cfg), "reward.remote.retries"));
  cfg = RemoteRewardConfig{};
  cfg.endpoint = "localhost:5555";
  EXPECT_TRUE(contains(error(cfg), "reward.remote.endpoint"));
  EXPECT_EQ(error(RemoteRewardConfig{}), "");  // connecting needs no server
  // A dead server must not stall a run for ever: one reply is waited for at most an hour.
  cfg = RemoteRewardConfig{};
  cfg.timeout_ms = 9000000000000;
  EXPECT_TRUE(contains(error(cfg), "config key 'reward.remote.timeout_ms': 9000000000000 is not in [1, 3600000]"))
      << error(cfg);
  cfg.timeout_ms = kMaxRemoteTimeoutMs;
  EXPECT_EQ(error(cfg), "");
  // A port outside 1..65535 (libzmq would take 70000 as 70000 mod 2^16 and wait for no server), or a name that is
  // no endpoint: refused by key, at once.
  for (const std::string bad : {"tcp://127.0.0.1:70000", "tcp://127.0.0.1:0", "tcp://127.0.0.1:*", "foo",
                                "inproc://rewards"}) {
    cfg.endpoint = bad;
    const std::string e = error(cfg);
    EXPECT_TRUE(contains(e, "config key 'reward.remote.endpoint'") && contains(e, bad)) << e;
  }
}

TEST(RewardFunction, LocalScoresWithTheTaskAndUnknownTypeIsAnError) {
  ArithmeticTask task(ArithmeticOp::kAdd, 3, 1, ScorerSpec{});
  Problem p = task.make_problem(12, 30);
  std::unique_ptr<RewardFunction> local = make_reward_function(RewardConfig{}, task);
  std::vector<RewardResult> r = local->score({{&p, "42", true}, {&p, "41", true}, {&p, "42", false}});
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].total, 1.0);
  EXPECT_DOUBLE_EQ(r[1].total, 0.1);
  EXPECT_EQ(r[2].total, 0.0);
  RewardConfig cfg;
  cfg.type = "http";
  try {
    make_reward_function(cfg, task);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "reward.type")) << e.what();
  }
}

// ---- against the example server ----

class RemoteServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!python_has_zmq()) GTEST_SKIP() << "neither /usr/bin/python3 nor $RLCPP_VENV/bin/python imports zmq (install python3-zmq)";
  }
};

TEST_F(RemoteServerTest, NormalServerScoresEveryRequestInBatches) {
  ServerProcess server("reward_server_example.py", {});
  RemoteRewardConfig cfg = fast_config(server.endpoint());
  cfg.timeout_ms = 5000;  // a normal server must not be mistaken for a slow one on a loaded machine
  cfg.batch_size = 2;
  RemoteRewardClient client(cfg);
  std::vector<RewardResult> r = client.score(add_requests());
  ASSERT_EQ(r.size(), 5u);
  std::vector<double> expected = {1.0, 0.1, 0.0, 0.0, 0.0};
  for (size_t i = 0; i < r.size(); ++i) EXPECT_DOUBLE_EQ(r[i].total, expected[i]) << i;
  EXPECT_TRUE(r[0].correct);
  EXPECT_FALSE(r[1].correct);
  ASSERT_EQ(r[0].components.size(), 2u);
  EXPECT_EQ(r[0].components[0].first, "correct");
  EXPECT_EQ(client.counters().batches, 3);
  EXPECT_EQ(client.counters().attempts, 3);
  EXPECT_EQ(client.counters().timeouts, 0);
  // The same socket serves the next call.
  EXPECT_EQ(client.score({request("1+1=", "2", true)})[0].total, 1.0);
  EXPECT_EQ(client.counters().failed_batches, 0);
}

TEST_F(RemoteServerTest, PlainNumberRepliesAreTotals) {
  ServerProcess server("reward_server_example.py", {"--plain"});
  RemoteRewardConfig cfg = fast_config(server.endpoint());
  cfg.timeout_ms = 5000;
  RemoteRewardClient client(cfg);
  std::vector<RewardResult> r = client.score(add_requests());
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(r[0].total, 1.0);
  EXPECT_TRUE(r[0].correct);
  EXPECT_DOUBLE_EQ(r[1].total, 0.1);
  EXPECT_FALSE(r[1].correct);
  EXPECT_TRUE(r[0].components.empty());
}

TEST_F(RemoteServerTest, SlowServerWithinTheTimeoutSucceeds) {
  ServerProcess server("reward_server_example.py", {"--delay", "0.1"});
  RemoteRewardConfig cfg = fast_config(server.endpoint());
  cfg.timeout_ms = 5000;
  RemoteRewardClient client(cfg);
  EXPECT_EQ(client.score(add_requests())[0].total, 1.0);
  EXPECT_EQ(client.counters().timeouts, 0);
}

TEST_F(RemoteServerTest, SlowServerTimesOutAndFailsTheStep) {
  ServerProcess server("reward_server_example.py", {"--delay", "30"});
  RemoteRewardClient client(fast_config(server.endpoint(), "fail"));
  auto start = Clock::now();
  std::string m = error_of(client, add_requests());
  EXPECT_LT(seconds_since(start), 3.0);  // 2 attempts of 300 ms, not the server's 30 s
  EXPECT_TRUE(contains(m, "did not answer")) << m;
  EXPECT_TRUE(contains(m, "300 ms")) << m;
  EXPECT_TRUE(contains(m, server.endpoint())) << m;
  EXPECT_TRUE(contains(m, "on_failure")) << m;
  EXPECT_EQ(client.counters().attempts, 2);
  EXPECT_EQ(client.counters().timeouts, 2);
  EXPECT_EQ(client.counters().failed_batches, 1);
}

TEST_F(RemoteServerTest, SlowServerTimesOutAndScoresZero) {
  ServerProcess server("reward_server_example.py", {"--delay", "30"});
  RemoteRewardConfig cfg = fast_config(server.endpoint(), "zero");
  cfg.batch_size = 3;
  RemoteRewardClient client(cfg);
  auto start = Clock::now();
  std::vector<RewardResult> r = client.score(add_requests());
  EXPECT_LT(seconds_since(start), 5.0);  // 2 batches x 2 attempts x 300 ms
  ASSERT_EQ(r.size(), 5u);
  for (const RewardResult& x : r) {
    EXPECT_EQ(x.total, 0.0);
    EXPECT_FALSE(x.correct);
    ASSERT_EQ(x.components.size(), 1u);
    EXPECT_EQ(x.components[0].first, "remote_failed");
  }
  EXPECT_EQ(client.counters().failed_batches, 2);
  EXPECT_EQ(client.counters().zeroed_samples, 5);
  Json counters = client.counters_json();
  EXPECT_EQ(counters["zeroed_samples"], 5);
}

TEST_F(RemoteServerTest, LostReplyIsRetriedOnAFreshSocket) {
  // Only the first request is slow: its reply goes to the abandoned socket and the retry is answered.
  ServerProcess server("reward_server_example.py", {"--delay", "0.5", "--delay-count", "1"});
  RemoteRewardConfig cfg = fast_config(server.endpoint(), "fail");
  cfg.timeout_ms = 400;
  cfg.retries = 3;
  RemoteRewardClient client(cfg);
  std::vector<RewardResult> r = client.score(add_requests());
  EXPECT_EQ(r[0].total, 1.0);
  EXPECT_GE(client.counters().timeouts, 1);
  EXPECT_EQ(client.counters().attempts, client.counters().timeouts + 1);
  EXPECT_EQ(client.counters().failed_batches, 0);
}

TEST_F(RemoteServerTest, DeadServerFailsTheStepOrScoresZero) {
  std::string endpoint;
  {
    ServerProcess server("reward_server_example.py", {});
    endpoint = server.endpoint();
  }  // killed: the port now refuses connections
  RemoteRewardClient failing(fast_config(endpoint, "fail"));
  auto start = Clock::now();
  std::string m = error_of(failing, add_requests());
  EXPECT_LT(seconds_since(start), 3.0);
  EXPECT_TRUE(contains(m, "is the server running")) << m;
  RemoteRewardClient zeroing(fast_config(endpoint, "zero"));
  std::vector<RewardResult> r = zeroing.score(add_requests());
  ASSERT_EQ(r.size(), 5u);
  for (const RewardResult& x : r) EXPECT_EQ(x.total, 0.0);
  EXPECT_EQ(zeroing.counters().zeroed_samples, 5);
}

TEST_F(RemoteServerTest, MalformedRepliesFailWithTheReasonAndAreNotRetried) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"json", "not JSON"},
      {"count", "expected 5 rewards"},
      {"type", "rewards[0]"},
      {"error", "scoring backend unavailable"}};
  for (const auto& [mode, reason] : cases) {
    ServerProcess server("reward_server_example.py", {"--malformed", mode});
    RemoteRewardConfig cfg = fast_config(server.endpoint(), "fail");
    cfg.timeout_ms = 5000;
    RemoteRewardClient client(cfg);
    auto start = Clock::now();
    std::string m = error_of(client, add_requests());
    EXPECT_LT(seconds_since(start), 4.0) << mode;
    EXPECT_TRUE(contains(m, "malformed reply")) << mode << ": " << m;
    EXPECT_TRUE(contains(m, reason)) << mode << ": " << m;
    EXPECT_EQ(client.counters().attempts, 1) << mode;
    EXPECT_EQ(client.counters().malformed, 1) << mode;
  }
}

TEST_F(RemoteServerTest, MalformedReplyScoresZeroWhenConfigured) {
  ServerProcess server("reward_server_example.py", {"--malformed", "count"});
  RemoteRewardConfig cfg = fast_config(server.endpoint(), "zero");
  cfg.timeout_ms = 5000;
  RemoteRewardClient client(cfg);
  std::vector<RewardResult> r = client.score(add_requests());
  ASSERT_EQ(r.size(), 5u);
  for (const RewardResult& x : r) EXPECT_EQ(x.total, 0.0);
  EXPECT_EQ(client.counters().malformed, 1);
  EXPECT_EQ(client.counters().zeroed_samples, 5);
}

TEST_F(RemoteServerTest, RemoteRewardFunctionSendsTheReferenceAnswer) {
  ServerProcess server("reward_server_example.py", {});
  RewardConfig cfg;
  cfg.type = "remote";
  cfg.remote = fast_config(server.endpoint());
  cfg.remote.timeout_ms = 5000;
  ArithmeticTask task(ArithmeticOp::kAdd, 3, 1, ScorerSpec{});
  std::unique_ptr<RewardFunction> remote = make_reward_function(cfg, task);
  // A prompt the server cannot parse: only meta["answer"] tells it the answer.
  Problem p;
  p.prompt = "forty-two";
  p.answer = "42";
  Problem add = task.make_problem(7, 8);
  std::vector<RewardResult> r = remote->score({{&p, "42", true}, {&add, "15", true}, {&add, "16", true}});
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].total, 1.0);
  EXPECT_EQ(r[1].total, 1.0);
  EXPECT_DOUBLE_EQ(r[2].total, 0.1);
  EXPECT_EQ(remote->counters()["batches"], 1);
}

}  // namespace
}  // namespace rlcpp
