// Fault handling of the split placement (loop/README.md "Fault handling"): a rollout worker that is killed
// mid-rollout, or hangs (SIGSTOP), is found, restarted with the current weights and given its unfinished
// prompts again, and the run's samples and metrics equal those of a run without the fault bit for bit; a
// worker that keeps dying stops the run with a message naming it once rollout.max_worker_restarts is spent.
//
// Faults are injected by the worker itself (`rlcpp worker --inject-fault kill|stop:REQUEST:STEP`, a hidden
// test flag): rollout.worker_binary is a shell script that adds the flag to worker1's command line, for its
// first start only (a mkdir marker) or for every start.
#include <gtest/gtest.h>
#include <signal.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/philox.h"
#include "core/wire.h"
#include "loop/controller.h"
#include "loop/rollout_backend.h"
#include "loop/worker_process.h"
#include "model/checkpoint.h"
#include "tests/train_test_support.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

class WorkerFault : public ::testing::Test {
 protected:
  static fs::path root() { return fs::temp_directory_path() / ("rlcpp_worker_fault_" + std::to_string(getpid())); }

  static void SetUpTestSuite() {
    fs::remove_all(root());
    small_train_checkpoint(root() / "init");
    const TrainConfig c = config("reference");
    reference_ = new TrainSummary(run_train(c, config_to_json(c)));
  }
  static void TearDownTestSuite() {
    delete reference_;
    reference_ = nullptr;
    fs::remove_all(root());
  }

  // 3 steps of 8 prompts x 8 on two workers (one chunk of 4 prompts each, the smallest automatic chunk, so each
  // worker serves exactly one request a rollout and a fault can be placed by its request number); every sample
  // goes to samples.jsonl.
  static TrainConfig config(const std::string& name) {
    TrainConfig c;
    c.init_checkpoint = (root() / "init").string();
    c.run_dir = (root() / name).string();
    c.rollout.placement = "split";
    c.rollout.num_workers = 2;
    c.rollout.prompts_per_step = 8;
    c.rollout.group_size = 8;
    c.rollout.worker_binary = RLCPP_BINARY_DIR "/rlcpp";
    c.samples_per_step = 64;
    c.ppo.mini_batch_size = 32;
    c.ppo.micro_batch_size = 32;
    c.optim.lr = 3e-3;
    c.steps = 3;
    c.eval_every = 0;
    c.eval_size = 10;
    return c;
  }

  // A worker binary that runs rlcpp worker, adding `--inject-fault FAULT` to worker1's command line: at its
  // first start only (`once`) or at every start.
  static std::string faulty_binary(const std::string& name, const std::string& fault, bool once) {
    const fs::path script = root() / (name + "_worker.sh");
    const std::string first = once ? " && mkdir '" + (root() / (name + "_fault_done")).string() + "' 2>/dev/null" : "";
    std::ofstream(script) << "#!/bin/sh\n"
                          << "for a in \"$@\"; do [ \"$a\" = worker1 ] && faulty=1; done\n"
                          << "if [ -n \"$faulty\" ]" << first << "; then exec '" RLCPP_BINARY_DIR "/rlcpp' \"$@\" "
                          << "--inject-fault " << fault << "; fi\n"
                          << "exec '" RLCPP_BINARY_DIR "/rlcpp' \"$@\"\n";
    fs::permissions(script, fs::perms::owner_all);
    return script.string();
  }

  // Runs `c`, returning what it printed.
  static std::string run_printing(const TrainConfig& c, TrainSummary& summary) {
    ::testing::internal::CaptureStdout();
    try {
      summary = run_train(c, config_to_json(c));
    } catch (...) {
      std::printf("%s", ::testing::internal::GetCapturedStdout().c_str());
      throw;
    }
    return ::testing::internal::GetCapturedStdout();
  }

