// The engine against the training forward, across batch limits, block sizes and preemption.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "core/error.h"
#include "core/philox.h"
#include "model/init.h"
#include "rollout/engine.h"
#include "tests/error_test_support.h"
#include "rollout/kv_utilisation.h"
#include "tests/host_context.h"
#include "tests/test_models.h"

namespace rlcpp {
namespace {

using testing::host;

ModelConfig small_config() { return small_test_config("qwen2"); }

// Wider weights than the 0.02 init so logits vary a lot between positions and samples differ.
ParameterStore scaled_params(const ModelConfig& c, uint64_t seed = 3) {
  ParameterStore p = init_random(c, seed);
  for (int64_t i = 0; i < p.numel(); ++i) p.flat().data<float>()[i] *= 3.0f;
  return p;
}

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  PhiloxStream rng(seed, 0);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng.below(vocab));
  return t;
}

EngineConfig engine_config(int64_t block_size, int64_t max_num_seqs = 64, int64_t num_blocks = 0) {
  EngineConfig c;
  c.block_size = block_size;
  c.max_num_seqs = max_num_seqs;
  c.num_blocks = num_blocks;
  c.max_num_batched_tokens = 1024;
  return c;
}

struct Fixture {
  Fixture() = default;
  explicit Fixture(const std::string& family) : cfg(small_test_config(family)) {}
  ModelConfig cfg = small_config();
  ParameterStore params = scaled_params(cfg);
  Transformer model{cfg};
};

// Checks scheduler and block invariants after every step.
StepObserver invariant_checker() {
  return [](const StepView& v) { v.scheduler.check_invariants(); };
}

// logprob_tol 0 asks for the same bits.
void expect_same_samples(const RolloutResult& a, const RolloutResult& b, double logprob_tol, const std::string& what) {
  ASSERT_EQ(a.samples.size(), b.samples.size()) << what;
  for (size_t i = 0; i < a.samples.size(); ++i) {
    const Sample &x = a.samples[i], &y = b.samples[i];
    ASSERT_EQ(x.tokens, y.tokens) << what << ": sample " << i;
    EXPECT_EQ(x.finish_reason, y.finish_reason) << what << ": sample " << i;
    EXPECT_EQ(x.prompt_index, y.prompt_index);
    EXPECT_EQ(x.sample_index, y.sample_index);
    ASSERT_EQ(x.logprobs.size(), y.logprobs.size());
    for (size_t t = 0; t < x.logprobs.size(); ++t) {
      ASSERT_TRUE(std::isfinite(x.logprobs[t]));
      if (logprob_tol == 0)
        EXPECT_EQ(std::memcmp(&x.logprobs[t], &y.logprobs[t], sizeof(float)), 0)
            << what << ": sample " << i << " token " << t << ": " << x.logprobs[t] << " vs " << y.logprobs[t];
      else
        EXPECT_NEAR(x.logprobs[t], y.logprobs[t], logprob_tol) << what << ": sample " << i << " token " << t;
    }
  }
}

