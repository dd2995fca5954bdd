#include "reward/overlong_penalty.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace rlcpp {

void OverlongBufferConfig::validate(const std::string& where, int64_t max_new_tokens) const {
  if (!enabled) return;
  RLCPP_CHECK(len >= 1 && len <= max_new_tokens,
              where << ".len: must be in [1, rollout.sampling.max_new_tokens = " << max_new_tokens << "], got " << len
                    << " (DAPO: 4096 of 20480)");
  RLCPP_CHECK(penalty_factor >= 0 && std::isfinite(penalty_factor),
              where << ".penalty_factor: must be >= 0 and finite, got " << penalty_factor);
}

double overlong_penalty(int64_t response_tokens, int64_t max_new_tokens, const OverlongBufferConfig& cfg) {
  if (!cfg.enabled) return 0.0;
  const int64_t expected = max_new_tokens - cfg.len;
  const double exceed = static_cast<double>(response_tokens - expected);
  return std::min(0.0, -exceed / static_cast<double>(cfg.len) * cfg.penalty_factor);
}

void apply_overlong_penalty(std::vector<RewardResult>& results, std::span<const int64_t> response_tokens,
                            int64_t max_new_tokens, const OverlongBufferConfig& cfg) {
  if (!cfg.enabled) return;
  RLCPP_CHECK(results.size() == response_tokens.size(), "apply_overlong_penalty: " << results.size()
                                                                                   << " results but "
                                                                                   << response_tokens.size()
                                                                                   << " response lengths");
  for (size_t i = 0; i < results.size(); ++i) {
    const double penalty = overlong_penalty(response_tokens[i], max_new_tokens, cfg);
    results[i].total += penalty;
    results[i].components.emplace_back("overlong_penalty", penalty);
    results[i].components.emplace_back("overlong", penalty < 0 ? 1.0 : 0.0);
  }
}

}  // namespace rlcpp
