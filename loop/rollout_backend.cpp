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
    process_.emplace(rollout.worker_binary.empty() ? current_executable() : rollout.worker_binary,
                     std::vector<std::string>{checkpoint, "--bind", "ipc://" + dir + "/worker.ipc", "--weights",
                                              "ipc://" + dir + "/weights.ipc", "--policy-version", std::to_string(version), "--name",
                                              "worker0", "--block-size", std::to_string(e.block_size),
                                              "--num-blocks", std::to_string(e.num_blocks), "--max-num-seqs",
                                              std::to_string(e.max_num_seqs), "--max-batched-tokens",
                                              std::to_string(e.max_num_batched_tokens)});
    client_.emplace(WorkerClient::connect(context_, {process_->endpoint()}));
    ZmqPublisherOptions options;
    options.chunk_floats = std::min<int64_t>(options.chunk_floats, std::max<int64_t>(params.numel(), 4096));
    publisher_.emplace(context_, process_->weights_endpoint(), /*bind=*/false, options);
  }

  ~SplitRollout() override {
    try {
      client_->shutdown();
    } catch (const std::exception&) {
      // the process is stopped by SIGTERM below anyway
    }
    publisher_.reset();
    client_.reset();
    process_.reset();
  }

  RolloutResult generate(const Request& request) override { return client_->generate(request); }

  void sync(const ParameterStore& params, int64_t version) override { publisher_->publish(params, version); }

 private:
  zmq::context_t context_;
  std::optional<WorkerProcess> process_;
  std::optional<WorkerClient> client_;
  std::optional<ZmqWeightPublisher> publisher_;
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