// The bit-exactness tests run for every model family (tests/test_models.h): Qwen3's q/k norms are one more
// row-by-row op in the one layer body, and must keep decode and training equal.
class RolloutEngineByFamily : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(Families, RolloutEngineByFamily, ::testing::ValuesIn(kTestFamilies),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// The engine's logits and log-probs are the training forward's, bit for bit: both run the packed matmul (one
// fma chain per output), the same per-query attention and the same log-softmax (ops::row_logprob). So the
// trainer's recomputed old log-probs equal the rollout's, at any temperature.
TEST_P(RolloutEngineByFamily, PagedDecodeEqualsTheTrainingForwardBitForBit) {
  Fixture f(GetParam());
  const int64_t V = f.cfg.vocab_size;
  for (float temperature : {1.0f, 0.7f}) {
    for (int64_t block_size : {1, 3, 16}) {
      for (int64_t len : {1, 17, 54}) {
        const std::string where = "temperature " + std::to_string(temperature) + ", block size " +
                                  std::to_string(block_size) + ", prompt length " + std::to_string(len);
        Engine engine(f.model, f.params, engine_config(block_size));
        Request req;
        req.prompts = {random_tokens(len, V, 10 + len)};
        req.n = 3;  // siblings share the prompt's blocks and copy the partial one
        req.sampling.max_new_tokens = std::min<int64_t>(9, f.cfg.max_position_embeddings - len);
        req.sampling.ignore_eos = true;
        req.sampling.temperature = temperature;
        req.sampling.seed = 5;
        // Logits of each sampled position, by (sample, position).
        std::map<std::pair<int64_t, int32_t>, std::vector<float>> seen;
        const RolloutResult out = engine.generate(req, [&](const StepView& v) {
          for (const SampledRow& r : v.sampled)
            seen[{r.sequence_id, r.position}].assign(v.logits.data<float>() + r.logits_row * V,
                                                     v.logits.data<float>() + (r.logits_row + 1) * V);
        });
        ASSERT_EQ(out.samples.size(), 3u);
        for (const Sample& s : out.samples) {
          std::vector<int32_t> full = req.prompts[0];
          full.insert(full.end(), s.tokens.begin(), s.tokens.end());
          Activations acts;
          f.model.forward(host(), f.params, PackedBatch::from_sequences({full}), ForwardOptions{temperature}, acts);
          double scale = 0;
          for (size_t t = 0; t < s.tokens.size(); ++t) {
            const int32_t pos = static_cast<int32_t>(len + t);
            const auto& got = seen.at({s.sample_index, pos});
            const float* want = acts.logits.data<float>() + (pos - 1) * V;
            for (int64_t j = 0; j < V; ++j) scale = std::max(scale, std::fabs(static_cast<double>(want[j])));
            ASSERT_TRUE(std::isfinite(s.logprobs[t])) << where;
            EXPECT_EQ(std::memcmp(got.data(), want, V * sizeof(float)), 0)
                << where << ", sample " << s.sample_index << ", position " << pos << ": logits differ";
            const float train_logp = acts.logp.data<float>()[pos - 1];
            EXPECT_EQ(std::memcmp(&s.logprobs[t], &train_logp, sizeof(float)), 0)
                << where << ", sample " << s.sample_index << ", position " << pos << ": rollout " << s.logprobs[t]
                << " vs trainer " << train_logp;
          }
          EXPECT_GT(scale, 0.5);
        }
        EXPECT_NE(out.samples[0].tokens, out.samples[1].tokens);  // the group really samples apart
      }
    }
  }
}

// A sequence alone and in a crowd (other prompts before and after it, another block size) gets the same tokens
// and the same log-probs bit for bit: the engine decodes with ops::matmul_packed, whose every output is one
// fma chain whatever the rows sharing the call, and the other ops work row by row (rollout/README.md). With
// OpenBLAS (Transformer::forward_cached without packed weights) the log-probs moved by ~1e-6.
TEST_P(RolloutEngineByFamily, LogprobsDoNotDependOnBatchComposition) {
  const ModelConfig cfg = small_test_config(GetParam());
  const Transformer model(cfg);
  const int64_t V = cfg.vocab_size;
  const std::vector<int32_t> x = random_tokens(9, V, 1), y = random_tokens(23, V, 2), z = random_tokens(4, V, 3);
  Request alone;
  alone.prompts = {x};
  alone.prompt_ids = {42};
  alone.n = 4;
  alone.sampling.max_new_tokens = 20;
  alone.sampling.seed = 9;
  Request crowd = alone;
  crowd.prompts = {y, x, z, y, z, z};
  crowd.prompt_ids = {7, 42, 9, 11, 12, 13};
  for (const float scale : {1.0f, 3.0f}) {
    ParameterStore params = init_random(cfg, 3);
    for (int64_t i = 0; i < params.numel(); ++i) params.flat().data<float>()[i] *= scale;
    Engine a(model, params, engine_config(16));
    Engine b(model, params, engine_config(3));
    const RolloutResult ra = a.generate(alone);
    const RolloutResult rb = b.generate(crowd);
    RolloutResult rb_x;
    rb_x.samples.assign(rb.samples.begin() + 4, rb.samples.begin() + 8);
    for (auto& s : rb_x.samples) s.prompt_index = 0;
    expect_same_samples(ra, rb_x, 0.0, "alone vs in a crowd, weights x" + std::to_string(scale));
  }
}

// Tokens and log-probs must be identical, bit for bit: a 1-row decode, a 7-row batch and a recomputing prefill
// compute each row the same way.
TEST_P(RolloutEngineByFamily, SameSeedSameSamplesAcrossBatchLimitsAndPreemption) {
  Fixture f(GetParam());
  Request req;
  for (int p = 0; p < 6; ++p) req.prompts.push_back(random_tokens(1 + 7 * p, f.cfg.vocab_size, 50 + p));
  req.n = 4;
  req.sampling.max_new_tokens = 24;
  req.sampling.temperature = 1.0f;
  req.sampling.top_p = 0.9f;
  req.sampling.seed = 1234;
  Engine reference(f.model, f.params, engine_config(16, 512));
  const RolloutResult want = reference.generate(req, invariant_checker());
  int64_t eos = 0;
  for (const Sample& s : want.samples) eos += s.finish_reason == FinishReason::kEos;
  EXPECT_GT(eos, 0);  // some stop early, so admission happens mid-flight
  for (int64_t limit : {1, 7}) {
    Engine e(f.model, f.params, engine_config(16, limit));
    const RolloutResult got = e.generate(req, invariant_checker());
    EXPECT_LE(got.stats.max_batch_sequences, limit);
    expect_same_samples(want, got, 0.0, "max_num_seqs " + std::to_string(limit));
  }
  // A cache of 20 blocks of 4 tokens (one full context is 16) forces preemption and recomputation.
  Engine tight(f.model, f.params, engine_config(4, 512, 20));
  const RolloutResult got = tight.generate(req, invariant_checker());
  EXPECT_GT(got.stats.preemptions, 0);
  int64_t recomputed = 0;
  for (const Sample& s : got.samples) recomputed += s.num_preemptions > 0;
  EXPECT_GT(recomputed, 0);
  EXPECT_LE(got.stats.peak_blocks_in_use, 20);
  expect_same_samples(want, got, 0.0, "preemption");
}

std::vector<int32_t> joined(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

EngineConfig without_prefix_cache(EngineConfig c) {
  c.prefix_cache = false;
  return c;
}

// The prefix cache (rollout/block_manager.h): a later request sharing a prompt prefix reuses its full blocks and
// samples exactly what an engine without the cache samples: the cached K/V are the bits its prefill would write.
TEST_P(RolloutEngineByFamily, PrefixCacheHitsGiveTheSameSamplesBitForBit) {
  Fixture f(GetParam());
  const int64_t V = f.cfg.vocab_size;
  const std::vector<int32_t> system = random_tokens(36, V, 7);  // 2 full blocks of 16, then 4 tokens
  Request first;
  first.prompts = {joined(system, random_tokens(5, V, 8))};
  first.n = 2;
  first.sampling.max_new_tokens = 6;
  first.sampling.seed = 3;
  Request second = first;
  second.prompts = {joined(system, random_tokens(6, V, 9))};
  second.n = 3;
  Engine warm(f.model, f.params, engine_config(16));
  warm.generate(first);
  const RolloutResult got = warm.generate(second, invariant_checker());
  Engine cold(f.model, f.params, without_prefix_cache(engine_config(16)));
  const RolloutResult want = cold.generate(second);
  expect_same_samples(want, got, 0.0, "prefix cache hit vs no cache");
  EXPECT_EQ(got.stats.prefix_cache_queried_tokens, 42);
  EXPECT_EQ(got.stats.prefix_cache_hit_tokens, 32);
  EXPECT_EQ(got.stats.prefill_tokens, 42 - 32);
  EXPECT_EQ(got.stats.prefill_tokens_saved, 32 + 2 * 42);  // the hit, and the group's two siblings
  EXPECT_EQ(want.stats.prefill_tokens, 42);
  EXPECT_EQ(want.stats.prefix_cache_queried_tokens, 0);
}

TEST(RolloutEngine, PrefixCacheHitRateOnASharedSystemPrompt) {
  // Eight requests, one after another, each a 48-token system prompt (3 blocks) and its own 8-token question.
  Fixture f;
  const std::vector<int32_t> system = random_tokens(48, f.cfg.vocab_size, 70);
  Engine engine(f.model, f.params, engine_config(16));
  RolloutStats total;
  for (int r = 0; r < 8; ++r) {
    Request req;
    req.prompts = {joined(system, random_tokens(8, f.cfg.vocab_size, 80 + r))};
    req.sampling.max_new_tokens = 4;
    const RolloutResult out = engine.generate(req, invariant_checker());
    EXPECT_EQ(out.stats.prefix_cache_hit_tokens, r == 0 ? 0 : 48) << "request " << r;
    total.then(out.stats);
  }
  EXPECT_EQ(total.prefix_cache_queried_tokens, 8 * 56);
  EXPECT_DOUBLE_EQ(total.prefix_cache_hit_rate(), 7.0 * 48 / (8 * 56));
  EXPECT_EQ(total.prefill_tokens, 56 + 7 * 8);
}

// K/V computed under older weights is never reused (prime-rl #2270's trap): after set_weights the same prompt is
// prefilled again, also for a prompt admitted after a swap in the middle of a request, and samples what a fresh
// engine on the new weights samples.
TEST(RolloutEngine, NoBlockOfAnOlderPolicyVersionIsReused) {
  Fixture f;
  const ParameterStore next = scaled_params(f.cfg, 4);
  Request req;
  req.prompts = {random_tokens(40, f.cfg.vocab_size, 11)};
  req.n = 2;
  req.sampling.max_new_tokens = 5;
  req.sampling.seed = 4;
  Engine engine(f.model, f.params, engine_config(16));
  EXPECT_EQ(engine.generate(req).stats.prefix_cache_hit_tokens, 0);
  EXPECT_EQ(engine.generate(req).stats.prefix_cache_hit_tokens, 32);  // the same weights: found
  engine.set_weights(next, 1);
  const RolloutResult after = engine.generate(req, invariant_checker());
  EXPECT_EQ(after.stats.prefix_cache_hit_tokens, 0);
  Engine fresh(f.model, next, engine_config(16), 1);
  expect_same_samples(fresh.generate(req), after, 0.0, "after set_weights");

  // One sequence at a time: the second prompt (the same tokens) is admitted after the first has finished.
  Request two = req;
  two.prompts = {req.prompts[0], req.prompts[0]};
  two.prompt_ids = {0, 1};
  two.n = 1;
  for (const bool swap : {false, true}) {
    Engine mid(f.model, f.params, engine_config(16, /*max_num_seqs=*/1));
    const RolloutResult out = mid.generate(two, [&](const StepView& v) {
      if (swap && v.step == 1) mid.set_weights(next, 1);
    });
    EXPECT_EQ(out.stats.prefix_cache_hit_tokens, swap ? 0 : 32) << (swap ? "with" : "without") << " a swap";
    if (swap) {
      Request alone = req;
      alone.prompt_ids = {1};
      alone.n = 1;
      RolloutResult second;
      second.samples = {out.samples[1]};
      second.samples[0].prompt_index = 0;
      expect_same_samples(fresh.generate(alone), second, 0.0, "admitted after the swap");
    }
  }
}

TEST(RolloutEngine, PrefixCacheUnderEvictionAndPreemptionSamplesTheSame) {
  // Three 20-token prefixes under four questions each, in a cache of 28 blocks of 4 (one context is 16 blocks):
  // blocks are evicted and sequences preempted, and every sample equals the cache-less engine's.
  Fixture f;
  Request req;
  for (int p = 0; p < 3; ++p)
    for (int q = 0; q < 4; ++q)
      req.prompts.push_back(
          joined(random_tokens(20, f.cfg.vocab_size, 90 + p), random_tokens(3 + q, f.cfg.vocab_size, 95 + q)));
  req.n = 2;
  req.sampling.max_new_tokens = 12;
  req.sampling.seed = 6;
  Engine cold(f.model, f.params, without_prefix_cache(engine_config(4, 512)));
  const RolloutResult want = cold.generate(req);
  Engine tight(f.model, f.params, engine_config(4, 3, 28));
  RolloutResult got = tight.generate(req, invariant_checker());
  expect_same_samples(want, got, 0.0, "evictions and preemptions with the cache");
  EXPECT_GT(got.stats.prefix_cache_hit_tokens, 0);
  got = tight.generate(req, invariant_checker());  // again, over what the first left cached
  expect_same_samples(want, got, 0.0, "a second pass over a full cache");
}

TEST(RolloutEngine, DecodesAllRunningSequencesInOneForwardPerStep) {
  ModelConfig cfg = small_config();
  ParameterStore params = scaled_params(cfg);
  Transformer model(cfg);
  Request req;
  for (int p = 0; p < 64; ++p) req.prompts.push_back(random_tokens(10, cfg.vocab_size, 300 + p));
  req.n = 8;
  req.sampling.max_new_tokens = 8;
  req.sampling.ignore_eos = true;
  Engine engine(model, params, engine_config(16, 512));
  int64_t steps = 0;
  const RolloutResult out = engine.generate(req, [&](const StepView& v) {
    ++steps;
    EXPECT_EQ(v.cached.logits_rows.size(), steps == 1 ? 64u : 512u);  // one row per group on prefill
  });
  EXPECT_EQ(steps, 8);
  EXPECT_EQ(out.stats.steps, 8);
  EXPECT_EQ(out.stats.max_batch_sequences, 512);
  EXPECT_EQ(out.stats.generated_tokens, 512 * 8);
  EXPECT_EQ(out.stats.prefill_tokens, 64 * 10);          // each prompt prefilled once
  EXPECT_EQ(out.stats.prefill_tokens_saved, 64 * 7 * 10);  // not 8 times
  for (const Sample& s : out.samples) {
    EXPECT_EQ(s.tokens.size(), 8u);
    EXPECT_EQ(s.finish_reason, FinishReason::kLength);
  }
}

TEST(RolloutEngine, ARepeatedRequestTakesNoMemoryFromTheSystem) {
  // The step buffers and logits come from the engine's pool: once a request's shapes have been seen, running
  // it again is served from the pool entirely (docs/architecture.md: no allocation per step).
  Fixture f;
  Request req;
  for (int p = 0; p < 6; ++p) req.prompts.push_back(random_tokens(9, f.cfg.vocab_size, 40 + p));
  req.n = 4;
  req.sampling.max_new_tokens = 7;
  req.sampling.ignore_eos = true;
  Engine engine(f.model, f.params, engine_config(16));
  const RolloutResult first = engine.generate(req);
  const CachingAllocator::Stats warm = engine.context().pool().stats();
  EXPECT_GT(warm.system_allocations, 0);
  // Held between requests: only the decode weights, packed once per policy version (also from the pool).
  EXPECT_GT(warm.in_use_bytes, 0u);
  const RolloutResult again = engine.generate(req);
  const CachingAllocator::Stats after = engine.context().pool().stats();
  EXPECT_EQ(after.system_allocations, warm.system_allocations);
  EXPECT_EQ(after.in_use_bytes, warm.in_use_bytes);          // nothing more held after the second
  EXPECT_GT(after.reuses, warm.reuses + again.stats.steps);  // every step's buffers reused
  expect_same_samples(first, again, 0.0, "repeated request");
}

TEST(RolloutEngine, ReportsKvMemoryAndWhatSharingSaved) {
  Fixture f;
  Request req;
  req.prompts = {random_tokens(40, f.cfg.vocab_size, 8)};  // 2 full blocks of 16 + 8 tokens
  req.n = 8;
  req.sampling.max_new_tokens = 4;
  req.sampling.ignore_eos = true;
  Engine engine(f.model, f.params, engine_config(16));
  int64_t used_at_end = -1;
  const RolloutResult out = engine.generate(req, [&](const StepView& v) { used_at_end = v.blocks.num_used(); });
  const RolloutStats& s = out.stats;
  EXPECT_EQ(s.kv_bytes_per_token, 2 * 2 * 2 * 8 * 4);  // 2 * layers * kv_heads * head_dim * fp32
  EXPECT_EQ(engine.kv_bytes_per_token(), s.kv_bytes_per_token);
  EXPECT_EQ(engine.kv_cache_bytes(), s.num_blocks * s.block_size * s.kv_bytes_per_token);
  // Shared: 2 full prompt blocks once, then 8 private last blocks. Unshared: 8 tables of 3 blocks.
  EXPECT_EQ(s.peak_blocks_in_use, 2 + 8);
  EXPECT_EQ(s.peak_blocks_unshared, 8 * 3);
  EXPECT_EQ(s.bytes_saved_by_sharing(), (8 * 3 - 10) * 16 * s.kv_bytes_per_token);
  EXPECT_EQ(used_at_end, 0);  // every block back once the last sequence finished
}

TEST(RolloutEngine, StaticBatchingGivesTheSameSamplesInMoreSteps) {
  // Responses that end at EOS after 1..24 tokens, 4 sequences at a time: continuous batching refills a finished
  // place at once, static batching waits for the batch's longest. Keyed sampling makes the tokens the same.
  Fixture f;
  Request req;
  for (int p = 0; p < 12; ++p) req.prompts.push_back(random_tokens(5, f.cfg.vocab_size, 60 + p));
  req.sampling.max_new_tokens = 24;
  req.sampling.stop_tokens = {3, 7};  // with EOS, ends a response after a few tokens on average
  EngineConfig continuous = engine_config(4, 4);
  EngineConfig static_config = continuous;
  static_config.static_batching = true;
  Engine a(f.model, f.params, continuous), b(f.model, f.params, static_config);
  const RolloutResult ca = a.generate(req, invariant_checker()), sb = b.generate(req, invariant_checker());
  expect_same_samples(ca, sb, 0.0, "static vs continuous batching");
  std::set<size_t> lengths;
  for (const Sample& s : ca.samples) lengths.insert(s.tokens.size());
  ASSERT_GT(lengths.size(), 2u) << "the responses must differ in length for the comparison to mean anything";
  EXPECT_GT(sb.stats.steps, ca.stats.steps);
  EXPECT_EQ(sb.stats.generated_tokens, ca.stats.generated_tokens);
}

TEST(RolloutEngine, PagedSlotsAreFullerThanAContiguousReservation) {
  // One sequence of a 5-token prompt decoding 11 tokens in blocks of 4: after step k it holds 5 + k - 1 cached
  // tokens (the prefill caches 5, each decode one more) in ceil((5 + k - 1) / 4) blocks, against the 16
  // (prompt + max_new_tokens) a contiguous cache reserves. The last step finishes it, so it is not counted.
  Fixture f;
  Request req;
  req.prompts = {random_tokens(5, f.cfg.vocab_size, 70)};
  req.sampling.max_new_tokens = 11;
  req.sampling.ignore_eos = true;
  Engine engine(f.model, f.params, engine_config(4, 4));
  KvUtilisation u(5 + 11);
  engine.generate(req, [&](const StepView& v) { u.add_step(v); });
  int64_t tokens = 0, slots = 0;
  for (int64_t k = 1; k <= 10; ++k) {
    tokens += 5 + k - 1;
    slots += (5 + k - 1 + 3) / 4 * 4;
  }
  EXPECT_EQ(u.token_steps(), tokens);
  EXPECT_DOUBLE_EQ(u.paged(), static_cast<double>(tokens) / static_cast<double>(slots));
  EXPECT_DOUBLE_EQ(u.contiguous(), static_cast<double>(tokens) / (10.0 * 16));
  EXPECT_GT(u.paged(), u.contiguous());
}

TEST(RolloutEngine, StopsAtEosStopTokensLengthAndContext) {
  Fixture f;
  Request req;
  req.prompts = {random_tokens(5, f.cfg.vocab_size, 21)};
  req.sampling.temperature = 0;  // greedy: the same continuation every time
  req.sampling.max_new_tokens = 12;
  req.sampling.ignore_eos = true;
  Engine engine(f.model, f.params, engine_config(16));
  const std::vector<int32_t> free_run = engine.generate(req).samples[0].tokens;
  ASSERT_EQ(free_run.size(), 12u);
  // Stop token: the first occurrence of the 4th token ends the sample, reason "stop".
  const int32_t stop = free_run[3];
  const size_t first = std::find(free_run.begin(), free_run.end(), stop) - free_run.begin();
  Request with_stop = req;
  with_stop.sampling.stop_tokens = {stop};
  const Sample s = engine.generate(with_stop).samples[0];
  EXPECT_EQ(s.finish_reason, FinishReason::kStop);
  EXPECT_EQ(s.tokens, std::vector<int32_t>(free_run.begin(), free_run.begin() + first + 1));
  // EOS: a model whose eos id is that token stops there with reason "eos" (the weights are the same).
  ModelConfig eos_cfg = f.cfg;
  eos_cfg.eos_token_id = stop;
  Transformer eos_model(eos_cfg);
  Engine eos_engine(eos_model, f.params, engine_config(16));
  Request honour_eos = req;
  honour_eos.sampling.ignore_eos = false;
  const Sample e = eos_engine.generate(honour_eos).samples[0];
  EXPECT_EQ(e.finish_reason, FinishReason::kEos);
  EXPECT_EQ(e.tokens.size(), first + 1);
  // Length: max_new_tokens.
  Request shorter = req;
  shorter.sampling.max_new_tokens = 3;
  const Sample l = engine.generate(shorter).samples[0];
  EXPECT_EQ(l.finish_reason, FinishReason::kLength);
  EXPECT_EQ(l.tokens.size(), 3u);
  // Context: a 60-token prompt in a 64-token context gets 4 tokens.
  Request near_full = req;
  near_full.prompts = {random_tokens(60, f.cfg.vocab_size, 22)};
  const Sample c = engine.generate(near_full).samples[0];
  EXPECT_EQ(c.finish_reason, FinishReason::kLength);
  EXPECT_EQ(c.tokens.size(), 4u);
}

// An engine capped below its model's context (max_context): a model of 2^22 positions serves 64-token sequences
// with the KV cache and step budget of 64 tokens (the model built from engine_model_config has a RoPE row per
// position of the cap), sampling what the same weights sample in a model of 64 positions; a prompt past the cap is
// refused, and a cap past the model's context too.
TEST(RolloutEngine, ContextCappedBelowTheModelsSamplesTheSameInTheCapsMemory) {
  Fixture f;  // 64 positions
  ModelConfig huge = f.cfg;
  huge.max_position_embeddings = int64_t{1} << 22;
  EngineConfig capped = engine_config(16, 64);
  capped.max_context = 64;
  capped.max_num_batched_tokens = 128;  // below the model's context: enough for the cap's
  const Transformer huge_model(engine_model_config(huge, capped));
  EXPECT_EQ(huge_model.config().max_position_embeddings, 64);
  Engine engine(huge_model, f.params, capped);
  Engine reference(f.model, f.params, engine_config(16, 64));
  EXPECT_EQ(engine.num_blocks(), 64 * 4);  // automatic: max_num_seqs sequences of the cap, not of 2^22 tokens
  EXPECT_EQ(engine.kv_cache_bytes(), reference.kv_cache_bytes());
  Request req;
  req.prompts = {random_tokens(5, f.cfg.vocab_size, 31), random_tokens(58, f.cfg.vocab_size, 32)};
  req.n = 2;
  req.sampling.temperature = 1;
  req.sampling.seed = 4;
  req.sampling.max_new_tokens = 12;
  req.sampling.ignore_eos = true;
  const RolloutResult capped_run = engine.generate(req);
  expect_same_samples(reference.generate(req), capped_run, 0, "capped at 64");
  EXPECT_EQ(capped_run.samples[3].tokens.size(), 6u);  // the 58-token prompt stops at the cap
  Request too_long = req;
  too_long.prompts = {std::vector<int32_t>(64, 1)};
  expect_error([&] { engine.generate(too_long); }, {"the context of 64 leaves no room"});
  EngineConfig past = capped;
  past.max_context = 65;
  expect_error([&] { Engine(f.model, f.params, past); },
               {"engine config: max_context 65 must be in [0, the model's context 64]"});
}

TEST(RolloutEngine, SamplesCarryThePolicyVersionAcrossAWeightSwap) {
  Fixture f;
  ParameterStore next = scaled_params(f.cfg, 4);
  Engine engine(f.model, f.params, engine_config(16), /*policy_version=*/3);
  Request req;
  req.prompts = {random_tokens(6, f.cfg.vocab_size, 1), random_tokens(8, f.cfg.vocab_size, 2)};
  req.n = 2;
  req.sampling.max_new_tokens = 6;
  req.sampling.ignore_eos = true;
  const RolloutResult out = engine.generate(req, [&](const StepView& v) {
    if (v.step == 2) engine.set_weights(next, 4);
  });
  for (const Sample& s : out.samples) {
    EXPECT_EQ(s.policy_version, 3);
    EXPECT_EQ(s.last_policy_version, 4);
    EXPECT_GE(s.first_token_s, s.scheduled_s);
    EXPECT_GE(s.finished_s, s.first_token_s);
  }
  EXPECT_EQ(engine.policy_version(), 4);
}

// The engine decodes from a packed copy of its weights. A trainer that updates the engine's own buffer in place
// (the colocated placement) then calls set_weights with the new version, and the next request must sample from
// the new values exactly as a fresh engine on them would.
TEST(RolloutEngine, InPlaceWeightUpdateIsSeenAfterSetWeights) {
  Fixture f;
  ParameterStore live = f.params.clone();
  Engine engine(f.model, live, engine_config(16));
  Request req;
  req.prompts = {random_tokens(5, f.cfg.vocab_size, 1), random_tokens(9, f.cfg.vocab_size, 2)};
  req.n = 2;
  req.sampling.max_new_tokens = 6;
  req.sampling.ignore_eos = true;
  req.sampling.seed = 3;
  const RolloutResult before = engine.generate(req);
  const ParameterStore next = scaled_params(f.cfg, 4);
  std::memcpy(live.flat().data<float>(), next.flat().data<float>(), static_cast<size_t>(live.flat().nbytes()));
  engine.set_weights(live, 1);
  const RolloutResult after = engine.generate(req);
  Engine fresh(f.model, next, engine_config(16), 1);
  expect_same_samples(fresh.generate(req), after, 0.0, "in-place update");
  bool moved = false;
  for (size_t i = 0; i < after.samples.size(); ++i) moved |= after.samples[i].logprobs != before.samples[i].logprobs;
  EXPECT_TRUE(moved);  // the new weights really are different ones
  for (const Sample& s : after.samples) EXPECT_EQ(s.policy_version, 1);
}

std::string generate_error(Engine& engine, const Request& req) {
  try {
    engine.generate(req);
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

// Finite weights can still give non-finite logits (here a final norm that overflows). The sampler's error is
// thrown inside the engine's OpenMP region, where an exception ends the process (std::terminate): it must come
// out of generate as an rlcpp::Error naming the sequence, in the parallel sampler (16 rows x 4096 logits) and
// in the serial one.
TEST(RolloutEngine, NonFiniteLogitsAreAnErrorOutOfTheParallelSampler) {
  for (const int64_t vocab : {4096, 23}) {
    ModelConfig cfg = small_config();
    cfg.vocab_size = vocab;
    ParameterStore params = scaled_params(cfg);
    Tensor norm = params.get("model.norm.weight");
    for (int64_t i = 0; i < norm.numel(); ++i) norm.data<float>()[i] = 3e38f;
    const Transformer model(cfg);
    Engine engine(model, params, engine_config(16));
    Request req;
    for (int64_t p = 0; p < 16; ++p) req.prompts.push_back(random_tokens(4, vocab, 10 + p));
    for (const float temperature : {0.0f, 1.0f}) {
      req.sampling.temperature = temperature;
      const std::string e = generate_error(engine, req);
      const std::string where = "vocab " + std::to_string(vocab) + ", temperature " + std::to_string(temperature);
      EXPECT_NE(e.find("non-finite logits"), std::string::npos) << where << ": " << e;
      EXPECT_NE(e.find("engine: sampling token 4 of prompt 0 sample 0"), std::string::npos) << where << ": " << e;
    }
  }
}

// A weight version holding a NaN is refused at install, naming the tensor; the engine keeps sampling from the
// weights and the version it had.
TEST(RolloutEngine, SetWeightsRefusesNonFiniteWeightsNamingTheTensor) {
  Fixture f;
  Engine engine(f.model, f.params, engine_config(16), /*policy_version=*/3);
  ParameterStore next = scaled_params(f.cfg, 4);
  next.flat().data<float>()[next.offset_of("model.layers.1.self_attn.o_proj.weight") + 7] = NAN;
  std::string e = "<no error>";
  try {
    engine.set_weights(next, 4);
  } catch (const Error& err) {
    e = err.what();
  }
  EXPECT_NE(e.find("engine: refusing weights of policy version 4: tensor 'model.layers.1.self_attn.o_proj.weight' "
                   "holds nan at element 7"),
            std::string::npos)
      << e;
  EXPECT_EQ(engine.policy_version(), 3);
  Request req;
  req.prompts = {random_tokens(5, f.cfg.vocab_size, 1)};
  req.sampling.max_new_tokens = 4;
  Engine fresh(f.model, f.params, engine_config(16), 3);
  expect_same_samples(fresh.generate(req), engine.generate(req), 0.0, "after a refused install");
}

TEST(RolloutEngine, RejectsBadRequestsAndConfigsNamingTheField) {
  Fixture f;
  Engine engine(f.model, f.params, engine_config(16));
  auto error_of = [&](const Request& r) -> std::string {
    try {
      engine.generate(r);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  Request ok;
  ok.prompts = {{1, 2, 3}};
  Request r = ok;
  r.prompts = {{1, 2}, {}};
  EXPECT_NE(error_of(r).find("prompt 1 is empty"), std::string::npos);
  r = ok;
  r.prompts = {{1, 99}};
  EXPECT_NE(error_of(r).find("outside the vocabulary"), std::string::npos);
  r = ok;
  r.prompts = {std::vector<int32_t>(64, 1)};
  EXPECT_NE(error_of(r).find("no room"), std::string::npos);
  r = ok;
  r.sampling.top_p = 0;
  EXPECT_NE(error_of(r).find("top_p"), std::string::npos);
  r = ok;
  r.sampling.temperature = -1;
  EXPECT_NE(error_of(r).find("temperature"), std::string::npos);
  r.sampling.temperature = 1e-45f;  // > 0, but 1 / T overflows fp32: every log-prob would be NaN
  EXPECT_NE(error_of(r).find("request sampling: temperature 1.4013e-45 is not 0 (greedy) or a finite number >= 0.001"),
            std::string::npos)
      << error_of(r);
  r = ok;
  r.n = 0;
  EXPECT_NE(error_of(r).find("n (samples per prompt)"), std::string::npos);
  r = ok;
  r.prompt_ids = {1, 2};
  EXPECT_NE(error_of(r).find("prompt ids"), std::string::npos);
  EngineConfig bad = engine_config(16);
  bad.num_blocks = 3;  // one 64-token sequence needs 4
  EXPECT_THROW(Engine(f.model, f.params, bad), Error);
  bad = engine_config(16);
  bad.max_num_batched_tokens = 32;
  EXPECT_THROW(Engine(f.model, f.params, bad), Error);
}

}  // namespace
}  // namespace rlcpp
