#include "model/adamw.h"

#include "core/error.h"

namespace rlcpp {

AdamW::AdamW(const ParameterStore& params, const ops::AdamWParams& hyper, const ExecContext& ctx)
    : hyper_(hyper), ctx_(ctx), m_(ctx.zeros({params.numel()})), v_(ctx.zeros({params.numel()})) {}

Tensor AdamW::moment_on_host(bool second) const {
  const Tensor& t = second ? v_ : m_;
  if (t.on_host()) return t;
  Tensor host = Tensor::empty(t.shape());
  ctx_.copy(t, host);
  return host;
}

void AdamW::set_moment(bool second, const Tensor& host) {
  Tensor& t = second ? v_ : m_;
  RLCPP_CHECK(host.numel() == t.numel() && host.dtype() == DType::kF32,
              "AdamW: a moment of " << host.numel() << " values for " << t.numel() << " parameters");
  ctx_.copy(host.reshape(t.shape()), t);
}

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
