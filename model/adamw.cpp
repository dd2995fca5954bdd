#include "model/adamw.h"

#include "core/error.h"

namespace rlcpp {

AdamW::AdamW(const ParameterStore& params, const ops::AdamWParams& hyper)
    : hyper_(hyper), m_(Tensor::zeros({params.numel()})), v_(Tensor::zeros({params.numel()})) {}

void AdamW::step(const ExecContext& ctx, ParameterStore& params, const ParameterStore& grads, float lr) {
  RLCPP_CHECK(params.numel() == m_.numel() && grads.numel() == m_.numel(),
              "AdamW: optimizer state of " << m_.numel() << " floats, parameters " << params.numel() << ", grads "
                                           << grads.numel());
  ops::AdamWParams p = hyper_;
  p.lr = lr;
  ++step_;
  ops::adamw_step(ctx, params.flat(), grads.flat(), m_, v_, p, step_);
}

double clip_grad_norm(const ExecContext& ctx, ParameterStore& grads, double max_norm) {
  double norm = ops::l2_norm(ctx, grads.flat());
  if (max_norm > 0) {
    double coef = max_norm / (norm + 1e-6);
    if (coef < 1.0) ops::scale_inplace(ctx, grads.flat(), static_cast<float>(coef));
  }
  return norm;
}

}  // namespace rlcpp
