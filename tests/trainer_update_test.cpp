// The update loop through the real model: accumulating over 1 or 4 micro-batches gives the same loss, metrics,
// gradient and parameter update for every aggregation mode (actor and critic) and with sequence-level rollout
// corrections; per-micro-batch normalisation
// (the classic accumulation bug) does not; the NaN guard leaves weights and optimizer state bit-identical and
// stops the run after max_bad_steps in a row; a step reports grad_norm, lr and the merged loss metrics.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "model/critic.h"
#include "tests/error_test_support.h"
#include "tests/host_context.h"
#include "tests/trainer_test_support.h"
#include "trainer/policy_loss.h"
#include "trainer/ppo_epochs.h"

namespace rlcpp {
namespace {

using testing::host;

using test::max_rel_diff;
using test::random_samples;
using test::same_bytes;
using test::small_model_config;

constexpr double kRelTol = 1e-6;
constexpr size_t kBatch = 12;
constexpr int64_t kQuarter = 3;  // 4 micro-batches of 3 sequences, of uneven token counts

// An AdamW whose update is close to linear in the gradient (eps much larger than |g|), so a gradient that is
// off by a constant factor changes the parameter update too (with eps = 1e-8 Adam's first step is ~lr sign(g)).
OptimConfig linear_optim() {
  OptimConfig o;
  o.lr = 0.1;
  o.eps = 1.0;
  o.grad_clip = 0;  // compare the raw accumulated gradient
  return o;
}

// Samples with old_logp = the model's logp plus noise (ratios spread over both clips), ref and rollout logp.
std::vector<RolloutSample> actor_samples(const Transformer& model, const ParameterStore& params) {
  std::vector<RolloutSample> s = random_samples(21, kBatch);
  const auto logp = compute_response_logp(host(), model, params, s, 4, 1.0f);
  PhiloxStream rng(22, 0);
  for (size_t i = 0; i < s.size(); ++i)
    for (float lp : logp[i]) {
      s[i].old_logp.push_back(lp + 0.3f * rng.normal());
      s[i].ref_logp.push_back(lp + 0.2f * rng.normal());
      s[i].rollout_logp.push_back(s[i].old_logp.back() + 0.1f * rng.normal());
    }
  return s;
}

struct Outcome {
  UpdateResult step;
  ParameterStore grads, delta, after;
};

Outcome actor_update(const std::vector<RolloutSample>& samples, const PolicyLossConfig& loss, int64_t micro) {
  const ModelConfig mc = small_model_config();
  const Transformer model(mc);
  const ParameterStore before = init_random(mc, 20);
  ParameterStore params = before.clone();
  PolicyUpdater updater(model, params, linear_optim());
  ActorUpdateOptions opt;
  opt.loss = loss;
  opt.max_response_length = 9;
  PpoEpochsConfig cfg;
  cfg.micro_batch_size = micro;
  cfg.shuffle = false;
  PhiloxStream rng(1, 0);
  EpochsResult r = update_actor(updater, samples, opt, cfg, rng);
  EXPECT_EQ(r.steps.size(), 1u);
  Outcome o{r.steps.at(0), updater.grads().clone(), ParameterStore(mc), params};
  for (int64_t i = 0; i < params.numel(); ++i)
    o.delta.flat().data<float>()[i] = params.flat().data<float>()[i] - before.flat().data<float>()[i];
  return o;
}

void expect_same_update(const Outcome& one, const Outcome& four, const std::string& what) {
  ASSERT_FALSE(one.step.skipped) << what;
  ASSERT_TRUE(std::isfinite(one.step.loss)) << what;
  EXPECT_NEAR(four.step.loss, one.step.loss, kRelTol * std::max(1.0, std::abs(one.step.loss))) << what;
  EXPECT_NEAR(four.step.grad_norm, one.step.grad_norm, kRelTol * one.step.grad_norm) << what;
  EXPECT_GT(one.step.grad_norm, 0) << what;
  EXPECT_LE(max_rel_diff(one.grads.flat().data<float>(), four.grads.flat().data<float>(), one.grads.numel()), kRelTol)
      << what << ": accumulated gradient";
  EXPECT_GT(ops::l2_norm(host(), one.delta.flat()), 0.0) << what << ": the step must move the weights";
  // Updates agree to kRelTol of the largest one, beyond the one ulp by which the stored fp32 weights
  // (RMSNorm weights near 1) may round differently.
  const float* d1 = one.delta.flat().data<float>();
  const float* d4 = four.delta.flat().data<float>();
  const float* w = one.after.flat().data<float>();
  double largest = 0, excess = 0;
  for (int64_t i = 0; i < one.delta.numel(); ++i) largest = std::max(largest, std::abs(static_cast<double>(d1[i])));
  for (int64_t i = 0; i < one.delta.numel(); ++i) {
    const double ulp = std::nextafter(std::abs(w[i]), INFINITY) - std::abs(w[i]);
    excess = std::max(excess, std::abs(static_cast<double>(d1[i]) - d4[i]) - ulp - kRelTol * largest);
  }
  EXPECT_LE(excess, 0.0) << what << ": parameter update (largest " << largest << ")";
  ASSERT_EQ(one.step.metrics.entries().size(), four.step.metrics.entries().size()) << what;
  for (const auto& [name, value] : one.step.metrics.values())
    EXPECT_NEAR(four.step.metrics.value(name), value, kRelTol * std::max(1.0, std::abs(value))) << what << " " << name;
}

TEST(UpdateAccumulation, ActorOneAndFourMicroBatchesGiveTheSameUpdateForEveryAggregation) {
  const ModelConfig mc = small_model_config();
  const Transformer model(mc);
  const auto samples = actor_samples(model, init_random(mc, 20));
  for (const char* agg : {"token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"}) {
    PolicyLossConfig loss;
    loss.agg = agg;
    loss.clip_c = 3.0;
    loss.kl_coef = 0.1;
    loss.entropy_coef = 0.01;
    loss.tis_cap = 2.0;
    const Outcome one = actor_update(samples, loss, kBatch);
    const Outcome four = actor_update(samples, loss, kQuarter);
    ASSERT_GT(one.step.metrics.value("pg_clipfrac"), 0.0) << "the batch must exercise the clip";
    expect_same_update(one, four, agg);
  }
}

// Sequence-level rollout corrections through update_actor and the real model: the packer keeps each sequence
// whole in one micro-batch, so its weight and its rejection, and with them the update, do not depend on the cut.
TEST(UpdateAccumulation, ActorSequenceLevelRolloutCorrectionsGiveTheSameUpdateOverFourMicroBatches) {
  const ModelConfig mc = small_model_config();
  const Transformer model(mc);
  const auto samples = actor_samples(model, init_random(mc, 20));
  PolicyLossConfig seq_is;  // sequence TIS and a geometric-mean rejection (verl's seq_is + geo_rs)
  seq_is.agg = "seq-mean-token-mean";
  seq_is.rollout_correction.is = "sequence";
  seq_is.rollout_correction.mask = "geometric";
  seq_is.rollout_correction.mask_low = 0.97;
  seq_is.rollout_correction.mask_high = 1.03;
  PolicyLossConfig icepop_seq;  // IcePop per token and a sequence-ratio rejection
  icepop_seq.agg = "token-mean";
  icepop_seq.rollout_correction.icepop = true;
  icepop_seq.rollout_correction.icepop_low = 0.9;
  icepop_seq.rollout_correction.icepop_high = 1.1;
  icepop_seq.rollout_correction.mask = "sequence";
  icepop_seq.rollout_correction.mask_low = 0.8;
  icepop_seq.rollout_correction.mask_high = 1.25;
  for (const auto& [name, loss] : {std::pair{"is sequence + mask geometric", seq_is},
                                   std::pair{"icepop + mask sequence", icepop_seq}}) {
    loss.validate("case");
    const Outcome one = actor_update(samples, loss, kBatch);
    const Outcome four = actor_update(samples, loss, kQuarter);
    const double rejected = one.step.metrics.value("rollout_corr/seq_masked_frac");
    EXPECT_GT(rejected, 0.0) << name << ": the batch must exercise the rejection";
    EXPECT_LT(rejected, 1.0) << name;
    expect_same_update(one, four, name);
  }
}

// The same global batch with each micro-batch normalised by its own token count: the gradient differs, so the
// comparison above can fail.
TEST(UpdateAccumulation, PerMicroBatchNormalisationWouldNotMatch) {
  const ModelConfig mc = small_model_config();
  const Transformer model(mc);
  const auto samples = actor_samples(model, init_random(mc, 20));
  const PolicyLossConfig loss;
  const Outcome right = actor_update(samples, loss, kBatch);

  ParameterStore params = init_random(mc, 20);
  PolicyUpdater updater(model, params, linear_optim());
  std::vector<size_t> order(kBatch);
  for (size_t i = 0; i < kBatch; ++i) order[i] = i;
  const auto micro = pack_micro_batches(samples, order, kQuarter);
  std::vector<PackedBatch> batches;
  for (const auto& p : micro) batches.push_back(p.batch);
  const UpdateResult wrong = updater.step(
      batches, ForwardOptions{},
      [&](size_t m, const Activations& acts) {
        const auto norm = LossNormalizer::over_batch(LossAgg::kTokenMean, micro[m].cu, micro[m].mask);
        const auto old_logp = micro[m].scatter(samples, &RolloutSample::old_logp, "old_logp");
        const auto adv = micro[m].scatter(samples, &RolloutSample::advantages, "advantages");
        PolicyLossInputs in;
        in.cu = micro[m].cu;
        in.logp = {acts.logp.data<float>(), static_cast<size_t>(acts.num_tokens)};
        in.old_logp = old_logp;
        in.advantages = adv;
        in.mask = micro[m].mask;
        return policy_loss(in, loss, norm);
      },
      1);
  EXPECT_GT(max_rel_diff(right.grads.flat().data<float>(), updater.grads().flat().data<float>(), params.numel()),
            1e-2);
  EXPECT_GT(std::abs(wrong.loss - right.step.loss), 1e-3);
}

TEST(UpdateAccumulation, CriticOneAndFourMicroBatchesGiveTheSameUpdateForEveryAggregation) {
  const ModelConfig mc = small_model_config();
  const ParameterStore start = critic_from_policy(init_random(mc, 30), 31);
  const Transformer critic_model(start.config());
  std::vector<RolloutSample> samples = random_samples(32, kBatch);
  const auto values = compute_response_values(host(), critic_model, start, samples, 5);
  PhiloxStream rng(33, 0);
  for (size_t i = 0; i < samples.size(); ++i)
    for (float v : values[i]) {
      samples[i].old_values.push_back(v + 0.1f * rng.normal());
      samples[i].returns.push_back(v + rng.normal());
    }
  for (const char* agg : {"token-mean", "seq-mean-token-sum", "seq-mean-token-mean"}) {
    auto run = [&](int64_t micro) {
      ParameterStore params = start.clone();
      PolicyUpdater updater(critic_model, params, linear_optim());
      CriticUpdateOptions opt;
      opt.agg = agg;
      opt.value_clip = 0.05;
      PpoEpochsConfig cfg;
      cfg.micro_batch_size = micro;
      PhiloxStream shuffle(2, 0);
      EpochsResult r = update_critic(updater, samples, opt, cfg, shuffle);
      Outcome o{r.steps.at(0), updater.grads().clone(), ParameterStore(params.config()), params};
      for (int64_t i = 0; i < params.numel(); ++i)
        o.delta.flat().data<float>()[i] = params.flat().data<float>()[i] - start.flat().data<float>()[i];
      return o;
    };
    const Outcome one = run(kBatch), four = run(kQuarter);
    ASSERT_GT(one.step.metrics.value("vf_clipfrac"), 0.0) << "the batch must exercise the value clip";
    expect_same_update(one, four, std::string("critic ") + agg);
  }
}

// A loss callback with a finite loss and a gradient that has one `bad` entry (0: a good gradient).
MicroLossFn token_loss(float bad) {
  return [bad](size_t, const Activations& acts) {
    LossOutput out;
    out.dlogp.assign(static_cast<size_t>(acts.num_tokens), -0.01f);
    out.loss = 1.0;
    if (bad != 0.0f) out.dlogp[1] = bad;  // true for NaN too
    return out;
  };
}

struct Snapshot {
  Tensor params, m, v;
  int64_t steps;
};

Snapshot snapshot(PolicyUpdater& u, const ParameterStore& params) {
  return {params.flat().clone(), u.optimizer().exp_avg().clone(), u.optimizer().exp_avg_sq().clone(),
          u.optimizer().steps_taken()};
}

void expect_untouched(PolicyUpdater& u, const ParameterStore& params, const Snapshot& s, const std::string& what) {
  EXPECT_TRUE(same_bytes(params.flat(), s.params)) << what << ": weights changed";
  EXPECT_TRUE(same_bytes(u.optimizer().exp_avg(), s.m)) << what << ": exp_avg changed";
  EXPECT_TRUE(same_bytes(u.optimizer().exp_avg_sq(), s.v)) << what << ": exp_avg_sq changed";
  EXPECT_EQ(u.optimizer().steps_taken(), s.steps) << what << ": step count changed";
}

TEST(NanGuard, SkipsNonFiniteStepsBitIdenticallyAndStopsAfterMaxBadStepsInARow) {
  const ModelConfig mc = small_model_config();
  const Transformer model(mc);
  ParameterStore params = init_random(mc, 40);
  OptimConfig oc;
  oc.max_bad_steps = 3;
  PolicyUpdater u(model, params, oc);
  const auto samples = random_samples(41, 4);
  std::vector<size_t> all = {0, 1, 2, 3};
  std::vector<PackedBatch> batches;
  for (const auto& p : pack_micro_batches(samples, all, 2)) batches.push_back(p.batch);
  const ForwardOptions fwd;

  ASSERT_FALSE(u.step(batches, fwd, token_loss(0.0f), 10).skipped);  // moments are non-zero from here on
  auto bad_step = [&](const MicroLossFn& fn, const std::string& what) {
    const Snapshot before = snapshot(u, params);
    const UpdateResult r = u.step(batches, fwd, fn, 10);
    EXPECT_TRUE(r.skipped) << what;
    expect_untouched(u, params, before, what);
  };
  bad_step(token_loss(NAN), "NaN gradient");
  EXPECT_EQ(u.bad_steps_in_a_row(), 1);
  bad_step(token_loss(INFINITY), "infinite gradient");
  EXPECT_EQ(u.bad_steps_in_a_row(), 2);

  // A good step resets the count and moves the weights.
  const Snapshot before_good = snapshot(u, params);
  const UpdateResult good = u.step(batches, fwd, token_loss(0.0f), 10);
  EXPECT_FALSE(good.skipped);
  EXPECT_FALSE(same_bytes(params.flat(), before_good.params));
  EXPECT_EQ(u.optimizer().steps_taken(), before_good.steps + 1);
  EXPECT_EQ(u.bad_steps_in_a_row(), 0);

  const MicroLossFn nan_loss = [](size_t, const Activations& acts) {
    LossOutput out;
    out.dlogp.assign(static_cast<size_t>(acts.num_tokens), 0.0f);
    out.loss = NAN;
    return out;
  };
  bad_step(nan_loss, "NaN loss with a finite gradient");
  bad_step(token_loss(NAN), "NaN gradient");
  const Snapshot before_stop = snapshot(u, params);
  const std::string e = error_of([&] { u.step(batches, fwd, token_loss(NAN), 10); });
  EXPECT_NE(e.find("3 optimizer steps in a row"), std::string::npos) << e;
  EXPECT_NE(e.find("max_bad_steps"), std::string::npos) << e;
  expect_untouched(u, params, before_stop, "the stopping step");
  EXPECT_EQ(u.bad_steps_total(), 5);
}

// A run shorter than max_bad_steps whose every step is non-finite (e.g. dpo.beta 1e308) used to end with exit 0
// and the initial weights; the run checks at its last step that some step was applied.
TEST(NanGuard, ARunWhoseEveryStepWasSkippedIsAnError) {
  const ModelConfig mc = small_model_config();
  const Transformer model(mc);
  ParameterStore params = init_random(mc, 40);
  PolicyUpdater u(model, params, OptimConfig{});  // max_bad_steps 5
  const std::vector<size_t> all = {0, 1, 2, 3};
  std::vector<PackedBatch> batches;
  for (const auto& p : pack_micro_batches(random_samples(41, 4), all, 2)) batches.push_back(p.batch);
  u.check_some_step_applied("no step yet");  // nothing asked: nothing to report
  ASSERT_TRUE(u.step(batches, ForwardOptions{}, token_loss(NAN), 10).skipped);
  ASSERT_TRUE(u.step(batches, ForwardOptions{}, token_loss(INFINITY), 10).skipped);
  const std::string e = error_of([&] { u.check_some_step_applied("dpo runs/x"); });
  EXPECT_NE(e.find("dpo runs/x: all 2 optimizer steps had a non-finite loss or gradient norm"), std::string::npos) << e;
  ASSERT_FALSE(u.step(batches, ForwardOptions{}, token_loss(0.0f), 10).skipped);
  u.check_some_step_applied("one step applied");
}

// A finite loss and gradient with an lr that overflows fp32 (1e308 is inf as a float): the update makes the
// weights non-finite, which no later step can undo, so the step itself stops the run naming the step and the
// tensor, before a rollout samples from the weights or a checkpoint saves them.
TEST(NanGuard, AnUpdateThatMakesTheWeightsNonFiniteStopsTheRunNamingTheStep) {
  const ModelConfig mc = small_model_config();
  const Transformer model(mc);
  ParameterStore params = init_random(mc, 42);
  const auto samples = random_samples(43, 4);
  std::vector<size_t> all = {0, 1, 2, 3};
  std::vector<PackedBatch> batches;
  for (const auto& p : pack_micro_batches(samples, all, 2)) batches.push_back(p.batch);  // two micro-batches
  ParameterStore diverging = params.clone();
  OptimConfig oc;
  oc.lr = 1e308;
  PolicyUpdater u(model, diverging, oc);
  const std::string e = error_of([&] { u.step(batches, ForwardOptions{}, token_loss(0.0f), 10); });
  EXPECT_NE(e.find("the weights became non-finite at optimizer step 1"), std::string::npos) << e;
  EXPECT_NE(e.find("lower optim.lr): tensor '"), std::string::npos) << e;
  EXPECT_EQ(u.bad_steps_in_a_row(), 0) << "the loss and gradient were finite";
  // The same step at the default lr passes.
  PolicyUpdater sane(model, params, OptimConfig{});
  EXPECT_FALSE(sane.step(batches, ForwardOptions{}, token_loss(0.0f), 10).skipped);
}

// Issue 34 "loss masks": an episode's environment tokens (mask 0) are attended but add nothing to the gradient:
// whatever their advantages and log-probs, the update is bit for bit the same; marking them trained changes it.
TEST(UpdateStep, MaskedEnvironmentTokensContributeNoGradient) {
  const ModelConfig mc = small_model_config();
  const Transformer model(mc);
  const ParameterStore params = init_random(mc, 20);
  std::vector<RolloutSample> episodes = actor_samples(model, params);
  // Each response as two turns with an observation between: tokens 2..4 the environment's.
  for (RolloutSample& s : episodes)
    for (size_t t = 0; t < s.mask.size(); ++t) s.mask[t] = t >= 2 && t <= 4 ? 0.0f : 1.0f;
  std::vector<RolloutSample> scrambled = episodes;
  for (RolloutSample& s : scrambled)
    for (size_t t = 0; t < s.mask.size(); ++t)
      if (s.mask[t] == 0.0f) {
        s.advantages[t] = 1e3f;
        s.old_logp[t] = -50.0f;
        s.rollout_logp[t] = 0.0f;
        s.ref_logp[t] = -3.0f;
      }
  PolicyLossConfig loss;
  loss.kl_coef = 0.1;
  const Outcome a = actor_update(episodes, loss, kQuarter), b = actor_update(scrambled, loss, kQuarter);
  ASSERT_GT(a.step.grad_norm, 0);
  EXPECT_TRUE(same_bytes(a.grads.flat(), b.grads.flat())) << "an environment token's values reached the gradient";
  std::vector<RolloutSample> trained = scrambled;
  for (RolloutSample& s : trained) s.mask.assign(s.mask.size(), 1.0f);
  EXPECT_FALSE(same_bytes(a.grads.flat(), actor_update(trained, loss, kQuarter).grads.flat()));
}

TEST(UpdateStep, ReportsGradNormLrAndTheMergedLossMetrics) {
  const ModelConfig mc = small_model_config();
  const Transformer model(mc);
  ParameterStore params = init_random(mc, 50);
  const auto samples = actor_samples(model, params);
  OptimConfig oc;
  oc.lr = 1e-3;
  oc.schedule = "linear_warmup";
  oc.warmup_steps = 4;
  oc.grad_clip = 1e-3;  // clips: grad_norm is the norm before clipping
  PolicyUpdater u(model, params, oc);
  ActorUpdateOptions opt;
  opt.total_steps = 10;
  PpoEpochsConfig cfg;
  cfg.micro_batch_size = kQuarter;
  cfg.mini_batch_size = 6;  // two optimizer steps
  PhiloxStream rng(3, 0);
  const EpochsResult r = update_actor(u, samples, opt, cfg, rng);
  ASSERT_EQ(r.steps.size(), 2u);
  EXPECT_DOUBLE_EQ(r.steps[0].lr, 1e-3 / 4);
  EXPECT_DOUBLE_EQ(r.steps[1].lr, 2e-3 / 4);
  EXPECT_GT(r.steps[0].grad_norm, 1e-3);
  // Metrics of a step: the four micro-batches' contributions merged (pg_loss adds up to the step's loss here:
  // no KL, no entropy bonus).
  const UpdateResult& s = r.steps[0];
  EXPECT_NEAR(s.metrics.value("pg_loss"), s.loss, 1e-12);
  for (const char* name : {"pg_clipfrac", "ppo_kl", "entropy", "pg_clipfrac_lower"})
    EXPECT_TRUE(s.metrics.has(name)) << name;
  const auto logged = step_metrics(s, "actor/");
  EXPECT_EQ(logged.at("actor/grad_norm"), s.grad_norm);
  EXPECT_EQ(logged.at("actor/lr"), s.lr);
  EXPECT_EQ(logged.at("actor/pg_loss"), s.metrics.value("pg_loss"));
  const auto over = r.metrics("actor/");
  const double pg0 = r.steps[0].metrics.value("pg_loss"), pg1 = r.steps[1].metrics.value("pg_loss");
  EXPECT_NEAR(over.at("actor/pg_loss"), 0.5 * (pg0 + pg1), 1e-12);
  EXPECT_NEAR(over.at("actor/grad_norm"), 0.5 * (r.steps[0].grad_norm + r.steps[1].grad_norm), 1e-12);
  EXPECT_EQ(over.at("actor/lr"), r.steps[1].lr);
  EXPECT_EQ(over.at("actor/skipped_steps"), 0.0);
}

// A micro-batch whose logits and their gradient would not fit the available memory is refused before the forward
// (the OOM killer would end the run without a word: 128 chat sequences of ~250 tokens with Qwen3's vocabulary,
// 19 GB of logits, did), naming the sizes and the keys to lower; one that fits, or an unknown amount, passes.
TEST(UpdateStep, AMicroBatchWhoseLogitsWouldNotFitIsRefusedNamingTheKeys) {
  const std::string e = error_of([] { check_logits_fit(32000, 151669, int64_t{20} * 1000 * 1000 * 1000); });
  for (const char* part : {"32000 tokens", "vocabulary of 151669", "38.83 GB", "20.00 GB", "ppo.micro_batch_size",
                           "warm_start.sft.micro_batch_size"})
    EXPECT_NE(e.find(part), std::string::npos) << part << " in: " << e;
  EXPECT_NO_THROW(check_logits_fit(32000, 151669, int64_t{40} * 1000 * 1000 * 1000));
  EXPECT_NO_THROW(check_logits_fit(32000, 151669, -1));
}

}  // namespace
}  // namespace rlcpp
