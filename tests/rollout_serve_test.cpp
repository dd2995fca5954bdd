// `rlcpp serve`'s layers in one process (rollout/serve_*.h): the HTTP front on a free loopback port, the engine
// loop, a tiny model and the character tokenizer. Seeded requests sample what Engine::generate (`rlcpp generate`)
// samples for that seed, alone or among 64 streaming clients; bad requests are 400s naming the field; a client
// that goes away frees its blocks; /metrics shows the prefix cache's hits; stop strings cut a choice; tools are
// rendered as the Qwen3 template renders them and tool calls read back (the response builder, directly).
#include <gtest/gtest.h>

#include <httplib.h>

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "model/model_config.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "rollout/engine.h"
#include "rollout/serve_http.h"
#include "rollout/serve_loop.h"
#include "rollout/serve_request.h"
#include "rollout/serve_response.h"
#include "rollout/stop_strings.h"
#include "tests/test_fixtures.h"
#include "tests/test_models.h"

namespace rlcpp {
namespace {

ModelConfig serve_test_config() {
  ModelConfig c = small_test_config();
  c.max_position_embeddings = 256;
  return c;
}

EngineConfig serve_engine_config() {
  EngineConfig ec;
  ec.block_size = 4;
  ec.max_num_seqs = 64;
  ec.max_num_batched_tokens = 1024;
  return ec;
}

ServeOptions serve_options(const ServeLimits& limits, const std::string& api_key) {
  ServeOptions o;
  o.port = 0;
  o.model_name = "tiny-test";
  o.api_key = api_key;
  o.limits = limits;
  return o;
}

// The server on a free loopback port, listening on its own thread until destroyed.
struct Server {
  explicit Server(ServeLimits limits = {}, const std::string& api_key = "")
      : options(serve_options(limits, api_key)),
        http(loop, tok, options, cfg.max_position_embeddings, cfg.vocab_size) {
    http.bind();
    thread = std::thread([this] { http.listen(); });
  }
  ~Server() {
    http.stop();
    thread.join();
  }
  httplib::Client client() {
    httplib::Client c("127.0.0.1", http.port());
    c.set_read_timeout(60);
    c.set_write_timeout(60);
    c.set_connection_timeout(60);
    return c;
  }
  ModelConfig cfg = serve_test_config();
  ParameterStore params = scaled_test_params(cfg);
  Transformer model{cfg};
  EngineConfig ec = serve_engine_config();
  Engine engine{model, params, ec};
  CharTokenizer tok;
  ServeOptions options;
  ServeLoop loop{engine, tok};
  ServeHttp http;
  std::thread thread;
};

// What Engine::generate samples for one prompt with this seed (prompt id 0, as `rlcpp generate --prompt`).
std::vector<std::vector<int32_t>> generated(const Server& s, const std::vector<int32_t>& prompt, uint64_t seed,
                                            int64_t n, int64_t max_tokens) {
  Engine engine(s.model, s.params, s.ec);
  Request req;
  req.prompts = {prompt};
  req.n = n;
  req.sampling.seed = seed;
  req.sampling.max_new_tokens = max_tokens;
  req.sampling.ignore_eos = true;
  std::vector<std::vector<int32_t>> out;
  for (const Sample& sample : engine.generate(req).samples) out.push_back(sample.tokens);
  return out;
}

Json body(const std::vector<int32_t>& prompt, uint64_t seed, int64_t n, int64_t max_tokens, bool stream) {
  return Json{{"model", "tiny-test"}, {"prompt", prompt},      {"seed", seed},           {"n", n},
              {"max_tokens", max_tokens}, {"ignore_eos", true}, {"return_token_ids", true}, {"stream", stream}};
}

// A streamed completion whose client reads it through `receiver` (false: hang up).
void stream_with(httplib::Client& c, const Json& request, httplib::ContentReceiverWithProgress receiver) {
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = request.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = std::move(receiver);
  c.send(req);
}

// The token ids of each choice of a streamed response (the SSE events' "token_ids").
std::vector<std::vector<int32_t>> streamed_tokens(const std::string& sse, int64_t n) {
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(n));
  size_t at = 0;
  bool done = false;
  while ((at = sse.find("data: ", at)) != std::string::npos) {
    const size_t end = sse.find("\n\n", at);
    const std::string data = sse.substr(at + 6, end - at - 6);
    at = end;
    if (data == "[DONE]") {
      done = true;
      continue;
    }
    const Json event = Json::parse(data);
    for (const Json& c : event.at("choices"))
      for (const Json& t : c.at("token_ids")) out[c.at("index").get<size_t>()].push_back(t.get<int32_t>());
  }
  EXPECT_TRUE(done) << sse;
  return out;
}

TEST(RolloutServe, ASeededCompletionSamplesWhatGenerateSamples) {
  Server s;
  const std::vector<int32_t> prompt = random_test_tokens(11, s.cfg.vocab_size, 5);
  auto c = s.client();
  const auto res = c.Post("/v1/completions", body(prompt, 42, 3, 9, false).dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const Json j = Json::parse(res->body);
  const auto expected = generated(s, prompt, 42, 3, 9);
  ASSERT_EQ(j["choices"].size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(j["choices"][i]["token_ids"].get<std::vector<int32_t>>(), expected[i]) << "choice " << i;
    EXPECT_EQ(j["choices"][i]["finish_reason"], "length");
    EXPECT_EQ(j["choices"][i]["prompt_token_ids"].get<std::vector<int32_t>>(), prompt);
  }
  EXPECT_EQ(j["usage"]["completion_tokens"], 27);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 11);
}

// Issue 35's invariance: 64 streaming clients at once, each seeded, each get the tokens of their seed alone,
// whatever else shares the batch (the engine's Philox keys and batch-invariant products).
TEST(RolloutServe, SixtyFourConcurrentStreamsEachGetTheirSeedsTokens) {
  Server s;
  const std::vector<int32_t> shared = random_test_tokens(9, s.cfg.vocab_size, 6);
  constexpr int kClients = 64;
  std::vector<std::string> bodies(kClients);
  std::vector<int> statuses(kClients, 0);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i)
    clients.emplace_back([&, i] {
      std::vector<int32_t> prompt = shared;  // a shared prefix, then a tail of its own
      prompt.push_back(i % s.cfg.vocab_size);
      auto c = s.client();
      const auto res = c.Post("/v1/completions", body(prompt, 1000 + i % 8, 1, 6 + i % 5, true).dump(),
                              "application/json");
      if (res) {
        statuses[i] = res->status;
        bodies[i] = res->body;
      } else {
        bodies[i] = "no response: " + httplib::to_string(res.error());
      }
    });
  for (auto& t : clients) t.join();
  for (int i = 0; i < kClients; ++i) {
    EXPECT_EQ(statuses[i], 200) << "client " << i << ": " << bodies[i];
    if (statuses[i] != 200) continue;
    std::vector<int32_t> prompt = shared;
    prompt.push_back(i % s.cfg.vocab_size);
    EXPECT_EQ(streamed_tokens(bodies[i], 1)[0], generated(s, prompt, 1000 + i % 8, 1, 6 + i % 5)[0])
        << "client " << i << ": " << bodies[i].substr(0, 600);
  }
  const ServeLoopFigures f = s.loop.figures();
  EXPECT_EQ(f.jobs_done, kClients);
  EXPECT_EQ(f.blocks_used, 0);
  EXPECT_GT(f.stats.prefix_cache_hit_tokens, 0);  // the shared 8-token prefix (2 blocks) found again
}

