// The GPU weight syncs between processes — cuda-ipc (weightsync/cuda_ipc_channel.h) on one GPU or two, nccl
// (weightsync/nccl_channel.h) across two GPUs, and NCCL's world of one and its join timeout on one: this binary
// starts itself again as the subscriber (the CudaIpcSubscriberProcess case, which runs only when started so),
// publishes and reads back what the other process received. Skipped without a GPU (or the second GPU a case
// needs); scripts/device_check.sh runs it on a lent one. The CPU-side refusals are in weightsync_channels_test.
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/exec_context.h"
#include "model/init.h"
#include "weightsync/cuda_ipc_channel.h"
#include "weightsync/nccl_channel.h"
#include "weightsync/zmq_channel.h"

extern char** environ;

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

constexpr const char* kChildDirVariable = "RLCPP_CUDA_IPC_SUBSCRIBER_DIR";
constexpr const char* kChildModelVariable = "RLCPP_CUDA_IPC_SUBSCRIBER_MODEL";
constexpr const char* kChildDeviceVariable = "RLCPP_CUDA_IPC_SUBSCRIBER_DEVICE";
constexpr const char* kChildPollsVariable = "RLCPP_CUDA_IPC_SUBSCRIBER_POLLS";
constexpr int kChildPolls = 5;  // unless told otherwise

// Every wait of these cases, in seconds: RLCPP_GPU_TEST_TIMEOUT_S (default 60). scripts/device_check.sh sets it
// short, so that a case that goes wrong early does not spend minutes of a lent GPU's time waiting; the
// subscriber process inherits it.
int wait_s() {
  const char* value = std::getenv("RLCPP_GPU_TEST_TIMEOUT_S");
  return value ? std::max(1, std::atoi(value)) : 60;
}

