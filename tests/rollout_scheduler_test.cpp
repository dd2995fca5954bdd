#include <gtest/gtest.h>

#include <memory>

#include "core/error.h"
#include "core/philox.h"
#include "rollout/scheduler.h"

namespace rlcpp {
namespace {

// Drives a Scheduler the way the engine does, without a model: every scheduled sequence gets the token
// its (id, position) hashes to, and stops at its own target length (or the context limit).
class Simulation {
 public:
  Simulation(int64_t num_blocks, int64_t block_size, SchedulerConfig config, int64_t context)
      : blocks(num_blocks, block_size), scheduler(blocks, config), context_(context) {}

  // Adds a group of n samples of a fresh random prompt; each sample wants target_len new tokens.
  void add_group(PhiloxStream& rng, int64_t n, int64_t max_prompt, int64_t max_new) {
    auto prompt = std::make_unique<std::vector<int32_t>>(1 + rng.below(max_prompt));
    for (auto& t : *prompt) t = static_cast<int32_t>(rng.below(30));
    std::vector<Sequence*> group;
    const int64_t p = static_cast<int64_t>(prompts_.size());
    for (int64_t i = 0; i < n; ++i) {
      seqs_.push_back(std::make_unique<Sequence>(static_cast<int64_t>(seqs_.size()), p, p, i, *prompt));
      targets_.push_back(1 + static_cast<int64_t>(rng.below(max_new)));
      group.push_back(seqs_.back().get());
    }
    prompts_.push_back(std::move(prompt));
    scheduler.add_group(group);
  }

  static int32_t token_for(const Sequence& s, int64_t position) {
    return static_cast<int32_t>(philox_draw(99, static_cast<uint32_t>(s.id()), static_cast<uint32_t>(position), 0, 0).v[0] % 30);
  }

  // One step; returns the batch for inspection.
  const ScheduledBatch& step() {
    scheduler.schedule(batch);
    // The batch's rows fit the token budget and never hold a sequence twice.
    std::vector<int> seen(seqs_.size(), 0);
    auto take = [&](Sequence* s, int64_t cached) {
      EXPECT_EQ(++seen[s->id()], 1) << "sequence " << s->id() << " twice in one step";
      s->num_cached_tokens = cached;
      const int64_t pos = s->num_tokens();
      s->append(token_for(*s, pos), 0.0f);
      if (s->num_output() >= targets_[s->id()] || s->num_tokens() >= context_) s->finish(FinishReason::kLength);
    };
    for (const PrefillUnit& u : batch.prefills)
      for (Sequence* s : u.sequences) take(s, u.context_tokens);
    for (Sequence* s : batch.decodes) take(s, s->num_tokens());
    scheduler.release_finished();
    scheduler.check_invariants();
    ++steps;
    return batch;
  }

  void run_to_end(int64_t max_steps = 100000) {
    while (scheduler.has_work() && steps < max_steps) step();
    ASSERT_FALSE(scheduler.has_work()) << "did not finish in " << max_steps << " steps";
  }

  // Every sequence ended with its target length of the expected tokens, whatever preemption did.
  void expect_complete() const {
    for (const auto& s : seqs_) {
      ASSERT_EQ(s->status(), SequenceStatus::kFinished) << "sequence " << s->id();
      const int64_t want = std::min(targets_[s->id()], context_ - s->prompt_len());
      ASSERT_EQ(s->num_output(), want) << "sequence " << s->id();
      for (int64_t i = 0; i < s->num_output(); ++i)
        ASSERT_EQ(s->output()[i], token_for(*s, s->prompt_len() + i)) << "sequence " << s->id() << " token " << i;
    }
  }

  BlockManager blocks;
  Scheduler scheduler;
  ScheduledBatch batch;
  int64_t steps = 0;
  const std::vector<std::unique_ptr<Sequence>>& sequences() const { return seqs_; }

