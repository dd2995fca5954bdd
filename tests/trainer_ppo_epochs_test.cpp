// PPO epochs and mini-batches over one rollout batch: the seeded plan, ratio exactly 1 on the first
// mini-batch of the first epoch, later mini-batches seeing the moved policy, the actor following its
// advantages, and a critic learning a toy value function.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "model/critic.h"
#include "tests/host_context.h"
#include "tests/trainer_test_support.h"
#include "trainer/ppo_epochs.h"

namespace rlcpp {
namespace {

using testing::host;

using test::random_samples;
using test::small_model_config;

TEST(MiniBatchPlan, EveryEpochCoversTheBatchOnceAndTheShuffleIsSeeded) {
  PpoEpochsConfig cfg;
  cfg.epochs = 3;
  cfg.mini_batch_size = 4;
  PhiloxStream a(5, 0), b(5, 0), c(6, 0);
  const auto plan = mini_batch_plan(10, cfg, a);
  ASSERT_EQ(plan.size(), 9u);  // 4 + 4 + 2 per epoch
  for (int e = 0; e < 3; ++e) {
    EXPECT_EQ(plan[3 * e].size(), 4u);
    EXPECT_EQ(plan[3 * e + 2].size(), 2u);
    std::multiset<size_t> seen;
    for (int k = 0; k < 3; ++k) seen.insert(plan[3 * e + k].begin(), plan[3 * e + k].end());
    EXPECT_EQ(seen, (std::multiset<size_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})) << "epoch " << e;
  }
  EXPECT_EQ(mini_batch_plan(10, cfg, b), plan);
  EXPECT_NE(mini_batch_plan(10, cfg, c), plan);
  EXPECT_NE(plan[0], plan[3]) << "each epoch draws a fresh permutation";
  cfg.shuffle = false;
  cfg.epochs = 1;
  cfg.mini_batch_size = 0;
  EXPECT_EQ(mini_batch_plan(4, cfg, c), (std::vector<std::vector<size_t>>{{0, 1, 2, 3}}));
}

struct ActorSetup {
  ModelConfig mc = small_model_config();
  Transformer model{mc};
  ParameterStore params = init_random(mc, 60);
  std::vector<RolloutSample> samples = random_samples(61, 12);

