// The rollout engine on a CUDA context (skipped without a GPU; scripts/device_check.sh runs it on a lent one):
// KV cache and prepared weights on the device, logits back to the host for the one sampler, each sampled
// token's log-prob scored on the device. In batch-invariant numerics a sample's tokens and log-probs do not
// depend on what it is batched with, and equal the device trainer's recomputation bit for bit; against the
// host engine they agree to the rounding of the other ops' sum orders.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/exec_context.h"
#include "model/packed_batch.h"
#include "model/transformer.h"
#include "rollout/engine.h"
#include "tests/host_context.h"
#include "tests/test_models.h"

namespace rlcpp {
namespace {

using testing::host;

EngineConfig small_engine(int64_t block_size = 16) {
  EngineConfig c;
  c.block_size = block_size;
  c.max_num_seqs = 64;
  c.max_num_batched_tokens = 1024;
  return c;
}


Request sampled_request(const ModelConfig& c, int64_t prompts, int64_t n, float temperature, uint64_t first_id = 0) {
  Request r;
  for (int64_t p = 0; p < prompts; ++p) {
    r.prompts.push_back(random_test_tokens(3 + (p * 5) % 11, c.vocab_size, 200 + first_id + p));
    r.prompt_ids.push_back(first_id + static_cast<uint64_t>(p));
  }
  r.n = n;
  r.sampling.temperature = temperature;
  r.sampling.max_new_tokens = 9;
  r.sampling.ignore_eos = true;
  r.sampling.seed = 7;
  return r;
}

// Each sample's log-probs as the trainer recomputes them on ctx: one packed batch of prompt + response, the
// response positions' log p(token | prefix) at the sampling temperature (1 for greedy).
std::vector<std::vector<float>> trainer_logprobs(const ExecContext& ctx, const Transformer& model,
                                                 const ParameterStore& params, const Request& request,
                                                 const RolloutResult& result) {
  std::vector<std::vector<int32_t>> seqs;
  std::vector<size_t> prompt_len;
  for (const Sample& s : result.samples) {
    std::vector<int32_t> seq = request.prompts[static_cast<size_t>(s.prompt_index)];
    prompt_len.push_back(seq.size());
    seq.insert(seq.end(), s.tokens.begin(), s.tokens.end());
    seqs.push_back(seq);
  }
  const PackedBatch batch = PackedBatch::from_sequences(seqs);
  ForwardOptions options;
  options.temperature = request.sampling.scoring().temperature;
  Activations acts;
  const ParameterStore on_ctx = ctx.device() == Device::kCPU ? params : params.on(ctx);
  model.forward(ctx, on_ctx, batch, options, acts);
  Tensor logp = Tensor::empty({batch.num_tokens()});
  ctx.copy(acts.logp, logp);
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < seqs.size(); ++i) {
    // logp[t] is log p(seq[t + 1] | seq[..t]): the response starts at entry prompt_len - 1.
    const float* first = logp.data<float>() + batch.cu_seqlens[i] + prompt_len[i] - 1;
    out.emplace_back(first, first + result.samples[i].tokens.size());
  }
  return out;
}

class EngineOnCuda : public ::testing::TestWithParam<std::tuple<std::string, DType>> {};

TEST_P(EngineOnCuda, BatchInvariantSamplesEqualTheDeviceTrainersLogprobsBitForBit) {
  std::string why;
  if (ExecContext::cuda_devices(&why) == 0) GTEST_SKIP() << why;
  const ExecContext gpu = ExecContext::cuda(0);
  const auto& [family, compute] = GetParam();
  const ModelConfig c = small_test_config(family);
  const Transformer model(c, test_numerics(compute, true));
  const ParameterStore params = scaled_test_params(c);
  Engine engine(model, params, small_engine(), 0, gpu);
  EXPECT_EQ(engine.context().device(), Device::kCUDA);
  const Request request = sampled_request(c, 6, 4, 1.0f);
  const RolloutResult result = engine.generate(request);
  ASSERT_EQ(result.samples.size(), 24u);
  const std::vector<std::vector<float>> trained = trainer_logprobs(gpu, model, params, request, result);
  for (size_t i = 0; i < result.samples.size(); ++i) {
    const Sample& s = result.samples[i];
    ASSERT_EQ(s.logprobs.size(), trained[i].size());
    for (size_t t = 0; t < s.logprobs.size(); ++t) {
      ASSERT_TRUE(std::isfinite(s.logprobs[t])) << "sample " << i << " token " << t;
      EXPECT_EQ(std::memcmp(&s.logprobs[t], &trained[i][t], sizeof(float)), 0)
          << "sample " << i << " token " << t << ": rollout " << s.logprobs[t] << ", trainer " << trained[i][t];
    }
  }
  // The same prompts among others, in another order and another block size: the same tokens and bits.
  Request mixed = sampled_request(c, 6, 4, 1.0f, 100);  // other prompts first
  for (size_t p = 0; p < request.prompts.size(); ++p) {
    mixed.prompts.push_back(request.prompts[p]);
    mixed.prompt_ids.push_back(request.prompt_ids[p]);
  }
  Engine other(model, params, small_engine(3), 0, gpu);
  const RolloutResult again = other.generate(mixed);
  for (size_t i = 0; i < result.samples.size(); ++i) {
    const Sample& x = result.samples[i];
    const Sample& y = again.samples[24 + i];
    ASSERT_EQ(x.tokens, y.tokens) << "sample " << i << " batched with other prompts";
    EXPECT_EQ(std::memcmp(x.logprobs.data(), y.logprobs.data(), x.logprobs.size() * sizeof(float)), 0)
        << "sample " << i << " batched with other prompts";
  }
}

TEST_P(EngineOnCuda, GreedyRolloutAgreesWithTheHostEngine) {
  // cuBLAS (not batch-invariant) and batch-invariant numerics alike: the host's greedy tokens, log-probs to the
  // numerics' rounding (the device's ops sum in other orders than the host's).
  std::string why;
  if (ExecContext::cuda_devices(&why) == 0) GTEST_SKIP() << why;
  const ExecContext gpu = ExecContext::cuda(0);
  const auto& [family, compute] = GetParam();
  const ModelConfig c = small_test_config(family);
  const ParameterStore params = scaled_test_params(c);
  const double tol = compute == DType::kBF16 ? 0.05 : 1e-4;
  for (bool invariant : {true, false}) {
    const Transformer model(c, test_numerics(compute, invariant));
    const Request request = sampled_request(c, 5, 1, 0.0f);
    Engine on_gpu(model, params, small_engine(), 0, gpu), on_cpu(model, params, small_engine(), 0, host());
    const RolloutResult a = on_gpu.generate(request), b = on_cpu.generate(request);
    ASSERT_EQ(a.samples.size(), b.samples.size());
    int same = 0;
    for (size_t i = 0; i < a.samples.size(); ++i) {
      if (a.samples[i].tokens != b.samples[i].tokens) continue;  // a near tie decided otherwise in bf16
      ++same;
      for (size_t t = 0; t < a.samples[i].logprobs.size(); ++t)
        EXPECT_NEAR(a.samples[i].logprobs[t], b.samples[i].logprobs[t], tol)
            << model.numerics().describe() << ": sample " << i << " token " << t;
    }
    // fp32 leaves no near ties to a 1e-6 difference; bf16 at most one of five.
    EXPECT_GE(same, compute == DType::kBF16 ? 4 : 5) << model.numerics().describe();
  }
}

INSTANTIATE_TEST_SUITE_P(Numerics, EngineOnCuda,
                         ::testing::Combine(::testing::ValuesIn(kTestFamilies),
                                            ::testing::Values(DType::kF32, DType::kBF16)),
                         [](const ::testing::TestParamInfo<std::tuple<std::string, DType>>& info) {
                           return std::get<0>(info.param) +
                                  (std::get<1>(info.param) == DType::kBF16 ? "_bf16" : "_fp32");
                         });

// A tf32 engine (config dtype "tf32": fp32 values, an fp32 KV cache, cuBLAS products with TF32 operands) samples on
// the GPU, and its log-probs agree with the tf32 trainer's recomputation on the same GPU to TF32's rounding (not
// bit for bit: not batch-invariant). Each sample says the temperature it is to be scored at.
TEST(EngineOnCuda, ATf32EngineSamplesWhatTheTf32TrainerScores) {
  std::string why;
  if (ExecContext::cuda_devices(&why) == 0) GTEST_SKIP() << why;
  const ExecContext gpu = ExecContext::cuda(0);
  const ModelConfig c = small_test_config(kTestFamilies[0]);
  const ParameterStore params = scaled_test_params(c);
  const Transformer model(c, test_numerics(DType::kTF32, false));
  const Request request = sampled_request(c, 3, 2, 0.8f);
  Engine engine(model, params, small_engine(), 0, gpu);
  const RolloutResult result = engine.generate(request);
  const std::vector<std::vector<float>> want = trainer_logprobs(gpu, model, params, request, result);
  ASSERT_EQ(result.samples.size(), 6u);
  for (size_t i = 0; i < result.samples.size(); ++i) {
    const Sample& s = result.samples[i];
    EXPECT_TRUE(s.scoring == (LogprobScoring{0.8f, Truncation{}})) << s.scoring.describe();
    for (size_t t = 0; t < s.logprobs.size(); ++t) {
      ASSERT_TRUE(std::isfinite(s.logprobs[t])) << "sample " << i << " token " << t;
      EXPECT_NEAR(s.logprobs[t], want[i][t], 1e-2 * std::max(1.0f, std::fabs(want[i][t])))
          << "sample " << i << " token " << t;
    }
  }
}

TEST(EngineOnCuda, NewWeightsAreUsedFromTheNextRequest) {
  // set_weights re-prepares the device copy (the buffers kept): the next request samples from the new weights,
  // the same as an engine built on them, whether the new weights are on the host or already on the GPU.
  std::string why;
  if (ExecContext::cuda_devices(&why) == 0) GTEST_SKIP() << why;
  const ExecContext gpu = ExecContext::cuda(0);
  const ModelConfig c = small_test_config("qwen2");
  const Transformer model(c);
  const ParameterStore first = scaled_test_params(c, 3.0f, 3), second = scaled_test_params(c, 3.0f, 4);
  Engine engine(model, first, small_engine(), 0, gpu);
  const Request request = sampled_request(c, 4, 2, 1.0f);
  engine.generate(request);
  engine.set_weights(second, 1);
  const RolloutResult updated = engine.generate(request);
  Engine fresh(model, second, small_engine(), 1, gpu);
  const RolloutResult want = fresh.generate(request);
  // Weights that arrive on the GPU (a cuda-ipc sync) are prepared from there: the same samples again.
  const ParameterStore second_on_gpu = second.on(gpu);
  engine.set_weights(second_on_gpu, 2);
  const RolloutResult from_device = engine.generate(request);
  for (const RolloutResult* got : {&updated, &from_device})
    for (size_t i = 0; i < want.samples.size(); ++i) {
      EXPECT_EQ(got->samples[i].policy_version, got == &updated ? 1 : 2);
      ASSERT_EQ(got->samples[i].tokens, want.samples[i].tokens) << i;
      EXPECT_EQ(std::memcmp(got->samples[i].logprobs.data(), want.samples[i].logprobs.data(),
                            want.samples[i].logprobs.size() * sizeof(float)),
                0)
          << i;
    }
}

}  // namespace
}  // namespace rlcpp
