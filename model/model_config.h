// The shapes of a Llama-family model (Llama, Qwen2, Qwen3), named as Hugging Face config.json names them.
#pragma once

#include <cstdint>
#include <string>

#include "core/config.h"

namespace rlcpp {

struct ModelConfig {
  std::string model_type = "llama";  // "llama", "qwen2" or "qwen3"
  int64_t vocab_size = 32;
  int64_t hidden_size = 128;
  int64_t num_hidden_layers = 4;
  int64_t num_attention_heads = 4;
  int64_t num_key_value_heads = 2;
  int64_t intermediate_size = 352;
  int64_t max_position_embeddings = 64;
  double rms_norm_eps = 1e-5;
  double rope_theta = 1e4;
  bool tie_word_embeddings = true;
  // Llama, Qwen3: bias on q, k, v and o projections. Qwen2 always has q, k, v bias and never o bias.
  bool attention_bias = false;
  // config.json "head_dim", the width of one attention head; 0: hidden_size / num_attention_heads (Hugging
  // Face's default for Llama and Qwen2; Qwen3's config defaults to 128, which model_config_from_hf_json applies).
  int64_t explicit_head_dim = 0;
  int64_t bos_token_id = 1;
  int64_t eos_token_id = 2;
  int64_t pad_token_id = 0;
  // A critic: Hugging Face *ForTokenClassification with num_labels = 1. The body is the causal LM's; the
  // output is one value per position from `score` (weight (1, C), bias (1)) instead of lm_head's logits.
  bool value_head = false;

  int64_t head_dim() const { return explicit_head_dim > 0 ? explicit_head_dim : hidden_size / num_attention_heads; }
  bool has_qkv_bias() const { return model_type == "qwen2" || attention_bias; }
  bool has_o_bias() const { return model_type != "qwen2" && attention_bias; }
  // Qwen3: q_norm and k_norm, an RMSNorm (weight (head_dim)) over each head of q and of k before RoPE.
  bool has_qk_norm() const { return model_type == "qwen3"; }
  int64_t q_dim() const { return num_attention_heads * head_dim(); }
  int64_t kv_dim() const { return num_key_value_heads * head_dim(); }

  // Throws naming the field when the shapes are inconsistent (heads not dividing, GQA not dividing, ...).
  void validate(const std::string& where) const;
  int64_t num_parameters() const;
  // 2 * layers * kv_heads * head_dim * bytes
  int64_t kv_bytes_per_token(int64_t dtype_bytes) const;

  template <class V> void visit(V& v) {
    v("model_type", model_type, "\"llama\", \"qwen2\" or \"qwen3\"");
    v("vocab_size", vocab_size, "vocabulary size");
    v("hidden_size", hidden_size, "model width");
    v("num_hidden_layers", num_hidden_layers, "transformer blocks");
    v("num_attention_heads", num_attention_heads, "query heads");
    v("num_key_value_heads", num_key_value_heads, "key/value heads (GQA)");
    v("intermediate_size", intermediate_size, "SwiGLU hidden width");
    v("max_position_embeddings", max_position_embeddings, "longest sequence");
    v("rms_norm_eps", rms_norm_eps, "RMSNorm epsilon");
    v("rope_theta", rope_theta, "RoPE base");
    v("tie_word_embeddings", tie_word_embeddings, "lm_head shares embed_tokens");
    v("attention_bias", attention_bias, "llama, qwen3: bias on q/k/v/o projections (qwen2 always has q/k/v bias)");
    v("head_dim", explicit_head_dim, "width of an attention head (0: hidden_size / num_attention_heads)");
    v("bos_token_id", bos_token_id, "beginning of sequence id");
    v("eos_token_id", eos_token_id, "end of sequence id");
    v("pad_token_id", pad_token_id, "padding id");
    v("value_head", value_head, "critic: a scalar value head (score) instead of lm_head (*ForTokenClassification)");
  }
};

// Presets: "tiny" (W1) and "qwen05b" (W2) of docs/benchmarks.md, "tiny-long" and "tiny-ctx256" (W1 with a
// context of 128 or 256 instead of 64, for multi-turn episodes), and "qwen-tiny", the Qwen3 tokenizer's vocabulary on a 2-layer, 64-wide body
// (a real-model path that runs in seconds; give it the tokenizer).
ModelConfig model_preset(const std::string& name);

// A model's shapes given by name or file, as `rlcpp ledger MODEL` and `rlcpp bench train|rollout --preset` take
// them: a Hugging Face config.json, a directory holding one (a checkpoint), else a preset name. The error names
// what was given and what was expected.
ModelConfig model_shapes(const std::string& preset_or_config);

// Hugging Face config.json: reads llama, qwen2 and qwen3 configs (ignoring keys that do not change the
// computation, e.g. torch_dtype, use_cache); rejects unsupported ones (hidden_act other than silu,
// rope_scaling, Qwen2's and Qwen3's use_sliding_window or a sliding_attention layer in layer_types) with the
// file and key named. "head_dim" is read (explicit_head_dim) when it differs from hidden_size /
// num_attention_heads; a qwen3 config without one gets Qwen3Config's default, 128. rope_theta may also come from
// transformers 5's "rope_parameters" (rope_type "default" only). "architectures" [LlamaForTokenClassification]
// (or Qwen2's, Qwen3's) sets value_head, which needs num_labels 1 (from "num_labels" or "id2label"; Hugging Face's default is 2);
// writing a value-head config gives that architecture, "num_labels": 1 and the matching id2label/label2id.
ModelConfig model_config_from_hf_json(const Json& j, const std::string& where);
Json model_config_to_hf_json(const ModelConfig& cfg);

}  // namespace rlcpp
