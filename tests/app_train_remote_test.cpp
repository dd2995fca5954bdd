// rlcpp train with rollout.placement = "remote": `rlcpp worker` processes started on their own (here on this
// machine, bound on every interface as on another host, so CURVE is required), each with its own key pair,
// admitting only the trainer's public key. The run samples exactly what a colocated run samples, whatever
// weights the workers started with; a failed worker is dropped and the others finish the run (the same
// samples), the last one failing stops the run naming it, and the run resumes once the worker serves again at
// its address; a worker in another network namespace (another host) serves over tcp and a cut link is
// survived; a trainer the workers do not admit, or a worker in other numerics, is refused before any step.
#include <gtest/gtest.h>
#include <zmq.hpp>

#include <filesystem>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <thread>

#include "core/curve.h"
#include "core/metrics.h"
#include "loop/controller.h"
#include "loop/worker_process.h"
#include "model/checkpoint.h"
#include "model/lora.h"
#include "model/init.h"
#include "tests/train_test_support.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

bool has(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

// "tcp://0.0.0.0:PORT" -> PORT
std::string port_of(const std::string& endpoint) { return endpoint.substr(endpoint.rfind(':') + 1); }

// A loopback tcp port nothing listens on now (the kernel's pick for a socket bound to port 0, then closed).
std::string free_tcp_port() {
  zmq::context_t context;
  zmq::socket_t probe(context, zmq::socket_type::rep);
  probe.bind("tcp://127.0.0.1:*");
  return port_of(probe.get(zmq::sockopt::last_endpoint));
}

class TrainRemote : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!curve_supported()) GTEST_SKIP() << "this libzmq was built without CURVE";
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::temp_directory_path() / ("rlcpp_remote_" + std::string(info->name()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    for (const char* name : {"trainer", "w0", "w1", "stranger"})
      save_curve_keys((root_ / name).string(), generate_curve_keys());
    small_train_checkpoint(root_ / "init");
    // The workers load other weights of the same shape: what they sample with must come from the trainer.
    ModelConfig mc = load_model_checkpoint((root_ / "init").string()).config();
    save_model_checkpoint((root_ / "other").string(), init_random(mc, 9));
  }
  void TearDown() override {
    workers_.clear();
    fs::remove_all(root_);
  }

  // Starts worker `name` (key pair root_/name.key) bound on every interface at the given ports ("*" = any free
  // one), admitting only the trainer's key.
  WorkerProcess& start_worker(const std::string& name, const std::string& port = "*",
                              const std::string& weights_port = "*", std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {(root_ / "other").string(),
                                     "--bind",
                                     "tcp://0.0.0.0:" + port,
                                     "--weights",
                                     "tcp://0.0.0.0:" + weights_port,
                                     "--curve-key",
                                     (root_ / (name + ".key")).string(),
                                     "--curve-clients",
                                     (root_ / "trainer.pub").string(),
                                     "--name",
                                     name,
                                     "--heartbeat",
                                     "0.2",
                                     "--exit-with-parent"};
    args.insert(args.end(), extra.begin(), extra.end());
    workers_.push_back(std::make_unique<WorkerProcess>(RLCPP_BINARY_DIR "/rlcpp", args));
    return *workers_.back();
  }

  TrainConfig base_config() const {
    TrainConfig c;
    c.init_checkpoint = (root_ / "init").string();
    c.rollout.prompts_per_step = 8;
    c.rollout.group_size = 8;
    c.rollout.worker_heartbeat_timeout_s = 10;
    c.ppo.mini_batch_size = 32;
    c.ppo.micro_batch_size = 32;
    c.optim.lr = 3e-3;
    c.steps = 4;
    c.eval_every = 0;
    c.eval_size = 10;
    return c;
  }

  // The remote placement over `workers` (reached through loopback, with CURVE since keys are given).
  TrainConfig remote_config(const std::vector<WorkerProcess*>& workers, const std::string& trainer_key) const {
    TrainConfig c = base_config();
    c.run_dir = (root_ / "remote").string();
    c.rollout.placement = "remote";
    c.rollout.remote.key = (root_ / (trainer_key + ".key")).string();
    for (size_t w = 0; w < workers.size(); ++w) {
      c.rollout.remote.endpoints.push_back("tcp://127.0.0.1:" + port_of(workers[w]->endpoint()));
      c.rollout.remote.weights_endpoints.push_back("tcp://127.0.0.1:" + port_of(workers[w]->weights_endpoint()));
      c.rollout.remote.worker_keys.push_back((root_ / ("w" + std::to_string(w) + ".pub")).string());
    }
    return c;
  }

  // The same recipe colocated, for `steps` steps (base_config's by default).
  TrainSummary colocated_run(int64_t steps = 0) const {
    TrainConfig c = base_config();
    if (steps > 0) c.steps = steps;
    c.run_dir = (root_ / ("colocated" + std::to_string(c.steps))).string();
    c.rollout.placement = "colocated";
    return run_train(c, config_to_json(c));
  }

  static std::string train_error(const TrainConfig& c) {
    try {
      run_train(c, config_to_json(c));
    } catch (const Error& e) {
      return e.what();
    }
    return "<no error>";
  }

  fs::path root_;
  std::vector<std::unique_ptr<WorkerProcess>> workers_;
};

