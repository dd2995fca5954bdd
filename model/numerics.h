// How one role computes (docs/architecture.md "Numerics"): the rollout engine and the trainer each run the same
// model code with their own ModelNumerics, so the mismatch between them can be switched on one source at a time.
//   compute          fp32 | tf32 | bf16 | fp16: weights, matmul inputs, activations and the KV cache hold values
//                    of that dtype (rounded to nearest even at the op boundaries a GPU model of that dtype rounds
//                    them), every product and reduction accumulates in fp32. The KV cache and the training
//                    forward's kept activations are tensors of that dtype (transformer.h LayerActivations,
//                    converted by ops::convert); the other activations are fp32 tensors of rounded values,
//                    which is what the kernels compute on. tf32 stores fp32 (nothing is rounded at op boundaries:
//                    storage_dtype(kTF32) is kF32) and runs the cuBLAS products on CUDA tensor cores with TF32
//                    operands (10 mantissa bits): CUDA only, not batch-invariant. fp32 master weights and AdamW
//                    always; in bf16/fp16 the backward differentiates the fp32 expressions at the rounded
//                    activations (each rounding is the identity in the backward, as autocast's casts are), its
//                    products in the executor's backward math (Executor::backward_math: a bf16 model's multiply
//                    bf16 operands with fp32 accumulation on the CPU and on CUDA, as autocast's bf16 GEMMs do).
//   linear_weights   how the decoder layers' Linear weights are stored: the compute dtype's format, or a
//                    weight-only quantisation (int8, fp8_e4m3, one scale per output channel). The rollout
//                    engine's only: the trainer always multiplies by its compute dtype's weights.
//   batch_invariant  true: every product is the packed fma chain (kernels/ops.h), whose per-row result is the
//                    same bits in any batch, so rollout and trainer log-probs agree exactly when their compute
//                    dtypes do. false: the cached decode multiplies through OpenBLAS, whose blocking (and sum
//                    order) depends on the batch, so a prompt's log-probs depend on what it is batched with.
#pragma once

#include <string>

#include "core/tensor.h"

namespace rlcpp {

struct ModelNumerics {
  DType compute = DType::kF32;
  DType linear_weights = DType::kF32;
  bool batch_invariant = true;

  // The format of every other matrix (lm_head, and Linear weights without quantisation): the compute dtype's.
  DType compute_format() const;
  // "bf16", "bf16+int8", "fp32 (not batch-invariant)", ...
  std::string describe() const;
  // Throws naming `where` when linear_weights is neither quantised nor the compute dtype's format.
  void validate(const std::string& where) const;
  bool operator==(const ModelNumerics&) const = default;
  // The same values in the training forward (batch invariance aside: the training forward is always invariant).
  bool same_forward(const ModelNumerics& o) const { return compute == o.compute && linear_weights == o.linear_weights; }
};

// "fp32" | "tf32" | "bf16" | "fp16" -> the compute DType; anything else is an error naming `key` and the choices.
DType parse_compute_dtype(const std::string& name, const std::string& key);
const char* compute_dtype_name(DType dtype);
// "none" | "int8" | "fp8_e4m3" -> the Linear weights' format under `compute` ("none": the compute dtype's).
DType parse_quantization(const std::string& name, DType compute, const std::string& key);

// Throws naming `dtype_key` when a role on `device` cannot compute in `numerics`: tf32 is a CUDA tensor-core
// math (not on the CPU) without a batch-invariant form (the packed fma chain multiplies fp32 operands), so it
// needs batch_invariant false, named by `invariant_key`.
void check_numerics_device(const ModelNumerics& numerics, Device device, const std::string& dtype_key,
                           const std::string& invariant_key);

// Numerics of a role from its config strings (errors name the keys).
ModelNumerics make_numerics(const std::string& dtype, const std::string& quantization, bool batch_invariant,
                            const std::string& dtype_key, const std::string& quantization_key);

}  // namespace rlcpp
