// The small steps a Transformer layer is made of, shared by the training passes (transformer_layers.cpp) and
// the cached decode (transformer.cpp). Private to model/.
#pragma once

#include <cstring>

#include "core/tensor.h"
#include "kernels/ops.h"

namespace rlcpp::layer_ops {

// Keeps `t` when it already has `shape`, so repeated forwards of one shape do not reallocate.
inline void ensure(Tensor& t, const Shape& shape) {
  if (!t.defined() || t.shape() != shape) t = Tensor::empty(shape);
}

// y (M,N) = x (M,K) @ weight^T, or y += x @ weight^T: the packed kernel when `packed` (weight packed) is given,
// else ops::matmul (OpenBLAS, or cuBLAS for CUDA tensors).
inline void linear(const Tensor& x, const Tensor& weight, const ops::PackedWeight* packed, Tensor& y, bool accumulate) {
  if (packed)
    ops::matmul_packed(x, *packed, y, accumulate);
  else
    ops::matmul(x, false, weight, true, y, 1.0f, accumulate ? 1.0f : 0.0f);
}

// y (M,N) = residual + x (M,K) @ weight^T, a Linear layer into a residual stream: one pass through the packed
// kernel when `packed` is given, else a copy and ops::matmul accumulating (the same bits either way).
inline void linear_residual(const Tensor& x, const Tensor& weight, const ops::PackedWeight* packed,
                            const Tensor& residual, Tensor& y) {
  if (packed) {
    ops::matmul_packed_residual(x, *packed, residual, y);
    return;
  }
  if (y.data<float>() != residual.data<float>()) std::memcpy(y.data<float>(), residual.data<float>(), y.nbytes());
  ops::matmul(x, false, weight, true, y, 1.0f, 1.0f);
}

// dx (M,K) = dy (M,N) @ weight (N,K), the input gradient of a Linear layer: the packed kernel when `packed_t`
// (weight packed transposed) is given, else ops::matmul.
inline void linear_input_grad(const Tensor& dy, const Tensor& weight, const ops::PackedWeight* packed_t, Tensor& dx) {
  if (packed_t)
    ops::matmul_packed(dy, *packed_t, dx);
  else
    ops::matmul(dy, false, weight, false, dx);
}

}  // namespace rlcpp::layer_ops
