// Online DPO (algorithm.name "dpo"): each prompt group of the step gives one preference pair, its highest
// reward chosen and its lowest rejected (groups whose rewards are all equal give none), and the policy takes
// DPO steps against the frozen reference (the initial policy; algorithm.dpo.beta). Mini-batches follow ppo.*:
// a mini-batch holds the pairs of ppo.mini_batch_size / group_size prompt groups (0 = all of the step's
// pairs), ppo.micro_batch_size sequences (micro_batch_size / 2 pairs) go through each forward/backward, the
// pairs are shuffled per epoch when ppo.shuffle, and ppo.epochs passes are made. A step without a pair makes
// no update (dpo/pairs 0). algorithm.dpo.loss_type picks the preference loss (sigmoid, robust, ipo, or the
// reference-free simpo: trainer/dpo_loss.h).
#include <algorithm>

#include "core/error.h"
#include "trainer/algorithm.h"
#include "trainer/dpo_step.h"

namespace rlcpp {

namespace {

void dpo_update(UpdateContext& ctx, ScoredBatch& batch, PhaseTimer& timer, StepMetrics& out) {
  RLCPP_CHECK(ctx.reference != nullptr || !ctx.algo.dpo.uses_reference(),
              "dpo: loss_type " << ctx.algo.dpo.loss_type << " needs the reference policy");
  const std::vector<PreferencePair> pairs = timer.time(
      Phase::kAdvantage, [&] { return pairs_from_rollout(batch.samples, batch.scores, batch.group_ids); });
  out["dpo/pairs"] = static_cast<double>(pairs.size());
  if (pairs.empty()) return;

  const EpochsResult update = timer.time(Phase::kUpdateActor, [&] {
    PpoEpochsConfig plan_cfg = ctx.plan;  // over pairs instead of sequences
    plan_cfg.mini_batch_size =
        ctx.plan.mini_batch_size > 0 ? std::max<int64_t>(1, ctx.plan.mini_batch_size / ctx.group_size) : 0;
    const int64_t micro_pairs = std::max<int64_t>(1, ctx.plan.micro_batch_size / 2);
    // An upper bound: a step has at most one pair per prompt, so at most as many mini-batches as GRPO's.
    const int64_t total_steps = ctx.total_optimizer_steps;
    EpochsResult result;
    std::vector<PreferencePair> mini;
    for (const std::vector<size_t>& indices : mini_batch_plan(pairs.size(), plan_cfg, ctx.rng)) {
      mini.clear();
      for (size_t i : indices) mini.push_back(pairs[i]);
      UpdateResult r = dpo_step(ctx.actor, ctx.reference, mini, ctx.algo.dpo, micro_pairs, total_steps);
      result.skipped += r.skipped ? 1 : 0;
      result.steps.push_back(std::move(r));
    }
    ctx.actor.refresh_host_weights();
    return result;
  });
  // dpo_step's metrics (dpo_loss, dpo_reward_margin, dpo_accuracy, ...; each measured before its optimizer
  // step) averaged over the optimizer steps, as dpo/loss, dpo/reward_margin, dpo/accuracy, ...
  for (const auto& [k, v] : update.metrics("actor/")) {
    const std::string leaf = k.substr(6);
    if (leaf.rfind("dpo_", 0) == 0) out["dpo/" + leaf.substr(4)] = v;
    else out[k] = v;  // actor/grad_norm, actor/lr, actor/skipped_steps
  }
}

// DPO scores only its pairs, with the policy and the reference, inside its update: a forward of the whole batch
// would be ~40 % of its step for the mismatch/* metrics alone (the probe still checks the engine after each
// sync).
class Dpo final : public Algorithm {
 public:
  const char* name() const override { return "dpo"; }
  AlgorithmNeeds needs(const AlgorithmConfig& cfg) const override {
    AlgorithmNeeds n;
    n.old_logp = false;
    n.reference = cfg.dpo.uses_reference();  // SimPO has none
    n.min_group_size = 2;  // a pair is two samples of one prompt
    return n;
  }
  void update(UpdateContext& ctx, ScoredBatch& batch, PhaseTimer& timer, StepMetrics& out) const override {
    dpo_update(ctx, batch, timer, out);
  }
};

}  // namespace

const Algorithm& dpo_algorithm() {
  static const Dpo algorithm;
  return algorithm;
}

}  // namespace rlcpp
