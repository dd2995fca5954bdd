#include "model/lora.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/config.h"
#include "core/error.h"
#include "core/philox.h"
#include "kernels/ops.h"
#include "model/executor.h"
#include "model/lora_kernels.h"
#include "model/safetensors.h"

namespace rlcpp {

namespace fs = std::filesystem;

namespace {

constexpr const char* kAdapterConfigFile = "adapter_config.json";
constexpr const char* kAdapterWeightsFile = "adapter_model.safetensors";
// PEFT's prefix of a causal LM's adapter tensors (PeftModel wraps the model as base_model.model).
constexpr const char* kPeftPrefix = "base_model.model.";

// The module's parameter name in the model ("model.layers.L.self_attn.q_proj").
std::string module_path(int64_t layer, const std::string& module) {
  const bool attention = module == "q_proj" || module == "k_proj" || module == "v_proj" || module == "o_proj";
  return "model.layers." + std::to_string(layer) + (attention ? ".self_attn." : ".mlp.") + module;
}

LayerLinear linear_of(const std::string& module) {
  if (module == "q_proj" || module == "k_proj" || module == "v_proj") return LayerLinear::kQkv;
  if (module == "o_proj") return LayerLinear::kO;
  if (module == "gate_proj" || module == "up_proj") return LayerLinear::kGateUp;
  return LayerLinear::kDown;
}

}  // namespace

std::vector<std::string> LoraConfig::resolved_targets() const {
  const bool all = std::find(targets.begin(), targets.end(), "all-linear") != targets.end();
  std::vector<std::string> out;
  for (const std::string& name : lora_target_names())
    if (all || std::find(targets.begin(), targets.end(), name) != targets.end()) out.push_back(name);
  return out;
}

void LoraConfig::validate(const std::string& prefix) const {
  RLCPP_CHECK(rank >= 0 && rank <= 4096, "config key '" << prefix << "rank': must be in [0, 4096] (0: no adapters, "
                                                          << "full fine-tuning), got " << rank);
  if (!enabled()) return;
  RLCPP_CHECK(std::isfinite(alpha) && alpha > 0,
              "config key '" << prefix << "alpha': must be a positive number (lora_alpha), got " << alpha);
  RLCPP_CHECK(!targets.empty(), "config key '" << prefix << "targets': lists no module (choose from q_proj, k_proj, "
                                               << "v_proj, o_proj, gate_proj, up_proj, down_proj, or all-linear)");
  for (const std::string& t : targets) {
    const auto& names = lora_target_names();
    RLCPP_CHECK(t == "all-linear" || std::find(names.begin(), names.end(), t) != names.end(),
                "config key '" << prefix << "targets': unknown module '" << t << "' (choose from q_proj, k_proj, "
                               << "v_proj, o_proj, gate_proj, up_proj, down_proj, or all-linear)");
  }
  RLCPP_CHECK(base_dtype == "fp32" || base_dtype == "bf16",
              "config key '" << prefix << "base_dtype': \"fp32\" or \"bf16\", got \"" << base_dtype << "\"");
  RLCPP_CHECK(std::isfinite(dropout) && dropout >= 0 && dropout < 1,
              "config key '" << prefix << "dropout': must be in [0, 1) (lora_dropout), got " << dropout);
}

float lora_dropout_scale(uint64_t key, int64_t target, int64_t row, int64_t col, float p) {
  const PhiloxDraw d = philox_draw(key, static_cast<uint32_t>(target), static_cast<uint32_t>(row),
                                   static_cast<uint32_t>(col / 4), 0x10Bu);
  const uint32_t bits = col % 4 == 0 ? d.v[0] : col % 4 == 1 ? d.v[1] : col % 4 == 2 ? d.v[2] : d.v[3];
  return philox_uniform(bits) < p ? 0.0f : 1.0f / (1.0f - p);
}

void lora_dropout_scales(uint64_t key, int64_t target, int64_t row, float p, int64_t n, float* scale) {
  constexpr int kLanes = 16;  // draws at a time: 64 columns, lane l's four words for columns c0 + 4l .. c0 + 4l + 3
  const float kept = 1.0f / (1.0f - p);
  uint32_t bits[4][kLanes];
  float block[4 * kLanes];
  for (int64_t c0 = 0; c0 < n; c0 += 4 * kLanes) {
    philox_draw_lanes(key, static_cast<uint32_t>(target), static_cast<uint32_t>(row), static_cast<uint32_t>(c0 / 4),
                      0x10Bu, bits);
    for (int l = 0; l < kLanes; ++l)
      for (int j = 0; j < 4; ++j) block[4 * l + j] = philox_uniform(bits[j][l]) < p ? 0.0f : kept;
    std::copy_n(block, std::min<int64_t>(4 * kLanes, n - c0), scale + c0);
  }
}

Json lora_config_to_wire(const LoraConfig& config) {
  return Json{{"rank", config.rank}, {"alpha", config.alpha}, {"targets", config.resolved_targets()}};
}

LoraConfig lora_config_from_wire(const Json& wire) {
  const bool has_unmerged = wire.is_object() && wire.contains("unmerged");
  RLCPP_CHECK(wire.is_object() && wire.size() == (has_unmerged ? 4u : 3u) && wire.contains("rank") &&
                  wire.contains("alpha") && wire.contains("targets"),
              "LoRA base message: header field 'lora' must be {\"rank\", \"alpha\", \"targets\"} (and "
              "optionally \"unmerged\"), got "
                  << wire.dump().substr(0, 200));
  RLCPP_CHECK(!has_unmerged || wire["unmerged"].is_boolean(), "LoRA base message: 'lora.unmerged' must be a boolean");
  RLCPP_CHECK(wire["rank"].is_number_integer(), "LoRA base message: 'lora.rank' must be an integer");
  RLCPP_CHECK(wire["alpha"].is_number(), "LoRA base message: 'lora.alpha' must be a number");
  RLCPP_CHECK(wire["targets"].is_array(), "LoRA base message: 'lora.targets' must be a list of module names");
  LoraConfig c;
  c.rank = wire["rank"].get<int64_t>();
  c.alpha = wire["alpha"].get<double>();
  c.targets.clear();
  for (const Json& t : wire["targets"]) {
    RLCPP_CHECK(t.is_string(), "LoRA base message: 'lora.targets' holds " << t.dump() << ", not a module name");
    c.targets.push_back(t.get<std::string>());
  }
  c.validate("LoRA base message lora.");
  RLCPP_CHECK(c.enabled(), "LoRA base message: 'lora.rank' must be positive");
  return c;
}

LoraAdapters::LoraAdapters(const ModelConfig& model, const LoraConfig& config) : config_(config) {
  config_.validate("trainer.lora.");
  RLCPP_CHECK(config_.enabled(), "LoraAdapters: rank must be positive");
  const std::vector<ParameterInfo> model_layout = parameter_layout(model);
  auto model_info = [&](const std::string& name) -> const ParameterInfo& {
    for (const ParameterInfo& info : model_layout)
      if (info.name == name) return info;
    RLCPP_FAIL("LoRA: the model has no parameter '" << name << "'");
  };
  const int64_t r = config_.rank;
  std::vector<ParameterInfo> layout;
  int64_t offset = 0;
  for (int64_t l = 0; l < model.num_hidden_layers; ++l) {
    const int64_t begin = offset;
    for (const std::string& module : config_.resolved_targets()) {
      const std::string path = module_path(l, module);
      const ParameterInfo& w = model_info(path + ".weight");
      LoraTarget t;
      t.layer = l;
      t.module = module;
      t.linear = linear_of(module);
      t.row = module == "k_proj"    ? model.q_dim()
              : module == "v_proj"  ? model.q_dim() + model.kv_dim()
              : module == "up_proj" ? model.intermediate_size
                                    : 0;
      t.weight = w.offset;
      t.out = w.shape[0];
      t.in = w.shape[1];
      t.a = offset;
      layout.push_back({kPeftPrefix + path + ".lora_A.weight", {r, t.in}, offset});
      offset += r * t.in;
      t.b = offset;
      layout.push_back({kPeftPrefix + path + ".lora_B.weight", {t.out, r}, offset});
      offset += t.out * r;
      targets_.push_back(t);
    }
    layer_spans_.emplace_back(begin, offset);
  }
  weights_ = ParameterStore(model, std::move(layout));
}

std::pair<int64_t, int64_t> LoraAdapters::layer_span(int64_t layer) const {
  RLCPP_CHECK(layer >= 0 && layer < static_cast<int64_t>(layer_spans_.size()),
              "LoRA: layer " << layer << " outside the model's " << layer_spans_.size());
  return layer_spans_[static_cast<size_t>(layer)];
}

void LoraAdapters::init(uint64_t seed) {
  float* w = weights_.flat().data<float>();
  for (size_t i = 0; i < targets_.size(); ++i) {
    const LoraTarget& t = targets_[i];
    PhiloxStream rng(seed, /*stream=*/1000 + i);
    const float bound = 1.0f / std::sqrt(static_cast<float>(t.in));
    for (int64_t k = 0; k < config_.rank * t.in; ++k) w[t.a + k] = bound * (2.0f * rng.uniform() - 1.0f);
    std::fill(w + t.b, w + t.b + t.out * config_.rank, 0.0f);
  }
}

LoraBase::LoraBase(const ParameterStore& weights, DType dtype) {
  RLCPP_CHECK(dtype == DType::kF32 || dtype == DType::kBF16,
              "LoRA base: held in fp32 or bf16, not " << dtype_name(dtype));
  RLCPP_CHECK(weights.flat().on_host() && weights.dtype() == DType::kF32,
              "LoRA base: made from fp32 weights on the host");
  weights_ = dtype == DType::kF32 ? weights : weights.converted(ExecContext::cpu(), dtype);
}

LoraBase LoraBase::frozen_from(ParameterStore& policy, DType dtype) {
  if (dtype == DType::kF32) return LoraBase(policy.clone(), dtype);
  ops::round_to(ExecContext::cpu(), policy.flat(), dtype);
  return LoraBase(policy, dtype);
}

void LoraBase::read(const ExecContext& ctx, int64_t offset, int64_t n, float* out) const {
  RLCPP_CHECK(offset >= 0 && n >= 0 && offset + n <= numel(),
              "LoRA base: values [" << offset << ", " << offset + n << ") outside its " << numel());
  const Tensor from = weights_.view(offset, {n});
  Tensor to = Tensor::borrow(out, {n});
  ops::convert(ctx, from, to);
}

namespace {

void check_merge_buffers(const ExecContext& ctx, const LoraBase& base, const ParameterStore& merged) {
  RLCPP_CHECK(ctx.is_host() && merged.flat().on_host(), "LoRA: the adapters are merged on the host");
  RLCPP_CHECK(base.numel() == merged.numel() &&
                  base.weights().flat().raw() != merged.flat().raw(),
              "LoRA merge: the base and the merged weights must be two buffers of the model's layout (the base has "
                  << base.numel() << " values, the merged weights " << merged.numel() << ")");
}

}  // namespace

void LoraAdapters::remerge(const ExecContext& ctx, const LoraBase& base, ParameterStore& merged) const {
  check_merge_buffers(ctx, base, merged);
  float* dst = merged.flat().data<float>();
  const float* ad = weights_.flat().data<float>();
  const int64_t r = config_.rank;
  const float s = config_.scale();
  // One job per (target, block of rows); each entry's sum over k is an fma chain in k order from 0, whatever the
  // split: the same bits on any thread count and in any process.
  constexpr int64_t kRowsPerJob = 64;
  std::vector<std::pair<size_t, int64_t>> jobs;
  for (size_t i = 0; i < targets_.size(); ++i)
    for (int64_t o = 0; o < targets_[i].out; o += kRowsPerJob) jobs.emplace_back(i, o);
  executor_of(ctx).run_jobs(jobs.size(), [&](size_t j) {
    const LoraTarget& t = targets_[jobs[j].first];
    const float* A = ad + t.a;
    const float* B = ad + t.b;
    std::vector<float> acc(static_cast<size_t>(t.in)), w(static_cast<size_t>(t.in));
    const int64_t o_end = std::min(t.out, jobs[j].second + kRowsPerJob);
    for (int64_t o = jobs[j].second; o < o_end; ++o) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t k = 0; k < r; ++k) {
        const float b = B[o * r + k];
        const float* a = A + k * t.in;
        for (int64_t i = 0; i < t.in; ++i) acc[static_cast<size_t>(i)] = std::fma(b, a[i], acc[static_cast<size_t>(i)]);
      }
      base.read(ctx, t.weight + o * t.in, t.in, w.data());
      float* m = dst + t.weight + o * t.in;
      for (int64_t i = 0; i < t.in; ++i) m[i] = std::fma(s, acc[static_cast<size_t>(i)], w[static_cast<size_t>(i)]);
    }
  });
}

