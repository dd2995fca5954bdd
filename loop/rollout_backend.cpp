#include "loop/rollout_backend.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

#include "core/error.h"
#include "core/metrics.h"
#include "loop/train_checkpoint.h"
#include "loop/worker_process.h"
#include "loop/worker_turns.h"
#include "rollout/worker_client.h"
#include "weightsync/cuda_ipc_channel.h"
#include "weightsync/inproc_channel.h"
#include "weightsync/nccl_channel.h"
#include "weightsync/zmq_channel.h"

namespace rlcpp {

namespace {

// Overwrites `to` with `from` (same layout): a backend's own copy of the weights, taken at a sync, that the
// trainer's next update does not touch (the async pipeline's draws run during that update).
void copy_weights(const ParameterStore& from, ParameterStore& to) {
  RLCPP_CHECK(from.flat().nbytes() == to.flat().nbytes(),
              "weight sync: " << from.flat().nbytes() << " bytes of weights for a copy of " << to.flat().nbytes());
  std::memcpy(to.flat().data<float>(), from.flat().data<float>(), from.flat().nbytes());
}

}  // namespace

std::unique_ptr<RolloutTurnEngine> RolloutBackend::turn_engine(const SamplingParams&) {
  RLCPP_FAIL("config key 'rollout.placement': this placement does not run episodes (rollout.placement "
             "\"colocated\" does)");
}

namespace {

class ColocatedRollout : public RolloutBackend {
 public:
  // own_weights: the trainer updates its weights while the engine still samples with the last version (the
  // async pipeline), so the engine keeps each version apart from the trainer's buffer (Engine::take_copy_of:
  // prepared in its compute dtype; an fp32 copy only where the decode reads the store).
  ColocatedRollout(const Transformer& model, const ParameterStore& params, const EngineConfig& engine,
                   int64_t version, bool own_weights, const ExecContext& context, UnmergedRollout unmerged)
      : own_weights_(own_weights),
        unmerged_(unmerged),
        engine_(model, unmerged.adapters ? *unmerged.base : params, engine, version, context),
        channel_(params, version) {
    if (unmerged_.adapters)  // the base, prepared once; the adapters beside it
      engine_.set_adapters(std::make_shared<UnmergedLora>(*unmerged_.adapters), version);
    else if (own_weights_)
      engine_.take_copy_of(params, version);
  }

  RolloutResult generate(const Request& request) override { return engine_.generate(request); }

  std::unique_ptr<RolloutTurnEngine> turn_engine(const SamplingParams& base) override {
    return std::make_unique<EngineTurns>(engine_, base);
  }

  void sync(const ParameterStore& params, int64_t version) override {
    channel_.publish(version);
    const int64_t v = channel_.poll(params);  // checks that it is the trainer's buffer
    RLCPP_CHECK(v == version, "weight sync (inproc): engine acknowledged version " << v << ", expected " << version);
    if (unmerged_.adapters)
      engine_.set_adapters(std::make_shared<UnmergedLora>(*unmerged_.adapters), v);
    else if (own_weights_)
      engine_.take_copy_of(params, v);
    else
      engine_.set_weights(params, v);
  }

