// `rlcpp serve`'s layers in one process (rollout/serve_*.h): the HTTP front on a free loopback port, the engine
// loop, a tiny model and the character tokenizer. Seeded requests sample what Engine::generate (`rlcpp generate`)
// samples for that seed, alone or among 64 streaming clients; bad requests are 400s naming the field; a client
// that goes away frees its blocks; /metrics shows the prefix cache's hits.
#include <gtest/gtest.h>

#include <httplib.h>

#include <atomic>
#include <thread>

#include "tokenizer/tokenizer.h"
#include "rollout/engine.h"
#include "rollout/serve_http.h"
#include "rollout/serve_loop.h"
#include "rollout/serve_request.h"
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
  ServeLoop loop{engine};
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
  expect_error("/v1/completions", R"({"prompt": "1+2=", "stop": ["\n"]})", 400, "stop");
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

TEST(RolloutServe, ADisconnectedClientsSequencesAreDroppedAndTheirBlocksFreed) {
  Server s;
  auto c = s.client();
  stream_with(c, body(random_test_tokens(5, s.cfg.vocab_size, 3), 1, 4, 240, true),
              [](const char*, size_t, uint64_t, uint64_t) { return false; });  // gone after one chunk
  for (int i = 0; i < 200 && s.loop.figures().jobs_cancelled == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const ServeLoopFigures f = s.loop.figures();
  EXPECT_EQ(f.jobs_cancelled, 1);
  EXPECT_EQ(f.jobs_in_flight, 0);
  EXPECT_EQ(f.blocks_used, 0);
  EXPECT_LT(f.stats.generated_tokens, 4 * 240);
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

}  // namespace
}  // namespace rlcpp
