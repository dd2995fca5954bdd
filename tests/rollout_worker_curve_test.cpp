// Workers over tcp with CURVE keys (core/curve.h): a non-loopback endpoint without keys is refused, and only
// clients whose keys a worker admits are served, bound or connected, on loopback or the host's own address.
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "core/curve.h"
#include "core/error.h"
#include "rollout/engine.h"
#include "rollout/worker_client.h"
#include "rollout/worker_service.h"
#include "tests/error_test_support.h"
#include "tests/rollout_worker_support.h"

namespace rlcpp {
namespace {

// The host's first IPv4 address that is not loopback, or "" (a sandbox may have none).
std::string non_loopback_ipv4() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* a = list; a && found.empty(); a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
    if (std::string(text).rfind("127.", 0) != 0) found = text;
  }
  freeifaddrs(list);
  return found;
}

// A tcp port on 127.0.0.1 that nothing listens on now (the kernel's pick, released at once).
int free_tcp_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof a;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &size) == 0;
  ::close(fd);
  return ok ? ntohs(a.sin_port) : 0;
}

TEST(RolloutWorker, NonLocalEndpointsAreRefusedWithoutCurveKeys) {
  ThreadWorkers w;
  WorkerService s(w.model, w.params, worker_options());
  expect_error([&] { s.bind(w.ctx, "tcp://0.0.0.0:0"); }, {"worker: endpoint 'tcp://0.0.0.0:0'", "rlcpp keys"});
  WorkerService t(w.model, w.params, worker_options());
  expect_error([&] { t.connect(w.ctx, "tcp://10.1.2.3:5555"); }, {"endpoint 'tcp://10.1.2.3:5555'", "rlcpp keys"});
  expect_error([&] { WorkerClient::connect(w.ctx, {"tcp://10.1.2.3:5555"}); },
               {"worker client: endpoint 'tcp://10.1.2.3:5555'", "--curve-server"});
  expect_error([&] { WorkerClient::listen(w.ctx, "tcp://*:0", 1); }, {"worker client: endpoint 'tcp://*:0'"});
  WorkerService local(w.model, w.params, worker_options());
  EXPECT_NO_THROW(local.bind(w.ctx, "tcp://127.0.0.1:*"));  // loopback stays plain
}

// A worker bound with CURVE keys, and clients with the right keys, unknown keys, no keys or a wrong idea of the
// worker's key.
struct CurveWorkers : ThreadWorkers {
  CurveKeys worker_keys = generate_curve_keys(), good_keys = generate_curve_keys(),
            stranger_keys = generate_curve_keys();
  explicit CurveWorkers(const std::string& host = "127.0.0.1") {
    zap.emplace(ctx);
    WorkerOptions o = worker_options();
    o.curve.keys = worker_keys;
    o.curve.clients = {good_keys.public_key};
    o.curve.zap = &*zap;
    services.push_back(std::make_unique<WorkerService>(model, params, o));
    endpoints.push_back(services.back()->bind(ctx, "tcp://" + host + ":*"));
    start();
  }
  WorkerClientOptions client(const CurveKeys* keys, const std::string& server_public) const {
    WorkerClientOptions o;
    o.reply_timeout_s = 2;
    o.heartbeat_timeout_s = 2;
    if (keys) o.curve.keys = *keys;
    o.curve.server_public = server_public;
    return o;
  }
};

TEST(RolloutWorker, CurveWorkerServesAdmittedClientsOnlyAndKeepsServing) {
  if (!curve_supported()) GTEST_SKIP() << "this libzmq was built without CURVE";
  CurveWorkers w;
  const Request req = test_request(w.cfg, 3);
  const RolloutResult want = Engine(w.model, w.params, worker_options().engine).generate(req);
  WorkerClient good = WorkerClient::connect(w.ctx, w.endpoints, w.client(&w.good_keys, w.worker_keys.public_key));
  expect_same(want, good.generate(req));

  // Unknown client keys: the worker's ZAP handler refuses them and the client says so at once.
  const int64_t refused_before = w.zap->refused();
  WorkerClient stranger =
      WorkerClient::connect(w.ctx, w.endpoints, w.client(&w.stranger_keys, w.worker_keys.public_key));
  expect_error([&] { stranger.generate(req); },
               {"worker client: " + w.endpoints[0], "authentication failed", "ZAP status 400"});
  expect_error([&] { stranger.ping(); }, {"authentication failed"});
  EXPECT_GT(w.zap->refused(), refused_before);
  // No keys at all, on a loopback endpoint where the client would go plain: refused as well.
  WorkerClient plain = WorkerClient::connect(w.ctx, w.endpoints, w.client(nullptr, ""));
  expect_error([&] { plain.generate(req); }, {"authentication failed", "the server requires CURVE"});
  // The right client keys but the wrong server key: the worker cannot read the handshake; a timeout naming it.
  WorkerClient misled =
      WorkerClient::connect(w.ctx, w.endpoints, w.client(&w.good_keys, w.stranger_keys.public_key));
  expect_error([&] { misled.ping(); }, {"no 'pong' within 2 s", "CURVE handshake", "authentication"});

  // None of their messages reached the worker: a raw unauthenticated client's shutdown does not end it, and the
  // good client, still served, is the only one it ever served.
  {
    zmq::socket_t raw(w.ctx, zmq::socket_type::dealer);
    raw.set(zmq::sockopt::linger, 0);
    make_curve_client(raw, w.stranger_keys, w.worker_keys.public_key);
    raw.connect(w.endpoints[0]);
    WireMessage bye("shutdown");
    bye.header["request_id"] = 1;
    send_wire_message(raw, {}, bye);
    ReceivedFrames got;
    EXPECT_FALSE(receive_frames(raw, 0, WireLimits{}, 300, got)) << "an unauthenticated client got a reply";
  }
  expect_same(want, good.generate(req));
  const std::vector<Json> pongs = good.ping();
  EXPECT_EQ(pongs[0]["served"], 2) << pongs[0].dump();
  EXPECT_GE(w.zap->admitted(), 1);
}

