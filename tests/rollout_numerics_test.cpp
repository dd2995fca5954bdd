// The rollout engine in each numerics (model/numerics.h): in the trainer's numerics its log-probs are the
// training forward's bit for bit, whatever the dtype or quantisation; each source of mismatch switched on alone
// moves them by a dtype-sized amount; the KV cache's bytes follow the dtype; and numerics.batch_invariant
// decides whether a prompt's log-probs depend on the batch it is decoded in.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <tuple>
#include <vector>

#include "core/philox.h"
#include "model/init.h"
#include "model/weight_error.h"
#include "rollout/engine.h"
#include "tests/host_context.h"
#include "tests/test_models.h"

namespace rlcpp {
namespace {

using testing::host;

EngineConfig engine_config() {
  EngineConfig c;
  c.block_size = 3;
  c.max_num_seqs = 512;
  c.max_num_batched_tokens = 8192;
  return c;
}

ModelNumerics numerics(DType compute, DType linear = DType::kF32, bool invariant = true) {
  ModelNumerics n;
  n.compute = compute;
  n.linear_weights = is_quantized(linear) ? linear : ModelNumerics{compute}.compute_format();
  n.batch_invariant = invariant;
  return n;
}

// The trainer's log-probs of every sample's response under `model`.
std::vector<std::vector<float>> trainer_logp(const Transformer& model, const ParameterStore& params,
                                             const Request& req, const RolloutResult& out) {
  std::vector<std::vector<float>> logp;
  for (const Sample& s : out.samples) {
    std::vector<int32_t> full = req.prompts[static_cast<size_t>(s.prompt_index)];
    const int64_t len = static_cast<int64_t>(full.size());
    full.insert(full.end(), s.tokens.begin(), s.tokens.end());
    Activations acts;
    model.forward(host(), params, PackedBatch::from_sequences({full}), ForwardOptions{req.sampling.temperature}, acts);
    logp.emplace_back(acts.logp.data<float>() + len - 1, acts.logp.data<float>() + len - 1 + s.tokens.size());
  }
  return logp;
}

Request group_request(const ModelConfig& cfg) {
  Request req;
  for (int p = 0; p < 3; ++p) req.prompts.push_back(random_test_tokens(5 + 11 * p, cfg.vocab_size, 20 + p));
  req.n = 3;
  req.sampling.max_new_tokens = 12;
  req.sampling.ignore_eos = true;
  req.sampling.temperature = 0.8f;
  req.sampling.seed = 7;
  return req;
}

// Parameterised by (numerics, model family): every family's layer body rounds at its own op boundaries in the
// engine exactly as in the trainer.
class EngineNumerics : public ::testing::TestWithParam<std::tuple<ModelNumerics, std::string>> {
 protected:
  ModelNumerics numerics_param() const { return std::get<0>(GetParam()); }
  ModelConfig model_config() const { return small_test_config(std::get<1>(GetParam())); }
};

TEST_P(EngineNumerics, EqualsTheTrainingForwardInTheSameNumericsBitForBit) {
  const ModelConfig cfg = model_config();
  const ParameterStore params = scaled_test_params(cfg);
  const Transformer model(cfg, numerics_param());
  Engine engine(model, params, engine_config());
  const Request req = group_request(cfg);
  const RolloutResult out = engine.generate(req);
  const auto want = trainer_logp(model, params, req, out);
  for (size_t i = 0; i < out.samples.size(); ++i)
    for (size_t t = 0; t < want[i].size(); ++t) {
      ASSERT_TRUE(std::isfinite(out.samples[i].logprobs[t]));
      ASSERT_EQ(std::memcmp(&out.samples[i].logprobs[t], &want[i][t], sizeof(float)), 0)
          << numerics_param().describe() << " sample " << i << " token " << t << ": engine "
          << out.samples[i].logprobs[t] << " trainer " << want[i][t];
    }
  // The KV cache is stored in the compute dtype.
  const int64_t bytes = numerics_param().compute == DType::kF32 ? 4 : 2;
  EXPECT_EQ(engine.kv_bytes_per_token(), cfg.kv_bytes_per_token(bytes));
}

// Samples of `a` and `b` (tokens and log-prob bits) are the same.
void expect_same_bits(const RolloutResult& a, const RolloutResult& b, const std::string& what) {
  ASSERT_EQ(a.samples.size(), b.samples.size()) << what;
  for (size_t i = 0; i < a.samples.size(); ++i) {
    EXPECT_EQ(a.samples[i].tokens, b.samples[i].tokens) << what << " sample " << i;
    ASSERT_EQ(a.samples[i].logprobs.size(), b.samples[i].logprobs.size()) << what << " sample " << i;
    EXPECT_EQ(std::memcmp(a.samples[i].logprobs.data(), b.samples[i].logprobs.data(),
                          a.samples[i].logprobs.size() * sizeof(float)),
              0)
        << what << " sample " << i;
  }
}

// `n`, and `n` not batch-invariant (the OpenBLAS decode, which prepares its weights otherwise).
std::vector<ModelNumerics> with_the_blas_decode(ModelNumerics n) {
  ModelNumerics blas = n;
  blas.batch_invariant = false;
  return {n, blas};
}

// An engine that takes its weights (a worker's received version, a served checkpoint) prepares them
// self-contained and releases the fp32 store: the same samples bit for bit as an engine reading the parameters,
// in fewer bytes — a bf16/fp16 engine's weights in under 0.6x the fp32 parameters' bytes — and the same after the
// next version. The not-batch-invariant decode keeps its prepared copy (bf16) or the store itself (fp32).
TEST_P(EngineNumerics, AnEngineTakingItsWeightsSamplesTheSameBitsAndHoldsThemInTheComputeDtype) {
  const ModelConfig cfg = model_config();
  const Request req = group_request(cfg);
  for (const ModelNumerics& n : with_the_blas_decode(numerics_param())) {
    const std::string what = n.describe();
    const ParameterStore params = scaled_test_params(cfg), next = scaled_test_params(cfg, 0.5f);
    const Transformer model(cfg, n);
    Engine reading(model, params, engine_config()), owning(model, params, engine_config());
    owning.take_weights(params.clone(), 0);
    expect_same_bits(reading.generate(req), owning.generate(req), what + ", version 0");
    const int64_t fp32_bytes = params.numel() * 4;
    if (n.batch_invariant || n.compute != DType::kF32 || is_quantized(n.linear_weights))
      EXPECT_LT(owning.weight_bytes(), reading.weight_bytes()) << what;
    else
      EXPECT_EQ(owning.weight_bytes(), fp32_bytes) << what << ": the fp32 OpenBLAS decode reads the store itself";
    if (n.batch_invariant && n.compute != DType::kF32)
      EXPECT_LT(static_cast<double>(owning.weight_bytes()), 0.6 * static_cast<double>(fp32_bytes))
          << what << ": " << owning.weight_bytes() << " bytes of weights, the fp32 parameters " << fp32_bytes;
    reading.set_weights(next, 1);
    owning.take_weights(next.clone(), 1);
    expect_same_bits(reading.generate(req), owning.generate(req), what + ", version 1");
  }
}

// An engine taking a copy of a buffer its owner goes on updating (the async pipeline's colocated engine): it
// samples version 0 bit for bit after the buffer has changed, holds what take_weights would hold, and the next
// copy gives version 1's samples. The fp32 OpenBLAS decode, which reads the store, keeps a copy of it.
TEST_P(EngineNumerics, AnEngineTakingACopySamplesItsVersionWhileTheBufferChanges) {
  const ModelConfig cfg = model_config();
  const Request req = group_request(cfg);
  for (const ModelNumerics& n : with_the_blas_decode(numerics_param())) {
    const std::string what = n.describe();
    const ParameterStore v0 = scaled_test_params(cfg), v1 = scaled_test_params(cfg, 0.5f);
    ParameterStore trainer = v0.clone();
    const Transformer model(cfg, n);
    Engine reading(model, v0, engine_config()), owning(model, v0, engine_config()),
        copying(model, trainer, engine_config());
    owning.take_weights(v0.clone(), 0);
    copying.take_copy_of(trainer, 0);
    std::memcpy(trainer.flat().data<float>(), v1.flat().data<float>(), v1.flat().nbytes());
    expect_same_bits(reading.generate(req), copying.generate(req), what + ", version 0 after the buffer changed");
    EXPECT_EQ(copying.weight_bytes(), owning.weight_bytes()) << what;
    reading.set_weights(v1, 1);
    copying.take_copy_of(trainer, 1);
    expect_same_bits(reading.generate(req), copying.generate(req), what + ", version 1");
  }
}

// Against the fp32 trainer each source alone moves the log-probs by about its precision: more than 0, less than a
// bound that a wrong kernel (e.g. a transposed panel) would exceed by orders of magnitude.
class EngineNumericsVsFp32 : public EngineNumerics {};

TEST_P(EngineNumericsVsFp32, DiffersFromTheFp32TrainerByItsPrecision) {
  const ModelNumerics n = numerics_param();
  const ModelConfig cfg = model_config();
  const ParameterStore params = scaled_test_params(cfg, 1.0f);
  const Transformer model(cfg, n), fp32(cfg);
  Engine engine(model, params, engine_config());
  const Request req = group_request(cfg);
  const RolloutResult out = engine.generate(req);
  const auto want = trainer_logp(fp32, params, req, out);
  double max_diff = 0;
  for (size_t i = 0; i < out.samples.size(); ++i)
    for (size_t t = 0; t < want[i].size(); ++t)
      max_diff = std::max(max_diff, std::fabs(static_cast<double>(out.samples[i].logprobs[t]) - want[i][t]));
  // Precision of the weights the engine computes with: fp16 2^-11, bf16 2^-8, int8 ~1/254 of the channel max,
  // e4m3 2^-4 relative; the log-probs move by a few times that at this size.
  const double bound = is_quantized(n.linear_weights) ? 0.5 : n.compute == DType::kBF16 ? 0.1 : 0.02;
  EXPECT_GT(max_diff, 0.0) << n.describe();
  EXPECT_LT(max_diff, bound) << n.describe();
  const WeightError e = prepared_weight_error(model, params);
  EXPECT_GT(e.rel_rms, 0.0);
  EXPECT_LT(e.rel_rms, n.linear_weights == DType::kFp8E4M3 ? 0.05 : 0.01) << n.describe();
  // Packed 16 rows (one panel) at a time, the matrices give the whole matrices' error: the scales are per channel.
  const WeightError blocks = prepared_weight_error(model, params, 16);
  const WeightError whole = prepared_weight_error(model, params, 1 << 20);
  EXPECT_EQ(blocks.max_abs, whole.max_abs) << n.describe();
  EXPECT_EQ(blocks.rel_rms, whole.rel_rms) << n.describe();
  EXPECT_EQ(blocks.weights, whole.weights) << n.describe();
}

std::string numerics_name(const ::testing::TestParamInfo<std::tuple<ModelNumerics, std::string>>& info) {
  const ModelNumerics& n = std::get<0>(info.param);
  std::string s = compute_dtype_name(n.compute);
  if (is_quantized(n.linear_weights)) s += std::string("_") + precision_name(n.linear_weights);
  return s + "_" + std::get<1>(info.param);
}

const ModelNumerics kOtherNumerics[] = {numerics(DType::kBF16), numerics(DType::kF16),
                                        numerics(DType::kF32, DType::kInt8),
                                        numerics(DType::kBF16, DType::kFp8E4M3),
                                        numerics(DType::kF16, DType::kInt8)};

INSTANTIATE_TEST_SUITE_P(Numerics, EngineNumerics,
                         ::testing::Combine(::testing::Values(numerics(DType::kF32), kOtherNumerics[0],
                                                              kOtherNumerics[1], kOtherNumerics[2],
                                                              kOtherNumerics[3], kOtherNumerics[4]),
                                            ::testing::ValuesIn(kTestFamilies)),
                         numerics_name);
INSTANTIATE_TEST_SUITE_P(Numerics, EngineNumericsVsFp32,
                         ::testing::Combine(::testing::ValuesIn(kOtherNumerics), ::testing::ValuesIn(kTestFamilies)),
                         numerics_name);

// Greedy samples of prompts 0..6 decoded each alone, all 7 in one batch, and among 512 prompts.
std::vector<RolloutResult> decode_by_batch(const Transformer& model, const ParameterStore& params,
                                           const ModelConfig& cfg) {
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t p = 0; p < 512; ++p) prompts.push_back(random_test_tokens(9, cfg.vocab_size, 100 + p));
  auto decode = [&](int64_t begin, int64_t count) {
    Engine engine(model, params, engine_config());
    Request req;
    req.prompts.assign(prompts.begin() + begin, prompts.begin() + begin + count);
    req.n = 1;
    req.sampling.max_new_tokens = 40;
    req.sampling.ignore_eos = true;
    req.sampling.temperature = 0;  // greedy: the same tokens while the log-probs stay close
    return engine.generate(req);
  };
  RolloutResult alone;
  for (int64_t p = 0; p < 7; ++p) alone.samples.push_back(decode(p, 1).samples[0]);
  return {alone, decode(0, 7), decode(0, 512)};
}

TEST(EngineBatchInvariance, OnlyTheInvariantEngineGivesTheSameLogprobsInEveryBatch) {
  // W1's widths: OpenBLAS's blocking at these sizes sums a row differently in a batch of 1 than in larger ones.
  ModelConfig cfg = small_test_config("llama");
  cfg.hidden_size = 128;
  cfg.intermediate_size = 352;
  const ParameterStore params = scaled_test_params(cfg, 1.0f);
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (bool invariant : {true, false}) {
      const auto runs = decode_by_batch(Transformer(cfg, numerics(dt, DType::kF32, invariant)), params, cfg);
      int64_t compared = 0, differing = 0;
      double max_diff = 0;
      for (size_t b = 1; b < runs.size(); ++b)
        for (size_t p = 0; p < 7; ++p) {
          const Sample &x = runs[0].samples[p], &y = runs[b].samples[p];
          for (size_t t = 0; t < x.tokens.size() && x.tokens[t] == y.tokens[t]; ++t) {
            ++compared;
            differing += std::memcmp(&x.logprobs[t], &y.logprobs[t], sizeof(float)) != 0;
            max_diff = std::max(max_diff, std::fabs(static_cast<double>(x.logprobs[t]) - y.logprobs[t]));
          }
        }
      const std::string what = std::string(compute_dtype_name(dt)) + (invariant ? " invariant" : " OpenBLAS");
      EXPECT_GT(compared, 7 * 2 * 20) << what;
      if (invariant) {
        EXPECT_EQ(differing, 0) << what << ": max |dlogp| " << max_diff;
        EXPECT_EQ(compared, 7 * 2 * 40) << what << ": greedy tokens diverged";
      } else {
        EXPECT_GT(differing, 0) << what << ": OpenBLAS gave every batch the same bits";
        EXPECT_LT(max_diff, dt == DType::kF32 ? 1e-4 : 0.1) << what;
      }
    }
  }
}

TEST(EngineNumericsConfig, BadNamesAreErrorsNamingTheKeyAndChoices) {
  try {
    make_numerics("bf32", "none", true, "rollout.dtype", "rollout.quantization");
    FAIL() << "accepted dtype bf32";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rollout.dtype"), std::string::npos) << what;
    EXPECT_NE(what.find("fp32, tf32, bf16, fp16"), std::string::npos) << what;
  }
  try {
    make_numerics("bf16", "int4", true, "rollout.dtype", "rollout.quantization");
    FAIL() << "accepted quantization int4";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rollout.quantization"), std::string::npos) << what;
    EXPECT_NE(what.find("none, int8, fp8_e4m3"), std::string::npos) << what;
  }
  ModelNumerics bad;
  bad.compute = DType::kBF16;
  bad.linear_weights = DType::kF16;
  EXPECT_THROW(Transformer(small_test_config(), bad), Error);
}

}  // namespace
}  // namespace rlcpp
