// DAPO's soft overlong punishment (reward/overlong_penalty.h) against verl's formula, worked by hand.
#include <gtest/gtest.h>

#include "core/error.h"
#include "reward/overlong_penalty.h"
#include "tests/error_test_support.h"

namespace rlcpp {
namespace {

TEST(OverlongPenalty, GrowsLinearlyOverTheBufferAsVerlComputesIt) {
  OverlongBufferConfig cfg;
  cfg.enabled = true;
  cfg.len = 4;
  cfg.penalty_factor = 1.0;
  // max_new_tokens 10: expected length 6; 7 tokens -> -(1/4), 10 -> -1.
  EXPECT_EQ(overlong_penalty(1, 10, cfg), 0.0);
  EXPECT_EQ(overlong_penalty(6, 10, cfg), 0.0);
  EXPECT_DOUBLE_EQ(overlong_penalty(7, 10, cfg), -0.25);
  EXPECT_DOUBLE_EQ(overlong_penalty(9, 10, cfg), -0.75);
  EXPECT_DOUBLE_EQ(overlong_penalty(10, 10, cfg), -1.0);
  cfg.penalty_factor = 0.5;
  EXPECT_DOUBLE_EQ(overlong_penalty(10, 10, cfg), -0.5);
  cfg.enabled = false;
  EXPECT_EQ(overlong_penalty(10, 10, cfg), 0.0);
}

TEST(OverlongPenalty, IsAddedToTheTotalWithItsComponents) {
  OverlongBufferConfig cfg;
  cfg.enabled = true;
  cfg.len = 2;
  std::vector<RewardResult> results(3);
  results[0].total = 1.0;
  results[1].total = 1.0;
  results[2].total = 0.0;
  const std::vector<int64_t> lengths = {3, 5, 6};  // max 6: expected 4
  apply_overlong_penalty(results, lengths, 6, cfg);
  EXPECT_DOUBLE_EQ(results[0].total, 1.0);
  EXPECT_DOUBLE_EQ(results[1].total, 0.5);
  EXPECT_DOUBLE_EQ(results[2].total, -1.0);
  const auto means = mean_reward_components(results);
  auto mean_of = [&](const std::string& name) {
    for (const auto& [n, v] : means)
      if (n == name) return v;
    return static_cast<double>(NAN);
  };
  EXPECT_DOUBLE_EQ(mean_of("overlong_penalty"), -0.5);
  EXPECT_DOUBLE_EQ(mean_of("overlong"), 2.0 / 3.0);
  EXPECT_THROW(apply_overlong_penalty(results, std::vector<int64_t>{1}, 6, cfg), Error);
}

TEST(OverlongPenalty, ConfigChecksNameTheKey) {
  OverlongBufferConfig cfg;
  cfg.validate("reward.overlong_buffer", 6);  // disabled: nothing to check
  cfg.enabled = true;
  auto error_for = [&](int64_t max_new_tokens) {
    return error_of([&] { cfg.validate("reward.overlong_buffer", max_new_tokens); });
  };
  EXPECT_NE(error_for(6).find("reward.overlong_buffer.len: must be in [1, rollout.sampling.max_new_tokens = 6], got 0"),
            std::string::npos);
  cfg.len = 7;
  EXPECT_NE(error_for(6).find("got 7"), std::string::npos);
  cfg.len = 2;
  cfg.penalty_factor = -1;
  EXPECT_NE(error_for(6).find("reward.overlong_buffer.penalty_factor"), std::string::npos);
  cfg.penalty_factor = 1;
  EXPECT_EQ(error_for(6), "<no error>");
}

}  // namespace
}  // namespace rlcpp
