// Per-token estimators of KL(pi || ref) from a token sampled from pi (http://joschu.net/blog/kl-approx.html),
// as verl's kl_penalty computes them, with the derivative with respect to logp (ref_logp is frozen):
//   k1 ("kl")         : logp - ref_logp
//   k2 ("mse")        : 0.5 (logp - ref_logp)^2
//   k3 ("low_var_kl") : exp(x) - x - 1 with x = clamp(ref_logp - logp, -20, 20), the result clamped to [-10, 10]
// Derivatives follow torch autograd through the clamps: zero where a clamp is active, passed on at its bound.
#pragma once

#include <string>

namespace rlcpp {

enum class KlEstimator { kK1, kK2, kK3 };

// Accepts "k1" | "kl", "k2" | "mse", "k3" | "low_var_kl"; the error names `key` and the valid choices.
KlEstimator parse_kl_estimator(const std::string& text, const std::string& key);
const char* kl_estimator_name(KlEstimator est);

struct KlTerm {
  double value = 0;  // the estimate (nats)
  double dlogp = 0;  // d value / d logp
};

KlTerm kl_estimate(double logp, double ref_logp, KlEstimator est);

}  // namespace rlcpp
