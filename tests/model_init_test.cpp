#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "model/init.h"

namespace rlcpp {
namespace {

ModelConfig qwen2_tiny() {
  ModelConfig c = model_preset("tiny");
  c.model_type = "qwen2";
  c.tie_word_embeddings = false;
  return c;
}

TEST(InitRandom, NormsAreOnesAndBiasesZeros) {
  ParameterStore s = init_random(qwen2_tiny(), 1);
  int checked = 0;
  for (const auto& info : s.infos()) {
    if (info.shape.size() != 1) continue;
    const float want = info.name.ends_with(".bias") ? 0.0f : 1.0f;
    Tensor t = s.get(info.name);
    for (int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(t.data<float>()[i], want) << info.name << "[" << i << "]";
    ++checked;
  }
  EXPECT_EQ(checked, 4 * (2 + 3) + 1);  // per layer: 2 norms, 3 biases; plus the final norm
}

TEST(InitRandom, Qwen3QkNormsAreOnesAndItsBiasesZeros) {
  ModelConfig c = model_preset("tiny");
  c.model_type = "qwen3";
  c.attention_bias = true;
  c.explicit_head_dim = 16;
  ParameterStore s = init_random(c, 1);
  int norms = 0, biases = 0;
  for (const auto& info : s.infos()) {
    if (info.shape.size() != 1) continue;
    const bool bias = info.name.ends_with(".bias");
    if (info.name.ends_with("q_norm.weight") || info.name.ends_with("k_norm.weight")) {
      EXPECT_EQ(info.shape, Shape{16}) << info.name;
      ++norms;
    }
    biases += bias;
    Tensor t = s.get(info.name);
    for (int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(t.data<float>()[i], bias ? 0.0f : 1.0f) << info.name;
  }
  EXPECT_EQ(norms, 2 * 4);   // q_norm and k_norm in each of 4 layers
  EXPECT_EQ(biases, 4 * 4);  // q, k, v and o bias (attention_bias) in each layer
}

TEST(InitRandom, MatricesAreNormalWithStd002) {
  ParameterStore s = init_random(qwen2_tiny(), 1);
  for (const auto& info : s.infos()) {
    if (info.shape.size() != 2) continue;
    Tensor t = s.get(info.name);
    const int64_t n = t.numel();
    double sum = 0, sq = 0;
    int64_t beyond_3sd = 0;
    for (int64_t i = 0; i < n; ++i) {
      double x = t.data<float>()[i];
      ASSERT_TRUE(std::isfinite(x)) << info.name;
      sum += x, sq += x * x;
      beyond_3sd += std::fabs(x) > 0.06;
    }
    const double mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
    // Sampling error of the mean is 0.02/sqrt(n), of the std 0.02/sqrt(2n); n >= 4096 here.
    EXPECT_NEAR(mean, 0.0, 5 * 0.02 / std::sqrt(double(n))) << info.name;
    EXPECT_NEAR(sd, 0.02, 5 * 0.02 / std::sqrt(2.0 * n) + 1e-4) << info.name;
    // A normal puts 0.27% beyond 3 sd; a uniform of the same std puts none there.
    EXPECT_GT(beyond_3sd, 0) << info.name;
    EXPECT_LT(beyond_3sd, 0.006 * n + 10) << info.name;
  }
}

TEST(InitRandom, PadRowOfTheEmbeddingIsZero) {
  ModelConfig cfg = qwen2_tiny();
  cfg.pad_token_id = 5;
  ParameterStore s = init_random(cfg, 1);
  Tensor e = s.get("model.embed_tokens.weight");
  const int64_t C = cfg.hidden_size;
  for (int64_t r = 0; r < cfg.vocab_size; ++r) {
    int64_t zeros = 0;
    for (int64_t k = 0; k < C; ++k) zeros += e.data<float>()[r * C + k] == 0.0f;
    EXPECT_EQ(zeros, r == 5 ? C : 0) << "row " << r;
  }
}

TEST(InitRandom, SameSeedSameWeightsOtherSeedOthers) {
  ParameterStore a = init_random(qwen2_tiny(), 42), b = init_random(qwen2_tiny(), 42), c = init_random(qwen2_tiny(), 43);
  const size_t bytes = static_cast<size_t>(a.numel()) * sizeof(float);
  EXPECT_EQ(std::memcmp(a.flat().raw(), b.flat().raw(), bytes), 0);
  EXPECT_NE(std::memcmp(a.flat().raw(), c.flat().raw(), bytes), 0);
}

TEST(InitRandom, ParameterDependsOnlyOnSeedAndLayoutIndex) {
  // Adding layers appends parameters after layer 0's, so layer 0 and the embedding draw the same numbers.
  ModelConfig two = qwen2_tiny(), three = qwen2_tiny();
  two.num_hidden_layers = 2;
  three.num_hidden_layers = 3;
  ParameterStore a = init_random(two, 9), b = init_random(three, 9);
  for (const char* name : {"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
                           "model.layers.1.mlp.down_proj.weight"}) {
    Tensor x = a.get(name), y = b.get(name);
    EXPECT_EQ(std::memcmp(x.raw(), y.raw(), x.nbytes()), 0) << name;
  }
  // Different parameters of the same shape draw different numbers.
  Tensor g = a.get("model.layers.0.mlp.gate_proj.weight"), u = a.get("model.layers.0.mlp.up_proj.weight");
  EXPECT_NE(std::memcmp(g.raw(), u.raw(), g.nbytes()), 0);
}

}  // namespace
}  // namespace rlcpp
