// The cached path (prefill + decode over the paged KV cache) must give the training forward's logits, the same
// bits in any batch. Generation on top of it (sampling, stops, reproducibility) is the rollout engine's:
// rollout_engine_test and loop_evaluation_test.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/philox.h"
#include "model/init.h"
#include "model/transformer.h"
#include "tests/decode_test_support.h"
#include "tests/host_context.h"
#include "tests/test_models.h"

namespace rlcpp {
namespace {

using testing::cached_logits;
using testing::host;

ModelConfig decode_config() { return small_test_config("qwen2"); }

// The decode-equals-forward and bit-exactness tests run for every model family (tests/test_models.h).
class ModelDecodeByFamily : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(Families, ModelDecodeByFamily, ::testing::ValuesIn(kTestFamilies),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

constexpr float kWeightScale = 3.0f;

ParameterStore random_params(const ModelConfig& c) {
  ParameterStore p = init_random(c, 3);
  // Wider weights than the 0.02 init so logits vary a lot between positions.
  for (int64_t i = 0; i < p.numel(); ++i) p.flat().data<float>()[i] *= kWeightScale;
  return p;
}

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  PhiloxStream rng(seed, 0);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng.below(vocab));
  return t;
}

TEST_P(ModelDecodeByFamily, DecodeMatchesFullForward) {
  const ModelConfig cfg = small_test_config(GetParam());
  const ParameterStore params = random_params(cfg);
  const Transformer model(cfg);
  PackedWeights packed;
  model.pack_weights(host(), params, packed);
  // Both matmul paths: OpenBLAS (no packed weights) and ops::matmul_packed.
  const PackedWeights* const paths[] = {nullptr, &packed};
  for (const PackedWeights* weights : paths) {
    for (int64_t block_size : {1, 3, 16}) {
      for (int64_t len : {1, 17, 54}) {
        const std::vector<int32_t> seq = random_tokens(len, cfg.vocab_size, 10 + len);
        Activations acts;
        model.forward(host(), params, PackedBatch::from_sequences({seq}), ForwardOptions{}, acts);
        for (size_t prefill : {size_t{1}, static_cast<size_t>(len / 2)}) {
          auto got = cached_logits(host(), model, params, seq, block_size, prefill, weights);
          ASSERT_EQ(static_cast<int64_t>(got.size()), len);
          double worst = 0;
          for (int64_t t = 0; t < len; ++t)
            for (int64_t j = 0; j < cfg.vocab_size; ++j) {
              double d = std::fabs(got[t][j] - acts.logits.data<float>()[t * cfg.vocab_size + j]);
              worst = std::isfinite(d) ? std::max(worst, d) : INFINITY;
            }
          double scale = 0;
          for (int64_t i = 0; i < acts.logits.numel(); ++i) scale = std::max(scale, std::fabs(double(acts.logits.data<float>()[i])));
          EXPECT_GT(scale, 0.5);  // logits that vary, so the comparison means something
          // fp32 relative to the logits' scale: OpenBLAS's sum order differs by CPU (its kernels per ISA).
          EXPECT_LE(worst, 1e-5 * scale) << "max logit " << scale << ", block size " << block_size << ", length " << len
                                 << ", prefill " << prefill << (weights ? ", packed" : ", OpenBLAS");
        }
      }
    }
  }
}

// With packed weights each row's logits are the same bits whether the sequence is decoded alone, among
// others, or recomputed as part of a prefill: every op of forward_cached works row by row in a fixed order.
TEST_P(ModelDecodeByFamily, PackedDecodeLogitsAreBitIdenticalWhateverTheBatch) {
  const ModelConfig cfg = small_test_config(GetParam());
  const ParameterStore params = random_params(cfg);
  const Transformer model(cfg);
  PackedWeights packed;
  model.pack_weights(host(), params, packed);
  const std::vector<int32_t> seq = random_tokens(30, cfg.vocab_size, 5);
  // Token by token, and as one prefill of every position: the logits of each position agree bit for bit.
  const auto stepwise = cached_logits(host(), model, params, seq, 4, 1, &packed);
  const auto prefilled = cached_logits(host(), model, params, seq, 4, seq.size(), &packed);
  ASSERT_EQ(stepwise.size(), prefilled.size());
  for (size_t t = 0; t < seq.size(); ++t)
    EXPECT_EQ(std::memcmp(stepwise[t].data(), prefilled[t].data(), stepwise[t].size() * sizeof(float)), 0)
        << "position " << t;
  // The last position decoded next to 40 other rows (other sequences' prefills) gives the same bits again.
  const int64_t bs = 4, blocks = (static_cast<int64_t>(seq.size()) + bs - 1) / bs;
  KVCache cache(cfg, 2 * blocks, bs);
  const std::vector<int32_t> other = random_tokens(40, cfg.vocab_size, 6);
  CachedStep step;
  step.block_indptr = {0, static_cast<int32_t>(blocks), static_cast<int32_t>(2 * blocks)};
  for (int32_t b = 0; b < 2 * blocks; ++b) step.block_indices.push_back(b);
  auto add_rows = [&](const std::vector<int32_t>& tokens, size_t count, int32_t seq_index, int64_t first_block) {
    for (size_t t = 0; t < count; ++t) {
      step.tokens.push_back(tokens[t]);
      step.positions.push_back(static_cast<int32_t>(t));
      step.query_seq.push_back(seq_index);
      step.slot_mapping.push_back(static_cast<int32_t>((first_block + t / bs) * bs + t % bs));
    }
  };
  add_rows(other, 10, 1, blocks);  // 10 rows of a second sequence first, so the row sits elsewhere
  add_rows(seq, seq.size(), 0, 0);
  step.logits_rows = {static_cast<int32_t>(step.tokens.size() - 1)};
  const Tensor logits = model.forward_cached(ExecContext::cpu(), params, step, cache, &packed);
  EXPECT_EQ(std::memcmp(logits.data<float>(), stepwise.back().data(), stepwise.back().size() * sizeof(float)), 0);
}

// A prefill of `lens.size()` sequences, rows in sequence order unless `interleave` (row t of every sequence,
// then row t + 1, ...); sequence s owns blocks [s * per, (s + 1) * per). Logits for every row, in the step's
// row order.
CachedStep prefill_step(const std::vector<std::vector<int32_t>>& seqs, int64_t block_size, int64_t per, bool interleave) {
  CachedStep step;
  step.block_indptr.push_back(0);
  for (size_t s = 0; s < seqs.size(); ++s) {
    for (int64_t b = 0; b < per; ++b) step.block_indices.push_back(static_cast<int32_t>(s * per + b));
    step.block_indptr.push_back(static_cast<int32_t>(step.block_indices.size()));
  }
  auto add = [&](size_t s, size_t t) {
    step.tokens.push_back(seqs[s][t]);
    step.positions.push_back(static_cast<int32_t>(t));
    step.query_seq.push_back(static_cast<int32_t>(s));
    step.slot_mapping.push_back(static_cast<int32_t>((s * per + t / block_size) * block_size + t % block_size));
    step.logits_rows.push_back(static_cast<int32_t>(step.tokens.size() - 1));
  };
  if (interleave) {
    for (size_t t = 0; t < seqs[0].size(); ++t)
      for (size_t s = 0; s < seqs.size(); ++s) add(s, t);
  } else {
    for (size_t s = 0; s < seqs.size(); ++s)
      for (size_t t = 0; t < seqs[s].size(); ++t) add(s, t);
  }
  return step;
}

// A large step runs as one range of sequences per thread: the logits and the cache come out the same bits on
// one thread and on two, and when the rows of sequences interleave (no range split possible).
TEST_P(ModelDecodeByFamily, CachedForwardIsTheSameOnOneOrTwoThreadsAndInAnyRowOrder) {
  const ModelConfig cfg = small_test_config(GetParam());
  const ParameterStore params = random_params(cfg);
  const Transformer model(cfg);
  PackedWeights packed;
  model.pack_weights(host(), params, packed);
  std::vector<std::vector<int32_t>> seqs;
  for (int s = 0; s < 40; ++s) seqs.push_back(random_tokens(6, cfg.vocab_size, 200 + s));  // 240 rows
  const int64_t bs = 4, per = 2, V = cfg.vocab_size;
  auto run = [&](int threads, bool interleave, std::vector<float>& cache_k) {
    KVCache cache(cfg, 40 * per, bs);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    const Tensor logits =
        model.forward_cached(ExecContext::cpu(), params, prefill_step(seqs, bs, per, interleave), cache, &packed);
    omp_set_num_threads(saved);
    cache_k.assign(cache.k[1].data<float>(), cache.k[1].data<float>() + cache.k[1].numel());
    // Back to sequence order.
    std::vector<float> out(static_cast<size_t>(logits.numel()));
    for (size_t s = 0; s < seqs.size(); ++s)
      for (size_t t = 0; t < seqs[s].size(); ++t) {
        const size_t row = interleave ? t * seqs.size() + s : s * seqs[s].size() + t;
        std::memcpy(&out[(s * seqs[s].size() + t) * V], logits.data<float>() + row * V, V * sizeof(float));
      }
    return out;
  };
  std::vector<float> k1, k2, k3;
  const std::vector<float> one = run(1, false, k1), two = run(2, false, k2), mixed = run(2, true, k3);
  EXPECT_TRUE(std::all_of(one.begin(), one.end(), [](float x) { return std::isfinite(x); }));
  EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(one.data(), mixed.data(), one.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(k1.data(), k2.data(), k1.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(k1.data(), k3.data(), k1.size() * sizeof(float)), 0);
}

TEST(ModelDecode, PackedWeightsOfAnotherBufferAreRejected) {
  const ModelConfig cfg = decode_config();
  const ParameterStore params = random_params(cfg);
  const ParameterStore copy = params.clone();
  const Transformer model(cfg);
  PackedWeights packed;
  model.pack_weights(host(), copy, packed);
  KVCache cache(cfg, 1, 16);
  const CachedStep step = testing::single_token_step(1);
  try {
    model.forward_cached(ExecContext::cpu(), params, step, cache, &packed);
    ADD_FAILURE() << "forward_cached accepted weights packed from another buffer";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("packed"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rlcpp
