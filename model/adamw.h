// AdamW over a model's flat parameter buffer, with global-norm gradient clipping. State is two fp32 buffers
// of the parameter layout (16 bytes/parameter with weights and gradients), on the device of the context it was
// made on (a trainer on a GPU keeps them there; checkpoints read and write them through the host).
#pragma once

#include <cstdint>

#include "kernels/ops.h"
#include "model/parameters.h"

namespace rlcpp {

class AdamW {
 public:
  AdamW() = default;
  // Zeroed moments for `params` on ctx's device.
  AdamW(const ParameterStore& params, const ops::AdamWParams& hyper, const ExecContext& ctx = ExecContext::cpu());

  // One update with learning rate `lr` (the schedule's value for this step).
  void step(const ExecContext& ctx, ParameterStore& params, const ParameterStore& grads, float lr);

  int64_t steps_taken() const { return step_; }
  const ops::AdamWParams& hyper() const { return hyper_; }
  Tensor& exp_avg() { return m_; }  // on the device of the context it was made on
  Tensor& exp_avg_sq() { return v_; }
  // A moment (second: exp_avg_sq) as a host tensor (a copy when it lives on a device), and overwritten from one.
  Tensor moment_on_host(bool second) const;
  void set_moment(bool second, const Tensor& host);
  // For checkpoint restore.
  void set_steps_taken(int64_t step) { step_ = step; }

 private:
  ops::AdamWParams hyper_;
  ExecContext ctx_ = ExecContext::cpu();  // where m_ and v_ live
  Tensor m_, v_;
  int64_t step_ = 0;
};

// Scales grads so their global L2 norm is at most max_norm (torch.nn.utils.clip_grad_norm_: coefficient
// max_norm / (norm + 1e-6) when below 1). Returns the norm before clipping. max_norm <= 0 disables clipping.
double clip_grad_norm(const ExecContext& ctx, ParameterStore& grads, double max_norm);

}  // namespace rlcpp
