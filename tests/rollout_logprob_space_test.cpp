// logprob_space "sampled": the sampler reports, and the trainer's forward scores, log p(token) under the top-k /
// top-p truncated distribution the token was drawn from. Checked against the sampler's own distribution (an
// independent double-precision definition), bit for bit between engine and trainer, and its backward against
// finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/philox.h"
#include "kernels/ops.h"
#include "model/init.h"
#include "rollout/engine.h"
#include "rollout/sampler.h"
#include "tests/host_context.h"
#include "tests/test_models.h"

namespace rlcpp {
namespace {

using testing::host;

std::vector<float> random_logits(int64_t v, uint64_t seed, float scale) {
  PhiloxStream rng(seed, 0);
  std::vector<float> l(static_cast<size_t>(v));
  for (auto& x : l) x = scale * static_cast<float>(rng.uniform() * 2 - 1);
  return l;
}

TEST(LogprobSpace, SampledLogprobIsTheLogOfTheSamplersTruncatedProbability) {
  const int64_t V = 97;
  Sampler sampler(V);
  for (const auto& [top_k, top_p] : std::vector<std::pair<int64_t, float>>{{5, 1.0f}, {0, 0.8f}, {20, 0.6f}}) {
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      const std::vector<float> logits = random_logits(V, seed, 4.0f);
      SamplingParams p;
      p.temperature = 0.7f;
      p.top_k = top_k;
      p.top_p = top_p;
      p.logprob_space = "sampled";
      const SampledToken t = sampler.sample(logits.data(), p, SampleKey{seed, 3, 0, 9});
      const std::vector<double> dist = sampler.target_distribution(logits.data(), p);
      ASSERT_GT(dist[static_cast<size_t>(t.token)], 0.0);
      EXPECT_NEAR(t.logprob, std::log(dist[static_cast<size_t>(t.token)]), 2e-6)
          << "top_k " << top_k << " top_p " << top_p << " seed " << seed;
      p.logprob_space = "full";
      const SampledToken full = sampler.sample(logits.data(), p, SampleKey{seed, 3, 0, 9});
      EXPECT_EQ(full.token, t.token);  // the same draw; only what is reported differs
      EXPECT_LT(full.logprob, t.logprob) << "the truncated distribution puts more mass on a kept token";
    }
  }
}

class LogprobSpaceByFamily : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(Families, LogprobSpaceByFamily, ::testing::ValuesIn(kTestFamilies),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST_P(LogprobSpaceByFamily, EngineAndTrainerAgreeBitForBitInTheSampledSpace) {
  const ModelConfig cfg = small_test_config(GetParam());
  const ParameterStore params = scaled_test_params(cfg);
  for (DType dt : {DType::kF32, DType::kBF16}) {
    ModelNumerics n;
    n.compute = dt;
    n.linear_weights = n.compute_format();
    const Transformer model(cfg, n);
    EngineConfig ec;
    ec.max_num_batched_tokens = 1024;
    ec.max_num_seqs = 16;
    Engine engine(model, params, ec);
    Request req;
    for (int p = 0; p < 3; ++p) req.prompts.push_back(random_test_tokens(4 + 5 * p, cfg.vocab_size, 4 + p));
    req.n = 4;
    req.sampling.temperature = 0.9f;
    req.sampling.top_k = 6;
    req.sampling.top_p = 0.85f;
    req.sampling.max_new_tokens = 10;
    req.sampling.ignore_eos = true;
    req.sampling.seed = 11;
    req.sampling.logprob_space = "sampled";
    const RolloutResult out = engine.generate(req);
    ForwardOptions fo;
    fo.temperature = req.sampling.temperature;
    fo.truncation = Truncation{req.sampling.top_k, req.sampling.top_p};
    int64_t truncated = 0;
    for (const Sample& s : out.samples) {
      std::vector<int32_t> full = req.prompts[static_cast<size_t>(s.prompt_index)];
      const size_t len = full.size();
      full.insert(full.end(), s.tokens.begin(), s.tokens.end());
      Activations acts, plain;
      model.forward(host(), params, PackedBatch::from_sequences({full}), fo, acts);
      model.forward(host(), params, PackedBatch::from_sequences({full}), ForwardOptions{fo.temperature}, plain);
      for (size_t t = 0; t < s.tokens.size(); ++t) {
        const float want = acts.logp.data<float>()[len - 1 + t];
        ASSERT_EQ(std::memcmp(&s.logprobs[t], &want, sizeof(float)), 0)
            << compute_dtype_name(dt) << ": engine " << s.logprobs[t] << " trainer " << want;
        truncated += plain.logp.data<float>()[len - 1 + t] < want;  // the full space scores less mass
      }
    }
    EXPECT_GT(truncated, 0) << "no position had its distribution truncated";
  }
}

TEST(LogprobSpace, TruncatedBackwardMatchesFiniteDifferences) {
  const int64_t N = 3, V = 23;
  Tensor logits = Tensor::empty({N, V}), targets = Tensor::empty({N}, DType::kI32);
  for (int64_t i = 0; i < N; ++i) {
    const std::vector<float> row = random_logits(V, 50 + i, 3.0f);
    std::copy(row.begin(), row.end(), logits.data<float>() + i * V);
  }
  const Truncation t{8, 0.9f};
  // Targets: each row's most likely token and a kept one further down (the kept set is locally constant).
  TruncationScratch s;
  for (int64_t i = 0; i < N; ++i) {
    const KeptSet k = truncation_kept_set(logits.data<float>() + i * V, V, 0.8f, t, s);
    targets.data<int32_t>()[i] = s.order[static_cast<size_t>(i % k.kept)];
  }
  Tensor logp = Tensor::empty({N}), lse = Tensor::empty({N}), dlogits = Tensor::empty({N, V});
  Tensor dlogp = Tensor::empty({N});
  for (int64_t i = 0; i < N; ++i) dlogp.data<float>()[i] = 0.5f + static_cast<float>(i);
  ops::logprob_truncated_forward(host(), logits, targets, 0.8f, t, logp, lse);
  ops::logprob_truncated_backward(host(), dlogp, logits, targets, 0.8f, t, lse, dlogits);
  auto loss = [&](const Tensor& l) {
    Tensor lp = Tensor::empty({N}), ls = Tensor::empty({N});
    ops::logprob_truncated_forward(host(), l, targets, 0.8f, t, lp, ls);
    double sum = 0;
    for (int64_t i = 0; i < N; ++i) sum += static_cast<double>(dlogp.data<float>()[i]) * lp.data<float>()[i];
    return sum;
  };
  int64_t zero = 0;
  for (int64_t j = 0; j < N * V; ++j) {
    Tensor plus = logits.clone(), minus = logits.clone();
    const float h = 1e-3f;
    plus.data<float>()[j] += h;
    minus.data<float>()[j] -= h;
    const double numeric = (loss(plus) - loss(minus)) / (2 * h);
    EXPECT_NEAR(dlogits.data<float>()[j], numeric, 2e-3) << "logit " << j;
    zero += dlogits.data<float>()[j] == 0.0f;
  }
  EXPECT_GT(zero, 0);  // tokens outside the kept set get no gradient
}

// The truncated log-prob kernels throw on a row of non-finite logits from inside their OpenMP region (64 rows x
// 1024 logits run on every thread; 2 x 23 on one): an rlcpp::Error out of the op, not std::terminate.
TEST(LogprobSpace, NonFiniteLogitsAreAnErrorOutOfTheTruncatedKernels) {
  for (const auto& [N, V] : std::vector<std::pair<int64_t, int64_t>>{{64, 1024}, {2, 23}}) {
    for (const float bad : {NAN, INFINITY}) {
      Tensor logits = Tensor::empty({N, V}), targets = Tensor::empty({N}, DType::kI32);
      for (int64_t i = 0; i < N; ++i) {
        const std::vector<float> row = random_logits(V, 70 + i, 3.0f);
        std::copy(row.begin(), row.end(), logits.data<float>() + i * V);
        targets.data<int32_t>()[i] = static_cast<int32_t>(i % V);
      }
      logits.data<float>()[(N - 1) * V + 5] = bad;  // the last row: a thread other than the first when parallel
      Tensor logp = Tensor::empty({N}), lse = Tensor::zeros({N}), dlogp = Tensor::zeros({N}),
             dlogits = Tensor::empty({N, V});
      const Truncation t{8, 0.9f};
      const std::string where = std::to_string(N) + " x " + std::to_string(V) + " with " + std::to_string(bad);
      try {
        ops::logprob_truncated_forward(host(), logits, targets, 0.8f, t, logp, lse);
        ADD_FAILURE() << where << ": forward accepted non-finite logits";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("non-finite logits"), std::string::npos) << where << ": " << e.what();
      }
      try {
        ops::logprob_truncated_backward(host(), dlogp, logits, targets, 0.8f, t, lse, dlogits);
        ADD_FAILURE() << where << ": backward accepted non-finite logits";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("non-finite logits"), std::string::npos) << where << ": " << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace rlcpp
