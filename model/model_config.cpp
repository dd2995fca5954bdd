#include "model/model_config.h"

#include <cmath>
#include <filesystem>
#include <limits>

#include "core/config.h"
#include "core/error.h"

namespace rlcpp {

namespace {

// Bounds far past any real model of the family (Qwen2.5-1M: 1,010,000 positions; vocabularies ~256k; 128
// layers), so that products of sizes cannot overflow and a wrong config.json fails here, naming its key, instead
// of in an allocation (or a segfault) later.
constexpr int64_t kMaxSize = int64_t{1} << 24;             // any width, vocabulary or head count
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxPositions = int64_t{1} << 22;        // the RoPE table holds one row per position
constexpr double kMaxParameters = 4.0 * (int64_t{1} << 40);  // 4.4 T

}  // namespace

void ModelConfig::validate(const std::string& where) const {
  auto positive = [&](const char* key, int64_t v, int64_t max = kMaxSize) {
    RLCPP_CHECK(v > 0, where << ": " << key << " must be positive, got " << v);
    RLCPP_CHECK(v <= max, where << ": " << key << " " << v << " is past the largest supported, " << max);
  };
  RLCPP_CHECK(model_type == "llama" || model_type == "qwen2" || model_type == "qwen3",
              where << ": model_type '" << model_type
                    << "' is not supported (expected \"llama\", \"qwen2\" or \"qwen3\")");
  positive("vocab_size", vocab_size);
  positive("hidden_size", hidden_size);
  positive("num_hidden_layers", num_hidden_layers, kMaxLayers);
  positive("num_attention_heads", num_attention_heads);
  positive("num_key_value_heads", num_key_value_heads);
  positive("intermediate_size", intermediate_size);
  positive("max_position_embeddings", max_position_embeddings, kMaxPositions);
  RLCPP_CHECK(explicit_head_dim >= 0, where << ": head_dim must be positive (or 0: hidden_size / "
                                             << "num_attention_heads), got " << explicit_head_dim);
  if (explicit_head_dim > 0) positive("head_dim", explicit_head_dim);
  RLCPP_CHECK(explicit_head_dim > 0 || hidden_size % num_attention_heads == 0,
              where << ": hidden_size " << hidden_size << " is not a multiple of num_attention_heads "
                    << num_attention_heads << " (and no head_dim is given)");
  RLCPP_CHECK(num_attention_heads % num_key_value_heads == 0,
              where << ": num_attention_heads " << num_attention_heads << " is not a multiple of num_key_value_heads "
                    << num_key_value_heads);
  RLCPP_CHECK(head_dim() % 2 == 0, where << ": head_dim " << head_dim() << " must be even for RoPE");
  // Both are used as fp32 (the norms' epsilon, the RoPE table's frequencies): a value fp32 turns into 0 or inf is
  // named here as written, not as "theta = 0" from the kernel.
  for (auto [key, value] : {std::pair{"rms_norm_eps", rms_norm_eps}, {"rope_theta", rope_theta}}) {
    const float stored = static_cast<float>(value);
    RLCPP_CHECK(value > 0 && stored > 0 && std::isfinite(stored),
                where << ": " << key << " " << Json(value).dump() << " is not a positive number a 32-bit float holds "
                      << "(" << std::numeric_limits<float>::min() << " to " << std::numeric_limits<float>::max()
                      << ")");
  }
  // In double: the int64 count of num_parameters() overflows for sizes near the bounds above.
  const double C = static_cast<double>(hidden_size), F = static_cast<double>(intermediate_size);
  const double q = static_cast<double>(num_attention_heads) * static_cast<double>(head_dim());
  const double kv = static_cast<double>(num_key_value_heads) * static_cast<double>(head_dim());
  const double params = static_cast<double>(vocab_size) * C * 2 +
                        static_cast<double>(num_hidden_layers) * (C * (q + 2 * kv) + q * C + 3 * C * F);
  RLCPP_CHECK(params <= kMaxParameters, where << ": these sizes make " << params << " parameters, past the largest "
                                              << "supported (" << kMaxParameters << ")");
  for (auto [key, id] : {std::pair{"bos_token_id", bos_token_id}, {"eos_token_id", eos_token_id},
                         {"pad_token_id", pad_token_id}})
    RLCPP_CHECK(id >= 0 && id < vocab_size, where << ": " << key << " " << id << " outside the vocabulary of "
                                                  << vocab_size);
}

int64_t ModelConfig::num_parameters() const {
  const int64_t C = hidden_size, F = intermediate_size;
  int64_t per_layer = 2 * C + C * (q_dim() + 2 * kv_dim()) + q_dim() * C + 3 * C * F;
  if (has_qkv_bias()) per_layer += q_dim() + 2 * kv_dim();
  if (has_o_bias()) per_layer += C;
  if (has_qk_norm()) per_layer += 2 * head_dim();
  const int64_t head = value_head ? C + 1 : (tie_word_embeddings ? 0 : vocab_size * C);
  return vocab_size * C + head + num_hidden_layers * per_layer + C;
}

int64_t ModelConfig::kv_bytes_per_token(int64_t dtype_bytes) const {
  return 2 * num_hidden_layers * num_key_value_heads * head_dim() * dtype_bytes;
}

ModelConfig model_preset(const std::string& name) {
  ModelConfig c;
  if (name == "tiny") return c;  // W1: the defaults above
  if (name == "tiny-long") {  // W1 with room for a multi-turn episode (agent_guess: up to 16 turns of 7 tokens)
    c.max_position_embeddings = 128;
    return c;
  }
  if (name == "tiny-ctx256") {  // W1 with 256 positions (agent_guess with interval feedback: 16 turns of 15 tokens)
    c.max_position_embeddings = 256;
    return c;
  }
  if (name == "qwen05b") {
    c.model_type = "qwen2";
    c.vocab_size = 151936;
    c.hidden_size = 896;
    c.num_hidden_layers = 24;
    c.num_attention_heads = 14;
    c.num_key_value_heads = 2;
    c.intermediate_size = 4864;
    c.max_position_embeddings = 32768;
    c.rms_norm_eps = 1e-6;
    c.rope_theta = 1e6;
    c.tie_word_embeddings = true;
    c.bos_token_id = 151643;
    c.eos_token_id = 151645;
    c.pad_token_id = 151643;
    return c;
  }
  if (name == "qwen-tiny") {
    // The Qwen3 tokenizer's vocabulary (151,669 ids, its special tokens included) with W2's Qwen ids (<|im_end|>
    // ends a turn), norm and RoPE settings, on a body small enough to train in seconds on a laptop: chat
    // templates, BPE and the text tasks end to end. Nearly all of its 9.8M parameters are the tied embedding.
    c = model_preset("qwen05b");
    c.model_type = "qwen3";
    c.vocab_size = 151669;
    c.hidden_size = 64;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 4;
    c.intermediate_size = 192;
    c.max_position_embeddings = 1024;
    return c;
  }
  RLCPP_FAIL("unknown model preset '" << name << "' (expected \"tiny\", \"tiny-long\", \"tiny-ctx256\", \"qwen05b\" or \"qwen-tiny\")");
}

ModelConfig model_shapes(const std::string& given) {
  namespace fs = std::filesystem;
  if (fs::exists(given)) {
    const bool directory = fs::is_directory(given);
    const std::string path = directory ? (fs::path(given) / "config.json").string() : given;
    RLCPP_CHECK(!directory || fs::exists(path), "'" << given << "' is a directory without a config.json");
    // Anything but a regular file (a FIFO, a device) is named by the reader.
    return model_config_from_hf_json(load_json_file(path, kConfigInput.named("a Hugging Face config.json")), path);
  }
  try {
    return model_preset(given);
  } catch (const Error& e) {
    RLCPP_FAIL("'" << given << "' is neither a Hugging Face config.json (or a checkpoint directory holding one) nor "
                   << "a preset: " << e.what());
  }
}

namespace {

template <class T> void read_key(const Json& j, const char* key, T& out, const std::string& where, bool required) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    RLCPP_CHECK(!required, where << ": missing key '" << key << "'");
    return;
  }
  out = config_detail::read_leaf<T>(*it, where + ": " + key);
}

