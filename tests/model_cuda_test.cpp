// The model on a CUDA context (skipped without a GPU). The training passes: the parameters copied to the device
// (ParameterStore::on), Transformer::forward and backward with every op on the context's stream, against the
// same passes on the host; the two sum in other orders (cuBLAS, the attention kernels), so log-probs, entropy
// and every parameter gradient agree to fp32 rounding, not bit for bit; a bf16 model's forward to bf16
// rounding. The cached decode (the engine's path): KV cache and prepared weights on the device, against the
// device's training forward — the same bits in batch-invariant numerics.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "core/exec_context.h"
#include "model/numerics.h"
#include "model/kv_cache.h"
#include "model/packed_batch.h"
#include "model/parameters.h"
#include "model/transformer.h"
#include "tests/decode_test_support.h"
#include "tests/host_context.h"
#include "tests/test_models.h"

namespace rlcpp {
namespace {

using testing::host;

std::vector<float> on_host(const ExecContext& gpu, const Tensor& t) {
  Tensor h = Tensor::empty(t.shape());
  gpu.copy(t, h);
  return std::vector<float>(h.data<float>(), h.data<float>() + h.numel());
}

// got within tol of want, relative to the largest |want| (a gradient's entries span many magnitudes).
void expect_close(const std::vector<float>& got, const float* want, int64_t n, double tol, const std::string& what) {
  ASSERT_EQ(static_cast<int64_t>(got.size()), n) << what;
  double scale = 1e-30;
  for (int64_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(double(want[i])));
  int misses = 0;
  double worst = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double diff = std::fabs(double(got[static_cast<size_t>(i)]) - want[i]);
    worst = std::max(worst, std::isnan(diff) ? INFINITY : diff);
    if (!(diff <= tol * scale) && ++misses <= 5)
      ADD_FAILURE() << what << "[" << i << "] = " << got[static_cast<size_t>(i)] << " on the GPU, " << want[i]
                    << " on the CPU";
  }
  EXPECT_EQ(misses, 0) << what << ": the largest difference is " << worst / scale << " of the largest |value| "
                       << scale << " (tolerance " << tol << ")";
}

TEST(ParameterStoreOn, ACopyOnTheHostIsDeepAndItsViewsLiveThere) {
  const ModelConfig c = small_test_config("qwen3");
  const ParameterStore params = scaled_test_params(c);
  const ParameterStore copy = params.on(host());
  ASSERT_EQ(copy.numel(), params.numel());
  EXPECT_NE(copy.flat().raw(), params.flat().raw());
  EXPECT_EQ(std::memcmp(copy.flat().raw(), params.flat().raw(), params.flat().nbytes()), 0);
  EXPECT_EQ(copy.get("model.norm.weight").device(), Device::kCPU);
}

TEST(ParameterStoreOn, ACopyOnACudaContextIsDeepAndItsViewsLiveThere) {
  std::string why;
  if (ExecContext::cuda_devices(&why) == 0) GTEST_SKIP() << why;
  const ModelConfig c = small_test_config("qwen3");
  const ParameterStore params = scaled_test_params(c);
  const ExecContext gpu = ExecContext::cuda(0);
  const ParameterStore on_gpu = params.on(gpu);
  EXPECT_EQ(on_gpu.flat().device(), Device::kCUDA);
  EXPECT_EQ(on_gpu.get("model.norm.weight").device(), Device::kCUDA);
  const std::vector<float> back = on_host(gpu, on_gpu.flat());
  EXPECT_EQ(std::memcmp(back.data(), params.flat().raw(), params.flat().nbytes()), 0);
}

class ModelOnCuda : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelOnCuda, TrainingForwardAndBackwardMatchTheCpu) {
  std::string why;
  if (ExecContext::cuda_devices(&why) == 0) GTEST_SKIP() << why;
  const ExecContext gpu = ExecContext::cuda(0);
  const ModelConfig c = small_test_config(GetParam());
  const Transformer model(c);
  const ParameterStore params = scaled_test_params(c);
  const ParameterStore device_params = params.on(gpu);
  std::vector<std::vector<int32_t>> seqs;
  for (int64_t len : {1, 12, 17, 54}) seqs.push_back(random_test_tokens(len, c.vocab_size, 40 + len));
  const PackedBatch batch = PackedBatch::from_sequences(seqs);
  const int64_t n = batch.num_tokens();
  std::vector<float> dlogp(static_cast<size_t>(n)), dentropy(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    dlogp[static_cast<size_t>(i)] = 0.1f * static_cast<float>(i % 7) - 0.3f;
    dentropy[static_cast<size_t>(i)] = 0.05f * static_cast<float>(i % 5) - 0.1f;
  }
  ForwardOptions options;
  options.temperature = 0.8f;
  options.entropy = true;

