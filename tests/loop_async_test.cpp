// The async pipeline (async.max_staleness, loop/rollout_pipeline.h): each step trains on samples exactly N policy
// versions old, the phases still add up to the step's wall time, and pending draws survive a checkpoint exactly.
// (That timing never chooses the samples: app_train_split_test's throttled async run; resume: loop_resume_test.)
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "core/phase_timer.h"
#include "loop/controller.h"
#include "loop/step_draws.h"
#include "tests/error_test_support.h"
#include "tests/train_test_support.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

TrainConfig async_run(const fs::path& root, int64_t max_staleness) {
  TrainConfig c = small_grpo_run(small_train_checkpoint(root / "init"), 5);
  // The random model's first steps may score nothing (which ones do depends on the compiler's bits), and zero
  // advantages leave the policy as it was: an entropy bonus makes every step change it, so staleness shows.
  c.algorithm.policy_loss.entropy_coef = 0.01;
  c.async.max_staleness = max_staleness;
  c.run_dir = (root / ("staleness" + std::to_string(max_staleness))).string();
  return c;
}

std::vector<Json> run_metrics(const TrainConfig& c) {
  const TrainSummary s = run_train(c, config_to_json(c));
  return read_jsonl(fs::path(s.run_dir) / "metrics.jsonl");
}

// Step k samples with version max(0, k - 1 - N) and learns at version k - 1: staleness min(N, k - 1).
TEST(LoopAsync, EveryStepTrainsOnSamplesStalenessVersionsOld) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_async_staleness_test";
  fs::remove_all(root);
  const std::vector<Json> sync = run_metrics(async_run(root, 0));
  for (int64_t n : {1, 2}) {
    const std::vector<Json> m = run_metrics(async_run(root, n));
    ASSERT_EQ(m.size(), 5u);
    for (int64_t k = 1; k <= 5; ++k) {
      const Json& r = m[static_cast<size_t>(k - 1)];
      EXPECT_EQ(r["rollout/policy_version"], static_cast<double>(std::max<int64_t>(0, k - 1 - n)))
          << "N " << n << " step " << k;
      EXPECT_EQ(r["training/off_policy/staleness_max"], static_cast<double>(std::min(n, k - 1)));
      EXPECT_EQ(r["training/off_policy/dropped_samples"], 0.0);
      EXPECT_EQ(r["policy_version"], static_cast<double>(k));
      // The trainer's old log-probs are of the policy it holds, the rollout's of an older one: the mismatch
      // figures (and so TIS/MIS, which weigh by their ratio) see the staleness; fresh samples agree bit for bit.
      if (k == 1)
        EXPECT_EQ(r["mismatch/max_abs_dlogp"], 0.0);
      else
        EXPECT_GT(r["mismatch/max_abs_dlogp"].get<double>(), 0.0) << "N " << n << " step " << k;
      // The shares still add up: the phases (rollout = the exposed wait) sum to the step's wall time.
      double phases = 0;
      for (int p = 0; p < kNumPhases; ++p)
        phases += r[std::string("timing_s/") + phase_name(static_cast<Phase>(p))].get<double>();
      EXPECT_NEAR(phases, r["timing_s/step"].get<double>(), 1e-9);
      EXPECT_LE(r["timing_s/rollout_exposed"].get<double>(), r["timing_s/rollout"].get<double>() + 1e-12);
      // The last N steps start no draws: nothing runs behind them.
      if (k > 5 - n) EXPECT_EQ(r["timing_s/rollout_wall"], 0.0);
      else EXPECT_GT(r["timing_s/rollout_wall"].get<double>(), 0);
    }
    // Step 1 draws with the initial policy in both modes, so it is the synchronous run's; later steps differ.
    EXPECT_EQ(m[0]["reward/mean"], sync[0]["reward/mean"]);
    EXPECT_EQ(m[0]["actor/entropy"], sync[0]["actor/entropy"]);
    EXPECT_NE(m[1]["actor/entropy"], sync[1]["actor/entropy"]);
  }
  EXPECT_FALSE(sync[0].contains("timing_s/rollout_wall"));  // the synchronous loop has no background draws
}