// merged_engine: the engines compute what the trainer does (not a LoRA run's unmerged engines, whose log-probs
// differ from the merged trainer's by rounding).
void expect_same_run(const fs::path& a, const fs::path& b, bool merged_engine = true) {
  EXPECT_EQ(read_jsonl(a / "samples.jsonl"), read_jsonl(b / "samples.jsonl"));
  const std::vector<Json> ma = read_jsonl(a / "metrics.jsonl"), mb = read_jsonl(b / "metrics.jsonl");
  ASSERT_EQ(ma.size(), mb.size());
  for (size_t i = 0; i < ma.size(); ++i) {
    for (const auto& [key, value] : ma[i].items()) {
      if (run_dependent_key(key) || key.rfind("rollout/worker", 0) == 0 || key == "rollout/reissued_prompts") continue;
      EXPECT_EQ(value, mb[i][key]) << "step " << i + 1 << " key " << key;
    }
    if (merged_engine) EXPECT_EQ(mb[i]["mismatch/max_abs_dlogp"], 0.0) << "step " << i + 1;  // workers and trainer agree
  }
}

TEST_F(TrainRemote, AuthenticatedRemoteWorkersSampleWhatAColocatedRunSamples) {
  WorkerProcess& w0 = start_worker("w0");
  WorkerProcess& w1 = start_worker("w1");
  const TrainConfig remote = remote_config({&w0, &w1}, "trainer");
  const TrainSummary r = run_train(remote, config_to_json(remote));
  const TrainSummary c = colocated_run();
  ASSERT_EQ(r.mean_rewards.size(), 4u);
  expect_same_run(c.run_dir, r.run_dir);
  EXPECT_GT(read_jsonl(fs::path(r.run_dir) / "metrics.jsonl")[0]["timing_s/weight_sync"].get<double>(), 0);
  // The workers outlive the run, serving on.
  EXPECT_EQ(w0.exit_reason(), "");
  EXPECT_EQ(w1.exit_reason(), "");
}

// Harness mode (agent.env "http", issue 35) on remote workers: the harness's session turns run on the workers'
// engines, its episodes spanning weight syncs (three turns, two a draw: every third turn waits for the next draw
// and runs under the next version on whichever worker its session is opened again). The samples and final weights
// are the colocated run's, bit for bit.
TEST_F(TrainRemote, AHarnessPlaysOnRemoteWorkersAsOnTheColocatedEngine) {
  WorkerProcess& w0 = start_worker("w0");
  WorkerProcess& w1 = start_worker("w1");
  TrainConfig remote = remote_config({&w0, &w1}, "trainer");
  remote.steps = 3;
  use_example_harness(remote, "--reward digits --attempts 3");
  remote.agent.max_turns = 3;
  remote.agent.turns_per_draw = 2;
  TrainConfig colocated = remote;
  colocated.run_dir = (root_ / "colocated_harness").string();
  colocated.rollout.placement = "colocated";
  colocated.rollout.remote = RemoteWorkersSection();
  const TrainSummary r = run_train(remote, config_to_json(remote));
  const TrainSummary c = run_train(colocated, config_to_json(colocated));
  EXPECT_EQ(read_jsonl(fs::path(r.run_dir) / "samples.jsonl"), read_jsonl(fs::path(c.run_dir) / "samples.jsonl"));
  EXPECT_TRUE(same_weights(c.checkpoint, r.checkpoint));
  const std::vector<Json> m = read_jsonl(fs::path(r.run_dir) / "metrics.jsonl");
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0]["agent/in_flight"], 64);  // every episode on its third turn
  EXPECT_EQ(m[1]["training/off_policy/token_staleness_max"], 1.0);
  EXPECT_EQ(m[1]["mismatch/current_version/max_abs_dlogp"], 0.0);
}

