// Options of the RL algorithms (JSON key "algorithm"): advantage estimator, policy loss, PPO critic, DPO.
// algorithm_defaults(name) gives each algorithm's defaults (its Algorithm's set_defaults, trainer/algorithm.h:
// PPO gets GAE and a k1 KL penalty in the reward, as in classic RLHF; GSPO its sequence-level clip range);
// algorithm_config_from_json starts from those and applies the file.
#pragma once

#include <string>

#include "core/config.h"

namespace rlcpp {

struct AdvantageConfig {
  std::string estimator = "grpo";  // "grpo" | "drgrpo" | "rloo" | "gae" | "reinforce_pp" | "reinforce_pp_baseline"
  bool norm_by_std = true;
  double eps = 1e-6;
  double gamma = 1.0;  // reinforce_pp: discount of the token returns

  // (r - mean) / (std + eps) for "grpo" with norm_by_std; "drgrpo" (and "grpo" without it) use r - mean.
  bool divides_by_std() const { return estimator == "grpo" && norm_by_std; }
  void validate(const std::string& where) const;

  template <class V> void visit(V& v) {
    v("estimator", estimator,
      "\"grpo\" (group mean/std), \"drgrpo\" (group mean only), \"rloo\" (leave-one-out mean) for grpo, gspo "
      "and cispo; \"gae\" (critic) for ppo; \"reinforce_pp\" / \"reinforce_pp_baseline\" for those algorithms "
      "(set by algorithm.name)");
    v("norm_by_std", norm_by_std, "grpo: divide by the group's standard deviation (false = Dr.GRPO)");
    v("eps", eps, "grpo: added to the group standard deviation");
    v("gamma", gamma, "reinforce_pp: discount per token of the returns (verl algorithm.gamma)");
  }
};

// Corrections of the rollout engine / trainer mismatch inside the policy loss (the math and verl's definitions
// are in trainer/rollout_correction.h). Ratios are exp(old_logp - rollout_logp): trainer over engine.
struct RolloutCorrectionConfig {
  std::string is = "none";    // "none" | "token" | "sequence": truncated importance weight (TIS)
  double is_threshold = 2.0;  // the cap of that weight
  std::string mask = "none";  // "none" | "token" | "sequence" | "geometric": masked IS (MIS), rejection
  double mask_low = 0.5;      // kept when the ratio is in [mask_low, mask_high]
  double mask_high = 2.0;
  bool icepop = false;        // IcePop: in-band tokens weighted by their ratio, the others masked
  double icepop_low = 0.5;
  double icepop_high = 2.0;
  bool bypass = false;        // the rollout's log-probs serve as the old log-probs: no recomputation

  // A factor in the loss (bypass is not: it changes what old_logp is).
  bool active() const { return is != "none" || mask != "none" || icepop; }
  void validate(const std::string& where) const;

  template <class V> void visit(V& v) {
    v("is", is, "truncated importance sampling: \"none\", \"token\" (each token by min(exp(old - rollout), "
                "is_threshold)) or \"sequence\" (every token of a sequence by min(exp(sum of old - rollout), "
                "is_threshold))");
    v("is_threshold", is_threshold, "cap of the importance weight (>= 1)");
    v("mask", mask, "masked importance sampling: \"none\"; \"token\" drops tokens whose ratio exp(old - rollout) "
                    "is outside [mask_low, mask_high]; \"sequence\" drops sequences whose ratio exp(sum of old - "
                    "rollout) is outside; \"geometric\" drops sequences whose geometric-mean ratio exp(mean of old "
                    "- rollout) is outside. Dropped tokens keep their place in the loss normaliser");
    v("mask_low", mask_low, "lower bound of the kept ratios, in (0, 1)");
    v("mask_high", mask_high, "upper bound of the kept ratios, > 1");
    v("icepop", icepop, "IcePop: a token whose ratio exp(old - rollout) is in [icepop_low, icepop_high] is "
                        "weighted by that ratio, any other gets no gradient (not combinable with is)");
    v("icepop_low", icepop_low, "IcePop's lower bound alpha, in (0, 1)");
    v("icepop_high", icepop_high, "IcePop's upper bound beta, > 1");
    v("bypass", bypass,
      "use the rollout engine's log-probs as the old log-probs (verl's bypass mode): the old_logprob phase is "
      "skipped and the PPO ratio is taken against the sampling policy itself; no is/mask/icepop (their ratio "
      "would be 1) and no mismatch metrics (nothing is recomputed)");
  }
};

struct PolicyLossConfig {
  std::string loss_mode = "vanilla";  // "vanilla" (PPO-clip) | "gspo" | "cispo" (verl actor.policy_loss.loss_mode)
  double clip_low = 0.2;   // ratio clipped below at 1 - clip_low
  double clip_high = 0.2;  // and above at 1 + clip_high (DAPO clip-higher: e.g. 0.28)
  double clip_c = 0.0;     // dual clip for negative advantages: 0 = off, else > 1 (e.g. 3)
  std::string agg = "token-mean";
  double token_sum_norm = 0.0;  // seq-mean-token-sum-norm divisor; 0 = the rollout's maximum response length
  double kl_coef = 0.0;
  std::string kl_estimator = "k3";
  bool kl_in_reward = false;
  double entropy_coef = 0.0;
  double tis_cap = 0.0;  // the older spelling of rollout_correction.is "token" with is_threshold tis_cap; 0 = off
  RolloutCorrectionConfig rollout_correction;

