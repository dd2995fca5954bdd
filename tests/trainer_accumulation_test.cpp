// Gradient accumulation at the loss level: a global batch cut into 4 micro-batches, each loss computed with the
// normaliser of the GLOBAL batch, sums to the loss of the whole batch, its gradients concatenate to the whole
// batch's gradients and its merged metrics equal the whole batch's, for every aggregation mode (and every rollout
// correction of the policy loss, token- and sequence-level). Also shows that
// normalising per micro-batch (the classic accumulation bug) would NOT match, so the test can fail.
#include <gtest/gtest.h>

#include <cmath>

#include "core/philox.h"
#include "trainer/dpo_loss.h"
#include "trainer/loss_normalizer.h"
#include "trainer/policy_loss.h"
#include "trainer/sft_loss.h"
#include "trainer/value_loss.h"

namespace rlcpp {
namespace {

constexpr double kRelTol = 1e-6;
constexpr LossAgg kAggs[] = {LossAgg::kTokenMean, LossAgg::kSeqMeanTokenSum, LossAgg::kSeqMeanTokenMean,
                             LossAgg::kSeqMeanTokenSumNorm};
constexpr double kTokenSumNorm = 24.0;

// A random global batch: 23 responses of 0..24 tokens (some empty, some of one token, one fully masked),
// every per-token input a loss needs.
struct Batch {
  std::vector<int64_t> cu = {0};
  std::vector<float> logp, old_logp, ref_logp, rollout_logp, advantages, entropy, mask;
  std::vector<float> values, old_values, returns;
};

Batch random_batch(uint64_t seed) {
  PhiloxStream rng(seed, 0);
  auto normal = [&] { return rng.normal(); };
  Batch b;
  for (int i = 0; i < 23; ++i) {
    int64_t n = static_cast<int64_t>(rng.below(25));
    if (i == 2) n = 0;
    if (i == 5) n = 1;
    for (int64_t t = 0; t < n; ++t) {
      const float logp = -0.05f - 3.0f * rng.uniform();
      b.logp.push_back(logp);
      b.old_logp.push_back(logp + 0.8f * normal());  // wide: both clips and the dual clip bind somewhere
      b.ref_logp.push_back(logp + 0.3f * normal());
      b.rollout_logp.push_back(b.old_logp.back() + 0.2f * normal());
      b.advantages.push_back(normal());
      b.entropy.push_back(3.0f * rng.uniform());
      b.mask.push_back(i == 9 ? 0.0f : (rng.uniform() < 0.15f ? 0.0f : 1.0f));
      b.old_values.push_back(normal());
      b.values.push_back(b.old_values.back() + 0.3f * normal());
      b.returns.push_back(b.old_values.back() + 0.5f * normal());
    }
    b.cu.push_back(static_cast<int64_t>(b.logp.size()));
  }
  return b;
}

// Sequences [s0, s1) of `b` with offsets rebased to 0: views into b's arrays.
struct Micro {
  std::vector<int64_t> cu;
  size_t t0 = 0, t1 = 0;
  std::span<const float> of(const std::vector<float>& x) const {
    return std::span<const float>(x).subspan(t0, t1 - t0);
  }
};

Micro micro(const Batch& b, size_t s0, size_t s1) {
  Micro m;
  m.t0 = b.cu[s0];
  m.t1 = b.cu[s1];
  for (size_t i = s0; i <= s1; ++i) m.cu.push_back(b.cu[i] - b.cu[s0]);
  return m;
}

// Uneven cut points: 4 micro-batches of 3, 9, 1 and 10 sequences.
const std::vector<size_t> kCuts = {0, 3, 12, 13, 23};

void expect_rel(double got, double want, const std::string& what) {
  ASSERT_TRUE(std::isfinite(got)) << what;
  EXPECT_LE(std::abs(got - want), kRelTol * std::max(1.0, std::abs(want))) << what << ": " << got << " vs " << want;
}

void expect_same_output(const LossOutput& acc, const LossOutput& full, const std::string& what) {
  expect_rel(acc.loss, full.loss, what + " loss");
  for (auto [a, f, name] : {std::tuple{&acc.dlogp, &full.dlogp, "dlogp"}, {&acc.dentropy, &full.dentropy, "dentropy"},
                            {&acc.dvalue, &full.dvalue, "dvalue"}}) {
    ASSERT_EQ(a->size(), f->size()) << what << " " << name;
    for (size_t t = 0; t < a->size(); ++t)
      expect_rel((*a)[t], (*f)[t], what + " " + name + "[" + std::to_string(t) + "]");
  }
  ASSERT_EQ(acc.metrics.entries().size(), full.metrics.entries().size()) << what;
  for (const auto& [name, e] : full.metrics.entries())
    expect_rel(acc.metrics.value(name), full.metrics.value(name), what + " metric " + name);
}

// Accumulates a loss over the 4 micro-batches the way the update loop does: losses add, gradients land in
// their tokens' places, metrics merge.
template <class F> LossOutput accumulate(const Batch& b, F&& loss_of_micro) {
  LossOutput acc;
  for (size_t k = 0; k + 1 < kCuts.size(); ++k) {
    const Micro m = micro(b, kCuts[k], kCuts[k + 1]);
    LossOutput part = loss_of_micro(m);
    acc.loss += part.loss;
    for (auto [dst, src] : {std::pair{&acc.dlogp, &part.dlogp}, {&acc.dentropy, &part.dentropy},
                            {&acc.dvalue, &part.dvalue}})
      dst->insert(dst->end(), src->begin(), src->end());
    acc.metrics.merge(part.metrics);
  }
  return acc;
}

PolicyLossConfig full_policy_config() {
  PolicyLossConfig cfg;
  cfg.clip_high = 0.28;
  cfg.clip_c = 3.0;
  cfg.kl_coef = 0.05;
  cfg.kl_estimator = "k3";
  cfg.entropy_coef = 0.01;
  cfg.tis_cap = 2.0;
  return cfg;
}

PolicyLossInputs policy_inputs(const Batch& b, const Micro& m) {
  return {m.cu, m.of(b.logp), m.of(b.old_logp), m.of(b.advantages), m.of(b.mask), m.of(b.ref_logp),
          m.of(b.entropy), m.of(b.rollout_logp)};
}

TEST(Accumulation, PolicyLossOverFourMicroBatchesEqualsFullBatch) {
  const Batch b = random_batch(11);
  const PolicyLossConfig cfg = full_policy_config();
  const Micro all = micro(b, 0, 23);
  for (LossAgg agg : kAggs) {
    const auto norm = LossNormalizer::over_batch(agg, b.cu, b.mask, kTokenSumNorm);
    const LossOutput full = policy_loss(policy_inputs(b, all), cfg, norm);
    ASSERT_GT(full.metrics.value("pg_clipfrac_lower"), 0.0) << "the batch must exercise the dual clip";
    const LossOutput acc = accumulate(b, [&](const Micro& m) { return policy_loss(policy_inputs(b, m), cfg, norm); });
    expect_same_output(acc, full, loss_agg_name(agg));
  }
}

// GSPO's ratio is a function of the whole sequence, CISPO's weight of each token: micro-batches of whole sequences
// give the full batch's loss, gradient and metrics in every aggregation, with a KL, an entropy bonus and TIS.
TEST(Accumulation, GspoAndCispoLossesOverFourMicroBatchesEqualFullBatch) {
  const Batch b = random_batch(13);
  const Micro all = micro(b, 0, 23);
  for (const char* mode : {"gspo", "cispo"}) {
    PolicyLossConfig cfg = full_policy_config();
    cfg.loss_mode = mode;
    cfg.clip_c = 0;  // the dual clip is the vanilla loss's
    cfg.clip_low = cfg.clip_high = 0.05;
    cfg.validate("case");
    for (LossAgg agg : kAggs) {
      const std::string what = std::string(mode) + " " + loss_agg_name(agg);
      const auto norm = LossNormalizer::over_batch(agg, b.cu, b.mask, kTokenSumNorm);
      const LossOutput full = policy_loss(policy_inputs(b, all), cfg, norm);
      const double clipped = full.metrics.value("pg_clipfrac");
      EXPECT_TRUE(clipped > 0 && clipped < 1) << what << ": the batch must be clipped in part, got " << clipped;
      const LossOutput acc =
          accumulate(b, [&](const Micro& m) { return policy_loss(policy_inputs(b, m), cfg, norm); });
      expect_same_output(acc, full, what);
    }
  }
}

// Each rollout correction, the sequence-level ones above all (their weight or rejection is a function of the
// whole sequence): 4 micro-batches of whole sequences give the full batch's loss, gradient and metrics. Bands
// are set where this batch's ratios (rollout 0.2 from old per token) fall on both sides of them.
TEST(Accumulation, PolicyLossWithEachRolloutCorrectionOverFourMicroBatchesEqualsFullBatch) {
  const Batch b = random_batch(16);
  const Micro all = micro(b, 0, 23);
  struct Case {
    const char* name;
    RolloutCorrectionConfig rc;
  };
  std::vector<Case> cases;
  auto add = [&](const char* name, const char* is, const char* mask, bool icepop, double low, double high) {
    RolloutCorrectionConfig rc;
    rc.is = is;
    rc.mask = mask;
    rc.icepop = icepop;
    rc.mask_low = rc.icepop_low = low;
    rc.mask_high = rc.icepop_high = high;
    cases.push_back({name, rc});
  };
  add("is token", "token", "none", false, 0.5, 2.0);
  add("is sequence", "sequence", "none", false, 0.5, 2.0);
  add("mask token", "none", "token", false, 0.8, 1.25);
  add("mask sequence", "none", "sequence", false, 0.5, 2.0);
  add("mask geometric", "none", "geometric", false, 0.95, 1.05);
  add("icepop", "none", "none", true, 0.8, 1.25);
  add("is sequence + mask geometric", "sequence", "geometric", false, 0.95, 1.05);
  add("icepop + mask sequence", "none", "sequence", true, 0.8, 1.25);
  for (const Case& c : cases) {
    PolicyLossConfig cfg = full_policy_config();
    cfg.tis_cap = 0;
    cfg.rollout_correction = c.rc;
    cfg.validate("case");
    PolicyLossConfig uncorrected = cfg;
    uncorrected.rollout_correction = RolloutCorrectionConfig{};
    for (LossAgg agg : kAggs) {
      const std::string what = std::string(c.name) + " " + loss_agg_name(agg);
      const auto norm = LossNormalizer::over_batch(agg, b.cu, b.mask, kTokenSumNorm);
      const LossOutput full = policy_loss(policy_inputs(b, all), cfg, norm);
      const LossOutput acc =
          accumulate(b, [&](const Micro& m) { return policy_loss(policy_inputs(b, m), cfg, norm); });
      expect_same_output(acc, full, what);
      // The correction bites: it moves the loss, and a mask keeps some tokens (or sequences) and drops others.
      EXPECT_GT(std::abs(full.loss - policy_loss(policy_inputs(b, all), uncorrected, norm).loss),
                1e-3 * std::abs(full.loss)) << what;
      for (const char* frac : {"rollout_corr/masked_frac", "rollout_corr/seq_masked_frac"}) {
        if (!full.metrics.has(frac)) continue;
        EXPECT_GT(full.metrics.value(frac), 0.0) << what << " " << frac;
        EXPECT_LT(full.metrics.value(frac), 1.0) << what << " " << frac;
      }
    }
  }
}

TEST(Accumulation, ValueLossOverFourMicroBatchesEqualsFullBatch) {
  const Batch b = random_batch(12);
  const Micro all = micro(b, 0, 23);
  for (LossAgg agg : kAggs) {
    const auto norm = LossNormalizer::over_batch(agg, b.cu, b.mask, kTokenSumNorm);
    auto inputs = [&](const Micro& m) {
      return ValueLossInputs{m.cu, m.of(b.values), m.of(b.old_values), m.of(b.returns), m.of(b.mask)};
    };
    const LossOutput full = value_loss(inputs(all), 0.2, norm);
    const LossOutput acc = accumulate(b, [&](const Micro& m) { return value_loss(inputs(m), 0.2, norm); });
    expect_same_output(acc, full, loss_agg_name(agg));
  }
}

TEST(Accumulation, SftLossOverFourMicroBatchesEqualsFullBatch) {
  const Batch b = random_batch(13);
  const Micro all = micro(b, 0, 23);
  for (LossAgg agg : kAggs) {
    const auto norm = LossNormalizer::over_batch(agg, b.cu, b.mask, kTokenSumNorm);
    const LossOutput full = sft_loss(all.cu, b.logp, b.mask, norm);
    const LossOutput acc =
        accumulate(b, [&](const Micro& m) { return sft_loss(m.cu, m.of(b.logp), m.of(b.mask), norm); });
    expect_same_output(acc, full, loss_agg_name(agg));
  }
}

TEST(Accumulation, DpoLossOverMicroBatchesUsesTheGlobalPairCount) {
  const Batch b = random_batch(14);
  // Pairs inside each micro-batch (sequence indices relative to it); the full batch holds all of them.
  std::vector<std::vector<DpoPair>> local(kCuts.size() - 1);
  std::vector<DpoPair> global;
  for (size_t k = 0; k + 1 < kCuts.size(); ++k)
    for (size_t s = kCuts[k]; s + 1 < kCuts[k + 1]; s += 2) {
      local[k].push_back({static_cast<int64_t>(s - kCuts[k]), static_cast<int64_t>(s + 1 - kCuts[k])});
      global.push_back({static_cast<int64_t>(s), static_cast<int64_t>(s + 1)});
    }
  DpoConfig cfg;
  const double n = static_cast<double>(global.size());
  const LossOutput full = dpo_loss({micro(b, 0, 23).cu, b.logp, b.ref_logp, b.mask, global}, cfg, n);
  size_t k = 0;
  const LossOutput acc = accumulate(b, [&](const Micro& m) {
    return dpo_loss({m.cu, m.of(b.logp), m.of(b.ref_logp), m.of(b.mask), local[k++]}, cfg, n);
  });
  expect_same_output(acc, full, "dpo");
}

TEST(Accumulation, ShardNormalisersMergeIntoTheGlobalOne) {
  const Batch b = random_batch(15);
  for (LossAgg agg : kAggs) {
    const auto global = LossNormalizer::over_batch(agg, b.cu, b.mask, kTokenSumNorm);
    const Micro first = micro(b, 0, 12), second = micro(b, 12, 23);
    auto merged = LossNormalizer::over_batch(agg, first.cu, first.of(b.mask), kTokenSumNorm);
    merged.merge(LossNormalizer::over_batch(agg, second.cu, second.of(b.mask), kTokenSumNorm));
    EXPECT_EQ(merged.num_tokens, global.num_tokens);
    EXPECT_EQ(merged.num_seqs, global.num_seqs);
    EXPECT_EQ(merged.token_sum_norm, global.token_sum_norm);
  }
}

// The bug this design prevents: each micro-batch normalised by its own counts. For every mode whose normaliser
// counts something, the sum then differs from the full-batch loss (so the tests above would catch it).
TEST(Accumulation, PerMicroBatchNormalisationWouldNotMatch) {
  const Batch b = random_batch(11);
  const PolicyLossConfig cfg = full_policy_config();
  for (LossAgg agg : kAggs) {
    const auto norm = LossNormalizer::over_batch(agg, b.cu, b.mask, kTokenSumNorm);
    const double full = policy_loss(policy_inputs(b, micro(b, 0, 23)), cfg, norm).loss;
    const LossOutput wrong = accumulate(b, [&](const Micro& m) {
      return policy_loss(policy_inputs(b, m), cfg, LossNormalizer::over_batch(agg, m.cu, m.of(b.mask), kTokenSumNorm));
    });
    EXPECT_GT(std::abs(wrong.loss - full), 1e-3 * std::abs(full)) << loss_agg_name(agg);
  }
}

}  // namespace
}  // namespace rlcpp
