#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/error.h"
#include "rollout/block_manager.h"

namespace rlcpp {
namespace {

// Sequences over one prompt of `prompt_len` tokens (ids 1..).
struct Group {
  std::vector<int32_t> prompt;
  std::vector<std::unique_ptr<Sequence>> seqs;
  Group(int64_t prompt_len, int64_t n) {
    for (int64_t t = 0; t < prompt_len; ++t) prompt.push_back(static_cast<int32_t>(t + 1));
    for (int64_t i = 0; i < n; ++i) seqs.push_back(std::make_unique<Sequence>(i, 0, 0, i, prompt));
  }
  std::vector<Sequence*> ptrs() {
    std::vector<Sequence*> out;
    for (auto& s : seqs) out.push_back(s.get());
    return out;
  }
  std::vector<const Sequence*> live() {
    std::vector<const Sequence*> out;
    for (auto& s : seqs) out.push_back(s.get());
    return out;
  }
  // As after a prefill step: the context is cached and each sample drew its first token.
  void prefilled(int32_t token) {
    for (auto& s : seqs) {
      s->num_cached_tokens = s->num_tokens();
      s->append(token, 0.0f);
    }
  }
};

TEST(BlockManager, GroupSharesPromptBlocksWithOneReferenceEach) {
  BlockManager bm(10, 16);
  Group g(20, 3);
  EXPECT_EQ(bm.blocks_to_admit(20, 3), 2 + 2);  // 2 shared blocks, copy-on-write for 2 of the 3
  bm.allocate_shared(g.ptrs(), 20);
  EXPECT_EQ(bm.num_used(), 2);
  for (auto& s : g.seqs) EXPECT_EQ(s->block_table, g.seqs[0]->block_table);
  EXPECT_EQ(bm.ref_count(g.seqs[0]->block_table[0]), 3);
  g.prefilled(7);
  bm.check_invariants(g.live());
  bm.release(*g.seqs[1]);
  EXPECT_EQ(bm.ref_count(g.seqs[0]->block_table[1]), 2);
  EXPECT_EQ(bm.num_used(), 2);
  bm.release(*g.seqs[0]);
  bm.release(*g.seqs[2]);
  EXPECT_EQ(bm.num_free(), 10);
  EXPECT_EQ(bm.peak_used(), 2);
  bm.check_invariants({});
}

TEST(BlockManager, CopyOnWriteOfSharedPartialBlock) {
  BlockManager bm(10, 4);
  Group g(10, 3);  // blocks of 4: [0..3] [4..7] [8, 9 | free slots]
  bm.allocate_shared(g.ptrs(), 10);
  g.prefilled(5);  // each now feeds its first token at position 10, inside the shared third block
  const std::vector<int32_t> shared = g.seqs[0]->block_table;
  std::vector<BlockCopy> copies;
  for (auto& s : g.seqs) {
    ASSERT_TRUE(bm.can_append(*s));
    const int32_t slot = bm.append_slot(*s, copies);
    EXPECT_EQ(slot, s->block_table[2] * 4 + 2);
  }
  // The first two copy the two context slots into a private block; the last keeps the original.
  ASSERT_EQ(copies.size(), 2u);
  for (const BlockCopy& c : copies) {
    EXPECT_EQ(c.src, shared[2]);
    EXPECT_EQ(c.num_tokens, 2);
  }
  EXPECT_NE(copies[0].dst, copies[1].dst);
  EXPECT_EQ(g.seqs[2]->block_table[2], shared[2]);
  EXPECT_EQ(bm.ref_count(shared[2]), 1);
  EXPECT_EQ(bm.ref_count(shared[0]), 3);  // full blocks stay shared
  EXPECT_EQ(bm.num_used(), 2 + 3);
  for (auto& s : g.seqs) s->num_cached_tokens = s->num_tokens();
  bm.check_invariants(g.live());
}

TEST(BlockManager, NewBlockAtBoundaryNeedsNoCopy) {
  BlockManager bm(10, 4);
  Group g(8, 2);
  EXPECT_EQ(bm.blocks_to_admit(8, 2), 2 + 2);
  bm.allocate_shared(g.ptrs(), 8);
  g.prefilled(5);
  std::vector<BlockCopy> copies;
  for (auto& s : g.seqs) bm.append_slot(*s, copies);
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(g.seqs[0]->block_table.size(), 3u);
  EXPECT_NE(g.seqs[0]->block_table[2], g.seqs[1]->block_table[2]);
  EXPECT_EQ(bm.num_used(), 4);
}

TEST(BlockManager, CanAppendIsFalseOnlyWhenABlockIsNeededAndNoneIsFree) {
  BlockManager bm(3, 4);
  Group g(6, 2);  // 2 shared blocks, the second partial
  bm.allocate_shared(g.ptrs(), 6);
  g.prefilled(5);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(bm.can_append(*g.seqs[0]));
  bm.append_slot(*g.seqs[0], copies);  // takes the last free block for its copy
  EXPECT_EQ(bm.num_free(), 0);
  EXPECT_TRUE(bm.can_append(*g.seqs[1]));  // now sole owner of the original: writes in place
  bm.append_slot(*g.seqs[1], copies);
  // Position 7 then 8: the next block boundary needs a block and none is free.
  for (auto& s : g.seqs) {
    s->num_cached_tokens = s->num_tokens();
    s->append(6, 0.0f);
  }
  EXPECT_TRUE(bm.can_append(*g.seqs[0]));  // position 7, same block
  bm.append_slot(*g.seqs[0], copies);
  g.seqs[0]->num_cached_tokens = g.seqs[0]->num_tokens();
  g.seqs[0]->append(6, 0.0f);
  EXPECT_FALSE(bm.can_append(*g.seqs[0]));  // position 8
  EXPECT_THROW(bm.append_slot(*g.seqs[0], copies), Error);
}

TEST(BlockManager, DoubleFreeIsAnError) {
  BlockManager bm(4, 4);
  Group g(5, 1);
  bm.allocate_shared(g.ptrs(), 5);
  Sequence twin(9, 0, 0, 0, g.prompt);
  twin.block_table = g.seqs[0]->block_table;  // a table copied without taking references
  bm.release(*g.seqs[0]);
  try {
    bm.release(twin);
    FAIL() << "expected a double-free error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("double free"), std::string::npos) << e.what();
  }
}

TEST(BlockManager, InvariantCheckCatchesUntrackedReference) {
  BlockManager bm(6, 4);
  Group g(5, 2);
  bm.allocate_shared(g.ptrs(), 5);
  g.prefilled(3);
  bm.check_invariants(g.live());
  g.seqs[1]->block_table[0] = 5;  // a free block
  EXPECT_THROW(bm.check_invariants(g.live()), Error);
  g.seqs[1]->block_table[0] = g.seqs[0]->block_table[0];
  EXPECT_THROW(bm.check_invariants({g.seqs[0].get()}), Error);  // refcount 2, one table
  bm.check_invariants(g.live());
}

// The prefix cache (block_manager.h): one sequence over `tokens`, admitted alone, prefilled and registered as the
// engine does after the forward.
struct Prefilled {
  std::vector<int32_t> tokens;
  std::unique_ptr<Sequence> seq;
  int64_t reused = 0;
  Prefilled(BlockManager& bm, std::vector<int32_t> t, int64_t id = 0) : tokens(std::move(t)) {
    seq = std::make_unique<Sequence>(id, 0, 0, 0, tokens);
    reused = bm.allocate_shared({seq.get()}, seq->num_tokens());
    seq->num_cached_tokens = seq->num_tokens();
    bm.register_full_blocks(*seq);
  }
};

std::vector<int32_t> iota_tokens(int32_t first, int64_t n) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(first + static_cast<int32_t>(i));
  return t;
}

TEST(BlockManager, PrefixCacheReusesTheFullBlocksOfACommonPrefix) {
  BlockManager bm(20, 4, /*prefix_cache=*/true);
  Prefilled a(bm, iota_tokens(1, 10));  // [1..4] [5..8] [9, 10]
  EXPECT_EQ(a.reused, 0);
  EXPECT_EQ(bm.num_cached_blocks(), 2);  // the partial block is not keyed
  const std::vector<int32_t> a_table = a.seq->block_table;
  bm.release(*a.seq);
  EXPECT_EQ(bm.num_free(), 20);  // cached blocks are free blocks
  std::vector<int32_t> b_tokens = iota_tokens(1, 8);
  for (int32_t t : {90, 91, 92}) b_tokens.push_back(t);
  Prefilled b(bm, b_tokens, 1);
  EXPECT_EQ(b.reused, 8);
  EXPECT_EQ(b.seq->block_table[0], a_table[0]);
  EXPECT_EQ(b.seq->block_table[1], a_table[1]);
  EXPECT_EQ(b.seq->num_cached_tokens, 11);
  bm.check_invariants({b.seq.get()});
  // Held by a running sequence, the blocks are shared by reference.
  Prefilled c(bm, b_tokens, 2);
  EXPECT_EQ(c.reused, 8);
  EXPECT_EQ(bm.ref_count(a_table[0]), 2);
  bm.check_invariants({b.seq.get(), c.seq.get()});
}

TEST(BlockManager, PrefixCacheKeysChainTheWholePrefix) {
  // The same second block after a different first block is another prefix: nothing is reused.
  BlockManager bm(20, 4, true);
  Prefilled a(bm, iota_tokens(1, 9));
  std::vector<int32_t> other = {70, 71, 72, 73};
  for (int32_t t : iota_tokens(5, 5)) other.push_back(t);
  Prefilled b(bm, other, 1);
  EXPECT_EQ(b.reused, 0);
  EXPECT_NE(b.seq->block_table[1], a.seq->block_table[1]);
}

TEST(BlockManager, TheBlockOfTheLastContextTokenIsAlwaysComputed) {
  // A context ending on a block boundary, all of it cached: its last block is prefilled again so that the step
  // has that row's logits for the first draw.
  BlockManager bm(20, 4, true);
  Prefilled a(bm, iota_tokens(1, 8));
  EXPECT_EQ(bm.num_cached_blocks(), 2);
  Prefilled b(bm, iota_tokens(1, 8), 1);
  EXPECT_EQ(b.reused, 4);
  EXPECT_NE(b.seq->block_table[1], a.seq->block_table[1]);
  bm.check_invariants({a.seq.get(), b.seq.get()});
}

TEST(BlockManager, ANewSaltFindsNothingCachedBefore) {
  BlockManager bm(20, 4, true);
  Prefilled a(bm, iota_tokens(1, 9));
  bm.release(*a.seq);
  bm.set_cache_salt(7);  // new weights
  EXPECT_EQ(bm.num_cached_blocks(), 0);
  Prefilled b(bm, iota_tokens(1, 9), 1);
  EXPECT_EQ(b.reused, 0);
  // A sequence whose chain was computed under the old salt registers nothing under the new one.
  BlockManager bm2(20, 4, true);
  Prefilled old(bm2, iota_tokens(1, 5));
  bm2.set_cache_salt(8);
  old.seq->append(6, 0.0f);
  old.seq->append(7, 0.0f);
  old.seq->append(8, 0.0f);
  std::vector<BlockCopy> copies;
  bm2.append_slot(*old.seq, copies);
  old.seq->num_cached_tokens = 8;
  bm2.register_full_blocks(*old.seq);
  EXPECT_EQ(bm2.num_cached_blocks(), 0);
}

TEST(BlockManager, FullBlocksFilledByDecodeEnterTheCache) {
  // A response's blocks are found again by a later prompt holding it (a multi-turn history).
  BlockManager bm(20, 4, true);
  Prefilled a(bm, iota_tokens(1, 6));  // [1..4] [5, 6
  EXPECT_EQ(bm.num_cached_blocks(), 1);
  std::vector<BlockCopy> copies;
  for (int32_t t : {7, 8, 9}) {  // decode: the second block fills with 7, 8
    a.seq->append(t, 0.0f);
    bm.append_slot(*a.seq, copies);
    a.seq->num_cached_tokens = a.seq->num_tokens();
    bm.register_full_blocks(*a.seq);
  }
  EXPECT_EQ(bm.num_cached_blocks(), 2);
  bm.check_invariants({a.seq.get()});
  bm.release(*a.seq);
  std::vector<int32_t> history = iota_tokens(1, 9);
  history.push_back(50);
  Prefilled b(bm, history, 1);
  EXPECT_EQ(b.reused, 8);
}

TEST(BlockManager, EvictionTakesBlocksHoldingNothingFirstThenTheLeastRecentlyReleased) {
  BlockManager bm(6, 4, true);
  Prefilled a(bm, iota_tokens(1, 9));      // 2 keyed blocks + 1 partial
  Prefilled b(bm, iota_tokens(40, 9), 1);  // 2 keyed + 1 partial
  bm.release(*a.seq);  // a's keyed blocks are now the least recently released
  bm.release(*b.seq);
  EXPECT_EQ(bm.num_cached_blocks(), 4);
  // 2 blocks: the two partial ones, which hold nothing reusable, go first; every keyed block survives.
  Prefilled c(bm, iota_tokens(80, 5), 2);
  EXPECT_EQ(bm.num_cached_blocks(), 4 + 1);  // and c's full block joins them
  bm.release(*c.seq);
  // 3 blocks under pressure: c's partial block, then a's two, the least recently released.
  Prefilled d(bm, iota_tokens(100, 9), 3);
  EXPECT_EQ(bm.num_cached_blocks(), 5 - 2 + 2);
  bm.release(*d.seq);
  Prefilled b_again(bm, iota_tokens(40, 9), 4);
  EXPECT_EQ(b_again.reused, 8);                               // b's prefix survived
  EXPECT_EQ(Prefilled(bm, iota_tokens(1, 9), 5).reused, 0);  // a's was evicted
}

TEST(BlockManager, EvictionKeepsTheMostRecentlyUsedPrefix) {
  BlockManager bm(6, 4, true);
  Prefilled a(bm, iota_tokens(1, 9));
  Prefilled b(bm, iota_tokens(40, 9), 1);
  bm.release(*a.seq);
  bm.release(*b.seq);
  Prefilled again(bm, iota_tokens(40, 9), 2);  // b's prefix used again: now the most recent
  EXPECT_EQ(again.reused, 8);
  bm.release(*again.seq);
  Prefilled big(bm, iota_tokens(100, 9), 3);  // 3 blocks: two unkeyed ones, then a's least recent block
  bm.release(*big.seq);
  EXPECT_EQ(Prefilled(bm, iota_tokens(40, 9), 4).reused, 8);
}

TEST(BlockManager, WithoutThePrefixCacheNothingIsFound) {
  BlockManager bm(20, 4, /*prefix_cache=*/false);
  Prefilled a(bm, iota_tokens(1, 9));
  bm.release(*a.seq);
  EXPECT_EQ(Prefilled(bm, iota_tokens(1, 9), 1).reused, 0);
  EXPECT_EQ(bm.num_cached_blocks(), 0);
}

TEST(BlockManager, RejectsBadSizes) {
  EXPECT_THROW(BlockManager(0, 16), Error);
  EXPECT_THROW(BlockManager(4, 0), Error);
  BlockManager bm(2, 4);
  Group g(12, 1);  // needs 3 blocks
  EXPECT_THROW(bm.allocate_shared(g.ptrs(), 12), Error);
  EXPECT_EQ(bm.num_free(), 2);
}

}  // namespace
}  // namespace rlcpp
