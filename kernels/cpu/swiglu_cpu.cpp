// SwiGLU on a fused gate_up projection on the CPU: out = silu(gate) * up, silu(g) = g sigmoid(g).
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/vec_math.h"

namespace rlcpp::cpu {

namespace {

// silu(g) * up = (g s) up with s = sigmoid(g) = 1 / (1 + exp(-g)): the forward and the backward share s and g s,
// one division per element.
inline float sigmoid(float g) { return 1.0f / (1.0f + exp_fixed(-g)); }

}  // namespace

void swiglu_forward(const float* gate_up, float* out, int64_t n, int64_t f) {
#pragma omp parallel for if (n * f > kParallelMinWork)
  for (int64_t i = 0; i < n; ++i) {
    const float* gate = gate_up + i * 2 * f;
    const float* up = gate + f;
    float* o = out + i * f;
    for (int64_t j = 0; j < f; ++j) o[j] = (gate[j] * sigmoid(gate[j])) * up[j];
  }
}

namespace {

// One row of swiglu_backward, with act recomputed when kAct. silu'(g) = s (1 + g (1 - s)).
template <bool kAct>
inline void swiglu_backward_row(const float* gate, const float* up, const float* g_out, float* dgate, float* dup,
                                float* act, int64_t f) {
  // simd: the output rows defeat the vectoriser's alias checks (measured 6x slower without).
#pragma omp simd
  for (int64_t j = 0; j < f; ++j) {
    const float g = gate[j], s = sigmoid(g), silu = g * s;
    if constexpr (kAct) act[j] = silu * up[j];
    dup[j] = g_out[j] * silu;
    dgate[j] = g_out[j] * up[j] * (s * (1.0f + g * (1.0f - s)));
  }
}

}  // namespace

void swiglu_backward(const float* dout, const float* gate_up, float* dgate_up, float* act, int64_t n, int64_t f) {
#pragma omp parallel for if (n * f > kParallelMinWork)
  for (int64_t i = 0; i < n; ++i) {
    const float* gate = gate_up + i * 2 * f;
    float* dgate = dgate_up + i * 2 * f;
    if (act)
      swiglu_backward_row<true>(gate, gate + f, dout + i * f, dgate, dgate + f, act + i * f, f);
    else
      swiglu_backward_row<false>(gate, gate + f, dout + i * f, dgate, dgate + f, nullptr, f);
  }
}

}  // namespace rlcpp::cpu
