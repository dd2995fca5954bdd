// `rlcpp keys` (files, modes, never overwriting) and `rlcpp worker` on an endpoint beyond loopback: refused without
// keys, saying how to make them; with --curve-key/--curve-clients it serves (requests and weight publishes) only
// the clients whose public keys it was given.
#include <sys/stat.h>

#include <cstdio>

#include "core/curve.h"
#include "rollout/worker_client.h"
#include "tests/app_test_support.h"
#include "weightsync/zmq_channel.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

unsigned mode_of(const fs::path& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

bool has(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

class KeysCli : public CliTest {
 protected:
  void SetUp() override {
    if (!curve_supported()) GTEST_SKIP() << "this libzmq was built without CURVE";
    CliTest::SetUp();
  }
};

TEST_F(KeysCli, WritesAKeyPairOwnerOnlyAndNeverOverwrites) {
  const std::string prefix = (dir_ / "w0").string();
  const CliResult made = run_cli("keys " + prefix);
  ASSERT_EQ(made.status, 0) << made.output;
  EXPECT_EQ(mode_of(prefix + ".key"), 0600u);
  EXPECT_EQ(mode_of(prefix + ".pub"), 0644u);
  const CurveKeys keys = load_curve_key_file(prefix + ".key");
  EXPECT_EQ(load_curve_public_key(prefix + ".pub"), keys.public_key);
  EXPECT_TRUE(has(made.output, keys.public_key)) << made.output;
  EXPECT_FALSE(has(made.output, keys.secret_key)) << "the secret key was printed";

  const std::string key_text = read(prefix + ".key"), pub_text = read(prefix + ".pub");
  const CliResult again = run_cli("keys " + prefix);
  EXPECT_NE(again.status, 0);
  EXPECT_TRUE(has(again.output, "rlcpp: error: '" + prefix + ".key' exists already")) << again.output;
  EXPECT_EQ(read(prefix + ".key"), key_text);
  EXPECT_EQ(read(prefix + ".pub"), pub_text);
  // A lone .pub (its .key moved away) is not overwritten either, and no .key appears next to it.
  fs::rename(prefix + ".key", dir_ / "moved.key");
  const CliResult lone = run_cli("keys " + prefix);
  EXPECT_NE(lone.status, 0);
  EXPECT_TRUE(has(lone.output, prefix + ".pub' exists already")) << lone.output;
  EXPECT_FALSE(fs::exists(prefix + ".key"));
  EXPECT_EQ(read(prefix + ".pub"), pub_text);

  const CliResult nowhere = run_cli("keys " + (dir_ / "no" / "such" / "dir" / "w").string());
  EXPECT_NE(nowhere.status, 0);
  EXPECT_TRUE(has(nowhere.output, "cannot create")) << nowhere.output;

  // A directory as the prefix would write the hidden files DIR/.key and DIR/.pub.
  const CliResult directory = run_cli("keys " + dir_.string() + "/");
  EXPECT_NE(directory.status, 0);
  EXPECT_TRUE(has(directory.output, "names a directory; give a file prefix")) << directory.output;
  EXPECT_FALSE(fs::exists(dir_ / ".key"));
}

TEST_F(KeysCli, RemoteWorkerWithoutKeysIsRefusedSayingHowToMakeThem) {
  const CliResult open = run_cli("worker --preset tiny --bind tcp://0.0.0.0:0");
  EXPECT_NE(open.status, 0);
  EXPECT_TRUE(has(open.output, "\"event\":\"error\"")) << open.output;
  EXPECT_TRUE(has(open.output, "endpoint 'tcp://0.0.0.0:0' reaches beyond this machine")) << open.output;
  EXPECT_TRUE(has(open.output, "rlcpp keys")) << open.output;
  // Weights too: any bind of the worker.
  const CliResult weights = run_cli("worker --preset tiny --bind ipc://" + (dir_ / "w.ipc").string() +
                                    " --weights tcp://0.0.0.0:0");
  EXPECT_NE(weights.status, 0);
  EXPECT_TRUE(has(weights.output, "weight sync subscriber: endpoint 'tcp://0.0.0.0:0'")) << weights.output;

  ASSERT_EQ(run_cli("keys " + (dir_ / "w").string()).status, 0);
  ASSERT_EQ(run_cli("keys " + (dir_ / "c").string()).status, 0);
  const std::string keyed = "worker --preset tiny --bind tcp://0.0.0.0:0 --curve-key " + (dir_ / "w.key").string();
  const CliResult no_clients = run_cli(keyed);
  EXPECT_NE(no_clients.status, 0);
  EXPECT_TRUE(has(no_clients.output, "--curve-clients")) << no_clients.output;
  const CliResult no_key = run_cli("worker --preset tiny --bind tcp://0.0.0.0:0 --curve-clients " +
                                   (dir_ / "c.pub").string());
  EXPECT_NE(no_key.status, 0);
  EXPECT_TRUE(has(no_key.output, "need --curve-key")) << no_key.output;
  fs::permissions(dir_ / "w.key", fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  const CliResult exposed = run_cli(keyed + " --curve-clients " + (dir_ / "c.pub").string());
  EXPECT_NE(exposed.status, 0);
  EXPECT_TRUE(has(exposed.output, "mode 0640")) << exposed.output;
  EXPECT_TRUE(has(exposed.output, "chmod 600")) << exposed.output;
}

TEST_F(KeysCli, RemoteWorkerServesOnlyTheClientsItAdmits) {
  for (const char* name : {"w", "trainer", "stranger"}) ASSERT_EQ(run_cli("keys " + (dir_ / name).string()).status, 0);
  const std::string cmd = std::string(RLCPP_BINARY_DIR) + "/rlcpp worker --preset tiny --init-seed 3" +
                          " --bind 'tcp://0.0.0.0:*' --weights 'tcp://0.0.0.0:*' --heartbeat 0.05 --exit-with-parent" +
                          " --curve-key " + (dir_ / "w.key").string() + " --curve-clients " +
                          (dir_ / "trainer.pub").string() + " 2>&1";
  FILE* worker = popen(cmd.c_str(), "r");
  ASSERT_NE(worker, nullptr);
  char line[4096] = {0};
  ASSERT_NE(std::fgets(line, sizeof line, worker), nullptr);
  const Json listening = Json::parse(line);
  ASSERT_EQ(listening["event"], "listening") << line;
  // Bound on every interface; reached here through loopback, with CURVE since keys are configured.
  auto local = [](const std::string& endpoint) {
    EXPECT_EQ(endpoint.rfind("tcp://0.0.0.0:", 0), 0u) << endpoint;
    return "tcp://127.0.0.1:" + endpoint.substr(endpoint.rfind(':') + 1);
  };
  const std::string endpoint = local(listening["endpoint"]), weights = local(listening["weights_endpoint"]);
  const std::string worker_public = load_curve_public_key((dir_ / "w.pub").string());

  zmq::context_t ctx;
  WorkerClientOptions stranger_opts;
  stranger_opts.reply_timeout_s = 5;
  stranger_opts.curve.keys = load_curve_key_file((dir_ / "stranger.key").string());
  stranger_opts.curve.server_public = worker_public;
  WorkerClient stranger = WorkerClient::connect(ctx, {endpoint}, stranger_opts);
  try {
    stranger.shutdown();  // were it let through, the worker would exit
    ADD_FAILURE() << "a client with a key the worker does not admit was answered";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "authentication failed")) << e.what();
  }
  ZmqPublisherOptions intruder_opts;
  intruder_opts.reply_timeout_ms = 500;
  intruder_opts.curve = stranger_opts.curve;
  ZmqWeightPublisher intruder(ctx, weights, false, intruder_opts);
  try {
    intruder.publish(init_random(model_preset("tiny"), 99), 7);
    ADD_FAILURE() << "a publisher with a key the worker does not admit was answered";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "authentication failed")) << e.what();
  }

  WorkerClientOptions trainer_opts = stranger_opts;
  trainer_opts.reply_timeout_s = 20;
  trainer_opts.curve.keys = load_curve_key_file((dir_ / "trainer.key").string());
  WorkerClient trainer = WorkerClient::connect(ctx, {endpoint}, trainer_opts);
  EXPECT_EQ(trainer.ping()[0]["policy_version"], 0);
  ZmqPublisherOptions publisher_opts;
  publisher_opts.reply_timeout_ms = 20000;
  publisher_opts.curve = trainer_opts.curve;
  ZmqWeightPublisher publisher(ctx, weights, false, publisher_opts);
  EXPECT_EQ(publisher.publish(init_random(model_preset("tiny"), 4), 1).attempts, 1);
  EXPECT_EQ(trainer.ping()[0]["policy_version"], 1);  // the admitted publish swapped in; the intruder's never did
  trainer.shutdown();
  std::string rest;
  while (std::fgets(line, sizeof line, worker)) rest += line;
  EXPECT_EQ(pclose(worker), 0) << rest;
  EXPECT_TRUE(has(rest, "\"event\":\"stopped\"")) << rest;
}

}  // namespace
}  // namespace rlcpp
