// The trainer on a CUDA context (skipped without a GPU; scripts/device_check.sh runs it on a lent one): master
// weights, gradients and AdamW moments on the device, the host weights the updater was given refreshed at the
// end of each update (update_actor, update_critic). Against the same updates on the host: two PPO-clip optimizer steps over four
// micro-batches (the loss normalised by the global batch), actor and critic, the weights, the loss and the
// moments to fp32 rounding (the device's ops sum in other orders); a resume's host weights reach the device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "core/exec_context.h"
#include "model/critic.h"
#include "tests/host_context.h"
#include "tests/trainer_test_support.h"
#include "trainer/policy_loss.h"
#include "trainer/ppo_epochs.h"

namespace rlcpp {
namespace {

using testing::host;
using test::max_rel_diff;
using test::random_samples;
using test::small_model_config;

OptimConfig two_step_optim() {
  OptimConfig o;
  o.lr = 1e-2;
  o.grad_clip = 1.0;
  return o;
}

std::vector<RolloutSample> actor_samples(const Transformer& model, const ParameterStore& params) {
  std::vector<RolloutSample> s = random_samples(31, 12);
  const auto logp = compute_response_logp(host(), model, params, s, 4, 1.0f);
  PhiloxStream rng(32, 0);
  for (size_t i = 0; i < s.size(); ++i)  // random_samples drew the advantages
    for (float lp : logp[i]) s[i].old_logp.push_back(lp + 0.3f * rng.normal());
  return s;
}

// Two mini-batches of 6 (two optimizer steps) of micro-batches of 3: four micro-batches in all, in order.
PpoEpochsConfig two_mini_batches() {
  PpoEpochsConfig cfg;
  cfg.micro_batch_size = 3;
  cfg.mini_batch_size = 6;
  cfg.shuffle = false;
  return cfg;
}

// Two PPO-clip steps of the actor on `samples`.
EpochsResult two_actor_steps(PolicyUpdater& updater, const std::vector<RolloutSample>& samples) {
  ActorUpdateOptions opt;
  opt.max_response_length = 9;
  PhiloxStream rng(1, 0);
  return update_actor(updater, samples, opt, two_mini_batches(), rng);
}

struct Trained {
  ParameterStore params;
  std::vector<double> losses;
  Tensor exp_avg_sq;
};

Trained train_actor(const ExecContext& ctx, const std::vector<RolloutSample>& samples) {
  const ModelConfig mc = small_model_config();
  const Transformer model(mc);
  Trained t{init_random(mc, 30), {}, Tensor()};
  PolicyUpdater updater(model, t.params, two_step_optim(), ctx);
  EXPECT_EQ(updater.context().device(), ctx.device());
  const EpochsResult r = two_actor_steps(updater, samples);
  EXPECT_EQ(r.steps.size(), 2u);
  for (const UpdateResult& s : r.steps) t.losses.push_back(s.loss);
  t.exp_avg_sq = updater.optimizer().moment_on_host(true);
  return t;
}

TEST(TrainerOnCuda, TwoActorStepsMatchTheHostsAndRefreshTheHostWeights) {
  std::string why;
  if (ExecContext::cuda_devices(&why) == 0) GTEST_SKIP() << why;
  const ExecContext gpu = ExecContext::cuda(0);
  const ModelConfig mc = small_model_config();
  const Transformer model(mc);
  const std::vector<RolloutSample> samples = actor_samples(model, init_random(mc, 30));
  const Trained on_cpu = train_actor(host(), samples);
  const Trained on_gpu = train_actor(gpu, samples);
  const ParameterStore before = init_random(mc, 30);
  EXPECT_NE(std::memcmp(on_gpu.params.flat().raw(), before.flat().raw(), before.flat().nbytes()), 0)
      << "the host weights were not refreshed from the device";
  ASSERT_EQ(on_gpu.losses.size(), on_cpu.losses.size());
  for (size_t i = 0; i < on_cpu.losses.size(); ++i)
    EXPECT_NEAR(on_gpu.losses[i], on_cpu.losses[i], 1e-5 * (1 + std::fabs(on_cpu.losses[i]))) << "step " << i;
  EXPECT_LT(max_rel_diff(on_gpu.params.flat().data<float>(), on_cpu.params.flat().data<float>(), before.numel()), 1e-4);
  EXPECT_LT(max_rel_diff(on_gpu.exp_avg_sq.data<float>(), on_cpu.exp_avg_sq.data<float>(), before.numel()), 1e-3);
}

TEST(TrainerOnCuda, HostWeightsLoadedLaterReachTheDevice) {
  // A resume overwrites the host weights after the updater was made: host_weights_changed copies them over, so
  // the next step starts from them (the same step as an updater made on them).
  std::string why;
  if (ExecContext::cuda_devices(&why) == 0) GTEST_SKIP() << why;
  const ExecContext gpu = ExecContext::cuda(0);
  const ModelConfig mc = small_model_config();
  const Transformer model(mc);
  const std::vector<RolloutSample> samples = actor_samples(model, init_random(mc, 30));
  ParameterStore resumed = init_random(mc, 5);
  PolicyUpdater updater(model, resumed, two_step_optim(), gpu);
  const ParameterStore loaded = init_random(mc, 30);
  std::memcpy(resumed.flat().data<float>(), loaded.flat().data<float>(), loaded.flat().nbytes());
  updater.host_weights_changed();
  two_actor_steps(updater, samples);
  const Trained fresh = train_actor(gpu, samples);
  EXPECT_EQ(std::memcmp(resumed.flat().raw(), fresh.params.flat().raw(), fresh.params.flat().nbytes()), 0);
}

TEST(TrainerOnCuda, ACriticStepMatchesTheHosts) {
  std::string why;
  if (ExecContext::cuda_devices(&why) == 0) GTEST_SKIP() << why;
  const ExecContext gpu = ExecContext::cuda(0);
  const ModelConfig policy = small_model_config();
  const Transformer critic_model(critic_config(policy));
  std::vector<RolloutSample> samples = random_samples(41, 12);
  PhiloxStream rng(42, 0);
  for (RolloutSample& s : samples)
    for (size_t j = 0; j < s.response.size(); ++j) {
      s.old_values.push_back(0.1f * rng.normal());
      s.returns.push_back(rng.normal());
    }
  auto train = [&](const ExecContext& ctx) {
    ParameterStore params = critic_from_policy(init_random(policy, 40), 7);
    PolicyUpdater updater(critic_model, params, two_step_optim(), ctx);
    PhiloxStream order(1, 0);
    update_critic(updater, samples, CriticUpdateOptions{}, two_mini_batches(), order);
    return params;
  };
  const ParameterStore on_cpu = train(host()), on_gpu = train(gpu);
  EXPECT_LT(max_rel_diff(on_gpu.flat().data<float>(), on_cpu.flat().data<float>(), on_cpu.numel()), 1e-4);
}

}  // namespace
}  // namespace rlcpp
