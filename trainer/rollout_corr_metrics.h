// The mismatch lab's figures: how far the rollout engine's log-probs of the sampled tokens (q, "rollout") are
// from the trainer's recomputation of the same tokens (p, "old_logp"), under verl's `rollout_corr/` names.
// A pure function of the two arrays; loop/mismatch.h keeps its four `mismatch/*` figures beside it.
//
// Per token r = p - q; rho = exp(clamp(r, -20, 20)) is the importance weight from the rollout to the trainer
// (verl's SAFETY_BOUND keeps it finite); "over tokens" means over every response token of every sample, and
// "over sequences" over the samples with at least one token. Definitions follow verl's
// compute_offpolicy_metrics (verl/trainer/ppo/rollout_corr_helper.py) and calculate_debug_metrics
// (verl/utils/debug/metrics.py) where verl has the figure:
//   training_ppl       mean over sequences of exp(-mean_t p)            (per-sequence PPL, then the batch mean)
//   rollout_ppl        mean over sequences of exp(-mean_t q)
//   log_ppl_diff       mean over sequences of (mean_t q - mean_t p)     (log of training PPL / rollout PPL)
//   kl                 mean over tokens of q - p                        (k1 of KL(rollout || trainer), sampled
//                                                                        from the rollout)
//   k3_kl              mean over tokens of exp(r) - 1 - r               (no clamp, as verl: a huge r shows as inf)
//   chi2_token         mean over tokens of rho^2, minus 1
//   chi2_seq           mean over sequences of exp(2 clamp(sum_t r, -20, 20)), minus 1: the sequence ratio
//                      prod_t rho_t squared, in log space and bounded as verl bounds it (at most e^40 - 1)
//   probs_diff_max     max over tokens of |exp(p) - exp(q)|
//   probs_diff_mean    mean of the same
//   probs_diff_std     its sample standard deviation (n - 1, as torch.std in verl); 0 for a single token
//   probs_pearson_corr Pearson correlation of exp(p) and exp(q) over tokens (torch.corrcoef in verl). Where
//                      either side has zero variance it is undefined; it is then 1 when exp(p) = exp(q) at every
//                      token and 0 otherwise (verl would report NaN)
// and the lab's importance-weight figures (verl's rollout_is_std and rollout_is_eff_sample_size clamp rho to
// [1/C, C] first; these do not, and ratio_outside_frac says how many tokens lie outside):
//   is_weight_mean, is_weight_std, is_weight_min, is_weight_max   of rho over tokens (population std)
//   is_ess             (sum rho)^2 / (N sum rho^2), the effective sample size over N, in (0, 1]
//   ratio_outside_frac share of tokens with rho outside [1/C, C] (a NaN rho counts as outside)
//   tokens             N
// Sequences with no tokens are not counted in the sequence means (verl's masked_mean would count each as a
// perplexity of exp(0) = 1).
//
// Buckets by the ROLLOUT probability exp(q), keys rollout_corr/bucket/<label>/<figure>:
//   labels  p0.0-0.1 [0, 0.1), p0.1-0.5 [0.1, 0.5), p0.5-0.9 [0.5, 0.9), p0.9-1.0 [0.9, 1] (and above 1, where q
//           is not a log-probability); a token whose q is NaN is in no bucket
//   figures kl, k3_kl, probs_diff_mean, is_weight_mean, ratio_outside_frac (as above, over the bucket's tokens),
//           tokens
// No tokens (overall or in a bucket): only `tokens` (0) is reported there; no figure is NaN for want of data.
// A NaN in p or q shows as NaN in kl, k3_kl, probs_diff_max (and the figures its token enters); it never
// vanishes in a max or a min.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace rlcpp {

constexpr double kDefaultRatioBound = 2.0;

// rollout_logp[i] and trainer_logp[i] hold sample i's per-response-token log-probs (equal lengths; the error
// names the sample and both lengths). ratio_bound C >= 1 sets the band [1/C, C] of ratio_outside_frac.
std::map<std::string, double> rollout_corr_metrics(const std::vector<std::vector<float>>& rollout_logp,
                                                   const std::vector<std::vector<float>>& trainer_logp,
                                                   double ratio_bound = kDefaultRatioBound);

}  // namespace rlcpp
