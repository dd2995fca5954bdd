#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/philox.h"
#include "rollout/sampler.h"

namespace rlcpp {
namespace {

const std::vector<float> kLogits = {1.2f, -0.3f, 2.5f, 0.0f, 2.5f, -1.7f, 0.8f, 1.9f, -0.6f, 0.4f, 3.1f, -2.2f};

// The target distribution written independently of the sampler: softmax(l / T), then the k most likely
// (lower id first among equals), then the smallest prefix holding top_p of that mass, renormalised.
std::vector<double> expected_distribution(const std::vector<float>& logits, float T, int64_t top_k, float top_p) {
  const size_t V = logits.size();
  std::vector<double> p(V);
  double mx = *std::max_element(logits.begin(), logits.end()), z = 0;
  for (size_t j = 0; j < V; ++j) z += (p[j] = std::exp((logits[j] - mx) / T));
  for (auto& x : p) x /= z;
  std::vector<size_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
  size_t keep = top_k > 0 ? std::min<size_t>(top_k, V) : V;
  double mass = 0;
  for (size_t i = 0; i < keep; ++i) mass += p[order[i]];
  size_t m = 0;
  double cum = 0;
  while (m < keep) {
    cum += p[order[m++]];
    if (cum >= top_p * mass) break;
  }
  std::vector<double> out(V, 0.0);
  for (size_t i = 0; i < m; ++i) out[order[i]] = p[order[i]] / cum;
  return out;
}

// Chi-square upper critical value for `df` degrees of freedom at p = 1e-4 (Wilson-Hilferty).
double chi2_critical(int df) {
  const double z = 3.719, a = 2.0 / (9.0 * df);
  return df * std::pow(1 - a + z * std::sqrt(a), 3);
}

struct ChiSquare {
  double stat = 0;
  int df = -1;
  int64_t outside = 0;  // draws of tokens with zero target probability
};

ChiSquare chi_square(const std::vector<int64_t>& counts, const std::vector<double>& expected, int64_t draws) {
  ChiSquare c;
  for (size_t j = 0; j < counts.size(); ++j) {
    if (expected[j] == 0) {
      c.outside += counts[j];
      continue;
    }
    const double e = expected[j] * draws;
    c.stat += (counts[j] - e) * (counts[j] - e) / e;
    ++c.df;
  }
  return c;
}

std::vector<int64_t> draw_counts(const SamplingParams& params, int64_t draws, uint32_t sample_index = 0) {
  Sampler sampler(static_cast<int64_t>(kLogits.size()));
  std::vector<int64_t> counts(kLogits.size(), 0);
  for (int64_t i = 0; i < draws; ++i) {
    const SampleKey key{params.seed, 17, sample_index, static_cast<uint32_t>(i)};
    ++counts[sampler.sample(kLogits.data(), params, key).token];
  }
  return counts;
}

double log_softmax_at(const std::vector<float>& logits, size_t token, double T) {
  double mx = *std::max_element(logits.begin(), logits.end()), z = 0;
  for (float l : logits) z += std::exp((l - mx) / T);
  return (logits[token] - mx) / T - std::log(z);
}

TEST(Sampler, GreedyIsArgmaxWithLowestIdOnTies) {
  Sampler sampler(static_cast<int64_t>(kLogits.size()));
  SamplingParams greedy;
  greedy.temperature = 0;
  for (uint32_t pos = 0; pos < 50; ++pos) {
    const SampledToken t = sampler.sample(kLogits.data(), greedy, {5, 1, 2, pos});
    EXPECT_EQ(t.token, 10);
    EXPECT_NEAR(t.logprob, log_softmax_at(kLogits, 10, 1.0), 1e-6);
  }
  std::vector<float> tie = {0.5f, 3.0f, 3.0f, -1.0f};
  Sampler small(4);
  EXPECT_EQ(small.sample(tie.data(), greedy, {}).token, 1);
}

TEST(Sampler, TemperatureMatchesTheSoftmax) {
  const int64_t draws = 40000;
  for (float T : {1.0f, 0.5f, 1.7f}) {
    SamplingParams p;
    p.temperature = T;
    p.seed = 3;
    const ChiSquare c = chi_square(draw_counts(p, draws), expected_distribution(kLogits, T, 0, 1.0f), draws);
    EXPECT_EQ(c.outside, 0);
    EXPECT_LT(c.stat, chi2_critical(c.df)) << "T " << T;
  }
}

TEST(Sampler, TopKMatchesTheTruncatedDistribution) {
  const int64_t draws = 40000;
  for (int64_t k : {1, 3, 5}) {
    SamplingParams p;
    p.temperature = 0.9f;
    p.top_k = k;
    p.seed = 4;
    const ChiSquare c = chi_square(draw_counts(p, draws), expected_distribution(kLogits, 0.9f, k, 1.0f), draws);
    EXPECT_EQ(c.outside, 0) << "top_k " << k;
    if (c.df > 0) EXPECT_LT(c.stat, chi2_critical(c.df)) << "top_k " << k;
  }
}

// min_p (vLLM's, `rlcpp serve`'s "min_p"): the tokens at least min_p times as likely as the most likely one.
TEST(Sampler, MinPKeepsTheTokensAtLeastThatLikelyAsTheBest) {
  const std::vector<float> logits = {std::log(0.5f), 0.0f, std::log(0.2f), std::log(0.05f), std::log(0.1f)};
  Sampler sampler(5);
  SamplingParams p;
  p.temperature = 1;
  p.min_p = 0.15f;  // keeps p >= 0.15 p_max: tokens 0, 1 and 2 (0.5, 1, 0.2), not 3 (0.05) or 4 (0.1)
  const std::vector<double> d = sampler.target_distribution(logits.data(), p);
  const double mass = 0.5 + 1 + 0.2;
  EXPECT_NEAR(d[0], 0.5 / mass, 1e-6);
  EXPECT_NEAR(d[1], 1 / mass, 1e-6);
  EXPECT_NEAR(d[2], 0.2 / mass, 1e-6);
  EXPECT_EQ(d[3], 0);
  EXPECT_EQ(d[4], 0);
  p.top_k = 2;  // the smaller of the two sets
  const std::vector<double> k = sampler.target_distribution(logits.data(), p);
  EXPECT_EQ(k[2], 0);
  EXPECT_NEAR(k[1], 1 / 1.5, 1e-6);
}

// The alternatives `rlcpp serve` reports with "logprobs": the most likely tokens, each with the log-prob `sample`
// reports for it (the tempered softmax over the whole vocabulary).
TEST(Sampler, TopLogprobsAreTheMostLikelyTokensWithTheirFullLogprobs) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  Sampler sampler(4);
  SamplingParams p;
  p.temperature = 2;
  const std::vector<TokenLogprob> top = sampler.top_logprobs(logits.data(), p, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].token, 1);  // ties: the lower id first
  EXPECT_EQ(top[1].token, 3);
  EXPECT_EQ(top[2].token, 0);
  double z = 0;
  for (float l : logits) z += std::exp(l / 2.0);
  EXPECT_NEAR(top[0].logprob, 1.0 - std::log(z), 1e-5);
  EXPECT_NEAR(top[2].logprob, 0.25 - std::log(z), 1e-5);
}

