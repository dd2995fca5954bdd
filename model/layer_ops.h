// The small steps a Transformer layer is made of, shared by the training passes (transformer_layers.cpp) and
// the cached decode (transformer.cpp). Private to model/.
#pragma once

#include "core/exec_context.h"
#include "core/tensor.h"
#include "kernels/ops.h"
#include "model/executor.h"

namespace rlcpp::layer_ops {

// Keeps `t` when it already has `shape` and `dtype` on ctx's device, else takes it from ctx's pool: repeated
// passes of one shape allocate nothing.
inline void ensure(const ExecContext& ctx, Tensor& t, const Shape& shape, DType dtype = DType::kF32) {
  if (!t.defined() || t.shape() != shape || t.dtype() != dtype || !ctx.holds(t)) t = ctx.empty(shape, dtype);
}

// The arithmetic of a model's products in the compute dtype `round` on ctx without packed weights (the
// executor's: Executor::product_math).
inline DType model_math(const ExecContext& ctx, DType round) { return executor_of(ctx).product_math(round); }

// y (M,N) = x (M,K) @ weight^T rounded to `round` (kernels/ops.h): the packed kernel when `packed` (weight
// packed) is given, else ops::matmul (OpenBLAS, or cuBLAS on a CUDA context) and a rounding pass.
inline void linear(const ExecContext& ctx, const Tensor& x, const Tensor& weight, const ops::PackedWeight* packed,
                   Tensor& y, DType round = DType::kF32) {
  if (packed) {
    ops::matmul_packed(ctx, x, *packed, y, false, round);
    return;
  }
  ops::matmul(ctx, x, false, weight, true, y, 1.0f, 0.0f, model_math(ctx, round));
  ops::round_to(ctx, y, round);
}

// y (M,N) = round(residual + round(x (M,K) @ weight^T)), a Linear layer into a residual stream (residual may be
// y): one pass through the packed kernel when `packed` is given, else OpenBLAS — accumulating onto a copy of
// the residual in fp32 (the same bits as the packed kernel's order of operations, up to the product's own sum
// order), or, when rounding, through `product` (resized to y's shape), the product rounded before it is added.
inline void linear_residual(const ExecContext& ctx, const Tensor& x, const Tensor& weight,
                            const ops::PackedWeight* packed, const Tensor& residual, Tensor& y, DType round,
                            Tensor& product) {
  if (packed) {
    ops::matmul_packed_residual(ctx, x, *packed, residual, y, round);
    return;
  }
  if (y.raw() != residual.raw()) ctx.copy(residual, y);
  if (storage_dtype(round) == DType::kF32) {  // fp32 values (tf32: in TF32 math on CUDA): nothing to round
    ops::matmul(ctx, x, false, weight, true, y, 1.0f, 1.0f, model_math(ctx, round));
    return;
  }
  ensure(ctx, product, y.shape());
  ops::matmul(ctx, x, false, weight, true, product, 1.0f, 0.0f, model_math(ctx, round));
  ops::round_to(ctx, product, round);
  ops::add_inplace(ctx, y, product);
  ops::round_to(ctx, y, round);
}

// dx (M,K) = dy (M,N) @ weight (N,K), the input gradient of a Linear layer: the packed kernel when `packed_t`
// (weight packed transposed, in the backward's format: bf16 panels for a bf16 model on the CPU) is given, else
// ops::matmul in the math of the compute dtype `round` (model_math: on CUDA a bf16/fp16 model's backward products
// run on tensor cores, as under PyTorch's autocast; fp32 results).
inline void linear_input_grad(const ExecContext& ctx, const Tensor& dy, const Tensor& weight,
                              const ops::PackedWeight* packed_t, Tensor& dx, DType round = DType::kF32) {
  if (packed_t)
    ops::matmul_packed(ctx, dy, *packed_t, dx);
  else
    ops::matmul(ctx, dy, false, weight, false, dx, 1.0f, 0.0f, model_math(ctx, round));
}

// dw (N,K) += dy (M,N)^T @ x (M,K), a Linear layer's weight gradient in the backward's math for the compute
// dtype `round` (Executor::backward_math).
inline void linear_weight_grad(const ExecContext& ctx, const Tensor& dy, const Tensor& x, Tensor& dw,
                               DType round) {
  ops::linear_weight_grad(ctx, dy, x, dw, executor_of(ctx).backward_math(round));
}

}  // namespace rlcpp::layer_ops
