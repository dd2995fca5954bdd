// rollout.placement = "remote" (loop/rollout_backend.h): workers the user started, possibly on other hosts,
// reached over tcp with CURVE. The trainer owns their weights (a rebase publish at the start brings each to the
// trainer's policy, whatever it held before) but not their processes: a worker that fails (dies, hangs, its
// host's link cut) is dropped for the rest of the run, its unfinished chunk going to the others, and gets no
// more weights; when none is left the run stops with a message saying how to go on.
//
// With rollout.remote.listen the trainer binds and workers join it (`rlcpp worker --connect`), before step 1
// (min_workers are waited for) or during the run: a worker's heartbeats name the endpoint where it takes weights
// (its host's address substituted for 0.0.0.0) and its CURVE key; at the next step it is sent the current weights
// (a rebase publish) and serves from then on.
#include <cstdio>
#include <map>
#include <optional>

#include "core/curve.h"
#include "core/error.h"
#include "loop/rollout_backend.h"
#include "loop/worker_turns.h"
#include "model/lora.h"
#include "rollout/worker_client.h"
#include "weightsync/weight_message.h"

namespace rlcpp {

namespace {

class RemoteRollout : public RolloutBackend, private WorkerSupervisor {
 public:
  RemoteRollout(const RolloutSection& rollout, const std::string& run_dir, const ParameterStore& params,
                int64_t version, const ModelNumerics& numerics, const LoraAdapters* adapters, const LoraBase* base)
      : adapters_(adapters),
        lora_base_(base),
        lora_unmerged_(!rollout.lora_merge),
        endpoints_(rollout.remote.endpoints),
        run_dir_(run_dir),
        numerics_(numerics.describe()),
        publisher_options_(worker_publisher_options(rollout, params)),
        params_(&params),
        version_(version),
        context_length_(engine_model_config(params.config(), rollout.engine).max_position_embeddings) {
    const RemoteWorkersSection& r = rollout.remote;
    CurveOptions curve;
    std::vector<std::string> worker_publics;  // per endpoint
    if (!r.key.empty()) {
      curve.keys = load_curve_key_file(r.key);
      if (r.listen.empty())
        for (size_t w = 0; w < endpoints_.size(); ++w)
          worker_publics.push_back(load_curve_public_key(r.worker_keys[r.worker_keys.size() == 1 ? 0 : w]));
    }
    publisher_options_.curve = curve;
    if (!r.listen.empty()) {
      listen(rollout, curve);
      return;
    }
    WorkerClientOptions options = client_options(rollout);
    options.curve = curve;
    options.server_publics = worker_publics;
    client_.emplace(WorkerClient::connect(context_, endpoints_, options));
    std::vector<Json> pongs;
    try {
      pongs = client_->ping();
    } catch (const Error& e) {
      RLCPP_FAIL("rollout (remote workers): " << e.what() << " (is every worker of rollout.remote.endpoints "
                                                          "running, and does it admit this trainer's key?)");
    }
    for (size_t w = 0; w < endpoints_.size(); ++w) {
      const std::string theirs = pongs[w].value("numerics", std::string("(not reported)"));
      RLCPP_CHECK(theirs == numerics.describe(),
                  "rollout (remote workers): the worker at " << endpoints_[w] << " computes in " << theirs
                                                             << ", the run's rollout numerics are "
                                                             << numerics.describe()
                                                             << " (rollout.dtype, rollout.quantization, "
                                                                "numerics.batch_invariant): start it with the "
                                                                "matching --dtype, --quantization, --batch-invariant");
    }
    for (size_t w = 0; w < endpoints_.size(); ++w) {
      takes_adapters_.push_back(pongs[w].value("lora_sync", false));
      ZmqPublisherOptions publisher = publisher_options_;
      if (!worker_publics.empty()) publisher.curve.server_public = worker_publics[w];
      publishers_.push_back(
          std::make_unique<ZmqWeightPublisher>(context_, r.weights_endpoints[w], /*bind=*/false, publisher));
    }
    // Whatever a worker held (another run's weights, a later version of this run before a resume), it now
    // samples with this trainer's policy at this version.
    for (size_t w = 0; w < endpoints_.size(); ++w) {
      publish(w, params, version, /*rebase=*/true);
      std::printf("train: remote worker %zu ('%s') at %s: policy version %lld -> %lld, %s%s\n", w,
                  pongs[w].value("worker", std::string()).c_str(), endpoints_[w].c_str(),
                  static_cast<long long>(pongs[w].value("policy_version", int64_t{-1})),
                  static_cast<long long>(version), numerics.describe().c_str(), lora_note(w));
    }
    std::fflush(stdout);
  }