TEST(Sampler, TopPMatchesTheNucleus) {
  const int64_t draws = 40000;
  for (float top_p : {0.5f, 0.8f, 0.95f}) {
    SamplingParams p;
    p.temperature = 1.3f;
    p.top_p = top_p;
    p.seed = 5;
    const auto expected = expected_distribution(kLogits, 1.3f, 0, top_p);
    const ChiSquare c = chi_square(draw_counts(p, draws), expected, draws);
    EXPECT_EQ(c.outside, 0) << "top_p " << top_p;
    EXPECT_GT(c.df, 0);
    EXPECT_LT(c.stat, chi2_critical(c.df)) << "top_p " << top_p;
  }
  // top-k then top-p, together.
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 6;
  p.top_p = 0.7f;
  const ChiSquare c = chi_square(draw_counts(p, draws), expected_distribution(kLogits, 1.0f, 6, 0.7f), draws);
  EXPECT_EQ(c.outside, 0);
  EXPECT_LT(c.stat, chi2_critical(std::max(c.df, 1)));
}

TEST(Sampler, ChiSquareDetectsTheWrongDistribution) {
  // The test above can fail: draws at T = 1 judged against T = 0.7 are rejected.
  const int64_t draws = 40000;
  SamplingParams p;
  p.temperature = 1.0f;
  const ChiSquare c = chi_square(draw_counts(p, draws), expected_distribution(kLogits, 0.7f, 0, 1.0f), draws);
  EXPECT_GT(c.stat, chi2_critical(c.df));
}

TEST(Sampler, LogprobIsUnderTemperatureBeforeTruncation) {
  Sampler sampler(static_cast<int64_t>(kLogits.size()));
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_k = 2;
  p.top_p = 0.6f;
  for (uint32_t pos = 0; pos < 30; ++pos) {
    const SampledToken t = sampler.sample(kLogits.data(), p, {1, 2, 3, pos});
    EXPECT_NEAR(t.logprob, log_softmax_at(kLogits, t.token, 0.7), 1e-6);
    EXPECT_TRUE(t.token == 10 || t.token == 2) << t.token;  // the top 2 (2 and 4 tie; 2 has the lower id)
  }
}

