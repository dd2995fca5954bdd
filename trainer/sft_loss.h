// Supervised fine-tuning: masked cross-entropy of the target tokens, loss = agg(-logp) over the global batch
// (token-mean: -sum(mask * logp) / total target tokens), dL/dlogp = -w.
// Metrics: sft_loss, sft_nll (mean -logp per target token, whatever the aggregation; exp of it is perplexity).
#pragma once

#include <cstdint>
#include <span>

#include "trainer/loss_normalizer.h"
#include "trainer/loss_output.h"

namespace rlcpp {

// cu: (B+1) sequence offsets; logp, mask: (T).
LossOutput sft_loss(std::span<const int64_t> cu, std::span<const float> logp, std::span<const float> mask,
                    const LossNormalizer& norm);

}  // namespace rlcpp
