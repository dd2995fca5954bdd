#include "report/ledger.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/error.h"

namespace rlcpp {

namespace {

std::string num(double v) { return format_ledger_value(v, ""); }

double ratio_of(double a, double b) { return std::isfinite(a) && std::isfinite(b) && b != 0 ? a / b : kNotMeasured; }

// N, written out from the Hugging Face layout (model/parameters.h), with its formula in symbols.
std::pair<double, std::string> parameter_formula(const ModelConfig& m) {
  const double V = static_cast<double>(m.vocab_size), C = static_cast<double>(m.hidden_size);
  const double L = static_cast<double>(m.num_hidden_layers), F = static_cast<double>(m.intermediate_size);
  const auto [attention, attention_formula] = attention_parameters_per_layer(m);
  const double per_layer = 2 * C           // input and post-attention RMSNorm weights
                           + attention     // q, k, v, o (and the family's biases and q/k norms)
                           + 3 * C * F;    // gate, up, down
  const std::string layer = "2C + " + attention_formula + " + 3·C·F";
  double n = V * C + L * per_layer + C;  // embedding, layers, final norm
  std::string head;
  if (m.value_head) {
    n += C + 1;
    head = " + C + 1 (value head)";
  } else if (!m.tie_word_embeddings) {
    n += V * C;
    head = " + V·C (lm_head)";
  }
  return {n, "V·C + L·(" + layer + ") + C" + head};
}

}  // namespace

std::pair<double, std::string> attention_parameters_per_layer(const ModelConfig& m) {
  const double C = static_cast<double>(m.hidden_size), d = static_cast<double>(m.head_dim());
  const double Hq = static_cast<double>(m.num_attention_heads), Hkv = static_cast<double>(m.num_key_value_heads);
  double n = C * (Hq + 2 * Hkv) * d  // q, k, v projections
             + Hq * d * C;           // o projection
  std::string formula = "C·(Hq+2·Hkv)·d + Hq·d·C";
  if (m.has_qkv_bias()) {
    n += (Hq + 2 * Hkv) * d;
    formula += " + (Hq+2·Hkv)·d";
  }
  if (m.has_o_bias()) {
    n += C;
    formula += " + C";
  }
  if (m.has_qk_norm()) {  // Qwen3's q_norm and k_norm over each head
    n += 2 * d;
    formula += " + 2·d";
  }
  return {n, formula};
}

std::vector<LedgerLine> build_ledger(const ModelConfig& model, const LedgerFigures& f, const LedgerDtypes& dtypes) {
  const auto [n, n_formula] = parameter_formula(model);
  const double L = static_cast<double>(model.num_hidden_layers), Hkv = static_cast<double>(model.num_key_value_heads);
  const double d = static_cast<double>(model.head_dim());
  std::vector<LedgerLine> lines;

  lines.push_back({"parameters", "parameters N", n_formula, n, "", "counted in the parameter store", f.parameters,
                   "measured/formula", ratio_of(f.parameters, n)});

  if (dtypes.adapter_parameters > 0) {  // LoRA: the frozen base and the merged model, the adapters' AdamW
    const double a = static_cast<double>(dtypes.adapter_parameters);
    const double b = static_cast<double>(dtypes.lora_base);
    lines.push_back({"training_memory", "training memory (LoRA)",
                     num(b + 4) + " B·N + 16 B·Na = (" + num(b) + " base + 4 merged)·" + num(n) +
                         " + (4 + 4 grads + 4 m + 4 v)·" + num(a),
                     (b + 4) * n + 16 * a, "B", "peak resident memory of the trainer (VmHWM)", f.resident_bytes,
                     "measured/formula", ratio_of(f.resident_bytes, (b + 4) * n + 16 * a)});
  } else {
    lines.push_back({"training_memory", "training memory (fp32 AdamW)",
                     "16 B·N = (4 weights + 4 grads + 4 m + 4 v)·" + num(n), 16 * n, "B",
                     "peak resident memory of the trainer (VmHWM)", f.resident_bytes, "measured/formula",
                     ratio_of(f.resident_bytes, 16 * n)});
  }

  const double kv = 2 * L * Hkv * d * static_cast<double>(dtypes.kv_cache);
  lines.push_back({"kv_bytes_per_token", "KV cache per token",
                   "2·L·Hkv·d·bytes = 2·" + num(L) + "·" + num(Hkv) + "·" + num(d) + "·" +
                       std::to_string(dtypes.kv_cache),
                   kv, "B", "the rollout engine's own count", f.engine_kv_bytes_per_token, "measured/formula",
                   ratio_of(f.engine_kv_bytes_per_token, kv)});

  lines.push_back({"train_flops_per_token", "training FLOPs per token", "6N (forward 2N + backward 4N)", 6 * n,
                   "FLOP", "", kNotMeasured, "", kNotMeasured});
  lines.push_back({"inference_flops_per_token", "inference FLOPs per token", "2N (one multiply-add per weight)",
                   2 * n, "FLOP", "", kNotMeasured, "", kNotMeasured});

  // A role's MFU is against the peak of its products' math: sgemm's, or the bf16 product's for a bf16 role.
  auto peak_of = [&](bool bf16) { return bf16 ? f.bf16_matmul_peak_flops : f.matmul_peak_flops; };
  auto peak_name = [](bool bf16) {
    return bf16 ? "bf16 matmul peak the run measured" : "matmul peak the run measured";
  };
  const double train_flops = 6 * n * f.train_tokens_per_s;
  lines.push_back({"train_mfu", "training FLOP/s (MFU)",
                   "6N · trained tok/s = 6·" + num(n) + "·" + format_ledger_value(f.train_tokens_per_s, "/s"),
                   train_flops, "FLOP/s", peak_name(dtypes.trainer_bf16), peak_of(dtypes.trainer_bf16), "MFU",
                   ratio_of(train_flops, peak_of(dtypes.trainer_bf16))});
  const double engine_flops = 2 * n * f.engine_tokens_per_s;
  lines.push_back({"rollout_mfu", "rollout FLOP/s (MFU)",
                   "2N · engine tok/s (prefill + sampled) = 2·" + num(n) + "·" +
                       format_ledger_value(f.engine_tokens_per_s, "/s"),
                   engine_flops, "FLOP/s", peak_name(dtypes.rollout_bf16), peak_of(dtypes.rollout_bf16), "MFU",
                   ratio_of(engine_flops, peak_of(dtypes.rollout_bf16))});

  const double weight_bytes = n * static_cast<double>(dtypes.weights);
  const double floor_s = ratio_of(weight_bytes, f.memory_bandwidth);
  lines.push_back({"decode_floor", "decode step floor",
                   "weight bytes / bandwidth = " + format_ledger_value(weight_bytes, "B") + " / " +
                       format_ledger_value(f.memory_bandwidth, "B/s"),
                   floor_s, "s", "mean rollout engine step", f.engine_step_s, "measured/floor",
                   ratio_of(f.engine_step_s, floor_s)});
  return lines;
}

const LedgerLine& ledger_line(const std::vector<LedgerLine>& lines, const std::string& key) {
  for (const LedgerLine& line : lines)
    if (line.key == key) return line;
  RLCPP_FAIL("ledger: no line '" << key << "'");
}

std::string ledger_symbols(const ModelConfig& m) {
  std::ostringstream os;
  os << "V=" << m.vocab_size << " C=" << m.hidden_size << " L=" << m.num_hidden_layers
     << " Hq=" << m.num_attention_heads << " Hkv=" << m.num_key_value_heads << " d=" << m.head_dim()
     << " F=" << m.intermediate_size << ", " << (m.tie_word_embeddings ? "tied" : "untied") << " embeddings";
  if (m.has_qkv_bias()) os << ", qkv bias";
  if (m.has_o_bias()) os << ", o bias";
  if (m.value_head) os << ", value head";
  return os.str();
}

std::string format_ledger_value(double value, const std::string& unit) {
  if (!std::isfinite(value)) return "—";
  char buf[64];
  const double a = std::fabs(value);
  // Counts and small byte figures exactly, with thousands separators: they are the ones checked by hand.
  if ((unit.empty() || (unit == "B" && a < 1e6)) && a < 1e15 && value == std::floor(value)) {
    const std::string digits = std::to_string(static_cast<long long>(a));
    std::string out = value < 0 ? "-" : "";
    for (size_t i = 0; i < digits.size(); ++i) {
      if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
      out += digits[i];
    }
    return unit.empty() ? out : out + " " + unit;
  }
  if (unit == "s") {
    if (a >= 1) std::snprintf(buf, sizeof buf, "%.3g s", value);
    else if (a >= 1e-3) std::snprintf(buf, sizeof buf, "%.3g ms", value * 1e3);
    else std::snprintf(buf, sizeof buf, "%.3g µs", value * 1e6);
    return buf;
  }
  static constexpr const char* kPrefixes[] = {"", "k", "M", "G", "T", "P"};
  int p = 0;
  double scaled = value;
  while (std::fabs(scaled) >= 1000 && p < 5) {
    scaled /= 1000;
    ++p;
  }
  std::snprintf(buf, sizeof buf, "%.3g %s%s", scaled, kPrefixes[p], unit.c_str());
  std::string out = buf;
  if (unit.empty() || unit[0] == '/') {  // "12.3 k/s" reads better as "12.3k/s"
    out.erase(out.find(' '), 1);
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

namespace {

std::string ratio_text(const LedgerLine& line) {
  if (!std::isfinite(line.ratio)) return "—";
  char buf[64];
  if (line.ratio_name == "MFU") std::snprintf(buf, sizeof buf, "%.3g %%", 100 * line.ratio);
  else std::snprintf(buf, sizeof buf, "%.3g", line.ratio);
  return buf;
}

// Width in code points, not bytes: the formulas hold "·" and "µ".
size_t code_points(const std::string& s) {
  size_t cps = 0;
  for (unsigned char c : s) cps += (c & 0xC0) != 0x80;
  return cps;
}

std::string padded(const std::string& s, size_t width) {
  const size_t cps = code_points(s);
  return s + std::string(width > cps ? width - cps : 0, ' ');
}

}  // namespace

std::string format_ledger_text(const ModelConfig& model, const std::vector<LedgerLine>& lines) {
  size_t wq = 0, wf = 0, wv = 0, wm = 0;
  for (const LedgerLine& l : lines) {
    wq = std::max(wq, code_points(l.quantity));
    wf = std::max(wf, code_points(l.formula));
    wv = std::max(wv, code_points(format_ledger_value(l.formula_value, l.unit)));
    wm = std::max(wm, code_points(l.measurement));
  }
  std::ostringstream os;
  os << "ledger (" << ledger_symbols(model) << "): formula = value | measured = value | ratio\n";
  for (const LedgerLine& l : lines) {
    os << "  " << padded(l.quantity, wq) << "  " << padded(l.formula, wf) << " = "
       << padded(format_ledger_value(l.formula_value, l.unit), wv);
    if (!l.measurement.empty())
      os << " | " << padded(l.measurement, wm) << " = " << format_ledger_value(l.measured, l.unit) << " | "
         << l.ratio_name << " " << ratio_text(l);
    os << "\n";
  }
  return os.str();
}

std::string format_ledger_markdown(const ModelConfig& model, const std::vector<LedgerLine>& lines) {
  std::ostringstream os;
  os << "Symbols: " << ledger_symbols(model) << ".\n\n";
  os << "| quantity | formula | formula value | measured | measured value | ratio |\n";
  os << "| --- | --- | ---: | --- | ---: | ---: |\n";
  for (const LedgerLine& l : lines) {
    os << "| " << l.quantity << " | " << l.formula << " | " << format_ledger_value(l.formula_value, l.unit) << " | "
       << (l.measurement.empty() ? "—" : l.measurement) << " | " << format_ledger_value(l.measured, l.unit) << " | "
       << (l.ratio_name.empty() ? "—" : l.ratio_name + " " + ratio_text(l)) << " |\n";
  }
  return os.str();
}

Json ledger_to_json(const std::vector<LedgerLine>& lines) {
  auto number = [](double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); };
  Json out = Json::array();
  for (const LedgerLine& l : lines)
    out.push_back({{"key", l.key}, {"quantity", l.quantity}, {"formula", l.formula},
                   {"formula_value", number(l.formula_value)}, {"unit", l.unit}, {"measurement", l.measurement},
                   {"measured", number(l.measured)}, {"ratio_name", l.ratio_name}, {"ratio", number(l.ratio)}});
  return out;
}

}  // namespace rlcpp
