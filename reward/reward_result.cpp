#include "reward/reward_result.h"

namespace rlcpp {

Json reward_to_json(const RewardResult& r) {
  Json components = Json::object();
  for (const auto& [name, value] : r.components) components[name] = value;
  return Json{{"total", r.total}, {"correct", r.correct}, {"components", components}};
}

std::vector<std::pair<std::string, double>> mean_reward_components(const std::vector<RewardResult>& results) {
  std::vector<std::pair<std::string, double>> sums;
  std::vector<int64_t> counts;
  double total = 0.0;
  double correct = 0.0;
  for (const RewardResult& r : results) {
    total += r.total;
    correct += r.correct ? 1.0 : 0.0;
    for (const auto& [name, value] : r.components) {
      size_t i = 0;
      while (i < sums.size() && sums[i].first != name) ++i;
      if (i == sums.size()) {
        sums.emplace_back(name, 0.0);
        counts.push_back(0);
      }
      sums[i].second += value;
      ++counts[i];
    }
  }
  std::vector<std::pair<std::string, double>> out;
  if (results.empty()) return out;
  double n = static_cast<double>(results.size());
  out.emplace_back("total", total / n);
  out.emplace_back("correct", correct / n);
  for (size_t i = 0; i < sums.size(); ++i) out.emplace_back(sums[i].first, sums[i].second / counts[i]);
  return out;
}

}  // namespace rlcpp