  // How a LoRA run syncs worker w, for the lines saying it joined.
  const char* lora_note(size_t w) const {
    if (!adapters_) return "";
    return takes_adapters_[w] ? "; LoRA: the base sent once, then adapters alone"
                              : "; LoRA: it takes no adapters alone (an older rlcpp worker?): the merged weights each sync";
  }

  // The workers go on serving after the run (for its resume, or the next run); nothing is sent to them.
  ~RemoteRollout() override {
    publishers_.clear();
    client_.reset();
  }

  RolloutResult generate(const Request& request) override {
    try {
      return client_->generate(request, this);
    } catch (const Error& e) {
      RLCPP_FAIL("rollout (remote workers): " << e.what() << "; " << how_to_go_on());
    }
  }

  // Episodes' sessions on the workers (loop/worker_turns.h): a failed worker's sessions move, with their
  // histories, to the others. A worker must serve the run's context (rollout.engine.max_context, else the model's).
  std::unique_ptr<RolloutTurnEngine> turn_engine(const SamplingParams& base) override {
    return std::make_unique<WorkerTurns>(*client_, static_cast<WorkerSupervisor*>(this), session_book_, base,
                                         context_length_);
  }

  void sync(const ParameterStore& params, int64_t version) override {
    params_ = &params;
    version_ = version;
    for (size_t w = 0; w < publishers_.size(); ++w)
      if (publishers_[w] && !client_->retired(static_cast<int>(w))) publish(w, params, version, /*rebase=*/false);
  }

  // Workers that joined since the last step are brought to the policy and serve from this step on.
  void begin_step(int64_t step) override {
    failures_step_ = 0;
    admit_joined();
  }

  std::map<std::string, double> fault_metrics() const override {
    int64_t lost = 0, serving = 0;
    for (int w = 0; w < client_->num_workers(); ++w) {
      const bool retired = client_->retired(w);
      lost += retired ? 1 : 0;
      serving += !retired && w < static_cast<int>(publishers_.size()) && publishers_[static_cast<size_t>(w)] ? 1 : 0;
    }
    std::map<std::string, double> m = {{"rollout/worker_failures_step", static_cast<double>(failures_step_)},
                                       {"rollout/workers_lost", static_cast<double>(lost)},
                                       {"rollout/workers", static_cast<double>(serving)}};
    if (last_publish_.bytes > 0) m["weight_sync/bytes"] = static_cast<double>(last_publish_.bytes);  // one worker's
    return m;
  }

 private:
  // WorkerSupervisor: the trainer cannot restart a remote worker, only go on without it.
  std::string exit_reason(int) override { return ""; }
  Replacement replace(const WorkerFailure& failure) override {
    lose(static_cast<size_t>(failure.worker), failure.what + " while it owed " +
                                                  std::to_string(failure.unfinished_prompts) + " " + failure.unit);
    return Replacement::kRetired;
  }

  static WorkerClientOptions client_options(const RolloutSection& rollout) {
    WorkerClientOptions options;
    options.heartbeat_timeout_s = rollout.worker_heartbeat_timeout_s;
    options.result_timeout_s = rollout.worker_timeout_s;
    options.chunk_prompts = rollout.chunk_prompts;
    options.reply_timeout_s = rollout.worker_heartbeat_timeout_s;
    return options;
  }