// The same over the host's own non-loopback address, where CURVE is not a choice but the rule.
TEST(RolloutWorker, CurveWorkerOnANonLoopbackAddressServesAdmittedClients) {
  if (!curve_supported()) GTEST_SKIP() << "this libzmq was built without CURVE";
  const std::string host = non_loopback_ipv4();
  if (host.empty()) GTEST_SKIP() << "this host has no non-loopback IPv4 address";
  CurveWorkers w(host);
  ASSERT_EQ(w.endpoints[0].rfind("tcp://" + host + ":", 0), 0u) << w.endpoints[0];
  const Request req = test_request(w.cfg, 2);
  WorkerClient good = WorkerClient::connect(w.ctx, w.endpoints, w.client(&w.good_keys, w.worker_keys.public_key));
  expect_same(Engine(w.model, w.params, worker_options().engine).generate(req), good.generate(req));
  expect_error([&] { WorkerClient::connect(w.ctx, w.endpoints, w.client(nullptr, "")); },
               {"reaches beyond this machine", "rlcpp keys"});
  WorkerClient stranger =
      WorkerClient::connect(w.ctx, w.endpoints, w.client(&w.stranger_keys, w.worker_keys.public_key));
  expect_error([&] { stranger.ping(); }, {"authentication failed", "ZAP status 400"});
  expect_same(Engine(w.model, w.params, worker_options().engine).generate(req), good.generate(req));
}

// Workers that connect to a listening client with CURVE: an admitted one registers and serves; one whose key the
// client does not admit is told so by its serve loop, which ends with that error instead of serving nobody.
TEST(RolloutWorker, ConnectedCurveWorkersNeedAKeyTheClientAdmits) {
  if (!curve_supported()) GTEST_SKIP() << "this libzmq was built without CURVE";
  ThreadWorkers w;
  w.zap.emplace(w.ctx);
  const CurveKeys client_keys = generate_curve_keys(), worker_keys = generate_curve_keys(),
                  stranger_keys = generate_curve_keys();
  WorkerClientOptions opts;
  opts.reply_timeout_s = 10;
  opts.curve.keys = client_keys;
  opts.curve.clients = {worker_keys.public_key};
  opts.curve.zap = &*w.zap;
  WorkerOptions wo = worker_options();
  wo.curve.keys = worker_keys;
  wo.curve.server_public = client_keys.public_key;
  std::string bound;
  // The worker connects first (it retries until the client listens), so the port is chosen beforehand.
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(free_tcp_port());
  w.connect_to(endpoint, 1, wo);
  WorkerClient client = WorkerClient::listen(w.ctx, endpoint, 1, opts, &bound);
  EXPECT_EQ(client.num_workers(), 1);
  const Request req = test_request(w.cfg, 2);
  expect_same(Engine(w.model, w.params, worker_options().engine).generate(req), client.generate(req));

  WorkerOptions so = worker_options();
  so.curve.keys = stranger_keys;
  so.curve.server_public = client_keys.public_key;
  WorkerService stranger(w.model, w.params, so);
  stranger.connect(w.ctx, endpoint);
  std::atomic<bool> give_up{false};
  std::thread guard([&] {  // a worker that was never refused would serve on; stop it so the test fails, not hangs
    for (int i = 0; i < 200 && !give_up; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    give_up = true;
  });
  expect_error([&] { stranger.serve({&give_up, -1}); },
               {"worker: the client at '" + endpoint + "' refused this worker", "ZAP status 400"});
  give_up = true;
  guard.join();
  EXPECT_EQ(client.ping().size(), 1u);  // the admitted worker still serves
}

}  // namespace
}  // namespace rlcpp
