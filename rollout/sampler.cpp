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
  return truncation_kept_set(logits, vocab_size_, params.temperature > 0 ? params.temperature : 1.0f,
                             Truncation{params.top_k, params.top_p}, scratch_);
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
  const float temperature = params.temperature > 0 ? params.temperature : 1.0f;
  if (params.logprob_space == "sampled" && params.temperature > 0)
    return {token, ops::row_logprob_truncated(logits, vocab_size_, token, temperature,
                                              Truncation{params.top_k, params.top_p}, scratch_)};
  return {token, ops::row_logprob(logits, vocab_size_, token, temperature)};
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
