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

namespace {

// Per sequence: the statistic s_i of the loss type and ds_i/dlogp_t for its masked tokens (1, or 1 / tokens).
struct SequenceStats {
  std::vector<double> s, token_weight;
};

SequenceStats sequence_stats(const DpoInputs& in, const DpoConfig& cfg) {
  const int64_t B = static_cast<int64_t>(in.cu.size()) - 1;
  const bool mean = cfg.loss_type == "ipo" || cfg.loss_type == "simpo";
  const bool ref = cfg.uses_reference();
  SequenceStats out{std::vector<double>(B, 0.0), std::vector<double>(B, 1.0)};
  for (int64_t i = 0; i < B; ++i) {
    double tokens = 0;
    for (int64_t t = in.cu[i]; t < in.cu[i + 1]; ++t) {
      out.s[i] += static_cast<double>(in.mask[t]) * (static_cast<double>(in.logp[t]) - (ref ? in.ref_logp[t] : 0.0));
      tokens += in.mask[t];
    }
    if (mean) {
      out.token_weight[i] = tokens > 0 ? 1.0 / tokens : 0.0;
      out.s[i] *= out.token_weight[i];
    }
  }
  return out;
}

struct PairLoss {
  double loss, dz;  // the pair's loss and dloss/dz
};

PairLoss pair_loss(double z, const DpoConfig& cfg) {
  const double b = cfg.beta, eps = cfg.label_smoothing;
  if (cfg.loss_type == "ipo") {
    const double d = z - 1.0 / (2.0 * b);
    return {d * d, 2.0 * d};
  }
  // The logistic losses on u = beta z (- gamma for simpo), du/dz = beta.
  const double u = cfg.loss_type == "simpo" ? b * z - cfg.simpo_gamma : b * z;
  if (cfg.loss_type == "robust") {
    const double norm = 1.0 - 2.0 * eps;
    return {((1 - eps) * neg_log_sigmoid(u) - eps * neg_log_sigmoid(-u)) / norm,
            b * (-(1 - eps) * sigmoid(-u) - eps * sigmoid(u)) / norm};
  }
  return {(1 - eps) * neg_log_sigmoid(u) + eps * neg_log_sigmoid(-u), b * (-(1 - eps) * sigmoid(-u) + eps * sigmoid(u))};
}

}  // namespace

LossOutput dpo_loss(const DpoInputs& in, const DpoConfig& cfg, double global_num_pairs) {
  const size_t T = in.logp.size();
  check_offsets(in.cu, T, "dpo_loss");
  if (cfg.uses_reference()) check_token_array(in.ref_logp, T, "dpo_loss: ref_logp");
  check_token_array(in.mask, T, "dpo_loss: mask");
  cfg.validate("dpo_loss");
  RLCPP_CHECK(global_num_pairs >= static_cast<double>(in.pairs.size()),
              "dpo_loss: global_num_pairs " << global_num_pairs << " is less than this micro-batch's "
                                            << in.pairs.size() << " pairs");
  const int64_t B = static_cast<int64_t>(in.cu.size()) - 1;
  const SequenceStats seq = sequence_stats(in, cfg);

  std::vector<double> dseq(B, 0.0);  // dL / ds_i per sequence
  double loss = 0, chosen_sum = 0, rejected_sum = 0, correct = 0;
  for (const DpoPair& p : in.pairs) {
    RLCPP_CHECK(p.chosen >= 0 && p.chosen < B && p.rejected >= 0 && p.rejected < B && p.chosen != p.rejected,
                "dpo_loss: pair (" << p.chosen << ", " << p.rejected << ") is not two distinct sequences of the "
                                   << B << " in the batch");
    const PairLoss l = pair_loss(seq.s[p.chosen] - seq.s[p.rejected], cfg);
    loss += l.loss / global_num_pairs;
    dseq[p.chosen] += l.dz / global_num_pairs;
    dseq[p.rejected] -= l.dz / global_num_pairs;
    const double chosen = cfg.beta * seq.s[p.chosen], rejected = cfg.beta * seq.s[p.rejected];
    chosen_sum += chosen;
    rejected_sum += rejected;
    correct += chosen > rejected ? 1.0 : 0.0;
  }
  LossOutput out;
  out.loss = loss;
  out.dlogp.assign(T, 0.0f);
  for (int64_t i = 0; i < B; ++i)
    for (int64_t t = in.cu[i]; t < in.cu[i + 1]; ++t)
      out.dlogp[t] = static_cast<float>(dseq[i] * seq.token_weight[i] * in.mask[t]);
  const double n = static_cast<double>(in.pairs.size());
  out.metrics.add_sum("dpo_loss", loss);
  out.metrics.add_mean("dpo_reward_chosen", chosen_sum, n);
  out.metrics.add_mean("dpo_reward_rejected", rejected_sum, n);
  out.metrics.add_mean("dpo_reward_margin", chosen_sum - rejected_sum, n);
  out.metrics.add_mean("dpo_accuracy", correct, n);
  return out;
}

}  // namespace rlcpp
