// The rollout_corr/* mismatch metrics against an independent numpy computation
// (tests/golden/rollout_corr_golden.py), and their exact values at the edges: identical log-probs, empty input
// and buckets, NaN inputs, mismatched lengths.
//
// As tests/trainer_losses_test.cpp does with its torch file: the golden JSON is committed, so this test runs
// where numpy is absent and always checks the same numbers; where /usr/bin/python3 can import numpy,
// FreshGoldenFileMatches reruns the script into a temporary file and checks the C++ against that too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <unistd.h>

#include "core/config.h"
#include "core/error.h"
#include "trainer/rollout_corr_metrics.h"

namespace rlcpp {
namespace {

// Both sides compute in double from the same float32 inputs; only summation order and the last bit of exp
// differ. The absolute floor covers figures that are sums of signed terms near 0.
constexpr double kRelTol = 1e-9;
constexpr double kAbsTol = 1e-12;

const char* const kBucketLabels[] = {"p0.0-0.1", "p0.1-0.5", "p0.5-0.9", "p0.9-1.0"};

std::vector<std::vector<float>> samples_of(const Json& j) {
  std::vector<std::vector<float>> out;
  for (const Json& s : j) {
    out.emplace_back();
    for (const Json& x : s) out.back().push_back(x.get<float>());
  }
  return out;
}

// Every key numpy computed, no other key, each value within the tolerance; returns how many keys it checked.
size_t expect_matches(const Json& c) {
  const auto rollout = samples_of(c["inputs"]["rollout_logp"]);
  const auto trainer = samples_of(c["inputs"]["trainer_logp"]);
  const auto got = rollout_corr_metrics(rollout, trainer, c["ratio_bound"].get<double>());
  std::set<std::string> got_keys, want_keys;
  for (const auto& [k, v] : got) got_keys.insert(k);
  for (auto it = c["expected"].begin(); it != c["expected"].end(); ++it) want_keys.insert(it.key());
  EXPECT_EQ(got_keys, want_keys);
  for (auto it = c["expected"].begin(); it != c["expected"].end(); ++it) {
    const auto g = got.find(it.key());
    if (g == got.end()) continue;
    const double want = it.value().get<double>();
    EXPECT_TRUE(std::isfinite(g->second)) << it.key() << " is " << g->second;
    EXPECT_LE(std::abs(g->second - want), kAbsTol + kRelTol * std::abs(want))
        << it.key() << ": got " << g->second << ", numpy " << want;
  }
  return want_keys.size();
}

std::string committed_golden() { return std::string(RLCPP_SOURCE_DIR) + "/tests/golden/rollout_corr_golden.json"; }

const Json& committed_doc() {
  static const Json doc = load_json_file(committed_golden());
  return doc;
}

const Json& committed_case(const std::string& name) {
  for (const Json& c : committed_doc()["cases"])
    if (c["name"] == name) return c;
  throw Error("no golden case " + name);
}

TEST(RolloutCorrGolden, EveryKeyOfEveryCaseMatchesNumpy) {
  size_t cases = 0;
  for (const Json& c : committed_doc()["cases"]) {
    SCOPED_TRACE("golden case " + c["name"].get<std::string>());
    expect_matches(c);
    ++cases;
  }
  EXPECT_GE(cases, 5u);
}

// The main case exercises what the comparison is meant to check: every bucket, both sides of the band, every
// figure (18 overall keys and 6 per bucket).
TEST(RolloutCorrGolden, MainCaseFillsEveryBucketAndBothSidesOfTheBand) {
  const Json& mixed = committed_case("mixed");
  EXPECT_EQ(expect_matches(mixed), 18u + 6u * 4u);
  for (const char* label : kBucketLabels)
    EXPECT_GE(mixed["expected"]["rollout_corr/bucket/" + std::string(label) + "/tokens"].get<double>(), 5.0) << label;
  const double outside = mixed["expected"]["rollout_corr/ratio_outside_frac"].get<double>();
  EXPECT_GT(outside, 0.0);
  EXPECT_LT(outside, 1.0);
  // The clamp of verl's safety bound is exercised too (a log-ratio past 20 caps rho at e^20).
  EXPECT_NEAR(committed_case("beyond_safety_bound")["expected"]["rollout_corr/is_weight_max"].get<double>(),
              std::exp(20.0), 1e-6 * std::exp(20.0));
}

bool numpy_available() { return std::system("/usr/bin/python3 -c 'import numpy' > /dev/null 2>&1") == 0; }

TEST(RolloutCorrGolden, FreshGoldenFileMatches) {
  if (!numpy_available()) GTEST_SKIP() << "/usr/bin/python3 cannot import numpy; checked the committed file only";
  const auto path = std::filesystem::temp_directory_path() /
                    ("rlcpp_rollout_corr_golden_" + std::to_string(::getpid()) + ".json");
  const std::string cmd = "/usr/bin/python3 " + std::string(RLCPP_SOURCE_DIR) +
                          "/tests/golden/rollout_corr_golden.py " + path.string() + " > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const Json fresh = load_json_file(path.string());
  std::filesystem::remove(path);
  ASSERT_EQ(fresh["cases"].size(), committed_doc()["cases"].size())
      << "the script's cases differ from the committed file: regenerate tests/golden/rollout_corr_golden.json";
  for (size_t i = 0; i < fresh["cases"].size(); ++i) {
    const Json& c = fresh["cases"][i];
    SCOPED_TRACE("fresh golden case " + c["name"].get<std::string>());
    EXPECT_EQ(c["inputs"], committed_doc()["cases"][i]["inputs"]) << "the seeded inputs changed: regenerate";
    expect_matches(c);
  }
}

// ---------------------------------------------------------------- exact values at the edges

std::map<std::string, double> metrics_of(const std::vector<std::vector<float>>& rollout,
                                         const std::vector<std::vector<float>>& trainer) {
  return rollout_corr_metrics(rollout, trainer);
}

TEST(RolloutCorrMetrics, IdenticalLogProbsGiveZeroDivergenceAndUnitWeights) {
  const std::vector<std::vector<float>> logp = {{-0.01f, -2.5f, -0.3f}, {}, {-4.0f}, {-0.7f, -0.05f}};
  const auto m = metrics_of(logp, logp);
  for (const char* key : {"kl", "k3_kl", "chi2_token", "chi2_seq", "log_ppl_diff", "ratio_outside_frac",
                          "probs_diff_max", "probs_diff_mean", "probs_diff_std", "is_weight_std"})
    EXPECT_EQ(m.at("rollout_corr/" + std::string(key)), 0.0) << key;
  for (const char* key : {"is_weight_mean", "is_weight_min", "is_weight_max", "is_ess", "probs_pearson_corr"})
    EXPECT_EQ(m.at("rollout_corr/" + std::string(key)), 1.0) << key;
  EXPECT_EQ(m.at("rollout_corr/training_ppl"), m.at("rollout_corr/rollout_ppl"));
  EXPECT_EQ(m.at("rollout_corr/tokens"), 6.0);
  for (const char* label : kBucketLabels) {
    const std::string b = "rollout_corr/bucket/" + std::string(label) + "/";
    if (m.at(b + "tokens") == 0) continue;
    EXPECT_EQ(m.at(b + "kl"), 0.0) << label;
    EXPECT_EQ(m.at(b + "k3_kl"), 0.0) << label;
    EXPECT_EQ(m.at(b + "is_weight_mean"), 1.0) << label;
    EXPECT_EQ(m.at(b + "ratio_outside_frac"), 0.0) << label;
  }
}

TEST(RolloutCorrMetrics, MismatchedLengthsNameTheSampleAndBothLengths) {
  std::string error;
  try {
    metrics_of({{-1.0f}, {-1.0f, -2.0f}, {-1.0f, -2.0f, -3.0f}},
               {{-1.0f}, {-1.0f, -2.0f}, {-1.0f, -2.0f, -3.0f, -4.0f}});
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("sample 2"), std::string::npos) << error;
  EXPECT_NE(error.find("3 rollout"), std::string::npos) << error;
  EXPECT_NE(error.find("4 trainer"), std::string::npos) << error;
  EXPECT_THROW(metrics_of({{-1.0f}}, {}), Error);
  EXPECT_THROW(rollout_corr_metrics({{-1.0f}}, {{-1.0f}}, 0.5), Error);
}

TEST(RolloutCorrMetrics, EmptyInputAndEmptyBucketsReportOnlyZeroTokens) {
  for (const auto& input : {std::vector<std::vector<float>>{}, std::vector<std::vector<float>>{{}, {}}}) {
    const auto m = metrics_of(input, input);
    EXPECT_EQ(m.size(), 5u);  // rollout_corr/tokens and each bucket's tokens
    EXPECT_EQ(m.at("rollout_corr/tokens"), 0.0);
    for (const char* label : kBucketLabels)
      EXPECT_EQ(m.at("rollout_corr/bucket/" + std::string(label) + "/tokens"), 0.0);
  }
  // Every token in the top bucket (probabilities 0.95, 0.99): the other buckets have tokens 0 and nothing else.
  const auto m = metrics_of({{std::log(0.95f), std::log(0.99f)}}, {{std::log(0.9f), std::log(0.98f)}});
  EXPECT_EQ(m.at("rollout_corr/bucket/p0.9-1.0/tokens"), 2.0);
  EXPECT_TRUE(m.count("rollout_corr/bucket/p0.9-1.0/kl"));
  for (const char* label : {"p0.0-0.1", "p0.1-0.5", "p0.5-0.9"}) {
    const std::string b = "rollout_corr/bucket/" + std::string(label) + "/";
    EXPECT_EQ(m.at(b + "tokens"), 0.0);
    for (const char* figure : {"kl", "k3_kl", "probs_diff_mean", "is_weight_mean", "ratio_outside_frac"})
      EXPECT_FALSE(m.count(b + figure)) << b << figure;
  }
  for (const auto& [key, value] : m) EXPECT_FALSE(std::isnan(value)) << key;
}

TEST(RolloutCorrMetrics, NanInEitherInputShowsInKlK3AndTheMaxProbsDiff) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // The NaN comes after a large |exp(p) - exp(q)|, where a max() that drops NaN would report the large value.
  const std::vector<std::vector<float>> rollout = {{-0.01f, -3.0f}, {-0.5f}};
  for (int side = 0; side < 2; ++side) {
    std::vector<std::vector<float>> q = rollout, p = {{-3.0f, -2.9f}, {-0.6f}};
    (side == 0 ? p : q)[1][0] = nan;
    const auto m = metrics_of(q, p);
    for (const char* key : {"kl", "k3_kl", "probs_diff_max"})
      EXPECT_TRUE(std::isnan(m.at("rollout_corr/" + std::string(key)))) << key << " side " << side;
  }
}

TEST(RolloutCorrMetrics, ZeroVarianceCorrelationIsOneWhenEqualElseZero) {
  // Every token's probability the same on both sides, with no variance: identical sides correlate at 1.
  EXPECT_EQ(metrics_of({{-0.5f, -0.5f}}, {{-0.5f, -0.5f}}).at("rollout_corr/probs_pearson_corr"), 1.0);
  // The trainer constant, the rollout varying: undefined, reported as 0 (not NaN).
  EXPECT_EQ(metrics_of({{-0.5f, -1.5f}}, {{-0.7f, -0.7f}}).at("rollout_corr/probs_pearson_corr"), 0.0);
  // Both varying and perfectly linear: 1.
  EXPECT_NEAR(metrics_of({{-0.5f, -1.5f}}, {{-0.6f, -1.6f}}).at("rollout_corr/probs_pearson_corr"), 1.0, 1e-12);
}

TEST(RolloutCorrMetrics, RatioBoundSetsTheBandOfTheOutsideFraction) {
  // Log-ratios 0.5 and -0.5 (rho 1.65 and 0.61): inside [1/2, 2], outside [1/1.5, 1.5].
  const std::vector<std::vector<float>> q = {{-1.0f, -1.0f}}, p = {{-0.5f, -1.5f}};
  EXPECT_EQ(rollout_corr_metrics(q, p, 2.0).at("rollout_corr/ratio_outside_frac"), 0.0);
  EXPECT_EQ(rollout_corr_metrics(q, p, 1.5).at("rollout_corr/ratio_outside_frac"), 1.0);
}

}  // namespace
}  // namespace rlcpp
