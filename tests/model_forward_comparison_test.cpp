// compare_forward (the mismatch lab's "where it enters" and full-vocabulary view): identical computations give
// exactly 0 everywhere; one layer's weights perturbed on one side only is found as the first diverging stage;
// a bf16 model against fp32 diverges from the embedding on; the full-vocabulary KL and TV equal numpy's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/config.h"
#include "core/philox.h"
#include "model/forward_comparison.h"
#include "model/init.h"
#include "tests/host_context.h"
#include "tests/test_models.h"

namespace rlcpp {
namespace {

using testing::host;

namespace fs = std::filesystem;

PackedBatch test_batch(const ModelConfig& c) {
  PhiloxStream rng(5, 0);
  std::vector<std::vector<int32_t>> seqs;
  for (int64_t len : {7, 12, 3}) {
    std::vector<int32_t> s(static_cast<size_t>(len));
    for (auto& t : s) t = static_cast<int32_t>(rng.below(c.vocab_size));
    seqs.push_back(s);
  }
  return PackedBatch::from_sequences(seqs, {2, 4, 0});
}

ParameterStore wide_params(const ModelConfig& c) {
  ParameterStore p = init_random(c, 4);
  for (int64_t i = 0; i < p.numel(); ++i) p.flat().data<float>()[i] *= 3.0f;
  return p;
}

TEST(ForwardComparison, IdenticalComputationsGiveExactlyZero) {
  const ModelConfig c = small_test_config("qwen2");
  const ParameterStore p = wide_params(c);
  const Transformer m(c);
  const ForwardComparison r = compare_forward(host(), m, p, m, p, test_batch(c), 1.0f, 0.0);
  ASSERT_EQ(r.max_abs.size(), static_cast<size_t>(c.num_hidden_layers + 3));
  for (double d : r.max_abs) EXPECT_EQ(d, 0.0);
  EXPECT_EQ(r.first_stage, -1);
  EXPECT_EQ(r.full_kl_max, 0.0);
  EXPECT_EQ(r.full_tv_max, 0.0);
  EXPECT_EQ(r.positions, 4 + 7 + 2);  // positions score_from .. len - 2 of each sequence (the last has no target)
}

TEST(ForwardComparison, LocatesTheLayerWhoseWeightsDifferOnOneSide) {
  ModelConfig c = small_test_config("llama");
  c.num_hidden_layers = 4;
  const ParameterStore p = wide_params(c);
  const Transformer m(c);
  for (int64_t layer : {0, 2, 3}) {
    ParameterStore engine = p.clone();
    Tensor w = engine.get("model.layers." + std::to_string(layer) + ".mlp.down_proj.weight");
    for (int64_t i = 0; i < w.numel(); i += 3) w.data<float>()[i] *= 1.01f;
    const ForwardComparison r = compare_forward(host(), m, engine, m, p, test_batch(c), 1.0f, 1e-6);
    for (int64_t s = 0; s <= layer; ++s) EXPECT_EQ(r.max_abs[static_cast<size_t>(s)], 0.0) << "stage " << s;
    EXPECT_GT(r.max_abs[static_cast<size_t>(layer + 1)], 1e-6);
    EXPECT_EQ(r.first_stage, layer + 1) << "perturbed layer " << layer;
    EXPECT_EQ(stage_name(r.first_stage, c.num_hidden_layers), "layer_" + std::to_string(layer));
    EXPECT_GT(r.full_kl_mean, 0.0);
  }
}

TEST(ForwardComparison, Bf16AgainstFp32DivergesFromTheEmbedding) {
  const ModelConfig c = small_test_config("qwen2");
  const ParameterStore p = wide_params(c);
  ModelNumerics bf16;
  bf16.compute = DType::kBF16;
  bf16.linear_weights = DType::kBF16;
  const ForwardComparison r =
      compare_forward(host(), Transformer(c, bf16), p, Transformer(c), p, test_batch(c), 1.0f, 0.0);
  EXPECT_EQ(r.first_stage, 0);
  EXPECT_GT(r.full_tv_mean, 0.0);
  EXPECT_LT(r.full_tv_mean, 0.05);  // bf16 rounding moves a few per cent of the mass at most at this size
  const auto m = r.metrics("probe_trainer/");
  EXPECT_TRUE(m.count("probe_trainer/stage/layer_1/max_abs") && m.count("probe_trainer/stage/logits/max_abs"));
}

TEST(ForwardComparison, FullVocabularyFiguresEqualNumpy) {
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 has no numpy (apt-get install python3-numpy)";
  const ModelConfig c = small_test_config("qwen2");
  const ParameterStore p = wide_params(c);
  ParameterStore q = p.clone();
  for (int64_t i = 0; i < q.numel(); i += 5) q.flat().data<float>()[i] *= 0.9f;
  const Transformer m(c);
  const PackedBatch batch = test_batch(c);
  const float temperature = 0.7f;
  const ForwardComparison r = compare_forward(host(), m, p, m, q, batch, temperature, 0.0);
  Activations a, b;
  m.forward(host(), p, batch, ForwardOptions{temperature}, a);
  m.forward(host(), q, batch, ForwardOptions{temperature}, b);
  Json in = {{"temperature", temperature}, {"rows", Json::array()}, {"a", Json::array()}, {"b", Json::array()}};
  const int64_t V = c.vocab_size;
  for (int64_t i = 0; i < batch.num_tokens(); ++i) {
    if (batch.targets[static_cast<size_t>(i)] >= 0) in["rows"].push_back(i);
    in["a"].push_back(std::vector<float>(a.logits.data<float>() + i * V, a.logits.data<float>() + (i + 1) * V));
    in["b"].push_back(std::vector<float>(b.logits.data<float>() + i * V, b.logits.data<float>() + (i + 1) * V));
  }
  const fs::path file = fs::temp_directory_path() / "rlcpp_full_vocab_kl.json";
  std::ofstream(file) << in.dump();
  const std::string cmd = std::string("/usr/bin/python3 ") + RLCPP_SOURCE_DIR + "/tests/golden/full_vocab_kl.py " +
                          file.string();
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  while (fgets(buf, sizeof buf, pipe)) out += buf;
  ASSERT_EQ(pclose(pipe), 0) << out;
  const Json want = Json::parse(out);
  EXPECT_GT(want["kl_mean"].get<double>(), 1e-4);  // the perturbation moves the distributions measurably
  EXPECT_NEAR(r.full_kl_mean, want["kl_mean"].get<double>(), 1e-9 + 1e-7 * want["kl_mean"].get<double>());
  EXPECT_NEAR(r.full_kl_max, want["kl_max"].get<double>(), 1e-9 + 1e-7 * want["kl_max"].get<double>());
  EXPECT_NEAR(r.full_tv_mean, want["tv_mean"].get<double>(), 1e-9 + 1e-7 * want["tv_mean"].get<double>());
  EXPECT_NEAR(r.full_tv_max, want["tv_max"].get<double>(), 1e-9 + 1e-7 * want["tv_max"].get<double>());
}

}  // namespace
}  // namespace rlcpp
