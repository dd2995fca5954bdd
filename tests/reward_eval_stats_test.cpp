// Eval statistics: accuracy, mean reward, unbiased pass@k and response length percentiles.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>

#include "reward/eval_stats.h"

namespace rlcpp {
namespace {

// pass@k by its definition: the fraction of k-subsets of the n samples that hold at least one correct one
// (samples 0..c-1 are the correct ones).
double pass_at_k_by_enumeration(int n, int c, int k) {
  int64_t subsets = 0, hits = 0;
  for (uint32_t mask = 0; mask < (1u << n); ++mask) {
    if (std::popcount(mask) != k) continue;
    ++subsets;
    hits += (mask & ((1u << c) - 1)) != 0 ? 1 : 0;
  }
  return static_cast<double>(hits) / static_cast<double>(subsets);
}

TEST(PassAtK, MatchesTheDefinitionForEverySmallCase) {
  for (int n = 1; n <= 10; ++n)
    for (int c = 0; c <= n; ++c)
      for (int k = 1; k <= n; ++k)
        EXPECT_NEAR(pass_at_k(n, c, k), pass_at_k_by_enumeration(n, c, k), 1e-12) << n << " " << c << " " << k;
}

TEST(PassAtK, EdgeCasesAndLargeN) {
  EXPECT_EQ(pass_at_k(8, 0, 8), 0.0);
  EXPECT_EQ(pass_at_k(8, 8, 1), 1.0);
  EXPECT_EQ(pass_at_k(8, 1, 8), 1.0);
  EXPECT_NEAR(pass_at_k(10, 3, 1), 0.3, 1e-15);
  EXPECT_NEAR(pass_at_k(1000, 1, 1), 0.001, 1e-15);
  // C(1000, 100) overflows a double; the product form does not.
  double p = pass_at_k(1000, 5, 100);
  EXPECT_TRUE(std::isfinite(p));
  // 1 - C(995,100)/C(1000,100) = 1 - prod_{i=0}^{4} (900 - i) / (1000 - i)
  double miss = 1.0;
  for (int i = 0; i < 5; ++i) miss *= (900.0 - i) / (1000.0 - i);
  EXPECT_NEAR(p, 1.0 - miss, 1e-12);
}

TEST(PassAtK, RejectsImpossibleArguments) {
  EXPECT_THROW(pass_at_k(4, 5, 1), Error);
  EXPECT_THROW(pass_at_k(4, 2, 0), Error);
  EXPECT_THROW(pass_at_k(4, 2, 5), Error);
  EXPECT_THROW(pass_at_k(0, 0, 1), Error);
  EXPECT_THROW(pass_at_k(4, -1, 1), Error);
}

TEST(Percentile, InterpolatesLinearlyLikeNumpy) {
  // numpy.percentile([1, 2, 3, 4, 10], 90) == 7.6, ([10, 1], 25) == 3.25
  EXPECT_NEAR(percentile({1, 2, 3, 4, 10}, 90.0), 7.6, 1e-12);
  EXPECT_NEAR(percentile({10, 1}, 25.0), 3.25, 1e-12);
  EXPECT_EQ(percentile({4, 1, 3, 2}, 50.0), 2.5);
  EXPECT_EQ(percentile({7}, 90.0), 7.0);
  EXPECT_EQ(percentile({5, 1, 9}, 0.0), 1.0);
  EXPECT_EQ(percentile({5, 1, 9}, 100.0), 9.0);
  EXPECT_THROW(percentile({}, 50.0), Error);
  EXPECT_THROW(percentile({1}, 101.0), Error);
}

TEST(EvalStats, AggregatesOverProblemsAndSamples) {
  std::vector<std::vector<SampleOutcome>> per_problem = {
      {{1.0, true, 5}, {0.1, false, 6}, {1.0, true, 5}, {0.0, false, 7}},   // 2 of 4 correct
      {{0.1, false, 6}, {0.1, false, 4}, {0.0, false, 7}, {0.0, false, 7}},  // none
      {{1.0, true, 3}, {1.0, true, 5}, {1.0, true, 5}, {1.0, true, 4}},     // all
  };
  EvalStats s = compute_eval_stats(per_problem);
  EXPECT_EQ(s.problems, 3);
  EXPECT_EQ(s.samples_per_problem, 4);
  EXPECT_DOUBLE_EQ(s.accuracy, 0.5);
  EXPECT_DOUBLE_EQ(s.mean_reward, 6.3 / 12);
  ASSERT_EQ(s.pass_at_k.size(), 4u);
  EXPECT_DOUBLE_EQ(s.pass_at_k[0], 0.5);                   // pass@1 is the accuracy
  EXPECT_DOUBLE_EQ(s.pass_at_k[1], (5.0 / 6 + 0 + 1) / 3);  // 1 - C(2,2)/C(4,2) for the first problem
  EXPECT_DOUBLE_EQ(s.pass_at_k[2], 2.0 / 3);
  EXPECT_DOUBLE_EQ(s.pass_at_k[3], 2.0 / 3);
  // lengths sorted: 3 4 4 5 5 5 5 6 6 7 7 7
  EXPECT_DOUBLE_EQ(s.length.mean, 64.0 / 12);
  EXPECT_EQ(s.length.min, 3);
  EXPECT_EQ(s.length.max, 7);
  EXPECT_DOUBLE_EQ(s.length.p50, 5.0);
  EXPECT_DOUBLE_EQ(s.length.p90, 7.0);
  Json j = eval_stats_to_json(s);
  EXPECT_DOUBLE_EQ(j["pass@2"].get<double>(), s.pass_at_k[1]);
  EXPECT_TRUE(j.contains("pass@4"));
  EXPECT_FALSE(j.contains("pass@5"));
  EXPECT_EQ(j["response_length"]["max"], 7);
  EXPECT_DOUBLE_EQ(j["accuracy"].get<double>(), 0.5);
}

TEST(EvalStats, GreedySingleSampleGivesAccuracyAsPassAtOne) {
  std::vector<std::vector<SampleOutcome>> per_problem = {{{1.0, true, 4}}, {{0.1, false, 5}}, {{0.0, false, 6}}};
  EvalStats s = compute_eval_stats(per_problem);
  EXPECT_DOUBLE_EQ(s.accuracy, 1.0 / 3);
  ASSERT_EQ(s.pass_at_k.size(), 1u);
  EXPECT_DOUBLE_EQ(s.pass_at_k[0], 1.0 / 3);
  EXPECT_DOUBLE_EQ(s.mean_reward, 1.1 / 3);
  EXPECT_DOUBLE_EQ(s.length.p50, 5.0);
  EXPECT_DOUBLE_EQ(s.length.p90, 5.8);
}

TEST(EvalStats, AccuracyPerClassCountsEachClassOwnProblems) {
  // Two samples per problem; classes "3+2" (problems 0, 2), "3+3" (problem 1), none for problem 3.
  const std::vector<std::vector<SampleOutcome>> per_problem = {
      {{1.0, true, 4}, {0.1, false, 4}}, {{1.0, true, 4}, {1.0, true, 4}}, {{0.1, false, 4}, {0.1, false, 4}},
      {{1.0, true, 4}, {1.0, true, 4}}};
  EvalStats s = compute_eval_stats(per_problem, {"3+2", "3+3", "3+2", ""});
  ASSERT_EQ(s.classes.size(), 2u);
  EXPECT_EQ(s.classes[0].label, "3+2");
  EXPECT_EQ(s.classes[0].problems, 2);
  EXPECT_DOUBLE_EQ(s.classes[0].accuracy, 0.25);  // 1 of 4 samples
  EXPECT_EQ(s.classes[1].label, "3+3");
  EXPECT_EQ(s.classes[1].problems, 1);
  EXPECT_DOUBLE_EQ(s.classes[1].accuracy, 1.0);
  EXPECT_DOUBLE_EQ(s.accuracy, 5.0 / 8);  // the unlabelled problem still counts overall
  const Json j = eval_stats_to_json(s);
  EXPECT_DOUBLE_EQ(j["by_class"]["3+2"]["accuracy"].get<double>(), 0.25);
  EXPECT_EQ(j["by_class"]["3+3"]["problems"].get<int64_t>(), 1);
  // Without labels there is no breakdown; labels must match the problems.
  EXPECT_TRUE(compute_eval_stats(per_problem).classes.empty());
  EXPECT_FALSE(eval_stats_to_json(compute_eval_stats(per_problem)).contains("by_class"));
  EXPECT_THROW(compute_eval_stats(per_problem, {"3+2"}), Error);
}

TEST(EvalStats, RejectsRaggedEmptyOrNonFiniteInput) {
  EXPECT_THROW(compute_eval_stats({}), Error);
  EXPECT_THROW(compute_eval_stats({{}}), Error);
  EXPECT_THROW(compute_eval_stats({{{1.0, true, 3}}, {{1.0, true, 3}, {0.0, false, 2}}}), Error);
  EXPECT_THROW(compute_eval_stats({{{std::nan(""), true, 3}}}), Error);
  EXPECT_THROW(compute_eval_stats({{{1.0, true, -1}}}), Error);
}

}  // namespace
}  // namespace rlcpp
