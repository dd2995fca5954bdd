// The rollout corrections of the policy loss (trainer/rollout_correction.h) at the level of their definitions:
// each factor on a small hand-made batch, the tis_cap alias, masked tokens keeping their place in the
// normaliser, NaN ratios, sequence quantities over whole sequences, and the config's errors naming the key path.
// Their loss and gradient against torch autograd are in trainer_losses_test.cpp (the policy_rc_* cases), their
// accumulation over micro-batches in trainer_accumulation_test.cpp and trainer_update_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/config.h"
#include "tests/trainer_test_support.h"
#include "trainer/algorithm_config.h"
#include "trainer/policy_loss.h"
#include "trainer/rollout_correction.h"

namespace rlcpp {
namespace {


// Two sequences (3 and 2 tokens), the second token of the first not trained on (mask 0).
struct HandBatch {
  std::vector<int64_t> cu = {0, 3, 5};
  std::vector<float> old_logp = {-1.0f, -0.5f, -2.0f, -0.3f, -1.2f};
  std::vector<float> rollout_logp = {-2.2f, -0.1f, -0.6f, -0.4f, -1.4f};
  std::vector<float> mask = {1, 0, 1, 1, 1};
  double lr(size_t t) const { return static_cast<double>(old_logp[t]) - rollout_logp[t]; }
};

RolloutCorrectionConfig with(const char* is, const char* mask, bool icepop = false) {
  RolloutCorrectionConfig c;
  c.is = is;
  c.mask = mask;
  c.icepop = icepop;
  return c;
}

void expect_factors(const RolloutCorrection& rc, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(rc.factor.size(), want.size()) << what;
  for (size_t t = 0; t < want.size(); ++t)
    EXPECT_NEAR(rc.factor[t], want[t], 1e-12 * std::max(1.0, std::abs(want[t]))) << what << " token " << t;
}

TEST(RolloutCorrection, EachFactorFollowsItsDefinition) {
  const HandBatch b;
  auto run = [&](const RolloutCorrectionConfig& c) {
    return rollout_correction(c, b.cu, b.old_logp, b.rollout_logp, b.mask);
  };
  // Log-ratios 1.2, -0.4 (mask 0), -1.4 | 0.1, 0.2. Sequence sums over trained tokens: -0.2 and 0.3.
  const double s0 = b.lr(0) + b.lr(2), s1 = b.lr(3) + b.lr(4);
  expect_factors(run(with("token", "none")),
                 {2.0, std::exp(b.lr(1)), std::exp(b.lr(2)), std::exp(b.lr(3)), std::exp(b.lr(4))}, "is token");
  expect_factors(run(with("sequence", "none")),
                 {std::exp(s0), std::exp(s0), std::exp(s0), std::exp(s1), std::exp(s1)}, "is sequence");
  // Token mask [0.5, 2]: exp(1.2) = 3.3 and exp(-1.4) = 0.25 are out.
  expect_factors(run(with("none", "token")), {0, 1, 0, 1, 1}, "mask token");
  // Sequence mask [0.5, 2]: exp(-0.2) and exp(0.3) are in; with [0.9, 1.5], exp(-0.2) = 0.82 is out.
  expect_factors(run(with("none", "sequence")), {1, 1, 1, 1, 1}, "mask sequence");
  RolloutCorrectionConfig narrow = with("none", "sequence");
  narrow.mask_low = 0.9;
  narrow.mask_high = 1.5;
  const RolloutCorrection seq = run(narrow);
  expect_factors(seq, {0, 0, 0, 1, 1}, "mask sequence narrow");
  EXPECT_EQ(seq.seqs_rejected, 1.0);
  EXPECT_EQ(seq.seqs, 2.0);
  // Geometric mean ratios exp(-0.1) = 0.905 and exp(0.15) = 1.16: [0.95, 1.2] drops the first sequence only.
  RolloutCorrectionConfig geo = with("none", "geometric");
  geo.mask_low = 0.95;
  geo.mask_high = 1.2;
  expect_factors(run(geo), {0, 0, 0, 1, 1}, "mask geometric");
  // IcePop [0.5, 2]: the in-band tokens weighted by their own ratio, the others 0.
  expect_factors(run(with("none", "none", true)), {0, std::exp(b.lr(1)), 0, std::exp(b.lr(3)), std::exp(b.lr(4))},
                 "icepop");
  // Sequence TIS and the token mask together: weight times keep.
  expect_factors(run(with("sequence", "token")), {0, std::exp(s0), 0, std::exp(s1), std::exp(s1)},
                 "is sequence + mask token");
}

TEST(RolloutCorrection, SequenceQuantitiesSpanTheWholeSequence) {
  // The same five tokens as one sequence or as two: the sequence weight and the geometric mask change, so a
  // sequence cut across micro-batches would get the wrong factor (the packers never cut one).
  const HandBatch b;
  const std::vector<int64_t> one = {0, 5};
  const RolloutCorrection whole = rollout_correction(with("sequence", "none"), one, b.old_logp, b.rollout_logp, b.mask);
  const double s = b.lr(0) + b.lr(2) + b.lr(3) + b.lr(4);
  expect_factors(whole, std::vector<double>(5, std::exp(s)), "one sequence");
  const RolloutCorrection split =
      rollout_correction(with("sequence", "none"), b.cu, b.old_logp, b.rollout_logp, b.mask);
  EXPECT_GT(std::abs(split.factor[0] - whole.factor[0]), 0.1);
}

LossOutput hand_loss(const HandBatch& b, const PolicyLossConfig& cfg, std::optional<std::span<const float>> rollout) {
  static const std::vector<float> logp = {-1.05f, -0.45f, -2.1f, -0.25f, -1.3f};
  static const std::vector<float> adv = {1.0f, -0.5f, 0.7f, -1.2f, 0.4f};
  static const std::vector<float> ref = {-1.0f, -0.6f, -1.9f, -0.3f, -1.1f};
  const auto norm = policy_loss_normalizer(cfg, b.cu, b.mask, 8);
  PolicyLossInputs in;
  in.cu = b.cu;
  in.logp = logp;
  in.old_logp = b.old_logp;
  in.advantages = adv;
  in.mask = b.mask;
  in.ref_logp = std::span<const float>(ref);
  in.rollout_logp = rollout;
  return policy_loss(in, cfg, norm);
}

TEST(RolloutCorrection, TisCapIsTheTokenIsAlias) {
  const HandBatch b;
  PolicyLossConfig old_spelling, new_spelling;
  old_spelling.tis_cap = 1.5;
  new_spelling.rollout_correction.is = "token";
  new_spelling.rollout_correction.is_threshold = 1.5;
  const LossOutput a = hand_loss(b, old_spelling, std::span<const float>(b.rollout_logp));
  const LossOutput n = hand_loss(b, new_spelling, std::span<const float>(b.rollout_logp));
  EXPECT_EQ(a.loss, n.loss);
  EXPECT_EQ(a.dlogp, n.dlogp);
  EXPECT_EQ(a.metrics.value("tis_ratio"), n.metrics.value("rollout_corr/is_weight_mean"));
  EXPECT_FALSE(n.metrics.has("tis_ratio"));
  // And the weight is applied: without it the gradient differs.
  EXPECT_NE(hand_loss(b, PolicyLossConfig{}, std::nullopt).dlogp, n.dlogp);
}

TEST(RolloutCorrection, MaskedTokensKeepTheirPlaceInTheNormaliserAndTheirKl) {
  const HandBatch b;
  PolicyLossConfig plain, masked;
  plain.kl_coef = masked.kl_coef = 0.1;
  masked.rollout_correction.mask = "token";  // drops tokens 0 and 2 (ratios 3.3 and 0.25)
  const LossOutput p = hand_loss(b, plain, std::nullopt);
  const LossOutput m = hand_loss(b, masked, std::span<const float>(b.rollout_logp));
  // Per-token PPO-clip terms of the kept tokens are unchanged: the token-mean denominator is still 4 tokens.
  const double kl_grad_0 = m.dlogp[0], kl_grad_2 = m.dlogp[2];
  EXPECT_NE(kl_grad_0, 0.0f);  // the KL term still trains the masked token
  EXPECT_NE(kl_grad_0, p.dlogp[0]);
  EXPECT_NE(kl_grad_2, p.dlogp[2]);
  EXPECT_EQ(m.dlogp[3], p.dlogp[3]);
  EXPECT_EQ(m.dlogp[4], p.dlogp[4]);
  EXPECT_EQ(m.metrics.value("kl_loss"), p.metrics.value("kl_loss"));
  EXPECT_DOUBLE_EQ(m.metrics.value("rollout_corr/masked_frac"), 0.5);
  EXPECT_DOUBLE_EQ(m.metrics.value("rollout_corr/is_weight_mean"), 0.5);
  // Only the PPO-clip term of the masked tokens is gone.
  PolicyLossConfig no_kl = plain;
  no_kl.kl_coef = 0;
  PolicyLossConfig masked_no_kl = masked;
  masked_no_kl.kl_coef = 0;
  const LossOutput mk = hand_loss(b, masked_no_kl, std::span<const float>(b.rollout_logp));
  EXPECT_EQ(mk.dlogp[0], 0.0f);
  EXPECT_EQ(mk.dlogp[2], 0.0f);
  EXPECT_EQ(mk.dlogp[3], hand_loss(b, no_kl, std::nullopt).dlogp[3]);
}

TEST(RolloutCorrection, NanRatioIsMaskedOrShowsAsNan) {
  HandBatch b;
  b.rollout_logp[3] = std::numeric_limits<float>::quiet_NaN();
  const RolloutCorrection masked = rollout_correction(with("none", "token"), b.cu, b.old_logp, b.rollout_logp, b.mask);
  EXPECT_EQ(masked.factor[3], 0.0);  // never kept
  EXPECT_EQ(masked.masked, 3.0);     // tokens 0, 2 (out of band) and 3 (NaN)
  const RolloutCorrection weighted =
      rollout_correction(with("token", "none"), b.cu, b.old_logp, b.rollout_logp, b.mask);
  EXPECT_TRUE(std::isnan(weighted.factor[3]));  // an unmasked NaN weight reaches the loss and the NaN guard
}

TEST(RolloutCorrection, NeedsTheRolloutLogp) {
  const HandBatch b;
  PolicyLossConfig cfg;
  cfg.rollout_correction.mask = "geometric";
  const std::string e = error_of([&] { hand_loss(b, cfg, std::nullopt); });
  EXPECT_NE(e.find("rollout_correction"), std::string::npos) << e;
  EXPECT_NE(e.find("rollout_logp"), std::string::npos) << e;
  cfg.rollout_correction.mask = "none";
  cfg.tis_cap = 2.0;
  EXPECT_NE(error_of([&] { hand_loss(b, cfg, std::nullopt); }).find("tis_cap"), std::string::npos);
}

std::string config_error(const char* rollout_correction_json, const char* extra = "") {
  const std::string text =
      std::string(R"({"policy_loss": {)") + extra + R"("rollout_correction": )" + rollout_correction_json + "}}";
  return error_of([&] { algorithm_config_from_json(Json::parse(text), "algorithm"); });
}

TEST(RolloutCorrectionConfig, DefaultsAreOffWithVerlsBounds) {
  const AlgorithmConfig a = algorithm_config_from_json(Json::parse("{}"), "algorithm");
  const RolloutCorrectionConfig& c = a.policy_loss.rollout_correction;
  EXPECT_FALSE(c.active());
  EXPECT_EQ(c.is, "none");
  EXPECT_EQ(c.is_threshold, 2.0);
  EXPECT_EQ(c.mask, "none");
  EXPECT_EQ(c.mask_low, 0.5);
  EXPECT_EQ(c.mask_high, 2.0);
  EXPECT_FALSE(c.icepop);
  EXPECT_EQ(c.icepop_low, 0.5);
  EXPECT_EQ(c.icepop_high, 2.0);
  const AlgorithmConfig on = algorithm_config_from_json(
      Json::parse(R"({"policy_loss": {"rollout_correction": {"is": "sequence", "is_threshold": 5,
                                                              "mask": "geometric", "mask_low": 0.999,
                                                              "mask_high": 1.001}}})"),
      "algorithm");
  EXPECT_EQ(on.policy_loss.rollout_correction.is, "sequence");
  EXPECT_EQ(on.policy_loss.rollout_correction.mask_high, 1.001);
  // The tis_cap alias resolves to token IS.
  PolicyLossConfig alias;
  alias.tis_cap = 3.0;
  EXPECT_EQ(alias.rollout_correction_in_effect().is, "token");
  EXPECT_EQ(alias.rollout_correction_in_effect().is_threshold, 3.0);
}