// A stream's text, its end and, when asked, a last chunk with the usage, before [DONE].
TEST(RolloutServe, AStreamSendsTheTextThenTheUsageWhenAsked) {
  Server s;
  auto c = s.client();
  const Json request{{"prompt", "12+34="}, {"max_tokens", 5}, {"seed", 2}, {"temperature", 1}, {"ignore_eos", true},
                     {"stream", true}, {"stream_options", {{"include_usage", true}}}};
  const auto res = c.Post("/v1/completions", request.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
  std::string text;
  Json usage, finish;
  size_t at = 0;
  while ((at = res->body.find("data: ", at)) != std::string::npos) {
    const size_t end = res->body.find("\n\n", at);
    const std::string data = res->body.substr(at + 6, end - at - 6);
    at = end;
    if (data == "[DONE]") break;
    const Json event = Json::parse(data);
    if (event.contains("usage")) usage = event["usage"];
    for (const Json& choice : event["choices"]) {
      text += choice["text"].get<std::string>();
      if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
    }
  }
  EXPECT_EQ(finish, "length");
  EXPECT_EQ(usage["completion_tokens"], 5) << res->body;
  EXPECT_EQ(usage["prompt_tokens"], 7);  // BOS and 6 characters
  const auto whole = c.Post("/v1/completions", Json{{"prompt", "12+34="}, {"max_tokens", 5}, {"seed", 2},
                                                    {"temperature", 1}, {"ignore_eos", true}}.dump(),
                            "application/json");
  ASSERT_TRUE(whole);
  EXPECT_EQ(text, Json::parse(whole->body)["choices"][0]["text"]);  // the stream's pieces make the whole text
}

TEST(RolloutServe, BadRequestsAre400sNamingTheField) {
  ServeLimits limits;
  limits.max_tokens = 50;
  limits.max_n = 4;
  limits.max_body_bytes = 4096;
  Server s(limits);
  auto c = s.client();
  const auto expect_error = [&](const std::string& path, const std::string& request, int status,
                                const std::string& param) {
    const auto res = c.Post(path, request, "application/json");
    ASSERT_TRUE(res) << request;
    EXPECT_EQ(res->status, status) << request << " -> " << res->body;
    const Json j = Json::parse(res->body);
    EXPECT_EQ(j["error"]["param"].is_null() ? "" : j["error"]["param"].get<std::string>(), param) << res->body;
    if (!param.empty()) EXPECT_NE(j["error"]["message"].get<std::string>().find(param), std::string::npos) << res->body;
  };
  expect_error("/v1/completions", R"({"prompt": "1+2=", "max_tokens": 51})", 400, "max_tokens");
  expect_error("/v1/completions", R"({"prompt": "1+2=", "n": 0})", 400, "n");
  expect_error("/v1/completions", R"({"prompt": "1+2=", "n": 5})", 400, "n");
  expect_error("/v1/completions", R"({"prompt": "1+2=", "temperature": "hot"})", 400, "temperature");
  expect_error("/v1/completions", R"({"prompt": "1+2=", "top_p": 0})", 400, "top_p");
  expect_error("/v1/completions", R"({"prompt": "1+2=", "frequency_penalty": 1})", 400, "frequency_penalty");
  expect_error("/v1/completions", R"({"prompt": "1+2=", "stop": ["1", "2", "3", "4", "5"]})", 400, "stop");
  expect_error("/v1/completions", R"({"prompt": "1+2=", "stop": [""]})", 400, "stop");
  expect_error("/v1/completions", R"({"prompt": "1+2=", "stop": 7})", 400, "stop");
  expect_error("/v1/completions", R"({"prompt": "1+2=", "tools": []})", 400, "tools");  // chat only
  expect_error("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "1"}], "tool_choice": "required"})",
               400, "tool_choice");
  expect_error("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "1"}], "tools": [{"type": "x"}]})",
               400, "tools");
  expect_error("/v1/completions", R"({"prompt": [1, 2, 99]})", 400, "prompt");
  expect_error("/v1/completions", R"({"prompt": "abc"})", 400, "prompt");  // not in the character set
  expect_error("/v1/completions", R"({"max_tokens": 3})", 400, "prompt");
  expect_error("/v1/completions", "{\"prompt\": \"" + std::string(300, '1') + "\"}", 400, "prompt");
  expect_error("/v1/completions", R"({"prompt": "1", "model": "other"})", 404, "model");
  expect_error("/v1/completions", "not json", 400, "");
  expect_error("/v1/completions", R"({"prompt": "1+2=", "max_tokens": 3)", 400, "");  // truncated
  expect_error("/v1/completions", "{\"prompt\": \"1\xff\"}", 400, "");               // invalid UTF-8
  expect_error("/v1/completions", R"({"prompt": "1+2=", "n": 1000000})", 400, "n");
  expect_error("/v1/completions", R"({"prompt": "1+2=", "max_tokens": -1})", 400, "max_tokens");
  expect_error("/v1/completions", R"({"prompt": "1+2=", "seed": -3})", 400, "seed");
  expect_error("/v1/completions", R"({"prompt": "1+2=", "stream": "yes"})", 400, "stream");
  expect_error("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "1+2="}]})", 400, "messages");
  expect_error("/v1/completions", "{\"prompt\": \"" + std::string(5000, '1') + "\"}", 413, "");
  const auto missing = c.Get("/v1/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  // The server still answers.
  const auto ok = c.Post("/v1/completions", R"({"prompt": "1+2=", "max_tokens": 3, "temperature": 0})",
                         "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
}

TEST(RolloutServe, AnApiKeyIsRequiredWhenSetAndForBindingBeyondLoopback) {
  Server s({}, "sekret");
  auto c = s.client();
  const auto denied = c.Get("/v1/models");
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 401);
  const auto models = c.Get("/v1/models", {{"Authorization", "Bearer sekret"}});
  ASSERT_TRUE(models);
  ASSERT_EQ(models->status, 200);
  EXPECT_EQ(Json::parse(models->body)["data"][0]["id"], "tiny-test");
  const auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  ServeOptions open;
  open.host = "0.0.0.0";
  open.model_name = "m";
  EXPECT_THROW(check_serve_options(open), Error);
  open.api_key = "k";
  EXPECT_NO_THROW(check_serve_options(open));
}

// The client hangs up after its first chunk. The test model is small enough that, on a loaded machine, the server
// can generate and buffer the whole answer in the socket before the client's thread runs again (the job then ends
// normally: nothing to cancel); so up to five attempts, each of n = 16 x 240 tokens, until one is cancelled. The
// cancelled job stops short of its tokens; every attempt leaves no job in flight and no block in use.
TEST(RolloutServe, ADisconnectedClientsSequencesAreDroppedAndTheirBlocksFreed) {
  Server s;
  auto c = s.client();
  constexpr int64_t kN = 16, kTokens = 240;
  int64_t cancelled_tokens = -1;
  for (int attempt = 0; attempt < 5 && cancelled_tokens < 0; ++attempt) {
    const ServeLoopFigures before = s.loop.figures();
    stream_with(c, body(random_test_tokens(5, s.cfg.vocab_size, 3), 1, kN, kTokens, true),
                [](const char*, size_t, uint64_t, uint64_t) { return false; });  // gone after one chunk
    for (int i = 0; i < 200 && s.loop.figures().jobs_in_flight > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const ServeLoopFigures f = s.loop.figures();
    EXPECT_EQ(f.jobs_in_flight, 0);
    EXPECT_EQ(f.blocks_used, 0);
    if (f.jobs_cancelled > before.jobs_cancelled) {
      EXPECT_EQ(f.jobs_cancelled, before.jobs_cancelled + 1);
      cancelled_tokens = f.stats.generated_tokens - before.stats.generated_tokens;
    }
  }
  ASSERT_GE(cancelled_tokens, 0) << "no attempt's hang-up cancelled its job";
  EXPECT_LT(cancelled_tokens, kN * kTokens);
}

TEST(RolloutServe, MetricsShowThePrefixCache) {
  Server s;
  auto c = s.client();
  const std::vector<int32_t> prompt = random_test_tokens(13, s.cfg.vocab_size, 8);
  for (int i = 0; i < 2; ++i) {
    const auto res = c.Post("/v1/completions", body(prompt, 3, 1, 2, false).dump(), "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200);
  }
  // Read at once: the loop records a request's times before its client can see what they measure.
  const auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  ASSERT_EQ(m->status, 200);
  // The second request finds the first's 3 full blocks (12 tokens) of its 13-token prompt.
  EXPECT_NE(m->body.find("rlcpp_prefix_cache_hit_tokens_total{model=\"tiny-test\"} 12\n"), std::string::npos)
      << m->body;
  EXPECT_NE(m->body.find("rlcpp_prefix_cache_queried_tokens_total{model=\"tiny-test\"} 26\n"), std::string::npos);
  EXPECT_NE(m->body.find("rlcpp_http_responses_total{model=\"tiny-test\",status=\"200\"} 2\n"), std::string::npos);
  // Both requests in the histograms: one first token each, one time per token each (2 tokens).
  EXPECT_NE(m->body.find("rlcpp_time_to_first_token_seconds_bucket{model=\"tiny-test\",le=\"+Inf\"} 2\n"),
            std::string::npos)
      << m->body;
  EXPECT_NE(m->body.find("rlcpp_time_per_output_token_seconds_count{model=\"tiny-test\"} 2\n"), std::string::npos);
  EXPECT_NE(m->body.find("rlcpp_time_to_first_token_seconds_bucket{model=\"tiny-test\",le=\"30\"} 2\n"),
            std::string::npos);
}

TEST(RolloutServe, ConcurrencyPastTheLimitIs429) {
  ServeLimits limits;
  limits.max_concurrency = 1;
  limits.max_n = 64;
  Server s(limits);
  // One request in flight: a stream of 64 x 240 tokens (megabytes of events) whose client reads slowly, so the
  // stream, and its place, lasts until the second request has been answered.
  std::atomic<bool> second_answered{false};
  std::thread first([&] {
    auto c = s.client();
    stream_with(c, body(random_test_tokens(5, s.cfg.vocab_size, 3), 1, 64, 240, true),
                [&](const char*, size_t, uint64_t, uint64_t) {
                  while (!second_answered) std::this_thread::sleep_for(std::chrono::milliseconds(5));
                  return true;
                });
  });
  for (int i = 0; i < 1000 && s.loop.figures().jobs_in_flight + s.loop.figures().jobs_done == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  auto c = s.client();
  const auto res = c.Post("/v1/completions", R"({"prompt": "1", "max_tokens": 1})", "application/json");
  second_answered = true;
  first.join();
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 429) << res->body;
  EXPECT_EQ(Json::parse(res->body)["error"]["type"], "rate_limit_error");
}

// A POST of `request` over a plain socket to the server, answered or not; returns the socket.
int post_raw(const Server& s, const std::string& path, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(s.http.port()));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string http = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                           "Content-Length: " + std::to_string(request.size()) + "\r\n\r\n" + request;
  EXPECT_EQ(send(fd, http.data(), http.size(), 0), static_cast<ssize_t>(http.size()));
  return fd;
}

template <class Done>
void wait_for(const Done& done) {
  for (int i = 0; i < 500 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

// A client that hangs up before a reply that does not stream: its job is cancelled and its blocks go back while
// the engine would still be generating (16 x 240 tokens: long enough that a loaded machine's scheduling delays
// between the first token and the hang-up do not let it finish; 4 x 240 once did, in a full parallel ctest), as
// /metrics shows.
TEST(RolloutServe, ANonStreamingClientThatHangsUpFreesItsBlocks) {
  Server s;
  const int fd =
      post_raw(s, "/v1/completions", body(random_test_tokens(5, s.cfg.vocab_size, 3), 1, 16, 240, false).dump());
  for (int i = 0; i < 5000 && s.loop.figures().stats.generated_tokens == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  close(fd);
  wait_for([&] { return s.loop.figures().jobs_cancelled > 0 || s.loop.figures().jobs_done > 0; });
  wait_for([&] { return s.loop.figures().blocks_used == 0; });
  const ServeLoopFigures f = s.loop.figures();
  EXPECT_EQ(f.jobs_cancelled, 1);
  EXPECT_EQ(f.jobs_done, 0);
  EXPECT_EQ(f.jobs_in_flight, 0);
  EXPECT_EQ(f.blocks_used, 0);
  EXPECT_LT(f.stats.generated_tokens, 16 * 240);
  auto c = s.client();
  const auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("rlcpp_requests_running{model=\"tiny-test\"} 0\n"), std::string::npos) << m->body;
  EXPECT_NE(m->body.find("rlcpp_kv_blocks_used{model=\"tiny-test\"} 0\n"), std::string::npos) << m->body;
}

// The pure parts of stop strings: where one begins, what a stream holds back (the longest end of the text that
// starts a stop string), and the engine's watch, which waits for a character's last byte.
TEST(RolloutServe, StopStringsAreFoundAndTheirPossibleStartsHeldBack) {
  const std::vector<std::string> stops = {"34", "=9"};
  EXPECT_EQ(find_stop("12+34=9", stops), 3u);
  EXPECT_EQ(find_stop("12=9+34", stops), 2u);
  EXPECT_EQ(find_stop("12+3", stops), std::string::npos);
  EXPECT_EQ(stop_holdback("12+3", stops), 1u);
  EXPECT_EQ(stop_holdback("12=", stops), 1u);
  EXPECT_EQ(stop_holdback("12", stops), 0u);
  EXPECT_EQ(stop_holdback("xaab", {"aabc", "abx"}), 3u);  // the longest suffix that starts one
  EXPECT_EQ(visible_length("12+3", stops, false), 3u);
  EXPECT_EQ(visible_length("12+3", stops, true), 4u);
  EXPECT_EQ(visible_length("12+34=9", stops, false), 3u);
  EXPECT_EQ(visible_length("12+34=9", stops, true), 3u);

  const CharTokenizer chars;
  StopStringWatch watch(stops, chars);
  for (int32_t id : chars.encode("12+3")) EXPECT_FALSE(watch.add(id));
  EXPECT_TRUE(watch.add(chars.encode("4")[0]));

  // "é" is two bytes; byte-level BPE has a token for each: the first alone is a partial character.
  const HfTokenizer qwen(qwen3_fixture_dir() + "/tokenizer.json", model_preset("qwen-tiny"));
  const std::optional<int32_t> c3 = qwen.bpe().token_id("\xC3\x83"), a9 = qwen.bpe().token_id("\xC2\xA9");
  ASSERT_TRUE(c3 && a9);  // byte-level BPE writes bytes 0xC3 and 0xA9 as U+00C3 and U+00A9
  const std::vector<std::string> accent = {"f\xC3\xA9"};
  StopStringWatch bytes(accent, qwen);
  for (int32_t id : qwen.encode("caf")) EXPECT_FALSE(bytes.add(id));
  EXPECT_FALSE(bytes.add(*c3));
  EXPECT_TRUE(bytes.add(*a9));

  // A stream never sends what a stop string could still swallow, nor anything from it on.
  CompletionRequest r;
  r.stream = true;
  r.stop = {"+3"};
  CompletionBuilder b(r, chars, "cmpl-1", "m", 0);
  std::string streamed;
  const auto feed = [&](const std::string& ch, bool last) {
    JobUpdate u;
    u.tokens.push_back({0, chars.encode(ch)[0], -1.0f, {}});
    if (last) u.finished.push_back({0, FinishReason::kStop});
    const std::string events = b.add(u);
    for (size_t at = events.find("data: "); at != std::string::npos; at = events.find("data: ", at + 1)) {
      const std::string data = events.substr(at + 6, events.find("\n\n", at) - at - 6);
      streamed += Json::parse(data)["choices"][0]["text"].get<std::string>();
    }
  };
  feed("1", false);
  feed("2", false);
  feed("+", false);
  EXPECT_EQ(streamed, "12");  // "+" may begin "+3"
  feed("3", true);
  EXPECT_EQ(streamed, "12");
  EXPECT_EQ(b.response()["choices"][0]["text"], "12");
  EXPECT_EQ(b.response()["choices"][0]["finish_reason"], "stop");
}

// A stop string that the greedy reply contains (found from a run without it) ends the choice there: the text is
// cut before it, finish_reason "stop", the token ids end at the token that completed it; streamed the same.
TEST(RolloutServe, AStopStringEndsAChoiceAndCutsItsTextAndTokens) {
  Server s;
  auto c = s.client();
  Json request{{"prompt", "12+34="}, {"max_tokens", 24}, {"temperature", 0}, {"ignore_eos", true},
               {"return_token_ids", true}};
  const auto full = c.Post("/v1/completions", request.dump(), "application/json");
  ASSERT_TRUE(full);
  ASSERT_EQ(full->status, 200) << full->body;
  const std::string text = Json::parse(full->body)["choices"][0]["text"];
  const auto ids = Json::parse(full->body)["choices"][0]["token_ids"].get<std::vector<int32_t>>();
  // Two characters whose first place is p, p >= 1 when the reply has such (a repetitive one may not: then p = 0).
  size_t p = 1;
  while (p + 2 <= text.size() && text.find(text.substr(p, 2)) != p) ++p;
  if (p + 2 > text.size()) p = 0;
  ASSERT_GE(text.size(), 2u) << "the greedy reply is too short: " << text;
  const std::string stop = text.substr(p, 2);
  size_t k = 1;  // the tokens up to the one that completes the stop string
  while (k <= ids.size() && s.tok.decode(std::vector<int32_t>(ids.begin(), ids.begin() + k)).find(stop) ==
                                std::string::npos)
    ++k;
  ASSERT_LE(k, ids.size());
  for (const bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "streamed" : "whole");
    request["stop"] = Json::array({"never", stop});
    request["stream"] = stream;
    const auto res = c.Post("/v1/completions", request.dump(), "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    std::string got, finish;
    std::vector<int32_t> got_ids;
    if (!stream) {
      const Json j = Json::parse(res->body)["choices"][0];
      got = j["text"];
      finish = j["finish_reason"];
      got_ids = j["token_ids"].get<std::vector<int32_t>>();
    } else {
      got_ids = streamed_tokens(res->body, 1)[0];
      for (size_t at = res->body.find("data: {"); at != std::string::npos; at = res->body.find("data: {", at + 1)) {
        const Json e = Json::parse(res->body.substr(at + 6, res->body.find("\n\n", at) - at - 6));
        got += e["choices"][0]["text"].get<std::string>();
        if (!e["choices"][0]["finish_reason"].is_null()) finish = e["choices"][0]["finish_reason"];
      }
    }
    EXPECT_EQ(got, text.substr(0, p)) << "stop " << stop << " in " << text;
    EXPECT_EQ(finish, "stop");
    EXPECT_EQ(got_ids, std::vector<int32_t>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k)));
  }
  wait_for([&] { return s.loop.figures().blocks_used == 0; });
  EXPECT_EQ(s.loop.figures().blocks_used, 0);
}

// Tools and a history with a tool call and the tool's reply are rendered as Qwen3's template renders them (the
// template itself is checked against transformers in tokenizer_chat_template_test); "none" lists the tools but
// parses no call; a named function is refused.
TEST(RolloutServe, ToolsAndAToolCallHistoryRenderAsTheTemplateDoes) {
  const HfTokenizer qwen(qwen3_fixture_dir() + "/tokenizer.json", model_preset("qwen-tiny"));
  const std::string tool = R"({"type": "function", "function": {"name": "get_weather", "description": "Weather now.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})";
  const std::string messages = R"([{"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Paris?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "18C"}])";
  const auto parse = [&](const std::string& extra) {
    return parse_completion_request(R"({"messages": )" + messages + R"(, "tools": [)" + tool + "]" + extra + "}",
                                    true, qwen, "m", 4096, qwen.vocab_size(), ServeLimits{});
  };
  const CompletionRequest r = parse("");
  const std::vector<ChatMessage> chat = {{"system", "Be brief.", {}},
                                         {"user", "Paris?", {}},
                                         {"assistant", "", {{"get_weather", "{\"city\": \"Paris\"}"}}},
                                         {"tool", "18C", {}}};
  const std::string rendered =
      qwen.chat_template()->render(chat, true, true, {template_tojson(nlohmann::ordered_json::parse(tool))}).text;
  EXPECT_NE(rendered.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\""),
            std::string::npos) << rendered;  // the client's key order
  EXPECT_NE(rendered.find("<tool_response>\n18C\n</tool_response>"), std::string::npos) << rendered;
  EXPECT_EQ(r.prompt, qwen.encode(rendered));
  EXPECT_TRUE(r.parse_tool_calls);
  const CompletionRequest none = parse(R"(, "tool_choice": "none")");
  EXPECT_EQ(none.prompt, r.prompt);
  EXPECT_FALSE(none.parse_tool_calls);
  try {
    parse(R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}})");
    ADD_FAILURE() << "a named tool_choice was accepted";
  } catch (const ServeError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "tool_choice");
  }
}

