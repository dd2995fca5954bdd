// LoRA (model/lora.h) trained by the PolicyUpdater: the merged forward, every adapter gradient over two
// micro-batches and three AdamW steps against PyTorch running the adapters unmerged (tests/golden/torch_llama.py
// --lora), and rlcpp's own unmerged forward and backward (model/lora_unmerged.h) against the same; Hugging Face's peft opening rlcpp's adapter directory (and rlcpp opening peft's) with the same logits;
// the merge's definition; bad adapter directories.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/config.h"
#include "core/error.h"
#include "core/philox.h"
#include "model/checkpoint.h"
#include "model/init.h"
#include "model/lora.h"
#include "model/lora_unmerged.h"
#include "model/safetensors.h"
#include "model/transformer.h"
#include "tests/error_test_support.h"
#include "tests/host_context.h"
#include "tests/lora_test_support.h"
#include "tests/python_env.h"
#include "tests/test_models.h"
#include "tests/trainer_test_support.h"
#include "trainer/update_step.h"

namespace rlcpp {
namespace {

using testing::host;
using test::max_rel_diff;
namespace fs = std::filesystem;

bool torch_available() {
  static const int ok = std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1");
  return ok == 0;
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("rlcpp_lora_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

struct Case {
  std::string family;
  std::vector<std::string> targets;
};

class LoraGolden : public ::testing::TestWithParam<Case> {};

// Four sequences in two micro-batches; sequence 1 is scored from position 3 on (a prompt).
const std::vector<std::vector<int32_t>> kSequences = {
    random_test_tokens(6, 23, 1), random_test_tokens(11, 23, 2), random_test_tokens(8, 23, 3),
    random_test_tokens(3, 23, 4)};
const std::vector<int32_t> kScoreFrom = {0, 3, 0, 0};

// DIR/batch.json for tests/golden/torch_llama.py: kSequences, each scored from kScoreFrom on. Returns the number
// of scored tokens.
int64_t write_golden_batch(const fs::path& dir) {
  Json batch;
  batch["sequences"] = kSequences;
  Json masks = Json::array();
  int64_t scored = 0;
  for (size_t s = 0; s < kSequences.size(); ++s) {
    std::vector<int> m(kSequences[s].size(), 0);
    for (size_t t = static_cast<size_t>(kScoreFrom[s]); t + 1 < m.size(); ++t) m[t] = 1, ++scored;
    masks.push_back(m);
  }
  batch["loss_mask"] = masks;
  std::ofstream(dir / "batch.json") << batch.dump();
  return scored;
}

// kSequences in two micro-batches of two.
std::vector<PackedBatch> golden_micro_batches() {
  return {PackedBatch::from_sequences({kSequences[0], kSequences[1]}, {kScoreFrom[0], kScoreFrom[1]}),
          PackedBatch::from_sequences({kSequences[2], kSequences[3]}, {kScoreFrom[2], kScoreFrom[3]})};
}

// The golden script's loss, the mean -logp over the `scored` tokens, micro-batch by micro-batch; each forward's
// logits appended to `logits` (when given) while it holds fewer than `keep` floats.
MicroLossFn sft_loss(const std::vector<PackedBatch>& micro, int64_t scored, std::vector<float>* logits, int64_t keep) {
  return [&micro, scored, logits, keep](size_t m, const Activations& acts) {
    LossOutput out;
    out.dlogp.assign(static_cast<size_t>(acts.num_tokens), 0.0f);
    for (int64_t i = 0; i < acts.num_tokens; ++i) {
      if (micro[m].targets[i] < 0) continue;
      out.loss -= acts.logp.data<float>()[i] / static_cast<double>(scored);
      out.dlogp[static_cast<size_t>(i)] = -1.0f / static_cast<float>(scored);
    }
    if (logits && static_cast<int64_t>(logits->size()) < keep)
      logits->insert(logits->end(), acts.logits.data<float>(), acts.logits.data<float>() + acts.logits.numel());
    return out;
  };
}

TEST_P(LoraGolden, ForwardAdapterGradientsAndAdamWMatchPyTorchUnmerged) {
  if (!torch_available()) GTEST_SKIP() << "/usr/bin/python3 has no torch (apt-get install python3-torch)";
  const Case c = GetParam();
  const ModelConfig cfg = small_test_config(c.family);
  const ParameterStore base = init_random(cfg, 11);
  LoraConfig lc;
  lc.rank = 4;
  lc.alpha = 8;
  lc.targets = c.targets;
  LoraAdapters adapters = random_lora_adapters(cfg, lc, 5);
  const fs::path dir = fresh_dir(c.family);
  save_model_checkpoint((dir / "base").string(), base);
  adapters.save_peft((dir / "adapter").string(), "base");
  const int64_t scored = write_golden_batch(dir);
  const std::string cmd = std::string("/usr/bin/python3 ") + RLCPP_SOURCE_DIR +
                          "/tests/golden/torch_llama.py --model " + (dir / "base").string() + " --lora " + (dir / "adapter").string() + " --batch " +
                          (dir / "batch.json").string() + " --out " + (dir / "golden.safetensors").string() +
                          " --adamw-steps 3 --lr 1e-2 --beta1 0.9 --beta2 0.95 --eps 1e-8 --weight-decay 0.1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const SafetensorsFile golden = read_safetensors((dir / "golden.safetensors").string());
  auto g = [&](const std::string& name) -> const Tensor& {
    auto it = golden.tensors.find(name);
    if (it == golden.tensors.end()) throw Error("golden file has no tensor '" + name + "'");
    return it->second;
  };

  const Transformer model(cfg);
  const std::vector<PackedBatch> micro = golden_micro_batches();
  // Unmerged (model/lora_unmerged.h): the base with the adapters beside it, forward and backward_frozen over the
  // two micro-batches: PyTorch's logits and adapter gradients too.
  {
    const UnmergedLora beside(adapters);
    ParameterStore grads = adapters.weights().clone();
    std::fill_n(grads.flat().data<float>(), grads.numel(), 0.0f);
    LoraGradients hook(adapters, grads);
    std::vector<float> unmerged_logits;
    ForwardOptions options;
    options.adapters = &beside;
    for (const PackedBatch& b : micro) {
      Activations acts;
      model.forward(host(), base, b, options, acts);
      unmerged_logits.insert(unmerged_logits.end(), acts.logits.data<float>(),
                             acts.logits.data<float>() + acts.logits.numel());
      std::vector<float> dlogp(static_cast<size_t>(acts.num_tokens), 0.0f);
      for (int64_t i = 0; i < acts.num_tokens; ++i)
        if (b.targets[i] >= 0) dlogp[static_cast<size_t>(i)] = -1.0f / static_cast<float>(scored);
      model.backward_frozen(host(), base, acts, dlogp.data(), nullptr, hook);
    }
    ASSERT_EQ(static_cast<int64_t>(unmerged_logits.size()), g("logits").numel());
    EXPECT_LE(max_rel_diff(g("logits").data<float>(), unmerged_logits.data(), g("logits").numel()), 1e-4);
    for (const ParameterInfo& info : adapters.weights().infos())
      EXPECT_LE(max_rel_diff(g("grad." + info.name).data<float>(), grads.get(info.name).data<float>(), info.numel()),
                1e-3)
          << "unmerged: gradient of " << info.name;
  }

  // The merged weights, trained by the updater over two micro-batches, the loss over the whole batch's tokens.
  ParameterStore merged = base.clone();
  adapters.merge(host(), base, merged);
  std::vector<float> logits;  // the first step's, concatenated over the micro-batches
  const MicroLossFn sft = sft_loss(micro, scored, &logits, g("logits").numel());
  OptimConfig optim;
  optim.lr = 1e-2;
  optim.weight_decay = 0.1;
  optim.grad_clip = 0;
  const LoraBase frozen(base, DType::kF32);
  PolicyUpdater updater(model, merged, optim, host(), {&frozen, &adapters});
  const Tensor& losses = g("adamw_losses");
  for (int step = 0; step < 3; ++step) {
    const UpdateResult r = updater.step(micro, ForwardOptions{}, sft, 3);
    ASSERT_FALSE(r.skipped);
    EXPECT_NEAR(r.loss, losses.data<float>()[step], 2e-5 * std::fabs(losses.data<float>()[step])) << "step " << step;
    if (step > 0) continue;
    ASSERT_EQ(static_cast<int64_t>(logits.size()), g("logits").numel());
    EXPECT_LE(max_rel_diff(g("logits").data<float>(), logits.data(), g("logits").numel()), 1e-4);
    // The gradient of step 0 (the updater's buffer, before AdamW used it: clipping is off).
    for (const ParameterInfo& info : adapters.weights().infos()) {
      const Tensor& expected = g("grad." + info.name);
      ASSERT_EQ(expected.numel(), info.numel()) << info.name;
      EXPECT_LE(max_rel_diff(expected.data<float>(), updater.grads().get(info.name).data<float>(), info.numel()),
                1e-3)
          << "gradient of " << info.name;
    }
  }
  for (const ParameterInfo& info : adapters.weights().infos())
    EXPECT_LE(max_rel_diff(g("final." + info.name).data<float>(), adapters.weights().get(info.name).data<float>(),
                           info.numel()),
              3e-4)
        << "adapter after 3 AdamW steps: " << info.name;
  // The updater keeps the merged weights those of the new adapters, bit for bit.
  ParameterStore again = base.clone();
  adapters.merge(host(), base, again);
  EXPECT_EQ(0, std::memcmp(again.flat().data<float>(), merged.flat().data<float>(),
                           static_cast<size_t>(merged.numel()) * sizeof(float)));
  fs::remove_all(dir);
}

// LoRA dropout (lora.dropout 0.3): the updater's training forward runs the adapters unmerged with each input
// masked by lora_dropout_scale, keyed by the seed, the optimizer step and the micro-batch; PyTorch, given the same
// masks (tests/golden/torch_llama.py --lora-dropout-masks), computes the same logits and adapter gradients over two
// micro-batches. Without dropout the same step's gradient differs (the masks are used).
TEST(Lora, DropoutMatchesPyTorchGivenTheSameMasks) {
  if (!torch_available()) GTEST_SKIP() << "/usr/bin/python3 has no torch (apt-get install python3-torch)";
  const ModelConfig cfg = small_test_config("qwen3");
  const ParameterStore base = init_random(cfg, 11);
  LoraConfig lc;
  lc.rank = 4;
  lc.alpha = 8;
  lc.dropout = 0.3;
  LoraAdapters adapters = random_lora_adapters(cfg, lc, 5);
  const fs::path dir = fresh_dir("dropout");
  save_model_checkpoint((dir / "base").string(), base);
  adapters.save_peft((dir / "adapter").string(), "base");
  const int64_t scored = write_golden_batch(dir);
  // The masks the updater draws at its first step: micro-batch m holds sequences 2m and 2m + 1, its rows counted
  // from 0; PyTorch's rows are the four sequences' in order.
  const uint64_t seed = 17;
  const float p = static_cast<float>(lc.dropout);
  int64_t rows = 0;
  for (const auto& seq : kSequences) rows += static_cast<int64_t>(seq.size());
  std::vector<std::pair<std::string, Tensor>> mask_tensors;
  for (size_t ti = 0; ti < adapters.targets().size(); ++ti) {
    const LoraTarget& t = adapters.targets()[ti];
    std::string name;
    for (const ParameterInfo& info : adapters.weights().infos())
      if (info.offset == t.a) name = info.name;
    Tensor mask = Tensor::empty({rows, t.in});
    int64_t row = 0;
    for (size_t s = 0; s < kSequences.size(); ++s) {
      const int64_t micro = static_cast<int64_t>(s / 2);
      const int64_t local0 = s % 2 == 0 ? 0 : static_cast<int64_t>(kSequences[s - 1].size());
      for (size_t i = 0; i < kSequences[s].size(); ++i, ++row)
        for (int64_t c = 0; c < t.in; ++c)
          mask.data<float>()[row * t.in + c] = lora_dropout_scale(
              lora_dropout_key(seed, 0, micro), static_cast<int64_t>(ti), local0 + static_cast<int64_t>(i), c, p);
    }
    mask_tensors.emplace_back(name, mask);
  }
  write_safetensors((dir / "masks.safetensors").string(), mask_tensors, {});
  const std::string cmd = std::string("/usr/bin/python3 ") + RLCPP_SOURCE_DIR + "/tests/golden/torch_llama.py --model " +
                          (dir / "base").string() + " --lora " + (dir / "adapter").string() + " --lora-dropout-masks " +
                          (dir / "masks.safetensors").string() + " --batch " + (dir / "batch.json").string() +
                          " --out " + (dir / "golden.safetensors").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const SafetensorsFile golden = read_safetensors((dir / "golden.safetensors").string());

  const Transformer model(cfg);
  const std::vector<PackedBatch> micro = golden_micro_batches();
  auto one_step = [&](const LoraConfig& config, std::vector<float>* logits) {
    LoraAdapters a = random_lora_adapters(cfg, config, 5);
    ParameterStore merged = base.clone();
    a.merge(host(), base, merged);
    const MicroLossFn sft = sft_loss(micro, scored, logits, std::numeric_limits<int64_t>::max());
    OptimConfig optim;
    optim.grad_clip = 0;
    const LoraBase frozen(base, DType::kF32);
    PolicyUpdater updater(model, merged, optim, host(), {&frozen, &a, seed});
    updater.step(micro, ForwardOptions{}, sft, 1);
    return updater.grads().clone();
  };
  std::vector<float> logits;
  const ParameterStore grads = one_step(lc, &logits);
  ASSERT_EQ(static_cast<int64_t>(logits.size()), golden.tensors.at("logits").numel());
  EXPECT_LE(max_rel_diff(golden.tensors.at("logits").data<float>(), logits.data(), static_cast<int64_t>(logits.size())),
            1e-4);
  for (const ParameterInfo& info : adapters.weights().infos())
    EXPECT_LE(max_rel_diff(golden.tensors.at("grad." + info.name).data<float>(), grads.get(info.name).data<float>(),
                           info.numel()),
              1e-3)
        << "gradient of " << info.name;
  LoraConfig no_dropout = lc;
  no_dropout.dropout = 0;
  const ParameterStore plain = one_step(no_dropout, nullptr);
  EXPECT_GT(max_rel_diff(plain.flat().data<float>(), grads.flat().data<float>(), grads.numel()), 0.05);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Families, LoraGolden,
                         ::testing::Values(Case{"qwen2", {"all-linear"}}, Case{"qwen3", {"all-linear"}},
                                           Case{"llama", {"q_proj", "v_proj", "down_proj"}}),
                         [](const auto& info) { return info.param.family; });

// A whole row's mask (one Philox draw per 4 columns, 16 draws at a time) is the mask's definition column by column,
// bit for bit, for widths with and without a tail; about p of the columns are dropped.
TEST(Lora, ARowsMaskIsTheMaskOfEachColumn) {
  const float p = 0.3f;
  int64_t dropped = 0, total = 0;
  for (const int64_t n : {1, 3, 4, 7, 64, 177, 300}) {
    std::vector<float> scale(static_cast<size_t>(n));
    for (const int64_t row : {0, 5, 1000}) {
      lora_dropout_scales(42, 3, row, p, n, scale.data());
      for (int64_t c = 0; c < n; ++c) {
        const float expected = lora_dropout_scale(42, 3, row, c, p);
        EXPECT_EQ(scale[static_cast<size_t>(c)], expected) << "n " << n << " row " << row << " column " << c;
        dropped += expected == 0.0f;
        ++total;
      }
    }
  }
  EXPECT_NEAR(static_cast<double>(dropped) / static_cast<double>(total), p, 0.06);
}

TEST(Lora, MergeStartsAtTheBaseAndIsAnFmaChainOverTheRank) {
  const ModelConfig cfg = small_test_config("qwen2");
  const ParameterStore base = init_random(cfg, 3);
  LoraConfig lc;
  lc.rank = 3;
  lc.alpha = 6;
  LoraAdapters a(cfg, lc);
  a.init(9);
  ParameterStore merged = base.clone();
  a.merge(host(), base, merged);  // B = 0: the base, bit for bit
  EXPECT_EQ(0, std::memcmp(base.flat().data<float>(), merged.flat().data<float>(),
                           static_cast<size_t>(base.numel()) * sizeof(float)));
  LoraAdapters b = random_lora_adapters(cfg, lc, 9);
  b.merge(host(), base, merged);
  const float s = lc.scale();
  int64_t changed = 0;
  for (const LoraTarget& t : b.targets()) {
    const float* A = b.weights().flat().data<float>() + t.a;
    const float* B = b.weights().flat().data<float>() + t.b;
    for (int64_t o = 0; o < t.out; ++o)
      for (int64_t i = 0; i < t.in; ++i) {
        float acc = 0;
        for (int64_t k = 0; k < lc.rank; ++k) acc = std::fma(B[o * lc.rank + k], A[k * t.in + i], acc);
        const int64_t at = t.weight + o * t.in + i;
        const float expected = std::fma(s, acc, base.flat().data<float>()[at]);
        ASSERT_EQ(merged.flat().data<float>()[at], expected) << t.module << " layer " << t.layer << " (" << o << ", "
                                                             << i << ")";
        changed += expected != base.flat().data<float>()[at];
      }
  }
  EXPECT_GT(changed, 1000);
  // Everything else is the base's.
  for (const ParameterInfo& info : base.infos()) {
    if (info.name.find("_proj.weight") != std::string::npos) continue;
    EXPECT_EQ(0, std::memcmp(base.get(info.name).data<float>(), merged.get(info.name).data<float>(),
                             static_cast<size_t>(info.numel()) * sizeof(float)))
        << info.name;
  }
}

// x rounded to the nearest bf16, ties to even (x finite and normal, as init_random's weights).
float round_to_bf16(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return std::bit_cast<float>(u & 0xFFFF0000u);
}

TEST(Lora, ABf16BaseMergesAsTheFp32BaseOfItsValuesAndStartsTheRunAtIt) {
  const ModelConfig cfg = small_test_config("qwen2");
  ParameterStore policy = init_random(cfg, 5);
  const ParameterStore unrounded = policy.clone();
  LoraConfig lc;
  lc.rank = 4;
  lc.alpha = 8;
  const LoraBase base = LoraBase::frozen_from(policy, DType::kBF16);
  EXPECT_EQ(base.dtype(), DType::kBF16);
  EXPECT_EQ(base.weights().dtype(), DType::kBF16);  // a forward's weights, in bf16 (model_bf16_weights_test)
  // The policy was rounded to bf16 in place (it changed), and the base holds exactly its values.
  int64_t rounded = 0;
  std::vector<float> values(static_cast<size_t>(policy.numel()));
  base.read(host(), 0, policy.numel(), values.data());
  for (int64_t i = 0; i < policy.numel(); ++i) {
    const float p = policy.flat().data<float>()[i];
    ASSERT_EQ(values[static_cast<size_t>(i)], p) << i;
    ASSERT_EQ(p, round_to_bf16(unrounded.flat().data<float>()[i])) << i;
    rounded += p != unrounded.flat().data<float>()[i];
  }
  EXPECT_GT(rounded, policy.numel() / 2);
  // Merged from it: the bits of the fp32 base holding the same values, at B = 0 (the policy itself) and after.
  const LoraBase same_in_fp32(policy.clone(), DType::kF32);
  LoraAdapters a(cfg, lc);
  a.init(7);
  ParameterStore from_bf16 = ParameterStore::allocate(cfg, host());
  a.merge(host(), base, from_bf16);
  EXPECT_EQ(0, std::memcmp(from_bf16.flat().data<float>(), policy.flat().data<float>(),
                           static_cast<size_t>(policy.numel()) * sizeof(float)));
  LoraAdapters b = random_lora_adapters(cfg, lc, 7);
  ParameterStore from_fp32 = ParameterStore::allocate(cfg, host());
  b.merge(host(), base, from_bf16);
  b.merge(host(), same_in_fp32, from_fp32);
  EXPECT_EQ(0, std::memcmp(from_bf16.flat().data<float>(), from_fp32.flat().data<float>(),
                           static_cast<size_t>(policy.numel()) * sizeof(float)));
  EXPECT_NE(0, std::memcmp(from_bf16.flat().data<float>(), policy.flat().data<float>(),
                           static_cast<size_t>(policy.numel()) * sizeof(float)));
  // A fp32 base shares the weights it is given; merging into them is refused.
  EXPECT_THROW(b.merge(host(), same_in_fp32, const_cast<ParameterStore&>(same_in_fp32.weights())), Error);
}

TEST(Lora, PeftOpensRlcppAdaptersAndRlcppOpensPeftsWithTheSameLogits) {
  const ModelConfig cfg = small_test_config("qwen2");
  const ParameterStore base = init_random(cfg, 21);
  LoraConfig lc;
  lc.rank = 4;
  lc.alpha = 16;
  const LoraAdapters ours = random_lora_adapters(cfg, lc, 13);
  const fs::path dir = fresh_dir("peft");
  save_model_checkpoint((dir / "base").string(), base);
  ours.save_peft((dir / "ours").string(), (dir / "base").string());
  const std::vector<int32_t> tokens = random_test_tokens(12, cfg.vocab_size, 8);
  const Transformer model(cfg);
  auto logits_of = [&](const LoraAdapters& a) {
    ParameterStore merged = base.clone();
    a.merge(host(), base, merged);
    Activations acts;
    model.forward(host(), merged, PackedBatch::from_sequences({tokens}), ForwardOptions{}, acts);
    return std::vector<float>(acts.logits.data<float>(), acts.logits.data<float>() + acts.logits.numel());
  };
  // peft over transformers: our adapters' logits, and adapters peft draws (B nonzero) and saves with theirs.
  ASSERT_TRUE(run_venv_python(std::string(RLCPP_SOURCE_DIR) + "/tests/peft_lora.py --base " + (dir / "base").string() +
                              " --ours " + (dir / "ours").string() + " --theirs " + (dir / "theirs").string() +
                              " --tokens " + Json(tokens).dump() + " --out " + (dir / "peft.safetensors").string()));
  const SafetensorsFile peft = read_safetensors((dir / "peft.safetensors").string());
  const std::vector<float> ours_logits = logits_of(ours);
  const Tensor& peft_ours = peft.tensors.at("ours_logits");
  ASSERT_EQ(peft_ours.numel(), static_cast<int64_t>(ours_logits.size()));
  EXPECT_LE(max_rel_diff(peft_ours.data<float>(), ours_logits.data(), peft_ours.numel()), 1e-5);
  const LoraAdapters theirs = LoraAdapters::load_peft((dir / "theirs").string(), cfg);
  EXPECT_EQ(theirs.config().rank, 8);
  EXPECT_EQ(theirs.config().alpha, 32);
  EXPECT_EQ(theirs.config().resolved_targets(), (std::vector<std::string>{"q_proj", "v_proj", "up_proj"}));
  const std::vector<float> theirs_logits = logits_of(theirs);
  EXPECT_LE(max_rel_diff(peft.tensors.at("theirs_logits").data<float>(), theirs_logits.data(),
                         static_cast<int64_t>(theirs_logits.size())),
            1e-5);
  // The base alone differs: the adapters moved the logits.
  EXPECT_GT(max_rel_diff(peft_ours.data<float>(), logits_of(LoraAdapters(cfg, lc)).data(), peft_ours.numel()), 1e-3);
  fs::remove_all(dir);
}

// The adapters' shapes as a LoRA base message carries them: a round trip, "unmerged" read when it is a boolean,
// anything else named.
TEST(Lora, TheWireFormOfTheAdaptersShapesRoundTripsAndNamesWhatIsWrong) {
  LoraConfig lc;
  lc.rank = 4;
  lc.alpha = 8;
  lc.targets = {"v_proj", "q_proj"};
  Json wire = lora_config_to_wire(lc);
  EXPECT_TRUE(lora_config_from_wire(wire).same_adapters(lc));
  wire["unmerged"] = true;
  EXPECT_TRUE(lora_config_from_wire(wire).same_adapters(lc));
  wire["unmerged"] = "yes";
  EXPECT_NE(error_of([&] { lora_config_from_wire(wire); }).find("'lora.unmerged' must be a boolean"),
            std::string::npos);
  wire.erase("unmerged");
  wire["dropout"] = 0.1;
  EXPECT_NE(error_of([&] { lora_config_from_wire(wire); }).find("header field 'lora' must be"), std::string::npos);
}

TEST(Lora, BadAdapterDirectoriesAreNamed) {
  const ModelConfig cfg = small_test_config("qwen2");
  LoraConfig lc;
  lc.rank = 2;
  const fs::path dir = fresh_dir("bad");
  LoraAdapters(cfg, lc).save_peft((dir / "a").string());
  const std::string config_path = (dir / "a" / "adapter_config.json").string();
  const Json good = load_json_file(config_path);
  auto expect_error = [&](const Json& j, const std::string& needle) {
    write_json_file_atomic(config_path, j);
    try {
      LoraAdapters::load_peft((dir / "a").string(), cfg);
      ADD_FAILURE() << "no error; expected one naming " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("adapter_config.json"), std::string::npos) << e.what();
    }
  };
  Json j = good;
  j["use_dora"] = true;
  expect_error(j, "use_dora");
  j = good;
  j["peft_type"] = "IA3";
  expect_error(j, "LORA");
  j = good;
  j["target_modules"] = {"q_proj", "lm_head"};
  expect_error(j, "lm_head");
  j = good;
  j["r"] = 3;  // the file's tensors have rank 2
  write_json_file_atomic(config_path, j);
  EXPECT_THROW(
      {
        try {
          LoraAdapters::load_peft((dir / "a").string(), cfg);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("has shape"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  // A config key out of range names it.
  LoraConfig bad;
  bad.rank = 4;
  bad.dropout = 1.0;
  EXPECT_NE(error_of([&] { bad.validate("trainer.lora."); }).find("'trainer.lora.dropout': must be in [0, 1)"),
            std::string::npos);
  bad.dropout = 0.1;
  bad.validate("trainer.lora.");
  bad.base_dtype = "fp16";
  EXPECT_NE(error_of([&] { bad.validate("trainer.lora."); }).find("'trainer.lora.base_dtype': \"fp32\" or \"bf16\""),
            std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rlcpp
