#include "reward/eval_stats.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"

namespace rlcpp {

double pass_at_k(int64_t n, int64_t c, int64_t k) {
  RLCPP_CHECK(n >= 1 && c >= 0 && c <= n && k >= 1 && k <= n,
              "pass_at_k: need 0 <= c <= n and 1 <= k <= n, got n " << n << ", c " << c << ", k " << k);
  if (n - c < k) return 1.0;  // every k-subset contains a correct sample
  // C(n-c, k) / C(n, k) = prod_{i = n-c+1}^{n} (1 - k / i)
  double miss = 1.0;
  for (int64_t i = n - c + 1; i <= n; ++i) miss *= 1.0 - static_cast<double>(k) / static_cast<double>(i);
  return 1.0 - miss;
}

double percentile(std::vector<int64_t> values, double q) {
  RLCPP_CHECK(!values.empty(), "percentile of no values");
  RLCPP_CHECK(q >= 0.0 && q <= 100.0, "percentile " << q << " is not in [0, 100]");
  std::sort(values.begin(), values.end());
  double pos = q / 100.0 * static_cast<double>(values.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, values.size() - 1);
  double frac = pos - static_cast<double>(lo);
  return static_cast<double>(values[lo]) + frac * static_cast<double>(values[hi] - values[lo]);
}

EvalStats compute_eval_stats(const std::vector<std::vector<SampleOutcome>>& per_problem,
                             const std::vector<std::string>& labels) {
  RLCPP_CHECK(!per_problem.empty(), "eval statistics of no problems");
  RLCPP_CHECK(labels.empty() || labels.size() == per_problem.size(),
              "eval statistics: " << labels.size() << " class labels for " << per_problem.size() << " problems");
  const int64_t n = static_cast<int64_t>(per_problem[0].size());
  RLCPP_CHECK(n >= 1, "eval statistics: problem 0 has no samples");
  EvalStats s;
  s.problems = static_cast<int64_t>(per_problem.size());
  s.samples_per_problem = n;
  s.pass_at_k.assign(n, 0.0);
  std::vector<int64_t> lengths;
  lengths.reserve(per_problem.size() * n);
  double reward_sum = 0.0;
  int64_t correct_sum = 0;
  for (size_t i = 0; i < per_problem.size(); ++i) {
    const auto& samples = per_problem[i];
    RLCPP_CHECK(static_cast<int64_t>(samples.size()) == n,
                "eval statistics: problem " << i << " has " << samples.size() << " samples, problem 0 has " << n);
    int64_t c = 0;
    for (const SampleOutcome& o : samples) {
      RLCPP_CHECK(std::isfinite(o.reward), "eval statistics: problem " << i << " has reward " << o.reward);
      RLCPP_CHECK(o.response_length >= 0,
                  "eval statistics: problem " << i << " has response length " << o.response_length);
      reward_sum += o.reward;
      c += o.correct ? 1 : 0;
      lengths.push_back(o.response_length);
    }
    correct_sum += c;
    for (int64_t k = 1; k <= n; ++k) s.pass_at_k[k - 1] += pass_at_k(n, c, k);
  }
  double problems = static_cast<double>(s.problems);
  double samples = problems * static_cast<double>(n);
  for (double& p : s.pass_at_k) p /= problems;
  s.accuracy = static_cast<double>(correct_sum) / samples;
  s.mean_reward = reward_sum / samples;
  double length_sum = 0.0;
  for (int64_t l : lengths) length_sum += static_cast<double>(l);
  s.length.mean = length_sum / samples;
  s.length.min = *std::min_element(lengths.begin(), lengths.end());
  s.length.max = *std::max_element(lengths.begin(), lengths.end());
  s.length.p50 = percentile(lengths, 50.0);
  s.length.p90 = percentile(lengths, 90.0);
  // Per class: problems and correct samples by label (std::map keeps the labels in order).
  std::map<std::string, std::pair<int64_t, int64_t>> by_label;
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i].empty()) continue;
    auto& [count, correct] = by_label[labels[i]];
    ++count;
    for (const SampleOutcome& o : per_problem[i]) correct += o.correct ? 1 : 0;
  }
  for (const auto& [label, counts] : by_label)
    s.classes.push_back({label, counts.first,
                         static_cast<double>(counts.second) / (static_cast<double>(counts.first) * n)});
  return s;
}

Json eval_stats_to_json(const EvalStats& stats) {
  Json j = {{"problems", stats.problems},
            {"samples_per_problem", stats.samples_per_problem},
            {"accuracy", stats.accuracy},
            {"mean_reward", stats.mean_reward}};
  for (size_t k = 1; k <= stats.pass_at_k.size(); ++k) j["pass@" + std::to_string(k)] = stats.pass_at_k[k - 1];
  j["response_length"] = {{"mean", stats.length.mean},
                          {"min", stats.length.min},
                          {"max", stats.length.max},
                          {"p50", stats.length.p50},
                          {"p90", stats.length.p90}};
  if (!stats.classes.empty()) {
    Json by_class = Json::object();
    for (const ClassStats& c : stats.classes) by_class[c.label] = {{"problems", c.problems}, {"accuracy", c.accuracy}};
    j["by_class"] = by_class;
  }
  return j;
}

}  // namespace rlcpp
