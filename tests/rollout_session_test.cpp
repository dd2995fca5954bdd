// Sessions (rollout/session.h): the engine keeps an episode's sequence and K/V blocks between turns, prefills only
// what is appended, and samples what a single prefill of the whole sequence would score, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "rollout/engine.h"
#include "tests/error_test_support.h"
#include "tests/host_context.h"
#include "tests/test_models.h"

namespace rlcpp {
namespace {

using testing::host;

EngineConfig engine_config(int64_t block_size, int64_t num_blocks = 0) {
  EngineConfig c;
  c.block_size = block_size;
  c.num_blocks = num_blocks;
  c.max_num_seqs = 64;
  c.max_num_batched_tokens = 1024;
  return c;
}

SamplingParams turn_sampling(int64_t max_new_tokens, uint64_t seed = 7) {
  SamplingParams s;
  s.max_new_tokens = max_new_tokens;
  s.ignore_eos = true;
  s.seed = seed;
  return s;
}

// The observation appended after turn t of session s: a few tokens that depend on both.
std::vector<int32_t> observation(int64_t session, int64_t turn, int64_t vocab) {
  return random_test_tokens(1 + (session + turn) % 3, vocab, 100 + 13 * session + turn);
}

struct Fixture {
  explicit Fixture(const std::string& family = "qwen2") : cfg(small_test_config(family)) {}
  ModelConfig cfg;
  ParameterStore params = scaled_test_params(cfg);
  Transformer model{cfg};
};

// Everything a session sampled, for comparing runs.
struct Episode {
  std::vector<int32_t> tokens;  // prompt + every later token
  std::vector<float> logprobs;  // per token after the prompt (0 for appended ones)
  std::vector<TokenOrigin> origins;
};

Episode episode_of(const Engine& engine, int64_t session) {
  const Sequence& seq = engine.session(session).sequence;
  Episode e;
  e.tokens = seq.prompt();
  e.tokens.insert(e.tokens.end(), seq.output().begin(), seq.output().end());
  e.logprobs = seq.logprobs();
  e.origins = seq.origins();
  return e;
}

void expect_same_episode(const Episode& a, const Episode& b, const std::string& what) {
  ASSERT_EQ(a.tokens, b.tokens) << what;
  ASSERT_EQ(a.origins, b.origins) << what;
  ASSERT_EQ(a.logprobs.size(), b.logprobs.size()) << what;
  for (size_t t = 0; t < a.logprobs.size(); ++t) {
    ASSERT_TRUE(std::isfinite(a.logprobs[t])) << what;
    EXPECT_EQ(std::memcmp(&a.logprobs[t], &b.logprobs[t], sizeof(float)), 0)
        << what << ": token " << t << ": " << a.logprobs[t] << " vs " << b.logprobs[t];
  }
}

// Runs `turns` turns of `sessions` episodes (a group of three sharing a prompt, then others), appending an
// observation after every turn but the last; checks the scheduler's invariants after every step.
std::vector<Episode> run_episodes(Engine& engine, const ModelConfig& cfg, int64_t sessions, int64_t turns,
                                  RolloutStats* total = nullptr) {
  std::vector<int64_t> ids;
  for (int64_t s = 0; s < sessions; ++s) {
    SessionSpec spec;
    spec.prompt = random_test_tokens(s < 3 ? 9 : 4 + s, cfg.vocab_size, s < 3 ? 1 : 20 + s);
    spec.prompt_id = s < 3 ? 11 : static_cast<uint64_t>(30 + s);
    spec.sample_index = s < 3 ? s : 0;
    ids.push_back(engine.open_session(spec));
  }
  const StepObserver check = [](const StepView& v) { v.scheduler.check_invariants(); };
  for (int64_t t = 0; t < turns; ++t) {
    std::vector<TurnRequest> requests;
    for (int64_t s = 0; s < sessions; ++s) requests.push_back({ids[s], turn_sampling(1 + (s + t) % 3)});
    RolloutStats stats;
    const std::vector<TurnResult> results = engine.run_turns(requests, check, &stats);
    if (total) total->then(stats);
    EXPECT_EQ(results.size(), requests.size());
    if (t + 1 < turns)
      for (int64_t s = 0; s < sessions; ++s) {
        const std::vector<int32_t> obs = observation(s, t, cfg.vocab_size);
        engine.append(ids[s], obs);
      }
  }
  std::vector<Episode> out;
  for (int64_t id : ids) out.push_back(episode_of(engine, id));
  for (int64_t id : ids) engine.close_session(id);
  return out;
}

// The test of issue 34 "KV kept": an 8-turn episode prefills its prompt once and each observation once (with the
// last sampled token of the turn before, which the next turn feeds), never its history; and its log-probs equal a
// single training forward of the whole final sequence, bit for bit, for every family and block size.
TEST(RolloutSession, EightTurnEpisodePrefillsEachObservationOnceAndMatchesOneForwardBitForBit) {
  for (const std::string& family : kTestFamilies) {
    for (int64_t block_size : {1, 4, 16}) {
      const std::string where = family + ", block size " + std::to_string(block_size);
      Fixture f(family);
      Engine engine(f.model, f.params, engine_config(block_size));
      SessionSpec spec;
      spec.prompt = random_test_tokens(5, f.cfg.vocab_size, 3);
      spec.prompt_id = 4;
      const int64_t id = engine.open_session(spec);
      int64_t rows = 0;
      for (int64_t turn = 0; turn < 8; ++turn) {
        std::vector<int32_t> obs;
        if (turn > 0) {
          obs = observation(0, turn, f.cfg.vocab_size);
          engine.append(id, obs);
        }
        RolloutStats stats;
        const std::vector<TurnResult> r = engine.run_turns({{id, turn_sampling(2 + turn % 3)}}, {}, &stats);
        ASSERT_EQ(r.size(), 1u);
        const int64_t want = turn == 0 ? 5 : 1 + static_cast<int64_t>(obs.size());
        EXPECT_EQ(r[0].prefilled_tokens, want) << where << ", turn " << turn;
        EXPECT_EQ(stats.prefill_tokens, want) << where << ", turn " << turn;
        EXPECT_EQ(r[0].recomputed_tokens, 0) << where;
        EXPECT_EQ(static_cast<int64_t>(r[0].tokens.size()), 2 + turn % 3) << where;
        rows += stats.prefill_tokens + stats.generated_tokens - stats.sequences;
      }
      const Sequence& seq = engine.session(id).sequence;
      // Every position but the last (which no turn has fed yet) had its K/V computed exactly once.
      EXPECT_EQ(seq.kv_rows, seq.num_tokens() - 1) << where;
      EXPECT_EQ(seq.kv_rows_recomputed, 0) << where;
      EXPECT_EQ(rows, seq.num_tokens() - 1) << where;

      const Episode e = episode_of(engine, id);
      Activations acts;
      f.model.forward(host(), f.params, PackedBatch::from_sequences({e.tokens}), ForwardOptions{1.0f}, acts);
      int64_t sampled = 0;
      for (size_t t = 0; t < e.origins.size(); ++t) {
        if (e.origins[t] != TokenOrigin::kSampled) continue;
        const int64_t pos = static_cast<int64_t>(spec.prompt.size() + t);
        const float want = acts.logp.data<float>()[pos - 1];
        EXPECT_EQ(std::memcmp(&e.logprobs[t], &want, sizeof(float)), 0)
            << where << ", position " << pos << ": session " << e.logprobs[t] << " vs one forward " << want;
        EXPECT_EQ(seq.versions()[t], 0);
        ++sampled;
      }
      EXPECT_EQ(sampled, 2 + 3 + 4 + 2 + 3 + 4 + 2 + 3) << where;
      engine.close_session(id);
      EXPECT_EQ(engine.num_free_blocks(), engine.num_blocks()) << where;
    }
  }
}

// Tokens and log-probs of many sessions do not depend on the batch limit, nor on a cache so small that idle
// sessions lose their blocks between turns (evicted, then recomputed) and running ones are preempted.
TEST(RolloutSession, SamplesDoNotDependOnEvictionPreemptionOrBatching) {
  Fixture f;
  Engine roomy(f.model, f.params, engine_config(4));
  RolloutStats roomy_stats;
  const std::vector<Episode> want = run_episodes(roomy, f.cfg, 7, 5, &roomy_stats);
  EXPECT_EQ(roomy_stats.recomputed_tokens, 0);
  EXPECT_EQ(roomy_stats.evictions, 0);
  // The group of three shares one prefill of its prompt in its first turn.
  EXPECT_EQ(roomy_stats.prefill_tokens_saved, 2 * 9);

  EngineConfig one_at_a_time = engine_config(4);
  one_at_a_time.max_num_seqs = 1;
  Engine serial(f.model, f.params, one_at_a_time);
  const std::vector<Episode> serial_got = run_episodes(serial, f.cfg, 7, 5);

  Engine tight(f.model, f.params, engine_config(4, 17));  // a full context is 16 blocks
  RolloutStats tight_stats;
  const std::vector<Episode> tight_got = run_episodes(tight, f.cfg, 7, 5, &tight_stats);
  EXPECT_GT(tight_stats.evictions, 0);
  EXPECT_GT(tight_stats.recomputed_tokens, 0);
  for (size_t s = 0; s < want.size(); ++s) {
    expect_same_episode(want[s], serial_got[s], "max_num_seqs 1, session " + std::to_string(s));
    expect_same_episode(want[s], tight_got[s], "17 blocks, session " + std::to_string(s));
  }
  EXPECT_NE(want[0].tokens, want[1].tokens);  // the group's episodes really sample apart
  EXPECT_EQ(tight.num_free_blocks(), tight.num_blocks());
}

// After a weight swap the next turn computes the whole history again with the new weights (K/V of an older
// policy version is never reused), and every token records the version that sampled it.
TEST(RolloutSession, AWeightSwapRecomputesTheHistoryAndTokensKeepTheirVersions) {
  Fixture f;
  ParameterStore newer = scaled_test_params(f.cfg, 3.0f, 9);
  Engine engine(f.model, f.params, engine_config(4), /*policy_version=*/3);
  SessionSpec spec;
  spec.prompt = random_test_tokens(6, f.cfg.vocab_size, 5);
  const int64_t id = engine.open_session(spec);
  engine.run_turns({{id, turn_sampling(3)}});
  const std::vector<int32_t> obs = {1, 2};
  engine.append(id, obs);
  engine.set_weights(newer, 4);
  const std::vector<TurnResult> r = engine.run_turns({{id, turn_sampling(2)}});
  EXPECT_EQ(r[0].policy_version, 4);
  EXPECT_EQ(r[0].prefilled_tokens, 6 + 3 + 2);  // the whole sequence: prompt, turn 1, observation
  EXPECT_EQ(r[0].recomputed_tokens, 6 + 2);     // all but the observation and turn 1's last token were cached
  const Sequence& seq = engine.session(id).sequence;
  const std::vector<int64_t> versions = {3, 3, 3, -1, -1, 4, 4};
  EXPECT_EQ(seq.versions(), versions);
  const std::vector<TokenOrigin> origins = {TokenOrigin::kSampled,  TokenOrigin::kSampled,  TokenOrigin::kSampled,
                                            TokenOrigin::kAppended, TokenOrigin::kAppended, TokenOrigin::kSampled,
                                            TokenOrigin::kSampled};
  EXPECT_EQ(seq.origins(), origins);
  // The new turn's log-probs are the new weights' over the whole sequence.
  const Episode e = episode_of(engine, id);
  Activations acts;
  f.model.forward(host(), newer, PackedBatch::from_sequences({e.tokens}), ForwardOptions{1.0f}, acts);
  for (size_t t = 5; t < 7; ++t) {
    const float want = acts.logp.data<float>()[spec.prompt.size() + t - 1];
    EXPECT_EQ(std::memcmp(&e.logprobs[t], &want, sizeof(float)), 0) << "token " << t;
  }
}

TEST(RolloutSession, CloseFreesTheBlocksAndIdleSessionsTimeOut) {
  Fixture f;
  Engine engine(f.model, f.params, engine_config(4));
  SessionSpec spec;
  spec.prompt = random_test_tokens(7, f.cfg.vocab_size, 5);
  const int64_t a = engine.open_session(spec), b = engine.open_session(spec);
  engine.run_turns({{a, turn_sampling(3)}, {b, turn_sampling(5)}});
  EXPECT_LT(engine.num_free_blocks(), engine.num_blocks());  // both keep their blocks between turns
  engine.close_session(a);
  EXPECT_FALSE(engine.has_session(a));
  EXPECT_EQ(engine.close_idle_sessions(3600.0), std::vector<int64_t>{});
  EXPECT_EQ(engine.close_idle_sessions(0.0), std::vector<int64_t>{b});
  EXPECT_EQ(engine.num_sessions(), 0);
  EXPECT_EQ(engine.num_free_blocks(), engine.num_blocks());
  // A one-shot request alongside sessions still samples what it samples alone.
  const int64_t c = engine.open_session(spec);
  engine.run_turns({{c, turn_sampling(4)}});
  Request req;
  req.prompts = {spec.prompt};
  req.sampling = turn_sampling(4);
  Engine fresh(f.model, f.params, engine_config(4));
  EXPECT_EQ(engine.generate(req).samples[0].tokens, fresh.generate(req).samples[0].tokens);
  EXPECT_TRUE(engine.has_session(c));
}

// A session's blocks are ordinary blocks of the prefix cache: an idle session evicted for a long request leaves
// its full blocks on the free list with their keys, and its next turn finds them there instead of prefilling its
// history again, sampling what an engine without the cache samples, bit for bit.
TEST(RolloutSession, AnEvictedSessionFindsItsFullBlocksInThePrefixCache) {
  Fixture f;
  std::vector<Episode> episodes;
  std::vector<int64_t> prefilled;
  for (const bool cache : {false, true}) {
    EngineConfig c = engine_config(4, 16);
    c.prefix_cache = cache;
    Engine engine(f.model, f.params, c);
    SessionSpec spec;
    spec.prompt = random_test_tokens(14, f.cfg.vocab_size, 8);
    const int64_t a = engine.open_session(spec);
    engine.run_turns({{a, turn_sampling(4)}});  // 18 tokens, 17 cached: 4 full blocks and a partial one
    // 30 prompt + 16 new tokens need 12 blocks: 11 are free, so the idle session is evicted; its partial block is
    // taken first (it holds nothing findable), its full blocks stay on the free list.
    Request req;
    req.prompts = {random_test_tokens(30, f.cfg.vocab_size, 9)};
    req.sampling = turn_sampling(16);
    const RolloutResult r = engine.generate(req, [](const StepView& v) { v.scheduler.check_invariants(); });
    EXPECT_EQ(r.stats.evictions, 1);
    engine.append(a, std::vector<int32_t>{1, 2});
    const TurnResult turn = engine.run_turns({{a, turn_sampling(3)}})[0];
    prefilled.push_back(turn.prefilled_tokens);
    episodes.push_back(episode_of(engine, a));
  }
  EXPECT_EQ(prefilled[0], 20);  // the whole context: 14 + 4 + 2
  EXPECT_EQ(prefilled[1], 4);   // the 4 full blocks (16 tokens) found again
  expect_same_episode(episodes[0], episodes[1], "with vs without the prefix cache");
}

// And a request whose prompt a live session starts with shares that session's full blocks (one more reference
// each), without a prefill of them.
TEST(RolloutSession, ARequestSharesTheFullBlocksOfALiveSession) {
  Fixture f;
  Engine engine(f.model, f.params, engine_config(4));
  SessionSpec spec;
  spec.prompt = random_test_tokens(12, f.cfg.vocab_size, 4);
  const int64_t a = engine.open_session(spec);
  engine.run_turns({{a, turn_sampling(3)}});
  Request req;
  req.prompts = {spec.prompt};
  req.sampling = turn_sampling(2);
  bool shared = false;
  const RolloutResult r = engine.generate(req, [&](const StepView& v) {
    v.scheduler.check_invariants();
    const std::vector<int32_t>& held = engine.session(a).sequence.block_table;
    shared = shared || (!held.empty() && v.blocks.ref_count(held[0]) == 2);
  });
  EXPECT_TRUE(shared);
  EXPECT_EQ(r.stats.prefix_cache_hit_tokens, 8);  // blocks 0 and 1; block 2 holds the prompt's last token
  EXPECT_EQ(r.stats.prefill_tokens, 4);
  Engine fresh(f.model, f.params, engine_config(4));
  EXPECT_EQ(r.samples[0].tokens, fresh.generate(req).samples[0].tokens);
}

TEST(RolloutSession, RefusesUnknownSessionsDoubleTurnsAndOverfullContexts) {
  Fixture f;
  Engine engine(f.model, f.params, engine_config(4));
  SessionSpec spec;
  spec.prompt = random_test_tokens(7, f.cfg.vocab_size, 5);
  const int64_t id = engine.open_session(spec);
  expect_error([&] { engine.run_turns({{id + 1, turn_sampling(2)}}); }, {"session 1, which is not open"});
  expect_error([&] { engine.run_turns({{id, turn_sampling(2)}, {id, turn_sampling(2)}}); },
               {"two turns in one call"});
  const std::vector<int32_t> bad = {static_cast<int32_t>(f.cfg.vocab_size)};
  expect_error([&] { engine.append(id, bad); }, {"outside [0, 23)"});
  const std::vector<int32_t> long_obs(60, 1);
  expect_error([&] { engine.append(id, long_obs); }, {"leave no room for a turn"});
  SessionSpec empty;
  expect_error([&] { engine.open_session(empty); }, {"prompt is empty"});
  // A turn that fills the context ends with "length"; the next one is refused naming the context.
  const std::vector<int32_t> obs(50, 1);
  engine.append(id, obs);
  const std::vector<TurnResult> r = engine.run_turns({{id, turn_sampling(20)}});
  EXPECT_EQ(r[0].finish_reason, FinishReason::kLength);
  EXPECT_EQ(engine.session(id).sequence.num_tokens(), f.cfg.max_position_embeddings);
  expect_error([&] { engine.run_turns({{id, turn_sampling(2)}}); }, {"has filled the context"});
}

}  // namespace
}  // namespace rlcpp
