#include "model/checkpoint.h"

#include <stdlib.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "core/config.h"
#include "kernels/ops.h"
#include "core/error.h"
#include "model/finite_weights.h"
#include "model/safetensors.h"

namespace rlcpp {

namespace fs = std::filesystem;

namespace {

constexpr const char* kConfigFile = "config.json";
constexpr const char* kWeightsFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

// "a/b/" -> "a/b", so DIR.tmp-XXXXXX lands next to DIR rather than inside it.
fs::path normalized_dir(const std::string& dir) {
  RLCPP_CHECK(!dir.empty(), "checkpoint directory name is empty");
  fs::path p(dir);
  if (!p.has_filename()) p = p.parent_path();
  return p;
}

float bf16_to_float(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// IEEE binary16 -> binary32, exact for every value (normals, subnormals, infinities, NaN payloads).
float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    float mag = std::ldexp(static_cast<float>(mant), -24);  // subnormal (or zero): mant * 2^-24
    return std::bit_cast<float>(std::bit_cast<uint32_t>(mag) | sign);
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));  // rebias 15 -> 127
}

// Copies checkpoint tensors into a ParameterStore, remembering which parameters it has filled.
class Filler {
 public:
  explicit Filler(ParameterStore& store) : store_(store), filled_(store.infos().size(), false) {
    for (size_t i = 0; i < store.infos().size(); ++i) index_[store.infos()[i].name] = i;
  }

  void take(const std::string& file, const std::string& name, const Tensor& t) {
    const ModelConfig& cfg = store_.config();
    auto it = index_.find(name);
    if (it == index_.end()) {
      RLCPP_CHECK(!(name == "lm_head.weight" && cfg.tie_word_embeddings && !cfg.value_head),
                  file << ": tensor 'lm_head.weight' is present but config.json has tie_word_embeddings true "
                       << "(set it to false to use a separate output matrix, or drop the tensor)");
      // Older Llama checkpoints store the RoPE frequencies; we derive them from rope_theta.
      if (name.ends_with(".rotary_emb.inv_freq")) return;
      RLCPP_FAIL(file << ": unexpected tensor '" << name << "': not a parameter of the " << cfg.model_type
                      << " model config.json describes");
    }
    const ParameterInfo& info = store_.infos()[it->second];
    RLCPP_CHECK(!filled_[it->second], file << ": tensor '" << name << "' appears in more than one shard");
    RLCPP_CHECK(t.shape() == info.shape, file << ": tensor '" << name << "' has shape " << shape_str(t.shape())
                                              << " but config.json implies " << shape_str(info.shape));
    float* dst = store_.flat().data<float>() + info.offset;
    const int64_t n = info.numel();
    switch (t.dtype()) {
      case DType::kF32:
        if (n) std::memcpy(dst, t.raw(), static_cast<size_t>(n) * sizeof(float));
        break;
      case DType::kBF16:
        for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(t.data<uint16_t>()[i]);
        break;
      case DType::kF16:
        for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_float(t.data<uint16_t>()[i]);
        break;
      default:
        RLCPP_FAIL(file << ": tensor '" << name << "' has dtype " << dtype_name(t.dtype())
                        << "; model parameters must be F32, BF16 or F16");
    }
    const int64_t bad = first_non_finite(dst, n);
    RLCPP_CHECK(bad < 0, file << ": tensor '" << name << "' holds " << dst[bad] << " at element " << bad
                              << ": a checkpoint's weights must be finite (did the run that wrote it diverge?)");
    filled_[it->second] = true;
  }

  void check_complete(const std::string& file) const {
    std::vector<std::string> missing;
    for (size_t i = 0; i < filled_.size(); ++i)
      if (!filled_[i]) missing.push_back(store_.infos()[i].name);
    if (missing.empty()) return;
    RLCPP_FAIL(file << ": missing tensor '" << missing[0] << "' (" << missing.size()
                    << " missing in all) that config.json implies");
  }

 private:
  ParameterStore& store_;
  std::vector<bool> filled_;
  std::map<std::string, size_t> index_;
};

