// GRPO family (algorithm.name "grpo"; advantage.estimator grpo, drgrpo or rloo): one advantage per sample,
// normalised within its prompt's group, spread over its response tokens; then the PPO-clip update
// (policy_loss.loss_mode "vanilla"; "gspo" and "cispo" are their own algorithms with their defaults, but any
// mode runs here as in verl). DAPO is this with clip_high 0.28, token-mean and filter_groups; Dr.GRPO is
// estimator "drgrpo" with seq-mean-token-sum-norm.
#include "trainer/algorithm.h"

namespace rlcpp {

namespace {

class Grpo final : public Algorithm {
 public:
  const char* name() const override { return "grpo"; }
  void validate(const AlgorithmConfig& cfg, const std::string& where) const override {
    check_group_estimator(cfg, where, name());
  }
  AlgorithmNeeds needs(const AlgorithmConfig& cfg) const override { return group_algorithm_needs(cfg); }
  void update(UpdateContext& ctx, ScoredBatch& batch, PhaseTimer& timer, StepMetrics& out) const override {
    group_advantage_update(ctx, batch, timer, out);
  }
};

}  // namespace

const Algorithm& grpo_algorithm() {
  static const Grpo algorithm;
  return algorithm;
}

}  // namespace rlcpp
