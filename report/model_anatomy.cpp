#include "report/model_anatomy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/error.h"
#include "model/lora.h"
#include "report/ledger.h"

namespace rlcpp {

std::vector<ParameterPart> parameter_parts(const ModelConfig& m) {
  const double V = static_cast<double>(m.vocab_size), C = static_cast<double>(m.hidden_size);
  const double L = static_cast<double>(m.num_hidden_layers), F = static_cast<double>(m.intermediate_size);
  const auto [attention, attention_formula] = attention_parameters_per_layer(m);
  std::vector<ParameterPart> parts = {
      {"embedding", "V·C", V * C},
      {"attention", "L·(" + attention_formula + ")", L * attention},
      {"MLP", "L·3·C·F (gate, up, down)", L * 3 * C * F},
      {"norms", "L·2·C + C", L * 2 * C + C},
  };
  if (m.value_head) parts.push_back({"value head", "C + 1", C + 1});
  else if (!m.tie_word_embeddings) parts.push_back({"lm_head", "V·C (untied)", V * C});
  return parts;
}

int64_t anatomy_dtype_bytes(const std::string& dtype) {
  if (dtype == "fp32") return 4;
  if (dtype == "bf16" || dtype == "fp16") return 2;
  if (dtype == "int8") return 1;
  RLCPP_FAIL("ledger --dtype: expected fp32, bf16, fp16 or int8, got '" << dtype << "'");
}

namespace {

std::string value(double v, const std::string& unit) { return format_ledger_value(v, unit); }

// 131072 B -> "131,072 B (128 KiB)": the cheat sheets quote KV bytes in binary units.
std::string bytes_with_kib(double bytes) {
  char buf[64];
  if (bytes >= 1024 * 1024) std::snprintf(buf, sizeof buf, " (%.3g MiB)", bytes / (1024 * 1024));
  else if (bytes >= 1024) std::snprintf(buf, sizeof buf, " (%.3g KiB)", bytes / 1024);
  else buf[0] = '\0';
  return value(bytes, "B") + buf;
}

}  // namespace

std::string format_model_anatomy(const ModelConfig& m, const std::string& name, const AnatomyOptions& o) {
  const int64_t bytes = anatomy_dtype_bytes(o.dtype);
  const std::vector<ParameterPart> parts = parameter_parts(m);
  double n = 0;
  for (const ParameterPart& p : parts) n += p.count;
  std::ostringstream os;
  char buf[256];
  os << "model " << name << ": " << ledger_symbols(m) << "\n";
  os << "parameters N = " << value(n, "") << "\n";
  for (const ParameterPart& p : parts) {
    std::snprintf(buf, sizeof buf, "  %-10s %17s  %5.1f %%  %s\n", p.name.c_str(), value(p.count, "").c_str(),
                  100 * p.count / n, p.formula.c_str());
    os << buf;
  }
  const double L = static_cast<double>(m.num_hidden_layers), d = static_cast<double>(m.head_dim());
  const double Hq = static_cast<double>(m.num_attention_heads), Hkv = static_cast<double>(m.num_key_value_heads);
  const double kv = 2 * L * Hkv * d * static_cast<double>(bytes), mha = 2 * L * Hq * d * static_cast<double>(bytes);
  os << "KV cache per token (" << o.dtype << "): 2·L·Hkv·d·" << bytes << " = " << bytes_with_kib(kv)
     << "; full multi-head attention (Hkv = Hq = " << m.num_attention_heads << "): " << bytes_with_kib(mha) << ", "
     << value(Hq / Hkv, "") << "x\n";
  os << "training memory: 16 B·N = " << value(16 * n, "B")
     << " (fp32 weights, gradients, AdamW m and v: 4 B each), activations aside\n";
  if (o.lora_rank > 0) {  // model/lora.h: adapters on all seven Linear layers of every decoder layer
    LoraConfig lora;
    lora.rank = o.lora_rank;
    const double na = static_cast<double>(LoraAdapters(m, lora).weights().numel());
    std::snprintf(buf, sizeof buf, "%.2f %%", 100 * na / n);
    os << "LoRA rank " << o.lora_rank << " on every Linear layer: Na = " << value(na, "") << " trained parameters ("
       << buf << " of N); training memory 8 B·N + 16 B·Na = " << value(8 * n + 16 * na, "B")
       << " (the frozen base and the merged model in fp32, the adapters with their gradients and AdamW moments); "
       << "6 B·N + 16 B·Na = " << value(6 * n + 16 * na, "B") << " with the base in bf16 (trainer.lora.base_dtype)\n";
  }
  os << "FLOPs per token: training 6N = " << value(6 * n, "FLOP") << " (forward 2N + backward 4N), inference 2N = "
     << value(2 * n, "FLOP") << " (attention over the context aside)\n";
  if (std::isfinite(o.matmul_peak_flops) && std::isfinite(o.read_bandwidth)) {
    const double weight_bytes = n * static_cast<double>(bytes);
    const double read_s = weight_bytes / o.read_bandwidth;
    const double decode_compute_s = 2 * n / o.matmul_peak_flops;
    const double T = static_cast<double>(o.prefill_tokens);
    const double prefill_compute_s = 2 * n * T / o.matmul_peak_flops;
    os << "this machine (measured now): matmul peak " << value(o.matmul_peak_flops, "FLOP/s")
       << ", read bandwidth " << value(o.read_bandwidth, "B/s") << "; a forward reads " << value(weight_bytes, "B")
       << " of " << o.dtype << " weights\n";
    os << "  decode, 1 token:          compute 2N/peak = " << value(decode_compute_s, "s")
       << ", weight read bytes/bandwidth = " << value(read_s, "s") << ": "
       << (read_s > decode_compute_s ? "bandwidth-bound" : "compute-bound") << ", floor "
       << value(std::max(read_s, decode_compute_s), "s") << " a token\n";
    os << "  prefill, " << o.prefill_tokens << " tokens:"
       << std::string(o.prefill_tokens < 1000 ? 5 : 4, ' ') << "compute 2N·" << o.prefill_tokens
       << "/peak = " << value(prefill_compute_s, "s") << ", weight read " << value(read_s, "s") << ": "
       << (prefill_compute_s > read_s ? "compute-bound" : "bandwidth-bound") << ", floor "
       << value(std::max(read_s, prefill_compute_s) / T, "s") << " a token\n";
    os << "  a forward turns compute-bound from peak·bytes/(2·bandwidth) = "
       << value(std::ceil(o.matmul_peak_flops * static_cast<double>(bytes) / (2 * o.read_bandwidth)), "")
       << " tokens at once\n";
  }
  return os.str();
}

}  // namespace rlcpp