TEST(Sampler, DrawsAreKeyedAndReproducible) {
  Sampler a(static_cast<int64_t>(kLogits.size())), b(static_cast<int64_t>(kLogits.size()));
  SamplingParams p;
  p.seed = 11;
  int differ_by_sample = 0, differ_by_seed = 0;
  for (uint32_t pos = 0; pos < 200; ++pos) {
    const SampleKey key{11, 4, 0, pos};
    EXPECT_EQ(a.sample(kLogits.data(), p, key).token, b.sample(kLogits.data(), p, key).token);
    differ_by_sample += a.sample(kLogits.data(), p, key).token != a.sample(kLogits.data(), p, {11, 4, 1, pos}).token;
    differ_by_seed += a.sample(kLogits.data(), p, key).token != a.sample(kLogits.data(), p, {12, 4, 0, pos}).token;
  }
  EXPECT_GT(differ_by_sample, 40);
  EXPECT_GT(differ_by_seed, 40);
  // The uniform uses the high word of a 64-bit prompt id too.
  EXPECT_NE(sample_uniform({1, 5, 0, 0}), sample_uniform({1, 5 + (uint64_t{1} << 32), 0, 0}));
}

TEST(Sampler, TargetDistributionAgreesWithTheReference) {
  Sampler sampler(static_cast<int64_t>(kLogits.size()));
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 7;
  p.top_p = 0.9f;
  const auto got = sampler.target_distribution(kLogits.data(), p);
  const auto want = expected_distribution(kLogits, 0.8f, 7, 0.9f);
  // The sampler's weights are float exponentials (within 2 ulp), the reference's double ones.
  for (size_t j = 0; j < want.size(); ++j) EXPECT_NEAR(got[j], want[j], 1e-6 * want[j]) << j;
}

// Over a real vocabulary (Qwen's 151,936) the nucleus is found by sorting a growing prefix only; its kept set
// must be the one a full sort of the same weights gives, for flat and peaked rows and small and large top_p.
TEST(Sampler, NucleusOverAFullVocabularyIsTheFullSortsPrefix) {
  const int64_t V = 151936;
  PhiloxStream rng(42, 0);
  std::vector<float> logits(static_cast<size_t>(V));
  for (const float scale : {0.5f, 2.0f, 8.0f}) {
    for (float& x : logits) x = scale * rng.normal();
    for (const float top_p : {0.3f, 0.9f, 0.999f}) {
      TruncationScratch s;
      const KeptSet k = truncation_kept_set(logits.data(), V, 1.0f, Truncation{0, top_p}, s);
      std::vector<int32_t> order(static_cast<size_t>(V));
      std::iota(order.begin(), order.end(), 0);
      const std::vector<double>& w = s.weights;
      std::sort(order.begin(), order.end(),
                [&](int32_t a, int32_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); });
      double total = 0, cum = 0;
      for (const double x : w) total += x;
      int64_t kept = 0;
      while (kept < V && cum < static_cast<double>(top_p) * total) cum += w[order[kept++]];
      ASSERT_EQ(k.kept, kept) << "scale " << scale << " top_p " << top_p;
      EXPECT_TRUE(std::equal(order.begin(), order.begin() + kept, s.order.begin())) << scale << " " << top_p;
      EXPECT_NEAR(k.mass, cum, 1e-9 * cum);
      EXPECT_NEAR(k.total, total, 1e-9 * total);
    }
  }
}

TEST(Sampler, RejectsNonFiniteLogits) {
  Sampler sampler(3);
  SamplingParams greedy;
  greedy.temperature = 0;
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    for (int at = 0; at < 3; ++at) {
      std::vector<float> row = {0.5f, 1.0f, -0.25f};
      row[at] = bad;
      if (std::isinf(bad) && bad < 0) {
        // -inf is a token that can never be drawn: allowed, as long as some token is finite.
        const SampledToken t = sampler.sample(row.data(), SamplingParams{}, {});
        EXPECT_NE(t.token, at);
        EXPECT_TRUE(std::isfinite(t.logprob));
        continue;
      }
      EXPECT_THROW(sampler.sample(row.data(), SamplingParams{}, {}), Error) << bad << " at " << at;
      EXPECT_THROW(sampler.sample(row.data(), greedy, {}), Error) << bad << " at " << at;
    }
  }
}

}  // namespace
}  // namespace rlcpp