// A LoRA run (trainer.lora) on remote workers (issue 36, adapter-only sync): at the start each worker, holding
// other weights, is sent the run's frozen base once with the adapters (a LoRA base message), then every version's
// adapters alone, which it merges as the trainer does: the run equals the colocated LoRA run bit for bit (samples,
// metrics, weights) while a sync moves the adapters' bytes and their layout only.
TEST_F(TrainRemote, ALoraRunSendsItsBaseOnceThenAdaptersAloneAndEqualsTheColocatedOne) {
  WorkerProcess& w0 = start_worker("w0");
  WorkerProcess& w1 = start_worker("w1");
  const auto lora = [](TrainConfig c) {
    c.trainer.lora.rank = 4;
    c.trainer.lora.alpha = 8;
    c.trainer.lora.targets = {"q_proj", "v_proj"};
    c.optim.lr = 1e-2;
    return c;
  };
  const TrainConfig remote = lora(remote_config({&w0, &w1}, "trainer"));
  TrainConfig colocated = lora(base_config());
  colocated.run_dir = (root_ / "colocated_lora").string();
  colocated.rollout.placement = "colocated";
  colocated.rollout.remote = RemoteWorkersSection();
  const TrainSummary r = run_train(remote, config_to_json(remote));
  const TrainSummary c = run_train(colocated, config_to_json(colocated));
  expect_same_run(c.run_dir, r.run_dir);
  EXPECT_TRUE(same_weights(c.checkpoint, r.checkpoint));
  const ParameterStore init = load_model_checkpoint((root_ / "init").string());
  const double adapter_bytes = 4.0 * static_cast<double>(LoraAdapters(init.config(), remote.trainer.lora).weights().numel());
  for (const Json& m : read_jsonl(fs::path(r.run_dir) / "metrics.jsonl")) {
    const double bytes = m.at("weight_sync/bytes").get<double>();
    EXPECT_GT(bytes, adapter_bytes);
    EXPECT_LT(bytes, adapter_bytes + 65536) << "the adapters and their layout only";
  }
  EXPECT_LT(adapter_bytes, 4.0 * static_cast<double>(init.numel()) / 10);
  // The same workers serving a run whose engines apply the adapters unmerged (rollout.lora_merge false: the
  // LoRA base message says so): the colocated unmerged run, bit for bit, the probe 0.
  const auto unmerged = [](TrainConfig c) {
    c.rollout.lora_merge = false;
    return c;
  };
  TrainConfig remote_unmerged = unmerged(remote);
  remote_unmerged.run_dir = (root_ / "remote_unmerged").string();
  TrainConfig colocated_unmerged = unmerged(colocated);
  colocated_unmerged.run_dir = (root_ / "colocated_unmerged").string();
  const TrainSummary ru = run_train(remote_unmerged, config_to_json(remote_unmerged));
  const TrainSummary cu = run_train(colocated_unmerged, config_to_json(colocated_unmerged));
  expect_same_run(cu.run_dir, ru.run_dir, /*merged_engine=*/false);
  EXPECT_TRUE(same_weights(cu.checkpoint, ru.checkpoint));
  for (const Json& m : read_jsonl(fs::path(ru.run_dir) / "metrics.jsonl"))
    EXPECT_EQ(m.at("probe/max_abs_dlogp").get<double>(), 0.0);
  // And a merged run after it: the workers drop the adapters they applied beside the base.
  TrainConfig merged_again = remote;
  merged_again.run_dir = (root_ / "remote_merged_again").string();
  const TrainSummary ra = run_train(merged_again, config_to_json(merged_again));
  expect_same_run(c.run_dir, ra.run_dir);
  EXPECT_TRUE(same_weights(c.checkpoint, ra.checkpoint));
}