void LoraAdapters::merge(const ExecContext& ctx, const LoraBase& base, ParameterStore& merged) const {
  check_merge_buffers(ctx, base, merged);
  base.read(ctx, 0, base.numel(), merged.flat().data<float>());
  remerge(ctx, base, merged);
}

LoraGradients::LoraGradients(const LoraAdapters& adapters, ParameterStore& grads, LoraDropout dropout)
    : adapters_(adapters), grads_(grads), dropout_(dropout) {
  RLCPP_CHECK(grads.numel() == adapters.weights().numel() && grads.flat().on_host(),
              "LoRA: the adapter gradient buffer has " << grads.numel() << " floats, the adapters "
                                                       << adapters.weights().numel());
}

std::pair<float*, int64_t> LoraGradients::layer_span(int64_t layer) {
  const auto [begin, end] = adapters_.layer_span(layer);
  return {grads_.flat().data<float>() + begin, end - begin};
}


void LoraGradients::add(int64_t layer, LayerLinear linear, const Tensor& dy, const Tensor& x, float* grads,
                        int64_t row0) const {
  using namespace lora_kernels;
  const int64_t n = x.size(0), r = adapters_.config().rank, out_all = dy.size(1);
  const float s = adapters_.config().scale();
  const int64_t span_begin = adapters_.layer_span(layer).first;
  const float* w = adapters_.weights().flat().data<float>();
  // Per thread: Aᵀ (in, r) and dAᵀ (in, r), so that every inner loop runs over r contiguous floats; u, v (n, r).
  thread_local std::vector<float> at, dat, u, v, dropped, scale;
  const std::vector<LoraTarget>& targets = adapters_.targets();
  for (size_t ti = 0; ti < targets.size(); ++ti) {
    const LoraTarget& t = targets[ti];
    if (t.layer != layer || t.linear != linear) continue;
    RLCPP_CHECK(x.size(1) == t.in && t.row + t.out <= out_all,
                "LoRA: layer " << layer << " " << t.module << " got a product of " << x.size(1) << " inputs and "
                               << out_all << " outputs");
    const float* A = w + t.a;
    const float* B = w + t.b;
    float* dA = grads + (t.a - span_begin);
    float* dB = grads + (t.b - span_begin);
    at.resize(static_cast<size_t>(t.in * r));
    dat.assign(static_cast<size_t>(t.in * r), 0.0f);
    u.resize(static_cast<size_t>(n * r));
    v.resize(static_cast<size_t>(n * r));
    for (int64_t k = 0; k < r; ++k)
      for (int64_t i = 0; i < t.in; ++i) at[static_cast<size_t>(i * r + k)] = A[k * t.in + i];
    const float* dy_t = dy.data<float>() + t.row;  // its columns of dy: row stride out_all
    // With dropout, x is the input the adapter saw: the rows masked by the forward's draws.
    const float* xa = x.data<float>();
    if (dropout_.active()) {
      dropped.resize(static_cast<size_t>(n * t.in));
      scale.resize(static_cast<size_t>(t.in));
      for (int64_t i = 0; i < n; ++i) {
        lora_dropout_scales(dropout_.key, static_cast<int64_t>(ti), row0 + i, dropout_.p, t.in, scale.data());
        for (int64_t c = 0; c < t.in; ++c) dropped[static_cast<size_t>(i * t.in + c)] = xa[i * t.in + c] * scale[c];
      }
      xa = dropped.data();
    }
    times_rows(xa, t.in, at.data(), n, t.in, r, s, u.data());  // u = s·x·Aᵀ
    times_rows(dy_t, out_all, B, n, t.out, r, s, v.data());    // v = s·dy_t·B
    add_outer_rows(dy_t, out_all, u.data(), n, t.out, r, dB);  // dB += dy_tᵀ·u
    add_outer_rows(xa, t.in, v.data(), n, t.in, r, dat.data());  // dAᵀ = xᵀ·v
    for (int64_t k = 0; k < r; ++k)
      for (int64_t i = 0; i < t.in; ++i) dA[k * t.in + i] += dat[static_cast<size_t>(i * r + k)];
  }
}

