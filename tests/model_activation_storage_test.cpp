// A bf16/fp16 model keeps its training activations in that dtype (model/transformer.h LayerActivations): the
// kept tensors are of the compute dtype, take about half the bytes of fp32's, and the values computed from them
// are unchanged — the training forward still gives the cached decode's logits bit for bit (the decode keeps no
// activations), and the bit-exact and golden suites hold the rest. A forward that no backward follows
// (ForwardOptions::keep_activations = false) keeps nothing and gives the same bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "model/transformer.h"
#include "tests/decode_test_support.h"
#include "tests/host_context.h"
#include "tests/test_models.h"

namespace rlcpp {
namespace {

using testing::host;

ModelNumerics numerics_of(DType compute) {
  ModelNumerics n;
  n.compute = compute;
  n.linear_weights = compute;
  return n;
}

// Six sequences of 40..60 tokens: ~300 rows, so the CPU executor runs each layer in several row chunks.
std::vector<std::vector<int32_t>> test_sequences(int64_t vocab) {
  std::vector<std::vector<int32_t>> seqs;
  for (int64_t s = 0; s < 6; ++s) seqs.push_back(random_test_tokens(40 + 4 * s, vocab, 100 + s));
  return seqs;
}

size_t kept_bytes(const Activations& acts) {
  size_t bytes = 0;
  for (const LayerActivations& A : acts.layers)
    for (const Tensor* t : {&A.x, &A.q, &A.k, &A.v, &A.q_pre, &A.k_pre, &A.q_rstd, &A.k_rstd, &A.att, &A.lse, &A.h,
                            &A.gate_up})
      if (t->defined()) bytes += t->nbytes();
  return bytes;
}

class ActivationStorage : public ::testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(Families, ActivationStorage, ::testing::ValuesIn(kTestFamilies),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST_P(ActivationStorage, Bf16ModelKeepsItsActivationsInBf16InUnderSixTenthsOfFp32sBytes) {
  const ModelConfig cfg = small_test_config(GetParam());
  const ParameterStore params = scaled_test_params(cfg, 1.0f);
  const PackedBatch batch = PackedBatch::from_sequences(test_sequences(cfg.vocab_size));
  const Transformer bf16(cfg, numerics_of(DType::kBF16)), fp32(cfg);
  Activations a16, a32;
  bf16.forward(host(), params, batch, ForwardOptions{}, a16);
  fp32.forward(host(), params, batch, ForwardOptions{}, a32);
  ASSERT_GT(a16.chunks.size(), 1u);  // the chunks' rows land at their offsets in the kept tensors
  for (const LayerActivations& A : a16.layers) {
    for (const Tensor* t : {&A.x, &A.q, &A.k, &A.v, &A.att, &A.h, &A.gate_up}) EXPECT_EQ(t->dtype(), DType::kBF16);
    if (cfg.has_qk_norm()) {
      EXPECT_EQ(A.q_pre.dtype(), DType::kBF16);
      EXPECT_EQ(A.k_pre.dtype(), DType::kBF16);
      EXPECT_EQ(A.q_rstd.dtype(), DType::kF32);
    }
    EXPECT_EQ(A.lse.dtype(), DType::kF32);
  }
  EXPECT_EQ(a16.x_final.dtype(), DType::kF32);
  for (const LayerActivations& A : a32.layers) EXPECT_EQ(A.x.dtype(), DType::kF32);
  EXPECT_LT(static_cast<double>(kept_bytes(a16)), 0.6 * static_cast<double>(kept_bytes(a32)))
      << kept_bytes(a16) << " bytes in bf16, " << kept_bytes(a32) << " in fp32";
}

// The training forward stores each chunk's activations in 16 bits and the next layer widens them back; the
// cached decode computes the same layer body on fp32 rows throughout. Equal bits show the storage exact.
TEST_P(ActivationStorage, Bf16AndFp16TrainingLogitsAreTheCachedDecodesBits) {
  const ModelConfig cfg = small_test_config(GetParam());
  const ParameterStore params = scaled_test_params(cfg, 1.0f);
  const std::vector<std::vector<int32_t>> seqs = test_sequences(cfg.vocab_size);
  const PackedBatch batch = PackedBatch::from_sequences(seqs);
  const int64_t V = cfg.vocab_size;
  for (const DType dt : {DType::kBF16, DType::kF16}) {
    const Transformer model(cfg, numerics_of(dt));
    Activations acts;
    model.forward(host(), params, batch, ForwardOptions{}, acts);
    PackedWeights packed;
    model.prepare_decode_weights(host(), params, packed);
    for (size_t s = 0; s < seqs.size(); ++s) {
      const auto decoded = testing::cached_logits(host(), model, params, seqs[s], 16, seqs[s].size() / 2, &packed);
      const float* trained = acts.logits.data<float>() + static_cast<int64_t>(batch.cu_seqlens[s]) * V;
      for (size_t t = 0; t < decoded.size(); ++t)
        ASSERT_EQ(std::memcmp(decoded[t].data(), trained + static_cast<int64_t>(t) * V, V * sizeof(float)), 0)
            << precision_name(dt) << ": sequence " << s << ", position " << t;
    }
    // The backward widens every kept tensor back: its gradients are finite and not all zero.
    ParameterStore grads(cfg);
    const std::vector<float> dlogp(static_cast<size_t>(batch.num_tokens()), 1.0f);
    model.backward(host(), params, acts, dlogp.data(), nullptr, grads);
    double norm = 0;
    for (int64_t i = 0; i < grads.numel(); ++i) norm += std::pow(static_cast<double>(grads.flat().data<float>()[i]), 2);
    EXPECT_TRUE(std::isfinite(norm) && norm > 0) << precision_name(dt) << ": gradient norm^2 " << norm;
  }
}

// Scoring passes keep nothing: the same logits, log-probs, entropy (and a critic's values) bit for bit in every
// dtype, nothing of the batch's size written per layer, and a backward after it is refused.
TEST_P(ActivationStorage, AForwardKeepingNothingGivesTheSameBitsAndRefusesABackward) {
  ModelConfig cfg = small_test_config(GetParam());
  const PackedBatch batch = PackedBatch::from_sequences(test_sequences(cfg.vocab_size));
  const int64_t N = batch.num_tokens(), V = cfg.vocab_size;
  for (const bool critic : {false, true}) {
    cfg.value_head = critic;
    const ParameterStore params = scaled_test_params(cfg, 1.0f);
    for (const DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
      const Transformer model(cfg, numerics_of(dt));
      ForwardOptions kept, scoring;
      kept.entropy = scoring.entropy = !critic;
      kept.temperature = scoring.temperature = 0.8f;
      scoring.keep_activations = false;
      Activations a, b;
      model.forward(host(), params, batch, kept, a);
      model.forward(host(), params, batch, scoring, b);
      ASSERT_GT(b.chunks.size(), 1u);  // the chunks update the residual stream in place at their offsets
      const std::string where = std::string(precision_name(dt)) + (critic ? " critic" : "");
      if (critic) {
        EXPECT_EQ(std::memcmp(a.values.data<float>(), b.values.data<float>(), N * sizeof(float)), 0) << where;
      } else {
        EXPECT_EQ(std::memcmp(a.logits.data<float>(), b.logits.data<float>(), N * V * sizeof(float)), 0) << where;
        EXPECT_EQ(std::memcmp(a.logp.data<float>(), b.logp.data<float>(), N * sizeof(float)), 0) << where;
        EXPECT_EQ(std::memcmp(a.entropy.data<float>(), b.entropy.data<float>(), N * sizeof(float)), 0) << where;
      }
      EXPECT_EQ(kept_bytes(b), 0u) << where;
      ParameterStore grads(cfg);
      const std::vector<float> d(static_cast<size_t>(N), 1.0f);
      try {
        if (critic)
          model.backward_values(host(), params, b, d.data(), grads);
        else
          model.backward(host(), params, b, d.data(), nullptr, grads);
        ADD_FAILURE() << where << ": a backward after a forward that kept nothing ran";
      } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("the forward kept no activations"), std::string::npos) << e.what();
      }
      // The same Activations then kept for a backward: the training pass it is reused by is unchanged.
      model.forward(host(), params, batch, kept, b);
      EXPECT_EQ(std::memcmp(a.x_final.data<float>(), b.x_final.data<float>(), N * cfg.hidden_size * sizeof(float)),
                0)
          << where;
    }
  }
}

}  // namespace
}  // namespace rlcpp