  // old_logp from the current weights, as the old-logprob phase of a step computes it.
  void fill_old_logp(float temperature, int64_t micro) {
    const auto logp = compute_response_logp(host(), model, params, samples, micro, temperature);
    for (size_t i = 0; i < samples.size(); ++i) samples[i].old_logp = logp[i];
  }
};

OptimConfig optim(double lr) {
  OptimConfig o;
  o.lr = lr;
  return o;
}

TEST(PpoEpochs, OneEpochOneMiniBatchHasRatioExactlyOne) {
  for (bool shuffle : {false, true}) {
    ActorSetup s;
    s.fill_old_logp(0.7f, 4);
    PolicyUpdater u(s.model, s.params, optim(1e-2));
    ActorUpdateOptions opt;
    opt.temperature = 0.7f;
    PpoEpochsConfig cfg;
    cfg.micro_batch_size = 4;
    cfg.shuffle = shuffle;
    PhiloxStream rng(1, 0);
    const EpochsResult r = update_actor(u, s.samples, opt, cfg, rng);
    ASSERT_EQ(r.steps.size(), 1u);
    EXPECT_EQ(r.steps[0].metrics.value("ppo_kl"), 0.0) << "shuffle " << shuffle;
    EXPECT_EQ(r.steps[0].metrics.value("pg_clipfrac"), 0.0) << "shuffle " << shuffle;
  }
}

TEST(PpoEpochs, TheRolloutTemperatureReachesTheForward) {
  ActorSetup s;
  s.fill_old_logp(1.0f, 4);  // scored at T = 1, updated at T = 0.7: ratios are not 1
  PolicyUpdater u(s.model, s.params, optim(1e-2));
  ActorUpdateOptions opt;
  opt.temperature = 0.7f;
  PpoEpochsConfig cfg;
  PhiloxStream rng(1, 0);
  EXPECT_GT(std::abs(update_actor(u, s.samples, opt, cfg, rng).steps[0].metrics.value("ppo_kl")), 1e-3);
}

TEST(PpoEpochs, LaterMiniBatchesAndEpochsSeeTheMovedPolicy) {
  ActorSetup s;
  s.fill_old_logp(1.0f, 4);
  PolicyUpdater u(s.model, s.params, optim(1e-2));
  PpoEpochsConfig cfg;
  cfg.epochs = 2;
  cfg.mini_batch_size = 6;
  cfg.micro_batch_size = 3;
  PhiloxStream rng(2, 0);
  const EpochsResult r = update_actor(u, s.samples, ActorUpdateOptions{}, cfg, rng);
  ASSERT_EQ(r.steps.size(), 4u);
  EXPECT_EQ(r.steps[0].metrics.value("ppo_kl"), 0.0);
  for (size_t k = 1; k < 4; ++k) EXPECT_GT(std::abs(r.steps[k].metrics.value("ppo_kl")), 1e-5) << "step " << k;
  // By the second epoch the lr 1e-2 steps have moved some tokens out of the clip range.
  EXPECT_GT(r.steps[3].metrics.value("pg_clipfrac"), 0.0);
  EXPECT_EQ(r.metrics("actor/").at("actor/skipped_steps"), 0.0);
}

TEST(PpoEpochs, TheActorFollowsItsAdvantages) {
  ActorSetup s;
  for (size_t i = 0; i < s.samples.size(); ++i)  // whole sequences good or bad
    for (auto& a : s.samples[i].advantages) a = i % 2 ? -1.0f : 1.0f;
  auto mean_logp = [&](int parity) {
    const auto logp = compute_response_logp(host(), s.model, s.params, s.samples, 12, 1.0f);
    double sum = 0, n = 0;
    for (size_t i = parity; i < s.samples.size(); i += 2)
      for (size_t j = 0; j < logp[i].size(); ++j) {
        sum += s.samples[i].mask[j] * logp[i][j];
        n += s.samples[i].mask[j];
      }
    return sum / n;
  };
  const double good0 = mean_logp(0), bad0 = mean_logp(1);
  PolicyUpdater u(s.model, s.params, optim(3e-3));
  PpoEpochsConfig cfg;
  cfg.epochs = 2;
  cfg.mini_batch_size = 6;
  PhiloxStream rng(3, 0);
  for (int round = 0; round < 5; ++round) {
    s.fill_old_logp(1.0f, 8);
    update_actor(u, s.samples, ActorUpdateOptions{}, cfg, rng);
  }
  EXPECT_GT(mean_logp(0) - good0, 0.5);
  EXPECT_LT(mean_logp(1) - bad0, -0.5);
}

TEST(PpoEpochs, MissingPerTokenInputsNameTheSample) {
  ActorSetup s;
  s.fill_old_logp(1.0f, 4);
  s.samples[5].old_logp.clear();
  PolicyUpdater u(s.model, s.params, optim(1e-3));
  PhiloxStream rng(1, 0);
  const std::string e = error_of([&] { update_actor(u, s.samples, ActorUpdateOptions{}, PpoEpochsConfig{}, rng); });
  EXPECT_NE(e.find("rollout sample 5: old_logp has 0 entries"), std::string::npos) << e;
  s.fill_old_logp(1.0f, 4);
  s.samples[2].ref_logp = s.samples[2].old_logp;  // one sample has a reference logp, the others not
  const std::string e2 = error_of([&] { update_actor(u, s.samples, ActorUpdateOptions{}, PpoEpochsConfig{}, rng); });
  EXPECT_NE(e2.find("ref_logp has 0 entries"), std::string::npos) << e2;
}

// Return from response token j: +1 or -1 by the token at its position (the last one seen), plus the share of
// "low" tokens (ids < 17) seen so far, which needs attention over the prefix.
std::vector<float> toy_returns(const RolloutSample& s) {
  std::vector<int32_t> seen = s.prompt;
  std::vector<float> out;
  for (int32_t next : s.response) {
    const double low = static_cast<double>(std::count_if(seen.begin(), seen.end(), [](int32_t t) { return t < 17; }));
    out.push_back(static_cast<float>((seen.back() < 17 ? 1.0 : -1.0) + low / static_cast<double>(seen.size())));
    seen.push_back(next);
  }
  return out;
}

TEST(Critic, LearnsAToyValueFunctionOnFreshBatches) {
  const ModelConfig mc = small_model_config();
  ParameterStore critic = critic_from_policy(init_random(mc, 70), 71);
  const Transformer model(critic.config());
  OptimConfig oc;
  oc.lr = 3e-3;
  PolicyUpdater u(model, critic, oc);
  CriticUpdateOptions opt;
  opt.value_clip = 0.5;
  PpoEpochsConfig cfg;
  cfg.mini_batch_size = 8;
  cfg.micro_batch_size = 8;
  PhiloxStream rng(72, 0);
  double first = 0, last = 0;
  constexpr int kRounds = 60;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<RolloutSample> batch = random_samples(1000 + round, 16);  // never seen before
    const auto values = compute_response_values(host(), model, critic, batch, 16);
    for (size_t i = 0; i < batch.size(); ++i) {
      batch[i].old_values = values[i];
      batch[i].returns = toy_returns(batch[i]);
    }
    const EpochsResult r = update_critic(u, batch, opt, cfg, rng);
    const double loss = r.steps[0].metrics.value("vf_loss");  // measured before this batch's first step
    if (round == 0) first = loss;
    if (round >= kRounds - 5) last += loss / 5;
  }
  std::printf("critic vf_loss: first batch %.4f, mean of the last five %.4f\n", first, last);
  EXPECT_GT(first, 0.3);
  EXPECT_LT(last, first / 10);
}

}  // namespace
}  // namespace rlcpp