 private:
  bool own_weights_;
  UnmergedRollout unmerged_;
  Engine engine_;
  InprocWeightChannel channel_;
};

// The workers and their fault handling: WorkerClient finds a worker that exited (asked here, waitpid) or fell
// silent, and calls replace(); sync finds one that exited or did not acknowledge. Either way the worker is
// killed if it still runs, reaped, started again on its endpoints from the initial checkpoint, sent the
// current weights, and (in generate) given its unfinished prompts again, at most max_worker_restarts times
// per step.
class SplitRollout : public RolloutBackend, private WorkerSupervisor {
 public:
  SplitRollout(const RolloutSection& rollout, const std::string& run_dir, const std::string& checkpoint,
               const ParameterStore& params, int64_t version, const ModelNumerics& numerics, bool own_weights,
               TrainerDeviceWeights device, const LoraAdapters* adapters)
      : device_weights_(device.weights),
        binary_(rollout.worker_binary.empty() ? current_executable() : rollout.worker_binary),
        max_restarts_(rollout.max_worker_restarts),
        worker_timeout_s_(rollout.worker_timeout_s),
        snapshot_(own_weights ? std::optional<ParameterStore>(params.clone()) : std::nullopt),
        params_(snapshot_ ? &*snapshot_ : &params),
        adapter_snapshot_(adapters && own_weights ? std::optional<ParameterStore>(adapters->weights().clone())
                                                  : std::nullopt),
        adapters_(adapters ? (adapter_snapshot_ ? &*adapter_snapshot_ : &adapters->weights()) : nullptr),
        adapter_source_(adapters),
        version_(version),
        initial_version_(version),
        context_length_(engine_model_config(params.config(), rollout.engine).max_position_embeddings) {
    const bool gpu_sync = rollout.weight_sync == "cuda-ipc" || rollout.weight_sync == "nccl";
    if (gpu_sync) {
      RLCPP_CHECK(device.weights != nullptr && device.context != nullptr,
                  "rollout.weight_sync = " << rollout.weight_sync
                                           << ": the split rollout was not given the trainer's device weights");
      trainer_context_.emplace(*device.context);
    }
    RLCPP_CHECK(adapters == nullptr || rollout.weight_sync == "zmq",
                "rollout.weight_sync = " << rollout.weight_sync << ": a LoRA run (trainer.lora) syncs its adapters "
                                         << "over zmq (set rollout.weight_sync = \"zmq\")");
    if (rollout.weight_sync == "cuda-ipc") export_.emplace(*device.context, params.config());
    const std::string dir = std::filesystem::absolute(run_dir).string();
    const EngineConfig& e = rollout.engine;
    // Several heartbeats fit in the silence that counts as death.
    const double heartbeat_s = std::min(1.0, rollout.worker_heartbeat_timeout_s / 5);
    std::vector<std::string> endpoints;
    publisher_options_ = worker_publisher_options(rollout, params);
    for (int64_t w = 0; w < rollout.num_workers; ++w) {
      const std::string name = "worker" + std::to_string(w);
      names_.push_back(name);
      args_.push_back({checkpoint, "--bind", "ipc://" + dir + "/" + name + ".ipc", "--weights",
                       "ipc://" + dir + "/" + name + "_weights.ipc", "--policy-version", std::to_string(version),
                       "--name", name, "--heartbeat", std::to_string(heartbeat_s), "--block-size",
                       std::to_string(e.block_size), "--num-blocks", std::to_string(e.num_blocks), "--max-num-seqs",
                       std::to_string(e.max_num_seqs), "--max-batched-tokens",
                       std::to_string(e.max_num_batched_tokens), "--max-context", std::to_string(e.max_context),
                       "--prefix-cache", rollout.prefix_cache ? "true" : "false",
                       "--dtype", compute_dtype_name(numerics.compute),
                       "--quantization",
                       is_quantized(numerics.linear_weights) ? precision_name(numerics.linear_weights) : "none",
                       "--batch-invariant", numerics.batch_invariant ? "true" : "false", "--device",
                       worker_device(rollout, w), "--exit-with-parent"});
      if (adapters) {  // the base the adapters are merged into, saved at the start of the run
        args_.back().push_back("--lora-base");
        args_.back().push_back(reference_checkpoint_dir(dir));
        if (!rollout.lora_merge) args_.back().push_back("--lora-unmerged");
      }
      processes_.push_back(std::make_unique<WorkerProcess>(binary_, args_.back()));
      endpoints.push_back(processes_.back()->endpoint());
      publishers_.push_back(std::make_unique<ZmqWeightPublisher>(context_, processes_.back()->weights_endpoint(),
                                                                 /*bind=*/false, publisher_options_));
    }
    WorkerClientOptions options;
    options.heartbeat_timeout_s = rollout.worker_heartbeat_timeout_s;
    options.result_timeout_s = rollout.worker_timeout_s;
    options.chunk_prompts = rollout.chunk_prompts;
    client_.emplace(WorkerClient::connect(context_, endpoints, options));
    if (rollout.weight_sync == "nccl") join_nccl_world(version);
  }

  ~SplitRollout() override {
    // A shutdown message waits for every worker's answer; after a failure (the run stopping on it) one may
    // never come. Each process is also stopped by SIGTERM (SIGKILL if it hangs) below.
    bool all_running = true;
    for (auto& p : processes_) all_running = all_running && p && p->exit_reason().empty();
    try {
      if (all_running) client_->shutdown();
    } catch (const std::exception&) {
    }
    publishers_.clear();
    client_.reset();
    processes_.clear();
  }

