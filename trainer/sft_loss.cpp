#include "trainer/sft_loss.h"

namespace rlcpp {

LossOutput sft_loss(std::span<const int64_t> cu, std::span<const float> logp, std::span<const float> mask,
                    const LossNormalizer& norm) {
  const size_t T = logp.size();
  check_offsets(cu, T, "sft_loss");
  check_token_array(mask, T, "sft_loss: mask");
  const std::vector<double> w = norm.token_weights(cu, mask);
  LossOutput out;
  out.dlogp.assign(T, 0.0f);
  double loss = 0, nll = 0, mask_sum = 0;
  for (size_t t = 0; t < T; ++t) {
    loss -= w[t] * logp[t];
    out.dlogp[t] = static_cast<float>(-w[t]);
    nll -= static_cast<double>(mask[t]) * logp[t];
    mask_sum += mask[t];
  }
  out.loss = loss;
  out.metrics.add_sum("sft_loss", loss);
  out.metrics.add_mean("sft_nll", nll, mask_sum);
  return out;
}

}  // namespace rlcpp
