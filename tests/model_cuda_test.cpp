// The model's training passes on a CUDA context (skipped without a GPU): the parameters copied to the device
// (ParameterStore::on), Transformer::forward and backward with every op on the context's stream, against the
// same passes on the host. The two sum in other orders (cuBLAS, the attention kernels), so log-probs, entropy
// and every parameter gradient agree to fp32 rounding, not bit for bit; a bf16 model's forward (tensor-op bf16
// products on the device, packed bf16 panels on the host) to bf16 rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/exec_context.h"
#include "model/numerics.h"
#include "model/packed_batch.h"
#include "model/parameters.h"
#include "model/transformer.h"
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
  for (int64_t i = 0; i < n; ++i)
    if (!(std::fabs(double(got[static_cast<size_t>(i)]) - want[i]) <= tol * scale) && ++misses <= 5)
      ADD_FAILURE() << what << "[" << i << "] = " << got[static_cast<size_t>(i)] << " on the GPU, " << want[i]
                    << " on the CPU";
  EXPECT_EQ(misses, 0) << what;
}

TEST(ParameterStoreOn, ACopyOnAContextIsDeepAndItsViewsLiveThere) {
  const ModelConfig c = small_test_config("qwen3");
  const ParameterStore params = scaled_test_params(c);
  const ParameterStore copy = params.on(host());
  ASSERT_EQ(copy.numel(), params.numel());
  EXPECT_NE(copy.flat().raw(), params.flat().raw());
  EXPECT_EQ(std::memcmp(copy.flat().raw(), params.flat().raw(), params.flat().nbytes()), 0);
  EXPECT_EQ(copy.get("model.norm.weight").device(), Device::kCPU);
  std::string why;
  if (ExecContext::cuda_devices(&why) == 0) return;  // the device half below needs a GPU
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

TEST_P(ModelOnCuda, Bf16ForwardMatchesTheCpuToBf16Rounding) {
  // A bf16 model: on the host the packed bf16 panels, on the device cuBLAS's tensor-op math on bf16 operands,
  // both accumulating in fp32 and rounding at the same op boundaries. Only the sums' order differs, and a
  // value one bf16 ulp (2^-8) apart at an op boundary propagates: log-probs within a few ulps of their scale.
  std::string why;
  if (ExecContext::cuda_devices(&why) == 0) GTEST_SKIP() << why;
  const ExecContext gpu = ExecContext::cuda(0);
  const ModelConfig c = small_test_config(GetParam());
  ModelNumerics bf16;
  bf16.compute = DType::kBF16;
  bf16.linear_weights = WeightFormat::kBF16;
  const Transformer model(c, bf16);
  const ParameterStore params = scaled_test_params(c);
  std::vector<std::vector<int32_t>> seqs;
  for (int64_t len : {12, 17}) seqs.push_back(random_test_tokens(len, c.vocab_size, 60 + len));
  const PackedBatch batch = PackedBatch::from_sequences(seqs);
  Activations cpu_acts, gpu_acts;
  model.forward(host(), params, batch, ForwardOptions{}, cpu_acts);
  model.forward(gpu, params.on(gpu), batch, ForwardOptions{}, gpu_acts);
  expect_close(on_host(gpu, gpu_acts.logp), cpu_acts.logp.data<float>(), batch.num_tokens(), 4.0 / 256, "bf16 logp");
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
