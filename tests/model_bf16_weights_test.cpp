// Weights held in bf16 (ParameterStore::converted; a frozen LoRA base, model/lora.h LoraBase): the Transformer's
// passes read them as they read the fp32 store of their widened values — forward (keeping activations or not, in
// fp32 and bf16 numerics, with unmerged adapters and LoRA dropout), backward_frozen's adapter gradients, and the
// decode's prepared weights — bit for bit; a full backward over them is refused, naming why.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "model/lora.h"
#include "model/lora_unmerged.h"
#include "model/transformer.h"
#include "tests/host_context.h"
#include "tests/kernels_test_support.h"
#include "tests/lora_test_support.h"
#include "tests/test_models.h"

namespace rlcpp {
namespace {

using testing::error_of;
using testing::host;

PackedBatch two_sequences(const ModelConfig& cfg) {
  return PackedBatch::from_sequences(
      {random_test_tokens(11, cfg.vocab_size, 31), random_test_tokens(6, cfg.vocab_size, 32)});
}

bool same_floats(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

class Bf16WeightsByFamily : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(Families, Bf16WeightsByFamily, ::testing::ValuesIn(kTestFamilies),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST_P(Bf16WeightsByFamily, ForwardAndAdapterGradientsAreThoseOfTheWidenedWeights) {
  const ModelConfig cfg = small_test_config(GetParam());
  const ParameterStore held = scaled_test_params(cfg, 2.0f).converted(host(), DType::kBF16);
  const ParameterStore widened = held.converted(host(), DType::kF32);
  ASSERT_EQ(held.dtype(), DType::kBF16);
  ASSERT_EQ(held.flat().nbytes() * 2, widened.flat().nbytes());
  const LoraAdapters adapters = random_lora_adapters(cfg, small_lora_config(), 5);
  const PackedBatch batch = two_sequences(cfg);
  for (const DType compute : {DType::kF32, DType::kBF16}) {
    const Transformer model(cfg, test_numerics(compute, /*batch_invariant=*/true));
    for (const bool with_adapters : {false, true})
      for (const bool keep : {true, false}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(compute) << (with_adapters ? " adapters" : "")
                                          << (keep ? " kept" : " scoring"));
        UnmergedLora beside(adapters);
        if (keep && with_adapters) beside.set_dropout({0.25f, 99});
        ForwardOptions options;
        options.keep_activations = keep;
        options.entropy = true;
        if (with_adapters) options.adapters = &beside;
        Activations from_held, from_widened;
        model.forward(host(), held, batch, options, from_held);
        model.forward(host(), widened, batch, options, from_widened);
        EXPECT_TRUE(same_floats(from_held.logp, from_widened.logp));
        EXPECT_TRUE(same_floats(from_held.entropy, from_widened.entropy));
        if (!keep || !with_adapters) continue;
        // backward_frozen: the adapters' gradients through the held base, with the forward's dropout masks.
        std::vector<float> dlogp(static_cast<size_t>(batch.num_tokens()));
        for (size_t i = 0; i < dlogp.size(); ++i) dlogp[i] = batch.targets[i] >= 0 ? 0.1f * float(i % 7) - 0.3f : 0;
        ParameterStore grads_held = adapters.weights().clone(), grads_widened = adapters.weights().clone();
        host().fill_zero(grads_held.flat());
        host().fill_zero(grads_widened.flat());
        LoraGradients hook_held(adapters, grads_held, {0.25f, 99}), hook_widened(adapters, grads_widened, {0.25f, 99});
        model.backward_frozen(host(), held, from_held, dlogp.data(), nullptr, hook_held);
        model.backward_frozen(host(), widened, from_widened, dlogp.data(), nullptr, hook_widened);
        EXPECT_TRUE(same_floats(grads_held.flat(), grads_widened.flat()));
        double norm = 0;
        for (int64_t i = 0; i < grads_held.numel(); ++i) norm += std::abs(grads_held.flat().data<float>()[i]);
        EXPECT_GT(norm, 0.0);
      }
  }
  const Transformer model(cfg);
  Activations acts;
  model.forward(host(), held, batch, ForwardOptions{}, acts);
  ParameterStore grads(cfg);
  std::vector<float> dlogp(static_cast<size_t>(batch.num_tokens()), 0.1f);
  EXPECT_NE(error_of([&] { model.backward(host(), held, acts, dlogp.data(), nullptr, grads); }).find("frozen base"),
            std::string::npos);
}

// The decode's weights prepared from a held store — panels (self-contained or reading the store) and the
// OpenBLAS decode's widened copy — give the logits of the widened store's.
TEST_P(Bf16WeightsByFamily, TheDecodeOfHeldWeightsIsTheDecodeOfTheWidenedOnes) {
  const ModelConfig cfg = small_test_config(GetParam());
  const ParameterStore held = scaled_test_params(cfg, 2.0f).converted(host(), DType::kBF16);
  const ParameterStore widened = held.converted(host(), DType::kF32);
  const std::vector<int32_t> tokens = random_test_tokens(9, cfg.vocab_size, 41);
  CachedStep step;
  step.tokens = tokens;
  for (int32_t i = 0; i < 9; ++i) {
    step.positions.push_back(i);
    step.query_seq.push_back(0);
    step.slot_mapping.push_back(i);
    step.logits_rows.push_back(i);
  }
  step.block_indptr = {0, 3};
  step.block_indices = {0, 1, 2};
  for (const DType compute : {DType::kF32, DType::kBF16})
    for (const bool batch_invariant : {true, false})
      for (const bool self_contained : {true, false}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(compute) << (batch_invariant ? " panels" : " openblas")
                                          << (self_contained ? " self-contained" : ""));
        const Transformer model(cfg, test_numerics(compute, batch_invariant));
        PackedWeights from_held, from_widened;
        model.prepare_decode_weights(host(), held, from_held, self_contained);
        model.prepare_decode_weights(host(), widened, from_widened, self_contained);
        KVCache cache_held(cfg, 3, 4, storage_dtype(compute)), cache_widened(cfg, 3, 4, storage_dtype(compute));
        const Tensor a = model.forward_cached(host(), held, step, cache_held, &from_held);
        const Tensor b = model.forward_cached(host(), widened, step, cache_widened, &from_widened);
        EXPECT_TRUE(same_floats(a, b));
      }
}

}  // namespace
}  // namespace rlcpp
