#include <gtest/gtest.h>
#include <stdlib.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "core/config.h"
#include "core/error.h"
#include "core/philox.h"
#include "model/checkpoint.h"
#include "model/init.h"
#include "model/safetensors.h"
#include "tests/error_test_support.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

using TensorList = std::vector<std::pair<std::string, Tensor>>;

ModelConfig small_llama() {
  ModelConfig c;
  c.vocab_size = 32;
  c.hidden_size = 16;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.intermediate_size = 24;
  c.max_position_embeddings = 32;
  return c;
}

ModelConfig small_qwen2() {  // q/k/v bias, Qwen2's eps and theta
  ModelConfig c = small_llama();
  c.model_type = "qwen2";
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1e6;
  return c;
}

ModelConfig small_untied() {  // separate lm_head, llama q/k/v/o bias
  ModelConfig c = small_llama();
  c.tie_word_embeddings = false;
  c.attention_bias = true;
  return c;
}

ModelConfig small_qwen3() {  // q_norm / k_norm, no bias, head_dim 6 != 16 / 4
  ModelConfig c = small_qwen2();
  c.model_type = "qwen3";
  c.explicit_head_dim = 6;
  return c;
}

ModelConfig small_qwen3_bias() {  // qwen3 attention_bias: q/k/v/o bias, separate lm_head
  ModelConfig c = small_qwen3();
  c.attention_bias = true;
  c.tie_word_embeddings = false;
  return c;
}

// Every float distinct and random, so a parameter landing in the wrong place cannot go unnoticed.
ParameterStore random_store(const ModelConfig& cfg, uint64_t seed) {
  ParameterStore s(cfg);
  PhiloxStream rng(seed, 0);
  for (int64_t i = 0; i < s.numel(); ++i) s.flat().data<float>()[i] = rng.normal();
  return s;
}

