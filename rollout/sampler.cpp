#include "rollout/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/philox.h"
#include "kernels/ops.h"

namespace rlcpp {

double sample_uniform(const SampleKey& key) {
  const PhiloxDraw d = philox_draw(key.seed, static_cast<uint32_t>(key.prompt_id),
                                   static_cast<uint32_t>(key.prompt_id >> 32), key.sample_index, key.position);
  return philox_uniform_double(d.v[0], d.v[1]);
}

Sampler::Sampler(int64_t vocab_size) : vocab_size_(vocab_size) {
  RLCPP_CHECK(vocab_size > 0, "Sampler: vocab_size must be positive, got " << vocab_size);
  weights_.resize(static_cast<size_t>(vocab_size));
  order_.resize(static_cast<size_t>(vocab_size));
}

double Sampler::prepare(const float* logits, const SamplingParams& params) {
  const int64_t V = vocab_size_;
  argmax_ = 0;
  for (int64_t j = 1; j < V; ++j)
    if (logits[j] > logits[argmax_]) argmax_ = static_cast<int32_t>(j);
  max_logit_ = logits[argmax_];
  RLCPP_CHECK(std::isfinite(max_logit_), "Sampler: non-finite logits (max " << max_logit_ << ")");
  inv_temperature_ = params.temperature > 0 ? 1.0 / params.temperature : 1.0;
  total_weight_ = 0;
  for (int64_t j = 0; j < V; ++j) {
    weights_[j] = std::exp((static_cast<double>(logits[j]) - max_logit_) * inv_temperature_);
    total_weight_ += weights_[j];
  }
  // A NaN anywhere fails every comparison above but poisons the sum.
  RLCPP_CHECK(std::isfinite(total_weight_), "Sampler: non-finite logits (NaN in the row)");
  std::iota(order_.begin(), order_.end(), 0);
  kept_ = V;
  const bool top_k = params.top_k > 0 && params.top_k < V;
  const bool top_p = params.top_p < 1.0f;
  if (!top_k && !top_p) return total_weight_;  // walk in id order, no sort
  // Most likely first, lower id first among equals, so the kept set and walk order are well defined.
  auto more_likely = [&](int32_t a, int32_t b) { return weights_[a] > weights_[b] || (weights_[a] == weights_[b] && a < b); };
  if (top_k) {
    kept_ = params.top_k;
    std::partial_sort(order_.begin(), order_.begin() + kept_, order_.end(), more_likely);
  } else {
    std::sort(order_.begin(), order_.end(), more_likely);
  }
  double mass = 0;
  for (int64_t i = 0; i < kept_; ++i) mass += weights_[order_[i]];
  if (top_p) {
    // The smallest prefix whose share of the top-k mass reaches top_p (at least one token).
    const double target = static_cast<double>(params.top_p) * mass;
    double cum = 0;
    int64_t m = 0;
    while (m < kept_) {
      cum += weights_[order_[m++]];
      if (cum >= target) break;
    }
    kept_ = m;
    mass = cum;
  }
  return mass;
}

SampledToken Sampler::sample(const float* logits, const SamplingParams& params, const SampleKey& key) {
  const double mass = prepare(logits, params);
  int32_t token = argmax_;
  if (params.temperature > 0) {
    const double u = sample_uniform(key) * mass;
    double cum = 0;
    token = order_[kept_ - 1];  // rounding can leave u just above the last partial sum
    for (int64_t i = 0; i < kept_; ++i) {
      cum += weights_[order_[i]];
      if (u < cum) {
        token = order_[i];
        break;
      }
    }
  }
  // The trainer's own expression (ops::logprob_forward), so that rollout and trainer agree bit for bit when
  // their logits do. Greedy decoding reports the untempered log-prob.
  return {token, ops::row_logprob(logits, vocab_size_, token, params.temperature > 0 ? params.temperature : 1.0f)};
}

std::vector<double> Sampler::target_distribution(const float* logits, const SamplingParams& params) {
  std::vector<double> probs(static_cast<size_t>(vocab_size_), 0.0);
  const double mass = prepare(logits, params);
  if (params.temperature <= 0) {
    probs[argmax_] = 1.0;
    return probs;
  }
  for (int64_t i = 0; i < kept_; ++i) probs[order_[i]] = weights_[order_[i]] / mass;
  return probs;
}

}  // namespace rlcpp