  RolloutResult generate(const Request& request) override {
    phase_ = "rollout";
    return client_->generate(request, this);
  }

  // Episodes' sessions on the workers (loop/worker_turns.h); a worker restarted mid-call takes its sessions back
  // with their histories.
  std::unique_ptr<RolloutTurnEngine> turn_engine(const SamplingParams& base) override {
    phase_ = "rollout";
    return std::make_unique<WorkerTurns>(*client_, static_cast<WorkerSupervisor*>(this), session_book_, base,
                                         context_length_);
  }

  // Every worker acknowledges the version before the next rollout; one that died since, or does not answer,
  // is restarted, which brings it to this version.
  void sync(const ParameterStore& params, int64_t version) override {
    if (snapshot_)
      copy_weights(params, *snapshot_);
    else
      params_ = &params;
    if (adapter_snapshot_) copy_weights(adapter_source_->weights(), *adapter_snapshot_);
    version_ = version;
    phase_ = "weight sync";
    if (nccl_) {
      broadcast(version);
      return;
    }
    if (export_) export_->stage(*device_weights_, version);  // once for every worker: they copy it in turn
    for (size_t w = 0; w < processes_.size(); ++w) {
      const std::string ended = processes_[w]->exit_reason();
      if (!ended.empty()) {
        restart(w, ended, 0);
        continue;
      }
      try {
        publish(w, params);
      } catch (const WeightSyncTimeout&) {
        restart(w, "did not acknowledge weights version " + std::to_string(version) + " within " +
                       format_seconds(worker_timeout_s_) + " s (rollout.worker_timeout_s)",
                0);
      }
    }
  }

  void begin_step(int64_t step) override {
    step_ = step;
    failures_step_ = restarts_step_ = reissued_step_ = 0;
  }

  std::map<std::string, double> fault_metrics() const override {
    std::map<std::string, double> m = {{"rollout/worker_failures_step", static_cast<double>(failures_step_)},
                                       {"rollout/reissued_prompts", static_cast<double>(reissued_step_)},
                                       {"rollout/worker_restarts", static_cast<double>(restarts_total_)}};
    if (last_publish_.bytes > 0) m["weight_sync/bytes"] = static_cast<double>(last_publish_.bytes);  // one worker's
    return m;
  }

 private:
  static std::string format_seconds(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", s);
    return buf;
  }

  // Worker w's --device: rollout.device; for nccl each worker on a GPU of its own, cuda:(D + w) from
  // rollout.device = cuda:D (two NCCL ranks cannot share one GPU).
  static std::string worker_device(const RolloutSection& rollout, int64_t w) {
    if (rollout.weight_sync != "nccl") return rollout.device.empty() ? "cpu" : rollout.device;
    return "cuda:" + std::to_string(parse_device_spec(rollout.device, "config key 'rollout.device'").index + w);
  }

  // The nccl world: the trainer rank 0, worker w rank w + 1. Every worker is sent its join, the trainer joins
  // (returning once all have), then every worker's acknowledgement is awaited.
  void join_nccl_world(int64_t version) {
    const int world = static_cast<int>(processes_.size()) + 1;
    const std::string id = NcclWeightBroadcast::unique_id();
    for (size_t w = 0; w < processes_.size(); ++w)
      publishers_[w]->post(nccl_join_message(id, static_cast<int>(w) + 1, world, worker_timeout_s_));
    nccl_ = std::make_unique<NcclWeightBroadcast>(*trainer_context_, id, 0, world, worker_timeout_s_,
                                                  refusals_of(version));
    for (size_t w = 0; w < processes_.size(); ++w) publishers_[w]->await_ack(version);
  }

  // While the trainer waits on the nccl world: a worker that refused the join or the announcement (over zmq), or
  // ended, never takes part, so that ends the wait at once, naming it, instead of the timeout.
  NcclWeightBroadcast::WhileWaiting refusals_of(int64_t version) {
    return [this, version] {
      for (size_t w = 0; w < processes_.size(); ++w) {
        const std::string ended = processes_[w]->exit_reason();
        RLCPP_CHECK(ended.empty(), names_[w] << " " << ended << "; " << kNcclNoRestart);
        try {
          publishers_[w]->check_no_refusal(version);
        } catch (const std::exception& e) {
          RLCPP_FAIL(names_[w] << ": " << e.what());
        }
      }
    };
  }

