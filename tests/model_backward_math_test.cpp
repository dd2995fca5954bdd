// The backward's products in a bf16 model (Executor::backward_math): bf16 operands with fp32 accumulation, as
// PyTorch's autocast and the CUDA executor multiply — on the CPU the packed kernel against bf16 transposed panels
// (dx) and the bf16 weight-gradient kernel (dw). Checked at the head against an independent computation of its
// weight gradient (the chain over the bf16 operands of dlogits and the final norm's output, over a vocabulary of
// several kLmHeadGradRows blocks), and over the whole model against the fp32 model's gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/dtype_round.h"
#include "kernels/ops.h"
#include "model/transformer.h"
#include "tests/host_context.h"
#include "tests/test_models.h"

namespace rlcpp {
namespace {

using testing::host;

ModelNumerics bf16_numerics() { return test_numerics(DType::kBF16, /*batch_invariant=*/true); }

PackedBatch test_batch(int64_t vocab) {
  std::vector<std::vector<int32_t>> seqs;
  for (int64_t s = 0; s < 5; ++s) seqs.push_back(random_test_tokens(30 + 7 * s, vocab, 40 + s));
  return PackedBatch::from_sequences(seqs);
}

std::vector<float> dlogp_for(int64_t n) {
  std::vector<float> d(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) d[static_cast<size_t>(i)] = 0.05f * static_cast<float>(i % 7) - 0.13f;
  return d;
}

ParameterStore gradients(const ExecContext& ctx, const Transformer& model, const ParameterStore& params,
                         const PackedBatch& batch) {
  Activations acts;
  model.forward(ctx, params, batch, ForwardOptions{}, acts);
  ParameterStore grads(params.config());
  const std::vector<float> dlogp = dlogp_for(batch.num_tokens());
  model.backward(ctx, params, acts, dlogp.data(), nullptr, grads);
  return grads;
}

// max |a - b| over max |b|.
double relative_error(const Tensor& a, const Tensor& b) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    diff = std::max(diff, std::fabs(double(a.data<float>()[i]) - b.data<float>()[i]));
    scale = std::max(scale, std::fabs(double(b.data<float>()[i])));
  }
  return diff / scale;
}

// lm_head's weight gradient of a bf16 model is dlogits^T xn_final over bf16 operands, one fma chain per weight over
// the rows in order — bit for bit, through three blocks of kLmHeadGradRows vocabulary rows (the last one short).
// The fp32 chain over the same values differs: the test sees which math ran.
TEST(BackwardMath, ABf16ModelsHeadGradientIsTheChainOverBf16Operands) {
  ModelConfig cfg = small_test_config("qwen2");
  cfg.num_hidden_layers = 1;
  cfg.vocab_size = 2 * Transformer::kLmHeadGradRows + 333;
  cfg.tie_word_embeddings = false;
  const ParameterStore params = scaled_test_params(cfg, 1.0f);
  const Transformer model(cfg, bf16_numerics());
  const PackedBatch batch = test_batch(cfg.vocab_size);
  const int64_t N = batch.num_tokens(), V = cfg.vocab_size, C = cfg.hidden_size;

  Activations acts;
  model.forward(host(), params, batch, ForwardOptions{}, acts);
  const std::vector<float> dlogp = dlogp_for(N);
  // dlogits from the kept logits, as the backward computes them (the op is held to its reference elsewhere).
  Tensor dlogits = Tensor::empty({N, V});
  Tensor dlogp_t = Tensor::empty({N});
  std::memcpy(dlogp_t.data<float>(), dlogp.data(), dlogp.size() * sizeof(float));
  ops::logprob_backward(host(), dlogp_t, nullptr, acts.logits, acts.targets, acts.temperature, acts.lse, dlogits);
  const Tensor xn = acts.xn_final.clone();
  ParameterStore grads(cfg);
  model.backward(host(), params, acts, dlogp.data(), nullptr, grads);

  const Tensor got = grads.get("lm_head.weight");
  ASSERT_EQ(got.numel(), V * C);
  auto operand = [](float v) { return cpu::bf16_operand_reference(v); };
  int64_t misses = 0, fp32_differs = 0;
  for (int64_t v = 0; v < V; ++v)
    for (int64_t c = 0; c < C; ++c) {
      float bf16 = 0.0f, fp32 = 0.0f;
      for (int64_t t = 0; t < N; ++t) {
        const float d = dlogits.data<float>()[t * V + v], x = xn.data<float>()[t * C + c];
        bf16 = std::fma(operand(d), operand(x), bf16);
        fp32 = std::fma(d, x, fp32);
      }
      const float g = got.data<float>()[v * C + c];
      fp32_differs += fp32 != bf16;
      if (std::memcmp(&g, &bf16, sizeof g) != 0 && ++misses <= 3)
        ADD_FAILURE() << "dlm_head[" << v << "][" << c << "] = " << g << ", the bf16 chain gives " << bf16;
    }
  EXPECT_EQ(misses, 0);
  EXPECT_GT(fp32_differs, V * C / 2) << "dlogits rounded to bf16 should change most chains";
}

class BackwardMathFamilies : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(Families, BackwardMathFamilies, ::testing::ValuesIn(kTestFamilies),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// The whole bf16 backward stays within bf16's rounding of the fp32 model's gradients, in every family (a product
// in the wrong layout or order would not).
TEST_P(BackwardMathFamilies, Bf16GradientsStayNearFp32s) {
  const ModelConfig cfg = small_test_config(GetParam());
  const ParameterStore params = scaled_test_params(cfg, 1.0f);
  const PackedBatch batch = test_batch(cfg.vocab_size);
  const Transformer bf16(cfg, bf16_numerics()), fp32(cfg);
  const ParameterStore got = gradients(host(), bf16, params, batch);
  const ParameterStore exact = gradients(host(), fp32, params, batch);
  for (const ParameterInfo& p : params.infos())  // 1.0-1.6 % at worst per family when written
    EXPECT_LT(relative_error(got.get(p.name), exact.get(p.name)), 0.03) << p.name;
}

}  // namespace
}  // namespace rlcpp
