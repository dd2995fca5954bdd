#include "model/weight_error.h"

#include <algorithm>
#include <cmath>

namespace rlcpp {

std::map<std::string, double> WeightError::metrics(const std::string& prefix) const {
  return {{prefix + "max_abs_err", max_abs}, {prefix + "rel_rms_err", rel_rms}};
}

WeightError prepared_weight_error(const Transformer& model, const ParameterStore& params) {
  const ExecContext host = ExecContext::cpu();  // the packed weights live on the host
  PackedWeights packed;
  model.pack_weights(host, params, packed);
  const ModelConfig& c = model.config();
  const int64_t C = c.hidden_size, F = c.intermediate_size, qkv = c.q_dim() + 2 * c.kv_dim();
  WeightError e;
  double sum_sq_err = 0, sum_sq = 0;
  auto add = [&](const std::string& name, Shape shape, const ops::PackedWeight& p) {
    const Tensor w = params.view(params.offset_of(name), std::move(shape));
    const Tensor q = ops::unpack_weight(host, p);
    const float* a = w.data<float>();
    const float* b = q.data<float>();
    for (int64_t i = 0; i < w.numel(); ++i) {
      const double d = static_cast<double>(b[i]) - a[i];
      e.max_abs = std::max(e.max_abs, std::abs(d));
      sum_sq_err += d * d;
      sum_sq += static_cast<double>(a[i]) * a[i];
    }
    e.weights += w.numel();
  };
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const PackedWeights::Layer& L = packed.layers[static_cast<size_t>(l)];
    add(p + "self_attn.q_proj.weight", {qkv, C}, L.qkv);
    add(p + "self_attn.o_proj.weight", {C, c.q_dim()}, L.o);
    add(p + "mlp.gate_proj.weight", {2 * F, C}, L.gate_up);
    add(p + "mlp.down_proj.weight", {C, F}, L.down);
  }
  if (!c.value_head)
    add(c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight", {c.vocab_size, C}, packed.lm_head);
  e.rel_rms = sum_sq > 0 ? std::sqrt(sum_sq_err / sum_sq) : 0.0;
  return e;
}

}  // namespace rlcpp
