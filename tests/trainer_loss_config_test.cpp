// The loss and algorithm configs and the losses' inputs at their boundaries: each algorithm's defaults, bad
// values and missing or mis-sized arrays are errors naming the key or array; masked tokens get no gradient.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "trainer/algorithm_config.h"
#include "trainer/loss_normalizer.h"
#include "trainer/policy_loss.h"
#include "tests/error_test_support.h"

namespace rlcpp {
namespace {

TEST(LossConfig, UnknownAggregationNamesKeyAndChoices) {
  const std::string e = error_of([] {
    algorithm_config_from_json(Json::parse(R"({"policy_loss": {"agg": "mean"}})"), "algorithm");
  });
  EXPECT_NE(e.find("algorithm.policy_loss.agg"), std::string::npos) << e;
  EXPECT_NE(e.find("\"mean\""), std::string::npos) << e;
  EXPECT_NE(e.find("seq-mean-token-sum-norm"), std::string::npos) << e;
}

TEST(LossConfig, BadValuesNameTheirKey) {
  auto error_for = [](const char* text) {
    return error_of([&] { algorithm_config_from_json(Json::parse(text), "algorithm"); });
  };
  EXPECT_NE(error_for(R"({"policy_loss": {"clip_c": 0.5}})").find("algorithm.policy_loss.clip_c"), std::string::npos);
  EXPECT_NE(error_for(R"({"policy_loss": {"kl_estimator": "k4"}})").find("algorithm.policy_loss.kl_estimator"),
            std::string::npos);
  EXPECT_NE(error_for(R"({"advantage": {"estimator": "ppo"}})").find("algorithm.advantage.estimator"),
            std::string::npos);
  EXPECT_NE(error_for(R"({"dpo": {"beta": 0}})").find("algorithm.dpo.beta"), std::string::npos);
  EXPECT_NE(error_for(R"({"dpo": {"loss_type": "hinge"}})").find("algorithm.dpo.loss_type: \"hinge\" is not one of"),
            std::string::npos);
  EXPECT_NE(error_for(R"({"dpo": {"label_smoothing": 0.5}})").find("algorithm.dpo.label_smoothing: must be in [0, 0.5)"),
            std::string::npos);
  EXPECT_NE(error_for(R"({"dpo": {"loss_type": "ipo", "label_smoothing": 0.1}})").find("ipo has no label smoothing"),
            std::string::npos);
  EXPECT_NE(error_for(R"({"dpo": {"simpo_gamma": -1}})").find("algorithm.dpo.simpo_gamma"), std::string::npos);
  EXPECT_NE(error_for(R"({"ppo": {"gamma": 1.5}})").find("algorithm.ppo.gamma"), std::string::npos);
  EXPECT_NE(error_for(R"({"name": "a2c"})").find("algorithm.name"), std::string::npos);
  EXPECT_NE(error_for(R"({"policy_loss": {"clip_lo": 0.1}})").find("'algorithm.policy_loss.clip_lo'"),
            std::string::npos);
  EXPECT_NE(error_for(R"({"name": "grpo", "advantage": {"estimator": "gae"}})").find("algorithm.advantage"),
            std::string::npos);
}

TEST(LossConfig, PpoDefaultsPutK1KlInTheReward) {
  const AlgorithmConfig ppo = algorithm_config_from_json(Json::parse(R"({"name": "ppo"})"), "algorithm");
  EXPECT_EQ(ppo.advantage.estimator, "gae");
  EXPECT_TRUE(ppo.policy_loss.kl_in_reward);
  EXPECT_EQ(ppo.policy_loss.kl_estimator, "k1");
  EXPECT_GT(ppo.policy_loss.kl_coef, 0.0);
  const AlgorithmConfig grpo = algorithm_config_from_json(Json::parse(R"({"ppo": {"gamma": 0.9}})"), "algorithm");
  EXPECT_EQ(grpo.name, "grpo");
  EXPECT_EQ(grpo.advantage.estimator, "grpo");
  EXPECT_EQ(grpo.policy_loss.kl_coef, 0.0);
  EXPECT_EQ(grpo.ppo.gamma, 0.9);
  EXPECT_EQ(algorithm_defaults("dpo").dpo.beta, 0.1);
  // A file may still override the PPO defaults.
  const AlgorithmConfig ppo_loss_kl = algorithm_config_from_json(
      Json::parse(R"({"name": "ppo", "policy_loss": {"kl_in_reward": false, "kl_estimator": "k3"}})"), "algorithm");
  EXPECT_FALSE(ppo_loss_kl.policy_loss.kl_in_reward);
  EXPECT_EQ(ppo_loss_kl.policy_loss.kl_estimator, "k3");
}

// Each algorithm's own defaults, and what each refuses, naming the key.
TEST(LossConfig, EachAlgorithmSetsItsDefaultsAndRefusesWhatIsNotIt) {
  const AlgorithmConfig gspo = algorithm_defaults("gspo");
  EXPECT_EQ(gspo.policy_loss.loss_mode, "gspo");
  EXPECT_EQ(gspo.policy_loss.clip_low, 3e-4);
  EXPECT_EQ(gspo.policy_loss.clip_high, 4e-4);
  EXPECT_EQ(gspo.policy_loss.agg, "seq-mean-token-mean");
  const AlgorithmConfig cispo = algorithm_defaults("cispo");
  EXPECT_EQ(cispo.policy_loss.loss_mode, "cispo");
  EXPECT_EQ(cispo.policy_loss.clip_low, 1.0);  // no lower bound on the weight
  EXPECT_EQ(cispo.policy_loss.clip_high, 0.28);
  const AlgorithmConfig rpp = algorithm_defaults("reinforce_pp");
  EXPECT_EQ(rpp.advantage.estimator, "reinforce_pp");
  EXPECT_TRUE(rpp.policy_loss.kl_in_reward);
  EXPECT_EQ(rpp.policy_loss.kl_estimator, "k1");
  EXPECT_EQ(algorithm_defaults("reinforce_pp_baseline").policy_loss.kl_coef, 0.0);
  EXPECT_EQ(algorithm_defaults("grpo").policy_loss.loss_mode, "vanilla");

  auto error_for = [](const char* text) {
    return error_of([&] { algorithm_config_from_json(Json::parse(text), "algorithm"); });
  };
  std::string e = error_for(R"({"name": "gspo", "policy_loss": {"loss_mode": "vanilla"}})");
  EXPECT_NE(e.find("algorithm.policy_loss.loss_mode: gspo is the \"gspo\" loss, got \"vanilla\""), std::string::npos)
      << e;
  e = error_for(R"({"name": "cispo", "policy_loss": {"clip_c": 3}})");
  EXPECT_NE(e.find("algorithm.policy_loss.clip_c: the dual clip belongs to the vanilla"), std::string::npos) << e;
  e = error_for(R"({"name": "reinforce_pp", "advantage": {"estimator": "grpo"}})");
  EXPECT_NE(e.find("algorithm.advantage.estimator: the reinforce_pp algorithm computes its own"), std::string::npos)
      << e;
  e = error_for(R"({"name": "gspo", "advantage": {"estimator": "gae"}})");
  EXPECT_NE(e.find("\"gae\" needs a critic"), std::string::npos) << e;
  e = error_for(R"({"policy_loss": {"loss_mode": "sapo"}})");
  EXPECT_NE(e.find("algorithm.policy_loss.loss_mode: \"sapo\" is not one of vanilla, gspo, cispo"), std::string::npos)
      << e;
  e = error_for(R"({"name": "sft"})");
  EXPECT_NE(e.find("unknown algorithm \"sft\" (expected one of \"grpo\", \"gspo\""), std::string::npos) << e;
  // Any loss mode runs under grpo, as in verl.
  EXPECT_EQ(error_for(R"({"name": "grpo", "policy_loss": {"loss_mode": "cispo"}})"), "<no error>");
}

TEST(LossInputs, MissingOrMisSizedArraysAreErrors) {
  std::vector<int64_t> cu = {0, 2, 3};
  std::vector<float> x = {-1.0f, -0.5f, -2.0f}, mask = {1, 1, 1}, shorter = {0.0f, 0.0f};
  PolicyLossConfig cfg;
  auto norm = LossNormalizer::over_batch(LossAgg::kTokenMean, cu, mask);
  cfg.kl_coef = 0.1;
  EXPECT_NE(error_of([&] { policy_loss({cu, x, x, x, mask}, cfg, norm); }).find("ref_logp"), std::string::npos);
  cfg.kl_coef = 0;
  EXPECT_NE(error_of([&] { policy_loss({cu, x, x, shorter, mask}, cfg, norm); }).find("advantages"),
            std::string::npos);
  std::vector<int64_t> bad_cu = {0, 2, 4};
  EXPECT_NE(error_of([&] { policy_loss({bad_cu, x, x, x, mask}, cfg, norm); }).find("offsets"), std::string::npos);
  cfg.entropy_coef = 0.01;
  EXPECT_NE(error_of([&] { policy_loss({cu, x, x, x, mask}, cfg, norm); }).find("entropy"), std::string::npos);
  EXPECT_THROW(LossNormalizer::over_batch(LossAgg::kSeqMeanTokenSumNorm, cu, mask, 0.0), Error);
}

TEST(LossInputs, TokenSumNormDefaultsToTheMaxResponseLength) {
  std::vector<int64_t> cu = {0, 2, 2, 5};
  std::vector<float> mask = {1, 0, 1, 1, 1};
  PolicyLossConfig cfg;
  cfg.agg = "seq-mean-token-sum-norm";
  LossNormalizer n = policy_loss_normalizer(cfg, cu, mask, 64);
  EXPECT_EQ(n.agg, LossAgg::kSeqMeanTokenSumNorm);
  EXPECT_EQ(n.token_sum_norm, 64.0);
  EXPECT_EQ(n.num_tokens, 4.0);
  EXPECT_EQ(n.num_seqs, 2.0);  // the empty response does not count
  cfg.token_sum_norm = 100;
  EXPECT_EQ(policy_loss_normalizer(cfg, cu, mask, 64).token_sum_norm, 100.0);
  cfg.token_sum_norm = 0;
  EXPECT_THROW(policy_loss_normalizer(cfg, cu, mask, 0), Error);  // no constant to divide by
}

TEST(LossInputs, NoGradientFlowsToMaskedTokens) {
  std::vector<int64_t> cu = {0, 4};
  std::vector<float> logp = {-1.0f, -0.5f, -2.0f, -0.1f}, old = {-1.1f, -0.4f, -2.2f, -0.3f},
                     adv = {1.0f, -1.0f, 0.5f, 2.0f}, ref = {-1.3f, -0.2f, -1.0f, -0.2f},
                     entropy = {1.0f, 2.0f, 0.5f, 0.1f}, mask = {1, 0, 1, 0};
  for (const char* mode : {"vanilla", "gspo", "cispo"}) {
    PolicyLossConfig cfg;
    cfg.loss_mode = mode;
    cfg.kl_coef = 0.1;
    cfg.entropy_coef = 0.01;
    for (const char* agg : {"token-mean", "seq-mean-token-sum", "seq-mean-token-mean"}) {
      const std::string what = std::string(mode) + " " + agg;
      auto norm = LossNormalizer::over_batch(parse_loss_agg(agg, "agg"), cu, mask);
      LossOutput out = policy_loss({cu, logp, old, adv, mask, ref, entropy}, cfg, norm);
      EXPECT_EQ(out.dlogp[1], 0.0f) << what;
      EXPECT_EQ(out.dlogp[3], 0.0f) << what;
      EXPECT_EQ(out.dentropy[3], 0.0f) << what;
      EXPECT_NE(out.dlogp[0], 0.0f) << what;
      EXPECT_NE(out.dlogp[2], 0.0f) << what;
    }
  }
}

}  // namespace
}  // namespace rlcpp
