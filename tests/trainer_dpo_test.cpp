// DPO steps through the real model: log 2 at the reference, the same step over 1 or 4 micro-batches, and a
// toy preference set whose margin and pair accuracy rise (also on held-out pairs).
#include <gtest/gtest.h>

#include <cmath>

#include "tests/host_context.h"
#include "tests/trainer_test_support.h"
#include "trainer/dpo_step.h"

namespace rlcpp {
namespace {

using testing::host;

using test::max_rel_diff;
using test::same_bytes;
using test::small_model_config;

constexpr int32_t kEos = 2, kDigit0 = 3;

// BOS + three digits; chosen repeats the first digit, rejected says the next one (mod 10); both end in EOS.
std::vector<PreferencePair> toy_pairs(uint64_t seed, size_t n) {
  PhiloxStream rng(seed, 0);
  std::vector<PreferencePair> out(n);
  for (auto& p : out) {
    p.prompt = {1};
    for (int k = 0; k < 3; ++k) p.prompt.push_back(kDigit0 + static_cast<int32_t>(rng.below(10)));
    const int32_t d = p.prompt[1] - kDigit0;
    p.chosen = {kDigit0 + d, kEos};
    p.rejected = {kDigit0 + (d + 1) % 10, kEos};
  }
  return out;
}

TEST(DpoStep, LossIsLogTwoAtTheReference) {
  const ModelConfig mc = small_model_config();
  const Transformer model(mc);
  ParameterStore params = init_random(mc, 80);
  const ParameterStore reference = params.clone();
  const ParameterStore reference_before = reference.clone();
  PolicyUpdater u(model, params, OptimConfig{});
  DpoConfig cfg;
  cfg.beta = 0.5;
  const auto pairs = toy_pairs(81, 8);
  const UpdateResult r = dpo_step(u, &reference, pairs, cfg, 3, 10);  // 3 micro-batches: 3 + 3 + 2 pairs
  EXPECT_NEAR(r.loss, std::log(2.0), 1e-6);
  EXPECT_NEAR(r.metrics.value("dpo_loss"), std::log(2.0), 1e-6);
  EXPECT_EQ(r.metrics.value("dpo_reward_margin"), 0.0);
  EXPECT_EQ(r.metrics.value("dpo_accuracy"), 0.0);  // no pair is strictly preferred yet
  EXPECT_GT(r.grad_norm, 0.0);
  EXPECT_FALSE(same_bytes(params.flat(), reference.flat())) << "the policy moved";
  EXPECT_TRUE(same_bytes(reference.flat(), reference_before.flat())) << "the reference is frozen";
  // After the step the policy is ahead of its reference on these pairs.
  const LossMetrics after = dpo_evaluate(host(), model, params, &reference, pairs, cfg, 4);
  EXPECT_LT(after.value("dpo_loss"), std::log(2.0));
  EXPECT_GT(after.value("dpo_reward_margin"), 0.0);
}

TEST(DpoStep, OneAndFourMicroBatchesGiveTheSameStep) {
  const ModelConfig mc = small_model_config();
  const Transformer model(mc);
  const ParameterStore start = init_random(mc, 82);
  ParameterStore reference = start.clone();
  for (int64_t i = 0; i < reference.numel(); i += 7) reference.flat().data<float>()[i] *= 1.5f;  // not at log 2
  const auto pairs = toy_pairs(83, 8);
  auto run = [&](int64_t micro) {
    ParameterStore params = start.clone();
    OptimConfig oc;
    oc.grad_clip = 0;
    PolicyUpdater u(model, params, oc);
    UpdateResult r = dpo_step(u, &reference, pairs, DpoConfig{}, micro, 10);
    return std::pair{r, u.grads().clone()};
  };
  const auto [one, g1] = run(8);
  const auto [four, g4] = run(2);
  EXPECT_NE(one.loss, std::log(2.0));
  EXPECT_NEAR(four.loss, one.loss, 1e-6 * std::abs(one.loss));
  EXPECT_LE(max_rel_diff(g1.flat().data<float>(), g4.flat().data<float>(), g1.numel()), 1e-6);
  for (const auto& [name, value] : one.metrics.values())
    EXPECT_NEAR(four.metrics.value(name), value, 1e-6 * std::max(1.0, std::abs(value))) << name;
}

TEST(DpoStep, RaisesTheMarginAndPairAccuracyOnAToyPreferenceSet) {
  const ModelConfig mc = small_model_config();
  const Transformer model(mc);
  ParameterStore params = init_random(mc, 84);
  const ParameterStore reference = params.clone();
  OptimConfig oc;
  oc.lr = 3e-3;
  PolicyUpdater u(model, params, oc);
  DpoConfig cfg;
  cfg.beta = 0.5;
  const auto train = toy_pairs(85, 64), held_out = toy_pairs(86, 32);
  const LossMetrics before = dpo_evaluate(host(), model, params, &reference, held_out, cfg, 16);
  constexpr int kSteps = 30, kBatch = 16;
  for (int step = 0; step < kSteps; ++step) {
    const std::span<const PreferencePair> batch(train.data() + (step * kBatch) % train.size(), kBatch);
    ASSERT_FALSE(dpo_step(u, &reference, batch, cfg, 8, kSteps).skipped);
  }
  const LossMetrics on_train = dpo_evaluate(host(), model, params, &reference, train, cfg, 16);
  const LossMetrics on_held_out = dpo_evaluate(host(), model, params, &reference, held_out, cfg, 16);
  std::printf("held-out: loss %.4f -> %.4f, margin %.3f -> %.3f, accuracy %.2f -> %.2f (train accuracy %.2f)\n",
              before.value("dpo_loss"), on_held_out.value("dpo_loss"), before.value("dpo_reward_margin"),
              on_held_out.value("dpo_reward_margin"), before.value("dpo_accuracy"), on_held_out.value("dpo_accuracy"),
              on_train.value("dpo_accuracy"));
  EXPECT_NEAR(before.value("dpo_loss"), std::log(2.0), 1e-6);
  EXPECT_GE(on_train.value("dpo_accuracy"), 0.9);
  EXPECT_GT(on_train.value("dpo_reward_margin"), 0.5);
  EXPECT_GE(on_held_out.value("dpo_accuracy"), 0.8);
  EXPECT_LT(on_held_out.value("dpo_loss"), 0.5);
}

// Every preference loss (trainer/dpo_loss.h) learns the toy preference: SimPO without a reference at all.
class DpoVariant : public ::testing::TestWithParam<const char*> {};

TEST_P(DpoVariant, LearnsTheToyPreference) {
  const std::string variant = GetParam();
  const ModelConfig mc = small_model_config();
  const Transformer model(mc);
  ParameterStore params = init_random(mc, 84);
  const ParameterStore frozen = params.clone();
  DpoConfig cfg;
  cfg.beta = 0.5;
  if (variant == "cdpo") cfg.label_smoothing = 0.1;
  if (variant == "robust") cfg.loss_type = "robust", cfg.label_smoothing = 0.2;
  if (variant == "ipo") cfg.loss_type = "ipo", cfg.beta = 0.1;
  if (variant == "simpo") cfg.loss_type = "simpo", cfg.beta = 2.0, cfg.simpo_gamma = 0.5;
  const ParameterStore* reference = cfg.uses_reference() ? &frozen : nullptr;
  OptimConfig oc;
  oc.lr = 3e-3;
  PolicyUpdater u(model, params, oc);
  const auto train = toy_pairs(85, 64), held_out = toy_pairs(86, 32);
  const LossMetrics before = dpo_evaluate(host(), model, params, reference, held_out, cfg, 16);
  constexpr int kSteps = 30, kBatch = 16;
  for (int step = 0; step < kSteps; ++step) {
    const std::span<const PreferencePair> batch(train.data() + (step * kBatch) % train.size(), kBatch);
    ASSERT_FALSE(dpo_step(u, reference, batch, cfg, 8, kSteps).skipped);
  }
  const LossMetrics after = dpo_evaluate(host(), model, params, reference, held_out, cfg, 16);
  std::printf("%s: held-out loss %.4f -> %.4f, margin %.3f -> %.3f, accuracy %.2f -> %.2f\n", variant.c_str(),
              before.value("dpo_loss"), after.value("dpo_loss"), before.value("dpo_reward_margin"),
              after.value("dpo_reward_margin"), before.value("dpo_accuracy"), after.value("dpo_accuracy"));
  EXPECT_LT(after.value("dpo_loss"), before.value("dpo_loss"));
  EXPECT_GT(after.value("dpo_reward_margin"), before.value("dpo_reward_margin") + 0.1);  // ipo: 0 -> 0.15
  EXPECT_GE(after.value("dpo_accuracy"), 0.8);
}

INSTANTIATE_TEST_SUITE_P(DpoStep, DpoVariant, ::testing::Values("cdpo", "robust", "ipo", "simpo"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

TEST(DpoStep, LossesWithAReferenceRefuseToRunWithoutOne) {
  const ModelConfig mc = small_model_config();
  const Transformer model(mc);
  ParameterStore params = init_random(mc, 84);
  PolicyUpdater u(model, params, OptimConfig{});
  const auto pairs = toy_pairs(85, 4);
  try {
    dpo_step(u, nullptr, pairs, DpoConfig{}, 2, 1);
    FAIL() << "sigmoid DPO ran without a reference";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("loss_type sigmoid needs the reference policy"), std::string::npos) << e.what();
  }
}

TEST(DpoOnline, PairsFromRolloutGroupsTakeTheBestAndWorstResponse) {
  std::vector<RolloutSample> samples(7);
  const std::vector<int64_t> groups = {4, 4, 4, 9, 9, 4, 2};
  const std::vector<float> rewards = {0.5f, 1.0f, 0.0f, 1.0f, 1.0f, 0.2f, 1.0f};
  for (size_t i = 0; i < samples.size(); ++i) {
    samples[i].prompt = {1, 3 + static_cast<int32_t>(groups[i])};
    samples[i].response = {3 + static_cast<int32_t>(i), kEos};
  }
  const auto pairs = pairs_from_rollout(samples, rewards, groups);
  ASSERT_EQ(pairs.size(), 1u) << "group 9 is a tie and group 2 has one sample";
  EXPECT_EQ(pairs[0].prompt, samples[0].prompt);
  EXPECT_EQ(pairs[0].chosen, samples[1].response);
  EXPECT_EQ(pairs[0].rejected, samples[2].response);
  samples[2].prompt = {1, 30};  // the rejected one
  EXPECT_NE(error_of([&] { pairs_from_rollout(samples, rewards, groups); }).find("not their prompt"),
            std::string::npos);
}

}  // namespace
}  // namespace rlcpp