  // rollout_correction with the tis_cap alias applied (validate() forbids setting both).
  RolloutCorrectionConfig rollout_correction_in_effect() const;
  void validate(const std::string& where) const;

  template <class V> void visit(V& v) {
    v("loss_mode", loss_mode,
      "\"vanilla\": PPO-clip on each token's ratio; \"gspo\": PPO-clip on the sequence's ratio exp(mean of logp - "
      "old_logp) (GSPO); \"cispo\": -sg(clip(ratio)) A logp, every token keeps its gradient (CISPO). Set by "
      "algorithm.name (grpo and ppo: vanilla)");
    v("clip_low", clip_low, "PPO clip: the ratio is clipped below at 1 - clip_low (cispo: the IS weight; 1 = no "
                            "lower bound)");
    v("clip_high", clip_high, "PPO clip: the ratio is clipped above at 1 + clip_high (DAPO clip-higher: 0.28; "
                              "cispo: the IS weight's cap)");
    v("clip_c", clip_c, "dual clip: for negative advantages the loss is at most -A * clip_c; 0 = off, else > 1");
    v("agg", agg, "loss aggregation: \"token-mean\", \"seq-mean-token-sum\", \"seq-mean-token-mean\", "
                  "\"seq-mean-token-sum-norm\" (over the global batch)");
    v("token_sum_norm", token_sum_norm,
      "seq-mean-token-sum-norm: constant each sequence's token sum is divided by; 0 = the rollout's "
      "maximum response length");
    v("kl_coef", kl_coef, "coefficient of the KL to the frozen reference (0 = no KL)");
    v("kl_estimator", kl_estimator, "\"k1\", \"k2\" or \"k3\" (verl: \"kl\", \"mse\", \"low_var_kl\")");
    v("kl_in_reward", kl_in_reward, "true: subtract kl_coef * KL(old, ref) from the token rewards; false: add "
                                    "kl_coef * KL(current, ref) to the loss");
    v("entropy_coef", entropy_coef, "entropy bonus: the loss subtracts entropy_coef * aggregated entropy");
    v("tis_cap", tis_cap, "truncated importance sampling: weight each token by min(exp(old - rollout), "
                          "tis_cap) to correct rollout/trainer mismatch; 0 = off (the same as rollout_correction.is "
                          "\"token\" with is_threshold tis_cap)");
    v("rollout_correction", rollout_correction,
      "rollout/trainer mismatch corrections: truncated IS, masked IS, IcePop");
  }
};

struct PpoConfig {
  double gamma = 1.0;
  double lambda = 1.0;
  double value_clip = 0.2;  // 0 = no value clipping
  bool whiten = true;
  std::string value_agg = "token-mean";

  void validate(const std::string& where) const;

  template <class V> void visit(V& v) {
    v("gamma", gamma, "GAE discount per token");
    v("lambda", lambda, "GAE lambda");
    v("value_clip", value_clip, "critic: new values clipped to old +- value_clip in the loss; 0 = off");
    v("whiten", whiten, "whiten the GAE advantages over the global batch");
    v("value_agg", value_agg, "critic loss aggregation (same choices as policy_loss.agg)");
  }
};

// The preference losses of TRL's DPOTrainer (loss_type) and CPOTrainer (SimPO), trainer/dpo_loss.h.
struct DpoConfig {
  double beta = 0.1;
  std::string loss_type = "sigmoid";  // "sigmoid" | "robust" | "ipo" | "simpo"
  double label_smoothing = 0.0;       // sigmoid: cDPO; robust: rDPO; simpo: as sigmoid. In [0, 0.5)
  double simpo_gamma = 0.5;           // simpo: the target reward margin gamma (TRL CPOConfig.simpo_gamma)

