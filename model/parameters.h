// All parameters of a model in one flat buffer, each a named view into it. One buffer makes AdamW one
// loop, the gradient norm one reduction and a weight-sync publish one contiguous copy. The gradient buffer
// has the same layout. The buffer is fp32 (master weights, gradients, optimizer state) — or bf16 for weights that
// are only read: a frozen LoRA base held in bf16 (model/lora.h LoraBase), which the Transformer's passes on the
// host read as they read fp32 ones (model/transformer.h).
//
// Layout (Hugging Face names), in this order, so the fused matrices are contiguous:
//   model.embed_tokens.weight (V, C)
//   per layer l, prefix model.layers.l.:
//     input_layernorm.weight (C)
//     self_attn.q_proj.weight (Hq*D, C), self_attn.k_proj.weight (Hkv*D, C), self_attn.v_proj.weight (Hkv*D, C)
//         -> together the fused qkv matrix ((Hq + 2 Hkv) * D, C)
//     self_attn.q_proj.bias, k_proj.bias, v_proj.bias (when has_qkv_bias) -> fused qkv bias
//     self_attn.o_proj.weight (C, Hq*D), self_attn.o_proj.bias (C) when has_o_bias
//     self_attn.q_norm.weight (D), self_attn.k_norm.weight (D) when has_qk_norm (Qwen3)
//     post_attention_layernorm.weight (C)
//     mlp.gate_proj.weight (F, C), mlp.up_proj.weight (F, C) -> fused gate_up matrix (2F, C)
//     mlp.down_proj.weight (C, F)
//   model.norm.weight (C)
//   lm_head.weight (V, C) when not tied and not value_head
//   score.weight (1, C), score.bias (1) when value_head (a critic: Hugging Face *ForTokenClassification)
#pragma once

#include <string>
#include <vector>

#include "core/exec_context.h"
#include "core/tensor.h"
#include "model/model_config.h"

namespace rlcpp {

struct ParameterInfo {
  std::string name;
  Shape shape;
  int64_t offset = 0;  // in floats, into the flat buffer
  int64_t numel() const { return shape_numel(shape); }
};

// Names, shapes and offsets of every parameter of `cfg`, in layout order.
std::vector<ParameterInfo> parameter_layout(const ModelConfig& cfg);

class ParameterStore {
 public:
  ParameterStore() = default;
  explicit ParameterStore(const ModelConfig& cfg);
  // Zeroed tensors of another layout over `cfg`'s model (LoRA adapters, model/lora.h): contiguous, in order.
  ParameterStore(const ModelConfig& cfg, std::vector<ParameterInfo> layout);
  // Copies SHARE the buffer (Tensor semantics); clone() is a deep copy (e.g. a frozen reference model).
  ParameterStore clone() const;
  // A store of `cfg`'s layout whose floats are uninitialised, from ctx's pool (to be overwritten whole).
  static ParameterStore allocate(const ModelConfig& cfg, const ExecContext& ctx);
  // A deep copy on ctx's device, from its pool (the device copy a CUDA context computes with).
  ParameterStore on(const ExecContext& ctx) const;
  // A deep copy in `dtype` (F32 or BF16) on ctx's device: rounded to nearest even, or widened exactly
  // (ops::convert).
  ParameterStore converted(const ExecContext& ctx, DType dtype) const;
  // The buffer's dtype: F32, or BF16 (a store made by converted).
  DType dtype() const { return flat_.dtype(); }

  const ModelConfig& config() const { return config_; }
  const std::vector<ParameterInfo>& infos() const { return infos_; }
  Tensor& flat() { return flat_; }
  const Tensor& flat() const { return flat_; }
  int64_t numel() const { return flat_.numel(); }

  // View of one parameter; throws naming it when absent.
  Tensor get(const std::string& name) const;
  bool has(const std::string& name) const;
  // View of elements [offset, offset + numel) with the given shape (for fused matrices), in the store's dtype.
  Tensor view(int64_t offset, Shape shape) const;
  int64_t offset_of(const std::string& name) const;

 private:
  ModelConfig config_;
  std::vector<ParameterInfo> infos_;
  Tensor flat_;
};

// What a pass on ctx reads: params themselves when they live on ctx's device, else a copy there, made into
// `copy` (a trainer on a GPU scoring with host weights: the reference, a teacher, the policy's host copy).
const ParameterStore& params_on(const ExecContext& ctx, const ParameterStore& params, ParameterStore& copy);
// t on the host: itself, or copied from ctx's device into `buffer` (made t's shape).
const Tensor& host_tensor(const ExecContext& ctx, const Tensor& t, Tensor& buffer);

}  // namespace rlcpp