TEST(RolloutCorrectionConfig, BadValuesNameTheirKeyPath) {
  const std::string root = "algorithm.policy_loss.rollout_correction.";
  EXPECT_NE(config_error(R"({"is": "tok"})").find(root + "is: \"tok\" is not one of none, token, sequence"),
            std::string::npos)
      << config_error(R"({"is": "tok"})");
  EXPECT_NE(
      config_error(R"({"mask": "seq"})").find(root + "mask: \"seq\" is not one of none, token, sequence, geometric"),
      std::string::npos);
  EXPECT_NE(config_error(R"({"is_threshold": 0.5})").find(root + "is_threshold"), std::string::npos);
  for (const char* bad : {R"({"mask_low": 0})", R"({"mask_low": 1.0})", R"({"mask_low": -0.5})"})
    EXPECT_NE(config_error(bad).find(root + "mask_low"), std::string::npos) << bad;
  EXPECT_NE(config_error(R"({"mask_high": 1.0})").find(root + "mask_high"), std::string::npos);
  EXPECT_NE(config_error(R"({"icepop_low": 1.5})").find(root + "icepop_low"), std::string::npos);
  EXPECT_NE(config_error(R"({"icepop_high": 0.9})").find(root + "icepop_high"), std::string::npos);
  EXPECT_NE(config_error(R"({"icepop": true, "is": "token"})").find(root + "icepop"), std::string::npos);
  EXPECT_NE(config_error(R"({"is": "sequence"})", R"("tis_cap": 2, )").find("algorithm.policy_loss.tis_cap"),
            std::string::npos);
  EXPECT_NE(config_error(R"({"thresh": 2})").find("'" + root + "thresh'"), std::string::npos);
  EXPECT_EQ(config_error(R"({"icepop": true, "mask": "sequence"})"), "<no error>");
}

}  // namespace
}  // namespace rlcpp