  // Every sample and every metric but wall-clock figures and the fault counters equal the reference run's.
  static void expect_same_as_reference(const TrainSummary& run) {
    const std::vector<Json> want = read_jsonl(fs::path(reference_->run_dir) / "samples.jsonl");
    const std::vector<Json> got = read_jsonl(fs::path(run.run_dir) / "samples.jsonl");
    ASSERT_EQ(want.size(), 3u * 64u);
    ASSERT_EQ(got.size(), want.size());  // none lost, none duplicated
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "sample line " << i;
    const std::vector<Json> mw = read_jsonl(fs::path(reference_->run_dir) / "metrics.jsonl");
    const std::vector<Json> mg = read_jsonl(fs::path(run.run_dir) / "metrics.jsonl");
    ASSERT_EQ(mg.size(), mw.size());
    for (size_t s = 0; s < mw.size(); ++s) {
      EXPECT_EQ(mw[s]["rollout/worker_restarts"], 0) << "the reference run must be fault-free";
      for (const auto& [key, value] : mw[s].items()) {
        if (run_dependent_key(key) || key == "rollout/worker_restarts" || key == "rollout/worker_failures_step" ||
            key == "rollout/reissued_prompts")
          continue;
        EXPECT_EQ(mg[s][key], value) << "step " << s + 1 << " key " << key;
      }
    }
  }

  // Step s's fault counters of `run`: {worker_failures_step, reissued_prompts, worker_restarts}.
  static std::vector<double> fault_counters(const TrainSummary& run, size_t s) {
    const Json m = read_jsonl(fs::path(run.run_dir) / "metrics.jsonl").at(s);
    return {m.at("rollout/worker_failures_step").get<double>(), m.at("rollout/reissued_prompts").get<double>(),
            m.at("rollout/worker_restarts").get<double>()};
  }

  static TrainSummary* reference_;
};

TrainSummary* WorkerFault::reference_ = nullptr;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Requests each worker serves: 1 = step 1's rollout, 2 = step 1's probe, 3 = step 2's rollout.
TEST_F(WorkerFault, WorkerKilledMidRolloutIsRestartedAndTheRunEqualsAnUnkilledOne) {
  TrainConfig c = config("killed");
  c.rollout.worker_binary = faulty_binary("killed", "kill:3:2", /*once=*/true);
  TrainSummary run;
  const std::string out = run_printing(c, run);
  EXPECT_TRUE(contains(out, "train: worker1 was killed by signal 9")) << out;
  EXPECT_TRUE(contains(out, "during step 2 (rollout); restarted in")) << out;
  EXPECT_TRUE(contains(out, "at policy version 1, 4 prompts re-issued")) << out;
  expect_same_as_reference(run);
  EXPECT_EQ(fault_counters(run, 0), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(fault_counters(run, 1), (std::vector<double>{1, 4, 1}));
  EXPECT_EQ(fault_counters(run, 2), (std::vector<double>{0, 0, 1}));  // restarts are cumulative
}

TEST_F(WorkerFault, HungWorkerIsFoundByHeartbeatSilenceAndReplaced) {
  TrainConfig c = config("stopped");
  c.rollout.worker_binary = faulty_binary("stopped", "stop:3:2", /*once=*/true);
  c.rollout.worker_heartbeat_timeout_s = 3;  // heartbeats every 0.6 s; a tiny model's step takes ~ms
  TrainSummary run;
  const auto start = std::chrono::steady_clock::now();
  const std::string out = run_printing(c, run);
  EXPECT_TRUE(contains(out, "train: worker1 sent no result or heartbeat for")) << out;
  EXPECT_TRUE(contains(out, "killed it (SIGKILL) during step 2 (rollout)")) << out;
  // Found by the heartbeat, not by worker_timeout_s (600 s).
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 60);
  expect_same_as_reference(run);
  EXPECT_EQ(fault_counters(run, 1), (std::vector<double>{1, 4, 1}));
}

