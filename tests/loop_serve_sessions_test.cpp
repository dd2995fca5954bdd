// `rlcpp serve`'s sessions (rollout/serve_sessions.h, harness mode, served by loop/session_turn_loop.h on the
// in-process engine's turns): a request with an X-Session-Id header is a turn
// of that session, run on the sequence and K/V the engine kept (only the new tokens prefilled), recorded token for
// token as the engine holds it; the same sessions sample the same tokens whether their requests come one by one
// or all at once; a request that does not continue its session (or names none) is a 400 naming the field and
// leaves it as it was;
// a text session encodes only what a request adds (never the model's own text again).
#include <gtest/gtest.h>

#include <httplib.h>

#include <memory>
#include <thread>

#include "loop/engine_turns.h"
#include "loop/session_turn_loop.h"
#include "rollout/engine.h"
#include "rollout/serve_http.h"
#include "rollout/serve_loop.h"
#include "rollout/serve_sessions.h"
#include "tokenizer/tokenizer.h"
#include "tests/test_models.h"

namespace rlcpp {
namespace {

constexpr int64_t kTurnTokens = 6;

SamplingParams run_sampling() {
  SamplingParams s;
  s.max_new_tokens = kTurnTokens;
  s.temperature = 1.0f;
  s.seed = 1234;
  return s;
}

// A model, its engine, and a server whose book holds sessions "a".."h" (prompt id 10 + i, sample index i).
struct SessionServer {
  SessionServer() {
    cfg.max_position_embeddings = 256;
    ec.block_size = 4;
    ec.max_num_seqs = 64;
    ec.max_num_batched_tokens = 1024;
    engine = std::make_unique<Engine>(model, params, ec);
    for (int i = 0; i < 8; ++i) book.add(std::string(1, static_cast<char>('a' + i)), 10 + i, i, run_sampling().seed);
    ServeOptions o;
    o.port = 0;
    o.model_name = "policy";
    turns = std::make_unique<EngineTurns>(*engine, run_sampling());
    loop = std::make_unique<SessionTurnLoop>(book);
    loop->begin_draw(*turns);
    http = std::make_unique<ServeHttp>(*loop, tok, o, cfg.max_position_embeddings, cfg.vocab_size, &book);
    http->bind();
    thread = std::thread([this] { http->listen(); });
  }
  ~SessionServer() { stop(); }
  // Stops the server and its loop (the draw not ended: the engine keeps the sessions): the engine is the test
  // thread's again.
  void stop() {
    if (!http) return;
    http->stop();
    thread.join();
    http.reset();
    loop.reset();
  }
  httplib::Result post(const Json& body, const std::string& session) {
    httplib::Client c("127.0.0.1", http->port());
    c.set_read_timeout(60);
    httplib::Headers headers;
    if (!session.empty()) headers.emplace(kSessionHeader, session);
    return c.Post("/v1/completions", headers, body.dump(), "application/json");
  }

