// External environments (agent.env "remote") against scripts/env_server_example.py: a normal server plays the
// guess task; a slow, a malformed and a dying one end their episodes as failed within the deadline (recorded, the
// run goes on), and nothing hangs.
#include <gtest/gtest.h>

#include <zmq.hpp>

#include "agent/episode_runner.h"
#include "agent/remote_env.h"
#include "reward/guess_task.h"
#include "tests/server_process.h"

namespace rlcpp {
namespace {

// A TurnEngine without a model: every turn "guesses" the same text, ended by EOS.
class ScriptedTurns final : public TurnEngine {
 public:
  explicit ScriptedTurns(std::vector<int32_t> turn) : turn_(std::move(turn)) {}
  int64_t open(const std::vector<int32_t>&, uint64_t, int64_t) override { return next_++; }
  void append(int64_t, const std::vector<int32_t>&) override {}
  std::vector<TurnReply> run_turns(const std::vector<TurnAsk>& asks, const std::vector<int64_t>&) override {
    std::vector<TurnReply> out(asks.size());
    for (TurnReply& r : out) {
      r.tokens = turn_;
      r.logprobs.assign(turn_.size(), -1.0f);
      r.ended = true;
    }
    return out;
  }
  void close(int64_t) override {}
  int64_t context() const override { return 128; }

 private:
  std::vector<int32_t> turn_;
  int64_t next_ = 0;
};

AgentConfig remote_config(const std::string& endpoint, double timeout_s) {
  AgentConfig c;
  c.env = "remote";
  c.endpoint = endpoint;
  c.call_timeout_s = timeout_s;
  c.max_turns = 4;
  return c;
}

// Runs 3 episodes of guess (secret 700) whose every turn guesses 500; returns them.
std::vector<Episode> play(const std::string& endpoint, double timeout_s, double* seconds = nullptr) {
  zmq::context_t context;
  const AgentConfig cfg = remote_config(endpoint, timeout_s);
  const CharTokenizer tok;
  const std::unique_ptr<TurnProtocol> w1 = make_turn_protocol(tok);
  std::vector<int32_t> turn = tok.encode("500");
  turn.push_back(tok.eos_id());
  ScriptedTurns engine(turn);
  std::vector<Episode> episodes(3);
  std::vector<Episode*> run;
  for (size_t i = 0; i < episodes.size(); ++i) {
    episodes[i].problem = GuessTask::make_problem(700);
    episodes[i].sample_index = static_cast<int64_t>(i);
    run.push_back(&episodes[i]);
  }
  const EnvFactory make = [&](const Episode& e) {
    return std::make_shared<RemoteEnvironment>(context, endpoint, timeout_s, episode_key(e));
  };
  const auto start = Clock::now();
  run_episodes(run, engine, make, *w1, cfg, 4);
  if (seconds) *seconds = seconds_since(start);
  for (Episode& e : episodes) e.env.reset();  // before the context goes
  return episodes;
}

TEST(AgentRemoteEnv, ExampleServerPlaysGuessOverZeroMq) {
  if (!python_has_zmq()) GTEST_SKIP() << "no Python with zmq (python3-zmq or $RLCPP_VENV)";
  ServerProcess server("env_server_example.py", {"--max-turns", "4"});
  for (const Episode& e : play(server.endpoint(), 5.0)) {
    EXPECT_TRUE(e.failure.empty()) << e.failure;
    EXPECT_EQ(e.end_reason, "max_turns");
    EXPECT_EQ(e.turns(), 4);
    EXPECT_EQ(e.observation_texts, (std::vector<std::string>{"+", "+", "+"}));
    EXPECT_EQ(e.prompt_text, "(0 999)");
  }
}

// Slow, malformed and dying servers: each episode ends as failed (env_timeout or env_error) with the reason, within
// about the deadline, and run_episodes returns.
TEST(AgentRemoteEnv, SlowMalformedAndDyingServersEndEpisodesAsFailedWithoutHanging) {
  if (!python_has_zmq()) GTEST_SKIP() << "no Python with zmq (python3-zmq or $RLCPP_VENV)";
  struct Case {
    std::vector<std::string> flags;
    std::string reason, says;
  };
  for (const Case& c : {Case{{"--delay", "5"}, "env_timeout", "no reply within"},
                        Case{{"--malformed", "json"}, "env_error", "not JSON"},
                        Case{{"--malformed", "fields"}, "env_error", "no \"done\""},
                        Case{{"--die-after", "4"}, "env_timeout", "no reply within"}}) {
    ServerProcess server("env_server_example.py", c.flags);
    double seconds = 0;
    const std::vector<Episode> episodes = play(server.endpoint(), 0.4, &seconds);
    EXPECT_LT(seconds, 3.0) << c.flags[0];
    int64_t failed = 0;
    for (const Episode& e : episodes) {
      EXPECT_TRUE(e.finished());
      if (e.end_reason != c.reason) continue;
      ++failed;
      EXPECT_NE(e.failure.find(c.says), std::string::npos) << c.flags[0] << ": " << e.failure;
    }
    EXPECT_GE(failed, 1) << c.flags[0];
  }
}

}  // namespace
}  // namespace rlcpp
