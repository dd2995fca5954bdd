#include "trainer/rollout_correction.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "trainer/loss_normalizer.h"

namespace rlcpp {

namespace {

constexpr double kSafetyBound = 20.0;  // verl's SAFETY_BOUND on a log-ratio before exp

double bounded_exp(double log_ratio) { return std::exp(std::clamp(log_ratio, -kSafetyBound, kSafetyBound)); }

// False for a NaN ratio: a token whose ratio is unknown is not kept.
bool in_band(double ratio, double low, double high) { return ratio >= low && ratio <= high; }

}  // namespace

void RolloutCorrection::add_metrics(const RolloutCorrectionConfig& cfg, LossMetrics& metrics) const {
  metrics.add_mean("rollout_corr/is_weight_mean", factor_sum, valid);
  if (cfg.mask != "none" || cfg.icepop) metrics.add_mean("rollout_corr/masked_frac", masked, valid);
  if (cfg.mask == "sequence" || cfg.mask == "geometric")
    metrics.add_mean("rollout_corr/seq_masked_frac", seqs_rejected, seqs);
}

RolloutCorrection rollout_correction(const RolloutCorrectionConfig& cfg, std::span<const int64_t> cu,
                                     std::span<const float> old_logp, std::span<const float> rollout_logp,
                                     std::span<const float> mask) {
  const size_t T = old_logp.size();
  check_offsets(cu, T, "rollout_correction");
  check_token_array(rollout_logp, T, "rollout_correction: rollout_logp");
  check_token_array(mask, T, "rollout_correction: mask");
  RLCPP_CHECK(cfg.active(), "rollout_correction: every correction is off");

  RolloutCorrection out;
  out.factor.assign(T, 1.0);
  for (size_t i = 0; i + 1 < cu.size(); ++i) {
    const size_t t0 = static_cast<size_t>(cu[i]), t1 = static_cast<size_t>(cu[i + 1]);
    double seq_log_ratio = 0, seq_mask = 0;  // S_i, n_i
    for (size_t t = t0; t < t1; ++t) {
      seq_log_ratio += mask[t] * (static_cast<double>(old_logp[t]) - rollout_logp[t]);
      seq_mask += mask[t];
    }
    bool seq_kept = true;
    if (cfg.mask == "sequence") seq_kept = in_band(bounded_exp(seq_log_ratio), cfg.mask_low, cfg.mask_high);
    if (cfg.mask == "geometric")
      seq_kept = in_band(bounded_exp(seq_mask > 0 ? seq_log_ratio / seq_mask : 0.0), cfg.mask_low, cfg.mask_high);
    const double seq_weight = std::min(bounded_exp(seq_log_ratio), cfg.is_threshold);
    if (seq_mask > 0) {
      out.seqs += 1;
      out.seqs_rejected += seq_kept ? 0.0 : 1.0;
    }
    for (size_t t = t0; t < t1; ++t) {
      const double ratio = bounded_exp(static_cast<double>(old_logp[t]) - rollout_logp[t]);
      double weight = 1.0;
      if (cfg.is == "token") weight = std::min(ratio, cfg.is_threshold);
      if (cfg.is == "sequence") weight = seq_weight;
      bool kept = seq_kept;
      if (cfg.mask == "token") kept = kept && in_band(ratio, cfg.mask_low, cfg.mask_high);
      if (cfg.icepop) {
        weight = ratio;
        kept = kept && in_band(ratio, cfg.icepop_low, cfg.icepop_high);
      }
      out.factor[t] = kept ? weight : 0.0;
      out.factor_sum += mask[t] * out.factor[t];
      out.masked += kept ? 0.0 : mask[t];
      out.valid += mask[t];
    }
  }
  return out;
}

}  // namespace rlcpp