TEST_F(WorkerFault, WorkerThatKeepsDyingStopsTheRunNamingIt) {
  TrainConfig c = config("dying");
  c.rollout.worker_binary = faulty_binary("dying", "exit:1:1", /*once=*/false);  // _exit(3) mid-request
  c.rollout.max_worker_restarts = 2;
  TrainSummary run;
  try {
    run_printing(c, run);
    FAIL() << "a worker that dies at every start must stop the run";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(contains(what, "rollout: worker1 exited with status 3")) << what;
    // Its chunks go to worker0 when it is idle in time, so the run may get past step 1 before worker1 has failed
    // a third time in a row (or twice within one step).
    EXPECT_TRUE(contains(what, "2 worker restart(s) in this step already, rollout.max_worker_restarts = 2") ||
                contains(what, "it failed 3 times in a row without serving a chunk (rollout.max_worker_restarts = 2)"))
        << what;
  }
}

// The pid of this process's child `rlcpp worker ... --name NAME`, or -1.
pid_t child_worker_pid(const std::string& name) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line) || line.rfind(')') == std::string::npos) continue;
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid != getpid()) continue;
    std::ifstream cmd(entry.path() / "cmdline");
    std::vector<std::string> args;
    for (std::string a; std::getline(cmd, a, '\0');) args.push_back(a);
    for (size_t i = 0; i + 1 < args.size(); ++i)
      if (args[i] == "--name" && args[i + 1] == name) return static_cast<pid_t>(std::stoi(pid));
  }
  return -1;
}

// /proc state letter of `pid` (T: stopped); 0 when gone.
char process_state(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line) || line.rfind(')') == std::string::npos) return 0;
  return line[line.rfind(')') + 2];
}