// DIR/model.safetensors.index.json: reads each shard once, in name order, and checks that every tensor the
// weight_map promises is in the shard it names.
void load_shards(const fs::path& dir, Filler& filler) {
  const std::string index_path = (dir / kIndexFile).string();
  Json index = load_json_file(index_path, kConfigInput.named("a safetensors index"));
  RLCPP_CHECK(index.is_object() && index.contains("weight_map") && index["weight_map"].is_object(),
              index_path << ": expected an object with a \"weight_map\" object");
  std::map<std::string, std::vector<std::string>> by_shard;
  for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
    RLCPP_CHECK(it->is_string(), index_path << ": weight_map entry for tensor '" << it.key() << "' is "
                                            << it->dump() << ", expected a shard file name");
    const std::string shard = it->get<std::string>();
    // Shards live next to the index; a path would let a checkpoint read files outside its directory.
    RLCPP_CHECK(!shard.empty() && shard.find('/') == std::string::npos && shard != "." && shard != "..",
                index_path << ": tensor '" << it.key() << "' maps to '" << shard
                           << "', expected a file name in the checkpoint directory");
    by_shard[shard].push_back(it.key());
  }
  RLCPP_CHECK(!by_shard.empty(), index_path << ": weight_map is empty");
  for (const auto& [shard, names] : by_shard) {
    const std::string shard_path = (dir / shard).string();
    SafetensorsFile file = read_safetensors(shard_path);
    for (const auto& name : names)
      RLCPP_CHECK(file.tensors.count(name), index_path << ": tensor '" << name << "' is mapped to " << shard
                                                       << " but " << shard_path << " does not contain it");
    for (const auto& [name, t] : file.tensors) filler.take(shard_path, name, t);
  }
  filler.check_complete(index_path);
}

}  // namespace

namespace {

// A weight past the dtype's largest finite value would be stored as an infinity (fp16: |w| >= 65520).
void check_representable(const ParameterStore& params, DType dtype, const std::string& target) {
  for (const ParameterInfo& info : parameter_layout(params.config())) {
    Tensor rounded = params.get(info.name).clone();
    ops::round_to(ExecContext::cpu(), rounded, dtype);
    const int64_t at = first_non_finite(rounded.data<float>(), rounded.numel());
    RLCPP_CHECK(at < 0, target << ": tensor '" << info.name << "' element " << at << " = "
                               << params.get(info.name).data<float>()[at] << " overflows " << dtype_name(dtype)
                               << " (it would be stored as an infinity); nothing was written (save in a wider dtype)");
  }
}

}  // namespace

void save_model_checkpoint(const std::string& dir, const ParameterStore& params, bool overwrite,
                           const std::vector<std::string>& extra_files, DType dtype) {
  RLCPP_CHECK(is_float_storage(dtype),
              dir << ": a checkpoint is saved in F32, BF16 or F16, not " << dtype_name(dtype));
  const fs::path target = normalized_dir(dir);
  const ModelConfig& cfg = params.config();
  cfg.validate("model config saved to " + target.string());
  // Before anything is written: a diverged run must not replace a good checkpoint with NaNs.
  check_finite_weights(params, target.string() + ": refusing to save a checkpoint of non-finite weights");
  if (dtype != DType::kF32) check_representable(params, dtype, target.string());
  std::error_code ec;
  const bool exists = fs::exists(fs::symlink_status(target, ec));
  RLCPP_CHECK(!exists || overwrite, target.string() << ": already exists; nothing was written (remove it or choose "
                                                    << "another directory)");
  RLCPP_CHECK(!exists || fs::is_directory(target), target.string() << ": exists and is not a directory");
  if (target.has_parent_path()) {
    fs::create_directories(target.parent_path(), ec);
    RLCPP_CHECK(!ec, target.parent_path().string() << ": cannot create directory: " << ec.message());
  }

  std::string tmpl = target.string() + ".tmp-XXXXXX";
  RLCPP_CHECK(::mkdtemp(tmpl.data()) != nullptr, tmpl << ": cannot create temporary checkpoint directory: "
                                                      << std::strerror(errno));
  const fs::path tmp(tmpl);
  const fs::path old = target.string() + ".old-" + tmpl.substr(tmpl.size() - 6);
  try {
    const ExecContext host = ExecContext::cpu();  // the parameters are on the host; so are their stored copies
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const ParameterInfo& info : parameter_layout(cfg))
      tensors.emplace_back(
          info.name, dtype == DType::kF32 ? params.get(info.name) : ops::stored_as(host, params.get(info.name), dtype));
    write_safetensors((tmp / kWeightsFile).string(), tensors, {{"format", "pt"}});
    Json config = model_config_to_hf_json(cfg);
    if (dtype != DType::kF32) config["torch_dtype"] = dtype == DType::kBF16 ? "bfloat16" : "float16";
    write_json_file_atomic((tmp / kConfigFile).string(), config);
    for (const std::string& file : extra_files) fs::copy_file(file, tmp / fs::path(file).filename());
    if (exists) {
      fs::rename(target, old);
      try {
        fs::rename(tmp, target);
      } catch (...) {
        fs::rename(old, target, ec);  // put the old checkpoint back; the error below is the one to report
        throw;
      }
    } else {
      fs::rename(tmp, target);
    }
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(tmp, ec);
    RLCPP_FAIL(target.string() << ": saving the checkpoint failed: " << e.what());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  // The new checkpoint is in place; a leftover old copy wastes space but loses nothing.
  if (exists) fs::remove_all(old, ec);
}

