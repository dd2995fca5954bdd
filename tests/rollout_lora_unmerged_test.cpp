// LoRA adapters run unmerged (model/lora_unmerged.h, Engine::set_adapters): the engine's decode beside the base
// equals the training forward beside it bit for bit, in any batch, and the merged model's within fp32 rounding;
// new adapters are a new version. (Against PyTorch: tests/trainer_lora_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>

#include "core/philox.h"
#include "model/init.h"
#include "model/lora.h"
#include "model/lora_unmerged.h"
#include "rollout/engine.h"
#include "tests/host_context.h"
#include "tests/lora_test_support.h"
#include "tests/test_models.h"

namespace rlcpp {
namespace {

using testing::host;

// Adapters on every Linear layer, A as PEFT draws it and B random of size `b_scale`.
LoraAdapters random_adapters(const ModelConfig& cfg, float b_scale, uint64_t seed) {
  return random_lora_adapters(cfg, small_lora_config(), seed, b_scale);
}

Request sampling_request(const ModelConfig& cfg, int64_t prompts) {
  Request req;
  for (int64_t p = 0; p < prompts; ++p) req.prompts.push_back(random_test_tokens(5 + 3 * p, cfg.vocab_size, 20 + p));
  req.n = 3;
  req.sampling.max_new_tokens = 9;
  req.sampling.ignore_eos = true;
  req.sampling.seed = 7;
  return req;
}

EngineConfig small_engine() {
  EngineConfig c;
  c.block_size = 4;
  c.max_num_batched_tokens = 1024;
  return c;
}

class UnmergedLoraByFamily : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(Families, UnmergedLoraByFamily, ::testing::ValuesIn(kTestFamilies),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// The decode's log-probs, twelve sequences batched, are the training forward's over the same base and adapters of
// each sequence alone, bit for bit (batch-invariant); and the merged model's within fp32 rounding.
TEST_P(UnmergedLoraByFamily, TheEngineDecodesWhatTheTrainingForwardBesideTheBaseComputes) {
  const ModelConfig cfg = small_test_config(GetParam());
  const ParameterStore base = init_random(cfg, 3);
  const LoraAdapters adapters = random_adapters(cfg, 0.05f, 5);
  auto beside = std::make_shared<const UnmergedLora>(adapters);
  const Transformer model(cfg);
  ParameterStore merged = base.clone();
  adapters.merge(host(), base, merged);

  Engine engine(model, base, small_engine());
  engine.set_adapters(beside, 1);
  const Request all = sampling_request(cfg, 4);
  const RolloutResult out = engine.generate(all);
  ASSERT_EQ(out.samples.size(), 12u);
  EXPECT_EQ(out.samples[0].policy_version, 1);
  double max_vs_merged = 0;
  for (const Sample& s : out.samples) {
    std::vector<int32_t> full = all.prompts[static_cast<size_t>(s.prompt_index)];
    const int64_t len = static_cast<int64_t>(full.size());
    full.insert(full.end(), s.tokens.begin(), s.tokens.end());
    ForwardOptions options;
    options.adapters = beside.get();
    Activations acts, merged_acts;
    model.forward(host(), base, PackedBatch::from_sequences({full}), options, acts);
    model.forward(host(), merged, PackedBatch::from_sequences({full}), ForwardOptions{}, merged_acts);
    for (size_t t = 0; t < s.tokens.size(); ++t) {
      const float want = acts.logp.data<float>()[len + static_cast<int64_t>(t) - 1];
      EXPECT_EQ(std::memcmp(&s.logprobs[t], &want, sizeof(float)), 0)
          << "prompt " << s.prompt_index << " sample " << s.sample_index << " token " << t << ": engine "
          << s.logprobs[t] << ", forward " << want;
      max_vs_merged = std::max(
          max_vs_merged, std::fabs(static_cast<double>(want - merged_acts.logp.data<float>()[len + t - 1])));
    }
  }
  EXPECT_LT(max_vs_merged, 1e-4);
  EXPECT_GT(max_vs_merged, 0.0) << "merged and unmerged sum in other orders: some rounding differs";

}

// A base held in bf16 (trainer.lora.base_dtype): the engine decodes it beside the adapters as it decodes the fp32
// base of the same values — the same samples and log-probs, in fp32 and bf16 numerics.
TEST_P(UnmergedLoraByFamily, AnEngineOverABf16HeldBaseSamplesAsOverItsWidenedValues) {
  const ModelConfig cfg = small_test_config(GetParam());
  const ParameterStore held = init_random(cfg, 3).converted(host(), DType::kBF16);
  const ParameterStore widened = held.converted(host(), DType::kF32);
  auto beside = std::make_shared<const UnmergedLora>(random_adapters(cfg, 0.05f, 5));
  const Request req = sampling_request(cfg, 3);
  for (const DType compute : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(compute));
    const Transformer model(cfg, test_numerics(compute, /*batch_invariant=*/true));
    Engine over_held(model, held, small_engine()), over_widened(model, widened, small_engine());
    over_held.set_adapters(beside, 1);
    over_widened.set_adapters(beside, 1);
    const RolloutResult a = over_held.generate(req), b = over_widened.generate(req);
    ASSERT_EQ(a.samples.size(), b.samples.size());
    for (size_t i = 0; i < a.samples.size(); ++i) {
      EXPECT_EQ(a.samples[i].tokens, b.samples[i].tokens);
      EXPECT_EQ(a.samples[i].logprobs, b.samples[i].logprobs);
    }
  }
}

// New adapters are a new version: nothing computed under the old ones is found again, and the engine samples what
// a fresh engine with the new adapters samples; null adapters give the base's samples.
TEST(UnmergedLora, NewAdaptersAreANewVersionAndNullOnesTheBase) {
  const ModelConfig cfg = small_test_config("qwen2");
  const ParameterStore base = init_random(cfg, 3);
  const Transformer model(cfg);
  const Request req = sampling_request(cfg, 2);
  Engine engine(model, base, small_engine());
  engine.set_adapters(std::make_shared<const UnmergedLora>(random_adapters(cfg, 0.05f, 5)), 1);
  engine.generate(req);
  auto next = std::make_shared<const UnmergedLora>(random_adapters(cfg, 0.05f, 6));
  engine.set_adapters(next, 2);
  const RolloutResult after = engine.generate(req);
  Engine fresh(model, base, small_engine());
  fresh.set_adapters(next, 2);
  const RolloutResult want = fresh.generate(req);
  ASSERT_EQ(after.samples.size(), want.samples.size());
  for (size_t i = 0; i < want.samples.size(); ++i) {
    EXPECT_EQ(after.samples[i].tokens, want.samples[i].tokens);
    EXPECT_EQ(after.samples[i].logprobs, want.samples[i].logprobs);
    EXPECT_EQ(after.samples[i].policy_version, 2);
  }
  EXPECT_EQ(after.stats.prefix_cache_hit_tokens, 0);
  engine.set_adapters(nullptr, 3);
  Engine plain(model, base, small_engine());
  const RolloutResult b = engine.generate(req), p = plain.generate(req);
  for (size_t i = 0; i < p.samples.size(); ++i) EXPECT_EQ(b.samples[i].logprobs, p.samples[i].logprobs);
}

}  // namespace
}  // namespace rlcpp
