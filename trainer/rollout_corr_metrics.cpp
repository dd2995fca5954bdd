#include "trainer/rollout_corr_metrics.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace rlcpp {

namespace {

constexpr double kSafetyBound = 20.0;  // verl's SAFETY_BOUND on a log-ratio before exp
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
const std::string kPrefix = "rollout_corr/";

struct Bucket {
  const char* label;
  double lo, hi;  // [lo, hi) of the rollout probability exp(q)
};
constexpr std::array<Bucket, 4> kBuckets = {{{"p0.0-0.1", 0.0, 0.1},
                                             {"p0.1-0.5", 0.1, 0.5},
                                             {"p0.5-0.9", 0.5, 0.9},
                                             {"p0.9-1.0", 0.9, std::numeric_limits<double>::infinity()}}};

// One token's figures, in double from the float inputs.
struct Token {
  double p, q;
  double r;       // p - q
  double rho;     // exp(clamp(r, +-20))
  double dp;      // |exp(p) - exp(q)|
  bool outside;   // rho outside [1/C, C]
};

Token token(float trainer, float rollout, double bound) {
  Token t;
  t.p = trainer;
  t.q = rollout;
  t.r = t.p - t.q;
  t.rho = std::exp(std::clamp(t.r, -kSafetyBound, kSafetyBound));
  t.dp = std::abs(std::exp(t.p) - std::exp(t.q));
  t.outside = !(t.rho >= 1.0 / bound && t.rho <= bound);
  return t;
}

// max/min that keep a NaN once one is seen (std::max would drop it or not depending on the order).
double nan_max(double acc, double x) { return std::isnan(acc) || std::isnan(x) ? kNaN : std::max(acc, x); }
double nan_min(double acc, double x) { return std::isnan(acc) || std::isnan(x) ? kNaN : std::min(acc, x); }

// Token sums shared by the whole batch and each bucket.
struct TokenSums {
  double n = 0, kl = 0, k3 = 0, dp = 0, rho = 0, outside = 0;
  void add(const Token& t) {
    n += 1;
    kl += -t.r;
    k3 += std::expm1(t.r) - t.r;
    dp += t.dp;
    rho += t.rho;
    outside += t.outside ? 1.0 : 0.0;
  }
  void put(std::map<std::string, double>& out, const std::string& prefix) const {
    out[prefix + "tokens"] = n;
    if (n == 0) return;
    out[prefix + "kl"] = kl / n;
    out[prefix + "k3_kl"] = k3 / n;
    out[prefix + "probs_diff_mean"] = dp / n;
    out[prefix + "is_weight_mean"] = rho / n;
    out[prefix + "ratio_outside_frac"] = outside / n;
  }
};

// Undefined when a side has zero variance: 1 if the two sides agree at every token, else 0 (see the header).
double pearson(const std::vector<Token>& tokens) {
  const double n = static_cast<double>(tokens.size());
  double mx = 0, my = 0;
  for (const Token& t : tokens) {
    mx += std::exp(t.p);
    my += std::exp(t.q);
  }
  mx /= n;
  my /= n;
  double sxx = 0, syy = 0, sxy = 0;
  bool identical = true;
  for (const Token& t : tokens) {
    const double x = std::exp(t.p), y = std::exp(t.q);
    sxx += (x - mx) * (x - mx);
    syy += (y - my) * (y - my);
    sxy += (x - mx) * (y - my);
    identical = identical && x == y;
  }
  if (std::isnan(sxx) || std::isnan(syy) || std::isnan(sxy)) return kNaN;
  if (sxx > 0 && syy > 0) return std::clamp(sxy / std::sqrt(sxx * syy), -1.0, 1.0);
  return identical ? 1.0 : 0.0;
}

}  // namespace