 private:
  int64_t context_;
  std::vector<std::unique_ptr<std::vector<int32_t>>> prompts_;
  std::vector<std::unique_ptr<Sequence>> seqs_;
  std::vector<int64_t> targets_;
};

TEST(Scheduler, AdmitsAGroupAsOneSharedPrefill) {
  Simulation sim(64, 16, {512, 8192}, 64);
  PhiloxStream rng(1, 0);
  sim.add_group(rng, 8, 30, 10);
  const ScheduledBatch& b = sim.step();
  ASSERT_EQ(b.prefills.size(), 1u);
  EXPECT_EQ(b.prefills[0].sequences.size(), 8u);
  EXPECT_TRUE(b.decodes.empty());
  EXPECT_EQ(sim.blocks.num_used(), sim.blocks.blocks_for(b.prefills[0].context_tokens));
}

TEST(Scheduler, DecodeCopiesTheSharedPartialBlockForAllButOne) {
  Simulation sim(64, 4, {512, 8192}, 64);
  std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6};  // 1.5 blocks
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<Sequence*> group;
  for (int i = 0; i < 3; ++i) {
    seqs.push_back(std::make_unique<Sequence>(i, 0, 0, i, prompt));
    group.push_back(seqs.back().get());
  }
  sim.scheduler.add_group(group);
  ScheduledBatch batch;
  sim.scheduler.schedule(batch);
  for (Sequence* s : group) {
    s->num_cached_tokens = 6;
    s->append(9, 0.0f);
  }
  sim.scheduler.schedule(batch);
  EXPECT_EQ(batch.decodes.size(), 3u);
  EXPECT_EQ(batch.copies.size(), 2u);
  EXPECT_EQ(sim.blocks.num_used(), 1 + 3);
}

TEST(Scheduler, RespectsTheBatchLimitSplittingAGroup) {
  Simulation sim(64, 16, {3, 8192}, 64);
  PhiloxStream rng(2, 0);
  sim.add_group(rng, 8, 10, 5);
  const ScheduledBatch& b = sim.step();
  ASSERT_EQ(b.prefills.size(), 1u);
  EXPECT_EQ(b.prefills[0].sequences.size(), 3u);
  EXPECT_EQ(sim.scheduler.num_waiting(), 5);
  while (sim.scheduler.has_work()) {
    sim.step();
    EXPECT_LE(sim.scheduler.num_running(), 3);
  }
  sim.expect_complete();
}

TEST(Scheduler, StaticBatchingAdmitsOnlyIntoAnEmptyBatch) {
  // 12 single-sample groups of 1..20 new tokens, at most 4 at once. Continuous batching refills a place as
  // soon as it frees; static batching waits for the whole batch of 4 to end, so it takes more steps for the
  // same tokens.
  auto run = [](bool static_batching) {
    Simulation sim(256, 16, {4, 8192, static_batching}, 64);
    PhiloxStream rng(5, 0);
    for (int g = 0; g < 12; ++g) sim.add_group(rng, 1, 8, 20);
    bool refilled_a_running_batch = false;
    while (sim.scheduler.has_work()) {
      const int64_t running_before = sim.scheduler.num_running();
      const ScheduledBatch& b = sim.step();
      if (!b.prefills.empty() && running_before > 0) refilled_a_running_batch = true;
      EXPECT_LE(sim.scheduler.num_running(), 4);
    }
    sim.expect_complete();
    return std::make_pair(sim.steps, refilled_a_running_batch);
  };
  const auto [continuous_steps, continuous_refilled] = run(false);
  const auto [static_steps, static_refilled] = run(true);
  EXPECT_TRUE(continuous_refilled);
  EXPECT_FALSE(static_refilled);
  EXPECT_GT(static_steps, continuous_steps);
}

TEST(Scheduler, RespectsTheTokenBudget) {
  Simulation sim(256, 16, {512, 64}, 64);
  PhiloxStream rng(3, 0);
  for (int g = 0; g < 10; ++g) sim.add_group(rng, 2, 40, 8);
  while (sim.scheduler.has_work()) {
    const ScheduledBatch& b = sim.step();
    EXPECT_LE(b.num_rows(), 64);
  }
  sim.expect_complete();
}

TEST(Scheduler, PreemptsTheNewestAndRecomputesIt) {
  // 6 blocks of 4: two sequences that each grow to 12 tokens cannot both fit.
  Simulation sim(6, 4, {512, 8192}, 64);
  std::vector<int32_t> prompt = {1, 2, 3, 4, 5};
  std::vector<std::unique_ptr<Sequence>> seqs;
  for (int i = 0; i < 2; ++i) {
    seqs.push_back(std::make_unique<Sequence>(i, i, i, 0, prompt));
    sim.scheduler.add_group({seqs.back().get()});
  }
  ScheduledBatch batch;
  bool preempted = false;
  for (int step = 0; step < 40 && sim.scheduler.has_work(); ++step) {
    sim.scheduler.schedule(batch);
    if (!batch.preempted.empty()) {
      EXPECT_EQ(batch.preempted[0], seqs[1].get());  // the newer one goes
      EXPECT_EQ(seqs[1]->status(), SequenceStatus::kPreempted);
      EXPECT_TRUE(seqs[1]->block_table.empty());
      preempted = true;
    }
    for (const PrefillUnit& u : batch.prefills)
      for (Sequence* s : u.sequences) {
        if (s == seqs[1].get() && s->num_preemptions() > 0) EXPECT_EQ(u.context_tokens, s->num_tokens());
        s->num_cached_tokens = u.context_tokens;
        s->append(7, 0.0f);
      }
    for (Sequence* s : batch.decodes) {
      s->num_cached_tokens = s->num_tokens();
      s->append(7, 0.0f);
    }
    for (auto& s : seqs)
      if (s->status() == SequenceStatus::kRunning && s->num_output() == 16) s->finish(FinishReason::kLength);
    sim.scheduler.release_finished();
    sim.scheduler.check_invariants();
  }
  EXPECT_TRUE(preempted);
  EXPECT_FALSE(sim.scheduler.has_work());
  for (auto& s : seqs) EXPECT_EQ(s->num_output(), 16);
  EXPECT_EQ(sim.blocks.num_free(), 6);
}

TEST(Scheduler, RandomStreamsKeepBlockAccountingExact) {
  // Long request streams with groups arriving over time, tiny caches and odd block sizes, so preemption
  // and copy-on-write happen constantly; invariants are checked after every step.
  int64_t preemptions = 0, copies = 0;
  for (uint64_t seed = 0; seed < 12; ++seed) {
    PhiloxStream rng(seed, 7);
    const int64_t block_size = 1 + static_cast<int64_t>(rng.below(5));
    const int64_t context = 48;
    const int64_t num_blocks = (context + block_size - 1) / block_size + static_cast<int64_t>(rng.below(20));
    const SchedulerConfig cfg{1 + static_cast<int64_t>(rng.below(16)), context + static_cast<int64_t>(rng.below(64))};
    Simulation sim(num_blocks, block_size, cfg, context);
    int64_t groups = 0;
    while (groups < 40 || sim.scheduler.has_work()) {
      if (groups < 40 && rng.below(3) == 0) {
        sim.add_group(rng, 1 + static_cast<int64_t>(rng.below(6)), 30, 24);
        ++groups;
      }
      if (!sim.scheduler.has_work()) continue;
      const ScheduledBatch& b = sim.step();
      copies += static_cast<int64_t>(b.copies.size());
      EXPECT_LE(b.num_rows(), cfg.max_num_batched_tokens);
      ASSERT_LT(sim.steps, 20000);
    }
    sim.expect_complete();
    EXPECT_EQ(sim.blocks.num_free(), num_blocks);
    preemptions += sim.scheduler.num_preemptions();
  }
  EXPECT_GT(preemptions, 50);  // the stream really exercised preemption
  EXPECT_GT(copies, 50);       // and copy-on-write
}

TEST(Scheduler, ReportsWhenNothingCanEverRun) {
  BlockManager blocks(2, 4);
  Scheduler scheduler(blocks, {8, 64});
  std::vector<int32_t> prompt(12, 3);  // needs 3 blocks + 1
  Sequence s(0, 0, 0, 0, prompt);
  scheduler.add_group({&s});
  ScheduledBatch batch;
  try {
    scheduler.schedule(batch);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nothing can run"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rlcpp
