// PPO (algorithm.name "ppo"): the critic's values of the batch, token-level rewards (the score on the last
// response token, minus kl_coef x KL(old, ref) per token when policy_loss.kl_in_reward), GAE advantages and
// returns (algorithm.ppo: gamma, lambda, whitening over the batch), then the critic's and the actor's updates
// over the same mini-batch plan settings (ppo.*). verl's order: the critic is updated first.
#include "core/error.h"
#include "trainer/advantages.h"
#include "trainer/algorithm.h"
#include "trainer/data_metrics.h"
#include "trainer/kl.h"
#include "trainer/loss_layout.h"

namespace rlcpp {

namespace {

void ppo_update(UpdateContext& ctx, ScoredBatch& batch, PhaseTimer& timer, StepMetrics& out) {
  const AlgorithmConfig& algo = ctx.algo;
  RLCPP_CHECK(ctx.critic != nullptr, "ppo: algorithm.name \"ppo\" needs a critic (UpdateContext::critic)");
  PolicyUpdater& critic = *ctx.critic;
  std::vector<RolloutSample>& samples = batch.samples;

  // values: the critic's predictions the update starts from (old values)
  std::vector<std::vector<float>> values = timer.time(Phase::kValues, [&] {
    return compute_response_values(critic.context(), critic.model(), critic.params(), samples,
                                   ctx.plan.micro_batch_size);
  });
  for (size_t i = 0; i < samples.size(); ++i) samples[i].old_values = std::move(values[i]);

  // advantage: token rewards -> GAE over each response, whitened over the batch
  timer.time(Phase::kAdvantage, [&] {
    const ResponseLayout layout = response_layout(samples);
    const TokenRewards rewards = kl_penalised_token_rewards(batch, layout, algo.policy_loss, out);
    const std::vector<float> old_values = layout.flatten(samples, &RolloutSample::old_values, "old_values");
    const GaeResult g =
        gae(layout.cu, layout.mask, rewards.rewards, old_values, algo.ppo.gamma, algo.ppo.lambda, algo.ppo.whiten);
    std::vector<std::vector<float>> advantages = layout.split(g.advantages);
    std::vector<std::vector<float>> returns = layout.split(g.returns);
    for (size_t i = 0; i < samples.size(); ++i) {
      samples[i].advantages = std::move(advantages[i]);
      samples[i].returns = std::move(returns[i]);
    }
    // verl's data metrics: critic/score/*, critic/rewards/*, critic/advantages/*, critic/returns/*,
    // critic/values/*, critic/vf_explained_var (old values against the returns, before the update)
    const std::vector<float> seq_rewards = sum_per_sequence(layout.cu, rewards.rewards);
    const LossMetrics data =
        data_metrics({layout.cu, layout.mask, batch.scores, seq_rewards, g.advantages, g.returns, old_values});
    for (const auto& [k, v] : data.values("critic/")) out[k] = v;
    return 0;
  });

  const EpochsResult critic_update = timer.time(Phase::kUpdateCritic, [&] {
    CriticUpdateOptions options;
    options.value_clip = algo.ppo.value_clip;
    options.agg = algo.ppo.value_agg;
    options.total_steps = ctx.total_optimizer_steps;
    return update_critic(critic, samples, options, ctx.plan, ctx.rng);
  });
  for (const auto& [k, v] : critic_update.metrics("critic/")) out[k] = v;

  policy_update(ctx, batch, timer, out);
}

class Ppo final : public Algorithm {
 public:
  const char* name() const override { return "ppo"; }
  // Classic RLHF: GAE, and a per-token k1 penalty on the reward.
  void set_defaults(AlgorithmConfig& cfg) const override {
    cfg.advantage.estimator = "gae";
    set_kl_in_reward_defaults(cfg);
  }
  void validate(const AlgorithmConfig& cfg, const std::string& where) const override {
    RLCPP_CHECK(cfg.advantage.estimator == "gae", where << ".advantage.estimator: PPO trains a critic and needs "
                                                        << "\"gae\", got \"" << cfg.advantage.estimator << "\"");
  }
  AlgorithmNeeds needs(const AlgorithmConfig& cfg) const override {
    AlgorithmNeeds n;
    n.reference = n.ref_logp = needs_reference_for_kl(cfg);
    n.critic = true;
    return n;
  }
  void update(UpdateContext& ctx, ScoredBatch& batch, PhaseTimer& timer, StepMetrics& out) const override {
    ppo_update(ctx, batch, timer, out);
  }
};

}  // namespace

const Algorithm& ppo_algorithm() {
  static const Ppo algorithm;
  return algorithm;
}

}  // namespace rlcpp
