// `rlcpp worker`: the options of a rollout worker process (rollout/worker_main.h), which serves generate
// requests over ZeroMQ, and its weight feed: the zmq weight-sync subscriber (weightsync/zmq_channel.h), which on a
// GPU also takes cuda-ipc announcements.
#include <memory>

#include "apps/commands.h"
#include "apps/seed_option.h"
#include "rollout/worker_main.h"
#include "weightsync/zmq_channel.h"

namespace rlcpp::cli {

namespace {

class ZmqWeightFeed final : public WeightFeed {
 public:
  ZmqWeightFeed(zmq::context_t& context, const std::string& endpoint, const ModelConfig& config, int64_t version,
                const CurveOptions& curve, const ExecContext& device, const std::vector<ParameterInfo>& layout)
      : subscriber_(context, endpoint, /*bind=*/true, config, version, curve, device, layout) {}
  zmq::socket_t& socket() override { return subscriber_.socket(); }
  std::string endpoint() const override { return subscriber_.endpoint(); }
  void receive(const std::function<void(ParameterStore, int64_t)>& install) override { subscriber_.poll(0, install); }
  void take_lora_bases(std::function<std::vector<ParameterInfo>(const Json&)> hook) override {
    subscriber_.take_lora_bases(std::move(hook));
  }

 private:
  ZmqWeightSubscriber subscriber_;
};

std::unique_ptr<WeightFeed> zmq_weight_feed(zmq::context_t& context, const std::string& endpoint,
                                            const ModelConfig& config, int64_t version, const CurveOptions& curve,
                                            const ExecContext& device, const std::vector<ParameterInfo>& layout) {
  return std::make_unique<ZmqWeightFeed>(context, endpoint, config, version, curve, device, layout);
}

}  // namespace

Command add_worker_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("worker", "serve rollout requests over ZeroMQ (see rollout/README.md)");
  auto a = std::make_shared<WorkerProcessConfig>();
  cmd->add_option("checkpoint", a->checkpoint, "checkpoint directory (model.safetensors + config.json)");
  cmd->add_option("--preset", a->preset,
                  "instead of a checkpoint: random weights of a model preset (tiny, qwen05b, qwen-tiny)");
  add_seed_option(cmd, "--init-seed", a->init_seed, "seed of the random weights with --preset");
  cmd->add_option("--bind", a->bind, "listen at this endpoint (ipc://PATH, tcp://127.0.0.1:PORT)");
  cmd->add_option("--connect", a->connect, "connect to a client that listens at this endpoint");
  cmd->add_option("--weights", a->weights,
                  "bind a weight-sync subscriber here (weightsync/zmq_channel.h); publishes swap in between requests");
  cmd->add_option("--run-dir", a->run_dir, "where the default endpoint ipc://RUN_DIR/worker.ipc lives");
  cmd->add_option("--curve-key", a->curve_key,
                  "this worker's CURVE key pair (PREFIX.key of rlcpp keys); needed on tcp endpoints beyond 127.0.0.1");
  cmd->add_option("--curve-clients", a->curve_clients,
                  "public keys (FILE.pub[,FILE.pub...]) of the clients admitted on the endpoints it binds")
      ->delimiter(',');
  cmd->add_option("--curve-server", a->curve_server, "with --connect: the public key (FILE.pub) of the client it joins");
  cmd->add_option("--lora-base", a->lora_base,
                  "a LoRA run's worker: the frozen base checkpoint; the checkpoint's adapter/ and every weight sync's "
                  "adapters are merged into it (syncs then carry the adapters only)");
  cmd->add_flag("--lora-unmerged", a->lora_unmerged,
                "with --lora-base: the engine keeps the base as prepared and applies the adapters unmerged "
                "(rollout.lora_merge false) instead of merging them");
  cmd->add_option("--name", a->worker.name, "name reported in replies and heartbeats");
  cmd->add_option("--policy-version", a->policy_version, "version carried by samples of these weights");
  cmd->add_option("--heartbeat", a->worker.heartbeat_interval_s, "seconds between heartbeats");
  cmd->add_flag("--exit-with-parent", a->exit_with_parent,
                "stop when the process that started the worker dies (rlcpp train passes it)");
  cmd->add_option("--max-message-mib", a->max_message_mib, "largest message accepted (MiB)");
  cmd->add_option("--dtype", a->dtype,
                  "compute dtype: fp32, bf16, fp16 (model/numerics.h), or tf32 on a cuda --device with "
                  "--batch-invariant false");
  cmd->add_option("--quantization", a->quantization, "decoder Linear weights: none, int8 or fp8_e4m3");
  cmd->add_option("--batch-invariant", a->batch_invariant,
                  "true: packed batch-invariant products; false: OpenBLAS decode (sum order depends on the batch)");
  cmd->add_option("--device", a->worker.device,
                  "where the engine runs: cpu, cuda or cuda:N (KV cache and weights on that GPU)");
  cmd->add_option("--block-size", a->worker.engine.block_size, "KV-cache block size (tokens)");
  cmd->add_option("--num-blocks", a->worker.engine.num_blocks, "KV-cache blocks (0 = automatic)");
  cmd->add_option("--max-num-seqs", a->worker.engine.max_num_seqs, "sequences decoded together");
  cmd->add_option("--max-batched-tokens", a->worker.engine.max_num_batched_tokens, "rows per forward");
  cmd->add_option("--prefix-cache", a->worker.engine.prefix_cache,
                  "true: full KV blocks are found again by their tokens across requests of one policy version "
                  "(rollout/block_manager.h); false: only a group's samples share their prompt's blocks");
  cmd->add_option("--max-context", a->worker.engine.max_context,
                  "tokens a sequence may reach, prompt and response (0 = the model's context)");
  // Hidden (group ""): a test tool, documented in loop/README.md "Fault handling".
  cmd->add_option("--inject-fault", a->inject_fault, "kill|stop|exit:REQUEST:STEP, end or hang at that engine step")
      ->group("");
  cmd->add_option("--throttle-ms", a->throttle_ms, "sleep this long after every engine step (a slow worker)")
      ->group("");
  return {cmd, [=]() { return run_worker_process(*a, zmq_weight_feed); }};
}

}  // namespace rlcpp::cli
