#include "model/parameters.h"

#include <utility>

#include "core/error.h"
#include "kernels/ops.h"

namespace rlcpp {

std::vector<ParameterInfo> parameter_layout(const ModelConfig& cfg) {
  const int64_t C = cfg.hidden_size, V = cfg.vocab_size, F = cfg.intermediate_size;
  const int64_t qd = cfg.q_dim(), kvd = cfg.kv_dim();
  std::vector<ParameterInfo> out;
  int64_t offset = 0;
  auto add = [&](std::string name, Shape shape) {
    ParameterInfo info{std::move(name), std::move(shape), offset};
    offset += info.numel();
    out.push_back(std::move(info));
  };
  add("model.embed_tokens.weight", {V, C});
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {C});
    add(p + "self_attn.q_proj.weight", {qd, C});
    add(p + "self_attn.k_proj.weight", {kvd, C});
    add(p + "self_attn.v_proj.weight", {kvd, C});
    if (cfg.has_qkv_bias()) {
      add(p + "self_attn.q_proj.bias", {qd});
      add(p + "self_attn.k_proj.bias", {kvd});
      add(p + "self_attn.v_proj.bias", {kvd});
    }
    add(p + "self_attn.o_proj.weight", {C, qd});
    if (cfg.has_o_bias()) add(p + "self_attn.o_proj.bias", {C});
    if (cfg.has_qk_norm()) {
      add(p + "self_attn.q_norm.weight", {cfg.head_dim()});
      add(p + "self_attn.k_norm.weight", {cfg.head_dim()});
    }
    add(p + "post_attention_layernorm.weight", {C});
    add(p + "mlp.gate_proj.weight", {F, C});
    add(p + "mlp.up_proj.weight", {F, C});
    add(p + "mlp.down_proj.weight", {C, F});
  }
  add("model.norm.weight", {C});
  if (cfg.value_head) {
    add("score.weight", {1, C});
    add("score.bias", {1});
  } else if (!cfg.tie_word_embeddings) {
    add("lm_head.weight", {V, C});
  }
  return out;
}

ParameterStore::ParameterStore(const ModelConfig& cfg) : config_(cfg), infos_(parameter_layout(cfg)) {
  int64_t total = infos_.empty() ? 0 : infos_.back().offset + infos_.back().numel();
  flat_ = Tensor::zeros({total});
}

ParameterStore::ParameterStore(const ModelConfig& cfg, std::vector<ParameterInfo> layout)
    : config_(cfg), infos_(std::move(layout)) {
  int64_t offset = 0;
  for (const ParameterInfo& info : infos_) {
    RLCPP_CHECK(info.offset == offset, "ParameterStore: tensor '" << info.name << "' at offset " << info.offset
                                                                  << ", expected " << offset << " (contiguous, in order)");
    offset += info.numel();
  }
  flat_ = Tensor::zeros({offset});
}

ParameterStore ParameterStore::allocate(const ModelConfig& cfg, const ExecContext& ctx) {
  ParameterStore s;
  s.config_ = cfg;
  s.infos_ = parameter_layout(cfg);
  s.flat_ = ctx.empty({s.infos_.empty() ? 0 : s.infos_.back().offset + s.infos_.back().numel()});
  return s;
}

ParameterStore ParameterStore::clone() const {
  ParameterStore c = *this;
  c.flat_ = flat_.clone();
  return c;
}

ParameterStore ParameterStore::on(const ExecContext& ctx) const {
  ParameterStore c = *this;
  c.flat_ = ctx.copy_of(flat_);
  return c;
}

ParameterStore ParameterStore::converted(const ExecContext& ctx, DType dtype) const {
  RLCPP_CHECK(dtype == DType::kF32 || dtype == DType::kBF16,
              "ParameterStore: parameters are held in F32 or BF16, not " << dtype_name(dtype));
  ParameterStore c = *this;
  c.flat_ = ctx.empty(flat_.shape(), dtype);
  ops::convert(ctx, flat_, c.flat_);
  return c;
}

const ParameterStore& params_on(const ExecContext& ctx, const ParameterStore& params, ParameterStore& copy) {
  if (ctx.holds(params.flat())) return params;
  copy = params.on(ctx);
  return copy;
}

const Tensor& host_tensor(const ExecContext& ctx, const Tensor& t, Tensor& buffer) {
  if (!t.defined() || t.on_host()) return t;
  if (!buffer.defined() || buffer.shape() != t.shape() || buffer.dtype() != t.dtype())
    buffer = Tensor::empty(t.shape(), t.dtype());
  ctx.copy(t, buffer);
  return buffer;
}

bool ParameterStore::has(const std::string& name) const {
  for (const auto& info : infos_)
    if (info.name == name) return true;
  return false;
}

int64_t ParameterStore::offset_of(const std::string& name) const {
  for (const auto& info : infos_)
    if (info.name == name) return info.offset;
  RLCPP_FAIL("model has no parameter '" << name << "'");
}

Tensor ParameterStore::get(const std::string& name) const {
  for (const auto& info : infos_)
    if (info.name == name) return view(info.offset, info.shape);
  RLCPP_FAIL("model has no parameter '" << name << "'");
}

Tensor ParameterStore::view(int64_t offset, Shape shape) const {
  int64_t n = shape_numel(shape);
  RLCPP_CHECK(offset >= 0 && offset + n <= flat_.numel(),
              "parameter view [" << offset << ", " << offset + n << ") outside the buffer of " << flat_.numel());
  char* first = static_cast<char*>(const_cast<void*>(flat_.raw())) + offset * dtype_size(flat_.dtype());
  return Tensor::borrow(first, std::move(shape), flat_.dtype(), flat_.device());
}

}  // namespace rlcpp
