#include "loop/mismatch.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace rlcpp {

std::map<std::string, double> Mismatch::metrics(const std::string& prefix) const {
  return {{prefix + "max_abs_dlogp", max_abs_dlogp},
          {prefix + "mean_abs_dp", mean_abs_dp},
          {prefix + "k1", k1},
          {prefix + "k3", k3}};
}

Mismatch logprob_mismatch(const std::vector<std::vector<float>>& rollout_logp,
                          const std::vector<std::vector<float>>& trainer_logp) {
  RLCPP_CHECK(rollout_logp.size() == trainer_logp.size(),
              "mismatch: " << rollout_logp.size() << " rollout samples vs " << trainer_logp.size() << " trainer");
  Mismatch m;
  double sum_dp = 0, sum_k1 = 0, sum_k3 = 0;
  for (size_t i = 0; i < rollout_logp.size(); ++i) {
    RLCPP_CHECK(rollout_logp[i].size() == trainer_logp[i].size(),
                "mismatch: sample " << i << " has " << rollout_logp[i].size() << " rollout log-probs and "
                                    << trainer_logp[i].size() << " trainer log-probs");
    for (size_t t = 0; t < rollout_logp[i].size(); ++t) {
      const double q = rollout_logp[i][t], p = trainer_logp[i][t], r = p - q;
      m.max_abs_dlogp = std::max(m.max_abs_dlogp, std::abs(r));
      if (std::isnan(r)) m.max_abs_dlogp = r;  // NaN must show, not vanish in max()
      sum_dp += std::abs(std::exp(p) - std::exp(q));
      sum_k1 += -r;
      sum_k3 += std::expm1(r) - r;
      ++m.tokens;
    }
  }
  if (m.tokens > 0) {
    m.mean_abs_dp = sum_dp / m.tokens;
    m.k1 = sum_k1 / m.tokens;
    m.k3 = sum_k3 / m.tokens;
  }
  return m;
}

}  // namespace rlcpp
