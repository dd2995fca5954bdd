#include "trainer/kl.h"

#include <cmath>

#include "core/error.h"

namespace rlcpp {

namespace {

// verl clamps the log-ratio before exp and the k3 value after it, "for numerical stability".
constexpr double kK3LogRatioBound = 20.0;
constexpr double kK3ValueBound = 10.0;

}  // namespace

KlEstimator parse_kl_estimator(const std::string& text, const std::string& key) {
  if (text == "k1" || text == "kl") return KlEstimator::kK1;
  if (text == "k2" || text == "mse") return KlEstimator::kK2;
  if (text == "k3" || text == "low_var_kl") return KlEstimator::kK3;
  RLCPP_FAIL(key << ": unknown KL estimator \"" << text
                 << "\" (expected one of \"k1\", \"k2\", \"k3\", or verl's names \"kl\", \"mse\", \"low_var_kl\")");
}

const char* kl_estimator_name(KlEstimator est) {
  switch (est) {
    case KlEstimator::kK1: return "k1";
    case KlEstimator::kK2: return "k2";
    case KlEstimator::kK3: return "k3";
  }
  return "?";
}

KlTerm kl_estimate(double logp, double ref_logp, KlEstimator est) {
  switch (est) {
    case KlEstimator::kK1: return {logp - ref_logp, 1.0};
    case KlEstimator::kK2: {
      double d = logp - ref_logp;
      return {0.5 * d * d, d};
    }
    case KlEstimator::kK3: {
      double raw = ref_logp - logp;
      bool raw_passes = raw >= -kK3LogRatioBound && raw <= kK3LogRatioBound;
      double x = raw_passes ? raw : (raw < 0 ? -kK3LogRatioBound : kK3LogRatioBound);
      double ratio = std::exp(x);
      double k3 = ratio - x - 1.0;
      bool value_passes = k3 >= -kK3ValueBound && k3 <= kK3ValueBound;
      double value = value_passes ? k3 : (k3 < 0 ? -kK3ValueBound : kK3ValueBound);
      // d k3 / d x = ratio - 1 and d x / d logp = -1.
      double dlogp = (raw_passes && value_passes) ? 1.0 - ratio : 0.0;
      return {value, dlogp};
    }
  }
  return {};
}

}  // namespace rlcpp