// "small" (2 layers of the tiny preset, each received version written back) or "w2" (the qwen05b preset: 494M
// parameters, 2 GB of fp32 weights a sync, timed).
ModelConfig child_config(const std::string& model) {
  if (model == "w2") return model_preset("qwen05b");
  ModelConfig cfg = model_preset("tiny");
  cfg.num_hidden_layers = 2;
  return cfg;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The subscriber process: binds in the directory it was given, says so with a `ready` file, then serves
// kChildPolls publishes, writing each version it takes (the small model's weights copied back to the host) to
// v<VERSION>.bin and what happened to each to log.txt.
TEST(CudaIpcSubscriberProcess, Serves) {
  const char* dir = std::getenv(kChildDirVariable);
  if (dir == nullptr) GTEST_SKIP() << "the subscriber side of the cuda-ipc cases, run by them";
  const char* model = std::getenv(kChildModelVariable);
  const bool small = model == nullptr || std::string(model) != "w2";
  const char* device = std::getenv(kChildDeviceVariable);
  const ExecContext gpu = ExecContext::cuda(device ? std::atoi(device) : 0);
  zmq::context_t ctx;
  ZmqWeightSubscriber sub(ctx, std::string("ipc://") + dir + "/sub.ipc", /*bind=*/true,
                          child_config(small ? "small" : "w2"), 0, {}, gpu);
  std::ofstream(fs::path(dir) / "ready") << "ready\n";
  std::ofstream log(fs::path(dir) / "log.txt");
  const char* polls = std::getenv(kChildPollsVariable);
  for (int i = 0; i < (polls ? std::atoi(polls) : kChildPolls); ++i) {
    const bool took = sub.poll(wait_s() * 1000, [&](ParameterStore w, int64_t version) {
      ASSERT_EQ(w.flat().device(), Device::kCUDA);  // arrived on the GPU
      if (!small) return;
      Tensor host;
      const Tensor& h = host_tensor(gpu, w.flat(), host);
      std::ofstream(fs::path(dir) / ("v" + std::to_string(version) + ".bin"), std::ios::binary)
          .write(static_cast<const char*>(h.raw()), static_cast<std::streamsize>(h.nbytes()));
    });
    log << (took ? "took " + std::to_string(sub.version()) : "no new version; last error: " + sub.last_error())
        << "\n" << std::flush;
  }
}

class SubscriberProcess {
 public:
  SubscriberProcess(const fs::path& dir, const std::string& model, int device = 0, int polls = kChildPolls)
      : dir_(dir) {
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
    env.push_back(std::string(kChildDirVariable) + "=" + dir.string());
    env.push_back(std::string(kChildModelVariable) + "=" + model);
    env.push_back(std::string(kChildDeviceVariable) + "=" + std::to_string(device));
    env.push_back(std::string(kChildPollsVariable) + "=" + std::to_string(polls));
    std::vector<char*> envp;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string exe = fs::read_symlink("/proc/self/exe").string(), filter = "--gtest_filter=CudaIpcSubscriberProcess.*";
    char* argv[] = {exe.data(), filter.data(), nullptr};
    EXPECT_EQ(posix_spawn(&pid_, exe.c_str(), nullptr, nullptr, argv, envp.data()), 0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(wait_s());
    while (!fs::exists(dir / "ready") && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ~SubscriberProcess() {
    if (pid_ > 0) kill(pid_, SIGKILL), waitpid(pid_, nullptr, 0);
  }
  bool ready() const { return fs::exists(dir_ / "ready"); }
  int wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  std::string endpoint() const { return "ipc://" + (dir_ / "sub.ipc").string(); }

 private:
  fs::path dir_;
  pid_t pid_ = -1;
};

// Two processes, the subscriber on the publisher's GPU (cuda:0) or on another GPU of the machine (cuda:1, peer to
// peer; skipped with fewer GPUs): version 1 and a changed version 2 arrive with the publisher's bits exactly (the
// other process's copy, read back); a checksum that does not match, an export on a GPU the subscriber does not
// see and one from another host are refused by name between them, and the subscriber keeps serving.
class CudaIpcBetweenProcesses : public ::testing::TestWithParam<int> {};

TEST_P(CudaIpcBetweenProcesses, VersionsArriveWithThePublishersBits) {
  const int subscriber_device = GetParam();
  std::string why;
  const int devices = ExecContext::cuda_devices(&why);
  if (devices == 0) GTEST_SKIP() << why;
  if (devices <= subscriber_device)
    GTEST_SKIP() << "a subscriber on cuda:" << subscriber_device << " needs " << subscriber_device + 1
                 << " GPUs; this machine has " << devices;
  const fs::path dir = fs::temp_directory_path() / ("rlcpp_cuda_ipc_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const ExecContext gpu = ExecContext::cuda(0);
  const ModelConfig cfg = child_config("small");
  ParameterStore params = init_random(cfg, 21);
  CudaIpcWeightExport exported(gpu, cfg);
  SubscriberProcess child(dir, "small", subscriber_device);
  ASSERT_TRUE(child.ready()) << "the subscriber process did not start";
  zmq::context_t ctx;
  ZmqPublisherOptions once;
  once.max_attempts = 1;
  once.reply_timeout_ms = wait_s() * 1000;
  ZmqWeightPublisher pub(ctx, child.endpoint(), /*bind=*/false, once);
  auto bytes_of = [](const ParameterStore& p) {
    return std::string(static_cast<const char*>(p.flat().raw()), static_cast<size_t>(p.flat().nbytes()));
  };

  const PublishStats first = pub.publish(exported.stage(params.on(gpu), 1), 1);
  EXPECT_LT(first.bytes, 64 << 10);  // a handle and a header, not the weights
  EXPECT_EQ(read_file(dir / "v1.bin"), bytes_of(params));

  auto altered = [&](const char* key, const std::string& value) {
    WireMessage m = exported.announce();
    m.header["version"] = 2;
    m.header[key] = value;
    return m;
  };
  EXPECT_THROW(pub.publish(altered("keyed_checksum", "12345"), 2), Error);
  EXPECT_THROW(pub.publish(altered("device_uuid", std::string(32, 'f')), 2), Error);
  EXPECT_THROW(pub.publish(altered("host_boot_id", "another-boot"), 2), Error);

  params.flat().data<float>()[0] += 1.0f;
  params.flat().data<float>()[params.numel() - 1] = -0.0f;
  pub.publish(exported.stage(params.on(gpu), 2), 2);
  EXPECT_EQ(read_file(dir / "v2.bin"), bytes_of(params));
  EXPECT_EQ(child.wait(), 0);
  const std::string log = read_file(dir / "log.txt");
  EXPECT_NE(log.find("took 1\n"), std::string::npos) << log;
  EXPECT_NE(log.find("checksum mismatch for version 2: header 12345"), std::string::npos) << log;
  EXPECT_NE(log.find("the export is on the GPU with UUID ffff"), std::string::npos) << log;
  EXPECT_NE(log.find("which this process does not see"), std::string::npos) << log;
  EXPECT_NE(log.find("the export is on another host (boot id another-boot"), std::string::npos) << log;
  EXPECT_NE(log.find("took 2\n"), std::string::npos) << log;
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(SubscriberDevice, CudaIpcBetweenProcesses, ::testing::Values(0, 1),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == 0 ? std::string("SameGpu") : std::string("AnotherGpu");
                         });

// The goal's figure: a W2 sync (2 GB of fp32 weights) between two processes on one GPU — the trainer's device
// copy into its export buffer, the checksum there, the announcement, the subscriber's device copy, its checksum
// and finiteness check, and the acknowledgement. Printed and recorded as a test property; the goal is <= 10 ms on an
// H200 (one copy each side is ~2 x 4 GB of traffic at ~4 TB/s, about 2 ms, plus the checksums). The median must
// stay under RLCPP_W2_SYNC_BOUND_MS (default 30 ms): the 2 GB through the host would take ~40 ms each way at
// PCIe's ~53 GB/s, so a sync over that bound did not stay on the GPU. Every version must have arrived.
TEST(CudaIpc, W2SyncTime) {
  std::string why;
  if (ExecContext::cuda_devices(&why) == 0) GTEST_SKIP() << why;
  const fs::path dir = fs::temp_directory_path() / ("rlcpp_cuda_ipc_w2_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const ExecContext gpu = ExecContext::cuda(0);
  const ModelConfig cfg = child_config("w2");
  ParameterStore weights = ParameterStore::allocate(cfg, gpu);
  gpu.fill_zero(weights.flat());
  CudaIpcWeightExport exported(gpu, cfg);
  SubscriberProcess child(dir, "w2");
  ASSERT_TRUE(child.ready()) << "the subscriber process did not start";
  zmq::context_t ctx;
  ZmqPublisherOptions options;
  options.reply_timeout_ms = wait_s() * 1000;
  ZmqWeightPublisher pub(ctx, child.endpoint(), /*bind=*/false, options);
  std::vector<double> ms;
  for (int64_t v = 1; v <= kChildPolls; ++v) {
    const auto start = std::chrono::steady_clock::now();
    pub.publish(exported.stage(weights, v), v);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  EXPECT_EQ(child.wait(), 0);
  const std::string log = read_file(dir / "log.txt");
  for (int64_t v = 1; v <= kChildPolls; ++v)
    EXPECT_NE(log.find("took " + std::to_string(v) + "\n"), std::string::npos) << "version " << v << ": " << log;
  const std::vector<double> sorted = [&] { auto s = ms; std::sort(s.begin(), s.end()); return s; }();
  const double median = sorted[sorted.size() / 2];
  std::printf("cuda-ipc W2 sync (%lld floats): %.2f ms median, %.2f ms best, first %.2f ms\n",
              static_cast<long long>(weights.numel()), median, sorted.front(), ms.front());
  ::testing::Test::RecordProperty("w2_sync_ms_median", std::to_string(median));
  const char* bound = std::getenv("RLCPP_W2_SYNC_BOUND_MS");
  EXPECT_LE(median, bound ? std::atof(bound) : 30.0) << "ms: the W2 sync is not a device-to-device copy";
  fs::remove_all(dir);
}

// NCCL's world of one (the trainer alone): a broadcast from rank 0 leaves the weights as they are.
TEST(NcclWeightSync, AWorldOfOneBroadcastsInPlace) {
  std::string why;
  if (!nccl_weight_sync_available(&why)) GTEST_SKIP() << why;
  const ExecContext gpu = ExecContext::cuda(0);
  const ParameterStore params = init_random(child_config("small"), 23);
  ParameterStore on_gpu = params.on(gpu);
  NcclWeightBroadcast world(gpu, NcclWeightBroadcast::unique_id(), 0, 1, 30);
  world.broadcast(on_gpu.flat().data<float>(), on_gpu.numel(), 1000, "nobody");
  Tensor back;
  EXPECT_EQ(std::memcmp(host_tensor(gpu, on_gpu.flat(), back).raw(), params.flat().raw(), params.flat().nbytes()), 0);
}

// A worker that never joins: the trainer's end of the world gives up at its timeout, aborting the communicator
// and saying what it waited for, instead of hanging (the failure TRL, verl and SGLang users report most).
TEST(NcclWeightSync, ARankThatNeverJoinsEndsTheWaitAtTheTimeout) {
  std::string why;
  if (!nccl_weight_sync_available(&why)) GTEST_SKIP() << why;
  const ExecContext gpu = ExecContext::cuda(0);
  const auto start = std::chrono::steady_clock::now();
  try {
    NcclWeightBroadcast world(gpu, NcclWeightBroadcast::unique_id(), 0, 2, 3.0);
    ADD_FAILURE() << "a world of two formed with one rank";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 of 2: joining the weight-sync world"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("did not finish within 3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("the communicator is aborted"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30.0);
}

// Two processes on two GPUs over nccl, as a split run drives them: the join (the id over zmq, both ends of the
// world formed), then two versions each announced, broadcast in several buckets and acknowledged; the other
// process's copies, read back, hold the publisher's bits. Skipped with fewer than two GPUs.
TEST(NcclWeightSync, TwoProcessesOnTwoGpusGetTheSameBits) {
  std::string why;
  if (!nccl_weight_sync_available(&why)) GTEST_SKIP() << why;
  const int devices = ExecContext::cuda_devices(&why);
  if (devices < 2) GTEST_SKIP() << "needs 2 GPUs (two NCCL ranks cannot share one); this machine has " << devices;
  const fs::path dir = fs::temp_directory_path() / ("rlcpp_nccl_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const ExecContext gpu = ExecContext::cuda(0);
  ParameterStore params = init_random(child_config("small"), 25);
  SubscriberProcess child(dir, "small", /*device=*/1, /*polls=*/3);
  ASSERT_TRUE(child.ready()) << "the subscriber process did not start";
  zmq::context_t ctx;
  ZmqPublisherOptions options;
  options.reply_timeout_ms = wait_s() * 1000;
  ZmqWeightPublisher pub(ctx, child.endpoint(), /*bind=*/false, options);
  const std::string id = NcclWeightBroadcast::unique_id();
  pub.post(nccl_join_message(id, 1, 2, wait_s()));
  NcclWeightBroadcast world(gpu, id, 0, 2, wait_s());
  pub.await_ack(0);
  for (int64_t v = 1; v <= 2; ++v) {
    params.flat().data<float>()[static_cast<size_t>(v)] += 1.0f;
    ParameterStore on_gpu = params.on(gpu);
    pub.post(nccl_weights_message(gpu, on_gpu, v, 10000));  // buckets of 10,000 floats: several broadcasts
    world.broadcast(on_gpu.flat().data<float>(), on_gpu.numel(), 10000, "the subscriber process");
    pub.await_ack(v);
    EXPECT_EQ(read_file(dir / ("v" + std::to_string(v) + ".bin")),
              std::string(static_cast<const char*>(params.flat().raw()), static_cast<size_t>(params.flat().nbytes())))
        << "version " << v;
  }
  EXPECT_EQ(child.wait(), 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rlcpp
