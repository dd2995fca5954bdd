// Episodes' sessions on workers (loop/worker_turns.h over rollout/turns_wire.h): turns played on two workers (on
// threads, over inproc://) equal the in-process engine's sessions turn for turn, bit for bit, whichever worker
// holds which session; a session moved to another worker with its history samples what it would have sampled;
// a bad turns message gets an error reply naming what is wrong and the worker keeps serving.
#include <gtest/gtest.h>

#include <cstring>

#include "loop/engine_turns.h"
#include "loop/worker_turns.h"
#include "rollout/turns_wire.h"
#include "tests/rollout_worker_support.h"

namespace rlcpp {
namespace {

SamplingParams base_sampling() {
  SamplingParams s;
  s.temperature = 1.0f;
  s.top_k = 12;
  return s;
}

void expect_same_replies(const std::vector<TurnReply>& want, const std::vector<TurnReply>& got, int round) {
  ASSERT_EQ(got.size(), want.size()) << "round " << round;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "round " << round << " turn " << i;
    ASSERT_EQ(got[i].logprobs.size(), want[i].logprobs.size());
    EXPECT_EQ(std::memcmp(got[i].logprobs.data(), want[i].logprobs.data(), want[i].logprobs.size() * sizeof(float)), 0)
        << "round " << round << " turn " << i << ": log-probs differ";
    EXPECT_EQ(got[i].ended, want[i].ended);
    EXPECT_EQ(got[i].policy_version, want[i].policy_version);
  }
}

// Six sessions (two groups of three, each group one prompt), four rounds of turns with observations appended
// between them and sessions closing along the way; on two workers and on the in-process engine.
TEST(WorkerTurns, SessionsOnTwoWorkersEqualTheEngineSessionsBitForBit) {
  ThreadWorkers w;
  w.bind(2);
  WorkerClient client = WorkerClient::connect(w.ctx, w.endpoints);
  WorkerSessionBook book;
  const int64_t context = w.cfg.max_position_embeddings;
  WorkerTurns remote(client, nullptr, book, base_sampling(), context);
  Engine engine(w.model, w.params, worker_options().engine);
  EngineTurns local(engine, base_sampling());
  EXPECT_EQ(remote.context(), local.context());

  std::vector<int64_t> r_ids, l_ids;
  for (int s = 0; s < 6; ++s) {
    const std::vector<int32_t> prompt = random_tokens(3 + s / 3, w.cfg.vocab_size, 40 + s / 3);
    r_ids.push_back(remote.open(prompt, 100 + s / 3, s % 3));
    l_ids.push_back(local.open(prompt, 100 + s / 3, s % 3));
  }
  const std::vector<int64_t> stops = {5};
  std::vector<size_t> live = {0, 1, 2, 3, 4, 5};
  for (int round = 0; round < 4; ++round) {
    std::vector<TurnAsk> r_asks, l_asks;
    for (size_t s : live) {
      r_asks.push_back({r_ids[s], 2 + static_cast<int64_t>(s + round) % 3, 7});
      l_asks.push_back({l_ids[s], 2 + static_cast<int64_t>(s + round) % 3, 7});
    }
    expect_same_replies(local.run_turns(l_asks, stops), remote.run_turns(r_asks, stops), round);
    // One session ends each round; the others are given an observation.
    local.close(l_ids[live.front()]);
    remote.close(r_ids[live.front()]);
    live.erase(live.begin());
    for (size_t s : live) {
      const std::vector<int32_t> obs = random_tokens(1 + static_cast<int64_t>(s) % 2, w.cfg.vocab_size, 900 + round * 10 + s);
      local.append(l_ids[s], obs);
      remote.append(r_ids[s], obs);
    }
  }
  EXPECT_EQ(remote.stats().generated_tokens, local.stats().generated_tokens);
}

// A session's history appended to a fresh session (what a session does when its worker fails and another one
// takes it) continues as the session itself would: the same tokens and log-probs.
TEST(WorkerTurns, ASessionOpenedAgainWithItsHistorySamplesTheSameTokens) {
  ThreadWorkers w;
  w.bind(1);
  WorkerClient client = WorkerClient::connect(w.ctx, w.endpoints);
  WorkerSessionBook book;
  Engine engine(w.model, w.params, worker_options().engine);
  EngineTurns local(engine, base_sampling());
  const std::vector<int32_t> prompt = random_tokens(4, w.cfg.vocab_size, 3);
  const int64_t kept = local.open(prompt, 9, 1);
  std::vector<int32_t> history;
  for (int round = 0; round < 2; ++round) {
    const TurnReply r = local.run_turns({{kept, 3, 11}}, {}).at(0);
    history.insert(history.end(), r.tokens.begin(), r.tokens.end());
    const std::vector<int32_t> obs = random_tokens(2, w.cfg.vocab_size, 50 + round);
    history.insert(history.end(), obs.begin(), obs.end());
    local.append(kept, obs);
  }
  const std::vector<TurnReply> want = local.run_turns({{kept, 4, 11}}, {});
  WorkerTurns remote(client, nullptr, book, base_sampling(), w.cfg.max_position_embeddings);
  const int64_t moved = remote.open(prompt, 9, 1);
  remote.append(moved, history);
  expect_same_replies(want, remote.run_turns({{moved, 4, 11}}, {}), 0);
}

TEST(WorkerTurns, BadTurnsMessagesGetErrorRepliesNamingTheFieldAndTheWorkerKeepsServing) {
  ThreadWorkers w;
  w.bind(1);
  RawClient raw(w.ctx, w.endpoints[0]);
  auto expect_error = [&](const TurnsCall& call, const std::string& needle) {
    raw.send(encode_turns_request(call, 3));
    const WireMessage r = raw.reply();
    ASSERT_EQ(r.type(), "error") << needle << ": " << r.header.dump();
    const std::string msg = r.header["message"].get<std::string>();
    EXPECT_NE(msg.find(needle), std::string::npos) << "'" << msg << "'";
  };
  TurnsCall good;
  good.sampling = base_sampling();
  good.opens.push_back({1, {{1, 2, 3}, 7, 0}});
  good.turns.push_back({1, 3, 5});

  TurnsCall c = good;
  c.appends.push_back({2, {4}});
  expect_error(c, "tokens appended to session 2, which is not open here");
  c = good;
  c.turns.push_back({3, 2, 5});
  expect_error(c, "a turn of session 3, which is not open here");
  c = good;
  c.opens.push_back({1, {{4}, 7, 1}});
  expect_error(c, "opens session 1 twice");
  c = good;
  c.opens[0].spec.prompt[1] = 100000;
  expect_error(c, "outside the vocabulary");
  c = good;
  c.turns[0].max_new_tokens = 0;
  expect_error(c, "'turn_max_new_tokens' element 0 is 0");
  c = good;
  c.stop_tokens = {-4};
  expect_error(c, "'stop_tokens' holds -4");
  c = good;
  c.opens[0].spec.prompt.clear();
  expect_error(c, "has a prompt of 0 tokens");
  WireMessage m = encode_turns_request(good, 4);
  m.header["reset"] = "yes";
  raw.send(m);
  EXPECT_EQ(raw.reply().type(), "error");

  // Nothing of the refused calls stayed: the good call opens session 1 and runs its turn.
  raw.send(encode_turns_request(good, 5));
  const WireMessage ok = raw.reply();
  ASSERT_EQ(ok.type(), "turns_result") << ok.header.dump();
  uint64_t id = 0;
  const TurnsResult result = decode_turns_result(ok, id);
  EXPECT_EQ(id, 5u);
  ASSERT_EQ(result.turns.size(), 1u);
  EXPECT_GE(result.turns[0].tokens.size(), 1u);
  // Opening it again is refused: it is open.
  raw.send(encode_turns_request(good, 6));
  EXPECT_EQ(raw.reply().type(), "error");
  // A reset drops every session: the same call is taken again.
  TurnsCall again = good;
  again.reset = true;
  raw.send(encode_turns_request(again, 7));
  EXPECT_EQ(raw.reply().type(), "turns_result");
}

}  // namespace
}  // namespace rlcpp
