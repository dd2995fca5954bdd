// REINFORCE++ (Hu 2025; verl adv_estimator "reinforce_plus_plus", OpenRLHF "reinforce"): no critic and no group
// statistics — each token's advantage is its discounted return (the score on the last response token, minus a
// per-token k1 KL to the reference in the reward: 0.001 by default, as verl's kl_ctrl), whitened over the whole
// batch; then the PPO-clip update.
// REINFORCE++-baseline ("reinforce_pp_baseline"; verl "reinforce_plus_plus_baseline"): the score minus its
// prompt group's mean, on every response token, whitened over the batch (no KL by default, as GRPO).
#include "core/error.h"
#include "trainer/advantages.h"
#include "trainer/algorithm.h"
#include "trainer/kl.h"
#include "trainer/loss_layout.h"

namespace rlcpp {

namespace {

void check_estimator(const AlgorithmConfig& cfg, const std::string& where, const char* name) {
  RLCPP_CHECK(cfg.advantage.estimator == name,
              where << ".advantage.estimator: the " << name << " algorithm computes its own advantages (\"" << name
                    << "\"), got \"" << cfg.advantage.estimator << "\"");
}

AlgorithmNeeds reinforce_needs(const AlgorithmConfig& cfg) {
  AlgorithmNeeds n;
  n.reference = n.ref_logp = needs_reference_for_kl(cfg);
  return n;
}

class ReinforcePP final : public Algorithm {
 public:
  const char* name() const override { return "reinforce_pp"; }
  void set_defaults(AlgorithmConfig& cfg) const override {
    cfg.advantage.estimator = "reinforce_pp";
    set_kl_in_reward_defaults(cfg);
  }
  void validate(const AlgorithmConfig& cfg, const std::string& where) const override {
    check_estimator(cfg, where, name());
  }
  AlgorithmNeeds needs(const AlgorithmConfig& cfg) const override { return reinforce_needs(cfg); }
  void update(UpdateContext& ctx, ScoredBatch& batch, PhaseTimer& timer, StepMetrics& out) const override {
    timer.time(Phase::kAdvantage, [&] {
      const ResponseLayout layout = response_layout(batch.samples);
      const TokenRewards rewards = kl_penalised_token_rewards(batch, layout, ctx.algo.policy_loss, out);
      std::vector<float> adv = discounted_returns(layout.cu, layout.mask, rewards.rewards, ctx.algo.advantage.gamma);
      whiten_masked(adv, layout.mask);
      set_token_advantages(batch, layout, adv);
      return 0;
    });
    policy_update(ctx, batch, timer, out);
  }
};

class ReinforcePPBaseline final : public Algorithm {
 public:
  const char* name() const override { return "reinforce_pp_baseline"; }
  void set_defaults(AlgorithmConfig& cfg) const override { cfg.advantage.estimator = "reinforce_pp_baseline"; }
  void validate(const AlgorithmConfig& cfg, const std::string& where) const override {
    check_estimator(cfg, where, name());
  }
  AlgorithmNeeds needs(const AlgorithmConfig& cfg) const override {
    AlgorithmNeeds n = reinforce_needs(cfg);
    n.group_advantages = true;
    return n;
  }
  void update(UpdateContext& ctx, ScoredBatch& batch, PhaseTimer& timer, StepMetrics& out) const override {
    timer.time(Phase::kAdvantage, [&] {
      AdvantageConfig group_mean;  // r - group mean (a group of one keeps r, as verl's baseline of 0)
      group_mean.estimator = "drgrpo";
      const std::vector<float> centred =
          group_advantages(kl_penalised_scores(batch, ctx.algo.policy_loss, out), batch.group_ids, group_mean);
      const ResponseLayout layout = response_layout(batch.samples);
      std::vector<float> adv = broadcast_to_tokens(layout.cu, layout.mask, centred);
      whiten_masked(adv, layout.mask);
      set_token_advantages(batch, layout, adv);
      return 0;
    });
    policy_update(ctx, batch, timer, out);
  }
};

}  // namespace

const Algorithm& reinforce_pp_algorithm() {
  static const ReinforcePP algorithm;
  return algorithm;
}

const Algorithm& reinforce_pp_baseline_algorithm() {
  static const ReinforcePPBaseline algorithm;
  return algorithm;
}

}  // namespace rlcpp
