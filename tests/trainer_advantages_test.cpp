// Advantages against hand-computed values and their edge cases (the torch comparison of the same functions is
// in trainer_losses_test): GAE, group baselines, KL-in-reward placement, DPO pairing, whitening, metrics merge.
#include <gtest/gtest.h>

#include <cmath>

#include "trainer/advantages.h"
#include "trainer/dpo_loss.h"
#include "trainer/loss_metrics.h"

namespace rlcpp {
namespace {

constexpr float kTol = 1e-6f;

void expect_all_near(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(std::isfinite(got[i])) << i;
    EXPECT_NEAR(got[i], want[i], kTol) << "index " << i;
  }
}

AdvantageConfig estimator(const char* name, bool norm_by_std = true) {
  AdvantageConfig c;
  c.estimator = name;
  c.norm_by_std = norm_by_std;
  return c;
}

TEST(Gae, MatchesHandComputedRecursion) {
  // Sequence 0: rewards (0, 0, 1), values (0.5, 0.6, 0.7), gamma 0.9, lambda 0.8:
  //   t2: delta = 1 - 0.7 = 0.3                      gae 0.3      return 1.0
  //   t1: delta = 0.9 * 0.7 - 0.6 = 0.03             gae 0.03 + 0.72 * 0.3 = 0.246      return 0.846
  //   t0: delta = 0.9 * 0.6 - 0.5 = 0.04             gae 0.04 + 0.72 * 0.246 = 0.21712  return 0.71712
  // Sequence 1: its middle token is masked (a tool output): its reward 5 and value 9 are skipped:
  //   t2: delta = 2 - 0.4 = 1.6                      gae 1.6      return 2.0
  //   t0: delta = 0.9 * 0.4 - 0.2 = 0.16             gae 0.16 + 0.72 * 1.6 = 1.312      return 1.512
  std::vector<int64_t> cu = {0, 3, 6};
  std::vector<float> mask = {1, 1, 1, 1, 0, 1};
  std::vector<float> rewards = {0, 0, 1, 0, 5, 2};
  std::vector<float> values = {0.5f, 0.6f, 0.7f, 0.2f, 9.0f, 0.4f};
  GaeResult g = gae(cu, mask, rewards, values, 0.9, 0.8, /*whiten=*/false);
  expect_all_near(g.advantages, {0.21712f, 0.246f, 0.3f, 1.312f, 0.0f, 1.6f});
  expect_all_near(g.returns, {0.71712f, 0.846f, 1.0f, 1.512f, 0.0f, 2.0f});
}

TEST(Gae, GammaOneLambdaOneIsRewardToGoMinusValue) {
  std::vector<int64_t> cu = {0, 3, 3, 4};  // the middle response is empty
  std::vector<float> mask = {1, 1, 1, 1};
  std::vector<float> rewards = {0.0f, 0.5f, 1.0f, -1.0f};
  std::vector<float> values = {0.5f, 0.6f, 0.7f, 0.25f};
  GaeResult g = gae(cu, mask, rewards, values, 1.0, 1.0, false);
  expect_all_near(g.advantages, {1.0f, 0.9f, 0.3f, -1.25f});
  expect_all_near(g.returns, {1.5f, 1.5f, 1.0f, -1.0f});
}

TEST(Gae, WhitenedAdvantagesHaveZeroMeanUnitVarianceOverTheMask) {
  std::vector<int64_t> cu = {0, 4, 9};
  std::vector<float> mask = {1, 1, 0, 1, 1, 1, 1, 0, 1};
  std::vector<float> rewards = {0.1f, -0.2f, 3.0f, 1.0f, 0.0f, 0.3f, 0.0f, 7.0f, -1.0f};
  std::vector<float> values = {0.2f, 0.1f, -4.0f, 0.3f, 0.5f, -0.5f, 0.0f, 2.0f, 0.1f};
  GaeResult g = gae(cu, mask, rewards, values, 0.99, 0.95, true);
  double sum = 0, sq = 0, n = 0;
  for (size_t t = 0; t < mask.size(); ++t) {
    if (mask[t] == 0) {
      EXPECT_EQ(g.advantages[t], 0.0f);
      continue;
    }
    sum += g.advantages[t];
    n += 1;
  }
  for (size_t t = 0; t < mask.size(); ++t)
    if (mask[t] > 0) sq += (g.advantages[t] - sum / n) * (g.advantages[t] - sum / n);
  EXPECT_NEAR(sum / n, 0.0, 1e-6);
  EXPECT_NEAR(sq / (n - 1), 1.0, 1e-5);  // unbiased, as verl's masked_var
}

TEST(Whiten, SingleOrNoValidTokenGivesZerosNotNaN) {
  std::vector<float> one = {3.0f, 5.0f}, mask_one = {0, 1};
  whiten_masked(one, mask_one);
  EXPECT_EQ(one[0], 0.0f);
  EXPECT_EQ(one[1], 0.0f);
  std::vector<float> none = {3.0f, 5.0f}, mask_none = {0, 0};
  whiten_masked(none, mask_none);
  EXPECT_EQ(none[0], 0.0f);
  EXPECT_EQ(none[1], 0.0f);
}

TEST(GroupAdvantages, GrpoDividesByUnbiasedStd) {
  std::vector<float> scores = {1.0f, 0.0f};
  std::vector<int64_t> ids = {7, 7};
  const float a = static_cast<float>(0.5 / (std::sqrt(0.5) + 1e-6));
  expect_all_near(group_advantages(scores, ids, estimator("grpo")), {a, -a});
}

TEST(GroupAdvantages, DrGrpoAndNoStdSubtractTheMeanOnly) {
  std::vector<float> scores = {1.0f, 0.0f, 0.0f, 0.0f};
  std::vector<int64_t> ids = {0, 0, 0, 0};
  expect_all_near(group_advantages(scores, ids, estimator("drgrpo")), {0.75f, -0.25f, -0.25f, -0.25f});
  expect_all_near(group_advantages(scores, ids, estimator("grpo", false)), {0.75f, -0.25f, -0.25f, -0.25f});
}

TEST(GroupAdvantages, RlooSubtractsTheMeanOfTheOthers) {
  // Score 1 vs the others' mean (0 + 0 + 1 + 1) / 4 = 0.5; score 0 vs (1 + 0 + 1 + 1) / 4 = 0.75.
  std::vector<float> scores = {1.0f, 0.0f, 0.0f, 1.0f, 1.0f};
  std::vector<int64_t> ids = {3, 3, 3, 3, 3};
  expect_all_near(group_advantages(scores, ids, estimator("rloo")), {0.5f, -0.75f, -0.75f, 0.5f, 0.5f});
}

TEST(GroupAdvantages, EqualRewardsGiveZeroWithoutNaN) {
  std::vector<float> scores = {0.7f, 0.7f, 0.7f, 1.0f, 1.0f};
  std::vector<int64_t> ids = {1, 1, 1, 2, 2};
  for (const char* est : {"grpo", "drgrpo", "rloo"})
    expect_all_near(group_advantages(scores, ids, estimator(est)), {0, 0, 0, 0, 0});
}

TEST(GroupAdvantages, GroupsNeedNotBeContiguous) {
  std::vector<float> scores = {1.0f, 5.0f, 0.0f, 3.0f};
  std::vector<int64_t> ids = {0, 1, 0, 1};
  expect_all_near(group_advantages(scores, ids, estimator("drgrpo")), {0.5f, 1.0f, -0.5f, -1.0f});
}

TEST(GroupAdvantages, LoneSampleFollowsVerl) {
  // verl: a group of one has mean 0 and std 1 (grpo), rloo leaves the score unchanged.
  std::vector<float> scores = {2.0f};
  std::vector<int64_t> ids = {9};
  expect_all_near(group_advantages(scores, ids, estimator("grpo")), {static_cast<float>(2.0 / (1.0 + 1e-6))});
  expect_all_near(group_advantages(scores, ids, estimator("drgrpo")), {2.0f});
  expect_all_near(group_advantages(scores, ids, estimator("rloo")), {2.0f});
}

TEST(GroupAdvantages, GaeEstimatorIsRejected) {
  std::vector<float> scores = {1.0f, 0.0f};
  std::vector<int64_t> ids = {0, 0};
  EXPECT_THROW(group_advantages(scores, ids, estimator("gae")), Error);
}

TEST(GroupAdvantages, BroadcastMultipliesByTheMask) {
  std::vector<int64_t> cu = {0, 2, 2, 5};
  std::vector<float> mask = {1, 0, 1, 1, 0.5f};
  std::vector<float> per_seq = {2.0f, 9.0f, -1.0f};
  expect_all_near(broadcast_to_tokens(cu, mask, per_seq), {2.0f, 0.0f, -1.0f, -1.0f, -0.5f});
}

TEST(TokenRewards, ScoreLandsOnLastTrainedTokenAndKlOnEveryToken) {
  // Sequence 0 ends with a masked token: its score goes on token 1. Sequence 1 is empty and sequence 2 fully
  // masked: their scores are dropped.
  std::vector<int64_t> cu = {0, 3, 3, 5};
  std::vector<float> mask = {1, 1, 0, 0, 0};
  std::vector<float> scores = {1.0f, 2.0f, 3.0f};
  std::vector<float> old = {-1.0f, -2.0f, -0.5f, -1.0f, -1.0f}, ref = {-1.5f, -1.0f, -0.5f, -2.0f, -2.0f};
  TokenRewards no_kl = token_level_rewards(cu, mask, scores, {}, {}, 0.0, KlEstimator::kK1);
  expect_all_near(no_kl.rewards, {0.0f, 1.0f, 0.0f, 0.0f, 0.0f});
  EXPECT_FALSE(no_kl.metrics.has("reward_kl_penalty"));
  // k1 = old - ref: (0.5, -1.0) on the trained tokens; reward -= 0.1 * k1.
  TokenRewards with_kl = token_level_rewards(cu, mask, scores, old, ref, 0.1, KlEstimator::kK1);
  expect_all_near(with_kl.rewards, {-0.05f, 1.1f, 0.0f, 0.0f, 0.0f});
  expect_all_near(sum_per_sequence(cu, with_kl.rewards), {1.05f, 0.0f, 0.0f});
  EXPECT_NEAR(with_kl.metrics.value("reward_kl_penalty"), -0.25, 1e-7);  // one sequence with tokens: mean(0.5, -1)
  EXPECT_DOUBLE_EQ(with_kl.metrics.value("reward_kl_penalty_coeff"), 0.1);
}

TEST(DpoPairing, HighestVersusLowestPerGroupSkippingTies) {
  std::vector<float> rewards = {0.2f, 0.9f, 0.1f, 0.9f, 0.5f, 0.5f, 1.0f, 0.0f, 0.3f};
  std::vector<int64_t> ids = {4, 4, 4, 4, 2, 2, 8, 8, 6};
  // Group 4: best 0.9 first at 1, worst 0.1 at 2. Group 2: all equal, skipped. Group 8: (6, 7). Group 6: alone.
  const std::vector<DpoPair> want = {{1, 2}, {6, 7}};
  EXPECT_EQ(pair_by_reward(rewards, ids), want);
  EXPECT_TRUE(pair_by_reward(std::vector<float>{}, std::vector<int64_t>{}).empty());
}

TEST(DpoPairing, PairsComeInOrderOfFirstAppearance) {
  std::vector<float> rewards = {0.0f, 1.0f, 1.0f, 0.0f};
  std::vector<int64_t> ids = {9, 1, 9, 1};
  const std::vector<DpoPair> want = {{2, 0}, {1, 3}};
  EXPECT_EQ(pair_by_reward(rewards, ids), want);
}

TEST(LossMetrics, MergeKeepsSumsMeansAndExtremes) {
  LossMetrics a, b;
  a.add_sum("pg_loss", 0.25);
  a.add_mean("pg_clipfrac", 1.0, 4.0);
  a.add_max("x/max", 3.0);
  a.add_min("x/min", -1.0);
  b.add_sum("pg_loss", 0.5);
  b.add_mean("pg_clipfrac", 3.0, 4.0);
  b.add_max("x/max", 2.0);
  b.add_min("x/min", -5.0);
  b.add_mean("empty", 0.0, 0.0);
  a.merge(b);
  EXPECT_DOUBLE_EQ(a.value("pg_loss"), 0.75);
  EXPECT_DOUBLE_EQ(a.value("pg_clipfrac"), 0.5);
  EXPECT_DOUBLE_EQ(a.value("x/max"), 3.0);
  EXPECT_DOUBLE_EQ(a.value("x/min"), -5.0);
  EXPECT_EQ(a.value("empty"), 0.0);
  EXPECT_EQ(a.values("actor/").count("actor/pg_loss"), 1u);
  LossMetrics c;
  c.add_max("pg_loss", 1.0);
  EXPECT_THROW(a.merge(c), Error);
  EXPECT_THROW(a.value("nope"), Error);
}

}  // namespace
}  // namespace rlcpp