  Activations cpu_acts, gpu_acts;
  ParameterStore cpu_grads(c);
  model.forward(host(), params, batch, options, cpu_acts);
  model.backward(host(), params, cpu_acts, dlogp.data(), dentropy.data(), cpu_grads);
  ParameterStore gpu_grads = ParameterStore(c).on(gpu);  // zeros
  model.forward(gpu, device_params, batch, options, gpu_acts);
  model.backward(gpu, device_params, gpu_acts, dlogp.data(), dentropy.data(), gpu_grads);
  gpu.synchronize();

  expect_close(on_host(gpu, gpu_acts.logp), cpu_acts.logp.data<float>(), n, 1e-5, "logp");
  expect_close(on_host(gpu, gpu_acts.entropy), cpu_acts.entropy.data<float>(), n, 1e-5, "entropy");
  for (const ParameterInfo& info : params.infos())
    expect_close(on_host(gpu, gpu_grads.get(info.name)), cpu_grads.get(info.name).data<float>(), info.numel(), 1e-4,
                 "gradient of " + info.name);
}

TEST_P(ModelOnCuda, Bf16ForwardAndBackwardMatchTheCpuToBf16Rounding) {
  // A bf16 model: on the host the packed bf16 panels; on the device the same panels and chains (batch-invariant
  // numerics) or cuBLAS's tensor-op math on bf16 operands, all accumulating in fp32 and rounding at the same op
  // boundaries. The other ops sum in other orders, and a value one bf16 ulp (2^-8) apart at an op boundary
  // propagates: log-probs within a few ulps of their scale. The backward's products run on the device's tensor
  // cores with bf16 operands (the incoming gradients rounded too, as under autocast), the host's in fp32 on the
  // same bf16 activations: every gradient within a few bf16 ulps of its largest element.
  std::string why;
  if (ExecContext::cuda_devices(&why) == 0) GTEST_SKIP() << why;
  const ExecContext gpu = ExecContext::cuda(0);
  const ModelConfig c = small_test_config(GetParam());
  for (bool invariant : {true, false}) {
    const ModelNumerics bf16 = test_numerics(DType::kBF16, invariant);
    const Transformer model(c, bf16);
    const ParameterStore params = scaled_test_params(c);
    std::vector<std::vector<int32_t>> seqs;
    for (int64_t len : {12, 17}) seqs.push_back(random_test_tokens(len, c.vocab_size, 60 + len));
    const PackedBatch batch = PackedBatch::from_sequences(seqs);
    const int64_t n = batch.num_tokens();
    std::vector<float> dlogp(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) dlogp[static_cast<size_t>(i)] = 0.1f * static_cast<float>(i % 7) - 0.3f;
    Activations cpu_acts, gpu_acts;
    ParameterStore cpu_grads(c), gpu_grads = ParameterStore(c).on(gpu);
    const ParameterStore device_params = params.on(gpu);
    model.forward(host(), params, batch, ForwardOptions{}, cpu_acts);
    model.backward(host(), params, cpu_acts, dlogp.data(), nullptr, cpu_grads);
    model.forward(gpu, device_params, batch, ForwardOptions{}, gpu_acts);
    model.backward(gpu, device_params, gpu_acts, dlogp.data(), nullptr, gpu_grads);
    expect_close(on_host(gpu, gpu_acts.logp), cpu_acts.logp.data<float>(), n, 4.0 / 256,
                 std::string("bf16 logp, ") + bf16.describe());
    for (const ParameterInfo& info : params.infos())
      expect_close(on_host(gpu, gpu_grads.get(info.name)), cpu_grads.get(info.name).data<float>(), info.numel(),
                   8.0 / 256, "bf16 gradient of " + info.name + ", " + bf16.describe());
  }
}


