#include "trainer/dpo_loss.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"
#include "trainer/loss_normalizer.h"

namespace rlcpp {

namespace {

// -log sigmoid(z) = log(1 + exp(-z)), without overflow for either sign of z.
double neg_log_sigmoid(double z) { return z >= 0 ? std::log1p(std::exp(-z)) : -z + std::log1p(std::exp(z)); }

double sigmoid(double z) {
  if (z >= 0) return 1.0 / (1.0 + std::exp(-z));
  const double e = std::exp(z);
  return e / (1.0 + e);
}

}  // namespace

std::vector<DpoPair> pair_by_reward(std::span<const float> rewards, std::span<const int64_t> group_ids) {
  RLCPP_CHECK(rewards.size() == group_ids.size(), "pair_by_reward: " << rewards.size() << " rewards but "
                                                                     << group_ids.size() << " group ids");
  struct Extremes {
    size_t first = 0, best = 0, worst = 0;
  };
  std::map<int64_t, Extremes> groups;
  for (size_t i = 0; i < rewards.size(); ++i) {
    auto [it, inserted] = groups.try_emplace(group_ids[i], Extremes{i, i, i});
    if (inserted) continue;
    Extremes& e = it->second;
    if (rewards[i] > rewards[e.best]) e.best = i;
    if (rewards[i] < rewards[e.worst]) e.worst = i;
  }
  std::vector<std::pair<size_t, DpoPair>> ordered;
  for (const auto& [id, e] : groups)
    if (rewards[e.best] > rewards[e.worst])
      ordered.push_back({e.first, DpoPair{static_cast<int64_t>(e.best), static_cast<int64_t>(e.worst)}});
  std::sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<DpoPair> pairs;
  for (const auto& [first, pair] : ordered) pairs.push_back(pair);
  return pairs;
}

LossOutput dpo_loss(const DpoInputs& in, const DpoConfig& cfg, double global_num_pairs) {
  const size_t T = in.logp.size();
  check_offsets(in.cu, T, "dpo_loss");
  check_token_array(in.ref_logp, T, "dpo_loss: ref_logp");
  check_token_array(in.mask, T, "dpo_loss: mask");
  RLCPP_CHECK(cfg.beta > 0, "dpo_loss: beta must be positive, got " << cfg.beta);
  RLCPP_CHECK(global_num_pairs >= static_cast<double>(in.pairs.size()),
              "dpo_loss: global_num_pairs " << global_num_pairs << " is less than this micro-batch's "
                                            << in.pairs.size() << " pairs");
  const int64_t B = static_cast<int64_t>(in.cu.size()) - 1;
  // Per-sequence log-ratio sum_t mask_t (logp_t - ref_logp_t).
  std::vector<double> log_ratio(B, 0.0);
  for (int64_t i = 0; i < B; ++i)
    for (int64_t t = in.cu[i]; t < in.cu[i + 1]; ++t)
      log_ratio[i] += static_cast<double>(in.mask[t]) * (static_cast<double>(in.logp[t]) - in.ref_logp[t]);

  std::vector<double> dseq(B, 0.0);  // dL / d(sum_t mask_t logp_t) per sequence
  double loss = 0, chosen_sum = 0, rejected_sum = 0, correct = 0;
  for (const DpoPair& p : in.pairs) {
    RLCPP_CHECK(p.chosen >= 0 && p.chosen < B && p.rejected >= 0 && p.rejected < B && p.chosen != p.rejected,
                "dpo_loss: pair (" << p.chosen << ", " << p.rejected << ") is not two distinct sequences of the "
                                   << B << " in the batch");
    const double chosen = cfg.beta * log_ratio[p.chosen];
    const double rejected = cfg.beta * log_ratio[p.rejected];
    const double z = chosen - rejected;
    loss += neg_log_sigmoid(z) / global_num_pairs;
    const double dz = -sigmoid(-z) / global_num_pairs;
    dseq[p.chosen] += dz * cfg.beta;
    dseq[p.rejected] -= dz * cfg.beta;
    chosen_sum += chosen;
    rejected_sum += rejected;
    correct += chosen > rejected ? 1.0 : 0.0;
  }
  LossOutput out;
  out.loss = loss;
  out.dlogp.assign(T, 0.0f);
  for (int64_t i = 0; i < B; ++i)
    for (int64_t t = in.cu[i]; t < in.cu[i + 1]; ++t) out.dlogp[t] = static_cast<float>(dseq[i] * in.mask[t]);
  const double n = static_cast<double>(in.pairs.size());
  out.metrics.add_sum("dpo_loss", loss);
  out.metrics.add_mean("dpo_reward_chosen", chosen_sum, n);
  out.metrics.add_mean("dpo_reward_rejected", rejected_sum, n);
  out.metrics.add_mean("dpo_reward_margin", chosen_sum - rejected_sum, n);
  out.metrics.add_mean("dpo_accuracy", correct, n);
  return out;
}

}  // namespace rlcpp