// The response builder reads a chat reply's <tool_call> blocks back into "tool_calls" (content: the text outside
// them, null when none; finish_reason "tool_calls"); a malformed block stays in the content; a stream sends the
// text before the first block, then the calls in its last chunk.
TEST(RolloutServe, AChatRepliesToolCallBlocksBecomeToolCalls) {
  const HfTokenizer qwen(qwen3_fixture_dir() + "/tokenizer.json", model_preset("qwen-tiny"));
  CompletionRequest r;
  r.chat = true;
  r.parse_tool_calls = true;
  r.prompt = {1};
  const auto reply = [&](CompletionBuilder& b, const std::string& text, bool token_by_token) {
    std::string events;
    const std::vector<int32_t> ids = qwen.encode(text);
    for (size_t i = 0; i < ids.size(); ++i) {
      JobUpdate u;
      u.tokens.push_back({0, ids[i], -0.5f, {}});
      if (i + 1 == ids.size()) u.finished.push_back({0, FinishReason::kEos});
      if (token_by_token || i + 1 == ids.size()) events += b.add(u);
      else b.add(u);
    }
    return events;
  };
  const std::string call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  CompletionBuilder whole(r, qwen, "chatcmpl-1", "m", 0);
  reply(whole, "Let me check.\n" + call, false);
  Json choice = whole.response()["choices"][0];
  EXPECT_EQ(choice["message"]["content"], "Let me check.");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << choice;
  EXPECT_EQ(choice["message"]["tool_calls"][0]["type"], "function");
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["arguments"], "{\"city\": \"Paris\"}");
  EXPECT_TRUE(choice["message"]["tool_calls"][0]["id"].is_string());
  EXPECT_EQ(choice["finish_reason"], "tool_calls");

  CompletionBuilder only_call(r, qwen, "chatcmpl-2", "m", 0);
  reply(only_call, call, false);
  EXPECT_TRUE(only_call.response()["choices"][0]["message"]["content"].is_null());

  const std::string malformed = "Hmm <tool_call>\n{\"name\": oops}\n</tool_call>";
  CompletionBuilder bad(r, qwen, "chatcmpl-3", "m", 0);
  reply(bad, malformed, false);
  choice = bad.response()["choices"][0];
  EXPECT_EQ(choice["message"]["content"], malformed);
  EXPECT_FALSE(choice["message"].contains("tool_calls"));
  EXPECT_EQ(choice["finish_reason"], "stop");

  CompletionRequest plain = r;
  plain.parse_tool_calls = false;  // no tools, or "tool_choice": "none"
  CompletionBuilder untouched(plain, qwen, "chatcmpl-4", "m", 0);
  reply(untouched, "Let me check.\n" + call, false);
  EXPECT_EQ(untouched.response()["choices"][0]["message"]["content"], "Let me check.\n" + call);

  CompletionRequest streaming = r;
  streaming.stream = true;
  CompletionBuilder stream(streaming, qwen, "chatcmpl-5", "m", 0);
  const std::string events = reply(stream, "Let me check.\n" + call, true);
  std::string content;
  Json calls, finish;
  for (size_t at = events.find("data: "); at != std::string::npos; at = events.find("data: ", at + 1)) {
    const Json d = Json::parse(events.substr(at + 6, events.find("\n\n", at) - at - 6))["choices"][0];
    if (d["delta"].contains("content")) content += d["delta"]["content"].get<std::string>();
    if (d["delta"].contains("tool_calls")) calls = d["delta"]["tool_calls"];
    if (!d["finish_reason"].is_null()) finish = d["finish_reason"];
  }
  EXPECT_EQ(content, "Let me check.\n");
  ASSERT_EQ(calls.size(), 1u) << events;
  EXPECT_EQ(calls[0]["index"], 0);
  EXPECT_EQ(calls[0]["function"]["arguments"], "{\"city\": \"Paris\"}");
  EXPECT_EQ(finish, "tool_calls");
}

}  // namespace
}  // namespace rlcpp
