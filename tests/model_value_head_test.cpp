// The critic's value head: Hugging Face *ForTokenClassification config and layout, values from the final norm,
// backward_values against finite differences, checkpoint round trip, and critic_from_policy.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "core/error.h"
#include "core/philox.h"
#include "model/checkpoint.h"
#include "model/critic.h"
#include "model/init.h"
#include "model/safetensors.h"
#include "model/transformer.h"
#include "tests/error_test_support.h"
#include "tests/host_context.h"

namespace rlcpp {
namespace {

using testing::host;

namespace fs = std::filesystem;

ModelConfig small_config() {
  ModelConfig c;
  c.vocab_size = 32;
  c.hidden_size = 32;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.intermediate_size = 48;
  c.max_position_embeddings = 32;
  return c;
}

PackedBatch random_batch(uint64_t seed, int64_t vocab) {
  PhiloxStream rng(seed, 0);
  std::vector<std::vector<int32_t>> seqs;
  for (int64_t len : {5, 1, 9, 4}) {
    std::vector<int32_t> s;
    for (int64_t t = 0; t < len; ++t) s.push_back(static_cast<int32_t>(rng.below(vocab)));
    seqs.push_back(s);
  }
  return PackedBatch::from_sequences(seqs);
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

TEST(ValueHeadConfig, HuggingFaceTokenClassificationRoundTrip) {
  for (const auto& [type, arch] :
       {std::pair{"llama", "LlamaForTokenClassification"}, {"qwen2", "Qwen2ForTokenClassification"},
        {"qwen3", "Qwen3ForTokenClassification"}}) {
    ModelConfig c = small_config();
    c.model_type = type;
    c.value_head = true;
    const Json j = model_config_to_hf_json(c);
    EXPECT_EQ(j["architectures"][0], std::string(arch));
    EXPECT_EQ(j["num_labels"], 1);
    EXPECT_EQ(j["id2label"].size(), 1u);
    EXPECT_TRUE(model_config_from_hf_json(j, "config.json").value_head);
    c.value_head = false;
    EXPECT_FALSE(model_config_from_hf_json(model_config_to_hf_json(c), "config.json").value_head);
  }
}

TEST(ValueHeadConfig, OtherLabelCountsAndSequenceClassificationAreRejected) {
  ModelConfig c = small_config();
  c.value_head = true;
  Json j = model_config_to_hf_json(c);
  j.erase("num_labels");
  j.erase("id2label");
  j.erase("label2id");  // Hugging Face then defaults to 2 labels
  EXPECT_NE(error_of([&] { model_config_from_hf_json(j, "critic/config.json"); }).find("num_labels 2"),
            std::string::npos);
  j["id2label"] = {{"0", "A"}, {"1", "B"}, {"2", "C"}};
  EXPECT_NE(error_of([&] { model_config_from_hf_json(j, "critic/config.json"); }).find("num_labels 3"),
            std::string::npos);
  j = model_config_to_hf_json(small_config());
  j["architectures"] = {"LlamaForSequenceClassification"};
  const std::string e = error_of([&] { model_config_from_hf_json(j, "rm/config.json"); });
  EXPECT_NE(e.find("rm/config.json"), std::string::npos) << e;
  EXPECT_NE(e.find("LlamaForSequenceClassification"), std::string::npos) << e;
}

TEST(ValueHeadLayout, ScoreReplacesLmHead) {
  ModelConfig c = small_config();
  c.tie_word_embeddings = false;
  c.value_head = true;
  const ParameterStore s(c);
  EXPECT_FALSE(s.has("lm_head.weight"));
  EXPECT_EQ(s.get("score.weight").shape(), (Shape{1, c.hidden_size}));
  EXPECT_EQ(s.get("score.bias").shape(), (Shape{1}));
  EXPECT_EQ(s.infos().back().name, "score.bias");
  EXPECT_EQ(s.numel(), c.num_parameters());
}

TEST(ValueHead, ValuesAreTheScoreOfTheFinalNormAndTheBodyIsThePolicys) {
  const ModelConfig mc = small_config();
  const ParameterStore policy = init_random(mc, 3);
  ParameterStore critic = critic_from_policy(policy, 4);
  critic.get("score.bias").data<float>()[0] = 0.25f;
  const Transformer pm(mc), cm(critic.config());
  const PackedBatch batch = random_batch(5, mc.vocab_size);
  Activations pa, ca;
  pm.forward(host(), policy, batch, ForwardOptions{}, pa);
  cm.forward(host(), critic, batch, ForwardOptions{}, ca);
  ASSERT_TRUE(same_bytes(pa.xn_final, ca.xn_final)) << "the critic's body must compute what the policy's does";
  ASSERT_EQ(ca.values.shape(), (Shape{batch.num_tokens()}));
  const float* w = critic.get("score.weight").data<float>();
  for (int64_t i = 0; i < batch.num_tokens(); ++i) {
    double v = 0.25;
    const float* xn = ca.xn_final.data<float>() + i * mc.hidden_size;
    for (int64_t k = 0; k < mc.hidden_size; ++k) v += static_cast<double>(xn[k]) * w[k];
    EXPECT_NEAR(ca.values.data<float>()[i], v, 1e-5) << "position " << i;
  }
}

TEST(ValueHead, PolicyOnlyEntryPointsRefuseACritic) {
  const ParameterStore critic = critic_from_policy(init_random(small_config(), 1), 2);
  const Transformer cm(critic.config());
  ForwardOptions with_entropy;
  with_entropy.entropy = true;
  Activations acts;
  EXPECT_NE(error_of([&] { cm.forward(host(), critic, random_batch(1, 32), with_entropy, acts); }).find("value-head"),
            std::string::npos);
  cm.forward(host(), critic, random_batch(1, 32), ForwardOptions{}, acts);
  ParameterStore grads(critic.config());
  std::vector<float> d(acts.num_tokens, 1.0f);
  EXPECT_NE(error_of([&] { cm.backward(host(), critic, acts, d.data(), nullptr, grads); }).find("backward_values"),
            std::string::npos);
  KVCache cache;
  EXPECT_NE(error_of([&] { cm.forward_cached(ExecContext::cpu(), critic, CachedStep{}, cache); }).find("value-head"),
            std::string::npos);
}

// L = sum_i c_i v_i: backward_values with dvalue = c against central differences of L, along random directions
// over all parameters and along each value-head parameter alone.
TEST(ValueHead, BackwardValuesMatchesFiniteDifferences) {
  ParameterStore critic = critic_from_policy(init_random(small_config(), 7), 8);
  PhiloxStream rng(9, 0);
  const Transformer cm(critic.config());
  const PackedBatch batch = random_batch(10, 32);
  const int64_t N = batch.num_tokens();
  std::vector<float> c(N);
  for (auto& x : c) x = rng.normal();
  Activations acts;
  auto loss = [&](const ParameterStore& p) {
    cm.forward(host(), p, batch, ForwardOptions{}, acts);
    double l = 0;
    for (int64_t i = 0; i < N; ++i) l += c[i] * static_cast<double>(acts.values.data<float>()[i]);
    return l;
  };
  loss(critic);
  ParameterStore grads(critic.config());
  cm.backward_values(host(), critic, acts, c.data(), grads);

  auto directional = [&](const std::vector<float>& dir, double eps) {
    ParameterStore plus(critic.config()), minus(critic.config());
    for (int64_t i = 0; i < critic.numel(); ++i) {
      plus.flat().data<float>()[i] = critic.flat().data<float>()[i] + static_cast<float>(eps) * dir[i];
      minus.flat().data<float>()[i] = critic.flat().data<float>()[i] - static_cast<float>(eps) * dir[i];
    }
    return (loss(plus) - loss(minus)) / (2 * eps);
  };
  for (int trial = 0; trial < 3; ++trial) {
    std::vector<float> dir(critic.numel());
    double analytic = 0;
    for (int64_t i = 0; i < critic.numel(); ++i) {
      dir[i] = rng.normal();
      analytic += static_cast<double>(dir[i]) * grads.flat().data<float>()[i];
    }
    // The loss is far from linear along a unit-normal direction (weights are ~0.02), so the step is small;
    // measured truncation + fp32 noise at 2e-5: below 2e-4 relative.
    const double fd = directional(dir, 2e-5);
    EXPECT_NEAR(fd, analytic, 1e-3 * std::max(1.0, std::abs(analytic))) << "random direction " << trial;
  }
  for (const char* name : {"score.weight", "score.bias"}) {
    const ParameterInfo* info = nullptr;
    for (const auto& i : critic.infos())
      if (i.name == name) info = &i;
    ASSERT_NE(info, nullptr);
    for (int64_t k = 0; k < std::min<int64_t>(info->numel(), 6); ++k) {
      std::vector<float> dir(critic.numel(), 0.0f);
      dir[info->offset + k] = 1.0f;
      const double analytic = grads.flat().data<float>()[info->offset + k];
      // values are linear in the head's parameters: a large step is exact up to fp32 noise.
      EXPECT_NEAR(directional(dir, 1e-2), analytic, 2e-3 * std::max(1.0, std::abs(analytic)))
          << name << "[" << k << "]";
    }
  }
}

TEST(ValueHead, CheckpointRoundTripIsBitExact) {
  std::string t = (fs::temp_directory_path() / "rlcpp_critic_XXXXXX").string();
  ASSERT_NE(::mkdtemp(t.data()), nullptr);
  ModelConfig mc = small_config();
  mc.tie_word_embeddings = false;  // an untied policy: its lm_head must not reach the critic
  const ParameterStore critic = critic_from_policy(init_random(mc, 11), 12);
  const std::string dir = t + "/critic";
  save_model_checkpoint(dir, critic);
  const Json j = load_json_file(dir + "/config.json");
  EXPECT_EQ(j["architectures"][0], "LlamaForTokenClassification");
  EXPECT_EQ(j["num_labels"], 1);
  const ParameterStore back = load_model_checkpoint(dir);
  EXPECT_TRUE(back.config().value_head);
  EXPECT_TRUE(back.has("score.bias"));
  EXPECT_TRUE(same_bytes(back.flat(), critic.flat()));

  // The same weights under a causal-LM config.json: the score tensors are named as unexpected.
  Json lm = j;
  lm["architectures"] = {"LlamaForCausalLM"};
  write_json_file_atomic(dir + "/config.json", lm);
  const std::string e = error_of([&] { load_model_checkpoint(dir); });
  EXPECT_NE(e.find("score."), std::string::npos) << e;
  fs::remove_all(t);
}

TEST(CriticFromPolicy, CopiesTheBodyAndStartsASmallHead) {
  ModelConfig mc = small_config();
  mc.hidden_size = 64;
  mc.tie_word_embeddings = false;
  const ParameterStore policy = init_random(mc, 13);
  const ParameterStore critic = critic_from_policy(policy, 14);
  EXPECT_TRUE(critic.config().value_head);
  for (const auto& info : critic.infos()) {
    if (info.name.starts_with("score.")) continue;
    EXPECT_TRUE(same_bytes(critic.get(info.name), policy.get(info.name))) << info.name;
  }
  EXPECT_EQ(critic.get("score.bias").data<float>()[0], 0.0f);
  const Tensor w = critic.get("score.weight");
  double sq = 0;
  for (int64_t k = 0; k < w.numel(); ++k) sq += static_cast<double>(w.data<float>()[k]) * w.data<float>()[k];
  const double rms = std::sqrt(sq / w.numel());
  EXPECT_GT(rms, 0.01);
  EXPECT_LT(rms, 0.04);
  EXPECT_TRUE(same_bytes(critic_from_policy(policy, 14).flat(), critic.flat())) << "seeded";
  EXPECT_FALSE(same_bytes(critic_from_policy(policy, 15).get("score.weight"), w));
  EXPECT_NE(error_of([&] { critic_from_policy(critic, 1); }).find("already a critic"), std::string::npos);
}

// max |a - b| / max |b|.
double rel_error(const float* a, const float* b, int64_t n) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

// tests/golden/torch_value_head.py runs Hugging Face's *ForTokenClassification head (score Linear with bias on
// the final-norm output) over llama_model.py's body: values and every gradient of sum_t c_t v_t must match.
TEST(ValueHeadGolden, ValuesAndGradientsMatchPyTorch) {
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 has no torch (apt-get install python3-torch)";
  for (const char* type : {"llama", "qwen2", "qwen3"}) {
    ModelConfig mc = small_config();
    mc.model_type = type;
    if (mc.model_type == "qwen3") mc.explicit_head_dim = 12;  // q_norm / k_norm over head_dim != 32 / 4
    ParameterStore critic = critic_from_policy(init_random(mc, 21), 22);
    PhiloxStream rng(23, 0);
    for (const auto& info : critic.infos()) {  // norms and biases off their trivial values
      const bool norm = info.name.find("norm") != std::string::npos, bias = info.name.ends_with(".bias");
      if (!norm && !bias) continue;
      Tensor t = critic.get(info.name);
      for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = (norm ? 1.0f : 0.0f) + 0.2f * rng.normal();
    }
    const PackedBatch batch = random_batch(24, mc.vocab_size);
    std::vector<float> c(batch.num_tokens());
    for (auto& x : c) x = rng.normal();

    const fs::path dir = fs::temp_directory_path() / (std::string("rlcpp_value_golden_") + type);
    fs::remove_all(dir);
    save_model_checkpoint((dir / "critic").string(), critic);
    Json j;
    j["sequences"] = Json::array();
    j["dvalue"] = Json::array();
    for (int64_t s = 0; s < batch.num_sequences(); ++s) {
      const int32_t b = batch.cu_seqlens[s], e = batch.cu_seqlens[s + 1];
      j["sequences"].push_back(std::vector<int32_t>(batch.tokens.begin() + b, batch.tokens.begin() + e));
      j["dvalue"].push_back(std::vector<float>(c.begin() + b, c.begin() + e));
    }
    std::ofstream(dir / "batch.json") << j.dump();
    const std::string cmd = std::string("/usr/bin/python3 ") + RLCPP_SOURCE_DIR +
                            "/tests/golden/torch_value_head.py --model " + (dir / "critic").string() + " --batch " +
                            (dir / "batch.json").string() + " --out " + (dir / "golden.safetensors").string();
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    const auto golden = read_safetensors((dir / "golden.safetensors").string()).tensors;

    const Transformer model(critic.config());
    Activations acts;
    model.forward(host(), critic, batch, ForwardOptions{}, acts);
    ASSERT_EQ(golden.at("values").numel(), acts.values.numel());
    EXPECT_LE(rel_error(acts.values.data<float>(), golden.at("values").data<float>(), acts.values.numel()), 1e-4)
        << type;
    ParameterStore grads(critic.config());
    model.backward_values(host(), critic, acts, c.data(), grads);
    for (const auto& info : critic.infos()) {
      const Tensor& expected = golden.at("grad." + info.name);
      ASSERT_EQ(expected.numel(), info.numel()) << info.name;
      EXPECT_LE(rel_error(grads.get(info.name).data<float>(), expected.data<float>(), info.numel()), 1e-3)
          << type << " gradient of " << info.name;
    }
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace rlcpp