  // A version over nccl: announced to every worker, broadcast from the trainer's weights, acknowledged by all.
  void broadcast(int64_t version) {
    for (size_t w = 0; w < processes_.size(); ++w) {
      const std::string ended = processes_[w]->exit_reason();
      RLCPP_CHECK(ended.empty(), "rollout: " << names_[w] << " " << ended << " before weight sync " << version
                                             << "; " << kNcclNoRestart);
    }
    const WireMessage message = nccl_weights_message(*trainer_context_, *device_weights_, version, kNcclBucketFloats);
    for (size_t w = 0; w < processes_.size(); ++w) publishers_[w]->post(message);
    nccl_->broadcast(const_cast<float*>(device_weights_->flat().data<float>()), device_weights_->numel(),
                     kNcclBucketFloats, "the workers (ranks 1.." + std::to_string(processes_.size()) + ")",
                     refusals_of(version));
    for (size_t w = 0; w < processes_.size(); ++w) publishers_[w]->await_ack(version);
  }

  // Worker w to version_: `weights`' bytes over zmq (a LoRA run's adapters alone), or the cuda-ipc export staged at
  // that version.
  void publish(size_t w, const ParameterStore& weights) {
    if (export_)
      publishers_[w]->publish(export_->announce(), version_);
    else
      last_publish_ = publishers_[w]->publish(adapters_ ? *adapters_ : weights, version_);
  }

  std::string exit_reason(int worker) override { return processes_[static_cast<size_t>(worker)]->exit_reason(); }

  Replacement replace(const WorkerFailure& failure) override {
    restart(static_cast<size_t>(failure.worker), failure.what, failure.unfinished_prompts, failure.unit);
    return Replacement::kReplaced;
  }
  void served(int worker) override {
    if (static_cast<size_t>(worker) < failures_in_a_row_.size()) failures_in_a_row_[static_cast<size_t>(worker)] = 0;
  }

  // Worker `w` failed (`what`: how) while it owed `owed` `unit` of a rollout (prompts, or episodes' session turns;
  // 0 in a sync).
  void restart(size_t w, std::string what, int64_t owed, const std::string& unit = "prompts") {
    RLCPP_CHECK(!nccl_, "rollout: " << names_[w] << " " << what << "; " << kNcclNoRestart);
    WorkerProcess& process = *processes_[w];
    if (process.exit_reason().empty()) {
      process.kill_now();  // hung or too slow: it would answer a request we have given to its successor
      what += "; killed it (SIGKILL)";
    } else if (what != process.exit_reason()) {
      what += "; it " + process.exit_reason();  // found silent, then found dead
    }
    ++failures_step_;
    const std::string when = (step_ > 0 ? "during step " + std::to_string(step_) : std::string("before step 1")) +
                             " (" + phase_ + ")";
    RLCPP_CHECK(restarts_step_ < max_restarts_,
                "rollout: " << names_[w] << " " << what << " " << when << "; not restarted again: " << restarts_step_
                            << " worker restart(s) in this step already, rollout.max_worker_restarts = "
                            << max_restarts_);
    // Survivors take a failed worker's chunks, so a worker that dies at every start could be restarted a step at
    // a time for ever: it is given up once it has failed max_restarts times without serving a chunk between.
    if (failures_in_a_row_.size() < processes_.size()) failures_in_a_row_.resize(processes_.size(), 0);
    RLCPP_CHECK(failures_in_a_row_[w] < max_restarts_,
                "rollout: " << names_[w] << " " << what << " " << when << "; not restarted again: it failed "
                            << failures_in_a_row_[w] + 1 << " times in a row without serving a chunk "
                            << "(rollout.max_worker_restarts = " << max_restarts_ << ")");
    ++failures_in_a_row_[w];
    Stopwatch took;
    publishers_[w].reset();
    processes_[w].reset();
    try {
      processes_[w] = std::make_unique<WorkerProcess>(binary_, args_[w]);
      publishers_[w] = std::make_unique<ZmqWeightPublisher>(context_, processes_[w]->weights_endpoint(),
                                                            /*bind=*/false, publisher_options_);
      // It starts from the initial checkpoint, which holds the weights until the first update.
      if (version_ != initial_version_) publish(w, *params_);
    } catch (const std::exception& e) {
      RLCPP_FAIL("rollout: " << names_[w] << " " << what << " " << when << "; restarting it failed: " << e.what());
    }
    ++restarts_step_;
    ++restarts_total_;
    if (unit == "prompts") reissued_step_ += owed;
    std::printf("train: %s %s %s; restarted in %.2f s at policy version %lld, %lld %s re-issued\n", names_[w].c_str(),
                what.c_str(), when.c_str(), took.seconds(), static_cast<long long>(version_),
                static_cast<long long>(owed), unit.c_str());
    std::fflush(stdout);
  }