  // Binds rollout.remote.listen and waits for min_workers workers to join; admits them.
  void listen(const RolloutSection& rollout, const CurveOptions& curve) {
    const RemoteWorkersSection& r = rollout.remote;
    WorkerClientOptions options = client_options(rollout);
    options.admit_on_join = false;
    options.reply_timeout_s = rollout.worker_timeout_s;  // how long min_workers may take to join
    if (curve.configured()) {  // workers are admitted by their keys (ZAP)
      zap_.emplace(context_);
      options.curve = curve;
      options.curve.zap = &*zap_;
      for (const std::string& file : r.worker_keys) options.curve.clients.push_back(load_curve_public_key(file));
    }
    std::string bound;
    std::printf("train: waiting for %lld worker(s) to join at %s (rlcpp worker CKPT --connect ...)\n",
                static_cast<long long>(r.min_workers), r.listen.c_str());
    std::fflush(stdout);
    try {
      client_.emplace(WorkerClient::listen(context_, r.listen, static_cast<int>(r.min_workers), options, &bound));
    } catch (const Error& e) {
      RLCPP_FAIL("rollout (remote workers): " << e.what() << " (rollout.remote.min_workers "
                                              << r.min_workers << ", within rollout.worker_timeout_s)");
    }
    admit_joined();
  }

  // The workers that joined and are not serving yet: each is checked (numerics), sent the current weights at
  // the address it advertised, and admitted.
  void admit_joined() {
    if (!client_) return;
    for (int w : client_->joined()) {
      const Json& hello = client_->hello(w);
      const std::string name = hello.value("worker", std::string("?")) + " (" + client_->peer_address(w) + ")";
      const std::string theirs = hello.value("numerics", std::string("(not reported)"));
      if (theirs != numerics_) {  // a worker in other numerics must not serve this run; the others go on
        std::printf("train: worker %s joined computing in %s, the run's rollout numerics are %s: not admitted\n",
                    name.c_str(), theirs.c_str(), numerics_.c_str());
        client_->retire(w);
        continue;
      }
      std::string weights = hello.value("weights_endpoint", std::string());
      if (weights.empty()) {
        std::printf("train: worker %s joined without a --weights endpoint: not admitted\n", name.c_str());
        client_->retire(w);
        continue;
      }
      // Bound on every interface: the trainer reaches it at the address it connected from.
      for (const char* any : {"tcp://0.0.0.0:", "tcp://*:"})
        if (weights.rfind(any, 0) == 0 && !client_->peer_address(w).empty())
          weights = "tcp://" + client_->peer_address(w) + ":" + weights.substr(std::string(any).size());
      ZmqPublisherOptions publisher = publisher_options_;
      publisher.curve.server_public = hello.value("curve_public", std::string());
      if (static_cast<size_t>(w) >= publishers_.size()) publishers_.resize(static_cast<size_t>(w) + 1);
      if (endpoints_.size() < publishers_.size()) endpoints_.resize(publishers_.size());
      endpoints_[static_cast<size_t>(w)] = name;
      try {
        publishers_[static_cast<size_t>(w)] =
            std::make_unique<ZmqWeightPublisher>(context_, weights, /*bind=*/false, publisher);
        if (takes_adapters_.size() < publishers_.size()) takes_adapters_.resize(publishers_.size(), false);
        takes_adapters_[static_cast<size_t>(w)] = hello.value("lora_sync", false);
        send(static_cast<size_t>(w), *params_, version_, /*rebase=*/true);
      } catch (const Error& e) {
        std::printf("train: worker %s joined but took no weights at %s: %s; not admitted\n", name.c_str(),
                    weights.c_str(), e.what());
        publishers_[static_cast<size_t>(w)].reset();
        client_->retire(w);
        continue;
      }
      client_->admit(w);
      std::printf("train: worker %s joined: policy version %lld -> %lld, %s%s\n", name.c_str(),
                  static_cast<long long>(hello.value("policy_version", int64_t{-1})),
                  static_cast<long long>(version_), numerics_.c_str(), lora_note(static_cast<size_t>(w)));
    }
    std::fflush(stdout);
  }

  // Drops worker w for the rest of the run, or stops the run when it was the last.
  void lose(size_t w, const std::string& what) {
    client_->retire(static_cast<int>(w));
    ++failures_step_;
    size_t left = 0;
    for (int o = 0; o < client_->num_workers(); ++o)
      left += !client_->retired(o) && static_cast<size_t>(o) < publishers_.size() && publishers_[o] ? 1 : 0;
    RLCPP_CHECK(left > 0, "rollout (remote workers): the last worker, at " << endpoints_[w] << ", " << what << "; "
                                                                           << how_to_go_on());
    std::printf("train: remote worker %zu at %s %s: the run goes on with the other %zu; resume the run to take it "
                "back\n",
                w, endpoints_[w].c_str(), what.c_str(), left);
    std::fflush(stdout);
  }

