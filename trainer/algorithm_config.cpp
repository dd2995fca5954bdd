#include "trainer/algorithm_config.h"

#include <cmath>
#include <initializer_list>

#include "core/error.h"
#include "trainer/algorithm.h"
#include "trainer/kl.h"
#include "trainer/loss_normalizer.h"

namespace rlcpp {

namespace {

std::string key_path(const std::string& where, const char* key) { return where.empty() ? key : where + "." + key; }

void check_choice(const std::string& value, std::initializer_list<const char*> choices, const std::string& key) {
  std::string list;
  for (const char* c : choices) {
    if (value == c) return;
    list += (list.empty() ? "" : ", ") + std::string(c);
  }
  RLCPP_FAIL(key << ": \"" << value << "\" is not one of " << list);
}

// A kept band [low, high] of a ratio around 1.
void check_band(double low, double high, const std::string& where, const char* low_key, const char* high_key) {
  RLCPP_CHECK(low > 0 && low < 1, key_path(where, low_key) << ": must be in (0, 1), got " << low);
  RLCPP_CHECK(high > 1, key_path(where, high_key) << ": must be > 1, got " << high);
}

}  // namespace

void RolloutCorrectionConfig::validate(const std::string& where) const {
  check_choice(is, {"none", "token", "sequence"}, key_path(where, "is"));
  RLCPP_CHECK(is_threshold >= 1,
              key_path(where, "is_threshold") << ": must be >= 1 (the cap of the importance weight), got "
                                              << is_threshold);
  check_choice(mask, {"none", "token", "sequence", "geometric"}, key_path(where, "mask"));
  check_band(mask_low, mask_high, where, "mask_low", "mask_high");
  check_band(icepop_low, icepop_high, where, "icepop_low", "icepop_high");
  RLCPP_CHECK(!icepop || is == "none",
              key_path(where, "icepop") << ": IcePop already weights each kept token by its ratio; with is \"" << is
                                        << "\" the weight would count twice (set is to \"none\")");
  RLCPP_CHECK(!bypass || !active(),
              key_path(where, "bypass") << ": with the rollout's log-probs as the old ones every correction's ratio "
                                        << "old / rollout is 1; turn is, mask and icepop off (is \"" << is
                                        << "\", mask \"" << mask << "\", icepop " << (icepop ? "true" : "false")
                                        << ")");
}

void AdvantageConfig::validate(const std::string& where) const {
  check_choice(estimator, {"grpo", "drgrpo", "rloo", "gae", "reinforce_pp", "reinforce_pp_baseline"},
               key_path(where, "estimator"));
  RLCPP_CHECK(eps > 0, key_path(where, "eps") << ": must be positive, got " << eps);
  RLCPP_CHECK(gamma >= 0 && gamma <= 1, key_path(where, "gamma") << ": must be in [0, 1], got " << gamma);
}

void PolicyLossConfig::validate(const std::string& where) const {
  check_choice(loss_mode, {"vanilla", "gspo", "cispo"}, key_path(where, "loss_mode"));
  RLCPP_CHECK(clip_low >= 0 && clip_low <= 1,
              key_path(where, "clip_low") << ": must be in [0, 1] so that 1 - clip_low >= 0 (1: no lower bound), got "
                                          << clip_low);
  RLCPP_CHECK(clip_high >= 0, key_path(where, "clip_high") << ": must be >= 0, got " << clip_high);
  RLCPP_CHECK(clip_c == 0 || clip_c > 1,
              key_path(where, "clip_c") << ": must be 0 (dual clip off) or greater than 1, got " << clip_c);
  RLCPP_CHECK(clip_c == 0 || loss_mode == "vanilla",
              key_path(where, "clip_c") << ": the dual clip belongs to the vanilla PPO-clip loss; loss_mode \""
                                        << loss_mode << "\" has none (set clip_c to 0)");
  parse_loss_agg(agg, key_path(where, "agg"));
  RLCPP_CHECK(token_sum_norm >= 0, key_path(where, "token_sum_norm") << ": must be >= 0, got " << token_sum_norm);
  RLCPP_CHECK(kl_coef >= 0, key_path(where, "kl_coef") << ": must be >= 0, got " << kl_coef);
  parse_kl_estimator(kl_estimator, key_path(where, "kl_estimator"));
  RLCPP_CHECK(entropy_coef >= 0, key_path(where, "entropy_coef") << ": must be >= 0, got " << entropy_coef);
  RLCPP_CHECK(tis_cap == 0 || tis_cap >= 1,
              key_path(where, "tis_cap") << ": must be 0 (off) or >= 1, got " << tis_cap);
  rollout_correction.validate(key_path(where, "rollout_correction"));
  RLCPP_CHECK(tis_cap == 0 || (rollout_correction.is == "none" && !rollout_correction.icepop),
              key_path(where, "tis_cap") << ": " << tis_cap << " is the older spelling of rollout_correction.is "
                                         << "\"token\" with is_threshold " << tis_cap
                                         << "; set one or the other, not both (rollout_correction.is is \""
                                         << rollout_correction.is << "\", icepop "
                                         << (rollout_correction.icepop ? "true" : "false") << ")");
  RLCPP_CHECK(tis_cap == 0 || !rollout_correction.bypass,
              key_path(where, "tis_cap") << ": " << tis_cap << " corrects against recomputed old log-probs, but "
                                         << "rollout_correction.bypass uses the rollout's (their ratio is 1)");
}

RolloutCorrectionConfig PolicyLossConfig::rollout_correction_in_effect() const {
  RolloutCorrectionConfig c = rollout_correction;
  if (tis_cap > 0) {
    c.is = "token";
    c.is_threshold = tis_cap;
  }
  return c;
}

void PpoConfig::validate(const std::string& where) const {
  RLCPP_CHECK(gamma >= 0 && gamma <= 1, key_path(where, "gamma") << ": must be in [0, 1], got " << gamma);
  RLCPP_CHECK(lambda >= 0 && lambda <= 1, key_path(where, "lambda") << ": must be in [0, 1], got " << lambda);
  RLCPP_CHECK(value_clip >= 0, key_path(where, "value_clip") << ": must be >= 0 (0 = off), got " << value_clip);
  parse_loss_agg(value_agg, key_path(where, "value_agg"));
}

void DpoConfig::validate(const std::string& where) const {
  RLCPP_CHECK(beta > 0 && std::isfinite(beta), key_path(where, "beta") << ": must be positive and finite, got "
                                                                        << beta);
  RLCPP_CHECK(loss_type == "sigmoid" || loss_type == "robust" || loss_type == "ipo" || loss_type == "simpo",
              key_path(where, "loss_type") << ": \"" << loss_type << "\" is not one of sigmoid, robust, ipo, simpo");
  RLCPP_CHECK(label_smoothing >= 0 && label_smoothing < 0.5,
              key_path(where, "label_smoothing") << ": must be in [0, 0.5), got " << label_smoothing);
  RLCPP_CHECK(loss_type != "ipo" || label_smoothing == 0,
              key_path(where, "label_smoothing") << ": ipo has no label smoothing, got " << label_smoothing);
  RLCPP_CHECK(simpo_gamma >= 0 && std::isfinite(simpo_gamma),
              key_path(where, "simpo_gamma") << ": must be >= 0 and finite, got " << simpo_gamma);
}

void DistillConfig::validate(const std::string& where) const {
  RLCPP_CHECK(mode == "advantage" || mode == "loss",
              key_path(where, "mode") << ": \"" << mode << "\" is not one of advantage, loss");
  RLCPP_CHECK(coef > 0 && std::isfinite(coef), key_path(where, "coef") << ": must be positive and finite, got "
                                                                        << coef);
  parse_kl_estimator(kl_estimator, key_path(where, "kl_estimator"));
}

void AlgorithmConfig::validate(const std::string& where) const {
  const Algorithm& algorithm = find_algorithm(name, key_path(where, "name"));
  RLCPP_CHECK(logprob_space == "full" || logprob_space == "sampled",
              key_path(where, "logprob_space") << ": \"" << logprob_space << "\" is not one of full, sampled");
  RLCPP_CHECK(logprob_space == "full" || policy_loss.entropy_coef == 0,
              key_path(where, "logprob_space") << ": \"sampled\" scores the truncated distribution, whose entropy "
                                               << "is not computed; policy_loss.entropy_coef must be 0, got "
                                               << policy_loss.entropy_coef);
  advantage.validate(key_path(where, "advantage"));
  policy_loss.validate(key_path(where, "policy_loss"));
  ppo.validate(key_path(where, "ppo"));
  dpo.validate(key_path(where, "dpo"));
  distill.validate(key_path(where, "distill"));
  algorithm.validate(*this, where.empty() ? "algorithm" : where);
}

AlgorithmConfig algorithm_defaults(const std::string& name) {
  AlgorithmConfig c;
  c.name = name;
  find_algorithm(name).set_defaults(c);
  c.validate("");
  return c;
}

AlgorithmConfig algorithm_config_from_json(const Json& j, const std::string& where) {
  RLCPP_CHECK(j.is_object(), where << ": expected an object, got " << j.dump());
  std::string name = "grpo";
  if (j.contains("name")) name = config_detail::read_leaf<std::string>(j["name"], key_path(where, "name"));
  find_algorithm(name, key_path(where, "name"));
  AlgorithmConfig c = algorithm_defaults(name);
  // The reader's prefix makes errors name the full key path, e.g. 'algorithm.policy_loss.clip_lo'.
  config_detail::Reader reader(j, where);
  c.visit(reader);
  reader.check_no_unknown();
  c.validate(where);
  return c;
}

}  // namespace rlcpp