// "architectures": [...ForTokenClassification] marks a critic; anything else (absent, ...ForCausalLM) a policy.
void read_value_head(const Json& j, const std::string& where, ModelConfig& c) {
  auto it = j.find("architectures");
  if (it == j.end() || it->is_null()) return;
  RLCPP_CHECK(it->is_array(), where << ": architectures " << it->dump() << " is not an array");
  for (const Json& a : *it) {
    RLCPP_CHECK(a.is_string(), where << ": architectures entry " << a.dump() << " is not a string");
    const std::string arch = a.get<std::string>();
    RLCPP_CHECK(!arch.ends_with("ForSequenceClassification"),
                where << ": architectures '" << arch << "' is not supported (expected *ForCausalLM, or "
                      << "*ForTokenClassification with num_labels 1 for a critic)");
    if (arch.ends_with("ForTokenClassification")) c.value_head = true;
  }
  if (!c.value_head) return;
  // As PretrainedConfig: id2label wins over num_labels, and 2 labels when neither is present.
  int64_t num_labels = 2;
  read_key(j, "num_labels", num_labels, where, false);
  if (j.contains("id2label") && j["id2label"].is_object()) num_labels = static_cast<int64_t>(j["id2label"].size());
  RLCPP_CHECK(num_labels == 1, where << ": num_labels " << num_labels
                                     << " is not supported for a token-classification model (a critic has "
                                     << "num_labels 1)");
}

}  // namespace

