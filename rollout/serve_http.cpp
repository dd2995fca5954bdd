#include "rollout/serve_http.h"

#include <httplib.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

#include "core/error.h"
#include "rollout/serve_metrics.h"
#include "rollout/serve_response.h"

namespace rlcpp {

namespace {

constexpr auto kPoll = std::chrono::milliseconds(100);  // how often a waiting handler looks at its job
// cpp-httplib 0.11 listens with a backlog of 5: a burst of clients connecting at once (a benchmark's 64) overflows
// it and some connections fail. bind() listens again on the same socket with this backlog (capped by somaxconn).
constexpr int kListenBacklog = 1024;
constexpr const char* kWrongKey = "missing or wrong API key (Authorization: Bearer KEY)";

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// cpp-httplib 0.11 does not tell a handler when its client hangs up (a stream learns it when a write fails). A
// request that does not stream finds its connection's socket among the process's (/proc/self/fd) by the request's
// two addresses, and peeks at it between waits. -1 when it cannot be found (then the job runs to its end).
std::string numeric_host(const sockaddr_storage& addr, socklen_t len, int& port) {
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof host, serv, sizeof serv,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return "";
  port = std::atoi(serv);
  return host;
}

int connection_socket(const httplib::Request& req) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    const std::string name = entry.path().filename().string();  // strtol's `end` points into it
    char* end = nullptr;
    const long fd = std::strtol(name.c_str(), &end, 10);
    if (end == name.c_str() || *end != '\0') continue;
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof local, peer_len = sizeof peer;
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
        getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0)
      continue;
    int local_port = -1, peer_port = -1;
    if (numeric_host(local, local_len, local_port) == req.local_addr && local_port == req.local_port &&
        numeric_host(peer, peer_len, peer_port) == req.remote_addr && peer_port == req.remote_port)
      return static_cast<int>(fd);
  }
  return -1;
}

// The client closed its end (or reset it): nothing will read the answer.
bool client_gone(int fd) {
  if (fd < 0) return false;
  char c;
  const ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

void answer_error(httplib::Response& res, const ServeError& e) {
  res.status = e.status();
  res.set_content(json_text(e.to_json()), "application/json");
}

}  // namespace

void check_serve_options(const ServeOptions& o) {
  RLCPP_CHECK(is_loopback(o.host) || !o.api_key.empty(),
              "serve --host " << o.host << ": binding beyond loopback needs --api-key KEY (every request must then "
                                           "carry \"Authorization: Bearer KEY\")");
  RLCPP_CHECK(o.port >= 0 && o.port < 65536, "serve --port " << o.port << " is not in [0, 65535]");
  RLCPP_CHECK(!o.model_name.empty(), "serve --model-name must not be empty");
  const ServeLimits& l = o.limits;
  RLCPP_CHECK(l.max_body_bytes >= 1024, "serve --max-body-bytes " << l.max_body_bytes << " must be >= 1024");
  RLCPP_CHECK(l.max_tokens >= 1, "serve --max-tokens " << l.max_tokens << " must be >= 1");
  RLCPP_CHECK(l.max_n >= 1 && l.max_n <= 1024, "serve --max-n " << l.max_n << " must be in [1, 1024]");
  RLCPP_CHECK(l.max_concurrency >= 1 && l.max_concurrency <= ServeLimits::kMaxConcurrency,
              "serve --max-concurrency " << l.max_concurrency << " must be in [1, " << ServeLimits::kMaxConcurrency << "]");
}

ServeHttp::ServeHttp(ServeJobQueue& loop, const Tokenizer& tok, const ServeOptions& options, int64_t context,
                     int64_t vocab_size, ServeSessions* sessions)
    : loop_(loop), tok_(tok), options_(options), context_(context), vocab_size_(vocab_size), sessions_(sessions),
      server_(std::make_unique<httplib::Server>()) {
  check_serve_options(options_);
  // A streaming request holds a thread for its whole length: room for every admitted request, and more to answer
  // /health, /metrics and 429s while they run and to keep idle connections.
  const size_t threads = static_cast<size_t>(options_.limits.max_concurrency + options_.idle_connections);
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_->set_keep_alive_timeout(options_.keep_alive_s);
  server_->set_payload_max_length(static_cast<size_t>(options_.limits.max_body_bytes));
  server_->set_socket_options([this](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_socket_ = static_cast<int>(sock);  // the last one made is the one bound
  });
  routes();
}

ServeHttp::~ServeHttp() = default;

void ServeHttp::bind() {
  if (options_.port == 0) {
    port_ = server_->bind_to_any_port(options_.host);
    RLCPP_CHECK(port_ > 0, "serve: cannot bind " << options_.host << " on any port");
  } else {
    RLCPP_CHECK(server_->bind_to_port(options_.host, options_.port),
                "serve: cannot bind " << options_.host << ":" << options_.port << " (in use, or not an address here)");
    port_ = options_.port;
  }
  RLCPP_CHECK(listen_socket_ >= 0 && ::listen(listen_socket_, kListenBacklog) == 0,
              "serve: cannot set the listen backlog of " << options_.host << ":" << port_);
}

void ServeHttp::listen() { server_->listen_after_bind(); }

void ServeHttp::stop() { server_->stop(); }