void wait_for_state(pid_t pid, char state) {
  for (int i = 0; i < 500 && process_state(pid) != state; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(process_state(pid), state) << "pid " << pid;
}

// Samples of `result` by prompt id: request `r` carries the ids.
std::map<uint64_t, std::vector<const Sample*>> by_prompt_id(const Request& r, const RolloutResult& result) {
  std::map<uint64_t, std::vector<const Sample*>> out;
  for (const Sample& s : result.samples) out[r.prompt_id(static_cast<size_t>(s.prompt_index))].push_back(&s);
  return out;
}

// Between requests: a worker that died while idle is found at the next sync (waitpid) and one that hangs by
// its silence to the weight publish (worker_timeout_s); each restarted worker then holds exactly the
// trainer's weights: it samples what the healthy worker samples for the same prompt ids, bit for bit.
TEST_F(WorkerFault, WorkerFailingBetweenStepsIsReplacedAtTheNextSync) {
  TrainConfig c = config("backend");
  c.rollout.worker_timeout_s = 2;
  fs::create_directories(c.run_dir);
  ParameterStore params = load_model_checkpoint(c.init_checkpoint);
  ::testing::internal::CaptureStdout();
  std::unique_ptr<RolloutBackend> backend = make_split_rollout(c.rollout, c.run_dir, c.init_checkpoint, params, 0);

  Request request;
  request.n = 4;
  request.sampling.max_new_tokens = 6;
  request.sampling.seed = 11;
  for (int p = 0; p < 6; ++p) {
    request.prompts.push_back({1, 5 + p, 9, 12 + p});
    request.prompt_ids.push_back(100 + p);
  }
  // The same prompts in reverse order: each is now served by the other worker.
  Request swapped = request;
  std::reverse(swapped.prompts.begin(), swapped.prompts.end());
  std::reverse(swapped.prompt_ids.begin(), swapped.prompt_ids.end());
  auto perturb = [&](uint64_t seed) {
    PhiloxStream rng(seed, 0);
    float* w = params.flat().data<float>();
    for (int64_t i = 0; i < params.numel(); ++i) w[i] += 0.05f * (static_cast<float>(rng.uniform()) - 0.5f);
  };
  auto expect_workers_agree = [&](int64_t version) {
    const RolloutResult a = backend->generate(request);
    const RolloutResult b = backend->generate(swapped);
    ASSERT_EQ(a.samples.size(), 24u);
    ASSERT_EQ(b.samples.size(), 24u);
    const auto sa = by_prompt_id(request, a), sb = by_prompt_id(swapped, b);
    for (const auto& [id, samples] : sa) {
      ASSERT_EQ(samples.size(), 4u);
      for (size_t k = 0; k < samples.size(); ++k) {
        const Sample& x = *samples[k];
        const Sample& y = *sb.at(id)[k];
        EXPECT_EQ(x.sample_index, y.sample_index);
        EXPECT_EQ(x.tokens, y.tokens) << "prompt id " << id;
        EXPECT_EQ(x.logprobs, y.logprobs) << "prompt id " << id;  // bit for bit: the same weights
        EXPECT_EQ(x.policy_version, version);
        EXPECT_EQ(y.policy_version, version);
      }
    }
  };
  backend->begin_step(1);
  expect_workers_agree(0);

  // worker1 dies idle; the next sync finds it exited, restarts it and brings it to version 1.
  const pid_t w1 = child_worker_pid("worker1");
  ASSERT_GT(w1, 0);
  ASSERT_EQ(kill(w1, SIGKILL), 0);
  siginfo_t info;  // waits until the backend's waitpid can see the exit, without reaping it ourselves
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(w1), &info, WEXITED | WNOWAIT), 0);
  perturb(1);
  backend->sync(params, 1);
  EXPECT_NE(child_worker_pid("worker1"), w1);
  expect_workers_agree(1);
  std::map<std::string, double> m = backend->fault_metrics();
  EXPECT_EQ(m["rollout/worker_failures_step"], 1);
  EXPECT_EQ(m["rollout/reissued_prompts"], 0);
  EXPECT_EQ(m["rollout/worker_restarts"], 1);

  // worker0 hangs idle; its weight publish goes unanswered for worker_timeout_s, then it is replaced.
  backend->begin_step(2);
  const pid_t w0 = child_worker_pid("worker0");
  ASSERT_GT(w0, 0);
  ASSERT_EQ(kill(w0, SIGSTOP), 0);
  wait_for_state(w0, 'T');
  perturb(2);
  backend->sync(params, 2);
  EXPECT_EQ(process_state(w0), 0) << "the hung worker must be killed and reaped";
  expect_workers_agree(2);
  m = backend->fault_metrics();
  EXPECT_EQ(m["rollout/worker_failures_step"], 1);
  EXPECT_EQ(m["rollout/worker_restarts"], 2);
  backend.reset();
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_TRUE(contains(out, "train: worker1 was killed by signal 9 (Killed) during step 1 (weight sync)")) << out;
  EXPECT_TRUE(contains(out, "train: worker0 did not acknowledge weights version 2 within 2 s")) << out;
  EXPECT_TRUE(contains(out, "killed it (SIGKILL) during step 2 (weight sync); restarted")) << out;
}

// Faults of a single worker process, outside a training run: it cannot start, or it is sent messages that used
// to throw out of its serve loop, leaving it blocked in zmq_ctx_term with a socket open, deaf to SIGTERM.
class WorkerProcessFault : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rlcpp_worker_process_fault_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string ipc(const std::string& name) const { return "ipc://" + (dir_ / name).string(); }

  fs::path dir_;
};

const std::string kBinary = RLCPP_BINARY_DIR "/rlcpp";

struct Ended {
  int status = -1;
  bool killed = false;  // still running at the limit
  std::string output;   // stdout and stderr
  double seconds = 0;
};

