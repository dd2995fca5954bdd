#include "kernels/truncation.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace rlcpp {

KeptSet truncation_kept_set(const float* logits, int64_t V, float temperature, const Truncation& t,
                            TruncationScratch& s) {
  s.weights.resize(static_cast<size_t>(V));
  s.order.resize(static_cast<size_t>(V));
  KeptSet k;
  for (int64_t j = 1; j < V; ++j)
    if (logits[j] > logits[k.argmax]) k.argmax = static_cast<int32_t>(j);
  k.max_logit = logits[k.argmax];
  RLCPP_CHECK(std::isfinite(k.max_logit), "sampling: non-finite logits (max " << k.max_logit << ")");
  const double inv_t = 1.0 / temperature;
  for (int64_t j = 0; j < V; ++j) {
    s.weights[j] = std::exp((static_cast<double>(logits[j]) - k.max_logit) * inv_t);
    k.total += s.weights[j];
  }
  // A NaN anywhere fails every comparison above but poisons the sum.
  RLCPP_CHECK(std::isfinite(k.total), "sampling: non-finite logits (NaN in the row)");
  std::iota(s.order.begin(), s.order.end(), 0);
  k.kept = V;
  k.mass = k.total;
  const bool top_k = t.top_k > 0 && t.top_k < V, top_p = t.top_p < 1.0f;
  if (!top_k && !top_p) return k;  // walk in id order, no sort
  const std::vector<double>& w = s.weights;
  auto more_likely = [&](int32_t a, int32_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); };
  if (top_k) {
    k.kept = t.top_k;
    std::partial_sort(s.order.begin(), s.order.begin() + k.kept, s.order.end(), more_likely);
  } else {
    std::sort(s.order.begin(), s.order.end(), more_likely);
  }
  k.mass = 0;
  for (int64_t i = 0; i < k.kept; ++i) k.mass += w[s.order[i]];
  if (top_p) {
    const double target = static_cast<double>(t.top_p) * k.mass;
    double cum = 0;
    int64_t m = 0;
    while (m < k.kept) {
      cum += w[s.order[m++]];
      if (cum >= target) break;
    }
    k.kept = m;
    k.mass = cum;
  }
  return k;
}

void kept_mask(const KeptSet& set, int32_t also, TruncationScratch& s, int64_t V) {
  s.in_set.assign(static_cast<size_t>(V), 0);
  for (int64_t i = 0; i < set.kept; ++i) s.in_set[static_cast<size_t>(s.order[i])] = 1;
  if (also >= 0) s.in_set[static_cast<size_t>(also)] = 1;
}

}  // namespace rlcpp
