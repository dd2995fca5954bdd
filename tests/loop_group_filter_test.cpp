// filter_groups (DAPO dynamic sampling): which groups survive, the max_groups cap, the metrics, the refusal of a
// batch that is not prompt-major, and the config checks. A filtered GRPO run is exercised by loop_train_test.
#include <gtest/gtest.h>

#include "core/error.h"
#include "trainer/scored_batch.h"
#include "loop/group_filter.h"
#include "loop/train_config.h"
#include "tests/error_test_support.h"

namespace rlcpp {
namespace {

// Groups of `group` samples with the given scores (prompt-major); sample i's response is the single token i, so
// a kept sample can be traced back.
ScoredBatch batch_of(const std::vector<std::vector<float>>& group_scores) {
  ScoredBatch b;
  int64_t index = 0;
  for (size_t g = 0; g < group_scores.size(); ++g) {
    for (float score : group_scores[g]) {
      RolloutSample s;
      s.prompt = {1, 5};
      s.response = {static_cast<int32_t>(index)};
      b.samples.push_back(s);
      b.scores.push_back(score);
      b.group_ids.push_back(static_cast<int64_t>(g));
      b.rollout_index.push_back(index++);
    }
  }
  return b;
}

TEST(GroupFilter, KeepsOnlyGroupsWithARewardSpreadInOrder) {
  ScoredBatch b = batch_of({{1, 1, 1}, {0, 1, 1}, {0.1f, 0.1f, 0.1f}, {0, 0, 0.1f}, {1, 1, 1}});
  std::map<std::string, double> m;
  filter_informative_groups(b, 3, FilterGroupsConfig{true, 0}, m);
  ASSERT_EQ(b.samples.size(), 6u);
  EXPECT_EQ(b.rollout_index, (std::vector<int64_t>{3, 4, 5, 9, 10, 11}));
  EXPECT_EQ(b.group_ids, (std::vector<int64_t>{1, 1, 1, 3, 3, 3}));
  EXPECT_EQ(b.scores, (std::vector<float>{0, 1, 1, 0, 0, 0.1f}));
  for (size_t i = 0; i < b.samples.size(); ++i) EXPECT_EQ(b.samples[i].response[0], b.rollout_index[i]);
  EXPECT_EQ(m["filter/informative_groups"], 2);
  EXPECT_EQ(m["filter/kept_groups"], 2);
  EXPECT_DOUBLE_EQ(m["filter/kept_fraction"], 2.0 / 5.0);
}

// The kept batch is scored as the whole one was: its temperature and (logprob_space "sampled") its truncation. The
// truncation used to be dropped, so the old log-probs of a filtered batch were of the whole vocabulary.
TEST(GroupFilter, KeptBatchKeepsTheTemperatureAndTruncation) {
  ScoredBatch b = batch_of({{0, 1}, {1, 1}});
  b.temperature = 0.7f;
  b.truncation = Truncation{5, 0.9f};
  std::map<std::string, double> m;
  filter_informative_groups(b, 2, FilterGroupsConfig{true, 0}, m);
  ASSERT_EQ(b.samples.size(), 2u);
  EXPECT_EQ(b.temperature, 0.7f);
  EXPECT_TRUE(b.truncation == (Truncation{5, 0.9f})) << b.truncation.top_k << " " << b.truncation.top_p;
}

TEST(GroupFilter, MaxGroupsKeepsTheFirstInformativeOnes) {
  ScoredBatch b = batch_of({{1, 0}, {1, 1}, {0, 1}, {0.1f, 1}, {0, 0}});
  std::map<std::string, double> m;
  filter_informative_groups(b, 2, FilterGroupsConfig{true, 2}, m);
  EXPECT_EQ(b.rollout_index, (std::vector<int64_t>{0, 1, 4, 5}));
  EXPECT_EQ(m["filter/informative_groups"], 3);
  EXPECT_EQ(m["filter/kept_groups"], 2);
}

TEST(GroupFilter, AllTiedLeavesAnEmptyBatch) {
  ScoredBatch b = batch_of({{1, 1}, {0, 0}});
  std::map<std::string, double> m;
  filter_informative_groups(b, 2, FilterGroupsConfig{true, 0}, m);
  EXPECT_TRUE(b.samples.empty());
  EXPECT_TRUE(b.scores.empty());
  EXPECT_EQ(m["filter/kept_fraction"], 0);
}

TEST(GroupFilter, RefusesABatchThatIsNotPromptMajor) {
  ScoredBatch b = batch_of({{1, 0}, {1, 0}});
  std::swap(b.group_ids[1], b.group_ids[2]);
  std::map<std::string, double> m;
  EXPECT_THROW(filter_informative_groups(b, 2, FilterGroupsConfig{true, 0}, m), Error);
  ScoredBatch odd = batch_of({{1, 0, 1}});
  EXPECT_THROW(filter_informative_groups(odd, 2, FilterGroupsConfig{true, 0}, m), Error);
}

TEST(GroupFilter, CountsGroupsWithASpread) {
  const std::vector<float> scores = {1, 1, 0, 0, 0, 1, 0.5f, 0.5f};
  EXPECT_EQ(count_informative_groups(scores, 2), 1);
  EXPECT_EQ(count_informative_groups(scores, 4), 2);
  EXPECT_EQ(count_informative_groups(scores, 1), 0);
  EXPECT_EQ(count_informative_groups(scores, 8), 1);
  EXPECT_THROW(count_informative_groups(scores, 3), Error);
}

TEST(GroupFilter, ConfigChecksNameTheirKeys) {
  TrainConfig c;
  c.filter_groups.enabled = true;
  c.filter_groups.max_groups = 32;
  c.rollout.prompts_per_step = 128;
  EXPECT_NO_THROW(c.validate());
  EXPECT_EQ(c.update_batch_size(), 32 * 8);
  c.filter_groups.max_groups = 129;
  try {
    c.validate();
    FAIL() << "max_groups past prompts_per_step accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("filter_groups.max_groups"), std::string::npos) << e.what();
  }
  // With refill, max_groups may reach over several draws' prompts.
  c.filter_groups.max_draws = 2;
  EXPECT_NO_THROW(c.validate());
  EXPECT_EQ(c.update_batch_size(), 129 * 8);
  c.filter_groups.max_groups = 257;
  auto error_of_validate = [&] { return error_of([&] { c.validate(); }); };
  EXPECT_NE(error_of_validate().find("x filter_groups.max_draws = 256], got 257"), std::string::npos);
  c.filter_groups.max_groups = 0;  // refill needs a target
  EXPECT_NE(error_of_validate().find("'filter_groups.max_draws': refilling (2 draws) needs"), std::string::npos);
  c.filter_groups.max_draws = 0;
  EXPECT_NE(error_of_validate().find("'filter_groups.max_draws': must be in [1, 1000], got 0"), std::string::npos);
  c.filter_groups.max_draws = 1;
  EXPECT_EQ(c.update_batch_size(), 128 * 8);
  c.algorithm = algorithm_defaults("ppo");
  try {
    c.validate();
    FAIL() << "filter_groups with PPO accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("filter_groups.enabled"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rlcpp