// The same for a worker that joins a listening trainer: its join brings the LoRA base, then adapters alone.
TEST_F(TrainRemote, AWorkerJoiningALoraRunTakesItsBaseOnceThenAdaptersAlone) {
  const std::string port = free_tcp_port();
  TrainConfig remote = base_config();
  remote.run_dir = (root_ / "remote").string();
  remote.rollout.placement = "remote";
  remote.rollout.worker_timeout_s = 60;
  remote.rollout.remote.listen = "tcp://127.0.0.1:" + port;
  remote.rollout.remote.key = (root_ / "trainer.key").string();
  remote.rollout.remote.worker_keys = {(root_ / "w0.pub").string()};
  remote.trainer.lora.rank = 4;
  remote.trainer.lora.alpha = 8;
  remote.trainer.lora.targets = {"q_proj", "v_proj"};
  workers_.push_back(std::make_unique<WorkerProcess>(
      RLCPP_BINARY_DIR "/rlcpp",
      std::vector<std::string>{(root_ / "other").string(), "--connect", "tcp://127.0.0.1:" + port, "--weights",
                               "tcp://0.0.0.0:*", "--curve-key", (root_ / "w0.key").string(), "--curve-server",
                               (root_ / "trainer.pub").string(), "--curve-clients", (root_ / "trainer.pub").string(),
                               "--name", "w0", "--heartbeat", "0.2", "--exit-with-parent"}));
  const TrainSummary r = run_train(remote, config_to_json(remote));
  TrainConfig colocated = remote;
  colocated.run_dir = (root_ / "colocated_lora").string();
  colocated.rollout.placement = "colocated";
  colocated.rollout.remote = RemoteWorkersSection{};
  const TrainSummary c = run_train(colocated, config_to_json(colocated));
  expect_same_run(c.run_dir, r.run_dir);
  const ParameterStore init = load_model_checkpoint((root_ / "init").string());
  const double adapter_bytes = 4.0 * static_cast<double>(LoraAdapters(init.config(), remote.trainer.lora).weights().numel());
  for (const Json& m : read_jsonl(fs::path(r.run_dir) / "metrics.jsonl"))
    EXPECT_LT(m.at("weight_sync/bytes").get<double>(), adapter_bytes + 65536);
}

TEST_F(TrainRemote, AFailedWorkerIsDroppedAndTheOthersFinishTheRunWithTheSameSamples) {
  // w0 exits abruptly during its fifth generate request, in step 3 or 4 (w1 takes some chunks).
  WorkerProcess& w0 = start_worker("w0", "*", "*", {"--inject-fault", "exit:5:1"});
  WorkerProcess& w1 = start_worker("w1");
  TrainConfig remote = remote_config({&w0, &w1}, "trainer");
  remote.rollout.worker_heartbeat_timeout_s = 3;
  const TrainSummary r = run_train(remote, config_to_json(remote));
  const std::vector<Json> m = read_jsonl(fs::path(r.run_dir) / "metrics.jsonl");
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m.front()["rollout/workers_lost"], 0.0);
  EXPECT_EQ(m.back()["rollout/workers_lost"], 1.0);
  expect_same_run(colocated_run().run_dir, r.run_dir);  // w0's unfinished chunk was w1's to sample
}

TEST_F(TrainRemote, TheLastWorkerFailingStopsTheRunNamingItAndTheRunResumesOnceItServesAgain) {
  // w0, the only worker, exits abruptly during its fifth generate request (each step sends it two: the rollout
  // and the probe's prompts), in step 3.
  WorkerProcess& w0 = start_worker("w0", "*", "*", {"--inject-fault", "exit:5:1"});
  TrainConfig remote = remote_config({&w0}, "trainer");
  remote.checkpoint_every = 1;
  remote.rollout.worker_heartbeat_timeout_s = 3;  // how soon the silent worker is found
  const std::string error = train_error(remote);
  EXPECT_TRUE(has(error, "tcp://127.0.0.1:" + port_of(w0.endpoint()))) << error;
  EXPECT_TRUE(has(error, "rlcpp train --resume " + remote.run_dir)) << error;
  const size_t done = read_jsonl(fs::path(remote.run_dir) / "metrics.jsonl").size();
  EXPECT_EQ(done, 2u);

  // The same worker started again at its address, from its own (other) weights at version 0: it is brought to
  // the checkpoint's policy.
  const std::string port = port_of(w0.endpoint()), weights_port = port_of(w0.weights_endpoint());
  for (int i = 0; i < 100 && w0.exit_reason().empty(); ++i) usleep(20000);
  EXPECT_NE(w0.exit_reason(), "");
  start_worker("w0", port, weights_port);
  const TrainSummary resumed = resume_train(remote.run_dir);
  EXPECT_EQ(resumed.mean_rewards.size(), 4 - done);
  expect_same_run(colocated_run().run_dir, remote.run_dir);
}

