#include "loop/rollout_backend.h"

#include <filesystem>
#include <optional>

#include "core/error.h"
#include "loop/worker_process.h"
#include "rollout/worker_client.h"
#include "weightsync/inproc_channel.h"
#include "weightsync/zmq_channel.h"

namespace rlcpp {

namespace {

class ColocatedRollout : public RolloutBackend {
 public:
  ColocatedRollout(const Transformer& model, const ParameterStore& params, const EngineConfig& engine,
                   int64_t version)
      : params_(params), engine_(model, params, engine, version), channel_(params, version) {}

  RolloutResult generate(const Request& request) override { return engine_.generate(request); }

  void sync(const ParameterStore& params, int64_t version) override {
    channel_.publish(version);
    const int64_t v = channel_.poll(params);  // checks that params is the buffer the engine reads
    RLCPP_CHECK(v == version, "weight sync (inproc): engine acknowledged version " << v << ", expected " << version);
    engine_.set_weights(params_, v);
  }

 private:
  const ParameterStore& params_;
  Engine engine_;
  InprocWeightChannel channel_;
};

class SplitRollout : public RolloutBackend {
 public:
  SplitRollout(const RolloutSection& rollout, const std::string& run_dir, const std::string& checkpoint,
               const ParameterStore& params, int64_t version) {
    const std::string dir = std::filesystem::absolute(run_dir).string();
    const EngineConfig& e = rollout.engine;
    const std::string binary = rollout.worker_binary.empty() ? current_executable() : rollout.worker_binary;
    std::vector<std::string> endpoints;
    ZmqPublisherOptions options;
    options.chunk_floats = std::min<int64_t>(options.chunk_floats, std::max<int64_t>(params.numel(), 4096));
    for (int64_t w = 0; w < rollout.num_workers; ++w) {
      const std::string name = "worker" + std::to_string(w);
      processes_.push_back(std::make_unique<WorkerProcess>(
          binary, std::vector<std::string>{checkpoint, "--bind", "ipc://" + dir + "/" + name + ".ipc", "--weights",
                                           "ipc://" + dir + "/" + name + "_weights.ipc", "--policy-version",
                                           std::to_string(version), "--name", name, "--block-size",
                                           std::to_string(e.block_size), "--num-blocks", std::to_string(e.num_blocks),
                                           "--max-num-seqs", std::to_string(e.max_num_seqs), "--max-batched-tokens",
                                           std::to_string(e.max_num_batched_tokens)}));
      endpoints.push_back(processes_.back()->endpoint());
      publishers_.push_back(std::make_unique<ZmqWeightPublisher>(context_, processes_.back()->weights_endpoint(),
                                                                 /*bind=*/false, options));
    }
    client_.emplace(WorkerClient::connect(context_, endpoints));
  }

  ~SplitRollout() override {
    try {
      client_->shutdown();
    } catch (const std::exception&) {
      // the process is stopped by SIGTERM below anyway
    }
    publishers_.clear();
    client_.reset();
    processes_.clear();
  }

  RolloutResult generate(const Request& request) override { return client_->generate(request); }

  // Every worker acknowledges the version before the next rollout.
  void sync(const ParameterStore& params, int64_t version) override {
    for (auto& publisher : publishers_) publisher->publish(params, version);
  }

 private:
  zmq::context_t context_;
  std::vector<std::unique_ptr<WorkerProcess>> processes_;
  std::optional<WorkerClient> client_;
  std::vector<std::unique_ptr<ZmqWeightPublisher>> publishers_;
};

}  // namespace

std::unique_ptr<RolloutBackend> make_colocated_rollout(const Transformer& model, const ParameterStore& params,
                                                       const EngineConfig& engine, int64_t version) {
  return std::make_unique<ColocatedRollout>(model, params, engine, version);
}

std::unique_ptr<RolloutBackend> make_split_rollout(const RolloutSection& rollout, const std::string& run_dir,
                                                   const std::string& checkpoint, const ParameterStore& params,
                                                   int64_t version) {
  return std::make_unique<SplitRollout>(rollout, run_dir, checkpoint, params, version);
}

}  // namespace rlcpp