// The logits after each token of `seq` decoded on ctx from weights prepared there, flattened.
std::vector<float> cached_logits_on(const ExecContext& ctx, const Transformer& model, const ParameterStore& params,
                                    const std::vector<int32_t>& seq, int64_t block_size, size_t prefill) {
  PackedWeights prepared;
  model.prepare_decode_weights(ctx, params, prepared);
  std::vector<float> out;
  for (const std::vector<float>& row : testing::cached_logits(ctx, model, params, seq, block_size, prefill, &prepared))
    out.insert(out.end(), row.begin(), row.end());
  return out;
}

// A tf32 model (config dtype "tf32": a cuda role, not batch-invariant) keeps fp32 values and multiplies them on
// the tensor cores as TF32 operands (10 mantissa bits, fp32 accumulation): its training forward and its cached
// decode are within TF32's rounding of the fp32 model's on the same device (1e-2 of the scale) and not the same
// bits, which shows the products really ran in TF32.
TEST_P(ModelOnCuda, Tf32ForwardAndDecodeAreCloseToFp32ButNotTheSameBits) {
  std::string why;
  if (ExecContext::cuda_devices(&why) == 0) GTEST_SKIP() << why;
  const ExecContext gpu = ExecContext::cuda(0);
  const ModelConfig c = small_test_config(GetParam());
  const Transformer fp32(c, test_numerics(DType::kF32, false)), tf32(c, test_numerics(DType::kTF32, false));
  const ParameterStore params = scaled_test_params(c);
  const ParameterStore device_params = params.on(gpu);
  std::vector<std::vector<int32_t>> seqs;
  for (int64_t len : {12, 17}) seqs.push_back(random_test_tokens(len, c.vocab_size, 80 + len));
  const PackedBatch batch = PackedBatch::from_sequences(seqs);
  const int64_t n = batch.num_tokens();
  Activations fp32_acts, tf32_acts;
  fp32.forward(gpu, device_params, batch, ForwardOptions{}, fp32_acts);
  tf32.forward(gpu, device_params, batch, ForwardOptions{}, tf32_acts);
  const std::vector<float> want = on_host(gpu, fp32_acts.logp), got = on_host(gpu, tf32_acts.logp);
  for (float v : got) ASSERT_TRUE(std::isfinite(v));
  expect_close(got, want.data(), n, 1e-2, "tf32 logp");
  EXPECT_NE(got, want) << "the tf32 forward gave the fp32 forward's bits: its products did not run in TF32";

  const std::vector<float> decoded_fp32 = cached_logits_on(gpu, fp32, params, seqs[1], 4, 5);
  const std::vector<float> decoded_tf32 = cached_logits_on(gpu, tf32, params, seqs[1], 4, 5);
  for (float v : decoded_tf32) ASSERT_TRUE(std::isfinite(v));
  expect_close(decoded_tf32, decoded_fp32.data(), static_cast<int64_t>(decoded_fp32.size()), 1e-2, "tf32 decode");
  EXPECT_NE(decoded_tf32, decoded_fp32);
}

class CachedDecodeOnCuda : public ::testing::TestWithParam<std::tuple<std::string, DType, bool>> {};