  // Worker w to `version`: the policy's weights; in a LoRA run, to a worker that takes them, the adapters alone,
  // after a LoRA base message at its rebase (the frozen base and the adapters, the base widened to fp32: exact).
  void send(size_t w, const ParameterStore& params, int64_t version, bool rebase) {
    if (!adapters_ || !takes_adapters_[w]) {
      last_publish_ = publishers_[w]->publish(params, version, rebase);
      return;
    }
    if (!rebase) {
      last_publish_ = publishers_[w]->publish(adapters_->weights(), version);
      return;
    }
    const ParameterStore& a = adapters_->weights();
    ParameterStore both(params.config(), concatenated_layout(parameter_layout(params.config()), a.infos()));
    const int64_t model_floats = params.numel();
    lora_base_->read(ExecContext::cpu(), 0, model_floats, both.flat().data<float>());
    std::copy_n(a.flat().data<float>(), a.numel(), both.flat().data<float>() + model_floats);
    WireMessage message = encode_weights(both, version, publisher_options_.chunk_floats);
    message.header["lora"] = lora_config_to_wire(adapters_->config());
    if (lora_unmerged_) message.header["lora"]["unmerged"] = true;
    last_publish_ = publishers_[w]->publish(std::move(message), version, rebase);
  }

  void publish(size_t w, const ParameterStore& params, int64_t version, bool rebase) {
    try {
      send(w, params, version, rebase);
    } catch (const Error& e) {
      if (rebase)  // at the start: every worker must take the policy
        RLCPP_FAIL("rollout (remote workers): the worker at " << endpoints_[w] << " took no weights version "
                                                             << version << ": " << e.what() << "; "
                                                             << how_to_go_on());
      lose(w, "took no weights version " + std::to_string(version) + ": " + e.what());
    }
  }

  std::string how_to_go_on() const {
    return "the trainer does not restart remote workers: once the workers serve again at their addresses, continue "
           "with `rlcpp train --resume " +
           run_dir_ + "` (from the last checkpoint)";
  }

  const LoraAdapters* adapters_;  // a LoRA run's (with its frozen base), else null
  const LoraBase* lora_base_;
  bool lora_unmerged_;  // rollout.lora_merge false: the workers apply the adapters unmerged
  std::vector<bool> takes_adapters_;  // by worker: its pong said "lora_sync" (a LoRA run sends it adapters)
  std::vector<std::string> endpoints_;  // each worker's name in messages: its endpoint, or who joined from where
  std::string run_dir_;
  std::string numerics_;
  ZmqPublisherOptions publisher_options_;
  const ParameterStore* params_;  // the weights and version of the last sync: what a joining worker is sent
  int64_t version_;
  zmq::context_t context_;
  std::optional<ZapHandler> zap_;  // listen with CURVE: admits the workers' keys; outlives the client's socket
  std::optional<WorkerClient> client_;
  std::vector<std::unique_ptr<ZmqWeightPublisher>> publishers_;  // by worker; null: not admitted
  int64_t failures_step_ = 0;
  PublishStats last_publish_;  // the last weights sent (to any worker)
  int64_t context_length_;     // a sequence's tokens at most (the run's engine context)
  WorkerSessionBook session_book_;  // the turn engines' (episodes' sessions on the workers)
};

}  // namespace

std::unique_ptr<RolloutBackend> make_remote_rollout(const RolloutSection& rollout, const std::string& run_dir,
                                                    const ParameterStore& params, int64_t version,
                                                    const ModelNumerics& numerics, const LoraAdapters* adapters,
                                                    const LoraBase* base) {
  RLCPP_CHECK((adapters == nullptr) == (base == nullptr), "remote rollout: a LoRA run needs its adapters and base");
  return std::make_unique<RemoteRollout>(rollout, run_dir, params, version, numerics, adapters, base);
}

}  // namespace rlcpp