  // Every loss but SimPO's compares the policy with a frozen reference.
  bool uses_reference() const { return loss_type != "simpo"; }
  void validate(const std::string& where) const;

  template <class V> void visit(V& v) {
    v("beta", beta, "temperature on the margin (DPO/cDPO/rDPO: 0.1; IPO: the regulariser tau, target margin "
                    "1/(2 beta); SimPO: 2.0 in its paper)");
    v("loss_type", loss_type,
      "\"sigmoid\" (DPO, -log sigmoid(beta z), z = summed log-ratio margin; with label_smoothing: cDPO), "
      "\"robust\" (rDPO: unbiased under label noise label_smoothing), \"ipo\" ((z - 1/(2 beta))^2 on the "
      "length-averaged log-ratios), \"simpo\" (reference-free: -log sigmoid(beta (mean logp chosen - mean logp "
      "rejected) - simpo_gamma)); TRL's names");
    v("label_smoothing", label_smoothing, "the assumed probability that a pair's preference is flipped, in [0, 0.5): "
                                          "sigmoid/simpo (conservative DPO) and robust (rDPO)");
    v("simpo_gamma", simpo_gamma, "simpo: target margin gamma (>= 0)");
  }
};

// On-policy distillation (algorithm.name "distill", trainer/algorithm_distill.cpp): a teacher scores the
// student's own samples; the per-token reverse KL, log p_student - log p_teacher at each sampled token, is the
// negative advantage (mode "advantage", as Thinking Machines' on-policy distillation) or a KL loss term (mode
// "loss", the teacher in the place of the reference of a verl KL loss).
struct DistillConfig {
  std::string teacher;             // the teacher's checkpoint directory (same vocabulary as the student)
  std::string mode = "advantage";  // "advantage" | "loss"
  double coef = 1.0;               // scale of the reverse KL (the advantage's, or the loss term's coefficient)
  std::string kl_estimator = "k2";  // mode "loss": k2's gradient is the reverse KL's own on the student's samples

  void validate(const std::string& where) const;

  template <class V> void visit(V& v) {
    v("teacher", teacher, "distill: the teacher's checkpoint directory (its vocabulary must be the student's)");
    v("mode", mode, "\"advantage\": each token's advantage is -coef (log p_student - log p_teacher), trained with "
                    "the PPO-clip loss; \"loss\": coef x the reverse-KL estimate kl_estimator in the loss, no "
                    "advantage");
    v("coef", coef, "scale of the per-token reverse KL (> 0)");
    v("kl_estimator", kl_estimator, "mode loss: \"k1\", \"k2\" or \"k3\" of KL(student || teacher); k2's "
                                    "gradient is the unbiased reverse-KL gradient on the student's own samples");
  }
};

struct AlgorithmConfig {
  std::string name = "grpo";  // a registered Algorithm (trainer/algorithm.h)
  std::string logprob_space = "full";  // "full" | "sampled": which distribution rollout and trainer score
  AdvantageConfig advantage;
  PolicyLossConfig policy_loss;
  PpoConfig ppo;
  DpoConfig dpo;
  DistillConfig distill;

  void validate(const std::string& where) const;

  template <class V> void visit(V& v) {
    v("name", name, "\"grpo\", \"gspo\", \"cispo\", \"reinforce_pp\", \"reinforce_pp_baseline\", \"ppo\", "
                    "\"dpo\" or \"distill\" (trainer/README.md); sets the defaults of the keys below");
    v("logprob_space", logprob_space,
      "\"full\": rollout and trainer log-probs under the whole tempered distribution (what every framework "
      "does); \"sampled\": under the top-k / top-p truncated distribution the tokens were drawn from, the "
      "trainer replaying the sampler's kept set (kernels/truncation.h), so the ratio is not off by the kept mass");
    v("advantage", advantage, "advantage estimator");
    v("policy_loss", policy_loss, "policy loss");
    v("ppo", ppo, "PPO: GAE and the critic's loss");
    v("dpo", dpo, "DPO");
    v("distill", distill, "on-policy distillation from a teacher checkpoint");
  }
};

// The defaults of one algorithm; throws naming `name` and the valid choices.
AlgorithmConfig algorithm_defaults(const std::string& name);
// Reads j["name"] (default "grpo"), starts from its defaults, applies the rest of j, validates. `where` names
// the config key or file in errors (e.g. "algorithm").
AlgorithmConfig algorithm_config_from_json(const Json& j, const std::string& where);

}  // namespace rlcpp
