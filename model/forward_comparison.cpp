#include "model/forward_comparison.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/ops.h"
#include "model/layer_ops.h"

namespace rlcpp {

namespace {

double max_abs_diff(const Tensor& a, const Tensor& b) {
  RLCPP_CHECK(a.numel() == b.numel(), "compare_forward: tensors of " << a.numel() << " and " << b.numel()
                                                                      << " elements");
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = std::fabs(static_cast<double>(a.data<float>()[i]) - b.data<float>()[i]);
    if (std::isnan(d)) return d;  // NaN must show, not vanish in a max
    m = std::max(m, d);
  }
  return m;
}

// log softmax(row / T) in double.
void log_softmax(const float* row, int64_t v, double temperature, std::vector<double>& out) {
  double mx = -INFINITY;
  for (int64_t j = 0; j < v; ++j) mx = std::max(mx, row[j] / temperature);
  double sum = 0;
  for (int64_t j = 0; j < v; ++j) sum += std::exp(row[j] / temperature - mx);
  const double lse = mx + std::log(sum);
  for (int64_t j = 0; j < v; ++j) out[static_cast<size_t>(j)] = row[j] / temperature - lse;
}

}  // namespace

std::string stage_name(int64_t stage, int64_t layers) {
  if (stage == 0) return "embed";
  if (stage <= layers) return "layer_" + std::to_string(stage - 1);
  return stage == layers + 1 ? "final_norm" : "logits";
}

std::map<std::string, double> ForwardComparison::metrics(const std::string& prefix) const {
  std::map<std::string, double> m = {{prefix + "full_kl", full_kl_mean},       {prefix + "full_kl_max", full_kl_max},
                                     {prefix + "full_tv", full_tv_mean},       {prefix + "full_tv_max", full_tv_max},
                                     {prefix + "first_stage", static_cast<double>(first_stage)}};
  const int64_t layers = static_cast<int64_t>(max_abs.size()) - 3;
  for (size_t s = 0; s < max_abs.size(); ++s)
    m[prefix + "stage/" + stage_name(static_cast<int64_t>(s), layers) + "/max_abs"] = max_abs[s];
  return m;
}

ForwardComparison compare_forward(const ExecContext& exec, const Transformer& a, const ParameterStore& a_params,
                                  const Transformer& b, const ParameterStore& b_params, const PackedBatch& batch,
                                  float temperature, double threshold) {
  RLCPP_CHECK(a.config().num_hidden_layers == b.config().num_hidden_layers &&
                  a.config().vocab_size == b.config().vocab_size && a.config().hidden_size == b.config().hidden_size,
              "compare_forward: the two models have different shapes");
  RLCPP_CHECK(temperature > 0, "compare_forward: temperature must be positive, got " << temperature);
  Activations xa, xb;
  ForwardOptions options;
  options.temperature = temperature;
  ParameterStore a_copy, b_copy;  // host weights copied to a device context
  a.forward(exec, params_on(exec, a_params, a_copy), batch, options, xa);
  b.forward(exec, params_on(exec, b_params, b_copy), batch, options, xb);
  const int64_t L = a.config().num_hidden_layers, V = a.config().vocab_size;
  ForwardComparison c;
  // Each stage of both passes on the host (copied from a device context), in F32: a bf16/fp16 model keeps its
  // residual stream in that dtype (widened exactly).
  Tensor ha, hb, wide_a, wide_b;
  auto widened = [&](const Tensor& t, Tensor& wide) -> const Tensor& {
    if (t.dtype() == DType::kF32) return t;
    layer_ops::ensure(exec, wide, t.shape());
    ops::convert(exec, t, wide);
    return wide;
  };
  auto stage_diff = [&](const Tensor& x, const Tensor& y) {
    const Tensor& hx = host_tensor(exec, widened(x, wide_a), ha);
    return max_abs_diff(hx, host_tensor(exec, widened(y, wide_b), hb));
  };
  for (int64_t l = 0; l < L; ++l)
    c.max_abs.push_back(stage_diff(xa.layers[static_cast<size_t>(l)].x, xb.layers[static_cast<size_t>(l)].x));
  c.max_abs.push_back(stage_diff(xa.x_final, xb.x_final));
  c.max_abs.push_back(stage_diff(xa.xn_final, xb.xn_final));
  c.max_abs.push_back(stage_diff(xa.logits, xb.logits));
  Tensor logits_a_buffer, logits_b_buffer;
  const Tensor& logits_a = host_tensor(exec, xa.logits, logits_a_buffer);
  const Tensor& logits_b = host_tensor(exec, xb.logits, logits_b_buffer);
  for (size_t s = 0; s < c.max_abs.size(); ++s)
    if (!(c.max_abs[s] <= threshold)) {  // NaN counts as passing the threshold
      c.first_stage = static_cast<int64_t>(s);
      break;
    }
  std::vector<double> lp(static_cast<size_t>(V)), lq(static_cast<size_t>(V));
  double kl_sum = 0, tv_sum = 0;
  for (int64_t i = 0; i < batch.num_tokens(); ++i) {
    if (batch.targets[static_cast<size_t>(i)] < 0) continue;
    log_softmax(logits_a.data<float>() + i * V, V, temperature, lp);
    log_softmax(logits_b.data<float>() + i * V, V, temperature, lq);
    double kl = 0, tv = 0;
    for (int64_t j = 0; j < V; ++j) {
      const double p = std::exp(lp[static_cast<size_t>(j)]), q = std::exp(lq[static_cast<size_t>(j)]);
      if (p > 0) kl += p * (lp[static_cast<size_t>(j)] - lq[static_cast<size_t>(j)]);
      tv += std::fabs(p - q);
    }
    tv *= 0.5;
    kl_sum += kl;
    tv_sum += tv;
    c.full_kl_max = std::isnan(kl) ? kl : std::max(c.full_kl_max, kl);
    c.full_tv_max = std::isnan(tv) ? tv : std::max(c.full_tv_max, tv);
    ++c.positions;
  }
  if (c.positions > 0) {
    c.full_kl_mean = kl_sum / static_cast<double>(c.positions);
    c.full_tv_mean = tv_sum / static_cast<double>(c.positions);
  }
  return c;
}

}  // namespace rlcpp
