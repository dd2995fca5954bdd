// Reference SwiGLU on the fused gate_up projection: out = silu(gate) * up, silu(g) = g / (1 + exp(-g)).
#include <cmath>

#include "kernels/reference/reference_kernels.h"

namespace rlcpp::ref {

void swiglu_forward(const float* gate_up, float* out, int64_t n, int64_t f) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < f; ++j) {
      const float g = gate_up[i * 2 * f + j], up = gate_up[i * 2 * f + f + j];
      out[i * f + j] = g / (1.0f + std::exp(-g)) * up;
    }
}

void swiglu_backward(const float* dout, const float* gate_up, float* dgate_up, float* act, int64_t n, int64_t f) {
  // d/dup = silu(g); d/dg = up * silu'(g), silu'(g) = s (1 + g (1 - s)) with s = sigmoid(g).
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < f; ++j) {
      const float g = gate_up[i * 2 * f + j], up = gate_up[i * 2 * f + f + j], grad = dout[i * f + j];
      const float s = 1.0f / (1.0f + std::exp(-g)), silu = g * s;
      dgate_up[i * 2 * f + j] = grad * up * s * (1.0f + g * (1.0f - s));
      dgate_up[i * 2 * f + f + j] = grad * silu;
      if (act) act[i * f + j] = silu * up;
    }
}

}  // namespace rlcpp::ref
