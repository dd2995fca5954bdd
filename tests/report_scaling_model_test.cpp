// The scaling model (report/scaling_model.h) on fixed inputs, worked by hand: core-seconds spread over the cores
// a layout gives each side, a publish per worker, a ring all-reduce, the synchronous sum and the async maximum;
// and the base it takes from a run's records (the middle half of its steps).
#include <gtest/gtest.h>

#include "report/scaling_model.h"
#include "tests/error_test_support.h"

namespace rlcpp {
namespace {

ScalingBase fixed_base() {
  ScalingBase b;
  b.layout.workers = 1;
  b.layout.worker_threads = 2;
  b.layout.ranks = 1;
  b.layout.rank_threads = 2;
  b.layout.cores = 2;
  b.rollout_s = 0.1;
  b.learn_s = 0.2;
  b.sync_s = 0.01;
  b.fixed_s = 0.02;
  b.parameters = 1e6;
  b.layers = 4;
  return b;
}

TEST(ScalingModel, TheBaseLayoutGivesTheBaseStep) {
  const ScalingPrediction p = predict_step(fixed_base(), fixed_base().layout, {});
  EXPECT_DOUBLE_EQ(p.step_s, 0.1 + 0.2 + 0.01 + 0.02);
  EXPECT_DOUBLE_EQ(p.rollout_share, 0.1 / 0.33);
  EXPECT_EQ(p.allreduce_s, 0);
  EXPECT_EQ(p.dominant, "learning");
}

TEST(ScalingModel, WorkersAndRanksOnMachinesOfTheirOwn) {
  ScalingLinks links;
  links.bandwidth_bytes_per_s = 1e9;
  links.latency_s = 20e-6;
  ScalingLayout l = fixed_base().layout;
  l.cores = 0;
  l.workers = 2;  // 0.2 core-s of rollout over 4 cores; 2 publishes of max(0.01, 4 MB / 1 GB/s = 4 ms)
  l.ranks = 4;    // 0.4 core-s of learning over 8 cores; ring: 2 * 3/4 * 4 MB / 1 GB/s + 5 buckets * 20 us * log2 4
  const ScalingPrediction p = predict_step(fixed_base(), l, links);
  EXPECT_DOUBLE_EQ(p.rollout_s, 0.05);
  EXPECT_DOUBLE_EQ(p.learn_s, 0.05);
  EXPECT_DOUBLE_EQ(p.sync_s, 0.02);
  EXPECT_NEAR(p.allreduce_s, 0.006 + 0.0002, 1e-12);
  EXPECT_NEAR(p.step_s, 0.05 + 0.05 + 0.0062 + 0.02 + 0.02, 1e-12);
  // Async: the rollout hides behind the trainer's side.
  l.async = true;
  EXPECT_NEAR(predict_step(fixed_base(), l, links).step_s, 0.05 + 0.0062 + 0.02 + 0.02, 1e-12);
  // Many workers: the sync, one publish each, takes over.
  l.workers = 64;
  EXPECT_EQ(predict_step(fixed_base(), l, links).dominant, "weight sync");
}

TEST(ScalingModel, OverlapOnSharedCoresIsNoFasterThanAllTheWorkOverThem) {
  ScalingLayout l = fixed_base().layout;
  l.async = true;  // 0.2 + 0.4 core-s over 2 cores = 0.3 s, + sync and the rest
  const ScalingPrediction p = predict_step(fixed_base(), l, {});
  EXPECT_NEAR(p.step_s, 0.3 + 0.01 + 0.02, 1e-12);
}

TEST(ScalingModel, BaseFromRecordsAveragesTheMiddleHalfOfTheStepsAfterTheWarmUp) {
  std::vector<Json> records;
  for (int step = 1; step <= 9; ++step) {
    Json r = {{"step", step}, {"dp/ranks", 2}, {"layout/threads", 1}, {"layout/workers", 3}, {"layout/cores", 2}};
    // The first step, slow, is left out; of steps 2..9 (times 2, 3, ..., 8 and an outlier of 100) the middle
    // half by step time is 4, 5, 6, 7.
    const double s = step == 1 ? 10.0 : step == 9 ? 100.0 : step;
    for (const char* p : {"rollout", "reward", "old_logprob", "ref_logprob", "values", "advantage", "update_actor",
                          "update_critic", "weight_sync", "probe", "other", "eval", "checkpoint"})
      r[std::string("timing_s/") + p] = 0.0;
    // Parts that move apart (rollout up, the update down), so medians part by part would not add up.
    r["timing_s/rollout"] = 0.1 * s * s;
    r["timing_s/update_actor"] = 1.0 / s;
    r["actor/allreduce_wait_s"] = 0.01 * s;
    r["timing_s/step"] = 0.1 * s * s + 1.0 / s;
    records.push_back(r);
  }
  const ScalingBase b = scaling_base_from_records(records, 1, 5e5, 2, false);
  EXPECT_DOUBLE_EQ(b.rollout_s, 0.1 * (16 + 25 + 36 + 49) / 4);
  EXPECT_DOUBLE_EQ(b.learn_s, (1.0 / 4 + 1.0 / 5 + 1.0 / 6 + 1.0 / 7) / 4 - 0.055);
  EXPECT_NEAR(b.step_s, b.rollout_s + b.learn_s + 0.055, 1e-12);  // the parts add up to the step
  EXPECT_EQ(b.layout.ranks, 2);
  EXPECT_EQ(b.layout.workers, 3);
  EXPECT_EQ(b.layout.cores, 2);
  records[2].erase("timing_s/weight_sync");
  EXPECT_NE(error_of([&] { scaling_base_from_records(records, 1, 5e5, 2, false); })
                .find("step 3 has no number 'timing_s/weight_sync'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { scaling_base_from_records(records, 9, 5e5, 2, false); }).find("no step after the first 9"),
            std::string::npos);
}

}  // namespace
}  // namespace rlcpp