  static constexpr int64_t kNcclBucketFloats = int64_t{64} << 20;  // 256 MiB a broadcast call
  static constexpr const char* kNcclNoRestart =
      "a restarted worker cannot join the nccl weight-sync world of the others: the run stops (resume it with "
      "rlcpp train --resume RUN_DIR)";
  const ParameterStore* device_weights_;       // cuda-ipc, nccl: the trainer's weights on its GPU
  std::optional<ExecContext> trainer_context_;  // cuda-ipc, nccl: where those are
  std::optional<CudaIpcWeightExport> export_;  // cuda-ipc: their copy the workers map
  std::unique_ptr<NcclWeightBroadcast> nccl_;  // nccl: the trainer's end of the world
  std::string binary_;
  int64_t max_restarts_;
  double worker_timeout_s_;
  std::vector<std::string> names_;
  std::vector<std::vector<std::string>> args_;  // each worker's command line after "worker"
  ZmqPublisherOptions publisher_options_;
  zmq::context_t context_;
  std::vector<std::unique_ptr<WorkerProcess>> processes_;
  std::optional<WorkerClient> client_;
  std::vector<std::unique_ptr<ZmqWeightPublisher>> publishers_;
  // With own weights (async), the copy taken at the last sync: a worker restarted while the trainer updates its
  // own weights is brought to the version the draws in flight sample with.
  std::optional<ParameterStore> snapshot_;
  const ParameterStore* params_;  // the weights a restarted worker is brought to, at version_
  // A LoRA run's adapters: what a sync sends (a snapshot of them in an async run, like params_).
  std::optional<ParameterStore> adapter_snapshot_;
  const ParameterStore* adapters_ = nullptr;
  const LoraAdapters* adapter_source_ = nullptr;
  PublishStats last_publish_;  // the last zmq publish (bytes, time)
  int64_t version_, initial_version_;
  int64_t step_ = 0;
  std::string phase_ = "rollout";
  int64_t failures_step_ = 0, restarts_step_ = 0, reissued_step_ = 0, restarts_total_ = 0;
  int64_t context_length_;        // a sequence's tokens at most, as the workers' engines serve the model
  WorkerSessionBook session_book_;  // the turn engines' (episodes' sessions on the workers)
  std::vector<int64_t> failures_in_a_row_;  // per worker, since it last served a chunk
};

}  // namespace

ZmqPublisherOptions worker_publisher_options(const RolloutSection& rollout, const ParameterStore& params) {
  ZmqPublisherOptions options;
  options.chunk_floats = std::min<int64_t>(options.chunk_floats, std::max<int64_t>(params.numel(), 4096));
  options.reply_timeout_ms = static_cast<long>(rollout.worker_timeout_s * 1000);
  return options;
}

std::unique_ptr<RolloutBackend> make_colocated_rollout(const Transformer& model, const ParameterStore& params,
                                                       const EngineConfig& engine, int64_t version,
                                                       bool own_weights, const ExecContext& context,
                                                       UnmergedRollout unmerged) {
  RLCPP_CHECK(unmerged.adapters == nullptr || unmerged.base != nullptr,
              "colocated rollout: unmerged adapters need the base they run beside");
  return std::make_unique<ColocatedRollout>(model, params, engine, version, own_weights, context, unmerged);
}

std::unique_ptr<RolloutBackend> make_split_rollout(const RolloutSection& rollout, const std::string& run_dir,
                                                   const std::string& checkpoint, const ParameterStore& params,
                                                   int64_t version, const ModelNumerics& numerics,
                                                   bool own_weights, TrainerDeviceWeights device,
                                                   const LoraAdapters* adapters) {
  return std::make_unique<SplitRollout>(rollout, run_dir, checkpoint, params, version, numerics, own_weights,
                                        device, adapters);
}

}  // namespace rlcpp
