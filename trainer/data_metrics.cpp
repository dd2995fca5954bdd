#include "trainer/data_metrics.h"

#include <string>
#include <vector>

#include "core/error.h"
#include "trainer/loss_normalizer.h"

namespace rlcpp {

namespace {

// verl's explained-variance epsilon.
constexpr double kExplainedVarEps = 1e-5;

void add_stats(LossMetrics& m, const std::string& name, const std::vector<double>& xs) {
  if (xs.empty()) return;
  double sum = 0;
  for (double x : xs) {
    sum += x;
    m.add_max(name + "/max", x);
    m.add_min(name + "/min", x);
  }
  m.add_mean(name + "/mean", sum, static_cast<double>(xs.size()));
}

std::vector<double> valid_tokens(std::span<const float> xs, std::span<const float> mask) {
  std::vector<double> out;
  for (size_t t = 0; t < xs.size(); ++t)
    if (mask[t] > 0) out.push_back(xs[t]);
  return out;
}

double unbiased_var(const std::vector<double>& xs) {
  if (xs.size() < 2) return 0.0;
  double mean = 0;
  for (double x : xs) mean += x;
  mean /= static_cast<double>(xs.size());
  double sq = 0;
  for (double x : xs) sq += (x - mean) * (x - mean);
  return sq / static_cast<double>(xs.size() - 1);
}

}  // namespace

LossMetrics data_metrics(const DataMetricsInputs& in) {
  const size_t T = in.mask.size();
  check_offsets(in.cu, T, "data_metrics");
  const size_t B = in.cu.size() - 1;
  RLCPP_CHECK(in.scores.empty() || in.scores.size() == B,
              "data_metrics: " << in.scores.size() << " scores for " << B << " sequences");
  RLCPP_CHECK(in.seq_rewards.empty() || in.seq_rewards.size() == B,
              "data_metrics: " << in.seq_rewards.size() << " sequence rewards for " << B << " sequences");
  check_token_array(in.advantages, T, "data_metrics: advantages", true);
  check_token_array(in.returns, T, "data_metrics: returns", true);
  check_token_array(in.values, T, "data_metrics: values", true);

  LossMetrics m;
  add_stats(m, "score", std::vector<double>(in.scores.begin(), in.scores.end()));
  add_stats(m, "rewards", std::vector<double>(in.seq_rewards.begin(), in.seq_rewards.end()));
  add_stats(m, "advantages", valid_tokens(in.advantages, in.mask));
  const std::vector<double> returns = valid_tokens(in.returns, in.mask);
  const std::vector<double> values = valid_tokens(in.values, in.mask);
  add_stats(m, "returns", returns);
  add_stats(m, "values", values);
  if (!returns.empty() && !values.empty()) {
    std::vector<double> residual(returns.size());
    for (size_t i = 0; i < returns.size(); ++i) residual[i] = returns[i] - values[i];
    m.add_sum("vf_explained_var", 1.0 - unbiased_var(residual) / (unbiased_var(returns) + kExplainedVarEps));
  }
  return m;
}

}  // namespace rlcpp