void ServeHttp::count(int status) {
  std::lock_guard<std::mutex> lock(counts_mutex_);
  ++responses_by_status_[status];
}

std::shared_ptr<void> ServeHttp::take_place() {
  const int64_t before = in_flight_.fetch_add(1);
  if (before >= options_.limits.max_concurrency) {
    --in_flight_;
    throw ServeError(429, "", "the server is busy: " + std::to_string(options_.limits.max_concurrency) +
                                  " requests are in flight (--max-concurrency); retry later");
  }
  return std::shared_ptr<void>(nullptr, [this](void*) { --in_flight_; });
}

void ServeHttp::routes() {
  httplib::Server& s = *server_;
  const auto authorized = [this](const httplib::Request& req) {
    return options_.api_key.empty() || req.get_header_value("Authorization") == "Bearer " + options_.api_key;
  };

  s.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    std::map<int, int64_t> counts;
    {
      std::lock_guard<std::mutex> lock(counts_mutex_);
      counts = responses_by_status_;
    }
    res.set_content(prometheus_text(loop_.figures(), counts, options_.model_name), "text/plain; version=0.0.4");
  });
  s.Get("/v1/models", [this, authorized](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req)) return answer_error(res, ServeError(401, "", kWrongKey));
    const Json model{{"id", options_.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "rlcpp"},
                     {"max_model_len", context_}};
    res.set_content(json_text(Json{{"object", "list"}, {"data", Json::array({model})}}), "application/json");
  });

  const auto completion = [this, authorized](bool chat) {
    return [this, authorized, chat](const httplib::Request& req, httplib::Response& res) {
      std::shared_ptr<void> place;
      std::shared_ptr<ServeJob> job;
      try {
        if (!authorized(req)) throw ServeError(401, "", kWrongKey);
        place = take_place();
        CompletionRequest r = parse_completion_request(req.body, chat, tok_, options_.model_name, context_,
                                                       vocab_size_, options_.limits,
                                                       sessions_ && req.has_header(kSessionHeader));
        std::optional<SessionTurnPlan> plan;
        if (req.has_header(kSessionHeader)) {
          if (!sessions_)
            throw ServeError(400, kSessionHeader, "this server keeps no sessions (rlcpp train's harness mode, "
                                                  "agent.env \"http\", does)");
          plan = sessions_->plan(req.get_header_value(kSessionHeader), r, context_);
        } else if (sessions_) {
          throw ServeError(400, kSessionHeader, "this server plays an RL run's episodes: each request is a turn of "
                                                "one, named by the header X-Session-Id (its \"session\" line)");
        }
        // The engine's context bounds the response too.
        r.sampling.max_new_tokens =
            std::min<int64_t>(r.sampling.max_new_tokens, context_ - static_cast<int64_t>(r.prompt.size()));
        if (!r.seeded) r.sampling.seed = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
        job = std::make_shared<ServeJob>(std::move(r), plan);
        try {
          loop_.submit(job);
        } catch (const ServeError&) {
          if (plan) sessions_->turn_failed(plan->key, "the server was shutting down");
          throw;
        }
      } catch (const ServeError& e) {
        count(e.status());
        return answer_error(res, e);
      }
      const std::string id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id_++);
      auto builder = std::make_shared<CompletionBuilder>(job->request(), tok_, id, options_.model_name, unix_seconds());
      if (!job->request().stream) {
        const int fd = connection_socket(req);
        JobUpdate u;
        do {
          u = job->wait(kPoll);
          builder->add(u);
          if (!u.done && client_gone(fd)) {
            job->cancel();  // its blocks go back before the next step
            res.status = 499;  // nginx's "client closed request": nobody reads it
            return;
          }
        } while (!u.done);
        if (!u.error.empty()) {
          count(500);
          return answer_error(res, ServeError(500, "", u.error));
        }
        count(200);
        res.set_content(json_text(builder->response()), "application/json");
        return;
      }
      count(200);
      res.set_header("Cache-Control", "no-cache");
      res.set_chunked_content_provider(
          "text/event-stream",
          [job, builder, place](size_t, httplib::DataSink& sink) {
            // Nothing may escape into cpp-httplib's thread: a failure ends the stream with an error event.
            JobUpdate u;
            std::string out;
            try {
              u = job->wait(kPoll);
              out = builder->add(u);
            } catch (const std::exception& e) {
              job->cancel();
              u.done = true;
              u.error = std::string("formatting the response failed: ") + e.what();
            }
            if (!u.error.empty()) out += "data: " + json_text(ServeError(500, "", u.error).to_json()) + "\n\n";
            if (u.done) out += builder->stream_end(job->request().include_usage && u.error.empty());
            if (!out.empty() && !sink.write(out.data(), out.size())) {
              job->cancel();  // the client went away: its blocks go back before the next step
              return false;
            }
            if (u.done) sink.done();
            return true;
          },
          [job](bool success) {
            if (!success) job->cancel();
          });
    };
  };
  s.Post("/v1/completions", completion(false));
  s.Post("/v1/chat/completions", completion(true));

  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404)
      answer_error(res, ServeError(404, "", "no route " + req.method + " " + req.path));
    else if (res.status == 413)
      answer_error(res, ServeError(413, "", "the body is larger than --max-body-bytes"));
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    answer_error(res, ServeError(500, "", what));
  });
}

}  // namespace rlcpp
