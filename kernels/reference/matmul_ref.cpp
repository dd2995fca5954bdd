// Reference products: the plain matrix product and a Linear layer's weight gradient.
#include <cmath>

#include "kernels/cpu/dtype_round.h"
#include "kernels/reference/reference_kernels.h"

namespace rlcpp::ref {

void matmul(const float* a, bool trans_a, const float* b, bool trans_b, float* c, int64_t m, int64_t n, int64_t k,
            float alpha, float beta) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t l = 0; l < k; ++l) {
        const float x = trans_a ? a[l * m + i] : a[i * k + l];
        const float y = trans_b ? b[j * k + l] : b[l * n + j];
        acc = std::fma(x, y, acc);
      }
      c[i * n + j] = beta == 0.0f ? alpha * acc : alpha * acc + beta * c[i * n + j];
    }
}

void linear_weight_grad(const float* dy, const float* x, float* dw, int64_t rows, int64_t out, int64_t in,
                        DType math) {
  auto operand = [&](float v) { return math == DType::kBF16 ? cpu::bf16_operand_reference(v) : v; };
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) {
      float acc = dw[o * in + i];
      for (int64_t t = 0; t < rows; ++t) acc = std::fma(operand(dy[t * out + o]), operand(x[t * in + i]), acc);
      dw[o * in + i] = acc;
    }
}

}  // namespace rlcpp::ref