std::map<std::string, double> rollout_corr_metrics(const std::vector<std::vector<float>>& rollout_logp,
                                                   const std::vector<std::vector<float>>& trainer_logp,
                                                   double ratio_bound) {
  RLCPP_CHECK(rollout_logp.size() == trainer_logp.size(),
              "rollout_corr_metrics: " << rollout_logp.size() << " rollout samples vs " << trainer_logp.size()
                                       << " trainer samples");
  RLCPP_CHECK(ratio_bound >= 1, "rollout_corr_metrics: the ratio bound C of [1/C, C] must be >= 1, got "
                                    << ratio_bound);
  std::vector<Token> tokens;
  TokenSums all;
  std::array<TokenSums, kBuckets.size()> buckets;
  double seqs = 0, train_ppl = 0, roll_ppl = 0, log_ppl_diff = 0, seq_rho_sq = 0;
  for (size_t i = 0; i < rollout_logp.size(); ++i) {
    const std::vector<float>& q = rollout_logp[i];
    const std::vector<float>& p = trainer_logp[i];
    RLCPP_CHECK(q.size() == p.size(), "rollout_corr_metrics: sample " << i << " has " << q.size()
                                                                      << " rollout log-probs and " << p.size()
                                                                      << " trainer log-probs");
    if (q.empty()) continue;
    double sum_p = 0, sum_q = 0;
    for (size_t t = 0; t < q.size(); ++t) {
      const Token tok = token(p[t], q[t], ratio_bound);
      tokens.push_back(tok);
      all.add(tok);
      const double prob = std::exp(tok.q);
      for (size_t b = 0; b < kBuckets.size(); ++b)
        if (prob >= kBuckets[b].lo && prob < kBuckets[b].hi) buckets[b].add(tok);
      sum_p += tok.p;
      sum_q += tok.q;
    }
    const double n = static_cast<double>(q.size());
    seqs += 1;
    train_ppl += std::exp(-sum_p / n);
    roll_ppl += std::exp(-sum_q / n);
    log_ppl_diff += sum_q / n - sum_p / n;
    seq_rho_sq += std::exp(2.0 * std::clamp(sum_p - sum_q, -kSafetyBound, kSafetyBound));
  }

  std::map<std::string, double> out;
  all.put(out, kPrefix);
  for (size_t b = 0; b < kBuckets.size(); ++b)
    buckets[b].put(out, kPrefix + "bucket/" + kBuckets[b].label + "/");
  if (tokens.empty()) return out;

  const double n = all.n;
  double dp_max = 0, rho_min = tokens[0].rho, rho_max = tokens[0].rho, rho_sq = 0;
  for (const Token& t : tokens) {
    dp_max = nan_max(dp_max, t.dp);
    rho_min = nan_min(rho_min, t.rho);
    rho_max = nan_max(rho_max, t.rho);
    rho_sq += t.rho * t.rho;
  }
  // Second pass: spreads around the means (two-pass, so no E[x^2] - E[x]^2 cancellation).
  const double dp_mean = all.dp / n, rho_mean = all.rho / n;
  double dp_var = 0, rho_var = 0;
  for (const Token& t : tokens) {
    dp_var += (t.dp - dp_mean) * (t.dp - dp_mean);
    rho_var += (t.rho - rho_mean) * (t.rho - rho_mean);
  }
  out[kPrefix + "training_ppl"] = train_ppl / seqs;
  out[kPrefix + "rollout_ppl"] = roll_ppl / seqs;
  out[kPrefix + "log_ppl_diff"] = log_ppl_diff / seqs;
  out[kPrefix + "chi2_token"] = rho_sq / n - 1.0;
  out[kPrefix + "chi2_seq"] = seq_rho_sq / seqs - 1.0;
  out[kPrefix + "probs_diff_max"] = dp_max;
  out[kPrefix + "probs_diff_std"] = n > 1 ? std::sqrt(dp_var / (n - 1)) : 0.0;
  out[kPrefix + "probs_pearson_corr"] = pearson(tokens);
  out[kPrefix + "is_weight_std"] = std::sqrt(rho_var / n);
  out[kPrefix + "is_weight_min"] = rho_min;
  out[kPrefix + "is_weight_max"] = rho_max;
  out[kPrefix + "is_ess"] = all.rho * all.rho / (n * rho_sq);
  return out;
}

}  // namespace rlcpp
