#include "trainer/advantages.h"

#include <cmath>
#include <map>

#include "core/error.h"
#include "trainer/loss_normalizer.h"

namespace rlcpp {

namespace {

// verl masked_whiten's epsilon under the square root.
constexpr double kWhitenEps = 1e-8;

}  // namespace

std::vector<float> group_advantages(std::span<const float> scores, std::span<const int64_t> group_ids,
                                    const AdvantageConfig& cfg) {
  RLCPP_CHECK(scores.size() == group_ids.size(), "group_advantages: " << scores.size() << " scores but "
                                                                      << group_ids.size() << " group ids");
  cfg.validate("advantage");
  RLCPP_CHECK(cfg.estimator != "gae", "group_advantages: estimator \"gae\" needs a critic; call gae()");
  std::map<int64_t, std::vector<size_t>> groups;
  for (size_t i = 0; i < scores.size(); ++i) groups[group_ids[i]].push_back(i);

  std::vector<float> adv(scores.size(), 0.0f);
  for (const auto& [id, members] : groups) {
    const double n = static_cast<double>(members.size());
    if (members.size() == 1) {
      // verl: a lone sample has mean 0 and std 1 (grpo), or is left as is (rloo).
      const double r = scores[members[0]];
      adv[members[0]] = static_cast<float>(cfg.divides_by_std() ? r / (1.0 + cfg.eps) : r);
      continue;
    }
    double mean = 0;
    for (size_t i : members) mean += scores[i];
    mean /= n;
    double var = 0;
    for (size_t i : members) var += (scores[i] - mean) * (scores[i] - mean);
    const double std_dev = std::sqrt(var / (n - 1.0));  // torch.std: unbiased
    for (size_t i : members) {
      const double centred = scores[i] - mean;
      double a = centred;
      if (cfg.estimator == "rloo") a = centred * n / (n - 1.0);
      else if (cfg.divides_by_std()) a = centred / (std_dev + cfg.eps);
      adv[i] = static_cast<float>(a);
    }
  }
  return adv;
}

std::vector<float> broadcast_to_tokens(std::span<const int64_t> cu, std::span<const float> mask,
                                       std::span<const float> per_seq) {
  check_offsets(cu, mask.size(), "broadcast_to_tokens");
  RLCPP_CHECK(per_seq.size() + 1 == cu.size(), "broadcast_to_tokens: " << per_seq.size() << " values for "
                                                                       << cu.size() - 1 << " sequences");
  std::vector<float> out(mask.size(), 0.0f);
  for (size_t i = 0; i < per_seq.size(); ++i)
    for (int64_t t = cu[i]; t < cu[i + 1]; ++t) out[t] = per_seq[i] * mask[t];
  return out;
}

std::vector<float> sum_per_sequence(std::span<const int64_t> cu, std::span<const float> per_token) {
  check_offsets(cu, per_token.size(), "sum_per_sequence");
  std::vector<float> out(cu.size() - 1, 0.0f);
  for (size_t i = 0; i + 1 < cu.size(); ++i) {
    double s = 0;
    for (int64_t t = cu[i]; t < cu[i + 1]; ++t) s += per_token[t];
    out[i] = static_cast<float>(s);
  }
  return out;
}

TokenRewards token_level_rewards(std::span<const int64_t> cu, std::span<const float> mask,
                                 std::span<const float> scores, std::span<const float> old_logp,
                                 std::span<const float> ref_logp, double kl_coef, KlEstimator estimator) {
  const size_t T = mask.size();
  check_offsets(cu, T, "token_level_rewards");
  RLCPP_CHECK(scores.size() + 1 == cu.size(), "token_level_rewards: " << scores.size() << " scores for "
                                                                      << cu.size() - 1 << " sequences");
  RLCPP_CHECK(kl_coef >= 0, "token_level_rewards: kl_coef must be >= 0, got " << kl_coef);
  const bool with_kl = kl_coef > 0 && !ref_logp.empty();
  if (with_kl) {
    check_token_array(old_logp, T, "token_level_rewards: old_logp");
    check_token_array(ref_logp, T, "token_level_rewards: ref_logp");
  }
  TokenRewards out;
  out.rewards.assign(T, 0.0f);
  double kl_seq_mean_sum = 0, kl_seqs = 0;
  for (size_t i = 0; i + 1 < cu.size(); ++i) {
    double kl_sum = 0, mask_sum = 0;
    int64_t last = -1;
    for (int64_t t = cu[i]; t < cu[i + 1]; ++t) {
      double r = 0;
      if (with_kl) {
        const double kl = kl_estimate(old_logp[t], ref_logp[t], estimator).value * mask[t];
        r -= kl_coef * kl;
        kl_sum += kl;
      }
      out.rewards[t] = static_cast<float>(r);
      mask_sum += mask[t];
      if (mask[t] > 0) last = t;
    }
    if (last >= 0) out.rewards[last] = static_cast<float>(static_cast<double>(out.rewards[last]) + scores[i]);
    if (mask_sum > 0) {
      kl_seq_mean_sum += kl_sum / mask_sum;
      kl_seqs += 1;
    }
  }
  if (with_kl) {
    out.metrics.add_mean("reward_kl_penalty", kl_seq_mean_sum, kl_seqs);
    out.metrics.add_sum("reward_kl_penalty_coeff", kl_coef);
  }
  return out;
}

GaeResult gae(std::span<const int64_t> cu, std::span<const float> mask, std::span<const float> rewards,
              std::span<const float> values, double gamma, double lambda, bool whiten) {
  const size_t T = mask.size();
  check_offsets(cu, T, "gae");
  check_token_array(rewards, T, "gae: rewards");
  check_token_array(values, T, "gae: values");
  GaeResult out;
  out.advantages.assign(T, 0.0f);
  out.returns.assign(T, 0.0f);
  for (size_t i = 0; i + 1 < cu.size(); ++i) {
    double next_value = 0, last_gae = 0;
    for (int64_t t = cu[i + 1] - 1; t >= cu[i]; --t) {
      const double m = mask[t], v = values[t];
      const double delta = rewards[t] + gamma * next_value - v;
      const double gae_t = delta + gamma * lambda * last_gae;
      next_value = v * m + (1.0 - m) * next_value;
      last_gae = gae_t * m + (1.0 - m) * last_gae;
      if (m > 0) {
        out.advantages[t] = static_cast<float>(last_gae);
        out.returns[t] = static_cast<float>(last_gae + v);
      }
    }
  }
  if (whiten) whiten_masked(out.advantages, mask);
  return out;
}

std::vector<float> discounted_returns(std::span<const int64_t> cu, std::span<const float> mask,
                                      std::span<const float> rewards, double gamma) {
  check_offsets(cu, rewards.size(), "discounted_returns");
  check_token_array(mask, rewards.size(), "discounted_returns: mask");
  std::vector<float> returns(rewards.size(), 0.0f);
  for (size_t i = 0; i + 1 < cu.size(); ++i) {
    double running = 0;
    for (int64_t t = cu[i + 1] - 1; t >= cu[i]; --t) {
      running = rewards[t] + gamma * running;
      returns[t] = static_cast<float>(running);
      running *= mask[t];
    }
  }
  return returns;
}

void whiten_masked(std::span<float> values, std::span<const float> mask, bool shift_mean) {
  RLCPP_CHECK(values.size() == mask.size(), "whiten_masked: " << values.size() << " values but " << mask.size()
                                                              << " mask entries");
  double sum = 0, count = 0;
  for (size_t t = 0; t < values.size(); ++t) {
    sum += static_cast<double>(values[t]) * mask[t];
    count += mask[t];
  }
  if (count <= 0) {
    for (float& v : values) v = 0.0f;
    return;
  }
  const double mean = sum / count;
  double sq = 0;
  for (size_t t = 0; t < values.size(); ++t) sq += (values[t] - mean) * (values[t] - mean) * mask[t];
  const double var = count > 1 ? sq / count * (count / (count - 1.0)) : 0.0;
  const double inv_std = 1.0 / std::sqrt(var + kWhitenEps);
  for (size_t t = 0; t < values.size(); ++t) {
    const double w = (values[t] - mean) * inv_std + (shift_mean ? 0.0 : mean);
    values[t] = mask[t] > 0 ? static_cast<float>(w) : 0.0f;
  }
}

}  // namespace rlcpp
