// On-policy distillation (algorithm.name "distill"): the student samples, a teacher checkpoint scores the
// student's own tokens (phase ref_logprob: the teacher is this algorithm's frozen other policy), and the
// student learns to put its mass where the teacher does, token by token — the reverse KL(student || teacher),
// mode-seeking and dense, on the states the student itself visits (Agarwal et al. 2024, GKD; Thinking
// Machines, "On-Policy Distillation", 2025). The task's reward is not used: the teacher is the signal.
//   mode "advantage": A_t = -coef (old_logp_t - teacher_logp_t), no discount, trained with the PPO-clip loss
//                     (policy_loss.*; a single epoch on-policy makes the ratio 1 and this the plain
//                     policy-gradient of the reverse KL);
//   mode "loss":      no advantage; coef x agg(k(logp_t, teacher_logp_t)) in the loss (policy_loss.kl_* with the
//                     teacher in the reference's place; distill.kl_estimator, k2 by default, whose gradient
//                     (logp - teacher_logp) d logp is the reverse KL's own on the student's samples).
// Metrics: distill/reverse_kl (the mean over response tokens of old_logp - teacher_logp: the k1 estimate of
// KL(student || teacher) under the sampling policy), distill/teacher_logp and distill/student_logp (their means).
#include "core/error.h"
#include "trainer/algorithm.h"

namespace rlcpp {

namespace {

class Distill final : public Algorithm {
 public:
  const char* name() const override { return "distill"; }
  void validate(const AlgorithmConfig& cfg, const std::string& where) const override {
    RLCPP_CHECK(cfg.policy_loss.kl_coef == 0,
                where << ".policy_loss.kl_coef: distill has no reference policy, only the teacher; for a KL to the "
                      << "teacher in the loss set algorithm.distill.mode \"loss\" (got kl_coef "
                      << cfg.policy_loss.kl_coef << ")");
  }
  AlgorithmNeeds needs(const AlgorithmConfig&) const override {
    AlgorithmNeeds n;
    n.teacher_logp = true;
    return n;
  }
  void update(UpdateContext& ctx, ScoredBatch& batch, PhaseTimer& timer, StepMetrics& out) const override {
    const DistillConfig& d = ctx.algo.distill;
    const ResponseLayout layout = response_layout(batch.samples);
    timer.time(Phase::kAdvantage, [&] {
      const std::vector<float> old_logp = layout.flatten(batch.samples, &RolloutSample::old_logp, "old_logp");
      const std::vector<float> teacher = layout.flatten(batch.samples, &RolloutSample::ref_logp, "teacher_logp");
      std::vector<float> advantages(old_logp.size(), 0.0f);
      double kl = 0, student_sum = 0, teacher_sum = 0, tokens = 0;
      for (size_t t = 0; t < old_logp.size(); ++t) {
        const double reverse_kl = static_cast<double>(old_logp[t]) - teacher[t];
        if (d.mode == "advantage") advantages[t] = static_cast<float>(-d.coef * reverse_kl);
        const double w = layout.mask[t];
        kl += w * reverse_kl;
        student_sum += w * old_logp[t];
        teacher_sum += w * teacher[t];
        tokens += w;
      }
      set_token_advantages(batch, layout, advantages);
      out["distill/reverse_kl"] = tokens > 0 ? kl / tokens : 0.0;
      out["distill/student_logp"] = tokens > 0 ? student_sum / tokens : 0.0;
      out["distill/teacher_logp"] = tokens > 0 ? teacher_sum / tokens : 0.0;
      return 0;
    });
    if (d.mode == "advantage") {
      policy_update(ctx, batch, timer, out);
      return;
    }
    // mode "loss": the teacher's log-probs are the reference of the policy loss's KL term.
    AlgorithmConfig with_kl = ctx.algo;
    with_kl.policy_loss.kl_coef = d.coef;
    with_kl.policy_loss.kl_estimator = d.kl_estimator;
    with_kl.policy_loss.kl_in_reward = false;
    UpdateContext loss_ctx{with_kl,           ctx.plan,   ctx.group_size, ctx.total_optimizer_steps,
                           ctx.actor,         ctx.critic, ctx.reference,  ctx.rng};
    policy_update(loss_ctx, batch, timer, out);
  }
};

}  // namespace

const Algorithm& distill_algorithm() {
  static const Distill algorithm;
  return algorithm;
}

}  // namespace rlcpp