  ModelConfig cfg = [] {
    ModelConfig c = small_test_config();
    c.max_position_embeddings = 256;
    return c;
  }();
  ParameterStore params = scaled_test_params(cfg);
  Transformer model{cfg};
  EngineConfig ec;
  std::unique_ptr<Engine> engine;
  CharTokenizer tok;
  ServeSessions book{tok, run_sampling(), nullptr};
  std::unique_ptr<EngineTurns> turns;
  std::unique_ptr<SessionTurnLoop> loop;
  std::unique_ptr<ServeHttp> http;
  std::thread thread;
};

Json completion(const Json& prompt, int64_t max_tokens = 100) {
  return Json{{"prompt", prompt}, {"max_tokens", max_tokens}, {"return_token_ids", true}};
}

std::vector<int32_t> ids(const Json& j) { return j.get<std::vector<int32_t>>(); }

// Three turns of session `key` by token ids: the prompt, then each time the tokens sampled and an observation.
void play_ids(SessionServer& s, const std::string& key) {
  std::vector<int32_t> context = random_test_tokens(5, s.cfg.vocab_size, 7 + key[0]);
  for (int turn = 0; turn < 3; ++turn) {
    const auto r = s.post(completion(context), key);
    ASSERT_TRUE(r) << "no response";
    ASSERT_EQ(r->status, 200) << r->body;
    const Json choice = Json::parse(r->body)["choices"][0];
    EXPECT_EQ(ids(choice["prompt_token_ids"]), context);  // what the model read: the session's whole sequence
    const std::vector<int32_t> sampled = ids(choice["token_ids"]);
    // The run's cap, not the request's 100 (a turn ends sooner at EOS).
    EXPECT_TRUE(!sampled.empty() && static_cast<int64_t>(sampled.size()) <= kTurnTokens) << sampled.size();
    context.insert(context.end(), sampled.begin(), sampled.end());
    for (int32_t t : random_test_tokens(2 + turn, s.cfg.vocab_size, 50 + turn + key[0])) context.push_back(t);
  }
}

TEST(ServeSessions, ATurnRunsOnTheKeptSequenceAndIsRecordedAsTheEngineHoldsIt) {
  SessionServer s;
  play_ids(s, "a");
  const SessionRecord rec = s.book.records().at("a");
  ASSERT_TRUE(rec.opened());
  ASSERT_EQ(rec.turn_spans.size(), 3u);
  // Prompt 5, then three turns with 2 and 3 appended between: the appended tokens and the one sampled before them
  // are all each later turn prefilled.
  EXPECT_EQ(rec.prompt.size(), 5u);
  int64_t turn_tokens = 0;
  for (const auto& [begin, end] : rec.turn_spans) turn_tokens += end - begin;
  EXPECT_EQ(static_cast<int64_t>(rec.tokens.size()), turn_tokens + 2 + 3);
  EXPECT_EQ(rec.turn_spans[1].first - rec.turn_spans[0].second, 2);
  EXPECT_EQ(rec.turn_spans[2].first - rec.turn_spans[1].second, 3);
  EXPECT_EQ(rec.prefilled_tokens, 5 + (2 + 1) + (3 + 1));
  EXPECT_EQ(rec.recomputed_tokens, 0);
  for (size_t t = 0; t < rec.tokens.size(); ++t) {
    bool sampled = false;
    for (const auto& [begin, end] : rec.turn_spans)
      sampled = sampled || (static_cast<int64_t>(t) >= begin && static_cast<int64_t>(t) < end);
    EXPECT_EQ(rec.sampled[t], sampled ? 1 : 0) << "token " << t;
    EXPECT_EQ(rec.versions[t], sampled ? 0 : -1) << "token " << t;
    if (!sampled) EXPECT_EQ(rec.logprobs[t], 0.0f);
  }
  const int64_t id = s.book.engine_sessions().at("a");
  s.stop();
  const Sequence& seq = s.engine->session(id).sequence;
  EXPECT_EQ(seq.prompt(), rec.prompt);
  EXPECT_EQ(seq.output(), rec.tokens);
  EXPECT_EQ(seq.logprobs(), rec.logprobs);
}

TEST(ServeSessions, SessionsSampleTheSameTokensAloneOrAllAtOnce) {
  std::map<std::string, SessionRecord> alone, together;
  {
    SessionServer s;
    for (const char* key : {"a", "b", "c", "d"}) play_ids(s, key);
    alone = s.book.records();
  }
  {
    SessionServer s;
    std::vector<std::thread> clients;
    for (const char* key : {"d", "c", "b", "a"}) clients.emplace_back([&s, key] { play_ids(s, key); });
    for (std::thread& t : clients) t.join();
    together = s.book.records();
  }
  for (const char* key : {"a", "b", "c", "d"}) {
    EXPECT_EQ(alone.at(key).tokens, together.at(key).tokens) << key;
    EXPECT_EQ(alone.at(key).logprobs, together.at(key).logprobs) << key;
  }
  EXPECT_NE(alone.at("a").tokens, alone.at("b").tokens);  // their own keys: other draws
}

TEST(ServeSessions, ARequestThatDoesNotContinueItsSessionIsA400AndTheSessionGoesOn) {
  SessionServer s;
  const std::vector<int32_t> prompt = {5, 6, 7, 8};
  const auto first = s.post(completion(prompt), "a");
  ASSERT_EQ(first->status, 200) << first->body;
  const std::vector<int32_t> sampled = ids(Json::parse(first->body)["choices"][0]["token_ids"]);
  const auto refused = [&](const Json& body, const std::string& session, int status, const std::string& param) {
    const auto r = s.post(body, session);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << r->body;
    EXPECT_EQ(Json::parse(r->body)["error"]["param"], param) << r->body;
  };
  std::vector<int32_t> rewritten = prompt;
  rewritten[1] = 9;
  refused(completion(rewritten), "a", 400, "prompt");
  refused(completion("5678"), "a", 400, "prompt");  // began with ids: continues with ids
  refused(completion(prompt), "nobody", 400, kSessionHeader);
  refused(Json{{"prompt", prompt}, {"n", 2}}, "b", 400, "n");
  refused(Json{{"prompt", prompt}, {"stop", "1"}}, "b", 400, "stop");
  refused(Json{{"prompt", prompt}, {"logprobs", 2}}, "b", 400, "logprobs");
  refused(completion(prompt), "", 400, kSessionHeader);  // a run's server: every request is a session's turn
  std::vector<int32_t> next = prompt;
  next.insert(next.end(), sampled.begin(), sampled.end());
  next.push_back(4);
  const auto second = s.post(completion(next), "a");
  ASSERT_EQ(second->status, 200) << second->body;
  const SessionRecord rec = s.book.records().at("a");
  EXPECT_EQ(rec.turn_spans.size(), 2u);
  EXPECT_EQ(rec.turn_spans[1].first, static_cast<int64_t>(sampled.size()) + 1);
  EXPECT_TRUE(rec.failure.empty());
}

TEST(ServeSessions, AServerWithoutABookRefusesTheHeader) {
  ModelConfig cfg = small_test_config();
  ParameterStore params = scaled_test_params(cfg);
  Transformer model{cfg};
  EngineConfig ec;
  Engine engine(model, params, ec);
  CharTokenizer tok;
  ServeLoop loop(engine, tok);
  ServeOptions o;
  o.port = 0;
  o.model_name = "policy";
  ServeHttp http(loop, tok, o, cfg.max_position_embeddings, cfg.vocab_size);
  http.bind();
  std::thread thread([&] { http.listen(); });
  httplib::Client c("127.0.0.1", http.port());
  const auto r = c.Post("/v1/completions", {{kSessionHeader, "a"}}, completion("1+1=").dump(), "application/json");
  http.stop();
  thread.join();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(Json::parse(r->body)["error"]["param"], kSessionHeader);
}

// The book alone: a text session encodes only what each request adds to the text so far (the model's own text,
// here a token that decodes to a character the tokenizer cannot encode, is never encoded again); a session's
// second request while its first runs is a 409.
TEST(ServeSessions, ATextSessionEncodesOnlyWhatARequestAdds) {
  CharTokenizer tok;
  ServeSessions book(tok, run_sampling(), nullptr);
  book.add("t", 3, 0, run_sampling().seed);
  CompletionRequest first;
  first.prompt_value = "12+3=";
  first.sampling.max_new_tokens = 100;
  const SessionTurnPlan p1 = book.plan("t", first, 256);
  EXPECT_EQ(book.engine_session("t"), -1);
  EXPECT_EQ(p1.spec.prompt, tok.encode_prompt("12+3=", Json()));
  EXPECT_EQ(p1.spec.prompt_id, 3u);
  EXPECT_EQ(first.sampling.max_new_tokens, kTurnTokens);
  EXPECT_EQ(first.sampling.seed, run_sampling().seed);
  try {
    CompletionRequest again = first;
    book.plan("t", again, 256);
    ADD_FAILURE() << "a second request while the first runs was planned";
  } catch (const ServeError& e) {
    EXPECT_EQ(e.status(), 409);
  }
  book.opened("t", 0);
  TurnResult t;
  t.tokens = {tok.encode("1")[0], 21, tok.eos_id()};  // "1", then an id the charset leaves unused: '?'
  t.logprobs = {-0.5f, -1.5f, -0.25f};
  t.finish_reason = FinishReason::kEos;
  book.turn_done(p1, t);
  CompletionRequest second;
  second.prompt_value = "12+3=1? 12+3=";
  second.sampling.max_new_tokens = 2;
  const SessionTurnPlan p2 = book.plan("t", second, 256);
  EXPECT_EQ(book.engine_session("t"), 0);
  EXPECT_TRUE(p2.spec.prompt.empty());  // only the first request opens with its prompt
  EXPECT_EQ(p2.append, tok.encode(" 12+3="));
  EXPECT_EQ(second.sampling.max_new_tokens, 2);
  std::vector<int32_t> whole = p1.spec.prompt;
  whole.insert(whole.end(), t.tokens.begin(), t.tokens.end());
  whole.insert(whole.end(), p2.append.begin(), p2.append.end());
  EXPECT_EQ(second.prompt, whole);
  book.turn_failed("t", "its client went away during the turn");
  CompletionRequest third = second;
  try {
    book.plan("t", third, 256);
    ADD_FAILURE() << "a failed session was planned";
  } catch (const ServeError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find("failed earlier"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rlcpp

namespace rlcpp {
namespace {

// Episodes that span draws (agent.turns_per_draw): the book lets a session start `budget` turns a draw and holds the
// next until new_draw; agent.max_turns ends a session's requests (a 400); a removed session takes none.
TEST(ServeSessions, ATurnBudgetHoldsASessionsNextTurnUntilTheNextDraw) {
  CharTokenizer tok;
  ServeSessions book(tok, run_sampling(), nullptr);
  book.add("s", 3, 0, run_sampling().seed);
  book.set_draw_budget(1, 0);
  book.set_max_turns(2);
  book.new_draw();
  TurnResult t;
  t.tokens = {tok.encode("1")[0]};
  t.logprobs = {-0.5f};
  CompletionRequest first;
  first.prompt_value = "12+3=";
  const SessionTurnPlan p1 = book.plan("s", first, 256);
  EXPECT_TRUE(book.start_turn("s"));
  book.turn_done(p1, t);
  CompletionRequest second;
  second.prompt_value = "12+3=1 12+3=";
  const SessionTurnPlan p2 = book.plan("s", second, 256);
  EXPECT_FALSE(book.start_turn("s"));  // past its one turn of the draw: held
  ServeSessions::State st = book.state("s");
  EXPECT_TRUE(st.busy && st.held);
  book.new_draw();
  st = book.state("s");
  EXPECT_TRUE(st.busy && !st.held);  // the loop has not looked at it yet
  EXPECT_TRUE(book.start_turn("s"));
  book.turn_done(p2, t);
  EXPECT_EQ(book.record("s").turn_spans.size(), 2u);
  CompletionRequest third;
  third.prompt_value = "12+3=1 12+3=1 12+3=";
  try {
    book.plan("s", third, 256);
    ADD_FAILURE() << "a third turn past agent.max_turns 2 was planned";
  } catch (const ServeError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find("agent.max_turns"), std::string::npos) << e.what();
  }
  book.remove("s");
  try {
    book.plan("s", third, 256);
    ADD_FAILURE() << "a removed session was planned";
  } catch (const ServeError& e) {
    EXPECT_EQ(e.status(), 400);
  }
}

}  // namespace
}  // namespace rlcpp

namespace rlcpp {
namespace {

// agent.tokens_per_draw: a turn is cut at the session's tokens for the draw, its part recorded with its version and
// the session held (its request open); in the next draw the turn goes on and closes as one turn of both parts.
TEST(ServeSessions, ATokenBudgetKeepsATurnOpenAcrossDrawsAsOneTurn) {
  CharTokenizer tok;
  ServeSessions book(tok, run_sampling(), nullptr);
  book.add("k", 3, 0, run_sampling().seed);
  book.set_draw_budget(0, 4);
  book.new_draw();
  CompletionRequest first;
  first.prompt_value = "12+3=";
  const SessionTurnPlan p = book.plan("k", first, 256);
  EXPECT_TRUE(book.start_turn("k"));
  EXPECT_EQ(book.tokens_left("k"), 4);
  TurnResult part;
  part.tokens = {tok.encode("1")[0], tok.encode("5")[0], tok.encode("0")[0], tok.encode("0")[0]};
  part.logprobs = {-0.1f, -0.2f, -0.3f, -0.4f};
  part.policy_version = 7;
  book.turn_kept(p, part);
  EXPECT_EQ(book.tokens_left("k"), 0);
  ServeSessions::State st = book.state("k");
  EXPECT_TRUE(st.busy && st.held);
  EXPECT_TRUE(book.record("k").turn_spans.empty());  // the turn is not over
  book.new_draw();
  EXPECT_EQ(book.tokens_left("k"), 4);
  TurnResult rest;
  rest.tokens = {tok.eos_id()};
  rest.logprobs = {-0.5f};
  rest.policy_version = 8;
  rest.finish_reason = FinishReason::kEos;
  book.turn_done(p, rest);
  const SessionRecord rec = book.record("k");
  ASSERT_EQ(rec.turn_spans.size(), 1u);
  EXPECT_EQ(rec.turn_spans[0], std::make_pair(int64_t{0}, int64_t{5}));
  EXPECT_EQ(rec.versions, (std::vector<int64_t>{7, 7, 7, 7, 8}));
  EXPECT_EQ(rec.turn_ended, std::vector<uint8_t>{1});
  st = book.state("k");
  EXPECT_FALSE(st.busy || st.held);
  // The session's text is the whole turn's: the next request continues after "1500" and the EOS.
  CompletionRequest second;
  second.prompt_value = "12+3=1500 12+3=";
  try {
    book.plan("k", second, 256);
  } catch (const ServeError& e) {
    ADD_FAILURE() << e.what();
  }
}

}  // namespace
}  // namespace rlcpp
