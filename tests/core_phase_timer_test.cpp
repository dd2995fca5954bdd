// The step's phase timer: `other` is the step's remainder, and the whole percents the step line prints add up
// to exactly 100 whatever the shares' rounding.
#include <gtest/gtest.h>

#include <numeric>

#include "core/phase_timer.h"

namespace rlcpp {
namespace {

int sum_of(const std::array<int, kNumPhases>& percents) { return std::accumulate(percents.begin(), percents.end(), 0); }

TEST(PhaseTimer, WholePercentsGiveTheLeftoverPointsToTheLargestRemainders) {
  // Seconds added from elsewhere, far past the step's own few microseconds: `other` comes out below 0 and
  // counts as none.
  PhaseTimer thirds;
  thirds.add(Phase::kRollout, 1.0);
  thirds.add(Phase::kOldLogprob, 1.0);
  thirds.add(Phase::kUpdateActor, 1.0);
  thirds.finish();
  const std::array<int, kNumPhases> p = thirds.whole_percents();
  EXPECT_EQ(p[static_cast<int>(Phase::kRollout)], 34);  // 33.3 each: the first of the equal remainders
  EXPECT_EQ(p[static_cast<int>(Phase::kOldLogprob)], 33);
  EXPECT_EQ(p[static_cast<int>(Phase::kUpdateActor)], 33);
  EXPECT_EQ(p[static_cast<int>(Phase::kOther)], 0);
  EXPECT_EQ(sum_of(p), 100);

  PhaseTimer sevenths;  // 1/7 each of seven phases: 14.29 % rounds down to 14 seven times (98)
  for (Phase phase : {Phase::kRollout, Phase::kReward, Phase::kOldLogprob, Phase::kMismatch, Phase::kUpdateActor,
                      Phase::kWeightSync, Phase::kProbe})
    sevenths.add(phase, 1.0);
  sevenths.finish();
  EXPECT_EQ(sum_of(sevenths.whole_percents()), 100);

  PhaseTimer two_to_one;
  two_to_one.add(Phase::kUpdateActor, 2.0);
  two_to_one.add(Phase::kRollout, 1.0);
  two_to_one.finish();
  EXPECT_EQ(two_to_one.whole_percents()[static_cast<int>(Phase::kUpdateActor)], 67);
  EXPECT_EQ(two_to_one.whole_percents()[static_cast<int>(Phase::kRollout)], 33);
}

TEST(PhaseTimer, AStepWithNoTimedPhaseIsAllOther) {
  PhaseTimer timer;
  timer.finish();
  const std::array<int, kNumPhases> p = timer.whole_percents();
  EXPECT_EQ(p[static_cast<int>(Phase::kOther)], 100);
  EXPECT_EQ(sum_of(p), 100);
  EXPECT_STREQ(phase_name(Phase::kMismatch), "mismatch");
}

}  // namespace
}  // namespace rlcpp