void LoraAdapters::save_peft(const std::string& dir, const std::string& base_model) const {
  std::error_code ec;
  fs::create_directories(dir, ec);
  RLCPP_CHECK(!ec, dir << ": cannot create the adapter directory: " << ec.message());
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const ParameterInfo& info : weights_.infos()) tensors.emplace_back(info.name, weights_.get(info.name));
  write_safetensors((fs::path(dir) / kAdapterWeightsFile).string(), tensors, {{"format", "pt"}});
  Json j;
  j["peft_type"] = "LORA";
  j["task_type"] = "CAUSAL_LM";
  j["r"] = config_.rank;
  j["lora_alpha"] = config_.alpha;
  j["lora_dropout"] = config_.dropout;
  j["target_modules"] = config_.resolved_targets();
  j["bias"] = "none";
  j["fan_in_fan_out"] = false;
  j["use_rslora"] = false;
  j["use_dora"] = false;
  j["init_lora_weights"] = true;
  j["inference_mode"] = true;
  j["modules_to_save"] = nullptr;
  j["rank_pattern"] = Json::object();
  j["alpha_pattern"] = Json::object();
  j["base_model_name_or_path"] = base_model;
  j["revision"] = nullptr;
  write_json_file_atomic((fs::path(dir) / kAdapterConfigFile).string(), j);
}

