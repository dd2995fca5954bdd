#include "trainer/value_loss.h"

#include <algorithm>

#include "core/error.h"

namespace rlcpp {

namespace {

// d min(a, b) / d a and d max(a, b) / d a under torch's tie rule (half the gradient on a tie).
double min_grad_first(double a, double b) { return a < b ? 1.0 : (a > b ? 0.0 : 0.5); }
double max_grad_first(double a, double b) { return a > b ? 1.0 : (a < b ? 0.0 : 0.5); }

}  // namespace

LossOutput value_loss(const ValueLossInputs& in, double value_clip, const LossNormalizer& norm) {
  const size_t T = in.values.size();
  check_offsets(in.cu, T, "value_loss");
  check_token_array(in.old_values, T, "value_loss: old_values");
  check_token_array(in.returns, T, "value_loss: returns");
  check_token_array(in.mask, T, "value_loss: mask");
  RLCPP_CHECK(value_clip >= 0, "value_loss: value_clip must be >= 0 (0 = off), got " << value_clip);

  const std::vector<double> w = norm.token_weights(in.cu, in.mask);
  LossOutput out;
  out.dvalue.assign(T, 0.0f);
  double loss = 0, clipped = 0, vpred = 0, mask_sum = 0;
  for (size_t t = 0; t < T; ++t) {
    const double m = in.mask[t], v = in.values[t], ret = in.returns[t];
    mask_sum += m;
    vpred += m * v;
    const double e1 = v - ret;
    const double l1 = e1 * e1;
    double dl_dv = 2.0 * e1;  // of the per-token l, before the 0.5 and the weights
    double l = l1;
    if (value_clip > 0) {
      const double hi = static_cast<double>(in.old_values[t]) + value_clip;
      const double lo = static_cast<double>(in.old_values[t]) - value_clip;
      const double inner = std::min(v, hi);
      const double v_clip = std::max(inner, lo);
      const double dclip_dv = min_grad_first(v, hi) * max_grad_first(inner, lo);
      const double e2 = v_clip - ret;
      const double l2 = e2 * e2;
      const double dl2 = 2.0 * e2 * dclip_dv;
      l = std::max(l1, l2);
      dl_dv = l1 > l2 ? dl_dv : (l1 < l2 ? dl2 : 0.5 * (dl_dv + dl2));
      clipped += m * (l2 > l1 ? 1.0 : 0.0);
    }
    loss += 0.5 * w[t] * l;
    out.dvalue[t] = static_cast<float>(0.5 * w[t] * dl_dv);
  }
  out.loss = loss;
  out.metrics.add_sum("vf_loss", loss);
  out.metrics.add_mean("vf_clipfrac", clipped, mask_sum);
  out.metrics.add_mean("vpred_mean", vpred, mask_sum);
  return out;
}

}  // namespace rlcpp
