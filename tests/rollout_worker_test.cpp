// Workers as threads over inproc:// (and as processes of the built rlcpp binary over ipc://): results equal
// the in-process engine's for 1 and 2 workers, chunks go to idle workers; bad messages get error replies and the
// worker keeps serving. CURVE-authenticated tcp is rollout_worker_curve_test's.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>

#include "core/curve.h"
#include "core/error.h"
#include "core/metrics.h"
#include "core/philox.h"
#include "model/init.h"
#include "rollout/request_wire.h"
#include "rollout/worker_client.h"
#include "rollout/worker_service.h"
#include "tests/error_test_support.h"
#include "tests/rollout_worker_support.h"
#include "tests/test_models.h"

namespace rlcpp {
namespace {

TEST(RolloutWorker, OneAndTwoWorkersGiveTheEngineSamples) {
  ThreadWorkers w;
  w.bind(2);
  const Request req = test_request(w.cfg);
  Engine local(w.model, w.params, worker_options().engine);
  const RolloutResult want = local.generate(req);
  WorkerClient one = WorkerClient::connect(w.ctx, {w.endpoints[0]});
  WorkerClient two = WorkerClient::connect(w.ctx, w.endpoints);
  EXPECT_EQ(two.num_workers(), 2);
  expect_same(want, one.generate(req));
  const RolloutResult split = two.generate(req);
  expect_same(want, split);
  EXPECT_EQ(split.stats.sequences, 7 * 3);
  EXPECT_EQ(split.stats.generated_tokens, want.stats.generated_tokens);
  // Prompt ids travel with their prompts: reversing the request reverses the groups, samples unchanged.
  Request reversed = req;
  std::reverse(reversed.prompts.begin(), reversed.prompts.end());
  for (size_t p = 0; p < req.prompts.size(); ++p) reversed.prompt_ids.push_back(req.prompts.size() - 1 - p);
  const RolloutResult back = two.generate(reversed);
  for (size_t p = 0; p < req.prompts.size(); ++p)
    for (int64_t i = 0; i < req.n; ++i)
      EXPECT_EQ(back.samples[p * req.n + i].tokens, want.samples[(req.prompts.size() - 1 - p) * req.n + i].tokens);
}

// Each sample carries the temperature and truncation its log-probs are of (what the trainer scores it at)
// through a worker's reply: drawn at 0.7 with top_k 5 in logprob_space "sampled", it says so; drawn greedily,
// it is scored at temperature 1 over the whole vocabulary. A reply with an out-of-range scoring is refused.
TEST(RolloutWorker, SamplesCarryTheTemperatureAndTruncationTheyWereDrawnWith) {
  ThreadWorkers w;
  w.bind(1);
  Request req = test_request(w.cfg, 2);
  req.sampling.temperature = 0.7f;
  req.sampling.top_k = 5;
  req.sampling.logprob_space = "sampled";
  WorkerClient client = WorkerClient::connect(w.ctx, w.endpoints);
  const RolloutResult got = client.generate(req);
  ASSERT_EQ(got.samples.size(), 2u * 3u);
  const LogprobScoring drawn{0.7f, Truncation{5, 1.0f}};
  for (const Sample& s : got.samples) EXPECT_TRUE(s.scoring == drawn) << s.scoring.describe();
  Engine local(w.model, w.params, worker_options().engine);
  expect_same(local.generate(req), got);

  req.sampling.temperature = 0;
  for (const Sample& s : client.generate(req).samples)
    EXPECT_TRUE(s.scoring == LogprobScoring{}) << "greedy: " << s.scoring.describe();

  RolloutResult bad = got;
  bad.samples[1].scoring.temperature = std::nanf("");
  uint64_t id = 0;
  const std::string e = error_of([&] { decode_generate_result(encode_generate_result(bad, 4), id); });
  EXPECT_NE(e.find("sample 1 scoring: temperature nan is not"), std::string::npos) << e;
}

// Prompts go out in chunks, each to whichever worker is idle: a worker slowed down by 5 ms an engine step serves
// fewer chunks than a fast one, and the result is still the local engine's, whatever order the chunks finished in.
TEST(RolloutWorker, ChunksGoToIdleWorkersSoASlowWorkerServesFewer) {
  ThreadWorkers w;
  WorkerOptions slow = worker_options();
  slow.fault_hook = [](int64_t, int64_t) { std::this_thread::sleep_for(std::chrono::milliseconds(5)); };
  w.bind(1, slow);
  w.bind(1);
  Request req = test_request(w.cfg, 7);
  req.prompts.clear();
  for (int p = 0; p < 24; ++p) req.prompts.push_back(random_tokens(2 + 3 * (p % 8), w.cfg.vocab_size, 170 + p));
  WorkerClientOptions opts;
  opts.chunk_prompts = 2;  // 12 chunks
  WorkerClient client = WorkerClient::connect(w.ctx, w.endpoints, opts);
  Engine local(w.model, w.params, worker_options().engine);
  const RolloutResult got = client.generate(req);
  expect_same(local.generate(req), got);
  EXPECT_EQ(got.stats.sequences, 24 * 3);
  const std::vector<Json> pongs = client.ping();
  const int64_t served_slow = pongs[0]["served"].get<int64_t>(), served_fast = pongs[1]["served"].get<int64_t>();
  std::printf("chunks served: slow worker %lld, fast worker %lld\n", static_cast<long long>(served_slow),
              static_cast<long long>(served_fast));
  EXPECT_EQ(served_slow + served_fast, 12);
  EXPECT_GE(served_slow, 1);  // each worker starts with a chunk
  EXPECT_GT(served_fast, 2 * served_slow);
}

TEST(RolloutWorker, ConnectedWorkersRegisterAndServe) {
  ThreadWorkers w;
  WorkerClientOptions opts;
  opts.reply_timeout_s = 10;
  std::string bound;
  // Workers may connect before the client binds (inproc allows it); their heartbeats announce them.
  w.connect_to("inproc://clients", 2);
  WorkerClient client = WorkerClient::listen(w.ctx, "inproc://clients", 2, opts, &bound);
  EXPECT_EQ(client.num_workers(), 2);
  EXPECT_EQ(bound, "inproc://clients");
  const Request req = test_request(w.cfg, 5);
  Engine local(w.model, w.params, worker_options().engine);
  expect_same(local.generate(req), client.generate(req));
  const std::vector<Json> pongs = client.ping();
  ASSERT_EQ(pongs.size(), 2u);
  for (const Json& p : pongs) {
    EXPECT_EQ(p["type"], "pong");
    EXPECT_EQ(p["numerics"], w.model.numerics().describe());  // checked by a trainer against its config
  }
}

TEST(RolloutWorker, BadMessagesGetErrorRepliesAndTheWorkerKeepsServing) {
  ThreadWorkers w;
  WorkerOptions opts = worker_options();
  opts.limits.max_message_bytes = 64 * 1024;
  w.bind(1, opts);
  RawClient raw(w.ctx, w.endpoints[0]);
  const Request req = test_request(w.cfg, 2);
  auto expect_error = [&](const std::string& what, const std::string& needle) {
    const WireMessage r = raw.reply();
    ASSERT_EQ(r.type(), "error") << what << ": " << r.header.dump();
    const std::string msg = r.header["message"].get<std::string>();
    EXPECT_NE(msg.find(needle), std::string::npos) << what << ": '" << msg << "'";
  };
  // Malformed header.
  raw.send_frames({"{not json"});
  expect_error("malformed", "not valid JSON");
  // Truncated: the header lists three arrays, two frames follow.
  auto frames = frames_of(encode_generate_request(req, 5));
  frames.pop_back();
  raw.send_frames(frames);
  expect_error("truncated", "carries 2 array frames");
  // A frame cut short.
  frames = frames_of(encode_generate_request(req, 6));
  frames[2].resize(frames[2].size() - 3);
  raw.send_frames(frames);
  expect_error("short frame", "needs");
  // Oversized.
  WireMessage big("generate");
  big.add<float>("padding", std::vector<float>(40000, 0.0f));
  raw.send(big);
  expect_error("oversized", "exceeds the maximum");
  // Too many frames.
  raw.send_frames(std::vector<std::string>(200, "x"));
  expect_error("too many frames", "more than");
  // Well framed but wrong: decreasing offsets, a token outside the vocabulary, n out of range, bad sampling.
  WireMessage bad = encode_generate_request(req, 7);
  for (auto& a : bad.arrays)
    if (a.name == "prompt_offsets") {
      std::vector<int64_t> off = {0, 9, 4};
      a.bytes.assign(reinterpret_cast<const char*>(off.data()), off.size() * sizeof(int64_t));
    }
  raw.send(bad);
  expect_error("offsets", "decreases");
  Request wrong = req;
  wrong.prompts[1][0] = 500;
  raw.send(encode_generate_request(wrong, 8));
  expect_error("vocabulary", "outside the vocabulary");
  WireMessage many = encode_generate_request(req, 9);
  many.header["n"] = 1000000;
  raw.send(many);
  expect_error("n", "'n' is 1000000");
  // Integers past int64 are named as sent, not wrapped to negative numbers.
  many.header["n"] = uint64_t{9223372036854775808ull};
  raw.send(many);
  expect_error("n past int64", "'n' is 9223372036854775808, expected 1..");
  WireMessage huge_id = encode_generate_request(req, 9);
  huge_id.header["request_id"] = uint64_t{18446744073709551615ull};
  raw.send(huge_id);
  expect_error("request_id past int64", "'request_id' is 18446744073709551615, expected 0..9223372036854775807");
  WireMessage odd = encode_generate_request(req, 10);
  odd.header["sampling"]["top_p"] = "high";
  raw.send(odd);
  expect_error("sampling type", "top_p");
  WireMessage unknown("dance");
  raw.send(unknown);
  expect_error("unknown type", "unknown message type 'dance'");
  // Still serving: a valid request gets its result, equal to the engine's.
  raw.send(encode_generate_request(req, 11));
  const WireMessage ok = raw.reply();
  ASSERT_EQ(ok.type(), "result") << ok.header.dump();
  uint64_t id = 0;
  const RolloutResult got = decode_generate_result(ok, id);
  EXPECT_EQ(id, 11u);
  Engine local(w.model, w.params, opts.engine);
  expect_same(local.generate(req), got);
}

// The parser's message for a header byte that is not UTF-8 quotes the byte; the error reply carrying it used to
// throw on encoding, out of the serve loop. A header nested too deep to copy safely is refused likewise.
TEST(RolloutWorker, HeadersNotUtf8OrTooDeepGetErrorRepliesAndTheWorkerKeepsServing) {
  ThreadWorkers w;
  w.bind(1);
  RawClient raw(w.ctx, w.endpoints[0]);
  raw.send_frames({std::string("{\"type\": \"ping\", \"request_id\": 3, \"x\": \"\xff\"}")});
  WireMessage r = raw.reply();
  ASSERT_EQ(r.type(), "error") << r.header.dump();
  EXPECT_NE(r.header["message"].get<std::string>().find("not valid JSON"), std::string::npos) << r.header.dump();
  raw.send_frames({R"({"type": "ping", "arrays": )" + std::string(200000, '[') + std::string(200000, ']') + "}"});
  r = raw.reply();
  ASSERT_EQ(r.type(), "error") << r.header.dump();
  EXPECT_NE(r.header["message"].get<std::string>().find("nesting deeper than the limit of 128 levels"),
            std::string::npos)
      << r.header.dump();
  WireMessage ping("ping");
  ping.header["request_id"] = 4;
  raw.send(ping);
  r = raw.reply();
  EXPECT_EQ(r.type(), "pong") << r.header.dump();
  EXPECT_EQ(r.header["request_id"], 4);
}

TEST(RolloutWorker, SendsHeartbeatsWhileGenerating) {
  ThreadWorkers w;
  WorkerOptions opts = worker_options();
  opts.heartbeat_interval_s = 1e-9;  // every step
  w.bind(1, opts);
  RawClient raw(w.ctx, w.endpoints[0]);
  Request req = test_request(w.cfg, 3);
  req.sampling.ignore_eos = true;
  raw.send(encode_generate_request(req, 42));
  int64_t heartbeats = 0, last_step = 0;
  ReceivedFrames got;
  while (true) {
    ASSERT_TRUE(receive_frames(raw.socket, 0, WireLimits{}, 10000, got));
    const WireMessage m = decode_wire_message(got.frames, WireLimits{});
    if (m.type() == "result") break;
    ASSERT_EQ(m.type(), "heartbeat");
    EXPECT_EQ(m.header["request_id"], 42);
    EXPECT_GT(m.header["step"].get<int64_t>(), last_step);
    last_step = m.header["step"].get<int64_t>();
    ++heartbeats;
  }
  EXPECT_EQ(heartbeats, req.sampling.max_new_tokens);  // one per step, the last step's included
}

TEST(RolloutWorker, ASilentWorkerIsReportedDead) {
  zmq::context_t ctx;
  zmq::socket_t mute(ctx, zmq::socket_type::router);  // accepts requests, never answers
  mute.bind("inproc://mute");
  WorkerClientOptions opts;
  opts.heartbeat_timeout_s = 0.2;
  WorkerClient client = WorkerClient::connect(ctx, {"inproc://mute"}, opts);
  Request req;
  req.prompts = {{1, 2, 3}};
  try {
    client.generate(req);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sent no result or heartbeat"), std::string::npos) << e.what();
  }
}

// While a supervisor replaces a failed worker nobody reads the other workers' sockets: a busy worker's heartbeats
// wait there, and its silence must not count the replacement's time (here 3x the heartbeat timeout). The mute
// worker 0 is replaced (retired) once; worker 1, busy with a slow chunk throughout and checked right after the
// replacement, is never found silent.
TEST(RolloutWorker, AReplacementsTimeIsNotABusyWorkersSilence) {
  ThreadWorkers w;
  WorkerOptions slow = worker_options();  // heartbeats every 0.05 s
  slow.fault_hook = [](int64_t, int64_t) { std::this_thread::sleep_for(std::chrono::milliseconds(200)); };
  w.bind(1, slow);
  zmq::socket_t mute(w.ctx, zmq::socket_type::router);  // worker 0: accepts a chunk, never answers
  mute.bind("inproc://mute-beside");
  struct Supervisor : WorkerSupervisor {
    std::vector<int> replaced;
    std::string exit_reason(int) override { return ""; }
    Replacement replace(const WorkerFailure& f) override {
      replaced.push_back(f.worker);
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      return Replacement::kRetired;
    }
  } supervisor;
  WorkerClientOptions opts;
  opts.heartbeat_timeout_s = 0.5;  // found at 0.5 s, replaced until 2 s; worker 1's chunk takes >= 2.6 s
  opts.chunk_prompts = 2;
  WorkerClient client = WorkerClient::connect(w.ctx, {"inproc://mute-beside", w.endpoints[0]}, opts);
  const Request req = test_request(w.cfg, 4);  // 2 chunks, 13 steps of >= 200 ms each for worker 1
  const RolloutResult got = client.generate(req, &supervisor);
  EXPECT_EQ(supervisor.replaced, std::vector<int>{0});
  Engine local(w.model, w.params, worker_options().engine);
  expect_same(local.generate(req), got);
}

TEST(RolloutWorker, ErrorRepliesReachTheClientNamingTheWorker) {
  ThreadWorkers w;
  w.bind(1);
  WorkerClient client = WorkerClient::connect(w.ctx, w.endpoints);
  Request bad = test_request(w.cfg, 2);
  bad.prompts[0].push_back(77);
  try {
    client.generate(bad);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("outside the vocabulary"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("inproc://worker-0"), std::string::npos) << e.what();
  }
  expect_same(Engine(w.model, w.params, worker_options().engine).generate(test_request(w.cfg, 2)),
              client.generate(test_request(w.cfg, 2)));
}

TEST(RolloutWorker, ShutdownRequestEndsServe) {
  ThreadWorkers w;
  w.bind(2);
  WorkerClient client = WorkerClient::connect(w.ctx, w.endpoints);
  client.generate(test_request(w.cfg, 2));
  client.shutdown();
  for (auto& t : w.threads) t.join();  // returns without the stop flag
  w.threads.clear();
}

// A connected worker whose client vanishes while it generates cannot send its result (its dealer has no peer):
// it waits reply_send_timeout_s, drops the reply and serves the next client; told to stop meanwhile, it stops.
// (It used to block in the send forever, so a test's worker thread could never be joined.)
struct VanishingClient {
  zmq::context_t ctx;  // its own: gone, with its listener, when the client is
  zmq::socket_t router{ctx, zmq::socket_type::router};
  std::vector<zmq::message_t> worker;  // its identity, from its hello
  explicit VanishingClient(const std::string& endpoint) {
    router.set(zmq::sockopt::linger, 0);
    router.bind(endpoint);
    ReceivedFrames got;
    if (!receive_frames(router, 1, WireLimits{}, 10000, got)) throw Error("no hello within 10 s");
    worker = std::move(got.envelope);
  }
  WireMessage next_reply() {  // the next message that is not a heartbeat
    ReceivedFrames got;
    while (true) {
      if (!receive_frames(router, 1, WireLimits{}, 10000, got)) throw Error("no reply within 10 s");
      WireMessage m = decode_wire_message(got.frames, WireLimits{});
      if (m.type() != "heartbeat") return m;
    }
  }
};

TEST(RolloutWorker, AConnectedWorkerDropsTheReplyToAVanishedClientAndServesTheNext) {
  for (const bool stop_while_waiting : {false, true}) {
    SCOPED_TRACE(stop_while_waiting ? "stopped while waiting" : "gives up after the timeout");
    ThreadWorkers w;
    std::atomic<bool> client_gone{false};
    WorkerOptions o = worker_options();
    o.reply_send_timeout_s = stop_while_waiting ? 1000 : 0.3;
    o.fault_hook = [&](int64_t, int64_t) {  // generating until the client has gone
      while (!client_gone) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    };
    const std::string endpoint = "ipc://" + (std::filesystem::temp_directory_path() /
                                             ("rlcpp_vanish_" + std::to_string(getpid()) + ".ipc")).string();
    w.connect_to(endpoint, 1, o);
    {
      VanishingClient first(endpoint);
      send_wire_message(first.router, first.worker, encode_generate_request(test_request(w.cfg, 2), 1));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the worker has taken the request
    }
    testing::internal::CaptureStderr();
    std::this_thread::sleep_for(std::chrono::milliseconds(600));  // the worker has seen the connection close
    client_gone = true;
    if (stop_while_waiting) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the worker is waiting to send
      const Stopwatch stopping;
      w.stop = true;
      w.threads[0].join();
      w.threads.clear();
      EXPECT_LT(stopping.seconds(), 5.0) << "the worker did not stop while its reply waited";
      testing::internal::GetCapturedStderr();
      continue;
    }
    VanishingClient second(endpoint);  // the worker reconnects once it has dropped the reply
    testing::internal::GetCapturedStderr();  // "dropped a 'result' reply", unless ZeroMQ took it into the
                                             // dying connection's pipe, where it is lost as well
    WireMessage ping("ping");
    ping.header["request_id"] = 2;
    send_wire_message(second.router, second.worker, ping);
    WireMessage pong = second.next_reply();
    // Under a slow build (sanitizers) the generation can end after the second client connected: then ZeroMQ hands
    // the old reply to it, and a client ignores a reply to an id it never sent, as WorkerClient does.
    if (pong.type() == "result" && pong.header["request_id"] == 1) pong = second.next_reply();
    ASSERT_EQ(pong.type(), "pong") << pong.header.dump();
    EXPECT_EQ(pong.header["request_id"], 2);
    EXPECT_EQ(pong.header["served"], 1) << "the generate request was served, its reply dropped";
  }
}

// Worker processes of the built binary over ipc://, stopped by SIGTERM.
TEST(RolloutWorker, WorkerProcessesServeAndStopOnSigterm) {
  const std::string binary = std::string(RLCPP_BINARY_DIR) + "/rlcpp";
  if (!std::filesystem::exists(binary)) GTEST_SKIP() << binary << " is not built";
  const std::string dir = std::filesystem::temp_directory_path() / ("rlcpp_worker_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::vector<pid_t> pids;
  std::vector<std::string> endpoints;
  for (int i = 0; i < 2; ++i) {
    endpoints.push_back("ipc://" + dir + "/w" + std::to_string(i) + ".ipc");
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      execl(binary.c_str(), binary.c_str(), "worker", "--preset", "tiny", "--init-seed", "7", "--bind",
            endpoints.back().c_str(), "--block-size", "4", "--max-num-seqs", "32", "--heartbeat", "0.05",
            static_cast<char*>(nullptr));
      _exit(127);
    }
    pids.push_back(pid);
  }
  const ModelConfig cfg = model_preset("tiny");
  const ParameterStore params = init_random(cfg, 7);
  const Transformer model(cfg);
  Request req = test_request(cfg, 6);
  EngineConfig ec;
  ec.block_size = 4;
  ec.max_num_seqs = 32;
  const RolloutResult want = Engine(model, params, ec).generate(req);
  zmq::context_t ctx;
  WorkerClientOptions opts;
  opts.reply_timeout_s = 20;  // process start-up
  WorkerClient client = WorkerClient::connect(ctx, endpoints, opts);
  EXPECT_EQ(client.ping().size(), 2u);
  expect_same(want, client.generate(req));
  for (pid_t pid : pids) kill(pid, SIGTERM);
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
  std::filesystem::remove_all(dir);
}

// A worker started with --exit-with-parent stops when the process that started it dies, even by SIGKILL (no
// chance to stop it): rlcpp train passes the flag, so a killed controller leaves no worker behind.
TEST(RolloutWorker, WorkerStartedWithExitWithParentStopsWhenItsParentIsKilled) {
  const std::string binary = std::string(RLCPP_BINARY_DIR) + "/rlcpp";
  if (!std::filesystem::exists(binary)) GTEST_SKIP() << binary << " is not built";
  const std::string dir = std::filesystem::temp_directory_path() / ("rlcpp_orphan_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string endpoint = "ipc://" + dir + "/w.ipc", pid_file = dir + "/worker.pid";
  // The parent: a shell that starts the worker, writes its pid and waits.
  const std::string script = "'" + binary + "' worker --preset tiny --bind " + endpoint +
                             " --heartbeat 0.05 --exit-with-parent & echo $! > " + pid_file + "; wait";
  const pid_t shell = fork();
  ASSERT_GE(shell, 0);
  if (shell == 0) {
    execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // The worker answers a ping once it is up.
  zmq::context_t ctx;
  WorkerClientOptions opts;
  opts.reply_timeout_s = 20;  // process start-up
  WorkerClient client = WorkerClient::connect(ctx, {endpoint}, opts);
  EXPECT_EQ(client.ping().size(), 1u);
  pid_t worker = 0;
  std::ifstream(pid_file) >> worker;
  ASSERT_GT(worker, 0);
  kill(shell, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(shell, &status, 0), shell);
  // Gone (or a zombie of whoever adopted it) within a few heartbeat ticks.
  auto running = [&] {
    std::ifstream stat("/proc/" + std::to_string(worker) + "/stat");
    std::string pid, comm, state;
    return static_cast<bool>(stat >> pid >> comm >> state) && state != "Z";
  };
  for (int i = 0; i < 100 && running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(running()) << "worker " << worker << " outlived its killed parent";
  if (running()) kill(worker, SIGKILL);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rlcpp
