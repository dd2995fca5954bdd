#include "trainer/policy_loss.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "trainer/kl.h"
#include "trainer/rollout_correction.h"

namespace rlcpp {

namespace {

// verl clamps the log-ratio before exp "for stability".
constexpr double kLogRatioBound = 20.0;

// d max(a, b) with torch's tie rule: each argument gets half the gradient when a == b.
double max_grad(double a, double b, double da, double db) {
  if (a > b) return da;
  if (a < b) return db;
  return 0.5 * (da + db);
}

// The PPO-clip loss of one token and its derivative with respect to the ratio r.
struct ClipTerm {
  double loss = 0;
  double dratio = 0;
  bool clipped = false;        // l2 > l1
  bool clipped_lower = false;  // A < 0 and the dual clip binds
};

ClipTerm clip_term(double ratio, double adv, const PolicyLossConfig& cfg) {
  const double lo = 1.0 - cfg.clip_low, hi = 1.0 + cfg.clip_high;
  const double l1 = -adv * ratio;
  const double clamped = std::clamp(ratio, lo, hi);
  const double l2 = -adv * clamped;
  const double dl1 = -adv;
  const double dl2 = (ratio >= lo && ratio <= hi) ? -adv : 0.0;  // torch.clamp passes the gradient at its bounds
  ClipTerm c;
  c.loss = std::max(l1, l2);
  c.dratio = max_grad(l1, l2, dl1, dl2);
  c.clipped = l2 > l1;
  if (cfg.clip_c > 0 && adv < 0) {
    const double l3 = -adv * cfg.clip_c;  // constant in logp
    c.clipped_lower = c.loss > l3;
    // min(l3, l): torch.min's tie rule halves the gradient of l.
    c.dratio = c.loss < l3 ? c.dratio : (c.loss > l3 ? 0.0 : 0.5 * c.dratio);
    c.loss = std::min(l3, c.loss);
  }
  return c;
}

// Per sequence, GSPO's log of the sequence ratio: the masked mean of logp - old_logp (verl divides by the mask
// sum clamped to >= 1).
std::vector<double> sequence_log_ratios(const PolicyLossInputs& in) {
  std::vector<double> out(in.cu.size() - 1, 0.0);
  for (size_t i = 0; i + 1 < in.cu.size(); ++i) {
    double sum = 0, count = 0;
    for (int64_t t = in.cu[i]; t < in.cu[i + 1]; ++t) {
      sum += static_cast<double>(in.mask[t]) * (static_cast<double>(in.logp[t]) - in.old_logp[t]);
      count += in.mask[t];
    }
    out[i] = sum / std::max(count, 1.0);
  }
  return out;
}

// One token's policy-gradient term under cfg.loss_mode: its loss and d loss / d logp (before the aggregation
// weight and the rollout correction), and whether it counts as clipped.
struct PgTerm {
  double loss = 0;
  double dlogp = 0;
  bool clipped = false;
  bool clipped_lower = false;
};

// vanilla: PPO-clip on the token's ratio exp(clamp(logp - old_logp, -20, 20)).
PgTerm vanilla_term(double logp, double old_logp, double adv, const PolicyLossConfig& cfg) {
  const double raw = logp - old_logp;
  const bool raw_passes = raw >= -kLogRatioBound && raw <= kLogRatioBound;
  const double ratio = std::exp(std::clamp(raw, -kLogRatioBound, kLogRatioBound));
  const ClipTerm c = clip_term(ratio, adv, cfg);
  // d ratio / d logp = ratio inside the log-ratio clamp, 0 outside.
  return {c.loss, c.dratio * (raw_passes ? ratio : 0.0), c.clipped, c.clipped_lower};
}

// gspo: every token of sequence i carries the sequence's ratio s_i = exp(min(seq_log_ratio_i, 10)) as its value
// and the gradient of its own logp: log s_{i,t} = sg(log s_i) + logp_t - sg(logp_t) (GSPO's token form), so
// d s_{i,t} / d logp_t = s_i where the clamp at 10 passes.
PgTerm gspo_term(double seq_log_ratio, double adv, const PolicyLossConfig& cfg) {
  constexpr double kSeqLogRatioMax = 10.0;  // verl's clamp of the sequence log-ratio
  const double s = std::exp(std::min(seq_log_ratio, kSeqLogRatioMax));
  const ClipTerm c = clip_term(s, adv, cfg);
  return {c.loss, c.dratio * (seq_log_ratio <= kSeqLogRatioMax ? s : 0.0), c.clipped, false};
}

// cispo: -sg(clamp(ratio, 1 - clip_low, 1 + clip_high)) A logp: the clipped ratio is a constant weight, so every
// token keeps a gradient (-A times its weight); "clipped" counts the tokens whose weight was clamped.
PgTerm cispo_term(double logp, double old_logp, double adv, const PolicyLossConfig& cfg) {
  const double ratio = std::exp(std::clamp(logp - old_logp, -kLogRatioBound, kLogRatioBound));
  const double weight = std::clamp(ratio, 1.0 - cfg.clip_low, 1.0 + cfg.clip_high);
  return {-adv * weight * logp, -adv * weight, weight != ratio, false};
}

}  // namespace

LossNormalizer policy_loss_normalizer(const PolicyLossConfig& cfg, std::span<const int64_t> cu,
                                      std::span<const float> mask, int64_t max_response_length) {
  const LossAgg agg = parse_loss_agg(cfg.agg, "policy_loss.agg");
  const double k = cfg.token_sum_norm > 0 ? cfg.token_sum_norm : static_cast<double>(max_response_length);
  return LossNormalizer::over_batch(agg, cu, mask, k);
}

LossOutput policy_loss(const PolicyLossInputs& in, const PolicyLossConfig& cfg, const LossNormalizer& norm) {
  const size_t T = in.logp.size();
  check_offsets(in.cu, T, "policy_loss");
  check_token_array(in.old_logp, T, "policy_loss: old_logp");
  check_token_array(in.advantages, T, "policy_loss: advantages");
  check_token_array(in.mask, T, "policy_loss: mask");
  const bool has_ref = in.ref_logp.has_value(), has_entropy = in.entropy.has_value();
  if (has_ref) check_token_array(*in.ref_logp, T, "policy_loss: ref_logp");
  if (has_entropy) check_token_array(*in.entropy, T, "policy_loss: entropy");
  if (in.rollout_logp) check_token_array(*in.rollout_logp, T, "policy_loss: rollout_logp");
  const bool kl_in_loss = cfg.kl_coef > 0 && !cfg.kl_in_reward;
  RLCPP_CHECK(!kl_in_loss || has_ref,
              "policy_loss: kl_coef " << cfg.kl_coef << " puts a KL in the loss but no ref_logp was given");
  RLCPP_CHECK(cfg.entropy_coef == 0 || has_entropy,
              "policy_loss: entropy_coef " << cfg.entropy_coef << " needs the per-token entropy");
  const RolloutCorrectionConfig correction_cfg = cfg.rollout_correction_in_effect();
  RLCPP_CHECK(!correction_cfg.active() || in.rollout_logp.has_value(),
              "policy_loss: " << (cfg.tis_cap > 0 ? "tis_cap" : "rollout_correction")
                              << " needs the rollout's logp (rollout_logp)");
  const KlEstimator kl_est = parse_kl_estimator(cfg.kl_estimator, "policy_loss.kl_estimator");
  std::optional<RolloutCorrection> correction;
  if (correction_cfg.active())
    correction = rollout_correction(correction_cfg, in.cu, in.old_logp, *in.rollout_logp, in.mask);

  const std::vector<double> w = norm.token_weights(in.cu, in.mask);
  const bool gspo = cfg.loss_mode == "gspo", cispo = cfg.loss_mode == "cispo";
  RLCPP_CHECK(gspo || cispo || cfg.loss_mode == "vanilla",
              "policy_loss: unknown loss_mode \"" << cfg.loss_mode << "\" (expected vanilla, gspo or cispo)");
  const std::vector<double> seq_log_ratio = gspo ? sequence_log_ratios(in) : std::vector<double>{};
  size_t seq = 0;  // the sequence of token t
  LossOutput out;
  out.dlogp.assign(T, 0.0f);
  if (cfg.entropy_coef > 0) out.dentropy.assign(T, 0.0f);

  double pg_loss = 0, entropy_agg = 0, kl_agg = 0;
  double clipped = 0, clipped_lower = 0, ppo_kl = 0, mask_sum = 0;
  for (size_t t = 0; t < T; ++t) {
    while (static_cast<int64_t>(t) >= in.cu[seq + 1]) ++seq;
    const double m = in.mask[t];
    mask_sum += m;
    const double logp = in.logp[t], old_logp = in.old_logp[t], adv = in.advantages[t];
    const PgTerm c = gspo    ? gspo_term(seq_log_ratio[seq], adv, cfg)
                     : cispo ? cispo_term(logp, old_logp, adv, cfg)
                             : vanilla_term(logp, old_logp, adv, cfg);
    const double weight = correction ? correction->factor[t] : 1.0;  // a constant: no gradient through it
    pg_loss += w[t] * weight * c.loss;
    double dlogp = w[t] * weight * c.dlogp;
    clipped += m * (c.clipped ? 1.0 : 0.0);
    clipped_lower += m * (c.clipped_lower ? 1.0 : 0.0);
    ppo_kl += m * -std::clamp(logp - old_logp, -kLogRatioBound, kLogRatioBound);
    if (has_ref) {
      const KlTerm kl = kl_estimate(in.logp[t], (*in.ref_logp)[t], kl_est);
      kl_agg += w[t] * kl.value;
      if (kl_in_loss) dlogp += cfg.kl_coef * w[t] * kl.dlogp;
    }
    if (has_entropy) {
      entropy_agg += w[t] * (*in.entropy)[t];
      if (cfg.entropy_coef > 0) out.dentropy[t] = static_cast<float>(-cfg.entropy_coef * w[t]);
    }
    out.dlogp[t] = static_cast<float>(dlogp);
  }
  out.loss = pg_loss;
  if (cfg.entropy_coef > 0) out.loss -= cfg.entropy_coef * entropy_agg;
  if (kl_in_loss) out.loss += cfg.kl_coef * kl_agg;

  out.metrics.add_sum("pg_loss", pg_loss);
  out.metrics.add_mean("pg_clipfrac", clipped, mask_sum);
  out.metrics.add_mean("pg_clipfrac_lower", clipped_lower, mask_sum);
  out.metrics.add_mean("ppo_kl", ppo_kl, mask_sum);
  if (has_entropy) out.metrics.add_sum("entropy", entropy_agg);
  if (has_ref) out.metrics.add_sum("kl_loss", kl_agg);
  if (correction) {
    correction->add_metrics(correction_cfg, out.metrics);
    if (cfg.tis_cap > 0) out.metrics.add_mean("tis_ratio", correction->factor_sum, correction->valid);
  }
  return out;
}

}  // namespace rlcpp
