#include "kernels/truncation.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "kernels/cpu/vec_math.h"

namespace rlcpp {

namespace {

// The row's maximum and its lowest id. Eight lanes, so that the scan vectorises; a NaN never wins a comparison.
void find_argmax(const float* logits, int64_t V, KeptSet& k) {
  float lane[8];
  for (float& l : lane) l = logits[0];
  int64_t j = 0;
  for (; j + 8 <= V; j += 8)
    for (int i = 0; i < 8; ++i) lane[i] = logits[j + i] > lane[i] ? logits[j + i] : lane[i];
  float m = lane[0];
  for (int i = 1; i < 8; ++i) m = lane[i] > m ? lane[i] : m;
  for (; j < V; ++j) m = logits[j] > m ? logits[j] : m;
  k.max_logit = m;
  k.argmax = 0;
  for (int64_t i = 0; i < V; ++i)
    if (logits[i] == m) {
      k.argmax = static_cast<int32_t>(i);
      break;
    }
}

// w_j = exp_fixed((l_j - max) / T) in float, widened; returns their total, summed in double lanes.
double fill_weights(const float* logits, int64_t V, float max_logit, float temperature, double* w) {
  constexpr int64_t kPiece = 1024;
  float buf[kPiece];
  cpu::LaneSumOf<double> total;
  for (int64_t j0 = 0; j0 < V; j0 += kPiece) {
    const int64_t len = std::min(kPiece, V - j0);
    for (int64_t j = 0; j < len; ++j) buf[j] = cpu::exp_fixed((logits[j0 + j] - max_logit) / temperature);
    std::copy(buf, buf + len, w + j0);
    total.add(buf, len);
  }
  return total.total();
}

}  // namespace

KeptSet truncation_kept_set(const float* logits, int64_t V, float temperature, const Truncation& t,
                            TruncationScratch& s) {
  s.weights.resize(static_cast<size_t>(V));
  s.order.resize(static_cast<size_t>(V));
  KeptSet k;
  find_argmax(logits, V, k);
  RLCPP_CHECK(std::isfinite(k.max_logit), "sampling: non-finite logits (max " << k.max_logit << ")");
  k.total = fill_weights(logits, V, k.max_logit, temperature, s.weights.data());
  // A NaN anywhere fails every comparison above but poisons the sum.
  RLCPP_CHECK(std::isfinite(k.total), "sampling: non-finite logits (NaN in the row)");
  std::iota(s.order.begin(), s.order.end(), 0);
  k.kept = V;
  k.mass = k.total;
  const bool top_k = t.top_k > 0 && t.top_k < V, top_p = t.top_p < 1.0f;
  if (!top_k && !top_p) return k;  // walk in id order, no sort
  const std::vector<double>& w = s.weights;
  auto more_likely = [&](int32_t a, int32_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); };
  // The candidates, most likely first: the first top_k, or (top-p alone) the whole row, of which only a prefix
  // holding top_p of the total is sorted, grown until it does (the order is total, so a partial sort's prefix
  // is the full sort's).
  double candidate_mass = k.total;
  int64_t sorted = top_k ? t.top_k : std::min<int64_t>(V, 256);
  while (true) {
    std::partial_sort(s.order.begin(), s.order.begin() + sorted, s.order.end(), more_likely);
    if (top_k || sorted == V) break;
    double prefix = 0;
    for (int64_t i = 0; i < sorted; ++i) prefix += w[s.order[i]];
    if (prefix >= static_cast<double>(t.top_p) * candidate_mass) break;
    sorted = std::min(V, sorted * 4);
  }
  if (top_k) {
    candidate_mass = 0;
    for (int64_t i = 0; i < sorted; ++i) candidate_mass += w[s.order[i]];
  }
  k.kept = sorted;
  k.mass = candidate_mass;
  if (top_p) {
    const double target = static_cast<double>(t.top_p) * candidate_mass;
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