StepDraws small_draws() {
  StepDraws d;
  d.step = 7;
  d.policy_version = 5;
  d.draws = 2;
  d.cap_reached = true;
  d.drawn.problems.push_back({"12+3=", "15", Json{{"a", 12}, {"b", 3}}, 18446744073709551615ull});
  Sample s;
  s.prompt_index = 0;
  s.sample_index = 1;
  s.tokens = {4, 9, 2};
  s.logprobs = {-0.1f, -1e-7f, -3.4028235e38f};
  s.finish_reason = FinishReason::kEos;
  s.policy_version = s.last_policy_version = 5;
  s.scheduled_s = 0.25;
  s.scoring = LogprobScoring{0.7f, Truncation{5, 0.9f}};
  d.drawn.rollout.samples.push_back(s);
  d.drawn.rollout.stats.sequences = 1;
  d.drawn.rollout.stats.generated_tokens = 3;
  RolloutSample t;
  t.prompt = {1, 5};
  t.response = s.tokens;
  t.rollout_logp = s.logprobs;
  t.scoring = s.scoring;
  d.drawn.samples.push_back(t);
  d.drawn.rewards.push_back({0.5, {{"correct", 1}, {"format", 0.5}}, true});
  return d;
}

TEST(LoopAsync, PendingDrawsRoundTripExactlyAndBadOnesAreNamed) {
  const StepDraws d = small_draws();
  const Json j = step_draws_to_json(d);
  const StepDraws back = step_draws_from_json(Json::parse(j.dump()), "pending");
  EXPECT_EQ(step_draws_to_json(back), j);
  EXPECT_EQ(back.drawn.rollout.samples[0].logprobs, d.drawn.rollout.samples[0].logprobs);  // floats exact
  EXPECT_EQ(back.drawn.problems[0].id, 18446744073709551615ull);
  EXPECT_EQ(back.drawn.rewards[0].components, d.drawn.rewards[0].components);  // in order
  EXPECT_EQ(back.drawn.rollout.stats.generated_tokens, 3);
  // The scoring a pending step's samples were drawn with survives: the resumed step scores them at it.
  EXPECT_TRUE(back.drawn.samples[0].scoring == d.drawn.samples[0].scoring) << back.drawn.samples[0].scoring.describe();
  EXPECT_TRUE(back.drawn.rollout.samples[0].scoring == d.drawn.rollout.samples[0].scoring);
  Json unscored = j, rescored = j, cold = j;
  unscored["trainer_samples"][0].erase("scoring");  // a file written before samples carried their scoring
  rescored["trainer_samples"][0]["scoring"]["temperature"] = 1.0;
  cold["samples"][0]["scoring"]["temperature"] = 0.0;
  for (const auto& [bad, needle] : std::vector<std::pair<Json, std::string>>{
           {unscored, "pending trainer_samples[0]: no key 'scoring' (the temperature and truncation the sample was "
                      "drawn with"},
           {rescored, "samples[0] was drawn at temperature 0.7, top_k 5, top_p 0.9 but trainer_samples[0] is to be "
                      "scored at temperature 1, top_k 5, top_p 0.9"},
           {cold, "samples[0] scoring: temperature 0 is not"}}) {
    const Json& file = bad;  // clang 14 cannot capture a structured binding
    const std::string e = error_of([&] { step_draws_from_json(file, "pending"); });
    EXPECT_NE(e.find(needle), std::string::npos) << e;
  }

  Json older = j;
  older["samples"][0]["policy_version"] = 4;
  EXPECT_NE(error_of([&] { step_draws_from_json(older, "pending"); }).find("samples[0] was sampled by policy version 4"),
            std::string::npos);
  Json missing = j;
  missing.erase("rewards");
  EXPECT_NE(error_of([&] { step_draws_from_json(missing, "ckpt/pending_rollouts.json [0]"); })
                .find("ckpt/pending_rollouts.json [0]: missing key 'rewards'"),
            std::string::npos);
  Json wrong = j;
  wrong["trainer_samples"][0]["response"] = {4, 9};
  EXPECT_NE(error_of([&] { step_draws_from_json(wrong, "pending"); }).find("disagree"), std::string::npos);
  Json reason = j;
  reason["samples"][0]["finish_reason"] = "timeout";
  EXPECT_NE(error_of([&] { step_draws_from_json(reason, "pending"); }).find("samples[0]: key 'finish_reason'"),
            std::string::npos);
    Json typed = j;
  typed["problems"][0]["id"] = "x";
  EXPECT_NE(error_of([&] { step_draws_from_json(typed, "pending"); }).find("problems[0]: key 'id' has the wrong type"),
            std::string::npos);
}

TEST(LoopAsync, ConfigBoundIsChecked) {
  TrainConfig c;
  c.async.max_staleness = -1;
  EXPECT_NE(error_of([&] { c.validate(); }).find("async.max_staleness"), std::string::npos);
}

}  // namespace
}  // namespace rlcpp