bool same_bytes(const ParameterStore& a, const ParameterStore& b) {
  return a.numel() == b.numel() &&
         std::memcmp(a.flat().raw(), b.flat().raw(), static_cast<size_t>(a.numel()) * sizeof(float)) == 0;
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string t = (fs::temp_directory_path() / "rlcpp_checkpoint_XXXXXX").string();
    ASSERT_NE(::mkdtemp(t.data()), nullptr);
    root_ = t;
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string dir(const std::string& name = "ckpt") const { return (root_ / name).string(); }
  std::string weights(const std::string& name = "ckpt") const { return (root_ / name / "model.safetensors").string(); }
  std::string config(const std::string& name = "ckpt") const { return (root_ / name / "config.json").string(); }

  // Reads DIR/model.safetensors, lets `edit` change the tensor list, writes it back.
  void edit_weights(const std::function<void(TensorList&)>& edit) {
    SafetensorsFile f = read_safetensors(weights());
    TensorList list(f.tensors.begin(), f.tensors.end());
    edit(list);
    write_safetensors(weights(), list, f.metadata);
  }
  void edit_config(const std::function<void(Json&)>& edit) {
    Json j = load_json_file(config());
    edit(j);
    write_json_file_atomic(config(), j);
  }
  std::string load_error() {
    return error_of([&] { load_model_checkpoint(dir()); });
  }
  std::vector<std::string> entries_of_root() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(root_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  fs::path root_;
};

class CheckpointRoundTrip : public CheckpointTest, public ::testing::WithParamInterface<ModelConfig> {};

TEST_P(CheckpointRoundTrip, IsBitExactAndKeepsConfig) {
  const ModelConfig cfg = GetParam();
  ParameterStore saved = random_store(cfg, 7);
  save_model_checkpoint(dir(), saved);
  ParameterStore loaded = load_model_checkpoint(dir());
  EXPECT_EQ(config_to_json(loaded.config()), config_to_json(cfg));
  EXPECT_TRUE(same_bytes(saved, loaded));

  // The file holds exactly the layout's parameters, as F32, with Hugging Face's metadata.
  SafetensorsFile f = read_safetensors(weights());
  EXPECT_EQ(f.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  const auto layout = parameter_layout(cfg);
  EXPECT_EQ(f.tensors.size(), layout.size());
  for (const auto& info : layout) {
    ASSERT_TRUE(f.tensors.count(info.name)) << info.name;
    EXPECT_EQ(f.tensors.at(info.name).dtype(), DType::kF32);
    EXPECT_EQ(f.tensors.at(info.name).shape(), info.shape) << info.name;
  }
  EXPECT_EQ(f.tensors.count("lm_head.weight"), cfg.tie_word_embeddings ? 0u : 1u);
  EXPECT_EQ(f.tensors.count("model.layers.1.self_attn.k_proj.bias"), cfg.has_qkv_bias() ? 1u : 0u);
  EXPECT_EQ(f.tensors.count("model.layers.1.self_attn.o_proj.bias"), cfg.has_o_bias() ? 1u : 0u);
  EXPECT_EQ(f.tensors.count("model.layers.1.self_attn.q_norm.weight"), cfg.has_qk_norm() ? 1u : 0u);
  EXPECT_EQ(f.tensors.count("model.layers.1.self_attn.k_norm.weight"), cfg.has_qk_norm() ? 1u : 0u);
  const Json written = load_json_file(config());
  EXPECT_EQ(written["architectures"][0], cfg.model_type == "qwen2"   ? "Qwen2ForCausalLM"
                                         : cfg.model_type == "qwen3" ? "Qwen3ForCausalLM"
                                                                     : "LlamaForCausalLM");
  EXPECT_EQ(written["head_dim"], cfg.head_dim());
  EXPECT_EQ(entries_of_root(), std::vector<std::string>{"ckpt"});  // no temporaries left behind
}

std::string config_name(const ::testing::TestParamInfo<ModelConfig>& info) {
  const char* names[] = {"TiedLlama", "Qwen2QkvBias", "UntiedLlamaWithBias", "Qwen3QkNorm", "UntiedQwen3WithBias"};
  return names[info.index];
}

INSTANTIATE_TEST_SUITE_P(Configs, CheckpointRoundTrip,
                         ::testing::Values(small_llama(), small_qwen2(), small_untied(), small_qwen3(),
                                           small_qwen3_bias()),
                         config_name);

TEST_F(CheckpointTest, InitRandomModelRoundTrips) {
  ParameterStore saved = init_random(small_qwen2(), 3);
  save_model_checkpoint(dir(), saved);
  EXPECT_TRUE(same_bytes(saved, load_model_checkpoint(dir())));
}

TEST_F(CheckpointTest, SaveCreatesParentsAndAcceptsTrailingSlash) {
  ParameterStore saved = random_store(small_llama(), 1);
  std::string nested = (root_ / "run" / "checkpoints" / "step_5").string() + "/";
  save_model_checkpoint(nested, saved);
  EXPECT_TRUE(same_bytes(saved, load_model_checkpoint(nested)));
  EXPECT_EQ(entries_of_root(), std::vector<std::string>{"run"});
  EXPECT_EQ(std::distance(fs::directory_iterator(root_ / "run" / "checkpoints"), fs::directory_iterator()), 1);
}

TEST_F(CheckpointTest, RefusesToOverwriteWithoutTheFlag) {
  ParameterStore first = random_store(small_llama(), 1);
  ParameterStore second = random_store(small_llama(), 2);
  save_model_checkpoint(dir(), first);
  std::string e = error_of([&] { save_model_checkpoint(dir(), second); });
  EXPECT_NE(e.find(dir()), std::string::npos) << e;
  EXPECT_NE(e.find("already exists"), std::string::npos) << e;
  EXPECT_TRUE(same_bytes(first, load_model_checkpoint(dir())));

  save_model_checkpoint(dir(), second, /*overwrite=*/true);
  EXPECT_TRUE(same_bytes(second, load_model_checkpoint(dir())));
  EXPECT_EQ(entries_of_root(), std::vector<std::string>{"ckpt"});  // the old copy and the temporary are gone
}

TEST_F(CheckpointTest, FailedSaveLeavesTheOldCheckpointIntact) {
  ParameterStore first = random_store(small_untied(), 1);
  save_model_checkpoint(dir(), first);
  // A store without parameters fails while the new checkpoint is being assembled.
  std::string e = error_of([&] { save_model_checkpoint(dir(), ParameterStore(), /*overwrite=*/true); });
  EXPECT_NE(e.find("model.embed_tokens.weight"), std::string::npos) << e;
  ParameterStore loaded = load_model_checkpoint(dir());
  EXPECT_EQ(config_to_json(loaded.config()), config_to_json(small_untied()));
  EXPECT_TRUE(same_bytes(first, loaded));
  EXPECT_EQ(entries_of_root(), std::vector<std::string>{"ckpt"});
}

TEST_F(CheckpointTest, ShapeThatDisagreesWithConfigNamesTensorAndBothShapes) {
  save_model_checkpoint(dir(), random_store(small_llama(), 1));
  edit_weights([](TensorList& list) {
    for (auto& [name, t] : list)
      if (name == "model.layers.0.self_attn.q_proj.weight") t = Tensor::zeros({4, 8});
  });
  std::string e = load_error();
  EXPECT_NE(e.find(weights() + ": tensor 'model.layers.0.self_attn.q_proj.weight' has shape (4, 8) but config.json "
                               "implies (16, 16)"),
            std::string::npos)
      << e;
}

TEST_F(CheckpointTest, ConfigThatDisagreesWithTensorsIsAnError) {
  save_model_checkpoint(dir(), random_store(small_llama(), 1));
  edit_config([](Json& j) { j["intermediate_size"] = 32; });
  std::string e = load_error();
  EXPECT_NE(e.find(weights()), std::string::npos) << e;
  EXPECT_NE(e.find("'model.layers.0.mlp.down_proj.weight' has shape (16, 24) but config.json implies (16, 32)"),
            std::string::npos)
      << e;

  edit_config([](Json& j) {
    j["intermediate_size"] = 24;
    j["num_hidden_layers"] = 3;
  });
  e = load_error();
  EXPECT_NE(e.find(weights() + ": missing tensor 'model.layers.2.input_layernorm.weight'"), std::string::npos) << e;

  edit_config([](Json& j) { j["num_hidden_layers"] = 1; });
  e = load_error();
  EXPECT_NE(e.find(weights() + ": unexpected tensor 'model.layers.1."), std::string::npos) << e;
}

TEST_F(CheckpointTest, MissingTensorNamesFileAndTensor) {
  save_model_checkpoint(dir(), random_store(small_qwen2(), 1));
  edit_weights([](TensorList& list) {
    std::erase_if(list, [](const auto& p) { return p.first == "model.layers.1.self_attn.v_proj.bias"; });
  });
  std::string e = load_error();
  EXPECT_NE(e.find(weights() + ": missing tensor 'model.layers.1.self_attn.v_proj.bias' (1 missing in all)"),
            std::string::npos)
      << e;
}

TEST_F(CheckpointTest, UnexpectedTensorNamesFileAndTensor) {
  save_model_checkpoint(dir(), random_store(small_llama(), 1));
  edit_weights([](TensorList& list) { list.emplace_back("model.layers.0.mlp.extra.weight", Tensor::zeros({2})); });
  std::string e = load_error();
  EXPECT_NE(e.find(weights() + ": unexpected tensor 'model.layers.0.mlp.extra.weight'"), std::string::npos) << e;
}

TEST_F(CheckpointTest, TiedConfigWithLmHeadIsAnError) {
  save_model_checkpoint(dir(), random_store(small_llama(), 1));
  edit_weights([](TensorList& list) { list.emplace_back("lm_head.weight", Tensor::zeros({32, 16})); });
  std::string e = load_error();
  EXPECT_NE(e.find(weights() + ": tensor 'lm_head.weight' is present but config.json has tie_word_embeddings true"),
            std::string::npos)
      << e;
}

TEST_F(CheckpointTest, UntiedConfigWithoutLmHeadIsAnError) {
  save_model_checkpoint(dir(), random_store(small_llama(), 1));
  edit_config([](Json& j) { j["tie_word_embeddings"] = false; });
  std::string e = load_error();
  EXPECT_NE(e.find(weights() + ": missing tensor 'lm_head.weight'"), std::string::npos) << e;
}

TEST_F(CheckpointTest, RotaryInvFreqBuffersAreIgnored) {
  ParameterStore saved = random_store(small_llama(), 1);
  save_model_checkpoint(dir(), saved);
  edit_weights([](TensorList& list) {
    list.emplace_back("model.layers.0.self_attn.rotary_emb.inv_freq", Tensor::zeros({2}));
  });
  EXPECT_TRUE(same_bytes(saved, load_model_checkpoint(dir())));
}

// Writes DIR/config.json and DIR/model.safetensors whose every tensor has `dtype` and element i of
// parameter p holds pattern[(i + p) % size] (raw 16-bit words).
void write_half_checkpoint(const std::string& d, const ModelConfig& cfg, DType dtype,
                           const std::vector<uint16_t>& pattern) {
  fs::create_directories(d);
  write_json_file_atomic(d + "/config.json", model_config_to_hf_json(cfg));
  TensorList list;
  const auto layout = parameter_layout(cfg);
  for (size_t p = 0; p < layout.size(); ++p) {
    Tensor t = Tensor::empty(layout[p].shape, dtype);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<uint16_t>()[i] = pattern[(i + p) % pattern.size()];
    list.emplace_back(layout[p].name, t);
  }
  write_safetensors(d + "/model.safetensors", list, {{"format", "pt"}});
}

// Checks every loaded float bit for bit against expected[(i + p) % size].
void expect_pattern(const ParameterStore& s, const std::vector<float>& expected) {
  int64_t wrong = 0;
  for (size_t p = 0; p < s.infos().size(); ++p) {
    const float* w = s.flat().data<float>() + s.infos()[p].offset;
    for (int64_t i = 0; i < s.infos()[p].numel(); ++i)
      wrong += std::bit_cast<uint32_t>(w[i]) != std::bit_cast<uint32_t>(expected[(i + p) % expected.size()]);
  }
  EXPECT_EQ(wrong, 0);
}

TEST_F(CheckpointTest, Bf16TensorsAreConvertedExactly) {
  const std::vector<uint16_t> bits = {0x3f80, 0xc040, 0x3e80, 0x0000, 0x8000, 0x3f81, 0x7f7f, 0x0080, 0x0001};
  const std::vector<float> values = {1.0f,       -3.0f, 0.25f, 0.0f, -0.0f, 1.0078125f, 3.3895313892515355e38f,
                                     0x1p-126f, 0x1p-133f};
  write_half_checkpoint(dir(), small_untied(), DType::kBF16, bits);
  expect_pattern(load_model_checkpoint(dir()), values);
}

TEST_F(CheckpointTest, F16TensorsAreConvertedExactly) {
  // Infinities convert too, and are then refused: NonFiniteWeightsAreRefusedNamingFileAndTensor.
  const std::vector<uint16_t> bits = {0x3c00, 0xc000, 0x0001, 0x03ff, 0x0400, 0x7bff, 0x3555, 0x8000};
  const std::vector<float> values = {1.0f,     -2.0f,          0x1p-24f, 1023 * 0x1p-24f, 0x1p-14f, 65504.0f,
                                     0.333251953125f, -0.0f};
  write_half_checkpoint(dir(), small_qwen2(), DType::kF16, bits);
  expect_pattern(load_model_checkpoint(dir()), values);
}

// A diverged run's NaN, or an overflow to inf in a half-precision export, is refused at load naming the file,
// the tensor and the element, rather than evaluated (0 % accuracy, exit 0) or sampled from.
TEST_F(CheckpointTest, NonFiniteWeightsAreRefusedNamingFileAndTensor) {
  save_model_checkpoint(dir(), random_store(small_untied(), 1));
  edit_weights([](TensorList& list) {
    for (auto& [name, t] : list)
      if (name == "model.layers.1.mlp.down_proj.weight") t.data<float>()[5] = NAN;
  });
  std::string e = load_error();
  EXPECT_NE(e.find(weights() + ": tensor 'model.layers.1.mlp.down_proj.weight' holds nan at element 5"),
            std::string::npos)
      << e;

  // Every other element F16 +inf (0x7c00), or BF16 -inf (0xff80).
  for (const auto& [dtype, bits] :
       {std::pair{DType::kF16, uint16_t{0x7c00}}, std::pair{DType::kBF16, uint16_t{0xff80}}}) {
    fs::remove_all(dir());
    write_half_checkpoint(dir(), small_llama(), dtype, {0x3c00, bits});
    e = load_error();
    EXPECT_NE(e.find(weights() + ": tensor '"), std::string::npos) << e;
    EXPECT_NE(e.find(dtype == DType::kF16 ? "holds inf at element" : "holds -inf at element"), std::string::npos) << e;
  }
}

// No checkpoint of non-finite weights is written, and the one already at DIR stays as it was.
TEST_F(CheckpointTest, SaveRefusesNonFiniteWeightsAndKeepsTheOldCheckpoint) {
  const ParameterStore good = random_store(small_qwen2(), 1);
  save_model_checkpoint(dir(), good);
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    ParameterStore diverged = good.clone();
    diverged.flat().data<float>()[diverged.offset_of("model.norm.weight") + 3] = bad;
    const std::string e = error_of([&] { save_model_checkpoint(dir(), diverged, /*overwrite=*/true); });
    EXPECT_NE(e.find(dir() + ": refusing to save a checkpoint of non-finite weights: tensor 'model.norm.weight' holds"),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("at element 3"), std::string::npos) << e;
    EXPECT_TRUE(same_bytes(good, load_model_checkpoint(dir()))) << bad;
    EXPECT_EQ(entries_of_root(), std::vector<std::string>{"ckpt"}) << bad;  // no temporary, no old copy
    EXPECT_NE(error_of([&] { save_model_checkpoint(dir("fresh"), diverged); }), "<no error>") << bad;
    EXPECT_FALSE(fs::exists(dir("fresh"))) << bad;
  }
}

// A weight past fp16's range would be written as an infinity (`rlcpp export --dtype fp16`): refused, naming the
// tensor; 65504 (fp16's largest) and bf16's far wider range still save.
TEST_F(CheckpointTest, SaveInANarrowDtypeRefusesWeightsThatWouldOverflow) {
  ParameterStore big = random_store(small_qwen2(), 1);
  float* w = big.flat().data<float>() + big.offset_of("model.norm.weight");
  w[2] = 70000.0f;
  const std::string e = error_of([&] { save_model_checkpoint(dir(), big, false, {}, DType::kF16); });
  EXPECT_NE(e.find("tensor 'model.norm.weight' element 2 = 70000 overflows F16"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(dir()));
  EXPECT_TRUE(entries_of_root().empty());
  save_model_checkpoint(dir("bf16"), big, false, {}, DType::kBF16);
  w[2] = 65504.0f;
  save_model_checkpoint(dir("fp16"), big, false, {}, DType::kF16);
  EXPECT_EQ(load_model_checkpoint(dir("fp16")).get("model.norm.weight").data<float>()[2], 65504.0f);
}

TEST_F(CheckpointTest, IntegerDtypeIsRejectedNamingTheTensor) {
  save_model_checkpoint(dir(), random_store(small_llama(), 1));
  edit_weights([](TensorList& list) {
    for (auto& [name, t] : list)
      if (name == "model.norm.weight") t = Tensor::zeros({16}, DType::kI32);
  });
  std::string e = load_error();
  EXPECT_NE(e.find(weights() + ": tensor 'model.norm.weight' has dtype I32"), std::string::npos) << e;
}

TEST_F(CheckpointTest, DirectoryWithoutWeightsIsAnError) {
  fs::create_directories(dir());
  std::string e = load_error();
  EXPECT_NE(e.find(config() + ": not found"), std::string::npos) << e;
  write_json_file_atomic(config(), model_config_to_hf_json(small_llama()));
  e = load_error();
  EXPECT_NE(e.find("neither model.safetensors nor model.safetensors.index.json"), std::string::npos) << e;
}

TEST_F(CheckpointTest, CorruptWeightsFileNamesTheFile) {
  save_model_checkpoint(dir(), random_store(small_llama(), 1));
  fs::resize_file(weights(), fs::file_size(weights()) - 4);
  std::string e = load_error();
  EXPECT_NE(e.find(weights() + ": tensor '"), std::string::npos) << e;
  EXPECT_NE(e.find("past the end"), std::string::npos) << e;
}

class ShardedCheckpointTest : public CheckpointTest {
 protected:
  // Splits a saved checkpoint into two shards (tensors alternating) plus an index, as transformers writes them.
  void shard(const std::function<void(Json& weight_map)>& edit_map = {}) {
    SafetensorsFile f = read_safetensors(weights());
    const std::string names[2] = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};
    TensorList parts[2];
    Json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", Json::object()}};
    int k = 0;
    for (const auto& [name, t] : f.tensors) {
      parts[k % 2].emplace_back(name, t);
      index["weight_map"][name] = names[k % 2];
      index["metadata"]["total_size"] = index["metadata"]["total_size"].get<int64_t>() + t.nbytes();
      ++k;
    }
    for (int s = 0; s < 2; ++s) write_safetensors(dir() + "/" + names[s], parts[s], {{"format", "pt"}});
    if (edit_map) edit_map(index["weight_map"]);
    write_json_file_atomic(index_path(), index);
    fs::remove(weights());
  }
  std::string index_path() const { return dir() + "/model.safetensors.index.json"; }
};

TEST_F(ShardedCheckpointTest, LoadsShardsThroughTheIndex) {
  ParameterStore saved = random_store(small_untied(), 4);
  save_model_checkpoint(dir(), saved);
  shard();
  EXPECT_TRUE(same_bytes(saved, load_model_checkpoint(dir())));
}

TEST_F(ShardedCheckpointTest, IndexPointingAtTheWrongShardNamesIndexAndTensor) {
  save_model_checkpoint(dir(), random_store(small_llama(), 4));
  shard([](Json& map) { map["model.norm.weight"] = map["model.norm.weight"] == "model-00001-of-00002.safetensors"
                                                        ? "model-00002-of-00002.safetensors"
                                                        : "model-00001-of-00002.safetensors"; });
  std::string e = load_error();
  EXPECT_NE(e.find(index_path() + ": tensor 'model.norm.weight' is mapped to"), std::string::npos) << e;
}

TEST_F(ShardedCheckpointTest, TensorMissingFromAllShardsIsNamed) {
  save_model_checkpoint(dir(), random_store(small_llama(), 4));
  edit_weights([](TensorList& list) {
    std::erase_if(list, [](const auto& p) { return p.first == "model.layers.1.mlp.up_proj.weight"; });
  });
  shard();
  std::string e = load_error();
  EXPECT_NE(e.find(index_path() + ": missing tensor 'model.layers.1.mlp.up_proj.weight'"), std::string::npos) << e;
}

TEST_F(ShardedCheckpointTest, ShardPathOutsideTheDirectoryIsRejected) {
  save_model_checkpoint(dir(), random_store(small_llama(), 4));
  shard([](Json& map) { map["model.norm.weight"] = "../model.safetensors"; });
  std::string e = load_error();
  EXPECT_NE(e.find(index_path() + ": tensor 'model.norm.weight' maps to '../model.safetensors'"), std::string::npos)
      << e;
}

TEST_F(ShardedCheckpointTest, TensorInTwoShardsIsAnError) {
  save_model_checkpoint(dir(), random_store(small_llama(), 4));
  shard();
  const std::string second = dir() + "/model-00002-of-00002.safetensors";
  SafetensorsFile f = read_safetensors(second);
  TensorList list(f.tensors.begin(), f.tensors.end());
  list.emplace_back("model.embed_tokens.weight", Tensor::zeros({32, 16}));  // already in shard 1
  write_safetensors(second, list);
  std::string e = load_error();
  EXPECT_NE(e.find(second + ": tensor 'model.embed_tokens.weight' appears in more than one shard"),
            std::string::npos)
      << e;
}

// An independent reader: Python parses the header by hand (no safetensors package needed), checks what the
// reference Rust reader requires (8-aligned header starting with '{', tensors tiling the buffer), decodes
// tensors with numpy and prints checksums the C++ side compares.
constexpr const char* kPythonReader = R"PY(
import json, struct, sys
import numpy as np
path, names = sys.argv[1], sys.argv[2:]
with open(path, 'rb') as f:
    data = f.read()
(n,) = struct.unpack('<Q', data[:8])
assert n % 8 == 0, 'header length %d is not a multiple of 8' % n
assert data[8:9] == b'{', 'header does not start with {'
header = json.loads(data[8:8 + n].decode('utf-8'))
meta = header.pop('__metadata__', {})
buf = data[8 + n:]
pos = 0
for begin, end in sorted(tuple(e['data_offsets']) for e in header.values()):
    assert begin == pos, 'gap or overlap at byte %d' % begin
    pos = end
assert pos == len(buf), 'buffer has %d bytes, tensors cover %d' % (len(buf), pos)
print('format', meta.get('format'))
print('count', len(header))
for name in names:
    e = header[name]
    assert e['dtype'] == 'F32', e['dtype']
    b, end = e['data_offsets']
    a = np.frombuffer(buf[b:end], dtype='<f4').reshape(e['shape'])
    print(name, 'shape', ','.join(str(d) for d in a.shape))
    print(name, 'sum', repr(float(a.astype(np.float64).sum())))
    print(name, 'abssum', repr(float(np.abs(a.astype(np.float64)).sum())))
    print(name, 'first', repr(float(a.flat[0])))
    print(name, 'last', repr(float(a.flat[-1])))
)PY";