// Workers that connect to a listening trainer (`rlcpp worker --connect`, rollout.remote.listen): w0 before step 1
// (min_workers 1; slowed 20 ms an engine step so that the run lasts), w1 once step 3 is done; each is sent the weights at the address it advertised (bound on every
// interface: the trainer substitutes the address it connected from) and serves from the next step. The run still
// samples what a colocated run samples.
TEST_F(TrainRemote, WorkersJoinAListeningTrainerBeforeAndDuringTheRun) {
  const std::string port = free_tcp_port();
  TrainConfig remote = base_config();
  remote.run_dir = (root_ / "remote").string();
  remote.steps = 24;
  remote.rollout.placement = "remote";
  remote.rollout.worker_timeout_s = 60;
  remote.rollout.remote.listen = "tcp://127.0.0.1:" + port;
  remote.rollout.remote.key = (root_ / "trainer.key").string();
  remote.rollout.remote.worker_keys = {(root_ / "w0.pub").string(), (root_ / "w1.pub").string()};
  TrainSummary summary;
  std::exception_ptr failed;
  std::thread trainer([&] {
    try {
      summary = run_train(remote, config_to_json(remote));
    } catch (...) {
      failed = std::current_exception();
    }
  });
  const auto join = [&](const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> args = {(root_ / "other").string(), "--connect", "tcp://127.0.0.1:" + port, "--weights",
                                     "tcp://0.0.0.0:*", "--curve-key", (root_ / (name + ".key")).string(),
                                     "--curve-server", (root_ / "trainer.pub").string(), "--curve-clients",
                                     (root_ / "trainer.pub").string(), "--name", name, "--heartbeat", "0.2",
                                     "--exit-with-parent"};
    args.insert(args.end(), extra.begin(), extra.end());
    workers_.push_back(std::make_unique<WorkerProcess>(RLCPP_BINARY_DIR "/rlcpp", args));
  };
  join("w0", {"--throttle-ms", "20"});  // steps long enough (~0.3 s) for w1 to join mid-run on a loaded machine
  const fs::path metrics = fs::path(remote.run_dir) / "metrics.jsonl";
  for (int i = 0; i < 6000 && !failed; ++i) {
    if (complete_lines(metrics) >= 3) break;
    usleep(10000);
  }
  join("w1", {});
  trainer.join();
  if (failed) std::rethrow_exception(failed);
  const std::vector<Json> m = read_jsonl(metrics);
  ASSERT_EQ(m.size(), 24u);
  EXPECT_EQ(m.front()["rollout/workers"], 1.0);
  EXPECT_EQ(m.back()["rollout/workers"], 2.0);
  EXPECT_EQ(m.back()["rollout/workers_lost"], 0.0);
  expect_same_run(colocated_run(24).run_dir, summary.run_dir);
}

// A network namespace joined to this one by a veth pair: "another host" at 10.213.X.2, reached from 10.213.X.1.
// Needs root (CAP_NET_ADMIN) and iproute2; `up` is false when it could not be made.
struct OtherHost {
  std::string ns, veth_here, veth_there, address;
  bool up = false;

  OtherHost() {
    const int id = static_cast<int>(getpid() % 100000);
    ns = "rlcpp_host" + std::to_string(id);
    veth_here = "rlv" + std::to_string(id) + "a";
    veth_there = "rlv" + std::to_string(id) + "b";
    const std::string subnet = "10.213." + std::to_string(id % 250) + ".";
    address = subnet + "2";
    up = geteuid() == 0 &&
         std::system(("ip netns add " + ns + " && ip link add " + veth_here + " type veth peer name " + veth_there +
                      " && ip link set " + veth_there + " netns " + ns + " && ip addr add " + subnet + "1/24 dev " +
                      veth_here + " && ip link set " + veth_here + " up && ip netns exec " + ns + " ip addr add " +
                      address + "/24 dev " + veth_there + " && ip netns exec " + ns + " ip link set " + veth_there +
                      " up && ip netns exec " + ns + " ip link set lo up 2>/dev/null")
                         .c_str()) == 0;
  }
  ~OtherHost() {
    std::system(("ip link del " + veth_here + " 2>/dev/null; ip netns del " + ns + " 2>/dev/null").c_str());
  }
  void cut() const { std::system(("ip link set " + veth_here + " down").c_str()); }
};

