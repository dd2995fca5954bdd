// rollout.placement = "remote" (loop/rollout_backend.h): workers the user started, possibly on other hosts,
// reached over tcp with CURVE. The trainer owns their weights (a rebase publish at the start brings each to the
// trainer's policy, whatever it held before) but not their processes: a worker that fails (dies, hangs, its
// host's link cut) is dropped for the rest of the run, its unfinished chunk going to the others, and gets no
// more weights; when none is left the run stops with a message saying how to go on.
#include <cstdio>
#include <map>
#include <optional>

#include "core/curve.h"
#include "core/error.h"
#include "loop/rollout_backend.h"
#include "rollout/worker_client.h"

namespace rlcpp {

namespace {

class RemoteRollout : public RolloutBackend, private WorkerSupervisor {
 public:
  RemoteRollout(const RolloutSection& rollout, const std::string& run_dir, const ParameterStore& params,
                int64_t version, const ModelNumerics& numerics)
      : endpoints_(rollout.remote.endpoints), run_dir_(run_dir) {
    const RemoteWorkersSection& r = rollout.remote;
    CurveOptions curve;
    std::vector<std::string> worker_publics;  // per endpoint
    if (!r.key.empty()) {
      curve.keys = load_curve_key_file(r.key);
      for (size_t w = 0; w < endpoints_.size(); ++w)
        worker_publics.push_back(load_curve_public_key(r.worker_keys[r.worker_keys.size() == 1 ? 0 : w]));
    }
    WorkerClientOptions options;
    options.heartbeat_timeout_s = rollout.worker_heartbeat_timeout_s;
    options.result_timeout_s = rollout.worker_timeout_s;
    options.chunk_prompts = rollout.chunk_prompts;
    options.reply_timeout_s = rollout.worker_heartbeat_timeout_s;
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
    ZmqPublisherOptions publisher = worker_publisher_options(rollout, params);
    for (size_t w = 0; w < endpoints_.size(); ++w) {
      publisher.curve = curve;
      if (!worker_publics.empty()) publisher.curve.server_public = worker_publics[w];
      publishers_.push_back(
          std::make_unique<ZmqWeightPublisher>(context_, r.weights_endpoints[w], /*bind=*/false, publisher));
    }
    // Whatever a worker held (another run's weights, a later version of this run before a resume), it now
    // samples with this trainer's policy at this version.
    for (size_t w = 0; w < endpoints_.size(); ++w) {
      publish(w, params, version, /*rebase=*/true);
      std::printf("train: remote worker %zu ('%s') at %s: policy version %lld -> %lld, %s\n", w,
                  pongs[w].value("worker", std::string()).c_str(), endpoints_[w].c_str(),
                  static_cast<long long>(pongs[w].value("policy_version", int64_t{-1})),
                  static_cast<long long>(version), numerics.describe().c_str());
    }
    std::fflush(stdout);
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

  void sync(const ParameterStore& params, int64_t version) override {
    for (size_t w = 0; w < publishers_.size(); ++w)
      if (!client_->retired(static_cast<int>(w))) publish(w, params, version, /*rebase=*/false);
  }

  void begin_step(int64_t step) override { failures_step_ = 0; }

  std::map<std::string, double> fault_metrics() const override {
    int64_t lost = 0;
    for (size_t w = 0; w < endpoints_.size(); ++w) lost += client_->retired(static_cast<int>(w)) ? 1 : 0;
    return {{"rollout/worker_failures_step", static_cast<double>(failures_step_)},
            {"rollout/workers_lost", static_cast<double>(lost)}};
  }

 private:
  // WorkerSupervisor: the trainer cannot restart a remote worker, only go on without it.
  std::string exit_reason(int) override { return ""; }
  Replacement replace(const WorkerFailure& failure) override {
    lose(static_cast<size_t>(failure.worker), failure.what + " while it owed " +
                                                  std::to_string(failure.unfinished_prompts) + " prompts");
    return Replacement::kRetired;
  }

  // Drops worker w for the rest of the run, or stops the run when it was the last.
  void lose(size_t w, const std::string& what) {
    client_->retire(static_cast<int>(w));
    ++failures_step_;
    size_t left = 0;
    for (size_t o = 0; o < endpoints_.size(); ++o) left += client_->retired(static_cast<int>(o)) ? 0 : 1;
    RLCPP_CHECK(left > 0, "rollout (remote workers): the last worker, at " << endpoints_[w] << ", " << what << "; "
                                                                           << how_to_go_on());
    std::printf("train: remote worker %zu at %s %s: the run goes on with the other %zu; resume the run to take it "
                "back\n",
                w, endpoints_[w].c_str(), what.c_str(), left);
    std::fflush(stdout);
  }

  void publish(size_t w, const ParameterStore& params, int64_t version, bool rebase) {
    try {
      publishers_[w]->publish(params, version, rebase);
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

  std::vector<std::string> endpoints_;
  std::string run_dir_;
  zmq::context_t context_;
  std::optional<WorkerClient> client_;
  std::vector<std::unique_ptr<ZmqWeightPublisher>> publishers_;
  int64_t failures_step_ = 0;
};

}  // namespace

std::unique_ptr<RolloutBackend> make_remote_rollout(const RolloutSection& rollout, const std::string& run_dir,
                                                    const ParameterStore& params, int64_t version,
                                                    const ModelNumerics& numerics) {
  return std::make_unique<RemoteRollout>(rollout, run_dir, params, version, numerics);
}

}  // namespace rlcpp