TEST_P(CachedDecodeOnCuda, MatchesTheTrainingForwardOnTheDevice) {
  // The engine's path on the device — KV cache there, weights prepared there, prefill and decode steps — against
  // the training forward on the same device: in batch-invariant numerics the same bits (every op row by row,
  // the products the packed kernel's chains), else to the numerics' rounding (cuBLAS sums M rows differently
  // from one); and against the host's decode to the rounding of the other ops' sum orders.
  std::string why;
  if (ExecContext::cuda_devices(&why) == 0) GTEST_SKIP() << why;
  const ExecContext gpu = ExecContext::cuda(0);
  const auto& [family, compute, invariant] = GetParam();
  const ModelConfig c = small_test_config(family);
  const ModelNumerics numerics = test_numerics(compute, invariant);
  const Transformer model(c, numerics);
  const ParameterStore params = scaled_test_params(c);
  const double tol = compute == DType::kBF16 ? 4.0 / 256 : 1e-4;
  for (int64_t len : {17, 54}) {
    const std::vector<int32_t> seq = random_test_tokens(len, c.vocab_size, 80 + len);
    Activations acts;
    model.forward(gpu, params.on(gpu), PackedBatch::from_sequences({seq}), ForwardOptions{}, acts);
    const std::vector<float> trained = on_host(gpu, acts.logits);
    for (int64_t block_size : {1, 16}) {
      for (size_t prefill : {size_t{1}, static_cast<size_t>(len / 2)}) {
        const std::string what = numerics.describe() + ", length " + std::to_string(len) + ", block " +
                                 std::to_string(block_size) + ", prefill " + std::to_string(prefill);
        const std::vector<float> decoded = cached_logits_on(gpu, model, params, seq, block_size, prefill);
        ASSERT_EQ(decoded.size(), trained.size()) << what;
        if (invariant)
          EXPECT_EQ(std::memcmp(decoded.data(), trained.data(), trained.size() * sizeof(float)), 0)
              << "decode and training forward differ in bits, " << what;
        else
          expect_close(decoded, trained.data(), static_cast<int64_t>(trained.size()), tol, what);
        const std::vector<float> on_cpu = cached_logits_on(host(), model, params, seq, block_size, prefill);
        expect_close(decoded, on_cpu.data(), static_cast<int64_t>(on_cpu.size()), tol, "vs the host, " + what);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Numerics, CachedDecodeOnCuda,
    ::testing::Combine(::testing::ValuesIn(kTestFamilies), ::testing::Values(DType::kF32, DType::kBF16),
                       ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<std::string, DType, bool>>& info) {
      return std::get<0>(info.param) + "_" + (std::get<1>(info.param) == DType::kBF16 ? "bf16" : "fp32") +
             (std::get<2>(info.param) ? "_invariant" : "_cublas");
    });

TEST(CachedDecodeOnCuda, AQuantisedRolloutDecodesOnTheDeviceAsOnTheHost) {
  // int8 weights (rollout.quantization): the codes and scales of the CPU's reference, moved to the device; the
  // batch-invariant decode there multiplies the same panels in the same chains as the host's.
  std::string why;
  if (ExecContext::cuda_devices(&why) == 0) GTEST_SKIP() << why;
  const ExecContext gpu = ExecContext::cuda(0);
  const ModelConfig c = small_test_config("qwen2");
  for (bool invariant : {true, false}) {
    ModelNumerics int8;
    int8.linear_weights = DType::kInt8;
    int8.batch_invariant = invariant;
    const Transformer model(c, int8);
    const ParameterStore params = scaled_test_params(c);
    const std::vector<int32_t> seq = random_test_tokens(17, c.vocab_size, 91);
    const std::vector<float> decoded = cached_logits_on(gpu, model, params, seq, 16, 8);
    const std::vector<float> on_cpu = cached_logits_on(host(), model, params, seq, 16, 8);
    expect_close(decoded, on_cpu.data(), static_cast<int64_t>(on_cpu.size()), 1e-4, int8.describe());
  }
}

TEST(CachedDecodeOnCuda, UnpreparedWeightsAreRefusedNamingTheFix) {
  std::string why;
  if (ExecContext::cuda_devices(&why) == 0) GTEST_SKIP() << why;
  const ExecContext gpu = ExecContext::cuda(0);
  const ModelConfig c = small_test_config("qwen2");
  const Transformer model(c);
  const ParameterStore params = scaled_test_params(c);
  KVCache cache(c, 2, 16, DType::kF32, gpu);
  const CachedStep step = testing::single_token_step(3);
  try {
    model.forward_cached(gpu, params, step, cache, nullptr);
    ADD_FAILURE() << "a device decode ran without prepared weights";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("prepare_decode_weights"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Families, ModelOnCuda, ::testing::ValuesIn(kTestFamilies),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(ModelOnCuda, AHostContextRefusesDeviceParametersNamingTheTensor) {
  // Parameters on another device than the context's are named at the first op.
  const ModelConfig c = small_test_config("qwen2");
  const Transformer model(c);
  const ParameterStore params(c);
  const PackedBatch batch = PackedBatch::from_sequences({random_test_tokens(5, c.vocab_size, 1)});
  Activations acts;
  std::string why;
  if (ExecContext::cuda_devices(&why) == 0) GTEST_SKIP() << why;
  const ParameterStore device_params = params.on(ExecContext::cuda(0));
  try {
    model.forward(host(), device_params, batch, ForwardOptions{}, acts);
    ADD_FAILURE() << "forward ran device parameters on the host context";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("is on cuda but the op runs on cpu"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rlcpp