TEST_F(TrainRemote, AWorkerOnAnotherHostServesOverTcpAndACutLinkIsSurvived) {
  OtherHost host;
  if (!host.up) GTEST_SKIP() << "needs root and iproute2 network namespaces (ip netns add) for a second host";
  // w0 runs inside the other host's namespace (a wrapper enters it), w1 here.
  const fs::path wrapper = root_ / "in_other_host.sh";
  std::ofstream(wrapper) << "#!/bin/sh\nexec ip netns exec " << host.ns << " " RLCPP_BINARY_DIR "/rlcpp \"$@\"\n";
  fs::permissions(wrapper, fs::perms::owner_all);
  std::vector<std::string> args = {(root_ / "other").string(), "--bind", "tcp://0.0.0.0:*", "--weights",
                                   "tcp://0.0.0.0:*", "--curve-key", (root_ / "w0.key").string(),
                                   "--curve-clients", (root_ / "trainer.pub").string(), "--name", "w0",
                                   "--heartbeat", "0.2", "--exit-with-parent"};
  workers_.push_back(std::make_unique<WorkerProcess>(wrapper.string(), args));
  WorkerProcess& w0 = *workers_.back();
  WorkerProcess& w1 = start_worker("w1");
  TrainConfig remote = remote_config({&w0, &w1}, "trainer");
  remote.rollout.remote.endpoints[0] = "tcp://" + host.address + ":" + port_of(w0.endpoint());
  remote.rollout.remote.weights_endpoints[0] = "tcp://" + host.address + ":" + port_of(w0.weights_endpoint());
  remote.steps = 8;
  remote.rollout.worker_heartbeat_timeout_s = 2;  // how soon a silent worker is found
  remote.rollout.worker_timeout_s = 4;            // and an unacknowledged weight sync
  // The link goes down once step 3 is logged: three whole lines (the run may be writing a fourth; parsing a half
  // line here threw in this thread once, under ASan, and ended the test binary).
  std::thread cutter([&] {
    const fs::path metrics = fs::path(remote.run_dir) / "metrics.jsonl";
    for (int i = 0; i < 6000; ++i) {
      if (complete_lines(metrics) >= 3) break;
      usleep(10000);
    }
    host.cut();
  });
  TrainSummary r;
  try {
    r = run_train(remote, config_to_json(remote));
  } catch (...) {
    cutter.join();
    throw;
  }
  cutter.join();
  const std::vector<Json> m = read_jsonl(fs::path(r.run_dir) / "metrics.jsonl");
  ASSERT_EQ(m.size(), 8u);
  EXPECT_EQ(m[1]["rollout/workers_lost"], 0.0);  // the other host served the first steps
  EXPECT_EQ(m.back()["rollout/workers_lost"], 1.0);
  expect_same_run(colocated_run(8).run_dir, r.run_dir);
}

TEST_F(TrainRemote, ATrainerTheWorkersDoNotAdmitOrWhoseNumericsDifferIsRefusedBeforeAnyStep) {
  WorkerProcess& w0 = start_worker("w0", "*", "*", {"--dtype", "bf16"});
  TrainConfig stranger = remote_config({&w0}, "stranger");
  stranger.rollout.worker_heartbeat_timeout_s = 60;  // refused at once, not after this wait
  Stopwatch took;
  const std::string refused = train_error(stranger);
  EXPECT_LT(took.seconds(), 30);
  EXPECT_TRUE(has(refused, "refused us")) << refused;
  EXPECT_TRUE(has(refused, "authentication failed")) << refused;
  EXPECT_FALSE(fs::exists(fs::path(stranger.run_dir) / "metrics.jsonl") &&
               !read_jsonl(fs::path(stranger.run_dir) / "metrics.jsonl").empty());

  const std::string numerics = train_error(remote_config({&w0}, "trainer"));
  EXPECT_TRUE(has(numerics, "computes in bf16, the run's rollout numerics are fp32")) << numerics;
  EXPECT_TRUE(has(numerics, "--dtype")) << numerics;
}

