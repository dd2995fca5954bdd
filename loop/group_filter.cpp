#include "loop/group_filter.h"

#include "core/error.h"
#include "trainer/scored_batch.h"

namespace rlcpp {

int64_t count_informative_groups(std::span<const float> scores, int64_t group_size) {
  const size_t g = static_cast<size_t>(group_size);
  RLCPP_CHECK(g >= 1 && scores.size() % g == 0,
              "count_informative_groups: " << scores.size() << " scores are not whole groups of " << group_size);
  int64_t informative = 0;
  for (size_t first = 0; first < scores.size(); first += g)
    for (size_t i = first + 1; i < first + g; ++i)
      if (scores[i] != scores[first]) {
        ++informative;
        break;
      }
  return informative;
}

void filter_informative_groups(ScoredBatch& batch, int64_t group_size, const FilterGroupsConfig& cfg,
                               std::map<std::string, double>& metrics) {
  const size_t n = batch.samples.size();
  const size_t g = static_cast<size_t>(group_size);
  RLCPP_CHECK(g >= 1 && n % g == 0 && batch.scores.size() == n && batch.group_ids.size() == n &&
                  batch.rollout_index.size() == n,
              "filter_groups: a batch of " << n << " samples is not whole groups of " << group_size);
  ScoredBatch kept;
  kept.temperature = batch.temperature;
  kept.truncation = batch.truncation;
  kept.max_response = batch.max_response;
  int64_t informative = 0, kept_groups = 0;
  for (size_t first = 0; first < n; first += g) {
    for (size_t i = first + 1; i < first + g; ++i)
      RLCPP_CHECK(batch.group_ids[i] == batch.group_ids[first],
                  "filter_groups: sample " << i << " belongs to group " << batch.group_ids[i] << ", expected "
                                           << batch.group_ids[first] << " (the batch must be prompt-major)");
    bool spread = false;
    for (size_t i = first + 1; i < first + g && !spread; ++i) spread = batch.scores[i] != batch.scores[first];
    if (!spread) continue;
    ++informative;
    if (cfg.max_groups > 0 && kept_groups >= cfg.max_groups) continue;
    ++kept_groups;
    for (size_t i = first; i < first + g; ++i) {
      kept.samples.push_back(std::move(batch.samples[i]));
      kept.scores.push_back(batch.scores[i]);
      kept.group_ids.push_back(batch.group_ids[i]);
      kept.rollout_index.push_back(batch.rollout_index[i]);
    }
  }
  const double groups = static_cast<double>(n / g);
  metrics["filter/informative_groups"] = static_cast<double>(informative);
  metrics["filter/kept_groups"] = static_cast<double>(kept_groups);
  metrics["filter/kept_fraction"] = groups > 0 ? static_cast<double>(kept_groups) / groups : 0.0;
  batch = std::move(kept);
}

}  // namespace rlcpp
