// Hugging Face config.json <-> ModelConfig: the Qwen3 family (q_norm / k_norm, an explicit head_dim, bias only
// with attention_bias) and head_dim for every family. (Llama and Qwen2 files written by transformers itself are
// model_hf_parity_test's; the pinned transformers 4.49 predates Qwen3, so Qwen3 is checked here from the keys.)
// And model_shapes: a preset, a config.json or a checkpoint directory, as `rlcpp ledger` and the benches take them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "model/model_config.h"
#include "model/parameters.h"

namespace rlcpp {
namespace {

// Qwen/Qwen3-0.6B's config.json as the Hub serves it.
Json qwen3_06b_config() {
  return Json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024,
    "initializer_range": 0.02, "intermediate_size": 3072, "max_position_embeddings": 40960,
    "max_window_layers": 28, "model_type": "qwen3", "num_attention_heads": 16, "num_hidden_layers": 28,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000,
    "sliding_window": null, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0", "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})");
}

std::string error_of(const Json& j) {
  try {
    model_config_from_hf_json(j, "config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(ModelConfigQwen3, Qwen3ConfigJsonGivesHeadDimQkNormsAndNoBias) {
  const ModelConfig c = model_config_from_hf_json(qwen3_06b_config(), "config.json");
  EXPECT_EQ(c.model_type, "qwen3");
  EXPECT_EQ(c.head_dim(), 128);  // not 1024 / 16
  EXPECT_EQ(c.q_dim(), 16 * 128);
  EXPECT_EQ(c.kv_dim(), 8 * 128);
  EXPECT_TRUE(c.has_qk_norm());
  EXPECT_FALSE(c.has_qkv_bias());
  EXPECT_FALSE(c.has_o_bias());
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.rope_theta, 1e6);
  // Qwen3-0.6B: 596,049,920 parameters (0.44B without the tied embedding).
  EXPECT_EQ(c.num_parameters(), 596049920);
  EXPECT_EQ(c.kv_bytes_per_token(2), 2 * 28 * 8 * 128 * 2);
  const auto layout = parameter_layout(c);
  EXPECT_EQ(layout.back().offset + layout.back().numel(), c.num_parameters());
  auto shape_of = [&](const std::string& name) {
    for (const auto& info : layout)
      if (info.name == name) return info.shape;
    ADD_FAILURE() << "no parameter " << name;
    return Shape{};
  };
  EXPECT_EQ(shape_of("model.layers.27.self_attn.q_proj.weight"), (Shape{2048, 1024}));
  EXPECT_EQ(shape_of("model.layers.27.self_attn.k_proj.weight"), (Shape{1024, 1024}));
  EXPECT_EQ(shape_of("model.layers.27.self_attn.o_proj.weight"), (Shape{1024, 2048}));
  EXPECT_EQ(shape_of("model.layers.27.self_attn.q_norm.weight"), (Shape{128}));
  EXPECT_EQ(shape_of("model.layers.27.self_attn.k_norm.weight"), (Shape{128}));
  for (const auto& info : layout) EXPECT_FALSE(info.name.ends_with(".bias")) << info.name;
}

TEST(ModelConfigQwen3, WritesQwen3ForCausalLMAndReadsItBack) {
  ModelConfig c = model_config_from_hf_json(qwen3_06b_config(), "config.json");
  const Json j = model_config_to_hf_json(c);
  EXPECT_EQ(j["architectures"], Json::array({"Qwen3ForCausalLM"}));
  EXPECT_EQ(j["model_type"], "qwen3");
  EXPECT_EQ(j["head_dim"], 128);
  EXPECT_EQ(j["attention_bias"], false);
  EXPECT_EQ(config_to_json(model_config_from_hf_json(j, "config.json")), config_to_json(c));
  c.attention_bias = true;  // Qwen3Attention: bias on q, k, v and o alike
  const ModelConfig biased = model_config_from_hf_json(model_config_to_hf_json(c), "config.json");
  EXPECT_TRUE(biased.has_qkv_bias());
  EXPECT_TRUE(biased.has_o_bias());
}

TEST(ModelConfigQwen3, MissingHeadDimIsQwen3ConfigsDefault128) {
  Json j = qwen3_06b_config();
  j.erase("head_dim");
  EXPECT_EQ(model_config_from_hf_json(j, "config.json").head_dim(), 128);
  j["hidden_size"] = 2048;  // 2048 / 16 = 128: the same head width, read as the default
  const ModelConfig c = model_config_from_hf_json(j, "config.json");
  EXPECT_EQ(c.head_dim(), 128);
  EXPECT_EQ(c.explicit_head_dim, 0);
}

TEST(ModelConfigQwen3, SlidingWindowLayersAreRefusedNamingTheKey) {
  Json j = qwen3_06b_config();
  j["layer_types"] = Json::array({"full_attention", "sliding_attention"});
  EXPECT_NE(error_of(j).find("config.json: layer_types entry \"sliding_attention\" is not supported"),
            std::string::npos)
      << error_of(j);
  j["layer_types"] = Json(std::vector<std::string>(28, "full_attention"));
  EXPECT_EQ(error_of(j), "<no error>");
  j["use_sliding_window"] = true;
  EXPECT_NE(error_of(j).find("use_sliding_window true is not supported"), std::string::npos) << error_of(j);
}

// Any family: a head_dim other than hidden_size / num_attention_heads (transformers' LlamaConfig reads it too) is
// the width of q, k and v heads; one that equals it reads as absent.
TEST(ModelConfigHeadDim, ExplicitHeadDimForEveryFamily) {
  for (const char* type : {"llama", "qwen2", "qwen3"}) {
    ModelConfig c;
    c.model_type = type;
    c.hidden_size = 64;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.explicit_head_dim = 24;
    c.validate(type);
    EXPECT_EQ(c.q_dim(), 96) << type;
    const ModelConfig back = model_config_from_hf_json(model_config_to_hf_json(c), "config.json");
    EXPECT_EQ(back.head_dim(), 24) << type;
    EXPECT_EQ(back.kv_dim(), 48) << type;
    Json j = model_config_to_hf_json(c);
    j["head_dim"] = 16;  // 64 / 4
    EXPECT_EQ(model_config_from_hf_json(j, "config.json").explicit_head_dim, 0) << type;
  }
  Json j = model_config_to_hf_json(ModelConfig{});
  j["hidden_size"] = 130;  // not a multiple of 4 heads: needs a head_dim
  j.erase("head_dim");
  EXPECT_NE(error_of(j).find("hidden_size 130 is not a multiple of num_attention_heads 4"), std::string::npos)
      << error_of(j);
  j["head_dim"] = 32;
  EXPECT_EQ(error_of(j), "<no error>");
  j["head_dim"] = 31;
  EXPECT_NE(error_of(j).find("head_dim 31 must be even"), std::string::npos) << error_of(j);
  j["head_dim"] = -2;
  EXPECT_NE(error_of(j).find("head_dim -2 must be positive"), std::string::npos) << error_of(j);
}

// Sizes past any real model fail in the config check naming file and key, not in an allocation or a segfault
// (max_position_embeddings 2^62 used to segfault building the RoPE table; num_hidden_layers 2^62 overflowed the
// parameter count past the weight-file check into a 24 GB allocation).
TEST(ModelConfigBounds, HugeSizesAreErrorsNamingTheKey) {
  const auto with = [](const char* key, Json value) {
    Json j = qwen3_06b_config();
    j[key] = value;
    return error_of(j);
  };
  const int64_t huge = int64_t{1} << 62;
  for (const char* key : {"max_position_embeddings", "num_hidden_layers", "hidden_size", "vocab_size",
                          "intermediate_size", "num_attention_heads", "head_dim"}) {
    const std::string e = with(key, huge);
    EXPECT_NE(e.find("config.json: " + std::string(key) + " " + std::to_string(huge) + " is past the largest"),
              std::string::npos)
        << key << ": " << e;
  }
  EXPECT_NE(with("max_position_embeddings", 100000000).find("max_position_embeddings 100000000 is past"),
            std::string::npos);
  // Each size in bounds, their product past 4.4 T parameters.
  Json j = qwen3_06b_config();
  j["num_hidden_layers"] = 4096;
  j["intermediate_size"] = 1 << 24;
  EXPECT_NE(error_of(j).find("parameters, past the largest supported"), std::string::npos) << error_of(j);
  EXPECT_EQ(error_of(qwen3_06b_config()), "<no error>");
}

TEST(ModelConfigFamilies, UnknownModelTypeNamesTheChoices) {
  Json j = qwen3_06b_config();
  j["model_type"] = "qwen3_moe";
  EXPECT_NE(error_of(j).find("model_type 'qwen3_moe' is not supported (expected \"llama\", \"qwen2\" or \"qwen3\")"),
            std::string::npos)
      << error_of(j);
}

}  // namespace
}  // namespace rlcpp

namespace rlcpp {
namespace {

TEST(ModelShapes, APresetAConfigJsonOrACheckpointDirectory) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("rlcpp_model_shapes_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ModelConfig wide = model_preset("tiny");
  wide.hidden_size = 256;
  std::ofstream(dir / "config.json") << model_config_to_hf_json(wide).dump();
  EXPECT_EQ(model_shapes("tiny").hidden_size, 128);
  EXPECT_EQ(model_shapes((dir / "config.json").string()).hidden_size, 256);
  EXPECT_EQ(model_shapes(dir.string()).hidden_size, 256);
  std::filesystem::remove(dir / "config.json");
  try {
    model_shapes(dir.string());
    ADD_FAILURE() << "a directory without config.json";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory without a config.json"), std::string::npos) << e.what();
  }
  try {
    model_shapes("tiny2");
    ADD_FAILURE() << "an unknown name";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'tiny2' is neither a Hugging Face config.json (or a checkpoint directory "
                                         "holding one) nor a preset: unknown model preset 'tiny2'"),
              std::string::npos)
        << e.what();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rlcpp