TEST_F(CheckpointTest, PythonReaderAgreesWithWrittenFile) {
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 cannot import numpy";
  const ModelConfig cfg = small_untied();
  ParameterStore saved = random_store(cfg, 11);
  save_model_checkpoint(dir(), saved);
  const std::string script = (root_ / "reader.py").string();
  std::ofstream(script) << kPythonReader;
  const std::vector<std::string> names = {"model.layers.1.self_attn.k_proj.weight", "lm_head.weight",
                                          "model.layers.0.self_attn.o_proj.bias"};
  std::string cmd = "/usr/bin/python3 " + script + " " + weights();
  for (const auto& n : names) cmd += " " + n;
  FILE* pipe = ::popen((cmd + " 2>&1").c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  while (size_t got = std::fread(buf, 1, sizeof(buf), pipe)) out.append(buf, got);
  ASSERT_EQ(::pclose(pipe), 0) << out;

  std::map<std::string, std::string> kv;  // "<name> <key>" -> value
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    auto sp = line.rfind(' ');
    kv[line.substr(0, sp)] = line.substr(sp + 1);
  }
  EXPECT_EQ(kv["format"], "pt") << out;
  EXPECT_EQ(kv["count"], std::to_string(parameter_layout(cfg).size())) << out;
  for (const auto& name : names) {
    Tensor t = saved.get(name);
    std::string shape;
    for (int64_t d : t.shape()) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    EXPECT_EQ(kv[name + " shape"], shape) << out;
    double sum = 0, abssum = 0;
    for (int64_t i = 0; i < t.numel(); ++i) sum += t.data<float>()[i], abssum += std::fabs(t.data<float>()[i]);
    ASSERT_TRUE(kv.count(name + " sum")) << out;
    // numpy sums pairwise, we sum in order: both are within a few ulps of abssum.
    EXPECT_NEAR(std::stod(kv[name + " sum"]), sum, 1e-12 * abssum) << name;
    EXPECT_NEAR(std::stod(kv[name + " abssum"]), abssum, 1e-12 * abssum) << name;
    EXPECT_EQ(static_cast<float>(std::stod(kv[name + " first"])), t.data<float>()[0]) << name;
    EXPECT_EQ(static_cast<float>(std::stod(kv[name + " last"])), t.data<float>()[t.numel() - 1]) << name;
  }
}

}  // namespace
}  // namespace rlcpp
