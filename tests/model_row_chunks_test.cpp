// The CPU training passes run each layer chunk by chunk (model/row_chunks.h, model/transformer_layers.cpp): the
// chunk plan itself, and a batch of many chunks against its sequences one at a time — the forward's log-probs
// bit for bit (every op is row- or sequence-local), the gradients (summed per thread, then across threads) to
// fp32 rounding, and the same bits on a repeat.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/philox.h"
#include "model/init.h"
#include "model/row_chunks.h"
#include "model/transformer.h"
#include "tests/host_context.h"
#include "tests/test_models.h"

namespace rlcpp {
namespace {

using testing::host;

std::vector<int32_t> cu(const std::vector<RowChunk>& chunks, size_t c) {
  const RowChunk& k = chunks[c];
  return std::vector<int32_t>(k.cu_seqlens.data<int32_t>(), k.cu_seqlens.data<int32_t>() + k.cu_seqlens.numel());
}

TEST(RowChunks, WholeSequencesOfAtLeastTheTargetRows) {
  // Sequences of 5, 3, 9, 2, 4, 1 rows.
  const std::vector<int32_t> cu_seqlens = {0, 5, 8, 17, 19, 23, 24};
  const std::vector<RowChunk> chunks = plan_row_chunks(cu_seqlens, 6);
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(chunks[0].begin, 0);
  EXPECT_EQ(chunks[0].end, 8);  // 5 + 3: the first cut at or past 6 rows
  EXPECT_EQ(cu(chunks, 0), (std::vector<int32_t>{0, 5, 8}));
  EXPECT_EQ(chunks[1].begin, 8);
  EXPECT_EQ(chunks[1].end, 17);  // one sequence longer than the target is a chunk of its own
  EXPECT_EQ(cu(chunks, 1), (std::vector<int32_t>{0, 9}));
  EXPECT_EQ(chunks[2].begin, 17);
  EXPECT_EQ(chunks[2].end, 23);
  EXPECT_EQ(cu(chunks, 2), (std::vector<int32_t>{0, 2, 6}));
  EXPECT_EQ(chunks[3].begin, 23);  // the rest, shorter than the target
  EXPECT_EQ(chunks[3].end, 24);
  EXPECT_EQ(cu(chunks, 3), (std::vector<int32_t>{0, 1}));
}

TEST(RowChunks, EveryRowInExactlyOneChunkAndNoEmptyChunks) {
  PhiloxStream rng(5, 0);
  for (int64_t target : {1, 7, 64, 1000}) {
    std::vector<int32_t> cu_seqlens = {0};
    for (int s = 0; s < 50; ++s) cu_seqlens.push_back(cu_seqlens.back() + static_cast<int32_t>(rng.below(20)));
    const std::vector<RowChunk> chunks = plan_row_chunks(cu_seqlens, target);
    int64_t next = 0;
    for (size_t c = 0; c < chunks.size(); ++c) {
      EXPECT_EQ(chunks[c].begin, next);
      EXPECT_GT(chunks[c].end, chunks[c].begin);
      const std::vector<int32_t> local = cu(chunks, c);
      EXPECT_EQ(local.front(), 0);
      EXPECT_EQ(local.back(), chunks[c].end - chunks[c].begin);
      if (c + 1 < chunks.size()) EXPECT_GE(chunks[c].end - chunks[c].begin, target);
      next = chunks[c].end;
    }
    EXPECT_EQ(next, cu_seqlens.back()) << "target " << target;
  }
  EXPECT_TRUE(plan_row_chunks({0}, 8).empty());
}

std::vector<std::vector<int32_t>> random_sequences(int64_t count, int64_t vocab, uint64_t seed) {
  PhiloxStream rng(seed, 0);
  std::vector<std::vector<int32_t>> seqs(static_cast<size_t>(count));
  for (auto& s : seqs) {
    s.resize(2 + rng.below(30));  // 2..31 tokens: many sequences per 256-row chunk, and ragged
    for (auto& t : s) t = static_cast<int32_t>(rng.below(vocab));
  }
  return seqs;
}

// qwen2's q/k/v biases and qwen3's q/k norms: their gradients are summed per thread too.
class ChunkedTraining : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(Families, ChunkedTraining, ::testing::Values("qwen2", "qwen3"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST_P(ChunkedTraining, ManyChunksEqualTheSequencesOneByOne) {
  const ModelConfig c = small_test_config(GetParam());
  const Transformer model(c);
  ParameterStore params = init_random(c, 11);
  for (int64_t i = 0; i < params.numel(); ++i) params.flat().data<float>()[i] *= 5.0f;
  const std::vector<std::vector<int32_t>> seqs = random_sequences(120, c.vocab_size, 3);  // ~2000 rows, ~8 chunks
  const PackedBatch batch = PackedBatch::from_sequences(seqs);
  ASSERT_GT(batch.num_tokens(), 4 * kChunkRows);
  PhiloxStream rng(9, 0);
  std::vector<float> dlogp(static_cast<size_t>(batch.num_tokens()));
  for (auto& d : dlogp) d = static_cast<float>(rng.normal());

  Activations acts;
  model.forward(host(), params, batch, ForwardOptions{}, acts);
  ASSERT_GT(acts.chunks.size(), 4u);
  const std::vector<float> logp(acts.logp.data<float>(), acts.logp.data<float>() + batch.num_tokens());
  ParameterStore grads(c);
  model.backward(host(), params, acts, dlogp.data(), nullptr, grads);

  // The same batch one sequence at a time (one chunk each, run on one thread): log-probs bit for bit, gradients
  // accumulated over the calls in double.
  std::vector<double> want(static_cast<size_t>(params.numel()), 0.0);
  std::vector<double> scale(want.size(), 0.0);
  int64_t row = 0;
  for (const auto& s : seqs) {
    const PackedBatch one = PackedBatch::from_sequences({s});
    Activations a;
    model.forward(host(), params, one, ForwardOptions{}, a);
    ASSERT_EQ(a.chunks.size(), 1u);
    EXPECT_EQ(std::memcmp(a.logp.data<float>(), logp.data() + row, one.num_tokens() * sizeof(float)), 0)
        << "sequence at row " << row;
    ParameterStore g(c);
    model.backward(host(), params, a, dlogp.data() + row, nullptr, g);
    for (size_t i = 0; i < want.size(); ++i) {
      want[i] += g.flat().data<float>()[i];
      scale[i] += std::fabs(g.flat().data<float>()[i]);
    }
    row += one.num_tokens();
  }
  int misses = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double got = grads.flat().data<float>()[i];
    if (!(std::fabs(got - want[i]) <= 1e-5 * scale[i] + 1e-6) && ++misses <= 5)
      ADD_FAILURE() << "gradient " << i << " = " << got << ", the sequences one by one sum to " << want[i];
  }
  EXPECT_EQ(misses, 0);

  // A repeat gives the same bits, and so does a second micro-batch accumulating onto the first.
  ParameterStore again(c);
  model.forward(host(), params, batch, ForwardOptions{}, acts);
  model.backward(host(), params, acts, dlogp.data(), nullptr, again);
  EXPECT_EQ(std::memcmp(again.flat().data<float>(), grads.flat().data<float>(), grads.numel() * sizeof(float)), 0);
  // (One backward per forward: a second one on the same activations is refused, they gave up their logits.)
  EXPECT_THROW(model.backward(host(), params, acts, dlogp.data(), nullptr, again), Error);
  model.forward(host(), params, batch, ForwardOptions{}, acts);
  model.backward(host(), params, acts, dlogp.data(), nullptr, again);
  for (int64_t i = 0; i < grads.numel(); i += 97)
    EXPECT_NEAR(again.flat().data<float>()[i], 2.0f * grads.flat().data<float>()[i],
                1e-5f * std::fabs(grads.flat().data<float>()[i]) + 1e-7f);
}

}  // namespace
}  // namespace rlcpp
