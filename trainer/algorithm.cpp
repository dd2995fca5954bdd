#include "trainer/algorithm.h"

#include <array>

#include "core/error.h"
#include "trainer/advantages.h"
#include "trainer/kl.h"
#include "trainer/loss_layout.h"

namespace rlcpp {

// Each defined in its own file, trainer/algorithm_<name>.cpp.
const Algorithm& grpo_algorithm();
const Algorithm& gspo_algorithm();
const Algorithm& cispo_algorithm();
const Algorithm& reinforce_pp_algorithm();
const Algorithm& reinforce_pp_baseline_algorithm();
const Algorithm& ppo_algorithm();
const Algorithm& dpo_algorithm();
const Algorithm& distill_algorithm();

namespace {

// An explicit table, not self-registration: a static library drops object files nothing refers to.
const std::array<const Algorithm*, 8>& registry() {
  static const std::array<const Algorithm*, 8> all = {
      &grpo_algorithm(),         &gspo_algorithm(),       &cispo_algorithm(),
      &reinforce_pp_algorithm(), &reinforce_pp_baseline_algorithm(), &ppo_algorithm(),
      &dpo_algorithm(),          &distill_algorithm()};
  return all;
}

}  // namespace

const Algorithm& find_algorithm(const std::string& name, const std::string& key) {
  std::string known;
  for (const Algorithm* a : registry()) {
    if (name == a->name()) return *a;
    known += (known.empty() ? "\"" : ", \"") + std::string(a->name()) + "\"";
  }
  RLCPP_FAIL("config key '" << key << "': unknown algorithm \"" << name << "\" (expected one of " << known << ")");
}

void set_kl_in_reward_defaults(AlgorithmConfig& cfg) {
  cfg.policy_loss.kl_in_reward = true;
  cfg.policy_loss.kl_estimator = "k1";
  cfg.policy_loss.kl_coef = 0.001;
}

TokenRewards kl_penalised_token_rewards(const ScoredBatch& batch, const ResponseLayout& layout,
                                        const PolicyLossConfig& loss, StepMetrics& out) {
  const double reward_kl = loss.kl_in_reward ? loss.kl_coef : 0.0;
  std::vector<float> old_logp, ref_logp;
  if (reward_kl > 0) {
    old_logp = layout.flatten(batch.samples, &RolloutSample::old_logp, "old_logp");
    ref_logp = layout.flatten(batch.samples, &RolloutSample::ref_logp, "ref_logp");
  }
  TokenRewards tr = token_level_rewards(layout.cu, layout.mask, batch.scores, old_logp, ref_logp, reward_kl,
                                        parse_kl_estimator(loss.kl_estimator, "algorithm.policy_loss.kl_estimator"));
  for (const auto& [k, v] : tr.metrics.values("actor/")) out[k] = v;
  return tr;
}

std::vector<float> kl_penalised_scores(const ScoredBatch& batch, const PolicyLossConfig& loss, StepMetrics& out) {
  if (!(loss.kl_in_reward && loss.kl_coef > 0)) return batch.scores;
  const ResponseLayout layout = response_layout(batch.samples);
  return sum_per_sequence(layout.cu, kl_penalised_token_rewards(batch, layout, loss, out).rewards);
}

void set_sequence_advantages(ScoredBatch& batch, const std::vector<float>& per_sample) {
  RLCPP_CHECK(per_sample.size() == batch.samples.size(),
              "set_sequence_advantages: " << per_sample.size() << " advantages for " << batch.samples.size()
                                          << " samples");
  for (size_t i = 0; i < batch.samples.size(); ++i)
    batch.samples[i].advantages.assign(batch.samples[i].response.size(), per_sample[i]);
}

void set_token_advantages(ScoredBatch& batch, const ResponseLayout& layout, std::span<const float> per_token) {
  std::vector<std::vector<float>> per_sample = layout.split(per_token);
  for (size_t i = 0; i < batch.samples.size(); ++i) batch.samples[i].advantages = std::move(per_sample[i]);
}

void policy_update(UpdateContext& ctx, const ScoredBatch& batch, PhaseTimer& timer, StepMetrics& out) {
  const EpochsResult update = timer.time(Phase::kUpdateActor, [&] {
    ActorUpdateOptions options;
    options.loss = ctx.algo.policy_loss;
    options.temperature = batch.temperature;
    options.truncation = batch.truncation;
    options.max_response_length = batch.max_response;
    options.total_steps = ctx.total_optimizer_steps;
    return update_actor(ctx.actor, batch.samples, options, ctx.plan, ctx.rng);
  });
  for (const auto& [k, v] : update.metrics("actor/")) out[k] = v;
}

void check_group_estimator(const AlgorithmConfig& cfg, const std::string& where, const char* algorithm) {
  const std::string& e = cfg.advantage.estimator;
  RLCPP_CHECK(e == "grpo" || e == "drgrpo" || e == "rloo",
              where << ".advantage.estimator: " << algorithm << " takes group advantages (\"grpo\", \"drgrpo\" or "
                    << "\"rloo\"), got \"" << e << "\""
                    << (e == "gae" ? " (\"gae\" needs a critic: algorithm.name \"ppo\")" : ""));
}

AlgorithmNeeds group_algorithm_needs(const AlgorithmConfig& cfg) {
  AlgorithmNeeds n;
  n.reference = n.ref_logp = needs_reference_for_kl(cfg);
  n.group_advantages = true;
  return n;
}

void group_advantage_update(UpdateContext& ctx, ScoredBatch& batch, PhaseTimer& timer, StepMetrics& out) {
  timer.time(Phase::kAdvantage, [&] {
    const std::vector<float> scores = kl_penalised_scores(batch, ctx.algo.policy_loss, out);
    set_sequence_advantages(batch, group_advantages(scores, batch.group_ids, ctx.algo.advantage));
    return 0;
  });
  policy_update(ctx, batch, timer, out);
}

void GroupLossAlgorithm::set_defaults(AlgorithmConfig& cfg) const {
  cfg.policy_loss.loss_mode = preset_.loss_mode;
  cfg.policy_loss.clip_low = preset_.clip_low;
  cfg.policy_loss.clip_high = preset_.clip_high;
  cfg.policy_loss.agg = preset_.agg;
}

void GroupLossAlgorithm::validate(const AlgorithmConfig& cfg, const std::string& where) const {
  check_group_estimator(cfg, where, preset_.name);
  RLCPP_CHECK(cfg.policy_loss.loss_mode == preset_.loss_mode,
              where << ".policy_loss.loss_mode: " << preset_.name << " is the \"" << preset_.loss_mode
                    << "\" loss, got \"" << cfg.policy_loss.loss_mode << "\" (for another loss with group "
                    << "advantages use algorithm.name \"grpo\")");
}

}  // namespace rlcpp
