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
  scratch_.weights.resize(static_cast<size_t>(vocab_size));
  scratch_.order.resize(static_cast<size_t>(vocab_size));
}

KeptSet Sampler::prepare(const float* logits, const SamplingParams& params) {
  const float temperature = params.scoring().temperature;
  Truncation truncation{params.top_k, params.top_p};
  if (params.min_p > 0 && params.temperature > 0) {
    // p_j >= min_p * p_max  <=>  l_j >= max_l + T * ln(min_p): those are the most likely tokens, so keeping
    // them is a top-k of their count.
    const float max_logit = *std::max_element(logits, logits + vocab_size_);
    const double threshold = max_logit + static_cast<double>(temperature) * std::log(static_cast<double>(params.min_p));
    int64_t above = 0;
    for (int64_t j = 0; j < vocab_size_; ++j) above += logits[j] >= threshold;
    truncation.top_k = truncation.top_k > 0 ? std::min(truncation.top_k, above) : above;
  }
  return truncation_kept_set(logits, vocab_size_, temperature, truncation, scratch_);
}

std::vector<TokenLogprob> Sampler::top_logprobs(const float* logits, const SamplingParams& params, int64_t count) {
  count = std::min(count, vocab_size_);
  std::vector<int32_t>& order = scratch_.order;
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + count, order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  const float temperature = params.scoring().temperature;
  std::vector<TokenLogprob> top(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    top[static_cast<size_t>(i)] = {order[i], ops::row_logprob(logits, vocab_size_, order[i], temperature)};
  return top;
}

SampledToken Sampler::sample(const float* logits, const SamplingParams& params, const SampleKey& key) {
  const KeptSet set = prepare(logits, params);
  const std::vector<double>& w = scratch_.weights;
  const std::vector<int32_t>& order = scratch_.order;
  int32_t token = set.argmax;
  if (params.temperature > 0) {
    const double u = sample_uniform(key) * set.mass;
    double cum = 0;
    token = order[set.kept - 1];  // rounding can leave u just above the last partial sum
    for (int64_t i = 0; i < set.kept; ++i) {
      cum += w[order[i]];
      if (u < cum) {
        token = order[i];
        break;
      }
    }
  }
  // The trainer's own expressions (ops::logprob_forward / logprob_truncated_forward), so that rollout and
  // trainer agree bit for bit when their logits do. Greedy decoding reports the untempered log-prob.
  const LogprobScoring scoring = params.scoring();
  // The trainer's test too (model/transformer.cpp): an inactive truncation is the whole vocabulary's log-prob.
  if (scoring.truncation.active(vocab_size_))
    return {token, ops::row_logprob_truncated(logits, vocab_size_, token, scoring.temperature, scoring.truncation,
                                              scratch_)};
  return {token, ops::row_logprob(logits, vocab_size_, token, scoring.temperature)};
}

std::vector<double> Sampler::target_distribution(const float* logits, const SamplingParams& params) {
  std::vector<double> probs(static_cast<size_t>(vocab_size_), 0.0);
  const KeptSet set = prepare(logits, params);
  if (params.temperature <= 0) {
    probs[set.argmax] = 1.0;
    return probs;
  }
  for (int64_t i = 0; i < set.kept; ++i)
    probs[scratch_.order[i]] = scratch_.weights[scratch_.order[i]] / set.mass;
  return probs;
}

}  // namespace rlcpp
