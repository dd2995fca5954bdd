// GRPO family (algorithm.name "grpo"; estimators grpo, drgrpo, rloo): one advantage per sample, normalised
// within its prompt's group, spread over its response tokens; then the PPO-clip update.
#include "loop/algorithm_update.h"
#include "loop/response_layout.h"
#include "trainer/advantages.h"
#include "trainer/kl.h"

namespace rlcpp {

namespace {

// The score of each sample, minus kl_coef x its summed per-token KL(old, ref) when the KL is in the reward
// (verl sums the token-level rewards of a sequence before the group statistics).
std::vector<float> sequence_rewards(const ScoredBatch& batch, const PolicyLossConfig& loss,
                                    std::map<std::string, double>& metrics) {
  if (!(loss.kl_in_reward && loss.kl_coef > 0)) return batch.scores;
  const ResponseLayout layout = response_layout(batch.samples);
  const TokenRewards tr = token_level_rewards(
      layout.cu, layout.mask, batch.scores, layout.flatten(batch.samples, &RolloutSample::old_logp, "old_logp"),
      layout.flatten(batch.samples, &RolloutSample::ref_logp, "ref_logp"), loss.kl_coef,
      parse_kl_estimator(loss.kl_estimator, "algorithm.policy_loss.kl_estimator"));
  for (const auto& [k, v] : tr.metrics.values("actor/")) metrics[k] = v;
  return sum_per_sequence(layout.cu, tr.rewards);
}

}  // namespace

void grpo_update(RlContext& ctx, ScoredBatch& batch, PhaseTimer& timer, StepResult& out) {
  const AlgorithmConfig& algo = ctx.config.algorithm;
  timer.time(Phase::kAdvantage, [&] {
    const std::vector<float> rewards = sequence_rewards(batch, algo.policy_loss, out.metrics);
    const std::vector<float> adv = group_advantages(rewards, batch.group_ids, algo.advantage);
    for (size_t i = 0; i < batch.samples.size(); ++i)
      batch.samples[i].advantages.assign(batch.samples[i].response.size(), adv[i]);
    return 0;
  });
  ppo_clip_update(ctx, batch, timer, out);
}

}  // namespace rlcpp