ModelConfig model_config_from_hf_json(const Json& j, const std::string& where) {
  RLCPP_CHECK(j.is_object(), where << ": expected a JSON object");
  ModelConfig c;
  read_key(j, "model_type", c.model_type, where, true);
  read_key(j, "vocab_size", c.vocab_size, where, true);
  read_key(j, "hidden_size", c.hidden_size, where, true);
  read_key(j, "num_hidden_layers", c.num_hidden_layers, where, true);
  read_key(j, "num_attention_heads", c.num_attention_heads, where, true);
  c.num_key_value_heads = c.num_attention_heads;
  read_key(j, "num_key_value_heads", c.num_key_value_heads, where, false);
  read_key(j, "intermediate_size", c.intermediate_size, where, true);
  read_key(j, "max_position_embeddings", c.max_position_embeddings, where, false);
  read_key(j, "rms_norm_eps", c.rms_norm_eps, where, false);
  read_key(j, "rope_theta", c.rope_theta, where, false);
  read_key(j, "tie_word_embeddings", c.tie_word_embeddings, where, false);
  read_key(j, "attention_bias", c.attention_bias, where, false);
  read_key(j, "bos_token_id", c.bos_token_id, where, false);
  read_key(j, "eos_token_id", c.eos_token_id, where, false);
  read_key(j, "pad_token_id", c.pad_token_id, where, false);
  // An explicit head_dim is kept only where it is not hidden_size / num_attention_heads, so a config.json that
  // spells out the default reads as one that leaves it out. Qwen3Config defaults head_dim to 128.
  int64_t head_dim = c.model_type == "qwen3" ? 128 : 0;
  if (j.contains("head_dim") && !j["head_dim"].is_null()) {
    read_key(j, "head_dim", head_dim, where, false);
    RLCPP_CHECK(head_dim > 0, where << ": head_dim " << head_dim << " must be positive");
  }
  const bool default_head_dim = c.num_attention_heads > 0 && c.hidden_size % c.num_attention_heads == 0 &&
                                head_dim == c.hidden_size / c.num_attention_heads;
  c.explicit_head_dim = default_head_dim ? 0 : head_dim;
  if (j.contains("hidden_act")) {
    std::string act;
    read_key(j, "hidden_act", act, where, false);
    RLCPP_CHECK(act == "silu", where << ": hidden_act '" << act << "' is not supported (expected \"silu\")");
  }
  if (j.contains("rope_scaling"))
    RLCPP_CHECK(j["rope_scaling"].is_null(), where << ": rope_scaling " << j["rope_scaling"].dump()
                                                   << " is not supported (expected null)");
  // transformers >= 5 writes RoPE as "rope_parameters" {"rope_type": "default", "rope_theta": ...} and no
  // top-level rope_theta (nor rope_scaling); its rope_theta wins over a top-level one, as in transformers.
  if (j.contains("rope_parameters") && !j["rope_parameters"].is_null()) {
    const Json& rope = j["rope_parameters"];
    const std::string rope_where = where + ": rope_parameters";
    RLCPP_CHECK(rope.is_object(), rope_where << " " << rope.dump() << " is not an object");
    for (auto it = rope.begin(); it != rope.end(); ++it) {
      const std::string& key = it.key();
      const bool plain = ((key == "rope_type" || key == "type") && *it == "default") || key == "rope_theta" ||
                         (key == "partial_rotary_factor" && it->is_number() && it->get<double>() == 1.0);
      RLCPP_CHECK(plain, rope_where << " " << rope.dump() << " is not supported (expected rope_type \"default\" "
                                    << "and rope_theta only; '" << key << "' is " << it->dump() << ")");
    }
    read_key(rope, "rope_theta", c.rope_theta, rope_where, false);
  }
  // Qwen2's and Qwen3's sliding window (layers from max_window_layers on) is not implemented.
  if (j.contains("use_sliding_window"))
    RLCPP_CHECK(j["use_sliding_window"] != true, where << ": use_sliding_window true is not supported");
  if (j.contains("layer_types") && !j["layer_types"].is_null()) {
    const Json& types = j["layer_types"];
    RLCPP_CHECK(types.is_array(), where << ": layer_types " << types.dump() << " is not an array");
    for (const Json& t : types)
      RLCPP_CHECK(t == "full_attention", where << ": layer_types entry " << t.dump()
                                               << " is not supported (expected \"full_attention\")");
  }
  if (j.contains("mlp_bias"))
    RLCPP_CHECK(j["mlp_bias"] == false, where << ": mlp_bias true is not supported");
  read_value_head(j, where, c);
  c.validate(where);
  return c;
}

Json model_config_to_hf_json(const ModelConfig& c) {
  Json j;
  const std::string family = c.model_type == "qwen2" ? "Qwen2" : c.model_type == "qwen3" ? "Qwen3" : "Llama";
  j["architectures"] = Json::array({family + (c.value_head ? "ForTokenClassification" : "ForCausalLM")});
  if (c.value_head) {
    j["num_labels"] = 1;
    j["id2label"] = {{"0", "LABEL_0"}};
    j["label2id"] = {{"LABEL_0", 0}};
  }
  j["model_type"] = c.model_type;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["intermediate_size"] = c.intermediate_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  if (c.model_type != "qwen2") j["attention_bias"] = c.attention_bias;  // Qwen2Config has no such key
  j["hidden_act"] = "silu";
  j["head_dim"] = c.head_dim();
  j["bos_token_id"] = c.bos_token_id;
  j["eos_token_id"] = c.eos_token_id;
  j["pad_token_id"] = c.pad_token_id;
  j["torch_dtype"] = "float32";
  j["rope_scaling"] = nullptr;
  j["use_cache"] = true;
  return j;
}

}  // namespace rlcpp