bool is_peft_adapter_dir(const std::string& dir) { return fs::exists(fs::path(dir) / kAdapterConfigFile); }

LoraAdapters LoraAdapters::load_peft(const std::string& dir, const ModelConfig& model) {
  const std::string config_path = (fs::path(dir) / kAdapterConfigFile).string();
  RLCPP_CHECK(fs::exists(config_path), config_path << ": not found (is '" << dir << "' a PEFT adapter directory?)");
  const Json j = load_json_file(config_path, kConfigInput.named("a PEFT adapter_config.json"));
  RLCPP_CHECK(j.is_object(), config_path << ": expected a JSON object");
  auto value = [&](const char* key) -> const Json& {
    RLCPP_CHECK(j.contains(key), config_path << ": key '" << key << "' is missing");
    return j.at(key);
  };
  RLCPP_CHECK(value("peft_type").is_string() && value("peft_type").get<std::string>() == "LORA",
              config_path << ": peft_type is " << value("peft_type").dump() << ", rlcpp reads LORA adapters only");
  auto is_off = [&](const char* key) {
    return !j.contains(key) || j.at(key).is_null() || j.at(key) == false ||
           (j.at(key).is_object() && j.at(key).empty()) || (j.at(key).is_array() && j.at(key).empty());
  };
  RLCPP_CHECK(!j.contains("bias") || j.at("bias") == "none",
              config_path << ": bias " << j.at("bias").dump() << ": rlcpp's adapters train no biases (\"none\")");
  for (const char* key : {"use_rslora", "use_dora", "fan_in_fan_out", "rank_pattern", "alpha_pattern",
                          "modules_to_save", "layers_to_transform"})
    RLCPP_CHECK(is_off(key), config_path << ": '" << key << "' is " << j.at(key).dump()
                                         << ": not supported by rlcpp (plain LoRA, one rank and alpha for all)");
  LoraConfig c;
  RLCPP_CHECK(value("r").is_number_integer(), config_path << ": 'r' must be an integer");
  c.rank = value("r").get<int64_t>();
  RLCPP_CHECK(value("lora_alpha").is_number(), config_path << ": 'lora_alpha' must be a number");
  c.alpha = value("lora_alpha").get<double>();
  const Json& targets = value("target_modules");
  c.targets.clear();
  if (targets.is_string()) {
    c.targets.push_back(targets.get<std::string>());
  } else {
    RLCPP_CHECK(targets.is_array(), config_path << ": 'target_modules' must be a list of module names or a string");
    for (const Json& t : targets) {
      RLCPP_CHECK(t.is_string(), config_path << ": 'target_modules' holds " << t.dump() << ", not a module name");
      c.targets.push_back(t.get<std::string>());
    }
  }
  // Trained with dropout elsewhere is fine to load: inference runs without it (PEFT's eval mode).
  c.dropout = 0;
  try {
    c.validate("");
  } catch (const Error& e) {
    RLCPP_FAIL(config_path << ": " << e.what());
  }
  RLCPP_CHECK(c.enabled(), config_path << ": r must be positive, got " << c.rank);
  LoraAdapters out(model, c);
  const std::string weights_path = (fs::path(dir) / kAdapterWeightsFile).string();
  SafetensorsFile file = read_safetensors(weights_path);
  const ExecContext host = ExecContext::cpu();
  for (const ParameterInfo& info : out.weights_.infos()) {
    // PEFT saves the default adapter without its name; an adapter saved under a name has it before ".weight".
    auto it = file.tensors.find(info.name);
    if (it == file.tensors.end()) {
      const std::string named = info.name.substr(0, info.name.size() - 7) + ".default.weight";
      it = file.tensors.find(named);
    }
    RLCPP_CHECK(it != file.tensors.end(),
                weights_path << ": tensor '" << info.name
                             << "' is missing (the adapter's config.json names its module)");
    RLCPP_CHECK(it->second.shape() == info.shape, weights_path << ": tensor '" << info.name << "' has shape "
                                                               << shape_str(it->second.shape()) << ", the model needs "
                                                               << shape_str(info.shape));
    Tensor dst = out.weights_.get(info.name);
    ops::convert(host, it->second, dst);
    const float* d = dst.data<float>();
    for (int64_t k = 0; k < dst.numel(); ++k)
      RLCPP_CHECK(std::isfinite(d[k]), weights_path << ": tensor '" << info.name << "' holds a non-finite value");
    file.tensors.erase(it);
  }
  RLCPP_CHECK(file.tensors.empty(), weights_path << ": tensor '" << file.tensors.begin()->first
                                                 << "' is not an adapter of the modules adapter_config.json targets "
                                                 << "on this model");
  return out;
}

}  // namespace rlcpp
