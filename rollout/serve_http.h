// `rlcpp serve`'s HTTP front (cpp-httplib, as llama.cpp's server): routes, the API key, the body and
// concurrency limits, and the answers. It only parses (rollout/serve_request.h), queues (rollout/serve_loop.h)
// and formats (rollout/serve_response.h); the engine runs on the loop's thread.
//   POST /v1/completions, /v1/chat/completions  (stream: Server-Sent Events)
//   GET  /v1/models, /health, /metrics (Prometheus text)
// Errors are OpenAI's {"error": {...}} with "param" naming the field: 400 for a bad request, 401 for a missing or
// wrong key, 404 for an unknown route or model, 413 for a body over the limit, 429 when max_concurrency requests
// are in flight, 409 for a session's request while its last one runs, 503 when the server is shutting down, 500
// when the engine failed. A request with an X-Session-Id header is a turn of that session (harness mode,
// rollout/serve_sessions.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "tokenizer/tokenizer.h"
#include "rollout/serve_loop.h"
#include "rollout/serve_request.h"

namespace httplib {
class Server;
}

namespace rlcpp {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port (ServeHttp::port() says which)
  std::string api_key;     // required for binding anywhere but loopback; then every /v1 request must carry it
  std::string model_name;  // "model" in requests and /v1/models
  ServeLimits limits;
  // How long an idle kept-alive connection waits for its next request; each holds one of the server's threads
  // (as many again as `idle_connections`). A client that reuses a connection just as the server drops it sees a
  // connection error: a harness's server waits longer than clients keep idle connections (httpx: 5 s).
  int keep_alive_s = 5;
  int64_t idle_connections = 8;
};

// Throws naming the option when `options` would expose the server without a key or are out of range.
void check_serve_options(const ServeOptions& options);

class ServeHttp {
 public:
  // `loop`: where jobs go (the engine's ServeLoop, or harness mode's SessionTurnLoop); `context`: tokens a
  // sequence may reach (the engine's); `vocab_size`: the model's; `sessions`: the book of harness mode's sessions,
  // or null. With a book every request must name its session (X-Session-Id), without one none may: else a 400.
  ServeHttp(ServeJobQueue& loop, const Tokenizer& tok, const ServeOptions& options, int64_t context,
            int64_t vocab_size, ServeSessions* sessions = nullptr);
  ~ServeHttp();
  // Binds (throws naming the address when it cannot); port() is then known.
  void bind();
  int port() const { return port_; }
  // Serves until stop() (from another thread or a signal handler's thread).
  void listen();
  void stop();

 private:
  void routes();
  // 429 unless a place is free; the returned guard gives it back.
  std::shared_ptr<void> take_place();
  void count(int status);

  ServeJobQueue& loop_;
  const Tokenizer& tok_;
  ServeOptions options_;
  int64_t context_, vocab_size_;
  ServeSessions* sessions_;
  std::unique_ptr<httplib::Server> server_;
  int port_ = 0;
  int listen_socket_ = -1;
  std::atomic<int64_t> in_flight_{0};
  std::atomic<int64_t> next_id_{0};
  std::mutex counts_mutex_;
  std::map<int, int64_t> responses_by_status_;
};

}  // namespace rlcpp