// Runs `rlcpp ARGS`, killing it (SIGKILL) if it has not ended `limit_s` seconds after it started; with
// sigterm_after_s >= 0, sends it SIGTERM that long after it started.
Ended run_with_limit(const std::vector<std::string>& args, double limit_s, double sigterm_after_s = -1) {
  std::vector<std::string> text = {kBinary};
  text.insert(text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : text) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  Ended e;
  const auto deadline = start + std::chrono::duration<double>(limit_s);
  const auto sigterm_at = start + std::chrono::duration<double>(sigterm_after_s);
  bool sigterm_sent = sigterm_after_s < 0;
  while (true) {
    const auto now = std::chrono::steady_clock::now();
    if (!sigterm_sent && now >= sigterm_at) {
      kill(pid, SIGTERM);
      sigterm_sent = true;
    }
    const auto next = sigterm_sent ? deadline : std::min(deadline, sigterm_at);
    const double left = std::chrono::duration<double>(next - now).count();
    pollfd p{fds[0], POLLIN, 0};
    if (std::chrono::steady_clock::now() >= deadline) {
      e.killed = true;
      kill(pid, SIGKILL);
      break;
    }
    if (poll(&p, 1, static_cast<int>(std::max(0.0, left) * 1000) + 1) == 0) continue;
    char buf[4096];
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    e.output.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  waitpid(pid, &e.status, 0);
  e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return e;
}

// The next message on `socket` that is not a heartbeat; fails the test when none comes within 10 s.
WireMessage next_reply(zmq::socket_t& socket) {
  ReceivedFrames got;
  while (receive_frames(socket, 0, WireLimits{}, 10000, got)) {
    WireMessage m = decode_wire_message(got.frames, WireLimits{});
    if (m.type() != "heartbeat") return m;
  }
  ADD_FAILURE() << "no reply within 10 s";
  return WireMessage("none");
}

// SIGTERM while the worker is still starting (making and packing the 0.5B preset's 494 M weights takes tens of
// seconds) ends it at once with status 0, before it listens; it used to finish starting first. The signal comes
// 1 s in: loading the executable with CUDA's libraries alone took 0.3 s on one machine, and a signal before main
// installs its handling ends the process by the default action instead.
TEST_F(WorkerProcessFault, SigtermDuringStartUpEndsTheWorkerAtOnce) {
  const Ended e = run_with_limit({"worker", "--preset", "qwen05b", "--bind", ipc("early.ipc")}, 60,
                                 /*sigterm_after_s=*/1.0);
  EXPECT_FALSE(e.killed) << e.output;
  EXPECT_TRUE(WIFEXITED(e.status) && WEXITSTATUS(e.status) == 0) << "status " << e.status << ": " << e.output;
  EXPECT_TRUE(contains(e.output, "\"during\":\"start-up\"")) << e.output;
  EXPECT_FALSE(contains(e.output, "listening")) << e.output;
  EXPECT_LT(e.seconds, 3.0) << e.output;
}

TEST_F(WorkerProcessFault, PortInUseExitsNonZeroNamingTheAddress) {
  zmq::context_t ctx;
  zmq::socket_t holder(ctx, zmq::socket_type::router);
  holder.set(zmq::sockopt::linger, 0);
  holder.bind("tcp://127.0.0.1:*");
  const std::string endpoint = holder.get(zmq::sockopt::last_endpoint);
  const Ended e = run_with_limit({"worker", "--preset", "tiny", "--bind", endpoint}, 30);
  EXPECT_FALSE(e.killed) << "the worker still ran after 30 s: " << e.output;
  EXPECT_TRUE(WIFEXITED(e.status) && WEXITSTATUS(e.status) == 1) << "status " << e.status << ": " << e.output;
  EXPECT_TRUE(contains(e.output, "cannot listen on " + endpoint + ": address in use")) << e.output;
  EXPECT_LT(e.seconds, 20) << e.output;
}

// The launcher (loop/worker_process.h) reports the error the worker gives, at once, not a start-up timeout.
TEST_F(WorkerProcessFault, LauncherReportsTheErrorOfAWorkerThatCannotListen) {
  zmq::context_t ctx;
  zmq::socket_t holder(ctx, zmq::socket_type::router);
  holder.set(zmq::sockopt::linger, 0);
  holder.bind("tcp://127.0.0.1:*");
  const std::string endpoint = holder.get(zmq::sockopt::last_endpoint);
  const auto start = std::chrono::steady_clock::now();
  try {
    WorkerProcess worker(kBinary, {"--preset", "tiny", "--bind", endpoint}, /*startup_timeout_s=*/60);
    FAIL() << "a worker whose port is taken must not start";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(contains(what, "could not start: worker: cannot listen on " + endpoint + ": address in use")) << what;
    EXPECT_TRUE(contains(what, "(the worker exited with status 1)")) << what;
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 20);
}

// A split run whose engine settings the worker refuses (rollout.engine.block_size = 0) stops with the worker's
// own message, where it used to wait out the 60 s start-up timeout and show empty output.
TEST_F(WorkerProcessFault, SplitRolloutReportsTheWorkersOwnError) {
  const std::string checkpoint = small_train_checkpoint(dir_ / "init");
  const ParameterStore params = load_model_checkpoint(checkpoint);
  RolloutSection rollout;
  rollout.worker_binary = kBinary;
  rollout.engine.block_size = 0;
  const auto start = std::chrono::steady_clock::now();
  try {
    make_split_rollout(rollout, dir_.string(), checkpoint, params, 0);
    FAIL() << "a worker with block_size 0 must not start";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(contains(what, "could not start: engine config: block_size must be in [1, 1048576], got 0")) << what;
    EXPECT_TRUE(contains(what, "(the worker exited with status 1)")) << what;
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 20);
}

// A header byte that is not UTF-8 and a weights message whose version is a string each get an error reply;
// the worker keeps serving, and SIGTERM then stops it cleanly.
TEST_F(WorkerProcessFault, BadMessagesGetErrorRepliesAndSigtermStillStopsTheWorker) {
  WorkerProcess worker(kBinary, {"--preset", "tiny", "--bind", ipc("w.ipc"), "--weights", ipc("w_weights.ipc")});
  zmq::context_t ctx;
  zmq::socket_t requests(ctx, zmq::socket_type::dealer), weights(ctx, zmq::socket_type::dealer);
  requests.set(zmq::sockopt::linger, 0);
  weights.set(zmq::sockopt::linger, 0);
  requests.connect(worker.endpoint());
  weights.connect(worker.weights_endpoint());
  auto expect_pong = [&](int64_t id) {
    WireMessage ping("ping");
    ping.header["request_id"] = id;
    send_wire_message(requests, {}, ping);
    const WireMessage r = next_reply(requests);
    EXPECT_EQ(r.type(), "pong") << r.header.dump();
    EXPECT_EQ(r.header.value("request_id", int64_t{-1}), id) << r.header.dump();
  };

  const std::string not_utf8 = "{\"type\": \"ping\", \"request_id\": 1, \"x\": \"\xff\"}";
  zmq::message_t header(not_utf8.data(), not_utf8.size());
  (void)requests.send(header, zmq::send_flags::none);
  WireMessage r = next_reply(requests);
  EXPECT_EQ(r.type(), "error") << r.header.dump();
  EXPECT_TRUE(contains(r.header.value("message", std::string()), "not valid JSON")) << r.header.dump();
  expect_pong(2);

  WireMessage stale("weights");
  stale.header["version"] = "3";
  send_wire_message(weights, {}, stale);
  r = next_reply(weights);
  EXPECT_EQ(r.type(), "error") << r.header.dump();
  EXPECT_TRUE(contains(r.header.value("error", std::string()), "header field 'version' is \"3\", expected an integer"))
      << r.header.dump();
  expect_pong(3);

  ASSERT_EQ(kill(worker.pid(), SIGTERM), 0);
  std::string ended;
  for (int i = 0; i < 1000 && ended.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ended = worker.exit_reason();
  }
  EXPECT_EQ(ended, "exited with status 0");
}

}  // namespace
}  // namespace rlcpp
