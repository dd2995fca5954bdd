#include "loop/rollout_metrics.h"

#include <vector>

#include "reward/eval_stats.h"

namespace rlcpp {

std::map<std::string, double> rollout_metrics(const RolloutResult& rollout) {
  const RolloutStats& s = rollout.stats;
  std::map<std::string, double> out;
  out["rollout/generated_tokens"] = static_cast<double>(s.generated_tokens);
  out["rollout/prefill_tokens"] = static_cast<double>(s.prefill_tokens);
  // K/V reuse: prompt tokens not prefilled (a group's siblings, prefix-cache hits) and the cache's own figures.
  out["rollout/prefill_tokens_saved"] = static_cast<double>(s.prefill_tokens_saved);
  out["rollout/prefix_cache_queried_tokens"] = static_cast<double>(s.prefix_cache_queried_tokens);
  out["rollout/prefix_cache_hit_tokens"] = static_cast<double>(s.prefix_cache_hit_tokens);
  out["rollout/prefix_cache_hit_rate"] = s.prefix_cache_hit_rate();
  out["rollout/kv_bytes_per_token"] = static_cast<double>(s.kv_bytes_per_token);
  out["engine/steps"] = static_cast<double>(s.steps);
  out["engine/forward_s"] = s.forward_s;
  if (rollout.samples.empty()) return out;
  std::vector<int64_t> lengths;
  double sum = 0, clipped = 0;
  for (const Sample& sample : rollout.samples) {
    lengths.push_back(static_cast<int64_t>(sample.tokens.size()));
    sum += static_cast<double>(sample.tokens.size());
    clipped += sample.finish_reason == FinishReason::kLength;
  }
  const double n = static_cast<double>(lengths.size());
  out["rollout/response_length/mean"] = sum / n;
  out["rollout/response_length/min"] = percentile(lengths, 0);
  out["rollout/response_length/max"] = percentile(lengths, 100);
  out["rollout/response_length/p50"] = percentile(lengths, 50);
  out["rollout/response_length/p90"] = percentile(lengths, 90);
  out["rollout/response_clip_ratio"] = clipped / n;
  return out;
}

}  // namespace rlcpp