namespace {

// Before allocating the parameters a config.json describes: the weight files must be able to hold them (one
// byte a parameter at the least), so a wrong vocab_size or hidden_size fails here, naming config.json, instead
// of allocating gigabytes (or failing in malloc) before the shape check.
void check_weights_can_hold(const fs::path& dir, const ModelConfig& config, const std::string& config_path) {
  std::error_code ec;
  int64_t bytes = 0;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() != ".safetensors") continue;
    RLCPP_CHECK(entry.is_regular_file(ec), entry.path().string() << ": is a directory or not a regular file, not a "
                                                                  << "safetensors file");
    bytes += static_cast<int64_t>(entry.file_size(ec));
  }
  if (bytes == 0) return;  // no weight files: the loader names what is missing
  const int64_t params = config.num_parameters();
  RLCPP_CHECK(params <= bytes, config_path << ": describes a model of " << params << " parameters (vocab_size "
                                           << config.vocab_size << ", hidden_size " << config.hidden_size
                                           << ", " << config.num_hidden_layers << " layers) but the weight files in "
                                           << dir.string() << " hold only " << bytes
                                           << " bytes: config.json does not match the weights");
}

}  // namespace

int64_t checkpoint_step_of(const std::string& name) {
  constexpr std::string_view kPrefix = "step_";
  if (!name.starts_with(kPrefix) || name.size() == kPrefix.size()) return -1;
  const char* first = name.data() + kPrefix.size();
  const char* last = name.data() + name.size();
  if (!std::all_of(first, last, [](char c) { return c >= '0' && c <= '9'; })) return -1;
  int64_t step = -1;
  const auto [end, error] = std::from_chars(first, last, step);
  return error == std::errc() && end == last ? step : -1;
}

std::string latest_step_checkpoint(const std::string& dir) {
  int64_t best = -1;
  std::string best_path;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    // step_12.tmp-... and step_12.partial are unfinished writes; other names are not checkpoints of a step.
    const int64_t step = checkpoint_step_of(entry.path().filename().string());
    if (step < 0 || !entry.is_directory(ec)) continue;
    if (!fs::exists(entry.path() / kWeightsFile) || !fs::exists(entry.path() / kConfigFile)) continue;
    if (step > best) best = step, best_path = entry.path().string();
  }
  return best_path;
}

ParameterStore load_model_checkpoint(const std::string& dir) {
  const fs::path d = normalized_dir(dir);
  const std::string config_path = (d / kConfigFile).string();
  RLCPP_CHECK(fs::exists(config_path),
              config_path << ": not found (is '" << dir << "' a Hugging Face model directory?)");
  const ModelConfig config =
      model_config_from_hf_json(load_json_file(config_path, kConfigInput.named("the model's config.json")), config_path);
  check_weights_can_hold(d, config, config_path);
  ParameterStore store(config);
  Filler filler(store);
  const std::string weights_path = (d / kWeightsFile).string();
  if (fs::exists(weights_path)) {
    SafetensorsFile file = read_safetensors(weights_path);
    for (const auto& [name, t] : file.tensors) filler.take(weights_path, name, t);
    filler.check_complete(weights_path);
  } else if (fs::exists(d / kIndexFile)) {
    load_shards(d, filler);
  } else {
    RLCPP_FAIL(d.string() << ": neither " << kWeightsFile << " nor " << kIndexFile << " found");
  }
  return store;
}

}  // namespace rlcpp
