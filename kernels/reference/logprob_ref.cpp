// Reference per-token log-probabilities of softmax(logits / T), their entropy and backward, in double; and the
// same under the sampler's top-k / top-p truncation (kernels/truncation.h's rule, written out plainly).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/reference/reference_kernels.h"

namespace rlcpp::ref {
namespace {

// logsumexp of row / T over the entries kept (all when kept is empty).
double lse_of(const float* row, int64_t v, float temperature, const std::vector<bool>& kept) {
  double m = -INFINITY;
  for (int64_t j = 0; j < v; ++j)
    if (kept.empty() || kept[j]) m = std::max(m, double(row[j] / temperature));
  double sum = 0.0;
  for (int64_t j = 0; j < v; ++j)
    if (kept.empty() || kept[j]) sum += std::exp(double(row[j] / temperature) - m);
  return m + std::log(sum);
}

// The sampler's kept set of one row, and the target counted in: weights exp((l - max) / T), tokens by weight
// descending (the lower id first among equals), the first top_k, then the shortest prefix of those whose weight
// reaches top_p of their total.
std::vector<bool> kept_set(const float* row, int64_t v, float temperature, const Truncation& t, int32_t target) {
  const float top = *std::max_element(row, row + v);
  std::vector<double> w(v);
  for (int64_t j = 0; j < v; ++j) w[j] = std::exp(double((row[j] - top) / temperature));
  std::vector<int32_t> order(v);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return w[a] > w[b]; });
  int64_t count = t.top_k > 0 ? std::min<int64_t>(t.top_k, v) : v;
  if (t.top_p < 1.0f) {
    double total = 0.0, mass = 0.0;
    for (int64_t r = 0; r < count; ++r) total += w[order[r]];
    int64_t r = 0;
    while (r < count && (r == 0 || mass < double(t.top_p) * total)) mass += w[order[r++]];
    count = r;
  }
  std::vector<bool> kept(v, false);
  for (int64_t r = 0; r < count; ++r) kept[order[r]] = true;
  kept[target] = true;
  return kept;
}

}  // namespace

void logprob_forward(const float* logits, const int32_t* targets, float temperature, float* logp, float* lse,
                     float* entropy, int64_t n, int64_t v) {
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits + i * v;
    const double l = lse_of(row, v, temperature, {});
    lse[i] = static_cast<float>(l);
    logp[i] = targets[i] < 0 ? 0.0f : static_cast<float>(double(row[targets[i]] / temperature) - l);
    if (entropy) {
      double h = 0.0;
      for (int64_t j = 0; j < v; ++j) {
        const double lp = double(row[j] / temperature) - l;
        h -= std::exp(lp) * lp;
      }
      entropy[i] = static_cast<float>(h);
    }
  }
}

void logprob_backward(const float* dlogp, const float* dentropy, const float* logits, const int32_t* targets,
                      float temperature, const float* lse, float* dlogits, int64_t n, int64_t v) {
  // d logp_t / dz_j = [j = t] - p_j; dH / dz_j = -p_j (log p_j + H); dz / dlogits = 1 / T.
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits + i * v;
    const double g_logp = targets[i] < 0 ? 0.0 : dlogp[i], g_ent = dentropy ? dentropy[i] : 0.0;
    double h = 0.0;
    for (int64_t j = 0; j < v; ++j) {
      const double lp = double(row[j] / temperature) - lse[i];
      h -= std::exp(lp) * lp;
    }
    for (int64_t j = 0; j < v; ++j) {
      const double lp = double(row[j] / temperature) - lse[i], p = std::exp(lp);
      double g = -g_logp * p - g_ent * p * (lp + h);
      if (j == targets[i]) g += g_logp;
      dlogits[i * v + j] = static_cast<float>(g / temperature);
    }
  }
}

void logprob_truncated_forward(const float* logits, const int32_t* targets, float temperature, const Truncation& t,
                               float* logp, float* lse, int64_t n, int64_t v) {
  for (int64_t i = 0; i < n; ++i) {
    if (targets[i] < 0) {
      logp[i] = lse[i] = 0.0f;
      continue;
    }
    const float* row = logits + i * v;
    const double l = lse_of(row, v, temperature, kept_set(row, v, temperature, t, targets[i]));
    lse[i] = static_cast<float>(l);
    logp[i] = static_cast<float>(double(row[targets[i]] / temperature) - l);
  }
}

void logprob_truncated_backward(const float* dlogp, const float* logits, const int32_t* targets, float temperature,
                                const Truncation& t, const float* lse, float* dlogits, int64_t n, int64_t v) {
  // Over the kept set: d logp / dz_j = [j = target] - p_j (the set is a constant of the sampling); 0 outside.
  for (int64_t i = 0; i < n; ++i) {
    float* drow = dlogits + i * v;
    if (targets[i] < 0) {
      std::fill(drow, drow + v, 0.0f);
      continue;
    }
    const float* row = logits + i * v;
    const std::vector<bool> kept = kept_set(row, v, temperature, t, targets[i]);
    for (int64_t j = 0; j < v; ++j) {
      const double p = kept[j] ? std::exp(double(row[j] / temperature) - lse[i]) : 0.0;
      drow[j] = static_cast<float>(dlogp[i] * ((j == targets[i] ? 1.0 : 0.0) - p) / temperature);
    }
  }
}

}  // namespace rlcpp::ref
