#include "model/weight_error.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/ops.h"

namespace rlcpp {

std::map<std::string, double> WeightError::metrics(const std::string& prefix) const {
  return {{prefix + "max_abs_err", max_abs}, {prefix + "rel_rms_err", rel_rms}};
}

WeightError prepared_weight_error(const Transformer& model, const ParameterStore& params, int64_t rows_per_block) {
  RLCPP_CHECK(rows_per_block > 0 && rows_per_block % 16 == 0,
              "prepared_weight_error: rows_per_block must be a positive multiple of 16, got " << rows_per_block);
  const ExecContext host = ExecContext::cpu();  // packed and read back on the host
  const ModelConfig& c = model.config();
  const ModelNumerics& n = model.numerics();
  const int64_t C = c.hidden_size, F = c.intermediate_size, qkv = c.q_dim() + 2 * c.kv_dim();
  WeightError e;
  double sum_sq_err = 0, sum_sq = 0;
  // Each matrix packed as the engine packs it, a block of rows at a time: a quantised format's scale is its
  // output channel's (a panel is 16 channels), so a block of whole panels holds the values the whole matrix
  // would, while the memory is one block's (not a second copy of the model: lm_head alone is V x C).
  ops::PackedWeight packed;
  auto add = [&](const std::string& name, Shape shape, DType format) {
    const int64_t rows = shape[0], cols = shape[1];
    const int64_t offset = params.offset_of(name);
    for (int64_t r0 = 0; r0 < rows; r0 += rows_per_block) {
      const int64_t r1 = std::min(rows, r0 + rows_per_block);
      const Tensor held = params.view(offset + r0 * cols, {r1 - r0, cols});
      Tensor w = held;  // the error is against the values held (a bf16-held base's, widened)
      if (held.dtype() != DType::kF32) {
        w = Tensor::empty(held.shape());
        ops::convert(host, held, w);
      }
      ops::pack_weight(host, held, packed, format);
      const Tensor q = ops::unpack_weight(host, packed);
      const float* a = w.data<float>();
      const float* b = q.data<float>();
      for (int64_t i = 0; i < w.numel(); ++i) {
        const double d = static_cast<double>(b[i]) - a[i];
        e.max_abs = std::max(e.max_abs, std::abs(d));
        sum_sq_err += d * d;
        sum_sq += static_cast<double>(a[i]) * a[i];
      }
      e.weights += w.numel();
    }
  };
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "self_attn.q_proj.weight", {qkv, C}, n.linear_weights);
    add(p + "self_attn.o_proj.weight", {C, c.q_dim()}, n.linear_weights);
    add(p + "mlp.gate_proj.weight", {2 * F, C}, n.linear_weights);
    add(p + "mlp.down_proj.weight", {C, F}, n.linear_weights);
  }
  if (!c.value_head)
    add(c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight", {c.vocab_size, C},
        n.compute_format());
  e.rel_rms = sum_sq > 0 ? std::sqrt(sum_sq_err / sum_sq) : 0.0;
  return e;
}

}  // namespace rlcpp