TEST(TrainRemoteConfig, RemoteWorkerSettingsAreCheckedBeforeAnyWork) {
  auto error = [](const TrainConfig& c) {
    try {
      c.validate();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  TrainConfig c;
  c.rollout.placement = "remote";
  EXPECT_TRUE(has(error(c), "'rollout.remote.endpoints': the remote placement needs at least one")) << error(c);
  c.rollout.remote.endpoints = {"tcp://10.1.2.3:5600"};
  EXPECT_TRUE(has(error(c), "'rollout.remote.weights_endpoints': 0 endpoints for 1 workers")) << error(c);
  c.rollout.remote.weights_endpoints = {"tcp://10.1.2.3:5601"};
  EXPECT_TRUE(has(error(c), "'rollout.remote.endpoints': 'tcp://10.1.2.3:5600' reaches beyond this machine"))
      << error(c);
  c.rollout.remote.key = "/nonexistent/trainer.key";
  EXPECT_TRUE(has(error(c), "give both")) << error(c);
  c.rollout.remote.worker_keys = {"/nonexistent/w0.pub"};
  EXPECT_TRUE(has(error(c), "config key 'rollout.remote'")) << error(c);
  EXPECT_TRUE(has(error(c), "/nonexistent/trainer.key")) << error(c);
  c.rollout.remote.worker_keys = {"a.pub", "b.pub"};
  EXPECT_TRUE(has(error(c), "2 keys for 1 workers")) << error(c);

  TrainConfig split;
  split.rollout.remote.endpoints = {"tcp://127.0.0.1:5600"};
  EXPECT_TRUE(has(error(split), "rollout.placement is \"split\"")) << error(split);
  TrainConfig local;  // loopback needs no keys
  local.rollout.placement = "remote";
  local.rollout.remote.endpoints = {"tcp://127.0.0.1:5600"};
  local.rollout.remote.weights_endpoints = {"ipc:///tmp/w0_weights.ipc"};
  EXPECT_EQ(error(local), "<no error>");
  local.rollout.remote.weights_endpoints = {"inproc://w"};
  EXPECT_TRUE(has(error(local), "inproc://")) << error(local);

  // One worker listed twice (also as another loopback name, or its request endpoint as another's weights one).
  TrainConfig twice = local;
  twice.rollout.remote.endpoints = {"tcp://127.0.0.1:5600", "tcp://localhost:5600"};
  twice.rollout.remote.weights_endpoints = {"tcp://127.0.0.1:5601", "tcp://127.0.0.1:5602"};
  EXPECT_TRUE(has(error(twice), "config key 'rollout.remote.endpoints': rollout.remote.endpoints[1] "
                                "'tcp://localhost:5600' is the place rollout.remote.endpoints[0] "
                                "'tcp://127.0.0.1:5600' already names"))
      << error(twice);
  twice.rollout.remote.endpoints = {"tcp://127.0.0.1:5600", "tcp://127.0.0.1:5603"};
  twice.rollout.remote.weights_endpoints = {"tcp://127.0.0.1:5601", "tcp://[::1]:5600"};
  EXPECT_TRUE(has(error(twice), "rollout.remote.weights_endpoints[1] 'tcp://[::1]:5600' is the place")) << error(twice);
  twice.rollout.remote.weights_endpoints = {"tcp://127.0.0.1:5601", "tcp://127.0.0.1:5602"};
  EXPECT_EQ(error(twice), "<no error>");
  // A port outside 1..65535 is refused at once, by key (a worker is connected to: no "any port" either).
  for (const char* port : {"0", "*", "65536", "99999", "-1"}) {
    twice.rollout.remote.endpoints = {"tcp://127.0.0.1:5600", std::string("tcp://127.0.0.1:") + port};
    EXPECT_TRUE(has(error(twice), std::string("config key 'rollout.remote.endpoints': endpoint 'tcp://127.0.0.1:") +
                                      port + "': port '" + port + "' is not a port to connect to (1..65535)"))
        << error(twice);
  }
}

}  // namespace
}  // namespace rlcpp
