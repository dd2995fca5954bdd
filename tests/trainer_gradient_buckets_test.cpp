// The data-parallel gradient all-reduce's buckets: every layer's span as the backward completes it (last layer
// first), then the rest of the buffer — each float in exactly one bucket, the same order on every rank, and a
// rank without micro-batches starting the same buckets. Shards of micro-batches cover them once.
#include <gtest/gtest.h>

#include <map>

#include "model/init.h"
#include "model/packed_batch.h"
#include "model/transformer.h"
#include "tests/host_context.h"
#include "tests/test_models.h"
#include "trainer/gradient_buckets.h"

namespace rlcpp {
namespace {

using testing::host;

// Records the spans started (as offsets into `base`) and what is waited for.
class RecordingCommunicator : public Communicator {
 public:
  explicit RecordingCommunicator(const float* base) : base_(base) {}
  int rank() const override { return 0; }
  int size() const override { return ranks; }
  std::string backend() const override { return "recording"; }
  void start_all_reduce(float* data, int64_t n) override { started.emplace_back(data - base_, n); }
  // As if rank r had sent (r + 1) times this rank's floats.
  void start_all_gather(const float* data, int64_t n, float* out) override {
    started.emplace_back(data - base_, n);
    for (int r = 0; r < size(); ++r)
      for (int64_t i = 0; i < n; ++i) out[r * n + i] = static_cast<float>(r + 1) * data[i];
  }
  void progress() override { ++progress_calls; }
  void wait_all() override { waited_after = started.size(); }
  void broadcast(std::string&, int) override {}
  std::vector<std::string> all_gather(const std::string& bytes) override { return {bytes, bytes}; }
  void set_timeout_s(double) override {}
  double timeout_s() const override { return 0; }

  int ranks = 2;
  std::vector<std::pair<int64_t, int64_t>> started;  // (offset, count)
  size_t waited_after = 0;
  int progress_calls = 0;

 private:
  const float* base_;
};

void expect_buckets_cover_the_buffer_once(const std::vector<std::pair<int64_t, int64_t>>& started, int64_t numel) {
  std::vector<int> covered(static_cast<size_t>(numel), 0);
  for (const auto& [at, n] : started)
    for (int64_t i = at; i < at + n; ++i) ++covered[static_cast<size_t>(i)];
  for (int64_t i = 0; i < numel; ++i) ASSERT_EQ(covered[static_cast<size_t>(i)], 1) << "float " << i;
}

TEST(GradientBuckets, LayersAsTheBackwardCompletesThemThenTheRest) {
  const ModelConfig cfg = small_test_config("qwen3");
  const Transformer model(cfg);
  const ParameterStore params = init_random(cfg, 3);
  ParameterStore grads(cfg);
  RecordingCommunicator comm(grads.flat().data<float>());
  GradientBuckets buckets(comm, model.layer_param_spans(), grads);
  const auto spans = model.layer_param_spans();
  ASSERT_EQ(spans.size(), static_cast<size_t>(cfg.num_hidden_layers));
  // A real backward calls the hook layer by layer, last first.
  const PackedBatch batch = PackedBatch::from_sequences(
      {random_test_tokens(5, cfg.vocab_size, 11), random_test_tokens(3, cfg.vocab_size, 12)});
  Activations acts;
  model.forward(host(), params, batch, {}, acts);
  std::vector<float> dlogp(static_cast<size_t>(acts.num_tokens), 0.1f);
  model.backward(host(), params, acts, dlogp.data(), nullptr, grads, buckets.on_ready());
  ASSERT_EQ(comm.started.size(), spans.size());
  for (size_t i = 0; i < spans.size(); ++i) {
    const auto& [begin, end] = spans[spans.size() - 1 - i];
    EXPECT_EQ(comm.started[i], std::make_pair(begin, end - begin)) << "bucket " << i;
  }
  EXPECT_EQ(comm.progress_calls, static_cast<int>(spans.size()));
  buckets.finish();
  EXPECT_EQ(comm.waited_after, comm.started.size());
  expect_buckets_cover_the_buffer_once(comm.started, grads.numel());

  // A rank without micro-batches starts the same buckets in the same order.
  RecordingCommunicator idle(grads.flat().data<float>());
  GradientBuckets none(idle, model.layer_param_spans(), grads);
  none.finish();
  EXPECT_EQ(idle.started, comm.started);
}

// Ordered (trainer.grad_shards): the ranks' buckets gathered, then rank 0's + rank 1's + rank 2's in that
// order, for every float of the buffer.
TEST(GradientBuckets, OrderedSumsAddTheRanksBucketsInRankOrder) {
  const ModelConfig cfg = small_test_config("qwen2");
  const Transformer model(cfg);
  ParameterStore grads = init_random(cfg, 4);
  const std::vector<float> mine(grads.flat().data<float>(), grads.flat().data<float>() + grads.numel());
  RecordingCommunicator comm(grads.flat().data<float>());
  comm.ranks = 3;
  std::vector<float> gathered;
  GradientBuckets buckets(comm, model.layer_param_spans(), grads, &gathered);
  buckets.finish();
  expect_buckets_cover_the_buffer_once(comm.started, grads.numel());
  for (int64_t i = 0; i < grads.numel(); ++i) {
    const float x = mine[static_cast<size_t>(i)];
    float want = x;
    want += 2.0f * x;
    want += 3.0f * x;
    ASSERT_EQ(grads.flat().data<float>()[i], want) << "float " << i;
  }
}

TEST(GradientBuckets, ShardsCoverTheMicroBatchesOnce) {
  for (size_t count : {1, 2, 5, 8}) {
    for (int size : {1, 2, 3}) {
      size_t next = 0;
      for (int r = 0; r < size; ++r) {
        const auto [begin, end] = rank_shard(count, r, size);
        EXPECT_EQ(begin, next);
        EXPECT_LE(end - begin, count / static_cast<size_t>(size) + 1);
        next = end;
      }
      EXPECT_EQ(next, count);
    }
  }
}

TEST(GradientBuckets, LossAndMetricsSumOverTheRanks) {
  RecordingCommunicator comm(nullptr);  // all_gather: both ranks sent the same
  double loss = 0.25;
  int64_t tokens = 7;
  LossMetrics m;
  m.add_sum("pg_loss", 0.5);
  m.add_mean("clipfrac", 1, 4);
  m.add_max("ratio_max", 3);
  reduce_loss_over_ranks(comm, loss, tokens, m);
  EXPECT_EQ(loss, 0.5);
  EXPECT_EQ(tokens, 14);
  EXPECT_EQ(m.value("pg_loss"), 1.0);
  EXPECT_EQ(m.value("clipfrac"), 0.25);
  EXPECT_EQ(m.value("ratio_max"), 3.0);
}

}  // namespace
}  // namespace rlcpp
